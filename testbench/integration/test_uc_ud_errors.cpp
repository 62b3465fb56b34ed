// UC and UD when something is wrong, and global routes on RC: Q_Keys (a
// wrong one, the high-order bit rule), datagrams larger than the MTU and
// receive buffers too small for one, UC messages with no receive WQE or a
// bad R_Key (dropped in silence, the QPs stay up), RC over a GRH path, and
// the argument checks of ibv_create_ah and of a global path's GID index.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>

#include "testbench/integration/harness.hpp"

namespace hcasim::test {
namespace {

constexpr std::uint32_t kGrh = 40;  // the GRH area at the start of a UD receive buffer

std::uint64_t counter(Host& h, const std::string& path) { return h.system().counter(path); }

SideOptions ud_side(int qps = 1) {
    SideOptions o;
    o.qp_type = IBV_QPT_UD;
    o.qps = qps;
    return o;
}

}  // namespace

// ---------------------------------------------------------------------------
// UD Q_Keys (IBA 10.2.5).

TEST_CASE("a ud datagram with a wrong q_key is dropped silently and the next one with the right q_key arrives",
          "[ud][qkey]") {
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, ud_side());
            s.connect("t", 1);
            fill_pattern(s.buf, 300, 1);
            fill_pattern(s.buf + 0x1000, 200, 2);
            h.barrier("ready");
            int rc = s.post_ud(s.qps[0], 0, IBV_WR_SEND, {s.sge(0, 300)}, IBV_SEND_SIGNALED, 1, 0, 0x22222222);
            rc |= s.post_ud(s.qps[0], 0, IBV_WR_SEND, {s.sge(0x1000, 200)}, IBV_SEND_SIGNALED, 2);
            rec.num("post_rc", rc);
            const auto wcs = s.poll(s.send_cq, 2);
            rec.num("nsend", wcs.size());
            for (std::size_t i = 0; i < wcs.size(); ++i) rec.wc("send" + std::to_string(i), wcs[i]);
            h.barrier("done");
            rec.num("sender_state", qp_state(s.qps[0]));
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, ud_side());
            s.connect("t", 0);
            int rc = s.post_recv(s.qps[0], {s.sge(0x10000, 4096)}, 10);
            rc |= s.post_recv(s.qps[0], {s.sge(0x20000, 4096)}, 11);
            rec.num("recv_rc", rc);
            h.barrier("ready");
            // Only the second datagram may come; wait long for a first.
            const auto wcs = s.poll(s.recv_cq, 2, 300);
            rec.num("nrecv", wcs.size());
            if (!wcs.empty()) rec.wc("recv", wcs[0]);
            rec.num("src_qp_ok", !wcs.empty() && wcs[0].src_qp == s.peer_info.qpn[0]);
            const auto want = pattern(200, 2);
            rec.bytes("data", s.buf + 0x10000 + kGrh, want.data(), want.size());
            rec.num("dropped_bad_qkey", counter(h, "node1.hca.responder.dropped_bad_qkey"));
            rec.num("receiver_state", qp_state(s.qps[0]));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post_rc") == 0);
    CHECK(r.num("recv_rc") == 0);
    // The sender cannot tell: both sends complete successfully.
    REQUIRE(r.num("nsend") == 2);
    CHECK(r.num("send0.status") == IBV_WC_SUCCESS);
    CHECK(r.num("send0.wr_id") == 1);
    CHECK(r.num("send1.status") == IBV_WC_SUCCESS);
    CHECK(r.num("send1.wr_id") == 2);
    // The receiver sees the second datagram alone, in its first receive.
    REQUIRE(r.num("nrecv") == 1);
    CHECK(r.num("recv.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv.wr_id") == 10);
    CHECK(r.num("recv.byte_len") == 200 + kGrh);
    CHECK(r.num("src_qp_ok") == 1);
    CHECK(r.num("data.mismatch") == -1);
    CHECK(r.num("dropped_bad_qkey") == 1);
    CHECK(r.num("sender_state") == IBV_QPS_RTS);
    CHECK(r.num("receiver_state") == IBV_QPS_RTS);
}

