#include "model/hca/rx_transport.hpp"

#include <algorithm>

#include "model/hca/hca.hpp"
#include "model/packet/opcode_table.hpp"

namespace hcasim::hca {

using packet::Opcode;

namespace {

// IBA 9.7.5.2.8: RNR NAK timer codes, in microseconds.
constexpr double kRnrTimerUs[32] = {655360, 10,    20,    30,    40,    60,    80,     120,
                                    160,    240,   320,   480,   640,   960,   1280,   1920,
                                    2560,   3840,  5120,  7680,  10240, 15360, 20480,  30720,
                                    40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};

bool is_op(std::uint8_t o, Opcode x) { return o == static_cast<std::uint8_t>(x); }

CqeOpcode cqe_opcode(WqeOpcode op) {
    switch (op) {
    case WqeOpcode::Send:
    case WqeOpcode::SendImm: return CqeOpcode::Send;
    case WqeOpcode::RdmaWrite:
    case WqeOpcode::RdmaWriteImm: return CqeOpcode::RdmaWrite;
    case WqeOpcode::RdmaRead: return CqeOpcode::RdmaRead;
    }
    return CqeOpcode::Send;
}

std::uint32_t last_psn(const SendWork& w) { return psn_add(w.first_psn, w.npsn - 1); }

}  // namespace

RxTransport::RxTransport(const sc_core::sc_module_name& name, const HcaParams& p, Hca& hca)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_hca(hca), m_p(p), m_pipe(&m_clock) {
    // The receive buffer absorbs what the PCIe upstream link sends in the
    // time of this many bytes.
    const double up_bytes_per_ps = hca.pcie().params().direction_bytes_per_s() / 1e12;
    m_backlog_slack = static_cast<sim::Tick>(static_cast<double>(p.rx_buffer_bytes) / up_bytes_per_ps);
    m_n_packets = &counter("packets");
}

void RxTransport::receive(packet::PacketPtr pkt, sim::Tick t) {
    const std::size_t size = pkt->bytes.size();
    // The receive path drains into host memory: a packet is processed only
    // once the PCIe writes of those before it have left the adapter, so a
    // sender cannot outrun the receiver's PCIe (its ACKs wait).
    const sim::Tick gate = m_hca.pcie().posted_backlog_end();
    const sim::Tick done = m_pipe
                               .reserve(std::max(t, gate > m_backlog_slack ? gate - m_backlog_slack : 0),
                                        m_p.rx_packet_cycles + (size + m_p.datapath_bytes - 1) / m_p.datapath_bytes)
                               .end;
    packet::Parsed p;
    const packet::ParseError err = packet::parse(pkt->bytes.data(), size, p);
    if (err != packet::ParseError::None) {
        // IBA: a malformed packet is silently dropped and counted.
        counter(std::string("dropped_") + packet::to_string(err))++;
        HCASIM_LOG(sim::LogLevel::Info, path(), "dropped packet: " << packet::to_string(err));
        return;
    }
    if (p.h.lrh.dlid != m_hca.port().lid()) {
        counter("dropped_wrong_dlid")++;
        return;
    }
    if (p.h.bth.dest_qp == 1 && p.h.bth.opcode == static_cast<std::uint8_t>(Opcode::UdSendOnly)) {
        // QP1: a management datagram for the firmware's agents.
        counter("mads")++;
        if (m_hca.mad_handler()) m_hca.mad_handler()(p, pkt->bytes.data() + p.payload_offset, done);
        return;
    }
    QpContext* qp = m_hca.qp(p.h.bth.dest_qp);
    if (!qp) {
        counter("dropped_unknown_qp")++;
        return;
    }
    (*m_n_packets)++;
    const std::uint8_t* payload = pkt->bytes.data() + p.payload_offset;
    // The packet stays alive until the payload writes that point into it land.
    m_current = std::move(pkt);
    const packet::OpcodeInfo& info = packet::opcode_info(p.h.bth.opcode);
    if (info.qp_types == packet::kQpRc && info.request) {
        responder(*qp, p, payload, done);
    } else if (info.qp_types == packet::kQpRc) {
        requester(*qp, p, payload, done);
    } else {
        counter("dropped_unsupported_transport")++;
    }
    m_current.reset();
}

void RxTransport::responder(QpContext& qp, const packet::Parsed& p, const std::uint8_t* payload, sim::Tick t) {
    if (qp.state != QpState::Rtr && qp.state != QpState::Rts && qp.state != QpState::Sqd) {
        counter("dropped_qp_state")++;
        return;
    }
    const std::uint8_t o = p.h.bth.opcode;
    const packet::OpcodeInfo& info = packet::opcode_info(o);
    const std::uint32_t psn = p.h.bth.psn;
    std::int32_t d = psn_diff(psn, qp.epsn);
    const bool unreliable = qp.vi == ViReliability::Unreliable;
    if (unreliable && d != 0) {
        // Unreliable delivery: nothing is resent. Late packets are dropped; a
        // gap abandons the message in progress and resynchronises on the
        // next packet that starts one.
        if (d < 0) {
            counter("dropped_duplicates")++;
            return;
        }
        counter("lost_packet_gaps")++;
        qp.recv_in_progress = false;
        qp.write_in_progress = false;
        const bool starts = (info.send || info.write) && info.starts_message();
        qp.epsn = psn_add(psn, 1);
        if (!starts) return;
        qp.epsn = psn;
        d = 0;
    }
    if (d < 0) {
        // Duplicate: the requester missed our ACK; acknowledge again.
        counter("duplicates")++;
        m_hca.tx().send_ack(qp, t, packet::kAethAck | 0x1f, psn_add(qp.epsn, kPsnMask));
        return;
    }
    if (d > 0) {
        counter("out_of_sequence")++;
        if (!qp.nak_outstanding) {
            qp.nak_outstanding = true;
            m_hca.tx().send_ack(qp, t, packet::kAethNak | packet::kNakPsnSequenceError, qp.epsn);
        }
        return;
    }
    qp.nak_outstanding = false;
    const std::uint32_t len = static_cast<std::uint32_t>(p.payload_len);
    const bool send_first = info.send && info.starts_message();
    const bool send_rest = info.send && !info.starts_message();
    const bool write_first = info.write && info.starts_message();
    const bool write_rest = info.write && !info.starts_message();
    const bool last = (info.send || info.write) && info.ends_message();
    const bool imm = p.h.immdt.has_value();

    // A new message may not start in the middle of another one.
    if ((send_first || write_first || is_op(o, Opcode::RcReadRequest)) && (qp.recv_in_progress || qp.write_in_progress)) {
        responder_error(qp, t, packet::kNakInvalidRequest, CqeStatus::Success, psn, AsyncEventType::ViRdmaTransport);
        return;
    }
    if ((send_rest && !qp.recv_in_progress) || (write_rest && !qp.write_in_progress)) {
        if (unreliable) {
            // The rest of a message whose start was dropped.
            counter("dropped_orphans")++;
            qp.epsn = psn_add(psn, 1);
            return;
        }
        responder_error(qp, t, packet::kNakInvalidRequest, CqeStatus::Success, psn, AsyncEventType::ViRdmaTransport);
        return;
    }

    // Messages that consume a receive WQE need one on chip, or RNR NAK.
    const bool needs_recv = send_first || ((write_first || write_rest) && last && imm);
    if (needs_recv && qp.rq_cache.empty()) {
        t = m_hca.fetch().prefetch_recv(qp, t, true);
        if (qp.rq_cache.empty() && qp.is_vi()) {
            // The VI Architecture has no receiver-not-ready retry: the message
            // is lost (unreliable) or the connection breaks (reliable).
            counter("recv_queue_empty")++;
            HCASIM_LOG(sim::LogLevel::Info, path(), "VI " << qp.qpn << " has no receive descriptor for PSN " << psn << " (posted " << qp.rq_pi << ", fetched " << qp.rq_fetched << ", in flight " << qp.vi_rq.fetching << ")");
            if (unreliable) {
                m_hca.raise_async(t, AsyncEvent{AsyncEventType::ViRecvQueueEmpty, qp.qpn, 0, 0, true});
                qp.epsn = psn_add(psn, 1);
                return;
            }
            responder_error(qp, t, packet::kNakRemoteOperationalError, CqeStatus::Success, psn,
                            AsyncEventType::ViRecvQueueEmpty);
            return;
        }
        if (qp.rq_cache.empty()) {
            counter("rnr_naks")++;
            HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " has no receive WQE for PSN " << psn
                                                          << " (posted " << qp.rq_pi << ", fetched " << qp.rq_fetched
                                                          << "): RNR NAK");
            qp.nak_outstanding = true;
            m_hca.tx().send_ack(qp, t, packet::kAethRnrNak | (qp.min_rnr_timer & 0x1f), psn);
            return;
        }
    }
    if (needs_recv) t = std::max(t, qp.rq_cache.front().ready_at);

