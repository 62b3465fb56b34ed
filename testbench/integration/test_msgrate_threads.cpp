// msgrate --threads N: N posting threads per node, each a client and server
// pair with QPs of its own, as N perftest processes on N cores. One thread
// is bound by its own posting cost; enough of them reach what the adapter's
// per-packet hardware carries, which then moves with that hardware's
// parameters, not with the threads.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "testbench/integration/harness.hpp"

namespace {

using hcasim::test::CommandResult;
using hcasim::test::run_hcasim;

double total_mpps(const std::string& args) {
    const CommandResult r = run_hcasim("msgrate --op write --sizes 64 " + args);
    INFO("hcasim msgrate --op write --sizes 64 " << args << "\n" << r.out);
    REQUIRE(r.exit_code == 0);
    return hcasim::test::msgrate_total_mpps(r.out);
}

}  // namespace

TEST_CASE("msgrate --threads gives each thread its QPs and messages, checks every byte, and is the same twice",
          "[workload][msgrate]") {
    const std::string args = "msgrate --op send --sizes 200 --threads 3 --qps 2 -n 150 --post-list 4 --verify --format csv";
    const CommandResult a = run_hcasim(args);
    REQUIRE(a.exit_code == 0);
    // One row per QP of every thread, each with its -n messages.
    const std::regex row("^([0-9]+),([0-9]+),([0-9.]+)$");
    int rows = 0;
    std::istringstream lines(a.out);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (!std::regex_match(line, m, row)) continue;
        CHECK(std::stoi(m[1].str()) == rows);
        CHECK(m[2].str() == "150");
        CHECK(std::stod(m[3].str()) > 0);
        ++rows;
    }
    CHECK(rows == 6);
    CHECK(a.out.find("total,900,") != std::string::npos);
    const CommandResult b = run_hcasim(args);
    REQUIRE(b.exit_code == 0);
    CHECK(a.out == b.out);
}

TEST_CASE("more posting threads lift the message rate to what the adapter carries, which its hardware sets",
          "[workload][msgrate][timing]") {
    const std::string base = "--qps 4 -n 2000 ";
    const double one = total_mpps(base + "--threads 1");
    const double four = total_mpps(base + "--threads 4");
    const double eight = total_mpps(base + "--threads 8");
    INFO("1 thread " << one << ", 4 threads " << four << ", 8 threads " << eight << " Mpps");
    // One thread posts a work request per host.cpu.post_send_ns at best.
    CHECK(one < 1e3 / 60.0);
    CHECK(four > 1.3 * one);
    // Past that, the adapter's transmit pipeline is the limit: more threads
    // add nothing ...
    CHECK(eight == Approx(four).epsilon(0.02));
    // ... and a faster core clock lifts it.
    const double fast_core = total_mpps(base + "--threads 8 --set hca.core_clock_mhz=1000");
    INFO("8 threads, 1000 MHz core: " << fast_core << " Mpps");
    CHECK(fast_core > 1.5 * eight);
}

TEST_CASE("packet engines side by side lift the adapter's limit until the next one binds, and move every byte",
          "[workload][msgrate][timing][engines]") {
    const std::string base = "--qps 4 -n 2000 --threads 8 ";
    const double one = total_mpps(base);
    const double two = total_mpps(base + "--set hca.tx_engines=2 --set hca.rx_engines=2");
    const double four = total_mpps(base + "--set hca.tx_engines=4 --set hca.rx_engines=4");
    const double eight = total_mpps(base + "--set hca.tx_engines=8 --set hca.rx_engines=8");
    INFO("1, 2, 4 and 8 engines: " << one << ", " << two << ", " << four << ", " << eight << " Mpps");
    CHECK(two > 1.5 * one);
    // Four engines already pass more than the sender's PCIe link brings in
    // (each message's 64 B WQE and 64 B payload, with their completions'
    // headers): more engines add nothing, more lanes do.
    CHECK(four > 1.1 * two);
    CHECK(eight == Approx(four).epsilon(0.02));
    const double lanes = total_mpps(base + "--set hca.tx_engines=8 --set hca.rx_engines=8 --set pcie.lanes=16");
    INFO("8 engines, PCIe x16: " << lanes << " Mpps");
    CHECK(lanes > 1.05 * eight);
    const CommandResult sends =
        run_hcasim("msgrate --op send --sizes 1000 --qps 3 --threads 4 -n 200 --verify --set hca.tx_engines=3 "
                   "--set hca.rx_engines=2 --format csv");
    REQUIRE(sends.exit_code == 0);
    CHECK(sends.out.find("total,2400,") != std::string::npos);
    const CommandResult zero = run_hcasim("msgrate --set hca.tx_engines=0", true);
    CHECK(zero.exit_code != 0);
    CHECK(zero.out.find("hca.tx_engines") != std::string::npos);
}

