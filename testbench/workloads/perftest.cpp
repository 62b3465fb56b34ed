#include "testbench/workloads/perftest.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>

#include "model/hca/hca_params.hpp"
#include "model/hca/port.hpp"
#include "testbench/workloads/rc_endpoint.hpp"
#include "testbench/workloads/stall_watch.hpp"

namespace hcasim::testbench {

Op parse_op(const std::string& s) {
    if (s == "send") return Op::Send;
    if (s == "write") return Op::Write;
    if (s == "read") return Op::Read;
    if (s == "atomic_cas") return Op::AtomicCas;
    if (s == "atomic_fadd") return Op::AtomicFadd;
    throw std::invalid_argument("unknown --op '" + sim::printable(s) +
                                "': expected send, write, read, atomic_cas or atomic_fadd");
}

const char* op_name(Op op) {
    switch (op) {
    case Op::Send: return "send";
    case Op::Write: return "write";
    case Op::Read: return "read";
    case Op::AtomicCas: return "atomic_cas";
    case Op::AtomicFadd: return "atomic_fadd";
    }
    return "?";
}

QpType parse_qp_type(const std::string& s) {
    if (s == "rc") return QpType::Rc;
    if (s == "uc") return QpType::Uc;
    if (s == "ud") return QpType::Ud;
    if (s == "xrc") return QpType::Xrc;
    throw std::invalid_argument("unknown --qp-type '" + sim::printable(s) + "': expected rc, uc, ud or xrc");
}

const char* qp_type_name(QpType t) {
    switch (t) {
    case QpType::Rc: return "RC";
    case QpType::Uc: return "UC";
    case QpType::Ud: return "UD";
    case QpType::Xrc: return "XRC";
    }
    return "?";
}

std::string qp_type_refusal(QpType t, Op op) {
    const std::string what = std::string("--op ") + op_name(op) + " is not available with --qp-type ";
    if (t == QpType::Ud && op != Op::Send) return what + "ud (UD has SEND only)";
    if (t == QpType::Uc && op != Op::Send && op != Op::Write) return what + "uc (UC has SEND and RDMA WRITE only)";
    return "";
}

std::vector<std::uint32_t> parse_sizes(const std::string& spec) {
    const std::string shown = "'" + sim::printable(spec) + "'";
    // Plain decimal only: no sign, blank, leading zero (octal?) or 0x (hex).
    auto number = [&](const std::string& t) {
        const bool digits = !t.empty() && t.size() <= 10 && t.find_first_not_of("0123456789") == std::string::npos;
        const unsigned long long v = digits && t[0] != '0' ? std::stoull(t) : 0;
        if (v < 1 || v > kMaxMessageBytes)
            throw std::invalid_argument("invalid size '" + sim::printable(t) + "' in --sizes " + shown +
                                        ": expected a decimal number of bytes from 1 to " +
                                        std::to_string(kMaxMessageBytes));
        return static_cast<std::uint32_t>(v);
    };
    if (spec.empty())
        throw std::invalid_argument("empty --sizes: expected a size (4096), a list (64,4096) or a range of powers of two (2:8388608)");
    std::vector<std::uint32_t> out;
    const auto colon = spec.find(':');
    if (colon != std::string::npos) {
        // A range is perftest's -a sweep: every power of two from LO to HI.
        if (spec.find(':', colon + 1) != std::string::npos)
            throw std::invalid_argument("invalid --sizes " + shown + ": a range is LO:HI");
        const std::uint32_t lo = number(spec.substr(0, colon));
        const std::uint32_t hi = number(spec.substr(colon + 1));
        auto power_of_two = [](std::uint32_t v) { return (v & (v - 1)) == 0; };
        if (!power_of_two(lo) || !power_of_two(hi))
            throw std::invalid_argument("invalid --sizes " + shown +
                                        ": a range LO:HI runs the powers of two from LO to HI, so both must be powers "
                                        "of two; list other sizes with commas (3,100)");
        if (lo > hi) throw std::invalid_argument("invalid --sizes " + shown + ": the first size exceeds the last");
        for (std::uint64_t s = lo; s <= hi; s *= 2) out.push_back(static_cast<std::uint32_t>(s));
        return out;
    }
    std::size_t begin = 0;
    for (;;) {
        const auto comma = spec.find(',', begin);
        const std::string item = spec.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
        if (item.empty()) throw std::invalid_argument("invalid --sizes " + shown + ": an empty size between commas");
        const std::uint32_t v = number(item);
        // Each size is a phase both hosts enter by its name.
        if (std::find(out.begin(), out.end(), v) != out.end())
            throw std::invalid_argument("invalid --sizes " + shown + ": " + item + " is listed twice");
        out.push_back(v);
        if (comma == std::string::npos) break;
        begin = comma + 1;
    }
    return out;
}

namespace {

ibv_mtu mtu_enum(int bytes) {
    switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: throw std::invalid_argument("invalid MTU " + std::to_string(bytes) + ": expected 256 to 4096, a power of two");
    }
}

// Drains whatever send completions are there (lat workloads).
void reap(ibv_cq* cq, int& outstanding) {
    ibv_wc wc[16];
    const int n = ibv_poll_cq(cq, 16, wc);
    for (int i = 0; i < n; ++i)
        if (wc[i].status != IBV_WC_SUCCESS)
            throw std::runtime_error(std::string("send completion: ") + ibv_wc_status_str(wc[i].status));
    outstanding -= n;
}

ibv_qp_type verbs_qp_type(QpType t) {
    return t == QpType::Uc ? IBV_QPT_UC : t == QpType::Ud ? IBV_QPT_UD : t == QpType::Xrc ? IBV_QPT_XRC_SEND : IBV_QPT_RC;
}

ibv_wr_opcode wr_opcode(Op op) {
    switch (op) {
    case Op::Send: return IBV_WR_SEND;
    case Op::Write: return IBV_WR_RDMA_WRITE;
    case Op::Read: return IBV_WR_RDMA_READ;
    case Op::AtomicCas: return IBV_WR_ATOMIC_CMP_AND_SWP;
    case Op::AtomicFadd: return IBV_WR_ATOMIC_FETCH_AND_ADD;
    }
    return IBV_WR_SEND;
}

// Where a work request goes: a remote buffer (RDMA and atomics) or, on UD,
// the peer's QP behind an address handle.
struct Target {
    ibv_wr_opcode opcode = IBV_WR_SEND;
    std::uint64_t remote_addr = 0;
    std::uint32_t rkey = 0;
    ibv_ah* ah = nullptr;  // UD
    std::uint32_t remote_qpn = 0;
    std::uint32_t remote_srqn = 0;  // XRC
    std::uint32_t qkey = 0;         // UD
};

Target target_of(const RcEndpoint& ep, std::size_t q, ibv_wr_opcode opcode, std::uint64_t remote_addr) {
    Target t;
    t.opcode = opcode;
    t.remote_addr = remote_addr;
    t.rkey = ep.remote_rkey;
    t.ah = ep.ah;
    t.qkey = ep.qkey();
    t.remote_qpn = ep.remote_qpn.empty() ? 0 : ep.remote_qpn[q];
    t.remote_srqn = ep.remote_srqn;
    return t;
}

// perftest's bandwidth tests move a message's remote address on by its size
// rounded up to a cache line, round a page (its cycle buffer): an atomic
// test's n-th message on a QP goes to line n mod 64 of that QP's page. With
// a post list, each WR of the list keeps the line of its place in it.
constexpr std::size_t kAtomicCycleBytes = 4096;
constexpr std::size_t kCacheLineBytes = 64;
std::uint64_t atomic_offset(int qp, int n) {
    return kAtomicCycleBytes * static_cast<std::uint64_t>(qp) +
           static_cast<std::uint64_t>(n) % (kAtomicCycleBytes / kCacheLineBytes) * kCacheLineBytes;
}

// Compare-and-swap 0 -> 1 and fetch-and-add 1, as perftest's atomic tests.
void prepare(ibv_send_wr& wr, ibv_sge& sge, const Target& t, std::uint8_t* local, std::uint32_t lkey,
             std::uint32_t size, unsigned flags, std::uint64_t wr_id) {
    sge = ibv_sge{reinterpret_cast<std::uintptr_t>(local), size, lkey};
    wr = ibv_send_wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = t.opcode;
    wr.send_flags = flags;
    wr.qp_type.xrc.remote_srqn = t.remote_srqn;
    if (t.ah) {
        wr.wr.ud.ah = t.ah;
        wr.wr.ud.remote_qpn = t.remote_qpn;
        wr.wr.ud.remote_qkey = t.qkey;
    } else if (t.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || t.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr.wr.atomic.remote_addr = t.remote_addr;
        wr.wr.atomic.rkey = t.rkey;
        wr.wr.atomic.compare_add = t.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? 1 : 0;
        wr.wr.atomic.swap = 1;
    } else {
        wr.wr.rdma.remote_addr = t.remote_addr;
        wr.wr.rdma.rkey = t.rkey;
    }
}

void post_one(ibv_qp* qp, const Target& t, std::uint8_t* local, std::uint32_t lkey, std::uint32_t size, unsigned flags,
              std::uint64_t wr_id) {
    ibv_sge sge{};
    ibv_send_wr wr{};
    prepare(wr, sge, t, local, lkey, size, flags, wr_id);
    ibv_send_wr* bad = nullptr;
    check(ibv_post_send(qp, &wr, &bad), "ibv_post_send");
}

void post_recv(RcEndpoint& ep, std::size_t q, std::uint8_t* buf, std::uint32_t size, std::uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), size, ep.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ep.post_recv(q, &wr);
}

