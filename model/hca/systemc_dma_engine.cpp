#include "model/hca/systemc_dma_engine.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "model/pcie/host_bus.hpp"

namespace hcasim::hca {

SystemcDmaEngine::SystemcDmaEngine(const sc_core::sc_module_name& name, const HcaParams& p, pcie::HostBus& bus)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)),
      m_bus(bus),
      m_posted(bus.memory()),
      m_read_engine(&m_clock),
      m_write_engine(&m_clock),
      m_setup(p.dma_setup_cycles) {
    m_n_writes = &counter("writes");
    m_n_read_bytes = &counter("read_bytes");
    m_n_reads = &counter("reads");
    m_n_write_bytes = &counter("write_bytes");
}

sim::Tick SystemcDmaEngine::read(sim::Tick t, const DmaSpan* spans, std::size_t n, std::uint8_t* dst) {
    sim::Tick done = t;
    for (std::size_t i = 0; i < n; ++i) {
        const sim::Tick issue = m_read_engine.reserve(t, m_setup).end;
        done = std::max(done, m_bus.dma_read(issue, spans[i].addr, spans[i].len));
        // The bytes are read when the request is issued: a program must not
        // change a buffer it has posted until the work completes.
        m_bus.memory().read(spans[i].addr, dst, spans[i].len);
        m_posted.overlay(spans[i].addr, spans[i].len, dst);
        HCASIM_LOG(sim::LogLevel::Debug, path(), "read " << spans[i].len << " bytes at 0x" << std::hex << spans[i].addr
                                                         << std::dec << " ready at " << done);
        dst += spans[i].len;
        (*m_n_read_bytes) += spans[i].len;
    }
    (*m_n_reads)++;
    return done;
}

sim::Tick SystemcDmaEngine::write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src) {
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += spans[i].len;
    PostedWrites::Write w = m_posted.spare();
    w.data.assign(src, src + total);
    return issue_write(t, spans, n, std::move(w), total);
}

sim::Tick SystemcDmaEngine::write(sim::Tick t, const DmaSpan* spans, std::size_t n, const packet::PacketPtr& owner,
                           const std::uint8_t* src) {
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += spans[i].len;
    PostedWrites::Write w = m_posted.spare();
    w.owner = owner;
    w.src = src;
    return issue_write(t, spans, n, std::move(w), total);
}

// Hold the bytes until their TLPs land: a host polling the buffer sees them
// at the modelled time.
sim::Tick SystemcDmaEngine::issue_write(sim::Tick t, const DmaSpan* spans, std::size_t n, PostedWrites::Write&& w,
                                    std::size_t total) {
    sim::Tick visible = t;
    for (std::size_t i = 0; i < n; ++i) {
        const sim::Tick issue = m_write_engine.reserve(t, m_setup).end;
        visible = std::max(visible, m_bus.dma_write(issue, spans[i].addr, spans[i].len));
    }
    w.spans.assign(spans, spans + n);
    m_posted.push(std::move(w), visible);
    HCASIM_LOG(sim::LogLevel::Debug, path(), "write " << total << " bytes to 0x" << std::hex << spans[0].addr << std::dec
                                                       << " visible at " << visible);
    at(visible, [this]() { m_posted.land(); });
    ++*m_n_writes;
    *m_n_write_bytes += total;
    return visible;
}

sim::Tick SystemcDmaEngine::last_write_visible() const { return m_posted.last_visible(); }

// Descriptors issued together: each is checked, then read or written as
// the other blocks' requests are. Statuses are reported in order, so one
// waits for those before it.
sim::Tick SystemcDmaEngine::execute(sim::Tick t, const DmaDescriptor* d, std::size_t n, std::vector<DmaCompletion>& out) {
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
