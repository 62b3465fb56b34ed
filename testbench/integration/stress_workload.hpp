// The data-integrity stress workload ("Correctness first", section 6), for
// RC, UC and UD queue pairs.
//
// Everything a run does is planned up front from one seed (SplitMix64), so a
// failing seed replays exactly: how many QPs and in which directions they
// carry traffic, the send queue depth, max_inline_data, and per message the
// opcode (WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM), size (1 B up to the
// shape's maximum), 1-4 source SGEs at random offsets, the destination (a
// random offset of the peer's region for WRITEs, 1-4 receive SGEs for
// SENDs), inline or not, signaled or not, and which WRs go out together in
// one ibv_post_send chain. Both nodes run the same program; each plays the
// sender of its own streams and the receiver of its peer's.
//
// What is checked: every completion (per QP wr_id order of signaled sends and
// of receives, status, opcode, byte_len, imm_data and IBV_WC_WITH_IMM,
// qp_num), that nothing is lost or completed twice, and every byte of every
// registered region at the end: payloads where the plan put them, the
// background fill everywhere else (the guard bytes around every area, the
// unused tail of receive buffers, the receive buffers a WRITE_WITH_IMM
// consumed without touching).
//
// A stalled QP never hangs a test: when no completion arrives for a while
// (simulated time) the programs stop and report what is missing.
//
// UC and UD (Shape::qp_type) plan the same way with what their transports
// allow, and seeds of an RC shape plan exactly as before. Neither has
// receiver-not-ready: every receive is posted before the peer sends for it
// (all up front, or in phases the sender waits for), so on this lossless
// fabric a message that does not arrive is a failure, as is any message the
// responder counts as dropped. UC: WRITE, WRITE_WITH_IMM, SEND and
// SEND_WITH_IMM of 0 B up to Shape::max_size, path MTU as for RC. UD: SEND
// and SEND_WITH_IMM of 0 B up to the MTU (the plan's MTU is the port's,
// port.max_mtu), QP i to the peer's QP i through one address handle, each QP
// pair with its own Q_Key, which some WRs name by the high-order bit rule (a
// remote Q_Key with bit 31 set means the sending QP's own); receive buffers
// hold the 40-byte GRH area first, then the payload, and the completion must
// report src_qp, slid and byte_len = 40 + size. Shape::global puts a GRH on
// every packet (the path through GID index 0 or 1): UD completions must then
// carry IBV_WC_GRH and the GRH area a GRH from the peer's GID to ours, else
// stay untouched.
//
// Shape::reads_atomics (RC) turns some messages into RDMA READs of a
// pattern the peer holds, scattered over 1-4 pieces, and atomics on one
// 8-byte cell per stream in the peer's region; planned in order, every
// atomic's original value is known. Some WRs carry IBV_SEND_FENCE, and
// max_rd_atomic is 1 to 16. When a completion retires WRs, what their READs
// and atomics fetched must already be in the sender's memory. Some fenced
// SENDs and WRITEs carry what an earlier READ brought in, from the very
// pieces it scattered to: without the fence they would send what was there
// before.
//
// Shape::extended_verbs creates the QPs with ibv_create_qp_ex and the CQs
// with ibv_create_cq_ex; the node's random stream then posts each chain by
// the ibv_wr_* calls or by ibv_post_send, and polls by ibv_start_poll /
// ibv_next_poll or by ibv_poll_cq, with the same checks.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testbench/integration/harness.hpp"
#include "testbench/integration/stress_seeds.hpp"

namespace hcasim::test::stress {

inline constexpr std::uint32_t KiB = 1024;

// What a test case fixes; the seed picks everything else.
struct Shape {
    std::string dma = "systemc";            // hca.dma.impl
    int rnr_retry = 7;                      // 0: every receive is posted before the peer sends for it
    int min_qps = 4, max_qps = 8;
    int min_msgs = 16, max_msgs = 40;       // per QP and direction
    std::uint32_t max_size = 256 * KiB;
    bool both_directions = true;            // seeds may also send from node 1 to node 0
    ibv_qp_type qp_type = IBV_QPT_RC;       // RC, UC or UD (UC and UD ignore rnr_retry: no RNR)
    bool global = false;                    // UC and UD: a GRH on every packet
    Overrides extra;                        // more configuration (fault injection)
    int timeout = 14;                       // RC local ACK timeout exponent (4.096 us << timeout)
    bool extended_verbs = false;            // also post with ibv_wr_* and poll with ibv_start_poll
    bool reads_atomics = false;             // RC: RDMA READs, fetch-and-adds and compare-and-swaps too
    bool unlike_nodes = false;              // each node its own bus, adapter and host costs, drawn per seed
};

inline const char* qp_type_name(ibv_qp_type t) { return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : "UD"; }

// Bytes a UD receive buffer holds ahead of the payload, for the GRH.
inline constexpr std::uint32_t kGrhArea = 40;

enum class Op { Write, WriteImm, Send, SendImm, Read, FetchAdd, CmpSwap };

inline const char* op_name(Op op) {
    switch (op) {
    case Op::Write: return "WRITE";
    case Op::WriteImm: return "WRITE_WITH_IMM";
    case Op::Send: return "SEND";
    case Op::SendImm: return "SEND_WITH_IMM";
    case Op::Read: return "READ";
    case Op::FetchAdd: return "FETCH_AND_ADD";
    case Op::CmpSwap: return "COMPARE_AND_SWAP";
    }
    return "?";
}
inline bool has_imm(Op op) { return op == Op::WriteImm || op == Op::SendImm; }
inline bool consumes_recv(Op op) { return op == Op::WriteImm || op == Op::Send || op == Op::SendImm; }
inline bool is_write(Op op) { return op == Op::Write || op == Op::WriteImm; }
inline bool is_atomic(Op op) { return op == Op::FetchAdd || op == Op::CmpSwap; }
// READs and atomics: the sender's pieces are where the answer lands, and
// Msg::dst is in the receiver's region what is read or operated on.
inline bool is_fetch(Op op) { return op == Op::Read || is_atomic(op); }
// WRITEs and READs: Msg::dst is the peer's area the WR names (wr.rdma).
inline bool is_rdma(Op op) { return is_write(op) || op == Op::Read; }

struct Area {
    std::size_t off;  // in the region
    std::uint32_t len;
};

struct Msg {
    Op op = Op::Send;
    std::uint32_t size = 0;
    std::vector<Area> src;   // pieces of the sender's region, in payload order
    Area dst{0, 0};          // WRITEs: where the payload lands in the receiver's region
    int recv = -1;           // the receive it consumes (index in Stream::recvs)
    bool inline_data = false;
    bool signaled = false;
    int chain = 0;           // > 0 on the first WR of a post: WRs in that ibv_post_send
    std::uint32_t imm = 0;
    std::uint64_t pattern = 0;  // seed of the payload bytes
    bool own_qkey = false;      // UD: remote_qkey with bit 31 set (the sending QP's own Q_Key)
    bool fence = false;         // IBV_SEND_FENCE
    int echo = -1;              // a fenced SEND or WRITE of what message echo READ brought in
    std::uint64_t compare_add = 0, swap = 0;  // atomics: the WR's operands
    std::uint64_t original = 0;               // atomics: the value it must return
};

struct Recv {
    std::vector<Area> sges;  // receive buffer pieces in the receiver's region
    int msg = -1;            // the message that consumes it
    int phase = 0;           // Phased: posted once every receive of the phase before has completed
};

// When the receiver posts its receives.
enum class RecvMode {
    UpFront,  // all before the peer starts sending
    Trickle,  // a few ahead, replenished as they complete (RNR NAKs are legitimate: rnr_retry 7 only)
    Phased,   // in phases: the next once the last has completed, and the sender told (like put/get,
              // in no simulated time); the sender holds back messages whose receive is not posted yet
};

// The messages one node sends on one QP, and the receives its peer posts.
struct Stream {
    int from = 0;  // sending node
    int qp = 0;
    std::vector<Msg> msgs;
    std::vector<Recv> recvs;
    Area cell{0, 0};  // reads_atomics: the 8 bytes in the receiver's region its atomics work on
    std::uint64_t cell_first = 0, cell_last = 0;  // the cell's value before and after them
    std::size_t src_bytes = 0, dst_bytes = 0;  // region sizes
    RecvMode mode = RecvMode::UpFront;
    int window = 0;                // Trickle: receives kept posted ahead
    std::vector<int> phase_end;    // Phased: receives posted once phase p is (index of the first not posted)
};

struct Plan {
    std::uint64_t seed = 0;
    Shape shape;
    int qps = 0;
    bool both = false;
    std::uint32_t sq_depth = 0;
    std::uint32_t max_inline = 0;
    std::uint32_t psn[2] = {};
    ibv_mtu mtu = IBV_MTU_4096;    // UD: the port's MTU (port.max_mtu)
    std::uint8_t sgid_index = 0;   // global: the GID index of the path
    std::vector<std::uint32_t> qkey;  // UD: the Q_Key of each QP pair
    std::uint8_t rd_atomic = 16;      // max_rd_atomic and max_dest_rd_atomic
    Overrides node_hardware;          // unlike_nodes: each node's own values (nodeN.KEY)
    std::vector<Stream> streams;

    ibv_qp_type type() const { return shape.qp_type; }
    bool fetches() const { return shape.reads_atomics && type() == IBV_QPT_RC; }  // READs and atomics planned
    std::uint32_t mtu_bytes() const { return 128u << static_cast<int>(mtu); }

