// Timing from the model itself: latency grows with message size, large
// messages stream at the rate the slower of the IB link and the PCIe link
// allows (never faster), PCIe width matters only when PCIe is the
// bottleneck, and a switch adds latency. Every figure is simulated time,
// each scenario in its own child process.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "testbench/integration/harness.hpp"
#include "testbench/workloads/perftest.hpp"

using namespace hcasim::test;
using hcasim::testbench::BandwidthOptions;
using hcasim::testbench::BandwidthRow;
using hcasim::testbench::LatencyOptions;
using hcasim::testbench::LatencyRow;
using hcasim::testbench::Op;
using hcasim::testbench::kPerftestMB;

namespace {

struct Measured {
    bool ok = false;
    std::string error;
    std::vector<double> values;  // per row: latency t_typical, or bandwidth avg and peak
};

Measured latency(const Overrides& cfg, Op op, const std::vector<std::uint32_t>& sizes, int iterations = 20) {
    const auto iso = hcasim::testbench::run_isolated([&](std::ostream& os) {
        default_fatal_signals();
        hcasim::sim::Config c;
        for (const auto& [k, v] : cfg) c.set(k, v);
        hcasim::testbench::System sys(c);
        LatencyOptions o;
        o.op = op;
        o.sizes = sizes;
        o.iterations = iterations;
        os.precision(17);
        for (const LatencyRow& r : run_latency(sys, o)) os << r.t_typical_us << "\n";
    });
    Measured m;
    m.ok = iso.ok;
    m.error = iso.error;
    std::istringstream in(iso.output);
    for (double v; in >> v;) m.values.push_back(v);
    return m;
}

// The bandwidth runs: 1 MiB messages, 200 of them unless a test says otherwise.
constexpr std::uint32_t kBandwidthSize = 1u << 20;
constexpr int kBandwidthIterations = 200;

Measured bandwidth(const Overrides& cfg, Op op = Op::Write, int mtu = 4096, int iterations = kBandwidthIterations) {
    const auto iso = hcasim::testbench::run_isolated([&](std::ostream& os) {
        default_fatal_signals();
        hcasim::sim::Config c;
        for (const auto& [k, v] : cfg) c.set(k, v);
        hcasim::testbench::System sys(c);
        BandwidthOptions o;
        o.op = op;
        o.sizes = {kBandwidthSize};
        o.iterations = iterations;
        o.mtu = mtu;
        os.precision(17);
        for (const BandwidthRow& r : run_bandwidth(sys, o)) os << r.bw_avg_MBps << " " << r.bw_peak_MBps << "\n";
    });
    Measured m;
    m.ok = iso.ok;
    m.error = iso.error;
    std::istringstream in(iso.output);
    for (double v; in >> v;) m.values.push_back(v);
    return m;
}

// The payload rate the configuration allows, in bytes per second.
struct Limits {
    double link;        // RDMA WRITE middle packets on the IB link
    double pcie_read;   // the sender's DMA reads: completion TLPs downstream
    double pcie_write;  // the receiver's DMA writes: posted TLPs upstream
    double rx_buffer;   // bytes the receiver may hold ahead of its PCIe writes
    double min() const { return std::min({link, pcie_read, pcie_write}); }
};

Limits limits(const Overrides& overrides, int mtu) {
    hcasim::sim::Config cfg;
    for (const auto& [k, v] : overrides) cfg.set(k, v);
    const std::string speed = cfg.get_choice("link.speed");
    double lane_gbps = 0, encoding = 0;
    if (speed == "sdr") lane_gbps = 2.5, encoding = 8.0 / 10.0;
    if (speed == "ddr") lane_gbps = 5.0, encoding = 8.0 / 10.0;
    if (speed == "qdr") lane_gbps = 10.0, encoding = 8.0 / 10.0;
    if (speed == "fdr10") lane_gbps = 10.3125, encoding = 64.0 / 66.0;
    if (speed == "fdr") lane_gbps = 14.0625, encoding = 64.0 / 66.0;
    if (speed == "edr") lane_gbps = 25.78125, encoding = 64.0 / 66.0;
    const double width = static_cast<double>(cfg.get_int("link.width"));
    const double link_bytes = lane_gbps * 1e9 * encoding * width / 8.0;
    // LRH 8 + BTH 12 + ICRC 4 + VCRC 2 around each full-MTU packet.
    const double link = link_bytes * mtu / (mtu + 8 + 12 + 4 + 2);
    const int gen = static_cast<int>(cfg.get_int("pcie.gen"));
    const double lane = gen == 1   ? 2.5e9 * 8 / 10 / 8
                        : gen == 2 ? 5e9 * 8 / 10 / 8
                        : gen == 3 ? 8e9 * 128 / 130 / 8
                                   : 16e9 * 128 / 130 / 8;
    const double pcie = lane * static_cast<double>(cfg.get_int("pcie.lanes"));
    const double mps = static_cast<double>(cfg.get_int("pcie.mps"));
    const double ecrc = cfg.get_bool("pcie.ecrc") ? 4 : 0;
    return {link, pcie * mps / (mps + 20 + ecrc), pcie * mps / (mps + 24 + ecrc),
            static_cast<double>(cfg.get_int("hca.rx_buffer_bytes"))};
}

void check_bandwidth_at_limit(const Overrides& cfg, Op op = Op::Write, int mtu = 4096) {
    const Limits lim = limits(cfg, mtu);
    const double expect = lim.min() / kPerftestMB;
    std::ostringstream what;
    for (const auto& [k, v] : cfg) what << k << "=" << v << " ";
    what << "op " << hcasim::testbench::op_name(op) << " MTU " << mtu << ": link " << lim.link / kPerftestMB
         << " MB/s, PCIe read " << lim.pcie_read / kPerftestMB << " MB/s, PCIe write " << lim.pcie_write / kPerftestMB
         << " MB/s";
    INFO(what.str());
    const Measured m = bandwidth(cfg, op, mtu);
    INFO("run error: " << m.error);
    REQUIRE(m.ok);
    REQUIRE(m.values.size() == 2);
    const double avg = m.values[0], peak = m.values[1];
    INFO("measured avg " << avg << " MB/s, peak " << peak << " MB/s; limit " << expect << " MB/s");
    CHECK(avg >= 0.95 * expect);
    // The sender's last completion (its ACK) can come while the receiver
    // still holds up to hca.rx_buffer_bytes of payload for its PCIe writes.
    CHECK(avg <= expect * (1 + lim.rx_buffer / (static_cast<double>(kBandwidthSize) * kBandwidthIterations)));
    // The peak is the best window of a quarter of the run; completions come
    // in bunches, so allow it 0.5 % of measurement noise above the limit.
    CHECK(peak <= 1.005 * expect);
}

}  // namespace

