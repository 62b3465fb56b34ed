// RC data transfers between two simulated nodes through the real verbs API:
// SEND/RECV, RDMA WRITE, RDMA WRITE WITH IMM and RDMA READ at sizes around
// the page and MTU boundaries, at unaligned offsets, with several SGEs, at a
// smaller path MTU, and inline. Every byte is compared against a
// deterministic pseudo-random pattern and the bytes around the sink must
// stay untouched.
#include <catch2/catch.hpp>

#include "testbench/integration/harness.hpp"

using namespace hcasim::test;

namespace {

const std::uint32_t kSizes[] = {1, 2, 255, 4095, 4096, 4097, 65536 + 3, 1 << 20};

// Offsets that put the first byte 37 bytes before a page end on the source
// and on the last byte of a page on the sink: every size >= 2 crosses a
// page boundary on the sink, and every size >= 38 on the source.
constexpr std::size_t kSrcOff = 3 * 4096 - 37;
constexpr std::size_t kDstOff = 5 * 4096 - 1;

std::vector<XCase> sweep(XOp op) {
    std::vector<XCase> cases;
    for (std::uint32_t size : kSizes) {
        cases.push_back({op, size, 0, 0});
        cases.push_back({op, size, kSrcOff, kDstOff});
    }
    // Scatter/gather: three local SGEs on the requester, two on the
    // receiver for SEND; unaligned.
    for (std::uint32_t size : {255u, 4097u, 65539u, 1u << 20}) {
        XCase c{op, size, kSrcOff + 8, kDstOff + 3};
        if (op == XOp::Read) {
            c.dst_sges = 3;  // the READ's local SGEs scatter the response
        } else {
            c.src_sges = 3;
            if (op == XOp::Send) c.dst_sges = 2;
        }
        cases.push_back(c);
    }
    return cases;
}

}  // namespace

TEST_CASE("rc send delivers every byte for sizes from 1 B to 1 MiB at aligned and unaligned offsets",
          "[integration][data]") {
    const auto cases = sweep(XOp::Send);
    check_cases(run_cases(cases), cases);
}

TEST_CASE("rdma write places every byte for sizes from 1 B to 1 MiB at aligned and unaligned offsets",
          "[integration][data]") {
    const auto cases = sweep(XOp::Write);
    check_cases(run_cases(cases), cases);
}

TEST_CASE("rdma write with imm places every byte and gives the responder IBV_WC_RECV_RDMA_WITH_IMM with the immediate",
          "[integration][data]") {
    const auto cases = sweep(XOp::WriteImm);
    check_cases(run_cases(cases), cases);
}

TEST_CASE("rdma read fetches every byte for sizes from 1 B to 1 MiB at aligned and unaligned offsets",
          "[integration][data]") {
    const auto cases = sweep(XOp::Read);
    check_cases(run_cases(cases), cases);
}

TEST_CASE("every operation delivers intact data with a path MTU of 1024", "[integration][data]") {
    std::vector<XCase> cases;
    for (XOp op : {XOp::Send, XOp::Write, XOp::WriteImm, XOp::Read}) {
        for (std::uint32_t size : {1u, 1023u, 1024u, 1025u, 4097u, 65539u}) cases.push_back({op, size, kSrcOff, kDstOff});
        XCase multi{op, 10000, kSrcOff + 1, kDstOff + 2};
        if (op == XOp::Read) multi.dst_sges = 3;
        else multi.src_sges = 3;
        if (op == XOp::Send) multi.dst_sges = 2;
        cases.push_back(multi);
    }
    CaseRun run;
    run.conn.mtu = IBV_MTU_1024;
    check_cases(run_cases(cases, run), cases);
}

TEST_CASE("every operation delivers intact data with a path MTU of 256 and an 8 KiB message", "[integration][data]") {
    std::vector<XCase> cases;
    for (XOp op : {XOp::Send, XOp::Write, XOp::WriteImm, XOp::Read}) {
        cases.push_back({op, 256, 100, 200});
        cases.push_back({op, 8192 + 5, kSrcOff, kDstOff});
    }
    CaseRun run;
    run.conn.mtu = IBV_MTU_256;
    check_cases(run_cases(cases, run), cases);
}

