// Parameters of the adapter core (its blocks share one core clock).
#pragma once

#include <cstdint>
#include <string>

#include "model/sim/config.hpp"

namespace hcasim::hca {

struct HcaParams {
    double core_clock_mhz = 500;
    std::uint32_t datapath_bytes = 32;
    std::uint32_t doorbell_cycles = 4;
    std::uint32_t qpc_read_cycles = 0;
    std::uint32_t scheduler_cycles = 2;
    std::uint32_t wqe_parse_cycles = 8;
    std::uint32_t wqe_fetch_batch = 8;
    std::uint32_t rq_prefetch_depth = 16;
    std::uint32_t srq_prefetch_depth = 16;
    std::uint32_t translation_cycles = 4;
    std::uint32_t mpt_cache_entries = 256;
    std::uint32_t mtt_cache_entries = 2048;
    std::uint32_t qpc_cache_entries = 256;
    std::uint32_t cqc_cache_entries = 256;
    std::uint32_t context_fill_slots = 8;
    std::uint32_t atomic_units = 1;  // atomics executed at once; 0: no limit
    std::uint32_t dma_setup_cycles = 4;
    // DMA engine implementation: the SystemC model or the verilated RTL.
    std::string dma_impl = "systemc";
    std::uint32_t dma_rtl_channels = 8;
    std::string dma_vcd;  // waveform file of the RTL engine; empty: none
    std::uint32_t tx_packet_cycles = 20;
    std::uint32_t rx_packet_cycles = 20;
    bool control_program = false;  // every step's cycles on one processor (a LANai-class NIC)
    std::uint32_t tx_engines = 1;  // packet engines side by side; a QP's go through engine QPN mod this
    std::uint32_t rx_engines = 1;
    std::uint32_t tx_buffer_bytes = 65536;
    std::uint32_t rx_buffer_bytes = 16384;
    std::uint32_t ack_coalesce = 16;
    std::uint32_t cqe_cycles = 4;
    bool blueflame = true;
    std::uint32_t blueflame_max_bytes = 256;
    bool blueflame_any_wqe = false;  // also WQEs with gather entries (mlx5), not only inline/READ (mlx4)
    // Device capabilities reported by query_device.
    std::uint32_t max_qp = 65536;
    std::uint32_t max_qp_wr = 16384;
    std::uint32_t max_sge = 32;
    std::uint32_t max_cq = 65536;
    std::uint32_t max_cqe = 4194303;
    std::uint32_t max_mr = 524288;
    std::uint32_t max_pd = 32768;
    std::uint32_t max_srq = 65472;
    std::uint32_t max_srq_wr = 16383;
    std::uint32_t max_srq_sge = 31;
    std::uint32_t max_inline = 256;
    std::uint32_t max_qp_rd_atom = 16;
    std::uint64_t max_mr_size = 1ull << 40;
    // VI mode (KVIPL).
    std::uint32_t desc_parse_cycles = 8;
    std::uint32_t vi_fetch_depth = 4;          // descriptor fetches in flight per VI queue
    std::uint32_t vi_max_descriptors = 1024;   // MaxDescriptorsPerQueue
    std::uint32_t vi_max_segments = 252;       // MaxSegmentsPerDesc
    std::uint32_t vi_max_transfer = 1u << 20;  // MaxTransferSize
    std::uint32_t vi_max_ptags = 1024;         // MaxPtags
    bool vi_rdma_read = true;                  // RDMAReadSupport

    static HcaParams from(const sim::Config& c);
};

void declare_hca_params(sim::ParamRegistry& r);

}  // namespace hcasim::hca
