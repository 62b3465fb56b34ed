#include "model/hca/responder.hpp"

#include <algorithm>

#include "model/hca/descriptor_engine.hpp"
#include "model/hca/translation_unit.hpp"
#include "model/packet/opcode_table.hpp"

namespace hcasim::hca {

using packet::Opcode;

namespace {
std::uint8_t op(Opcode o) { return static_cast<std::uint8_t>(o); }
}  // namespace

Responder::Responder(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)),
      m_w(w),
      m_p(p),
      m_atomic_unit_free(p.atomic_units, 0) {
    m_n_read_response_packets = &counter("read_response_packets");
    m_n_write_requests = &counter("write_requests");
}

void Responder::handle(QpContext& qp, const packet::Parsed& p, const packet::PacketPtr& pkt,
                       const std::uint8_t* payload, sim::Tick t) {
    const packet::OpcodeInfo& info = packet::opcode_info(p.h.bth.opcode);
    Request r{p, info, pkt, payload, t, p.h.bth.psn, static_cast<std::uint32_t>(p.payload_len)};
    if (check_state(qp, r) == Step::Done) return;
    if (check_qkey(qp, r) == Step::Done) return;
    if (check_psn(qp, r) == Step::Done) return;
    if (check_op_seq(qp, r) == Step::Done) return;
    if (check_xrc(qp, r) == Step::Done) return;
    if (info.consumes_rwqe && get_recv_wqe(qp, r) == Step::Done) return;
    if (info.send && execute_send(qp, r) == Step::Done) return;
    if (info.write && execute_write(qp, r) == Step::Done) return;
    if (info.read) {
        execute_read(qp, r);
        return;
    }
    if (info.atomic) {
        execute_atomic(qp, r);
        return;
    }
    acknowledge(qp, r);
}

Responder::Step Responder::check_state(QpContext& qp, Request& r) {
    if (qp.resp.error_deferred) {
        counter("dropped_after_error")++;
        return Step::Done;
    }
    if (qp.qpc.state == QpState::Rtr || qp.qpc.state == QpState::Rts || qp.qpc.state == QpState::Sqd || qp.qpc.state == QpState::Sqe) {
        if (!qp.resp.comm_established) {
            // IBA 11.6.3: the first request a connected QP receives while in
            // RTR tells the consumer the connection is up (its RTU may be lost).
            qp.resp.comm_established = true;
            if (qp.qpc.state == QpState::Rtr && qp.service().connected && !qp.is_vi())
                m_w.errors.raise_async(r.t, AsyncEvent{AsyncEventType::CommEstablished, qp.qpn});
        }
        return Step::Next;
    }
    counter("dropped_qp_state")++;
    return Step::Done;
}

// A datagram must carry the QP's Q_Key (IBA 10.2.5); one that does not is
// dropped silently.
Responder::Step Responder::check_qkey(QpContext& qp, Request& r) {
    if (qp.service().connected) return Step::Next;
    if (r.p.h.deth && r.p.h.deth->qkey == qp.qpc.qkey) return Step::Next;
    counter("dropped_bad_qkey")++;
    return Step::Done;
}

