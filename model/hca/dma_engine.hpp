// The adapter's DMA engine: moves bytes between host memory and on-chip
// buffers through the PCIe host interface. Reads gather a list of spans into
// a buffer; writes scatter a buffer over spans and land in host memory when
// their last TLP does, in issue order (PCIe posted-write ordering), so a CQE
// written after payload is never visible before it.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/hca_params.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/block.hpp"

namespace hcasim::pcie {
class PcieHostInterface;
}

namespace hcasim::hca {

class DmaEngine : public sim::Block {
public:
    DmaEngine(const sc_core::sc_module_name& name, const HcaParams& p, pcie::PcieHostInterface& pcie);

    // Reads the spans into dst (bytes copied in span order); returns when the
    // last byte is on chip.
    sim::Tick read(sim::Tick t, const DmaSpan* spans, std::size_t n, std::uint8_t* dst);
    sim::Tick read(sim::Tick t, std::uint64_t addr, std::uint32_t len, void* dst);
    // Writes src over the spans; the bytes appear in host memory at the
    // returned time.
    sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src);
    sim::Tick write(sim::Tick t, std::uint64_t addr, const void* src, std::uint32_t len);
    // As above for payload that lives in a packet: the packet is kept until
    // the write lands instead of copying its bytes.
    sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const packet::PacketPtr& owner,
                    const std::uint8_t* src);

    // When the last write issued so far is in host memory.
    sim::Tick last_write_visible() const;

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
