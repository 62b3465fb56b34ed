// VI descriptor engine: the VI Architecture's side of work fetch and
// completion. Each VI work queue is a chain of descriptors the consumer built
// in registered memory. The engine takes the doorbell of each posted
// descriptor, follows the chain through Next/NextHandle (re-reading the Next
// field of the last descriptor when it was still empty at fetch time),
// checks alignment, memory handle and protection tag, DMA-reads the control,
// address and data segments and turns them into the send or receive work the
// transport executes. When the work is done it DMA-writes Length, Status
// (and received immediate data) back into the descriptor, then a CQE naming
// the VI and queue, or the queue's interrupt when it is armed.
//
// Per descriptor: posted (doorbell) -> fetching -> parsed (work queued) ->
// executing (transport) -> written back.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

// The Status bits (kViStatus*) for a transport completion status.
std::uint32_t vi_error_bits(CqeStatus s);
// The Status operation bits of a send-queue operation.
std::uint32_t vi_op_bits(WqeOpcode op);

class DescriptorEngine final : public sim::Block, public DescriptorQueues {
public:
    // hca.control_program: this block's steps run on the adapter's one processor.
    void run_steps_on(sim::Timeline& processor) { m_parser.share(&processor, "descriptor parse"); }
    struct Wiring {
        QpTable& qps;
        DmaEngine& dma;
        AddressTranslator& translation;  // descriptors live in registered memory
        CompletionWriter& completions;
        QpErrorHandler& errors;
        InterruptRaiser& interrupts;     // armed queues without a CQ
        TransmitPath& tx;
    };
    DescriptorEngine(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);

    // The doorbell of one posted descriptor, decoded at t.
    void posted(QpContext& qp, bool recv, const ViDoorbellToken& tok, sim::Tick t) override;
    // Fetches the next posted descriptors of a queue when the VI's state and
    // the on-chip queue room allow. demand: a message is waiting for a
    // receive descriptor, which is fetched even past hca.vi_fetch_depth.
    void fetch(QpContext& qp, bool recv, sim::Tick t, bool demand = false) override;
    // Writes a finished descriptor back and reports its completion; returns
    // when the status is visible in host memory.
    sim::Tick complete(QpContext& qp, bool recv, std::uint64_t desc_addr, std::uint32_t desc_handle,
                       std::uint32_t status, std::uint32_t length, std::optional<std::uint32_t> imm, sim::Tick t);
    // Every posted descriptor of both queues completes with the flushed
    // status, in order.
    void flush(QpContext& qp, sim::Tick t);
    // Arms a queue's interrupt for its next completion.
    void arm(QpContext& qp, bool recv) override;

private:
    struct Fetched {
        std::uint64_t addr = 0;
        std::uint32_t handle = 0;
        ViCtrlSeg ctrl{};
        std::vector<ViSeg> segs;
        std::uint32_t error = 0;  // kViStatus* found while fetching
    };
    // Resolves where the next descriptor is and checks it; false on a post
    // descriptor error (already reported).
    bool locate(QpContext& qp, ViQueue& q, bool recv, sim::Tick& t, std::uint64_t& addr, std::uint32_t& handle);
    void post_descriptor_error(QpContext& qp, bool recv, std::uint64_t addr, sim::Tick t, const char* why);
    void deliver(std::uint32_t qpn, bool recv, Fetched& f, sim::Tick t);
    static SendWork send_work(const Fetched& f);
    static RecvWork recv_work(const Fetched& f);

    Wiring m_w;
    HcaParams m_p;
    sim::Timeline m_parser;
    std::vector<DmaSpan> m_spans;
};

}  // namespace hcasim::hca
