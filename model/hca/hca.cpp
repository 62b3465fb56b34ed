#include "model/hca/hca.hpp"

#include "model/hca/rtl_dma_engine.hpp"
#include "model/hca/systemc_dma_engine.hpp"

namespace hcasim::hca {

namespace {

// Context memory in host memory: where each table starts (only the PCIe
// cost of an entry is modelled; the contexts themselves are the tables
// here) and its entry size, as mlx4 firmware reports them (QUERY_DEV_CAP:
// 256 B QP contexts, 64 B CQ contexts).
constexpr IcmCache::Table kIcmQpc{0x7e0000000000ull, 256};
constexpr IcmCache::Table kIcmCqc{0x7e8000000000ull, 64};

std::unique_ptr<DmaEngine> make_dma_engine(const HcaParams& p, pcie::HostBus& bus) {
    if (p.dma_impl == "systemc") return std::make_unique<SystemcDmaEngine>("dma_engine", p, bus);
    if (p.dma_impl == "rtl") {
        // The RTL engine splits transfers at the PCIe max read request and
        // max payload sizes.
        auto* pcie = dynamic_cast<pcie::PcieHostInterface*>(&bus);
        if (!pcie) throw sim::ConfigError("hca.dma.impl=rtl needs host.bus=pcie");
        return std::make_unique<RtlDmaEngine>("dma_engine", p, *pcie, p.dma_rtl_channels, p.dma_vcd);
    }
    throw sim::ConfigError("invalid value '" + p.dma_impl + "' for hca.dma.impl: expected one of systemc, rtl");
}

}  // namespace

Hca::Hca(const sc_core::sc_module_name& name, const sim::Config& cfg, pcie::HostBus& bus)
    : sc_core::sc_module(name),
      m_p(HcaParams::from(cfg)),
      m_bus(bus),
      m_mpt_table(m_p.max_mr),
      m_qpc_read(sim::Clock::from_mhz("hca.core", m_p.core_clock_mhz).cycles(m_p.qpc_read_cycles)),
      m_qpc_cache("qpc_cache", m_p.core_clock_mhz, kIcmQpc, m_p.qpc_cache_entries, m_p.qpc_read_cycles,
                  m_p.context_fill_slots, bus),
      m_cqc_cache("cqc_cache", m_p.core_clock_mhz, kIcmCqc, m_p.cqc_cache_entries, m_p.qpc_read_cycles,
                  m_p.context_fill_slots, bus),
      m_port("port", cfg),
      m_port2(cfg.get_int("port.count") > 1 ? std::make_unique<Port>("port2", cfg) : nullptr),
      m_ports(&m_port, m_port2.get()),
      m_migration("path_migration", m_p, {m_ports, *this}),
      m_dma(make_dma_engine(m_p, bus)),
      m_translation("translation", m_p, m_mpt_table, bus),
      m_completion("completion_engine", m_p, {*this, *m_dma, *this, *this, *this}),
      m_scheduler("qp_scheduler", m_p),
      m_srqs("srq_engine", m_p, *m_dma, *this),
      m_tx("tx_pipeline", m_p, {*this, m_scheduler, m_ports}),
      m_descriptors("descriptor_engine", m_p, {*this, *m_dma, m_translation, *this, *this, *this, m_tx}),
      m_fetch("wqe_fetch", m_p, {*this, *m_dma, m_descriptors, m_srqs, *this, m_tx}),
      m_completer("completer", m_p, {*this, m_tx, *m_dma, *this, *this}),
      m_requester("requester", m_p, {m_tx, m_completer, m_fetch, m_translation, *m_dma}),
      m_responder("responder", m_p, {m_tx, m_fetch, m_translation, *m_dma, *this, *this, m_srqs, *this}),
      m_mcast("multicast", cfg, m_p.core_clock_mhz, {*this, m_responder}),
      m_rx("rx_pipeline", m_p, {*this, m_responder, m_completer, bus, m_ports, m_migration}),
      m_doorbell("doorbell_unit", m_p, {*this, bus, m_fetch, m_descriptors, m_completion, *this, m_tx}) {
    m_tx.set_producers(m_responder, m_requester);
    m_completer.set_requester(m_requester);
    m_completer.set_path_migration(m_migration);
    m_requester.set_max_datagram(m_port.max_mtu());
    for (unsigned num = 1; num <= static_cast<unsigned>(m_ports.count()); ++num) {
        Port& port = m_ports(num);
        port.on_receive([this, num](packet::PacketPtr pkt, sim::Tick t, bool buffered) {
            m_rx.receive(std::move(pkt), t, num, buffered);
        });
        port.on_sent([this](std::uint64_t tag, sim::Tick end) { m_tx.sent_after_wait(tag, end); });
        // Port state changes are unaffiliated asynchronous events; a port
        // going down makes the armed QPs whose primary path leaves from it
        // migrate.
        port.on_link_state([this, num](bool up, sim::Tick t) {
            HCASIM_LOG(sim::LogLevel::Info, this->name(), "port " << num << " link " << (up ? "up" : "down"));
            raise_async(t, AsyncEvent{up ? AsyncEventType::PortActive : AsyncEventType::PortError, num});
            if (!up)
                for (auto& qp : m_qps)
                    if (qp && qp->valid) m_migration.port_down(*qp, num, t);
        });
        port.set_multicast_loopback([this](const std::uint8_t* mgid) { return m_mcast.members(mgid) != nullptr; });
    }
    m_rx.set_multicast(&m_mcast);
    if (m_p.control_program) {
        m_processor = std::make_unique<ControlProcessor>(m_p.core_clock_mhz, std::string(this->name()) + ".control_processor");
        sim::Timeline& program = m_processor->program();
        m_doorbell.run_steps_on(program);
        m_scheduler.run_steps_on(program);
        m_fetch.run_steps_on(program);
        m_descriptors.run_steps_on(program);
        m_srqs.run_steps_on(program);
        m_translation.run_steps_on(program);
        m_dma->run_steps_on(program);
        m_tx.run_steps_on(program);
        m_rx.run_steps_on(program);
        m_completion.run_steps_on(program);
        m_mcast.run_steps_on(program);
    }
    // The transmit buffer must hold the largest packet the port can send.
    const std::uint32_t largest = m_port.max_mtu() + kPacketOverheadBytes;
    if (m_p.tx_buffer_bytes < largest)
        throw sim::ConfigError("hca.tx_buffer_bytes=" + std::to_string(m_p.tx_buffer_bytes) +
                               " cannot hold one packet of port.max_mtu=" + std::to_string(m_port.max_mtu()) +
                               " (needs at least " + std::to_string(largest) + " bytes)");
}

QpContext& Hca::install_qp(std::uint32_t qpn, const Qpc& image) {
    if (m_qps.size() <= qpn) m_qps.resize(qpn + 1);
    m_qps[qpn] = std::make_unique<QpContext>();
    QpContext& qp = *m_qps[qpn];
    qp.valid = true;
    qp.qpn = qpn;
    qp.qpc = image;
    qp.req.next_psn = image.sq_psn;
    qp.req.acked_psn = psn_add(image.sq_psn, kPsnMask);
    qp.req.retries_left = image.retry_cnt;
    qp.req.rnr_retries_left = image.rnr_retry;
    qp.resp.epsn = image.rq_psn;
    m_qpc_cache.load(sim::now_ps(), qpn);
    return qp;
}

void Hca::write_qpc(QpContext& qp, const Qpc& image, std::uint32_t loads) {
    qp.qpc = image;
    if (loads & kLoadSqPsn) {
        qp.req.next_psn = image.sq_psn & kPsnMask;
        qp.req.acked_psn = psn_add(qp.req.next_psn, kPsnMask);
    }
    if (loads & kLoadRqPsn) qp.resp.epsn = image.rq_psn & kPsnMask;
    if (loads & kLoadRetryCnt) qp.req.retries_left = image.retry_cnt;
    if (loads & kLoadRnrRetry) qp.req.rnr_retries_left = image.rnr_retry;
    m_qpc_cache.load(sim::now_ps(), qp.qpn);
    if (loads & kLoadState) state_changed(qp, sim::now_ps());
}

void Hca::remove_qp(std::uint32_t qpn) {
    if (QpContext* q = qp(qpn)) {
        m_retired_counters[qpn] += q->counters;
        m_scheduler.remove(*q);
        m_qps[qpn].reset();
        m_qpc_cache.invalidate(qpn);
    }
}

CqContext& Hca::install_cq(std::uint32_t cqn) {
    if (m_cqs.size() <= cqn) m_cqs.resize(cqn + 1);
    m_cqs[cqn] = CqContext{};
    m_cqs[cqn].valid = true;
    m_cqs[cqn].cqn = cqn;
    m_cqc_cache.load(sim::now_ps(), cqn);
    return m_cqs[cqn];
}

void Hca::raise_async(sim::Tick t, AsyncEvent e) {
    msix(t, [e](InterruptSink& s) { s.async_event(e); });
}

void Hca::raise_completion(sim::Tick t, std::uint32_t cqn) {
    m_completion.counter("interrupts")++;
    msix(t, [cqn](InterruptSink& s) { s.completion_event(cqn); });
}

void Hca::raise_vi_queue(sim::Tick t, std::uint32_t qpn, bool recv_queue) {
    m_completion.counter("interrupts")++;
    msix(t, [qpn, recv_queue](InterruptSink& s) { s.vi_queue_event(qpn, recv_queue); });
}

void Hca::fail_catastrophically(sim::Tick t) {
    HCASIM_LOG(sim::LogLevel::Info, name(), "catastrophic failure");
    m_completion.counter("catastrophic_errors")++;
    raise_async(t, AsyncEvent{AsyncEventType::Catastrophic, 0});
    // The work the adapter was executing completes with a fatal error, the
    // rest is flushed.
    for (auto& qp : m_qps) {
        if (!qp || !qp->valid || qp->qpc.state == QpState::Err) continue;
        qp->qpc.state = QpState::Err;
        if (qp->is_vi()) flush(*qp, t);
        else flush_work(*qp, t, CqeStatus::FatalError);
    }
}

void Hca::fail_srq(std::uint32_t srqn, sim::Tick t) {
    raise_async(t, AsyncEvent{AsyncEventType::SrqError, srqn});
    for (auto& qp : m_qps) {
        if (!qp || !qp->valid || qp->qpc.srqn != srqn) continue;
        const QpState s = qp->qpc.state;
        if (s != QpState::Rtr && s != QpState::Rts && s != QpState::Sqd && s != QpState::Sqe) continue;
        raise_async(t, AsyncEvent{AsyncEventType::QpFatal, qp->qpn});
        enter_error(*qp, t);
    }
}

void Hca::enter_error(QpContext& qp, sim::Tick t) {
    if (qp.qpc.state == QpState::Err) return;
    HCASIM_LOG(sim::LogLevel::Info, name(), "QP " << qp.qpn << " enters the error state");
    qp.qpc.state = QpState::Err;
    release_after_send(*this, qp);  // the send side stops working on it
    flush(qp, t);
}

void Hca::flush(QpContext& qp, sim::Tick t) { flush_work(qp, t, CqeStatus::WrFlush); }

void Hca::flush_send(QpContext& qp, sim::Tick t) { flush_send_work(qp, t, CqeStatus::WrFlush); }

void Hca::flush_work(QpContext& qp, sim::Tick t, CqeStatus in_progress) {
    if (qp.is_vi()) {
        m_descriptors.flush(qp, t);
        qp.resp.read_jobs.clear();
        qp.resp.recv_in_progress = false;
        qp.resp.write_in_progress = false;
        return;
    }
    auto flushed = [&](std::uint32_t cqn, std::uint16_t index, bool is_send, CqeOpcode op,
                       CqeStatus status = CqeStatus::WrFlush) {
        Cqe c{};
        c.qpn = qp.qpn;
        c.wqe_index = index;
        c.opcode = static_cast<std::uint8_t>(op);
        c.status = static_cast<std::uint8_t>(status);
        c.flags = is_send ? kCqeIsSend : 0;
        if (!is_send && qp.xrc_target()) {
            c.src_qp = qp.recv_srqn();
            c.flags |= kCqeXrcSrq;
        }
        m_completion.post(t, cqn, c);
    };
    flush_send_work(qp, t, in_progress);
    // A message being received is in progress on the first receive WQE.
    bool receiving = qp.resp.recv_in_progress;
    for (const auto& r : qp.fetch.rq_cache) {
        flushed(qp.recv_cqn(), r.wqe_index, false, CqeOpcode::Recv, receiving ? in_progress : CqeStatus::WrFlush);
        receiving = false;
    }
    qp.fetch.rq_cache.clear();
    // A QP on an SRQ leaves the SRQ's WQEs to the others; the consumer
    // learns that this one will take no more (IBA 10.3.1, Last WQE Reached).
    if (qp.recv_srqn() && !qp.resp.last_wqe_reached) {
        qp.resp.last_wqe_reached = true;
        raise_async(t, AsyncEvent{AsyncEventType::QpLastWqeReached, qp.qpn});
    }
    // Receives the adapter does not know of yet are in the doorbell record.
    if (qp.qpc.rq_db_record) t = m_fetch.read_recv_record(qp, t);
    for (; qp.fetch.rq_fetched != qp.fetch.rq_pi; ++qp.fetch.rq_fetched) flushed(qp.recv_cqn(), qp.fetch.rq_fetched, false, CqeOpcode::Recv);
    qp.resp.read_jobs.clear();
    qp.resp.recv_in_progress = false;
    qp.resp.write_in_progress = false;
}

void Hca::flush_send_work(QpContext& qp, sim::Tick t, CqeStatus in_progress) {
    auto flushed = [&](std::uint16_t index, CqeStatus status) {
        Cqe c{};
        c.qpn = qp.qpn;
        c.wqe_index = index;
        c.opcode = static_cast<std::uint8_t>(CqeOpcode::Send);
        c.status = static_cast<std::uint8_t>(status);
        c.flags = kCqeIsSend;
        m_completion.post(t, qp.qpc.send_cqn, c);
    };
    for (const auto& w : qp.req.send_q) flushed(w.wqe_index, w.started ? in_progress : CqeStatus::WrFlush);
    qp.req.send_q.clear();
    qp.req.tx_index = 0;
    qp.req.tx_offset = 0;
    qp.req.outstanding_reads = 0;
    // WQEs posted but never fetched: their indices are enough to flush them.
    if (!qp.fetch.sq_fetch_busy) {
        for (; qp.fetch.sq_fetched != qp.fetch.sq_pi; ++qp.fetch.sq_fetched) flushed(qp.fetch.sq_fetched, CqeStatus::WrFlush);
    }
}

void Hca::enter_send_queue_error(QpContext& qp, sim::Tick t) {
    if (qp.qpc.state == QpState::Err || qp.qpc.state == QpState::Sqe) return;
    HCASIM_LOG(sim::LogLevel::Info, name(), "QP " << qp.qpn << " enters the send queue error state");
    qp.qpc.state = QpState::Sqe;
    release_after_send(*this, qp);
    flush_send(qp, t);
}

void Hca::state_changed(QpContext& qp, sim::Tick t) {
    if (qp.qpc.state == QpState::Err) {
        flush(qp, t);
        return;
    }
    if (qp.is_vi()) {
        m_descriptors.fetch(qp, true, t);
        m_descriptors.fetch(qp, false, t);
    }
    if (qp.qpc.state == QpState::Rtr || qp.qpc.state == QpState::Rts) m_fetch.prefetch_recv(qp, t);
    if (qp.qpc.state == QpState::Rts) m_tx.kick(qp, t);
    if (qp.qpc.state == QpState::Sqd) m_completer.report_drained(qp, t);
    else qp.req.sq_drained_reported = false;
}

std::vector<std::pair<std::uint32_t, QpCounters>> Hca::qp_counters() const {
    std::map<std::uint32_t, QpCounters> all = m_retired_counters;
    for (const auto& q : m_qps)
        if (q && q->valid) all[q->qpn] += q->counters;
    return {all.begin(), all.end()};
}

std::vector<sim::Block*> Hca::blocks() {
    std::vector<sim::Block*> all{&m_doorbell, &m_scheduler, &m_fetch, &m_srqs, &m_descriptors, &m_translation,
                                 &m_dma->block(), &m_tx, &m_requester, &m_responder, &m_completer, &m_rx,
                                 &m_completion, &m_port, &m_mcast, &m_migration, &m_qpc_cache, &m_cqc_cache};
    if (m_port2) all.push_back(m_port2.get());
    return all;
}

}  // namespace hcasim::hca
