// Runs a function in a child process and returns what it printed to its
// result stream. SystemC elaborates one design per process, so every test
// that builds a System does it through here.
#pragma once

#include <functional>
#include <sstream>
#include <string>

namespace hcasim::testbench {

struct IsolatedResult {
    bool ok = false;          // the child returned normally
    std::string output;       // what the function wrote to its stream
    std::string error;        // exception text or how the child died
};

IsolatedResult run_isolated(const std::function<void(std::ostream&)>& fn);

}  // namespace hcasim::testbench
