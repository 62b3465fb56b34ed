#include "model/hca/tx_transport.hpp"

#include <algorithm>
#include <cstring>

#include "model/hca/hca.hpp"

namespace hcasim::hca {

using packet::Opcode;

namespace {

std::uint8_t op(Opcode o) { return static_cast<std::uint8_t>(o); }

std::uint32_t packets_for(std::uint32_t len, std::uint32_t mtu) { return len == 0 ? 1 : (len + mtu - 1) / mtu; }

}  // namespace

TxTransport::TxTransport(const sc_core::sc_module_name& name, const HcaParams& p, Hca& hca)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_hca(hca), m_p(p), m_pipe(&m_clock) {
    m_n_packets = &counter("packets");
    m_n_bytes = &counter("bytes");
    m_n_request_packets = &counter("request_packets");
}

void TxTransport::kick(QpContext& qp, sim::Tick t) {
    if (qp.state != QpState::Rts && qp.state != QpState::Rtr && qp.state != QpState::Sqd) return;
    m_hca.scheduler().make_ready(qp);
    schedule_pump(m_hca.scheduler().decide(t));
}

void TxTransport::schedule_pump(sim::Tick t) {
    if (t >= m_pump_at) return;
    m_pump_at = t;
    at(t, [this, t]() {
        if (m_pump_at == t) {
            m_pump_at = ~sim::Tick(0);
            pump();
        }
    });
}

bool TxTransport::has_work(const QpContext& qp) const {
    if (!qp.read_jobs.empty()) return true;
    if (qp.state != QpState::Rts) return false;
    return qp.tx_index < qp.send_q.size() || qp.sq_fetched != qp.sq_pi;
}

void TxTransport::pump() {
    const sim::Tick now = sim::now_ps();
    while (!m_releases.empty() && m_releases.top().first <= now) {
        m_buffer_used -= m_releases.top().second;
        m_releases.pop();
    }
    const std::uint32_t max_packet = m_hca.port().max_mtu() + 128;  // headers and trailers fit in 128 B
    while (!m_hca.scheduler().empty()) {
        if (m_buffer_used + max_packet > m_p.tx_buffer_bytes) {
            // The buffer drains as the port serialises; resume then.
            if (!m_releases.empty()) schedule_pump(m_releases.top().first);
            return;
        }
        QpContext* qp = m_hca.scheduler().next();
        if (qp->tx_hold_until > now) {
            const std::uint32_t qpn = qp->qpn;
            at(qp->tx_hold_until, [this, qpn]() {
                if (QpContext* q = m_hca.qp(qpn)) kick(*q, sim::now_ps());
            });
            continue;
        }
        if (produce(*qp, now) == Produced::One && has_work(*qp)) m_hca.scheduler().make_ready(*qp);
    }
}

TxTransport::Produced TxTransport::produce(QpContext& qp, sim::Tick now) {
    // Read responses go first: the peer's requester is waiting on them.
    if (!qp.read_jobs.empty()) return produce_read_response(qp, now);
    if (qp.state != QpState::Rts) return Produced::None;
    return produce_request(qp, now);
}

packet::PacketPtr TxTransport::make_packet(const QpContext& qp, packet::Headers& h, std::uint32_t payload_len,
                                           std::uint8_t** payload) {
    h.lrh.dlid = qp.dlid;
    h.lrh.slid = m_hca.port().lid();
    h.lrh.sl = qp.sl;
    h.lrh.lnh = 2;
    h.bth.dest_qp = qp.dest_qpn;
    auto pkt = m_pool.make(packet::wire_bytes(h, payload_len));
    const std::size_t hdr = packet::write_headers(h, payload_len, pkt->bytes.data());
    *payload = pkt->bytes.data() + hdr;
    return pkt;
}

void TxTransport::launch(QpContext& qp, packet::PacketPtr pkt, sim::Tick data_ready) {
    packet::seal(pkt->bytes.data(), pkt->bytes.size());
    const std::uint32_t bytes = static_cast<std::uint32_t>(pkt->bytes.size());
    const std::uint64_t cycles = m_p.tx_packet_cycles + (bytes + m_p.datapath_bytes - 1) / m_p.datapath_bytes;
    const sim::Tick ready = m_pipe.reserve(std::max(data_ready, qp.last_tx_ready), cycles).end;
    qp.last_tx_ready = ready;
    m_buffer_used += bytes;
    (*m_n_packets)++;
    (*m_n_bytes) += bytes;
    // The port's serialiser takes bookings ahead of time, so the packet is
    // booked now for when the pipeline has it ready.
    const auto slot = m_hca.port().transmit(std::move(pkt), ready, qp.last_wire_end);
    qp.last_wire_end = slot.end;
    m_releases.emplace(slot.end, bytes);
}

TxTransport::Produced TxTransport::produce_read_response(QpContext& qp, sim::Tick now) {
    ReadResponseJob& job = qp.read_jobs.front();
    const std::uint32_t mtu = qp.path_mtu;
    const std::uint32_t n = std::min(mtu, job.length - job.offset);
    const bool first = job.offset == 0;
    const bool last = job.offset + n == job.length;
    packet::Headers h;
    h.bth.opcode = op(first && last ? Opcode::RcReadResponseOnly
                      : first       ? Opcode::RcReadResponseFirst
                      : last        ? Opcode::RcReadResponseLast
                                    : Opcode::RcReadResponseMiddle);
    h.bth.psn = psn_add(job.first_psn, job.offset / mtu);
    if (first || last) h.aeth = packet::Aeth{packet::kAethAck | 0x1f, job.msn};
    std::uint8_t* payload = nullptr;
    auto pkt = make_packet(qp, h, n, &payload);
    m_slices.clear();
    slice_spans(job.spans, job.offset, n, m_slices);
    const sim::Tick data = m_hca.dma().read(now, m_slices.data(), m_slices.size(), payload);
    job.offset += n;
    counter("read_response_packets")++;
    if (last) qp.read_jobs.pop_front();
    launch(qp, std::move(pkt), data);
    return Produced::One;
}

TxTransport::Produced TxTransport::produce_request(QpContext& qp, sim::Tick now) {
    // Keep the next WQEs coming while this one is sent.
    if (qp.send_q.size() - qp.tx_index <= 1 && qp.sq_fetched != qp.sq_pi) m_hca.fetch().fetch_send(qp, now);
    if (qp.tx_index >= qp.send_q.size()) return Produced::None;
    SendWork& w = qp.send_q[qp.tx_index];
    if (w.error != CqeStatus::Success) {
        // A WQE the fetch engine could not parse: completes in order with
        // its error once everything before it has.
        w.acked = true;
        w.fully_sent = true;
        ++qp.tx_index;
        m_hca.rx().retire(qp, now);
        return Produced::None;
    }
    const bool is_read = w.op == WqeOpcode::RdmaRead;
    if ((w.flags & kWqeFence) && qp.outstanding_reads > 0 && !w.started) return Produced::None;
    if (is_read && !w.started && qp.outstanding_reads >= std::max<std::uint32_t>(1, qp.max_rd_atomic))
        return Produced::None;
    const std::uint32_t mtu = qp.path_mtu;
    sim::Tick start = now;
    if (!w.started) {
        w.started = true;
        w.first_psn = qp.next_psn;
        w.npsn = packets_for(w.length, mtu);
        w.spans.clear();
        if (!(w.flags & kWqeInline)) {
            const std::uint32_t access = is_read ? static_cast<std::uint32_t>(kLocalWrite) : 0u;
            for (const auto& sge : w.sges) {
                if (sge.length == 0) continue;
                const Translation tr =
                    m_hca.translation().translate(now, sge.lkey, qp.pdn, sge.addr, sge.length, access, w.spans);
                start = std::max(start, tr.ready);
                if (tr.status != Protection::Ok) {
                    HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " WQE " << w.wqe_index
                                                                  << ": local lkey " << sge.lkey << " "
                                                                  << to_string(tr.status));
                    w.error = CqeStatus::LocalProtection;
                    w.acked = true;
                    w.fully_sent = true;
                    ++qp.tx_index;
                    m_hca.rx().retire(qp, start);
                    return Produced::None;
                }
            }
        }
        if (is_read) ++qp.outstanding_reads;
    }

