// Ring index arithmetic: 24-bit PSN arithmetic, the CQE owner-bit
// convention between the completion engine and the driver, and 16-bit WQE
// index wraparound for send and receive queue fullness. The arithmetic is
// checked directly; the conventions through the real driver and adapter in
// isolated two-node runs.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>

#include "model/hca/contexts.hpp"
#include "model/hca/hca.hpp"
#include "model/hca/hw_formats.hpp"
#include "testbench/integration/harness.hpp"

using hcasim::hca::psn_add;
using hcasim::hca::psn_diff;
using namespace hcasim::test;

TEST_CASE("psn_add wraps in 24-bit space", "[rings][unit]") {
    CHECK(psn_add(0, 1) == 1);
    CHECK(psn_add(0xfffffe, 1) == 0xffffff);
    CHECK(psn_add(0xffffff, 1) == 0);
    CHECK(psn_add(0xfffffe, 5) == 3);
    CHECK(psn_add(0x800000, 0x800000) == 0);
    // Adding the mask is subtracting one.
    CHECK(psn_add(0, hcasim::hca::kPsnMask) == 0xffffff);
    CHECK(psn_add(10, hcasim::hca::kPsnMask) == 9);
    // Bits above 24 never leak into a PSN.
    CHECK(psn_add(0xffffff, 0xffffff) == 0xfffffe);
    CHECK(psn_add(0x1000000, 0) == 0);
}

TEST_CASE("psn_diff is the signed distance in 24-bit space across the wrap", "[rings][unit]") {
    CHECK(psn_diff(5, 5) == 0);
    CHECK(psn_diff(6, 5) == 1);
    CHECK(psn_diff(5, 6) == -1);
    CHECK(psn_diff(3, 0xfffffe) == 5);   // 0xfffffe + 5 wraps to 3
    CHECK(psn_diff(0xfffffe, 3) == -5);
    CHECK(psn_diff(0, 0xffffff) == 1);
    CHECK(psn_diff(0xffffff, 0) == -1);
    // Half the space ahead is "ahead"; from 2^23 on it is "behind".
    CHECK(psn_diff(0x7fffff, 0) == 0x7fffff);
    CHECK(psn_diff(0x800000, 0) == -0x800000);
    CHECK(psn_diff(0x800001, 0) == -0x7fffff);
    // The defining property, on a grid of bases and distances.
    for (std::uint32_t base : {0u, 1u, 0x7fffffu, 0x800000u, 0xfffff0u, 0xffffffu, 0x123456u}) {
        for (std::int32_t d : {0, 1, 2, 100, 4096, 0x7ffffe, 0x7fffff, -1, -2, -100, -0x7fffff, -0x800000}) {
            INFO("base 0x" << std::hex << base << " distance " << std::dec << d);
            const std::uint32_t b = psn_add(base, static_cast<std::uint32_t>(d) & hcasim::hca::kPsnMask);
            CHECK(psn_diff(b, base) == d);
            CHECK(b <= hcasim::hca::kPsnMask);
        }
    }
}

TEST_CASE("a CQE is 32 bytes with the owner bit in its last byte", "[rings][unit]") {
    CHECK(sizeof(hcasim::hca::Cqe) == 32);
    CHECK(offsetof(hcasim::hca::Cqe, owner) == 31);
    // The convention (completion_engine.cpp writes it, driver.cpp reads it):
    // the entry for free-running producer index p carries owner (p >> log) & 1,
    // and the driver with consumer index c takes the entry at c & mask as
    // valid when its owner bit equals (c >> log) & 1. A new ring is all 1s, so
    // nothing is valid on the first pass until written; a slot written on pass
    // k is stale for the consumer on pass k + 1.
    const std::uint32_t log = 3, entries = 1u << log;
    std::uint8_t owner[8];
    for (auto& o : owner) o = 1;
    auto valid = [&](std::uint32_t c) { return (owner[c & (entries - 1)] & 1) == ((c >> log) & 1); };
    std::uint32_t producer = 0, consumer = 0;
    for (int pass = 0; pass < 5; ++pass) {
        CHECK_FALSE(valid(consumer));
        for (std::uint32_t i = 0; i < entries; ++i, ++producer) owner[producer & (entries - 1)] = (producer >> log) & 1;
        for (std::uint32_t i = 0; i < entries; ++i, ++consumer) CHECK(valid(consumer));
    }
    CHECK_FALSE(valid(consumer));
}

