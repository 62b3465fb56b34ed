// Bad input through the verbs API: each gives the result libibverbs
// documents (a completion status, an async event, an errno) and the other
// QPs of the same nodes keep transferring data correctly afterwards.
#include <catch2/catch.hpp>

#include <algorithm>

#include "testbench/integration/harness.hpp"

using namespace hcasim::test;

namespace {

struct MrRef {
    std::uint64_t addr;
    std::uint32_t rkey;
};

SideOptions two_qps() {
    SideOptions o;
    o.qps = 2;
    return o;
}

}  // namespace

TEST_CASE("a send with an invalid lkey completes with IBV_WC_LOC_PROT_ERR and the other QP keeps working",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 1);
            h.barrier("ready");
            ibv_sge bad = s.sge(0, 1000);
            bad.lkey ^= 0x5500;
            rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(4096, 10), bad}, IBV_SEND_SIGNALED, 11));
            std::vector<ibv_wc> stray;
            auto w = poll_qp(s, s.send_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("bad", w[0]);
            // The QP is in the error state now: a later request is flushed.
            rec.num("post2", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 10)}, IBV_SEND_SIGNALED, 12));
            w = poll_qp(s, s.send_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("later", w[0]);
            rec.num("state", static_cast<int>(qp_state(s.qps[0])));
            rec.num("stray", stray.size());
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 0);
            s.post_recv(s.qps[0], {s.sge(0, 4096)}, 21);
            h.barrier("ready");
            h.barrier("error seen");
            // Nothing reached the responder: its QP is untouched.
            rec.num("peer_state", static_cast<int>(qp_state(s.qps[0])));
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("bad.status") == IBV_WC_LOC_PROT_ERR);
    CHECK(r.unum("bad.wr_id") == 11);
    CHECK(r.num("post2") == 0);
    CHECK(r.num("later.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.unum("later.wr_id") == 12);
    CHECK(r.num("stray") == 0);
    CHECK(r.num("peer_state") == IBV_QPS_RTS);
    check_qp_works(r, "qp1");
    // ibv_query_qp reports the state the QP is really in.
    CHECK(r.num("state") == IBV_QPS_ERR);
}

TEST_CASE("rdma write with an invalid rkey completes with IBV_WC_REM_ACCESS_ERR and the responder gets IBV_EVENT_QP_ACCESS_ERR",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 1);
            fill_pattern(s.buf, 300, 5);
            h.barrier("ready");
            rec.num("post", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 300)}, IBV_SEND_SIGNALED, 31,
                                        s.remote_addr + 0x1000, s.remote_rkey ^ 0x7700));
            std::vector<ibv_wc> stray;
            auto w = poll_qp(s, s.send_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("bad", w[0]);
            rec.num("post2", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 300)}, IBV_SEND_SIGNALED, 32,
                                         s.remote_addr + 0x1000, s.remote_rkey));
            w = poll_qp(s, s.send_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("later", w[0]);
            rec.num("req_state", static_cast<int>(qp_state(s.qps[0])));
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 0);
            std::memset(s.buf + 0x1000 - 64, kGuardByte, 300 + 128);
            s.post_recv(s.qps[0], {s.sge(0, 64)}, 41);
            s.post_recv(s.qps[0], {s.sge(64, 64)}, 42);
            h.barrier("ready");
            record_async_event(s, rec, "event");
            rec.num("resp_state", static_cast<int>(qp_state(s.qps[0])));
            std::vector<ibv_wc> stray;
            const auto w = poll_qp(s, s.recv_cq, s.qps[0]->qp_num, 2, stray);
            rec.num("flushed", w.size());
            for (std::size_t i = 0; i < w.size(); ++i) rec.wc("flush" + std::to_string(i), w[i]);
            int damaged = 0;
            for (int i = 0; i < 300 + 128; ++i) damaged += s.buf[0x1000 - 64 + i] != kGuardByte;
            rec.num("damaged", damaged);
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("bad.status") == IBV_WC_REM_ACCESS_ERR);
    CHECK(r.unum("bad.wr_id") == 31);
    CHECK(r.num("later.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.unum("later.wr_id") == 32);
    CHECK(r.num("event.rc") == 0);
    CHECK(r.num("event.type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("event.qp") == 0);
    CHECK(r.num("resp_state") == IBV_QPS_ERR);
    CHECK(r.num("flushed") == 2);
    CHECK(r.num("flush0.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.unum("flush0.wr_id") == 41);
    CHECK(r.num("flush1.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.unum("flush1.wr_id") == 42);
    CHECK(r.num("damaged") == 0);
    check_qp_works(r, "qp1");
    CHECK(r.num("req_state") == IBV_QPS_ERR);
}

TEST_CASE("rdma read of a region registered without remote read completes with IBV_WC_REM_ACCESS_ERR",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 1);
            const auto peer = h.get_value<MrRef>("no_read_mr");
            std::memset(s.buf, kGuardByte, 8192);
            h.barrier("ready");
            rec.num("post", s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(0, 4096)}, IBV_SEND_SIGNALED, 51,
                                        peer.addr, peer.rkey));
            std::vector<ibv_wc> stray;
            const auto w = poll_qp(s, s.send_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("bad", w[0]);
            int damaged = 0;
            for (int i = 0; i < 8192; ++i) damaged += s.buf[i] != kGuardByte;
            rec.num("damaged", damaged);
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 0);
            // A second region the peer may write but not read.
            auto* other = static_cast<std::uint8_t*>(std::aligned_alloc(4096, 16384));
            fill_pattern(other, 16384, 9);
            ibv_mr* mr = ibv_reg_mr(s.pd, other, 16384, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
            need(mr != nullptr, "ibv_reg_mr");
            h.put_value("no_read_mr", MrRef{reinterpret_cast<std::uintptr_t>(other), mr->rkey});
            h.barrier("ready");
            record_async_event(s, rec, "event");
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            ibv_dereg_mr(mr);
            s.close();
            std::free(other);
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("bad.status") == IBV_WC_REM_ACCESS_ERR);
    CHECK(r.num("bad.opcode") == IBV_WC_RDMA_READ);
    CHECK(r.num("damaged") == 0);
    CHECK(r.num("event.type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("event.qp") == 0);
    check_qp_works(r, "qp1");
}

TEST_CASE("rdma write beyond the end of the region completes with IBV_WC_REM_ACCESS_ERR and writes nothing",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 1);
            fill_pattern(s.buf, 8192, 3);
            h.barrier("ready");
            // 100 bytes inside the region, 4000 past its end: no byte may land.
            const std::uint64_t raddr = s.remote_addr + s.peer_info.length - 100;
            rec.num("post", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 4100)}, IBV_SEND_SIGNALED, 61, raddr,
                                        s.remote_rkey));
            std::vector<ibv_wc> stray;
            const auto w = poll_qp(s, s.send_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("bad", w[0]);
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 0);
            std::memset(s.buf + s.opt.buffer_bytes - 100, kGuardByte, 100);
            h.barrier("ready");
            record_async_event(s, rec, "event");
            int damaged = 0;
            for (std::size_t i = s.opt.buffer_bytes - 100; i < s.opt.buffer_bytes; ++i) damaged += s.buf[i] != kGuardByte;
            rec.num("damaged", damaged);
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("bad.status") == IBV_WC_REM_ACCESS_ERR);
    CHECK(r.num("event.type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("damaged") == 0);
    check_qp_works(r, "qp1");
}

TEST_CASE("a receive buffer too small gives IBV_WC_LOC_LEN_ERR at the receiver and IBV_WC_REM_INV_REQ_ERR at the sender",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 1);
            fill_pattern(s.buf, 4097, 4);
            h.barrier("ready");
            rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 4097)}, IBV_SEND_SIGNALED, 71));
            std::vector<ibv_wc> stray;
            const auto w = poll_qp(s, s.send_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("sender", w[0]);
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 0);
            std::memset(s.buf, kGuardByte, 8192);
            s.post_recv(s.qps[0], {s.sge(0, 100)}, 81);
            h.barrier("ready");
            std::vector<ibv_wc> stray;
            const auto w = poll_qp(s, s.recv_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("receiver", w[0]);
            record_async_event(s, rec, "event");
            int damaged = 0;
            for (int i = 100; i < 8192; ++i) damaged += s.buf[i] != kGuardByte;
            rec.num("damaged_past_buffer", damaged);
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("receiver.status") == IBV_WC_LOC_LEN_ERR);
    CHECK(r.unum("receiver.wr_id") == 81);
    CHECK(r.num("sender.status") == IBV_WC_REM_INV_REQ_ERR);
    CHECK(r.unum("sender.wr_id") == 71);
    CHECK(r.num("event.type") == IBV_EVENT_QP_REQ_ERR);
    CHECK(r.num("event.qp") == 0);
    CHECK(r.num("damaged_past_buffer") == 0);
    check_qp_works(r, "qp1");
}

