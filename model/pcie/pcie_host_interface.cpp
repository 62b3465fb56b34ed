#include "model/pcie/pcie_host_interface.hpp"

#include <algorithm>

#include "model/sim/assert.hpp"
#include "model/sim/tracer.hpp"

namespace hcasim::pcie {

using sim::ParamSpec;
using sim::Tick;

void declare_pcie_params(sim::ParamRegistry& r) {
    using K = ParamSpec::Kind;
    r.add_per_node({"pcie.gen", K::Int, "generation", "3", 1, 4, {"1", "2", "3", "4"},
           "PCIe generation: 1 = 2.5 GT/s 8b/10b, 2 = 5 GT/s 8b/10b, 3 = 8 GT/s 128b/130b, 4 = 16 GT/s 128b/130b",
           "ConnectX-3 is a PCIe Gen3 device (calibration-facts: PCIe Gen3)"});
    r.add_per_node({"pcie.lanes", K::Int, "lanes", "8", 1, 32, {"1", "2", "4", "8", "16", "32"}, "link width",
           "ConnectX-3 FDR adapters are Gen3 x8 (calibration-facts: CX-3 FDR on Gen3 x8)"});
    r.add_per_node({"pcie.mps", K::Int, "bytes", "256", 128, 4096, {"128", "256", "512", "1024", "2048", "4096"},
           "max payload size: largest posted write or completion payload",
           "CX-3 advertises 256 B (calibration-facts: max payload size)"});
    r.add_per_node({"pcie.mrrs", K::Int, "bytes", "512", 128, 4096, {"128", "256", "512", "1024", "2048", "4096"},
           "max read request size", "common BIOS default 512 B (calibration-facts: max read request size)"});
    r.add_per_node({"pcie.rcb", K::Int, "bytes", "64", 64, 128, {"64", "128"},
           "read completion boundary of the root complex", "PCIe spec; 64 B on x86 root complexes"});
    r.add_per_node({"pcie.read_tags", K::Int, "requests", "32", 1, 256, {},
           "outstanding non-posted read requests the adapter can have in flight",
           "PCIe 5-bit tag field without extended tags (PCIe spec 2.2.6.2)"});
    r.add_per_node({"pcie.core_clock_mhz", K::Real, "MHz", "250", 50, 2000, {},
           "clock of the adapter's PCIe core (transaction/data-link layers)",
           "Gen3 x8 hard IP cores run a 256-bit datapath at 250 MHz (vendor IP user guides)"});
    r.add_per_node({"pcie.core_latency_cycles", K::Int, "cycles", "30", 0, 10000, {},
           "adapter PCIe core latency per traversal (each TLP in or out)",
           "with pcie.root_complex_latency_ns and host.memory_latency_ns, makes a 64 B DMA read round trip "
           "about 550 ns, the pcie-bench median of 546-560 ns for 8-64 B (calibration-facts); docs/calibration.md"});
    r.add_per_node({"pcie.root_complex_latency_ns", K::Real, "ns", "185", 0, 100000, {},
           "root complex latency per traversal (request in, completion or write out)",
           "split of the pcie-bench DMA round trip (calibration-facts); see docs/timing-parameters.md"});
    r.add_per_node({"pcie.tlps_per_ack", K::Int, "TLPs", "4", 1, 64, {},
           "TLPs acknowledged by one ACK DLLP on the opposite direction", "pcie-bench model (calibration-facts)"});
    r.add_per_node({"pcie.tlps_per_fc_update", K::Int, "TLPs", "4", 1, 64, {},
           "TLPs per UpdateFC DLLP on the opposite direction", "pcie-bench model (calibration-facts)"});
    r.add_per_node({"pcie.ecrc", K::Bool, "", "false", 0, 0, {}, "end-to-end CRC on every TLP (+4 B)",
           "off by default on x86 platforms"});
    r.add_per_node({"host.memory_latency_ns", K::Real, "ns", "100", 0, 100000, {},
           "host memory (or last-level cache) access latency for a DMA read",
           "split of the pcie-bench DMA round trip (calibration-facts)"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 10, "pcie", declare_pcie_params};

PcieParams PcieParams::from(const sim::Config& c) {
    PcieParams p;
    p.gen = static_cast<int>(c.get_int("pcie.gen"));
    p.lanes = static_cast<int>(c.get_int("pcie.lanes"));
    p.mps = static_cast<std::uint32_t>(c.get_int("pcie.mps"));
    p.mrrs = static_cast<std::uint32_t>(c.get_int("pcie.mrrs"));
    p.rcb = static_cast<std::uint32_t>(c.get_int("pcie.rcb"));
    p.read_tags = static_cast<std::uint32_t>(c.get_int("pcie.read_tags"));
    p.core_clock_mhz = c.get_real("pcie.core_clock_mhz");
    p.core_latency_cycles = static_cast<std::uint32_t>(c.get_int("pcie.core_latency_cycles"));
    p.root_complex_latency_ns = c.get_real("pcie.root_complex_latency_ns");
    p.tlps_per_ack = static_cast<std::uint32_t>(c.get_int("pcie.tlps_per_ack"));
    p.tlps_per_fc_update = static_cast<std::uint32_t>(c.get_int("pcie.tlps_per_fc_update"));
    p.costs.ecrc_bytes = c.get_bool("pcie.ecrc") ? 4 : 0;
    return p;
}

double PcieParams::lane_bytes_per_s() const {
    switch (gen) {
    case 1: return 2.5e9 * 8.0 / 10.0 / 8.0;
    case 2: return 5.0e9 * 8.0 / 10.0 / 8.0;
    case 3: return 8.0e9 * 128.0 / 130.0 / 8.0;
    default: return 16.0e9 * 128.0 / 130.0 / 8.0;
    }
}

PcieHostInterface::PcieHostInterface(const sc_core::sc_module_name& name, const PcieParams& p, HostMemory& memory)
    : sim::Block(name, sim::Clock::from_mhz("pcie.core", p.core_clock_mhz)),
      m_p(p),
      m_link_clock("pcie.link", 1e12 / p.lane_bytes_per_s()),
      m_line{sim::Timeline(&m_link_clock), sim::Timeline(&m_link_clock)},
      m_core_latency(m_clock.cycles(p.core_latency_cycles)),
      m_rc_latency(sim::ns_to_ps(p.root_complex_latency_ns)),
      m_memory(memory) {
    HCASIM_ASSERT(p.lanes > 0 && (p.lanes & (p.lanes - 1)) == 0);
    while ((1 << m_lane_shift) < p.lanes) ++m_lane_shift;
    m_n_tlps[kUp] = &counter("tlps_up");
    m_n_tlps[kDown] = &counter("tlps_down");
    m_n_bytes[kUp] = &counter("bytes_up");
    m_n_bytes[kDown] = &counter("bytes_down");
    m_n_dllps[kUp] = &counter("dllps_up");
    m_n_dllps[kDown] = &counter("dllps_down");
    m_n_read_requests = &counter("dma_read_requests");
    m_n_read_bytes = &counter("dma_read_bytes");
    m_n_write_bytes = &counter("dma_write_bytes");
}

std::uint64_t PcieHostInterface::wire_cycles(std::uint64_t bytes) const {
    // Link widths are powers of two.
    return (bytes + static_cast<std::uint64_t>(m_p.lanes) - 1) >> m_lane_shift;
}

Tick PcieHostInterface::PostedOrder::floor_for(Tick t) const {
    // Ends grow in issue order, so the latest write that entered by t is the
    // one that leaves last among them.
    for (auto it = m_marks.rbegin(); it != m_marks.rend(); ++it)
        if (it->enter <= t) return it->end;
    return m_retired_end;
}

void PcieHostInterface::PostedOrder::add(Tick enter, Tick end) {
    // A write that has left the link by now holds nothing back that is yet
    // to be issued: keep only the newest of those as the floor.
    HCASIM_ASSERT(end >= last_end());  // posted writes leave in the order they were issued
    const Tick now = sim::now_ps();
    while (!m_marks.empty() && m_marks.front().end <= now) {
        m_retired_end = m_marks.front().end;
        m_marks.pop_front();
    }
    m_marks.push_back({enter, end});
}

// TLPs of one kind on one direction, in order, once they have entered the
// transmit queue at t and the ordering rules let them go. Each TLP takes the
// link on its own, so a burst fills the gaps that TLPs booked for later
// leave (a long burst of writes does not wait for one gap that holds all of
// it, and a read request booked ahead of it is not pushed behind it).
PcieHostInterface::Burst PcieHostInterface::send_tlps(int dir, Kind kind, Tick t, const std::uint32_t* wire,
                                                      std::uint32_t count) {
    PostedOrder& posted = m_posted[dir];
    // A posted write passes no posted write (A1a); a read request (B1a) or
    // a completion (D1a) passes no posted write that entered before it.
    const Tick floor = kind == Kind::Posted ? posted.last_end() : posted.floor_for(t);
    const Tick at = std::max(t, floor);
    // A burst's TLPs follow each other in the link's byte stream: TLP i ends
    // on the symbol that carries its last byte.
    m_tlp_cycles.resize(count);
    std::uint64_t bytes = 0;
    std::uint64_t cycles_before = 0;
    for (std::uint32_t i = 0; i < count; ++i) {
        bytes += wire[i];
        const std::uint64_t cycles = wire_cycles(bytes);
        m_tlp_cycles[i] = cycles - cycles_before;
        cycles_before = cycles;
    }
    // A read's timing needs where its first request and each of its
    // completions end; a write's only where it ends.
    const bool timed = kind != Kind::Posted;
    m_tlp_end.resize(timed ? count : 0);
    const auto slot =
        m_line[dir].reserve_in_order(at, m_tlp_cycles.data(), count, timed ? m_tlp_end.data() : nullptr);
    const Burst b{slot.start, timed ? m_tlp_end.front() : slot.end, slot.end};
    if (kind == Kind::Posted) posted.add(t, b.end);
    if (sim::tracer().on()) {
        static const char* const kNames[] = {"posted write", "read request", "completion"};
        sim::tracer().slice(path() + (dir == kUp ? ".up" : ".down"), kNames[static_cast<int>(kind)], b.start, b.end,
                            {{"tlps", count}, {"wire_bytes", bytes}}, sim::tracer().current_flow());
    }
    std::uint32_t& sent = m_tlps[dir];
    const std::uint32_t before = sent;
    sent += count;
    const std::uint32_t dllps = (sent / m_p.tlps_per_ack - before / m_p.tlps_per_ack) +
                                (sent / m_p.tlps_per_fc_update - before / m_p.tlps_per_fc_update);
    if (dllps) send_dllps(1 - dir, {b.start, b.end}, dllps);
    *m_n_tlps[dir] += count;
    *m_n_bytes[dir] += bytes;
    return b;
}

// The receiver of a burst returns ACK and UpdateFC DLLPs on the opposite
// direction as the burst arrives. They take that direction's idle time
// (the serialiser fills the earliest gap) and delay a TLP only when the
// link is busy; a long burst's DLLPs go in groups spread over it.
void PcieHostInterface::send_dllps(int dir, sim::Timeline::Slot during, std::uint32_t count) {
    constexpr std::uint32_t kDllpsPerGroup = 16;
    const std::uint32_t groups = (count + kDllpsPerGroup - 1) / kDllpsPerGroup;
    const Tick span = during.end - during.start;
    for (std::uint32_t g = 0; g < groups; ++g) {
        const std::uint32_t n = std::min(kDllpsPerGroup, count - g * kDllpsPerGroup);
        const Tick due = during.start + span * (g + 1) / groups;
        m_line[dir].reserve(due, wire_cycles(static_cast<std::uint64_t>(n) * m_p.costs.dllp_bytes));
        *m_n_bytes[dir] += static_cast<std::uint64_t>(n) * m_p.costs.dllp_bytes;
    }
    *m_n_dllps[dir] += count;
}

Tick PcieHostInterface::read_slot(Tick t) const {
    // Tags return in order: those due by the time a request could go are
    // free; with none free, the oldest busy one returns first.
    const Tick issue = m_clock.after(t, 0);
    const auto first_busy = std::upper_bound(m_tag_free.begin(), m_tag_free.end(), issue);
    const auto busy = static_cast<std::size_t>(m_tag_free.end() - first_busy);
    if (busy < m_p.read_tags) return t;
    return *(first_busy + static_cast<std::ptrdiff_t>(busy - m_p.read_tags));
}

Tick PcieHostInterface::dma_read(Tick t, std::uint64_t addr, std::uint64_t len) {
    if (len == 0) return t;
    const Tick issue = m_clock.after(t, 0);
    Tick done = t;
    // Requests that have a free tag go out back to back as one burst, and
    // their completions follow each other down the link as one burst. Tags
    // return in order: completions of one link arrive in request order.
    Tick burst_ready = issue;
    auto flush = [&]() {
        const auto burst = static_cast<std::uint32_t>(m_req_wire.size());
        if (burst == 0) return;
        const auto req = send_tlps(kUp, Kind::NonPosted, burst_ready + m_core_latency, m_req_wire.data(), burst);
        const Tick data_ready = req.first_end + m_rc_latency + m_memory.access_latency();
        const Tick last = send_tlps(kDown, Kind::Completion, data_ready, m_cpl_wire.data(),
                                    static_cast<std::uint32_t>(m_cpl_wire.size()))
                              .end;
        const Tick arrived = m_clock.after(last + m_core_latency, 0);
        // Each request's tag returns when its own last completion is in,
        // not when the whole burst's is: a long read keeps the tags busy.
        for (std::uint32_t i = 0; i < burst; ++i)
            m_tag_free.push_back(m_clock.after(m_tlp_end[m_burst_cpl_end[i] - 1] + m_core_latency, 0));
        m_burst_cpl_end.clear();
        m_req_wire.clear();
        m_cpl_wire.clear();
        done = std::max(done, arrived);
        *m_n_read_requests += burst;
    };
    m_req_wire.clear();
    m_cpl_wire.clear();
    m_burst_cpl_end.clear();
    for_each_read_request(addr, len, m_p.mrrs, [&](std::uint64_t a, std::uint32_t n) {
        while (!m_tag_free.empty() && m_tag_free.front() <= burst_ready) m_tag_free.pop_front();
        if (m_tag_free.size() + m_req_wire.size() >= m_p.read_tags) {
            // Out of tags: send what we have, then wait for the oldest.
            flush();
            burst_ready = std::max(burst_ready, m_tag_free.front());
            while (!m_tag_free.empty() && m_tag_free.front() <= burst_ready) m_tag_free.pop_front();
        }
        m_req_wire.push_back(m_p.costs.read_request_wire());
        HCASIM_ASSERT(m_tag_free.size() + m_req_wire.size() <= m_p.read_tags);
        for_each_completion(a, n, m_p.rcb, m_p.mps,
                            [&](std::uint64_t, std::uint32_t cn) { m_cpl_wire.push_back(m_p.costs.completion_wire(cn)); });
        m_burst_cpl_end.push_back(static_cast<std::uint32_t>(m_cpl_wire.size()));
    });
    flush();
    *m_n_read_bytes += len;
    return done;
}

Tick PcieHostInterface::dma_write(Tick t, std::uint64_t addr, std::uint64_t len) {
    const Tick ready = m_clock.after(t, 0) + m_core_latency;
    m_write_wire.clear();
    for_each_write(addr, len, m_p.mps,
                   [&](std::uint64_t, std::uint32_t n) { m_write_wire.push_back(m_p.costs.write_wire(n)); });
    // Posted writes stay in order: a CQE never lands before the payload
    // written ahead of it.
    const Tick last =
        send_tlps(kUp, Kind::Posted, ready, m_write_wire.data(), static_cast<std::uint32_t>(m_write_wire.size())).end;
    *m_n_write_bytes += len;
    return last + m_rc_latency;
}

Tick PcieHostInterface::mmio_write(Tick t, std::uint32_t len) {
    // Doorbells and BlueFlame writes keep their order: a short one never
    // overtakes a longer one written before it.
    const std::uint32_t wire = m_p.costs.write_wire(len);
    const auto burst = send_tlps(kDown, Kind::Posted, t + m_rc_latency, &wire, 1);
    counter("mmio_writes")++;
    return m_clock.after(burst.end + m_core_latency, 0);
}

Tick PcieHostInterface::msix(Tick t) {
    const std::uint32_t wire = m_p.costs.write_wire(4);
    const auto burst = send_tlps(kUp, Kind::Posted, m_clock.after(t, 0) + m_core_latency, &wire, 1);
    counter("msix")++;
    return burst.end + m_rc_latency;
}

}  // namespace hcasim::pcie