TEST_CASE("a ud send whose remote q_key has bit 31 set uses the sending qp's own q_key", "[ud][qkey]") {
    // Node 1's QP has Q_Key 0x11111111. Node 0's QP 0 has the same, QP 1
    // (changed in RTS) 0x33333333. In order:
    //   a: QP 0, remote_qkey 0x80000000 -> own key 0x11111111: delivered
    //   b: QP 1, remote_qkey 0x80000000 -> own key 0x33333333: dropped
    //   c: QP 1, remote_qkey 0x91111111 -> still its own key, low bits ignored: dropped
    //   d: QP 1, remote_qkey 0x11111111 -> as given: delivered
    constexpr std::uint32_t kLen = 256;
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, ud_side(2));
            s.connect("t", 1);
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_RTS;
            a.qkey = 0x33333333;
            rec.num("modify_rc", ibv_modify_qp(s.qps[1], &a, IBV_QP_STATE | IBV_QP_QKEY));
            ibv_qp_attr q{};
            ibv_qp_init_attr init{};
            ibv_query_qp(s.qps[1], &q, IBV_QP_QKEY, &init);
            rec.num("qp1_qkey", q.qkey);
            for (int k = 0; k < 4; ++k) fill_pattern(s.buf + static_cast<std::size_t>(k) * 0x1000, kLen, 40 + static_cast<std::uint64_t>(k));
            h.barrier("ready");
            const int qp_of[4] = {0, 1, 1, 1};
            const std::uint32_t qkey_of[4] = {0x80000000u, 0x80000000u, 0x91111111u, 0x11111111u};
            int rc = 0, ok = 0;
            for (int k = 0; k < 4; ++k) {
                rc |= s.post_ud(s.qps[static_cast<std::size_t>(qp_of[k])], 0, IBV_WR_SEND,
                                {s.sge(static_cast<std::size_t>(k) * 0x1000, kLen)}, IBV_SEND_SIGNALED,
                                static_cast<std::uint64_t>(k), 0, qkey_of[k]);
                const auto w = s.poll(s.send_cq, 1);
                ok += w.size() == 1 && w[0].status == IBV_WC_SUCCESS && w[0].wr_id == static_cast<std::uint64_t>(k);
            }
            rec.num("post_rc", rc);
            rec.num("send_ok", ok);
            h.barrier("done");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, ud_side());
            s.connect("t", 0);
            int rc = 0;
            for (int k = 0; k < 4; ++k)
                rc |= s.post_recv(s.qps[0], {s.sge(0x10000 + static_cast<std::size_t>(k) * 0x2000, 4096)}, 10 + static_cast<std::uint64_t>(k));
            rec.num("recv_rc", rc);
            h.barrier("ready");
            const auto wcs = s.poll(s.recv_cq, 4, 300);
            rec.num("nrecv", wcs.size());
            for (std::size_t i = 0; i < wcs.size() && i < 2; ++i) {
                const std::string k = "recv" + std::to_string(i);
                rec.wc(k, wcs[i]);
                rec.num(k + ".from_qp", wcs[i].src_qp == s.peer_info.qpn[0] ? 0 : wcs[i].src_qp == s.peer_info.qpn[1] ? 1 : -1);
            }
            const auto a = pattern(kLen, 40), d = pattern(kLen, 43);
            rec.bytes("a", s.buf + 0x10000 + kGrh, a.data(), kLen);
            rec.bytes("d", s.buf + 0x12000 + kGrh, d.data(), kLen);
            rec.num("dropped_bad_qkey", counter(h, "node1.hca.responder.dropped_bad_qkey"));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("modify_rc") == 0);
    CHECK(r.unum("qp1_qkey") == 0x33333333u);
    CHECK(r.num("post_rc") == 0);
    CHECK(r.num("recv_rc") == 0);
    CHECK(r.num("send_ok") == 4);
    REQUIRE(r.num("nrecv") == 2);
    CHECK(r.num("recv0.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv0.from_qp") == 0);
    CHECK(r.num("recv0.byte_len") == kLen + kGrh);
    CHECK(r.num("recv1.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv1.from_qp") == 1);
    CHECK(r.num("a.mismatch") == -1);
    CHECK(r.num("d.mismatch") == -1);
    CHECK(r.num("dropped_bad_qkey") == 2);
}

// ---------------------------------------------------------------------------
// UD lengths.

