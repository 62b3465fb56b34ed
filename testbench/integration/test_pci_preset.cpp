// The VI NIC presets on a 64-bit/66 MHz conventional PCI bus: vi-pci66 with a
// Myrinet-2000 link and vi-clan with a 1.25 Gb/s cLAN link, run through the
// hcasim command.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "testbench/integration/harness.hpp"
#include "testbench/integration/report_rows.hpp"

using hcasim::test::CommandResult;
using hcasim::test::run_hcasim;
using hcasim::test::without_wall_clock;

TEST_CASE("hcasim lat --preset vi-pci66 --api kvipl runs on the PCI bus and verifies the bytes it moves", "[pci]") {
    const CommandResult r = run_hcasim("lat --preset vi-pci66 --api kvipl --op send --sizes 4,288,4096 -n 50", true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("vi-pci66") != std::string::npos);
    CHECK(r.out.find("64-bit 66 MHz") != std::string::npos);
    CHECK(r.out.find("myrinet2000 1x") != std::string::npos);
    CHECK(r.out.find("pcie ") == std::string::npos);
    for (const char* size : {"\n 4 ", "\n 288 ", "\n 4096 "}) CHECK(r.out.find(size) != std::string::npos);
}

TEST_CASE("hcasim lat --preset vi-pci66 --api kvipl gives the same output twice", "[pci]") {
    const std::string cmd = "lat --preset vi-pci66 --api kvipl --sizes 64,4096 -n 100";
    const CommandResult a = run_hcasim(cmd);
    const CommandResult b = run_hcasim(cmd);
    REQUIRE(a.exit_code == 0);
    REQUIRE(b.exit_code == 0);
    CHECK(without_wall_clock(a.out) == without_wall_clock(b.out));
}

TEST_CASE("hcasim params lists the PCI bus parameters with units and sources", "[pci]") {
    const CommandResult r = run_hcasim("params");
    REQUIRE(r.exit_code == 0);
    for (const char* key : {"host.bus", "pci.clock_mhz", "pci.width_bits", "pci.arbitration_cycles",
                            "pci.target_wait_cycles", "pci.max_burst_bytes", "pci.bridge_latency_ns"})
        CHECK(r.out.find(key) != std::string::npos);
}

namespace {

// bw_avg_MBps of a one-size `--format csv` bandwidth run.
double csv_bw_avg(const std::string& out) {
    const auto row = out.find("\n4096,");
    if (row == std::string::npos) return 0;
    std::istringstream in(out.substr(row + 1));
    std::string field;
    for (int i = 0; i < 4 && std::getline(in, field, ','); ++i) {
    }
    return std::stod(field);
}

}  // namespace

TEST_CASE("the VI presets' streams are bound by their own links: Myrinet-2000 carries twice a cLAN lane", "[pci]") {
    const std::string cmd = " --api kvipl --op send --sizes 4096 -n 300 --format csv";
    const CommandResult myrinet = run_hcasim("bw --preset vi-pci66" + cmd);
    const CommandResult clan = run_hcasim("bw --preset vi-clan" + cmd);
    INFO(myrinet.out << clan.out);
    REQUIRE(myrinet.exit_code == 0);
    REQUIRE(clan.exit_code == 0);
    const double m = csv_bw_avg(myrinet.out);
    const double c = csv_bw_avg(clan.out);
    // 2 and 1 Gb/s of data after 8b/10b, less the same headers per packet:
    // each stream runs at nearly its link's rate, far below the 528 MB/s bus.
    CHECK(m > 0.9 * 2e9 / 8 / 1048576);
    CHECK(m < 2e9 / 8 / 1048576);
    CHECK(c > 0.9 * 1e9 / 8 / 1048576);
    CHECK(c < 1e9 / 8 / 1048576);
    CHECK(m / c == Approx(2.0).epsilon(0.02));
}