TEST_CASE("rdma write latency grows strictly with message size", "[timing]") {
    const Measured m = latency({}, Op::Write, {64, 4096, 65536, 1u << 20});
    INFO("run error: " << m.error);
    REQUIRE(m.ok);
    REQUIRE(m.values.size() == 4);
    INFO("t_typical us: " << m.values[0] << " " << m.values[1] << " " << m.values[2] << " " << m.values[3]);
    CHECK(m.values[0] > 0);
    CHECK(m.values[0] < m.values[1]);
    CHECK(m.values[1] < m.values[2]);
    CHECK(m.values[2] < m.values[3]);
    // A 1 MiB message can be no faster than its serialisation on FDR 4x.
    CHECK(m.values[3] >= 1048576 / (limits({}, 4096).link) * 1e6);
}

TEST_CASE("send and rdma read latency grow strictly with message size", "[timing]") {
    for (Op op : {Op::Send, Op::Read}) {
        const Measured m = latency({}, op, {64, 4096, 65536, 1u << 20});
        INFO(hcasim::testbench::op_name(op) << " run error: " << m.error);
        REQUIRE(m.ok);
        REQUIRE(m.values.size() == 4);
        INFO("t_typical us: " << m.values[0] << " " << m.values[1] << " " << m.values[2] << " " << m.values[3]);
        CHECK(m.values[0] > 0);
        CHECK(m.values[0] < m.values[1]);
        CHECK(m.values[1] < m.values[2]);
        CHECK(m.values[2] < m.values[3]);
    }
}

TEST_CASE("large rdma write bandwidth approaches the FDR link payload rate and never exceeds it", "[timing][bw]") {
    check_bandwidth_at_limit({});
}

TEST_CASE("large rdma write bandwidth approaches the QDR link payload rate and never exceeds it", "[timing][bw]") {
    check_bandwidth_at_limit({{"link.speed", "qdr"}});
}

TEST_CASE("large rdma write bandwidth at path MTU 1024 approaches the link payload rate for that MTU",
          "[timing][bw]") {
    check_bandwidth_at_limit({}, Op::Write, 1024);
}