    if (send_first) {
        RecvWork& r = qp.rq_cache.front();
        qp.recv_spans.clear();
        for (const auto& sge : r.sges) {
            if (sge.length == 0) continue;
            const Translation tr =
                m_hca.translation().translate(t, sge.lkey, qp.pdn, sge.addr, sge.length, kLocalWrite, qp.recv_spans);
            t = std::max(t, tr.ready);
            if (tr.status != Protection::Ok) {
                HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " receive WQE " << r.wqe_index << ": lkey "
                                                              << sge.lkey << " " << to_string(tr.status));
                responder_error(qp, t, packet::kNakRemoteOperationalError, CqeStatus::LocalProtection, psn, std::nullopt);
                return;
            }
        }
        qp.recv_in_progress = true;
        qp.recv_offset = 0;
    }
    if (send_first || send_rest) {
        RecvWork& r = qp.rq_cache.front();
        if (static_cast<std::uint64_t>(qp.recv_offset) + len > r.length) {
            HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " receive WQE " << r.wqe_index << " of "
                                                          << r.length << " bytes too small");
            responder_error(qp, t, packet::kNakInvalidRequest, CqeStatus::LocalLength, psn, std::nullopt);
            return;
        }
        // The CQE is issued after the payload writes; posted-write ordering
        // makes it visible only after them.
        if (len) {
            m_spans.clear();
            slice_spans(qp.recv_spans, qp.recv_offset, len, m_spans);
            m_hca.dma().write(t, m_spans.data(), m_spans.size(), m_current, payload);
        }
        qp.recv_offset += len;
        if (last) {
            qp.recv_in_progress = false;
            qp.msn = psn_add(qp.msn, 1);
            complete_recv(qp, t, p, CqeStatus::Success, false, qp.recv_offset);
        }
    }

    if (write_first) {
        const packet::Reth& reth = *p.h.reth;
        qp.write_spans.clear();
        const Translation tr = (qp.access & kRemoteWrite)
                                   ? m_hca.translation().translate(t, reth.rkey, qp.pdn, reth.va, reth.dma_len,
                                                                   kRemoteWrite, qp.write_spans)
                                   : Translation{Protection::AccessDenied, t};
        t = std::max(t, tr.ready);
        if (tr.status != Protection::Ok) {
            HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " RDMA WRITE rkey " << reth.rkey << " va 0x"
                                                          << std::hex << reth.va << std::dec << " len " << reth.dma_len
                                                          << ": " << to_string(tr.status));
            // With immediate data the receive descriptor carries the error;
            // without, only an asynchronous error can.
            const bool to_desc = qp.is_vi() && is_op(o, Opcode::RcWriteOnlyImm) && !qp.rq_cache.empty();
            responder_error(qp, t, packet::kNakRemoteAccessError, to_desc ? CqeStatus::RemoteAccess : CqeStatus::Success,
                            psn, to_desc ? std::nullopt : std::optional(AsyncEventType::ViRdmaWriteProtection));
            return;
        }
        qp.write_in_progress = true;
        qp.write_total = reth.dma_len;
        qp.write_remaining = reth.dma_len;
    }
    if (write_first || write_rest) {
        if (len > qp.write_remaining || (last && len != qp.write_remaining)) {
            responder_error(qp, t, packet::kNakInvalidRequest, CqeStatus::Success, psn, AsyncEventType::ViRdmaTransport);
            return;
        }
        if (len) {
            m_spans.clear();
            slice_spans(qp.write_spans, qp.write_total - qp.write_remaining, len, m_spans);
            m_hca.dma().write(t, m_spans.data(), m_spans.size(), m_current, payload);
        }
        qp.write_remaining -= len;
        if (last) {
            qp.write_in_progress = false;
            qp.msn = psn_add(qp.msn, 1);
            if (imm) complete_recv(qp, t, p, CqeStatus::Success, true, qp.write_total);
        }
    }

    if (is_op(o, Opcode::RcReadRequest)) {
        const packet::Reth& reth = *p.h.reth;
        ReadResponseJob job;
        const Translation tr = (qp.access & kRemoteRead)
                                   ? m_hca.translation().translate(t, reth.rkey, qp.pdn, reth.va, reth.dma_len,
                                                                   kRemoteRead, job.spans)
                                   : Translation{Protection::AccessDenied, t};
        if (tr.status != Protection::Ok) {
            HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " RDMA READ rkey " << reth.rkey << ": "
                                                          << to_string(tr.status));
            responder_error(qp, tr.ready, packet::kNakRemoteAccessError, CqeStatus::Success, psn,
                            AsyncEventType::ViRdmaReadProtection);
            return;
        }
        job.va = reth.va;
        job.rkey = reth.rkey;
        job.length = reth.dma_len;
        job.first_psn = psn;
        qp.msn = psn_add(qp.msn, 1);
        job.msn = qp.msn;
        const std::uint32_t n = reth.dma_len == 0 ? 1 : (reth.dma_len + qp.path_mtu - 1) / qp.path_mtu;
        qp.epsn = psn_add(psn, n);
        qp.read_jobs.push_back(std::move(job));
        m_hca.tx().kick(qp, tr.ready);
        return;
    }

    qp.epsn = psn_add(psn, 1);
    if (unreliable) return;  // nothing is acknowledged
    if (p.h.bth.ack_req || ++qp.unacked_packets >= m_p.ack_coalesce) {
        qp.unacked_packets = 0;
        // Reliable reception: acknowledge only what is in host memory.
        const sim::Tick ack_at =
            qp.vi == ViReliability::ReliableReception ? std::max(t, m_hca.dma().last_write_visible()) : t;
        m_hca.tx().send_ack(qp, ack_at, packet::kAethAck | 0x1f, psn);
    }
}

