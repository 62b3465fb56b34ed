#include "model/hca/dma_engine.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "model/pcie/pcie_host_interface.hpp"

namespace hcasim::hca {

DmaEngine::DmaEngine(const sc_core::sc_module_name& name, const HcaParams& p, pcie::PcieHostInterface& pcie)
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

sim::Tick DmaEngine::read(sim::Tick t, const DmaSpan* spans, std::size_t n, std::uint8_t* dst) {
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

sim::Tick DmaEngine::read(sim::Tick t, std::uint64_t addr, std::uint32_t len, void* dst) {
    const DmaSpan s{addr, len};
    return read(t, &s, 1, static_cast<std::uint8_t*>(dst));
}

DmaEngine::PendingWrite DmaEngine::spare() {
    PendingWrite w;
    if (!m_spare.empty()) {
        w = std::move(m_spare.back());
        m_spare.pop_back();
    }
    return w;
}

sim::Tick DmaEngine::write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src) {
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += spans[i].len;
    PendingWrite w = spare();
    w.data.assign(src, src + total);
    return issue_write(t, spans, n, std::move(w), total);
}

sim::Tick DmaEngine::write(sim::Tick t, const DmaSpan* spans, std::size_t n, const packet::PacketPtr& owner,
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
sim::Tick DmaEngine::issue_write(sim::Tick t, const DmaSpan* spans, std::size_t n, PendingWrite&& w, std::size_t total) {
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
void DmaEngine::overlay_pending(const DmaSpan& r, std::uint8_t* dst) const {
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

sim::Tick DmaEngine::last_write_visible() const { return m_last_visible; }

void DmaEngine::apply_oldest() {
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

sim::Tick DmaEngine::write(sim::Tick t, std::uint64_t addr, const void* src, std::uint32_t len) {
    const DmaSpan s{addr, len};
    return write(t, &s, 1, static_cast<const std::uint8_t*>(src));
}

}  // namespace hcasim::hca
