#include "model/fabric/ib_switch.hpp"

#include <algorithm>

#include "model/packet/multicast.hpp"

namespace hcasim::fabric {

void declare_switch_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    r.add({"fabric.topology", K::Choice, "", "back_to_back", 0, 0, {"back_to_back", "switch"},
           "two nodes cabled directly, or all of them behind one switch", "default: back to back, as the perftest figures"});
    r.add({"fabric.nodes", K::Int, "nodes", "2", 2, 648, {},
           "simulated hosts, each with one adapter; more than 2 need fabric.topology=switch",
           "default: the two hosts of a perftest run; up to 36, the ports of one SwitchX-class switch; beyond, up "
           "to the 648 ports of a director-class chassis (SX6536), simulated as one switch with one ASIC's "
           "cut-through latency"});
    r.add({"switch.clock_mhz", K::Real, "MHz", "500", 50, 5000, {}, "switch core clock",
           "estimate for a SwitchX-class ASIC"});
    r.add({"switch.cut_through_cycles", K::Int, "cycles", "85", 0, 100000, {},
           "port-to-port cut-through latency: first bit in to first bit out",
           "SwitchX-class FDR switches are specified at about 170 ns port to port (vendor datasheets)"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 50, "fabric.switch", declare_switch_params};

IbSwitch::IbSwitch(const sc_core::sc_module_name& name, const sim::Config& cfg, double link_bytes_per_s, int ports)
    : sim::Block(name, sim::Clock::from_mhz("switch.core", cfg.get_real("switch.clock_mhz"))),
      m_symbol_clock("switch.symbol", 1e12 * cfg.get_real("link.width") / link_bytes_per_s),
      m_fcp_wire(flow_control_packet_time(m_symbol_clock, static_cast<std::uint64_t>(cfg.get_int("link.width")))),
      m_width(static_cast<int>(cfg.get_int("link.width"))),
      m_latency(m_clock.cycles(static_cast<std::uint64_t>(cfg.get_int("switch.cut_through_cycles")))) {
    for (int i = 0; i < ports; ++i) {
        auto p = std::make_unique<SwitchPort>();
        p->sw = this;
        p->index = i;
        p->out.set_clock(&m_symbol_clock);
        // Every port's buffer is port.vl_buffer_bytes, the switch's as the adapters'.
        p->credits = LinkCredits(static_cast<std::uint64_t>(cfg.get_int("port.vl_buffer_bytes")));
        m_ports.push_back(std::move(p));
    }
}

void IbSwitch::set_multicast_ports(std::uint16_t mlid, const std::set<int>& ports) {
    if (ports.empty()) m_mft.erase(mlid);
    else m_mft[mlid] = ports;
}

const std::set<int>* IbSwitch::multicast_ports(std::uint16_t mlid) const {
    auto it = m_mft.find(mlid);
    return it == m_mft.end() ? nullptr : &it->second;
}

void IbSwitch::forward(int in, packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) {
    const std::uint16_t dlid = packet::wire_dlid(pkt->bytes.data(), pkt->bytes.size());
    if (packet::is_multicast_lid(dlid)) {
        forward_multicast(in, dlid, pkt, first_bit, last_bit);
        return;
    }
    auto it = m_lft.find(dlid);
    if (it == m_lft.end()) {
        if (packet::vcrc_intact(pkt->bytes.data(), pkt->bytes.size())) {
            counter("dropped_unknown_dlid")++;
            HCASIM_LOG(sim::LogLevel::Warn, path(), "no route for DLID " << dlid << ", packet dropped");
        } else {
            // Damaged on the way in, its DLID with it: a link error, not a
            // missing route (a routable one goes on cut-through and its
            // receiver drops it).
            counter("dropped_bad_vcrc")++;
        }
        release_input(in, pkt->bytes.size(), last_bit);
        return;
    }
    counter("packets_forwarded")++;
    send_out(it->second, Waiting{in, std::move(pkt), first_bit, last_bit, nullptr});
}

void IbSwitch::forward_multicast(int in, std::uint16_t mlid, const packet::PacketPtr& pkt, sim::Tick first_bit,
                                 sim::Tick last_bit) {
    auto it = m_mft.find(mlid);
    if (it == m_mft.end()) {
        // No member has joined: IBA switches discard such packets. A link
        // error may have made the MLID: then it is the VCRC that fails.
        counter(packet::vcrc_intact(pkt->bytes.data(), pkt->bytes.size()) ? "dropped_unknown_mlid" : "dropped_bad_vcrc")++;
        release_input(in, pkt->bytes.size(), last_bit);
        return;
    }
    counter("multicast_packets")++;
    int copies = 0;
    for (const int out : it->second) copies += out != in;
    if (copies == 0) {
        release_input(in, pkt->bytes.size(), last_bit);
        return;
    }
    // Every copy shares the packet's bytes: nothing downstream writes them.
    // The input's buffer holds the packet until its last copy has left.
    auto b = std::make_shared<Buffered>(Buffered{in, pkt->bytes.size(), copies, last_bit});
    for (const int out : it->second) {
        if (out == in) continue;
        counter("multicast_copies")++;
        send_out(out, Waiting{in, pkt, first_bit, last_bit, b});
    }
}

void IbSwitch::send_out(int out_port, Waiting w) {
    SwitchPort& out = *m_ports[static_cast<std::size_t>(out_port)];
    if (!out.credits.enabled()) {
        book_out(out_port, w, 0);
        return;
    }
    // Cut-through: it could start when its header has been routed.
    const std::optional<sim::Tick> at =
        out.waiting.empty() ? out.credits.time_for(w.pkt->bytes.size(), w.first_bit + m_latency) : std::nullopt;
    if (!at) {
        counter("packets_waiting_for_credit")++;
        out.waiting.push_back(std::move(w));
        return;
    }
    out.credits.take(w.pkt->bytes.size());
    book_out(out_port, w, *at);
}

void IbSwitch::book_out(int out_port, Waiting& w, sim::Tick at) {
    SwitchPort& out = *m_ports[static_cast<std::size_t>(out_port)];
    const std::uint64_t cycles =
        (w.pkt->bytes.size() + static_cast<std::size_t>(m_width) - 1) / static_cast<std::size_t>(m_width);
    // Cut-through: the header is routed while the rest still arrives; the
    // output cannot finish before the input has.
    sim::Tick& flow_end = m_flow_end[{w.in, out_port}];
    auto slot = out.out.reserve(std::max({w.first_bit + m_latency, flow_end, at, out.waited_floor}), cycles);
    flow_end = slot.end;
    sim::Tick end = slot.end;
    if (end < w.last_bit) end = w.last_bit;
    const std::size_t bytes = w.pkt->bytes.size();
    out.link->send(&out, std::move(w.pkt), slot.start, end);
    if (w.buffered) copy_left(*w.buffered, end);
    else release_input(w.in, bytes, end);  // a unicast packet's only copy
}

void IbSwitch::copy_left(Buffered& b, sim::Tick t) {
    b.left = std::max(b.left, t);
    if (--b.copies_left == 0) release_input(b.in, b.bytes, b.left);
}

void IbSwitch::release_input(int in, std::size_t bytes, sim::Tick t) {
    SwitchPort& port = *m_ports[static_cast<std::size_t>(in)];
    // The space goes back in a flow-control packet after its serialisation.
    if (port.link && port.credits.enabled())
        port.link->return_credits(&port, static_cast<std::uint32_t>(bytes), t + m_fcp_wire);
}

void IbSwitch::credits_back(int out_port, std::uint32_t bytes, sim::Tick t) {
    SwitchPort& out = *m_ports[static_cast<std::size_t>(out_port)];
    if (!out.credits.enabled()) return;
    out.credits.give_back(bytes, t);
    if (out.draining) return;
    out.draining = true;
    while (!out.waiting.empty()) {
        Waiting& w = out.waiting.front();
        const sim::Tick from = std::max({w.first_bit + m_latency, out.waited_floor, sim::now_ps()});
        const std::optional<sim::Tick> at = out.credits.time_for(w.pkt->bytes.size(), from);
        if (!at) break;
        out.credits.take(w.pkt->bytes.size());
        Waiting go = std::move(w);
        out.waiting.pop_front();
        book_out(out_port, go, *at);
        out.waited_floor = std::max(out.waited_floor, *at);
    }
    out.draining = false;
}

}  // namespace hcasim::fabric
