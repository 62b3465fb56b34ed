// Unaffiliated events a single-subnet fabric produces: what the subnet
// manager changes in a port (sm.lid_change, sm.pkey_change, sm.handover,
// sm.client_reregister) and an adapter's catastrophic failure
// (fault.catastrophic), each seen through ibv_get_async_event and the
// queries that reflect it.
#include <catch2/catch.hpp>

#include "testbench/integration/harness.hpp"

using namespace hcasim;
using namespace hcasim::test;

namespace {

constexpr sim::Tick kUs = sim::kPsPerUs;

void record_port_event(Side& s, Record& rec, const std::string& key) {
    ibv_async_event ev{};
    rec.num(key + ".rc", ibv_get_async_event(s.ctx, &ev));
    rec.num(key + ".type", static_cast<int>(ev.event_type));
    rec.num(key + ".port", ev.element.port_num);
    ibv_ack_async_event(&ev);
}

ibv_port_attr port_attr(Side& s) {
    ibv_port_attr p{};
    need_rc(ibv_query_port(s.ctx, 1, &p), "ibv_query_port");
    return p;
}

}  // namespace

TEST_CASE("a new lid from the subnet manager raises IBV_EVENT_LID_CHANGE, ibv_query_port shows it and the switch routes to it",
          "[integration][events][sm]") {
    const auto r = run_pair(
        {{"fabric.topology", "switch"}, {"sm.lid_change", "node1@500us"}},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("l", 1);
            h.barrier("changed");
            // Reconnect to the peer's new LID (as a consumer does on the
            // event, after looking the path up again) and send.
            const auto lid = h.get_value<std::uint16_t>("new lid");
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_SQD;
            need_rc(ibv_modify_qp(s.qps[0], &a, IBV_QP_STATE), "SQD");
            h.sleep(10 * kUs);
            a.ah_attr.dlid = lid;
            a.ah_attr.port_num = 1;
            rec.num("new_av", ibv_modify_qp(s.qps[0], &a, IBV_QP_STATE | IBV_QP_AV));
            a.qp_state = IBV_QPS_RTS;
            need_rc(ibv_modify_qp(s.qps[0], &a, IBV_QP_STATE), "RTS");
            fill_pattern(s.buf, 64, 3);
            s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 1);
            const auto w = s.poll(s.send_cq, 1);
            if (!w.empty()) rec.wc("send", w[0]);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("l", 0);
            rec.num("lid_before", port_attr(s).lid);
            s.post_recv(s.qps[0], {s.sge(4096, 64)}, 9);
            record_port_event(s, rec, "event");
            rec.num("at_us", static_cast<long long>(h.now() / kUs));
            const std::uint16_t lid = port_attr(s).lid;
            rec.num("lid_after", lid);
            h.put_value("new lid", lid);
            h.barrier("changed");
            const auto w = s.poll(s.recv_cq, 1);
            if (!w.empty()) rec.wc("recv", w[0]);
            rec.num("intact", std::equal(s.buf + 4096, s.buf + 4096 + 64, pattern(64, 3).begin()));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("event.rc") == 0);
    CHECK(r.num("event.type") == IBV_EVENT_LID_CHANGE);
    CHECK(r.num("event.port") == 1);
    CHECK(r.num("at_us") >= 500);
    CHECK(r.num("lid_before") == 2);
    CHECK(r.num("lid_after") != r.num("lid_before"));
    CHECK(r.num("lid_after") > 2);
    CHECK(r.num("new_av") == 0);
    CHECK(r.num("send.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv.status") == IBV_WC_SUCCESS);
    CHECK(r.num("intact") == 1);
}