TEST_CASE("the completion engine and the driver agree on the CQE owner bit over many passes of the ring",
          "[rings][integration]") {
    // CQEs go straight into a CQ through the adapter's completion engine (a
    // DMA write with the owner bit it computes); the program polls them with
    // ibv_poll_cq, which applies the driver's rule. 150 batches of 1 to 7
    // CQEs through a ring of 8 entries: about 75 passes.
    const auto r = run_programs({}, {[](Host& h, Record& rec) {
                                         Side s(h, {});
                                         ibv_cq* cq = ibv_create_cq(s.ctx, 4, nullptr, nullptr, 0);
                                         need(cq != nullptr, "ibv_create_cq");
                                         rec.num("cqe", cq->cqe);
                                         auto& engine = h.node().hca().completion();
                                         std::uint32_t seq = 1, expect = 1;
                                         int bad = 0, total = 0, extra = 0;
                                         for (int batch = 0; batch < 150; ++batch) {
                                             const int k = 1 + batch % 7;
                                             for (int i = 0; i < k; ++i, ++seq) {
                                                 hcasim::hca::Cqe c{};
                                                 c.byte_len = seq;
                                                 c.opcode = static_cast<std::uint8_t>(hcasim::hca::CqeOpcode::Recv);
                                                 if (!engine.post(h.now(), cq->handle, c)) ++bad;
                                             }
                                             h.sleep(us(5));
                                             ibv_wc wc[8];
                                             const int n = ibv_poll_cq(cq, 8, wc);
                                             for (int i = 0; i < n; ++i, ++expect, ++total)
                                                 bad += wc[i].byte_len != expect || wc[i].status != IBV_WC_SUCCESS;
                                             bad += n != k;
                                             extra += ibv_poll_cq(cq, 8, wc);
                                         }
                                         rec.num("bad", bad);
                                         rec.num("posted", seq - 1);
                                         rec.num("total", total);
                                         rec.num("extra", extra);
                                         need_rc(ibv_destroy_cq(cq), "ibv_destroy_cq");
                                         s.close();
                                     },
                                     nullptr});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("cqe") >= 4);
    CHECK(r.num("posted") == 594);  // 21 cycles of 1..7, then 1, 2, 3
    CHECK(r.num("total") == 594);
    CHECK(r.num("bad") == 0);
    CHECK(r.num("extra") == 0);
}

TEST_CASE("posting more unsignaled work requests than max_send_wr fails with ENOMEM", "[rings][integration]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.qps = 2;
            o.max_send_wr = 16;
            Side s(h, o);
            s.connect("sq", 1);
            ibv_qp_attr a{};
            ibv_qp_init_attr init{};
            ibv_query_qp(s.qps[0], &a, 0, &init);
            const int cap = static_cast<int>(init.cap.max_send_wr);
            rec.num("cap", cap);
            h.barrier("ready");
            // QP 0: only unsignaled requests. Once cap are posted the queue is
            // full for good: without a completion the driver cannot know that
            // the adapter is done with them.
            int rc = 0;
            for (int i = 0; i < cap; ++i)
                rc |= s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, 0, static_cast<std::uint64_t>(i),
                                  s.remote_addr, s.remote_rkey);
            rec.num("fill_rc", rc);
            ibv_sge sge = s.sge(0, 8);
            ibv_send_wr wr{};
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.wr.rdma.remote_addr = s.remote_addr;
            wr.wr.rdma.rkey = s.remote_rkey;
            ibv_send_wr* bad = nullptr;
            rec.num("over_rc", ibv_post_send(s.qps[0], &wr, &bad));
            rec.num("over_bad_set", bad == &wr);
            h.sleep(us(100));
            rec.num("later_rc", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, IBV_SEND_SIGNALED, 99,
                                            s.remote_addr, s.remote_rkey));
            rec.num("no_completions", s.poll(s.send_cq, 1, 20).size());
            // QP 1: the last of every cap requests is signaled; its completion
            // frees the whole window, again and again.
            int ok = 0, full_rc = 0;
            for (int round = 0; round < 5; ++round) {
                for (int i = 0; i < cap; ++i)
                    ok += s.post_send(s.qps[1], IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, i + 1 == cap ? IBV_SEND_SIGNALED : 0,
                                      static_cast<std::uint64_t>(round * cap + i), s.remote_addr, s.remote_rkey) == 0;
                full_rc |= s.post_send(s.qps[1], IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, 0, 0, s.remote_addr,
                                       s.remote_rkey) == ENOMEM ? 0 : 1;
                s.poll_ok(s.send_cq, 1, "window");
            }
            rec.num("windows_ok", ok);
            rec.num("windows_full_rc", full_rc);
            h.barrier("done");
        },
        [](Host& h, Record&) {
            SideOptions o;
            o.qps = 2;
            Side s(h, o);
            s.connect("sq", 0);
            h.barrier("ready");
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("cap") >= 16);
    CHECK(r.num("fill_rc") == 0);
    CHECK(r.num("over_rc") == ENOMEM);
    CHECK(r.num("over_bad_set") == 1);
    CHECK(r.num("later_rc") == ENOMEM);
    CHECK(r.num("no_completions") == 0);
    CHECK(r.num("windows_ok") == 5 * r.num("cap"));
    CHECK(r.num("windows_full_rc") == 0);
}