Responder::Step Responder::check_psn(QpContext& qp, Request& r) {
    const TransportService& svc = qp.service();
    if (!svc.checks_psn) return Step::Next;
    std::int32_t d = psn_diff(r.psn, qp.resp.epsn);
    if (svc.resync_on_gap && d != 0) {
        // Unacknowledged services: nothing is resent. Late packets are
        // dropped; a gap abandons the message in progress and resynchronises
        // on the next packet that starts one (IBA 9.7.5.1.1 for UC).
        if (d < 0) {
            counter("dropped_duplicates")++;
            ++qp.counters.duplicate_request;
            return Step::Done;
        }
        counter("lost_packet_gaps")++;
        ++qp.counters.out_of_sequence;
        if (qp.resp.recv_in_progress && qp.recv_srqn() && !qp.fetch.rq_cache.empty()) {
            // The abandoned message's WQE came from an SRQ and cannot go
            // back: it completes as aborted.
            counter("aborted_srq_receives")++;
            packet::Parsed none;
            none.h.lrh.slid = qp.qpc.dlid;
            complete_recv(qp, r.t, none, CqeStatus::RemoteAborted, false, 0);
        }
        qp.resp.recv_in_progress = false;
        qp.resp.write_in_progress = false;
        const bool starts = (r.info.send || r.info.write) && r.info.starts_message();
        qp.resp.epsn = psn_add(r.psn, 1);
        if (!starts) return Step::Done;
        qp.resp.epsn = r.psn;
        d = 0;
    }
    if (d < 0 && r.info.atomic) {
        // A repeated atomic is answered from its saved result, never
        // executed twice (IBA 9.7.5.2.3); one too old to be saved is dropped.
        counter("duplicate_atomics")++;
        ++qp.counters.duplicate_request;
        for (const auto& saved : qp.resp.atomic_results) {
            if (saved.psn != r.psn) continue;
            drop_superseded_answers(qp, r.psn);
            queue_atomic_ack(qp, r.t, saved.psn, saved.orig, saved.msn);
            return Step::Done;
        }
        return Step::Done;
    }
    if (d < 0 && r.info.read) {
        // A repeated READ is executed again from the PSN it asks for
        // (IBA 9.7.5.2.2): the requester lost part of the answer.
        counter("duplicate_reads")++;
        ++qp.counters.duplicate_request;
        execute_read(qp, r, true);
        return Step::Done;
    }
    if (d < 0) {
        // Duplicate: the requester missed our ACK; acknowledge again.
        counter("duplicates")++;
        ++qp.counters.duplicate_request;
        respond(qp, r.t, packet::kAethAck | packet::kAethCreditsInvalid, psn_add(qp.resp.epsn, kPsnMask));
        return Step::Done;
    }
    if (d > 0) {
        counter("out_of_sequence")++;
        ++qp.counters.out_of_sequence;
        if (!qp.resp.nak_outstanding) {
            qp.resp.nak_outstanding = true;
            respond(qp, r.t, packet::kAethNak | packet::kNakPsnSequenceError, qp.resp.epsn);
        }
        return Step::Done;
    }
    qp.resp.nak_outstanding = false;
    return Step::Next;
}

Responder::Step Responder::check_op_seq(QpContext& qp, Request& r) {
    const bool starts = r.info.starts_message();
    // A new message may not start in the middle of another one.
    if ((((r.info.send || r.info.write) && starts) || r.info.read) && (qp.resp.recv_in_progress || qp.resp.write_in_progress)) {
        fail(qp, r.t, packet::kNakInvalidRequest, CqeStatus::Success, r.psn, AsyncEventType::ViRdmaTransport);
        return Step::Done;
    }
    if ((r.info.send && !starts && !qp.resp.recv_in_progress) || (r.info.write && !starts && !qp.resp.write_in_progress)) {
        if (qp.service().resync_on_gap) {
            // The rest of a message whose start was dropped.
            counter("dropped_orphans")++;
            qp.resp.epsn = psn_add(r.psn, 1);
            return Step::Done;
        }
        fail(qp, r.t, packet::kNakInvalidRequest, CqeStatus::Success, r.psn, AsyncEventType::ViRdmaTransport);
        return Step::Done;
    }
    return Step::Next;
}

// An XRC target serves every SRQ of its XRC domain: each request names one
// in its XRCETH, which gives the receive WQE, the CQ and the protection
// domain of the memory the request touches (XRC annex). A message keeps
// the SRQ its first packet named.
Responder::Step Responder::check_xrc(QpContext& qp, Request& r) {
    if (!qp.xrc_target() || !(r.info.starts_message() || r.info.read || r.info.atomic)) return Step::Next;
    SrqContext* srq = r.p.h.xrceth ? m_w.srqs.srq(*r.p.h.xrceth) : nullptr;
    if (!srq || srq->xrcd != qp.qpc.xrcd) {
        counter("xrc_bad_srq")++;
        HCASIM_LOG(sim::LogLevel::Info, path(), "XRC target " << qp.qpn << ": PSN " << r.psn << " names SRQ "
                                                           << r.p.h.xrceth.value_or(0) << ", not one of XRC domain "
                                                           << qp.qpc.xrcd);
        fail(qp, r.t, packet::kNakInvalidRequest, CqeStatus::Success, r.psn, std::nullopt);
        return Step::Done;
    }
    qp.resp.xrc_srqn = srq->srqn;
    qp.resp.xrc_cqn = srq->cqn;
    qp.resp.xrc_pdn = srq->pdn;
    return Step::Next;
}