namespace {

// Node 0 sends datagrams of 2049 B (over the 2048 B MTU) and 2048 B; node 1
// sends it one in between. Results: the oversized send's completion, the
// QP's state after it, the exact-MTU datagram's arrival.
RunResult oversized_datagram_run() {
    constexpr std::uint32_t kMtu = 2048;
    return run_pair(
        {{"port.max_mtu", std::to_string(kMtu)}},
        [&](Host& h, Record& rec) {
            Side s(h, ud_side());
            s.connect("t", 1);
            fill_pattern(s.buf, kMtu + 1, 5);
            fill_pattern(s.buf + 0x2000, kMtu, 6);
            rec.num("recv_rc0", s.post_recv(s.qps[0], {s.sge(0x40000, 4096)}, 20));
            h.barrier("ready");
            rec.num("post_big", s.post_ud(s.qps[0], 0, IBV_WR_SEND, {s.sge(0, kMtu + 1)}, IBV_SEND_SIGNALED, 1));
            for (const auto& w : s.poll(s.send_cq, 1)) rec.wc("big", w);
            const ibv_qp_state st = qp_state(s.qps[0]);
            rec.num("state_after", st);
            h.barrier("errored");
            // The receive queue is not affected by a send error.
            for (const auto& w : s.poll(s.recv_cq, 1)) rec.wc("in", w);
            const auto in = pattern(64, 7);
            rec.bytes("in_data", s.buf + 0x40000 + kGrh, in.data(), 64);
            // IBA 10.3.1: a UD send error leaves the QP in SQE; RTS again
            // takes it back. (A QP left in RTS needs nothing.)
            if (st == IBV_QPS_SQE) {
                ibv_qp_attr a{};
                a.qp_state = IBV_QPS_RTS;
                rec.num("recover_rc", ibv_modify_qp(s.qps[0], &a, IBV_QP_STATE));
            }
            rec.num("post_mtu", s.post_ud(s.qps[0], 0, IBV_WR_SEND, {s.sge(0x2000, kMtu)}, IBV_SEND_SIGNALED, 2));
            for (const auto& w : s.poll(s.send_cq, 1)) rec.wc("mtu", w);
            rec.num("state_end", qp_state(s.qps[0]));
            h.barrier("done");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, ud_side());
            s.connect("t", 0);
            rec.num("recv_rc1", s.post_recv(s.qps[0], {s.sge(0x10000, 4096)}, 30) |
                                    s.post_recv(s.qps[0], {s.sge(0x20000, 4096)}, 31));
            fill_pattern(s.buf + 0x30000, 64, 7);
            h.barrier("ready");
            h.barrier("errored");
            rec.num("rx_after_big", counter(h, "node1.hca.rx_pipeline.packets"));
            rec.num("post_in", s.post_ud(s.qps[0], 0, IBV_WR_SEND, {s.sge(0x30000, 64)}, IBV_SEND_SIGNALED, 3));
            s.poll(s.send_cq, 1);
            const auto wcs = s.poll(s.recv_cq, 2, 300);
            rec.num("nrecv", wcs.size());
            if (!wcs.empty()) rec.wc("recv", wcs[0]);
            const auto want = pattern(kMtu, 6);
            rec.bytes("data", s.buf + 0x10000 + kGrh, want.data(), kMtu);
            h.barrier("done");
            s.close();
        });
}

}  // namespace

TEST_CASE("a ud send larger than the port mtu completes with IBV_WC_LOC_LEN_ERR and sends nothing", "[ud][length]") {
    const auto r = oversized_datagram_run();
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post_big") == 0);
    CHECK(r.num("big.status") == IBV_WC_LOC_LEN_ERR);
    CHECK(r.num("big.wr_id") == 1);
    // Nothing of it left: the peer had received no packet when it failed.
    CHECK(r.num("rx_after_big") == 0);
}

TEST_CASE("a ud qp whose send failed with IBV_WC_LOC_LEN_ERR keeps receiving and sends again",
          "[integration][ud][length]") {
    // Per IBA 10.3.1 a local send error on UD moves the QP to SQE, not to
    // ERR: the receive queue works on and RTS resumes sending (a QP that
    // simply stays in RTS is accepted too).
    const auto r = oversized_datagram_run();
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("big.status") == IBV_WC_LOC_LEN_ERR);
    INFO("state after the error " << r.get("state_after") << " (SQE " << IBV_QPS_SQE << ", ERR " << IBV_QPS_ERR << ")");
    CHECK(r.num("state_after") != IBV_QPS_ERR);
    CHECK(r.num("in.status") == IBV_WC_SUCCESS);
    CHECK(r.num("in_data.mismatch") == -1);
    if (r.has("recover_rc")) CHECK(r.num("recover_rc") == 0);
    CHECK(r.num("post_mtu") == 0);
    CHECK(r.num("mtu.status") == IBV_WC_SUCCESS);
    CHECK(r.num("state_end") == IBV_QPS_RTS);
    REQUIRE(r.num("nrecv") == 1);
    CHECK(r.num("recv.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv.wr_id") == 30);
    CHECK(r.num("recv.byte_len") == 2048 + kGrh);
    CHECK(r.num("data.mismatch") == -1);
}

