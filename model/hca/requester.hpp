// Requester: turns a QP's fetched send WQEs into request packets (SEND,
// SEND with immediate or invalidate, RDMA WRITE [with immediate], RDMA READ
// requests, atomics), segmented by path MTU and numbered with PSNs, gathers
// their payload by DMA and hands them to the transmit pipeline; memory
// window binds and local invalidates among them it has the translation unit
// execute. It goes back and resends when the completer asks (NAK, RNR NAK,
// ACK time-out).
#pragma once

#include <cstdint>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class Requester final : public sim::Block, public PacketProducer, public RequestRewinder {
public:
    struct Wiring {
        TransmitPath& tx;
        SendCompleter& completer;
        WorkQueueFetcher& fetch;
        AddressTranslator& translation;
        DmaEngine& dma;
    };
    Requester(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);
    // The largest UD message: one packet of the port's MTU.
    void set_max_datagram(std::uint32_t bytes);

    bool has_work(const QpContext& qp) const override;
    // In SQD: the next WQE has not started, so nothing more may be sent.
    bool draining_blocks(const QpContext& qp) const;
    bool produce(QpContext& qp, sim::Tick now) override;
    void on_wire(QpContext& qp, TransmitPath::OnWire what, sim::Tick end) override;
    void rewind(QpContext& qp, std::uint32_t psn, sim::Tick resume_at) override;

private:
    // Packet payload size: the path MTU, or for datagrams the port's MTU
    // (a UD message is one packet).
    std::uint32_t mtu_of(const QpContext& qp) const { return qp.service().connected ? qp.qpc.path_mtu : m_max_datagram; }
    // Starts a WQE: assigns its PSNs and translates its local buffer.
    // False if the WQE failed (it completes with its error).
    bool start(QpContext& qp, SendWork& w, sim::Tick now, sim::Tick& start_at);
    // Ends a WQE that will send nothing: completes in order with its error.
    void finish_unsent(QpContext& qp, SendWork& w, sim::Tick t);
    // The headers of the next packet of w.
    std::uint32_t build_headers(QpContext& qp, const SendWork& w, packet::Headers& h, bool& last);
    // Executes a bind or local invalidate WQE (or passes over one already
    // executed when resending).
    void execute_local(QpContext& qp, SendWork& w, sim::Tick now);

    Wiring m_w;
    HcaParams m_p;
    std::vector<DmaSpan> m_slices;
    std::uint32_t m_max_datagram = 0;
    std::uint64_t* m_n_request_packets = nullptr;
    std::uint64_t* m_n_read_requests = nullptr;
};

}  // namespace hcasim::hca