void RxTransport::complete_recv(QpContext& qp, sim::Tick t, const packet::Parsed& p, CqeStatus status, bool rdma_imm,
                                std::uint32_t byte_len) {
    if (qp.rq_cache.empty()) return;
    RecvWork r = std::move(qp.rq_cache.front());
    qp.rq_cache.pop_front();
    if (qp.is_vi()) {
        const std::uint32_t err = vi_error_bits(status);
        const std::uint32_t st = kViStatusDone | err | (rdma_imm ? kViStatusOpRemoteRdmaWrite : kViStatusOpReceive) |
                                 (p.h.immdt ? kViStatusImmediate : 0);
        std::optional<std::uint32_t> imm;
        if (p.h.immdt) imm = *p.h.immdt;
        m_hca.descriptors().complete(qp, true, r.desc_addr, r.desc_handle, st, byte_len, imm, t);
        m_hca.fetch().recv_consumed(qp, t);
        return;
    }
    Cqe c{};
    c.qpn = qp.qpn;
    c.byte_len = byte_len;
    c.src_qp = qp.dest_qpn;
    c.wqe_index = r.wqe_index;
    c.slid = p.h.lrh.slid;
    c.opcode = static_cast<std::uint8_t>(rdma_imm ? CqeOpcode::RecvRdmaWithImm : CqeOpcode::Recv);
    c.status = static_cast<std::uint8_t>(status);
    if (p.h.immdt) {
        c.imm_data = *p.h.immdt;
        c.flags |= kCqeWithImm;
    }
    if (p.h.bth.se) c.flags |= kCqeSolicited;
    if (!m_hca.completion().post(t, qp.recv_cqn, c) && status == CqeStatus::Success) {
        m_hca.raise_async(t, AsyncEvent{AsyncEventType::QpFatal, qp.qpn});
        m_hca.enter_error(qp, t);
        return;
    }
    m_hca.fetch().recv_consumed(qp, t);
}

