// The perftest workloads (ib_{send,write,read}_{lat,bw}) written against the
// verbs API and run on two simulated nodes. Figures come from simulated time.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "testbench/system/system.hpp"
#include "testbench/workloads/report.hpp"

namespace hcasim::testbench {

enum class Op { Send, Write, Read, AtomicCas, AtomicFadd };
Op parse_op(const std::string& s);
const char* op_name(Op op);
inline bool is_atomic(Op op) { return op == Op::AtomicCas || op == Op::AtomicFadd; }
// An atomic operation works on 8 bytes (perftest's ib_atomic_* size).
inline constexpr std::uint32_t kAtomicBytes = 8;

// The transport service of the workload's QPs (perftest's -c).
enum class QpType { Rc, Uc, Ud, Xrc };
QpType parse_qp_type(const std::string& s);
const char* qp_type_name(QpType t);  // "RC", "UC", "UD", "XRC"
// What a QP type cannot do, as a sentence naming the options, or "" when
// it can: "--op write is not available with --qp-type ud (UD has SEND only)".
std::string qp_type_refusal(QpType t, Op op);
// A UD receive buffer holds the 40-byte GRH area in front of the data.
inline constexpr std::uint32_t kGrhBytes = 40;
// The Q_Key both sides of a UD workload use (perftest's DEF_QKEY).
inline constexpr std::uint32_t kWorkloadQkey = 0x11111111;

// perftest reports MB/sec with MB = 2^20 bytes; so does hcasim.
inline constexpr double kPerftestMB = 1048576.0;
// The largest message: one work request carries at most 2 GiB.
inline constexpr std::uint32_t kMaxMessageBytes = 1u << 31;
// The latency workloads signal every 16th send (and the last of a size of
// fewer than 16), as perftest does.
inline constexpr int kLatencySignalEvery = 16;
// Up to this many iterations perftest's bandwidth tests read the clock at
// every post and every completion (for their peak figure); above it they
// do not (perftest_parameters.c: "BW peak won't be measured").
inline constexpr int kPerftestPeakIterations = 20000;
// perftest's RX depth for SEND tests (DEF_RX_SEND).
inline constexpr std::uint64_t kPerftestSendRxDepth = 512;

struct LatencyOptions {
    Op op = Op::Write;
    std::vector<std::uint32_t> sizes;
    int iterations = 1000;
    std::uint32_t inline_max = 220;  // sizes up to this go inline (perftest's CX-3 default)
    int mtu = 4096;
    int vi_reliability = 2;  // --api kvipl: VIP_SERVICE_* of the VIs
    QpType qp_type = QpType::Rc;
    bool srq = false;        // receives from one shared receive queue
    bool verify = false;     // check every received byte against the sender's pattern
    bool rdma_cm = false;    // connect with rdma_cm instead of the out-of-band exchange (perftest's -R)
};

struct BandwidthOptions {
    Op op = Op::Write;
    std::vector<std::uint32_t> sizes;
    int iterations = 1000;  // messages per size in all, spread evenly over the QPs
    int tx_depth = 128;   // outstanding work requests per QP
    int qps = 1;
    int cq_mod = 32;      // one signaled completion every cq_mod posts
    std::uint32_t inline_max = 0;
    int mtu = 4096;
    int vi_reliability = 2;  // --api kvipl: VIP_SERVICE_* of the VIs
    QpType qp_type = QpType::Rc;
    bool srq = false;        // every QP's receives from one shared receive queue
    int post_list = 1;       // work requests per ibv_post_send call, linked (perftest's --post_list)
    bool verify = false;     // check every received byte against the sender's pattern
    bool rdma_cm = false;    // connect with rdma_cm instead of the out-of-band exchange (perftest's -R)
    int threads = 1;         // posting threads per node, each with qps QPs of its own and iterations messages
    bool dual_port = false;  // RC and UC: QPs take both ports in turn, numbered over every thread (perftest's -O)
    // Both nodes send at once, each to the other (perftest's -b): every
    // thread has a client and a server on each node, with QPs of their own,
    // and the figures are both directions' sum.
    bool bidirectional = false;
};

// What the device said no to in a run: the host programs found out at set-up
// (ibv_create_qp, ibv_create_srq or ibv_query_device), before any traffic,
// and stopped. what() names the command-line option.
class Unsupported : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// Both throw std::invalid_argument, before anything runs, for options the
// device cannot serve (see the check_* functions), and Unsupported when the
// verbs device refuses the QP type, --srq or atomics at set-up.
std::vector<LatencyRow> run_latency(System& sys, const LatencyOptions& opt);
std::vector<BandwidthRow> run_bandwidth(System& sys, const BandwidthOptions& opt);
// One size (opt.sizes must hold one); also throws Unsupported.
MsgRateResult run_msgrate(System& sys, const BandwidthOptions& opt);

// Refuse, with a message naming the command-line option and the device
// limit (hca.max_qp_wr, hca.max_cqe, hca.max_inline, port.max_mtu, ...),
// what the verbs calls would refuse only once the system is built.
void check_latency_options(const LatencyOptions& opt, const sim::Config& cfg);
void check_bandwidth_options(const BandwidthOptions& opt, const sim::Config& cfg);

// The verbs resources each workload asks for.
struct EndpointOptions;
EndpointOptions latency_endpoint(const LatencyOptions& opt, const sim::Config& cfg);
EndpointOptions bandwidth_endpoint(const BandwidthOptions& opt, const sim::Config& cfg);
// Entries of each completion queue of a bandwidth run.
std::uint64_t bandwidth_cq_entries(int qps, int tx_depth);

// Shared by the verbs and KVIPL workloads.
// Spins on a byte the peer writes by RDMA until it holds value (one memory read
// per host.cpu.poll_memory_ns, simulated in steps between adapter writes).
void spin_until(Host& h, const volatile std::uint8_t* p, std::uint8_t value);
// Payload bytes: a pseudo-random pattern of (sim.seed, node).
void fill_pattern(Host& h, std::uint8_t* p, std::size_t n);
// How long a streaming run may go without a completion before it counts as
// stuck: 100 ms, plus twice the time the data in flight takes at the slowest
// of the IB link and the nodes' host buses (with many QPs sharing the wire, a
// first completion may wait for nearly all of it).
sim::Tick stall_limit(const System& sys, std::uint64_t bytes_in_flight);
// A bandwidth row from the run's start and end and when each message completed.
BandwidthRow bandwidth_row(std::uint32_t size, int iterations, sim::Tick t0, sim::Tick t1,
                           std::vector<sim::Tick> message_done, int tx_depth, double wall_seconds);
// What one bandwidth client measured at one size.
struct ClientRun {
    sim::Tick t0, t1;
    std::vector<sim::Tick> message_done;
    double wall_seconds;
};
// The rows of clients that ran side by side, runs[client][size index], each
// with iterations messages a size: a size spans them all, from the first
// start to the last end, over all their messages.
std::vector<BandwidthRow> combined_rows(const std::vector<std::uint32_t>& sizes, int iterations,
                                        const std::vector<std::vector<ClientRun>>& runs, int tx_depth);

// "2:8388608" (every power of two from 2 to 8 MiB; both bounds must be
// powers of two), "4096", or "64,1024,65536" (each size once). Decimal only;
// throws std::invalid_argument naming --sizes.
std::vector<std::uint32_t> parse_sizes(const std::string& spec);

// --verify's check: got[0, n) must equal want[0, n), else std::runtime_error
// naming what (RDMA WRITE, SEND, RDMA READ), the message size, the first bad
// offset and both bytes there.
void verify_bytes(const std::uint8_t* got, const std::uint8_t* want, std::size_t n, std::uint32_t size,
                  const char* what);

}  // namespace hcasim::testbench
