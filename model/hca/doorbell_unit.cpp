#include "model/hca/doorbell_unit.hpp"

#include "model/sim/tracer.hpp"

namespace hcasim::hca {

DoorbellUnit::DoorbellUnit(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)),
      m_w(w),
      m_pipe(&m_clock),
      m_cycles(p.doorbell_cycles) {}

void DoorbellUnit::mmio_write(sim::Tick t, DoorbellWrite w) {
    // A send doorbell serves the last WQE it announces, in a trace.
    const bool send = w.offset == kUarBlueFlame || w.offset == kUarSendDoorbell;
    const std::uint64_t flow = send && sim::tracer().on()
                                   ? sim::Tracer::flow_of(path(), w.number, static_cast<std::uint16_t>(w.index - 1))
                                   : 0;
    const sim::Tracer::Scope in_flow(sim::tracer(), flow);
    // A BlueFlame WQE arrives as a burst of 64 B write-combined stores; the
    // doorbell is usable when the last one has.
    sim::Tick arrive = t;
    if (w.offset == kUarBlueFlame) {
        for (std::size_t off = 0; off < w.wqe.size(); off += kBlueFlameChunkBytes)
            arrive = m_w.bus.mmio_write(t, kBlueFlameChunkBytes);
        counter("blueflame_writes")++;
    } else if (w.offset == kUarViSendDoorbell || w.offset == kUarViRecvDoorbell) {
        arrive = m_w.bus.mmio_write(t, kViDoorbellBytes);
        counter("vi_doorbells")++;
    } else {
        arrive = m_w.bus.mmio_write(t, kDoorbellBytes);
        counter("doorbells")++;
    }
    const sim::Tick done = m_pipe.reserve(arrive, m_cycles).end;
    if (sim::tracer().on())
        sim::tracer().slice(path(), w.offset == kUarBlueFlame ? "BlueFlame" : "doorbell", t, done, {{"number", w.number}},
                            flow);
    at(done, [this, done, w = std::move(w)]() { decode(done, w); });
}

void DoorbellUnit::decode(sim::Tick t, const DoorbellWrite& w) {
    switch (w.offset) {
    case kUarSendDoorbell:
    case kUarBlueFlame: {
        const QpAccess found = m_w.qps.context(w.number, t);
        QpContext* qp = found.qp;
        if (!qp) {
            counter("doorbells_unknown_qp")++;
            return;
        }
        // A producer index never moves back: a doorbell older than one
        // already decoded names no new work (and its BlueFlame copy is
        // stale), so it is dropped.
        if (static_cast<std::int16_t>(static_cast<std::uint16_t>(w.index) - qp->fetch.sq_pi) < 0) {
            counter("stale_doorbells")++;
            return;
        }
        qp->fetch.sq_pi = static_cast<std::uint16_t>(w.index);
        t = found.ready;
        if (w.offset == kUarBlueFlame) t = m_w.fetch.blueflame(*qp, w.wqe, t);
        if (qp->qpc.state == QpState::Err) {
            m_w.errors.flush(*qp, t);
            return;
        }
        if (qp->qpc.state == QpState::Sqe) {
            m_w.errors.flush_send(*qp, t);
            return;
        }
        m_w.tx.kick(*qp, t);
        return;
    }
    case kUarViSendDoorbell:
    case kUarViRecvDoorbell: {
        const QpAccess found = m_w.qps.context(w.number, t);
        QpContext* qp = found.qp;
        if (!qp || !qp->is_vi()) {
            counter("doorbells_unknown_qp")++;
            return;
        }
        m_w.descriptors.posted(*qp, w.offset == kUarViRecvDoorbell, w.vi, found.ready);
        return;
    }
    case kUarViArm: {
        const QpAccess found = m_w.qps.context(w.number, t);
        QpContext* qp = found.qp;
        if (!qp || !qp->is_vi()) {
            counter("doorbells_unknown_qp")++;
            return;
        }
        m_w.descriptors.arm(*qp, w.recv_queue);
        return;
    }
    case kUarCqArm:
        m_w.cqs.arm(t, w.number, w.index, w.solicited);
        return;
    default:
        counter("doorbells_unknown_register")++;
        return;
    }
}

}  // namespace hcasim::hca