TEST_CASE("a receive with an invalid lkey gives IBV_WC_LOC_PROT_ERR at the receiver and IBV_WC_REM_OP_ERR at the sender",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 1);
            h.barrier("ready");
            rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 500)}, IBV_SEND_SIGNALED, 91));
            std::vector<ibv_wc> stray;
            const auto w = poll_qp(s, s.send_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("sender", w[0]);
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, two_qps());
            s.connect("e", 0);
            ibv_sge bad = s.sge(0, 1000);
            bad.lkey += 0x300;
            s.post_recv(s.qps[0], {bad}, 92);
            h.barrier("ready");
            std::vector<ibv_wc> stray;
            const auto w = poll_qp(s, s.recv_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("receiver", w[0]);
            h.barrier("error seen");
            verify_qp(h, s, 1, rec, "qp1");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("receiver.status") == IBV_WC_LOC_PROT_ERR);
    CHECK(r.num("sender.status") == IBV_WC_REM_OP_ERR);
    check_qp_works(r, "qp1");
}

TEST_CASE("ibv_post_send on a QP in RESET INIT or RTR fails with EINVAL and sets bad_wr", "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            ibv_qp* qp = s.qps[0];
            ibv_sge sge = s.sge(0, 64);
            ibv_send_wr second{};
            second.wr_id = 2;
            second.sg_list = &sge;
            second.num_sge = 1;
            second.opcode = IBV_WR_SEND;
            ibv_send_wr first = second;
            first.wr_id = 1;
            first.next = &second;
            auto attempt = [&](const std::string& state) {
                ibv_send_wr* bad = nullptr;
                rec.num(state + ".rc", ibv_post_send(qp, &first, &bad));
                rec.set(state + ".bad", bad == &first ? "first" : bad == &second ? "second" : "other");
            };
            attempt("reset");
            need_rc(qp_to_init(qp, IBV_ACCESS_LOCAL_WRITE), "to INIT");
            attempt("init");
            ConnOptions c;
            need_rc(qp_to_rtr(qp, 2, 0x48, 0, c), "to RTR");
            attempt("rtr");
            // Nothing was sent: no completion appears.
            rec.num("completions", s.poll(s.send_cq, 1, 20).size());
            s.close();
        },
        nullptr);
    HCASIM_REQUIRE_RUN(r);
    for (const char* st : {"reset", "init", "rtr"}) {
        INFO("QP in " << st);
        CHECK(r.num(std::string(st) + ".rc") == EINVAL);
        CHECK(r.get(std::string(st) + ".bad") == "first");
    }
    CHECK(r.num("completions") == 0);
}

