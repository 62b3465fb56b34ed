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

}  // namespace hcasim::testbench