// Opens the endpoint, or finds what the device refuses (the QP type, an
// SRQ, atomics): then both programs say what they found before either goes
// on, so a refusal stops both at set-up, and the client leaves it in
// refusal. Plain RC needs nothing the device could refuse and opens at once.
std::unique_ptr<RcEndpoint> open_endpoint(Host& h, const EndpointOptions& eo, Op op, const std::string& tag,
                                          std::string& refusal) {
    if (eo.qp_type == IBV_QPT_RC && !eo.srq && !eo.atomics) return std::make_unique<RcEndpoint>(h, eo);
    std::unique_ptr<RcEndpoint> ep;
    std::string why;
    try {
        ep = std::make_unique<RcEndpoint>(h, eo);
    } catch (const EndpointUnsupported& e) {
        using F = EndpointUnsupported::Feature;
        const char* qp_type = eo.qp_type == IBV_QPT_UC ? "uc" : eo.qp_type == IBV_QPT_XRC_SEND ? "xrc" : "ud";
        why = e.feature == F::Srq       ? std::string("--srq is not available: ") + e.what()
              : e.feature == F::Atomics ? std::string("--op ") + op_name(op) + " is not available: " + e.what()
                                        : std::string("--qp-type ") + qp_type + " is not available: " + e.what();
    }
    h.put(tag + "/refusal/" + std::to_string(h.index()), std::vector<std::uint8_t>(why.begin(), why.end()));
    const auto peer = h.get(tag + "/refusal/" + std::to_string(1 - h.index()));
    if (why.empty()) why.assign(peer.begin(), peer.end());
    if (!why.empty()) {
        if (h.index() == 0) refusal = why;
        return nullptr;
    }
    return ep;
}

}  // namespace

// Polls a byte the peer writes by RDMA, as perftest's write_lat does: one
// read per poll_memory cost. Only an adapter write to host memory can change
// the byte, so the thread sleeps until one and resumes on its polling grid,
// which gives the time a poll-by-poll loop would. Gives up when the fabric
// falls silent before the byte comes (StallWatch).
void spin_until(Host& h, const volatile std::uint8_t* p, std::uint8_t value) {
    const sim::Tick cost = std::max<sim::Tick>(1, h.node().driver().costs().poll_memory);
    const sim::Tick t0 = h.now();
    StallWatch watch(h);
    const pcie::HostMemory& memory = h.node().pcie().memory();
    sc_core::wait(sim::to_sc(cost));
    // A read does not see a write of its own instant (HostMemory::wrote_now).
    while (*p != value || memory.wrote_now(const_cast<const std::uint8_t*>(p), 1)) {
        watch.check("RDMA WRITE");
        host::sleep_to_next_useful_read(memory, t0, cost, watch.next_look() + cost);
    }
}

// Payload bytes are a pseudo-random pattern of (sim.seed, node): a run is a
// function of its seed.
void fill_pattern(Host& h, std::uint8_t* p, std::size_t n) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(h.system().config().get_int("sim.seed")) * 1000003u +
                        static_cast<std::uint64_t>(h.index()));
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(rng() >> 56);
}

// The bytes fill_pattern() gives node's buffer: what a receiver expects
// from that node.
std::vector<std::uint8_t> pattern_of(Host& h, int node, std::size_t n) {
    std::vector<std::uint8_t> v(n);
    std::mt19937_64 rng(static_cast<std::uint64_t>(h.system().config().get_int("sim.seed")) * 1000003u +
                        static_cast<std::uint64_t>(node));
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(rng() >> 56);
    return v;
}

// --verify: got must equal want; else the run fails naming the first bad
// offset (from the start of the message).
void verify_bytes(const std::uint8_t* got, const std::uint8_t* want, std::size_t n, std::uint32_t size,
                  const char* what) {
    const auto bad = std::mismatch(got, got + n, want);
    if (bad.first == got + n) return;
    std::ostringstream os;
    os << "--verify: " << what << " of " << size << " bytes: byte at offset " << (bad.first - got) << " is 0x"
       << std::hex << static_cast<int>(*bad.first) << ", the sender's pattern has 0x" << static_cast<int>(*bad.second);
    throw std::runtime_error(os.str());
}

