// The READ swarm (hcasim swarm), written against the verbs API: every machine
// both issues and serves small RDMA READs over many RC connections, the
// all-to-all pattern of the rc-swarm benchmark in efficient/rdma_bench (the
// FaSST study of how an adapter's message rate falls as its connections
// outgrow its on-chip context cache).
//
// Each of --machines machines runs --threads worker threads. Each worker
// emulates --vms machines per real one: it has one RC QP, with a CQ of its
// own, to the worker of the same index on every other machine, per emulated
// machine, so a machine holds threads x (machines - 1) x vms active QPs, each
// used in both directions. A worker keeps --window READs in flight across its
// QPs: each picks a QP at random and a random 64 B-aligned offset in the
// peer's buffer, and the oldest READ is waited for (on its QP's CQ) before
// the next is posted. Every READ's bytes are checked against the peer's
// pattern. The rate counts the READs each machine completed in a window of
// simulated time after a warm-up, summed over its workers, as rc-swarm sums
// its workers' rates.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <vector>

#include "testbench/system/system.hpp"
#include "testbench/workloads/report.hpp"

namespace hcasim::testbench {

struct SwarmOptions {
    int machines = 6;        // simulated nodes behind one switch
    int threads = 8;         // worker threads per machine
    int vms = 1;             // emulated machines per machine (QPs per worker: (machines - 1) x vms)
    int window = 16;         // READs in flight per worker
    std::uint32_t size = 32; // bytes per READ
    double warmup_us = 20;   // simulated time before the measurement starts
    double duration_us = 100;  // simulated time measured
    std::uint64_t seed = 1;    // the workers' QP and offset choices and the buffers' bytes

    // Each worker's QPs over every machine's workers.
    std::uint64_t active_qps() const {
        return static_cast<std::uint64_t>(threads) * static_cast<std::uint64_t>(machines - 1) *
               static_cast<std::uint64_t>(vms);
    }
};

// Each worker's registered buffer. rc-swarm reads random offsets of 2 MB
// huge-page buffers, one translation entry each; 64 KiB of 4 KiB pages keeps
// every worker's translations within the adapter's translation cache too, so
// the run measures the context caches and not page translation.
inline constexpr std::size_t kSwarmBufferBytes = 64 * 1024;

struct SwarmMachineRow {
    int machine = 0;
    std::uint64_t reads = 0;        // completed in the measured window
    double mops = 0;                // reads / duration, in millions per second
    std::uint64_t qpc_misses = 0;   // the adapter's QP context cache, whole run
    std::uint64_t cqc_misses = 0;   // its CQ context cache, whole run
    std::uint64_t all_reads = 0;    // every READ the machine issued (warm-up and drain included)
};

struct SwarmResult {
    std::vector<SwarmMachineRow> machines;
    double mean_mops = 0, min_mops = 0, max_mops = 0;
    double wall_seconds = 0;
};

// Refuses, naming the option and its limit, what the run could not do.
void check_swarm_options(const SwarmOptions& opt, const sim::Config& cfg);

// sys must have opt.machines nodes. Throws std::invalid_argument for bad
// options and std::runtime_error when a READ fails or brings wrong bytes.
SwarmResult run_swarm(System& sys, const SwarmOptions& opt);

void print_swarm(std::ostream& os, Format format, const RunInfo& info, const SwarmOptions& opt, const SwarmResult& r);

}  // namespace hcasim::testbench
