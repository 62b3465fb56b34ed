// A cable between two endpoints: a fixed propagation delay each way. The
// serialisation rate belongs to the transmitting port.
#pragma once

#include "model/fabric/endpoint.hpp"
#include "model/sim/config.hpp"

namespace hcasim::fabric {

void declare_link_params(sim::ParamRegistry& r);

class Link {
public:
    Link(double length_m, double ns_per_m) : m_delay(sim::ns_to_ps(length_m * ns_per_m)) {}

    void connect(Endpoint* a, Endpoint* b) {
        m_a = a;
        m_b = b;
    }
    // Sends from `from` to the other end.
    void send(const Endpoint* from, packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) {
        Endpoint* to = from == m_a ? m_b : m_a;
        ++m_packets;
        to->arrive(std::move(pkt), first_bit + m_delay, last_bit + m_delay);
    }
    sim::Tick propagation() const { return m_delay; }
    std::uint64_t packets() const { return m_packets; }

private:
    sim::Tick m_delay;
    Endpoint* m_a = nullptr;
    Endpoint* m_b = nullptr;
    std::uint64_t m_packets = 0;
};

}  // namespace hcasim::fabric