// Messages that consume a receive WQE need one on chip, or RNR NAK.
Responder::Step Responder::get_recv_wqe(QpContext& qp, Request& r) {
    if (qp.fetch.rq_cache.empty()) {
        r.t = m_w.fetch.prefetch_recv(qp, r.t, true);
        if (qp.qpc.state == QpState::Err) {
            // Its SRQ failed as the WQE was taken: the request cannot be served.
            m_w.tx.send_ack(qp, r.t, packet::kAethNak | packet::kNakRemoteOperationalError, r.psn);
            return Step::Done;
        }
        if (qp.fetch.rq_cache.empty() && !qp.service().rnr_nak && !qp.is_vi()) {
            // UC and UD have no receiver-not-ready: the message is dropped.
            counter("dropped_no_recv_wqe")++;
            ++qp.counters.out_of_buffer;
            qp.resp.epsn = psn_add(r.psn, 1);
            return Step::Done;
        }
        if (qp.fetch.rq_cache.empty() && qp.is_vi()) {
            // The VI Architecture has no receiver-not-ready retry: the message
            // is lost (unreliable) or the connection breaks (reliable).
            counter("recv_queue_empty")++;
            HCASIM_LOG(sim::LogLevel::Info, path(), "VI " << qp.qpn << " has no receive descriptor for PSN " << r.psn
                                                          << " (posted " << qp.fetch.rq_pi << ", fetched " << qp.fetch.rq_fetched
                                                          << ", in flight " << qp.desc.rq.fetching << ")");
            if (qp.qpc.vi == ViReliability::Unreliable) {
                m_w.errors.raise_async(r.t, AsyncEvent{AsyncEventType::ViRecvQueueEmpty, qp.qpn, 0, 0, true});
                qp.resp.epsn = psn_add(r.psn, 1);
                return Step::Done;
            }
            fail(qp, r.t, packet::kNakRemoteOperationalError, CqeStatus::Success, r.psn,
                 AsyncEventType::ViRecvQueueEmpty);
            return Step::Done;
        }
        if (qp.fetch.rq_cache.empty()) {
            counter("rnr_naks")++;
            ++qp.counters.out_of_buffer;
            HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " has no receive WQE for PSN " << r.psn
                                                          << " (posted " << qp.fetch.rq_pi << ", fetched " << qp.fetch.rq_fetched
                                                          << "): RNR NAK");
            qp.resp.nak_outstanding = true;
            respond(qp, r.t, packet::kAethRnrNak | (qp.qpc.min_rnr_timer & packet::kAethValueMask), r.psn);
            return Step::Done;
        }
    }
    r.t = std::max(r.t, qp.fetch.rq_cache.front().ready_at);
    if (qp.fetch.rq_cache.front().malformed) {
        // A malformed receive WQE: the request is NAKed, the WQE completes
        // with a local QP operation error and the QP breaks (IBA 10.8.3.3,
        // local work queue catastrophic error).
        counter("malformed_recv_wqes")++;
        HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " receive WQE " << qp.fetch.rq_cache.front().wqe_index
                                                      << " is malformed");
        fail(qp, r.t, packet::kNakRemoteOperationalError, CqeStatus::LocalQpOperation, r.psn, std::nullopt,
             AsyncEventType::QpFatal);
        return Step::Done;
    }
    return Step::Next;
}

