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

}  // namespace hcasim::testbench
