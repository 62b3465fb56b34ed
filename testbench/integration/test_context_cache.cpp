// The QP context cache: contexts live in host memory (ICM) and the adapter
// keeps hca.qpc_cache_entries of them on chip. Round-robin traffic over
// more active QPs than that misses on every message, and each miss is a
// PCIe read (and the write-back of the entry it evicts), so the message
// rate falls when the working set outgrows the cache.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "testbench/integration/harness.hpp"

namespace {

using hcasim::test::CommandResult;
using hcasim::test::run_hcasim;

struct RateRun {
    double mpps = 0;
    std::uint64_t misses = 0;      // both nodes' QP context cache misses
    std::uint64_t write_backs = 0;
    std::string out;
};

std::uint64_t sum_counter(const std::string& out, const std::string& name) {
    std::uint64_t total = 0;
    const std::regex re("node[0-9]+\\.hca\\." + name + " = ([0-9]+)");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
        total += std::stoull((*it)[1].str());
    return total;
}

// Each WQE goes by BlueFlame (as the mlx5 provider sends any lone WQE), so a
// message uses its QP's context at known points: no fetch in between.
const char* const kBlueFlame = " --set hca.blueflame_any_wqe=true";

// The posting thread is not held after its doorbell stores, so that it
// posts faster than context fills come back and the adapter bounds the rate.
const char* const kFastPosting = " --set host.cpu.mmio_store_ns=0";

// One message in flight per QP, posted one at a time, QP after QP.
RateRun msgrate(int qps, int cache_entries, const std::string& more = "") {
    const CommandResult r = run_hcasim("msgrate --op write --sizes 64 --qps " + std::to_string(qps) +
                                       " --post-list 1 --tx-depth 1 -n 100 --counters" + kBlueFlame + kFastPosting +
                                       " --set hca.qpc_cache_entries=" +
                                       std::to_string(cache_entries) + " " + more);
    RateRun run;
    run.out = r.out;
    REQUIRE(r.exit_code == 0);
    run.mpps = hcasim::test::msgrate_total_mpps(r.out);
    run.misses = sum_counter(r.out, "qpc_cache.misses");
    run.write_backs = sum_counter(r.out, "qpc_cache.write_backs");
    return run;
}

}  // namespace

TEST_CASE("message rate falls when the active QPs outgrow the QP context cache", "[context_cache][timing]") {
    const RateRun fits = msgrate(64, 512);   // every context stays on chip
    const RateRun spills = msgrate(64, 32);  // LRU over round-robin: every use misses
    INFO("64 QPs, 512 cached: " << fits.mpps << " Mpps, " << fits.misses << " misses");
    INFO("64 QPs, 32 cached: " << spills.mpps << " Mpps, " << spills.misses << " misses, " << spills.write_backs
                                 << " write-backs");
    // Created and connected QPs are on chip: no misses while they fit.
    CHECK(fits.misses == 0);
    // A message's uses of its QP's context: the doorbell and the ACK at the
    // sender, the packet at the receiver; each misses, evicting a changed
    // entry. In between, the blocks working on the QP hold its context, so
    // no use misses twice.
    CHECK(spills.misses >= 3u * 64 * 100 * 95 / 100);
    CHECK(spills.misses <= 3u * 64 * 100);
    CHECK(spills.write_backs > 0);
    // The fills, a PCIe round trip each with hca.context_fill_slots under
    // way at once, now bound the rate ...
    CHECK(spills.mpps < 0.85 * fits.mpps);
    // ... and twice the fill slots keep up with the host's posting again.
    const RateRun more_slots = msgrate(64, 32, "--set hca.context_fill_slots=16");
    INFO("64 QPs, 32 cached, 16 fill slots: " << more_slots.mpps << " Mpps");
    CHECK(more_slots.mpps > 0.95 * fits.mpps);
}

TEST_CASE("a context the send or receive side is working on is held on chip until that work is done",
          "[context_cache]") {
    // One message in flight on each of 512 QPs with 256 contexts cached:
    // without holds, a context a miss brought in for a waiting packet could
    // be pushed out by later misses before the packet used it, and be read
    // again.
    const CommandResult r = run_hcasim(
        std::string("msgrate --op write --sizes 64 --qps 512 --post-list 1 --tx-depth 1 -n 50 --counters "
                    "--set hca.qpc_cache_entries=256 --set hca.cqc_cache_entries=256") +
        kBlueFlame);
    REQUIRE(r.exit_code == 0);
    const std::uint64_t messages = 512u * 50;
    CHECK(sum_counter(r.out, "qpc_cache.misses") <= 3 * messages);
    CHECK(sum_counter(r.out, "qpc_cache.misses") >= 2 * messages);
}

TEST_CASE("with several posting threads the rate falls from the adapter's own limit once the QPs outgrow the cache",
          "[context_cache][timing][msgrate]") {
    auto run = [](int qps_per_thread) {
        const CommandResult r = run_hcasim("msgrate --op write --sizes 64 --threads 8 --qps " +
                                           std::to_string(qps_per_thread) +
                                           " --post-list 1 --tx-depth 1 -n 50 --counters");
        REQUIRE(r.exit_code == 0);
        return std::make_pair(hcasim::test::msgrate_total_mpps(r.out), sum_counter(r.out, "qpc_cache.misses"));
    };
    const auto fits = run(8);     // 64 QPs: the default cache (68 entries) holds them all
    const auto spills = run(16);  // 128 QPs
    INFO("64 QPs: " << fits.first << " Mpps, 128 QPs: " << spills.first << " Mpps");
    CHECK(fits.second == 0);
    CHECK(spills.second > 0);
    CHECK(spills.first < 0.5 * fits.first);
}
