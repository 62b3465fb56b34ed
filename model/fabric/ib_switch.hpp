// An InfiniBand switch: cut-through forwarding by destination LID with a fixed
// port-to-port latency, and one serialiser per output port, so packets from
// several inputs to one output queue behind each other. A packet to a
// multicast LID is replicated to every port of its multicast forwarding
// table entry but the one it came in on, each copy serialised on its own
// output port. The subnet manager programs both tables. Towards its inputs'
// senders it keeps link-level flow control: a packet's buffer space goes
// back once the packet has left for its output; its output ports do not yet
// wait for the credits of what is cabled to them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "model/fabric/endpoint.hpp"
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
    struct SwitchPort : Endpoint {
        IbSwitch* sw = nullptr;
        int index = 0;
        Link* link = nullptr;
        sim::Timeline out;
        void arrive(packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) override {
            sw->forward(index, std::move(pkt), first_bit, last_bit);
        }
    };
    void forward(int in, packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit);
    void forward_multicast(int in, std::uint16_t mlid, const packet::PacketPtr& pkt, sim::Tick first_bit,
                           sim::Tick last_bit);
    // Books pkt on output port out behind the packets of the same flow;
    // returns when its last bit has left.
    sim::Tick send_out(int in, int out, packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit);
    // The packet has left input port in's buffer at t: its credits go back
    // to the sender.
    void release_input(int in, std::size_t bytes, sim::Tick t);

    sim::Clock m_symbol_clock;  // one cycle moves one byte on each lane
    int m_width;
    sim::Tick m_latency;
    std::vector<std::unique_ptr<SwitchPort>> m_ports;
    std::map<std::uint16_t, int> m_lft;  // linear forwarding table
    std::map<std::uint16_t, std::set<int>> m_mft;  // multicast forwarding table
    // Packets from one input to one output keep their order.
    std::map<std::pair<int, int>, sim::Tick> m_flow_end;
};

}  // namespace hcasim::fabric