TEST_CASE("msgrate refuses a thread count it cannot run, naming the option", "[workload][msgrate][cli]") {
    const CommandResult zero = run_hcasim("msgrate --threads 0", true);
    CHECK(zero.exit_code != 0);
    CHECK(zero.out.find("--threads") != std::string::npos);
    const CommandResult many = run_hcasim("msgrate --threads 4 --qps 100 --set hca.max_qp=256", true);
    CHECK(many.exit_code != 0);
    CHECK(many.out.find("hca.max_qp") != std::string::npos);
    const CommandResult bw = run_hcasim("bw --threads 2", true);
    CHECK(bw.exit_code != 0);
    CHECK(bw.out.find("--threads") != std::string::npos);
}

// After each MMIO store to the adapter (a doorbell or a BlueFlame write) the
// posting thread is held host.cpu.mmio_store_ns until the store has left its
// core, while the store travels on: a thread that posts one work request per
// call loses exactly that much per post, and a message's latency nothing.
TEST_CASE("the posting thread's hold after its MMIO store bounds one thread's rate, not a message's latency",
          "[workload][timing][host]") {
    const auto row = [](const std::string& args) {
        const CommandResult r = run_hcasim(args);
        INFO("hcasim " << args << "\n" << r.out);
        REQUIRE(r.exit_code == 0);
        const auto v = hcasim::test::hcasim_row(r.out);
        REQUIRE(v.size() >= 5);
        return v[4];  // bw: Mpps; lat: t_typical (us)
    };
    const std::string reads = "bw --op read --sizes 2 -n 5000 --set host.cpu.mmio_store_ns=";
    const double free_posting = row(reads + "0");
    const double held = row(reads + "135");
    const double held_longer = row(reads + "270");
    INFO("READ rate: no hold " << free_posting << ", 135 ns " << held << ", 270 ns " << held_longer << " Mpps");
    // Without the hold the adapter carries far more than one thread posts.
    CHECK(free_posting > 2 * held);
    // Once the thread binds, every post costs the hold more: 135 ns apart.
    CHECK(1e3 / held_longer - 1e3 / held == Approx(135).epsilon(0.05));
    // The default is the 135 ns of the rows above.
    CHECK(row("bw --op read --sizes 2 -n 5000") == held);

    // The store is on its way while the thread waits: latency stays.
    const std::string lat = "lat --op write --sizes 2 -n 200 --set host.cpu.mmio_store_ns=";
    CHECK(row(lat + "0") == Approx(row(lat + "270")).margin(0.005));

    // A VI's doorbells are MMIO stores too.
    const std::string vi = "bw --api kvipl --op write --sizes 64 -n 1000 --set host.cpu.mmio_store_ns=";
    CHECK(row(vi + "0") > 1.3 * row(vi + "135"));

    const CommandResult bad = run_hcasim("bw --set host.cpu.mmio_store_ns=-1", true);
    CHECK(bad.exit_code == 2);
    CHECK(bad.out.find("host.cpu.mmio_store_ns") != std::string::npos);
}
