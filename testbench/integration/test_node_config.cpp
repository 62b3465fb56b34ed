// Nodes with hardware of their own: "nodeN.KEY" gives node N its own value of
// a per-node parameter (its bus, its adapter's clocks, caches and engines, its
// host's CPU costs), run through the hcasim command.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>

#include "testbench/integration/harness.hpp"

using hcasim::test::CommandResult;
using hcasim::test::counter_in;
using hcasim::test::run_hcasim;

namespace {

// The result rows of a --format csv run (everything after its header line).
std::string csv_rows(const std::string& out) {
    const auto header = out.find("bytes,");
    REQUIRE(header != std::string::npos);
    return out.substr(out.find('\n', header) + 1);
}

// t_typical_us of the one row of a one-size `lat --format csv` run.
double csv_typical(const std::string& out) {
    std::istringstream row(csv_rows(out));
    std::string field;
    for (int i = 0; i < 5; ++i) std::getline(row, field, ',');
    return std::stod(field);
}

}  // namespace

TEST_CASE("one node's own PCIe link slows what crosses it, and both nodes' own values equal the class-wide one",
          "[config][node]") {
    const std::string lat = "lat --op write --sizes 4096 -n 100 --format csv ";
    const std::string slow = "--set NODE.pcie.gen=1 --set NODE.pcie.lanes=1 ";
    auto for_node = [&](const std::string& node) {
        std::string s = slow;
        for (std::size_t at; (at = s.find("NODE")) != std::string::npos;) s.replace(at, 4, node);
        return s;
    };
    const CommandResult fast = run_hcasim(lat);
    const CommandResult everywhere = run_hcasim(lat + "--set pcie.gen=1 --set pcie.lanes=1");
    const CommandResult both = run_hcasim(lat + for_node("node0") + for_node("node1"));
    const CommandResult sender = run_hcasim(lat + for_node("node0"));
    const CommandResult receiver = run_hcasim(lat + for_node("node1"));
    for (const auto* r : {&fast, &everywhere, &both, &sender, &receiver}) REQUIRE(r->exit_code == 0);
    // Every node with its own Gen1 x1 link is the fabric with Gen1 x1 links.
    CHECK(csv_rows(both.out) == csv_rows(everywhere.out));
    // One slow link: the 4 KiB crosses one Gen1 x1 link instead of two, so
    // the latency lies between, well away from both.
    const double f = csv_typical(fast.out), e = csv_typical(everywhere.out);
    for (const auto* r : {&sender, &receiver}) {
        const double t = csv_typical(r->out);
        CHECK(t > f + 0.25 * (e - f));
        CHECK(t < e - 0.25 * (e - f));
    }
    // The same configuration twice gives the same output.
    CHECK(run_hcasim(lat + for_node("node0")).out == sender.out);
}

TEST_CASE("one node's own context cache changes its own misses and leaves the other node's as they were",
          "[config][node][context_cache]") {
    // 64 QPs, one message at a time on each: every context fits the default
    // 68 entries, and 16 entries miss.
    const std::string cmd = "msgrate --qps 64 --post-list 1 --tx-depth 1 -n 20 --counters";
    const CommandResult plain = run_hcasim(cmd);
    const CommandResult small = run_hcasim(cmd + " --set node1.hca.qpc_cache_entries=16");
    REQUIRE(plain.exit_code == 0);
    REQUIRE(small.exit_code == 0);
    // --counters leaves out the counters that stayed at 0.
    auto misses = [](const std::string& out, const std::string& node) {
        REQUIRE(counter_in(out, node + ".hca.qpc_cache.hits") > 0);
        return std::max(0LL, counter_in(out, node + ".hca.qpc_cache.misses"));
    };
    const long long sender = misses(plain.out, "node0");
    const long long receiver = misses(plain.out, "node1");
    CHECK(misses(small.out, "node0") == sender);
    CHECK(misses(small.out, "node1") > receiver + 64 * 20 / 2);
    // The report names the node's own value.
    CHECK(small.out.find("node1.hca.qpc_cache_entries : 16") != std::string::npos);
}

TEST_CASE("one node on the RTL DMA engine and the other on the SystemC model move the same verified bytes",
          "[config][node][rtl]") {
    const std::string cmd = "bw --op write --sizes 64,4096,65536 -n 200 --verify --counters --format csv";
    const CommandResult mixed = run_hcasim(cmd + " --set node1.hca.dma.impl=rtl");
    INFO(mixed.out);
    REQUIRE(mixed.exit_code == 0);
    // The receiver's engine is the RTL's: its writes go through it alone.
    CHECK(mixed.out.find("node1.hca.dma_engine.rtl") != std::string::npos);
    CHECK(mixed.out.find("node0.hca.dma_engine.rtl") == std::string::npos);
}

