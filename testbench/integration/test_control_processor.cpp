// An adapter whose steps are a control program on one processor
// (hca.control_program, model/hca/control_processor.hpp), as on the
// vi-pci66 preset's LANai: the blocks' steps queue behind each other
// instead of running side by side.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "model/sim/time.hpp"
#include "testbench/integration/harness.hpp"
#include "testbench/integration/report_rows.hpp"
#include "testbench/system/isolated.hpp"

using hcasim::sim::Clock;
using hcasim::sim::Timeline;
using hcasim::test::CommandResult;
using hcasim::test::bw_column;
using hcasim::test::counter_in;
using hcasim::test::read_file;
using hcasim::test::run_hcasim;

TEST_CASE("stages that share one timeline wait for each other and each counts its own busy time", "[unit]") {
    // SystemC's clock is read by a reservation: in a child of its own.
    const auto r = hcasim::testbench::run_isolated([](std::ostream& out) {
        const Clock clock = Clock::from_mhz("c", 100);  // 10 ns a cycle
        Timeline processor(&clock), parse(&clock), packet(&clock);
        parse.share(&processor);
        packet.share(&processor);
        const Timeline::Slot a = parse.reserve(0, 10);
        const Timeline::Slot b = packet.reserve(0, 5);
        // Apart, the same two requests start together.
        Timeline alone_a(&clock), alone_b(&clock);
        const Timeline::Slot c = alone_a.reserve(0, 10);
        const Timeline::Slot d = alone_b.reserve(0, 5);
        out << a.start << " " << a.end << " " << b.start << " " << b.end << " " << parse.busy_total() << " "
            << packet.busy_total() << " " << processor.busy_total() << " " << c.start << " " << d.start;
    });
    INFO(r.error);
    REQUIRE(r.ok);
    std::istringstream in(r.output);
    long long a_start = -1, a_end = -1, b_start = -1, b_end = -1, parse = -1, packet = -1, total = -1, c = -1, d = -1;
    in >> a_start >> a_end >> b_start >> b_end >> parse >> packet >> total >> c >> d;
    CHECK(a_start == 0);
    CHECK(a_end == 100000);
    CHECK(b_start == a_end);  // the second stage waited for the first
    CHECK(b_end == 150000);
    CHECK(parse == 100000);
    CHECK(packet == 50000);
    CHECK(total == 150000);
    CHECK(c == 0);
    CHECK(d == 0);
}

TEST_CASE("with hca.control_program the steps of a stream of small sends queue on one processor", "[kvipl]") {
    // The vi-pci66 preset's steps take long enough to bind small messages
    // (the default preset's host binds them); its control program off, the
    // same steps run side by side.
    const std::string cmd = "bw --api kvipl --op send --sizes 64 -n 2000 --counters --preset vi-pci66";
    const CommandResult blocks = run_hcasim(cmd + " --set hca.control_program=false");
    const CommandResult program = run_hcasim(cmd);
    INFO(blocks.out << program.out);
    // Both runs verify every byte they move.
    REQUIRE(blocks.exit_code == 0);
    REQUIRE(program.exit_code == 0);
    const double side_by_side = bw_column(blocks.out, "64", 4), one_processor = bw_column(program.out, "64", 4);
    REQUIRE(side_by_side > 0);
    REQUIRE(one_processor > 0);
    // The sender's steps for each message (doorbell, scheduling, descriptor
    // parse, translation, DMA setup, the packet's pass, the ACKs' passes)
    // now follow each other.
    CHECK(one_processor < side_by_side);
    // The processor's busy time is reported only where there is one.
    CHECK(counter_in(blocks.out, "node0.hca.control_processor.busy_ns") == -1);
    const long long busy0 = counter_in(program.out, "node0.hca.control_processor.busy_ns");
    const long long busy1 = counter_in(program.out, "node1.hca.control_processor.busy_ns");
    CHECK(busy0 > 0);
    CHECK(busy1 > 0);
}

TEST_CASE("one node's control program slows only that node's steps", "[kvipl][node]") {
    const std::string cmd = "bw --api kvipl --op send --sizes 64 -n 2000 --counters";
    const CommandResult sender = run_hcasim(cmd + " --set node0.hca.control_program=true");
    INFO(sender.out);
    REQUIRE(sender.exit_code == 0);
    CHECK(counter_in(sender.out, "node0.hca.control_processor.busy_ns") > 0);
    CHECK(counter_in(sender.out, "node1.hca.control_processor.busy_ns") == -1);
}

TEST_CASE("the control processor has a trace track with a slice per step it runs", "[kvipl][trace]") {
    const std::string path = "/tmp/hcasim_control_processor_" + std::to_string(::getpid()) + ".json";
    const CommandResult r = run_hcasim("lat --api kvipl --preset vi-pci66 --op send --sizes 64 -n 4 --trace " + path);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(read_file(path));
    std::remove(path.c_str());
    std::map<std::pair<int, int>, std::string> track;
    for (const auto& e : j["traceEvents"])
        if (e["ph"] == "M" && e["name"] == "thread_name") track[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    std::set<std::string> steps;
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] != "X") continue;
        if (track[{e["pid"].get<int>(), e["tid"].get<int>()}].find("node0.hca.control_processor") == std::string::npos) continue;
        CHECK(e["dur"].get<double>() > 0);
        steps.insert(e["name"].get<std::string>());
    }
    INFO("steps seen: " << steps.size());
    // A VI send's steps at the sender and the answer's at the same node.
    for (const char* step : {"doorbell", "descriptor parse", "translate", "transmit", "receive", "CQE"})
        CHECK(steps.count(step) == 1);
}
