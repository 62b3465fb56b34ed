// Doorbell unit: decodes MMIO writes to the UAR page (send and receive
// doorbells, CQ arm, BlueFlame WQEs) and hands each to the block it wakes.
#pragma once

#include <cstdint>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/pcie/host_bus.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

struct DoorbellWrite {
    std::uint32_t offset = 0;      // kUar* register
    std::uint32_t number = 0;      // QPN or CQN
    std::uint32_t index = 0;       // producer or consumer index
    bool solicited = false;        // CQ arm: solicited completions only
    std::vector<std::uint8_t> wqe; // BlueFlame: the WQE itself
    ViDoorbellToken vi;            // VI doorbells: the posted descriptor
    bool recv_queue = false;       // VI arm: which queue
};

class DoorbellUnit : public sim::Block {
public:
    // hca.control_program: this block's steps run on the adapter's one processor.
    void run_steps_on(sim::Timeline& processor) { m_pipe.share(&processor, "doorbell"); }
    struct Wiring {
        QpTable& qps;
        pcie::HostBus& bus;             // MMIO writes cross it
        WorkQueueFetcher& fetch;        // BlueFlame WQEs
        DescriptorQueues& descriptors;  // VI doorbells
        CompletionArming& cqs;
        QpErrorHandler& errors;         // doorbells of QPs in an error state flush
        TransmitPath& tx;
    };
    DoorbellUnit(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);

    // The host CPU issues an MMIO write at t; it crosses PCIe and is decoded.
    void mmio_write(sim::Tick t, DoorbellWrite w);

private:
    void decode(sim::Tick t, const DoorbellWrite& w);

    Wiring m_w;
    sim::Timeline m_pipe;
    std::uint32_t m_cycles;
};

}  // namespace hcasim::hca
