#include "model/hca/hca_params.hpp"

namespace hcasim::hca {

void declare_hca_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    // The adapter's clocks, pipeline, caches and engines: each node may have
    // its own. Its device limits (hca.max_*, the VI attributes) are one for
    // every node, as programs and workloads size their queues by them.
    auto cyc = [&](const char* key, const char* def, const char* doc, const char* src) {
        r.add_per_node({key, K::Int, "cycles", def, 0, 100000, {}, doc, src});
    };
    r.add_per_node({"hca.core_clock_mhz", K::Real, "MHz", "500", 50, 5000, {}, "adapter core clock (all hca.* cycle counts; completion timestamps count its cycles)",
           "estimate for a 40 nm-class HCA ASIC; see docs/timing-parameters.md"});
    r.add_per_node({"hca.datapath_bytes", K::Int, "bytes", "32", 4, 256, {"4", "8", "16", "32", "64", "128", "256"},
           "width of the packet datapath (bytes per core cycle)",
           "256-bit datapath: 16 GB/s at 500 MHz, above the 6.8 GB/s of FDR 4x"});
    cyc("hca.doorbell_cycles", "4", "doorbell register write to QP scheduler", "estimate: a register write and a queue push");
    cyc("hca.qpc_read_cycles", "0",
        "a block's read of a QP or CQ context that hits the on-chip context cache, beyond the pipeline stage "
        "that needs it (a miss reads the entry from host memory over PCIe)",
        "assumption: a cached context is read within the stage's own cycles (hca.rx_packet_cycles, "
        "hca.doorbell_cycles, ...); raise it to model a slower context store");
    r.add_per_node({"hca.qpc_cache_entries", K::Int, "entries", "68", 1, 1 << 24, {},
           "on-chip cache of QP contexts (LRU; a miss DMA-reads the 256 B entry from ICM in host memory, an "
           "evicted entry the adapter changed is written back first)",
           "inferred: where the ConnectX-3 READ rate of the FaSST READ swarm falls with the QPs per machine "
           "(full at 40, falling by 80, a quarter at 120: reference points cx3-fdr.swarm_read.*); no cache size "
           "is published, and the count is the adapter's effective one, not necessarily a power of two "
           "(docs/timing-parameters.md)"});
    r.add_per_node({"hca.cqc_cache_entries", K::Int, "entries", "68", 1, 1 << 24, {},
           "on-chip cache of CQ contexts (LRU; a miss DMA-reads the 64 B entry from ICM)",
           "inferred with hca.qpc_cache_entries from the same swarm, whose QPs have a CQ each"});
    r.add_per_node({"hca.context_fill_slots", K::Int, "reads", "8", 1, 256, {},
           "context cache misses each cache (QP, CQ) has under way at once; a further miss waits for a slot",
           "estimate: a few miss-handling registers, as in a blocking-light cache; no figure is published"});
    r.add_per_node({"hca.atomic_units", K::Int, "atomics", "1", 0, 256, {},
           "atomics the responder executes at once: each holds a unit from its DMA read until the original value "
           "is on chip and its write is issued, and a further atomic waits for a unit; 0: no limit (atomics on "
           "the same bytes still wait for each other's write)",
           "inferred: a ConnectX-3 runs fetch-and-adds on one QP, 64 addresses in turn, at about one per DMA read "
           "round trip (reference point cx3-fdr.atomic_rate.8B.qdr); no figure is published"});
    cyc("hca.scheduler_cycles", "2", "QP scheduler arbitration per decision", "estimate: one round-robin arbiter");
    cyc("hca.wqe_parse_cycles", "8", "parse one fetched WQE", "estimate: one 64 B WQE over a 256-bit datapath plus decode");
    r.add_per_node({"hca.wqe_fetch_batch", K::Int, "WQEs", "8", 1, 256, {},
           "most WQEs one fetch DMA reads", "Connect-IB and later fetch all new WQEs in one DMA (calibration-facts)"});
    r.add_per_node({"hca.rq_prefetch_depth", K::Int, "WQEs", "16", 1, 256, {},
           "receive WQEs prefetched on chip per QP", "estimate"});
    r.add_per_node({"hca.srq_prefetch_depth", K::Int, "WQEs", "16", 1, 256, {},
           "receive WQEs the SRQ engine keeps on chip per shared receive queue", "estimate: as hca.rq_prefetch_depth"});
    cyc("hca.translation_cycles", "4",
        "MPT/MTT cache hit: key check and address translation; also each MPT entry a memory window bind or "
        "invalidate reads or writes", "estimate");
    r.add_per_node({"hca.mpt_cache_entries", K::Int, "entries", "256", 1, 1 << 20, {},
           "on-chip cache of memory protection table entries (a miss DMA-reads the 64 B entry)", "estimate"});
    r.add_per_node({"hca.mtt_cache_entries", K::Int, "entries", "2048", 1, 1 << 24, {},
           "on-chip cache of page translations (a miss DMA-reads the 8 B entry)", "estimate"});
    cyc("hca.dma_setup_cycles", "4", "DMA engine per-request setup", "estimate");
    // The DMA engine implementation (docs/architecture.md, "The DMA engine in RTL").
    r.add_per_node({"hca.dma.impl", K::Choice, "", "systemc", 0, 0, {"systemc", "rtl", "tlm"},
           "DMA engine: systemc = the SystemC model, rtl = the Verilog engine of rtl/ clocked under Verilator "
           "(tlm, the SystemC model's former name, is still accepted)",
           "systemc: the faster reference; rtl for verification runs"});
    r.add_per_node({"hca.dma.rtl_channels", K::Int, "engines", "8", 1, 64, {},
           "hca.dma.impl=rtl: instances of the RTL engine; a request takes the first one free at its issue time "
           "and waits for the earliest one otherwise",
           "estimate: enough for the transmit, receive, WQE and CQE streams of a busy port to overlap"});
    r.add({"hca.dma.vcd", K::Text, "", "", 0, 0, {},
           "hca.dma.impl=rtl: VCD waveform file of the RTL engine (one file per engine instance, see README); "
           "empty: none", "-"});
    cyc("hca.tx_packet_cycles", "20", "TX transport per-packet header build, plus payload at datapath width",
        "inferred: the ConnectX-3 READ swarm at 40 QPs, where every context hits and the packet engines bind "
        "(docs/timing-parameters.md, docs/calibration.md item 7)");
    cyc("hca.rx_packet_cycles", "20", "RX transport per-packet parse and checks, plus payload at datapath width",
        "inferred: as hca.tx_packet_cycles");
    r.add_per_node({"hca.tx_engines", K::Int, "engines", "1", 1, 64, {},
           "transmit packet engines working side by side, each a full pass (hca.tx_packet_cycles plus payload "
           "at hca.datapath_bytes); a QP's packets and ACKs all go through engine QPN mod this, in order",
           "estimate: one pipeline; no engine count is published (docs/timing-parameters.md)"});
    r.add_per_node({"hca.rx_engines", K::Int, "engines", "1", 1, 64, {},
           "receive packet engines working side by side, each a full pass (hca.rx_packet_cycles plus payload "
           "at hca.datapath_bytes); a packet goes to engine destination QPN mod this, so a QP's packets stay "
           "in order",
           "estimate: as hca.tx_engines"});
    r.add_per_node({"hca.control_program", K::Bool, "", "false", 0, 0, {},
           "the adapter's steps (doorbell, scheduling, WQE or descriptor parse, translation, DMA setup, the "
           "packet engines' passes, completions) are a control program on one embedded processor, so each waits "
           "for the others; false: each step is a hardware block of its own, working side by side",
           "Myricom PCI64B/PCI64C specifications: the LANai executes the Myrinet control program, a DMA "
           "controller moves the data; ConnectX-class adapters: hardware pipelines"});
    r.add_per_node({"hca.tx_buffer_bytes", K::Int, "bytes", "65536", 4096, 1 << 26, {},
           "transmit packet buffer: packets gathered but not yet serialised", "estimate"});
    r.add_per_node({"hca.rx_buffer_bytes", K::Int, "bytes", "16384", 0, 1 << 26, {},
           "receive buffer between the port and the PCIe writes: how far received payload may run ahead of "
           "host memory before the RX pipeline stalls", "estimate"});
    r.add_per_node({"hca.ack_coalesce", K::Int, "packets", "16", 1, 4096, {},
           "responder sends an ACK at least every N packets (and on every AckReq)", "estimate"});
    cyc("hca.cqe_cycles", "4", "completion engine per CQE", "estimate");
    r.add_per_node({"hca.blueflame", K::Bool, "", "true", 0, 0, {},
           "driver writes a lone small WQE through write-combined MMIO instead of ringing a doorbell",
           "Mellanox BlueFlame (calibration-facts: how adapters post work)"});
    r.add_per_node({"hca.blueflame_max_bytes", K::Int, "bytes", "256", 64, 4096, {"64", "128", "256", "512", "1024", "2048", "4096"},
           "largest WQE sent by BlueFlame", "half of the mlx4 512 B BlueFlame register"});
    r.add_per_node({"hca.blueflame_any_wqe", K::Bool, "", "false", 0, 0, {},
           "with hca.blueflame, a lone WQE whose payload the adapter still has to DMA-read (gather entries) "
           "goes by BlueFlame too; false: only one with inline data, an RDMA READ or a WRITE without gather "
           "entries, the others ring the doorbell and the adapter fetches them",
           "rdma-core mlx4 provider (ConnectX-3): BlueFlame only for such WQEs; mlx5 provider (ConnectX-4 on): "
           "any lone WQE unless MLX5_POST_SEND_PREFER_BF=0"});
    auto cap = [&](const char* key, const char* def, double max, const char* doc) {
        r.add({key, K::Int, "count", def, 1, max, {}, doc, "ConnectX-3 ibv_devinfo -v values"});
    };
    cap("hca.max_qp", "65536", 1 << 24, "queue pairs");
    cap("hca.max_qp_wr", "16384", 65536, "work requests per queue");
    cap("hca.max_sge", "32", 255, "scatter/gather entries per work request");
    cap("hca.max_cq", "65536", 1 << 24, "completion queues");
    cap("hca.max_cqe", "4194303", 1 << 24, "entries per completion queue");
    cap("hca.max_mr", "524288", 1 << 24, "memory regions");
    cap("hca.max_pd", "32768", 1 << 24, "protection domains");
    cap("hca.max_srq", "65472", 1 << 24, "shared receive queues");
    cap("hca.max_srq_wr", "16383", 65535, "work requests per shared receive queue");
    cap("hca.max_srq_sge", "31", 255, "scatter/gather entries per shared receive queue work request");
    r.add({"hca.max_inline", K::Int, "bytes", "256", 0, 1024, {}, "largest inline payload",
           "the BlueFlame WQE budget"});
    cap("hca.max_qp_rd_atom", "16", 255, "outstanding RDMA reads per QP");
    r.add_per_node({"hca.desc_parse_cycles", K::Int, "cycles", "8", 0, 100000, {},
           "VI descriptor engine: decode one fetched descriptor (control, address and data segments)",
           "as hca.wqe_parse_cycles: a VI descriptor is decoded by the same kind of logic as a WQE"});
    r.add_per_node({"hca.vi_fetch_depth", K::Int, "descriptors", "4", 1, 64, {},
           "VI descriptor fetches one work queue may have in flight (1: strictly one after the other)",
           "estimate: the doorbell carries each descriptor's address, so fetches can overlap; 1 models a VI NIC that "
           "walks the chain one descriptor at a time"});
    r.add({"hca.vi_max_descriptors", K::Int, "descriptors", "1024", 1, 65536, {},
           "MaxDescriptorsPerQueue: posted, not yet completed descriptors per VI work queue (more is a VI overrun)",
           "the doorbell FIFO depth; 1024 as VI NICs of the time (cLAN, ServerNet II) reported"});
    r.add({"hca.vi_max_segments", K::Int, "segments", "252", 1, 4096, {},
           "MaxSegmentsPerDesc: address + data segments of one VI descriptor",
           "a 4 KiB descriptor: (4096 - 64) / 16"});
    r.add({"hca.vi_max_transfer", K::Int, "bytes", "1048576", 1, 2147483648.0, {},
           "MaxTransferSize: largest VI transfer the NIC accepts",
           "estimate: larger than any VI NIC of 1999 (64 KiB) so IB-class transfers fit"});
    r.add({"hca.vi_max_ptags", K::Int, "count", "1024", 1, 1 << 24, {}, "MaxPtags: protection tags per NIC",
           "estimate"});
    r.add({"hca.vi_rdma_read", K::Bool, "", "true", 0, 0, {}, "RDMAReadSupport: the NIC executes VI RDMA reads",
           "the IB transport supports RDMA READ"});
    sim::ParamSpec cat{"fault.catastrophic", sim::ParamSpec::Kind::Text, "", "", 0, 0, {},
                       "nodeN@TIME (ns, us, ms or s): node N's adapter fails catastrophically then: every QP to the "
                       "error state, IBV_EVENT_DEVICE_FATAL; repeatable",
                       "fault injection: none by default"};
    cat.list = true;
    r.add(cat);
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 20, "hca", declare_hca_params};

