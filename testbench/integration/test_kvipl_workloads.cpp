// KVIPL through the hcasim command and the workloads: the same perftest
// measurements as verbs on the same hardware, deterministic, with timing that
// comes out of the model (reliability levels, descriptor fetch, connection).
#include <sys/wait.h>

#include <cstdio>
#include <sstream>

#include "testbench/integration/kvipl_harness.hpp"
#include "testbench/workloads/kvipl_perftest.hpp"

using namespace hcasim::test;
using hcasim::testbench::run_isolated;

namespace {

using Command = CommandResult;

Command hcasim_cmd(const std::string& args) { return run_hcasim(args, true); }

// t_typical (column 5) of each CSV row.
std::vector<double> typical(const std::string& csv) {
    std::vector<double> out;
    std::istringstream in(csv);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string cell;
        for (int i = 0; i < 5 && std::getline(f, cell, ','); ++i) {
        }
        out.push_back(std::stod(cell));
    }
    return out;
}

}  // namespace

TEST_CASE("hcasim lat --api kvipl gives byte-identical csv run after run and a latency that grows with size",
          "[kvipl][workloads][determinism]") {
    const std::string args = "lat --api kvipl --op send --sizes 2,4096,65536 -n 30 --format csv";
    const Command a = hcasim_cmd(args);
    const Command b = hcasim_cmd(args);
    REQUIRE(a.exit_code == 0);
    CHECK(a.out == b.out);
    const auto t = typical(a.out);
    REQUIRE(t.size() == 3);
    CHECK(t[0] < t[1]);
    CHECK(t[1] < t[2]);
}

TEST_CASE("kvipl and verbs latency on the same hardware differ by the descriptor path", "[kvipl][workloads][timing]") {
    // The verbs WQE goes by BlueFlame, as the mlx5 provider sends any lone
    // WQE (mlx4 would ring the doorbell and have it fetched too).
    const Command verbs =
        hcasim_cmd("lat --api verbs --op write --sizes 4096 -n 30 --format csv --set hca.blueflame_any_wqe=true");
    const Command kvipl = hcasim_cmd("lat --api kvipl --op write --sizes 4096 -n 30 --format csv");
    REQUIRE(verbs.exit_code == 0);
    REQUIRE(kvipl.exit_code == 0);
    const double v = typical(verbs.out).at(0), k = typical(kvipl.out).at(0);
    // KVIPL adds a descriptor fetch by DMA (verbs' lone WQE goes by BlueFlame):
    // a few hundred ns, not multiples of the latency.
    CHECK(k > v);
    CHECK(k < v + 1.5);
}

TEST_CASE("hcasim bw --api kvipl approaches the link payload rate and refuses several VIs", "[kvipl][workloads][bw]") {
    const Command c = hcasim_cmd("bw --api kvipl --op write --sizes 1048576 -n 40 --format csv");
    REQUIRE(c.exit_code == 0);
    std::istringstream in(c.out);
    std::string header, row;
    std::getline(in, header);
    std::getline(in, row);
    std::istringstream f(row);
    std::string cell;
    for (int i = 0; i < 4; ++i) std::getline(f, cell, ',');
    const double avg = std::stod(cell);
    // FDR 4x payload ceiling at MTU 4096 is about 6461 MB/s (docs/calibration.md).
    CHECK(avg > 6000);
    CHECK(avg < 6470);
    // Small sends faster than receive descriptors are fetched one by one:
    // the receive side fetches on demand and nothing breaks.
    const Command sends = hcasim_cmd("bw --api kvipl --op send --sizes 64,65536 -n 1500 --format csv");
    CHECK(sends.exit_code == 0);
    CHECK(sends.out.find("64,1500,") != std::string::npos);
    const Command bad = hcasim_cmd("bw --api kvipl --qps 2 --sizes 4096 -n 10");
    CHECK(bad.exit_code != 0);
    CHECK(bad.out.find("--qps") != std::string::npos);
    for (const std::string misfit : {"--mtu 1024", "--inline 0"}) {
        const Command c2 = hcasim_cmd("lat --api kvipl --sizes 4096 -n 10 " + misfit);
        CHECK(c2.exit_code != 0);
        CHECK(c2.out.find(misfit.substr(0, misfit.find(' '))) != std::string::npos);
    }
    const Command rel = hcasim_cmd("lat --api verbs --reliability rr --sizes 4096 -n 10");
    CHECK(rel.exit_code != 0);
    const Command api = hcasim_cmd("lat --api vipl --sizes 4096 -n 10");
    CHECK(api.exit_code != 0);
    CHECK(api.out.find("--api 'vipl'") != std::string::npos);
}

