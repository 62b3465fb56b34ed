// A cable between two endpoints: a fixed propagation delay each way. The
// serialisation rate belongs to the transmitting port.
//
// Fault injection: each direction may lose, corrupt (one bit flipped, so the
// receiver's VCRC/ICRC check fails) or duplicate packets with the
// probabilities the fault.* keys give, drawn from its own seeded generator,
// and the whole link may be down for scheduled intervals, when it loses
// everything in both directions. A link without faults draws nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/fabric/endpoint.hpp"
#include "model/sim/config.hpp"
#include "model/sim/random.hpp"

namespace hcasim::fabric {

void declare_link_params(sim::ParamRegistry& r);

// Per-packet fault probabilities of one link direction.
struct FaultRates {
    double drop = 0;
    double corrupt = 0;
    double duplicate = 0;
    bool any() const { return drop > 0 || corrupt > 0 || duplicate > 0; }
};

// The rates for packets the element (an adapter port "node1.port", a
// switch port "switch0.port3") transmits: its fault.ELEMENT.* keys where
// set, else fault.drop, fault.corrupt and fault.duplicate.
FaultRates fault_rates(const sim::Config& cfg, const std::string& element);

// One entry of fault.link_down: the link at element is down from start for
// duration.
struct LinkOutage {
    std::string element;
    sim::Tick start = 0;
    sim::Tick duration = 0;
};
// Every fault.link_down entry; a malformed one is a ConfigError naming it.
std::vector<LinkOutage> link_outages(const sim::Config& cfg);

// Every fault.ELEMENT.* key names an element of elements, or it is a
// ConfigError naming the key.
void check_fault_elements(const sim::Config& cfg, const std::vector<std::string>& elements);

class Link {
public:
    Link(double length_m, double ns_per_m) : m_delay(sim::ns_to_ps(length_m * ns_per_m)) {}

    void connect(Endpoint* a, Endpoint* b) {
        m_a = a;
        m_b = b;
    }
    // Faults on the packets `from` sends; seed makes the choices repeatable.
    void inject_faults(const Endpoint* from, const FaultRates& rates, std::uint64_t seed);
    // The link is down (both ways) in [start, start + duration).
    void add_outage(sim::Tick start, sim::Tick duration);
    bool up_at(sim::Tick t) const;

    // Sends from `from` to the other end.
    void send(const Endpoint* from, packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) {
        const int d = from == m_a ? 0 : 1;
        Endpoint* to = d == 0 ? m_b : m_a;
        ++m_packets;
        if (m_faulty) {
            faulty_send(m_dir[d], d == 0 ? m_a : m_b, to, std::move(pkt), first_bit + m_delay, last_bit + m_delay);
            return;
        }
        to->arrive(std::move(pkt), first_bit + m_delay, last_bit + m_delay);
    }
    // Flow control (IBA 7.9): `from` gives back bytes of its receive buffer
    // with a flow-control packet whose last bit leaves at t; the sender has
    // it one propagation delay later. Flow-control packets are not subject
    // to the link's faults.
    void return_credits(const Endpoint* from, std::uint32_t bytes, sim::Tick t) {
        (from == m_a ? m_b : m_a)->credits_returned(bytes, t + m_delay);
    }
    sim::Tick propagation() const { return m_delay; }
    std::uint64_t packets() const { return m_packets; }
    bool faulty() const { return m_faulty; }

    // What the faults did, over both directions.
    struct FaultCounts {
        std::uint64_t dropped = 0;
        std::uint64_t corrupted = 0;
        std::uint64_t duplicated = 0;
        std::uint64_t lost_link_down = 0;
    };
    FaultCounts fault_counts() const;

private:
    struct Direction {
        FaultRates rates;
        std::unique_ptr<sim::Random> random;
        FaultCounts counts;
    };
    void faulty_send(Direction& d, Endpoint* from, Endpoint* to, packet::PacketPtr pkt, sim::Tick first_bit,
                     sim::Tick last_bit);

    sim::Tick m_delay;
    Endpoint* m_a = nullptr;
    Endpoint* m_b = nullptr;
    std::uint64_t m_packets = 0;
    bool m_faulty = false;
    Direction m_dir[2];
    std::vector<std::pair<sim::Tick, sim::Tick>> m_down;  // [start, end)
    packet::PacketPool m_copies;  // corrupted packets are copies: others may share the original
};

}  // namespace hcasim::fabric
