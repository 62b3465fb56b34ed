#include "model/hca/requester.hpp"

#include <algorithm>
#include <cstring>

#include "model/hca/translation_unit.hpp"
#include "model/sim/tracer.hpp"

namespace hcasim::hca {

using packet::Opcode;

namespace {

std::uint8_t op(Opcode o) { return static_cast<std::uint8_t>(o); }

// The RC opcode of a packet of a SEND or RDMA WRITE by its place in the message.
Opcode request_opcode(WqeOpcode wop, bool first, bool last) {
    const bool imm = wop == WqeOpcode::SendImm || wop == WqeOpcode::RdmaWriteImm;
    // SEND with invalidate differs only in its last packet, which carries the IETH.
    if (wop == WqeOpcode::SendInvalidate && last) return first ? Opcode::RcSendOnlyInv : Opcode::RcSendLastInv;
    if (wop == WqeOpcode::Send || wop == WqeOpcode::SendImm || wop == WqeOpcode::SendInvalidate) {
        return first && last ? (imm ? Opcode::RcSendOnlyImm : Opcode::RcSendOnly)
               : first       ? Opcode::RcSendFirst
               : last        ? (imm ? Opcode::RcSendLastImm : Opcode::RcSendLast)
                             : Opcode::RcSendMiddle;
    }
    return first && last ? (imm ? Opcode::RcWriteOnlyImm : Opcode::RcWriteOnly)
           : first       ? Opcode::RcWriteFirst
           : last        ? (imm ? Opcode::RcWriteLastImm : Opcode::RcWriteLast)
                         : Opcode::RcWriteMiddle;
}

}  // namespace

Requester::Requester(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_w(w), m_p(p) {
    m_n_request_packets = &counter("request_packets");
    m_n_read_requests = &counter("read_requests");
}

void Requester::set_max_datagram(std::uint32_t bytes) { m_max_datagram = bytes; }

// SQD (send queue drain): WQEs already started finish, including their
// retransmissions; none starts.
bool Requester::draining_blocks(const QpContext& qp) const {
    return qp.req.tx_index >= qp.req.send_q.size() || !qp.req.send_q[qp.req.tx_index].started;
}

bool Requester::has_work(const QpContext& qp) const {
    if (qp.qpc.state == QpState::Sqd) return !draining_blocks(qp);
    if (qp.qpc.state != QpState::Rts) return false;
    return qp.req.tx_index < qp.req.send_q.size() || qp.fetch.sq_fetched != qp.fetch.sq_pi;
}

void Requester::finish_unsent(QpContext& qp, SendWork& w, sim::Tick t) {
    w.acked = true;
    w.fully_sent = true;
    ++qp.req.tx_index;
    m_w.completer.retire(qp, t);
}

bool Requester::start(QpContext& qp, SendWork& w, sim::Tick now, sim::Tick& start_at) {
    // READs and atomics write their answer into the local buffer.
    const bool is_read = is_read_or_atomic(w.op);
    if (!qp.service().connected && w.length > m_max_datagram) {
        // A datagram is one packet: longer than the MTU is a local length error.
        HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " WQE " << w.wqe_index << ": " << w.length
                                                      << " bytes do not fit one datagram of " << m_max_datagram);
        w.error = CqeStatus::LocalLength;
        finish_unsent(qp, w, now);
        return false;
    }
    w.started = true;
    w.sent = true;
    // A READ asked again for the rest of its answer starts past its first PSN.
    w.first_psn = psn_add(qp.req.next_psn, (kPsnMask + 1) - qp.req.tx_offset / mtu_of(qp));
    w.npsn = packets_for(w.length, mtu_of(qp));
    w.spans.clear();
    if (!(w.flags & kWqeInline)) {
        const std::uint32_t access = is_read ? static_cast<std::uint32_t>(kLocalWrite) : 0u;
        for (const auto& sge : w.sges) {
            if (sge.length == 0) continue;
            const Translation tr = m_w.translation.translate(now, sge.lkey, qp.qpc.pdn, sge.addr, sge.length, access, w.spans);
            start_at = std::max(start_at, tr.ready);
            if (tr.status != Protection::Ok) {
                HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " WQE " << w.wqe_index << ": local lkey "
                                                              << sge.lkey << " " << to_string(tr.status));
                w.error = CqeStatus::LocalProtection;
                finish_unsent(qp, w, start_at);
                return false;
            }
        }
    }
    if (is_read) ++qp.req.outstanding_reads;
    return true;
}