TEST_CASE("pkey table changes, an sm handover and a client reregister each reach every port they touch",
          "[integration][events][sm]") {
    const auto r = run_pair(
        {{"sm.pkey_change", "node0@100us"}, {"sm.handover", "200us"}, {"sm.client_reregister", "300us"}},
        [](Host& h, Record& rec) {
            Side s(h, {});
            const ibv_port_attr before = port_attr(s);
            rec.num("pkeys_before", before.pkey_tbl_len);
            rec.num("sm_before", before.sm_lid);
            for (int i = 0; i < 3; ++i) record_port_event(s, rec, "n0." + std::to_string(i));
            const ibv_port_attr after = port_attr(s);
            rec.num("pkeys_after", after.pkey_tbl_len);
            rec.num("sm_after", after.sm_lid);
            __be16 pk = 0;
            rec.num("query_pkey1", ibv_query_pkey(s.ctx, 1, 1, &pk));
            rec.num("pkey1", be16toh(pk));
            rec.num("query_pkey2", ibv_query_pkey(s.ctx, 1, 2, &pk));
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            for (int i = 0; i < 2; ++i) record_port_event(s, rec, "n1." + std::to_string(i));
            rec.num("n1_pkeys", port_attr(s).pkey_tbl_len);
            rec.num("n1_sm", port_attr(s).sm_lid);
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("n0.0.type") == IBV_EVENT_PKEY_CHANGE);
    CHECK(r.num("n0.1.type") == IBV_EVENT_SM_CHANGE);
    CHECK(r.num("n0.2.type") == IBV_EVENT_CLIENT_REREGISTER);
    for (const char* k : {"n0.0", "n0.1", "n0.2", "n1.0", "n1.1"}) {
        CHECK(r.num(std::string(k) + ".rc") == 0);
        CHECK(r.num(std::string(k) + ".port") == 1);
    }
    // node 1's P_Key table did not change: its first event is the handover.
    CHECK(r.num("n1.0.type") == IBV_EVENT_SM_CHANGE);
    CHECK(r.num("n1.1.type") == IBV_EVENT_CLIENT_REREGISTER);
    CHECK(r.num("pkeys_before") == 1);
    CHECK(r.num("pkeys_after") == 2);
    CHECK(r.num("query_pkey1") == 0);
    CHECK(r.num("pkey1") == 0x8001);
    CHECK(r.num("query_pkey2") == EINVAL);
    CHECK(r.num("n1_pkeys") == 1);
    CHECK(r.num("sm_before") == 1);
    CHECK(r.num("sm_after") == 2);
    CHECK(r.num("n1_sm") == 2);
}

TEST_CASE("a catastrophic adapter failure raises IBV_EVENT_DEVICE_FATAL and flushes the work of every qp",
          "[integration][events]") {
    const auto r = run_pair(
        {{"fault.catastrophic", "node1@400us"}},
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("f", 1);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("f", 0);
            s.post_recv(s.qps[0], {s.sge(0, 64)}, 11);
            ibv_async_event ev{};
            rec.num("event.rc", ibv_get_async_event(s.ctx, &ev));
            rec.num("event.type", static_cast<int>(ev.event_type));
            ibv_ack_async_event(&ev);
            rec.num("at_us", static_cast<long long>(h.now() / kUs));
            rec.num("state", static_cast<int>(qp_state(s.qps[0])));
            const auto w = s.poll(s.recv_cq, 1);
            if (!w.empty()) rec.wc("flushed", w[0]);
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("event.rc") == 0);
    CHECK(r.num("event.type") == IBV_EVENT_DEVICE_FATAL);
    CHECK(r.num("at_us") >= 400);
    CHECK(r.num("state") == IBV_QPS_ERR);
    CHECK(r.num("flushed.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.unum("flushed.wr_id") == 11);
}

TEST_CASE("malformed sm and catastrophic schedules are refused naming the entry", "[integration][events][sm]") {
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {"sm.lid_change", "node7@10us"}, {"sm.lid_change", "node1"}, {"sm.pkey_change", "nodeX@1us"},
             {"sm.handover", "10 parsecs"}, {"sm.client_reregister", "node0@1us"}, {"fault.catastrophic", "node0@soon"}}) {
        INFO(key << "=" << value);
        const auto c = run_hcasim("lat --sizes 2 -n 1 --set " + key + "='" + value + "'", true);
        CHECK(c.exit_code != 0);
        CHECK(c.out.find(key) != std::string::npos);
        CHECK(c.out.find(value) != std::string::npos);
    }
}
