// The Verilog DMA engine: its regression against the model (hcasim-regress)
// and the engine in whole-system runs (hca.dma.impl=rtl).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testbench/integration/harness.hpp"

using namespace hcasim::test;

namespace {

struct Command {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// Runs a command in dir; stdout and stderr apart.
Command run(const std::string& binary, const std::string& args, const std::string& dir = ".") {
    // Tests run in parallel from one directory: a stderr file of our own.
    static int calls = 0;
    const std::string err_file = (std::filesystem::temp_directory_path() /
                                  ("hcasim-rtl-stderr-" + std::to_string(getpid()) + "-" + std::to_string(++calls)))
                                     .string();
    const std::string cmd = "cd '" + dir + "' && '" + binary + "' " + args + " 2>'" + err_file + "'";
    Command c;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) c.out.append(buf, n);
    const int status = pclose(p);
    c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err_file);
    std::ostringstream es;
    es << e.rdbuf();
    c.err = es.str();
    std::filesystem::remove(err_file);
    return c;
}

Command regress(const std::string& args, const std::string& dir = ".") { return run(HCASIM_REGRESS_BINARY, args, dir); }
Command hcasim_cmd(const std::string& args, const std::string& dir = ".") { return run(HCASIM_BINARY, args, dir); }

// A fresh scratch directory per test.
std::string scratch(const std::string& name) {
    const auto d = std::filesystem::temp_directory_path() / ("hcasim-rtl-" + name + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d.string();
}

std::vector<std::string> case_lines(const std::string& out) {
    std::vector<std::string> v;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
        if (!l.empty() && l[0] >= '0' && l[0] <= '9' && l.find(" cases, ") == std::string::npos) v.push_back(l);
    return v;
}

std::vector<std::string> fields(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> f;
    for (std::string w; in >> w;) f.push_back(w);
    return f;
}

bool is_vcd(const std::string& path) {
    std::ifstream f(path);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return all.find("$enddefinitions") != std::string::npos && all.find("m_axis_rd_req_valid") != std::string::npos &&
           all.find("#") != std::string::npos;
}

}  // namespace

TEST_CASE("a short seeded regression of the rtl dma engine against the model passes and hits every coverage bin",
          "[rtl][regression]") {
    const Command c = regress("--iterations 60 --seed 3 --quiet --require-coverage");
    INFO(c.out << c.err);
    CHECK(c.exit_code == 0);
    CHECK(c.out.find("60 cases") != std::string::npos);
    CHECK(c.out.find("; 0 failed") != std::string::npos);
    CHECK(c.out.find("bins never hit: none") != std::string::npos);
}

TEST_CASE("the regression run twice with the same seed prints byte-identical output", "[rtl][regression][determinism]") {
    const Command a = regress("--iterations 12 --seed 11");
    const Command b = regress("--iterations 12 --seed 11");
    REQUIRE(a.exit_code == 0);
    CHECK(a.out == b.out);
    CHECK(case_lines(a.out).size() == 12);
    // Another seed gives other cases.
    const Command c = regress("--iterations 12 --seed 12");
    CHECK(c.out != a.out);
}

TEST_CASE("a case replayed from its seed alone gives the same descriptors bytes and cycle counts as in its run",
          "[rtl][regression]") {
    const Command all = regress("--iterations 8 --seed 5");
    REQUIRE(all.exit_code == 0);
    const auto lines = case_lines(all.out);
    REQUIRE(lines.size() == 8);
    for (std::size_t i : {std::size_t(2), std::size_t(7)}) {
        const auto f = fields(lines[i]);
        REQUIRE(f.size() >= 7);
        const Command one = regress("--case " + f[1]);
        REQUIRE(one.exit_code == 0);
        const auto g = fields(case_lines(one.out).at(0));
        INFO(lines[i] << "\n" << case_lines(one.out).at(0));
        CHECK(g[1] == f[1]);  // seed
        CHECK(g[2] == f[2]);  // descriptors
        CHECK(g[3] == f[3]);  // bytes
        CHECK(g[4] == f[4]);  // model cycles
        CHECK(g[5] == f[5]);  // RTL cycles
    }
}