std::uint32_t Requester::build_headers(QpContext& qp, const SendWork& w, packet::Headers& h, bool& last) {
    const std::uint32_t mtu = mtu_of(qp);
    const std::uint8_t base = qp.service().opcode_base;
    // An XRC request names the SRQ at the target it is for.
    if (qp.service().opcode_types == packet::kQpXrc) h.xrceth = w.xrc_srqn;
    if (is_atomic(w.op)) {
        h.bth.opcode = base | op(w.op == WqeOpcode::AtomicCompareSwap ? Opcode::RcCompareSwap : Opcode::RcFetchAdd);
        h.bth.psn = w.first_psn;
        h.atomic_eth = packet::AtomicEth{w.raddr, w.rkey, w.swap_add, w.compare};
        qp.req.next_psn = psn_add(w.first_psn, 1);
        last = true;
        return 0;
    }
    if (w.op == WqeOpcode::RdmaRead) {
        // From tx_offset on: the part of the answer not yet in.
        h.bth.opcode = base | op(Opcode::RcReadRequest);
        h.bth.psn = psn_add(w.first_psn, qp.req.tx_offset / mtu);
        h.reth = packet::Reth{w.raddr + qp.req.tx_offset, w.rkey, w.length - qp.req.tx_offset};
        qp.req.next_psn = psn_add(w.first_psn, w.npsn);
        last = true;
        return 0;
    }
    const std::uint32_t n = std::min(mtu, w.length - qp.req.tx_offset);
    const bool first = qp.req.tx_offset == 0;
    last = qp.req.tx_offset + n == w.length;
    // UC, UD and XRC opcodes are RC's with their own transport bits (IBA table 38).
    const Opcode o = static_cast<Opcode>(base | op(request_opcode(w.op, first, last)));
    if (first && packet::opcode_layout(op(o)).reth) h.reth = packet::Reth{w.raddr, w.rkey, w.length};
    h.bth.opcode = op(o);
    h.bth.psn = psn_add(w.first_psn, qp.req.tx_offset / mtu);
    if (last && packet::opcode_layout(op(o)).immdt) h.immdt = w.imm;
    if (last && packet::opcode_layout(op(o)).ieth) h.ieth = w.imm;
    if (!qp.service().connected) h.deth = packet::Deth{w.ud.qkey, qp.qpn};
    qp.req.next_psn = psn_add(h.bth.psn, 1);
    return n;
}

bool Requester::produce(QpContext& qp, sim::Tick now) {
    if (qp.qpc.state == QpState::Sqd) {
        if (draining_blocks(qp)) return false;
    } else if (qp.qpc.state != QpState::Rts) {
        return false;
    }
    // Keep the next WQEs coming while this one is sent.
    if (qp.qpc.state == QpState::Rts && qp.req.send_q.size() - qp.req.tx_index <= 1 && qp.fetch.sq_fetched != qp.fetch.sq_pi)
        m_w.fetch.fetch_send(qp, now);
    if (qp.req.tx_index >= qp.req.send_q.size()) return false;
    SendWork& w = qp.req.send_q[qp.req.tx_index];
    if (w.sent && w.acked && !w.started) {
        // A READ or atomic answered after a rewind, before it went out
        // again: it is not asked again, and its PSNs stay its own.
        w.started = true;
        w.fully_sent = true;
        ++qp.req.outstanding_reads;  // held until it retires
        qp.req.next_psn = psn_add(w.first_psn, w.npsn);
        qp.req.tx_offset = 0;
        ++qp.req.tx_index;
        m_w.completer.retire(qp, now);
        return true;
    }
    if (w.error != CqeStatus::Success) {
        // A WQE the fetch engine could not parse: completes in order with
        // its error once everything before it has.
        finish_unsent(qp, w, now);
        return true;  // a turn taken: an unreliable VI goes on with the next
    }
    // Outstanding READs and atomics share the max_rd_atomic responder resources.
    const bool is_read = is_read_or_atomic(w.op);
    if ((w.flags & kWqeFence) && qp.req.outstanding_reads > 0 && !w.started) return false;
    if (is_read && !w.started && qp.req.outstanding_reads >= std::max<std::uint32_t>(1, qp.qpc.max_rd_atomic)) return false;
    if (is_local_operation(w.op)) {
        execute_local(qp, w, now);
        return true;
    }
    sim::Tick start_at = std::max(now, qp.req.local_op_done);
    // A WQE that fails before its first packet has taken its turn: where
    // the QP goes on (an unreliable VI), the next one goes next.
    if (!w.started && !start(qp, w, now, start_at)) return true;

    // What follows (the payload's DMA, the packet) serves this WQE's work request.
    const std::uint64_t flow = sim::tracer().on() ? sim::Tracer::flow_of(path(), qp.qpn, w.wqe_index) : 0;
    const sim::Tracer::Scope in_flow(sim::tracer(), flow);
    packet::Headers h;
    bool last = true;
    const std::uint32_t n = build_headers(qp, w, h, last);
    h.bth.ack_req = last;
    h.bth.se = last && (w.flags & kWqeSolicited) != 0;

    std::uint8_t* payload = nullptr;
    const TransportService& svc = qp.service();
    const Route route = svc.connected ? route_of(qp) : Route{w.ud.dlid, w.ud.sl, w.ud.dest_qpn, &w.ud.grh, qp.qpc.port};
    auto pkt = m_w.tx.make_packet(route, h, n, &payload);
    pkt->trace_flow = flow;
    sim::Tick data = start_at;
    if (n > 0) {
        if (w.flags & kWqeInline) {
            std::memcpy(payload, w.inline_data.data() + qp.req.tx_offset, n);
        } else {
            m_slices.clear();
            slice_spans(w.spans, qp.req.tx_offset, n, m_slices);
            data = m_w.dma.read(start_at, m_slices.data(), m_slices.size(), payload);
        }
    }
    qp.req.tx_offset += n;
    if (last) {
        w.fully_sent = true;
        ++qp.req.tx_index;
        qp.req.tx_offset = 0;
    }
    (*(is_read ? m_n_read_requests : m_n_request_packets))++;
    using OnWire = TransmitPath::OnWire;
    const OnWire then = !svc.acknowledged ? (last ? OnWire::LastUnacknowledged : OnWire::Nothing) : OnWire::Request;
    if (m_w.tx.launch(qp, std::move(pkt), data, then)) on_wire(qp, then, qp.tx.last_wire_end);
    return true;
}