sim::Tick stall_limit(const System& sys, std::uint64_t bytes_in_flight) {
    static const double kGtPerLane[] = {2.5, 5.0, 8.0, 16.0};
    double rate = hca::link_rate(sys.config()).data_bytes_per_s();
    for (int i = 0; i < sys.nodes(); ++i) {
        const sim::Config cfg = sys.node_config(i);
        const std::int64_t gen = cfg.get_int("pcie.gen");
        const double pcie_bytes_per_s = kGtPerLane[std::clamp<std::int64_t>(gen, 1, 4) - 1] * 1e9 *
                                        (gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0) / 8.0 *
                                        static_cast<double>(cfg.get_int("pcie.lanes"));
        const double pci_bytes_per_s =
            cfg.get_real("pci.clock_mhz") * 1e6 * static_cast<double>(cfg.get_int("pci.width_bits")) / 8.0;
        rate = std::min(rate, cfg.get_choice("host.bus") == "pci" ? pci_bytes_per_s : pcie_bytes_per_s);
    }
    const double drain_s = 2.0 * static_cast<double>(bytes_in_flight) / rate;
    // A lossy fabric may leave a request waiting out every retry.
    return 100000 * sim::kPsPerUs + kRcRetryBudget + static_cast<sim::Tick>(drain_s * 1e12);
}

// ACKs and answers that moved a requester of either node past what it had
// had acknowledged before.
std::uint64_t progress_acks(const System& sys) {
    return sys.counter("node0.hca.completer.progress_acks") + sys.counter("node1.hca.completer.progress_acks");
}

BandwidthRow bandwidth_row(std::uint32_t size, int iterations, sim::Tick t0, sim::Tick t1,
                           std::vector<sim::Tick> message_done, int tx_depth, double wall_seconds) {
    BandwidthRow r;
    r.wall_seconds = wall_seconds;
    r.bytes = size;
    r.iterations = static_cast<std::uint64_t>(iterations);
    const double secs = static_cast<double>(t1 - t0) / 1e12;
    r.bw_avg_MBps = static_cast<double>(size) * iterations / secs / kPerftestMB;
    r.msg_rate_Mpps = iterations / secs / 1e6;
    // Peak: the best rate over any window of half the run (at least tx_depth
    // messages).
    std::sort(message_done.begin(), message_done.end());
    const std::size_t window = static_cast<std::size_t>(std::max(tx_depth, iterations / 2));
    double peak = r.bw_avg_MBps;
    for (std::size_t hi = window; hi < message_done.size(); ++hi) {
        const sim::Tick dt = message_done[hi] - message_done[hi - window];
        if (dt > 0)
            peak = std::max(peak, static_cast<double>(size) * static_cast<double>(window) /
                                      (static_cast<double>(dt) / 1e12) / kPerftestMB);
    }
    r.bw_peak_MBps = peak;
    return r;
}

std::vector<BandwidthRow> combined_rows(const std::vector<std::uint32_t>& sizes, int iterations,
                                        const std::vector<std::vector<ClientRun>>& runs, int tx_depth) {
    std::vector<BandwidthRow> rows;
    for (std::size_t i = 0; i < runs.front().size(); ++i) {
        const std::uint32_t size = sizes[i];
        sim::Tick t0 = runs.front()[i].t0, t1 = runs.front()[i].t1;
        double wall = 0;
        std::vector<sim::Tick> message_done;
        for (auto& r : runs) {
            if (i >= r.size()) throw std::runtime_error("a bandwidth client ended before size " + std::to_string(size));
            t0 = std::min(t0, r[i].t0);
            t1 = std::max(t1, r[i].t1);
            wall = std::max(wall, r[i].wall_seconds);
            message_done.insert(message_done.end(), r[i].message_done.begin(), r[i].message_done.end());
        }
        const int clients = static_cast<int>(runs.size());
        rows.push_back(bandwidth_row(size, iterations * clients, t0, t1, std::move(message_done), tx_depth, wall));
    }
    return rows;
}

namespace {

// What the workloads ask of the device, checked against what it reports
// (the same parameters the verbs device reports in ibv_query_device and
// ibv_query_port), so a bad combination is refused before anything is
// built, naming the option and the limit.
std::string more_than_allowed(const std::string& what, const std::string& key, std::uint64_t limit,
                              const std::string& unit = "") {
    return what + " is more than the device allows: " + key + " = " + std::to_string(limit) +
           (unit.empty() ? "" : " " + unit);
}

void check_sizes(const std::vector<std::uint32_t>& sizes) {
    if (sizes.empty()) throw std::invalid_argument("no message sizes (--sizes)");
    for (std::uint32_t s : sizes)
        if (s < 1 || s > kMaxMessageBytes)
            throw std::invalid_argument("invalid size " + std::to_string(s) + " in --sizes: expected 1 to " +
                                        std::to_string(kMaxMessageBytes) + " bytes");
}

void check_endpoint(const EndpointOptions& eo, int mtu, const sim::Config& cfg) {
    const hca::HcaParams p = hca::HcaParams::from(cfg);
    const auto port_mtu = static_cast<std::uint64_t>(cfg.get_int("port.max_mtu"));
    if (static_cast<std::uint64_t>(mtu) > port_mtu)
        throw std::invalid_argument(more_than_allowed("--mtu " + std::to_string(mtu), "port.max_mtu", port_mtu, "bytes"));
    if (eo.max_inline > p.max_inline)
        throw std::invalid_argument(more_than_allowed("--inline " + std::to_string(eo.max_inline), "hca.max_inline",
                                                      p.max_inline, "bytes"));
    if (static_cast<std::uint64_t>(eo.qps) > p.max_qp)
        throw std::invalid_argument(more_than_allowed("--qps " + std::to_string(eo.qps), "hca.max_qp", p.max_qp));
    if (eo.max_send_wr > p.max_qp_wr)
        throw std::invalid_argument(more_than_allowed(
            std::to_string(eo.max_send_wr) + " work requests per send queue (--tx-depth)", "hca.max_qp_wr", p.max_qp_wr));
    if (eo.max_recv_wr > p.max_qp_wr)
        throw std::invalid_argument(more_than_allowed(std::to_string(eo.max_recv_wr) + " work requests per receive queue",
                                                      "hca.max_qp_wr", p.max_qp_wr));
    if (eo.max_sge > p.max_sge)
        throw std::invalid_argument(more_than_allowed(std::to_string(eo.max_sge) + " scatter/gather entries per work request",
                                                      "hca.max_sge", p.max_sge));
    if (p.max_cq < 2) throw std::invalid_argument(more_than_allowed("2 completion queues", "hca.max_cq", p.max_cq));
}

// What both workloads take from the device: outstanding RDMA READs per QP
// as perftest does, up to 16 or the device's limit if lower; the QP type,
// a shared receive queue, and atomic access to the buffer when asked for.
EndpointOptions device_endpoint(const sim::Config& cfg, QpType qp_type, bool srq, Op op) {
    EndpointOptions eo;
    eo.max_rd_atomic = static_cast<std::uint8_t>(
        std::min<std::uint32_t>(eo.max_rd_atomic, hca::HcaParams::from(cfg).max_qp_rd_atom));
    eo.qp_type = verbs_qp_type(qp_type);
    eo.qkey = kWorkloadQkey;
    eo.srq = srq;
    eo.atomics = is_atomic(op);
    if (eo.atomics) eo.access |= IBV_ACCESS_REMOTE_ATOMIC;
    return eo;
}

// What a QP type and an operation allow: UC and UD have no RDMA READ or
// atomics (UD has SEND only), a UD message fits one packet, an atomic works
// on 8 bytes.
void check_transport(QpType qp_type, Op op, const std::vector<std::uint32_t>& sizes, int mtu) {
    const std::string refusal = qp_type_refusal(qp_type, op);
    if (!refusal.empty()) throw std::invalid_argument(refusal);
    for (std::uint32_t s : sizes) {
        if (is_atomic(op) && s != kAtomicBytes)
            throw std::invalid_argument(std::string("--op ") + op_name(op) + " works on 8-byte messages: --sizes " +
                                        std::to_string(s) + " is not 8");
        if (qp_type == QpType::Ud && s > static_cast<std::uint32_t>(mtu))
            throw std::invalid_argument("--sizes " + std::to_string(s) +
                                        " is more than a UD message carries with --qp-type ud: at most the path MTU, " +
                                        std::to_string(mtu) + " bytes (--mtu)");
    }
}

}  // namespace