TEST_CASE("inline sends and rdma writes deliver the data as it was when posted", "[integration][data][inline]") {
    // The requester overwrites its buffer right after each post: inline
    // data was copied into the WQE, so the peer still sees the pattern.
    std::vector<XCase> cases;
    for (XOp op : {XOp::Send, XOp::Write, XOp::WriteImm}) {
        for (std::uint32_t size : {1u, 2u, 16u, 63u, 64u, 100u, 200u}) {
            XCase c{op, size, kSrcOff, kDstOff};
            c.inline_data = true;
            cases.push_back(c);
        }
        XCase two{op, 150, 4096 - 70, kDstOff};
        two.inline_data = true;
        two.src_sges = 2;
        cases.push_back(two);
    }
    CaseRun run;
    run.side.max_inline = 200;
    check_cases(run_cases(cases, run), cases);
}

TEST_CASE("a zero-byte send completes with byte_len 0 at the receiver", "[integration][data]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("z", 1);
            h.barrier("posted");
            rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {}, IBV_SEND_SIGNALED, 7));
            const auto w = s.poll(s.send_cq, 1);
            if (!w.empty()) rec.wc("req", w[0]);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("z", 0);
            rec.num("recv", s.post_recv(s.qps[0], {s.sge(0, 64)}, 9));
            h.barrier("posted");
            const auto w = s.poll(s.recv_cq, 1);
            if (!w.empty()) rec.wc("resp", w[0]);
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("recv") == 0);
    CHECK(r.num("req.status") == IBV_WC_SUCCESS);
    CHECK(r.num("req.wr_id") == 7);
    CHECK(r.num("resp.status") == IBV_WC_SUCCESS);
    CHECK(r.num("resp.opcode") == IBV_WC_RECV);
    CHECK(r.num("resp.byte_len") == 0);
    CHECK(r.num("resp.wr_id") == 9);
}

TEST_CASE("inline data ignores the lkey as ibv_post_send documents", "[integration][data][inline]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.max_inline = 128;
            Side s(h, o);
            s.connect("i", 1);
            const auto want = pattern(100, 42);
            std::memcpy(s.buf + 10, want.data(), want.size());
            h.barrier("posted");
            ibv_sge sge = s.sge(10, 100);
            sge.lkey = 0xdead00;  // no such key
            rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {sge}, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 1));
            const auto w = s.poll(s.send_cq, 1);
            if (!w.empty()) rec.wc("req", w[0]);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.max_inline = 128;
            Side s(h, o);
            s.connect("i", 0);
            s.post_recv(s.qps[0], {s.sge(0, 4096)}, 2);
            h.barrier("posted");
            const auto w = s.poll(s.recv_cq, 1);
            if (!w.empty()) rec.wc("resp", w[0]);
            const auto want = pattern(100, 42);
            rec.bytes("data", s.buf, want.data(), want.size());
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("req.status") == IBV_WC_SUCCESS);
    CHECK(r.num("resp.status") == IBV_WC_SUCCESS);
    CHECK(r.num("resp.byte_len") == 100);
    CHECK(r.num("data.mismatch") == -1);
}

TEST_CASE("an inline post larger than max_inline_data fails with EINVAL", "[integration][data][inline]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.max_inline = 64;
            Side s(h, o);
            s.connect("i", 1);
            ibv_qp_attr a{};
            ibv_qp_init_attr init{};
            ibv_query_qp(s.qps[0], &a, 0, &init);
            rec.num("max_inline", init.cap.max_inline_data);
            rec.num("too_big", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, init.cap.max_inline_data + 1)},
                                           IBV_SEND_SIGNALED | IBV_SEND_INLINE, 1));
            rec.num("read_inline", s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(0, 8)},
                                               IBV_SEND_SIGNALED | IBV_SEND_INLINE, 2, s.remote_addr, s.remote_rkey));
            s.close();
        },
        [](Host& h, Record&) {
            SideOptions o;
            o.max_inline = 64;
            Side s(h, o);
            s.connect("i", 0);
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("max_inline") >= 64);
    CHECK(r.num("too_big") == EINVAL);
    CHECK(r.num("read_inline") == EINVAL);
}