void Requester::on_wire(QpContext& qp, TransmitPath::OnWire what, sim::Tick end) {
    if (what == TransmitPath::OnWire::Request) {
        // The ACK timer runs from the packet's departure.
        m_w.completer.arm_ack_timer(qp, end);
        return;
    }
    if (what != TransmitPath::OnWire::LastUnacknowledged) return;
    // Unacknowledged services (UC, UD, unreliable VIs): the WQE is done when
    // its last packet has left the port. Packets leave in order, so it is
    // the oldest WQE sent whole and not yet done.
    for (SendWork& w : qp.req.send_q) {
        if (w.acked) continue;
        if (!w.fully_sent) return;
        w.acked = true;
        w.done_at = end;
        m_w.completer.retire(qp, sim::now_ps());
        return;
    }
}

// Binds and local invalidates go to the translation unit in send-queue
// order; they send nothing, delay the WQEs behind them until the MPT entry
// is written, and complete in order like any WQE (IBV_WC_MW_BIND_ERR when
// they fail). Resending after a NAK or time-out passes over them: they are
// executed once.
void Requester::execute_local(QpContext& qp, SendWork& w, sim::Tick now) {
    if (!w.acked) {
        const sim::Tick start = std::max(now, qp.req.local_op_done);
        const bool bind = w.op == WqeOpcode::BindWindow;
        const WindowResult r = bind ? m_w.translation.bind_window(start, w.bind, qp.qpn, qp.qpc.pdn)
                                    : m_w.translation.invalidate_window(start, w.imm, qp.qpn, qp.qpc.pdn);
        if (r.status != WindowStatus::Ok) {
            HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " WQE " << w.wqe_index << ": "
                                                          << (bind ? "bind of window " : "local invalidate of key ")
                                                          << (bind ? w.bind.window_key : w.imm) << ": "
                                                          << to_string(r.status));
            w.error = CqeStatus::MemoryManagement;
        }
        counter(bind ? "window_binds" : "local_invalidates")++;
        qp.req.local_op_done = r.ready;
        w.done_at = r.ready;
        w.first_psn = qp.req.next_psn;
        w.acked = true;
    }
    w.started = true;
    w.fully_sent = true;
    ++qp.req.tx_index;
    m_w.completer.retire(qp, now);
}

void Requester::rewind(QpContext& qp, std::uint32_t psn, sim::Tick resume_at) {
    // Find the WQE holding psn and restart from that packet.
    for (std::size_t i = 0; i < qp.req.send_q.size(); ++i) {
        SendWork& w = qp.req.send_q[i];
        if (!w.started) break;
        const std::int32_t d = psn_diff(psn, w.first_psn);
        if (d < 0 || d >= static_cast<std::int32_t>(w.npsn)) continue;
        for (std::size_t j = i; j < qp.req.send_q.size(); ++j) {
            SendWork& later = qp.req.send_q[j];
            if (later.started && is_read_or_atomic(later.op) && qp.req.outstanding_reads > 0)
                --qp.req.outstanding_reads;
            later.started = j == i;
            later.fully_sent = false;
        }
        qp.req.tx_index = i;
        if (is_read_or_atomic(w.op)) {
            // Asked again under its own PSNs: a READ for the part of its
            // answer not yet in (the responder serves a repeated READ from
            // the PSN, address and length it asks for), an atomic whole
            // (answered from the responder's saved result). A long READ
            // asked again whole over a lossy link would seldom get its
            // answer through without a loss.
            qp.req.tx_offset = w.op == WqeOpcode::RdmaRead ? w.read_received : 0;
            w.started = false;
            psn = psn_add(w.first_psn, qp.req.tx_offset / mtu_of(qp));
        } else {
            qp.req.tx_offset = static_cast<std::uint32_t>(d) * mtu_of(qp);
        }
        qp.req.next_psn = psn;
        qp.req.tx_hold_until = resume_at;
        counter("rewinds")++;
        HCASIM_LOG(sim::LogLevel::Debug, path(), "QP " << qp.qpn << ": resend from PSN " << psn << " (WQE "
                                                     << w.wqe_index << ", PSNs " << w.first_psn << " to "
                                                     << psn_add(w.first_psn, w.npsn - 1) << ")");
        m_w.tx.kick(qp, resume_at);
        return;
    }
}

}  // namespace hcasim::hca