// perftest's send latency test posts its RX depth of receives (512, at
// most the iterations) and reposts one per arrival only while the ones
// still posted fall short of the arrivals to come.
std::uint32_t latency_rx_depth(const LatencyOptions& opt, const sim::Config& cfg) {
    const std::uint64_t max_qp_wr = hca::HcaParams::from(cfg).max_qp_wr;
    return static_cast<std::uint32_t>(std::max<std::uint64_t>(
        1, std::min<std::uint64_t>({kPerftestSendRxDepth, static_cast<std::uint64_t>(std::max(opt.iterations, 1)), max_qp_wr})));
}

EndpointOptions latency_endpoint(const LatencyOptions& opt, const sim::Config& cfg) {
    EndpointOptions eo = device_endpoint(cfg, opt.qp_type, opt.srq, opt.op);
    const std::uint32_t max_size = opt.sizes.empty() ? 1 : *std::max_element(opt.sizes.begin(), opt.sizes.end());
    eo.buffer_bytes = 2 * static_cast<std::size_t>(max_size) + 4096;
    eo.max_inline = opt.inline_max;
    eo.mtu = mtu_enum(opt.mtu);
    eo.max_send_wr = 128;
    eo.max_recv_wr = latency_rx_depth(opt, cfg);
    eo.rdma_cm = opt.rdma_cm;
    if (eo.rdma_cm && eo.qp_type == IBV_QPT_UD) eo.qkey = RDMA_UDP_QKEY;  // what SIDR gives
    return eo;
}

EndpointOptions bandwidth_endpoint(const BandwidthOptions& opt, const sim::Config& cfg) {
    EndpointOptions eo = device_endpoint(cfg, opt.qp_type, opt.srq, opt.op);
    const std::uint32_t max_size = opt.sizes.empty() ? 1 : *std::max_element(opt.sizes.begin(), opt.sizes.end());
    // Each QP streams from and into its own slice of the buffer.
    eo.buffer_bytes = static_cast<std::size_t>(max_size) * 2 + 4096;
    // Atomics go round the cache lines of a page of their own per QP.
    if (is_atomic(opt.op)) eo.buffer_bytes += kAtomicCycleBytes * static_cast<std::size_t>(std::max(opt.qps, 1));
    eo.qps = opt.qps;
    eo.rdma_cm = opt.rdma_cm;
    if (eo.rdma_cm && eo.qp_type == IBV_QPT_UD) eo.qkey = RDMA_UDP_QKEY;  // what SIDR gives
    eo.dual_port = opt.dual_port;
    eo.max_inline = opt.inline_max;
    eo.mtu = mtu_enum(opt.mtu);
    eo.max_send_wr = static_cast<std::uint32_t>(opt.tx_depth);
    // Receives: two TX depths' worth (perftest's rx depth), as many as the
    // device's queues hold.
    const std::uint64_t max_qp_wr = hca::HcaParams::from(cfg).max_qp_wr;
    eo.max_recv_wr = static_cast<std::uint32_t>(std::min<std::uint64_t>(2 * static_cast<std::uint64_t>(opt.tx_depth), max_qp_wr));
    // One shared receive queue holds the receives of every QP (XRC: always).
    if (opt.srq || opt.qp_type == QpType::Xrc)
        eo.max_recv_wr = static_cast<std::uint32_t>(std::min<std::uint64_t>(
            2 * static_cast<std::uint64_t>(opt.tx_depth) * static_cast<std::uint64_t>(std::max(opt.qps, 1)),
            hca::HcaParams::from(cfg).max_srq_wr));
    const std::uint64_t cqes = bandwidth_cq_entries(opt.qps, opt.tx_depth);
    eo.cq_depth = static_cast<int>(std::min<std::uint64_t>(cqes, std::numeric_limits<int>::max()));
    eo.max_sge = 1;
    return eo;
}

std::uint64_t bandwidth_cq_entries(int qps, int tx_depth) {
    return std::max<std::uint64_t>(1024, static_cast<std::uint64_t>(qps) * static_cast<std::uint64_t>(tx_depth) * 2 + 16);
}

void check_latency_options(const LatencyOptions& opt, const sim::Config& cfg) {
    check_sizes(opt.sizes);
    if (opt.iterations < 1) throw std::invalid_argument("invalid -n/--iters " + std::to_string(opt.iterations) + ": expected at least 1");
    check_transport(opt.qp_type, opt.op, opt.sizes, opt.mtu);
    const EndpointOptions eo = latency_endpoint(opt, cfg);
    check_endpoint(eo, opt.mtu, cfg);
    const hca::HcaParams p = hca::HcaParams::from(cfg);
    if (static_cast<std::uint64_t>(eo.cq_depth) > p.max_cqe)
        throw std::invalid_argument(more_than_allowed("completion queues of " + std::to_string(eo.cq_depth) + " entries",
                                                      "hca.max_cqe", p.max_cqe));
}

