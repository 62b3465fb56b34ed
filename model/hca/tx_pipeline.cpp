#include "model/hca/tx_pipeline.hpp"

#include <algorithm>

#include "model/sim/tracer.hpp"

namespace hcasim::hca {

TxPipeline::TxPipeline(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_w(w), m_p(p) {
    for (std::uint32_t i = 0; i < std::max<std::uint32_t>(1, p.tx_engines); ++i) m_engines.emplace_back(&m_clock);
    m_max_packet = w.ports(1).max_mtu() + kPacketOverheadBytes;
    m_n_packets = &counter("packets");
    m_n_bytes = &counter("bytes");
}

void TxPipeline::set_producers(PacketProducer& responses, PacketProducer& requests) {
    m_responses = &responses;
    m_requests = &requests;
}

void TxPipeline::kick(QpContext& qp, sim::Tick t) {
    if (qp.qpc.state != QpState::Rts && qp.qpc.state != QpState::Rtr && qp.qpc.state != QpState::Sqd) {
        release_after_send(m_w.qps, qp);
        return;
    }
    m_w.scheduler.make_ready(qp);
    schedule_pump(m_w.scheduler.decide(t));
}

void TxPipeline::schedule_pump(sim::Tick t) {
    if (t >= m_pump_at) return;
    m_pump_at = t;
    at(t, [this, t]() {
        if (m_pump_at == t) {
            m_pump_at = ~sim::Tick(0);
            pump();
        }
    });
}

bool TxPipeline::has_work(const QpContext& qp) const {
    return m_responses->has_work(qp) || m_requests->has_work(qp);
}

// A QP that both answers and asks takes turns: a response, then a request,
// when both wait. Answers alone first would starve the QP's own requests
// behind a peer's long READs, and their ACK timers would run out.
bool TxPipeline::produce(QpContext& qp, sim::Tick now) {
    const bool answer = m_responses->has_work(qp);
    const bool ask = m_requests->has_work(qp);
    if (answer && (!ask || !qp.tx.responded_last)) {
        qp.tx.responded_last = true;
        return m_responses->produce(qp, now);
    }
    if (!ask) return false;
    qp.tx.responded_last = false;
    if (m_requests->produce(qp, now)) return true;
    // The request could not go (a fence, max_rd_atomic, an RNR wait): the answer does.
    if (!answer) return false;
    qp.tx.responded_last = true;
    return m_responses->produce(qp, now);
}

void TxPipeline::pump() {
    const sim::Tick now = sim::now_ps();
    while (!m_releases.empty() && m_releases.top().first <= now) {
        m_buffer_used -= m_releases.top().second;
        m_releases.pop();
    }
    while (!m_w.scheduler.empty()) {
        if (m_buffer_used + m_max_packet > m_p.tx_buffer_bytes) {
            // The buffer drains as the port serialises; resume then.
            if (!m_releases.empty()) schedule_pump(m_releases.top().first);
            return;
        }
        QpContext* qp = m_w.scheduler.next();
        if (qp->req.tx_hold_until > now) {
            const std::uint32_t qpn = qp->qpn;
            at(qp->req.tx_hold_until, [this, qpn]() {
                const QpAccess found = m_w.qps.context(qpn, sim::now_ps());
                if (found.qp) kick(*found.qp, found.ready);
            });
            continue;
        }
        const bool sent = produce(*qp, now);
        if (!has_work(*qp)) release_after_send(m_w.qps, *qp);  // its last packet is out
        else if (sent) m_w.scheduler.make_ready(*qp);
    }
}

packet::PacketPtr TxPipeline::make_packet(const Route& route, packet::Headers& h, std::uint32_t payload_len,
                                          std::uint8_t** payload) {
    const Port& port = m_w.ports(route.port);
    h.lrh.dlid = route.dlid;
    h.lrh.slid = port.lid();
    h.bth.migreq = route.migreq;
    h.lrh.sl = route.sl;
    h.lrh.lnh = 2;
    h.bth.dest_qp = route.dest_qpn;
    if (route.grh && route.grh->present) {
        // A global route: the GRH names our GID at the path's SGID index.
        packet::Grh g;
        g.tclass = route.grh->traffic_class;
        g.flow_label = route.grh->flow_label;
        g.hop_limit = route.grh->hop_limit;
        const auto& gids = port.gids();
        if (route.grh->sgid_index < gids.size())
            std::copy(gids[route.grh->sgid_index].begin(), gids[route.grh->sgid_index].end(), g.sgid);
        std::copy(route.grh->dgid, route.grh->dgid + 16, g.dgid);
        h.grh = g;
        h.lrh.lnh = 3;
    }
    auto pkt = m_pool.make(packet::wire_bytes(h, payload_len));
    const std::size_t hdr = packet::write_headers(h, payload_len, pkt->bytes.data());
    *payload = pkt->bytes.data() + hdr;
    return pkt;
}

bool TxPipeline::launch(QpContext& qp, packet::PacketPtr pkt, sim::Tick data_ready, OnWire then) {
    packet::seal(pkt->bytes.data(), pkt->bytes.size());
    pkt->sealed_intact = true;
    const std::uint32_t bytes = static_cast<std::uint32_t>(pkt->bytes.size());
    const std::uint64_t cycles = m_p.tx_packet_cycles + (bytes + m_p.datapath_bytes - 1) / m_p.datapath_bytes;
    // Cut-through: the headers are built and the payload streams through
    // the datapath as its DMA completions arrive, so the pass ends one beat
    // after the last byte is in, not a whole pass after it (the datapath is
    // at least as fast as the PCIe link that feeds it in every preset).
    const sim::Tick pass = m_clock.cycles(cycles), beat = m_clock.cycles(1);
    const sim::Tick streamed = data_ready + beat > pass ? data_ready + beat - pass : 0;
    const sim::Tick ready =
        engine_of(qp).reserve(std::max({streamed, qp.tx.last_tx_ready, sim::now_ps()}), cycles).end;
    qp.tx.last_tx_ready = ready;
    m_buffer_used += bytes;
    (*m_n_packets)++;
    (*m_n_bytes) += bytes;
    // The port's serialiser takes bookings ahead of time, so the packet is
    // booked now for when the pipeline has it ready. One that waits in the
    // port for flow-control credits keeps its room in the transmit buffer
    // until it goes (sent_after_wait), so the buffer fills and the pipeline
    // stops meanwhile, as the payload reads ahead of the credits do.
    const auto slot = m_w.ports(qp.qpc.port).transmit(std::move(pkt), ready, qp.tx.last_wire_end,
                                                      wait_tag(qp.qpn, bytes, then));
    if (!slot) return false;
    qp.tx.last_wire_end = slot->end;
    m_releases.emplace(slot->end, bytes);
    return true;
}

void TxPipeline::sent_after_wait(std::uint64_t tag, sim::Tick end) {
    const WaitTag w = wait_tag(tag);
    if (w.held) {
        m_releases.emplace(end, w.held);
        schedule_pump(std::max(end, sim::now_ps()));
    }
    // The QP's transmit state is the pipeline's own; no context read.
    QpContext* qp = m_w.qps.working_state(w.qpn);
    if (!qp) return;
    qp->tx.last_wire_end = std::max(qp->tx.last_wire_end, end);
    if (w.then != OnWire::Nothing) m_requests->on_wire(*qp, w.then, end);
}

void TxPipeline::send_ack(QpContext& qp, sim::Tick t, std::uint8_t syndrome, std::uint32_t psn) {
    packet::Headers h;
    h.bth.opcode = qp.service().opcode_base | static_cast<std::uint8_t>(packet::Opcode::RcAcknowledge);
    h.bth.psn = psn;
    h.aeth = packet::Aeth{syndrome, qp.resp.msn};
    std::uint8_t* payload = nullptr;
    auto pkt = make_packet(route_of(qp), h, 0, &payload);
    pkt->trace_flow = sim::tracer().current_flow();  // the request it acknowledges
    packet::seal(pkt->bytes.data(), pkt->bytes.size());
    pkt->sealed_intact = true;
    const sim::Tick ready = engine_of(qp).reserve(t, m_p.tx_packet_cycles).end;
    counter((syndrome & packet::kAethKindMask) == packet::kAethAck ? "acks" : "naks")++;
    const auto slot = m_w.ports(qp.qpc.port).transmit(std::move(pkt), ready, qp.tx.last_wire_end,
                                                      wait_tag(qp.qpn, 0, OnWire::Nothing));
    if (slot) qp.tx.last_wire_end = slot->end;
}

}  // namespace hcasim::hca
