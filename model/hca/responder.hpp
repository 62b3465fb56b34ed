// Responder: takes the request packets the receive pipeline classifies for
// it, checks them in small steps (QP state, PSN, opcode sequence, receive
// WQE, rkey), places SEND and RDMA WRITE payload by DMA, invalidates the
// memory window a SEND with invalidate names, answers RDMA READs
// (it produces their response packets when the transmit pipeline asks) and
// generates coalesced ACKs and NAKs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/packet/opcode_table.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class Responder final : public sim::Block, public PacketHandler, public PacketProducer {
public:
    struct Wiring {
        TransmitPath& tx;
        WorkQueueFetcher& fetch;
        AddressTranslator& translation;
        DmaEngine& dma;
        CompletionWriter& completions;
        QpErrorHandler& errors;
        SrqTable& srqs;
        QpTable& qps;
    };
    Responder(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);

    void handle(QpContext& qp, const packet::Parsed& p, const packet::PacketPtr& pkt, const std::uint8_t* payload,
                sim::Tick t) override;
    // READ responses waiting to go out.
    bool has_work(const QpContext& qp) const override { return !qp.resp.read_jobs.empty(); }
    bool produce(QpContext& qp, sim::Tick now) override;

private:
    // One request packet on its way through the steps.
    struct Request {
        const packet::Parsed& p;
        const packet::OpcodeInfo& info;
        const packet::PacketPtr& pkt;
        const std::uint8_t* payload;
        sim::Tick t;
        std::uint32_t psn;
        std::uint32_t len;
    };
    enum class Step { Next, Done };

    Step check_state(QpContext& qp, Request& r);
    Step check_qkey(QpContext& qp, Request& r);
    Step check_xrc(QpContext& qp, Request& r);
    Step check_psn(QpContext& qp, Request& r);
    Step check_op_seq(QpContext& qp, Request& r);
    Step get_recv_wqe(QpContext& qp, Request& r);
    Step execute_send(QpContext& qp, Request& r);
    Step execute_write(QpContext& qp, Request& r);
    // repeated: a duplicate READ, answered again without moving epsn or the MSN.
    Step execute_read(QpContext& qp, Request& r, bool repeated = false);
    Step execute_atomic(QpContext& qp, Request& r);
    Step invalidate_rkey(QpContext& qp, Request& r);
    // The ATOMIC ACKNOWLEDGE goes out in order behind earlier responses.
    void queue_atomic_ack(QpContext& qp, sim::Tick ready, std::uint32_t psn, std::uint64_t orig, std::uint32_t msn);
    // Drops queued answers a READ or atomic asked again at psn supersedes.
    void drop_superseded_answers(QpContext& qp, std::uint32_t psn);
    void acknowledge(QpContext& qp, Request& r);

    // Sends an ACK or NAK, behind any READ responses still to go.
    void respond(QpContext& qp, sim::Tick t, std::uint8_t syndrome, std::uint32_t psn);
    void release_held_ack(QpContext& qp, sim::Tick now);
    void nak_and_enter_error(QpContext& qp, sim::Tick t, std::uint8_t nak_code, std::uint32_t psn);
    // Ends a responder-side error: NAK to the requester, CQE for the
    // receive WQE if one was in use, QP to error.
    // ib_event: the affiliated event of an RC QP when not the one the NAK
    // implies (access error or request error).
    void fail(QpContext& qp, sim::Tick t, std::uint8_t nak_code, CqeStatus recv_status, std::uint32_t psn,
              std::optional<AsyncEventType> vi_event = std::nullopt,
              std::optional<AsyncEventType> ib_event = std::nullopt);
    void complete_recv(QpContext& qp, sim::Tick t, const packet::Parsed& p, CqeStatus status, bool rdma_imm,
                       std::uint32_t byte_len);

    Wiring m_w;
    HcaParams m_p;
    std::vector<DmaSpan> m_spans;
    // Bus address of recent atomics -> when their write lands.
    std::map<std::uint64_t, sim::Tick> m_atomic_busy;
    // When each atomic unit is free again (hca.atomic_units of them; none: no limit).
    std::vector<sim::Tick> m_atomic_unit_free;
    static constexpr std::size_t kAtomicAddressesTracked = 64;
    std::uint64_t* m_n_read_response_packets = nullptr;
    std::uint64_t* m_n_write_requests = nullptr;
};

}  // namespace hcasim::hca
