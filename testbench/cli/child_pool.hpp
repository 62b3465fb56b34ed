// Runs commands as child processes, a bounded number at once, and collects
// what each printed. Children are started with posix_spawn (no fork of a
// process that may hold MPI or other threads' state), read /dev/null as
// their standard input and write into pipes of their own.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace hcasim::cli {

struct ChildOutcome {
    bool started = false;     // posix_spawn succeeded
    int wait_status = 0;      // as waitpid() reports it
    std::string out;          // standard output
    std::string err;          // standard error, or why it could not start
    double wall_seconds = 0;  // from spawn to exit

    bool succeeded() const;
    // "exit status 2", "killed by signal 9", "could not start: ..."
    std::string how_it_ended() const;
};

class ChildPool {
public:
    // Children run program (a path, not looked up in PATH), up to jobs at once.
    ChildPool(std::string program, int jobs);

    // Called as each child ends, in the order they end, with its index in
    // the argument lists; returning false stops the run: no more children
    // are started and those still running are killed (SIGTERM) and waited for.
    using Done = std::function<bool(std::size_t index, ChildOutcome outcome)>;
    // Called about once a second while children run (for a progress line).
    using Tick = std::function<void()>;

    // argvs[i] is child i's argument vector, argv[0] included. Children
    // start in index order.
    void run(const std::vector<std::vector<std::string>>& argvs, const Done& done, const Tick& tick = {});

private:
    std::string m_program;
    int m_jobs;
};

}  // namespace hcasim::cli
