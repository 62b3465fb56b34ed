#include "model/hca/completer.hpp"

#include <algorithm>
#include <cstring>

#include "model/hca/descriptor_engine.hpp"
#include "model/hca/translation_unit.hpp"
#include "model/packet/opcode_table.hpp"

namespace hcasim::hca {

namespace {

// IBA 9.7.5.2.8: RNR NAK timer codes, in microseconds.
constexpr double kRnrTimerUs[32] = {655360, 10,    20,    30,    40,    60,    80,     120,
                                    160,    240,   320,   480,   640,   960,   1280,   1920,
                                    2560,   3840,  5120,  7680,  10240, 15360, 20480,  30720,
                                    40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};

CqeOpcode cqe_opcode(WqeOpcode op) {
    switch (op) {
    case WqeOpcode::Send:
    case WqeOpcode::SendImm:
    case WqeOpcode::SendInvalidate: return CqeOpcode::Send;
    case WqeOpcode::RdmaWrite:
    case WqeOpcode::RdmaWriteImm: return CqeOpcode::RdmaWrite;
    case WqeOpcode::RdmaRead: return CqeOpcode::RdmaRead;
    case WqeOpcode::AtomicCompareSwap: return CqeOpcode::CompareSwap;
    case WqeOpcode::AtomicFetchAdd: return CqeOpcode::FetchAdd;
    case WqeOpcode::BindWindow: return CqeOpcode::BindWindow;
    case WqeOpcode::LocalInvalidate: return CqeOpcode::LocalInvalidate;
    }
    return CqeOpcode::Send;
}

std::uint32_t last_psn(const SendWork& w) { return psn_add(w.first_psn, w.npsn - 1); }

sim::Tick ack_timeout_ps(const QpContext& qp) { return static_cast<sim::Tick>(4096) * sim::kPsPerNs << qp.qpc.timeout; }

}  // namespace

Completer::Completer(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_w(w), m_p(p) {}

void Completer::handle(QpContext& qp, const packet::Parsed& p, const packet::PacketPtr& pkt,
                       const std::uint8_t* payload, sim::Tick t) {
    if (qp.qpc.state != QpState::Rts && qp.qpc.state != QpState::Sqd) {
        counter("dropped_qp_state")++;
        return;
    }
    const packet::OpcodeInfo& info = packet::opcode_info(p.h.bth.opcode);
    if (info.read) {
        handle_read_response(qp, p, pkt, payload, t);
        return;
    }
    if (info.atomic && p.h.atomic_ack) {
        handle_atomic_ack(qp, p, t);
        return;
    }
    if (p.h.aeth) handle_ack(qp, p, t);
}

void Completer::handle_ack(QpContext& qp, const packet::Parsed& p, sim::Tick t) {
    const std::uint32_t psn = p.h.bth.psn;
    const std::uint8_t syn = p.h.aeth->syndrome;
    switch (syn & packet::kAethKindMask) {
    case packet::kAethAck: ack_received(qp, psn, t); break;
    case packet::kAethRnrNak:
        counter("rnr_naks_received")++;
        ++qp.counters.rnr_nak_retry_err;
        ack_received(qp, psn_add(psn, kPsnMask), t);
        if (qp.qpc.rnr_retry != 7) {  // 7: retry for ever
            if (qp.req.rnr_retries_left == 0) {
                fail_wqe(qp, psn, CqeStatus::RnrRetryExceeded, t);
                return;
            }
            --qp.req.rnr_retries_left;
        }
        m_requester->rewind(qp, psn,
                             t + static_cast<sim::Tick>(kRnrTimerUs[syn & packet::kAethValueMask] * sim::kPsPerUs));
        break;
    case packet::kAethNak:
        counter("naks_received")++;
        switch (syn & packet::kAethValueMask) {
        case packet::kNakPsnSequenceError:
            counter("sequence_naks_received")++;
            HCASIM_LOG(sim::LogLevel::Debug, path(), "QP " << qp.qpn << ": sequence NAK for PSN " << psn);
            ++qp.counters.packet_seq_err;
            ack_received(qp, psn_add(psn, kPsnMask), t);
            m_requester->rewind(qp, psn, t);
            break;
        case packet::kNakInvalidRequest:
            counter("invalid_request_naks_received")++;
            fail_wqe(qp, psn, CqeStatus::RemoteInvalidRequest, t);
            break;
        case packet::kNakRemoteAccessError:
            counter("access_naks_received")++;
            fail_wqe(qp, psn, CqeStatus::RemoteAccess, t);
            break;
        case packet::kNakRemoteOperationalError: fail_wqe(qp, psn, CqeStatus::RemoteOperation, t); break;
        default:
            // Invalid RD request (a service this QP does not use) or a code
            // the IBA reserves: no other status describes it.
            counter("unknown_naks_received")++;
            fail_wqe(qp, psn, CqeStatus::GeneralError, t);
            break;
        }
        break;
    default: break;  // reserved syndrome
    }
}

void Completer::handle_read_response(QpContext& qp, const packet::Parsed& p, const packet::PacketPtr& pkt,
                                     const std::uint8_t* payload, sim::Tick t) {
    const packet::OpcodeInfo& info = packet::opcode_info(p.h.bth.opcode);
    const std::uint32_t psn = p.h.bth.psn;
    // Find the READ it answers.
    for (auto& w : qp.req.send_q) {
        // An answer is the READ's whichever time it was asked.
        if (!w.sent || w.op != WqeOpcode::RdmaRead || w.acked) continue;
        const std::int32_t d = psn_diff(psn, w.first_psn);
        if (d < 0 || d >= static_cast<std::int32_t>(w.npsn)) continue;
        if (info.starts_message() && implied_nak(qp, w, t)) return;
        const std::uint32_t offset = static_cast<std::uint32_t>(d) * qp.qpc.path_mtu;
        if (offset != w.read_received) {
            counter("read_responses_out_of_order")++;
            if (offset > w.read_received) read_answer_gap(qp, w, t);
            return;
        }
        if (info.starts_message()) ack_received(qp, psn_add(psn, kPsnMask), t);
        const std::uint32_t len = static_cast<std::uint32_t>(p.payload_len);
        if (w.read_received + len > w.length) {
            fail_wqe(qp, psn, CqeStatus::BadResponse, t);
            return;
        }
        if (len) {
            m_spans.clear();
            slice_spans(w.spans, w.read_received, len, m_spans);
            m_w.dma.write(t, m_spans.data(), m_spans.size(), pkt, payload);
        }
        w.read_received += len;
        w.done_at = std::max(w.done_at, t);
        // Each answer packet in order is forward progress, as an ACK past
        // the ones before is: a long READ on a lossy link is not failed for
        // losses spread over its many answer packets.
        progressed(qp, t);
        if (info.ends_message()) {
            if (w.read_received != w.length) {
                fail_wqe(qp, psn, CqeStatus::BadResponse, t);
                return;
            }
            response_complete(qp, w, t);
        }
        return;
    }
    counter("read_responses_unmatched")++;
}

// A READ or atomic has all its response: it is done and counts as
// progress. Its responder resource is freed when it retires.
void Completer::response_complete(QpContext& qp, SendWork& w, sim::Tick t) {
    w.acked = true;
    counter("progress_acks")++;
    progressed(qp, t);
    retire(qp, t);
    m_w.tx.kick(qp, t);
}

// The ATOMIC ACKNOWLEDGE of an atomic: the original value goes into the
// local buffer and the atomic is done.
void Completer::handle_atomic_ack(QpContext& qp, const packet::Parsed& p, sim::Tick t) {
    const std::uint32_t psn = p.h.bth.psn;
    for (auto& w : qp.req.send_q) {
        if (!w.sent || !is_atomic(w.op) || w.acked || w.first_psn != psn) continue;
        if (implied_nak(qp, w, t)) return;
        ack_received(qp, psn_add(psn, kPsnMask), t);
        if ((p.h.aeth->syndrome & packet::kAethKindMask) != packet::kAethAck) return;
        std::uint8_t orig[kAtomicBytes];
        std::memcpy(orig, &*p.h.atomic_ack, sizeof orig);  // the host's byte order
        // As a READ's data: the CQE, a posted write issued after this one,
        // lands after it, so the completion need not wait for it to land.
        m_w.dma.write(t, w.spans.data(), w.spans.size(), orig);
        w.done_at = std::max(w.done_at, t);
        response_complete(qp, w, t);
        return;
    }
    counter("atomic_acks_unmatched")++;
}

// A READ or atomic holds one of max_rd_atomic until it retires, not only
// until its answer: completions are in order, so the responder's saved
// answers (the last max_dest_rd_atomic) must still hold the oldest one the
// requester waits for, or a lost answer could never be had again.
void Completer::release_read_resource(QpContext& qp, const SendWork& w) {
    if (is_read_or_atomic(w.op) && w.started && qp.req.outstanding_reads)
        --qp.req.outstanding_reads;
}

// The responder executes requests in PSN order: an answer to a later
// READ or atomic while an earlier one still waits for its own means the
// earlier answer was lost (IBA 9.7.5.2.6, implied NAK). The requester asks
// again from the earlier one at once instead of waiting for the timeout.
bool Completer::implied_nak(QpContext& qp, const SendWork& answered, sim::Tick t) {
    for (const auto& w : qp.req.send_q) {
        // Not started again: a rewind already has it going out again.
        if (&w == &answered || !w.started) return false;
        if (is_read_or_atomic(w.op) && !w.acked) {
            ask_again(qp, w, t);
            return true;
        }
    }
    return false;
}

// An implied NAK: an answer after w's own means the requests before w were
// executed; the requester goes back to w. False, and nothing asked, when
// an earlier READ or atomic turned out to be missing its answer (the ACK
// asks that one again).
bool Completer::ask_again(QpContext& qp, const SendWork& w, sim::Tick t) {
    if (ack_received(qp, psn_add(w.first_psn, kPsnMask), t)) return false;
    counter("implied_naks")++;
    ++qp.counters.implied_nak_seq_err;
    m_requester->rewind(qp, w.first_psn, t);
    return true;
}

// A later packet of a READ's answer before the one expected: the responder
// sends an answer in PSN order, so the ones between were lost. The READ is
// asked again at once for the rest of its answer, not after the ACK timeout
// (a sequence error in a READ's answer, as the qib and hfi1 RC requesters
// handle it). Once per gap: the rest of the old answer, still on its way,
// does not ask again; if the repeated answer is lost at the same place, a
// later READ's answer (an implied NAK) or the ACK timeout asks once more.
void Completer::read_answer_gap(QpContext& qp, SendWork& w, sim::Tick t) {
    // Not started again: a rewind already has it going out again.
    if (!w.started || w.read_gap_asked_at == w.read_received) return;
    if (!ask_again(qp, w, t)) return;
    w.read_gap_asked_at = w.read_received;
    counter("read_answer_gaps")++;
}

bool Completer::ack_received(QpContext& qp, std::uint32_t psn, sim::Tick t) {
    // An ACK past every PSN acknowledged before is forward progress even
    // inside a multi-packet message: the transport retry counter counts
    // retries without progress, so a long message on a lossy link is not
    // failed for losses spread over its many packets.
    bool progress = false;
    if (psn_diff(psn, qp.req.acked_psn) > 0) {
        qp.req.acked_psn = psn;
        progress = true;
    }
    for (auto& w : qp.req.send_q) {
        if (!w.started || !w.fully_sent) break;
        // READs, atomics and memory management operations are done by
        // their own events, not by ACKs.
        if (is_read_or_atomic(w.op) || is_local_operation(w.op)) {
            if (!w.acked) {
                // Acknowledged past it: its answer was lost (implied NAK).
                if (!is_local_operation(w.op) && psn_diff(psn, last_psn(w)) >= 0) {
                    counter("implied_naks")++;
                    ++qp.counters.implied_nak_seq_err;
                    if (progress) restart_ack_timer(qp, t);
                    retire(qp, t);
                    m_requester->rewind(qp, w.first_psn, t);
                    return true;
                }
                break;
            }
            continue;
        }
        if (psn_diff(psn, last_psn(w)) < 0) break;
        if (!w.acked) progress = true;
        w.acked = true;
    }
    if (progress) {
        counter("progress_acks")++;
        progressed(qp, t);
    }
    retire(qp, t);
    return false;
}

void Completer::fail_wqe(QpContext& qp, std::uint32_t psn, CqeStatus status, sim::Tick t) {
    // A NAK past a READ or atomic still missing part of its answer (lost on
    // the way, though the responder sent it before the NAK) cannot complete
    // that READ: it is asked again, and the NAK is dropped, as rxe drops a
    // response past an unanswered READ. A responder that failed meanwhile
    // answers no more, and the READ ends with the transport retry error.
    if (ack_received(qp, psn_add(psn, kPsnMask), t)) return;
    if (qp.qpc.state == QpState::Err) return;
    for (auto& w : qp.req.send_q) {
        if (!w.sent) break;
        const std::int32_t d = psn_diff(psn, w.first_psn);
        if (d >= 0 && d < static_cast<std::int32_t>(w.npsn)) {
            // Failed, even if a rewind has it waiting to go out again: it
            // retires with its error once the requester has passed it.
            w.error = status;
            w.acked = true;
            retire(qp, t);
            return;
        }
        // One being asked again already (a rewind had it waiting to go out).
        if (d > 0 && is_read_or_atomic(w.op) && !w.acked) return;
    }
    m_w.errors.enter_error(qp, t);
}

void Completer::arm_ack_timer(QpContext& qp, sim::Tick t) {
    if (qp.qpc.timeout == 0) return;  // 0: wait forever
    if (qp.req.ack_timer_armed) return;
    qp.req.ack_timer_armed = true;
    qp.req.ack_deadline = t + ack_timeout_ps(qp);
    const std::uint32_t qpn = qp.qpn;
    at(qp.req.ack_deadline, [this, qpn]() { ack_timeout(qpn); });
}

// Progress pushes the deadline out; the pending timer event notices when it
// fires, so there is one event per time-out period, not one per ACK.
void Completer::restart_ack_timer(QpContext& qp, sim::Tick t) {
    if (qp.qpc.timeout == 0) return;
    qp.req.ack_deadline = t + ack_timeout_ps(qp);
}

void Completer::progressed(QpContext& qp, sim::Tick t) {
    qp.req.rnr_retries_left = qp.qpc.rnr_retry;
    qp.req.retries_left = qp.qpc.retry_cnt;
    restart_ack_timer(qp, t);
}

void Completer::ack_timeout(std::uint32_t qpn) {
    const QpAccess found = m_w.qps.context(qpn, sim::now_ps());
    QpContext* qp = found.qp;
    if (!qp || !qp->req.ack_timer_armed) return;
    const sim::Tick now = found.ready;
    qp->req.ack_timer_armed = false;
    if (qp->qpc.state != QpState::Rts && qp->qpc.state != QpState::Sqd) return;
    const SendWork* oldest = nullptr;
    for (const auto& w : qp->req.send_q) {
        if (w.started && !w.acked) {
            oldest = &w;
            break;
        }
    }
    if (!oldest) return;
    if (now < qp->req.ack_deadline) {
        // Acknowledged progress since the timer was set: wait on.
        qp->req.ack_timer_armed = true;
        at(qp->req.ack_deadline, [this, qpn]() { ack_timeout(qpn); });
        return;
    }
    counter("ack_timeouts")++;
    ++qp->counters.local_ack_timeout_err;
    HCASIM_LOG(sim::LogLevel::Debug, path(), "QP " << qpn << ": ACK timeout, acknowledged to PSN " << qp->req.acked_psn
                                                << ", " << int(qp->req.retries_left) << " retries left");
    if (qp->req.retries_left == 0) {
        // An armed QP fails over to its alternate path and retries there.
        if (!m_migration || !m_migration->fail_over(*qp, now)) {
            HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qpn << ": no ACK, retries exhausted");
            fail_wqe(*qp, oldest->first_psn, CqeStatus::RetryExceeded, now);
            return;
        }
    } else {
        --qp->req.retries_left;
    }
    // Resume at the oldest packet no ACK covered, not at the message start:
    // a long SEND or WRITE resent whole under a short timeout would spend
    // each period on duplicates and fail without being lost. Requester::rewind
    // asks a READ again for the part of its answer not yet in, an atomic whole.
    const std::uint32_t unacked = psn_add(qp->req.acked_psn, 1);
    const std::int32_t into = psn_diff(unacked, oldest->first_psn);
    const bool inside = into > 0 && into < static_cast<std::int32_t>(oldest->npsn);
    m_requester->rewind(*qp, inside ? unacked : oldest->first_psn, now);
    arm_ack_timer(*qp, now);
}

bool Completer::retire_vi(QpContext& qp, sim::Tick t) {
    // Every VI descriptor is written back; errors break a reliable connection.
    const SendWork done = std::move(qp.req.send_q.front());
    release_read_resource(qp, done);
    qp.req.send_q.pop_front();
    if (qp.req.tx_index > 0) --qp.req.tx_index;
    const std::uint32_t err = done.vi_error ? done.vi_error : vi_error_bits(done.error);
    const std::uint32_t status = kViStatusDone | err | vi_op_bits(done.op);
    m_w.completions.complete_descriptor(qp, false, done.desc_addr, done.desc_handle, status, err ? 0 : done.length,
                                        std::nullopt, std::max(t, done.done_at));
    if (err && qp.qpc.vi != ViReliability::Unreliable) {
        m_w.errors.enter_error(qp, t);
        // Out of retries, the VI has lost its connection (VI Architecture:
        // Connection Lost); its descriptor carries the transport error.
        if (done.error == CqeStatus::RetryExceeded)
            m_w.errors.raise_async(t, AsyncEvent{AsyncEventType::ViConnectionLost, qp.qpn});
        return false;
    }
    counter("wqes_completed")++;
    return true;
}

void Completer::retire(QpContext& qp, sim::Tick t) {
    retire_acknowledged(qp, t);
    report_drained(qp, t);
}

void Completer::report_drained(QpContext& qp, sim::Tick t) {
    if (qp.qpc.state != QpState::Sqd || !qp.qpc.sqd_notify || qp.req.sq_drained_reported) return;
    // WQEs start in order: if the oldest has not, none has.
    if (!qp.req.send_q.empty() && qp.req.send_q.front().started) return;
    qp.req.sq_drained_reported = true;
    m_w.errors.raise_async(t, AsyncEvent{AsyncEventType::SqDrained, qp.qpn});
}

void Completer::retire_acknowledged(QpContext& qp, sim::Tick t) {
    // A WQE behind a fence or behind max_rd_atomic waits for a READ or atomic
    // to retire, which an ACK to an earlier WQE may do as well as its own
    // answer: the requester is woken whichever it is.
    const std::uint32_t reads_before = qp.req.outstanding_reads;
    while (!qp.req.send_q.empty() && qp.qpc.state != QpState::Err) {
        SendWork& w = qp.req.send_q.front();
        if (!w.acked) break;
        // Answered while a rewind has it waiting to go out: it retires once
        // the requester has passed it, which keeps the PSNs in step.
        if (w.sent && !w.started) break;
        if (qp.is_vi()) {
            if (!retire_vi(qp, t)) return;
            continue;
        }
        const bool signaled = (w.flags & kWqeSignaled) || qp.qpc.sq_sig_all;
        if (w.error != CqeStatus::Success || signaled) {
            Cqe c{};
            c.qpn = qp.qpn;
            c.byte_len = w.length;
            c.wqe_index = w.wqe_index;
            c.opcode = static_cast<std::uint8_t>(cqe_opcode(w.op));
            c.status = static_cast<std::uint8_t>(w.error);
            c.flags = kCqeIsSend;
            const bool ok = m_w.completions.post_cqe(std::max(t, w.done_at), qp.qpc.send_cqn, c);
            if (w.error != CqeStatus::Success || !ok) {
                release_read_resource(qp, w);
                qp.req.send_q.pop_front();
                if (qp.req.tx_index > 0) --qp.req.tx_index;
                if (!ok) m_w.errors.raise_async(t, AsyncEvent{AsyncEventType::QpFatal, qp.qpn});
                if (ok && !qp.service().acknowledged)
                    m_w.errors.enter_send_queue_error(qp, t);
                else
                    m_w.errors.enter_error(qp, t);
                return;
            }
        }
        release_read_resource(qp, w);
        qp.req.send_q.pop_front();
        if (qp.req.tx_index > 0) --qp.req.tx_index;
        counter("wqes_completed")++;
    }
    if (qp.req.outstanding_reads < reads_before && (qp.qpc.state == QpState::Rts || qp.qpc.state == QpState::Sqd))
        m_w.tx.kick(qp, t);
}

}  // namespace hcasim::hca
