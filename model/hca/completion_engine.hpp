// Completion engine: writes CQEs by DMA into the CQ ring in host memory,
// each stamped with the core clock's cycle count when it is written,
// detects overrun against the consumer index the driver publishes in the
// CQ doorbell record, and raises the completion interrupt of an armed CQ.
#pragma once

#include <cstdint>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class CompletionEngine final : public sim::Block, public CompletionArming {
public:
    // hca.control_program: this block's steps run on the adapter's one processor.
    void run_steps_on(sim::Timeline& processor) { m_pipe.share(&processor, "CQE"); }
    struct Wiring {
        CqTable& cqs;
        DmaEngine& dma;
        QpErrorHandler& errors;      // CQ overrun is an asynchronous event
        InterruptRaiser& interrupts;
        QpTable& qps;                // the QP's own CQE error counters
    };
    CompletionEngine(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);

    // Writes cqe into CQ cqn no earlier than t (after data the work placed).
    // Returns false if the CQ overran and the CQE was lost.
    bool post(sim::Tick t, std::uint32_t cqn, Cqe cqe);
    // Arms the CQ for its next CQE (any, or solicited only).
    void arm(sim::Tick t, std::uint32_t cqn, std::uint32_t consumer, bool solicited) override;

private:
    Wiring m_w;
    sim::Timeline m_pipe;
    std::uint32_t m_cycles;
};

}  // namespace hcasim::hca
