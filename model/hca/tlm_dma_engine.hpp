// The SystemC model of the adapter's DMA engine (hca.dma.impl=tlm): each
// request costs the engine's setup cycles, then the PCIe host interface's
// transfer time; the bytes move by copy. See dma_engine.hpp for the contract.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/hca_params.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/block.hpp"

namespace hcasim::pcie {
class PcieHostInterface;
}

namespace hcasim::hca {

class TlmDmaEngine : public sim::Block, public DmaEngine {
public:
    TlmDmaEngine(const sc_core::sc_module_name& name, const HcaParams& p, pcie::PcieHostInterface& pcie);

    using DmaEngine::read;
    using DmaEngine::write;
    sim::Tick read(sim::Tick t, const DmaSpan* spans, std::size_t n, std::uint8_t* dst) override;
    sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src) override;
    sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const packet::PacketPtr& owner,
                    const std::uint8_t* src) override;
    sim::Tick last_write_visible() const override;
    sim::Tick execute(sim::Tick t, const DmaDescriptor* d, std::size_t n, std::vector<DmaCompletion>& out) override;
    sim::Block& block() override { return *this; }

private:
    struct PendingWrite {
        std::vector<DmaSpan> spans;
        std::vector<std::uint8_t> data;  // a copy of the bytes, or
        packet::PacketPtr owner;         // the packet that holds them
        const std::uint8_t* src = nullptr;
        const std::uint8_t* bytes() const { return owner ? src : data.data(); }
    };
    sim::Tick issue_write(sim::Tick t, const DmaSpan* spans, std::size_t n, PendingWrite&& w, std::size_t total);
    PendingWrite spare();
    void apply_oldest();
    void overlay_pending(const DmaSpan& r, std::uint8_t* dst) const;

    pcie::PcieHostInterface& m_pcie;
    std::deque<PendingWrite> m_pending;
    std::vector<PendingWrite> m_spare;
    sim::Tick m_last_visible = 0;
    std::uint64_t* m_n_writes = nullptr;
    std::uint64_t* m_n_write_bytes = nullptr;
    sim::Timeline m_read_engine;
    sim::Timeline m_write_engine;
    std::uint32_t m_setup;
    // Hot counters, looked up once.
    std::uint64_t* m_n_read_bytes = nullptr;
    std::uint64_t* m_n_reads = nullptr;
};

}  // namespace hcasim::hca