Responder::Step Responder::execute_send(QpContext& qp, Request& r) {
    if (r.info.starts_message()) {
        RecvWork& w = qp.fetch.rq_cache.front();
        qp.resp.recv_spans.clear();
        for (const auto& sge : w.sges) {
            if (sge.length == 0) continue;
            const Translation tr =
                m_w.translation.translate(r.t, sge.lkey, qp.recv_pdn(), sge.addr, sge.length, kLocalWrite, qp.resp.recv_spans);
            r.t = std::max(r.t, tr.ready);
            if (tr.status != Protection::Ok) {
                HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " receive WQE " << w.wqe_index << ": lkey "
                                                              << sge.lkey << " " << to_string(tr.status));
                fail(qp, r.t, packet::kNakRemoteOperationalError, CqeStatus::LocalProtection, r.psn, std::nullopt);
                return Step::Done;
            }
        }
        qp.resp.recv_in_progress = true;
        qp.resp.recv_offset = 0;
        if (!qp.service().connected) {
            // A UD receive buffer starts with 40 bytes for the GRH, written
            // when one came.
            if (w.length < packet::kGrhBytes) {
                fail(qp, r.t, packet::kNakInvalidRequest, CqeStatus::LocalLength, r.psn, std::nullopt);
                return Step::Done;
            }
            if (r.p.h.grh) {
                m_spans.clear();
                slice_spans(qp.resp.recv_spans, 0, packet::kGrhBytes, m_spans);
                m_w.dma.write(r.t, m_spans.data(), m_spans.size(), r.pkt, r.pkt->bytes.data() + packet::kLrhBytes);
            }
            qp.resp.recv_offset = packet::kGrhBytes;
        }
    }
    RecvWork& w = qp.fetch.rq_cache.front();
    if (static_cast<std::uint64_t>(qp.resp.recv_offset) + r.len > w.length) {
        HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " receive WQE " << w.wqe_index << " of " << w.length
                                                      << " bytes too small");
        fail(qp, r.t, packet::kNakInvalidRequest, CqeStatus::LocalLength, r.psn, std::nullopt);
        return Step::Done;
    }
    // The CQE is issued after the payload writes; posted-write ordering
    // makes it visible only after them.
    if (r.len) {
        m_spans.clear();
        slice_spans(qp.resp.recv_spans, qp.resp.recv_offset, r.len, m_spans);
        m_w.dma.write(r.t, m_spans.data(), m_spans.size(), r.pkt, r.payload);
    }
    qp.resp.recv_offset += r.len;
    if (r.info.ends_message()) {
        qp.resp.recv_in_progress = false;
        if (r.p.h.ieth && invalidate_rkey(qp, r) == Step::Done) return Step::Done;
        qp.resp.msn = psn_add(qp.resp.msn, 1);
        complete_recv(qp, r.t, r.p, CqeStatus::Success, false, qp.resp.recv_offset);
    }
    return Step::Next;
}

Responder::Step Responder::execute_write(QpContext& qp, Request& r) {
    if (r.info.starts_message()) {
        (*m_n_write_requests)++;
        ++qp.counters.rx_write_requests;
        const packet::Reth& reth = *r.p.h.reth;
        qp.resp.write_spans.clear();
        const Translation tr = (qp.qpc.access & kRemoteWrite)
                                   ? m_w.translation.translate_remote(r.t, reth.rkey, qp.qpn, qp.recv_pdn(), reth.va,
                                                                      reth.dma_len, kRemoteWrite, qp.resp.write_spans)
                                   : Translation{Protection::AccessDenied, r.t};
        r.t = std::max(r.t, tr.ready);
        if (tr.status != Protection::Ok) {
            HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " RDMA WRITE rkey " << reth.rkey << " va 0x"
                                                          << std::hex << reth.va << std::dec << " len " << reth.dma_len
                                                          << ": " << to_string(tr.status));
            // With immediate data the receive WQE (or VI descriptor) the
            // message would have consumed carries the error; without, only
            // an asynchronous error can. UC drops the message and keeps the
            // WQE for the next one.
            const bool with_wqe = r.info.consumes_rwqe && !qp.fetch.rq_cache.empty();
            const bool to_desc = qp.is_vi() && with_wqe;
            const bool local_access = !qp.is_vi() && with_wqe && qp.service().acknowledged;
            // The VI descriptor says what consumed it: a remote RDMA write,
            // with its immediate data.
            if (to_desc) complete_recv(qp, r.t, r.p, CqeStatus::RemoteAccess, true, 0);
            const CqeStatus status = local_access ? CqeStatus::LocalAccess : CqeStatus::Success;
            fail(qp, r.t, packet::kNakRemoteAccessError, status, r.psn,
                 to_desc ? std::nullopt : std::optional(AsyncEventType::ViRdmaWriteProtection));
            return Step::Done;
        }
        qp.resp.write_in_progress = true;
        qp.resp.write_total = reth.dma_len;
        qp.resp.write_remaining = reth.dma_len;
    }
    const bool last = r.info.ends_message();
    if (r.len > qp.resp.write_remaining || (last && r.len != qp.resp.write_remaining)) {
        fail(qp, r.t, packet::kNakInvalidRequest, CqeStatus::Success, r.psn, AsyncEventType::ViRdmaTransport);
        return Step::Done;
    }
    if (r.len) {
        m_spans.clear();
        slice_spans(qp.resp.write_spans, qp.resp.write_total - qp.resp.write_remaining, r.len, m_spans);
        m_w.dma.write(r.t, m_spans.data(), m_spans.size(), r.pkt, r.payload);
    }
    qp.resp.write_remaining -= r.len;
    if (last) {
        qp.resp.write_in_progress = false;
        qp.resp.msn = psn_add(qp.resp.msn, 1);
        if (r.p.h.immdt) complete_recv(qp, r.t, r.p, CqeStatus::Success, true, qp.resp.write_total);
    }
    return Step::Next;
}

