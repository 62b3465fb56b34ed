// Determinism and report formats: the same scenario gives byte-identical
// results run after run, in the library and through the hcasim command, and
// the CSV and JSON formats are what scripts rely on.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <memory>
#include <vector>
#include <cstdio>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "testbench/integration/harness.hpp"
#include "testbench/workloads/perftest.hpp"
#include "testbench/workloads/report.hpp"

using namespace hcasim::testbench;
using hcasim::test::CommandResult;
using hcasim::test::run_hcasim;

namespace {

constexpr const char* kLatencyHeader = "bytes,iterations,t_min_us,t_max_us,t_typical_us,t_avg_us,t_stdev_us,t_99_us,t_999_us";
constexpr const char* kBandwidthHeader = "bytes,iterations,bw_peak_MBps,bw_avg_MBps,msg_rate_Mpps";

RunInfo info(const std::string& title) {
    RunInfo i;
    i.title = title;
    i.op = "write";
    i.settings.emplace_back("preset", "default");
    return i;
}

// Latency then bandwidth of the same configuration, each in its own child
// (one SystemC design per process), printed in every format.
std::string scenario(Format f) {
    const auto lat = run_isolated([f](std::ostream& os) {
        hcasim::test::default_fatal_signals();
        hcasim::sim::Config cfg;
        System sys(cfg);
        LatencyOptions o;
        o.op = Op::Write;
        o.sizes = {2, 4096, 65536};
        o.iterations = 50;
        print_latency(os, f, info("RDMA Write Latency Test"), run_latency(sys, o));
    });
    const auto bw = run_isolated([f](std::ostream& os) {
        hcasim::test::default_fatal_signals();
        hcasim::sim::Config cfg;
        System sys(cfg);
        BandwidthOptions o;
        o.op = Op::Write;
        o.sizes = {2, 4096, 65536};
        o.iterations = 300;
        print_bandwidth(os, f, info("RDMA Write BW Test"), run_bandwidth(sys, o));
    });
    REQUIRE(lat.ok);
    REQUIRE(bw.ok);
    return lat.output + "\n" + bw.output;
}

std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

}  // namespace

TEST_CASE("the same latency and bandwidth scenario run twice gives byte-identical csv output",
          "[determinism][integration]") {
    const std::string first = scenario(Format::Csv);
    const std::string second = scenario(Format::Csv);
    REQUIRE_FALSE(first.empty());
    CHECK(first == second);
    const auto l = lines(first);
    REQUIRE(l.size() == 1 + 3 + 1 + 1 + 3);  // header + 3 rows, blank, header + 3 rows
    CHECK(l[0] == kLatencyHeader);
    CHECK(l[5] == kBandwidthHeader);
}

TEST_CASE("the same scenario run twice gives byte-identical text and json output", "[determinism][integration]") {
    CHECK(scenario(Format::Text) == scenario(Format::Text));
    CHECK(scenario(Format::Json) == scenario(Format::Json));
}

TEST_CASE("hcasim lat run twice prints byte-identical csv", "[determinism][cli]") {
    const CommandResult a = run_hcasim("lat --sizes 2:4096 --iters 50 --format csv");
    const CommandResult b = run_hcasim("lat --sizes 2:4096 --iters 50 --format csv");
    CHECK(a.exit_code == 0);
    CHECK(b.exit_code == 0);
    REQUIRE_FALSE(a.out.empty());
    CHECK(a.out == b.out);
    const auto l = lines(a.out);
    REQUIRE(l.size() == 1 + 12);  // 2, 4, ..., 4096
    CHECK(l[0] == kLatencyHeader);
    CHECK(l[1].rfind("2,50,", 0) == 0);
    CHECK(l[12].rfind("4096,50,", 0) == 0);
}

