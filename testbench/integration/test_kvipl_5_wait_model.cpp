// KVIPL addendum 5.2: the wait model. Poll, rearm, poll again, then wait on
// the queue's wait object, which the provider signals from the interrupt.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvipl wait model: a receive wait object wakes the thread after the message and the interrupt",
          "[kvipl][s5][wait]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViOptions o;
            o.wait_objects = true;
            ViEnd e(o);
            dial(h, e, 1);
            h.barrier("waiting");
            h.sleep(us(40));
            fill_pattern(e.data, 2000, 12);
            h.put_value("t_post", h.now());
            KvipPostSend(e.vi, e.sendrecv(0, 0, 2000), e.desc_mh);
            // The send queue's wait object too.
            rec.num("send_wait", KeWaitForSingleObject(&e.send_event, 10));
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("send_done", KvipSendDone(e.vi, &got));
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViOptions o;
            o.wait_objects = true;
            ViEnd e(o);
            KvipPostRecv(e.vi, e.sendrecv(0, 0, 4096), e.desc_mh);
            serve(h, e);
            h.barrier("waiting");
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("poll1", KvipRecvDone(e.vi, &got));
            rec.num("rearm", KvipRearmRecv(e.vi));
            rec.num("poll2", KvipRecvDone(e.vi, &got));
            rec.num("timeout", KeWaitForSingleObject(&e.recv_event, 0));
            rec.num("wait", KeWaitForSingleObject(&e.recv_event, KVIP_INFINITE));
            const auto t_wake = h.now();
            rec.num("done", KvipRecvDone(e.vi, &got));
            const auto t_post = h.get_value<hcasim::sim::Tick>("t_post");
            rec.num("post_to_wake_ns", (t_wake - t_post) / 1000);
            std::vector<std::uint8_t> want(2000);
            fill_pattern(want.data(), want.size(), 12);
            rec.bytes("data", e.data, want.data(), want.size());
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("poll1") == KVIP_NOT_DONE);
    CHECK(r.num("rearm") == KVIP_SUCCESS);
    CHECK(r.num("poll2") == KVIP_NOT_DONE);
    CHECK(r.num("timeout") == STATUS_TIMEOUT);
    CHECK(r.num("wait") == STATUS_SUCCESS);
    CHECK(r.num("done") == KVIP_SUCCESS);
    CHECK(r.num("data.mismatch") == -1);
    // Message, write-back, MSI-X and the interrupt handler all take time.
    CHECK(r.num("post_to_wake_ns") > 1000);
    CHECK(r.num("post_to_wake_ns") < 20000);
    CHECK(r.num("send_wait") == STATUS_SUCCESS);
    CHECK(r.num("send_done") == KVIP_SUCCESS);
}

TEST_CASE("kvip_rearm_of_a_queue_without_a_wait_object_or_with_a_cq_fails", "[kvipl][s3.5]") {
    const auto r = run_programs({}, {[](Host&, Record& rec) {
        ViEnd plain;
        rec.num("send_no_wait", KvipRearmSend(plain.vi));
        rec.num("recv_no_wait", KvipRearmRecv(plain.vi));
        ViOptions o;
        o.send_cq = true;
        o.recv_cq = true;
        ViEnd with_cq(o);
        rec.num("send_cq", KvipRearmSend(with_cq.vi));
        rec.num("recv_cq", KvipRearmRecv(with_cq.vi));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("send_no_wait") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("recv_no_wait") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("send_cq") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("recv_cq") == KVIP_ERROR_RESOURCE);
}