void check_bandwidth_options(const BandwidthOptions& opt, const sim::Config& cfg) {
    check_sizes(opt.sizes);
    if (opt.iterations < 1) throw std::invalid_argument("invalid -n/--iters " + std::to_string(opt.iterations) + ": expected at least 1");
    if (opt.tx_depth < 1) throw std::invalid_argument("invalid --tx-depth " + std::to_string(opt.tx_depth) + ": expected at least 1");
    if (opt.qps < 1) throw std::invalid_argument("invalid --qps " + std::to_string(opt.qps) + ": expected at least 1");
    if (opt.cq_mod < 1) throw std::invalid_argument("invalid completion moderation " + std::to_string(opt.cq_mod));
    if (opt.inline_max > 0 && opt.op == Op::Read)
        throw std::invalid_argument("--inline does not apply to --op read (an RDMA READ request carries no data)");
    if (opt.inline_max > 0 && is_atomic(opt.op))
        throw std::invalid_argument(std::string("--inline does not apply to --op ") + op_name(opt.op) +
                                    " (an atomic request carries its operands in the work request)");
    check_transport(opt.qp_type, opt.op, opt.sizes, opt.mtu);
    if (opt.post_list < 1)
        throw std::invalid_argument("invalid --post-list " + std::to_string(opt.post_list) + ": expected at least 1");
    if (opt.post_list > opt.tx_depth)
        throw std::invalid_argument("--post-list " + std::to_string(opt.post_list) + " is more than --tx-depth " +
                                    std::to_string(opt.tx_depth) + ": a list must fit the send queue");
    if (opt.threads < 1) throw std::invalid_argument("invalid --threads " + std::to_string(opt.threads) + ": expected at least 1");
    if (opt.threads > 1 && opt.rdma_cm)
        throw std::invalid_argument("--threads " + std::to_string(opt.threads) +
                                    " connects through the out-of-band exchange only, not rdma_cm");
    if (opt.bidirectional && opt.rdma_cm)
        throw std::invalid_argument("--bidirectional connects through the out-of-band exchange only, not rdma_cm");
    if (opt.dual_port) {
        if (cfg.get_int("port.count") < 2)
            throw std::invalid_argument("--dual-port needs adapters with two ports: port.count = " +
                                        std::to_string(cfg.get_int("port.count")) + " (set port.count=2)");
        if (opt.qp_type != QpType::Rc && opt.qp_type != QpType::Uc)
            throw std::invalid_argument("--dual-port is for --qp-type rc and uc");
        if (opt.rdma_cm) throw std::invalid_argument("--dual-port connects through the out-of-band exchange only, not rdma_cm");
    }
    const EndpointOptions eo = bandwidth_endpoint(opt, cfg);
    check_endpoint(eo, opt.mtu, cfg);
    const hca::HcaParams p = hca::HcaParams::from(cfg);
    // Each node has the QPs of every thread's client and server.
    const std::uint64_t pairs = static_cast<std::uint64_t>(opt.threads) * (opt.bidirectional ? 2 : 1);
    const std::uint64_t all_qps = static_cast<std::uint64_t>(opt.qps) * pairs;
    if (pairs > 1 && all_qps > p.max_qp)
        throw std::invalid_argument(more_than_allowed((opt.threads > 1 ? "--threads " + std::to_string(opt.threads) + " x " : std::string()) +
                                                          "--qps " + std::to_string(opt.qps) +
                                                          (opt.bidirectional ? " x 2 (--bidirectional)" : "") + " = " +
                                                          std::to_string(all_qps) + " QPs per node",
                                                      "hca.max_qp", p.max_qp));
    const std::uint64_t cqes = bandwidth_cq_entries(opt.qps, opt.tx_depth);
    if (cqes > p.max_cqe && cqes == bandwidth_cq_entries(1, 1))
        throw std::invalid_argument(more_than_allowed("completion queues of " + std::to_string(cqes) + " entries",
                                                      "hca.max_cqe", p.max_cqe));
    if (cqes > p.max_cqe) {
        const std::uint64_t most_qps = p.max_cqe < 16 ? 0 : (p.max_cqe - 16) / (2 * static_cast<std::uint64_t>(opt.tx_depth));
        throw std::invalid_argument(more_than_allowed("--qps " + std::to_string(opt.qps) + " x --tx-depth " +
                                                          std::to_string(opt.tx_depth) + " needs completion queues of " +
                                                          std::to_string(cqes) + " entries (2 x QPs x TX depth + 16), which",
                                                      "hca.max_cqe", p.max_cqe) +
                                    " (at this TX depth at most " + std::to_string(most_qps) + " QPs)");
    }
}