    std::size_t messages() const {
        std::size_t n = 0;
        for (const auto& s : streams) n += s.msgs.size();
        return n;
    }
    std::uint64_t bytes() const {
        std::uint64_t n = 0;
        for (const auto& s : streams)
            for (const auto& m : s.msgs) n += m.size;
        return n;
    }
    std::string describe() const {
        std::ostringstream os;
        os << "seed " << seed << " (";
        if (type() != IBV_QPT_RC)
            os << qp_type_name(type()) << (shape.global ? " with a GRH (GID index " + std::to_string(sgid_index) + ")" : "")
               << ", ";
        os << "dma " << shape.dma;
        if (type() == IBV_QPT_RC) os << ", rnr_retry " << shape.rnr_retry;
        if (shape.extended_verbs) os << ", extended verbs";
        if (shape.reads_atomics) os << ", READs and atomics, max_rd_atomic " << int(rd_atomic);
        os << ", " << qps << " QPs, "
           << (both ? "both directions" : "node 0 to node 1") << ", MTU " << (128 << mtu) << ", sq depth " << sq_depth
           << ", max_inline " << max_inline << ", " << messages() << " messages, " << bytes() << " B";
        for (const auto& [key, value] : node_hardware) os << ", " << key << "=" << value;
        os << ")";
        return os.str();
    }
    // Every message of every stream, one a line (HCASIM_STRESS_DUMP=1).
    std::string dump() const;
};

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) { return SplitMix64{a * 0x9e3779b97f4a7c15ull ^ b}.next(); }

// Sizes spread over every scale: a third small enough to go inline.
inline std::uint32_t draw_size(SplitMix64& r, std::uint32_t max) {
    const std::uint64_t c = r.below(100);
    std::uint64_t v;
    if (c < 30) v = r.range(1, 256);
    else if (c < 55) v = r.range(257, 4096 + 64);
    else if (c < 85) v = r.range(4096 + 65, 64 * KiB);
    else v = r.range(64 * KiB + 1, 256 * KiB);
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, max));
}

// UD: 0 B up to one MTU, with the edges (empty, one MTU) drawn often.
inline std::uint32_t draw_datagram_size(SplitMix64& r, std::uint32_t mtu) {
    const std::uint64_t c = r.below(100);
    if (c < 8) return 0;
    if (c < 18) return mtu;
    if (c < 45) return static_cast<std::uint32_t>(r.range(1, std::min<std::uint32_t>(64, mtu)));
    return static_cast<std::uint32_t>(r.range(1, mtu));
}

