// The Verilog DMA engine of rtl/ in the adapter (hca.dma.impl=rtl): a bank of
// hca.dma.rtl_channels instances of the verilated engine behind the same
// interface as the SystemC model. A request is answered at once: the wrapper
// clocks the chosen instance cycle by cycle until it reports (rtl/rtl_dma_core),
// answering its host reads with bytes from host memory and completion times
// from the PCIe host interface, and holding its posted writes until the PCIe
// model says they land, as the model does.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/posted_writes.hpp"
#include "model/hca/hca_params.hpp"
#include "model/sim/block.hpp"
#include "rtl/rtl_dma_core.hpp"

namespace hcasim::pcie {
class PcieHostInterface;
}

namespace hcasim::hca {

class RtlDmaEngine : public sim::Block, public DmaEngine, private rtl::HostPort {
public:
    // vcd: waveform file prefix (empty: none); channel k of this engine
    // writes <stem>.<block path>.ch<k>.vcd. gate_clock false clocks every
    // cycle of a run (checks that clock gating changes nothing).
    RtlDmaEngine(const sc_core::sc_module_name& name, const HcaParams& p, pcie::PcieHostInterface& pcie,
                 std::uint32_t channels, std::string vcd = "", bool gate_clock = true);
    ~RtlDmaEngine() override;

    using DmaEngine::read;
    using DmaEngine::write;
    sim::Tick read(sim::Tick t, const DmaSpan* spans, std::size_t n, std::uint8_t* dst) override;
    sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src) override;
    sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const packet::PacketPtr& owner,
                    const std::uint8_t* src) override;
    sim::Tick last_write_visible() const override { return m_posted.last_visible(); }
    sim::Tick execute(sim::Tick t, const DmaDescriptor* d, std::size_t n, std::vector<DmaCompletion>& out) override;
    sim::Block& block() override { return *this; }

    // Channel 0 restarts from reset and writes its waveform to exactly path.
    void trace_channel0(const std::string& path);
    // Sums over the channels.
    rtl::CoreStats stats() const;
    // Host reads in flight at most during the last run.
    std::uint32_t last_max_inflight() const { return m_last_max_inflight; }

private:
    sim::Tick read_request(sim::Tick t, std::uint64_t addr, std::uint32_t len, std::uint8_t* data) override;
    sim::Tick write_tlp(sim::Tick t, std::uint64_t addr, std::uint32_t len, const std::uint8_t* data) override;

    rtl::RtlDmaCore& channel(sim::Tick t);
    std::unique_ptr<rtl::RtlDmaCore> make_core(const std::string& vcd);
    std::string vcd_file(std::size_t k) const;
    // Runs the descriptors on one channel; returns the last status time.
    sim::Tick run(sim::Tick t, std::vector<rtl::CoreDescriptor>& d, std::vector<rtl::CoreStatus>& st);
    sim::Tick do_write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src);
    // Queues the TLPs of the run just made as one posted write.
    sim::Tick post_current();

    pcie::PcieHostInterface& m_pcie;
    std::uint32_t m_mrrs;
    std::uint32_t m_mps;
    std::string m_vcd;
    bool m_gate;
    std::vector<std::unique_ptr<rtl::RtlDmaCore>> m_channels;  // made on first use
    std::vector<sim::Tick> m_channel_free;
    rtl::CoreStats m_retired;  // stats of channels replaced by trace_channel0
    PostedWrites m_posted;
    PostedWrites::Write m_current;  // the TLPs of the run being made
    sim::Tick m_current_visible = 0;
    std::uint32_t m_last_max_inflight = 0;
    std::vector<rtl::CoreDescriptor> m_desc;
    std::vector<rtl::CoreStatus> m_status;
    std::uint64_t* m_n_reads = nullptr;
    std::uint64_t* m_n_writes = nullptr;
    std::uint64_t* m_n_read_bytes = nullptr;
    std::uint64_t* m_n_write_bytes = nullptr;
};

}  // namespace hcasim::hca
