// The adapter's IB port: the transmit serialiser (rate x width after line
// encoding), PHY latency, and the receive side that hands complete packets
// to the RX transport. Store-and-forward at the adapter: a packet is handed
// on when its last bit has arrived. Link-level flow control (IBA 7.9) on the
// one data VL: the port sends only what its link partner has buffer space
// for, and gives its own receive buffer's space back as packets leave it.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "model/fabric/endpoint.hpp"
#include "model/fabric/link_credits.hpp"
#include "model/fabric/link.hpp"
#include "model/sim/block.hpp"
#include "model/sim/config.hpp"

namespace hcasim::hca {

void declare_port_params(sim::ParamRegistry& r);

inline constexpr int kMaxPorts = 2;
// The most a packet carries beyond its payload (LRH, GRH, BTH, extension
// headers, ICRC, VCRC): the room transmit and receive buffers keep for it.
inline constexpr std::uint32_t kPacketOverheadBytes = 128;

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
    // A packet for the receive side at t; `buffered` when it came over the
    // link into the receive buffer (not looped back inside the adapter), so
    // its space must be released with release_rx_buffer.
    void on_receive(std::function<void(packet::PacketPtr, sim::Tick, bool buffered)> fn) { m_rx = std::move(fn); }
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
    // Flow control: a packet for the link starts only once the link partner
    // has room for it. When that depends on credits not yet on their way,
    // the packet waits in the port, behind any others waiting, and transmit
    // returns nothing; the on_sent function gets `tag` and the slot's end
    // when it is booked.
    std::optional<sim::Timeline::Slot> transmit(packet::PacketPtr pkt, sim::Tick t, sim::Tick floor = 0,
                                                std::uint64_t tag = 0);
    void on_sent(std::function<void(std::uint64_t tag, sim::Tick end)> fn) { m_on_sent = std::move(fn); }
    void arrive(packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) override;

    // Flow control, sending side: the link partner's flow-control packet
    // gives back bytes of its buffer at t (before this port's PHY).
    void credits_returned(std::uint32_t bytes, sim::Tick t) override;
    // Flow control, receiving side: a packet of `bytes` that came over the
    // link has left the receive buffer at t; a flow-control packet gives the
    // space back to the link partner.
    void release_rx_buffer(std::uint32_t bytes, sim::Tick t);

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
    std::function<void(packet::PacketPtr, sim::Tick, bool)> m_rx;
    // Books pkt on the serialiser from t and hands it on (loopback, link).
    sim::Timeline::Slot book(packet::PacketPtr pkt, sim::Tick t);
    bool needs_credit(const packet::Packet& pkt) const;
    // Books the waiting packets the returned credits make room for.
    void send_waiting();
    // Sends the link partner a flow-control packet giving back bytes at t.
    void return_credits(std::uint32_t bytes, sim::Tick t);

    // Flow control: the link partner's receive buffer, and the packets
    // waiting for its credits.
    fabric::LinkCredits m_credits;
    struct Waiting {
        packet::PacketPtr pkt;
        sim::Tick t;
        std::uint64_t tag;
    };
    std::deque<Waiting> m_waiting;
    // Packets that waited start no earlier than the last of them, so no
    // later packet passes them.
    sim::Tick m_waited_floor = 0;
    bool m_sending_waiting = false;  // a booking's own credit return must not re-enter
    std::function<void(std::uint64_t, sim::Tick)> m_on_sent;
    // The receive buffer's own account: what it holds, what leaves it when,
    // and the most it held (counter rx_buffer_peak_bytes).
    std::uint64_t m_rx_held = 0;
    fabric::DueByTime m_rx_leaving;
    std::uint64_t* m_n_rx_peak = nullptr;
    sim::Tick m_fcp_wire = 0;  // a flow-control packet's serialisation
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