// n lengths >= 1 that add up to total (n <= total).
inline std::vector<std::uint32_t> split(SplitMix64& r, std::uint32_t total, int n) {
    std::vector<std::uint32_t> cuts;
    while (static_cast<int>(cuts.size()) < n - 1) {
        const auto c = static_cast<std::uint32_t>(r.range(1, total - 1));
        if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::uint32_t> out;
    std::uint32_t prev = 0;
    for (auto c : cuts) {
        out.push_back(c - prev);
        prev = c;
    }
    out.push_back(total - prev);
    return out;
}

// Lays areas out one after the other with random gaps: random alignments,
// page crossings, and at least kGuard bytes of untouched background between.
inline constexpr std::size_t kGuard = 64;
inline Area place(SplitMix64& r, std::size_t& cursor, std::uint32_t len) {
    cursor += kGuard + r.below(r.chance(20) ? 8192 : 512);
    const Area a{cursor, len};
    cursor += len;
    return a;
}

// The same on an 8-byte boundary, as atomics need.
inline Area place_aligned(SplitMix64& r, std::size_t& cursor, std::uint32_t len) {
    cursor = (cursor + kGuard + r.below(512) + 7) & ~std::size_t(7);
    const Area a{cursor, len};
    cursor += len;
    return a;
}

inline std::vector<Area> place_pieces(SplitMix64& r, std::size_t& cursor, std::uint32_t total, int n) {
    std::vector<Area> out;
    for (std::uint32_t len : split(r, total, std::min<int>(n, static_cast<int>(total)))) out.push_back(place(r, cursor, len));
    return out;
}

// Hardware of its own for each node, from stream r: its PCIe link and host
// memory, its adapter's clock, datapath, engines, caches, prefetch, buffers,
// ACK coalescing, BlueFlame rule, atomic units and DMA engine (the RTL one
// time in eight), its port and its host's CPU costs. The two ends of a QP
// then run at different paces and fill, miss and stall at different points.
inline Overrides draw_node_hardware(SplitMix64& r) {
    struct Choice {
        const char* key;
        std::vector<const char*> values;
    };
    static const std::vector<Choice> choices = {
        {"pcie.gen", {"2", "3", "4"}},
        {"pcie.lanes", {"2", "4", "8", "16"}},
        {"pcie.mps", {"128", "256", "512"}},
        {"pcie.mrrs", {"128", "512", "4096"}},
        {"pcie.read_tags", {"2", "8", "32"}},
        {"pcie.rcb", {"64", "128"}},
        {"pcie.core_latency_cycles", {"10", "30", "200"}},
        {"host.memory_latency_ns", {"50", "100", "400"}},
        {"hca.core_clock_mhz", {"200", "500", "1000"}},
        {"hca.datapath_bytes", {"8", "32", "128"}},
        {"hca.tx_engines", {"1", "2", "4"}},
        {"hca.rx_engines", {"1", "3"}},
        {"hca.qpc_cache_entries", {"2", "8", "68"}},
        {"hca.cqc_cache_entries", {"1", "4", "68"}},
        {"hca.context_fill_slots", {"1", "8"}},
        {"hca.wqe_fetch_batch", {"1", "4", "8"}},
        {"hca.rq_prefetch_depth", {"1", "4", "16"}},
        {"hca.mpt_cache_entries", {"1", "256"}},
        {"hca.mtt_cache_entries", {"1", "2048"}},
        {"hca.tx_buffer_bytes", {"8192", "65536"}},
        {"hca.rx_buffer_bytes", {"4096", "16384", "65536"}},
        {"hca.ack_coalesce", {"1", "4", "16"}},
        {"hca.blueflame", {"true", "false"}},
        {"hca.blueflame_any_wqe", {"true", "false"}},
        {"hca.atomic_units", {"0", "1", "4"}},
        {"hca.dma.impl", {"systemc", "systemc", "systemc", "systemc", "systemc", "systemc", "systemc", "rtl"}},
        {"port.vl_buffer_bytes", {"8192", "65536"}},
        {"port.phy_latency_ns", {"5", "25", "200"}},
        {"host.cpu.post_send_ns", {"10", "60", "500"}},
        {"host.cpu.mmio_store_ns", {"0", "135"}},
        {"host.cpu.poll_cq_ns", {"5", "25"}},
    };
    Overrides o;
    for (int node = 0; node < 2; ++node)
        for (const auto& c : choices)
            o.emplace_back("node" + std::to_string(node) + "." + c.key, c.values[r.below(c.values.size())]);
    return o;
}

// A parallel PCI bus for a node one time in four, from stream r (the bus of
// the VI NIC presets, at their 64-bit/66 MHz or at 32-bit/33 MHz): a shared
// bus without split transactions beside its peer's PCIe, so one end of a QP
// waits on bus arbitration and the other on PCIe credits and tags.
inline Overrides draw_node_buses(SplitMix64& r) {
    Overrides o;
    for (int node = 0; node < 2; ++node) {
        const std::string n = "node" + std::to_string(node) + ".";
        if (!r.chance(25)) continue;
        o.emplace_back(n + "host.bus", "pci");
        o.emplace_back(n + "pci.width_bits", r.chance(50) ? "64" : "32");
        o.emplace_back(n + "pci.clock_mhz", r.chance(50) ? "66" : "33");
    }
    return o;
}

inline Plan make_plan(std::uint64_t seed, const Shape& shape) {
    Plan p;
    p.seed = seed;
    p.shape = shape;
    SplitMix64 r{mix(seed, 1)};
    p.qps = static_cast<int>(r.range(static_cast<std::uint64_t>(shape.min_qps), static_cast<std::uint64_t>(shape.max_qps)));
    p.both = shape.both_directions && r.chance(40);
    static const std::uint32_t depths[] = {8, 16, 32, 64};
    p.sq_depth = depths[r.below(4)];
    static const std::uint32_t inlines[] = {0, 64, 128, 220, 256};
    p.max_inline = inlines[r.below(5)];
    for (auto& psn : p.psn) psn = static_cast<std::uint32_t>(r.chance(25) ? 0xffffff - r.below(64) : r.below(1u << 24));
    static const ibv_mtu mtus[] = {IBV_MTU_4096, IBV_MTU_4096, IBV_MTU_2048, IBV_MTU_1024, IBV_MTU_256};
    p.mtu = mtus[r.below(5)];
    const bool rc = shape.qp_type == IBV_QPT_RC, ud = shape.qp_type == IBV_QPT_UD;
    const bool fetches = p.fetches();
    if (fetches) {
        static const std::uint8_t depths[] = {1, 2, 4, 8, 16};
        p.rd_atomic = depths[SplitMix64{mix(seed, 3)}.below(5)];
    }
    if (shape.unlike_nodes) {
        SplitMix64 h{mix(seed, 4)};
        p.node_hardware = draw_node_hardware(h);
        // Drawn apart, so that the other keys are drawn as they always were.
        SplitMix64 b{mix(seed, 5)};
        const Overrides buses = draw_node_buses(b);
        p.node_hardware.insert(p.node_hardware.end(), buses.begin(), buses.end());
        // The RTL DMA engine speaks PCIe: a node on PCI keeps the SystemC one.
        for (const auto& [key, value] : buses)
            if (value == "pci")
                for (auto& [k, v] : p.node_hardware)
                    if (k == key.substr(0, key.find('.') + 1) + "hca.dma.impl") v = "systemc";
        // One node in four runs its steps as a control program on one
        // processor, as a LANai-class NIC does.
        SplitMix64 c{mix(seed, 6)};
        for (int node = 0; node < 2; ++node)
            if (c.chance(25)) p.node_hardware.emplace_back("node" + std::to_string(node) + ".hca.control_program", "true");
    }
    if (!rc) {
        // Drawn apart, so that RC seeds plan what they always did.
        SplitMix64 x{mix(seed, 2)};
        p.sgid_index = static_cast<std::uint8_t>(x.below(2));
        for (int q = 0; q < p.qps; ++q) p.qkey.push_back(static_cast<std::uint32_t>(x.next()) & 0x7fffffffu);
    }
    for (int from = 0; from < 2; ++from)
        for (int q = 0; q < p.qps; ++q) {
            if (from == 1 && !(p.both && r.chance(60))) continue;
            SplitMix64 sr{mix(seed, 1000 + static_cast<std::uint64_t>(from * 1000 + q))};
            Stream s;
            s.from = from;
            s.qp = q;
            const int n = static_cast<int>(sr.range(static_cast<std::uint64_t>(shape.min_msgs), static_cast<std::uint64_t>(shape.max_msgs)));
            std::size_t src = 0, dst = 0;
            int since_signal = 0;
            // READs and atomics are drawn apart, so that other shapes plan
            // what they always did.
            SplitMix64 fr{mix(seed, 3000 + static_cast<std::uint64_t>(from * 1000 + q))};
            std::uint64_t cell = 0;
            int last_read = -1;
            if (fetches) {
                s.cell = place_aligned(fr, dst, 8);
                s.cell_first = cell = fr.next();
            }
            for (int j = 0; j < n; ++j) {
                Msg m;
                const std::uint64_t o = sr.below(100);
                m.op = o < 30 ? Op::Write : o < 50 ? Op::WriteImm : o < 80 ? Op::Send : Op::SendImm;
                if (ud) m.op = o < 50 ? Op::Send : Op::SendImm;
                // The stream ends with a SEND: once its receive completes, IB
                // ordering has placed every WRITE before it.
                if (j == n - 1 && is_write(m.op)) m.op = m.op == Op::Write ? Op::Send : Op::SendImm;
                if (fetches) {
                    const std::uint64_t f = fr.below(100);
                    if (j < n - 1 && f < 30) m.op = f < 18 ? Op::Read : f < 24 ? Op::FetchAdd : Op::CmpSwap;
                    m.fence = fr.chance(10);
                }
                if (is_atomic(m.op)) {
                    // The k-th atomic of a stream sees what the ones before
                    // it left: the responder runs them in the QP's order.
                    m.size = 8;
                    m.src = {place_aligned(fr, src, 8)};
                    m.dst = s.cell;
                    m.original = cell;
                    if (m.op == Op::FetchAdd) {
                        m.compare_add = fr.chance(20) ? ~std::uint64_t{0} - fr.below(8) : fr.next();  // wraps too
                        cell += m.compare_add;
                    } else {
                        const bool match = fr.chance(70);
                        m.compare_add = match ? cell : cell ^ (1 + fr.below(0xffff));
                        m.swap = fr.next();
                        if (match) cell = m.swap;
                    }
                } else {
                    m.size = ud ? draw_datagram_size(sr, p.mtu_bytes()) : draw_size(sr, shape.max_size);
                    if (!rc && !ud && sr.chance(4)) m.size = 0;  // UC: empty messages too
                    const int src_sges = static_cast<int>(sr.range(1, 4));
                    if (m.size > 0) m.src = place_pieces(sr, src, m.size, src_sges);
                    m.inline_data = m.size <= p.max_inline && sr.chance(70);
                }
                if (is_fetch(m.op)) m.inline_data = false;  // a READ's or atomic's pieces receive
                m.imm = static_cast<std::uint32_t>(sr.next());
                m.pattern = mix(seed, 0x10000 + static_cast<std::uint64_t>(from) * 0x1000000 + static_cast<std::uint64_t>(q) * 0x10000 + static_cast<std::uint64_t>(j));
                if (fetches && m.op == Op::Read) last_read = j;
                if (fetches && !is_fetch(m.op) && last_read >= 0 && fr.chance(12)) {
                    // Sends on what an earlier READ brings in: only the fence
                    // makes it wait until that is there.
                    const Msg& r = s.msgs[static_cast<std::size_t>(last_read)];
                    m.echo = last_read;
                    m.fence = true;
                    m.inline_data = false;
                    m.size = r.size;
                    m.src = r.src;
                    m.pattern = r.pattern;
                }
                if (is_rdma(m.op)) m.dst = place(sr, dst, m.size);
                if (consumes_recv(m.op)) {
                    Recv rv;
                    rv.msg = j;
                    // A SEND's buffer may be larger than the message; a
                    // WRITE_WITH_IMM's must stay untouched.
                    // A UD one holds the GRH area first.
                    const std::uint32_t cap = m.op == Op::WriteImm ? static_cast<std::uint32_t>(sr.range(1, 4096))
                                                                   : (ud ? kGrhArea : 0) + m.size + (sr.chance(50) ? 0 : static_cast<std::uint32_t>(sr.range(1, 300)));
                    const int recv_sges = static_cast<int>(sr.range(1, 4));
                    if (cap > 0) rv.sges = place_pieces(sr, dst, cap, recv_sges);
                    m.recv = static_cast<int>(s.recvs.size());
                    s.recvs.push_back(rv);
                }
                // Mostly unsignaled; at least every sq_depth/2 WRs and the last
                // one signaled, so the send queue never fills with WRs whose
                // slots cannot be reclaimed.
                ++since_signal;
                m.signaled = sr.chance(12) || since_signal >= static_cast<int>(p.sq_depth / 2) || j == n - 1;
                if (m.signaled) since_signal = 0;
                if (ud) m.own_qkey = sr.chance(30);
                s.msgs.push_back(m);
            }
            s.cell_last = cell;
            // Chains of 2-4 WRs per post; a quarter are lone WRs, which the
            // driver writes by BlueFlame when the WQE is small.
            for (int j = 0; j < n;) {
                int k = sr.chance(25) ? 1 : static_cast<int>(sr.range(2, 4));
                k = std::min(k, n - j);
                s.msgs[static_cast<std::size_t>(j)].chain = k;
                j += k;
            }
            s.src_bytes = src + kGuard + 64;
            s.dst_bytes = dst + kGuard + 64;
            // Trickling relies on RNR NAKs: RC with rnr_retry only.
            const std::uint64_t mode = sr.below(rc && shape.rnr_retry != 0 ? 3 : 2);
            s.mode = mode == 0 ? RecvMode::UpFront : mode == 1 ? RecvMode::Phased : RecvMode::Trickle;
            s.window = static_cast<int>(sr.range(1, 6));
            if (s.mode == RecvMode::Phased) {
                // A phase starts only at a post's first WR: the sender holds
                // back whole chains, and one that straddled two phases would
                // wait for receives that wait for it.
                int ph = 0;
                for (std::size_t i = 0; i < s.recvs.size(); ++i) {
                    if (i > 0 && s.msgs[static_cast<std::size_t>(s.recvs[i].msg)].chain > 0 && sr.chance(35)) {
                        s.phase_end.push_back(static_cast<int>(i));
                        ++ph;
                    }
                    s.recvs[i].phase = ph;
                }
                s.phase_end.push_back(static_cast<int>(s.recvs.size()));
            }
            p.streams.push_back(std::move(s));
        }
    return p;
}

inline std::string Plan::dump() const {
    std::ostringstream os;
    for (const Stream& s : streams) {
        os << "QP " << s.qp << " node " << s.from << " -> " << 1 - s.from << ": " << s.msgs.size() << " messages, "
           << s.recvs.size() << " receives"
           << (s.mode == RecvMode::Trickle ? ", trickled " + std::to_string(s.window) + " ahead"
               : s.mode == RecvMode::Phased ? ", in " + std::to_string(s.phase_end.size()) + " phases"
                                            : "")
           << "\n";
        for (std::size_t j = 0; j < s.msgs.size(); ++j) {
            const Msg& m = s.msgs[j];
            os << "  " << j << (m.chain ? " post " + std::to_string(m.chain) : std::string(7, ' ')) << " " << op_name(m.op)
               << " " << m.size << " B, src";
            for (const Area& a : m.src) os << " " << a.off << "+" << a.len;
            if (is_write(m.op) || is_fetch(m.op)) os << ", dst " << m.dst.off;
            if (is_atomic(m.op)) os << ", operands " << m.compare_add << " " << m.swap << ", returns " << m.original;
            if (m.recv >= 0) {
                os << ", receive " << m.recv << " (phase " << s.recvs[static_cast<std::size_t>(m.recv)].phase << "):";
                for (const Area& a : s.recvs[static_cast<std::size_t>(m.recv)].sges) os << " " << a.off << "+" << a.len;
            }
            os << (m.inline_data ? ", inline" : "") << (m.signaled ? ", signaled" : "") << (m.own_qkey ? ", own Q_Key" : "")
               << (m.fence ? ", fenced" : "") << (m.echo >= 0 ? ", sends what READ " + std::to_string(m.echo) + " read" : "")
               << "\n";
        }
    }
    return os.str();
}

// ---------------------------------------------------------------------------
// The program (both nodes run it).

inline std::uint64_t send_wr_id(int q, int j) { return 0x5000000000000000ull | (std::uint64_t(q) << 32) | std::uint32_t(j); }
inline std::uint64_t recv_wr_id(int q, int r) { return 0x7000000000000000ull | (std::uint64_t(q) << 32) | std::uint32_t(r); }

// A registered region with the image it must hold.
struct Region {
    std::uint8_t* buf = nullptr;
    std::size_t bytes = 0;
    ibv_mr* mr = nullptr;
    std::vector<std::uint8_t> want;

    void init(std::uint64_t seed, int stream, std::size_t n) {
        bytes = (n + 4095) & ~std::size_t(4095);
        buf = static_cast<std::uint8_t*>(std::aligned_alloc(4096, bytes));
        need(buf != nullptr, "aligned_alloc");
        want.resize(bytes);
        for (std::size_t i = 0; i < bytes; i += 8) {
            const std::uint64_t v = mix(seed ^ 0xbac6u, static_cast<std::uint64_t>(stream) << 40 | i);
            std::memcpy(want.data() + i, &v, 8);  // bytes is a multiple of 4096
        }
        std::memcpy(buf, want.data(), bytes);
    }
    std::uint64_t addr(std::size_t off) const { return reinterpret_cast<std::uintptr_t>(buf + off); }
};

// Scatters data over pieces, from byte skip of the scatter list on.
inline void put_payload(std::uint8_t* base, const std::vector<Area>& pieces, const std::vector<std::uint8_t>& data,
                        std::size_t skip = 0) {
    std::size_t k = 0;
    for (const auto& a : pieces) {
        const std::size_t s = std::min<std::size_t>(skip, a.len);
        skip -= s;
        const std::size_t n = std::min<std::size_t>(a.len - s, data.size() - k);
        if (n) std::memcpy(base + a.off + s, data.data() + k, n);
        k += n;
    }
}

// What a READ or atomic brings back into the sender's pieces.
inline std::vector<std::uint8_t> fetched(const Msg& m) {
    if (m.op == Op::Read) return pattern(m.size, m.pattern);
    std::vector<std::uint8_t> v(8);
    std::memcpy(v.data(), &m.original, 8);
    return v;
}

// The first n bytes of the scatter list pieces.
inline std::vector<std::uint8_t> get_scatter(const std::uint8_t* base, const std::vector<Area>& pieces, std::size_t n) {
    std::vector<std::uint8_t> out;
    for (const auto& a : pieces)
        for (std::size_t i = 0; i < a.len && out.size() < n; ++i) out.push_back(base[a.off + i]);
    return out;
}

// What the two programs tell each other while traffic flows. Both run in
// the same process, so this plays the part of put/get without blocking.
struct Shared {
    std::map<int, int> phase;  // per stream: the receive phase posted
};

class Node {
public:
    Node(Host& h, const Plan& plan, Shared& shared, Record& rec)
        : m_h(h), m_plan(plan), m_shared(shared), m_rec(rec), m_me(h.index()),
          m_rng{mix(plan.seed, 0xcafe + static_cast<std::uint64_t>(h.index()))} {}

    void run() {
        setup();
        m_h.barrier("stress.ready");
        traffic();
        m_h.barrier("stress.done");
        verify();
        m_h.barrier("stress.verified");
        teardown();
    }

private:
    struct Tx {  // a stream I send
        const Stream* s = nullptr;
        int idx = 0;  // in the plan
        Region src;
        int next = 0;        // next message to post
        int retired = 0;     // messages whose send queue slot is free again
        int next_sig = 0;    // index into sig
        std::vector<int> sig;  // signaled messages, in order
        std::uint64_t raddr = 0;
        std::uint32_t rkey = 0;
        bool dead = false;
        bool done() const { return dead || retired == static_cast<int>(s->msgs.size()); }
    };
    struct Rx {  // a stream my peer sends to me
        const Stream* s = nullptr;
        int idx = 0;
        int phase = 0;  // Phased: the phase whose receives are posted
        Region dst;
        int posted = 0, completed = 0;
        bool dead = false;
        bool done() const { return dead || completed == static_cast<int>(s->recvs.size()); }
    };
    struct Published {
        std::uint32_t qpn;
        std::uint64_t addr;  // my receive region for this QP (0 if none)
        std::uint32_t rkey;
        std::uint16_t lid;
        ibv_gid gid[2];      // GID table indices 0 and 1
    };

    void error(const std::string& what) {
        if (m_errors < 40) m_rec.set("error.n" + std::to_string(m_me) + "." + std::to_string(100 + m_errors).substr(1), what);
        ++m_errors;
    }

    std::string where(const Stream& s, int j) const {
        const Msg& m = s.msgs[static_cast<std::size_t>(j)];
        std::ostringstream os;
        os << "QP " << s.qp << " (node " << s.from << " -> " << 1 - s.from << ") message " << j << " (" << op_name(m.op)
           << " " << m.size << " B, " << m.src.size() << " SGE" << (m.inline_data ? ", inline" : "")
           << (m.signaled ? ", signaled" : "") << (m.fence ? ", fenced" : "") << ")";
        return os.str();
    }

    void setup() {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        need(list != nullptr && n > 0, "ibv_get_device_list");
        m_ctx = ibv_open_device(list[0]);
        need(m_ctx != nullptr, "ibv_open_device");
        ibv_free_device_list(list);
        m_pd = ibv_alloc_pd(m_ctx);
        need(m_pd != nullptr, "ibv_alloc_pd");
        std::vector<int> recvs(static_cast<std::size_t>(m_plan.qps), 1);
        int sends = 0, receives = 0;
        for (const auto& s : m_plan.streams) {
            if (s.from == m_me) {
                sends += static_cast<int>(m_plan.sq_depth);
            } else {
                recvs[static_cast<std::size_t>(s.qp)] = std::max<int>(1, static_cast<int>(s.recvs.size()));
                receives += static_cast<int>(s.recvs.size());
            }
        }
        // Room for every completion that can be outstanding: nothing may
        // overflow whatever the timing.
        if (extended()) {
            // Extended CQs that report every field ibv_poll_cq does.
            auto create = [this](int cqe) {
                ibv_cq_init_attr_ex a{};
                a.cqe = static_cast<std::uint32_t>(cqe);
                a.wc_flags = IBV_WC_STANDARD_FLAGS;
                ibv_cq_ex* cq = ibv_create_cq_ex(m_ctx, &a);
                need(cq != nullptr, "ibv_create_cq_ex");
                return cq;
            };
            m_scqx = create(std::max(16, sends));
            m_rcqx = create(std::max(16, receives));
            m_scq = ibv_cq_ex_to_cq(m_scqx);
            m_rcq = ibv_cq_ex_to_cq(m_rcqx);
        } else {
            m_scq = ibv_create_cq(m_ctx, std::max(16, sends), nullptr, nullptr, 0);
            m_rcq = ibv_create_cq(m_ctx, std::max(16, receives), nullptr, nullptr, 0);
        }
        need(m_scq && m_rcq, "ibv_create_cq");
        for (int q = 0; q < m_plan.qps; ++q) {
            ibv_qp_init_attr init{};
            init.send_cq = m_scq;
            init.recv_cq = m_rcq;
            init.qp_type = m_plan.type();
            init.cap.max_send_wr = m_plan.sq_depth;
            init.cap.max_recv_wr = static_cast<std::uint32_t>(recvs[static_cast<std::size_t>(q)]);
            init.cap.max_send_sge = 4;
            init.cap.max_recv_sge = 4;
            init.cap.max_inline_data = m_plan.max_inline;
            ibv_qp* qp = nullptr;
            if (extended()) {
                ibv_qp_init_attr_ex x{};
                x.send_cq = init.send_cq;
                x.recv_cq = init.recv_cq;
                x.qp_type = init.qp_type;
                x.cap = init.cap;
                x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
                x.pd = m_pd;
                x.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
                if (m_plan.type() != IBV_QPT_UD)
                    x.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
                if (m_plan.fetches())
                    x.send_ops_flags |= IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                        IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
                qp = ibv_create_qp_ex(m_ctx, &x);
                need(qp != nullptr && ibv_qp_to_qp_ex(qp) != nullptr, "ibv_create_qp_ex");
            } else {
                qp = ibv_create_qp(m_pd, &init);
            }
            need(qp != nullptr, "ibv_create_qp");
            m_qps.push_back(qp);
        }
        m_tx.resize(static_cast<std::size_t>(m_plan.qps));
        m_rx.resize(static_cast<std::size_t>(m_plan.qps));
        for (std::size_t i = 0; i < m_plan.streams.size(); ++i) {
            const Stream& s = m_plan.streams[i];
            const std::size_t q = static_cast<std::size_t>(s.qp);
            if (s.from == m_me) {
                Tx& t = m_tx[q];
                t.s = &s;
                t.idx = static_cast<int>(i);
                t.src.init(m_plan.seed, static_cast<int>(i), s.src_bytes);
                for (std::size_t j = 0; j < s.msgs.size(); ++j) {
                    const Msg& m = s.msgs[j];
                    if (!is_fetch(m.op) && m.echo < 0) put_payload(t.src.want.data(), m.src, pattern(m.size, m.pattern));
                    if (m.signaled) t.sig.push_back(static_cast<int>(j));
                }
                std::memcpy(t.src.buf, t.src.want.data(), t.src.bytes);
                // What READs and atomics bring back: only once they are done
                // may it be in memory.
                for (const Msg& m : s.msgs)
                    if (is_fetch(m.op)) put_payload(t.src.want.data(), m.src, fetched(m));
                t.src.mr = ibv_reg_mr(m_pd, t.src.buf, t.src.bytes, IBV_ACCESS_LOCAL_WRITE);
                need(t.src.mr != nullptr, "ibv_reg_mr");
            } else {
                Rx& r = m_rx[q];
                r.s = &s;
                r.idx = static_cast<int>(i);
                r.dst.init(m_plan.seed, static_cast<int>(i), s.dst_bytes);
                const std::size_t grh = m_plan.type() == IBV_QPT_UD ? kGrhArea : 0;
                for (const Msg& m : s.msgs) {
                    const auto data = pattern(m.size, m.pattern);
                    if (is_rdma(m.op)) put_payload(r.dst.want.data(), {m.dst}, data);
                    else if (m.recv >= 0) put_payload(r.dst.want.data(), s.recvs[static_cast<std::size_t>(m.recv)].sges, data, grh);
                    // What a READ reads is there from the start, and stays.
                    if (m.op == Op::Read) put_payload(r.dst.buf, {m.dst}, data);
                }
                int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
                if (m_plan.fetches()) {
                    access |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
                    std::memcpy(r.dst.buf + s.cell.off, &s.cell_first, 8);
                    std::memcpy(r.dst.want.data() + s.cell.off, &s.cell_last, 8);
                }
                r.dst.mr = ibv_reg_mr(m_pd, r.dst.buf, r.dst.bytes, access);
                need(r.dst.mr != nullptr, "ibv_reg_mr");
            }
        }
        ibv_port_attr port{};
        need_rc(ibv_query_port(m_ctx, 1, &port), "ibv_query_port");
        for (int q = 0; q < m_plan.qps; ++q) {
            const Rx& r = m_rx[static_cast<std::size_t>(q)];
            Published mine{};
            mine.qpn = m_qps[static_cast<std::size_t>(q)]->qp_num;
            mine.addr = r.s ? r.dst.addr(0) : 0;
            mine.rkey = r.s ? r.dst.mr->rkey : 0;
            mine.lid = port.lid;
            for (int g = 0; g < 2 && g < port.gid_tbl_len; ++g)
                need_rc(ibv_query_gid(m_ctx, 1, g, &mine.gid[g]), "ibv_query_gid");
            m_h.put_value("stress/" + std::to_string(m_me) + "/" + std::to_string(q), mine);
        }
        ConnOptions c;
        c.rnr_retry = static_cast<std::uint8_t>(m_plan.shape.rnr_retry);
        c.timeout = static_cast<std::uint8_t>(m_plan.shape.timeout);
        c.mtu = m_plan.mtu;
        c.qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        if (m_plan.fetches()) c.qp_access |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        c.max_rd_atomic = m_plan.rd_atomic;
        for (int q = 0; q < m_plan.qps; ++q) {
            const auto peer = m_h.get_value<Published>("stress/" + std::to_string(1 - m_me) + "/" + std::to_string(q));
            Tx& t = m_tx[static_cast<std::size_t>(q)];
            t.raddr = peer.addr;
            t.rkey = peer.rkey;
            ibv_qp* qp = m_qps[static_cast<std::size_t>(q)];
            m_peer = peer;
            m_peer_qpn.push_back(peer.qpn);
            if (m_plan.type() == IBV_QPT_RC) {
                need_rc(qp_to_init(qp, c.qp_access), "ibv_modify_qp(INIT)");
                need_rc(qp_to_rtr(qp, peer.lid, peer.qpn, m_plan.psn[1 - m_me], c), "ibv_modify_qp(RTR)");
                need_rc(qp_to_rts(qp, m_plan.psn[m_me], c), "ibv_modify_qp(RTS)");
            } else {
                connect_unreliable(qp, q, peer);
            }
            m_qpn_index[qp->qp_num] = q;
        }
        if (m_plan.type() == IBV_QPT_UD) {
            ibv_ah_attr av = path_to(m_peer);
            m_ah = ibv_create_ah(m_pd, &av);
            need(m_ah != nullptr, "ibv_create_ah");
        }
        // UpFront streams post every receive, Phased ones their first phase,
        // before the peer may send: with rnr_retry 0 an RNR NAK is never
        // legitimate. Trickling streams (rnr_retry 7) start with a few.
        for (Rx& r : m_rx)
            if (r.s) post_recvs(r, recv_limit(r));
    }

    // The path to the peer, through a GRH when the shape says so.
    ibv_ah_attr path_to(const Published& peer) const {
        ibv_ah_attr av{};
        av.dlid = peer.lid;
        av.port_num = 1;
        if (m_plan.shape.global) {
            av.is_global = 1;
            av.grh.dgid = peer.gid[m_plan.sgid_index];
            av.grh.sgid_index = m_plan.sgid_index;
            av.grh.hop_limit = 1;
        }
        return av;
    }

    // UC: RTR with a path, no RNR or READ attributes. UD: no path, a Q_Key
    // (the same on both nodes' QP q).
    void connect_unreliable(ibv_qp* qp, int q, const Published& peer) {
        ibv_qp_attr a{};
        if (m_plan.type() == IBV_QPT_UD) {
            a.qp_state = IBV_QPS_INIT;
            a.port_num = 1;
            a.qkey = m_plan.qkey[static_cast<std::size_t>(q)];
            need_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
                    "ibv_modify_qp(INIT)");
            a.qp_state = IBV_QPS_RTR;
            need_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE), "ibv_modify_qp(RTR)");
        } else {
            need_rc(qp_to_init(qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), "ibv_modify_qp(INIT)");
            a.qp_state = IBV_QPS_RTR;
            a.path_mtu = m_plan.mtu;
            a.dest_qp_num = peer.qpn;
            a.rq_psn = m_plan.psn[1 - m_me];
            a.ah_attr = path_to(peer);
            need_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN),
                    "ibv_modify_qp(RTR)");
        }
        ibv_qp_attr r{};
        r.qp_state = IBV_QPS_RTS;
        r.sq_psn = m_plan.psn[m_me];
        need_rc(ibv_modify_qp(qp, &r, IBV_QP_STATE | IBV_QP_SQ_PSN), "ibv_modify_qp(RTS)");
    }

    // How many receives of r should be posted by now.
    int recv_limit(const Rx& r) const {
        const int total = static_cast<int>(r.s->recvs.size());
        switch (r.s->mode) {
        case RecvMode::UpFront: return total;
        case RecvMode::Trickle: return std::min(total, r.completed + r.s->window);
        case RecvMode::Phased: return r.s->phase_end.empty() ? 0 : r.s->phase_end[static_cast<std::size_t>(r.phase)];
        }
        return total;
    }

    void replenish(Rx& r) {
        if (r.dead) return;
        if (r.s->mode == RecvMode::Phased) {
            // The phase is over: post the next one, then tell the sender.
            if (r.phase + 1 >= static_cast<int>(r.s->phase_end.size()) ||
                r.completed < r.s->phase_end[static_cast<std::size_t>(r.phase)])
                return;
            ++r.phase;
            post_recvs(r, recv_limit(r));
            m_shared.phase[r.idx] = r.phase;
            return;
        }
        if (r.s->mode == RecvMode::Trickle) post_recvs(r, recv_limit(r));
    }

    void post_recvs(Rx& r, int limit) {
        while (!r.dead && r.posted < limit) {
            // Linked lists of 1-4 receive WRs as well.
            const int k = std::min(static_cast<int>(m_rng.range(1, 4)), limit - r.posted);
            std::vector<ibv_recv_wr> wrs(static_cast<std::size_t>(k));
            std::vector<std::vector<ibv_sge>> sges(static_cast<std::size_t>(k));
            for (int i = 0; i < k; ++i) {
                const Recv& rv = r.s->recvs[static_cast<std::size_t>(r.posted + i)];
                for (const Area& a : rv.sges) sges[static_cast<std::size_t>(i)].push_back({r.dst.addr(a.off), a.len, r.dst.mr->lkey});
                ibv_recv_wr& w = wrs[static_cast<std::size_t>(i)];
                w.wr_id = recv_wr_id(r.s->qp, r.posted + i);
                w.sg_list = sges[static_cast<std::size_t>(i)].data();
                w.num_sge = static_cast<int>(rv.sges.size());
                w.next = i + 1 < k ? &wrs[static_cast<std::size_t>(i + 1)] : nullptr;
            }
            ibv_recv_wr* bad = nullptr;
            const int rc = ibv_post_recv(m_qps[static_cast<std::size_t>(r.s->qp)], wrs.data(), &bad);
            if (rc) {
                error("QP " + std::to_string(r.s->qp) + ": ibv_post_recv of receive " + std::to_string(r.posted) +
                      " returned " + std::to_string(rc));
                r.dead = true;
                return;
            }
            r.posted += k;
        }
    }

    // Posts the next chain of t if the send queue has room for it.
    bool post_chain(Tx& t) {
        const Stream& s = *t.s;
        if (t.dead || t.next == static_cast<int>(s.msgs.size())) return false;
        const int k = s.msgs[static_cast<std::size_t>(t.next)].chain;
        if (t.next + k - t.retired > static_cast<int>(m_plan.sq_depth)) return false;
        if (s.mode == RecvMode::Phased)
            for (int j = t.next; j < t.next + k; ++j) {
                const int rv = s.msgs[static_cast<std::size_t>(j)].recv;
                if (rv >= 0 && m_shared.phase[t.idx] < s.recvs[static_cast<std::size_t>(rv)].phase) return false;
            }
        std::vector<ibv_send_wr> wrs(static_cast<std::size_t>(k));
        std::vector<std::vector<ibv_sge>> sges(static_cast<std::size_t>(k));
        for (int i = 0; i < k; ++i) {
            const int j = t.next + i;
            const Msg& m = s.msgs[static_cast<std::size_t>(j)];
            auto& sg = sges[static_cast<std::size_t>(i)];
            for (const Area& a : m.src) sg.push_back({t.src.addr(a.off), a.len, t.src.mr->lkey});
            ibv_send_wr& w = wrs[static_cast<std::size_t>(i)];
            w.wr_id = send_wr_id(s.qp, j);
            w.sg_list = sg.empty() ? nullptr : sg.data();
            w.num_sge = static_cast<int>(sg.size());
            w.opcode = m.op == Op::Write      ? IBV_WR_RDMA_WRITE
                       : m.op == Op::WriteImm ? IBV_WR_RDMA_WRITE_WITH_IMM
                       : m.op == Op::Send     ? IBV_WR_SEND
                       : m.op == Op::SendImm  ? IBV_WR_SEND_WITH_IMM
                       : m.op == Op::Read     ? IBV_WR_RDMA_READ
                       : m.op == Op::FetchAdd ? IBV_WR_ATOMIC_FETCH_AND_ADD
                                              : IBV_WR_ATOMIC_CMP_AND_SWP;
            w.send_flags = (m.signaled ? unsigned(IBV_SEND_SIGNALED) : 0u) | (m.inline_data ? unsigned(IBV_SEND_INLINE) : 0u) |
                           (m.fence ? unsigned(IBV_SEND_FENCE) : 0u);
            if (has_imm(m.op)) w.imm_data = m.imm;
            if (is_rdma(m.op)) {
                w.wr.rdma.remote_addr = t.raddr + m.dst.off;
                w.wr.rdma.rkey = t.rkey;
            }
            if (is_atomic(m.op)) {
                w.wr.atomic.remote_addr = t.raddr + m.dst.off;
                w.wr.atomic.rkey = t.rkey;
                w.wr.atomic.compare_add = m.compare_add;
                w.wr.atomic.swap = m.swap;
            }
            if (m_plan.type() == IBV_QPT_UD) {
                w.wr.ud.ah = m_ah;
                w.wr.ud.remote_qpn = m_peer_qpn[static_cast<std::size_t>(s.qp)];
                // Bit 31 set: the low bits do not matter, the QP's own Q_Key is used.
                w.wr.ud.remote_qkey = m.own_qkey ? 0x80000000u | (m.imm & 0x7fffffffu) : m_plan.qkey[static_cast<std::size_t>(s.qp)];
            }
            w.next = i + 1 < k ? &wrs[static_cast<std::size_t>(i + 1)] : nullptr;
        }
        ibv_qp* qp = m_qps[static_cast<std::size_t>(s.qp)];
        const bool by_builders = extended() && m_rng.chance(50);
        int rc = 0;
        if (by_builders) {
            // Now and then a whole batch is built and aborted first: nothing
            // of it may go out.
            if (m_rng.chance(15)) build_batch(qp, wrs, t, false), ibv_wr_abort(ibv_qp_to_qp_ex(qp));
            build_batch(qp, wrs, t, true);
            rc = ibv_wr_complete(ibv_qp_to_qp_ex(qp));
        } else {
            ibv_send_wr* bad = nullptr;
            rc = ibv_post_send(qp, wrs.data(), &bad);
        }
        if (rc) {
            error(where(s, t.next) + (by_builders ? ": ibv_wr_complete" : ": ibv_post_send") + " of a chain of " +
                  std::to_string(k) + " returned " + std::to_string(rc));
            t.dead = true;
            return false;
        }
        // Inline data was copied when posted: scribble over it, so a late
        // DMA read of the buffer would show in the peer's bytes.
        for (int i = 0; i < k; ++i) {
            const Msg& m = s.msgs[static_cast<std::size_t>(t.next + i)];
            if (!m.inline_data) continue;
            for (const Area& a : m.src) {
                std::memset(t.src.buf + a.off, 0xee, a.len);
                std::memset(t.src.want.data() + a.off, 0xee, a.len);
            }
        }
        t.next += k;
        return true;
    }

    // The chain wrs again through the ibv_wr_* calls of the extended QP,
    // each piece of data by one of the setters that can carry it. Inline
    // data is copied when its setter returns, so on the batch that is
    // posted (scribble) the source is overwritten at once.
    void build_batch(ibv_qp* qp, const std::vector<ibv_send_wr>& wrs, Tx& t, bool scribble) {
        ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
        ibv_wr_start(x);
        for (const ibv_send_wr& w : wrs) {
            x->wr_id = w.wr_id;
            x->wr_flags = w.send_flags & ~static_cast<unsigned int>(IBV_SEND_INLINE);
            switch (w.opcode) {
            case IBV_WR_RDMA_WRITE: ibv_wr_rdma_write(x, w.wr.rdma.rkey, w.wr.rdma.remote_addr); break;
            case IBV_WR_RDMA_WRITE_WITH_IMM:
                ibv_wr_rdma_write_imm(x, w.wr.rdma.rkey, w.wr.rdma.remote_addr, w.imm_data);
                break;
            case IBV_WR_SEND: ibv_wr_send(x); break;
            case IBV_WR_SEND_WITH_IMM: ibv_wr_send_imm(x, w.imm_data); break;
            case IBV_WR_RDMA_READ: ibv_wr_rdma_read(x, w.wr.rdma.rkey, w.wr.rdma.remote_addr); break;
            case IBV_WR_ATOMIC_FETCH_AND_ADD:
                ibv_wr_atomic_fetch_add(x, w.wr.atomic.rkey, w.wr.atomic.remote_addr, w.wr.atomic.compare_add);
                break;
            default:
                ibv_wr_atomic_cmp_swp(x, w.wr.atomic.rkey, w.wr.atomic.remote_addr, w.wr.atomic.compare_add,
                                      w.wr.atomic.swap);
                break;
            }
            if (m_plan.type() == IBV_QPT_UD) ibv_wr_set_ud_addr(x, w.wr.ud.ah, w.wr.ud.remote_qpn, w.wr.ud.remote_qkey);
            const auto n = static_cast<std::size_t>(w.num_sge);
            if (w.send_flags & IBV_SEND_INLINE) {
                std::vector<ibv_data_buf> bufs;
                for (std::size_t i = 0; i < n; ++i)
                    bufs.push_back({reinterpret_cast<void*>(static_cast<std::uintptr_t>(w.sg_list[i].addr)), w.sg_list[i].length});
                if (n == 1 && m_rng.chance(50)) ibv_wr_set_inline_data(x, bufs[0].addr, bufs[0].length);
                else ibv_wr_set_inline_data_list(x, n, bufs.data());
                if (scribble)
                    for (std::size_t i = 0; i < n; ++i) {
                        std::memset(bufs[i].addr, 0xee, bufs[i].length);
                        std::memset(t.src.want.data() + (static_cast<std::uint8_t*>(bufs[i].addr) - t.src.buf), 0xee,
                                    bufs[i].length);
                    }
            } else if (n == 1 && m_rng.chance(50)) {
                ibv_wr_set_sge(x, w.sg_list[0].lkey, w.sg_list[0].addr, w.sg_list[0].length);
            } else {
                ibv_wr_set_sge_list(x, n, w.sg_list);
            }
        }
    }

    int qp_index(std::uint32_t qpn) const {
        auto it = m_qpn_index.find(qpn);
        return it == m_qpn_index.end() ? -1 : it->second;
    }

    void send_completion(const ibv_wc& w) {
        const int q = qp_index(w.qp_num);
        if (q < 0 || !m_tx[static_cast<std::size_t>(q)].s) {
            error("send completion for qp_num " + std::to_string(w.qp_num) + " (wr_id " + std::to_string(w.wr_id) +
                  ") that sends nothing");
            return;
        }
        Tx& t = m_tx[static_cast<std::size_t>(q)];
        const Stream& s = *t.s;
        if (t.dead) return;  // flushes after an error
        if (t.next_sig >= static_cast<int>(t.sig.size())) {
            error("QP " + std::to_string(q) + ": send completion wr_id " + std::to_string(w.wr_id) + " after all " +
                  std::to_string(t.sig.size()) + " signaled WRs completed (duplicate?)");
            return;
        }
        const int j = t.sig[static_cast<std::size_t>(t.next_sig)];
        const Msg& m = s.msgs[static_cast<std::size_t>(j)];
        if (w.status != IBV_WC_SUCCESS) {
            // An error completes its own WR, signaled or not: name that one.
            const auto failed = static_cast<int>(w.wr_id & 0xffffffffu);
            const bool own = w.wr_id == send_wr_id(q, failed) && failed < static_cast<int>(s.msgs.size());
            std::ostringstream os;
            os << where(s, own ? failed : j) << ": send completion " << ibv_wc_status_str(w.status) << " (status " << w.status
               << ", vendor_err " << w.vendor_err << ", wr_id " << (w.wr_id & 0xffffffffu) << ")";
            error(os.str());
            t.dead = true;
            return;
        }
        if (w.wr_id != send_wr_id(q, j)) {
            error(where(s, j) + ": send completions out of order: got wr_id of message " +
                  std::to_string(w.wr_id & 0xffffffffu) + " (raw " + std::to_string(w.wr_id) + ")");
            t.dead = true;
            return;
        }
        const int want_op = is_write(m.op)          ? IBV_WC_RDMA_WRITE
                            : m.op == Op::Read      ? IBV_WC_RDMA_READ
                            : m.op == Op::FetchAdd  ? IBV_WC_FETCH_ADD
                            : m.op == Op::CmpSwap   ? IBV_WC_COMP_SWAP
                                                    : IBV_WC_SEND;
        if (w.opcode != want_op)
            error(where(s, j) + ": send completion opcode " + std::to_string(w.opcode) + ", want " + std::to_string(want_op));
        if (is_fetch(m.op) && w.byte_len != m.size)
            error(where(s, j) + ": send completion byte_len " + std::to_string(w.byte_len) + ", want " + std::to_string(m.size));
        // This completion retires every WR up to it: what the READs and
        // atomics among them fetched is in memory now.
        for (int i = t.retired; i <= j; ++i) {
            const Msg& f = s.msgs[static_cast<std::size_t>(i)];
            if (!is_fetch(f.op)) continue;
            const auto got = get_scatter(t.src.buf, f.src, f.size), want = fetched(f);
            if (got == want) continue;
            std::ostringstream os;
            os << where(s, i) << ": when " << (i == j ? "it completes" : "message " + std::to_string(j) + " completes");
            if (is_atomic(f.op)) {
                std::uint64_t v = 0;
                std::memcpy(&v, got.data(), 8);
                os << ", its buffer holds " << v << ", not the original value " << f.original;
            } else {
                std::size_t differ = 0, first = got.size();
                for (std::size_t k = got.size(); k-- > 0;)
                    if (got[k] != want[k]) ++differ, first = k;
                os << ", " << differ << " of the bytes read differ, the first at byte " << first;
            }
            error(os.str());
        }
        ++t.next_sig;
        t.retired = j + 1;
    }

    void recv_completion(const ibv_wc& w) {
        const int q = qp_index(w.qp_num);
        if (q < 0 || !m_rx[static_cast<std::size_t>(q)].s) {
            error("receive completion for qp_num " + std::to_string(w.qp_num) + " (wr_id " + std::to_string(w.wr_id) +
                  ") that receives nothing");
            return;
        }
        Rx& r = m_rx[static_cast<std::size_t>(q)];
        const Stream& s = *r.s;
        if (r.dead) return;
        if (r.completed >= static_cast<int>(s.recvs.size())) {
            error("QP " + std::to_string(q) + ": receive completion wr_id " + std::to_string(w.wr_id) + " after all " +
                  std::to_string(s.recvs.size()) + " receives completed (duplicate?)");
            return;
        }
        const int rv = r.completed;
        const int j = s.recvs[static_cast<std::size_t>(rv)].msg;
        const Msg& m = s.msgs[static_cast<std::size_t>(j)];
        const std::string at = where(s, j) + ", receive " + std::to_string(rv);
        if (w.status != IBV_WC_SUCCESS) {
            std::ostringstream os;
            os << at << ": receive completion " << ibv_wc_status_str(w.status) << " (status " << w.status
               << ", vendor_err " << w.vendor_err << ")";
            error(os.str());
            r.dead = true;
            return;
        }
        if (w.wr_id != recv_wr_id(q, rv)) {
            error(at + ": receive completions out of order: got wr_id of receive " + std::to_string(w.wr_id & 0xffffffffu));
            r.dead = true;
            return;
        }
        const int want_op = m.op == Op::WriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
        std::ostringstream bad;
        const bool ud = m_plan.type() == IBV_QPT_UD;
        const std::uint32_t want_len = m.size + (ud ? kGrhArea : 0);
        if (w.opcode != want_op) bad << " opcode " << w.opcode << " (want " << want_op << ")";
        if (w.byte_len != want_len) bad << " byte_len " << w.byte_len << " (want " << want_len << ")";
        if (ud) {
            if (w.src_qp != m_peer_qpn[static_cast<std::size_t>(q)])
                bad << " src_qp " << w.src_qp << " (want " << m_peer_qpn[static_cast<std::size_t>(q)] << ")";
            if (w.slid != m_peer.lid) bad << " slid " << w.slid << " (want " << m_peer.lid << ")";
            const bool grh = (w.wc_flags & IBV_WC_GRH) != 0;
            if (grh != m_plan.shape.global) bad << " IBV_WC_GRH " << (grh ? "set" : "clear");
            if (m_plan.shape.global) check_grh(r, s.recvs[static_cast<std::size_t>(rv)].sges, bad);
        }
        const bool imm_flag = (w.wc_flags & IBV_WC_WITH_IMM) != 0;
        if (imm_flag != has_imm(m.op)) bad << " IBV_WC_WITH_IMM " << (imm_flag ? "set" : "clear");
        if (has_imm(m.op) && w.imm_data != m.imm) bad << " imm_data " << w.imm_data << " (want " << m.imm << ")";
        if (!bad.str().empty()) error(at + ":" + bad.str());
        ++r.completed;
    }

    // The GRH area of a UD receive that came with a GRH: IP version 6, next
    // header 0x1B (BTH), from the peer's GID to ours at the plan's index.
    // The image then expects what arrived there.
    void check_grh(Rx& r, const std::vector<Area>& sges, std::ostringstream& bad) {
        const auto got = get_scatter(r.dst.buf, sges, kGrhArea);
        ibv_grh g;
        std::memcpy(&g, got.data(), sizeof g);
        ibv_gid mine;
        need_rc(ibv_query_gid(m_ctx, 1, m_plan.sgid_index, &mine), "ibv_query_gid");
        if (be32toh(g.version_tclass_flow) >> 28 != 6) bad << " GRH IPVer " << (be32toh(g.version_tclass_flow) >> 28);
        if (g.next_hdr != 0x1b) bad << " GRH NxtHdr " << +g.next_hdr;
        if (std::memcmp(g.sgid.raw, m_peer.gid[m_plan.sgid_index].raw, 16) != 0) bad << " GRH SGID not the peer's";
        if (std::memcmp(g.dgid.raw, mine.raw, 16) != 0) bad << " GRH DGID not ours";
        put_payload(r.dst.want.data(), sges, got);
    }

    bool all_done() const {
        for (const Tx& t : m_tx)
            if (t.s && !t.done()) return false;
        for (const Rx& r : m_rx)
            if (r.s && !r.done()) return false;
        return true;
    }

    void traffic() {
        // Give up when no completion arrives for this long: far more than any
        // legitimate gap (the longest signaled stretch of 256 KiB WRITEs).
        // A lossy fabric adds retransmission timeouts: 32 of them, or 128
        // when READs cross it, for an answer packet lost inside a READ waits
        // for the timer (as in rxe), and a 256 KiB READ at MTU 256 is about
        // 1000 answer packets, about 20 of them lost at 2 %.
        bool lossy = false;
        for (const auto& [key, value] : m_plan.shape.extra) lossy = lossy || key.rfind("fault.", 0) == 0;
        const bool lossy_reads = lossy && m_plan.shape.reads_atomics;
        const sim::Tick stall = std::max(us(4000), us(4.096 * (lossy_reads ? 128 : 32) * (1u << m_plan.shape.timeout)));
        sim::Tick last_progress = m_h.now();
        int idle = 0;
        std::vector<Tx*> ready;
        while (!all_done()) {
            bool progress = false;
            ibv_wc wc[16];
            for (ibv_cq* cq : {m_rcq, m_scq}) {
                const int n = extended() && m_rng.chance(50) ? poll_extended(cq == m_scq ? m_scqx : m_rcqx, 16, wc)
                                                             : ibv_poll_cq(cq, 16, wc);
                if (n < 0) throw std::runtime_error("ibv_poll_cq returned " + std::to_string(n));
                for (int i = 0; i < n; ++i) {
                    trace(wc[i]);
                    (cq == m_scq ? send_completion(wc[i]) : recv_completion(wc[i]));
                }
                progress |= n > 0;
            }
            for (Rx& r : m_rx)
                if (r.s) replenish(r);
            // Post a few chains on randomly picked QPs that have room.
            ready.clear();
            for (Tx& t : m_tx)
                if (t.s && !t.dead && t.next < static_cast<int>(t.s->msgs.size())) ready.push_back(&t);
            for (int k = static_cast<int>(m_rng.range(1, 3)); k > 0 && !ready.empty(); --k)
                post_chain(*ready[m_rng.below(ready.size())]);
            if (progress) {
                last_progress = m_h.now();
                idle = 0;
                continue;
            }
            if (m_h.now() - last_progress > stall) {
                report_stall();
                return;
            }
            // Poll often while traffic flows, less when nothing happens.
            ++idle;
            m_h.sleep((idle < 50 ? 200 : idle < 500 ? 1000 : 10000) * sim::kPsPerNs);
        }
        // Nothing more may arrive: no duplicates, no completions of
        // unsignaled WRs (after an error, flushes may).
        if (m_errors) return;
        m_h.sleep(us(20));
        for (ibv_cq* cq : {m_scq, m_rcq}) {
            ibv_wc w;
            while (ibv_poll_cq(cq, 1, &w) == 1)
                error(std::string("extra ") + (cq == m_scq ? "send" : "receive") + " completion after all expected: qp_num " +
                      std::to_string(w.qp_num) + " wr_id " + std::to_string(w.wr_id) + " status " + std::to_string(w.status));
        }
    }

    // Up to max completions through ibv_start_poll / ibv_next_poll, each
    // read field by field into wc.
    int poll_extended(ibv_cq_ex* cq, int max, ibv_wc* wc) {
        ibv_poll_cq_attr attr{};
        int rc = ibv_start_poll(cq, &attr);
        if (rc == ENOENT) return 0;
        if (rc) throw std::runtime_error("ibv_start_poll returned " + std::to_string(rc));
        int n = 0;
        while (rc == 0) {
            ibv_wc& w = wc[n++];
            w = ibv_wc{};
            w.wr_id = cq->wr_id;
            w.status = cq->status;
            w.opcode = ibv_wc_read_opcode(cq);
            w.vendor_err = ibv_wc_read_vendor_err(cq);
            w.byte_len = ibv_wc_read_byte_len(cq);
            w.imm_data = ibv_wc_read_imm_data(cq);
            w.qp_num = ibv_wc_read_qp_num(cq);
            w.src_qp = ibv_wc_read_src_qp(cq);
            w.wc_flags = ibv_wc_read_wc_flags(cq);
            w.slid = static_cast<std::uint16_t>(ibv_wc_read_slid(cq));
            w.sl = ibv_wc_read_sl(cq);
            w.dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
            if (n == max) break;
            rc = ibv_next_poll(cq);
            if (rc != 0 && rc != ENOENT) throw std::runtime_error("ibv_next_poll returned " + std::to_string(rc));
        }
        ibv_end_poll(cq);
        return n;
    }

    bool extended() const { return m_plan.shape.extended_verbs; }

    // What was polled when, folded into one hash: two runs of a plan agree
    // on it only if every completion came at the same time with the same fields.
    void trace(const ibv_wc& w) {
        const std::uint64_t fields[] = {m_h.now(), w.qp_num, w.wr_id, w.status, w.opcode, w.byte_len,
                                        w.wc_flags, w.imm_data, w.src_qp, w.slid};
        for (std::uint64_t f : fields) m_trace = (m_trace ^ f) * 0x100000001b3ull;
        ++m_polled;
    }

    void report_stall() {
        for (const Tx& t : m_tx) {
            if (!t.s || t.done()) continue;
            const int j = t.next_sig < static_cast<int>(t.sig.size()) ? t.sig[static_cast<std::size_t>(t.next_sig)] : -1;
            std::ostringstream os;
            os << "stalled: QP " << t.s->qp << " (qpn " << m_qps[static_cast<std::size_t>(t.s->qp)]->qp_num << ") posted "
               << t.next << " of " << t.s->msgs.size() << " WRs, the first " << t.retired << " done";
            if (j >= 0) os << "; missing the completion of " << where(*t.s, j);
            error(os.str());
        }
        for (const Rx& r : m_rx) {
            if (!r.s || r.done()) continue;
            const int j = r.s->recvs[static_cast<std::size_t>(r.completed)].msg;
            error("stalled: QP " + std::to_string(r.s->qp) + " received " + std::to_string(r.completed) + " of " +
                  std::to_string(r.s->recvs.size()) + " (" + std::to_string(r.posted) + " posted); missing receive " +
                  std::to_string(r.completed) + " for " + where(*r.s, j));
        }
    }

    // Which planned area holds byte off of a region.
    static std::string owner(const Stream& s, bool src, std::size_t off) {
        for (std::size_t j = 0; j < s.msgs.size(); ++j) {
            const Msg& m = s.msgs[j];
            auto in = [&](const Area& a) { return off >= a.off && off < a.off + a.len; };
            if (src) {
                for (std::size_t k = 0; k < m.src.size(); ++k)
                    if (in(m.src[k])) return "message " + std::to_string(j) + " source SGE " + std::to_string(k);
            } else {
                if ((is_write(m.op) || is_fetch(m.op)) && in(m.dst)) return "message " + std::to_string(j) + " (" + op_name(m.op) + ") byte " + std::to_string(off - m.dst.off);
                if (m.recv >= 0) {
                    const auto& sg = s.recvs[static_cast<std::size_t>(m.recv)].sges;
                    for (std::size_t k = 0; k < sg.size(); ++k)
                        if (in(sg[k])) return "receive buffer of message " + std::to_string(j) + " (" + op_name(m.op) + ") SGE " + std::to_string(k);
                }
            }
        }
        return "background/guard";
    }

    void check_region(const Stream& s, const Region& r, bool src) {
        if (std::memcmp(r.buf, r.want.data(), r.bytes) == 0) return;
        std::size_t first = 0, n = 0;
        for (std::size_t i = r.bytes; i-- > 0;)
            if (r.buf[i] != r.want[i]) {
                first = i;
                ++n;
            }
        char hex[64];
        std::snprintf(hex, sizeof hex, "got 0x%02x want 0x%02x", r.buf[first], r.want[first]);
        error("QP " + std::to_string(s.qp) + (src ? " source" : " destination") + " region of node " +
              std::to_string(m_me) + ": " + std::to_string(n) + " bytes differ, the first at offset " +
              std::to_string(first) + " (" + hex + ") in " + owner(s, src, first));
    }

    void verify() {
        for (const Tx& t : m_tx)
            if (t.s && !t.dead && t.done()) check_region(*t.s, t.src, true);
        for (const Rx& r : m_rx) {
            if (!r.s) continue;
            // An incomplete stream already has its error; its bytes are moot.
            if (!r.dead && r.done()) check_region(*r.s, r.dst, false);
        }
        std::uint64_t done = 0;
        for (const Tx& t : m_tx)
            if (t.s) done += static_cast<std::uint64_t>(t.retired);
        m_rec.num("sent.n" + std::to_string(m_me), done);
        m_rec.num("errors.n" + std::to_string(m_me), m_errors);
        m_rec.num("end_us.n" + std::to_string(m_me), static_cast<double>(m_h.now()) / 1e6);
        // How much of the interesting hardware paths the seed exercised.
        const std::string hca = "node" + std::to_string(m_me) + ".hca.";
        m_rec.num("rnr_naks.n" + std::to_string(m_me), m_h.system().counter(hca + "responder.rnr_naks"));
        m_rec.num("blueflame.n" + std::to_string(m_me), m_h.system().counter(hca + "doorbell_unit.blueflame_writes"));
        m_rec.num("polled.n" + std::to_string(m_me), m_polled);
        m_rec.num("timeouts.n" + std::to_string(m_me), m_h.system().counter(hca + "completer.ack_timeouts"));
        m_rec.num("rewinds.n" + std::to_string(m_me), m_h.system().counter(hca + "requester.rewinds"));
        if (m_me == 0)
            m_rec.num("lost.n0", link_losses(m_h));
        m_rec.num("trace.n" + std::to_string(m_me), m_trace);
        if (m_plan.type() == IBV_QPT_RC) return;
        // Unreliable services on a lossless fabric with every receive posted
        // ahead: nothing may have been dropped on the way in.
        for (const char* c : {"responder.dropped_bad_qkey", "responder.dropped_no_recv_wqe", "responder.dropped_orphans",
                              "responder.dropped_duplicates", "responder.lost_packet_gaps", "responder.responder_errors",
                              "responder.dropped_qp_state", "rx_pipeline.dropped_wrong_dlid", "rx_pipeline.dropped_wrong_dgid",
                              "rx_pipeline.dropped_unknown_qp", "rx_pipeline.dropped_wrong_transport"}) {
            const std::uint64_t n = m_h.system().counter(hca + c);
            if (n) error("node " + std::to_string(m_me) + ": counter " + c + " = " + std::to_string(n));
        }
        m_rec.num("rx_packets.n" + std::to_string(m_me), m_h.system().counter(hca + "rx_pipeline.packets"));
    }

    void teardown() {
        if (m_ah) need_rc(ibv_destroy_ah(m_ah), "ibv_destroy_ah");
        for (ibv_qp* q : m_qps) need_rc(ibv_destroy_qp(q), "ibv_destroy_qp");
        for (Tx& t : m_tx)
            if (t.s) {
                need_rc(ibv_dereg_mr(t.src.mr), "ibv_dereg_mr");
                std::free(t.src.buf);
            }
        for (Rx& r : m_rx)
            if (r.s) {
                need_rc(ibv_dereg_mr(r.dst.mr), "ibv_dereg_mr");
                std::free(r.dst.buf);
            }
        need_rc(ibv_destroy_cq(m_scq), "ibv_destroy_cq");
        need_rc(ibv_destroy_cq(m_rcq), "ibv_destroy_cq");
        need_rc(ibv_dealloc_pd(m_pd), "ibv_dealloc_pd");
        need_rc(ibv_close_device(m_ctx), "ibv_close_device");
    }

    Host& m_h;
    const Plan& m_plan;
    Shared& m_shared;
    Record& m_rec;
    int m_me;
    SplitMix64 m_rng;  // run-time choices: which QP posts next, receive batches
    int m_errors = 0;
    ibv_context* m_ctx = nullptr;
    ibv_pd* m_pd = nullptr;
    ibv_cq* m_scq = nullptr;
    ibv_cq* m_rcq = nullptr;
    ibv_cq_ex* m_scqx = nullptr;         // extended verbs: the same CQs
    ibv_cq_ex* m_rcqx = nullptr;
    std::vector<ibv_qp*> m_qps;
    std::map<std::uint32_t, int> m_qpn_index;
    Published m_peer{};                  // the peer's LID and GIDs
    std::vector<std::uint32_t> m_peer_qpn;  // the peer's QP of each index
    ibv_ah* m_ah = nullptr;              // UD: to the peer
    std::uint64_t m_trace = 0xcbf29ce484222325ull;
    std::uint64_t m_polled = 0;
    std::vector<Tx> m_tx;
    std::vector<Rx> m_rx;
};

