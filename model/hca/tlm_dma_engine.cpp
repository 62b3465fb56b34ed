#include "model/hca/tlm_dma_engine.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "model/pcie/pcie_host_interface.hpp"

namespace hcasim::hca {

TlmDmaEngine::TlmDmaEngine(const sc_core::sc_module_name& name, const HcaParams& p, pcie::PcieHostInterface& pcie)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)),
      m_pcie(pcie),
      m_read_engine(&m_clock),
      m_write_engine(&m_clock),
      m_setup(p.dma_setup_cycles) {
    m_n_writes = &counter("writes");
    m_n_read_bytes = &counter("read_bytes");
    m_n_reads = &counter("reads");
    m_n_write_bytes = &counter("write_bytes");
}

sim::Tick TlmDmaEngine::read(sim::Tick t, const DmaSpan* spans, std::size_t n, std::uint8_t* dst) {
    sim::Tick done = t;
    for (std::size_t i = 0; i < n; ++i) {
        const sim::Tick issue = m_read_engine.reserve(t, m_setup).end;
        done = std::max(done, m_pcie.dma_read(issue, spans[i].addr, spans[i].len));
        // The bytes are read when the request is issued: a program must not
        // change a buffer it has posted until the work completes.
        m_pcie.memory().read(spans[i].addr, dst, spans[i].len);
        overlay_pending(spans[i], dst);
        HCASIM_LOG(sim::LogLevel::Debug, path(), "read " << spans[i].len << " bytes at 0x" << std::hex << spans[i].addr
                                                         << std::dec << " ready at " << done);
        dst += spans[i].len;
        (*m_n_read_bytes) += spans[i].len;
    }
    (*m_n_reads)++;
    return done;
}

TlmDmaEngine::PendingWrite TlmDmaEngine::spare() {
    PendingWrite w;
    if (!m_spare.empty()) {
        w = std::move(m_spare.back());
        m_spare.pop_back();
    }
    return w;
}

sim::Tick TlmDmaEngine::write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src) {
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += spans[i].len;
    PendingWrite w = spare();
    w.data.assign(src, src + total);
    return issue_write(t, spans, n, std::move(w), total);
}

sim::Tick TlmDmaEngine::write(sim::Tick t, const DmaSpan* spans, std::size_t n, const packet::PacketPtr& owner,
                           const std::uint8_t* src) {
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += spans[i].len;
    PendingWrite w = spare();
    w.owner = owner;
    w.src = src;
    return issue_write(t, spans, n, std::move(w), total);
}

// Hold the bytes until their TLPs land: a host polling the buffer sees them
// at the modelled time. Posted writes land in issue order, so the pending
// writes form a queue.
sim::Tick TlmDmaEngine::issue_write(sim::Tick t, const DmaSpan* spans, std::size_t n, PendingWrite&& w, std::size_t total) {
    sim::Tick visible = t;
    for (std::size_t i = 0; i < n; ++i) {
        const sim::Tick issue = m_write_engine.reserve(t, m_setup).end;
        visible = std::max(visible, m_pcie.dma_write(issue, spans[i].addr, spans[i].len));
    }
    w.spans.assign(spans, spans + n);
    m_pending.push_back(std::move(w));
    HCASIM_LOG(sim::LogLevel::Debug, path(), "write " << total << " bytes to 0x" << std::hex << spans[0].addr << std::dec
                                                       << " visible at " << visible);
    at(visible, [this]() { apply_oldest(); });
    m_last_visible = std::max(m_last_visible, visible);
    ++*m_n_writes;
    *m_n_write_bytes += total;
    return visible;
}

// A read may not pass posted writes issued before it (PCIe ordering): bytes
// still on their way to host memory are what the read returns.
void TlmDmaEngine::overlay_pending(const DmaSpan& r, std::uint8_t* dst) const {
    const std::uint64_t r_end = r.addr + r.len;
    for (const PendingWrite& w : m_pending) {
        std::size_t off = 0;
        for (const DmaSpan& s : w.spans) {
            const std::uint64_t lo = std::max(r.addr, s.addr);
            const std::uint64_t hi = std::min(r_end, s.addr + s.len);
            if (lo < hi) std::memcpy(dst + (lo - r.addr), w.bytes() + off + (lo - s.addr), hi - lo);
            off += s.len;
        }
    }
}

sim::Tick TlmDmaEngine::last_write_visible() const { return m_last_visible; }

void TlmDmaEngine::apply_oldest() {
    PendingWrite& w = m_pending.front();
    const std::uint8_t* p = w.bytes();
    for (const auto& s : w.spans) {
        m_pcie.memory().write(s.addr, p, s.len);
        p += s.len;
    }
    w.owner.reset();
    if (m_spare.size() < 64) m_spare.push_back(std::move(w));
    m_pending.pop_front();
}

// Descriptors issued together: each is checked, then read or written as
// the other blocks' requests are. Statuses are reported in order, so one
// waits for those before it.
sim::Tick TlmDmaEngine::execute(sim::Tick t, const DmaDescriptor* d, std::size_t n, std::vector<DmaCompletion>& out) {
    sim::Tick reported = t;
    sim::Tick effects = t;
    for (std::size_t i = 0; i < n; ++i) {
        const DmaStatus st = check_descriptor(d[i].addr, d[i].len);
        sim::Tick done = m_clock.after(t, m_setup);
        if (st == DmaStatus::Ok) {
            const DmaSpan s{d[i].addr, d[i].len};
            done = d[i].to_host ? write(t, &s, 1, d[i].buffer) : read(t, &s, 1, d[i].buffer);
        } else {
            ++counter("descriptor_errors");
        }
        effects = std::max(effects, done);
        reported = std::max(reported, done);
        out.push_back({d[i].tag, st, reported});
    }
    return effects;
}

}  // namespace hcasim::hca
