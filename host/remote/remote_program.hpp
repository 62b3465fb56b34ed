// A program `hcasim run` runs on a simulated node as a process of its own:
// started with the drop-in libraries, its channel to the simulator, and one
// SystemC thread per slot of that channel that carries out the calls its
// threads make, on the node's driver and in its address space.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <systemc>

#include "host/driver/driver.hpp"
#include "host/remote/channel.hpp"
#include "host/remote/rdma_cm_proxy.hpp"
#include "host/remote/verbs_proxy.hpp"
#include "model/sim/time.hpp"

namespace hcasim::remote {

// What the programs of one run share.
struct ProgramGroup {
    // The TCP ports programs listen on, by node and the port the program
    // asked for: the real (loopback) port the host gave it. Each node has
    // ports of its own, as on a cluster, and no run shares ports with
    // another or with the host's own programs. A connect to a port waits in
    // simulated time until a program listens there (up to connect_wait), as
    // if every server had been started first: which of two programs reaches
    // listen() or connect() first at one simulated instant must not decide
    // whether the connection is refused.
    std::map<std::pair<int, std::uint16_t>, std::uint16_t> listeners;
    sc_core::sc_event ports_changed;
    sim::Tick connect_wait = 0;
    std::vector<ChannelHeader*> channels;  // every program's
    // Bumped by whatever can wake a program's thread blocked in the kernel:
    // a call's result, an event counted into one of its eventfds, any
    // program seen running. A program found waiting stays so until it moves.
    std::uint64_t activity = 0;
    // Something that can wake a program happened at this instant: every
    // program hears the time now (a running one cannot have been told a
    // different one: time stands still while any runs).
    sc_core::sc_event activity_event;
    void touch(sim::Tick now) {
        ++activity;
        for (ChannelHeader* c : channels) c->now_ps.store(now, std::memory_order_release);
        activity_event.notify(sc_core::SC_ZERO_TIME);
    }
};

struct LaunchSpec {
    std::vector<std::string> argv;  // the program and its arguments (argv[0] is looked up in PATH)
    int node = 0;
    std::string lib_dir;            // the drop-in libraries: libibverbs.so.1, libhcasim_client.so, ...
    std::uint64_t tsc_khz = 0;      // the simulated TSC's rate
    // Its TSC reads are replaced by ud2 when it attaches (tsc_reads.hpp)
    // rather than left to trap: where rdtsc does not trap, or on request.
    bool replace_tsc_reads = false;
    std::uint64_t epoch_ns = 0;     // CLOCK_REALTIME at simulated time 0
    std::uint64_t clock_read_ps = 0;  // what one clock read costs the program
    std::uint64_t spin_cpu_ns = 0;    // CPU time without a call after which it is taken to spin on memory
    int stdout_fd = 1, stderr_fd = 2;  // where its output goes
    ProgramGroup* group = nullptr;
    const host::IpSubnet* subnet = nullptr;  // the simulated hosts' addresses and names
};

class RemoteProgram {
public:
    // Starts the program (it runs up to its first call, then waits for the
    // simulator). Throws std::runtime_error naming the program when it
    // cannot be started.
    RemoteProgram(const LaunchSpec& spec, host::Driver& driver);
    ~RemoteProgram();
    RemoteProgram(const RemoteProgram&) = delete;
    RemoteProgram& operator=(const RemoteProgram&) = delete;

    const LaunchSpec& spec() const { return m_spec; }
    pid_t pid() const { return m_pid; }
    std::string name() const;  // "node1 (ib_write_lat -s 64)"

    // In the node's host program thread: serves the program's calls until
    // it ends, then releases what it left as the kernel driver would.
    void serve();

