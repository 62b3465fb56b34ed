#include "testbench/workloads/stall_watch.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "testbench/workloads/rc_endpoint.hpp"

namespace hcasim::testbench {

// The silence must outlast the RC requester's wait before it sends again.
static_assert(StallWatch::kSilence > (sim::Tick{4096} << kRcAckTimeout) * 1000);

namespace {

// One call of every host CPU cost of the node whose calls cost most.
sim::Tick slowest_host_calls(System& sys) {
    sim::Tick most = 0;
    for (int i = 0; i < sys.nodes(); ++i) {
        const host::HostCosts& c = sys.node(i).driver().costs();
        most = std::max(most, c.post_send + c.mmio_store + c.post_recv + c.poll_cq + c.poll_cqe + c.req_notify +
                                  c.control_call + c.poll_memory + c.interrupt);
    }
    // The clock read is one cost for every host.
    return most + sim::ns_to_ps(sys.config().get_real("host.cpu.clock_read_ns"));
}

// To 4 digits: the default 100 ms plus a few us of host calls reads 100.
std::string milliseconds(sim::Tick t) {
    std::ostringstream os;
    os << std::setprecision(4) << static_cast<double>(t) / static_cast<double>(sim::kPsPerMs);
    return os.str();
}

}  // namespace

StallWatch::StallWatch(Host& h) : m_host(h), m_since(h.now()), m_packets(h.system().packets_sent()) {}

void StallWatch::check(const char* what) {
    if (m_host.now() < next_look()) return;
    if (!m_hosts_counted) {
        m_hosts_counted = true;
        m_silence += 2 * slowest_host_calls(m_host.system());
        if (m_host.now() < next_look()) return;
    }
    const std::uint64_t packets = m_host.system().packets_sent();
    if (packets != m_packets) {
        m_since = m_host.now();
        m_packets = packets;
        return;
    }
    const std::string lost = m_host.system().losses();
    throw std::runtime_error(std::string(what) + ": nothing arrived, and no port has sent a packet for " +
                             milliseconds(m_silence) + " ms of simulated time" +
                             (lost.empty() ? std::string() : " (" + lost + ")"));
}

}  // namespace hcasim::testbench