TEST_CASE("messages on several QPs in both directions at once all arrive intact", "[integration][data]") {
    // Four QPs; each node SENDs 3 messages on every QP and RDMA WRITEs into
    // the other node at the same time.
    constexpr int kQps = 4;
    constexpr std::uint32_t kMsg = 20000;
    auto program = [](Host& h, Record& rec) {
        SideOptions o;
        o.qps = kQps;
        o.buffer_bytes = 4 << 20;
        Side s(h, o);
        ConnOptions c;
        c.psn = 0x100 + 0x777 * static_cast<std::uint32_t>(h.index());
        s.connect("m", 1 - h.index(), c);
        const int me = h.index();
        const std::size_t half = 2 << 20;  // [0, 2 MiB): what I send; [2 MiB, 4 MiB): what I receive
        for (int q = 0; q < kQps; ++q)
            for (int m = 0; m < 3; ++m) {
                const std::size_t off = half + static_cast<std::size_t>(q * 3 + m) * (kMsg + 4096);
                s.post_recv(s.qps[static_cast<std::size_t>(q)], {s.sge(off, kMsg)}, static_cast<std::uint64_t>(q * 3 + m));
            }
        for (int q = 0; q < kQps; ++q)
            for (int m = 0; m < 4; ++m) {
                const std::size_t off = static_cast<std::size_t>(q * 4 + m) * (kMsg + 4096);
                fill_pattern(s.buf + off, kMsg, static_cast<std::uint64_t>(me * 1000 + q * 4 + m));
            }
        h.barrier("ready");
        // One RDMA WRITE per QP into the peer's receive half, before the sends:
        // the receive completions of the later sends make it visible.
        for (int q = 0; q < kQps; ++q) {
            const std::size_t off = static_cast<std::size_t>(q * 4 + 3) * (kMsg + 4096);
            const std::size_t roff = half + static_cast<std::size_t>(12 + q) * (kMsg + 4096);
            s.post_send(s.qps[static_cast<std::size_t>(q)], IBV_WR_RDMA_WRITE, {s.sge(off, kMsg)}, IBV_SEND_SIGNALED,
                        100 + static_cast<std::uint64_t>(q), s.remote_addr + roff, s.remote_rkey);
        }
        for (int m = 0; m < 3; ++m)
            for (int q = 0; q < kQps; ++q) {
                const std::size_t off = static_cast<std::size_t>(q * 4 + m) * (kMsg + 4096);
                s.post_send(s.qps[static_cast<std::size_t>(q)], IBV_WR_SEND, {s.sge(off, kMsg)}, IBV_SEND_SIGNALED,
                            static_cast<std::uint64_t>(q));
            }
        const auto sent = s.poll(s.send_cq, kQps * 4);
        int bad = 0;
        for (const auto& w : sent) bad += w.status != IBV_WC_SUCCESS;
        rec.num("n" + std::to_string(me) + ".sent", sent.size());
        rec.num("n" + std::to_string(me) + ".sent_bad", bad);
        const auto got = s.poll(s.recv_cq, kQps * 3);
        rec.num("n" + std::to_string(me) + ".received", got.size());
        h.barrier("all done");
        const int peer = 1 - me;
        int mismatches = 0;
        for (int q = 0; q < kQps; ++q) {
            for (int m = 0; m < 4; ++m) {
                const std::size_t off = half + static_cast<std::size_t>(m < 3 ? q * 3 + m : 12 + q) * (kMsg + 4096);
                const auto want = pattern(kMsg, static_cast<std::uint64_t>(peer * 1000 + q * 4 + m));
                mismatches += first_mismatch(s.buf + off, want.data(), kMsg) != -1;
            }
        }
        rec.num("n" + std::to_string(me) + ".mismatches", mismatches);
        int order_bad = 0;
        for (const auto& w : got) order_bad += w.status != IBV_WC_SUCCESS || w.byte_len != kMsg;
        rec.num("n" + std::to_string(me) + ".recv_bad", order_bad);
        h.barrier("checked");
        s.close();
    };
    const auto r = run_pair({}, program, program);
    HCASIM_REQUIRE_RUN(r);
    for (const char* n : {"n0", "n1"}) {
        INFO(n);
        CHECK(r.num(std::string(n) + ".sent") == kQps * 4);
        CHECK(r.num(std::string(n) + ".sent_bad") == 0);
        CHECK(r.num(std::string(n) + ".received") == kQps * 3);
        CHECK(r.num(std::string(n) + ".recv_bad") == 0);
        CHECK(r.num(std::string(n) + ".mismatches") == 0);
    }
}