TEST_CASE("a ud receive too small for the grh area and payload completes with IBV_WC_LOC_LEN_ERR and the next "
          "datagram is received",
          "[ud][length]") {
    // Receives: 30 B (not even the GRH area) for an empty datagram, 139 B
    // (one short of 40 + 100) for 100 B, then 4096 B for 100 B. Guard bytes
    // follow the short buffers.
    constexpr std::uint32_t kLen = 100;
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, ud_side());
            s.connect("t", 1);
            fill_pattern(s.buf, kLen, 8);
            fill_pattern(s.buf + 0x1000, kLen, 9);
            h.barrier("ready");
            int rc = s.post_ud(s.qps[0], 0, IBV_WR_SEND, {}, IBV_SEND_SIGNALED, 1);
            rc |= s.post_ud(s.qps[0], 0, IBV_WR_SEND, {s.sge(0, kLen)}, IBV_SEND_SIGNALED, 2);
            rc |= s.post_ud(s.qps[0], 0, IBV_WR_SEND_WITH_IMM, {s.sge(0x1000, kLen)}, IBV_SEND_SIGNALED, 3, 0x0a0b0c0d);
            rec.num("post_rc", rc);
            int ok = 0;
            for (const auto& w : s.poll(s.send_cq, 3)) ok += w.status == IBV_WC_SUCCESS;
            rec.num("send_ok", ok);
            h.barrier("done");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, ud_side());
            s.connect("t", 0);
            std::memset(s.buf + 0x10000, 0x5a, 0x4000);
            int rc = s.post_recv(s.qps[0], {s.sge(0x10000, 30)}, 10);
            rc |= s.post_recv(s.qps[0], {s.sge(0x11000, kGrh + kLen - 1)}, 11);
            rc |= s.post_recv(s.qps[0], {s.sge(0x20000, 4096)}, 12);
            rec.num("recv_rc", rc);
            h.barrier("ready");
            const auto wcs = s.poll(s.recv_cq, 4, 300);
            rec.num("nrecv", wcs.size());
            for (std::size_t i = 0; i < wcs.size(); ++i) rec.wc("recv" + std::to_string(i), wcs[i]);
            int guard = 0;
            for (std::size_t k = 30; k < 0x1000; ++k) guard += s.buf[0x10000 + k] != 0x5a;
            for (std::size_t k = kGrh + kLen - 1; k < 0x3000; ++k) guard += s.buf[0x11000 + k] != 0x5a;
            rec.num("guard", guard);
            const auto want = pattern(kLen, 9);
            rec.bytes("data", s.buf + 0x20000 + kGrh, want.data(), kLen);
            rec.num("state", qp_state(s.qps[0]));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post_rc") == 0);
    CHECK(r.num("recv_rc") == 0);
    CHECK(r.num("send_ok") == 3);
    REQUIRE(r.num("nrecv") == 3);
    CHECK(r.num("recv0.status") == IBV_WC_LOC_LEN_ERR);
    CHECK(r.num("recv0.wr_id") == 10);
    CHECK(r.num("recv1.status") == IBV_WC_LOC_LEN_ERR);
    CHECK(r.num("recv1.wr_id") == 11);
    CHECK(r.num("recv2.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv2.wr_id") == 12);
    CHECK(r.num("recv2.byte_len") == kGrh + kLen);
    CHECK(r.unum("recv2.imm") == 0x0a0b0c0du);
    CHECK(r.num("data.mismatch") == -1);
    CHECK(r.num("guard") == 0);
    CHECK(r.num("state") == IBV_QPS_RTS);
}

// ---------------------------------------------------------------------------
// UC drops.

TEST_CASE("a uc send with no receive wqe posted is dropped without rnr and the next one arrives intact", "[uc]") {
    // 5000 B at a 1024 B MTU: five packets, the first finds no receive WQE.
    constexpr std::uint32_t kLen = 5000;
    SideOptions o;
    o.qp_type = IBV_QPT_UC;
    ConnOptions c;
    c.mtu = IBV_MTU_1024;
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, o);
            s.connect("t", 1, c);
            fill_pattern(s.buf, kLen, 11);
            fill_pattern(s.buf + 0x4000, kLen, 12);
            h.barrier("ready");
            int rc = s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, kLen)}, IBV_SEND_SIGNALED, 1);
            for (const auto& w : s.poll(s.send_cq, 1)) rec.wc("first", w);
            h.barrier("first sent");
            h.barrier("posted");
            rc |= s.post_send(s.qps[0], IBV_WR_SEND_WITH_IMM, {s.sge(0x4000, kLen)}, IBV_SEND_SIGNALED, 2, 0, 0, 0x11223344);
            for (const auto& w : s.poll(s.send_cq, 1)) rec.wc("second", w);
            rec.num("post_rc", rc);
            h.barrier("done");
            rec.num("rnr_naks_received", counter(h, "node0.hca.completer.rnr_naks_received"));
            rec.num("sender_state", qp_state(s.qps[0]));
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, o);
            s.connect("t", 0, c);
            h.barrier("ready");
            h.barrier("first sent");
            h.sleep(us(20));  // the first message's packets have all arrived by now
            rec.num("dropped_early", counter(h, "node1.hca.responder.dropped_no_recv_wqe"));
            rec.num("recv_rc", s.post_recv(s.qps[0], {s.sge(0x10000, 8192)}, 10));
            h.barrier("posted");
            const auto wcs = s.poll(s.recv_cq, 2, 300);
            rec.num("nrecv", wcs.size());
            if (!wcs.empty()) rec.wc("recv", wcs[0]);
            const auto want = pattern(kLen, 12);
            rec.bytes("data", s.buf + 0x10000, want.data(), kLen);
            rec.num("dropped_no_recv_wqe", counter(h, "node1.hca.responder.dropped_no_recv_wqe"));
            rec.num("rnr_naks", counter(h, "node1.hca.responder.rnr_naks"));
            rec.num("receiver_state", qp_state(s.qps[0]));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post_rc") == 0);
    CHECK(r.num("recv_rc") == 0);
    CHECK(r.num("first.status") == IBV_WC_SUCCESS);
    CHECK(r.num("first.wr_id") == 1);
    CHECK(r.num("second.status") == IBV_WC_SUCCESS);
    CHECK(r.num("second.wr_id") == 2);
    CHECK(r.num("dropped_early") == 1);
    CHECK(r.num("dropped_no_recv_wqe") == 1);
    CHECK(r.num("rnr_naks") == 0);
    CHECK(r.num("rnr_naks_received") == 0);
    REQUIRE(r.num("nrecv") == 1);
    CHECK(r.num("recv.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv.wr_id") == 10);
    CHECK(r.num("recv.byte_len") == kLen);
    CHECK(r.unum("recv.imm") == 0x11223344u);
    CHECK(r.num("data.mismatch") == -1);
    CHECK(r.num("sender_state") == IBV_QPS_RTS);
    CHECK(r.num("receiver_state") == IBV_QPS_RTS);
}