    // For the synchronisation (ProcessSync), outside the program's calls:
    // hands the calls that came in to their slot threads; true if any.
    bool dispatch_calls();
    // Whether every thread of the program waits: inside a call, or blocked
    // in the kernel outside one. Only then may simulated time advance.
    // A waiting it saw by looking at the threads one by one must be
    // confirmed by a second look (confirm_quiescent) once every program has
    // been looked at: a thread may have run and blocked again in between.
    bool quiescent() const;
    bool confirm_quiescent() const;
    // A thread of it got a call's result and has not called again since
    // (it usually does within microseconds: a polling loop).
    bool just_replied() const;
    // Its threads had their chance to call again.
    void forget_replies() { for (bool& f : m_fresh) f = false; }
    // How long a caller may spin for a result when a CPU is free for it.
    static constexpr std::uint32_t kCallSpinNs = 50000;
    // Collects its exit if it has ended; true the first time.
    bool reap();
    bool exited() const { return m_exited; }
    // Seen ended (a zombie) and not collected yet.
    bool dying() const { return m_dying && !m_exited; }
    int wait_status() const { return m_wait_status; }
    std::atomic<std::uint32_t>& doorbell() { return m_channel->doorbell; }
    std::atomic<std::uint32_t>& simulator_sleeps() { return m_channel->simulator_sleeps; }
    std::uint64_t writes() const { return m_channel->writes.load(std::memory_order_acquire); }
    // Tells the program the simulated time. Only while it waits: a running
    // program's clock moves by its own clock reads (and calls) alone, so
    // what it computes from its clock never depends on the host.
    void publish_time(sim::Tick t) { m_channel->now_ps.store(t, std::memory_order_release); }
    // A program that runs (is not quiescent), has used spin_cpu_ns of CPU
    // time since it last had reason to move (a call's result, an adapter
    // write into its memory), and whose every running thread goes round a
    // loop that changes nothing (sampled: the same registers and stack twice
    // at one instruction) spins on memory, as perftest's write_lat does: it
    // waits for the adapter's next write into its memory. One whose state
    // moves on computes, and simulated time waits for it.
    bool spinning() const;
    // It has reason to move again (the adapter wrote its memory).
    void woken() const { m_cpu_mark = kNoMark; }
    // Adapter writes into its memory so far.
    std::uint64_t memory_writes() const;
    void kill_now();
    // Asks it to end (SIGTERM): a service whose clients have all ended.
    void stop();
    bool stopped() const { return m_stopped; }

private:
    void serve_slot(std::uint32_t i);
    // Where rdtsc does not trap: the program's TSC reads become ud2 (tsc_reads.hpp).
    void replace_tsc_reads();
    // What /proc says: every thread outside a call is blocked in the kernel.
    // runs: how often those threads have been on a CPU.
    bool threads_wait(int in_call, std::uint32_t started, std::uint64_t& runs) const;
    // Thread tid is inside a call.
    bool calling(int tid) const;

    LaunchSpec m_spec;
    host::Driver& m_driver;
    ChannelHeader* m_channel = nullptr;
    pid_t m_pid = -1;
    int m_pidfd = -1;
    bool m_exited = false;
    mutable bool m_dying = false;
    bool m_exiting = false;  // it said so (its last call)
    bool m_stopped = false;  // asked to end by stop()
    int m_wait_status = 0;
    bool m_dispatched[kSlots] = {};
    bool m_fresh[kSlots] = {};  // replied to, not seen calling since
    // A CPU is free for slot's thread to spin on beside the simulator and
    // the other threads waiting for it.
    bool spare_cpu(std::uint32_t slot) const;
    // Its thread count when /proc last gave it, and threads_started then.
    mutable int m_threads_known = -1;
    mutable std::uint32_t m_threads_started_seen = 0;
    // The group's activity count when it was last found waiting, and when (wall).
    mutable std::uint64_t m_waiting_at = ~std::uint64_t(0);
    mutable std::chrono::steady_clock::time_point m_waiting_since;
    mutable bool m_unconfirmed = false;
    static constexpr std::uint64_t kNoMark = ~std::uint64_t(0);
    mutable std::uint64_t m_cpu_mark = kNoMark;  // its CPU time (ns) when it last had reason to move
    mutable std::uint64_t m_clock_reads_mark = 0;
    mutable bool m_loops = false;  // found going round a loop that changes nothing since the mark
    // Every thread of it outside a call that runs goes round such a loop.
    bool loops_without_progress() const;
    // Where thread tid is: 1; 0 if it ran and did not answer (it blocks the
    // signal); -1 if it is gone; -2 if it was not on a CPU to answer.
    int sample(int tid, std::uint64_t& ip, std::uint64_t& digest) const;
    mutable std::uint32_t m_sample_request = 0;
    // Time-outs of the program's kernel waits, by id: the simulator's copy
    // of the eventfd to make readable, or -1 once disarmed.
    std::map<std::uint64_t, std::shared_ptr<int>> m_timers;
    std::uint64_t m_next_timer = 1;
    // Where its threads were found spinning (thread, instruction).
    mutable std::set<std::pair<int, std::uint64_t>> m_spin_loops;
    mutable std::uint64_t m_kernel_work_mark = 0;
    mutable std::uint64_t m_last_spin_ip = 0;  // for the sync log
    mutable std::size_t m_last_spin_samples = 0;
    mutable std::uint64_t m_memory_writes_mark = 0;
    std::uint64_t kernel_work() const;
    std::uint64_t cpu_ns() const;
    mutable std::uint64_t m_runs_seen = 0;
    // Its one thread was outside a call at the last look (threads_wait), and
    // how often that thread had been on a CPU when it was last confirmed
    // waiting: if a later look finds it blocked and not on one since, it
    // has waited all along.
    mutable bool m_single = false;
    mutable std::uint64_t m_confirmed_runs = kNoMark;
    void note_waiting() const;
    sc_core::sc_event m_call[kSlots];
    sc_core::sc_process_handle m_slot_thread[kSlots];
    sc_core::sc_event m_exit;
    std::unique_ptr<VerbsProxy> m_verbs;
    std::unique_ptr<RdmaCmProxy> m_rdma_cm;
};

}  // namespace hcasim::remote