void RxTransport::responder_error(QpContext& qp, sim::Tick t, std::uint8_t nak_code, CqeStatus recv_status,
                                  std::uint32_t psn, std::optional<AsyncEventType> vi_event) {
    counter("responder_errors")++;
    if (qp.is_vi()) {
        // The VI Architecture reports these through the descriptor or as an
        // asynchronous error; an unreliable VI sends no NAK and stays connected.
        if (recv_status != CqeStatus::Success && !qp.rq_cache.empty()) {
            packet::Parsed none;
            complete_recv(qp, t, none, recv_status, false, 0);
        }
        if (vi_event) m_hca.raise_async(t, AsyncEvent{*vi_event, qp.qpn, 0, 0, *vi_event == AsyncEventType::ViRecvQueueEmpty});
        qp.recv_in_progress = false;
        qp.write_in_progress = false;
        if (qp.vi == ViReliability::Unreliable) return;
        m_hca.tx().send_ack(qp, t, packet::kAethNak | nak_code, psn);
        m_hca.enter_error(qp, t);
        return;
    }
    m_hca.tx().send_ack(qp, t, packet::kAethNak | nak_code, psn);
    if (recv_status != CqeStatus::Success && !qp.rq_cache.empty()) {
        packet::Parsed none;
        none.h.lrh.slid = qp.dlid;
        complete_recv(qp, t, none, recv_status, false, 0);
    }
    qp.recv_in_progress = false;
    qp.write_in_progress = false;
    m_hca.raise_async(t, AsyncEvent{nak_code == packet::kNakRemoteAccessError ? AsyncEventType::QpAccessError
                                                                               : AsyncEventType::QpRequestError,
                                    qp.qpn});
    m_hca.enter_error(qp, t);
}