std::vector<LatencyRow> run_latency(System& sys, const LatencyOptions& opt) {
    check_latency_options(opt, sys.config());
    const std::uint32_t max_size = *std::max_element(opt.sizes.begin(), opt.sizes.end());
    std::vector<LatencyRow> rows;
    const EndpointOptions eo = latency_endpoint(opt, sys.config());
    const int rx_depth = static_cast<int>(eo.max_recv_wr);
    // A UD receive has the GRH area in front of the data.
    const std::uint32_t recv_bytes = max_size + (opt.qp_type == QpType::Ud ? kGrhBytes : 0);
    std::string refusal;

    auto program = [&](Host& h) {
        const bool client = h.index() == 0;
        const std::unique_ptr<RcEndpoint> opened = open_endpoint(h, eo, opt.op, "lat", refusal);
        if (!opened) return;
        RcEndpoint& ep = *opened;
        // Only the outgoing half: the incoming half starts at zero, below
        // every tag the peer writes.
        fill_pattern(h, ep.buf, max_size);
        const std::vector<std::uint8_t> peer = opt.verify ? pattern_of(h, 1 - h.index(), max_size) : std::vector<std::uint8_t>{};
        ep.connect("lat", 1 - h.index());
        ibv_qp* qp = ep.qps[0];
        std::uint8_t* out = ep.buf;                   // what we send
        std::uint8_t* in = ep.buf + max_size + 2048;  // where the peer writes or we receive
        const std::uint64_t peer_in = ep.remote_addr + max_size + 2048;
        const Target ping = target_of(ep, 0, opt.op == Op::Write ? IBV_WR_RDMA_WRITE : IBV_WR_SEND, peer_in);
        // Receives are sized for the largest message, so they serve every
        // size; each size starts with rx_depth of them posted.
        int recv_posted = 0;
        // What a ping brought: the peer's pattern with its tag in the last byte.
        const std::uint32_t data_at = opt.op == Op::Send && opt.qp_type == QpType::Ud ? kGrhBytes : 0;
        auto check_ping = [&](std::uint32_t size, std::uint8_t tag, std::uint32_t byte_len) {
            if (!opt.verify) return;
            const char* what = opt.op == Op::Write ? "RDMA WRITE" : "SEND";
            if (opt.op == Op::Send && byte_len != size + data_at)
                throw std::runtime_error(std::string("--verify: ") + what + " of " + std::to_string(size) +
                                         " bytes completed with byte_len " + std::to_string(byte_len));
            const std::uint8_t* got = in + data_at;
            verify_bytes(got, peer.data(), size - 1, size, what);
            verify_bytes(got + size - 1, &tag, 1, size, what);
        };
        for (std::uint32_t size : opt.sizes) {
            // Receives are posted before the peers meet, as perftest does: a
            // UD or UC ping that found none would be lost, however slowly
            // the host posts them.
            if (opt.op == Op::Send)
                for (; recv_posted < rx_depth; ++recv_posted) post_recv(ep, 0, in, recv_bytes, 0);
            h.barrier("size" + std::to_string(size));
            // The tag goes over this byte of the pattern; put back once both
            // sides are done with the size (a DMA read of the last message
            // may still be due), so the next size sends the pattern again.
            const std::uint8_t untagged = out[size - 1];
            int received = 0;
            auto receive = [&]() {
                const auto wc = poll_n(h, ep.recv_cq, 1, "receive");
                --recv_posted;
                if (++received + rx_depth <= opt.iterations) {
                    post_recv(ep, 0, in, recv_bytes, 0);
                    ++recv_posted;
                }
                return wc[0].byte_len;
            };
            std::vector<sim::Tick> samples;
            samples.reserve(static_cast<std::size_t>(opt.iterations));
            int outstanding = 0;
            const unsigned inl = size <= opt.inline_max ? IBV_SEND_INLINE : 0;
            for (int it = 0; it < opt.iterations; ++it) {
                const std::uint8_t tag = static_cast<std::uint8_t>(it % 255 + 1);
                // The client marks its buffer before it posts; the server only
                // after the ping arrived, when its previous write has been read.
                if (client) out[size - 1] = tag;
                if (opt.op == Op::Read || is_atomic(opt.op)) {
                    // The full round trip, as perftest reports for reads and atomics.
                    if (!client) break;
                    const sim::Tick t0 = h.now();
                    h.read_clock();  // perftest's time stamp of the iteration
                    post_one(qp, target_of(ep, 0, wr_opcode(opt.op), ep.remote_addr), in, ep.mr->lkey, size,
                             IBV_SEND_SIGNALED, static_cast<std::uint64_t>(it));
                    poll_n(h, ep.send_cq, 1, opt.op == Op::Read ? "RDMA READ" : "atomic");
                    samples.push_back(h.now() - t0);
                    if (opt.verify) {
                        verify_bytes(in, peer.data(), size, size, "RDMA READ");
                        std::memset(in, 0, size);  // the next read must bring them again
                    }
                    continue;
                }
                const sim::Tick t0 = h.now();
                if (!client) {
                    // The server answers each ping.
                    if (opt.op == Op::Write) {
                        spin_until(h, in + size - 1, tag);
                        check_ping(size, tag, size);
                    } else {
                        check_ping(size, tag, receive());
                    }
                }
                out[size - 1] = tag;
                // Signal every 16th post: its completion retires the posts
                // before it, so the send queue drains. A size of more posts
                // leaves at most 15 unsignaled ones, which the next size's
                // 16th post retires; a size of fewer has no 16th post, so
                // its last one is signaled instead.
                const bool sixteenth = it % kLatencySignalEvery == kLatencySignalEvery - 1;
                const bool last_of_short_size = it == opt.iterations - 1 && opt.iterations < kLatencySignalEvery;
                const unsigned sig = sixteenth || last_of_short_size ? IBV_SEND_SIGNALED : 0;
                if (sig) ++outstanding;
                h.read_clock();  // perftest's time stamp of the iteration, on both sides
                post_one(qp, ping, out, ep.mr->lkey, size, sig | inl, static_cast<std::uint64_t>(it));
                if (client) {
                    if (opt.op == Op::Write) {
                        spin_until(h, in + size - 1, tag);
                        check_ping(size, tag, size);
                    } else {
                        check_ping(size, tag, receive());
                    }
                    // Ping-pong: half the round trip is the one-way latency.
                    samples.push_back((h.now() - t0) / 2);
                }
                if (outstanding) reap(ep.send_cq, outstanding);
            }
            while (outstanding > 0) reap(ep.send_cq, outstanding);
            h.barrier("done" + std::to_string(size));
            if (opt.verify) out[size - 1] = untagged;
            if (client) rows.push_back(latency_stats(size, std::move(samples)));
        }
    };
    sys.run({program, program}, {"latency client", "latency server"});
    if (!refusal.empty()) throw Unsupported(refusal);
    return rows;
}

