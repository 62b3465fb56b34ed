// The perftest workloads (ib_{send,write,read}_{lat,bw}) written against the
// verbs API and run on two simulated nodes. Figures come from simulated time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "testbench/system/system.hpp"
#include "testbench/workloads/report.hpp"

namespace hcasim::testbench {

enum class Op { Send, Write, Read };
Op parse_op(const std::string& s);
const char* op_name(Op op);

// perftest reports MB/sec with MB = 2^20 bytes; so does hcasim.
inline constexpr double kPerftestMB = 1048576.0;

struct LatencyOptions {
    Op op = Op::Write;
    std::vector<std::uint32_t> sizes;
    int iterations = 1000;
    std::uint32_t inline_max = 220;  // sizes up to this go inline (perftest's CX-3 default)
    int mtu = 4096;
    int vi_reliability = 2;  // --api kvipl: VIP_SERVICE_* of the VIs
};

struct BandwidthOptions {
    Op op = Op::Write;
    std::vector<std::uint32_t> sizes;
    int iterations = 1000;
    int tx_depth = 128;   // outstanding work requests per QP
    int qps = 1;
    int cq_mod = 32;      // one signaled completion every cq_mod posts
    std::uint32_t inline_max = 0;
    int mtu = 4096;
    int vi_reliability = 2;  // --api kvipl: VIP_SERVICE_* of the VIs
};

std::vector<LatencyRow> run_latency(System& sys, const LatencyOptions& opt);
std::vector<BandwidthRow> run_bandwidth(System& sys, const BandwidthOptions& opt);

// Shared by the verbs and KVIPL workloads.
// Spins on a byte the peer writes by RDMA until it holds value (one memory read
// per host.cpu.poll_memory_ns, simulated in steps between adapter writes).
void spin_until(Host& h, const volatile std::uint8_t* p, std::uint8_t value);
// Payload bytes: a pseudo-random pattern of (sim.seed, node).
void fill_pattern(Host& h, std::uint8_t* p, std::size_t n);
// A bandwidth row from the run's start and end and when each message completed.
BandwidthRow bandwidth_row(std::uint32_t size, int iterations, sim::Tick t0, sim::Tick t1,
                           std::vector<sim::Tick> message_done, int tx_depth, double wall_seconds);

// "2:8388608" (powers of two from 2 to 8 MiB), "4096", or "64,1024,65536".
std::vector<std::uint32_t> parse_sizes(const std::string& spec);

}  // namespace hcasim::testbench
