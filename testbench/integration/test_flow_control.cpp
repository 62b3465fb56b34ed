// Link-level flow control (IBA 7.9): a port sends only what its link
// partner's receive buffer (port.vl_buffer_bytes) has credits for, and the
// partner gives the space back as packets leave the buffer. A receiver that
// falls behind then holds its senders back instead of queueing without
// bound, and a buffer smaller than the credit round trip paces the link.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "testbench/integration/harness.hpp"

namespace {

using hcasim::test::CommandResult;
using hcasim::test::counter_in;
using hcasim::test::run_hcasim;

double bw_avg(const std::string& out, const std::string& size) {
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex("\\n *" + size + " +[0-9]+ +[0-9.]+ +([0-9.]+)")));
    return std::stod(m[1].str());
}

// 4 KiB writes on eight QPs to a receiver whose QP contexts miss nearly
// every time (three cached, one fill at a time): it takes packets far
// slower than the link brings them. The sender keeps every context on chip.
const std::string kSlowReceiver =
    "msgrate --op write --sizes 4096 --qps 8 --post-list 1 -n 100 --verify --counters "
    "--set node1.hca.qpc_cache_entries=3 --set node1.hca.context_fill_slots=1 ";

}  // namespace

TEST_CASE("link flow control keeps a slow receiver's buffer within its credits and every byte arrives",
          "[flow_control]") {
    const CommandResult off = run_hcasim(kSlowReceiver + "--set port.vl_buffer_bytes=0");
    const CommandResult on = run_hcasim(kSlowReceiver);
    const CommandResult one = run_hcasim(kSlowReceiver + "--set port.vl_buffer_bytes=4224");
    const CommandResult switched = run_hcasim(kSlowReceiver + "--set fabric.topology=switch");
    for (const CommandResult* r : {&off, &on, &one, &switched}) REQUIRE(r->exit_code == 0);
    // Without flow control the sender runs ahead and the receiver queues
    // far more than any buffer it has.
    CHECK(counter_in(off.out, "node1.hca.port.rx_buffer_peak_bytes") > 65536);
    CHECK(counter_in(off.out, "node0.hca.port.packets_waiting_for_credit") == -1);
    // With it, the buffer never holds more than the credits it gave, and
    // the sender's packets waited for them.
    const long long peak = counter_in(on.out, "node1.hca.port.rx_buffer_peak_bytes");
    CHECK(peak > 4224);
    CHECK(peak <= 65536);
    CHECK(counter_in(on.out, "node0.hca.port.packets_waiting_for_credit") > 0);
    CHECK(counter_in(one.out, "node1.hca.port.rx_buffer_peak_bytes") <= 4224);
    // Behind a switch, the switch's output waits for the receiver's credits
    // and holds the packets in its input buffer, whose credits the sender
    // then waits for: the back-pressure crosses the switch. --verify has
    // checked every byte in all four runs.
    CHECK(counter_in(switched.out, "node1.hca.port.rx_buffer_peak_bytes") <= 65536);
    CHECK(counter_in(switched.out, "switch0.packets_waiting_for_credit") > 0);
    CHECK(counter_in(switched.out, "node0.hca.port.packets_waiting_for_credit") > 0);
}

TEST_CASE("a link buffer of one packet paces a stream at one packet per credit round trip", "[flow_control]") {
    const std::string cmd = "bw --sizes 4096 -n 400 --counters ";
    const CommandResult deflt = run_hcasim(cmd);
    const CommandResult one = run_hcasim(cmd + "--set port.vl_buffer_bytes=4224");
    const CommandResult four = run_hcasim(cmd + "--set port.vl_buffer_bytes=16384");
    for (const CommandResult* r : {&deflt, &one, &four}) REQUIRE(r->exit_code == 0);
    // One 4 KiB packet (4160 B of credits) at a time: its wire time, then
    // the credits' way back (PHYs, cable, the receive pass, a 6-byte
    // flow-control packet), so clearly less than the link carries, but the
    // payload reads still overlap the wait.
    const double ratio = bw_avg(one.out, "4096") / bw_avg(deflt.out, "4096");
    CHECK(ratio < 0.9);
    CHECK(ratio > 0.6);
    CHECK(counter_in(one.out, "node0.hca.port.packets_waiting_for_credit") > 0);
    // Four packets' worth covers the round trip: the link is not held back.
    CHECK(bw_avg(four.out, "4096") == Approx(bw_avg(deflt.out, "4096")).epsilon(0.005));
    // Same configuration, same figures.
    CHECK(run_hcasim(cmd + "--set port.vl_buffer_bytes=4224").out == one.out);
}

TEST_CASE("a link buffer that cannot hold one packet of the port's MTU is a configuration error naming it",
          "[flow_control][config]") {
    const CommandResult r = run_hcasim("lat --sizes 64 -n 10 --set port.vl_buffer_bytes=1000", true);
    CHECK(r.exit_code != 0);
    CHECK(r.out.find("port.vl_buffer_bytes = 1000") != std::string::npos);
    CHECK(r.out.find("4224") != std::string::npos);
    // With a smaller MTU, a smaller buffer holds a packet.
    CHECK(run_hcasim("lat --sizes 64 -n 10 --set port.max_mtu=1024 --set port.vl_buffer_bytes=1152").exit_code == 0);
}