void RxTransport::requester(QpContext& qp, const packet::Parsed& p, const std::uint8_t* payload, sim::Tick t) {
    if (qp.state != QpState::Rts && qp.state != QpState::Sqd) {
        counter("dropped_qp_state")++;
        return;
    }
    const std::uint8_t o = p.h.bth.opcode;
    const packet::OpcodeInfo& info = packet::opcode_info(o);
    const std::uint32_t psn = p.h.bth.psn;
    if (is_op(o, Opcode::RcAcknowledge)) {
        const std::uint8_t syn = p.h.aeth->syndrome;
        const std::uint8_t kind = syn & 0x60;
        if (kind == packet::kAethAck) {
            ack_received(qp, psn, t);
        } else if (kind == packet::kAethRnrNak) {
            counter("rnr_naks_received")++;
            ack_received(qp, psn_add(psn, kPsnMask), t);
            if (qp.rnr_retry != 7) {
                if (qp.rnr_retries_left == 0) {
                    fail_wqe(qp, psn, CqeStatus::RnrRetryExceeded, t);
                    return;
                }
                --qp.rnr_retries_left;
            }
            m_hca.tx().rewind(qp, psn, t + static_cast<sim::Tick>(kRnrTimerUs[syn & 0x1f] * sim::kPsPerUs));
        } else if (kind == packet::kAethNak) {
            counter("naks_received")++;
            switch (syn & 0x1f) {
            case packet::kNakPsnSequenceError:
                ack_received(qp, psn_add(psn, kPsnMask), t);
                m_hca.tx().rewind(qp, psn, t);
                break;
            case packet::kNakInvalidRequest: fail_wqe(qp, psn, CqeStatus::RemoteInvalidRequest, t); break;
            case packet::kNakRemoteAccessError: fail_wqe(qp, psn, CqeStatus::RemoteAccess, t); break;
            default: fail_wqe(qp, psn, CqeStatus::RemoteOperation, t); break;
            }
        }
        return;
    }
    // READ response: find the READ it answers.
    for (auto& w : qp.send_q) {
        if (!w.started || w.op != WqeOpcode::RdmaRead || w.acked) continue;
        const std::int32_t d = psn_diff(psn, w.first_psn);
        if (d < 0 || d >= static_cast<std::int32_t>(w.npsn)) continue;
        const std::uint32_t offset = static_cast<std::uint32_t>(d) * qp.path_mtu;
        if (offset != w.read_received) {
            counter("read_responses_out_of_order")++;
            return;
        }
        const bool first = info.starts_message();
        const bool last = info.ends_message();
        if (first) ack_received(qp, psn_add(psn, kPsnMask), t);
        const std::uint32_t len = static_cast<std::uint32_t>(p.payload_len);
        if (w.read_received + len > w.length) {
            fail_wqe(qp, psn, CqeStatus::BadResponse, t);
            return;
        }
        if (len) {
            m_spans.clear();
            slice_spans(w.spans, w.read_received, len, m_spans);
            m_hca.dma().write(t, m_spans.data(), m_spans.size(), m_current, payload);
        }
        w.read_received += len;
        w.done_at = std::max(w.done_at, t);
        if (last) {
            if (w.read_received != w.length) {
                fail_wqe(qp, psn, CqeStatus::BadResponse, t);
                return;
            }
            w.acked = true;
            if (qp.outstanding_reads) --qp.outstanding_reads;
            qp.rnr_retries_left = qp.rnr_retry;
            qp.retries_left = qp.retry_cnt;
            restart_ack_timer(qp, t);
            retire(qp, t);
            m_hca.tx().kick(qp, t);
        }
        return;
    }
    counter("read_responses_unmatched")++;
}

