// Results of the perftest-style workloads and their output formats: text in
// perftest's columns, CSV with fixed headers, and JSON.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "model/sim/time.hpp"

namespace hcasim::testbench {

struct LatencyRow {
    std::uint64_t bytes = 0;
    std::uint64_t iterations = 0;
    double t_min_us = 0, t_max_us = 0, t_typical_us = 0, t_avg_us = 0, t_stdev_us = 0, t_99_us = 0, t_999_us = 0;
};

struct BandwidthRow {
    std::uint64_t bytes = 0;
    std::uint64_t iterations = 0;
    double bw_peak_MBps = 0, bw_avg_MBps = 0, msg_rate_Mpps = 0;
    double wall_seconds = 0;  // host wall time of the streaming phase (benchmarks only)
};

// Message rate of one QP of a bandwidth run: its messages over the time
// from the start to its last completion.
struct QpRateRow {
    int qp = 0;
    std::uint64_t messages = 0;
    double msg_rate_Mpps = 0;
};

// A message-rate run: one size over many QPs, the rate of each QP and in
// all, and the packets the run put on the wire (both directions).
struct MsgRateResult {
    BandwidthRow total;
    std::vector<QpRateRow> qps;
    std::uint64_t packets = 0;
};

// One receiver of a multicast run at one size: its latency samples and what
// it received of the bandwidth phase's messages.
struct MulticastRow {
    std::uint64_t bytes = 0;
    int receiver = 0;  // node index
    LatencyRow latency;
    std::uint64_t sent = 0;      // bandwidth phase: messages node 0 sent
    std::uint64_t received = 0;  // ... and this receiver got
    double bw_avg_MBps = 0, msg_rate_Mpps = 0;
};

// Statistics of a set of latency samples (picoseconds), perftest style:
// typical is the median, percentiles by nearest rank.
LatencyRow latency_stats(std::uint64_t bytes, std::vector<sim::Tick> samples);

enum class Format { Text, Csv, Json };
Format parse_format(const std::string& s);

struct RunInfo {
    std::string title;       // "RDMA WRITE latency"
    std::string api = "verbs";
    std::string op;
    std::vector<std::pair<std::string, std::string>> settings;  // preset and overrides
};

void print_latency(std::ostream& os, Format f, const RunInfo& info, const std::vector<LatencyRow>& rows);
void print_bandwidth(std::ostream& os, Format f, const RunInfo& info, const std::vector<BandwidthRow>& rows);
// Simulated figures in every format; the simulator's speed (packets per
// wall second, which varies from run to run) on its own labelled line after
// the text table and in JSON, never in CSV.
void print_msgrate(std::ostream& os, Format f, const RunInfo& info, const MsgRateResult& r, double wall_seconds);
// Latency and bandwidth tables per size and receiver (text), one row per
// size and receiver with both (CSV, JSON).
void print_multicast(std::ostream& os, Format f, const RunInfo& info, const std::vector<MulticastRow>& rows);

}  // namespace hcasim::testbench
