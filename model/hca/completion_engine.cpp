#include "model/hca/completion_engine.hpp"

#include <algorithm>
#include <cstring>

#include "model/sim/tracer.hpp"

namespace hcasim::hca {

CompletionEngine::CompletionEngine(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_w(w), m_pipe(&m_clock),
      m_cycles(p.cqe_cycles) {}

bool CompletionEngine::post(sim::Tick t, std::uint32_t cqn, Cqe cqe) {
    CqContext* cq = m_w.cqs.cq(cqn);
    if (!cq) {
        counter("cqe_to_missing_cq")++;
        return false;
    }
    if (cq->overrun) {
        counter("cqe_dropped_overrun")++;
        return false;
    }
    // The CQ's producer index and ring address are in its context.
    sim::Tick ready = m_w.cqs.cq_context_ready(cqn, m_pipe.reserve(t, m_cycles).end);
    const auto full = [cq] { return cq->producer - cq->cached_consumer >= cq->entries(); };
    // The consumer index read ahead of need (below) counts once it is on
    // chip; a CQE that finds the CQ full waits for it rather than read again.
    if (cq->refresh_pending && (cq->refresh_at <= ready || full())) {
        ready = std::max(ready, cq->refresh_at);
        cq->refresh_pending = false;
        // An arm doorbell since may have told more.
        if (static_cast<std::int32_t>(cq->refresh_consumer - cq->cached_consumer) > 0)
            cq->cached_consumer = cq->refresh_consumer;
    }
    if (full()) {
        // Looks full: re-read the consumer index the driver published.
        CqDoorbellRecord rec;
        ready = m_w.dma.read(ready, cq->db_record, sizeof rec, &rec);
        cq->cached_consumer = rec.consumer_index;
        counter("consumer_index_reads")++;
        if (full()) {
            cq->overrun = true;
            counter("cq_overruns")++;
            HCASIM_LOG(sim::LogLevel::Info, path(), "CQ " << cqn << " overrun, CQE for QP " << cqe.qpn << " lost");
            m_w.errors.raise_async(ready, AsyncEvent{AsyncEventType::CqError, cqn});
            return false;
        }
    }
    const std::uint32_t slot = cq->producer & (cq->entries() - 1);
    cqe.owner = static_cast<std::uint8_t>((cq->producer >> cq->log_size) & 1);
    set_cqe_timestamp(cqe, m_clock.count_at(ready));
    ++cq->producer;
    const sim::Tick visible = m_w.dma.write(ready, cq->ring + static_cast<std::uint64_t>(slot) * sizeof(Cqe), &cqe,
                                                sizeof(Cqe));
    counter("cqes")++;
    if (sim::tracer().on()) {
        // A send CQE ends its work request's flow; a receive CQE is a step
        // of the sender's.
        const bool send_cqe = cqe.flags & kCqeIsSend;
        const std::uint64_t flow = send_cqe ? sim::Tracer::flow_of(path(), cqe.qpn, cqe.wqe_index) : sim::tracer().current_flow();
        sim::tracer().slice(path(), send_cqe ? "send CQE" : "receive CQE", t, visible,
                            {{"cq", cqn}, {"qp", cqe.qpn}, {"status", cqe.status}}, flow, send_cqe);
    }
    // A CQE that takes the last slot the adapter knows to be free starts a
    // read of the consumer index at once, beside its own write: the host
    // frees slots while the next CQE's work is under way, so that CQE finds
    // them known instead of waiting a PCIe read round trip for the record.
    // Without this a CQ of two entries (ibv_create_cq(1), as perftest's
    // latency tests make with TX depth 1) made every other completion wait
    // for the read: ib_read_lat alternated 1.62 and 2.17 us.
    if (full() && !cq->refresh_pending) {
        CqDoorbellRecord rec;
        cq->refresh_at = m_w.dma.read(ready, cq->db_record, sizeof rec, &rec);
        cq->refresh_consumer = rec.consumer_index;
        cq->refresh_pending = true;
        counter("consumer_index_refreshes")++;
    }
    if (cqe.status != 0) {
        // As rdma_hw_stats splits them: requester (send queue) or responder
        // (receive queue), flushes apart from errors.
        const bool req = cqe.flags & kCqeIsSend;
        QpContext* qp = m_w.qps.context(cqe.qpn, ready).qp;
        if (static_cast<CqeStatus>(cqe.status) == CqeStatus::WrFlush) {
            counter(req ? "req_cqe_flush_errors" : "resp_cqe_flush_errors")++;
            if (qp) ++(req ? qp->counters.req_cqe_flush_error : qp->counters.resp_cqe_flush_error);
        } else {
            counter(req ? "req_cqe_errors" : "resp_cqe_errors")++;
            if (qp) ++(req ? qp->counters.req_cqe_error : qp->counters.resp_cqe_error);
        }
    }
    if (cq->listener) cq->listener->cqe_written(cqn, visible);
    if (cq->armed && (!cq->armed_solicited || (cqe.flags & kCqeSolicited) || cqe.status != 0)) {
        cq->armed = false;
        m_w.interrupts.raise_completion(visible, cqn);
    }
    return true;
}

void CompletionEngine::arm(sim::Tick t, std::uint32_t cqn, std::uint32_t consumer, bool solicited) {
    CqContext* cq = m_w.cqs.cq(cqn);
    if (!cq) return;
    cq->cached_consumer = consumer;
    // The arm names the consumer index the host had polled to. CQEs written
    // beyond it, while the doorbell was on its way, raise the event at once
    // (as ConnectX's arm does): a host that polled empty, armed and polled
    // empty again would otherwise sleep through them.
    if (!solicited && cq->producer != consumer) {
        cq->armed = false;
        m_w.interrupts.raise_completion(t, cqn);
        return;
    }
    cq->armed = true;
    cq->armed_solicited = solicited;
}

}  // namespace hcasim::hca
