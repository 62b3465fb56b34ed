// The adapter's IB port: the transmit serialiser (rate x width after line
// encoding), PHY latency, and the receive side that hands complete packets
// to the RX transport. Store-and-forward at the adapter: a packet is handed
// on when its last bit has arrived.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/fabric/endpoint.hpp"
#include "model/fabric/link.hpp"
#include "model/sim/block.hpp"
#include "model/sim/config.hpp"

namespace hcasim::hca {

void declare_port_params(sim::ParamRegistry& r);

inline constexpr int kMaxPorts = 2;

struct LinkRate {
    double lane_gbps;       // signalling rate per lane
    double encoding;        // data bits per line bit
    int width;              // lanes
    double data_bytes_per_s() const { return lane_gbps * 1e9 * encoding * width / 8.0; }
};
LinkRate link_rate(const sim::Config& cfg);

class Port : public sim::Block, public fabric::Endpoint {
public:
    Port(const sc_core::sc_module_name& name, const sim::Config& cfg);

    void attach(fabric::Link* link) { m_link = link; }
    void on_receive(std::function<void(packet::PacketPtr, sim::Tick)> fn) { m_rx = std::move(fn); }
    // Multicast loopback, as ConnectX-class adapters do it: a multicast packet
    // this port sends is also received here when local_members says a QP of
    // this adapter is attached to its group (the switch sends no copy back
    // out of the port a packet came in on).
    void set_multicast_loopback(std::function<bool(const std::uint8_t* mgid)> local_members) {
        m_local_members = std::move(local_members);
    }

    // Serialises pkt starting no earlier than t (nor before floor, which keeps
    // one QP's packets in order); returns its slot on the wire. May be
    // called ahead of t: the serialiser fills the earliest idle gap.
    sim::Timeline::Slot transmit(packet::PacketPtr pkt, sim::Tick t, sim::Tick floor = 0);
    void arrive(packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) override;

    const LinkRate& rate() const { return m_rate; }
    std::uint16_t lid() const { return m_lid; }
    void set_lid(std::uint16_t lid) { m_lid = lid; }
    // PortInfo's master SM LID and the P_Key table, as the SM sets them.
    std::uint16_t sm_lid() const { return m_sm_lid; }
    void set_sm_lid(std::uint16_t lid) { m_sm_lid = lid; }
    const std::vector<std::uint16_t>& pkeys() const { return m_pkeys; }
    void add_pkey(std::uint16_t pkey) { m_pkeys.push_back(pkey); }
    // The port's GID table (IBA 4.1.1), as the subnet manager assigns it:
    // index 0 is the default GID (link-local prefix and the port GUID).
    using Gid = std::array<std::uint8_t, 16>;
    void set_gids(std::vector<Gid> gids) { m_gids = std::move(gids); }
    const std::vector<Gid>& gids() const { return m_gids; }
    // Whether a packet's DGID is one of this port's GIDs.
    bool owns_gid(const std::uint8_t* dgid) const;
    std::uint32_t max_mtu() const { return m_max_mtu; }
    // A port whose physical link is down sends nothing and receives nothing
    // (fault injection: a cable pulled).
    void set_link_up(bool up) { m_link_up = up; }
    bool link_up() const { return m_link_up; }
    // The physical link goes down at start and comes back duration later
    // (fault.link_down); the adapter hears of both.
    void schedule_outage(sim::Tick start, sim::Tick duration);
    void on_link_state(std::function<void(bool up, sim::Tick t)> fn) { m_link_state = std::move(fn); }

private:
    // The packet's slice on the transmit track (sim::tracer()).
    void trace_packet(const packet::Packet& pkt, const sim::Timeline::Slot& slot);
    LinkRate m_rate;
    sim::Clock m_symbol_clock;  // one cycle moves one byte on each lane
    sim::Timeline m_tx;
    sim::Tick m_phy_latency;
    std::uint32_t m_max_mtu;
    std::uint16_t m_lid = 0;
    std::uint16_t m_sm_lid = 1;
    std::vector<std::uint16_t> m_pkeys{0xffff};  // the default partition, full member
    std::vector<Gid> m_gids;
    fabric::Link* m_link = nullptr;
    bool m_link_up = true;
    std::function<void(packet::PacketPtr, sim::Tick)> m_rx;
    std::function<bool(const std::uint8_t* mgid)> m_local_members;
    std::function<void(bool up, sim::Tick t)> m_link_state;
    // Hot counters, looked up once.
    std::uint64_t* m_n_tx_packets = nullptr;
    std::uint64_t* m_n_tx_bytes = nullptr;
    std::uint64_t* m_n_rx_packets = nullptr;
    std::uint64_t* m_n_rx_bytes = nullptr;
};

// The adapter's ports, numbered from 1 as the verbs API numbers them.
class PortSet {
public:
    PortSet(Port* port1, Port* port2) : m_ports{port1, port2}, m_count(port2 ? 2 : 1) {}
    int count() const { return m_count; }
    bool valid(unsigned num) const { return num >= 1 && num <= static_cast<unsigned>(m_count); }
    // Port num (1..count()); out-of-range numbers mean port 1.
    Port& operator()(unsigned num) const { return *m_ports[valid(num) ? num - 1 : 0]; }

private:
    std::array<Port*, kMaxPorts> m_ports;
    int m_count;
};

}  // namespace hcasim::hca