void RxTransport::ack_received(QpContext& qp, std::uint32_t psn, sim::Tick t) {
    bool progress = false;
    for (auto& w : qp.send_q) {
        if (!w.started || !w.fully_sent) break;
        if (w.op == WqeOpcode::RdmaRead) {
            if (!w.acked) break;
            continue;
        }
        if (psn_diff(psn, last_psn(w)) < 0) break;
        if (!w.acked) progress = true;
        w.acked = true;
    }
    if (progress) {
        qp.rnr_retries_left = qp.rnr_retry;
        qp.retries_left = qp.retry_cnt;
        restart_ack_timer(qp, t);
    }
    retire(qp, t);
}

void RxTransport::fail_wqe(QpContext& qp, std::uint32_t psn, CqeStatus status, sim::Tick t) {
    ack_received(qp, psn_add(psn, kPsnMask), t);
    if (qp.state == QpState::Err) return;
    for (auto& w : qp.send_q) {
        if (!w.started) break;
        const std::int32_t d = psn_diff(psn, w.first_psn);
        if (d >= 0 && d < static_cast<std::int32_t>(w.npsn)) {
            w.error = status;
            w.acked = true;
            retire(qp, t);
            return;
        }
    }
    m_hca.enter_error(qp, t);
}

namespace {
sim::Tick ack_timeout_ps(const QpContext& qp) { return static_cast<sim::Tick>(4096) * sim::kPsPerNs << qp.timeout; }
}  // namespace

