// Completer: takes the responses the receive pipeline classifies for it
// (ACKs, RNR NAKs, NAKs, READ responses), retires acknowledged send WQEs in
// order into CQEs (or VI descriptor write-backs), places READ response data
// by DMA, runs the local ACK timer and asks the requester to go back and
// resend when a NAK or a time-out calls for it.
#pragma once

#include <cstdint>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class Completer final : public sim::Block, public PacketHandler, public SendCompleter {
public:
    struct Wiring {
        QpTable& qps;
        TransmitPath& tx;
        DmaEngine& dma;
        CompletionWriter& completions;
        QpErrorHandler& errors;
    };
    Completer(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);
    // The requester it sends back (built after this block).
    void set_requester(RequestRewinder& r) { m_requester = &r; }
    // Automatic path migration, asked before retries run out for good.
    void set_path_migration(PathMigrator& m) { m_migration = &m; }

    void handle(QpContext& qp, const packet::Parsed& p, const packet::PacketPtr& pkt, const std::uint8_t* payload,
                sim::Tick t) override;
    void retire(QpContext& qp, sim::Tick t) override;
    // The local ACK timeout (IBA 9.7.6.1.3): 4.096 us x 2^timeout after t
    // with no acknowledged progress, the requester resends from the oldest
    // unacknowledged PSN, retry_cnt times.
    void arm_ack_timer(QpContext& qp, sim::Tick t) override;
    // A QP in SQD that asked to be told: once no started WQE is left, raise
    // SQ drained (once per stay in SQD).
    void report_drained(QpContext& qp, sim::Tick t);

private:
    void retire_acknowledged(QpContext& qp, sim::Tick t);
    void handle_ack(QpContext& qp, const packet::Parsed& p, sim::Tick t);
    void handle_atomic_ack(QpContext& qp, const packet::Parsed& p, sim::Tick t);
    void response_complete(QpContext& qp, SendWork& w, sim::Tick t);
    void handle_read_response(QpContext& qp, const packet::Parsed& p, const packet::PacketPtr& pkt,
                              const std::uint8_t* payload, sim::Tick t);
    bool implied_nak(QpContext& qp, const SendWork& answered, sim::Tick t);
    void read_answer_gap(QpContext& qp, SendWork& w, sim::Tick t);
    bool ask_again(QpContext& qp, const SendWork& w, sim::Tick t);
    void release_read_resource(QpContext& qp, const SendWork& w);
    // Every WQE up to and including psn is acknowledged.
    // True when it found an earlier READ or atomic without its answer and
    // asked it again (an implied NAK).
    bool ack_received(QpContext& qp, std::uint32_t psn, sim::Tick t);
    void fail_wqe(QpContext& qp, std::uint32_t psn, CqeStatus status, sim::Tick t);
    void restart_ack_timer(QpContext& qp, sim::Tick t);
    // Forward progress: both retry counters full again, the ACK timer from now.
    void progressed(QpContext& qp, sim::Tick t);
    void ack_timeout(std::uint32_t qpn);
    // Writes back one VI send descriptor; false if the QP broke.
    bool retire_vi(QpContext& qp, sim::Tick t);

    Wiring m_w;
    RequestRewinder* m_requester = nullptr;
    PathMigrator* m_migration = nullptr;
    HcaParams m_p;
    std::vector<DmaSpan> m_spans;
};

}  // namespace hcasim::hca
