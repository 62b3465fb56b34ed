// QP asynchronous events of the connection's life: COMM_EST when a QP still
// in RTR receives its first request, SQ_DRAINED when a QP moved to SQD has
// finished the work it had started.
#include <catch2/catch.hpp>

#include "testbench/integration/harness.hpp"

using namespace hcasim;
using namespace hcasim::test;

namespace {

SideInfo publish(Host& h, Side& s, const std::string& tag) {
    h.put_value(tag + "/" + std::to_string(h.index()), s.describe());
    return h.get_value<SideInfo>(tag + "/" + std::to_string(1 - h.index()));
}

}  // namespace

TEST_CASE("a send to a qp still in rtr is received and raises IBV_EVENT_COMM_EST on that qp", "[integration][events]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            const SideInfo peer = publish(h, s, "c");
            const ConnOptions c;
            need_rc(qp_to_init(s.qps[0], c.qp_access), "INIT");
            need_rc(qp_to_rtr(s.qps[0], peer.lid, peer.qpn[0], 0, c), "RTR");
            need_rc(qp_to_rts(s.qps[0], 0, c), "RTS");
            fill_pattern(s.buf, 100, 9);
            h.barrier("peer in rtr");
            rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 100)}, IBV_SEND_SIGNALED, 5));
            const auto w = s.poll(s.send_cq, 1);
            if (!w.empty()) rec.wc("send", w[0]);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            const SideInfo peer = publish(h, s, "c");
            const ConnOptions c;
            need_rc(qp_to_init(s.qps[0], c.qp_access), "INIT");
            need_rc(qp_to_rtr(s.qps[0], peer.lid, peer.qpn[0], 0, c), "RTR");
            s.post_recv(s.qps[0], {s.sge(4096, 256)}, 7);
            h.barrier("peer in rtr");
            const auto w = s.poll(s.recv_cq, 1);
            if (!w.empty()) rec.wc("recv", w[0]);
            record_async_event(s, rec, "event");
            rec.num("state_at_event", static_cast<int>(qp_state(s.qps[0])));
            rec.num("intact", std::equal(s.buf + 4096, s.buf + 4196, pattern(100, 9).begin()));
            // The consumer now moves the QP to RTS, as it would on the event.
            rec.num("to_rts", qp_to_rts(s.qps[0], 0, c));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("send.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv.status") == IBV_WC_SUCCESS);
    CHECK(r.unum("recv.wr_id") == 7);
    CHECK(r.num("recv.byte_len") == 100);
    CHECK(r.num("intact") == 1);
    CHECK(r.num("event.rc") == 0);
    CHECK(r.num("event.type") == IBV_EVENT_COMM_EST);
    CHECK(r.num("event.our_qp") == 1);
    CHECK(r.num("state_at_event") == IBV_QPS_RTR);
    CHECK(r.num("to_rts") == 0);
}

TEST_CASE("a qp moved to sqd finishes the writes it started, raises IBV_EVENT_SQ_DRAINED and starts the rest only back in rts",
          "[integration][events]") {
    constexpr int kWrites = 16;
    constexpr std::uint32_t kBytes = 256 * 1024;
    SideOptions o;
    o.buffer_bytes = 2 * kWrites * kBytes;
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, o);
            s.connect("d", 1);
            fill_pattern(s.buf, kWrites * kBytes, 21);
            for (int i = 0; i < kWrites; ++i)
                s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(static_cast<std::size_t>(i) * kBytes, kBytes)},
                            IBV_SEND_SIGNALED, static_cast<std::uint64_t>(i),
                            s.remote_addr + static_cast<std::uint64_t>(kWrites + i) * kBytes, s.remote_rkey);
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_SQD;
            a.en_sqd_async_notify = 1;
            rec.num("to_sqd", ibv_modify_qp(s.qps[0], &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY));
            ibv_qp_attr q{};
            ibv_qp_init_attr qi{};
            need_rc(ibv_query_qp(s.qps[0], &q, IBV_QP_STATE, &qi), "ibv_query_qp");
            rec.num("state", q.qp_state);
            rec.num("draining", q.sq_draining);
            record_async_event(s, rec, "event");
            // What had started has completed by the event; nothing else runs.
            const auto first = s.poll(s.send_cq, kWrites, 2000);
            rec.num("before_rts", static_cast<long long>(first.size()));
            int ok = 0;
            for (const auto& w : first) ok += w.status == IBV_WC_SUCCESS;
            rec.num("before_rts_ok", ok);
            need_rc(ibv_query_qp(s.qps[0], &q, IBV_QP_STATE, &qi), "ibv_query_qp");
            rec.num("draining_after", q.sq_draining);
            rec.num("state_after", q.qp_state);
            ibv_qp_attr back{};
            back.qp_state = IBV_QPS_RTS;
            rec.num("to_rts", ibv_modify_qp(s.qps[0], &back, IBV_QP_STATE));
            const auto rest = s.poll(s.send_cq, kWrites - static_cast<int>(first.size()), 100000);
            int ok_rest = 0;
            std::uint64_t next_id = first.size();
            bool in_order = true;
            for (const auto& w : rest) {
                ok_rest += w.status == IBV_WC_SUCCESS;
                in_order = in_order && w.wr_id == next_id++;
            }
            rec.num("after_rts_ok", ok_rest);
            rec.num("in_order", in_order);
            h.barrier("done");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, o);
            s.connect("d", 0);
            h.barrier("done");
            // The last ACK can overtake the last payload writes still posted
            // on this node's PCIe: let them land.
            h.sleep(50 * sim::kPsPerUs);
            const auto want = pattern(kWrites * kBytes, 21);
            const std::uint8_t* got = s.buf + static_cast<std::size_t>(kWrites) * kBytes;
            const auto bad = std::mismatch(want.begin(), want.end(), got);
            rec.num("first_bad", bad.first == want.end() ? -1 : static_cast<long long>(bad.first - want.begin()));
            rec.num("intact", bad.first == want.end());
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("to_sqd") == 0);
    CHECK(r.num("state") == IBV_QPS_SQD);
    CHECK(r.num("draining") == 1);
    CHECK(r.num("event.rc") == 0);
    CHECK(r.num("event.type") == IBV_EVENT_SQ_DRAINED);
    CHECK(r.num("event.our_qp") == 1);
    // At least the first write had started; not all 4 MiB had.
    CHECK(r.num("before_rts") >= 1);
    CHECK(r.num("before_rts") < kWrites);
    CHECK(r.num("before_rts_ok") == r.num("before_rts"));
    CHECK(r.num("draining_after") == 0);
    CHECK(r.num("state_after") == IBV_QPS_SQD);
    CHECK(r.num("to_rts") == 0);
    CHECK(r.num("after_rts_ok") == kWrites - r.num("before_rts"));
    CHECK(r.num("in_order") == 1);
    INFO("first bad byte at " << r.num("first_bad"));
    CHECK(r.num("intact") == 1);
}