TEST_CASE("stopping the rtl clock while the engine is quiet changes no cycle count and no byte",
          "[rtl][regression]") {
    const Command gated = regress("--iterations 10 --seed 21");
    const Command ungated = regress("--iterations 10 --seed 21 --ungated");
    REQUIRE(gated.exit_code == 0);
    REQUIRE(ungated.exit_code == 0);
    CHECK(case_lines(gated.out) == case_lines(ungated.out));
    // ... while the gated run clocks fewer cycles.
    auto clocked = [](const std::string& out) {
        const auto at = out.find("rtl: ");
        return std::stoull(out.substr(at + 5));
    };
    CHECK(clocked(gated.out) < clocked(ungated.out));
}

TEST_CASE("a failing regression case names its seed for replay and leaves a waveform of the rtl", "[rtl][regression]") {
    const std::string dir = scratch("fail");
    // No drift allowed at all: cases where the model and the RTL differ by a cycle fail.
    const Command c = regress("--iterations 6 --seed 2 --tolerance-pct 0 --tolerance-cycles 0", dir);
    REQUIRE(c.exit_code == 1);
    const auto at = c.out.find("replay: hcasim-regress --case ");
    REQUIRE(at != std::string::npos);
    const std::string seed = fields(c.out.substr(at + 30)).at(0);
    const std::string vcd = dir + "/hcasim-regress-case-" + seed + ".vcd";
    CHECK(c.out.find("waveform: hcasim-regress-case-" + seed + ".vcd") != std::string::npos);
    CHECK(is_vcd(vcd));
    // The replay fails the same way on its own.
    const Command one = regress("--case " + seed + " --tolerance-pct 0 --tolerance-cycles 0", dir);
    CHECK(one.exit_code == 1);
    std::filesystem::remove_all(dir);
}

