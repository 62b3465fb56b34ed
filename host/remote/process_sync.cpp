#include "host/remote/process_sync.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <string>
#include <cstdlib>

namespace hcasim::remote {

namespace {
// How long (simulated) the synchronisation lets the hardware run, with every
// program waiting, before it looks at them again.
constexpr sim::Tick kRecheck = 100 * sim::kPsPerUs;
// The same while a program spins on memory.
constexpr sim::Tick kSpinRecheck = 1000 * sim::kPsPerUs;
}  // namespace

std::FILE* sync_log() {
    static std::FILE* f = [] {
        const char* path = std::getenv("HCASIM_SYNC_LOG");
        return path && *path ? std::fopen((std::string(path) + "." + std::to_string(getpid())).c_str(), "w") : nullptr;
    }();
    return f;
}

ProcessSync::ProcessSync(std::vector<RemoteProgram*> programs, ProgramGroup* group, double timeout_s,
                         std::vector<bool> services)
    : m_programs(std::move(programs)), m_services(std::move(services)), m_group(group), m_timeout_s(timeout_s) {
    m_services.resize(m_programs.size(), false);
    if (std::FILE* log = sync_log())
        for (RemoteProgram* p : m_programs) std::fprintf(log, "program %s\n", p->name().c_str());
}

bool ProcessSync::stop_services() {
    if (m_services_stopped) {
        // Given 5 s of wall time to end on SIGTERM.
        if (std::chrono::steady_clock::now() - m_stopped_at > std::chrono::seconds(5))
            for (RemoteProgram* p : m_programs)
                if (!p->exited()) p->kill_now();
        return false;
    }
    bool any = false;
    for (std::size_t i = 0; i < m_programs.size(); ++i) {
        if (!m_services[i] && !m_programs[i]->exited()) return false;
        if (m_services[i]) any = true;
    }
    if (!any) return false;
    m_services_stopped = true;
    m_stopped_at = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < m_programs.size(); ++i)
        if (m_services[i]) m_programs[i]->stop();
    return true;
}

std::uint64_t ProcessSync::writes() const {
    std::uint64_t n = 0;
    for (RemoteProgram* p : m_programs)
        if (!p->exited()) n += p->writes();
    return n;
}

bool ProcessSync::called_since(const std::vector<std::uint32_t>& seen) const {
    for (std::size_t i = 0; i < m_programs.size(); ++i)
        if (!m_programs[i]->exited() && m_programs[i]->doorbell().load(std::memory_order_acquire) != seen[i]) return true;
    return false;
}

void ProcessSync::wait_for_doorbells(const std::vector<std::uint32_t>& seen, double max_ms) {
    // A program that just got a result calls again within microseconds:
    // look for that a while before sleeping (two thread switches), if a CPU
    // is free for each program that runs.
    static const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    long running = 0;
    for (RemoteProgram* p : m_programs)
        if (!p->exited() && p->just_replied()) ++running;
    const double spin_us = running + 1 <= cpus ? std::min(50.0, max_ms * 1000) : 0;
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<long>(spin_us));
    for (;;) {
        if (called_since(seen)) return;
        if (std::chrono::steady_clock::now() >= spin_until) break;
        __builtin_ia32_pause();
    }
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
    for (RemoteProgram* p : m_programs)
        if (!p->exited()) p->simulator_sleeps().store(1, std::memory_order_seq_cst);
    syscall(SYS_futex_waitv, w.data(), static_cast<unsigned>(w.size()), 0u, &deadline, CLOCK_MONOTONIC);
    for (RemoteProgram* p : m_programs)
        if (!p->exited()) p->simulator_sleeps().store(0, std::memory_order_relaxed);
}

void ProcessSync::kill_all(const std::string& why) {
    for (RemoteProgram* p : m_programs) {
        if (p->exited()) continue;
        m_problems.push_back(p->name() + " " + why);
        p->kill_now();
    }
}

