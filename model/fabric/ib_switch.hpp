// An InfiniBand switch: cut-through forwarding by destination LID with a fixed
// port-to-port latency, and one serialiser per output port, so packets from
// several inputs to one output queue behind each other. A packet to a
// multicast LID is replicated to every port of its multicast forwarding
// table entry but the one it came in on, each copy serialised on its own
// output port. The subnet manager programs both tables. Link-level flow
// control (IBA 7.9) on both sides: an output port sends only what the port
// cabled to it has credits for, a packet waiting for them stays in its input
// buffer, and the input gives its space back once the packet (every copy of
// it) has left.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "model/fabric/endpoint.hpp"
#include "model/fabric/link_credits.hpp"
#include "model/fabric/link.hpp"
#include "model/sim/block.hpp"
#include "model/sim/config.hpp"

namespace hcasim::fabric {

void declare_switch_params(sim::ParamRegistry& r);

class IbSwitch : public sim::Block {
public:
    IbSwitch(const sc_core::sc_module_name& name, const sim::Config& cfg, double link_bytes_per_s, int ports);

    Endpoint* port(int i) { return m_ports[static_cast<std::size_t>(i)].get(); }
    void attach(int port, Link* link) { m_ports[static_cast<std::size_t>(port)]->link = link; }
    void route(std::uint16_t lid, int port) { m_lft[lid] = port; }
    void unroute(std::uint16_t lid) { m_lft.erase(lid); }
    // The multicast forwarding table entry of mlid: the ports that lead to
    // the group's members (an empty set removes the entry).
    void set_multicast_ports(std::uint16_t mlid, const std::set<int>& ports);
    const std::set<int>* multicast_ports(std::uint16_t mlid) const;
    int ports() const { return static_cast<int>(m_ports.size()); }

private:
    // A packet in an input buffer until its last copy has left.
    struct Buffered {
        int in;
        std::size_t bytes;
        int copies_left;
        sim::Tick left;  // when the copies sent so far have left
    };
    // A copy waiting at an output for the credits of what is cabled there.
    struct Waiting {
        int in;
        packet::PacketPtr pkt;
        sim::Tick first_bit;
        sim::Tick last_bit;
        std::shared_ptr<Buffered> buffered;  // a multicast packet's copies; null for unicast
    };
    struct SwitchPort : Endpoint {
        IbSwitch* sw = nullptr;
        int index = 0;
        Link* link = nullptr;
        sim::Timeline out;
        LinkCredits credits;
        std::deque<Waiting> waiting;
        sim::Tick waited_floor = 0;  // no packet passes one that waited
        bool draining = false;       // a booking's own credit return must not re-enter
        void arrive(packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) override {
            sw->forward(index, std::move(pkt), first_bit, last_bit);
        }
        void credits_returned(std::uint32_t bytes, sim::Tick t) override { sw->credits_back(index, bytes, t); }
    };
    void forward(int in, packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit);
    void forward_multicast(int in, std::uint16_t mlid, const packet::PacketPtr& pkt, sim::Tick first_bit,
                           sim::Tick last_bit);
    // Sends a copy of a buffered packet out of output port out, behind the
    // packets of the same flow, once the far end has credits for it.
    void send_out(int out, Waiting w);
    // Books the copy now (its credits are known to be back by `at`).
    void book_out(int out, Waiting& w, sim::Tick at);
    // A copy has left at t; the last one frees the input buffer, whose
    // credits go back to the sender.
    void copy_left(Buffered& b, sim::Tick t);
    void release_input(int in, std::size_t bytes, sim::Tick t);
    void credits_back(int out, std::uint32_t bytes, sim::Tick t);

    sim::Clock m_symbol_clock;  // one cycle moves one byte on each lane
    sim::Tick m_fcp_wire;       // a flow-control packet's serialisation
    int m_width;
    sim::Tick m_latency;
    std::vector<std::unique_ptr<SwitchPort>> m_ports;
    std::map<std::uint16_t, int> m_lft;  // linear forwarding table
    std::map<std::uint16_t, std::set<int>> m_mft;  // multicast forwarding table
    // Packets from one input to one output keep their order.
    std::map<std::pair<int, int>, sim::Tick> m_flow_end;
};

}  // namespace hcasim::fabric