TEST_CASE("hcasim-regress --vcd writes a waveform of the rtl engine", "[rtl][regression][vcd]") {
    const std::string dir = scratch("vcd");
    const Command c = regress("--iterations 2 --seed 4 --vcd run.vcd", dir);
    CHECK(c.exit_code == 0);
    CHECK(is_vcd(dir + "/run.vcd"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("hcasim-regress rejects a bad option value with a message naming it", "[rtl][regression][cli]") {
    const Command c = regress("--iterations 0");
    CHECK(c.exit_code == 2);
    CHECK(c.err.find("--iterations") != std::string::npos);
    const Command d = regress("--iterations 1 --set pcie.mps=100");
    CHECK(d.exit_code == 2);
    CHECK(d.err.find("pcie.mps") != std::string::npos);
}

TEST_CASE("hca.dma.impl=foo stops hcasim with a message naming the value and the choices", "[rtl][cli]") {
    const Command c = hcasim_cmd("lat --sizes 2 -n 2 --set hca.dma.impl=foo");
    CHECK(c.exit_code == 2);
    CHECK(c.out.empty());
    CHECK(c.err.find("'foo'") != std::string::npos);
    CHECK(c.err.find("hca.dma.impl") != std::string::npos);
    CHECK(c.err.find("systemc, rtl") != std::string::npos);
}

TEST_CASE("hca.dma.impl=tlm, the SystemC engine's former name, still runs the SystemC engine", "[rtl][cli]") {
    const Command systemc = hcasim_cmd("lat --sizes 64,4096 -n 50 --format csv --set hca.dma.impl=systemc");
    const Command tlm = hcasim_cmd("lat --sizes 64,4096 -n 50 --format csv --set hca.dma.impl=tlm");
    const Command rtl = hcasim_cmd("lat --sizes 64,4096 -n 50 --format csv --set hca.dma.impl=rtl");
    REQUIRE(systemc.exit_code == 0);
    REQUIRE(tlm.exit_code == 0);
    REQUIRE(rtl.exit_code == 0);
    CHECK(tlm.out == systemc.out);
    CHECK(rtl.out != systemc.out);
}

TEST_CASE("hcasim --vcd needs the rtl engine and an unwritable vcd path is a configuration error", "[rtl][cli][vcd]") {
    const Command c = hcasim_cmd("lat --sizes 2 -n 2 --vcd x.vcd");
    CHECK(c.exit_code == 2);
    CHECK(c.err.find("hca.dma.impl=rtl") != std::string::npos);
    const Command d = hcasim_cmd("lat --sizes 2 -n 2 --set hca.dma.impl=rtl --vcd /nonexistent-dir/x.vcd");
    CHECK(d.exit_code != 0);
    CHECK(d.err.find("/nonexistent-dir/x") != std::string::npos);
}

TEST_CASE("hcasim --vcd writes one waveform per rtl engine instance used", "[rtl][cli][vcd]") {
    const std::string dir = scratch("sysvcd");
    const Command c = hcasim_cmd("lat --sizes 64 -n 4 --set hca.dma.impl=rtl --vcd w.vcd", dir);
    CHECK(c.exit_code == 0);
    CHECK(is_vcd(dir + "/w.node0.hca.dma_engine.ch0.vcd"));
    CHECK(is_vcd(dir + "/w.node1.hca.dma_engine.ch0.vcd"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("every rc operation delivers intact data through the rtl dma engine", "[rtl][integration][data]") {
    std::vector<XCase> cases;
    for (XOp op : {XOp::Send, XOp::Write, XOp::WriteImm, XOp::Read}) {
        for (std::uint32_t size : {1u, 255u, 4097u, 65539u}) {
            cases.push_back({op, size, 0, 0});
            cases.push_back({op, size, 3 * 4096 - 37, 5 * 4096 - 1});
        }
        XCase sg{op, 4097, 3 * 4096 - 29, 5 * 4096 + 2};
        if (op == XOp::Read) sg.dst_sges = 3;
        else sg.src_sges = 3;
        cases.push_back(sg);
    }
    CaseRun r;
    r.cfg = {{"hca.dma.impl", "rtl"}, {"hca.dma.rtl_channels", "3"}};
    check_cases(run_cases(cases, r), cases);
}

TEST_CASE("the latency and bandwidth workloads run unchanged on the rtl engine, deterministic and close to the model",
          "[rtl][integration][determinism]") {
    const std::string args = " --sizes 64,4096,65536 -n 200 --format csv";
    const Command lat_rtl = hcasim_cmd("lat" + args + " --set hca.dma.impl=rtl");
    const Command lat_rtl2 = hcasim_cmd("lat" + args + " --set hca.dma.impl=rtl");
    const Command lat_systemc = hcasim_cmd("lat" + args);
    const Command bw_rtl = hcasim_cmd("bw" + args + " --set hca.dma.impl=rtl");
    const Command bw_systemc = hcasim_cmd("bw" + args);
    REQUIRE(lat_rtl.exit_code == 0);
    REQUIRE(bw_rtl.exit_code == 0);
    CHECK(lat_rtl.out == lat_rtl2.out);
    // Same rows and close figures: the engines differ in cycles, not in
    // behaviour. Latency within 5 %; bandwidth within 15 %, as small messages
    // are bound by the per-request cycles in which the engines differ most
    // (docs/calibration.md).
    auto column = [](const std::string& csv, int col) {
        std::vector<double> v;
        std::istringstream in(csv);
        std::string l;
        std::getline(in, l);  // header
        while (std::getline(in, l)) {
            std::istringstream row(l);
            std::string cell;
            for (int i = 0; i <= col && std::getline(row, cell, ','); ++i) {}
            v.push_back(std::stod(cell));
        }
        return v;
    };
    const auto t_rtl = column(lat_rtl.out, 4), t_systemc = column(lat_systemc.out, 4);
    const auto b_rtl = column(bw_rtl.out, 3), b_systemc = column(bw_systemc.out, 3);
    REQUIRE(t_rtl.size() == 3);
    REQUIRE(t_systemc.size() == 3);
    REQUIRE(b_rtl.size() == 3);
    REQUIRE(b_systemc.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        INFO("row " << i << ": latency " << t_rtl[i] << " vs " << t_systemc[i] << ", bandwidth " << b_rtl[i] << " vs " << b_systemc[i]);
        CHECK(t_rtl[i] == Approx(t_systemc[i]).epsilon(0.05));
        CHECK(b_rtl[i] == Approx(b_systemc[i]).epsilon(0.15));
    }
}

TEST_CASE("the kvipl latency workload runs on the rtl engine: descriptor fetch and write-back go through the rtl",
          "[rtl][integration][kvipl]") {
    const std::string args = "lat --api kvipl --sizes 64,4096 -n 100 --format csv";
    const Command rtl = hcasim_cmd(args + " --set hca.dma.impl=rtl");
    const Command systemc = hcasim_cmd(args);
    INFO(rtl.err);
    REQUIRE(rtl.exit_code == 0);
    REQUIRE(systemc.exit_code == 0);
    CHECK(rtl.out != systemc.out);  // the engines differ in cycles ...
    std::istringstream a(rtl.out), b(systemc.out);
    std::string la, lb;
    std::getline(a, la);
    std::getline(b, lb);
    CHECK(la == lb);
    int rows = 0;
    while (std::getline(a, la) && std::getline(b, lb)) {
        // ... not in what the workload sees: same sizes, latency within 5 %.
        CHECK(la.substr(0, la.find(',')) == lb.substr(0, lb.find(',')));
        auto typical = [](const std::string& l) {
            std::istringstream row(l);
            std::string cell;
            for (int i = 0; i <= 4 && std::getline(row, cell, ','); ++i) {}
            return std::stod(cell);
        };
        CHECK(typical(la) == Approx(typical(lb)).epsilon(0.05));
        ++rows;
    }
    CHECK(rows == 2);
}

namespace {

// verilator --lint-only of the engine with one parameter overridden.
Command lint_engine(const std::string& top, const std::string& parameter) {
    const std::string rtl = std::string(HCASIM_SOURCE_DIR) + "/rtl/";
    std::string files;
    for (const char* f : {"hca_dma_engine_cosim.v", "hca_dma_engine.v", "hca_dma_rd.v", "hca_dma_wr.v", "axis_skid.v"})
        files += " '" + rtl + f + "'";
    return run(HCASIM_VERILATOR_BIN, "--lint-only -Wall" + files + " --top-module " + top +
                                         (parameter.empty() ? "" : " -G" + parameter));
}

}  // namespace

TEST_CASE("the Verilog DMA engine refuses a parameter out of its range at elaboration, naming it", "[rtl][params]") {
    SECTION("the defaults and the widths the benches use elaborate cleanly") {
        for (const char* p : {"", "DATA_WIDTH=128", "DATA_WIDTH=256", "OUTSTANDING_READS=4", "SLOTS=8"}) {
            const Command c = lint_engine("hca_dma_engine", p);
            INFO(p << "\n" << c.err);
            CHECK(c.exit_code == 0);
        }
        const Command cosim = lint_engine("hca_dma_engine_cosim", "");
        INFO(cosim.err);
        CHECK(cosim.exit_code == 0);
    }
    SECTION("each check") {
        const std::pair<const char*, const char*> cases[] = {
            {"DATA_WIDTH=96", "DATA_WIDTH = 96: must be a power of two from 16 to 1024 bits"},
            {"DATA_WIDTH=2048", "DATA_WIDTH = 2048: must be a power of two from 16 to 1024 bits"},
            {"KEEP_WIDTH=4", "KEEP_WIDTH = 4: must be DATA_WIDTH/8 = 64"},
            {"OUTSTANDING_READS=3", "OUTSTANDING_READS = 3: must be a power of two, at least 2"},
            {"OUTSTANDING_READS=1", "OUTSTANDING_READS = 1: must be a power of two, at least 2"},
            {"SLOTS=6", "hca_dma_engine: SLOTS = 6: must be a power of two, at least 2"},
            {"MAX_BURST=8192", "MAX_BURST = 8192: must be a power of two from 128 to 4096 bytes"},
            {"MAX_BURST=64", "MAX_BURST = 64: must be a power of two from 128 to 4096 bytes"},
            {"ADDR_WIDTH=12", "hca_dma_engine: ADDR_WIDTH = 12: must be 13 to 64 bits"},
            {"MAX_LEN=0", "hca_dma_engine: MAX_LEN = 0: must be 1 to 2^LEN_WIDTH - 1 bytes"},
        };
        for (const auto& [parameter, message] : cases) {
            const Command c = lint_engine("hca_dma_engine", parameter);
            INFO(parameter << "\n" << c.err);
            CHECK(c.exit_code != 0);
            CHECK(c.err.find(message) != std::string::npos);
        }
        const Command skid = lint_engine("axis_skid", "WIDTH=0");
        INFO(skid.err);
        CHECK(skid.exit_code != 0);
        CHECK(skid.err.find("axis_skid: WIDTH = 0: must be at least 1") != std::string::npos);
    }
}
