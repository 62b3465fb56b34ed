// Conservative synchronisation of the programs `hcasim run` runs with the
// simulation: simulated time advances only while every program waits,
// inside a call or blocked in the kernel (a socket, a pipe, an eventfd the
// simulator signals). While any thread of any program runs between calls,
// time stands still, so what a program sees does not depend on how the host
// schedules the processes.
#pragma once

#include <cstdio>

#include <chrono>
#include <string>
#include <vector>

#include "host/remote/network_backlog.hpp"
#include "host/remote/remote_program.hpp"

namespace hcasim::remote {

// The synchronisation's verdicts, for diagnosing a run whose times moved:
// the file HCASIM_SYNC_LOG names with ".<pid>" added, or null when the
// variable is not set.
std::FILE* sync_log();

class ProcessSync {
public:
    // timeout_s: wall seconds after which programs still running are killed.
    // services: programs that serve the others and do not end by
    // themselves (a server that loops forever): once every other program has
    // ended they are asked to end (SIGTERM), then killed if they do not.
    ProcessSync(std::vector<RemoteProgram*> programs, ProgramGroup* group, double timeout_s,
                std::vector<bool> services = {});

    // The synchronising SystemC thread's body: returns when every program has ended.
    void run();

    // Why programs were killed (a hang, a deadlock), one line each; empty if none were.
    const std::vector<std::string>& problems() const { return m_problems; }

private:
    // Waits (wall time, at most max_ms) until a program calls, or a thread
    // of one ends, unless that already happened since the doorbells were read.
    void wait_for_doorbells(const std::vector<std::uint32_t>& seen, double max_ms);
    // A program has called (or a thread of one ended) since the doorbells were read.
    bool called_since(const std::vector<std::uint32_t>& seen) const;
    void kill_all(const std::string& why);
    // Moves simulated time to the next event (at most to until).
    void advance_waiting(const std::vector<std::size_t>& spinners, sim::Tick until);

    std::vector<RemoteProgram*> m_programs;
    std::vector<bool> m_services;
    // Stops the services once every other program has ended; true if it did now.
    bool stop_services();
    bool m_services_stopped = false;
    std::chrono::steady_clock::time_point m_stopped_at;
    ProgramGroup* m_group;
    std::uint64_t m_quiet_activity = ~std::uint64_t(0);  // the group's activity when all were last seen waiting
    double m_timeout_s;
    std::vector<std::string> m_problems;
    std::uint64_t m_writes_seen = 0;  // the programs' writes when they were last looked at
    // The programs' writes when they were last all found waiting, and the
    // host's receive path that data written since may still be in.
    std::uint64_t m_writes_settled = 0;
    NetworkBacklog m_backlog;
    std::uint64_t writes() const;
};

}  // namespace hcasim::remote