// ---------------------------------------------------------------------------
// Parent side.

struct Outcome {
    RunResult run;
    std::vector<std::string> errors;
    double wall_s = 0;
};

inline Outcome run_plan(const Plan& plan) {
    const auto t0 = std::chrono::steady_clock::now();
    Outcome o;
    Shared shared;  // one copy in the child, for both programs
    const Program prog = [&plan, &shared](Host& h, Record& rec) { Node(h, plan, shared, rec).run(); };
    Overrides cfg{{"hca.dma.impl", plan.shape.dma}};
    cfg.insert(cfg.end(), plan.shape.extra.begin(), plan.shape.extra.end());
    cfg.insert(cfg.end(), plan.node_hardware.begin(), plan.node_hardware.end());
    // UD: a datagram is one packet of up to the port's MTU.
    if (plan.type() == IBV_QPT_UD) cfg.emplace_back("port.max_mtu", std::to_string(plan.mtu_bytes()));
    // HCASIM_STRESS_LOG=debug: the model's log of a replayed seed.
    if (const char* level = env("HCASIM_STRESS_LOG")) cfg.emplace_back("sim.log_level", level);
    o.run = run_pair(cfg, prog, prog);
    o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o.run.ok) o.errors.push_back("run failed: " + o.run.error);
    for (const auto& [k, v] : o.run.kv)
        if (k.rfind("error.", 0) == 0) o.errors.push_back(k.substr(6) + ": " + v);
    for (int n = 0; n < 2; ++n) {
        const long long e = o.run.num("errors.n" + std::to_string(n));
        if (e > 40) o.errors.push_back("n" + std::to_string(n) + ": " + std::to_string(e - 40) + " more errors not shown");
        if (o.run.ok && e == LLONG_MIN) o.errors.push_back("node " + std::to_string(n) + " recorded no result");
    }
    return o;
}

