// TX transport (RC requester and responder transmit side): takes QPs from
// the scheduler, turns their work into packets (SEND, SEND with immediate,
// RDMA WRITE [with immediate], RDMA READ requests, READ responses),
// segmented by path MTU with PSNs, gathers payload by DMA into the transmit
// packet buffer and hands packets to the port. ACKs and NAKs that the RX
// side generates go out through here too.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <queue>

#include "model/hca/contexts.hpp"
#include "model/hca/hca_params.hpp"
#include "model/packet/ib_packet.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class Hca;

class TxTransport : public sim::Block {
public:
    TxTransport(const sc_core::sc_module_name& name, const HcaParams& p, Hca& hca);

    // New send WQEs were posted (doorbell) or parsed (fetch engine), or the
    // QP may go on after a wait.
    void kick(QpContext& qp, sim::Tick t);
    // An ACK, RNR NAK or NAK with this AETH syndrome for psn, sent at t.
    void send_ack(QpContext& qp, sim::Tick t, std::uint8_t syndrome, std::uint32_t psn);
    // Go back to psn (after an RNR or sequence NAK), not before resume_at.
    void rewind(QpContext& qp, std::uint32_t psn, sim::Tick resume_at);

private:
    enum class Produced { None, One };
    void schedule_pump(sim::Tick t);
    void pump();
    Produced produce(QpContext& qp, sim::Tick now);
    Produced produce_read_response(QpContext& qp, sim::Tick now);
    Produced produce_request(QpContext& qp, sim::Tick now);
    bool has_work(const QpContext& qp) const;
    packet::PacketPtr make_packet(const QpContext& qp, packet::Headers& h, std::uint32_t payload_len,
                                  std::uint8_t** payload);
    void launch(QpContext& qp, packet::PacketPtr pkt, sim::Tick data_ready);

    Hca& m_hca;
    HcaParams m_p;
    sim::Timeline m_pipe;
    std::uint32_t m_buffer_used = 0;
    // Packet-buffer space returns when a packet has left the port.
    std::priority_queue<std::pair<sim::Tick, std::uint32_t>, std::vector<std::pair<sim::Tick, std::uint32_t>>,
                        std::greater<>>
        m_releases;
    sim::Tick m_pump_at = ~sim::Tick(0);
    std::vector<DmaSpan> m_slices;
    packet::PacketPool m_pool;
    // Hot counters, looked up once.
    std::uint64_t* m_n_packets = nullptr;
    std::uint64_t* m_n_bytes = nullptr;
    std::uint64_t* m_n_request_packets = nullptr;
};

}  // namespace hcasim::hca
