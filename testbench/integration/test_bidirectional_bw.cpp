// hcasim bw --bidirectional (perftest's -b): both nodes send at once, each
// to the other, through verbs and through KVIPL; the figures are the sum of
// the two directions.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "testbench/integration/harness.hpp"
#include "testbench/integration/report_rows.hpp"

using hcasim::test::CommandResult;
using hcasim::test::bw_column;
using hcasim::test::run_hcasim;
using hcasim::test::without_wall_clock;

TEST_CASE("bw --bidirectional sends both ways at once, checks every byte and reports the sum", "[perftest]") {
    for (const char* op : {"write", "send", "read"}) {
        // On x16 PCIe, so that the link binds each direction (on the
        // preset's x8 each direction of the host bus carries one stream's
        // payload writes and the other's read requests, and binds first).
        const std::string cmd = std::string("bw --op ") + op + " --sizes 4096,65536 -n 400 --verify --set pcie.lanes=16";
        const CommandResult one = run_hcasim(cmd);
        const CommandResult both = run_hcasim(cmd + " --bidirectional");
        INFO(op << "\n" << one.out << both.out);
        REQUIRE(one.exit_code == 0);
        REQUIRE(both.exit_code == 0);
        CHECK(both.out.find("bidirectional") != std::string::npos);
        // The link is full duplex: two streams carry nearly twice as much
        // (READs a little less: their requests share the links with the data).
        for (const char* size : {"4096", "65536"}) {
            const double uni = bw_column(one.out, size, 3), bi = bw_column(both.out, size, 3);
            REQUIRE(uni > 0);
            CHECK(bi > 1.7 * uni);
            CHECK(bi <= 2.0 * uni * 1.01);
        }
    }
}

TEST_CASE("bw --bidirectional runs over every QP type, with more QPs, and through KVIPL", "[perftest][kvipl]") {
    for (const char* args : {"--qp-type uc --op send", "--qp-type ud --op send --sizes 2048", "--qps 4",
                             "--srq --op send", "--api kvipl --op send", "--api kvipl --op write", "--api kvipl --op read"}) {
        std::string cmd = std::string("bw --bidirectional -n 300 ") + args;
        if (cmd.find("--sizes") == std::string::npos) cmd += " --sizes 1024,8192";
        if (cmd.find("kvipl") == std::string::npos) cmd += " --verify";
        const CommandResult r = run_hcasim(cmd, true);
        INFO(cmd << "\n" << r.out);
        CHECK(r.exit_code == 0);
        CHECK(r.out.find("bidirectional") != std::string::npos);
    }
}

TEST_CASE("on one shared PCI bus the two directions of bw --bidirectional take turns", "[perftest][kvipl][pci]") {
    const std::string cmd = "bw --api kvipl --preset vi-pci66 --op send --sizes 65536 -n 200";
    const CommandResult one = run_hcasim(cmd);
    const CommandResult both = run_hcasim(cmd + " --bidirectional");
    INFO(one.out << both.out);
    REQUIRE(one.exit_code == 0);
    REQUIRE(both.exit_code == 0);
    const double uni = bw_column(one.out, "65536", 3), bi = bw_column(both.out, "65536", 3);
    REQUIRE(uni > 0);
    // Each direction alone runs at its link's rate, well below the bus's
    // 528 MB/s; both together cross the one bus twice per byte (in at the
    // sender, out at the receiver) and no longer reach twice the rate.
    CHECK(bi > uni);
    CHECK(bi < 1.9 * uni);
}

TEST_CASE("bw --bidirectional gives the same output twice", "[perftest][kvipl][determinism]") {
    for (const char* cmd : {"bw --bidirectional --op send --sizes 64,4096 -n 300 --qps 2",
                            "bw --bidirectional --api kvipl --op write --sizes 64,4096 -n 300"}) {
        const CommandResult a = run_hcasim(cmd), b = run_hcasim(cmd);
        INFO(cmd);
        REQUIRE(a.exit_code == 0);
        CHECK(without_wall_clock(a.out) == without_wall_clock(b.out));
    }
}

TEST_CASE("bw --bidirectional refuses what it cannot run, naming it", "[perftest][cli]") {
    const CommandResult cm = run_hcasim("bw --bidirectional --cm rdma_cm --sizes 64 -n 10", true);
    CHECK(cm.exit_code == 2);
    CHECK(cm.out.find("--bidirectional connects through the out-of-band exchange only") != std::string::npos);
    const CommandResult lat = run_hcasim("lat --bidirectional --sizes 64 -n 10", true);
    CHECK(lat.exit_code == 2);
    CHECK(lat.out.find("--bidirectional") != std::string::npos);
    const CommandResult qps = run_hcasim("bw --bidirectional --qps 40 --set hca.max_qp=64 --sizes 64 -n 10", true);
    CHECK(qps.exit_code == 2);
    CHECK(qps.out.find("--qps 40 x 2 (--bidirectional) = 80 QPs per node") != std::string::npos);
    CHECK(qps.out.find("hca.max_qp") != std::string::npos);
}