TEST_CASE("a uc rdma write with a bad rkey is dropped silently, the sender completes it successfully and both qps "
          "stay in rts",
          "[uc]") {
    // A 5000 B WRITE (five packets at 1 KiB) and a 500 B WRITE_WITH_IMM with
    // a bad rkey, then a good 5000 B WRITE and a 100 B SEND. The receive
    // posted before is the SEND's: the failed WRITE_WITH_IMM did not use it.
    constexpr std::uint32_t kLen = 5000;
    SideOptions o;
    o.qp_type = IBV_QPT_UC;
    ConnOptions c;
    c.mtu = IBV_MTU_1024;
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, o);
            s.connect("t", 1, c);
            fill_pattern(s.buf, kLen, 21);
            fill_pattern(s.buf + 0x2000, 500, 22);
            fill_pattern(s.buf + 0x4000, kLen, 23);
            fill_pattern(s.buf + 0x6000, 100, 24);
            h.barrier("ready");
            const std::uint32_t bad = s.remote_rkey ^ 0xff00u;
            int rc = s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, kLen)}, IBV_SEND_SIGNALED, 1,
                                 s.remote_addr + 0x20000, bad);
            rc |= s.post_send(s.qps[0], IBV_WR_RDMA_WRITE_WITH_IMM, {s.sge(0x2000, 500)}, IBV_SEND_SIGNALED, 2,
                              s.remote_addr + 0x28000, bad, 0x55);
            rc |= s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0x4000, kLen)}, IBV_SEND_SIGNALED, 3,
                              s.remote_addr + 0x30000, s.remote_rkey);
            rc |= s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0x6000, 100)}, IBV_SEND_SIGNALED, 4);
            rec.num("post_rc", rc);
            const auto wcs = s.poll(s.send_cq, 4);
            rec.num("nsend", wcs.size());
            for (std::size_t i = 0; i < wcs.size(); ++i) rec.wc("send" + std::to_string(i), wcs[i]);
            h.barrier("done");
            rec.num("sender_state", qp_state(s.qps[0]));
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, o);
            s.connect("t", 0, c);
            rec.num("recv_rc", s.post_recv(s.qps[0], {s.sge(0x40000, 4096)}, 10));
            h.barrier("ready");
            const auto wcs = s.poll(s.recv_cq, 2, 300);
            rec.num("nrecv", wcs.size());
            if (!wcs.empty()) rec.wc("recv", wcs[0]);
            int touched = 0;
            for (std::size_t k = 0x20000; k < 0x30000; ++k) touched += s.buf[k] != 0;
            rec.num("touched", touched);
            const auto w = pattern(kLen, 23), sd = pattern(100, 24);
            rec.bytes("write", s.buf + 0x30000, w.data(), kLen);
            rec.bytes("send", s.buf + 0x40000, sd.data(), 100);
            rec.num("errors", counter(h, "node1.hca.responder.responder_errors"));
            rec.num("receiver_state", qp_state(s.qps[0]));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post_rc") == 0);
    CHECK(r.num("recv_rc") == 0);
    REQUIRE(r.num("nsend") == 4);
    for (int i = 0; i < 4; ++i) {
        INFO("send completion " << i);
        CHECK(r.num("send" + std::to_string(i) + ".status") == IBV_WC_SUCCESS);
        CHECK(r.num("send" + std::to_string(i) + ".wr_id") == i + 1);
    }
    REQUIRE(r.num("nrecv") == 1);
    CHECK(r.num("recv.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv.wr_id") == 10);
    CHECK(r.num("recv.opcode") == IBV_WC_RECV);
    CHECK(r.num("recv.byte_len") == 100);
    CHECK(r.num("touched") == 0);
    CHECK(r.num("write.mismatch") == -1);
    CHECK(r.num("send.mismatch") == -1);
    CHECK(r.num("errors") == 2);
    CHECK(r.num("sender_state") == IBV_QPS_RTS);
    CHECK(r.num("receiver_state") == IBV_QPS_RTS);
}

