// The workloads' waits for the fabric (StallWatch): a wait that can no longer
// end, for a message lost on UD or UC or behind an RC QP that gave up, ends
// the run with an error that says what was lost; a wait that is merely long,
// a large message on a slow link or a message resent more than once, runs to
// its end.
#include <catch2/catch.hpp>

#include <string>

#include "testbench/integration/harness.hpp"
#include "testbench/system/isolated.hpp"
#include "testbench/workloads/rc_endpoint.hpp"

using namespace hcasim::test;

namespace {

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("a latency run whose message is lost ends with an error naming the loss, not a hang", "[cli][workload]") {
    const std::string silent = "nothing arrived, and no port has sent a packet for 100 ms of simulated time";
    struct Case {
        const char* args;
        const char* waiting;  // what the waiting program names
        const char* lost;     // what System::losses() reports
    };
    for (const Case c : {Case{"lat --qp-type ud --op send", "receive: ", "(the links dropped 1 packet)"},
                         Case{"lat --qp-type uc --op send", "receive: ", "(the links dropped 1 packet)"},
                         Case{"lat --qp-type uc --op write", "RDMA WRITE: ", "(the links dropped 1 packet)"},
                         // The client's send fails after its retries, on a send
                         // queue it does not poll while it waits for the answer.
                         Case{"lat --srq --op send", "receive: ",
                              "(the links dropped 8 packets; node0 completed 1 work request in error)"},
                         Case{"lat --api kvipl --reliability ud --op write", "RDMA WRITE: ", "the links dropped"}}) {
        INFO(c.args);
        // KVIPL connects through its connection manager first: only the data is lost.
        const std::string loss = has(c.args, "kvipl") ? " --set fault.drop=0.3" : " --set fault.drop=1";
        const CommandResult r = run_hcasim(std::string(c.args) + " --sizes 2 -n 10" + loss, true);
        CHECK(r.exit_code == 1);
        CHECK(has(r.out, std::string(c.waiting) + silent));
        CHECK(has(r.out, c.lost));
    }
}

TEST_CASE("a wait longer than 100 ms that is still moving runs to its end", "[cli][workload]") {
    SECTION("a 16 MiB RDMA WRITE on a 1.25 Gb/s cLAN link takes 135 ms each way") {
        const CommandResult r = run_hcasim("lat --preset vi-clan --sizes 16777216 -n 2 --verify", true);
        REQUIRE(r.exit_code == 0);
        const std::vector<double> row = hcasim_row(r.out);
        REQUIRE(row.size() > 4);
        CHECK(row[4] > 100000.0);  // t_typical, us
    }
    SECTION("a KVIPL send lost twice waits out two ACK timeouts of 67 ms") {
        const CommandResult r = run_hcasim("lat --api kvipl --op send --sizes 16 -n 100 --set fault.drop=0.1", true);
        REQUIRE(r.exit_code == 0);
        const std::vector<double> row = hcasim_row(r.out);
        REQUIRE(row.size() > 3);
        CHECK(row[3] > 2 * 67108.0);  // t_max, us
    }
}

TEST_CASE("a UD message that finds no receive posted is named when its receiver gives up waiting", "[cli][workload]") {
    using namespace hcasim::testbench;
    const IsolatedResult r = run_isolated([](std::ostream& os) {
        hcasim::sim::Config cfg;
        System sys(cfg);
        auto program = [](Host& h) {
            EndpointOptions eo;
            eo.qp_type = IBV_QPT_UD;
            RcEndpoint ep(h, eo);
            ep.connect("ud", 1 - h.index());
            if (h.index() == 0) {
                // One datagram to a peer that has posted no receive.
                ibv_sge sge{reinterpret_cast<std::uintptr_t>(ep.buf), 64, ep.mr->lkey};
                ibv_send_wr wr{};
                wr.sg_list = &sge;
                wr.num_sge = 1;
                wr.opcode = IBV_WR_SEND;
                wr.send_flags = IBV_SEND_SIGNALED;
                wr.wr.ud.ah = ep.ah;
                wr.wr.ud.remote_qpn = ep.remote_qpn[0];
                wr.wr.ud.remote_qkey = ep.qkey();
                ibv_send_wr* bad = nullptr;
                check(ibv_post_send(ep.qps[0], &wr, &bad), "ibv_post_send");
                poll_n(h, ep.send_cq, 1, "send");
                h.barrier("sent");
                return;
            }
            h.barrier("sent");
            ibv_recv_wr* bad = nullptr;
            ibv_sge sge{reinterpret_cast<std::uintptr_t>(ep.buf), 4096, ep.mr->lkey};
            ibv_recv_wr wr{};
            wr.sg_list = &sge;
            wr.num_sge = 1;
            check(ibv_post_recv(ep.qps[0], &wr, &bad), "ibv_post_recv");
            poll_n(h, ep.recv_cq, 1, "receive");
        };
        sys.run({program, program}, {"sender", "receiver"});
        os << "returned";
    });
    CHECK_FALSE(r.ok);
    CHECK(has(r.error, "host program 1 (receiver) on node1 failed"));
    CHECK(has(r.error, "receive: nothing arrived, and no port has sent a packet for 100 ms of simulated time "
                       "(node1 dropped 1 message that found no receive posted)"));
}