    packet::Headers h;
    std::uint32_t n = 0;
    bool last = true;
    if (is_read) {
        h.bth.opcode = op(Opcode::RcReadRequest);
        h.bth.psn = w.first_psn;
        h.reth = packet::Reth{w.raddr, w.rkey, w.length};
        qp.next_psn = psn_add(w.first_psn, w.npsn);
    } else {
        n = std::min(mtu, w.length - qp.tx_offset);
        const bool first = qp.tx_offset == 0;
        last = qp.tx_offset + n == w.length;
        const bool send = w.op == WqeOpcode::Send || w.op == WqeOpcode::SendImm;
        const bool imm = w.op == WqeOpcode::SendImm || w.op == WqeOpcode::RdmaWriteImm;
        Opcode o;
        if (send) {
            o = first && last ? (imm ? Opcode::RcSendOnlyImm : Opcode::RcSendOnly)
                : first       ? Opcode::RcSendFirst
                : last        ? (imm ? Opcode::RcSendLastImm : Opcode::RcSendLast)
                              : Opcode::RcSendMiddle;
        } else {
            o = first && last ? (imm ? Opcode::RcWriteOnlyImm : Opcode::RcWriteOnly)
                : first       ? Opcode::RcWriteFirst
                : last        ? (imm ? Opcode::RcWriteLastImm : Opcode::RcWriteLast)
                              : Opcode::RcWriteMiddle;
            if (first) h.reth = packet::Reth{w.raddr, w.rkey, w.length};
        }
        h.bth.opcode = op(o);
        h.bth.psn = psn_add(w.first_psn, qp.tx_offset / mtu);
        if (last && imm) h.immdt = w.imm;
        qp.next_psn = psn_add(h.bth.psn, 1);
    }
    h.bth.ack_req = last;
    h.bth.se = last && (w.flags & kWqeSolicited) != 0;

