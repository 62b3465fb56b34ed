#include "host/remote/process_sync.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

namespace hcasim::remote {

ProcessSync::ProcessSync(std::vector<RemoteProgram*> programs, ProgramGroup* group, double timeout_s)
    : m_programs(std::move(programs)), m_group(group), m_timeout_s(timeout_s) {}

void ProcessSync::wait_for_doorbells(const std::vector<std::uint32_t>& seen, double max_ms) {
    std::vector<futex_waitv> w;
    for (std::size_t i = 0; i < m_programs.size(); ++i) {
        if (m_programs[i]->exited()) continue;
        futex_waitv f{};
        f.val = seen[i];
        f.uaddr = reinterpret_cast<std::uintptr_t>(&m_programs[i]->doorbell());
        f.flags = FUTEX_32;
        w.push_back(f);
    }
    timespec deadline{};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += static_cast<long>(max_ms * 1e6);
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    if (w.empty()) {
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr);
        return;
    }
    syscall(SYS_futex_waitv, w.data(), static_cast<unsigned>(w.size()), 0u, &deadline, CLOCK_MONOTONIC);
}

void ProcessSync::kill_all(const std::string& why) {
    for (RemoteProgram* p : m_programs) {
        if (p->exited()) continue;
        m_problems.push_back(p->name() + " " + why);
        p->kill_now();
    }
}

void ProcessSync::run() {
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    bool killed = false;
    Clock::time_point last_reap = started;
    std::vector<std::uint32_t> seen(m_programs.size());
    for (;;) {
        // Everything due at this instant happens first.
        while (sc_core::sc_pending_activity_at_current_time()) sc_core::wait(sc_core::SC_ZERO_TIME);
        const sim::Tick now = sim::now_ps();
        if (m_group) m_group->publish_time(now);
        bool progressed = false;
        bool gave_time = false;
        Clock::time_point idle_since = Clock::now();
        for (;;) {
            for (std::size_t i = 0; i < m_programs.size(); ++i)
                seen[i] = m_programs[i]->doorbell().load(std::memory_order_acquire);
            for (RemoteProgram* p : m_programs)
                if (!p->exited() && p->dispatch_calls()) progressed = true;
            if (progressed) break;
            // A program that just got a call's result usually calls again
            // within microseconds (a polling loop): give it that long before
            // looking at its threads.
            bool all_calling = true;
            for (RemoteProgram* p : m_programs)
                if (!p->exited() && !p->all_slots_calling()) all_calling = false;
            // Nothing has happened since every program was last seen
            // waiting: they still are (the common case while the hardware
            // works through a transfer, one event after another).
            const bool unchanged = m_group && m_group->activity == m_quiet_activity;
            if (!gave_time) {
                gave_time = true;
                if (!all_calling && !unchanged) {
                    wait_for_doorbells(seen, 0.1);
                    continue;
                }
            }
            // An ended program is seen as a zombie by quiescent(); one
            // killed inside a call is found within a poll period.
            bool dying = false;
            for (RemoteProgram* p : m_programs)
                if (p->dying()) dying = true;
            if (dying || Clock::now() - last_reap > std::chrono::milliseconds(50)) {
                last_reap = Clock::now();
                bool all_ended = true;
                for (RemoteProgram* p : m_programs) {
                    if (p->reap()) progressed = true;
                    if (!p->exited()) all_ended = false;
                }
                if (all_ended) return;
            }
            if (progressed) break;
            const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
            if (!killed && elapsed > m_timeout_s) {
                kill_all("did not finish within " + std::to_string(static_cast<long>(m_timeout_s)) +
                         " s of wall time (--timeout)");
                killed = true;
                continue;
            }
            bool waiting = true;
            for (RemoteProgram* p : m_programs)
                if (!p->quiescent()) waiting = false;
            // Each was seen waiting, one after the other; seen again and not
            // run in between, they were all waiting at one instant.
            if (waiting)
                for (RemoteProgram* p : m_programs)
                    if (!p->confirm_quiescent()) waiting = false;
            if (waiting && m_group) m_quiet_activity = m_group->activity;
            if (waiting && sc_core::sc_pending_activity()) break;
            // Every program waits and nothing is left to simulate: only a
            // program blocked in the kernel can still move (a socket's peer).
            if (waiting && !killed) {
                const double idle = std::chrono::duration<double>(Clock::now() - idle_since).count();
                if (idle > 10.0) {
                    kill_all("is blocked forever at " + std::to_string(sim::ps_to_us(now)) +
                             " us: every program waits and nothing is left to simulate");
                    killed = true;
                    continue;
                }
            } else if (!waiting) {
                idle_since = Clock::now();
            }
            wait_for_doorbells(seen, waiting ? 10 : 1);
        }
        if (progressed) continue;
        // Every program waits: on to the next simulated event.
        sc_core::wait(sc_core::sc_time_to_pending_activity());
    }
}

}  // namespace hcasim::remote
