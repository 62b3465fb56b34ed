#include "model/hca/wqe_fetch_engine.hpp"

#include <algorithm>
#include <cstring>

#include "model/hca/srq_engine.hpp"  // parse_recv_wqe
#include "model/sim/assert.hpp"
#include "model/sim/tracer.hpp"

namespace hcasim::hca {

WqeFetchEngine::WqeFetchEngine(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_w(w), m_p(p), m_parser(&m_clock) {}

bool WqeFetchEngine::parse_send(QpContext& qp, const std::uint8_t* wqe, std::uint32_t bytes, SendWork& w) {
    SendWqeCtrl ctrl;
    std::memcpy(&ctrl, wqe, sizeof ctrl);
    w.wqe_index = ctrl.wqe_index;
    w.op = static_cast<WqeOpcode>(ctrl.opcode);
    w.flags = ctrl.flags;
    w.imm = ctrl.imm_data;
    std::uint32_t off = sizeof(SendWqeCtrl);
    if (ctrl.opcode > static_cast<std::uint8_t>(WqeOpcode::SendInvalidate)) return false;
    // An operation the QP's transport does not have is a local QP operation error.
    const TransportService& svc = qp.service();
    const bool read = w.op == WqeOpcode::RdmaRead;
    const bool write = w.op == WqeOpcode::RdmaWrite || w.op == WqeOpcode::RdmaWriteImm;
    const bool atomic = is_atomic(w.op);
    if ((read && !svc.reads) || (write && !svc.writes) || (atomic && !svc.atomics)) return false;
    if (qp.qpc.type == QpType::XrcInitiator) {
        XrcSeg xs;
        if (off + sizeof xs > bytes) return false;
        std::memcpy(&xs, wqe + off, sizeof xs);
        w.xrc_srqn = xs.remote_srqn & kPsnMask;
        off += sizeof xs;
    }
    // Memory windows are bound and invalidated on connected IB services;
    // only an acknowledged one (RC) asks its peer to invalidate.
    if (is_local_operation(w.op) && (!svc.connected || svc.vi)) return false;
    if (w.op == WqeOpcode::SendInvalidate && (!svc.acknowledged || svc.vi)) return false;
    if (w.op == WqeOpcode::BindWindow) {
        if (off + sizeof w.bind > bytes) return false;
        std::memcpy(&w.bind, wqe + off, sizeof w.bind);
        return true;
    }
    if (w.op == WqeOpcode::LocalInvalidate) return true;
    if (read || write || atomic) {
        RemoteAddrSeg ra;
        std::memcpy(&ra, wqe + off, sizeof ra);
        w.raddr = ra.remote_addr;
        w.rkey = ra.rkey;
        off += sizeof(RemoteAddrSeg);
    }
    if (atomic) {
        AtomicSeg as;
        std::memcpy(&as, wqe + off, sizeof as);
        w.swap_add = as.swap_add;
        w.compare = as.compare;
        off += sizeof as;
    }
    if (!svc.connected) {
        DatagramSeg dg;
        if (off + sizeof dg > bytes) return false;
        std::memcpy(&dg, wqe + off, sizeof dg);
        w.ud.dest_qpn = dg.dest_qpn & kPsnMask;
        // IBA 10.2.5: a Q_Key with the high-order bit set means the QP's own.
        w.ud.qkey = (dg.qkey & 0x80000000u) ? qp.qpc.qkey : dg.qkey;
        w.ud.dlid = dg.dlid;
        w.ud.sl = dg.sl;
        w.ud.grh.present = (dg.flags & kDatagramGlobal) != 0;
        w.ud.grh.sgid_index = dg.sgid_index;
        w.ud.grh.hop_limit = dg.hop_limit;
        w.ud.grh.traffic_class = dg.traffic_class;
        w.ud.grh.flow_label = dg.flow_label;
        std::memcpy(w.ud.grh.dgid, dg.dgid, sizeof dg.dgid);
        off += sizeof dg;
    }
    if (w.flags & kWqeInline) {
        if (ctrl.inline_bytes > qp.qpc.max_inline || off + ctrl.inline_bytes > bytes) return false;
        w.inline_data.assign(wqe + off, wqe + off + ctrl.inline_bytes);
        w.length = ctrl.inline_bytes;
    } else {
        if (ctrl.num_sge > qp.qpc.max_send_sge || off + ctrl.num_sge * sizeof(DataSeg) > bytes) return false;
        w.sges.resize(ctrl.num_sge);
        std::uint64_t total = 0;
        for (std::uint32_t i = 0; i < ctrl.num_sge; ++i) {
            std::memcpy(&w.sges[i], wqe + off + i * sizeof(DataSeg), sizeof(DataSeg));
            total += w.sges[i].length;
        }
        if (total > 0x80000000ull) return false;
        w.length = static_cast<std::uint32_t>(total);
    }
    return true;
}

void WqeFetchEngine::fetch_send(QpContext& qp, sim::Tick t) {
    if (qp.is_vi()) {
        m_w.descriptors.fetch(qp, false, t);
        return;
    }
    if (qp.fetch.sq_fetch_busy || qp.fetch.sq_fetched == qp.fetch.sq_pi) return;
    const std::uint32_t pending = static_cast<std::uint16_t>(qp.fetch.sq_pi - qp.fetch.sq_fetched);
    const std::uint32_t mask = qp.sq_entries() - 1;
    const std::uint32_t first = qp.fetch.sq_fetched & mask;
    // One DMA read covers consecutive WQEs up to the end of the ring.
    const std::uint32_t n = std::min({pending, m_p.wqe_fetch_batch, qp.sq_entries() - first});
    const std::uint32_t stride = 1u << qp.qpc.sq_log_stride;
    m_buf.resize(static_cast<std::size_t>(n) * stride);
    // The fetch's DMA serves the first of its WQEs in a trace.
    const sim::Tracer::Scope flow(sim::tracer(), sim::tracer().on() ? sim::Tracer::flow_of(path(), qp.qpn, static_cast<std::uint16_t>(qp.fetch.sq_fetched)) : 0);
    const sim::Tick fetched = m_w.dma.read(t, qp.qpc.sq_base + first * stride, n * stride, m_buf.data());
    const sim::Tick parsed = m_parser.reserve(fetched, static_cast<std::uint64_t>(m_p.wqe_parse_cycles) * n).end;
    std::vector<SendWork> works(n);
    bool bad = false;
    for (std::uint32_t i = 0; i < n && !bad; ++i) {
        if (!parse_send(qp, m_buf.data() + static_cast<std::size_t>(i) * stride, stride, works[i])) {
            works[i].error = CqeStatus::LocalQpOperation;
            works[i].wqe_index = static_cast<std::uint16_t>(qp.fetch.sq_fetched + i);
            works.resize(i + 1);
            bad = true;
        }
    }
    if (sim::tracer().on()) {
        std::vector<std::uint64_t> flows;
        for (const auto& w : works) flows.push_back(sim::Tracer::flow_of(path(), qp.qpn, w.wqe_index));
        sim::tracer().slice(path(), "WQE fetch", t, parsed, {{"qp", qp.qpn}, {"wqes", works.size()}}, flows);
    }
    qp.fetch.sq_fetch_busy = true;
    // The send side works on this QP until its last packet is out.
    hold_for_send(m_w.qps, qp);
    counter("send_fetches")++;
    counter("send_wqes") += works.size();
    const std::uint32_t qpn = qp.qpn;
    at(parsed, [this, qpn, parsed, works = std::move(works)]() mutable {
        const QpAccess found = m_w.qps.context(qpn, parsed);
        QpContext* q = found.qp;
        if (!q) return;
        const sim::Tick t = found.ready;
        q->fetch.sq_fetch_busy = false;
        for (auto& w : works) {
            q->req.send_q.push_back(std::move(w));
            ++q->fetch.sq_fetched;
        }
        if (q->qpc.state == QpState::Sqe) {
            release_after_send(m_w.qps, *q);
            m_w.errors.flush_send(*q, t);
            return;
        }
        if (q->qpc.state == QpState::Err) {
            release_after_send(m_w.qps, *q);
            m_w.errors.flush(*q, t);
            return;
        }
        m_w.tx.kick(*q, t);
    });
}

sim::Tick WqeFetchEngine::blueflame(QpContext& qp, const std::vector<std::uint8_t>& wqe, sim::Tick t) {
    // Usable only when it is exactly the next WQE and nothing is being fetched;
    // otherwise the ring copy is fetched as usual.
    if (qp.fetch.sq_fetch_busy || static_cast<std::uint16_t>(qp.fetch.sq_pi - qp.fetch.sq_fetched) != 1 || wqe.size() < sizeof(SendWqeCtrl))
        return t;
    SendWork w;
    if (!parse_send(qp, wqe.data(), static_cast<std::uint32_t>(wqe.size()), w) || w.wqe_index != qp.fetch.sq_fetched)
        return t;
    const sim::Tick parsed = m_parser.reserve(t, m_p.wqe_parse_cycles).end;
    if (sim::tracer().on())
        sim::tracer().slice(path(), "BlueFlame WQE", t, parsed, {{"qp", qp.qpn}},
                            sim::Tracer::flow_of(path(), qp.qpn, w.wqe_index));
    ++qp.fetch.sq_fetched;
    qp.req.send_q.push_back(std::move(w));
    counter("blueflame_wqes")++;
    return parsed;
}

sim::Tick WqeFetchEngine::read_recv_record(QpContext& qp, sim::Tick t) {
    RqDoorbellRecord rec{};
    t = m_w.dma.read(t, qp.qpc.rq_db_record, sizeof rec, &rec);
    counter("recv_record_reads")++;
    // The driver only moves its index forward; a value behind what the
    // adapter already knows is stale and changes nothing.
    const auto posted = static_cast<std::uint16_t>(rec.producer_index);
    if (static_cast<std::int16_t>(posted - qp.fetch.rq_pi) > 0) qp.fetch.rq_pi = posted;
    return t;
}

void WqeFetchEngine::recv_consumed(QpContext& qp, sim::Tick t) {
    if (qp.recv_srqn()) {
        if (SrqContext* srq = m_w.srqs.srq(qp.recv_srqn())) m_w.srqs.top_up(*srq, t);
        return;
    }
    if (!qp.is_vi() && qp.fetch.rq_fetched == qp.fetch.rq_pi && qp.qpc.rq_db_record) t = read_recv_record(qp, t);
    prefetch_recv(qp, t);
}

sim::Tick WqeFetchEngine::prefetch_recv(QpContext& qp, sim::Tick t, bool demand) {
    if (qp.is_vi()) {
        if (!demand || qp.fetch.rq_fetched != qp.fetch.rq_pi) m_w.descriptors.fetch(qp, true, t, demand);
        return t;
    }
    if (qp.recv_srqn()) {
        SrqContext* srq = m_w.srqs.srq(qp.recv_srqn());
        return srq ? m_w.srqs.take(qp, *srq, t, demand) : t;
    }
    if (demand && qp.fetch.rq_fetched == qp.fetch.rq_pi && qp.qpc.rq_db_record) t = read_recv_record(qp, t);
    if ((qp.fetch.rq_fetch_busy && !demand) || qp.fetch.rq_fetched == qp.fetch.rq_pi || qp.fetch.rq_cache.size() >= m_p.rq_prefetch_depth) return t;
    const std::uint32_t pending = static_cast<std::uint16_t>(qp.fetch.rq_pi - qp.fetch.rq_fetched);
    const std::uint32_t mask = qp.rq_entries() - 1;
    const std::uint32_t first = qp.fetch.rq_fetched & mask;
    const std::uint32_t room = m_p.rq_prefetch_depth - static_cast<std::uint32_t>(qp.fetch.rq_cache.size());
    const std::uint32_t n = std::min({pending, room, qp.rq_entries() - first});
    const std::uint32_t stride = 1u << qp.qpc.rq_log_stride;
    m_buf.resize(static_cast<std::size_t>(n) * stride);
    const sim::Tick fetched = m_w.dma.read(t, qp.qpc.rq_base + first * stride, n * stride, m_buf.data());
    const sim::Tick parsed = m_parser.reserve(fetched, static_cast<std::uint64_t>(m_p.wqe_parse_cycles) * n).end;
    for (std::uint32_t i = 0; i < n; ++i) {
        RecvWork w;
        parse_recv_wqe(m_buf.data() + static_cast<std::size_t>(i) * stride, qp.qpc.max_recv_sge, w);
        w.ready_at = parsed;
        qp.fetch.rq_cache.push_back(std::move(w));
        ++qp.fetch.rq_fetched;
    }
    HCASIM_ASSERT(qp.fetch.rq_cache.size() <= m_p.rq_prefetch_depth);
    counter("recv_fetches")++;
    counter("recv_wqes") += n;
    // Keep the cache topped up once this fetch is on chip.
    qp.fetch.rq_fetch_busy = true;
    const std::uint32_t qpn = qp.qpn;
    at(parsed, [this, qpn, parsed]() {
        const QpAccess found = m_w.qps.context(qpn, parsed);
        QpContext* q = found.qp;
        if (!q) return;
        q->fetch.rq_fetch_busy = false;
        prefetch_recv(*q, found.ready);
    });
    return t;
}

}  // namespace hcasim::hca
