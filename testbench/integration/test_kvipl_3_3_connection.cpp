// KVIPL addendum 3.3: connection management over the wire (CM datagrams on QP1).
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvip_connect_reject_gives_the_client_kvip_reject", "[kvipl][s3.3]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            rec.num("client", dial(h, e, 1));
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            KVIP_CONN_HANDLE conn = await_request(h, e);
            NetAddr remote(0, "");
            KVIP_VI_ATTRIBUTES ra{};
            rec.num("server_done", KvipConnectServerDone(conn, remote.get(), &ra));
            rec.num("remote_disc", remote.get()->DiscriminatorLen == 3 && std::memcmp(remote.get()->HostAddress + 2, "cli", 3) == 0);
            rec.num("remote_rel", ra.ReliabilityLevel);
            rec.num("reject", KvipConnectReject(conn));
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("server_done") == KVIP_SUCCESS);
    CHECK(r.num("remote_disc") == 1);
    CHECK(r.num("remote_rel") == KVIP_SERVICE_RELIABLE_DELIVERY);
    CHECK(r.num("reject") == KVIP_SUCCESS);
    CHECK(r.num("client") == KVIP_REJECT);
}

TEST_CASE("kvip_connect_client_without_a_matching_server_request_gets_no_match", "[kvipl][s3.3]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            rec.num("client", dial(h, e, 1, "nobody"));
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            NetAddr local(1, "srv");
            KVIP_CONN_HANDLE conn = nullptr;
            rec.num("listen", KvipConnectServerRequest(e.nic, local.get(), 10000, nullptr, &conn));
            h.barrier("listening");
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("client") == KVIP_NO_MATCH);
}