    std::uint8_t* payload = nullptr;
    auto pkt = make_packet(qp, h, n, &payload);
    sim::Tick data = start;
    if (n > 0) {
        if (w.flags & kWqeInline) {
            std::memcpy(payload, w.inline_data.data() + qp.tx_offset, n);
        } else {
            m_slices.clear();
            slice_spans(w.spans, qp.tx_offset, n, m_slices);
            data = m_hca.dma().read(start, m_slices.data(), m_slices.size(), payload);
        }
    }
    qp.tx_offset += n;
    if (last) {
        w.fully_sent = true;
        ++qp.tx_index;
        qp.tx_offset = 0;
    }
    counter(is_read ? "read_requests" : "request_packets")++;
    launch(qp, std::move(pkt), data);
    if (qp.vi == ViReliability::Unreliable) {
        // Unreliable delivery: nothing acknowledges; the descriptor is done
        // when its last packet has left the port.
        if (last) {
            w.acked = true;
            w.done_at = qp.last_wire_end;
            m_hca.rx().retire(qp, now);
        }
        return Produced::One;
    }
    m_hca.rx().arm_ack_timer(qp, qp.last_wire_end);
    return Produced::One;
}

void TxTransport::send_ack(QpContext& qp, sim::Tick t, std::uint8_t syndrome, std::uint32_t psn) {
    packet::Headers h;
    h.bth.opcode = op(Opcode::RcAcknowledge);
    h.bth.psn = psn;
    h.aeth = packet::Aeth{syndrome, qp.msn};
    std::uint8_t* payload = nullptr;
    auto pkt = make_packet(qp, h, 0, &payload);
    packet::seal(pkt->bytes.data(), pkt->bytes.size());
    const std::uint64_t cycles = m_p.tx_packet_cycles;
    const sim::Tick ready = m_pipe.reserve(t, cycles).end;
    counter((syndrome & 0x60) == packet::kAethAck ? "acks" : "naks")++;
    qp.last_wire_end = m_hca.port().transmit(std::move(pkt), ready, qp.last_wire_end).end;
}

void TxTransport::rewind(QpContext& qp, std::uint32_t psn, sim::Tick resume_at) {
    // Find the WQE holding psn and restart from that packet.
    for (std::size_t i = 0; i < qp.send_q.size(); ++i) {
        SendWork& w = qp.send_q[i];
        if (!w.started) break;
        const std::int32_t d = psn_diff(psn, w.first_psn);
        if (d < 0 || d >= static_cast<std::int32_t>(w.npsn)) continue;
        for (std::size_t j = i; j < qp.send_q.size(); ++j) {
            SendWork& later = qp.send_q[j];
            if (later.started && later.op == WqeOpcode::RdmaRead && !later.acked && qp.outstanding_reads > 0)
                --qp.outstanding_reads;
            later.started = j == i;
            later.fully_sent = false;
        }
        qp.tx_index = i;
        if (w.op == WqeOpcode::RdmaRead) {
            qp.tx_offset = 0;
            w.started = false;
        } else {
            qp.tx_offset = static_cast<std::uint32_t>(d) * qp.path_mtu;
        }
        qp.next_psn = psn;
        qp.tx_hold_until = resume_at;
        counter("rewinds")++;
        kick(qp, resume_at);
        return;
    }
}

}  // namespace hcasim::hca
