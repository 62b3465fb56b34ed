#include "model/fabric/ib_switch.hpp"

#include <algorithm>

namespace hcasim::fabric {

void declare_switch_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    r.add({"fabric.topology", K::Choice, "", "back_to_back", 0, 0, {"back_to_back", "switch"},
           "two nodes cabled directly, or both behind one switch", "default: back to back, as the perftest figures"});
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
      m_width(static_cast<int>(cfg.get_int("link.width"))),
      m_latency(m_clock.cycles(static_cast<std::uint64_t>(cfg.get_int("switch.cut_through_cycles")))) {
    for (int i = 0; i < ports; ++i) {
        auto p = std::make_unique<SwitchPort>();
        p->sw = this;
        p->index = i;
        p->out.set_clock(&m_symbol_clock);
        m_ports.push_back(std::move(p));
    }
}

void IbSwitch::forward(int in, packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) {
    // DLID is bytes 2-3 of the LRH.
    const std::uint16_t dlid =
        static_cast<std::uint16_t>((pkt->bytes.size() >= 4) ? (pkt->bytes[2] << 8 | pkt->bytes[3]) : 0);
    auto it = m_lft.find(dlid);
    if (it == m_lft.end()) {
        counter("dropped_unknown_dlid")++;
        HCASIM_LOG(sim::LogLevel::Warn, path(), "no route for DLID " << dlid << ", packet dropped");
        return;
    }
    SwitchPort& out = *m_ports[static_cast<std::size_t>(it->second)];
    const std::uint64_t cycles = (pkt->bytes.size() + static_cast<std::size_t>(m_width) - 1) / static_cast<std::size_t>(m_width);
    // Cut-through: the header is routed while the rest still arrives; the
    // output cannot finish before the input has.
    sim::Tick& flow_end = m_flow_end[{in, it->second}];
    auto slot = out.out.reserve(std::max(first_bit + m_latency, flow_end), cycles);
    flow_end = slot.end;
    sim::Tick end = slot.end;
    if (end < last_bit) end = last_bit;
    counter("packets_forwarded")++;
    out.link->send(&out, std::move(pkt), slot.start, end);
}

}  // namespace hcasim::fabric