// Moves simulated time to the next event. The waiting programs hear of it
// first: a program woken there (by a call's result, or through a socket by
// another) reads it at once. Spinners keep their own time.
void ProcessSync::advance_waiting(const std::vector<std::size_t>& spinners, sim::Tick until) {
    const sim::Tick next = std::min<sim::Tick>(until, sim::now_ps() + sc_core::sc_time_to_pending_activity().value());
    for (std::size_t i = 0; i < m_programs.size(); ++i)
        if (!m_programs[i]->exited() && std::find(spinners.begin(), spinners.end(), i) == spinners.end())
            m_programs[i]->publish_time(next);
    sc_core::wait(sim::to_sc(next - sim::now_ps()));
}

void ProcessSync::run() {
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    bool killed = false;
    Clock::time_point last_reap = started;
    std::vector<std::uint32_t> seen(m_programs.size());
    std::vector<std::size_t> spinners;  // programs taken to spin on memory, for the next advance
    for (;;) {
        // Everything due at this instant happens first.
        while (sc_core::sc_pending_activity_at_current_time()) sc_core::wait(sc_core::SC_ZERO_TIME);
        const sim::Tick now = sim::now_ps();
        bool progressed = false;
        bool gave_time = false;
        Clock::time_point idle_since = Clock::now();
        for (;;) {
            for (std::size_t i = 0; i < m_programs.size(); ++i)
                seen[i] = m_programs[i]->doorbell().load(std::memory_order_acquire);
            // A program that just got a call's result usually calls again
            // within microseconds (a polling loop): give it that long before
            // looking at its threads.
            bool replied = false;
            for (RemoteProgram* p : m_programs)
                if (!p->exited() && p->just_replied()) replied = true;
            // Nothing has happened since every program was last seen
            // waiting: they still are (the common case while the hardware
            // works through a transfer, one event after another).
            const bool unchanged = m_group && m_group->activity == m_quiet_activity;
            if (!gave_time) {
                gave_time = true;
                if (replied && !unchanged) {
                    wait_for_doorbells(seen, 0.1);
                    for (RemoteProgram* p : m_programs) p->forget_replies();
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
                    if (p->reap()) {
                        progressed = true;
                        if (std::FILE* log = sync_log())
                            std::fprintf(log, "%.6f us %s ended\n", sim::ps_to_us(sim::now_ps()), p->name().c_str());
                    }
                    if (!p->exited()) all_ended = false;
                }
                if (all_ended) return;
                if (stop_services()) progressed = true;
            }
            if (progressed) break;
            const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
            if (!killed && elapsed > m_timeout_s) {
                kill_all("did not finish within " + std::to_string(static_cast<long>(m_timeout_s)) +
                         " s of wall time (--timeout)");
                killed = true;
                continue;
            }
            std::vector<bool> waits(m_programs.size());
            bool waiting = true;
            for (std::size_t i = 0; i < m_programs.size(); ++i)
                if (!(waits[i] = m_programs[i]->quiescent())) waiting = false;
            // Those that run may be spinning on memory (perftest's
            // write_lat): if every one that runs does, and the others wait,
            // time moves on to the adapter's next write into a spinner's memory.
            bool spin = !waiting;
            for (std::size_t i = 0; i < m_programs.size() && spin; ++i)
                if (!waits[i] && !m_programs[i]->spinning()) spin = false;
            // A program wrote since all were last found waiting: what it
            // wrote to another's socket must have reached it first.
            const std::uint64_t written = writes();
            // A write to a socket can wake a program blocked in the kernel
            // with no call made: no verdict in a round after one, and every
            // program is looked at afresh in the next (none is taken to wait
            // on the strength of an earlier look).
            if (written != m_writes_seen) {
                m_writes_seen = written;
                if (m_group) ++m_group->activity;
                waiting = spin = false;
            }
            if ((waiting || spin) && written != m_writes_settled && !m_backlog.drained()) waiting = spin = false;
            // Each was seen waiting, one after the other; seen again and not
            // run in between, they were all waiting at one instant.
            if (waiting || spin)
                for (std::size_t i = 0; i < m_programs.size(); ++i)
                    if (waits[i] && !m_programs[i]->confirm_quiescent()) waiting = spin = false;
            if (waiting || spin) {
                m_writes_settled = written;
                m_backlog.settled();
                if (std::FILE* log = sync_log()) {
                    std::fprintf(log, "%.6f us %s:", sim::ps_to_us(sim::now_ps()), waiting ? "waiting" : "spin");
                    for (std::size_t i = 0; i < m_programs.size(); ++i)
                        std::fprintf(log, " node%zu=%s", i, waits[i] ? "waits" : "spins");
                    std::fprintf(log, "\n");
                    std::fflush(log);
                }
            }
            if (spin) {
                // Calls go first, at this instant: the waiting programs', and
                // those of a spinner's other threads (cmtime's main thread
                // yields in a loop until its event thread's call returns).
                for (std::size_t i = 0; i < m_programs.size(); ++i)
                    if (!m_programs[i]->exited() && m_programs[i]->dispatch_calls()) progressed = true;
                if (progressed) break;
            }
            if (spin && sc_core::sc_pending_activity()) {
                spinners.clear();
                for (std::size_t i = 0; i < m_programs.size(); ++i)
                    if (!waits[i]) spinners.push_back(i);
                break;
            }
            // Every program has settled: the calls that came in are handed
            // over now, all at this instant and in node order, so which
            // program happened to call first on the host does not decide
            // the order of what they do at the same simulated time.
            if (waiting) {
                for (RemoteProgram* p : m_programs)
                    if (!p->exited() && p->dispatch_calls()) progressed = true;
                if (progressed) break;
            }
            if (waiting && m_group) m_quiet_activity = m_group->activity;
            if (waiting && sc_core::sc_pending_activity()) break;
            // Every program waits and nothing is left to simulate: only a
            // program blocked in the kernel can still move (a socket's peer).
            if (waiting && !killed) {
                const double idle = std::chrono::duration<double>(Clock::now() - idle_since).count();
                if (idle > 5.0) {
                    kill_all("is blocked forever at " + std::to_string(sim::ps_to_us(now)) +
                             " us: every program waits and nothing is left to simulate");
                    killed = true;
                    continue;
                }
            } else if (!waiting) {
                idle_since = Clock::now();
            }
            // A running program: look again soon (a spinner is recognised
            // after host.spin_cpu_us of its CPU time).
            wait_for_doorbells(seen, waiting ? 10 : 0.15);
        }
        if (progressed) continue;
        if (!spinners.empty()) {
            // Run the hardware until it writes a spinner's memory, or a
            // waiting program has reason to move, or nothing is left: where
            // this stops depends only on the simulation, never on how fast
            // the spinners spin.
            std::vector<std::uint64_t> writes;
            for (std::size_t i : spinners) writes.push_back(m_programs[i]->memory_writes());
            const std::uint64_t activity = m_group ? m_group->activity : 0;
            bool written = false;
            // A spinner is one that goes round a loop that changes nothing,
            // so it stays one until its memory is written: the recheck is
            // only for the wall-clock time-out and collecting ended programs.
            const sim::Tick until = sim::now_ps() + kSpinRecheck;
            // A call (a spinner's other thread, or a program woken through
            // the kernel) stops it too: the call is handed over at once.
            while (!written && sc_core::sc_pending_activity() && (!m_group || m_group->activity == activity) &&
                   sim::now_ps() < until && !called_since(seen)) {
                advance_waiting(spinners, until);
                while (sc_core::sc_pending_activity_at_current_time()) sc_core::wait(sc_core::SC_ZERO_TIME);
                for (std::size_t k = 0; k < spinners.size(); ++k)
                    if (m_programs[spinners[k]]->memory_writes() != writes[k]) {
                        // It sees the write now, at this instant.
                        m_programs[spinners[k]]->woken();
                        m_programs[spinners[k]]->publish_time(sim::now_ps());
                        written = true;
                    }
            }
            spinners.clear();
            continue;
        }
        // Every program waits, and stays waiting until something happens
        // that can wake one (which tells them all the time): let the
        // hardware run until then, looking again at least every
        // kRecheck of simulated time.
        if (m_group) sc_core::wait(sim::to_sc(kRecheck), m_group->activity_event);
        else advance_waiting({}, ~sim::Tick(0));
    }
}

}  // namespace hcasim::remote
