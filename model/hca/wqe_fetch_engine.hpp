// WQE fetch engine: DMA-reads send WQEs (a batch of consecutive ones per
// read) and prefetches receive WQEs into an on-chip cache, parsing each into
// the work the transport blocks execute. BlueFlame WQEs arrive with their
// doorbell and need no fetch. A QP on a shared receive queue takes its
// receive WQEs from the SRQ engine instead.
#pragma once

#include <cstdint>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class WqeFetchEngine final : public sim::Block, public WorkQueueFetcher {
public:
    // hca.control_program: this block's steps run on the adapter's one processor.
    void run_steps_on(sim::Timeline& processor) { m_parser.share(&processor, "WQE parse"); }
    struct Wiring {
        QpTable& qps;
        DmaEngine& dma;
        DescriptorQueues& descriptors;  // VIs fetch descriptors instead
        SharedReceiveQueues& srqs;      // QPs on an SRQ take their receives there
        QpErrorHandler& errors;         // WQEs fetched for a QP in an error state are flushed
        TransmitPath& tx;
    };
    WqeFetchEngine(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);

    // Starts a fetch of the send WQEs between sq_fetched and sq_pi (at most a
    // batch); calls the TX transport when they are parsed. No-op if a fetch
    // is running or nothing is pending.
    void fetch_send(QpContext& qp, sim::Tick t) override;
    // Takes a WQE delivered by BlueFlame if it is the next one to fetch.
    // Returns when the WQE is parsed (t if it was not taken).
    sim::Tick blueflame(QpContext& qp, const std::vector<std::uint8_t>& wqe, sim::Tick t) override;
    // Keeps up to rq_prefetch_depth receive WQEs on chip. A demand fetch (a
    // message needs a receive WQE and none is on chip) does not wait for one
    // in flight and, when every WQE the adapter knows of is fetched, first
    // reads the receive doorbell record. Returns when the adapter knows
    // whether a WQE is coming (t if it needed to read nothing).
    sim::Tick prefetch_recv(QpContext& qp, sim::Tick t, bool demand = false) override;
    // A receive WQE was used: once every WQE the adapter knows of is on chip,
    // it reads the doorbell record ahead of need, so a host that keeps
    // posting receives never makes a message wait for the record.
    void recv_consumed(QpContext& qp, sim::Tick t) override;
    // Reads the QP's receive doorbell record at t: learns of receives posted
    // since the last read. Returns when the record is on chip.
    sim::Tick read_recv_record(QpContext& qp, sim::Tick t);

private:
    bool parse_send(QpContext& qp, const std::uint8_t* wqe, std::uint32_t bytes, SendWork& out);

    Wiring m_w;
    HcaParams m_p;
    sim::Timeline m_parser;
    std::vector<std::uint8_t> m_buf;
};

}  // namespace hcasim::hca