TEST_CASE("posting more receives than max_recv_wr fails with ENOMEM until completions free them",
          "[rings][integration]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("rq", 1);
            h.barrier("full");
            for (int i = 0; i < 3; ++i) s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 8)}, IBV_SEND_SIGNALED, 0);
            s.poll_ok(s.send_cq, 3, "sends");
            h.barrier("sent");
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.max_recv_wr = 8;
            Side s(h, o);
            s.connect("rq", 0);
            ibv_qp_attr a{};
            ibv_qp_init_attr init{};
            ibv_query_qp(s.qps[0], &a, 0, &init);
            const int cap = static_cast<int>(init.cap.max_recv_wr);
            rec.num("cap", cap);
            int rc = 0;
            for (int i = 0; i < cap; ++i) rc |= s.post_recv(s.qps[0], {s.sge(0, 64)}, static_cast<std::uint64_t>(i));
            rec.num("fill_rc", rc);
            rec.num("over_rc", s.post_recv(s.qps[0], {s.sge(0, 64)}, 100));
            h.barrier("full");
            h.barrier("sent");
            rec.num("received", s.poll(s.recv_cq, 3).size());
            int again = 0;
            for (int i = 0; i < 3; ++i) again += s.post_recv(s.qps[0], {s.sge(0, 64)}, 200) == 0;
            rec.num("reposted", again);
            rec.num("over_again_rc", s.post_recv(s.qps[0], {s.sge(0, 64)}, 300));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("cap") >= 8);
    CHECK(r.num("fill_rc") == 0);
    CHECK(r.num("over_rc") == ENOMEM);
    CHECK(r.num("received") == 3);
    CHECK(r.num("reposted") == 3);
    CHECK(r.num("over_again_rc") == ENOMEM);
}

