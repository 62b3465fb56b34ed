// The host channel adapter: its blocks, wired as in docs/architecture.md,
// and the context tables they share. The host reaches it only through MMIO
// (doorbells, BlueFlame), DMA on host memory and interrupts; the driver's
// firmware commands create and change contexts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "model/hca/async_event.hpp"
#include "model/hca/completion_engine.hpp"
#include "model/hca/context_cache.hpp"
#include "model/hca/contexts.hpp"
#include "model/hca/control_processor.hpp"
#include "model/hca/descriptor_engine.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/doorbell_unit.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/multicast_table.hpp"
#include "model/hca/path_migration.hpp"
#include "model/hca/port.hpp"
#include "model/hca/qp_scheduler.hpp"
#include "model/hca/requester.hpp"
#include "model/hca/responder.hpp"
#include "model/hca/completer.hpp"
#include "model/hca/rx_pipeline.hpp"
#include "model/hca/srq_engine.hpp"
#include "model/hca/translation_unit.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/hca/tx_pipeline.hpp"
#include "model/hca/wqe_fetch_engine.hpp"
#include "model/pcie/pcie_host_interface.hpp"

namespace hcasim::hca {

// The host side of the interrupt line.
class InterruptSink {
public:
    virtual ~InterruptSink() = default;
    virtual void completion_event(std::uint32_t cqn) = 0;
    virtual void async_event(const AsyncEvent& e) = 0;
    // A VI work queue without a completion queue completed a descriptor
    // while armed.
    virtual void vi_queue_event(std::uint32_t qpn, bool recv_queue) = 0;
};

class Hca final : public sc_core::sc_module,
                  public QpTable,
                  public CqTable,
                  public CompletionWriter,
                  public QpErrorHandler,
                  public InterruptRaiser {
public:
    Hca(const sc_core::sc_module_name& name, const sim::Config& cfg, pcie::HostBus& bus);

    const HcaParams& params() const { return m_p; }
    void set_interrupt_sink(InterruptSink* s) { m_sink = s; }

    // Context tables (written by firmware commands, used by the blocks).
    QpContext* qp(std::uint32_t qpn) {
        return qpn < m_qps.size() && m_qps[qpn] && m_qps[qpn]->valid ? m_qps[qpn].get() : nullptr;
    }
    // QpTable: a block's read of a QP's context, through the QP context
    // cache (hca.qpc_read_cycles on a hit, a read from host memory on a miss).
    QpAccess context(std::uint32_t qpn, sim::Tick t) override {
        QpContext* q = qp(qpn);
        return {q, q ? m_qpc_cache.read(t, qpn) : t + m_qpc_read};
    }
    bool hold_context(std::uint32_t qpn) override { return m_qpc_cache.hold(qpn); }
    void release_context(std::uint32_t qpn) override { m_qpc_cache.release(qpn); }
    QpContext* working_state(std::uint32_t qpn) override { return qp(qpn); }
    CqContext* cq(std::uint32_t cqn) override {
        return cqn < m_cqs.size() && m_cqs[cqn].valid ? &m_cqs[cqn] : nullptr;
    }
    sim::Tick cq_context_ready(std::uint32_t cqn, sim::Tick t) override { return m_cqc_cache.read(t, cqn); }
    // CREATE_QP: a QP with this architected context and no work.
    QpContext& install_qp(std::uint32_t qpn, const Qpc& image);
    // MODIFY_QP: writes the QP's architected context and reloads the working
    // copies that loads (QpcLoad bits) names; a new state takes effect at once.
    void write_qpc(QpContext& qp, const Qpc& image, std::uint32_t loads);
    void remove_qp(std::uint32_t qpn);
    // QUERY_QP's SQ-draining bit: no started send WQE is left.
    bool sq_drained(std::uint32_t qpn) {
        const QpContext* q = qp(qpn);
        return !q || q->req.send_q.empty() || !q->req.send_q.front().started;
    }
    CqContext& install_cq(std::uint32_t cqn);
    void remove_cq(std::uint32_t cqn) {
        m_cqs[cqn].valid = false;
        m_cqc_cache.invalidate(cqn);
    }
    ProtectionTable& mpt() { return m_mpt_table; }

    // Raises an interrupt for an asynchronous event at t.
    void raise_async(sim::Tick t, AsyncEvent e) override;
    // Raises the completion interrupt of cqn at t.
    void raise_completion(sim::Tick t, std::uint32_t cqn) override;
    // Raises the interrupt of an armed VI work queue at t.
    void raise_vi_queue(sim::Tick t, std::uint32_t qpn, bool recv_queue) override;
    // A fatal adapter failure (fault injection): every VI and QP goes to the
    // error state and a catastrophic error is reported.
    void fail_catastrophically(sim::Tick t);


    // Moves a QP to the error state: every posted WQE of both queues
    // completes with a flush error, in order, after those already done.
    void enter_error(QpContext& qp, sim::Tick t) override;
    void flush(QpContext& qp, sim::Tick t) override;
    void enter_send_queue_error(QpContext& qp, sim::Tick t) override;
    // Completes every posted send WQE with a flush error.
    void flush_send(QpContext& qp, sim::Tick t) override;
    void fail_srq(std::uint32_t srqn, sim::Tick t) override;

    // Called after firmware changes a QP's state, so blocks pick up work.
    void state_changed(QpContext& qp, sim::Tick t);

    // The host bus (PCIe, or conventional PCI with host.bus=pci).
    pcie::HostBus& pcie() { return m_bus; }
    // Port num (1..port_count()); port 1 when omitted.
    Port& port(unsigned num = 1) { return m_ports(num); }
    const PortSet& ports() const { return m_ports; }
    int port_count() const { return m_ports.count(); }
    PathMigration& migration() { return m_migration; }
    DoorbellUnit& doorbells() { return m_doorbell; }
    QpScheduler& scheduler() { return m_scheduler; }
    WqeFetchEngine& fetch() { return m_fetch; }
    SrqEngine& srqs() { return m_srqs; }
    DescriptorEngine& descriptors() { return m_descriptors; }
    TranslationUnit& translation() { return m_translation; }
    DmaEngine& dma() { return *m_dma; }
    TxPipeline& tx() { return m_tx; }
    RxPipeline& rx() { return m_rx; }
    Requester& requester() { return m_requester; }
    Responder& responder() { return m_responder; }
    Completer& completer() { return m_completer; }
    CompletionEngine& completion() { return m_completion; }
    MulticastTable& multicast() { return m_mcast; }
    // The processor that runs every step (hca.control_program), or none.
    const ControlProcessor* control_processor() const { return m_processor.get(); }
    IcmCache& qpc_cache() { return m_qpc_cache; }
    IcmCache& cqc_cache() { return m_cqc_cache; }

    // CompletionWriter: CQEs through the completion engine, VI descriptor
    // write-backs through the descriptor engine.
    bool post_cqe(sim::Tick t, std::uint32_t cqn, const Cqe& cqe) override { return m_completion.post(t, cqn, cqe); }
    void complete_descriptor(QpContext& qp, bool recv, std::uint64_t desc_addr, std::uint32_t desc_handle,
                             std::uint32_t status, std::uint32_t length, std::optional<std::uint32_t> imm,
                             sim::Tick t) override {
        m_descriptors.complete(qp, recv, desc_addr, desc_handle, status, length, imm, t);
    }

    // Each QP number's counters, those of destroyed QPs included (a number
    // used again adds up), by QP number.
    std::vector<std::pair<std::uint32_t, QpCounters>> qp_counters() const;
    // Every block, for counters and reports.
    std::vector<sim::Block*> blocks();

private:
    // Sends an MSI-X at t; the host's sink hears of it when it arrives.
    // flush and flush_send, with this status for the WQEs already in
    // progress (a flush error unless the adapter failed under them).
    void flush_work(QpContext& qp, sim::Tick t, CqeStatus in_progress);
    void flush_send_work(QpContext& qp, sim::Tick t, CqeStatus in_progress);
    template <typename F>
    void msix(sim::Tick t, F to_sink) {
        m_completion.at(m_bus.msix(t), [this, to_sink]() {
            if (m_sink) to_sink(*m_sink);
        });
    }

    HcaParams m_p;
    pcie::HostBus& m_bus;
    ProtectionTable m_mpt_table;
    sim::Tick m_qpc_read = 0;
    IcmCache m_qpc_cache;
    IcmCache m_cqc_cache;
    std::vector<std::unique_ptr<QpContext>> m_qps;
    std::vector<CqContext> m_cqs;
    std::map<std::uint32_t, QpCounters> m_retired_counters;  // of destroyed QPs
    InterruptSink* m_sink = nullptr;

    Port m_port;
    std::unique_ptr<Port> m_port2;  // port.count=2
    PortSet m_ports;
    PathMigration m_migration;
    std::unique_ptr<DmaEngine> m_dma;  // hca.dma.impl picks the implementation
    TranslationUnit m_translation;
    CompletionEngine m_completion;
    QpScheduler m_scheduler;
    SrqEngine m_srqs;
    TxPipeline m_tx;
    DescriptorEngine m_descriptors;
    WqeFetchEngine m_fetch;
    Completer m_completer;
    Requester m_requester;
    Responder m_responder;
    MulticastTable m_mcast;
    RxPipeline m_rx;
    DoorbellUnit m_doorbell;
    std::unique_ptr<ControlProcessor> m_processor;  // hca.control_program only
};

}  // namespace hcasim::hca