TEST_CASE("a uc send longer than its receive buffer completes the receive with IBV_WC_LOC_LEN_ERR and the next "
          "message arrives intact",
          "[uc][length]") {
    // 5000 B at a 1024 B MTU into 3000 B: the third packet overflows, the
    // rest of the message is dropped; the next 5000 B SEND has room.
    constexpr std::uint32_t kLen = 5000;
    SideOptions o;
    o.qp_type = IBV_QPT_UC;
    ConnOptions c;
    c.mtu = IBV_MTU_1024;
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, o);
            s.connect("t", 1, c);
            fill_pattern(s.buf, kLen, 31);
            fill_pattern(s.buf + 0x2000, kLen, 32);
            h.barrier("ready");
            int rc = s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, kLen)}, IBV_SEND_SIGNALED, 1);
            rc |= s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0x2000, kLen)}, IBV_SEND_SIGNALED, 2);
            rec.num("post_rc", rc);
            int ok = 0;
            for (const auto& w : s.poll(s.send_cq, 2)) ok += w.status == IBV_WC_SUCCESS;
            rec.num("send_ok", ok);
            h.barrier("done");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, o);
            s.connect("t", 0, c);
            std::memset(s.buf + 0x10000, 0x5a, 0x2000);
            int rc = s.post_recv(s.qps[0], {s.sge(0x10000, 3000)}, 10);
            rc |= s.post_recv(s.qps[0], {s.sge(0x20000, 8192)}, 11);
            rc |= s.post_recv(s.qps[0], {s.sge(0x30000, 8192)}, 12);
            rec.num("recv_rc", rc);
            h.barrier("ready");
            const auto wcs = s.poll(s.recv_cq, 3, 300);
            rec.num("nrecv", wcs.size());
            for (std::size_t i = 0; i < wcs.size(); ++i) rec.wc("recv" + std::to_string(i), wcs[i]);
            int guard = 0;
            for (std::size_t k = 3000; k < 0x2000; ++k) guard += s.buf[0x10000 + k] != 0x5a;
            rec.num("guard", guard);
            const auto want = pattern(kLen, 32);
            rec.bytes("data", s.buf + 0x20000, want.data(), kLen);
            rec.num("state", qp_state(s.qps[0]));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post_rc") == 0);
    CHECK(r.num("recv_rc") == 0);
    CHECK(r.num("send_ok") == 2);
    REQUIRE(r.num("nrecv") == 2);
    CHECK(r.num("recv0.status") == IBV_WC_LOC_LEN_ERR);
    CHECK(r.num("recv0.wr_id") == 10);
    CHECK(r.num("recv1.status") == IBV_WC_SUCCESS);
    CHECK(r.num("recv1.wr_id") == 11);
    CHECK(r.num("recv1.byte_len") == kLen);
    CHECK(r.num("data.mismatch") == -1);
    CHECK(r.num("guard") == 0);
    CHECK(r.num("state") == IBV_QPS_RTS);
}

// ---------------------------------------------------------------------------
// Global routes.

namespace {

// verify_qp (SEND, WRITE, READ, bytes checked) on an RC QP pair; with a GRH
// through sgid_index when global. Also the wire bytes and packets of node 0.
RunResult rc_path_run(bool global, std::uint8_t sgid_index) {
    ConnOptions c;
    c.global = global;
    c.sgid_index = sgid_index;
    const Program prog = [c, sgid_index](Host& h, Record& rec) {
        Side s(h, SideOptions{});
        ConnOptions mine = c;
        mine.psn += 0x10000 * static_cast<std::uint32_t>(h.index());
        s.connect("t", 1 - h.index(), mine);
        ibv_qp_attr a{};
        ibv_qp_init_attr init{};
        need_rc(ibv_query_qp(s.qps[0], &a, IBV_QP_AV, &init), "ibv_query_qp");
        const std::string n = std::to_string(h.index());
        rec.num("is_global" + n, a.ah_attr.is_global);
        rec.num("sgid_index" + n, a.ah_attr.grh.sgid_index);
        rec.num("dgid_ok" + n, std::memcmp(a.ah_attr.grh.dgid.raw, s.peer_info.gid[sgid_index].raw, 16) == 0);
        h.barrier("ready");
        verify_qp(h, s, 0, rec, "g");
        h.barrier("done");
        rec.num("tx_bytes" + n, counter(h, "node" + n + ".hca.tx_pipeline.bytes"));
        rec.num("tx_packets" + n, counter(h, "node" + n + ".hca.tx_pipeline.packets"));
        rec.num("wrong_dgid" + n, counter(h, "node" + n + ".hca.rx_pipeline.dropped_wrong_dgid"));
        s.close();
    };
    return run_pair({}, prog, prog);
}

}  // namespace

