// KVIPL addendum section 5: the polling model and the wait model, end to
// end over a client/server connection, with payloads compared byte for byte.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvipl polling model: a client/server send arrives intact and both descriptors report Done",
          "[kvipl][s5][polling]") {
    for (KVIP_RELIABILITY_LEVEL rel :
         {KVIP_SERVICE_UNRELIABLE, KVIP_SERVICE_RELIABLE_DELIVERY, KVIP_SERVICE_RELIABLE_RECEPTION}) {
        const auto r = run_pair(
            {},
            [rel](Host& h, Record& rec) {
                ViOptions o;
                o.reliability = rel;
                ViEnd e(o);
                rec.num("connect", dial(h, e, 1));
                fill_pattern(e.data, 5000, 7);
                h.barrier("posted");
                KVIP_DESCRIPTOR* d = e.sendrecv(0, 0, 5000);
                rec.num("post", KvipPostSend(e.vi, d, e.desc_mh));
                KVIP_DESCRIPTOR* got = nullptr;
                rec.num("send_done", e.wait_done(false, &got, h));
                rec.num("send_same", got == d);
                rec.num("send_status", got ? got->CS.Status : 0);
                rec.num("send_length", got ? got->CS.Length : 0);
                h.barrier("end");
            },
            [rel](Host& h, Record& rec) {
                ViOptions o;
                o.reliability = rel;
                ViEnd e(o);
                KVIP_DESCRIPTOR* d = e.sendrecv(0, 0, 8192);
                rec.num("post_recv", KvipPostRecv(e.vi, d, e.desc_mh));
                rec.num("accept", serve(h, e));
                h.barrier("posted");
                KVIP_DESCRIPTOR* got = nullptr;
                rec.num("recv_done", e.wait_done(true, &got, h));
                rec.num("recv_status", got ? got->CS.Status : 0);
                rec.num("recv_length", got ? got->CS.Length : 0);
                std::vector<std::uint8_t> want(5000);
                fill_pattern(want.data(), want.size(), 7);
                rec.bytes("data", e.data, want.data(), want.size());
                h.barrier("end");
            });
        INFO("reliability " << rel << ": " << r.error);
        REQUIRE(r.ok);
        CHECK(r.num("connect") == KVIP_SUCCESS);
        CHECK(r.num("accept") == KVIP_SUCCESS);
        CHECK(r.num("post") == KVIP_SUCCESS);
        CHECK(r.num("send_done") == KVIP_SUCCESS);
        CHECK(r.num("send_same") == 1);
        CHECK(r.unum("send_status") == (KVIP_STATUS_DONE | KVIP_STATUS_OP_SEND));
        CHECK(r.num("send_length") == 5000);
        CHECK(r.num("recv_done") == KVIP_SUCCESS);
        CHECK(r.unum("recv_status") == (KVIP_STATUS_DONE | KVIP_STATUS_OP_RECEIVE));
        CHECK(r.num("recv_length") == 5000);
        CHECK(r.num("data.mismatch") == -1);
    }
}