TEST_CASE("a node key for a node the fabric lacks, or for a fabric-wide key, stops hcasim with its name",
          "[config][node][cli]") {
    const CommandResult beyond = run_hcasim("lat --sizes 64 -n 10 --set node2.pcie.lanes=4", true);
    CHECK(beyond.exit_code == 2);
    CHECK(beyond.out.find("node2") != std::string::npos);
    CHECK(beyond.out.find("fabric.nodes") != std::string::npos);
    CHECK(beyond.out.find("#bytes") == std::string::npos);
    // With four nodes behind a switch, node 3 exists.
    const CommandResult four = run_hcasim(
        "lat --sizes 64 -n 10 --set fabric.topology=switch --set fabric.nodes=4 --set node3.pcie.lanes=4", true);
    CHECK(four.exit_code == 0);
    const CommandResult shared = run_hcasim("lat --sizes 64 -n 10 --set node1.link.speed=edr", true);
    CHECK(shared.exit_code == 2);
    CHECK(shared.out.find("node1.link.speed") != std::string::npos);
    CHECK(shared.out.find("one value for every node") != std::string::npos);
    const CommandResult limit = run_hcasim("lat --sizes 64 -n 10 --set node0.hca.max_inline=0", true);
    CHECK(limit.exit_code == 2);
    CHECK(limit.out.find("node0.hca.max_inline") != std::string::npos);
    const CommandResult value = run_hcasim("lat --sizes 64 -n 10 --set node1.hca.tx_engines=0", true);
    CHECK(value.exit_code == 2);
    CHECK(value.out.find("node1.hca.tx_engines") != std::string::npos);
    CHECK(value.out.find("from 1 to 64") != std::string::npos);
}

TEST_CASE("hcasim params marks the keys a node can set for itself", "[config][node][cli]") {
    const CommandResult r = run_hcasim("params");
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("pcie.lanes = 8 lanes  [1, 2, 4, 8, 16, 32]  (per node) link width") != std::string::npos);
    CHECK(r.out.find("link.speed = fdr  [") != std::string::npos);
    CHECK(r.out.find("(per node) lane speed") == std::string::npos);
}

TEST_CASE("hcasim sweep varies one node's own value", "[config][node][sweep]") {
    const CommandResult r =
        run_hcasim("sweep --jobs 1 --param node1.pcie.lanes=1,8 -- bw --op write --sizes 65536 -n 200");
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    std::istringstream in(r.out);
    std::string header, narrow, wide;
    std::getline(in, header);
    std::getline(in, narrow);
    std::getline(in, wide);
    CHECK(header.rfind("node1.pcie.lanes,", 0) == 0);
    REQUIRE(narrow.rfind("1,", 0) == 0);
    REQUIRE(wide.rfind("8,", 0) == 0);
    // One Gen3 lane at the receiver holds the stream well below eight.
    auto bw_avg = [](const std::string& row) {
        std::istringstream f(row);
        std::string v;
        for (int i = 0; i < 5; ++i) std::getline(f, v, ',');  // node1.pcie.lanes,bytes,iterations,bw_peak,bw_avg
        return std::stod(v);
    };
    CHECK(bw_avg(narrow) < 0.5 * bw_avg(wide));
    const CommandResult unknown =
        run_hcasim("sweep --param node1.pcie.nosuch=1,2 -- bw --sizes 64 -n 10", true);
    CHECK(unknown.exit_code == 2);
    CHECK(unknown.out.find("node1.pcie.nosuch") != std::string::npos);
    const CommandResult shared = run_hcasim("sweep --param node1.link.speed=qdr,fdr -- bw --sizes 64 -n 10", true);
    CHECK(shared.exit_code == 2);
    CHECK(shared.out.find("one value for every node") != std::string::npos);
}

