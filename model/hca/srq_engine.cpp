#include "model/hca/srq_engine.hpp"

#include <algorithm>
#include <cstring>

#include "model/sim/assert.hpp"

namespace hcasim::hca {

bool parse_recv_wqe(const std::uint8_t* wqe, std::uint32_t max_sge, RecvWork& w) {
    RecvWqeCtrl ctrl;
    std::memcpy(&ctrl, wqe, sizeof ctrl);
    w.wqe_index = ctrl.wqe_index;
    w.malformed = ctrl.num_sge > max_sge;
    const std::uint32_t n = std::min<std::uint32_t>(ctrl.num_sge, max_sge);
    w.sges.resize(n);
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        std::memcpy(&w.sges[i], wqe + sizeof(RecvWqeCtrl) + i * sizeof(DataSeg), sizeof(DataSeg));
        total += w.sges[i].length;
    }
    w.length = static_cast<std::uint32_t>(std::min<std::uint64_t>(total, 0xffffffffull));
    return !w.malformed;
}

SrqEngine::SrqEngine(const sc_core::sc_module_name& name, const HcaParams& p, DmaEngine& dma, QpErrorHandler& events)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)),
      m_p(p),
      m_dma(dma),
      m_events(events),
      m_parser(&m_clock) {}

SrqContext& SrqEngine::install(std::uint32_t srqn) {
    if (m_srqs.size() <= srqn) m_srqs.resize(srqn + 1);
    if (!find(srqn)) ++m_live;
    m_srqs[srqn] = std::make_unique<SrqContext>();
    m_srqs[srqn]->valid = true;
    m_srqs[srqn]->srqn = srqn;
    return *m_srqs[srqn];
}

void SrqEngine::remove(std::uint32_t srqn) {
    if (!find(srqn)) return;
    // A fetch in flight finds the context gone when it lands.
    m_srqs[srqn].reset();
    --m_live;
}

sim::Tick SrqEngine::read_record(SrqContext& srq, sim::Tick t) {
    RqDoorbellRecord rec{};
    t = m_dma.read(t, srq.db_record, sizeof rec, &rec);
    counter("record_reads")++;
    // The driver only moves its count forward; an older value changes nothing.
    const auto posted = static_cast<std::uint16_t>(rec.producer_index);
    if (static_cast<std::int16_t>(posted - srq.posted) > 0) srq.posted = posted;
    return t;
}

sim::Tick SrqEngine::fetch(SrqContext& srq, sim::Tick t, bool demand) {
    if (srq.failed) return t;
    if (demand && srq.fetched == srq.posted) t = read_record(srq, t);
    if ((srq.fetch_busy && !demand) || srq.fetched == srq.posted || srq.cache.size() >= m_p.srq_prefetch_depth) return t;
    const std::uint32_t pending = static_cast<std::uint16_t>(srq.posted - srq.fetched);
    const std::uint32_t room = m_p.srq_prefetch_depth - static_cast<std::uint32_t>(srq.cache.size());
    const std::uint32_t first = srq.head & (srq.entries() - 1);
    // The list usually runs through consecutive slots: one DMA reads the
    // slots after the head up to the ring's end, and the WQEs are taken for
    // as long as each one's next slot is the one read after it.
    const std::uint32_t n = std::min({pending, room, srq.entries() - first});
    const std::uint32_t stride = 1u << srq.log_stride;
    m_buf.resize(static_cast<std::size_t>(n) * stride);
    const sim::Tick fetched = m_dma.read(t, srq.base + static_cast<std::uint64_t>(first) * stride, n * stride, m_buf.data());
    std::uint32_t taken = 0;
    std::vector<RecvWork> works;
    for (std::uint32_t slot = first; taken < n;) {
        const std::uint8_t* wqe = m_buf.data() + static_cast<std::size_t>(slot - first) * stride;
        RecvWork w;
        parse_recv_wqe(wqe, srq.max_sge, w);
        // The slot, not the driver's counter, names the WQE in its CQE.
        w.wqe_index = static_cast<std::uint16_t>(slot);
        works.push_back(std::move(w));
        ++taken;
        RecvWqeCtrl ctrl;
        std::memcpy(&ctrl, wqe, sizeof ctrl);
        const std::uint32_t next = ctrl.next_index & (srq.entries() - 1);
        srq.head = static_cast<std::uint16_t>(next);
        if (next != slot + 1) break;
        slot = next;
    }
    const sim::Tick parsed = m_parser.reserve(fetched, static_cast<std::uint64_t>(m_p.wqe_parse_cycles) * taken).end;
    for (auto& w : works) {
        w.ready_at = parsed;
        srq.cache.push_back(std::move(w));
    }
    srq.fetched = static_cast<std::uint16_t>(srq.fetched + taken);
    HCASIM_ASSERT(srq.cache.size() <= m_p.srq_prefetch_depth);
    counter("fetches")++;
    counter("wqes") += taken;
    srq.fetch_busy = true;
    const std::uint32_t srqn = srq.srqn;
    at(parsed, [this, srqn, parsed]() {
        SrqContext* s = find(srqn);
        if (!s) return;
        s->fetch_busy = false;
        fetch(*s, parsed, false);
    });
    return t;
}

sim::Tick SrqEngine::take(QpContext& qp, SrqContext& srq, sim::Tick t, bool demand) {
    if (!qp.fetch.rq_cache.empty()) return t;
    if (srq.cache.empty()) {
        if (!demand) {
            fetch(srq, t, false);
            return t;
        }
        t = fetch(srq, t, true);
        if (srq.cache.empty()) return t;
    }
    if (srq.failed) return t;
    if (srq.cache.front().malformed) {
        // A WQE the engine cannot give out: the SRQ is broken for every QP
        // on it (SRQ error, each QP fatal).
        HCASIM_LOG(sim::LogLevel::Info, path(), "SRQ " << srq.srqn << " WQE " << srq.cache.front().wqe_index
                                                       << " is malformed: the SRQ fails");
        srq.failed = true;
        srq.cache.clear();
        counter("srq_errors")++;
        m_events.fail_srq(srq.srqn, t);
        return t;
    }
    qp.fetch.rq_cache.push_back(std::move(srq.cache.front()));
    srq.cache.pop_front();
    ++srq.taken;
    counter("wqes_taken")++;
    check_limit(srq, t);
    fetch(srq, t, false);
    return t;
}

void SrqEngine::top_up(SrqContext& srq, sim::Tick t) {
    // Once every WQE the engine knows of is on chip, it reads the record
    // ahead of need, so a host that keeps posting never makes a message wait.
    if (srq.fetched == srq.posted && srq.cache.size() < m_p.srq_prefetch_depth) t = read_record(srq, t);
    fetch(srq, t, false);
}

void SrqEngine::arm(SrqContext& srq, std::uint32_t limit, sim::Tick t) {
    srq.limit = limit;
    check_limit(srq, t);
}

void SrqEngine::check_limit(SrqContext& srq, sim::Tick t) {
    if (!srq.limit || static_cast<std::uint16_t>(srq.posted - srq.taken) >= srq.limit) return;
    // What the engine knows may be old: it counts again from the record
    // before it tells the consumer the queue runs low.
    t = read_record(srq, t);
    if (static_cast<std::uint16_t>(srq.posted - srq.taken) >= srq.limit) return;
    srq.limit = 0;
    counter("limit_events")++;
    m_events.raise_async(t, AsyncEvent{AsyncEventType::SrqLimitReached, srq.srqn});
}

}  // namespace hcasim::hca
