// hcasim run --node CMD ...: unmodified programs, each a process of its own
// on the next simulated node, with the drop-in libibverbs.so.1 so that their
// verbs calls run on the node's adapter model and their clocks read
// simulated time. Each program's output is printed line by line behind its
// node's name.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "testbench/system/system.hpp"

namespace hcasim::testbench {

struct ProgramsOptions {
    std::vector<std::string> commands;  // one per node, shell-split
    double timeout_s = 600;             // wall seconds before programs still running are killed
    std::string lib_dir;                // the drop-in libraries (empty: next to the hcasim binary)
    // How a program's rdtsc reads simulated time: "trap" (PR_SET_TSC),
    // "replace" (its TSC reads become ud2, which traps), "auto": trap where
    // rdtsc traps on this host, else replace.
    std::string tsc = "auto";
    // Nodes whose programs serve the others and never end by themselves
    // (ibv_asyncwatch, a server that loops): once every other program has
    // ended they are stopped (SIGTERM), and that counts as a clean end.
    std::vector<int> services;
};

struct ProgramOutcome {
    std::string name;    // "node1 (ibv_rc_pingpong node0)"
    int wait_status = 0;
    std::string summary; // "exit 0", "killed by signal 11 (Segmentation fault)"
};

struct ProgramsResult {
    std::vector<ProgramOutcome> programs;
    std::vector<std::string> problems;  // programs killed for hanging
    double simulated_us = 0;            // when the last program ended (a stopped service: when stopped)
    int exit_status = 0;                // the worst: a program's exit code, 128 + signal, or 1 for a hang
};

// Splits a command line as a POSIX shell would split words (quotes and
// backslashes; no expansions). Throws std::invalid_argument naming the problem.
std::vector<std::string> shell_split(const std::string& line);

// Where the drop-in libraries are: $HCASIM_LIB_DIR, else lib/hcasim beside
// the running executable.
std::string default_lib_dir();

// Runs the programs to their end on sys (node i runs commands[i]); their
// output goes to out, each line prefixed with "nodeI: ".
ProgramsResult run_programs(System& sys, const ProgramsOptions& o, std::ostream& out);

}  // namespace hcasim::testbench