Responder::Step Responder::execute_read(QpContext& qp, Request& r, bool repeated) {
    counter("read_requests")++;
    ++qp.counters.rx_read_requests;
    const packet::Reth& reth = *r.p.h.reth;
    ReadResponseJob job;
    const Translation tr = (qp.qpc.access & kRemoteRead)
                               ? m_w.translation.translate_remote(r.t, reth.rkey, qp.qpn, qp.recv_pdn(), reth.va, reth.dma_len,
                                                                  kRemoteRead, job.spans)
                               : Translation{Protection::AccessDenied, r.t};
    if (tr.status != Protection::Ok) {
        HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " RDMA READ rkey " << reth.rkey << ": "
                                                      << to_string(tr.status));
        fail(qp, tr.ready, packet::kNakRemoteAccessError, CqeStatus::Success, r.psn, AsyncEventType::ViRdmaReadProtection);
        return Step::Done;
    }
    job.va = reth.va;
    job.rkey = reth.rkey;
    job.length = reth.dma_len;
    job.first_psn = r.psn;
    if (!repeated) {
        qp.resp.msn = psn_add(qp.resp.msn, 1);
        qp.resp.epsn = psn_add(r.psn, packets_for(reth.dma_len, qp.qpc.path_mtu));
    }
    job.msn = qp.resp.msn;
    if (repeated) drop_superseded_answers(qp, r.psn);
    qp.resp.read_jobs.push_back(std::move(job));
    m_w.tx.kick(qp, tr.ready);
    return Step::Done;
}

// Compare & swap or fetch & add on 8 aligned bytes of host memory: a read
// and a write across PCIe, serialised per address with the atomics before
// it, as the adapter's atomic unit does it. The ATOMIC ACKNOWLEDGE leaves
// once the original value is on chip.
Responder::Step Responder::execute_atomic(QpContext& qp, Request& r) {
    counter("atomic_requests")++;
    ++qp.counters.rx_atomic_requests;
    const packet::AtomicEth& a = *r.p.h.atomic_eth;
    if (a.va % kAtomicBytes != 0) {
        HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " atomic at misaligned va 0x" << std::hex << a.va);
        fail(qp, r.t, packet::kNakInvalidRequest, CqeStatus::Success, r.psn, std::nullopt);
        return Step::Done;
    }
    m_spans.clear();
    const Translation tr = (qp.qpc.access & kRemoteAtomic)
                               ? m_w.translation.translate_remote(r.t, a.rkey, qp.qpn, qp.recv_pdn(), a.va, kAtomicBytes,
                                                                  kRemoteAtomic, m_spans)
                               : Translation{Protection::AccessDenied, r.t};
    if (tr.status != Protection::Ok) {
        HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " atomic rkey " << a.rkey << ": " << to_string(tr.status));
        fail(qp, tr.ready, packet::kNakRemoteAccessError, CqeStatus::Success, r.psn, std::nullopt);
        return Step::Done;
    }
    const std::uint64_t bus = m_spans.front().addr;
    sim::Tick start = tr.ready;
    const auto busy = m_atomic_busy.find(bus);
    if (busy != m_atomic_busy.end()) start = std::max(start, busy->second);
    // The adapter executes hca.atomic_units atomics at once: this one takes
    // the unit that frees first and holds it until the original value is on
    // chip and the write is issued (PCIe keeps a later read behind it).
    sim::Tick* unit = nullptr;
    if (!m_atomic_unit_free.empty()) {
        unit = &*std::min_element(m_atomic_unit_free.begin(), m_atomic_unit_free.end());
        start = std::max(start, *unit);
    }
    std::uint64_t orig = 0;
    const sim::Tick have = m_w.dma.read(start, m_spans.data(), m_spans.size(), reinterpret_cast<std::uint8_t*>(&orig));
    // The transport bits aside, XRC's opcodes are RC's.
    const bool cas = (r.p.h.bth.opcode & 0x1f) == static_cast<std::uint8_t>(Opcode::RcCompareSwap);
    const std::uint64_t next = cas ? (orig == a.compare ? a.swap_add : orig) : orig + a.swap_add;
    const sim::Tick visible =
        m_w.dma.write(have, m_spans.data(), m_spans.size(), reinterpret_cast<const std::uint8_t*>(&next));
    // The next atomic on these bytes reads them once this write has landed.
    if (m_atomic_busy.size() > kAtomicAddressesTracked) {
        for (auto it = m_atomic_busy.begin(); it != m_atomic_busy.end();)
            it = it->second <= r.t ? m_atomic_busy.erase(it) : std::next(it);
    }
    m_atomic_busy[bus] = visible;
    if (unit) *unit = have;
    counter(cas ? "compare_swaps" : "fetch_adds")++;
    qp.resp.msn = psn_add(qp.resp.msn, 1);
    qp.resp.epsn = psn_add(r.psn, 1);
    qp.resp.atomic_results.push_back({r.psn, orig, qp.resp.msn});
    while (qp.resp.atomic_results.size() > std::max<std::uint32_t>(1, qp.qpc.max_dest_rd_atomic)) qp.resp.atomic_results.pop_front();
    queue_atomic_ack(qp, have, r.psn, orig, qp.resp.msn);
    return Step::Done;
}