inline std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& e : v) s += "\n  " + e;
    return s;
}

// Runs plan twice and checks that both runs are clean and recorded the same:
// every completion at the same time with the same fields (the hash of what
// was polled), the same counters and end time. Returns the first run.
inline Outcome run_twice_alike(const Plan& plan) {
    const Outcome a = run_plan(plan);
    const Outcome b = run_plan(plan);
    INFO(plan.describe() << joined(a.errors) << joined(b.errors));
    REQUIRE(a.errors.empty());
    REQUIRE(b.errors.empty());
    CHECK(a.run.kv == b.run.kv);
    return a;
}

// Runs every seed in its own child and checks each; a failure names the
// seed, its plan and what went wrong.
inline void run_seeds(const Shape& shape, std::uint64_t first, int normal) {
    const bool verbose = long_mode();
    int failed = 0;
    for (std::uint64_t seed : seeds(first, normal)) {
        const Plan plan = make_plan(seed, shape);
        if (env("HCASIM_STRESS_DUMP")) std::printf("%s", plan.dump().c_str());
        const Outcome o = run_plan(plan);
        // Counters of both nodes; 0 for a node that recorded none.
        auto both = [&o](const std::string& key) {
            long long n = 0;
            for (const char* node : {".n0", ".n1"}) n += std::max(0LL, o.run.num(key + node));
            return n;
        };
        if (verbose)
            std::printf("stress %s: %s in %.2f s wall, %.0f us simulated, %lld RNR NAKs, %lld BlueFlame writes, "
                        "%lld packets lost or corrupted, %lld ACK timeouts, %lld rewinds\n",
                        plan.describe().c_str(), o.errors.empty() ? "ok" : "FAILED", o.wall_s, o.run.real("end_us.n0"),
                        both("rnr_naks"), both("blueflame"), both("lost"), both("timeouts"), both("rewinds"));
        failed += !o.errors.empty();
        INFO(plan.describe() << ", replay with HCASIM_STRESS_SEED=" << seed << ":" << joined(o.errors));
        CHECK(o.errors.empty());
    }
    if (verbose) std::printf("stress: %d seed(s) failed\n", failed);
}

}  // namespace hcasim::test::stress
