// The perftest workloads written against KVIPL instead of verbs: the same
// latency (ping-pong) and bandwidth (streaming) measurements, so the two APIs
// can be compared on the same simulated hardware. Node 0 connects as client
// to node 1 (client/server connection management), one VI each.
#pragma once

#include <vector>

#include "testbench/system/system.hpp"
#include "testbench/workloads/perftest.hpp"
#include "testbench/workloads/report.hpp"

namespace hcasim::testbench {

std::vector<LatencyRow> run_latency_kvipl(System& sys, const LatencyOptions& opt);
std::vector<BandwidthRow> run_bandwidth_kvipl(System& sys, const BandwidthOptions& opt);

// Refuse, naming the option and the NIC limit (hca.vi_max_transfer,
// hca.vi_max_descriptors, ...), what would fail only once the system runs.
void check_latency_kvipl_options(const LatencyOptions& opt, const sim::Config& cfg);
void check_bandwidth_kvipl_options(const BandwidthOptions& opt, const sim::Config& cfg);

}  // namespace hcasim::testbench