TEST_CASE("kvip_connect_server_request_times_out_and_zero_timeouts_are_invalid", "[kvipl][s3.3]") {
    const auto r = run_programs({}, {[](Host& h, Record& rec) {
        ViEnd e;
        NetAddr local(0, "srv");
        KVIP_CONN_HANDLE conn = nullptr;
        rec.num("zero", KvipConnectServerRequest(e.nic, local.get(), 0, nullptr, &conn));
        NetAddr wrong_host(5, "srv");
        rec.num("wrong_host", KvipConnectServerRequest(e.nic, wrong_host.get(), 10, nullptr, &conn));
        rec.num("listen", KvipConnectServerRequest(e.nic, local.get(), 2, nullptr, &conn));
        rec.num("not_done", KvipConnectServerDone(conn, nullptr, nullptr));
        h.sleep(us(2500));
        rec.num("timeout", KvipConnectServerDone(conn, nullptr, nullptr));
        NetAddr remote(1, "x");
        rec.num("client_zero", KvipConnectClientRequest(e.vi, local.get(), remote.get(), 0, nullptr));
        rec.num("peer_zero", KvipConnectPeerRequest(e.vi, local.get(), remote.get(), 0, nullptr));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("zero") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("wrong_host") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("listen") == KVIP_SUCCESS);
    CHECK(r.num("not_done") == KVIP_NOT_DONE);
    CHECK(r.num("timeout") == KVIP_TIMEOUT);
    CHECK(r.num("client_zero") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("peer_zero") == KVIP_INVALID_PARAMETER);
}

TEST_CASE("kvip_connect_accept_with_conflicting_attributes_fails_and_a_matching_vi_then_connects", "[kvipl][s3.3]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            rec.num("client", dial(h, e, 1));
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViOptions o;
            o.reliability = KVIP_SERVICE_RELIABLE_RECEPTION;
            ViEnd e(o);
            KVIP_CONN_HANDLE conn = await_request(h, e);
            KvipConnectServerDone(conn, nullptr, nullptr);
            rec.num("accept_rel", KvipConnectAccept(conn, e.vi));
            KVIP_VI_ATTRIBUTES a = e.attributes();
            a.ReliabilityLevel = KVIP_SERVICE_RELIABLE_DELIVERY;
            a.MaxTransferSize = 4096;
            KvipSetViAttributes(e.vi, &a);
            rec.num("accept_mtu", KvipConnectAccept(conn, e.vi));
            a.MaxTransferSize = 1 << 20;
            a.QoS = reinterpret_cast<KVIP_QOS>(std::uintptr_t{3});
            KvipSetViAttributes(e.vi, &a);
            rec.num("accept_qos", KvipConnectAccept(conn, e.vi));
            a.QoS = nullptr;
            KvipSetViAttributes(e.vi, &a);
            rec.num("accept", KvipConnectAccept(conn, e.vi));
            rec.num("accept_again", KvipConnectAccept(conn, e.vi));
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("accept_rel") == KVIP_INVALID_RELIABILITY_LEVEL);
    CHECK(r.num("accept_mtu") == KVIP_INVALID_MTU);
    CHECK(r.num("accept_qos") == KVIP_INVALID_QOS);
    CHECK(r.num("accept") == KVIP_SUCCESS);
    CHECK(r.num("accept_again") == KVIP_INVALID_STATE);
    CHECK(r.num("client") == KVIP_SUCCESS);
}

TEST_CASE("kvip_connect_peer_connects_two_vis_that_name_each_other_and_moves_data", "[kvipl][s3.3]") {
    auto side = [](Host& h, Record& rec) {
        ViEnd e;
        const int me = h.index(), other = 1 - me;
        NetAddr local(me, me == 0 ? "a" : "b"), remote(other, other == 0 ? "a" : "b");
        KVIP_DESCRIPTOR* rd = e.sendrecv(0, 4096, 4096);
        KvipPostRecv(e.vi, rd, e.desc_mh);
        if (me == 1) h.sleep(us(300));  // the second side asks later
        KEVENT ev;
        KeInitializeEvent(&ev, NotificationEvent, KVIP_FALSE);
        rec.num("req" + std::to_string(me), KvipConnectPeerRequest(e.vi, local.get(), remote.get(), 100, &ev));
        KeWaitForSingleObject(&ev, 100);
        KVIP_VI_ATTRIBUTES ra{};
        rec.num("done" + std::to_string(me), KvipConnectPeerDone(e.vi, &ra));
        fill_pattern(e.data, 1000, 30 + me);
        h.barrier("connected");
        KvipPostSend(e.vi, e.sendrecv(1, 0, 1000), e.desc_mh);
        KVIP_DESCRIPTOR* got = nullptr;
        rec.num("send" + std::to_string(me), e.wait_done(false, &got, h));
        rec.num("recv" + std::to_string(me), e.wait_done(true, &got, h));
        std::vector<std::uint8_t> want(1000);
        fill_pattern(want.data(), want.size(), 30 + other);
        rec.bytes("data" + std::to_string(me), e.data + 4096, want.data(), want.size());
        h.barrier("end");
    };
    const auto r = run_pair({}, side, side);
    HCASIM_REQUIRE_RUN(r);
    for (int i = 0; i < 2; ++i) {
        const std::string s = std::to_string(i);
        CHECK(r.num("req" + s) == KVIP_SUCCESS);
        CHECK(r.num("done" + s) == KVIP_SUCCESS);
        CHECK(r.num("send" + s) == KVIP_SUCCESS);
        CHECK(r.num("recv" + s) == KVIP_SUCCESS);
        CHECK(r.num("data" + s + ".mismatch") == -1);
    }
}

TEST_CASE("kvip_connect_client_over_a_dead_link_reports_not_reachable", "[kvipl][s3.3]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            h.node().hca().port().set_link_up(false);
            rec.num("client", dial(h, e, 1));
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            NetAddr local(1, "srv");
            KVIP_CONN_HANDLE conn = nullptr;
            rec.num("listen", KvipConnectServerRequest(e.nic, local.get(), 5, nullptr, &conn));
            h.barrier("listening");
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("client") == KVIP_NOT_REACHABLE);
}