TEST_CASE("large rdma read bandwidth approaches the link payload rate and never exceeds it", "[timing][bw]") {
    check_bandwidth_at_limit({}, Op::Read);
}

TEST_CASE("large rdma write bandwidth on EDR with PCIe Gen3 x16 approaches the link payload rate", "[timing][bw]") {
    check_bandwidth_at_limit({{"link.speed", "edr"}, {"pcie.lanes", "16"}});
}

TEST_CASE("large rdma write bandwidth on PCIe Gen2 x8 approaches the PCIe payload rate and never exceeds it",
          "[timing][bw]") {
    check_bandwidth_at_limit({{"pcie.gen", "2"}, {"pcie.lanes", "8"}});
}

TEST_CASE("large rdma write bandwidth on PCIe Gen2 x4 approaches the PCIe payload rate and never exceeds it",
          "[timing][bw]") {
    check_bandwidth_at_limit({{"pcie.gen", "2"}, {"pcie.lanes", "4"}});
}

TEST_CASE("doubling PCIe lanes raises large-message bandwidth when PCIe is the bottleneck", "[timing][bw]") {
    const Overrides x4{{"pcie.gen", "2"}, {"pcie.lanes", "4"}};
    const Overrides x8{{"pcie.gen", "2"}, {"pcie.lanes", "8"}};
    REQUIRE(limits(x4, 4096).min() < limits(x4, 4096).link);  // PCIe-bound by construction
    REQUIRE(limits(x8, 4096).min() < limits(x8, 4096).link);
    const Measured a = bandwidth(x4);
    const Measured b = bandwidth(x8);
    INFO("x4 run error: " << a.error);
    INFO("x8 run error: " << b.error);
    REQUIRE(a.ok);
    REQUIRE(b.ok);
    REQUIRE(a.values.size() == 2);
    REQUIRE(b.values.size() == 2);
    INFO("Gen2 x4 " << a.values[0] << " MB/s, Gen2 x8 " << b.values[0] << " MB/s");
    CHECK(b.values[0] > 1.8 * a.values[0]);
}

TEST_CASE("doubling PCIe lanes leaves large-message bandwidth unchanged when the link is the bottleneck",
          "[timing][bw]") {
    const Overrides x8{{"link.speed", "qdr"}, {"pcie.lanes", "8"}};
    const Overrides x16{{"link.speed", "qdr"}, {"pcie.lanes", "16"}};
    REQUIRE(limits(x8, 4096).min() == limits(x8, 4096).link);  // link-bound by construction
    const Measured a = bandwidth(x8);
    const Measured b = bandwidth(x16);
    INFO("x8 run error: " << a.error);
    INFO("x16 run error: " << b.error);
    REQUIRE(a.ok);
    REQUIRE(b.ok);
    REQUIRE(a.values.size() == 2);
    REQUIRE(b.values.size() == 2);
    INFO("QDR on Gen3 x8 " << a.values[0] << " MB/s, on Gen3 x16 " << b.values[0] << " MB/s");
    CHECK(b.values[0] == Approx(a.values[0]).epsilon(0.01));
}

TEST_CASE("a switch between the nodes adds latency compared to back to back", "[timing]") {
    const std::vector<std::uint32_t> sizes{2, 4096, 65536};
    const Measured b2b = latency({}, Op::Write, sizes);
    const Measured sw = latency({{"fabric.topology", "switch"}}, Op::Write, sizes);
    INFO("back to back run error: " << b2b.error);
    INFO("switch run error: " << sw.error);
    REQUIRE(b2b.ok);
    REQUIRE(sw.ok);
    REQUIRE(b2b.values.size() == sizes.size());
    REQUIRE(sw.values.size() == sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        INFO(sizes[i] << " B: back to back " << b2b.values[i] << " us, switch " << sw.values[i] << " us");
        // At least the switch's cut-through delay (85 cycles at 500 MHz).
        CHECK(sw.values[i] > b2b.values[i] + 0.1);
    }
}

