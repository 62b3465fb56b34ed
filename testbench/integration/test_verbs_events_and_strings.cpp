// The small verbs calls: libibverbs' strings for node types, port states and
// event types, ibv_fork_init, and the acknowledgement rule of asynchronous
// events (destroying a QP waits until every event reported on it is
// acknowledged, as libibverbs does).
#include <catch2/catch.hpp>

#include <cstring>

#include "testbench/integration/harness.hpp"

using hcasim::test::Record;
using hcasim::test::RunResult;
using hcasim::test::Side;
using hcasim::test::run_pair;
using hcasim::testbench::Host;

TEST_CASE("ibv_node_type_str ibv_port_state_str and ibv_event_type_str return libibverbs' strings",
          "[verbs][unit]") {
    CHECK(std::strcmp(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter") == 0);
    CHECK(std::strcmp(ibv_node_type_str(IBV_NODE_SWITCH), "InfiniBand switch") == 0);
    CHECK(std::strcmp(ibv_node_type_str(static_cast<ibv_node_type>(99)), "unknown") == 0);
    CHECK(std::strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active") == 0);
    CHECK(std::strcmp(ibv_port_state_str(IBV_PORT_DOWN), "down") == 0);
    CHECK(std::strcmp(ibv_port_state_str(static_cast<ibv_port_state>(42)), "unknown") == 0);
    CHECK(std::strcmp(ibv_event_type_str(IBV_EVENT_QP_ACCESS_ERR), "local access violation work queue error") == 0);
    CHECK(std::strcmp(ibv_event_type_str(IBV_EVENT_CQ_ERR), "CQ error") == 0);
    CHECK(std::strcmp(ibv_event_type_str(IBV_EVENT_PORT_ACTIVE), "port active") == 0);
    CHECK(std::strcmp(ibv_event_type_str(static_cast<ibv_event_type>(1000)), "unknown") == 0);
    CHECK(ibv_fork_init() == 0);
}

namespace {

// Node 0 writes with a bad rkey; node 1's QP gets IBV_EVENT_QP_ACCESS_ERR.
// Node 1 acknowledges the event or not, then destroys its QP.
RunResult access_error_then_destroy(bool acknowledge) {
    return run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("e", 1);
            h.barrier("ready");
            s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 1, s.remote_addr,
                        s.remote_rkey ^ 0x7700);
            rec.num("sender_completions", s.poll(s.send_cq, 1).size());
            s.close();
        },
        [acknowledge](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("e", 0);
            h.barrier("ready");
            ibv_async_event ev{};
            rec.num("event.rc", ibv_get_async_event(s.ctx, &ev));
            rec.num("event.type", static_cast<int>(ev.event_type));
            rec.num("completed_before", s.qps[0]->events_completed);
            if (acknowledge) ibv_ack_async_event(&ev);
            rec.num("completed_after", s.qps[0]->events_completed);
            rec.set("destroying", "yes");
            s.close();  // destroys the QP: waits for the acknowledgement
            rec.set("destroyed", "yes");
        });
}

}  // namespace

TEST_CASE("ibv_ack_async_event counts the event on its qp and ibv_destroy_qp then returns", "[verbs][integration]") {
    const RunResult r = access_error_then_destroy(true);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("event.rc") == 0);
    CHECK(r.num("event.type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("completed_before") == 0);
    CHECK(r.num("completed_after") == 1);
    CHECK(r.get("destroyed") == "yes");
}

TEST_CASE("ibv_destroy_qp waits for an unacknowledged async event on the qp", "[verbs][integration]") {
    const RunResult r = access_error_then_destroy(false);
    // Nothing else will acknowledge it: the program stays blocked in
    // ibv_destroy_qp and the run says so.
    CHECK_FALSE(r.ok);
    CHECK(r.error.find("blocked forever") != std::string::npos);
    CHECK(r.get("destroying") == "yes");
    CHECK_FALSE(r.has("destroyed"));
}
