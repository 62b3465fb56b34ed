#include "model/hca/rx_pipeline.hpp"

#include <algorithm>
#include <memory>

#include "model/packet/multicast.hpp"
#include "model/packet/opcode_table.hpp"
#include "model/sim/tracer.hpp"

namespace hcasim::hca {

RxPipeline::RxPipeline(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_w(w), m_p(p) {
    // The receive buffer absorbs what the host bus carries upstream in the
    // time of this many bytes.
    const double up_bytes_per_ps = w.bus.upstream_bytes_per_s() / 1e12;
    m_backlog_slack = static_cast<sim::Tick>(static_cast<double>(p.rx_buffer_bytes) / up_bytes_per_ps);
    m_n_packets = &counter("packets");
    m_engine_free.assign(std::max<std::uint32_t>(1, p.rx_engines), 0);
}

void RxPipeline::receive(packet::PacketPtr pkt, sim::Tick t, unsigned port_num, bool buffered) {
    const std::size_t size = pkt->bytes.size();
    // The receive path drains into host memory: a packet is processed only
    // once the host-bus writes of those before it have left the adapter, so a
    // sender cannot outrun the receiver's host bus (its ACKs wait).
    const sim::Tick gate = m_w.bus.posted_backlog_end();
    // Cut-through: the packet streams through the datapath as it comes off
    // the wire, so its pass may start before its last byte is in and ends
    // one beat after it (the datapath is at least as fast as the link in
    // every preset). An engine passes its packets one after another, in
    // arrival order; the header says which engine (a malformed one: the first).
    packet::Parsed p;
    const packet::ParseError err = packet::parse(
        pkt->bytes.data(), size, p, pkt->sealed_intact ? packet::CrcCheck::SealedIntact : packet::CrcCheck::Verify);
    sim::Tick& engine_free =
        m_engine_free[err == packet::ParseError::None ? p.h.bth.dest_qp % m_engine_free.size() : 0];
    const std::uint64_t cycles = m_p.rx_packet_cycles + (size + m_p.datapath_bytes - 1) / m_p.datapath_bytes;
    const sim::Tick pass = m_clock.cycles(cycles), beat = m_clock.cycles(1);
    // Not before its first byte is in.
    const auto wire = static_cast<sim::Tick>(static_cast<double>(size) * 1e12 /
                                             m_w.ports(port_num).rate().data_bytes_per_s());
    const sim::Tick first_byte = t > wire ? t - wire : 0;
    const sim::Tick streamed = std::max(first_byte, t + beat > pass ? t + beat - pass : 0);
    const sim::Tick earliest = std::max({streamed, engine_free, gate > m_backlog_slack ? gate - m_backlog_slack : 0});
    sim::Tick done;
    if (m_on_processor) {
        done = m_passes.reserve(earliest, cycles).end;
    } else {
        done = m_clock.edge_at_or_after(earliest) + pass;
    }
    engine_free = done;
    // The packet leaves the receive buffer once the datapath has passed it,
    // unless it waits there for its QP's context (below).
    Port& port = m_w.ports(port_num);
    const auto leave_buffer = [&port, buffered, size](sim::Tick when) {
        if (buffered) port.release_rx_buffer(static_cast<std::uint32_t>(size), when);
    };
    // The responder's work for the packet serves the sender's work request.
    const sim::Tracer::Scope in_flow(sim::tracer(), pkt->trace_flow);
    if (sim::tracer().on()) sim::tracer().slice(path(), "receive", t, done, {{"bytes", size}}, pkt->trace_flow);
    if (err != packet::ParseError::None) {
        // IBA: a malformed packet is silently dropped and counted.
        leave_buffer(done);
        counter(packet::counter_name(err))++;
        HCASIM_LOG(sim::LogLevel::Info, path(), "dropped packet: " << packet::to_string(err));
        return;
    }
    if (packet::is_multicast_lid(p.h.lrh.dlid)) {
        leave_buffer(done);
        if (m_multicast) m_multicast->deliver(p, pkt, pkt->bytes.data() + p.payload_offset, done);
        else counter("dropped_multicast")++;
        return;
    }
    if (p.h.lrh.dlid != port.lid()) {
        leave_buffer(done);
        counter("dropped_wrong_dlid")++;
        return;
    }
    if (p.h.grh && !port.owns_gid(p.h.grh->dgid)) {
        leave_buffer(done);
        counter("dropped_wrong_dgid")++;
        return;
    }
    // The destination QP is known once the BTH is in: its context is looked
    // up then, beside the rest of the packet's parse, so a miss's read over
    // PCIe overlaps the packets queued ahead of it.
    const std::uint32_t qpn = p.h.bth.dest_qp;
    const QpAccess found = m_w.qps.context(qpn, t);
    if (!found.qp) {
        leave_buffer(done);
        counter("dropped_unknown_qp")++;
        return;
    }
    auto waiting = m_waiting.find(qpn);
    if (found.ready <= done && waiting == m_waiting.end()) {
        leave_buffer(done);
        deliver(*found.qp, p, pkt, done);
        return;
    }
    // A miss: the packet waits in the receive buffer for its context while
    // those behind it, for other QPs, go on; its work is done when the
    // context is on chip, so its writes queue behind no later packet's.
    // Later packets of the QP wait too, behind it, and keep their order.
    // The context being filled for them stays on chip until they are
    // delivered, or other misses could push it out before its first use.
    // A context that could not be held (every entry on chip held by other
    // work) is read again for each packet, and a later fill may end before
    // an earlier one: a packet is never due before the one ahead of it, nor
    // delivered at an earlier time.
    if (waiting == m_waiting.end()) waiting = m_waiting.emplace(qpn, Waiting{0, m_w.qps.hold_context(qpn)}).first;
    Waiting& queued = waiting->second;
    ++queued.packets;
    counter("packets_waiting_for_context")++;
    auto parsed = std::make_shared<const packet::Parsed>(p);
    queued.due = std::max({found.ready, done, queued.due});
    at(queued.due, [this, qpn, parsed, pkt, &port, buffered]() {
        if (buffered) port.release_rx_buffer(static_cast<std::uint32_t>(pkt->bytes.size()), sim::now_ps());
        const sim::Tracer::Scope in_flow(sim::tracer(), pkt->trace_flow);
        const QpAccess again = m_w.qps.context(qpn, sim::now_ps());
        auto w = m_waiting.find(qpn);
        const bool last = --w->second.packets == 0, held = w->second.held;
        const sim::Tick when = std::max(again.ready, w->second.delivered);
        w->second.delivered = when;
        if (last) m_waiting.erase(w);
        if (last && held) m_w.qps.release_context(qpn);
        if (!again.qp) {
            counter("dropped_unknown_qp")++;
            return;
        }
        deliver(*again.qp, *parsed, pkt, when);
    });
}

void RxPipeline::deliver(QpContext& qp, const packet::Parsed& p, const packet::PacketPtr& pkt, sim::Tick t) {
    (*m_n_packets)++;
    const std::uint8_t* payload = pkt->bytes.data() + p.payload_offset;
    const packet::OpcodeInfo& info = packet::opcode_info(p.h.bth.opcode);
    if (!(info.qp_types & qp.service().opcode_types)) {
        // An opcode of another transport than the QP's (IBA 9.6.1.5).
        counter("dropped_wrong_transport")++;
        return;
    }
    // MigReq tells a rearmed QP that the peer is armed too, and an armed
    // one that the peer migrated (IBA 17.2.8).
    if (qp.qpc.mig != PathMigState::Migrated && qp.service().connected) m_w.migration.peer_state(qp, p.h.bth.migreq, t);
    // The packet stays alive until the payload writes that point into it land.
    (info.request ? m_w.responder : m_w.completer).handle(qp, p, pkt, payload, t);
}

}  // namespace hcasim::hca