TEST_CASE("ibv_post_recv on a QP in RESET fails with EINVAL and sets bad_wr but is accepted in INIT",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            ibv_qp* qp = s.qps[0];
            ibv_sge sge = s.sge(0, 64);
            ibv_recv_wr wr{};
            wr.wr_id = 5;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            ibv_recv_wr* bad = nullptr;
            rec.num("reset.rc", ibv_post_recv(qp, &wr, &bad));
            rec.set("reset.bad", bad == &wr ? "wr" : "other");
            need_rc(qp_to_init(qp, IBV_ACCESS_LOCAL_WRITE), "to INIT");
            bad = nullptr;
            rec.num("init.rc", ibv_post_recv(qp, &wr, &bad));
            rec.set("init.bad", bad == nullptr ? "null" : "set");
            s.close();
        },
        nullptr);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("reset.rc") == EINVAL);
    CHECK(r.get("reset.bad") == "wr");
    CHECK(r.num("init.rc") == 0);
}

TEST_CASE("ibv_post_send with more SGEs than max_send_sge fails with EINVAL and bad_wr names that request",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.max_sge = 2;
            Side s(h, o);
            s.connect("e", 1);
            ibv_qp_attr a{};
            ibv_qp_init_attr init{};
            ibv_query_qp(s.qps[0], &a, 0, &init);
            const int max = static_cast<int>(init.cap.max_send_sge);
            rec.num("max_send_sge", max);
            std::vector<ibv_sge> many;
            for (int i = 0; i <= max; ++i) many.push_back(s.sge(static_cast<std::size_t>(i) * 64, 8));
            ibv_sge one = s.sge(0, 8);
            ibv_send_wr second{};
            second.wr_id = 2;
            second.sg_list = many.data();
            second.num_sge = max + 1;
            second.opcode = IBV_WR_SEND;
            second.send_flags = IBV_SEND_SIGNALED;
            ibv_send_wr first = second;
            first.wr_id = 1;
            first.sg_list = &one;
            first.num_sge = 1;
            first.next = &second;
            h.barrier("ready");
            ibv_send_wr* bad = nullptr;
            rec.num("rc", ibv_post_send(s.qps[0], &first, &bad));
            rec.set("bad", bad == &first ? "first" : bad == &second ? "second" : "other");
            // The first request was valid and is carried out.
            const auto w = s.poll(s.send_cq, 2, 200);
            rec.num("completions", w.size());
            if (!w.empty()) rec.wc("wc", w[0]);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.max_sge = 2;
            Side s(h, o);
            s.connect("e", 0);
            s.post_recv(s.qps[0], {s.sge(0, 64)}, 1);
            s.post_recv(s.qps[0], {s.sge(0, 64)}, 2);
            h.barrier("ready");
            rec.num("received", s.poll(s.recv_cq, 2, 200).size());
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("max_send_sge") >= 2);
    CHECK(r.num("rc") == EINVAL);
    CHECK(r.get("bad") == "second");
    CHECK(r.num("completions") == 1);
    CHECK(r.num("wc.status") == IBV_WC_SUCCESS);
    CHECK(r.unum("wc.wr_id") == 1);
    CHECK(r.num("received") == 1);
}