TEST_CASE("rc send, write and read work over a global path through gid index 0 and 1", "[rc][grh]") {
    const auto local = rc_path_run(false, 0);
    HCASIM_REQUIRE_RUN(local);
    check_qp_works(local, "g");
    for (std::uint8_t index : {0, 1}) {
        INFO("sgid_index " << +index);
        const auto r = rc_path_run(true, index);
        HCASIM_REQUIRE_RUN(r);
        check_qp_works(r, "g");
        for (const char* n : {"0", "1"}) {
            INFO("node " << n);
            CHECK(r.num(std::string("is_global") + n) == 1);
            CHECK(r.num(std::string("sgid_index") + n) == index);
            CHECK(r.num(std::string("dgid_ok") + n) == 1);
            CHECK(r.num(std::string("wrong_dgid") + n) == 0);
            // Every packet carries the 40-byte GRH, nothing else changes.
            const std::string b = std::string("tx_bytes") + n, p = std::string("tx_packets") + n;
            CHECK(r.num(p) == local.num(p));
            CHECK(r.num(b) - local.num(b) == 40 * r.num(p));
        }
    }
}

TEST_CASE("a global path whose sgid_index is past the gid table is refused with EINVAL", "[rc][uc][grh][verbs]") {
    for (ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_UC}) {
        INFO((type == IBV_QPT_RC ? "RC" : "UC"));
        SideOptions o;
        o.qp_type = type;
        const auto r = run_programs(
            {},
            {[&](Host& h, Record& rec) {
                 Side s(h, o);
                 ibv_port_attr port{};
                 need_rc(ibv_query_port(s.ctx, 1, &port), "ibv_query_port");
                 rec.num("gid_tbl_len", port.gid_tbl_len);
                 ibv_gid gid;
                 need_rc(ibv_query_gid(s.ctx, 1, 0, &gid), "ibv_query_gid");
                 need_rc(qp_to_init(s.qps[0], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), "INIT");
                 ibv_qp_attr a{};
                 a.qp_state = IBV_QPS_RTR;
                 a.path_mtu = IBV_MTU_1024;
                 a.dest_qp_num = s.qps[0]->qp_num;  // any: the QP never sends
                 a.rq_psn = 0;
                 a.max_dest_rd_atomic = 1;
                 a.min_rnr_timer = 1;
                 a.ah_attr.dlid = port.lid;
                 a.ah_attr.port_num = 1;
                 a.ah_attr.is_global = 1;
                 a.ah_attr.grh.dgid = gid;
                 a.ah_attr.grh.hop_limit = 1;
                 a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(port.gid_tbl_len);
                 const int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  (type == IBV_QPT_RC ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
                 rec.num("past_rc", ibv_modify_qp(s.qps[0], &a, mask));
                 rec.num("state_after", qp_state(s.qps[0]));
                 a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(port.gid_tbl_len - 1);
                 rec.num("last_rc", ibv_modify_qp(s.qps[0], &a, mask));
                 rec.num("state_end", qp_state(s.qps[0]));
                 s.close();
             },
             nullptr});
        HCASIM_REQUIRE_RUN(r);
        CHECK(r.num("gid_tbl_len") == 2);
        CHECK(r.num("past_rc") == EINVAL);
        CHECK(r.num("state_after") == IBV_QPS_INIT);
        CHECK(r.num("last_rc") == 0);
        CHECK(r.num("state_end") == IBV_QPS_RTR);
    }
}

