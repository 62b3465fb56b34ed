#include "model/hca/port.hpp"

#include <algorithm>
#include <cstring>

#include "model/packet/multicast.hpp"
#include "model/sim/tracer.hpp"
#include "model/packet/opcode_table.hpp"

namespace hcasim::hca {

void declare_port_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    r.add({"link.speed", K::Choice, "", "fdr", 0, 0, {"sdr", "ddr", "qdr", "fdr10", "fdr", "edr", "clan", "myrinet2000"},
           "lane speed: SDR 2.5, DDR 5, QDR 10 Gb/s (8b/10b); FDR10 10.3125, FDR 14.0625, EDR 25.78125 Gb/s (64b/66b); "
           "clan 1.25 Gb/s (8b/10b), the Giganet cLAN VI link of the late 1990s; myrinet2000 2.5 Gb/s (8b/10b, "
           "2 Gb/s of data), the Myrinet-2000 link",
           "IBA rates (calibration-facts: lane signalling); ConnectX-3 FDR; cLAN: 1.25 Gb/s per direction "
           "(Giganet cLAN product literature), 8b/10b coding an estimate (the Fibre Channel/Gigabit Ethernet "
           "physical layer of that rate); Myrinet-2000: 2+2 Gb/s full duplex, 2.5 Gbaud with 8b/10b coding "
           "(Myricom's Myrinet-2000 product overview)"});
    r.add({"link.width", K::Int, "lanes", "4", 1, 12, {"1", "4", "8", "12"}, "link width",
           "4x, the common HCA port width"});
    r.add_per_node({"port.phy_latency_ns", K::Real, "ns", "25", 0, 10000, {},
           "PHY/SerDes latency added once at each end of a link",
           "estimate; typical SerDes transmit+receive latency of tens of ns"});
    r.add({"port.max_mtu", K::Int, "bytes", "4096", 256, 4096, {"256", "512", "1024", "2048", "4096"},
           "largest path MTU the port supports", "IBA path MTUs (calibration-facts); ConnectX-3 supports 4096"});
    r.add_per_node({"port.vl_buffer_bytes", K::Int, "bytes", "65536", 0, 1 << 26, {},
           "receive buffer of each port's data VL, which link-level flow control gives the link partner as credits "
           "in 64-byte blocks; 0 turns flow control off (the partner sends whatever it has)",
           "estimate: IBA 7.9 requires room for one packet of the largest MTU; 64 KiB covers the flow-control round "
           "trip of a 4 KiB-MTU packet at EDR several times over"});
    r.add({"port.count", K::Int, "ports", "1", 1, kMaxPorts, {},
           "ports on each adapter; port 2 is cabled to the switch (fabric.topology=switch) or to the peer's port 2, "
           "and gives automatic path migration an alternate path",
           "ConnectX-3/4 adapters come with one or two ports"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 30, "hca.port", declare_port_params};

namespace {
using fabric::credit_bytes;
}  // namespace

LinkRate link_rate(const sim::Config& cfg) {
    const std::string& s = cfg.get_choice("link.speed");
    LinkRate r{2.5, 0.8, static_cast<int>(cfg.get_int("link.width"))};
    if (s == "sdr") r = {2.5, 0.8, r.width};
    else if (s == "ddr") r = {5.0, 0.8, r.width};
    else if (s == "qdr") r = {10.0, 0.8, r.width};
    else if (s == "fdr10") r = {10.3125, 64.0 / 66.0, r.width};
    else if (s == "fdr") r = {14.0625, 64.0 / 66.0, r.width};
    else if (s == "clan") r = {1.25, 0.8, r.width};
    else if (s == "myrinet2000") r = {2.5, 0.8, r.width};
    else r = {25.78125, 64.0 / 66.0, r.width};
    return r;
}

Port::Port(const sc_core::sc_module_name& name, const sim::Config& cfg)
    : sim::Block(name, sim::Clock("port.symbol", 1.0)),
      m_rate(link_rate(cfg)),
      m_symbol_clock("port.symbol", 1e12 * m_rate.width / m_rate.data_bytes_per_s()),
      m_tx(&m_symbol_clock),
      m_phy_latency(sim::ns_to_ps(cfg.get_real("port.phy_latency_ns"))),
      m_max_mtu(static_cast<std::uint32_t>(cfg.get_int("port.max_mtu"))) {
    m_clock = m_symbol_clock;
    const auto buffer = static_cast<std::uint64_t>(cfg.get_int("port.vl_buffer_bytes"));
    if (buffer && buffer < credit_bytes(m_max_mtu + kPacketOverheadBytes))
        throw sim::ConfigError("port.vl_buffer_bytes = " + std::to_string(buffer) +
                               " cannot hold one packet of port.max_mtu = " + std::to_string(m_max_mtu) +
                               " with its headers: it must be 0 (no flow control) or at least " +
                               std::to_string(credit_bytes(m_max_mtu + kPacketOverheadBytes)));
    m_credits = fabric::LinkCredits(buffer);
    m_fcp_wire = fabric::flow_control_packet_time(m_symbol_clock, static_cast<std::uint64_t>(m_rate.width));
    m_n_rx_peak = &counter("rx_buffer_peak_bytes");
    m_n_tx_packets = &counter("tx_packets");
    m_n_tx_bytes = &counter("tx_bytes");
    m_n_rx_packets = &counter("rx_packets");
    m_n_rx_bytes = &counter("rx_bytes");
}

std::optional<sim::Timeline::Slot> Port::transmit(packet::PacketPtr pkt, sim::Tick t, sim::Tick floor,
                                                  std::uint64_t tag) {
    t = std::max({t, floor, m_waited_floor});
    if (!needs_credit(*pkt)) return book(std::move(pkt), t);
    const std::optional<sim::Tick> at = m_waiting.empty() ? m_credits.time_for(pkt->bytes.size(), t) : std::nullopt;
    if (!at) {
        counter("packets_waiting_for_credit")++;
        m_waiting.push_back({std::move(pkt), t, tag});
        return std::nullopt;
    }
    m_credits.take(pkt->bytes.size());
    return book(std::move(pkt), *at);
}

bool Port::needs_credit(const packet::Packet& pkt) const {
    return m_credits.enabled() && m_link && m_link_up &&
           !(m_lid && packet::wire_dlid(pkt.bytes.data(), pkt.bytes.size()) == m_lid);
}

void Port::credits_returned(std::uint32_t bytes, sim::Tick t) {
    if (!m_credits.enabled()) return;
    // The flow-control packet passes the PHY before the port has it.
    m_credits.give_back(bytes, t + m_phy_latency);
    if (!m_waiting.empty()) send_waiting();
}

void Port::send_waiting() {
    if (m_sending_waiting) return;
    m_sending_waiting = true;
    while (!m_waiting.empty()) {
        Waiting& w = m_waiting.front();
        const sim::Tick t = std::max({w.t, m_waited_floor, sim::now_ps()});
        std::optional<sim::Tick> at = t;
        if (needs_credit(*w.pkt)) {
            at = m_credits.time_for(w.pkt->bytes.size(), t);
            if (!at) break;
            m_credits.take(w.pkt->bytes.size());
        }
        const std::uint64_t tag = w.tag;
        packet::PacketPtr pkt = std::move(w.pkt);
        m_waiting.pop_front();
        const sim::Timeline::Slot slot = book(std::move(pkt), *at);
        m_waited_floor = slot.start;
        if (m_on_sent) m_on_sent(tag, slot.end);
    }
    m_sending_waiting = false;
}

void Port::release_rx_buffer(std::uint32_t bytes, sim::Tick t) {
    m_rx_leaving.add(t, credit_bytes(bytes));
    return_credits(bytes, t);
}

void Port::return_credits(std::uint32_t bytes, sim::Tick t) {
    if (!m_link || !m_credits.enabled()) return;
    // The flow-control packet leaves through the PHY after its serialisation.
    m_link->return_credits(this, bytes, t + m_fcp_wire + m_phy_latency);
}

sim::Timeline::Slot Port::book(packet::PacketPtr pkt, sim::Tick t) {
    const std::uint64_t cycles = (pkt->bytes.size() + static_cast<std::size_t>(m_rate.width) - 1) /
                                 static_cast<std::size_t>(m_rate.width);
    const auto slot = m_tx.reserve(t, cycles);
    if (sim::tracer().on()) trace_packet(*pkt, slot);
    (*m_n_tx_packets)++;
    (*m_n_tx_bytes) += pkt->bytes.size();
    const std::uint16_t dlid = packet::wire_dlid(pkt->bytes.data(), pkt->bytes.size());
    if (m_lid && dlid == m_lid) {
        // To the port's own LID: the adapter loops it back to its receive
        // side, as for multicast, and it never reaches the wire.
        counter("unicast_loopback_packets")++;
        at(slot.end, [this, copy = std::move(pkt), t = slot.end]() mutable { m_rx(std::move(copy), t, false); });
        return slot;
    }
    if (m_local_members && packet::is_multicast_lid(dlid)) {
        // The looped-back copy leaves the transmit buffer with the last byte
        // serialised and enters the receive side without the PHY and cable.
        const std::uint8_t* mgid = packet::wire_dgid(pkt->bytes.data(), pkt->bytes.size());
        if (mgid && m_local_members(mgid)) {
            counter("multicast_loopback_packets")++;
            at(slot.end, [this, copy = pkt, t = slot.end]() mutable { m_rx(std::move(copy), t, false); });
        }
    }
    if (!m_link_up) {
        counter("tx_dropped_link_down")++;
        return slot;
    }
    if (m_link) m_link->send(this, std::move(pkt), slot.start + m_phy_latency, slot.end + m_phy_latency);
    return slot;
}

void Port::trace_packet(const packet::Packet& pkt, const sim::Timeline::Slot& slot) {
    // BTH after the LRH and, when the LRH says so, the GRH.
    const std::uint8_t* b = pkt.bytes.data();
    const std::size_t n = pkt.bytes.size();
    const std::size_t bth = n > 1 && (b[1] & 3) == 3 ? 48 : 8;
    if (n < bth + 12) {
        sim::tracer().slice(path() + ".tx", "packet", slot.start, slot.end, {{"bytes", n}}, pkt.trace_flow);
        return;
    }
    const std::uint8_t* h = b + bth;
    const std::uint64_t qpn = (std::uint64_t{h[5]} << 16) | (std::uint64_t{h[6]} << 8) | h[7];
    const std::uint64_t psn = (std::uint64_t{h[9]} << 16) | (std::uint64_t{h[10]} << 8) | h[11];
    const char* name = packet::opcode_info(h[0]).name;
    if (std::strncmp(name, "IB_OPCODE_", 10) == 0) name += 10;
    sim::tracer().slice(path() + ".tx", name, slot.start, slot.end,
                        {{"dest_qp", qpn}, {"psn", psn}, {"bytes", n}}, pkt.trace_flow);
}

void Port::arrive(packet::PacketPtr pkt, sim::Tick, sim::Tick last_bit) {
    const sim::Tick t = last_bit + m_phy_latency;
    if (!m_link_up) {
        counter("rx_dropped_link_down")++;
        return_credits(static_cast<std::uint32_t>(pkt->bytes.size()), t);  // never buffered
        return;
    }
    (*m_n_rx_packets)++;
    (*m_n_rx_bytes) += pkt->bytes.size();
    at(t, [this, pkt = std::move(pkt), t]() mutable {
        m_rx_held -= std::min(m_rx_held, m_rx_leaving.take_due(t));
        m_rx_held += credit_bytes(pkt->bytes.size());
        *m_n_rx_peak = std::max(*m_n_rx_peak, m_rx_held);
        m_rx(std::move(pkt), t, true);
    });
}

void Port::schedule_outage(sim::Tick start, sim::Tick duration) {
    auto change = [this](bool up) {
        m_link_up = up;
        counter(up ? "link_ups" : "link_downs")++;
        if (m_link_state) m_link_state(up, sim::now_ps());
    };
    at(start, [change]() { change(false); });
    at(start + duration, [change]() { change(true); });
}

bool Port::owns_gid(const std::uint8_t* dgid) const {
    for (const auto& g : m_gids)
        if (std::equal(g.begin(), g.end(), dgid)) return true;
    return false;
}

}  // namespace hcasim::hca