TEST_CASE("an rdma read after an rdma write to the same remote range returns the written data",
          "[integration][data][ordering]") {
    // IB orders an RDMA READ behind the RDMA WRITEs posted before it on the
    // QP, and PCIe does not let the responder's read pass its posted writes:
    // the READ sees the new bytes even though nobody waited in between.
    for (std::uint32_t size : {64u, 4096u, 65536u, 1u << 20}) {
        const auto r = run_pair(
            {},
            [size](Host& h, Record& rec) {
                SideOptions o;
                o.buffer_bytes = 4 << 20;
                Side s(h, o);
                s.connect("wr", 1);
                fill_pattern(s.buf, size, 600 + size);
                std::memset(s.buf + (2 << 20), 0, size);
                h.barrier("ready");
                int rc = s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, size)}, IBV_SEND_SIGNALED, 1,
                                     s.remote_addr + 4096, s.remote_rkey);
                rc |= s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(2 << 20, size)}, IBV_SEND_SIGNALED, 2,
                                  s.remote_addr + 4096, s.remote_rkey);
                rec.num("post", rc);
                const auto w = s.poll(s.send_cq, 2);
                int ok = 0;
                for (const auto& x : w) ok += x.status == IBV_WC_SUCCESS;
                rec.num("ok", ok);
                rec.bytes("read_back", s.buf + (2 << 20), s.buf, size);
                h.barrier("done");
                s.close();
            },
            [size](Host& h, Record&) {
                SideOptions o;
                o.buffer_bytes = 4 << 20;
                Side s(h, o);
                s.connect("wr", 0);
                fill_pattern(s.buf + 4096, size, 1);  // old contents
                h.barrier("ready");
                h.barrier("done");
                s.close();
            });
        INFO("size " << size);
        HCASIM_REQUIRE_RUN(r);
        CHECK(r.num("post") == 0);
        CHECK(r.num("ok") == 2);
        CHECK(r.num("read_back.mismatch") == -1);
    }
}

TEST_CASE("several outstanding rdma reads complete in order with intact data", "[integration][data]") {
    for (int rd_atomic : {1, 4, 16}) {
        const auto r = run_pair(
            {},
            [rd_atomic](Host& h, Record& rec) {
                SideOptions o;
                o.buffer_bytes = 2 << 20;
                Side s(h, o);
                ConnOptions c;
                c.max_rd_atomic = static_cast<std::uint8_t>(rd_atomic);
                s.connect("rd", 1, c);
                h.barrier("ready");
                int rc = 0;
                for (std::uint64_t i = 0; i < 12; ++i)
                    rc |= s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(i * 100000 + i, 99999)}, IBV_SEND_SIGNALED, i,
                                      s.remote_addr + i * 100003, s.remote_rkey);
                rec.num("post", rc);
                const auto w = s.poll(s.send_cq, 12);
                std::string ids;
                for (const auto& x : w) ids += std::to_string(x.wr_id) + (x.status == IBV_WC_SUCCESS ? " " : "! ");
                rec.set("ids", ids);
                int bad = 0;
                for (std::uint64_t i = 0; i < 12; ++i) {
                    const auto want = pattern(99999, 700 + i);
                    bad += first_mismatch(s.buf + i * 100000 + i, want.data(), want.size()) != -1;
                }
                rec.num("bad", bad);
                h.barrier("done");
                s.close();
            },
            [rd_atomic](Host& h, Record&) {
                SideOptions o;
                o.buffer_bytes = 2 << 20;
                Side s(h, o);
                ConnOptions c;
                c.max_rd_atomic = static_cast<std::uint8_t>(rd_atomic);
                s.connect("rd", 0, c);
                for (std::uint64_t i = 0; i < 12; ++i) fill_pattern(s.buf + i * 100003, 99999, 700 + i);
                h.barrier("ready");
                h.barrier("done");
                s.close();
            });
        INFO("max_rd_atomic " << rd_atomic);
        HCASIM_REQUIRE_RUN(r);
        CHECK(r.num("post") == 0);
        CHECK(r.get("ids") == "0 1 2 3 4 5 6 7 8 9 10 11 ");
        CHECK(r.num("bad") == 0);
    }
}