TEST_CASE("work requests posted after a QP error complete in order with IBV_WC_WR_FLUSH_ERR", "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("e", 1);
            h.barrier("ready");
            // Error: write with a bad rkey.
            s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 100, s.remote_addr,
                        s.remote_rkey + 0x100);
            auto w = s.poll(s.send_cq, 1);
            if (!w.empty()) rec.wc("first", w[0]);
            // Five more, of every kind, and three receives: all flushed.
            int rc = 0;
            rc |= s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 101);
            rc |= s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 102, s.remote_addr,
                              s.remote_rkey);
            rc |= s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 103, s.remote_addr,
                              s.remote_rkey);
            rc |= s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 64)}, 0, 104);  // unsignaled: flushed all the same
            rc |= s.post_send(s.qps[0], IBV_WR_RDMA_WRITE_WITH_IMM, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 105,
                              s.remote_addr, s.remote_rkey, 1);
            for (std::uint64_t i = 0; i < 3; ++i) rc |= s.post_recv(s.qps[0], {s.sge(4096, 64)}, 200 + i);
            rec.num("post_rc", rc);
            w = s.poll(s.send_cq, 5);
            rec.num("send_flushed", w.size());
            for (std::size_t i = 0; i < w.size(); ++i) rec.wc("s" + std::to_string(i), w[i]);
            w = s.poll(s.recv_cq, 3);
            rec.num("recv_flushed", w.size());
            for (std::size_t i = 0; i < w.size(); ++i) rec.wc("r" + std::to_string(i), w[i]);
            // Nothing more.
            rec.num("extra", s.poll(s.send_cq, 1, 50).size() + s.poll(s.recv_cq, 1, 50).size());
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("e", 0);
            h.barrier("ready");
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("first.status") == IBV_WC_REM_ACCESS_ERR);
    CHECK(r.num("post_rc") == 0);
    REQUIRE(r.num("send_flushed") == 5);
    for (int i = 0; i < 5; ++i) {
        INFO("send flush " << i);
        CHECK(r.num("s" + std::to_string(i) + ".status") == IBV_WC_WR_FLUSH_ERR);
        CHECK(r.unum("s" + std::to_string(i) + ".wr_id") == 101u + static_cast<unsigned>(i));
    }
    REQUIRE(r.num("recv_flushed") == 3);
    for (int i = 0; i < 3; ++i) {
        INFO("receive flush " << i);
        CHECK(r.num("r" + std::to_string(i) + ".status") == IBV_WC_WR_FLUSH_ERR);
        CHECK(r.unum("r" + std::to_string(i) + ".wr_id") == 200u + static_cast<unsigned>(i));
    }
    CHECK(r.num("extra") == 0);
}