HcaParams HcaParams::from(const sim::Config& c) {
    HcaParams p;
    auto u = [&](const char* k) { return static_cast<std::uint32_t>(c.get_int(k)); };
    p.core_clock_mhz = c.get_real("hca.core_clock_mhz");
    p.datapath_bytes = u("hca.datapath_bytes");
    p.doorbell_cycles = u("hca.doorbell_cycles");
    p.qpc_read_cycles = u("hca.qpc_read_cycles");
    p.scheduler_cycles = u("hca.scheduler_cycles");
    p.wqe_parse_cycles = u("hca.wqe_parse_cycles");
    p.wqe_fetch_batch = u("hca.wqe_fetch_batch");
    p.rq_prefetch_depth = u("hca.rq_prefetch_depth");
    p.srq_prefetch_depth = u("hca.srq_prefetch_depth");
    p.translation_cycles = u("hca.translation_cycles");
    p.mpt_cache_entries = u("hca.mpt_cache_entries");
    p.mtt_cache_entries = u("hca.mtt_cache_entries");
    p.qpc_cache_entries = u("hca.qpc_cache_entries");
    p.cqc_cache_entries = u("hca.cqc_cache_entries");
    p.context_fill_slots = u("hca.context_fill_slots");
    p.atomic_units = u("hca.atomic_units");
    p.dma_setup_cycles = u("hca.dma_setup_cycles");
    const std::string& dma_impl = c.get_choice("hca.dma.impl");
    p.dma_impl = dma_impl == "tlm" ? "systemc" : dma_impl;  // tlm: the former name
    p.dma_rtl_channels = u("hca.dma.rtl_channels");
    p.dma_vcd = c.get_text("hca.dma.vcd");
    p.tx_packet_cycles = u("hca.tx_packet_cycles");
    p.rx_packet_cycles = u("hca.rx_packet_cycles");
    p.tx_engines = u("hca.tx_engines");
    p.rx_engines = u("hca.rx_engines");
    p.control_program = c.get_bool("hca.control_program");
    p.tx_buffer_bytes = u("hca.tx_buffer_bytes");
    p.rx_buffer_bytes = u("hca.rx_buffer_bytes");
    p.ack_coalesce = u("hca.ack_coalesce");
    p.cqe_cycles = u("hca.cqe_cycles");
    p.blueflame = c.get_bool("hca.blueflame");
    p.blueflame_max_bytes = u("hca.blueflame_max_bytes");
    p.blueflame_any_wqe = c.get_bool("hca.blueflame_any_wqe");
    p.max_qp = u("hca.max_qp");
    p.max_qp_wr = u("hca.max_qp_wr");
    p.max_sge = u("hca.max_sge");
    p.max_cq = u("hca.max_cq");
    p.max_cqe = u("hca.max_cqe");
    p.max_mr = u("hca.max_mr");
    p.max_pd = u("hca.max_pd");
    p.max_srq = u("hca.max_srq");
    p.max_srq_wr = u("hca.max_srq_wr");
    p.max_srq_sge = u("hca.max_srq_sge");
    p.max_inline = u("hca.max_inline");
    p.max_qp_rd_atom = u("hca.max_qp_rd_atom");
    p.desc_parse_cycles = u("hca.desc_parse_cycles");
    p.vi_fetch_depth = u("hca.vi_fetch_depth");
    p.vi_max_descriptors = u("hca.vi_max_descriptors");
    p.vi_max_segments = u("hca.vi_max_segments");
    p.vi_max_transfer = static_cast<std::uint32_t>(c.get_int("hca.vi_max_transfer"));
    p.vi_max_ptags = u("hca.vi_max_ptags");
    p.vi_rdma_read = c.get_bool("hca.vi_rdma_read");
    return p;
}

}  // namespace hcasim::hca