// SEND with invalidate: once the message is placed, the type 2 memory
// window its IETH names is invalidated (it must be bound to this QP). One
// that cannot be fails the message as an invalid request: NAK, and the
// receive WQE completes with IBV_WC_REM_INV_REQ_ERR (as rxe does).
Responder::Step Responder::invalidate_rkey(QpContext& qp, Request& r) {
    const std::uint32_t rkey = *r.p.h.ieth;
    const WindowResult res = m_w.translation.invalidate_window(r.t, rkey, qp.qpn, qp.recv_pdn());
    r.t = std::max(r.t, res.ready);
    if (res.status == WindowStatus::Ok) {
        counter("remote_invalidates")++;
        return Step::Next;
    }
    HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " SEND with invalidate of rkey " << rkey << ": "
                                                  << to_string(res.status));
    fail(qp, r.t, packet::kNakInvalidRequest, CqeStatus::RemoteInvalidRequest, r.psn, std::nullopt);
    return Step::Done;
}

// A READ or atomic asked again means the requester went back to its PSN
// and asks again for everything after it: answers still queued for that
// PSN or later go unsent, as the adapter's one response context per READ
// starts over. Sent anyway, a repeated READ's answer would queue behind
// older copies of later ones, which the requester takes as lost answers
// (implied NAK) and goes back again, for ever; and ACKs wait behind them.
void Responder::drop_superseded_answers(QpContext& qp, std::uint32_t psn) {
    auto& jobs = qp.resp.read_jobs;
    const auto before = jobs.size();
    jobs.erase(std::remove_if(jobs.begin(), jobs.end(),
                              [&](const ReadResponseJob& j) {
                                  const std::uint32_t n = j.atomic ? 1 : packets_for(j.length, qp.qpc.path_mtu);
                                  return psn_diff(psn_add(j.first_psn, n - 1), psn) >= 0;
                              }),
               jobs.end());
    counter("read_answers_dropped") += before - jobs.size();
}

void Responder::queue_atomic_ack(QpContext& qp, sim::Tick ready, std::uint32_t psn, std::uint64_t orig,
                                 std::uint32_t msn) {
    ReadResponseJob job;
    job.atomic = true;
    job.orig = orig;
    job.ready = ready;
    job.first_psn = psn;
    job.msn = msn;
    qp.resp.read_jobs.push_back(std::move(job));
    m_w.tx.kick(qp, ready);
}

void Responder::acknowledge(QpContext& qp, Request& r) {
    qp.resp.epsn = psn_add(r.psn, 1);
    const TransportService& svc = qp.service();
    if (!svc.acknowledged) return;
    if (r.p.h.bth.ack_req || ++qp.resp.unacked_packets >= m_p.ack_coalesce) {
        qp.resp.unacked_packets = 0;
        // Reliable reception: acknowledge only what is in host memory.
        const sim::Tick ack_at = svc.ack_when_visible ? std::max(r.t, m_w.dma.last_write_visible()) : r.t;
        respond(qp, ack_at, packet::kAethAck | packet::kAethCreditsInvalid, r.psn);
    }
}

void Responder::respond(QpContext& qp, sim::Tick t, std::uint8_t syndrome, std::uint32_t psn) {
    if (!qp.resp.read_jobs.empty()) {
        // A later response supersedes an earlier held one: it covers it.
        qp.resp.ack_deferred = true;
        qp.resp.deferred_syndrome = syndrome;
        qp.resp.deferred_psn = psn;
        counter("acks_held_behind_reads")++;
        return;
    }
    m_w.tx.send_ack(qp, t, syndrome, psn);
}