TEST_CASE("ibv_modify_qp without a required attribute or with an illegal transition fails with EINVAL",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            ibv_qp* qp = s.qps[0];
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_INIT;
            a.port_num = 1;
            a.pkey_index = 0;
            a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
            // RESET -> INIT without IBV_QP_ACCESS_FLAGS.
            rec.num("init_no_access", ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT));
            rec.num("init_no_port", ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS));
            // RESET -> RTS and RESET -> RTR directly.
            ibv_qp_attr rts{};
            rts.qp_state = IBV_QPS_RTS;
            rts.timeout = 14;
            rts.retry_cnt = 7;
            rts.rnr_retry = 7;
            rts.max_rd_atomic = 1;
            const int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
            rec.num("reset_to_rts", ibv_modify_qp(qp, &rts, rts_mask));
            ConnOptions c;
            rec.num("reset_to_rtr", qp_to_rtr(qp, 2, 0x48, 0, c));
            rec.num("state_after_bad", static_cast<int>(qp_state(qp)));
            // A legal RESET -> INIT, then INIT -> RTR without the path MTU.
            rec.num("init_ok", qp_to_init(qp, IBV_ACCESS_LOCAL_WRITE));
            ibv_qp_attr rtr{};
            rtr.qp_state = IBV_QPS_RTR;
            rtr.dest_qp_num = 0x48;
            rtr.ah_attr.dlid = 2;
            rtr.ah_attr.port_num = 1;
            rtr.min_rnr_timer = 1;
            rtr.max_dest_rd_atomic = 1;
            rec.num("rtr_no_mtu", ibv_modify_qp(qp, &rtr,
                                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
            rec.num("init_to_rts", ibv_modify_qp(qp, &rts, rts_mask));
            // An attribute the transition does not allow.
            rec.num("init_with_sq_psn", ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
            rec.num("state_still_init", static_cast<int>(qp_state(qp)));
            // Out-of-range values.
            // (0 and 7 are not MTUs but are values an ibv_mtu can hold.)
            for (int bad_mtu : {0, 7}) {
                ibv_qp_attr x = rtr;
                x.path_mtu = static_cast<ibv_mtu>(bad_mtu);
                rec.num("rtr_bad_mtu" + std::to_string(bad_mtu),
                        ibv_modify_qp(qp, &x,
                                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
            }
            rec.num("rtr_ok", qp_to_rtr(qp, 2, 0x48, 0, c));
            ibv_qp_attr bad_retry = rts;
            bad_retry.retry_cnt = 8;
            rec.num("rts_retry_8", ibv_modify_qp(qp, &bad_retry, rts_mask));
            rec.num("rts_ok", qp_to_rts(qp, 0, c));
            // Any state -> RESET and -> ERR are legal.
            ibv_qp_attr reset{};
            reset.qp_state = IBV_QPS_RESET;
            rec.num("to_reset", ibv_modify_qp(qp, &reset, IBV_QP_STATE));
            rec.num("state_reset", static_cast<int>(qp_state(qp)));
            s.close();
        },
        nullptr);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("init_no_access") == EINVAL);
    CHECK(r.num("init_no_port") == EINVAL);
    CHECK(r.num("reset_to_rts") == EINVAL);
    CHECK(r.num("reset_to_rtr") == EINVAL);
    CHECK(r.num("state_after_bad") == IBV_QPS_RESET);
    CHECK(r.num("init_ok") == 0);
    CHECK(r.num("rtr_no_mtu") == EINVAL);
    CHECK(r.num("init_to_rts") == EINVAL);
    CHECK(r.num("init_with_sq_psn") == EINVAL);
    CHECK(r.num("state_still_init") == IBV_QPS_INIT);
    CHECK(r.num("rtr_bad_mtu0") == EINVAL);
    CHECK(r.num("rtr_bad_mtu7") == EINVAL);
    CHECK(r.num("rtr_ok") == 0);
    CHECK(r.num("rts_retry_8") == EINVAL);
    CHECK(r.num("rts_ok") == 0);
    CHECK(r.num("to_reset") == 0);
    CHECK(r.num("state_reset") == IBV_QPS_RESET);
}

TEST_CASE("ibv_reg_mr with remote write but without local write returns NULL with errno EINVAL",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            auto try_reg = [&](const std::string& key, int access) {
                errno = 0;
                ibv_mr* mr = ibv_reg_mr(s.pd, s.buf, 4096, access);
                rec.num(key + ".null", mr == nullptr);
                rec.num(key + ".errno", errno);
                if (mr) ibv_dereg_mr(mr);
            };
            try_reg("rw_only", IBV_ACCESS_REMOTE_WRITE);
            try_reg("rw_rr", IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
            try_reg("atomic_only", IBV_ACCESS_REMOTE_ATOMIC);
            try_reg("rr_only", IBV_ACCESS_REMOTE_READ);  // fine: remote read needs no local write
            try_reg("lw_rw", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
            try_reg("unknown_bit", IBV_ACCESS_LOCAL_WRITE | (1 << 30));
            errno = 0;
            ibv_mr* zero = ibv_reg_mr(s.pd, s.buf, 0, IBV_ACCESS_LOCAL_WRITE);
            rec.num("zero.null", zero == nullptr);
            if (zero) ibv_dereg_mr(zero);
            s.close();
        },
        nullptr);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("rw_only.null") == 1);
    CHECK(r.num("rw_only.errno") == EINVAL);
    CHECK(r.num("rw_rr.null") == 1);
    CHECK(r.num("rw_rr.errno") == EINVAL);
    CHECK(r.num("atomic_only.null") == 1);
    CHECK(r.num("atomic_only.errno") == EINVAL);
    CHECK(r.num("rr_only.null") == 0);
    CHECK(r.num("lw_rw.null") == 0);
    CHECK(r.num("unknown_bit.null") == 1);
    CHECK(r.num("unknown_bit.errno") == EINVAL);
}

