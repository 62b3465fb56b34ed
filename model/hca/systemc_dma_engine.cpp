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
      m_setup(p.dma_setup_cycles),
      m_datapath_bytes(p.datapath_bytes) {
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

// Descriptors issued together: each is checked, then the read half and the
// write half work on their own descriptors concurrently, each in order, as
// the Verilog engine's do. Their requests reach the bus in time order, one
// read request or one write TLP at a time: a read request waits for a free
// tag and behind the write TLPs that entered before it, and a write streams
// one datapath beat a cycle, its TLPs taking the link between the reads'
// requests. Statuses are reported in order, so one waits for those before it.
sim::Tick SystemcDmaEngine::execute(sim::Tick t, const DmaDescriptor* d, std::size_t n, std::vector<DmaCompletion>& out) {
    struct Half {
        std::vector<std::size_t> queue;  // its descriptors, in order
        std::size_t next = 0;            // the one being worked on
        std::uint64_t offset = 0;        // bytes of it done
        sim::Tick ready = 0;             // when it can issue its next request
    };
    Half halves[2];  // reads, writes
    std::vector<sim::Tick> done(n, t);
    std::vector<DmaStatus> status(n);
    for (std::size_t i = 0; i < n; ++i) {
        status[i] = check_descriptor(d[i].addr, d[i].len);
        if (status[i] == DmaStatus::Ok) {
            halves[d[i].to_host ? 1 : 0].queue.push_back(i);
        } else {
            done[i] = m_clock.after(t, m_setup);
            ++counter("descriptor_errors");
        }
    }
    halves[0].ready = halves[1].ready = t;
    for (;;) {
        // The half whose next request is due first (at a tie, the one on the
        // earlier descriptor) issues it.
        Half* h = nullptr;
        for (Half& c : halves) {
            if (c.next == c.queue.size()) continue;
            if (!h || c.ready < h->ready || (c.ready == h->ready && c.queue[c.next] < h->queue[h->next])) h = &c;
        }
        if (!h) break;
        const std::size_t i = h->queue[h->next];
        const bool write = h == &halves[1];
        if (h->offset == 0) h->ready = (write ? m_write_engine : m_read_engine).reserve(h->ready, m_setup).end;
        const std::uint64_t addr = d[i].addr + h->offset;
        const std::uint64_t left = d[i].len - h->offset;
        std::uint8_t* buf = d[i].buffer + h->offset;
        std::uint64_t len;
        if (write) {
            // One TLP: up to the next max-payload boundary.
            const std::uint64_t mps = m_bus.max_write_request();
            len = std::min(left, mps - (addr & (mps - 1)));
            PostedWrites::Write w = m_posted.spare();
            w.data.assign(buf, buf + len);
            w.spans.assign(1, DmaSpan{addr, static_cast<std::uint32_t>(len)});
            const sim::Tick visible = m_bus.dma_write(h->ready, addr, len);
            m_posted.push(std::move(w), visible);
            at(visible, [this]() { m_posted.land(); });
            done[i] = std::max(done[i], visible);
            h->ready += m_clock.cycles((len + m_datapath_bytes - 1) / m_datapath_bytes);
        } else {
            // One read request: at most the max read request size, never
            // across a 4 KiB boundary.
            const std::uint64_t to_page = 4096 - (addr & 4095);
            len = std::min({left, static_cast<std::uint64_t>(m_bus.max_read_request()), to_page});
            h->ready = m_bus.read_slot(h->ready);
            done[i] = std::max(done[i], m_bus.dma_read(h->ready, addr, len));
            m_bus.memory().read(addr, buf, len);
            m_posted.overlay(addr, len, buf);
        }
        h->offset += len;
        if (h->offset == d[i].len) {
            ++h->next;
            h->offset = 0;
            ++*(write ? m_n_writes : m_n_reads);
            *(write ? m_n_write_bytes : m_n_read_bytes) += d[i].len;
        }
    }
    sim::Tick reported = t;
    sim::Tick effects = t;
    for (std::size_t i = 0; i < n; ++i) {
        effects = std::max(effects, done[i]);
        reported = std::max(reported, done[i]);
        out.push_back({d[i].tag, status[i], reported});
    }
    return effects;
}

}  // namespace hcasim::hca
