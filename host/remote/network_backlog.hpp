// Data one program writes to another over loopback TCP passes through the
// host kernel's network receive path, which normally runs inside the
// writer's system call but, when the host is busy, is left to the ksoftirqd
// threads. Until they run, writer and reader both look blocked while the
// data is on its way: simulated time must not move on then.
#pragma once

#include <chrono>
#include <vector>

namespace hcasim::remote {

class NetworkBacklog {
public:
    NetworkBacklog();
    ~NetworkBacklog();
    NetworkBacklog(const NetworkBacklog&) = delete;
    NetworkBacklog& operator=(const NetworkBacklog&) = delete;

    // Nothing is waiting in the host's receive path: no ksoftirqd thread is
    // runnable. Where those threads are not visible (another PID namespace),
    // a millisecond of wall time must have passed since writes first asked.
    bool drained();
    // The programs' writes were all taken as drained; the next ask starts afresh.
    void settled() { m_asked = false; }

private:
    std::vector<int> m_stat_fds;  // /proc/<ksoftirqd>/stat, one per CPU
    bool m_asked = false;
    std::chrono::steady_clock::time_point m_first_ask;
};

}  // namespace hcasim::remote