TEST_CASE("hcasim bw run twice prints byte-identical csv with the bandwidth header", "[determinism][cli]") {
    const CommandResult a = run_hcasim("bw --sizes 64,65536 --iters 200 --format csv");
    const CommandResult b = run_hcasim("bw --sizes 64,65536 --iters 200 --format csv");
    CHECK(a.exit_code == 0);
    CHECK(a.out == b.out);
    const auto l = lines(a.out);
    REQUIRE(l.size() == 3);
    CHECK(l[0] == kBandwidthHeader);
    CHECK(l[1].rfind("64,200,", 0) == 0);
    CHECK(l[2].rfind("65536,200,", 0) == 0);
}

TEST_CASE("hcasim runs on a shared receive queue and over XRC print byte-identical csv twice", "[determinism][cli]") {
    for (const char* args : {"bw --op send --srq --qps 8 --sizes 64,8192 --iters 100 --format csv",
                             "bw --qp-type xrc --op send --qps 4 --sizes 64,8192 --iters 100 --format csv",
                             "lat --qp-type xrc --op read --sizes 8,4096 --iters 50 --format csv"}) {
        INFO("hcasim " << args);
        const CommandResult a = run_hcasim(args);
        const CommandResult b = run_hcasim(args);
        CHECK(a.exit_code == 0);
        CHECK(a.out == b.out);
        CHECK(lines(a.out).size() == 3);
    }
}

TEST_CASE("every csv row has one value per header column and the values are numbers", "[determinism][cli]") {
    for (const char* args : {"lat --sizes 2,1024 --iters 20 --format csv", "bw --sizes 2,1024 --iters 100 --format csv"}) {
        INFO(args);
        const CommandResult c = run_hcasim(args);
        REQUIRE(c.exit_code == 0);
        const auto l = lines(c.out);
        REQUIRE(l.size() == 3);
        const auto columns = std::count(l[0].begin(), l[0].end(), ',');
        for (std::size_t i = 1; i < l.size(); ++i) {
            INFO(l[i]);
            CHECK(std::count(l[i].begin(), l[i].end(), ',') == columns);
            std::istringstream row(l[i]);
            for (std::string cell; std::getline(row, cell, ',');) {
                std::size_t used = 0;
                double v = -1;
                CHECK_NOTHROW(v = std::stod(cell, &used));
                CHECK(used == cell.size());
                CHECK(v >= 0);
            }
        }
    }
}

