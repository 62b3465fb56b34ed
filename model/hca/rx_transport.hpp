// RX transport: validates each arriving packet (ICRC/VCRC, LID, QP, state,
// PSN, opcode sequence), and then acts as RC responder (places SEND and
// RDMA WRITE payload by DMA, checks rkeys, answers RDMA READs, generates
// coalesced ACKs and NAKs) or as requester (ACKs, NAKs and READ responses
// retire WQEs and produce CQEs in order).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/hca_params.hpp"
#include "model/packet/ib_packet.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class Hca;
enum class AsyncEventType;

class RxTransport : public sim::Block {
public:
    RxTransport(const sc_core::sc_module_name& name, const HcaParams& p, Hca& hca);

    // The port delivers a whole packet at t.
    void receive(packet::PacketPtr pkt, sim::Tick t);
    // Completes, in order, the send WQEs at the head of the queue that are
    // done; an errored one moves the QP to the error state.
    void retire(QpContext& qp, sim::Tick t);
    // Starts the local ACK timeout (IBA 9.7.6.1.3) if it is not running:
    // 4.096 us x 2^timeout after t with no acknowledged progress, the
    // requester resends from the oldest unacknowledged PSN, retry_cnt times.
    void arm_ack_timer(QpContext& qp, sim::Tick t);

private:
    void responder(QpContext& qp, const packet::Parsed& p, const std::uint8_t* payload, sim::Tick t);
    void requester(QpContext& qp, const packet::Parsed& p, const std::uint8_t* payload, sim::Tick t);
    // Ends a responder-side error: NAK to the requester, CQE for the
    // receive WQE if one was in use, QP to error.
    void responder_error(QpContext& qp, sim::Tick t, std::uint8_t nak_code, CqeStatus recv_status,
                         std::uint32_t psn, std::optional<AsyncEventType> vi_event = std::nullopt);
    void complete_recv(QpContext& qp, sim::Tick t, const packet::Parsed& p, CqeStatus status, bool rdma_imm,
                       std::uint32_t byte_len);
    void ack_received(QpContext& qp, std::uint32_t psn, sim::Tick t);
    void fail_wqe(QpContext& qp, std::uint32_t psn, CqeStatus status, sim::Tick t);
    void restart_ack_timer(QpContext& qp, sim::Tick t);
    void ack_timeout(std::uint32_t qpn);

    Hca& m_hca;
    HcaParams m_p;
    sim::Timeline m_pipe;
    std::vector<DmaSpan> m_spans;
    sim::Tick m_backlog_slack = 0;
    packet::PacketPtr m_current;  // the packet being processed
    // Hot counters, looked up once.
    std::uint64_t* m_n_packets = nullptr;
};

}  // namespace hcasim::hca