TEST_CASE("a node of another preset sits between the two classes, and nodes all of one preset are that preset",
          "[config][node][preset]") {
    const std::string lat = "lat --op write --sizes 2,4096 -n 100 ";
    const CommandResult cx3 = run_hcasim(lat + "--format csv --preset cx3-fdr");
    // The ConnectX-4 class on the same FDR link: the fabric is the class-wide preset's.
    const CommandResult cx4 = run_hcasim(lat + "--format csv --preset cx4-edr --set link.speed=fdr");
    const CommandResult mixed = run_hcasim(lat + "--format csv --preset cx3-fdr --set node1.preset=cx4-edr");
    const CommandResult both = run_hcasim(lat + "--format csv --preset cx4-edr --set link.speed=fdr " +
                                          "--set node0.preset=cx3-fdr --set node1.preset=cx3-fdr");
    for (const auto* r : {&cx3, &cx4, &mixed, &both}) REQUIRE(r->exit_code == 0);
    // Both adapters of the ConnectX-3 class under a ConnectX-4 fabric on FDR
    // links are the ConnectX-3 preset, row for row.
    CHECK(csv_rows(both.out) == csv_rows(cx3.out));
    // One adapter of each: the 4 KiB write lies between the two classes.
    auto row_4k = [](const std::string& out) {
        std::istringstream rows(csv_rows(out));
        std::string line;
        std::getline(rows, line);
        std::getline(rows, line);
        return csv_typical("bytes,\n" + line);
    };
    const double slow = row_4k(cx3.out), fast = row_4k(cx4.out), mid = row_4k(mixed.out);
    INFO(slow << " " << mid << " " << fast);
    CHECK(fast < slow);
    CHECK(mid > fast + 0.25 * (slow - fast));
    CHECK(mid < slow - 0.25 * (slow - fast));
    // The text header names each node's preset and bus, and what of its
    // preset the fabric kept.
    const CommandResult text = run_hcasim(lat + "--preset cx3-fdr --set node1.preset=cx4-edr");
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find(": cx3-fdr (node1: cx4-edr)") != std::string::npos);
    CHECK(text.out.find(": gen3 x8 (node1: gen3 x16)") != std::string::npos);
    CHECK(text.out.find("node1.preset    : cx4-edr; fabric-wide, so not taken: link.speed=edr") != std::string::npos);
    CHECK(text.out.find("node1.pcie.lanes : 16") != std::string::npos);
    CHECK(text.out.find("node1.pcie.gen") == std::string::npos);  // as the other node's
}

TEST_CASE("a node preset that is unknown, or for a node the fabric lacks, stops hcasim with its name",
          "[config][node][preset][cli]") {
    const CommandResult unknown = run_hcasim("lat --sizes 64 -n 10 --set node1.preset=nosuch", true);
    CHECK(unknown.exit_code == 2);
    CHECK(unknown.out.find("node1.preset: unknown preset 'nosuch' (presets: cx3-fdr") != std::string::npos);
    CHECK(unknown.out.find("#bytes") == std::string::npos);
    const CommandResult beyond = run_hcasim("lat --sizes 64 -n 10 --set node2.preset=cx4-edr", true);
    CHECK(beyond.exit_code == 2);
    CHECK(beyond.out.find("node2") != std::string::npos);
    CHECK(beyond.out.find("fabric.nodes") != std::string::npos);
    // A node of a preset on PCI cannot run the class-wide RTL engine, a PCIe device.
    const CommandResult rtl = run_hcasim("lat --sizes 64 -n 10 --set hca.dma.impl=rtl --set node1.preset=vi-pci66", true);
    CHECK(rtl.exit_code == 2);
    CHECK(rtl.out.find("node1: hca.dma.impl=rtl needs host.bus=pcie") != std::string::npos);
    const CommandResult sweep = run_hcasim("sweep --param node1.preset=cx4-edr,nosuch -- lat --sizes 64 -n 10", true);
    CHECK(sweep.exit_code == 2);
    CHECK(sweep.out.find("unknown preset 'nosuch'") != std::string::npos);
}

TEST_CASE("hcasim sweep varies one node's preset", "[config][node][preset][sweep]") {
    const CommandResult r = run_hcasim(
        "sweep --jobs 1 --param node1.preset=vi-pci66,cx3-fdr,cx4-edr -- lat --op write --sizes 4096 -n 100");
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    std::istringstream in(r.out);
    std::string header, pci, cx3, cx4;
    std::getline(in, header);
    std::getline(in, pci);
    std::getline(in, cx3);
    std::getline(in, cx4);
    CHECK(header.rfind("node1.preset,", 0) == 0);
    REQUIRE(pci.rfind("vi-pci66,", 0) == 0);
    REQUIRE(cx3.rfind("cx3-fdr,", 0) == 0);
    REQUIRE(cx4.rfind("cx4-edr,", 0) == 0);
    auto typical = [](const std::string& row) {
        std::istringstream f(row);
        std::string v;
        for (int i = 0; i < 6; ++i) std::getline(f, v, ',');  // node1.preset,bytes,iterations,t_min,t_max,t_typical
        return std::stod(v);
    };
    // A receiver on 64-bit/66 MHz PCI is far slower than either PCIe adapter.
    CHECK(typical(pci) > 2 * typical(cx3));
    CHECK(typical(cx4) < typical(cx3));
}