TEST_CASE("ibv_create_qp with max_send_wr above the device limit returns NULL with errno EINVAL",
          "[integration][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            ibv_device_attr dev{};
            rec.num("query", ibv_query_device(s.ctx, &dev));
            rec.num("max_qp_wr", dev.max_qp_wr);
            auto try_create = [&](const std::string& key, std::uint32_t send_wr, std::uint32_t recv_wr,
                                  std::uint32_t sge) {
                ibv_qp_init_attr init{};
                init.send_cq = s.send_cq;
                init.recv_cq = s.recv_cq;
                init.qp_type = IBV_QPT_RC;
                init.cap.max_send_wr = send_wr;
                init.cap.max_recv_wr = recv_wr;
                init.cap.max_send_sge = sge;
                init.cap.max_recv_sge = 1;
                errno = 0;
                ibv_qp* qp = ibv_create_qp(s.pd, &init);
                rec.num(key + ".null", qp == nullptr);
                rec.num(key + ".errno", errno);
                rec.num(key + ".send_wr", init.cap.max_send_wr);
                if (qp) ibv_destroy_qp(qp);
            };
            const auto max_wr = static_cast<std::uint32_t>(dev.max_qp_wr);
            try_create("send_over", max_wr + 1, 16, 1);
            try_create("recv_over", 16, max_wr + 1, 1);
            try_create("sge_over", 16, 16, static_cast<std::uint32_t>(dev.max_sge) + 1);
            try_create("at_limit", max_wr, 16, 1);
            s.close();
        },
        nullptr);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("query") == 0);
    CHECK(r.num("max_qp_wr") > 0);
    CHECK(r.num("send_over.null") == 1);
    CHECK(r.num("send_over.errno") == EINVAL);
    CHECK(r.num("recv_over.null") == 1);
    CHECK(r.num("recv_over.errno") == EINVAL);
    CHECK(r.num("sge_over.null") == 1);
    CHECK(r.num("sge_over.errno") == EINVAL);
    CHECK(r.num("at_limit.null") == 0);
    CHECK(r.num("at_limit.send_wr") >= r.num("max_qp_wr"));
}

TEST_CASE("a CQ overrun raises IBV_EVENT_CQ_ERR and the QP of the lost completion fails while a QP on another CQ keeps working",
          "[integration][errors][cq]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.cq_depth = 4;
            Side s(h, o);
            // A second QP with CQs of its own.
            ibv_cq* big_send = ibv_create_cq(s.ctx, 256, nullptr, nullptr, 0);
            ibv_cq* big_recv = ibv_create_cq(s.ctx, 256, nullptr, nullptr, 0);
            need(big_send && big_recv, "ibv_create_cq");
            s.qps.push_back(s.create_qp(big_send, big_recv));
            s.connect("e", 1);
            rec.num("small_cqe", s.send_cq->cqe);
            h.barrier("ready");
            // 16 signaled completions into a CQ of 4, nobody polling.
            int rc = 0;
            for (std::uint64_t i = 0; i < 16; ++i)
                rc |= s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(i * 64, 64)}, IBV_SEND_SIGNALED, i,
                                  s.remote_addr + i * 64, s.remote_rkey);
            rec.num("post_rc", rc);
            // Expect IBV_EVENT_CQ_ERR for the CQ and an error event for the QP.
            for (int e = 0; e < 2; ++e) {
                ibv_async_event ev{};
                ibv_get_async_event(s.ctx, &ev);
                if (ev.event_type == IBV_EVENT_CQ_ERR) {
                    rec.num("cq_err", 1);
                    rec.num("cq_err.is_small_cq", ev.element.cq == s.send_cq);
                } else {
                    rec.num("qp_event.type", static_cast<int>(ev.event_type));
                    rec.num("qp_event.is_qp0", ev.element.qp == s.qps[0]);
                }
                ibv_ack_async_event(&ev);
            }
            rec.num("qp0_state", static_cast<int>(qp_state(s.qps[0])));
            // What did fit is still there, in order.
            const auto w = s.poll(s.send_cq, 16, 100);
            rec.num("polled", w.size());
            int in_order = 1;
            for (std::size_t i = 0; i < w.size(); ++i) in_order &= w[i].wr_id == i && w[i].status == IBV_WC_SUCCESS;
            rec.num("polled_in_order", in_order);
            h.barrier("overrun seen");
            verify_qp(h, s, 1, rec, "other_cq", big_send, big_recv);
            h.barrier("verified");
            return;  // the small CQ is in error; resources are left to the process exit
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.qps = 2;
            Side s(h, o);
            s.connect("e", 0);
            h.barrier("ready");
            h.barrier("overrun seen");
            verify_qp(h, s, 1, rec, "other_cq");
            h.barrier("verified");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("small_cqe") >= 4);
    CHECK(r.num("small_cqe") < 16);
    CHECK(r.num("post_rc") == 0);
    CHECK(r.num("cq_err") == 1);
    CHECK(r.num("qp_event.type") == IBV_EVENT_QP_FATAL);
    CHECK(r.num("qp_event.is_qp0") == 1);
    CHECK(r.num("qp0_state") == IBV_QPS_ERR);
    CHECK(r.num("polled") >= 4);
    CHECK(r.num("polled") <= r.num("small_cqe") + 1);
    CHECK(r.num("polled_in_order") == 1);
    check_qp_works(r, "other_cq");
    // ibv_get_async_event documents element.cq for IBV_EVENT_CQ_ERR.
    CHECK(r.num("cq_err.is_small_cq") == 1);
}

