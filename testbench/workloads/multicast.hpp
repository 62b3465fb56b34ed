// The multicast workload (hcasim mcast), written against the verbs API: node 0
// sends UD SENDs to one multicast group that every other node of the system
// has joined (ibv_attach_mcast), and each receiver's latency and bandwidth
// are measured. Figures come from simulated time.
//
// Latency: node 0 sends one message at a time and sends the next once every
// receiver has polled the last one; a receiver's sample is the time from
// node 0's ibv_post_send to its own ibv_poll_cq returning the completion
// (simulated time is one clock for every node, so this one-way time is
// exact). Bandwidth: node 0 streams the messages with up to --tx-depth in
// flight; a receiver's bandwidth is what it received over the time from
// node 0's first post to its own last completion. UD does not retransmit: a
// message that finds no receive posted is dropped and counted as lost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "testbench/system/system.hpp"
#include "testbench/workloads/report.hpp"

namespace hcasim::testbench {

struct MulticastOptions {
    std::vector<std::uint32_t> sizes;
    int iterations = 1000;           // messages per size, in each phase
    int tx_depth = 128;              // bandwidth phase: sends in flight
    std::uint32_t inline_max = 220;  // latency phase: sizes up to this go inline (perftest's default)
    int mtu = 4096;
};

// The group the workload uses: an IPv4-over-IB-style MGID and the MLID the
// first join names (the subnet manager binds it to the group).
inline constexpr std::uint16_t kWorkloadMlid = 0xC001;
std::string workload_mgid_text();  // "ff12:401b::1"

// Refuses, naming the option and the device limit, what the run could not do.
void check_multicast_options(const MulticastOptions& opt, const sim::Config& cfg);

// One row per size and receiving node (node 1 upwards). Throws
// std::invalid_argument for bad options (check_multicast_options) and
// sim::ConfigError when the system has fewer than two nodes.
std::vector<MulticastRow> run_multicast(System& sys, const MulticastOptions& opt);

}  // namespace hcasim::testbench