TEST_CASE("a slower QP context read delays every message by the reads on its path", "[timing]") {
    const std::vector<std::uint32_t> sizes{2, 4096};
    const Measured base = latency({}, Op::Send, sizes);
    // 50 cycles at 500 MHz: 100 ns per read. A SEND's one-way latency
    // includes the doorbell unit's read at the sender and the RX
    // pipeline's at the receiver; the latter starts when the BTH is in and
    // so hides behind a long packet's own pass through the pipeline
    // (4096 B: 144 cycles).
    const Measured slow = latency({{"hca.qpc_read_cycles", "50"}}, Op::Send, sizes);
    INFO("base run error: " << base.error);
    INFO("slow run error: " << slow.error);
    REQUIRE(base.ok);
    REQUIRE(slow.ok);
    REQUIRE(base.values.size() == sizes.size());
    REQUIRE(slow.values.size() == sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        INFO(sizes[i] << " B: " << base.values[i] << " us, with slow context reads " << slow.values[i] << " us");
        CHECK(slow.values[i] >= base.values[i] + (sizes[i] < 1024 ? 0.2 : 0.1) - 1e-9);
    }
}

namespace {

// Round trips of work requests posted one at a time, each waited for by
// polling, as perftest's ib_read_lat and ib_atomic_lat do: per iteration
// ("rtt<i>", ps) and the completion statuses; also how the WQEs reached
// the adapter (BlueFlame or fetched by DMA).
RunResult one_at_a_time(ibv_wr_opcode op, std::uint32_t max_send_wr, int cq_depth, int iterations) {
    SideOptions so;
    so.max_send_wr = max_send_wr;
    so.cq_depth = cq_depth;
    so.access |= IBV_ACCESS_REMOTE_ATOMIC;
    ConnOptions co;
    co.qp_access |= IBV_ACCESS_REMOTE_ATOMIC;
    return run_pair(
        {},
        [=](Host& h, Record& rec) {
            Side s(h, so);
            s.connect("one", 1, co);
            rec.num("cq_entries", s.send_cq->cqe);
            h.barrier("go");
            int failed = 0;
            for (int i = 0; i < iterations; ++i) {
                ibv_sge sge = s.sge(0, 8);
                ibv_send_wr wr{};
                wr.wr_id = static_cast<std::uint64_t>(i);
                wr.sg_list = &sge;
                wr.num_sge = 1;
                wr.opcode = op;
                wr.send_flags = IBV_SEND_SIGNALED;
                if (op == IBV_WR_RDMA_READ) {
                    wr.wr.rdma.remote_addr = s.remote_addr;
                    wr.wr.rdma.rkey = s.remote_rkey;
                } else {
                    wr.wr.atomic.remote_addr = s.remote_addr;
                    wr.wr.atomic.rkey = s.remote_rkey;
                }
                const hcasim::sim::Tick t0 = h.now();
                ibv_send_wr* bad = nullptr;
                need_rc(ibv_post_send(s.qps[0], &wr, &bad), "ibv_post_send");
                // Spin on the CQ as perftest does (no sleeps between polls,
                // which would round the times).
                ibv_wc wc{};
                int got = 0;
                while ((got = ibv_poll_cq(s.send_cq, 1, &wc)) == 0)
                    if (h.now() - t0 > us(1000)) throw std::runtime_error("no completion within 1 ms");
                need(got == 1, "ibv_poll_cq");
                rec.num("rtt" + std::to_string(i), h.now() - t0);
                failed += wc.status != IBV_WC_SUCCESS || wc.wr_id != static_cast<std::uint64_t>(i);
            }
            rec.num("failed", failed);
            rec.num("blueflame_wqes", h.system().counter("node0.hca.wqe_fetch.blueflame_wqes"));
            rec.num("fetched_wqes", h.system().counter("node0.hca.wqe_fetch.send_wqes"));
            h.barrier("done");
            s.close();
        },
        [=](Host& h, Record&) {
            Side s(h, so);
            s.connect("one", 0, co);
            h.barrier("go");
            h.barrier("done");
            s.close();
        });
}

}  // namespace

