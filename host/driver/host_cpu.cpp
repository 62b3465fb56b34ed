#include "host/driver/host_cpu.hpp"

#include "model/pcie/host_memory.hpp"

namespace hcasim::host {

void declare_host_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    // One host's CPU costs: each node may have its own.
    auto ns = [&](const char* key, const char* def, const char* doc, const char* src, double min = 0) {
        r.add_per_node({key, K::Real, "ns", def, min, 1e9, {}, doc, src});
    };
    ns("host.cpu.post_send_ns", "60", "CPU time of ibv_post_send per work request up to its MMIO store (the WQE "
       "written, the doorbell or BlueFlame store issued)",
       "estimate: a few cache-line writes and one MMIO store on a 3 GHz Xeon");
    ns("host.cpu.mmio_store_ns", "135",
       "CPU time a thread is held after an MMIO store to the adapter (a send doorbell, a BlueFlame write, a VI "
       "doorbell, a CQ or VI arm) until the store has left the core: x86 keeps a UC store in order and the sfence "
       "after a write-combined BlueFlame copy waits for it, so the next post waits; the store travels on meanwhile, "
       "so this bounds a thread's posting rate, not a message's latency",
       "inferred: one ConnectX-3 host's ib_write_bw, ib_send_bw and ib_read_bw on one QP run 5.47, 5.19 and 4.76 "
       "Mpps at 2 B, 183-210 ns per work request whatever the operation's path through the adapter; less the 61 ns "
       "of the model's own loop that leaves 122-149 ns, 135 the middle (docs/calibration.md); RAMCloud measured "
       "147-150 ns to poke a NIC's doorbell");
    ns("host.cpu.post_recv_ns", "30", "CPU time of ibv_post_recv per work request", "estimate");
    ns("host.cpu.poll_cq_ns", "25", "CPU time of one ibv_poll_cq call (an empty poll costs this)",
       "estimate: one cache-line read and a branch", 0.1);
    ns("host.cpu.poll_cqe_ns", "15", "CPU time per completion ibv_poll_cq returns", "estimate");
    ns("host.cpu.req_notify_ns", "40", "CPU time of ibv_req_notify_cq up to its MMIO store to the adapter",
       "estimate: one MMIO store");
    ns("host.cpu.control_call_ns", "1500",
       "CPU time of a control-path verb (system call into the kernel driver), firmware time excluded",
       "estimate: a system call round trip of about a microsecond");
    ns("host.cpu.poll_memory_ns", "5", "CPU time of one read of a polled memory word",
       "estimate: an L1/LLC hit in a spin loop", 0.1);
    ns("host.interrupt_ns", "2500", "MSI-X arrival to the blocked thread running again",
       "estimate: interrupt handler plus a scheduler wake-up of a few microseconds");
    // Charged by the synchronisation of every program of a run alike.
    r.add({"host.cpu.clock_read_ns", K::Real, "ns", "20", 0.001, 1e9, {},
       "simulated time a program spends in each clock read: one run by `hcasim run` in clock_gettime, gettimeofday, "
       "time or rdtsc, charged at its next call (a loop that waits for the clock to move sees it move); `hcasim lat` "
       "and `bw` where perftest reads its time stamps",
       "estimate: a vDSO clock_gettime or an rdtsc on a current x86-64 server takes 10 to 25 ns"});
    r.add({"host.oob_connect_wait_ms", K::Real, "ms", "10000", 0, 1e7, {},
           "how long a `hcasim run` program's TCP connect to a port no program listens on waits (simulated time) "
           "for one to, before it is refused",
           "as if the servers had been started first: a client that starts with its server does not lose the race"});
    r.add({"host.spin_cpu_us", K::Real, "us", "500", 0, 1e6, {},
           "CPU time a `hcasim run` program may use without a call, clock read, page fault or read/write system call "
           "before its threads are sampled to see whether it spins on memory (as perftest's write_lat spins on its "
           "receive buffer): a spinner's simulated time then moves on to the adapter's next write into its memory; 0 "
           "turns this off",
           "host-side only: when to look, not the verdict (a loop that changes nothing spins, one whose registers or "
           "stack move computes), so results do not depend on it; far above one pass of a spin loop, so RDMA programs "
           "between calls are rarely sampled"});
    r.add({"host.tsc_mhz", K::Real, "MHz", "0", 0, 1e5, {},
           "rate of the simulated TSC that `hcasim run` programs read with rdtsc; 0: the cpu MHz of this machine's "
           "/proc/cpuinfo, which perftest reads to turn cycles into microseconds",
           "perftest's get_cpu_mhz (the two must agree for its figures to be right)"});
    r.add_per_node({"host.poll_fast_forward", K::Bool, "", "true", 0, 0, {},
           "simulate a run of empty ibv_poll_cq calls of a thread spinning on one CQ (or of KvipSendDone or "
           "KvipRecvDone calls on one VI work queue) as one step that ends at the first poll able to see a change "
           "(same simulated times and results as polling one call at a time, far fewer thread switches)",
           "simulator speed; set false to step every empty poll"});
    ns("host.poll_horizon_ns", "10000", "longest fast-forwarded run of empty polls before ibv_poll_cq returns 0",
       "simulator speed against the responsiveness of polling loops that watch the clock: such a loop sees the "
       "time move in steps of up to this much", 1);
}

const sim::ParamDeclarations kParams{sim::param_rank::kHost + 10, "host", declare_host_params};

HostCosts HostCosts::from(const sim::Config& c) {
    HostCosts h;
    h.post_send = sim::ns_to_ps(c.get_real("host.cpu.post_send_ns"));
    h.mmio_store = sim::ns_to_ps(c.get_real("host.cpu.mmio_store_ns"));
    h.post_recv = sim::ns_to_ps(c.get_real("host.cpu.post_recv_ns"));
    h.poll_cq = sim::ns_to_ps(c.get_real("host.cpu.poll_cq_ns"));
    h.poll_cqe = sim::ns_to_ps(c.get_real("host.cpu.poll_cqe_ns"));
    h.req_notify = sim::ns_to_ps(c.get_real("host.cpu.req_notify_ns"));
    h.control_call = sim::ns_to_ps(c.get_real("host.cpu.control_call_ns"));
    h.poll_memory = sim::ns_to_ps(c.get_real("host.cpu.poll_memory_ns"));
    h.interrupt = sim::ns_to_ps(c.get_real("host.interrupt_ns"));
    h.poll_fast_forward = c.get_bool("host.poll_fast_forward");
    h.poll_horizon = sim::ns_to_ps(c.get_real("host.poll_horizon_ns"));
    h.arp_retrans = static_cast<sim::Tick>(c.get_real("ipoib.arp_retrans_ms") * sim::kPsPerMs);
    return h;
}

void spend_cpu(sim::Tick d) {
    if (d) sc_core::wait(sim::to_sc(d));
}

void sleep_to_next_useful_read(const pcie::HostMemory& memory, sim::Tick t0, sim::Tick cost, sim::Tick until) {
    if (memory.wrote_now()) {
        sc_core::wait(sim::to_sc(cost));
        return;
    }
    const sim::Tick now = sim::now_ps();
    sc_core::wait(sim::to_sc(until > now ? until - now : 0), memory.written());
    const sim::Tick w = sim::now_ps();
    const sim::Tick grid = t0 + (w - t0 + cost - 1) / cost * cost;
    if (grid > w) sc_core::wait(sim::to_sc(grid - w));
}

}  // namespace hcasim::host
