// KVIPL addendum 3.5.7-3.5.8 and 3.6: completion queues.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvip_cq_done_names_the_vi_and_queue_and_the_descriptor_is_then_dequeued", "[kvipl][s3.6]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViOptions o;
            o.send_cq = true;
            o.recv_cq = true;
            ViEnd e(o);
            KvipPostRecv(e.vi, e.sendrecv(1, 4096, 4096), e.desc_mh);
            dial(h, e, 1);
            KVIP_VI_HANDLE vi = nullptr;
            KVIP_BOOLEAN rq = 7;
            rec.num("empty", KvipCQDone(e.cq, &vi, &rq));
            rec.num("destroy_busy", KvipDestroyCQ(e.cq));
            rec.num("resize", KvipResizeCQ(e.cq, 1000));
            rec.num("resize_zero", KvipResizeCQ(e.cq, 0));
            KvipPostSend(e.vi, e.sendrecv(0, 0, 100), e.desc_mh);
            // Two completions: the send, then the peer's reply.
            int seen_send = 0, seen_recv = 0;
            const auto end = h.now() + us(10000);
            while (seen_send + seen_recv < 2 && h.now() < end) {
                if (KvipCQDone(e.cq, &vi, &rq) != KVIP_SUCCESS) continue;
                rec.num("vi_ok", vi == e.vi);
                KVIP_DESCRIPTOR* d = nullptr;
                if (rq) {
                    ++seen_recv;
                    rec.num("recv_done", KvipRecvDone(e.vi, &d));
                } else {
                    ++seen_send;
                    rec.num("send_done", KvipSendDone(e.vi, &d));
                }
            }
            rec.num("seen_send", seen_send);
            rec.num("seen_recv", seen_recv);
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViOptions o;
            o.recv_cq = true;
            ViEnd e(o);
            KvipPostRecv(e.vi, e.sendrecv(0, 0, 4096), e.desc_mh);
            serve(h, e);
            // Wait model on the CQ.
            rec.num("cq_wait", KeWaitForSingleObject(&e.cq_event, 10));
            KVIP_VI_HANDLE vi = nullptr;
            KVIP_BOOLEAN rq = KVIP_FALSE;
            rec.num("cq_done", KvipCQDone(e.cq, &vi, &rq));
            rec.num("cq_rq", rq);
            KVIP_DESCRIPTOR* d = nullptr;
            rec.num("srv_recv", KvipRecvDone(e.vi, &d));
            KvipPostSend(e.vi, e.sendrecv(1, 8192, 50), e.desc_mh);
            rec.num("srv_send", e.wait_done(false, &d, h));
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("empty") == KVIP_NOT_DONE);
    CHECK(r.num("destroy_busy") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("resize") == KVIP_SUCCESS);
    CHECK(r.num("resize_zero") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("seen_send") == 1);
    CHECK(r.num("seen_recv") == 1);
    CHECK(r.num("vi_ok") == 1);
    CHECK(r.num("send_done") == KVIP_SUCCESS);
    CHECK(r.num("recv_done") == KVIP_SUCCESS);
    CHECK(r.num("cq_wait") == STATUS_SUCCESS);
    CHECK(r.num("cq_done") == KVIP_SUCCESS);
    CHECK(r.num("cq_rq") == KVIP_TRUE);
    CHECK(r.num("srv_recv") == KVIP_SUCCESS);
    CHECK(r.num("srv_send") == KVIP_SUCCESS);
}

TEST_CASE("kvip_cq_create_and_destroy_return_the_documented_codes", "[kvipl][s3.6]") {
    const auto r = run_programs({}, {[](Host&, Record& rec) {
        ViEnd e;
        KVIP_CQ_HANDLE cq = nullptr;
        rec.num("zero", KvipCreateCQ(e.nic, 0, nullptr, &cq));
        rec.num("create", KvipCreateCQ(e.nic, 16, nullptr, &cq));
        rec.num("rearm_without_wait", KvipRearmCQ(cq));
        rec.num("destroy", KvipDestroyCQ(cq));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("zero") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("create") == KVIP_SUCCESS);
    CHECK(r.num("rearm_without_wait") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("destroy") == KVIP_SUCCESS);
}
