#include "testbench/workloads/stall_watch.hpp"

#include <stdexcept>

#include "testbench/workloads/rc_endpoint.hpp"

namespace hcasim::testbench {

// The silence must outlast the RC requester's wait before it sends again.
static_assert(StallWatch::kSilence > (sim::Tick{4096} << kRcAckTimeout) * 1000);

StallWatch::StallWatch(Host& h) : m_host(h), m_since(h.now()), m_packets(h.system().packets_sent()) {}

void StallWatch::check(const std::string& what) {
    if (m_host.now() < next_look()) return;
    const std::uint64_t packets = m_host.system().packets_sent();
    if (packets != m_packets) {
        m_since = m_host.now();
        m_packets = packets;
        return;
    }
    const std::string lost = m_host.system().losses();
    throw std::runtime_error(what + ": nothing arrived, and no port has sent a packet for 100 ms of simulated time" +
                             (lost.empty() ? std::string() : " (" + lost + ")"));
}

}  // namespace hcasim::testbench