TEST_CASE("send and receive queue indices wrap past 65535 without losing or duplicating a request",
          "[rings][integration]") {
    // 4200 rounds of 16 SENDs (15 unsignaled, the last signaled) against 16
    // receives: 67200 requests on each queue, past the 16-bit index wrap of
    // both rings, with a window of 16 WQEs.
    constexpr int kRounds = 4200, kWindow = 16;
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.max_send_wr = kWindow;
            Side s(h, o);
            s.connect("wrap", 1);
            int post_fail = 0, bad = 0;
            for (int round = 0; round < kRounds; ++round) {
                h.barrier("r" + std::to_string(round));
                for (int i = 0; i < kWindow; ++i) {
                    const std::uint64_t id = static_cast<std::uint64_t>(round) * kWindow + static_cast<std::uint64_t>(i);
                    post_fail += s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(static_cast<std::size_t>(i) * 8, 8)},
                                             i + 1 == kWindow ? IBV_SEND_SIGNALED : 0, id) != 0;
                }
                const auto w = s.poll(s.send_cq, 1);
                bad += w.size() != 1 || w[0].status != IBV_WC_SUCCESS ||
                       w[0].wr_id != static_cast<std::uint64_t>(round) * kWindow + kWindow - 1;
            }
            rec.num("send_post_fail", post_fail);
            rec.num("send_bad", bad);
            // Still exactly a window of room after the wrap.
            int fill = 0;
            for (int i = 0; i < kWindow; ++i) fill += s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, 0, 0,
                                                                   s.remote_addr, s.remote_rkey) == 0;
            rec.num("final_fill", fill);
            rec.num("final_over", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, 0, 0, s.remote_addr,
                                              s.remote_rkey));
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.max_recv_wr = kWindow;
            o.buffer_bytes = 1 << 16;
            Side s(h, o);
            s.connect("wrap", 0);
            int post_fail = 0, bad = 0;
            std::uint64_t expect = 0;
            for (int round = 0; round < kRounds; ++round) {
                for (int i = 0; i < kWindow; ++i)
                    post_fail += s.post_recv(s.qps[0], {s.sge(static_cast<std::size_t>(i) * 64, 64)},
                                             static_cast<std::uint64_t>(round) * kWindow + static_cast<std::uint64_t>(i)) != 0;
                h.barrier("r" + std::to_string(round));
                const auto w = s.poll(s.recv_cq, kWindow);
                bad += w.size() != kWindow;
                for (const auto& x : w) bad += x.status != IBV_WC_SUCCESS || x.wr_id != expect++ || x.byte_len != 8;
            }
            rec.num("recv_post_fail", post_fail);
            rec.num("recv_bad", bad);
            rec.num("received", expect);
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("send_post_fail") == 0);
    CHECK(r.num("send_bad") == 0);
    CHECK(r.num("recv_post_fail") == 0);
    CHECK(r.num("recv_bad") == 0);
    CHECK(r.num("received") == kRounds * kWindow);
    CHECK(r.num("final_fill") == kWindow);
    CHECK(r.num("final_over") == ENOMEM);
}

TEST_CASE("transfers whose PSNs wrap past 0xffffff deliver every byte", "[rings][integration]") {
    // The requester starts 6 PSNs below the wrap: the first 65539 B message
    // (17 packets) wraps in its middle; READ responses use the same space.
    for (XOp op : {XOp::Send, XOp::Write, XOp::WriteImm, XOp::Read}) {
        const std::vector<XCase> cases{{op, 65539, 3, 5}, {op, 1 << 20, 4096 - 1, 1}, {op, 4097, 0, 0}};
        CaseRun run;
        run.conn.psn = 0xfffffa;
        INFO(xop_name(op));
        check_cases(run_cases(cases, run), cases);
    }
    // A small path MTU crosses the wrap many times per message.
    std::vector<XCase> cases;
    for (XOp op : {XOp::Send, XOp::Write, XOp::Read}) cases.push_back({op, 300000, 17, 33});
    CaseRun run;
    run.conn.psn = 0xffff00;
    run.conn.mtu = IBV_MTU_256;
    check_cases(run_cases(cases, run), cases);
}

TEST_CASE("a CQ of 8 entries wraps its ring many times and every completion is seen once in order",
          "[rings][integration]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.cq_depth = 4;
            Side s(h, o);
            s.connect("cq", 1);
            rec.num("cqe", s.send_cq->cqe);
            int bad = 0;
            std::uint64_t next = 0, expect = 0;
            for (int round = 0; round < 60; ++round) {
                const int k = 1 + round % 4;
                for (int i = 0; i < k; ++i, ++next)
                    s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 16)}, IBV_SEND_SIGNALED, next, s.remote_addr,
                                s.remote_rkey);
                const auto w = s.poll(s.send_cq, k);
                bad += static_cast<int>(w.size()) != k;
                for (const auto& x : w) bad += x.wr_id != expect++ || x.status != IBV_WC_SUCCESS;
            }
            rec.num("bad", bad);
            rec.num("seen", expect);
            rec.num("extra", s.poll(s.send_cq, 1, 20).size());
            h.barrier("end");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("cq", 0);
            h.barrier("end");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("cqe") >= 4);
    CHECK(r.num("cqe") < 16);
    CHECK(r.num("seen") == 150);
    CHECK(r.num("bad") == 0);
    CHECK(r.num("extra") == 0);
}