TEST_CASE("a send with no receive posted and rnr_retry 0 completes with IBV_WC_RNR_RETRY_EXC_ERR",
          "[integration][errors][rnr]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.qps = 3;
            Side s(h, o);
            ConnOptions c;
            c.rnr_retry = 0;
            s.connect("e", 1, c);
            h.barrier("ready");
            const auto t0 = h.now();
            rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 100)}, IBV_SEND_SIGNALED, 1));
            std::vector<ibv_wc> stray;
            auto w = poll_qp(s, s.send_cq, s.qps[0]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("send", w[0]);
            rec.num("send_us", static_cast<double>(h.now() - t0) / 1e6);
            // RDMA WRITE WITH IMM consumes a receive too.
            rec.num("post_imm", s.post_send(s.qps[1], IBV_WR_RDMA_WRITE_WITH_IMM, {s.sge(0, 100)}, IBV_SEND_SIGNALED,
                                            2, s.remote_addr + 8192, s.remote_rkey, 7));
            w = poll_qp(s, s.send_cq, s.qps[1]->qp_num, 1, stray);
            if (!w.empty()) rec.wc("imm", w[0]);
            rec.num("stray", stray.size());
            h.barrier("error seen");
            verify_qp(h, s, 2, rec, "qp2");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.qps = 3;
            Side s(h, o);
            ConnOptions c;
            c.rnr_retry = 0;
            s.connect("e", 0, c);
            h.barrier("ready");
            h.barrier("error seen");
            // RNR NAKs leave the responder alone.
            rec.num("resp_state0", static_cast<int>(qp_state(s.qps[0])));
            verify_qp(h, s, 2, rec, "qp2");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("send.status") == IBV_WC_RNR_RETRY_EXC_ERR);
    CHECK(r.num("imm.status") == IBV_WC_RNR_RETRY_EXC_ERR);
    CHECK(r.num("stray") == 0);
    CHECK(r.real("send_us") < 1000);
    CHECK(r.num("resp_state0") == IBV_QPS_RTS);
    check_qp_works(r, "qp2");
}