// A NIC without RDMA reads runs every other operation (the workload opens
// its memory to reads only where the NIC has them); a connection the peer's
// connection manager cannot answer in time fails naming the return code and
// the parameters that bound the wait.
TEST_CASE("hcasim lat --api kvipl runs without vi rdma reads and names an unreachable peer", "[kvipl][workloads][cli]") {
    const Command no_reads = hcasim_cmd("lat --api kvipl --op write --sizes 2,4096 -n 20 --set hca.vi_rdma_read=false --format csv");
    CHECK(no_reads.exit_code == 0);
    CHECK(typical(no_reads.out).size() == 2);
    const Command sends = hcasim_cmd("lat --api kvipl --op send --sizes 64 -n 20 --set hca.vi_rdma_read=false --format csv");
    CHECK(sends.exit_code == 0);
    const Command unreachable = hcasim_cmd("lat --api kvipl --sizes 2 -n 20 --set fw.cm_response_timeout_us=1");
    CHECK(unreachable.exit_code == 1);
    CHECK(unreachable.out.find("KvipConnectClientDone returned KVIP_NOT_REACHABLE") != std::string::npos);
    CHECK(unreachable.out.find("fw.cm_response_timeout_us") != std::string::npos);
}

TEST_CASE("a reliable reception send completes later than reliable delivery, which completes later than unreliable",
          "[kvipl][timing]") {
    auto completion_ns = [](KVIP_RELIABILITY_LEVEL rel) {
        const auto r = run_pair(
            {},
            [rel](Host& h, Record& rec) {
                ViOptions o;
                o.reliability = rel;
                ViEnd e(o);
                dial(h, e, 1);
                h.barrier("ready");
                const auto t0 = h.now();
                KvipPostSend(e.vi, e.sendrecv(0, 0, 65536), e.desc_mh);
                KVIP_DESCRIPTOR* got = nullptr;
                rec.num("rc", e.wait_done(false, &got, h));
                rec.num("ns", (h.now() - t0) / 1000);
                h.barrier("end");
            },
            [rel](Host& h, Record&) {
                ViOptions o;
                o.reliability = rel;
                ViEnd e(o);
                KvipPostRecv(e.vi, e.sendrecv(0, 0, 65536), e.desc_mh);
                serve(h, e);
                h.barrier("ready");
                h.barrier("end");
            });
        REQUIRE(r.ok);
        REQUIRE(r.num("rc") == KVIP_SUCCESS);
        return r.num("ns");
    };
    const long long ud = completion_ns(KVIP_SERVICE_UNRELIABLE);
    const long long rd = completion_ns(KVIP_SERVICE_RELIABLE_DELIVERY);
    const long long rr = completion_ns(KVIP_SERVICE_RELIABLE_RECEPTION);
    INFO("unreliable " << ud << " ns, reliable delivery " << rd << " ns, reliable reception " << rr << " ns");
    CHECK(ud < rd);
    CHECK(rd < rr);
}

TEST_CASE("connecting takes modelled time: more through a switch, more with slower firmware", "[kvipl][timing][s3.3]") {
    auto connect_ns = [](const Overrides& o) {
        const auto r = run_pair(
            o,
            [](Host& h, Record& rec) {
                ViEnd e;
                h.barrier("go");
                const auto t0 = h.now();
                rec.num("rc", dial(h, e, 1));
                rec.num("ns", (h.now() - t0) / 1000);
                h.barrier("end");
                rec.num("mads", static_cast<long long>(h.system().counter("node1.cm_agent.received")));
            },
            [](Host& h, Record&) {
                ViEnd e;
                h.barrier("go");
                serve(h, e);
                h.barrier("end");
            });
        REQUIRE(r.ok);
        REQUIRE(r.num("rc") == KVIP_SUCCESS);
        CHECK(r.num("mads") >= 2);  // REQ and RTU reached the server's CM agent through its QP1
        return r.num("ns");
    };
    const long long direct = connect_ns({});
    const long long switched = connect_ns({{"fabric.topology", "switch"}});
    const long long slow_fw = connect_ns({{"fw.cm_processing_us", "20"}});
    INFO("direct " << direct << " ns, switch " << switched << " ns, slow firmware " << slow_fw << " ns");
    CHECK(direct > 0);
    CHECK(switched > direct);
    CHECK(slow_fw > direct + 30000);
}

TEST_CASE("small-message kvipl rate grows with the descriptor fetches allowed in flight", "[kvipl][timing][bw]") {
    auto rate = [](int depth) {
        const Command c = hcasim_cmd("bw --api kvipl --op write --sizes 64 -n 300 --format csv --set hca.vi_fetch_depth=" +
                                     std::to_string(depth));
        REQUIRE(c.exit_code == 0);
        std::istringstream in(c.out);
        std::string header, row, cell;
        std::getline(in, header);
        std::getline(in, row);
        std::istringstream f(row);
        for (int i = 0; i < 5; ++i) std::getline(f, cell, ',');
        return std::stod(cell);
    };
    const double one = rate(1), four = rate(4);
    INFO("1 fetch in flight: " << one << " Mpps, 4: " << four << " Mpps");
    // One at a time, each descriptor costs a DMA round trip (about 0.55 us).
    CHECK(one < 2.0);
    CHECK(four > 2.5 * one);
}
