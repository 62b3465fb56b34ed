// KVIPL return codes the section tests do not reach on their own: resource
// limits, unreachable peers, peer time-outs and calls on the wrong state.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvip_calls_past_the_nic_limits_fail_with_error_resource", "[kvipl][s3.2][s3.4]") {
    const auto r = run_programs({{"hca.max_qp", "1"}, {"hca.max_mr", "3"}, {"hca.vi_max_ptags", "2"}},
                                {[](Host&, Record& rec) {
                                    ViEnd e;  // one VI, two regions, one tag
                                    KVIP_VI_ATTRIBUTES a = e.attributes();
                                    KVIP_VI_HANDLE vi = nullptr;
                                    rec.num("vi", KvipCreateVi(e.nic, &a, nullptr, nullptr, nullptr, nullptr, &vi));
                                    KVIP_PROTECTION_HANDLE t2 = nullptr, t3 = nullptr;
                                    rec.num("ptag2", KvipCreatePtag(e.nic, &t2));
                                    rec.num("ptag3", KvipCreatePtag(e.nic, &t3));
                                    static std::uint8_t buf[2 * 4096] __attribute__((aligned(4096)));
                                    KVIP_MEM_ATTRIBUTES ma{e.ptag, KVIP_FALSE, KVIP_FALSE};
                                    KVIP_MEM_HANDLE m1 = 0, m2 = 0;
                                    rec.num("mem3", KvipRegisterMem(e.nic, buf, 4096, &ma, &m1));
                                    rec.num("mem4", KvipRegisterMem(e.nic, buf + 4096, 4096, &ma, &m2));
                                    KVIP_PHYS_ADDRESS pages[1] = {buf + 4096};
                                    rec.num("phys4", KvipRegisterPhysPages(e.nic, pages, 1, &ma, &m2));
                                }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("vi") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("ptag2") == KVIP_SUCCESS);
    CHECK(r.num("ptag3") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("mem3") == KVIP_SUCCESS);
    CHECK(r.num("mem4") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("phys4") == KVIP_ERROR_RESOURCE);
}

