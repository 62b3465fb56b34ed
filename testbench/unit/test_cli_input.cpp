// What the hcasim and hcasim-regress commands do with every kind of input
// a user can get wrong: each is refused with exit status 2 and one line
// naming the option or key and what it accepts, before anything runs, or it
// does the right thing. Also: the workloads finish for every -n >= 1, and a
// host program that fails ends the run at once with a message naming it.
//
// Almost every case fails before a system is built, so the table runs in
// seconds, also under the sanitizers.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/sim/config.hpp"
#include "testbench/cli/cli_input.hpp"
#include "testbench/system/isolated.hpp"
#include "testbench/system/system.hpp"
#include "testbench/workloads/perftest.hpp"
#include "testbench/workloads/rc_endpoint.hpp"

using hcasim::sim::Config;
using hcasim::sim::ConfigError;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string config_error(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

std::string argument_error(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

// A scratch directory under /tmp, removed with everything in it at the end.
class Scratch {
public:
    Scratch() {
        char name[] = "/tmp/hcasim_cli_XXXXXX";
        REQUIRE(mkdtemp(name) != nullptr);
        m_dir = name;
    }
    ~Scratch() {
        std::error_code ec;
        std::filesystem::remove_all(m_dir, ec);
    }
    const std::string& dir() const { return m_dir; }
    std::string file(const std::string& name, const std::string& contents) const {
        const std::string path = m_dir + "/" + name;
        std::ofstream(path, std::ios::binary) << contents;
        return path;
    }

private:
    std::string m_dir;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Single-quoted for the shell.
std::string quoted(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

struct Outcome {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// Runs binary with arguments already quoted for the shell. A run that
// hangs is ended after a minute (exit status 124), so a hang fails the test
// instead of stalling the suite.
Outcome run(const char* binary, const std::string& args) {
    Scratch s;
    const std::string out = s.dir() + "/out", err = s.dir() + "/err";
    const std::string cmd = "timeout 60 " + quoted(binary) + " " + args + " >" + quoted(out) + " 2>" + quoted(err) + " </dev/null";
    const int status = std::system(cmd.c_str());
    Outcome o;
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.out = slurp(out);
    o.err = slurp(err);
    return o;
}

Outcome run_hcasim(const std::string& args) { return run(HCASIM_BINARY, args); }
Outcome run_regress(const std::string& args) { return run(HCASIM_REGRESS_BINARY, args); }

// Refused as the project refuses bad input: status 2, one line on standard
// error naming every part of what, nothing on standard output.
void check_refused(const Outcome& o, const std::vector<std::string>& names) {
    INFO("stderr: " << o.err);
    CHECK(o.exit_code == 2);
    CHECK(o.out.empty());
    CHECK(o.err.rfind("hcasim", 0) == 0);
    CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
    for (const auto& n : names) CHECK(contains(o.err, n));
}

struct Refusal {
    std::string args;                 // quoted for the shell
    std::vector<std::string> names;   // what the message must name
};

// The data rows of CSV output (the header dropped).
std::vector<std::string> csv_rows(const std::string& out) {
    std::vector<std::string> rows;
    std::size_t b = 0;
    for (std::size_t e; (e = out.find('\n', b)) != std::string::npos; b = e + 1)
        if (b > 0 || out.compare(0, 6, "bytes,") != 0) rows.push_back(out.substr(b, e - b));
    return rows;
}

}  // namespace

// ---------------------------------------------------------------------------
// Values: the parsers themselves.

TEST_CASE("command-line numbers are plain decimal and signs or blanks or hex or octal or junk or overflow are refused",
          "[cli][unit]") {
    using hcasim::cli::parse_unsigned;
    for (const char* bad : {"", " 1", "1 ", "+1", "-1", "01", "0x10", "1e3", "1.0", "1x", "x", "18446744073709551616",
                            "99999999999999999999999"}) {
        INFO("'" << bad << "'");
        const std::string e = argument_error([&] { parse_unsigned("--qps", bad, 0, UINT64_MAX); });
        CHECK(contains(e, "--qps"));
        CHECK(contains(e, "an integer from 0 to 18446744073709551615"));
    }
    CHECK(parse_unsigned("--qps", "0", 0, 5) == 0);
    CHECK(parse_unsigned("--qps", "5", 0, 5) == 5);
    CHECK(parse_unsigned("--seed", "18446744073709551615", 0, UINT64_MAX) == UINT64_MAX);
    CHECK(contains(argument_error([&] { parse_unsigned("--qps", "6", 0, 5, "the device's hca.max_qp"); }),
                   "an integer from 0 to 5 (the device's hca.max_qp)"));
    CHECK(contains(argument_error([&] { parse_unsigned("-n/--iters", "0", 1, 9); }), "-n/--iters"));

    using hcasim::cli::parse_nonnegative;
    for (const char* bad : {"", "-1", "+1", "0x10", "inf", "nan", "1e999", "1 ", "1,5", ".", "e5"}) {
        INFO("'" << bad << "'");
        CHECK(contains(argument_error([&] { parse_nonnegative("--tolerance-pct", bad); }), "--tolerance-pct"));
    }
    CHECK(parse_nonnegative("--tolerance-pct", "0") == 0);
    CHECK(parse_nonnegative("--tolerance-pct", "2.5") == Approx(2.5));
    CHECK(parse_nonnegative("--tolerance-pct", "1e1") == Approx(10));
}

TEST_CASE("message sizes are decimal and a range needs power-of-two bounds and a list has no empty or repeated sizes",
          "[cli][unit]") {
    using hcasim::testbench::parse_sizes;
    CHECK(parse_sizes("2:16") == std::vector<std::uint32_t>{2, 4, 8, 16});
    CHECK(parse_sizes("4096") == std::vector<std::uint32_t>{4096});
    CHECK(parse_sizes("3,100,7") == std::vector<std::uint32_t>{3, 100, 7});
    CHECK(parse_sizes("2147483648") == std::vector<std::uint32_t>{2147483648u});
    for (const char* bad : {"", "8,", ",8", "8,,16", "2:3", "3:100", "3:3", "0x10", "010", "0", "-8", "+8", " 8",
                            "2147483649", "99999999999", "64,64", "2:4:8", "16:2", ":8", "8:", "1e3"}) {
        INFO("'" << bad << "'");
        CHECK(contains(argument_error([&] { parse_sizes(bad); }), "--sizes"));
    }
    CHECK(contains(argument_error([&] { parse_sizes("3:100"); }), "powers of two"));
    CHECK(contains(argument_error([&] { parse_sizes("0x10"); }), "decimal"));
}

TEST_CASE("a configuration value with a NUL byte is refused and the message shows it escaped", "[config][unit]") {
    Config cfg;
    const std::string e = config_error([&] { cfg.set("pcie.lanes", std::string("16\0junk", 7)); });
    CHECK(contains(e, "pcie.lanes"));
    CHECK(contains(e, "NUL"));
    CHECK(contains(e, "16\\x00junk"));
    CHECK(e.find('\0') == std::string::npos);
    CHECK(contains(config_error([&] { cfg.set("hca.dma.vcd", std::string("a\0b", 3)); }), "hca.dma.vcd"));
    CHECK(cfg.get_int("pcie.lanes") == 8);
}

TEST_CASE("real-valued configuration keys take decimal notation only", "[config][unit]") {
    Config cfg;
    for (const char* bad : {"0x10", "0X1p4", "inf", "nan", "infinity", "1e400", "10ns", " "}) {
        INFO("'" << bad << "'");
        const std::string e = config_error([&] { cfg.set("host.cpu.poll_cq_ns", bad); });
        CHECK(contains(e, "host.cpu.poll_cq_ns"));
        CHECK(contains(e, "expected a number from"));
    }
    CHECK_NOTHROW(cfg.set("host.cpu.poll_cq_ns", "16"));
    CHECK_NOTHROW(cfg.set("host.cpu.poll_cq_ns", "1.5e1"));
    CHECK(cfg.get_real("host.cpu.poll_cq_ns") == Approx(15));
}

TEST_CASE("configuration errors print whole-number ranges exactly", "[config][unit]") {
    Config cfg;
    const std::string e = config_error([&] { cfg.set("sim.seed", "-1"); });
    CHECK(contains(e, "an integer from 0 to 4294967295"));
    CHECK_FALSE(contains(e, "e+"));
    CHECK(contains(config_error([&] { cfg.set("hca.vi_max_transfer", "0"); }), "to 2147483648"));
}

TEST_CASE("only a regular config file of at most 1 MiB is read and directories or devices or FIFOs or empty names are refused",
          "[config][unit]") {
    Scratch s;
    Config cfg;
    CHECK(contains(config_error([&] { cfg.load_file(s.dir()); }), "is a directory"));
    CHECK(contains(config_error([&] { cfg.load_preset(s.dir()); }), "is a directory"));
    CHECK(contains(config_error([&] { cfg.load_file(""); }), "file name is empty"));
    CHECK(contains(config_error([&] { cfg.load_file("/dev/zero"); }), "'/dev/zero' is not a regular file"));
    CHECK(contains(config_error([&] { cfg.load_preset("/dev/zero"); }), "not a regular file"));
    const std::string fifo = s.dir() + "/fifo.ini";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(contains(config_error([&] { cfg.load_file(fifo); }), "not a regular file"));  // and does not block
    const std::string big = s.file("big.ini", "[pcie]\n" + std::string(Config::kMaxFileBytes, '#') + "\n");
    CHECK(contains(config_error([&] { cfg.load_file(big); }), "larger than 1048576 bytes"));
    const std::string fits = s.file("fits.ini", "[pcie]\nlanes = 16\n" + std::string(Config::kMaxFileBytes - 30, ' ') + "\n");
    CHECK(config_error([&] { cfg.load_file(fits); }) == "");
    CHECK(cfg.get_int("pcie.lanes") == 16);
}

TEST_CASE("a config file may start with a UTF-8 byte order mark and a bad line is shown with its bytes escaped",
          "[config][unit]") {
    Scratch s;
    Config cfg;
    const std::string bom = s.file("bom.ini", "\xEF\xBB\xBF[pcie]\nlanes = 16\n");
    CHECK(config_error([&] { cfg.load_file(bom); }) == "");
    CHECK(cfg.get_int("pcie.lanes") == 16);
    // A BOM anywhere else is not one.
    const std::string late = s.file("late.ini", "[pcie]\n\xEF\xBB\xBF[link]\n");
    const std::string e = config_error([&] { cfg.load_file(late); });
    CHECK(contains(e, late + ":2: invalid line '\\xef\\xbb\\xbf[link]'"));
    const std::string ctl = s.file("ctl.ini", "[pcie]\nlanes\x01 16\n");
    CHECK(contains(config_error([&] { cfg.load_file(ctl); }), ":2: invalid line 'lanes\\x01 16'"));
    const std::string nul = s.file("nul.ini", std::string("[pcie]\nlanes = 16\0junk\n", 24));
    const std::string n = config_error([&] { cfg.load_file(nul); });
    CHECK(contains(n, "pcie.lanes"));
    CHECK(contains(n, "NUL"));
    // Section names and values still work as before: '#' comments, blanks.
    const std::string ok = s.file("ok.ini", "# c\n[ link ]\nspeed = qdr # fast enough\n; note\n[pcie]\nmps=512\n");
    CHECK(config_error([&] { cfg.load_file(ok); }) == "");
    CHECK(cfg.get_choice("link.speed") == "qdr");
    CHECK(cfg.get_int("pcie.mps") == 512);
    CHECK(contains(config_error([&] { cfg.load_file(s.file("sec.ini", "[]\n")); }), "invalid line '[]'"));
    CHECK(contains(config_error([&] { cfg.load_file(s.file("eq.ini", "[pcie]\n= 4\n")); }), "invalid line '= 4'"));
}

// ---------------------------------------------------------------------------
// The hcasim command: a table of refused input.

TEST_CASE("hcasim refuses by name and before anything runs every option a command does not use", "[cli]") {
    const std::vector<Refusal> table = {
        {"lat --tx-depth 0", {"lat does not use --tx-depth"}},
        {"lat --qps 0", {"lat does not use --qps"}},
        {"lat --dma junk", {"lat does not use --dma"}},
        {"params --sizes 0", {"params does not use --sizes"}},
        {"params --preset cx3-fdr", {"params does not use --preset"}},
        {"presets --preset nosuch", {"presets does not use --preset"}},
        {"bench --qps 7", {"bench does not use --qps"}},
        {"bench --tx-depth 7", {"bench does not use --tx-depth"}},
        {"bench --format csv", {"bench does not use --format"}},
        {"bench --vcd w.vcd", {"bench does not use --vcd"}},
        {"run --op read", {"run does not use --op"}},
        {"--op read", {"run does not use --op"}},
        {"run --dma rtl", {"run does not use --dma"}},
        {"bw --dma rtl", {"bw does not use --dma"}},
        {"lat a", {"positional"}},
        {"nosuch", {"unknown command 'nosuch'"}},
        {"lat --nosuch 1", {"--nosuch"}},
        {"run --qp-type uc", {"run does not use --qp-type"}},
        {"run --post-list 4", {"run does not use --post-list"}},
        {"bench --srq", {"bench does not use --srq"}},
        {"msgrate --api verbs", {"msgrate does not use --api"}},
        {"msgrate --reliability rd", {"msgrate does not use --reliability"}},
    };
    for (const auto& r : table) {
        INFO("hcasim " << r.args);
        check_refused(run_hcasim(r.args), r.names);
    }
}

TEST_CASE("hcasim refuses bad option values naming the option and what it accepts", "[cli]") {
    const std::vector<Refusal> table = {
        {"params --format junk", {"--format", "'junk'", "text or md"}},
        {"lat --format junk", {"--format", "'junk'", "text, csv or json"}},
        {"lat --op junk", {"--op", "'junk'", "send, write, read, atomic_cas or atomic_fadd"}},
        {"lat --api vipl", {"--api 'vipl'", "verbs or kvipl"}},
        {"bench --dma junk", {"--dma", "'junk'", "systemc or rtl"}},
        {"lat --api kvipl --reliability xx", {"--reliability", "'xx'", "ud, rd or rr"}},
        {"lat --reliability rr", {"--reliability", "kvipl"}},
        // -n: at least 1, decimal.
        {"lat -n 0", {"-n/--iters", "'0'", "from 1 to 100000000"}},
        {"lat -n -1", {"-n/--iters", "'-1'"}},
        {"bw -n 0", {"-n/--iters", "'0'"}},
        {"lat -n 1x", {"-n/--iters", "'1x'"}},
        {"lat -n +5", {"-n/--iters", "'+5'"}},
        {"lat -n 0x10", {"-n/--iters", "'0x10'"}},
        {"lat -n 010", {"-n/--iters", "'010'"}},
        {"lat -n ' 5'", {"-n/--iters"}},
        {"lat -n 99999999999999999999", {"-n/--iters"}},
        {"lat -n 100000001", {"-n/--iters", "100000000"}},
        {"bench -n 0", {"-n/--iters"}},
        {"bw --qps 2 -n 100000000", {"-n/--iters", "--qps", "200000000 messages"}},
        // --sizes
        {"lat --sizes ''", {"empty --sizes"}},
        {"lat --sizes 8,", {"--sizes '8,'", "empty size"}},
        {"lat --sizes 2:3", {"--sizes '2:3'", "powers of two"}},
        {"lat --sizes 3:100", {"--sizes '3:100'", "powers of two"}},
        {"lat --sizes 0x10", {"'0x10'", "--sizes", "decimal"}},
        {"lat --sizes 010", {"'010'", "--sizes", "decimal"}},
        {"lat --sizes 0", {"'0'", "--sizes", "1 to 2147483648"}},
        {"lat --sizes 4294967296", {"--sizes", "1 to 2147483648"}},
        {"lat --sizes 64,64", {"--sizes", "64 is listed twice"}},
        {"bench --sizes 64,128", {"--sizes", "one message size"}},
        // --inline: 0 to the device's limit, not for reads or VIs.
        {"lat --inline -5", {"--inline", "'-5'", "0 to 256", "hca.max_inline"}},
        {"lat --inline 100000", {"--inline", "'100000'", "0 to 256", "hca.max_inline"}},
        {"bw --inline 100000", {"--inline", "0 to 256", "hca.max_inline"}},
        {"lat --op read --inline 64", {"--inline", "--op read"}},
        {"lat --api kvipl --inline 0", {"--inline", "kvipl"}},
        // --mtu
        {"lat --mtu 300", {"--mtu", "'300'", "256, 512, 1024, 2048, 4096"}},
        {"lat --mtu -4096", {"--mtu", "'-4096'"}},
        {"lat --mtu 04096", {"--mtu"}},
        {"lat --set port.max_mtu=256 --mtu 4096", {"--mtu 4096", "port.max_mtu = 256"}},
        {"lat --api kvipl --mtu 4096", {"--mtu", "kvipl"}},
        // --tx-depth and --qps against the device.
        {"bw --tx-depth 0", {"--tx-depth", "'0'", "1 to 16384", "hca.max_qp_wr"}},
        {"bw --tx-depth 16385", {"--tx-depth", "1 to 16384", "hca.max_qp_wr"}},
        {"bw --tx-depth 64 --set hca.max_qp_wr=32", {"--tx-depth", "1 to 32", "hca.max_qp_wr"}},
        {"bw --qps 0", {"--qps", "'0'", "hca.max_qp"}},
        {"bw --qps 65537", {"--qps", "1 to 65536", "hca.max_qp"}},
        {"bw --qps 16384", {"--qps 16384", "--tx-depth 128", "4194320 entries", "hca.max_cqe = 4194303", "16383 QPs"}},
        {"bw --qps 65536 --tx-depth 16384", {"--qps 65536", "--tx-depth 16384", "hca.max_cqe"}},
        {"bw --qps 8 --set hca.max_qp=4", {"--qps", "1 to 4", "hca.max_qp"}},
        {"lat --set hca.max_cqe=512", {"completion queues of 1024 entries", "hca.max_cqe = 512"}},
        {"lat --set hca.max_qp_wr=64", {"128 work requests", "hca.max_qp_wr = 64"}},
        {"lat --set hca.max_sge=2", {"scatter/gather", "hca.max_sge = 2"}},
        // KVIPL against the NIC.
        {"lat --api kvipl --sizes 2097152", {"--sizes 2097152", "hca.vi_max_transfer = 1048576"}},
        {"bw --api kvipl --sizes 64,4096 --set hca.vi_max_transfer=1024", {"--sizes 4096", "hca.vi_max_transfer = 1024"}},
        {"bw --api kvipl --qps 4", {"--qps", "one VI"}},
        {"bw --api kvipl --tx-depth 1025", {"--tx-depth", "1 to 1024", "hca.vi_max_descriptors"}},
        {"lat --api kvipl --op read --set hca.vi_rdma_read=false", {"--op read", "hca.vi_rdma_read = false"}},
        {"lat --api kvipl --reliability ud --op send", {"--reliability ud", "--op write"}},
        {"lat --api kvipl --set hca.max_mr=1", {"2 registered memory regions", "hca.max_mr = 1"}},
    };
    for (const auto& r : table) {
        INFO("hcasim " << r.args);
        check_refused(run_hcasim(r.args), r.names);
    }
}

TEST_CASE("hcasim refuses what a QP type cannot do and post lists or atomics out of place by name before anything runs",
          "[cli]") {
    const std::vector<Refusal> table = {
        {"lat --qp-type junk", {"--qp-type", "'junk'", "rc, uc, ud or xrc"}},
        {"lat --qp-type ud --op write", {"--op write is not available with --qp-type ud (UD has SEND only)"}},
        {"bw --qp-type ud --op read", {"--op read", "--qp-type ud", "SEND only"}},
        {"msgrate --qp-type ud --op write", {"--op write", "--qp-type ud"}},
        {"lat --qp-type uc --op read", {"--op read is not available with --qp-type uc", "SEND and RDMA WRITE only"}},
        {"bw --qp-type uc --op atomic_cas", {"--op atomic_cas", "--qp-type uc"}},
        {"lat --qp-type ud --op atomic_fadd", {"--op atomic_fadd", "--qp-type ud"}},
        // A UD message is one packet.
        {"lat --qp-type ud --sizes 8192", {"--sizes 8192", "--qp-type ud", "path MTU, 4096 bytes"}},
        {"bw --qp-type ud --mtu 1024 --sizes 64,2048", {"--sizes 2048", "1024 bytes", "--mtu"}},
        // Post lists: bw and msgrate, at most the TX depth.
        {"lat --post-list 2", {"--post-list", "'2'", "lat posts one work request at a time"}},
        {"bw --post-list 0", {"--post-list", "'0'"}},
        {"bw --post-list 64 --tx-depth 32", {"--post-list 64", "--tx-depth 32"}},
        {"msgrate --tx-depth 8", {"--post-list 16", "--tx-depth 8"}},
        // Atomics: 8 bytes, no inline data, not through KVIPL.
        {"lat --op atomic_cas --sizes 64", {"--op atomic_cas", "8-byte", "--sizes 64"}},
        {"bw --op atomic_fadd --inline 8", {"--inline", "--op atomic_fadd"}},
        {"lat --api kvipl --op atomic_fadd", {"--op atomic_fadd", "--api kvipl"}},
        // Verbs only.
        {"bw --api kvipl --qp-type uc", {"--qp-type", "--api verbs"}},
        {"lat --api kvipl --srq", {"--srq", "--api verbs"}},
        {"bw --api kvipl --post-list 4", {"--post-list", "--api verbs"}},
        // msgrate: one size, the QPs' CQ entries within the device's.
        {"msgrate --sizes 64,128", {"msgrate runs one message size", "--sizes '64,128'"}},
        {"msgrate --qps 0", {"--qps", "'0'", "hca.max_qp"}},
        {"msgrate -n 0", {"-n/--iters", "'0'"}},
    };
    for (const auto& r : table) {
        INFO("hcasim " << r.args);
        check_refused(run_hcasim(r.args), r.names);
    }
}

TEST_CASE("hcasim refuses configuration values and files that are not what they claim to be", "[cli][config]") {
    Scratch s;
    const std::string fifo = s.dir() + "/fifo.ini";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    const std::string bad_line = s.file("bad.ini", "[pcie]\nlanes: 16\n");
    const std::vector<Refusal> table = {
        {"lat --set host.cpu.poll_cq_ns=0x10", {"host.cpu.poll_cq_ns", "'0x10'"}},
        {"lat --set sim.seed=-1", {"sim.seed", "0 to 4294967295"}},
        {"lat --preset " + quoted(s.dir()), {s.dir(), "is a directory"}},
        {"lat --config " + quoted(s.dir()), {s.dir(), "is a directory"}},
        {"lat --config ''", {"configuration file name is empty"}},
        {"lat --preset ''", {"unknown preset ''"}},
        {"lat --preset /dev/zero", {"/dev/zero", "not a regular file"}},
        {"lat --config /dev/zero", {"/dev/zero", "not a regular file"}},
        {"lat --config " + quoted(fifo), {fifo, "not a regular file"}},
        {"lat --config " + quoted(bad_line), {bad_line + ":2:", "invalid line 'lanes: 16'"}},
        {"lat --config /nonexistent/x.ini", {"/nonexistent/x.ini"}},
        // Waveforms: a file name, for the RTL engine only.
        {"lat --vcd ''", {"--vcd needs a file name"}},
        {"lat --vcd " + quoted(s.dir()) + " --set hca.dma.impl=rtl", {"--vcd", s.dir(), "is a directory"}},
        {"lat --vcd /nonexistent/w.vcd --set hca.dma.impl=rtl", {"--vcd", "'/nonexistent' does not exist"}},
        {"lat --vcd w.vcd", {"--vcd", "hca.dma.impl=rtl"}},
        {"lat --set hca.dma.vcd=w.vcd", {"hca.dma.vcd", "hca.dma.impl=rtl"}},
        {"lat --set hca.dma.impl=rtl --set hca.dma.vcd=" + quoted(s.dir()), {"hca.dma.vcd", "is a directory"}},
        {"bench --dma rtl --set hca.dma.impl=rtl", {"hca.dma.impl", "both DMA engines"}},
        {"bench --set hca.dma.impl=rtl --set hca.dma.vcd=w.vcd", {"hca.dma.vcd"}},
    };
    for (const auto& r : table) {
        INFO("hcasim " << r.args);
        check_refused(run_hcasim(r.args), r.names);
    }
    // A BOM is accepted.
    const std::string bom = s.file("bom.ini", "\xEF\xBB\xBF[pcie]\nlanes = 16\n");
    const Outcome o = run_hcasim("lat --sizes 64 -n 2 --format csv --config " + quoted(bom));
    CHECK(o.exit_code == 0);
    CHECK(contains(o.out, "\n64,2,"));
}

TEST_CASE("hcasim params prints whole-number ranges exactly and help advertises the device's real limits", "[cli]") {
    const Outcome p = run_hcasim("params");
    REQUIRE(p.exit_code == 0);
    CHECK(contains(p.out, "sim.seed = 1  [0 .. 4294967295]"));
    CHECK(contains(p.out, "hca.vi_max_transfer = 1048576 bytes  [1 .. 2147483648]"));
    CHECK_FALSE(contains(p.out, "e+0"));
    const Outcome h = run_hcasim("--help");
    REQUIRE(h.exit_code == 0);
    // One line per option, however the help text is wrapped.
    std::string help;
    for (char ch : h.out)
        if (!(std::isspace(static_cast<unsigned char>(ch)) && !help.empty() && help.back() == ' '))
            help += std::isspace(static_cast<unsigned char>(ch)) ? ' ' : ch;
    CHECK(contains(help, "1 to hca.max_qp_wr (16384)"));
    CHECK(contains(help, "hca.max_cqe (4194303)"));
    CHECK(contains(help, "0 to hca.max_inline (256)"));
    CHECK(contains(help, "per QP, as perftest's -n"));
    // Up to the device's limit, --inline is taken as given.
    const Outcome inl = run_hcasim("lat --inline 300 --set hca.max_inline=1024 --sizes 300 -n 2 --format csv");
    CHECK(inl.exit_code == 0);
    CHECK(contains(inl.out, "\n300,2,"));
    // Outstanding RDMA READs follow the device's limit, as perftest's do.
    const Outcome reads = run_hcasim("bw --op read --set hca.max_qp_rd_atom=1 --sizes 65536 -n 20 --format csv");
    CHECK(reads.err == "");
    CHECK(contains(reads.out, "\n65536,20,"));
    // The advertised TX depth runs (it used to fail at ibv_create_qp above 8192).
    const Outcome deep = run_hcasim("bw --tx-depth 16384 --sizes 64 -n 2 --format csv");
    INFO(deep.err);
    CHECK(deep.exit_code == 0);
    CHECK(contains(deep.out, "\n64,2,"));
}

TEST_CASE("hcasim runs atomics, --srq, UC and UD through the perftest workloads", "[cli][workload]") {
    const std::vector<std::string> runs = {
        "lat --op atomic_cas -n 4 --format csv",
        "bw --op atomic_fadd -n 4 --format csv",
        "lat --op send --srq --sizes 64 -n 4 --format csv",
        "bw --op send --srq --qps 2 --sizes 64 -n 4 --format csv",
        "bw --op send --srq --qp-type ud --qps 4 --sizes 64 -n 16 --format csv",
        "lat --qp-type uc --op send --sizes 64 -n 4 --format csv",
        "lat --qp-type ud --sizes 64 -n 4 --format csv",
        "lat --qp-type xrc --op read --sizes 64 -n 4 --format csv",
        "bw --qp-type xrc --op send --qps 3 --sizes 4096 -n 8 --format csv",
        "bw --qp-type xrc --op atomic_fadd -n 300 --format csv",
        "msgrate --qp-type xrc --op write --qps 4 --sizes 64 -n 32 --format csv",
    };
    for (const auto& args : runs) {
        INFO("hcasim " << args);
        const Outcome o = run_hcasim(args);
        CHECK(o.err == "");
        CHECK(o.exit_code == 0);
        if (args.rfind("msgrate", 0) == 0)
            CHECK(o.out.find("\ntotal,") != std::string::npos);
        else
            CHECK(csv_rows(o.out).size() == 1);
    }
}

// ---------------------------------------------------------------------------
// The workloads finish for every -n >= 1.

TEST_CASE("the latency workloads run with fewer iterations than one signaled send in 16", "[cli][workload]") {
    for (const char* api : {"verbs", "kvipl"}) {
        for (const char* op : {"write", "send", "read"}) {
            for (const char* n : {"1", "10"}) {
                // 14 sizes of 10 unsignaled sends used to fill the 128-entry send queue.
                const std::string args = std::string("lat --api ") + api + " --op " + op + " -n " + n +
                                         " --sizes 2:8192 --format csv";
                INFO("hcasim " << args);
                const Outcome o = run_hcasim(args);
                CHECK(o.err == "");
                REQUIRE(o.exit_code == 0);
                const auto rows = csv_rows(o.out);
                REQUIRE(rows.size() == 13);
                CHECK(rows.front().rfind(std::string("2,") + n + ",", 0) == 0);
                CHECK(rows.back().rfind(std::string("8192,") + n + ",", 0) == 0);
            }
        }
    }
}

TEST_CASE("the bandwidth workloads run one iteration per QP with -n counting per QP as in perftest", "[cli][workload]") {
    for (const char* op : {"write", "send", "read"}) {
        const std::string args = std::string("bw --op ") + op + " -n 1 --qps 4 --sizes 2,65536 --format csv";
        INFO("hcasim " << args);
        const Outcome o = run_hcasim(args);
        CHECK(o.err == "");
        REQUIRE(o.exit_code == 0);
        const auto rows = csv_rows(o.out);
        REQUIRE(rows.size() == 2);
        CHECK(rows[0].rfind("2,4,", 0) == 0);  // perftest reports -n x QPs messages
        CHECK(rows[1].rfind("65536,4,", 0) == 0);
        const std::string kvipl = std::string("bw --api kvipl --op ") + op + " -n 1 --sizes 2,65536 --format csv";
        INFO("hcasim " << kvipl);
        const Outcome k = run_hcasim(kvipl);
        CHECK(k.err == "");
        REQUIRE(k.exit_code == 0);
        const auto krows = csv_rows(k.out);
        REQUIRE(krows.size() == 2);
        CHECK(krows[0].rfind("2,1,", 0) == 0);
        CHECK(krows[1].rfind("65536,1,", 0) == 0);
    }
    const Outcome per_qp = run_hcasim("bw -n 3 --qps 5 --tx-depth 2 --sizes 64 --format csv");
    REQUIRE(per_qp.exit_code == 0);
    CHECK(contains(per_qp.out, "\n64,15,"));
}

TEST_CASE("the KVIPL default size sweep stops at the NIC's largest transfer", "[cli][workload]") {
    const Outcome o = run_hcasim("lat --api kvipl -n 1 --format csv --set hca.vi_max_transfer=5000");
    CHECK(o.err == "");
    REQUIRE(o.exit_code == 0);
    const auto rows = csv_rows(o.out);
    REQUIRE(rows.size() == 12);  // 2 .. 4096
    CHECK(rows.back().rfind("4096,1,", 0) == 0);
}

// ---------------------------------------------------------------------------
// A failing host program ends the run.

TEST_CASE("a host program that throws ends the run at once and the error names its node and name and failure", "[cli][workload]") {
    using namespace hcasim::testbench;
    const auto t0 = std::chrono::steady_clock::now();
    const IsolatedResult r = run_isolated([](std::ostream& os) {
        hcasim::sim::Config cfg;
        System sys(cfg);
        auto fails = [](Host& h) {
            h.sleep(5 * hcasim::sim::kPsPerUs);
            throw std::runtime_error("deliberate failure");
        };
        // Polls its receive queue for a message that never comes: without
        // the stop, simulated time would run on forever.
        auto waits = [](Host& h) {
            EndpointOptions eo;
            RcEndpoint ep(h, eo);
            poll_n(h, ep.recv_cq, 1, "receive");
        };
        sys.run({waits, fails}, {"waiting server", "failing client"});
        os << "returned";
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK_FALSE(r.ok);
    CHECK(r.output.empty());
    CHECK(contains(r.error, "host program 1 (failing client) on node1 failed at 5."));
    CHECK(contains(r.error, "deliberate failure"));
    CHECK(seconds < 30);
}

// ---------------------------------------------------------------------------
// hcasim-regress.

TEST_CASE("hcasim-regress refuses negative or malformed or stray input and the keys it sets itself", "[cli]") {
    Scratch s;
    const std::vector<Refusal> table = {
        {"--tolerance-cycles -1", {"--tolerance-cycles", "'-1'", "from 0 to"}},
        {"--iterations -1", {"--iterations", "'-1'", "from 1 to 10000000"}},
        {"--iterations 0", {"--iterations", "'0'"}},
        {"-n 10000001", {"--iterations", "10000000"}},
        {"--iterations 5x", {"--iterations", "'5x'"}},
        {"--seed -1", {"--seed", "'-1'"}},
        {"--seed 0x10", {"--seed", "'0x10'"}},
        {"--seed 18446744073709551616", {"--seed"}},
        {"--case -3", {"--case", "'-3'"}},
        {"--case 3 --seed 4", {"--case", "--seed"}},
        {"--case 3 --iterations 4", {"--case", "--iterations"}},
        {"--tolerance-pct -1", {"--tolerance-pct", "'-1'", "at least 0"}},
        {"--tolerance-pct 0x10", {"--tolerance-pct", "'0x10'"}},
        {"--total-tolerance-pct nan", {"--total-tolerance-pct", "'nan'"}},
        {"stray", {"'stray'"}},
        {"--iterations 2 stray", {"'stray'"}},
        {"--set hca.dma.impl=systemc", {"hca.dma.impl", "both DMA engines"}},
        {"--set ' hca.dma.impl = rtl'", {"hca.dma.impl"}},
        {"--set hca.dma.rtl_channels=2", {"hca.dma.rtl_channels"}},
        {"--set hca.dma.vcd=w.vcd", {"hca.dma.vcd", "--vcd"}},
        {"--set host.cpu.poll_cq_ns=0x10", {"host.cpu.poll_cq_ns"}},
        {"--vcd ''", {"--vcd needs a file name"}},
        {"--vcd " + quoted(s.dir()), {"--vcd", "is a directory"}},
        {"--vcd /nonexistent/w.vcd", {"--vcd", "'/nonexistent' does not exist"}},
    };
    for (const auto& r : table) {
        INFO("hcasim-regress " << r.args);
        check_refused(run_regress(r.args), r.names);
    }
}