bool Responder::produce(QpContext& qp, sim::Tick now) {
    if (qp.resp.read_jobs.empty()) return false;
    ReadResponseJob& job = qp.resp.read_jobs.front();
    if (job.atomic) {
        packet::Headers h;
        h.bth.opcode = qp.service().opcode_base | op(Opcode::RcAtomicAcknowledge);
        h.bth.psn = job.first_psn;
        h.aeth = packet::Aeth{packet::kAethAck | packet::kAethCreditsInvalid, job.msn};
        h.atomic_ack = job.orig;
        std::uint8_t* payload = nullptr;
        auto pkt = m_w.tx.make_packet(route_of(qp), h, 0, &payload);
        const sim::Tick ready = std::max(now, job.ready);
        qp.resp.read_jobs.pop_front();
        counter("atomic_acks")++;
        m_w.tx.launch(qp, std::move(pkt), ready);
        release_held_ack(qp, now);
        return true;
    }
    const std::uint32_t mtu = qp.qpc.path_mtu;
    const std::uint32_t n = std::min(mtu, job.length - job.offset);
    const bool first = job.offset == 0;
    const bool last = job.offset + n == job.length;
    packet::Headers h;
    h.bth.opcode = qp.service().opcode_base | op(first && last ? Opcode::RcReadResponseOnly
                      : first       ? Opcode::RcReadResponseFirst
                      : last        ? Opcode::RcReadResponseLast
                                    : Opcode::RcReadResponseMiddle);
    h.bth.psn = psn_add(job.first_psn, job.offset / mtu);
    if (first || last) h.aeth = packet::Aeth{packet::kAethAck | packet::kAethCreditsInvalid, job.msn};
    std::uint8_t* payload = nullptr;
    auto pkt = m_w.tx.make_packet(route_of(qp), h, n, &payload);
    std::vector<DmaSpan>& slices = m_spans;
    slices.clear();
    slice_spans(job.spans, job.offset, n, slices);
    const sim::Tick data = m_w.dma.read(now, slices.data(), slices.size(), payload);
    job.offset += n;
    (*m_n_read_response_packets)++;
    if (last) qp.resp.read_jobs.pop_front();
    m_w.tx.launch(qp, std::move(pkt), data);
    release_held_ack(qp, now);
    return true;
}

// The ACK or NAK held behind the READ responses goes once the last of them
// has; with a NAK for a failed request the QP then enters the error state
// (scheduled, not from inside the transmit pipeline's turn).
void Responder::release_held_ack(QpContext& qp, sim::Tick now) {
    if (!qp.resp.read_jobs.empty() || !qp.resp.ack_deferred) return;
    qp.resp.ack_deferred = false;
    m_w.tx.send_ack(qp, now, qp.resp.deferred_syndrome, qp.resp.deferred_psn);
    if (!qp.resp.error_deferred) return;
    const std::uint32_t qpn = qp.qpn;
    at(now, [this, qpn]() {
        QpContext* q = m_w.qps.working_state(qpn);
        if (!q || !q->resp.error_deferred) return;
        q->resp.error_deferred = false;
        m_w.errors.enter_error(*q, sim::now_ps());
    });
}

// A failed request's NAK, and the error state it puts the QP in: at once,
// or, when READ responses to earlier requests are still to be sent, after
// them (IBA 9.7.5.1: responses leave in PSN order; a NAK ahead of them
// would tell the requester its READs were done without their data).
void Responder::nak_and_enter_error(QpContext& qp, sim::Tick t, std::uint8_t nak_code, std::uint32_t psn) {
    const bool behind_reads = !qp.resp.read_jobs.empty();
    respond(qp, t, packet::kAethNak | nak_code, psn);
    if (behind_reads)
        qp.resp.error_deferred = true;  // release_held_ack ends it
    else
        m_w.errors.enter_error(qp, t);
}