// perftest's latency tests run with TX depth 1: a one-entry send queue and
// ibv_create_cq(1), which the driver makes a CQ of two entries. Each work
// request completes before the next is posted, so the CQ is never more than
// half full; every round trip after the first (which warms the contexts)
// must take what it takes with deep queues. The adapter used to re-read the
// CQ's consumer index in the path of every second CQE, and alternate round
// trips took a PCIe read round trip (0.55 us) longer.
TEST_CASE("a one-entry send queue and a one-entry completion queue take the same time for every work request",
          "[timing][cq]") {
    constexpr int kIterations = 12;
    constexpr long long kPollPs = 25000;  // host.cpu.poll_cq_ns
    for (const ibv_wr_opcode op : {IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP}) {
        const char* name = op == IBV_WR_RDMA_READ ? "RDMA READ" : "compare and swap";
        const RunResult shallow = one_at_a_time(op, 1, 1, kIterations);
        const RunResult deep = one_at_a_time(op, 128, 512, kIterations);
        INFO(name);
        HCASIM_REQUIRE_RUN(shallow);
        HCASIM_REQUIRE_RUN(deep);
        CHECK(shallow.num("failed") == 0);
        CHECK(deep.num("failed") == 0);
        CHECK(shallow.num("cq_entries") < 4);
        // Every READ came by BlueFlame, every atomic by a doorbell and a
        // fetch (mlx4's rule): the same way for both queue depths.
        const bool by_blueflame = op == IBV_WR_RDMA_READ;
        CHECK(shallow.num("blueflame_wqes") == (by_blueflame ? kIterations : 0));
        CHECK(shallow.num("fetched_wqes") == (by_blueflame ? 0 : kIterations));
        CHECK(deep.num("blueflame_wqes") == shallow.num("blueflame_wqes"));
        const long long steady = deep.num("rtt1");
        for (int i = 1; i < kIterations; ++i) {
            const std::string k = "rtt" + std::to_string(i);
            INFO("iteration " << i << ": one-entry queues " << shallow.num(k) << " ps, deep queues " << deep.num(k)
                              << " ps");
            // The same for both depths; from one round trip to the next
            // at most one CQ poll apart (where the completion falls between
            // two polls), not a PCIe round trip.
            CHECK(shallow.num(k) == deep.num(k));
            CHECK(std::llabs(deep.num(k) - steady) <= kPollPs);
        }
    }
}

// The provider library decides which lone work requests go by BlueFlame.
// mlx4's rule (the ConnectX-3 class): only one the adapter needs nothing
// more for, so a WQE with gather entries is fetched, one PCIe read round
// trip later. mlx5's rule (hca.blueflame_any_wqe): any lone WQE.
TEST_CASE("a lone work request goes by BlueFlame by the provider's rule and a fetched one costs a DMA read more",
          "[timing][blueflame]") {
    struct Run {
        long long blueflame, fetched;
        double t_typical;
    };
    auto run = [](const std::string& args) {
        const CommandResult r = run_hcasim("lat -n 20 --counters --format text " + args);
        INFO(args << "\n" << r.out);
        REQUIRE(r.exit_code == 0);
        const auto row = hcasim_row(r.out);  // bytes, iterations, t_min, t_max, t_typical, ...
        REQUIRE(row.size() >= 5);
        return Run{std::max(0LL, counter_in(r.out, "node0.hca.wqe_fetch.blueflame_wqes")),
                   std::max(0LL, counter_in(r.out, "node0.hca.wqe_fetch.send_wqes")), row[4]};
    };
    const std::string mlx5 = " --set hca.blueflame_any_wqe=true";
    // mlx4: inline data and RDMA READs by BlueFlame; gather entries and atomics fetched.
    const Run write_gather = run("--op write --sizes 1024");
    const Run send_gather = run("--op send --sizes 1024");
    const Run write_inline = run("--op write --sizes 1024 --inline 1024 --set hca.max_inline=1024 --set hca.blueflame_max_bytes=2048");
    const Run read = run("--op read --sizes 1024");
    const Run cas = run("--op atomic_cas");
    CHECK(write_gather.blueflame == 0);
    CHECK(write_gather.fetched == 20);
    CHECK(send_gather.blueflame == 0);
    CHECK(send_gather.fetched == 20);
    CHECK(write_inline.blueflame == 20);
    CHECK(write_inline.fetched == 0);
    CHECK(read.blueflame == 20);
    CHECK(read.fetched == 0);
    CHECK(cas.blueflame == 0);
    CHECK(cas.fetched == 20);
    // mlx5: every one of them by BlueFlame, one DMA read round trip sooner.
    const Run write_bf = run("--op write --sizes 1024" + mlx5);
    const Run cas_bf = run("--op atomic_cas" + mlx5);
    CHECK(write_bf.blueflame == 20);
    CHECK(write_bf.fetched == 0);
    CHECK(cas_bf.blueflame == 20);
    CHECK(cas_bf.fetched == 0);
    for (const auto& [fetched, by_bf] : {std::pair{write_gather, write_bf}, std::pair{cas, cas_bf}}) {
        CHECK(fetched.t_typical - by_bf.t_typical > 0.4);
        CHECK(fetched.t_typical - by_bf.t_typical < 0.8);
    }
}
