// The simulated host CPU: what each API call costs in CPU time. Host
// programs are SystemC threads; spending CPU time advances the calling
// thread's simulated clock.
#pragma once

#include "model/sim/config.hpp"
#include "model/sim/time.hpp"

namespace hcasim::pcie {
class HostMemory;
}

namespace hcasim::host {

void declare_host_params(sim::ParamRegistry& r);

struct HostCosts {
    sim::Tick post_send = 0;     // build one send WQE and issue its doorbell store
    sim::Tick mmio_store = 0;    // held after any MMIO store to the adapter until it leaves the core
    sim::Tick post_recv = 0;     // build one receive WQE
    sim::Tick poll_cq = 0;       // one ibv_poll_cq call, empty or not
    sim::Tick poll_cqe = 0;      // each CQE it returns
    sim::Tick req_notify = 0;
    sim::Tick control_call = 0;  // a control-path call: system call into the kernel driver
    sim::Tick poll_memory = 0;   // one read of a memory word in a spin loop
    sim::Tick interrupt = 0;     // MSI-X arrival to the waiting thread running
    bool poll_fast_forward = true;  // simulate a run of empty polls in one step
    sim::Tick poll_horizon = 0;     // longest such step
    sim::Tick arp_retrans = 0;      // between IPoIB ARP requests (ipoib.arp_retrans_ms)

    static HostCosts from(const sim::Config& c);
};

// Spends d of CPU time in the calling host thread.
void spend_cpu(sim::Tick d);

// One step of a spin loop that reads host memory every cost from t0 (now is
// on that grid, just after a read that saw nothing): sleeps through the reads
// that cannot see anything new. Only an adapter write changes what a read
// sees, and a read does not see a write of its own instant, so the step ends
// one read later when such a write is pending, else at the first grid point
// at or after the next write, or at the first at or after until.
void sleep_to_next_useful_read(const pcie::HostMemory& memory, sim::Tick t0, sim::Tick cost, sim::Tick until);

}  // namespace hcasim::host