TEST_CASE("kvip_register_phys_pages_with_a_foreign_tag_fails_with_invalid_ptag", "[kvipl][s3.4]") {
    const auto r = run_programs({}, {[](Host&, Record& rec) {
        ViEnd e;
        static std::uint8_t buf[4096] __attribute__((aligned(4096)));
        KVIP_PHYS_ADDRESS pages[1] = {buf};
        KVIP_MEM_ATTRIBUTES ma{reinterpret_cast<KVIP_PROTECTION_HANDLE>(buf), KVIP_FALSE, KVIP_FALSE};
        KVIP_MEM_HANDLE mh = 0;
        rec.num("phys", KvipRegisterPhysPages(e.nic, pages, 1, &ma, &mh));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("phys") == KVIP_INVALID_PTAG);
}

TEST_CASE("kvip_send_done_and_recv_done_on_empty_queues_return_descriptor_error_and_null", "[kvipl][s3.5]") {
    const auto r = run_programs({}, {[](Host&, Record& rec) {
        ViEnd e;
        KVIP_DESCRIPTOR* d = reinterpret_cast<KVIP_DESCRIPTOR*>(e.desc_area);
        rec.num("send", KvipSendDone(e.vi, &d));
        rec.num("send_null", d == nullptr);
        d = reinterpret_cast<KVIP_DESCRIPTOR*>(e.desc_area);
        rec.num("recv", KvipRecvDone(e.vi, &d));
        rec.num("recv_null", d == nullptr);
        KvipPostRecv(e.vi, e.sendrecv(0, 0, 64), e.desc_mh);
        rec.num("not_done", KvipRecvDone(e.vi, &d));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("send") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.num("send_null") == 1);
    CHECK(r.num("recv") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.num("recv_null") == 1);
    CHECK(r.num("not_done") == KVIP_NOT_DONE);
}

TEST_CASE("kvip_accept_and_reject_over_a_dead_link_report_not_reachable", "[kvipl][s3.3]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record&) {
            ViEnd e;
            dial(h, e, 1);
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            KVIP_CONN_HANDLE conn = await_request(h, e);
            rec.num("server_done", KvipConnectServerDone(conn, nullptr, nullptr));
            h.node().hca().port().set_link_up(false);
            rec.num("accept", KvipConnectAccept(conn, e.vi));
            rec.num("reject", KvipConnectReject(conn));
            h.node().hca().port().set_link_up(true);
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("server_done") == KVIP_SUCCESS);
    CHECK(r.num("accept") == KVIP_NOT_REACHABLE);
    CHECK(r.num("reject") == KVIP_NOT_REACHABLE);
}

TEST_CASE("kvip_connect_peer_times_out_when_the_peer_never_asks_and_is_unreachable_over_a_dead_link",
          "[kvipl][s3.3]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            NetAddr local(0, "a"), remote(1, "b");
            rec.num("request", KvipConnectPeerRequest(e.vi, local.get(), remote.get(), 2, nullptr));
            rec.num("again", KvipConnectPeerRequest(e.vi, local.get(), remote.get(), 2, nullptr));
            rec.num("pending", KvipConnectPeerDone(e.vi, nullptr));
            h.sleep(us(2500));
            rec.num("timeout", KvipConnectPeerDone(e.vi, nullptr));
            // Now with the cable pulled.
            h.node().hca().port().set_link_up(false);
            KvipConnectPeerRequest(e.vi, local.get(), remote.get(), 100, nullptr);
            h.sleep(us(2000));
            rec.num("unreachable", KvipConnectPeerDone(e.vi, nullptr));
            h.node().hca().port().set_link_up(true);
            h.barrier("end");
        },
        [](Host& h, Record&) {
            ViEnd e;  // never asks
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("request") == KVIP_SUCCESS);
    CHECK(r.num("again") == KVIP_INVALID_STATE);
    CHECK(r.num("pending") == KVIP_NOT_DONE);
    CHECK(r.num("timeout") == KVIP_TIMEOUT);
    CHECK(r.num("unreachable") == KVIP_NOT_REACHABLE);
}

TEST_CASE("kvip_rearm_cq_with_a_wait_object_succeeds_and_signals_the_next_completion", "[kvipl][s3.5]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record&) {
            ViEnd e;
            dial(h, e, 1);
            h.barrier("armed");
            for (int i = 0; i < 2; ++i) {
                KvipPostSend(e.vi, e.sendrecv(static_cast<std::size_t>(i), 0, 32), e.desc_mh);
                KVIP_DESCRIPTOR* got = nullptr;
                e.wait_done(false, &got, h);
                h.barrier("sent" + std::to_string(i));
            }
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViOptions o;
            o.recv_cq = true;
            ViEnd e(o);
            for (int i = 0; i < 2; ++i) KvipPostRecv(e.vi, e.sendrecv(static_cast<std::size_t>(i), 0, 64), e.desc_mh);
            serve(h, e);
            h.barrier("armed");
            rec.num("first", KeWaitForSingleObject(&e.cq_event, 5));
            KeClearEvent(&e.cq_event);
            KVIP_VI_HANDLE vi = nullptr;
            KVIP_BOOLEAN rq = 0;
            KvipCQDone(e.cq, &vi, &rq);
            h.barrier("sent0");
            // Not rearmed: the second completion leaves the event clear.
            h.barrier("sent1");
            h.sleep(us(20));
            rec.num("not_rearmed", KeReadStateEvent(&e.cq_event));
            rec.num("cq_has_it", KvipCQDone(e.cq, &vi, &rq));
            rec.num("rearm", KvipRearmCQ(e.cq));
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("first") == STATUS_SUCCESS);
    CHECK(r.num("not_rearmed") == 0);
    CHECK(r.num("cq_has_it") == KVIP_SUCCESS);
    CHECK(r.num("rearm") == KVIP_SUCCESS);
}