TEST_CASE("ibv_create_ah with dlid 0, port 2 or an sgid_index past the gid table returns null with errno EINVAL",
          "[ud][verbs]") {
    const auto r = run_programs(
        {},
        {[&](Host& h, Record& rec) {
             Side s(h, ud_side());
             ibv_port_attr port{};
             need_rc(ibv_query_port(s.ctx, 1, &port), "ibv_query_port");
             ibv_gid gid;
             need_rc(ibv_query_gid(s.ctx, 1, 0, &gid), "ibv_query_gid");
             auto good = [&]() {
                 ibv_ah_attr a{};
                 a.dlid = port.lid;
                 a.port_num = 1;
                 a.is_global = 1;
                 a.grh.dgid = gid;
                 a.grh.sgid_index = static_cast<std::uint8_t>(port.gid_tbl_len - 1);
                 a.grh.hop_limit = 1;
                 return a;
             };
             auto attempt = [&](const std::string& key, ibv_ah_attr a) {
                 errno = 0;
                 ibv_ah* ah = ibv_create_ah(s.pd, &a);
                 rec.num(key + ".null", ah == nullptr);
                 rec.num(key + ".errno", errno);
                 if (ah) need_rc(ibv_destroy_ah(ah), "ibv_destroy_ah");
             };
             attempt("good", good());
             ibv_ah_attr a = good();
             a.dlid = 0;
             attempt("dlid0", a);
             a = good();
             a.port_num = 2;
             attempt("port2", a);
             a = good();
             a.grh.sgid_index = static_cast<std::uint8_t>(port.gid_tbl_len);
             attempt("sgid_past", a);
             a = good();
             a.grh.sgid_index = 255;
             attempt("sgid_255", a);
             // Without a GRH the SGID index is not looked at.
             a.is_global = 0;
             attempt("local", a);
             s.close();
         },
         nullptr});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("good.null") == 0);
    CHECK(r.num("local.null") == 0);
    for (const char* k : {"dlid0", "port2", "sgid_past", "sgid_255"}) {
        INFO(k);
        CHECK(r.num(std::string(k) + ".null") == 1);
        CHECK(r.num(std::string(k) + ".errno") == EINVAL);
    }
}

}  // namespace hcasim::test

namespace hcasim::test {

// ---------------------------------------------------------------------------
// QP1 is a UD QP like the others: the firmware's CM agent owns it.

TEST_CASE("a datagram to qp1 goes through the ud path: a wrong q_key is dropped, a malformed mad reaches the cm agent "
          "and is refused there",
          "[ud][qp1]") {
    const auto res = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, ud_side());
            // A Q_Key with bit 31 set is a controlled one: a send gets it only
            // as its QP's own (IBA 10.2.5), which this QP is given.
            ConnOptions c;
            c.qkey = 0x80010000;
            s.connect("qp1", 1, c);
            std::memset(s.buf, 0xee, 256);  // no CM MAD: the wrong class
            ibv_send_wr wr{};
            ibv_sge sg = s.sge(0, 256);
            wr.sg_list = &sg;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_SEND;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.wr.ud.ah = s.ah;
            wr.wr.ud.remote_qpn = 1;
            ibv_send_wr* bad = nullptr;
            wr.wr.ud.remote_qkey = 0x1234;  // not the GSI Q_Key
            need_rc(ibv_post_send(s.qps[0], &wr, &bad), "ibv_post_send");
            s.poll_ok(s.send_cq, 1, "send with the wrong q_key");
            wr.wr.ud.remote_qkey = 0x80010000;
            need_rc(ibv_post_send(s.qps[0], &wr, &bad), "ibv_post_send");
            s.poll_ok(s.send_cq, 1, "send with the gsi q_key");
            h.sleep(50 * sim::kPsPerUs);
            rec.num("bad_qkey", static_cast<long long>(counter(h, "node1.hca.responder.dropped_bad_qkey")));
            rec.num("malformed", static_cast<long long>(counter(h, "node1.cm_agent.dropped_malformed")));
            h.barrier("end");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, ud_side());
            s.connect("qp1", 0);
            h.barrier("end");
            rec.num("done", 1);
            s.close();
        });
    INFO(res.error);
    REQUIRE(res.ok);
    CHECK(res.num("bad_qkey") == 1);
    CHECK(res.num("malformed") == 1);
}

TEST_CASE("a consumer's work request under the reserved l_key fails with a local protection error", "[ud][qp1]") {
    const auto res = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            Side s(h, o);
            s.connect("rsvd", 1);
            ibv_send_wr wr{};
            ibv_sge sg{reinterpret_cast<std::uintptr_t>(s.buf), 64, 0xff};
            wr.sg_list = &sg;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.wr.rdma.remote_addr = s.remote_addr;
            wr.wr.rdma.rkey = s.remote_rkey;
            ibv_send_wr* bad = nullptr;
            need_rc(ibv_post_send(s.qps[0], &wr, &bad), "ibv_post_send");
            const auto w = s.poll(s.send_cq, 1);
            rec.num("status", w.empty() ? -1 : static_cast<int>(w[0].status));
            h.barrier("end");
        },
        [](Host& h, Record&) {
            SideOptions o;
            Side s(h, o);
            s.connect("rsvd", 0);
            h.barrier("end");
        });
    INFO(res.error);
    REQUIRE(res.ok);
    CHECK(res.num("status") == IBV_WC_LOC_PROT_ERR);
}

}  // namespace hcasim::test
