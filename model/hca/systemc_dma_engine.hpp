// The SystemC model of the adapter's DMA engine (hca.dma.impl=systemc): each
// request costs the engine's setup cycles, then the PCIe host interface's
// transfer time; the bytes move by copy. See dma_engine.hpp for the contract.
#pragma once

#include <cstdint>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/posted_writes.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/block.hpp"

namespace hcasim::pcie {
class HostBus;
}

namespace hcasim::hca {

class SystemcDmaEngine : public sim::Block, public DmaEngine {
public:
    SystemcDmaEngine(const sc_core::sc_module_name& name, const HcaParams& p, pcie::HostBus& bus);

    using DmaEngine::read;
    using DmaEngine::write;
    sim::Tick read(sim::Tick t, const DmaSpan* spans, std::size_t n, std::uint8_t* dst) override;
    sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src) override;
    sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const packet::PacketPtr& owner,
                    const std::uint8_t* src) override;
    sim::Tick last_write_visible() const override;
    sim::Tick execute(sim::Tick t, const DmaDescriptor* d, std::size_t n, std::vector<DmaCompletion>& out) override;
    sim::Block& block() override { return *this; }
    void run_steps_on(sim::Timeline& processor) override {
        m_read_engine.share(&processor, "DMA read setup");
        m_write_engine.share(&processor, "DMA write setup");
    }

private:
    sim::Tick issue_write(sim::Tick t, const DmaSpan* spans, std::size_t n, PostedWrites::Write&& w, std::size_t total);

    pcie::HostBus& m_bus;
    PostedWrites m_posted;
    std::uint64_t* m_n_writes = nullptr;
    std::uint64_t* m_n_write_bytes = nullptr;
    sim::Timeline m_read_engine;
    sim::Timeline m_write_engine;
    std::uint32_t m_setup;
    std::uint32_t m_datapath_bytes;
    // Hot counters, looked up once.
    std::uint64_t* m_n_read_bytes = nullptr;
    std::uint64_t* m_n_reads = nullptr;
};

}  // namespace hcasim::hca