TEST_CASE("zero-byte rdma write rdma write with imm and rdma read complete successfully", "[integration][data]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("z", 1);
            h.barrier("ready");
            int rc = s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {}, IBV_SEND_SIGNALED, 1, s.remote_addr, s.remote_rkey);
            rc |= s.post_send(s.qps[0], IBV_WR_RDMA_WRITE_WITH_IMM, {}, IBV_SEND_SIGNALED, 2, s.remote_addr,
                              s.remote_rkey, htobe32(0x1234));
            rc |= s.post_send(s.qps[0], IBV_WR_RDMA_READ, {}, IBV_SEND_SIGNALED, 3, s.remote_addr, s.remote_rkey);
            rec.num("post", rc);
            const auto w = s.poll(s.send_cq, 3);
            rec.num("n", w.size());
            for (std::size_t i = 0; i < w.size(); ++i) rec.wc("w" + std::to_string(i), w[i]);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("z", 0);
            s.post_recv(s.qps[0], {}, 9);
            h.barrier("ready");
            const auto w = s.poll(s.recv_cq, 1);
            if (!w.empty()) rec.wc("imm", w[0]);
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    REQUIRE(r.num("n") == 3);
    for (int i = 0; i < 3; ++i) {
        INFO("request " << i + 1);
        CHECK(r.num("w" + std::to_string(i) + ".status") == IBV_WC_SUCCESS);
        CHECK(r.unum("w" + std::to_string(i) + ".wr_id") == static_cast<unsigned>(i + 1));
    }
    CHECK(r.num("imm.status") == IBV_WC_SUCCESS);
    CHECK(r.num("imm.opcode") == IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK(r.num("imm.byte_len") == 0);
    CHECK(r.unum("imm.imm") == htobe32(0x1234));
}

TEST_CASE("after ibv_dereg_mr returns the adapter writes nothing more into the region", "[integration][data][ordering]") {
    // PCIe Gen2 x4 writes the responder's memory more slowly than FDR 4x
    // delivers RDMA WRITEs. Once every WRITE has completed at the requester
    // and the responder has deregistered the region, the region's bytes
    // must no longer change (a program may free the memory at once).
    const auto r = run_pair(
        {{"pcie.gen", "2"}, {"pcie.lanes", "4"}},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.buffer_bytes = 3 << 20;
            Side s(h, o);
            s.connect("dereg", 1);
            fill_pattern(s.buf, 3 << 20, 99);
            h.barrier("ready");
            // 24 writes of 1 MiB to the same place, each with other bytes
            // than the one before; the last one's come from the third MiB.
            int rc = 0;
            for (std::uint64_t i = 0; i < 24; ++i)
                rc |= s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge((i % 3) << 20, 1 << 20)},
                                  i == 23 ? IBV_SEND_SIGNALED : 0, i, s.remote_addr, s.remote_rkey);
            rec.num("post", rc);
            const auto w = s.poll(s.send_cq, 1, 100000);
            rec.num("completed", w.size() == 1 && w[0].status == IBV_WC_SUCCESS);
            h.barrier("written");
            h.barrier("checked");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.buffer_bytes = 1 << 20;
            Side s(h, o);
            s.connect("dereg", 0);
            h.barrier("ready");
            h.barrier("written");
            for (ibv_qp* q : s.qps) need_rc(ibv_destroy_qp(q), "ibv_destroy_qp");
            s.qps.clear();
            rec.num("dereg", ibv_dereg_mr(s.mr));
            std::vector<std::uint8_t> snapshot(s.buf, s.buf + (1 << 20));
            const auto t0 = h.now();
            h.sleep(us(2000));
            rec.num("changed_after_dereg", first_mismatch(s.buf, snapshot.data(), snapshot.size()));
            const auto all = pattern(3 << 20, 99);
            rec.num("complete_at_dereg", first_mismatch(snapshot.data(), all.data() + (2 << 20), 1 << 20));
            rec.num("complete_later", first_mismatch(s.buf, all.data() + (2 << 20), 1 << 20));
            rec.num("slept_us", static_cast<double>(h.now() - t0) / 1e6);
            h.barrier("checked");
            // Buffer and remaining resources are left to the process exit.
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    CHECK(r.num("completed") == 1);
    CHECK(r.num("dereg") == 0);
    INFO("first byte not yet final at dereg: " << r.num("complete_at_dereg") << ", 2 ms later: "
                                                 << r.num("complete_later"));
    CHECK(r.num("changed_after_dereg") == -1);
}