namespace {

// The bandwidth workload; per_qp, when given, receives each QP's messages
// and rate of the last size.
std::vector<BandwidthRow> bandwidth(System& sys, const BandwidthOptions& opt, std::vector<QpRateRow>* per_qp) {
    check_bandwidth_options(opt, sys.config());
    const std::uint32_t max_size = *std::max_element(opt.sizes.begin(), opt.sizes.end());
    const EndpointOptions eo = bandwidth_endpoint(opt, sys.config());
    const int recv_window = static_cast<int>(eo.max_recv_wr);
    // A UD receive has the GRH area in front of the data.
    const std::uint32_t recv_bytes = max_size + (opt.qp_type == QpType::Ud ? kGrhBytes : 0);
    // UC and UD drop a message that finds no receive: the receiver then
    // stops when the sender is done and nothing more arrives.
    const bool unreliable = opt.qp_type != QpType::Rc;
    std::string refusal;
    // Posting threads per node: pair t's client runs on node 0 and its
    // server on node 1, each pair with QPs, CQs and buffers of its own, as
    // that many perftest processes on as many cores. Bidirectional runs
    // twice the pairs, every odd one with its client on node 1.
    const int threads = opt.threads * (opt.bidirectional ? 2 : 1);  // at least 1 (check_bandwidth_options)
    auto client_node = [&opt](int thread) { return opt.bidirectional && thread % 2 == 1 ? 1 : 0; };
    // Set by a client when it has sent every message of a size (the
    // out-of-band channel, as perftest's closing socket exchange).
    std::vector<int> sender_done(static_cast<std::size_t>(threads), 0);
    // What each client measured at each size, combined after the run.
    std::vector<std::vector<ClientRun>> runs(static_cast<std::size_t>(threads));
    std::vector<std::vector<QpRateRow>> qp_rows(static_cast<std::size_t>(threads));

    // A signaled completion at least every tx_depth posts, or the sender
    // would wait for one that never comes (perftest's rule too). With post
    // lists, the last request of each list is signaled, as perftest does.
    const int cq_mod = opt.post_list > 1 ? opt.post_list : std::max(1, std::min(opt.cq_mod, opt.tx_depth));
    auto program = [&](Host& h, int thread) {
        const bool client = h.index() == client_node(thread);
        const std::string tag = thread == 0 ? "bw" : "bw.thread" + std::to_string(thread);
        int& done_sending = sender_done[static_cast<std::size_t>(thread)];
        // --dual-port: the ports alternate over the QPs of all threads.
        EndpointOptions thread_eo = eo;
        thread_eo.first_port = 1 + (thread * opt.qps) % 2;
        const std::unique_ptr<RcEndpoint> opened = open_endpoint(h, thread_eo, opt.op, tag, refusal);
        if (!opened) return;
        RcEndpoint& ep = *opened;
        fill_pattern(h, ep.buf, eo.buffer_bytes);
        const std::vector<std::uint8_t> peer =
            opt.verify ? pattern_of(h, 1 - h.index(), eo.buffer_bytes) : std::vector<std::uint8_t>{};
        ep.connect(tag, 1 - h.index());
        const int nq = static_cast<int>(ep.qps.size());
        // Receives a size left posted (UC and UD: for messages that were
        // dropped); they serve the next size, sized for the largest.
        std::vector<int> left(static_cast<std::size_t>(nq), 0);
        int srq_left = 0;
        for (std::uint32_t size : opt.sizes) {
            const int iters = opt.iterations;
            std::vector<int> posted(left), done(static_cast<std::size_t>(nq), 0);
            auto quota = [&](int q) { return iters / nq + (q < iters % nq ? 1 : 0); };
            int srq_posted = srq_left;  // receives posted to the shared receive queue
            if (opt.op == Op::Send && !client) {
                if (ep.srq) {
                    for (; srq_posted < std::min(iters, recv_window); ++srq_posted)
                        post_recv(ep, 0, ep.buf + max_size, recv_bytes, 0);
                } else {
                    for (int q = 0; q < nq; ++q)
                        for (auto& p = posted[static_cast<std::size_t>(q)]; p < std::min(quota(q), recv_window); ++p)
                            post_recv(ep, static_cast<std::size_t>(q), ep.buf + max_size, recv_bytes,
                                      static_cast<std::uint64_t>(q));
                }
            }
            done_sending = 0;
            h.barrier("bw" + std::to_string(size));
            if (client) {
                // When each message completed: a signaled completion covers the
                // unsignaled messages of its QP since the previous one, which
                // are spread evenly over that interval.
                std::vector<sim::Tick> message_done;
                message_done.reserve(static_cast<std::size_t>(iters));
                std::vector<sim::Tick> qp_last(static_cast<std::size_t>(nq), 0);
                // perftest time-stamps every post and completion for its peak
                // figure, unless a run has more than 20000 iterations.
                const bool peak = iters <= kPerftestPeakIterations;
                const sim::Tick t0 = h.now();
                const auto wall0 = std::chrono::steady_clock::now();
                int total_done = 0;
                ibv_wc wc[32];
                const unsigned inl =
                    (size <= opt.inline_max && opt.op != Op::Read && !is_atomic(opt.op)) ? IBV_SEND_INLINE : 0;
                sim::Tick last_progress = t0;
                const std::uint64_t in_flight = std::min<std::uint64_t>(
                    static_cast<std::uint64_t>(iters), static_cast<std::uint64_t>(nq) * static_cast<std::uint64_t>(opt.tx_depth));
                const sim::Tick stall = stall_limit(sys, in_flight * size);
                std::vector<Target> targets;
                for (int q = 0; q < nq; ++q)
                    targets.push_back(target_of(ep, static_cast<std::size_t>(q), wr_opcode(opt.op), ep.remote_addr + max_size));
                // One list of work requests, linked, posted with one call.
                std::vector<ibv_send_wr> wrs(static_cast<std::size_t>(opt.post_list));
                std::vector<ibv_sge> sges(static_cast<std::size_t>(opt.post_list));
                // Post to every QP once, then only to QPs whose completions
                // made room: the loop costs O(completions), not O(QPs).
                std::vector<int> refill;
                for (int q = 0; q < nq; ++q) refill.push_back(q);
                std::uint64_t acks_seen = progress_acks(sys);
                while (total_done < iters) {
                    if (h.now() - last_progress > stall) {
                        // Unsignaled messages complete unseen: over a lossy
                        // link a run of them may take many timeouts, each
                        // getting further. ACKs that moved a requester on
                        // are progress too.
                        const std::uint64_t acks = progress_acks(sys);
                        if (acks == acks_seen)
                            throw std::runtime_error("bandwidth run made no progress for " +
                                                     std::to_string(stall / sim::kPsPerUs / 1000) +
                                                     " ms of simulated time");
                        acks_seen = acks;
                        last_progress = h.now();
                    }
                    for (int q : refill) {
                        auto& p = posted[static_cast<std::size_t>(q)];
                        auto& d = done[static_cast<std::size_t>(q)];
                        for (;;) {
                            // A list goes out whole or waits for room.
                            const int k = std::min(opt.post_list, quota(q) - p);
                            if (k < 1 || p - d + k > opt.tx_depth) break;
                            for (int j = 0; j < k; ++j) {
                                ++p;
                                const bool sig = p % cq_mod == 0 || p == quota(q);
                                Target t = targets[static_cast<std::size_t>(q)];
                                std::uint8_t* local = ep.buf;
                                if (is_atomic(opt.op)) {
                                    const std::uint64_t at = atomic_offset(q, opt.post_list == 1 ? p - 1 : j);
                                    t.remote_addr += at;
                                    local += at;
                                }
                                prepare(wrs[static_cast<std::size_t>(j)], sges[static_cast<std::size_t>(j)],
                                        t, local, ep.mr->lkey, size,
                                        (sig ? IBV_SEND_SIGNALED : 0) | inl,
                                        (static_cast<std::uint64_t>(q) << 32) | static_cast<std::uint64_t>(p));
                                if (j > 0) wrs[static_cast<std::size_t>(j) - 1].next = &wrs[static_cast<std::size_t>(j)];
                            }
                            if (peak) h.read_clock();  // perftest's tposted
                            ibv_send_wr* bad = nullptr;
                            check(ibv_post_send(ep.qps[static_cast<std::size_t>(q)], wrs.data(), &bad), "ibv_post_send");
                        }
                    }
                    refill.clear();
                    const int n = ibv_poll_cq(ep.send_cq, 32, wc);
                    for (int i = 0; i < n; ++i) {
                        if (wc[i].status != IBV_WC_SUCCESS)
                            throw std::runtime_error(std::string("bandwidth completion: ") + ibv_wc_status_str(wc[i].status));
                        if (peak) h.read_clock();  // perftest's tcompleted
                        const int q = static_cast<int>(wc[i].wr_id >> 32);
                        const int upto = static_cast<int>(wc[i].wr_id & 0xffffffffu);
                        auto& d = done[static_cast<std::size_t>(q)];
                        sim::Tick& prev = qp_last[static_cast<std::size_t>(q)];
                        if (prev == 0) prev = t0;
                        const int k = upto - d;
                        for (int j = 1; j <= k; ++j)
                            message_done.push_back(prev + (h.now() - prev) * static_cast<sim::Tick>(j) / static_cast<sim::Tick>(k));
                        prev = h.now();
                        total_done += k;
                        d = upto;
                        refill.push_back(q);
                        last_progress = h.now();
                    }
                }
                const sim::Tick t1 = h.now();
                done_sending = 1;
                if (per_qp) {
                    auto& qp_rate = qp_rows[static_cast<std::size_t>(thread)];
                    qp_rate.clear();
                    for (int q = 0; q < nq; ++q) {
                        QpRateRow r;
                        r.qp = thread * nq + q;
                        r.messages = static_cast<std::uint64_t>(done[static_cast<std::size_t>(q)]);
                        const sim::Tick last = qp_last[static_cast<std::size_t>(q)];
                        r.msg_rate_Mpps = last > t0 ? static_cast<double>(r.messages) / (static_cast<double>(last - t0) / 1e12) / 1e6 : 0;
                        qp_rate.push_back(r);
                    }
                }
                runs[static_cast<std::size_t>(thread)].push_back(
                    {t0, t1, std::move(message_done),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count()});
            } else if (opt.op == Op::Send) {
                // Repost what each poll returned as one chained list: one
                // doorbell per batch, as perftest's receiver does.
                int received = 0;
                std::vector<int> got(static_cast<std::size_t>(nq), 0);
                ibv_wc wc[32];
                std::vector<ibv_sge> sges(32);
                std::vector<ibv_recv_wr> wrs(32);
                auto repost = [&](std::size_t q, int k, std::uint64_t wr_id) {
                    for (int i = 0; i < k; ++i) {
                        sges[static_cast<std::size_t>(i)] = {reinterpret_cast<std::uintptr_t>(ep.buf + max_size), recv_bytes, ep.mr->lkey};
                        wrs[static_cast<std::size_t>(i)] = ibv_recv_wr{};
                        wrs[static_cast<std::size_t>(i)].wr_id = wr_id;
                        wrs[static_cast<std::size_t>(i)].sg_list = &sges[static_cast<std::size_t>(i)];
                        wrs[static_cast<std::size_t>(i)].num_sge = 1;
                        wrs[static_cast<std::size_t>(i)].next = i + 1 < k ? &wrs[static_cast<std::size_t>(i) + 1] : nullptr;
                    }
                    ep.post_recv(q, wrs.data());
                };
                // UC and UD: how long the receiver waits for more once the
                // sender is done (the run's stall limit for what is in flight).
                const sim::Tick drain = stall_limit(sys, static_cast<std::uint64_t>(recv_window) * size);
                sim::Tick idle_since = 0;
                while (received < iters) {
                    const int n = ibv_poll_cq(ep.recv_cq, 32, wc);
                    if (unreliable) {
                        if (n > 0 || !done_sending) idle_since = h.now();
                        else if (h.now() - idle_since > drain) break;
                    }
                    std::vector<int> per_qp_received(static_cast<std::size_t>(nq), 0);
                    for (int i = 0; i < n; ++i) {
                        if (wc[i].status != IBV_WC_SUCCESS)
                            throw std::runtime_error(std::string("receive completion: ") + ibv_wc_status_str(wc[i].status));
                        if (opt.verify && wc[i].byte_len != size + (recv_bytes - max_size))
                            throw std::runtime_error("--verify: SEND of " + std::to_string(size) +
                                                     " bytes completed with byte_len " + std::to_string(wc[i].byte_len));
                        ++received;
                        ++per_qp_received[static_cast<std::size_t>(wc[i].wr_id)];
                        ++got[static_cast<std::size_t>(wc[i].wr_id)];
                    }
                    if (ep.srq) {
                        const int k = std::min(n, iters - srq_posted);
                        if (k > 0) repost(0, k, 0);
                        srq_posted += std::max(k, 0);
                        continue;
                    }
                    for (int q = 0; q < nq; ++q) {
                        auto& p = posted[static_cast<std::size_t>(q)];
                        const int k = std::min(per_qp_received[static_cast<std::size_t>(q)], quota(q) - p);
                        if (k <= 0) continue;
                        repost(static_cast<std::size_t>(q), k, static_cast<std::uint64_t>(q));
                        p += k;
                    }
                }
                srq_left = srq_posted - received;
                if (!ep.srq)
                    for (int q = 0; q < nq; ++q)
                        left[static_cast<std::size_t>(q)] = posted[static_cast<std::size_t>(q)] - got[static_cast<std::size_t>(q)];
            }
            h.barrier("bwdone" + std::to_string(size));
            if (opt.verify) {
                // Every message of a size carries the same bytes to the same
                // place, over what the last size or the receiver's own
                // pattern left there: all of them must be the sender's.
                if (opt.op == Op::Read && client)
                    verify_bytes(ep.buf, peer.data() + max_size, size, size, "RDMA READ");
                else if (opt.op != Op::Read && !client)
                    verify_bytes(ep.buf + max_size + (recv_bytes - max_size), peer.data(), size, size,
                                 opt.op == Op::Write ? "RDMA WRITE" : "SEND");
            }
        }
    };
    std::vector<System::Program> programs;
    std::vector<std::string> names;
    for (int t = 0; t < threads; ++t) {
        const std::string suffix = threads > 1 ? " " + std::to_string(t) : "";
        // Program i runs on node i mod 2.
        const bool reversed = client_node(t) == 1;
        for (const char* role : {"bandwidth client", "bandwidth server"}) {
            programs.push_back([&program, t](Host& h) { program(h, t); });
            names.push_back(role + suffix);
        }
        if (reversed) {
            std::swap(programs[programs.size() - 1], programs[programs.size() - 2]);
            std::swap(names[names.size() - 1], names[names.size() - 2]);
        }
    }
    sys.run(programs, names);
    if (!refusal.empty()) throw Unsupported(refusal);
    std::vector<BandwidthRow> rows = combined_rows(opt.sizes, opt.iterations, runs, opt.tx_depth);
    if (per_qp) {
        per_qp->clear();
        for (const auto& q : qp_rows) per_qp->insert(per_qp->end(), q.begin(), q.end());
    }
    return rows;
}

}  // namespace

std::vector<BandwidthRow> run_bandwidth(System& sys, const BandwidthOptions& opt) { return bandwidth(sys, opt, nullptr); }

MsgRateResult run_msgrate(System& sys, const BandwidthOptions& opt) {
    if (opt.sizes.size() != 1) throw std::invalid_argument("a message-rate run has one message size (--sizes)");
    MsgRateResult r;
    r.total = bandwidth(sys, opt, &r.qps).front();
    r.packets = sys.counter("node0.hca.port.tx_packets") + sys.counter("node1.hca.port.tx_packets");
    return r;
}

}  // namespace hcasim::testbench