TEST_CASE("hcasim --format json output parses and carries the rows", "[determinism][cli]") {
    SECTION("latency") {
        const CommandResult c = run_hcasim("lat --sizes 2,4096 --iters 20 --format json");
        REQUIRE(c.exit_code == 0);
        nlohmann::json j;
        REQUIRE_NOTHROW(j = nlohmann::json::parse(c.out));
        CHECK(j["kind"] == "latency");
        REQUIRE(j["rows"].is_array());
        REQUIRE(j["rows"].size() == 2);
        CHECK(j["rows"][0]["bytes"] == 2);
        CHECK(j["rows"][1]["bytes"] == 4096);
        for (const auto& row : j["rows"]) {
            CHECK(row["iterations"] == 20);
            for (const char* k : {"t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "t_99_us", "t_999_us"})
                CHECK(row[k].is_number());
            CHECK(row["t_min_us"].get<double>() > 0);
            CHECK(row["t_min_us"].get<double>() <= row["t_typical_us"].get<double>());
            CHECK(row["t_typical_us"].get<double>() <= row["t_max_us"].get<double>());
        }
    }
    SECTION("bandwidth") {
        const CommandResult c = run_hcasim("bw --sizes 4096,65536 --iters 200 --format json");
        REQUIRE(c.exit_code == 0);
        nlohmann::json j;
        REQUIRE_NOTHROW(j = nlohmann::json::parse(c.out));
        CHECK(j["kind"] == "bandwidth");
        REQUIRE(j["rows"].size() == 2);
        for (const auto& row : j["rows"]) {
            CHECK(row["iterations"] == 200);
            for (const char* k : {"bw_peak_MBps", "bw_avg_MBps", "msg_rate_Mpps"}) CHECK(row[k].is_number());
            CHECK(row["bw_avg_MBps"].get<double>() > 0);
            CHECK(row["bw_peak_MBps"].get<double>() >= row["bw_avg_MBps"].get<double>());
        }
    }
}

namespace {

// An 8-QP SEND bandwidth run with every hardware counter, in a child whose
// heap has first been disturbed by heap_shift: allocations of sizes that
// move both the brk heap and the mmap area, held for the whole run, so the
// buffers the run registers sit at other host addresses than in a child
// with another shift.
std::string send_bandwidth_with_heap_shift(int heap_shift) {
    const auto r = run_isolated([heap_shift](std::ostream& os) {
        hcasim::test::default_fatal_signals();
        std::vector<std::unique_ptr<std::uint8_t[]>> ballast;
        for (int i = 0; i < heap_shift; ++i) {
            ballast.emplace_back(new std::uint8_t[static_cast<std::size_t>(1 + 4096 * 37 * i)]);
            ballast.back()[0] = 1;
        }
        hcasim::sim::Config cfg;
        System sys(cfg);
        BandwidthOptions o;
        o.op = Op::Send;
        o.qps = 8;
        o.sizes = {4096, 131072, 1048576};
        o.iterations = 48;
        print_bandwidth(os, Format::Csv, info("Send BW Test"), run_bandwidth(sys, o));
        os << sys.counters();
    });
    REQUIRE(r.ok);
    return r.output;
}

}  // namespace

TEST_CASE("results and counters do not depend on where the host heap put the registered buffers",
          "[determinism][integration]") {
    const std::string reference = send_bandwidth_with_heap_shift(0);
    REQUIRE(reference.find("node0.pcie.dma_read_requests") != std::string::npos);
    for (int shift : {1, 3, 7}) {
        INFO("heap shift " << shift);
        CHECK(send_bandwidth_with_heap_shift(shift) == reference);
    }
}

// A run of empty polls is simulated in one step only where it stands for
// polls one at a time exactly: results must not depend on whether it is, or
// on how long a step may be. The send latency loop reaps its send CQ with
// one poll between pings (no fast-forward there); the bandwidth loops spin,
// and so do the KVIPL loops on their work queues.
TEST_CASE("results do not depend on how empty polls are simulated: stepped, fast-forwarded, any horizon",
          "[determinism][cli]") {
    for (const std::string args :
         {"lat --op send --sizes 2:4096 --iters 100", "lat --sizes 2:4096 --iters 100",
          "bw --qp-type ud --op send --sizes 64:4096 --iters 200", "bw --qp-type xrc --sizes 64:65536 --iters 200",
          "bw --sizes 4096 --iters 2000 --set fault.drop=0.01", "lat --api kvipl --op send --sizes 2:4096 --iters 100",
          "bw --api kvipl --op send --sizes 64:65536 --iters 200",
          // A lost message waits out its ACK timeout (67 ms) in KvipSendDone
          // calls; polls of 1 us keep the stepped run short.
          "lat --api kvipl --op send --sizes 64 --iters 60 --set fault.drop=0.02 --set host.cpu.poll_cq_ns=1000"}) {
        INFO(args);
        const CommandResult stepped = run_hcasim(args + " --format csv --set host.poll_fast_forward=false");
        REQUIRE(stepped.exit_code == 0);
        REQUIRE(stepped.out.find('\n') != std::string::npos);
        for (const char* horizon : {"1000", "10000", "1000000"}) {
            INFO("host.poll_horizon_ns=" << horizon);
            const CommandResult ff = run_hcasim(args + " --format csv --set host.poll_horizon_ns=" + horizon);
            REQUIRE(ff.exit_code == 0);
            CHECK(ff.out == stepped.out);
        }
    }
}