TEST_CASE("a send retried after RNR NAKs delivers intact data once the receive is posted", "[integration][errors][rnr]") {
    // rnr_retry 7 retries forever; rnr_retry 3 is enough for a receive that
    // comes 15 us late with a 10 us RNR timer.
    for (int retry : {7, 3}) {
        const auto r = run_pair(
            {},
            [retry](Host& h, Record& rec) {
                Side s(h, {});
                ConnOptions c;
                c.rnr_retry = static_cast<std::uint8_t>(retry);
                s.connect("e", 1, c);
                fill_pattern(s.buf + 5, 70000, 77);
                h.barrier("ready");
                const auto t0 = h.now();
                h.put_value("t0", t0);
                rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(5, 70000)}, IBV_SEND_SIGNALED, 1));
                const auto w = s.poll(s.send_cq, 1);
                if (!w.empty()) rec.wc("send", w[0]);
                rec.num("send_us", static_cast<double>(h.now() - t0) / 1e6);
                h.barrier("done");
                s.close();
            },
            [retry](Host& h, Record& rec) {
                Side s(h, {});
                ConnOptions c;
                c.rnr_retry = static_cast<std::uint8_t>(retry);
                c.min_rnr_timer = 1;  // 10 us
                s.connect("e", 0, c);
                h.barrier("ready");
                h.sleep(us(retry == 7 ? 50 : 15));
                rec.num("recv", s.post_recv(s.qps[0], {s.sge(100, 70000)}, 2));
                const auto w = s.poll(s.recv_cq, 1);
                if (!w.empty()) rec.wc("recv", w[0]);
                const auto want = pattern(70000, 77);
                rec.bytes("data", s.buf + 100, want.data(), want.size());
                h.barrier("done");
                s.close();
            });
        INFO("rnr_retry " << retry);
        HCASIM_REQUIRE_RUN(r);
        CHECK(r.num("post") == 0);
        CHECK(r.num("recv") == 0);
        CHECK(r.num("send.status") == IBV_WC_SUCCESS);
        CHECK(r.num("recv.status") == IBV_WC_SUCCESS);
        CHECK(r.num("recv.byte_len") == 70000);
        CHECK(r.num("data.mismatch") == -1);
        // The sender waited for the late receive.
        CHECK(r.real("send_us") > (retry == 7 ? 50 : 15));
    }
}

TEST_CASE("rdma write to a QP the peer does not have completes with IBV_WC_RETRY_EXC_ERR", "[integration][errors]") {
    // No responder ever answers: the requester's transport timer expires
    // retry_cnt + 1 times (timeout 1: 8.192 us each), then the request
    // completes with IBV_WC_RETRY_EXC_ERR.
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            ConnOptions c;
            c.timeout = 1;
            c.retry_cnt = 1;
            const auto peer = h.get_value<SideInfo>("peer");
            need_rc(qp_to_init(s.qps[0], c.qp_access), "INIT");
            need_rc(qp_to_rtr(s.qps[0], peer.lid, peer.qpn[0] + 100, 0, c), "RTR");
            need_rc(qp_to_rts(s.qps[0], 0, c), "RTS");
            rec.num("post", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 1,
                                        peer.addr, peer.rkey));
            const auto w = s.poll(s.send_cq, 1, 5000);
            rec.num("completions", w.size());
            if (!w.empty()) rec.wc("wc", w[0]);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});
            h.put_value("peer", s.describe());
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    REQUIRE(r.num("completions") == 1);
    CHECK(r.num("wc.status") == IBV_WC_RETRY_EXC_ERR);
}

TEST_CASE("an rdma write that fails behind an rdma read still being answered leaves the read its data",
          "[integration][errors]") {
    // The responder answers a 64 KiB READ over many packets; the WRITE with
    // a bad rkey posted right behind it fails there while the answer is
    // still going out. The answer goes first, then the NAK.
    constexpr std::uint32_t kRead = 64 * 1024;
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("e", 1);
            h.barrier("ready");
            rec.num("post_read", s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(0, kRead)}, IBV_SEND_SIGNALED, 1,
                                             s.remote_addr, s.remote_rkey));
            rec.num("post_write", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(kRead, 100)}, IBV_SEND_SIGNALED, 2,
                                              s.remote_addr + kRead, s.remote_rkey ^ 0x7700));
            const auto w = s.poll(s.send_cq, 2);
            rec.num("completions", w.size());
            for (std::size_t i = 0; i < w.size(); ++i) rec.wc("c" + std::to_string(i), w[i]);
            std::vector<std::uint8_t> want(kRead);
            fill_pattern(want.data(), want.size(), 9);
            rec.bytes("read_data", s.buf, want.data(), want.size());
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("e", 0);
            fill_pattern(s.buf, kRead, 9);
            h.barrier("ready");
            record_async_event(s, rec, "event");
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post_read") == 0);
    CHECK(r.num("post_write") == 0);
    REQUIRE(r.num("completions") == 2);
    CHECK(r.unum("c0.wr_id") == 1);
    CHECK(r.num("c0.status") == IBV_WC_SUCCESS);
    CHECK(r.num("read_data.mismatch") == -1);
    CHECK(r.unum("c1.wr_id") == 2);
    CHECK(r.num("c1.status") == IBV_WC_REM_ACCESS_ERR);
    CHECK(r.num("event.type") == IBV_EVENT_QP_ACCESS_ERR);
}
