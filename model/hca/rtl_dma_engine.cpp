#include "model/hca/rtl_dma_engine.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "model/pcie/pcie_host_interface.hpp"

namespace hcasim::hca {

RtlDmaEngine::RtlDmaEngine(const sc_core::sc_module_name& name, const HcaParams& p, pcie::PcieHostInterface& pcie,
                           std::uint32_t channels, std::string vcd, bool gate_clock)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)),
      m_pcie(pcie),
      m_mrrs(pcie.params().mrrs),
      m_mps(pcie.params().mps),
      m_vcd(std::move(vcd)),
      m_gate(gate_clock),
      m_channels(channels),
      m_channel_free(channels, 0),
      m_posted(pcie.memory()) {
    if (channels == 0) throw sim::ConfigError("hca.dma.rtl_channels=0: the RTL DMA engine needs at least one channel");
    // A waveform file that cannot be written is a configuration error now,
    // not a failure in the middle of a run.
    if (!m_vcd.empty()) {
        const std::string first = vcd_file(0);
        std::ofstream probe(first);
        if (!probe) throw sim::ConfigError("hca.dma.vcd: cannot write VCD file '" + first + "'");
    }
    m_n_reads = &counter("reads");
    m_n_writes = &counter("writes");
    m_n_read_bytes = &counter("read_bytes");
    m_n_write_bytes = &counter("write_bytes");
}

RtlDmaEngine::~RtlDmaEngine() = default;

std::unique_ptr<rtl::RtlDmaCore> RtlDmaEngine::make_core(const std::string& vcd) {
    return std::make_unique<rtl::RtlDmaCore>(m_clock, m_mrrs, m_mps, vcd, m_gate);
}

// The first channel free at t, or the one that frees first: requests queue
// for an engine instance when all are busy.
rtl::RtlDmaCore& RtlDmaEngine::channel(sim::Tick t) {
    std::size_t pick = 0;
    for (std::size_t k = 0; k < m_channels.size(); ++k) {
        if (m_channel_free[k] <= t) {
            pick = k;
            break;
        }
        if (m_channel_free[k] < m_channel_free[pick]) pick = k;
    }
    if (!m_channels[pick]) m_channels[pick] = make_core(m_vcd.empty() ? "" : vcd_file(pick));
    return *m_channels[pick];
}

// <stem>.<block path>.ch<k>.vcd, stem being hca.dma.vcd without ".vcd".
std::string RtlDmaEngine::vcd_file(std::size_t k) const {
    const auto dot = m_vcd.rfind(".vcd");
    const std::string stem = dot != std::string::npos && dot + 4 == m_vcd.size() ? m_vcd.substr(0, dot) : m_vcd;
    return stem + "." + path() + ".ch" + std::to_string(k) + ".vcd";
}

void RtlDmaEngine::trace_channel0(const std::string& path) {
    if (m_channels[0]) {
        const rtl::CoreStats& s = m_channels[0]->stats();
        m_retired.clocked_cycles += s.clocked_cycles;
        m_retired.elapsed_cycles += s.elapsed_cycles;
        m_retired.read_requests += s.read_requests;
        m_retired.write_tlps += s.write_tlps;
        m_retired.max_inflight = std::max(m_retired.max_inflight, s.max_inflight);
    }
    m_channels[0].reset();
    m_channels[0] = make_core(path);
}

rtl::CoreStats RtlDmaEngine::stats() const {
    rtl::CoreStats sum = m_retired;
    for (const auto& c : m_channels) {
        if (!c) continue;
        sum.clocked_cycles += c->stats().clocked_cycles;
        sum.elapsed_cycles += c->stats().elapsed_cycles;
        sum.read_requests += c->stats().read_requests;
        sum.write_tlps += c->stats().write_tlps;
        sum.max_inflight = std::max(sum.max_inflight, c->stats().max_inflight);
    }
    return sum;
}

sim::Tick RtlDmaEngine::run(sim::Tick t, std::vector<rtl::CoreDescriptor>& d, std::vector<rtl::CoreStatus>& st) {
    st.clear();
    if (d.empty()) return t;
    rtl::RtlDmaCore& core = channel(t);
    sim::Tick done = t;
    // Tags are 8 bits: longer lists run 256 descriptors at a time.
    for (std::size_t first = 0; first < d.size(); first += 256) {
        const std::size_t n = std::min<std::size_t>(256, d.size() - first);
        done = std::max(done, core.run(t, d.data() + first, n, *this, st));
    }
    m_last_max_inflight = core.last_max_inflight();
    for (std::size_t k = 0; k < m_channels.size(); ++k)
        if (m_channels[k].get() == &core) m_channel_free[k] = core.free_at();
    const rtl::CoreStats s = stats();
    counter("rtl_clocked_cycles") = s.clocked_cycles;
    counter("rtl_elapsed_cycles") = s.elapsed_cycles;
    counter("rtl_read_requests") = s.read_requests;
    counter("rtl_write_tlps") = s.write_tlps;
    return done;
}