void RxTransport::arm_ack_timer(QpContext& qp, sim::Tick t) {
    if (qp.timeout == 0) return;  // 0: wait forever
    if (qp.ack_timer_armed) return;
    qp.ack_timer_armed = true;
    qp.ack_deadline = t + ack_timeout_ps(qp);
    const std::uint32_t qpn = qp.qpn;
    at(qp.ack_deadline, [this, qpn]() { ack_timeout(qpn); });
}

// Progress pushes the deadline out; the pending timer event notices when it
// fires, so there is one event per time-out period, not one per ACK.
void RxTransport::restart_ack_timer(QpContext& qp, sim::Tick t) {
    if (qp.timeout == 0) return;
    qp.ack_deadline = t + ack_timeout_ps(qp);
}

void RxTransport::ack_timeout(std::uint32_t qpn) {
    QpContext* qp = m_hca.qp(qpn);
    if (!qp || !qp->ack_timer_armed) return;
    const sim::Tick now = sim::now_ps();
    qp->ack_timer_armed = false;
    if (qp->state != QpState::Rts && qp->state != QpState::Sqd) return;
    const SendWork* oldest = nullptr;
    for (const auto& w : qp->send_q) {
        if (w.started && !w.acked) {
            oldest = &w;
            break;
        }
    }
    if (!oldest) return;
    if (now < qp->ack_deadline) {
        // Acknowledged progress since the timer was set: wait on.
        qp->ack_timer_armed = true;
        at(qp->ack_deadline, [this, qpn]() { ack_timeout(qpn); });
        return;
    }
    counter("ack_timeouts")++;
    if (qp->retries_left == 0) {
        HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qpn << ": no ACK, retries exhausted");
        fail_wqe(*qp, oldest->first_psn, CqeStatus::RetryExceeded, now);
        return;
    }
    --qp->retries_left;
    m_hca.tx().rewind(*qp, oldest->first_psn, now);
    arm_ack_timer(*qp, now);
}

void RxTransport::retire(QpContext& qp, sim::Tick t) {
    while (!qp.send_q.empty() && qp.state != QpState::Err) {
        SendWork& w = qp.send_q.front();
        if (!w.acked) break;
        if (qp.is_vi()) {
            // Every VI descriptor is written back; errors break a reliable connection.
            const SendWork done = std::move(w);
            qp.send_q.pop_front();
            if (qp.tx_index > 0) --qp.tx_index;
            const std::uint32_t err = done.vi_error ? done.vi_error : vi_error_bits(done.error);
            const std::uint32_t status = kViStatusDone | err | vi_op_bits(done.op);
            m_hca.descriptors().complete(qp, false, done.desc_addr, done.desc_handle, status, err ? 0 : done.length,
                                         std::nullopt, std::max(t, done.done_at));
            if (err && qp.vi != ViReliability::Unreliable) {
                m_hca.enter_error(qp, t);
                return;
            }
            counter("wqes_completed")++;
            continue;
        }
        const bool signaled = (w.flags & kWqeSignaled) || qp.sq_sig_all;
        if (w.error != CqeStatus::Success || signaled) {
            Cqe c{};
            c.qpn = qp.qpn;
            c.byte_len = w.length;
            c.wqe_index = w.wqe_index;
            c.opcode = static_cast<std::uint8_t>(cqe_opcode(w.op));
            c.status = static_cast<std::uint8_t>(w.error);
            c.flags = kCqeIsSend;
            const bool ok = m_hca.completion().post(std::max(t, w.done_at), qp.send_cqn, c);
            if (w.error != CqeStatus::Success || !ok) {
                qp.send_q.pop_front();
                if (qp.tx_index > 0) --qp.tx_index;
                if (!ok) m_hca.raise_async(t, AsyncEvent{AsyncEventType::QpFatal, qp.qpn});
                m_hca.enter_error(qp, t);
                return;
            }
        }
        qp.send_q.pop_front();
        if (qp.tx_index > 0) --qp.tx_index;
        counter("wqes_completed")++;
    }
}

}  // namespace hcasim::hca