TEST_CASE("kvip_disconnect_flushes_local_descriptors_and_the_peer_sees_connection_lost", "[kvipl][s3.3][s3.8]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            dial(h, e, 1);
            KvipPostRecv(e.vi, e.sendrecv(0, 0, 64), e.desc_mh);
            h.barrier("up");
            rec.num("disconnect", KvipDisconnect(e.vi));
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("recv_done", e.wait_done(true, &got, h));
            rec.num("flushed", got ? got->CS.Status : 0);
            KVIP_VI_STATE st{};
            KvipQueryVi(e.vi, &st, nullptr, nullptr, nullptr);
            rec.num("state", st);
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            serve(h, e);
            h.barrier("up");
            rec.num("wait", KeWaitForSingleObject(&e.err_event, 10));
            KVIP_ERROR_DESCRIPTOR ed{};
            KVIP_ERROR_DESCRIPTOR* p = &ed;
            rec.num("err_done", KvipErrorNotificationDone(e.nic, &p));
            rec.num("code", ed.ErrorCode);
            rec.num("vi", ed.ViHandle == e.vi);
            KVIP_VI_STATE st{};
            KvipQueryVi(e.vi, &st, nullptr, nullptr, nullptr);
            rec.num("peer_state", st);
            rec.num("reset", KvipDisconnect(e.vi));
            KvipQueryVi(e.vi, &st, nullptr, nullptr, nullptr);
            rec.num("state_after", st);
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("disconnect") == KVIP_SUCCESS);
    CHECK(r.num("recv_done") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("flushed") == (KVIP_STATUS_DONE | KVIP_STATUS_DESC_FLUSHED_ERROR | KVIP_STATUS_OP_RECEIVE));
    CHECK(r.num("wait") == STATUS_SUCCESS);
    CHECK(r.num("err_done") == KVIP_SUCCESS);
    CHECK(r.num("code") == KVIP_ERROR_CONN_LOST);
    CHECK(r.num("vi") == 1);
    CHECK(r.num("state") == KVIP_STATE_IDLE);
    CHECK(r.num("peer_state") == KVIP_STATE_ERROR);
    CHECK(r.num("reset") == KVIP_SUCCESS);
    CHECK(r.num("state_after") == KVIP_STATE_IDLE);
}

TEST_CASE("kvip_connect_peer_between_vis_of_different_reliability_fails_on_both_sides", "[kvipl][s3.3]") {
    auto side = [](Host& h, Record& rec) {
        const int me = h.index(), other = 1 - me;
        ViOptions o;
        o.reliability = me == 0 ? KVIP_SERVICE_RELIABLE_DELIVERY : KVIP_SERVICE_RELIABLE_RECEPTION;
        ViEnd e(o);
        NetAddr local(me, me == 0 ? "a" : "b"), remote(other, other == 0 ? "a" : "b");
        KEVENT ev;
        KeInitializeEvent(&ev, NotificationEvent, KVIP_FALSE);
        KvipConnectPeerRequest(e.vi, local.get(), remote.get(), 100, &ev);
        KeWaitForSingleObject(&ev, 100);
        rec.num("done" + std::to_string(me), KvipConnectPeerDone(e.vi, nullptr));
        KVIP_VI_STATE st{};
        KvipQueryVi(e.vi, &st, nullptr, nullptr, nullptr);
        rec.num("state" + std::to_string(me), st);
        rec.num("again" + std::to_string(me), KvipConnectPeerDone(e.vi, nullptr));
        h.barrier("end");
    };
    const auto r = run_pair({}, side, side);
    HCASIM_REQUIRE_RUN(r);
    for (const std::string s : {"0", "1"}) {
        CHECK(r.num("done" + s) == KVIP_INVALID_RELIABILITY_LEVEL);
        CHECK(r.num("state" + s) == KVIP_STATE_IDLE);
        CHECK(r.num("again" + s) == KVIP_INVALID_STATE);
    }
}

TEST_CASE("kvip_connect_client_times_out_when_the_server_does_not_accept_in_time_and_a_late_accept_times_out",
          "[kvipl][s3.3]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            NetAddr local(0, "cli"), remote(1, "srv");
            h.barrier("listening");
            rec.num("request", KvipConnectClientRequest(e.vi, local.get(), remote.get(), 1, nullptr));
            rec.num("pending", KvipConnectClientDone(e.vi, nullptr));
            h.sleep(us(1500));
            rec.num("client", KvipConnectClientDone(e.vi, nullptr));
            h.barrier("client gave up");
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            KVIP_CONN_HANDLE conn = await_request(h, e, "srv", 10);
            rec.num("server_done", KvipConnectServerDone(conn, nullptr, nullptr));
            h.barrier("client gave up");
            rec.num("accept", KvipConnectAccept(conn, e.vi));
            KVIP_VI_STATE st{};
            KvipQueryVi(e.vi, &st, nullptr, nullptr, nullptr);
            rec.num("state", st);
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("request") == KVIP_SUCCESS);
    CHECK(r.num("pending") == KVIP_NOT_DONE);
    CHECK(r.num("client") == KVIP_TIMEOUT);
    CHECK(r.num("server_done") == KVIP_SUCCESS);
    CHECK(r.num("accept") == KVIP_TIMEOUT);
    CHECK(r.num("state") == KVIP_STATE_IDLE);
}
