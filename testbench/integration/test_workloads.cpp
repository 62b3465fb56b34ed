// The perftest workloads themselves: they finish for every op and option
// combination a user can ask for, and report what they ran.
#include <catch2/catch.hpp>

#include <sstream>

#include "testbench/system/isolated.hpp"
#include "testbench/system/system.hpp"
#include "testbench/workloads/perftest.hpp"

using namespace hcasim::testbench;

namespace {

std::string bw_csv(Op op, int qps, int tx_depth, int cq_mod) {
    const auto r = run_isolated([&](std::ostream& os) {
        hcasim::sim::Config cfg;
        System sys(cfg);
        BandwidthOptions o;
        o.op = op;
        o.sizes = {3, 4096};
        o.iterations = 64;
        o.qps = qps;
        o.tx_depth = tx_depth;
        o.cq_mod = cq_mod;
        print_bandwidth(os, Format::Csv, RunInfo{}, run_bandwidth(sys, o));
    });
    REQUIRE(r.error == "");
    REQUIRE(r.ok);
    return r.output;
}

}  // namespace

TEST_CASE("a bandwidth run with a tx depth below the completion moderation still completes") {
    for (Op op : {Op::Write, Op::Send, Op::Read}) {
        const std::string csv = bw_csv(op, 3, 4, 32);
        CHECK(csv.find("\n3,64,") != std::string::npos);
        CHECK(csv.find("\n4096,64,") != std::string::npos);
    }
}

TEST_CASE("a bandwidth run spreads its iterations over more QPs than iterations per QP") {
    const std::string csv = bw_csv(Op::Write, 48, 2, 1);
    CHECK(csv.find("\n4096,64,") != std::string::npos);
}