void Responder::complete_recv(QpContext& qp, sim::Tick t, const packet::Parsed& p, CqeStatus status, bool rdma_imm,
                              std::uint32_t byte_len) {
    if (qp.fetch.rq_cache.empty()) return;
    RecvWork w = std::move(qp.fetch.rq_cache.front());
    qp.fetch.rq_cache.pop_front();
    if (qp.is_vi()) {
        const std::uint32_t err = vi_error_bits(status);
        const std::uint32_t st = kViStatusDone | err | (rdma_imm ? kViStatusOpRemoteRdmaWrite : kViStatusOpReceive) |
                                 (p.h.immdt ? kViStatusImmediate : 0);
        std::optional<std::uint32_t> imm;
        if (p.h.immdt) imm = *p.h.immdt;
        m_w.completions.complete_descriptor(qp, true, w.desc_addr, w.desc_handle, st, byte_len, imm, t);
        m_w.fetch.recv_consumed(qp, t);
        return;
    }
    Cqe c{};
    c.qpn = qp.qpn;
    c.byte_len = byte_len;
    c.src_qp = p.h.deth ? p.h.deth->src_qp : qp.qpc.dest_qpn;
    c.wqe_index = w.wqe_index;
    c.slid = p.h.lrh.slid;
    c.sl = p.h.lrh.sl;
    if (p.h.grh && !qp.service().connected) c.flags |= kCqeGrh;
    if (qp.xrc_target()) {
        c.src_qp = qp.recv_srqn();
        c.flags |= kCqeXrcSrq;
    }
    c.opcode = static_cast<std::uint8_t>(rdma_imm ? CqeOpcode::RecvRdmaWithImm : CqeOpcode::Recv);
    c.status = static_cast<std::uint8_t>(status);
    if (p.h.immdt) {
        c.imm_data = *p.h.immdt;
        c.flags |= kCqeWithImm;
    }
    if (p.h.ieth) {
        c.imm_data = *p.h.ieth;
        c.flags |= kCqeWithInvalidate;
    }
    if (p.h.bth.se) c.flags |= kCqeSolicited;
    if (!m_w.completions.post_cqe(t, qp.recv_cqn(), c) && status == CqeStatus::Success) {
        m_w.errors.raise_async(t, AsyncEvent{AsyncEventType::QpFatal, qp.qpn});
        m_w.errors.enter_error(qp, t);
        return;
    }
    m_w.fetch.recv_consumed(qp, t);
}

void Responder::fail(QpContext& qp, sim::Tick t, std::uint8_t nak_code, CqeStatus recv_status, std::uint32_t psn,
                     std::optional<AsyncEventType> vi_event, std::optional<AsyncEventType> ib_event) {
    counter("responder_errors")++;
    if (!qp.service().acknowledged && !qp.is_vi()) {
        // UC and UD send no NAKs and stay up: the message is dropped, and a
        // receive WQE it was using completes with the error.
        if (recv_status != CqeStatus::Success && !qp.fetch.rq_cache.empty()) {
            packet::Parsed none;
            none.h.lrh.slid = qp.qpc.dlid;
            complete_recv(qp, t, none, recv_status, false, 0);
        }
        qp.resp.recv_in_progress = false;
        qp.resp.write_in_progress = false;
        qp.resp.epsn = psn_add(psn, 1);
        return;
    }
    if (qp.is_vi()) {
        // The VI Architecture reports these through the descriptor or as an
        // asynchronous error; an unreliable VI sends no NAK and stays connected.
        if (recv_status != CqeStatus::Success && !qp.fetch.rq_cache.empty()) {
            packet::Parsed none;
            complete_recv(qp, t, none, recv_status, false, 0);
        }
        if (vi_event)
            m_w.errors.raise_async(t, AsyncEvent{*vi_event, qp.qpn, 0, 0, *vi_event == AsyncEventType::ViRecvQueueEmpty});
        qp.resp.recv_in_progress = false;
        qp.resp.write_in_progress = false;
        if (qp.qpc.vi == ViReliability::Unreliable) return;
        nak_and_enter_error(qp, t, nak_code, psn);
        return;
    }
    if (recv_status != CqeStatus::Success && !qp.fetch.rq_cache.empty()) {
        packet::Parsed none;
        none.h.lrh.slid = qp.qpc.dlid;
        complete_recv(qp, t, none, recv_status, false, 0);
    }
    qp.resp.recv_in_progress = false;
    qp.resp.write_in_progress = false;
    m_w.errors.raise_async(t, AsyncEvent{ib_event                                      ? *ib_event
                                         : nak_code == packet::kNakRemoteAccessError ? AsyncEventType::QpAccessError
                                                                                     : AsyncEventType::QpRequestError,
                                         qp.qpn});
    nak_and_enter_error(qp, t, nak_code, psn);
}

}  // namespace hcasim::hca