namespace {

// Spans as descriptors: empty ones dropped, long ones cut at the largest
// descriptor, tags numbered per run of 256.
void to_descriptors(const DmaSpan* spans, std::size_t n, bool write, std::uint8_t* buf,
                    std::vector<rtl::CoreDescriptor>& out) {
    out.clear();
    for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t addr = spans[i].addr;
        std::uint32_t left = spans[i].len;
        while (left > 0) {
            const std::uint32_t len = std::min(left, kDmaMaxDescriptorBytes);
            out.push_back({addr, len, write, static_cast<std::uint8_t>(out.size() % 256), buf});
            buf += len;
            addr += len;
            left -= len;
        }
    }
}

}  // namespace

// The engine's host read: the bytes as host memory holds them when the
// request leaves, with posted writes still on their way (a read does not
// pass them); the completion time from the PCIe model.
sim::Tick RtlDmaEngine::read_request(sim::Tick t, std::uint64_t addr, std::uint32_t len, std::uint8_t* data) {
    m_pcie.memory().read(addr, data, len);
    m_posted.overlay(addr, len, data);
    return m_pcie.dma_read(t, addr, len);
}

sim::Tick RtlDmaEngine::write_tlp(sim::Tick t, std::uint64_t addr, std::uint32_t len, const std::uint8_t* data) {
    const sim::Tick visible = m_pcie.dma_write(t, addr, len);
    m_current.spans.push_back({addr, len});
    m_current.data.insert(m_current.data.end(), data, data + len);
    m_current_visible = std::max(m_current_visible, visible);
    return visible;
}

static void require_ok(const std::vector<rtl::CoreStatus>& st, const std::string& who) {
    for (const auto& s : st)
        if (s.error != 0)
            throw std::runtime_error(who + ": RTL DMA engine reported " +
                                     to_string(static_cast<DmaStatus>(s.error)) + " for a request of the adapter");
}

sim::Tick RtlDmaEngine::read(sim::Tick t, const DmaSpan* spans, std::size_t n, std::uint8_t* dst) {
    to_descriptors(spans, n, false, dst, m_desc);
    const sim::Tick done = run(t, m_desc, m_status);
    require_ok(m_status, path());
    for (std::size_t i = 0; i < n; ++i) *m_n_read_bytes += spans[i].len;
    ++*m_n_reads;
    return done;
}

sim::Tick RtlDmaEngine::do_write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src) {
    // The engine only reads a write's buffer.
    to_descriptors(spans, n, true, const_cast<std::uint8_t*>(src), m_desc);
    m_current.spans.clear();
    m_current.data.clear();
    m_current_visible = t;
    run(t, m_desc, m_status);
    require_ok(m_status, path());
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += spans[i].len;
    *m_n_write_bytes += total;
    ++*m_n_writes;
    if (m_current.spans.empty()) return t;
    return post_current();
}

// Held until the last TLP lands, as the model does: a host polling the
// buffer sees the bytes at the modelled time.
sim::Tick RtlDmaEngine::post_current() {
    const sim::Tick visible = m_current_visible;
    m_posted.push(std::move(m_current), visible);
    m_current = m_posted.spare();
    at(visible, [this]() { m_posted.land(); });
    return visible;
}

sim::Tick RtlDmaEngine::write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src) {
    return do_write(t, spans, n, src);
}

// The RTL copies the payload into its TLPs, so the packet need not be kept.
sim::Tick RtlDmaEngine::write(sim::Tick t, const DmaSpan* spans, std::size_t n, const packet::PacketPtr&,
                              const std::uint8_t* src) {
    return do_write(t, spans, n, src);
}

sim::Tick RtlDmaEngine::execute(sim::Tick t, const DmaDescriptor* d, std::size_t n, std::vector<DmaCompletion>& out) {
    if (n > 256) throw std::invalid_argument("RtlDmaEngine::execute: at most 256 descriptors (8-bit tags)");
    m_desc.clear();
    for (std::size_t i = 0; i < n; ++i) m_desc.push_back({d[i].addr, d[i].len, d[i].to_host, d[i].tag, d[i].buffer});
    m_current.spans.clear();
    m_current.data.clear();
    m_current_visible = t;
    const sim::Tick done = run(t, m_desc, m_status);
    for (const auto& s : m_status) {
        out.push_back({s.tag, static_cast<DmaStatus>(s.error), s.time});
        if (s.error != 0) ++counter("descriptor_errors");
    }
    sim::Tick effects = done;
    if (!m_current.spans.empty()) effects = std::max(effects, post_current());
    return effects;
}

}  // namespace hcasim::hca
