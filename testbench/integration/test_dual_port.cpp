// --dual-port (perftest's -O): with port.count=2 the QPs of bw and msgrate
// take the adapters' two ports in turn, each cabled to the peer's port of the
// same number. Both links then carry traffic, and what binds the pair is the
// adapter's host bus, not one link.
#include <catch2/catch.hpp>

#include <algorithm>
#include <regex>
#include <string>

#include "testbench/integration/harness.hpp"

namespace {

using hcasim::test::CommandResult;
using hcasim::test::run_hcasim;

using hcasim::test::counter_in;

// A port's counter; a port the adapter does not have counts nothing.
long long counter(const std::string& out, const std::string& name) { return std::max(0LL, counter_in(out, name)); }

double bw_avg(const std::string& out, const std::string& size) {
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex("\\n *" + size + " +[0-9]+ +[0-9.]+ +([0-9.]+)")));
    return std::stod(m[1].str());
}

}  // namespace

TEST_CASE("bw --dual-port sends over both ports, checks every byte and carries more than one port",
          "[workload][dual_port]") {
    const std::string two = "--set port.count=2 --preset cx4-edr --sizes 65536 --qps 4 -n 200 ";
    const CommandResult one_port = run_hcasim("bw " + two + "--counters");
    const CommandResult both = run_hcasim("bw " + two + "--dual-port --verify --counters");
    REQUIRE(one_port.exit_code == 0);
    REQUIRE(both.exit_code == 0);
    CHECK(counter(one_port.out, "node0.hca.port2.tx_packets") == 0);
    const long long p1 = counter(both.out, "node0.hca.port.tx_packets");
    const long long p2 = counter(both.out, "node0.hca.port2.tx_packets");
    CHECK(p1 > 0);
    CHECK(p1 == p2);  // four QPs, two on each port
    const double single = bw_avg(one_port.out, "65536"), dual = bw_avg(both.out, "65536");
    INFO("one port " << single << " MB/s, both " << dual << " MB/s");
    // One EDR link binds a single port; two are bound by PCIe Gen3 x16.
    CHECK(dual > 1.1 * single);
    CHECK(both.out.find("dual-port") != std::string::npos);
}

TEST_CASE("msgrate --dual-port --threads numbers the QPs over every thread, so one QP per thread still uses both ports",
          "[workload][dual_port][msgrate]") {
    const CommandResult r = run_hcasim(
        "msgrate --set port.count=2 --dual-port --threads 4 --qps 1 -n 300 --op send --sizes 128 --verify --counters");
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find(" total      1200 ") != std::string::npos);
    CHECK(counter(r.out, "node0.hca.port.tx_packets") == 600);
    CHECK(counter(r.out, "node0.hca.port2.tx_packets") == 600);
}

TEST_CASE("dual-port runs are refused where they cannot run, naming what is missing", "[workload][dual_port][cli]") {
    const CommandResult one = run_hcasim("bw --dual-port", true);
    CHECK(one.exit_code != 0);
    CHECK(one.out.find("port.count = 1") != std::string::npos);
    const CommandResult ud = run_hcasim("bw --dual-port --set port.count=2 --qp-type ud --op send", true);
    CHECK(ud.exit_code != 0);
    CHECK(ud.out.find("--dual-port is for --qp-type rc and uc") != std::string::npos);
    const CommandResult lat = run_hcasim("lat --dual-port", true);
    CHECK(lat.exit_code != 0);
    CHECK(lat.out.find("--dual-port") != std::string::npos);
}
