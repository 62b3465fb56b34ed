// UC and UD queue pairs, global routes and the GID table, through the verbs
// API on two nodes: every opcode on every QP type, bytes compared, the
// datagram fields of work completions, Q_Keys, the GRH area, and seeded
// random traffic.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "testbench/integration/harness.hpp"

namespace hcasim::test {
namespace {

constexpr std::uint32_t kGrh = 40;  // the GRH area at the start of a UD receive buffer

std::uint8_t pattern(std::uint64_t seed, std::size_t i) {
    return static_cast<std::uint8_t>((seed * 0x9e3779b97f4a7c15ull + i * 0x2545f4914f6cdd1dull) >> 56);
}

void fill(Side& s, std::size_t off, std::size_t len, std::uint64_t seed) {
    for (std::size_t i = 0; i < len; ++i) s.buf[off + i] = pattern(seed, i);
}

// Counts the bytes of [off, off+len) that differ from the pattern.
long bad_bytes(const Side& s, std::size_t off, std::size_t len, std::uint64_t seed) {
    long bad = 0;
    for (std::size_t i = 0; i < len; ++i) bad += s.buf[off + i] != pattern(seed, i);
    return bad;
}

const char* type_name(ibv_qp_type t) { return t == IBV_QPT_RC ? "rc" : t == IBV_QPT_UC ? "uc" : "ud"; }

}  // namespace

TEST_CASE("every opcode works on every qp type that has it and is refused with EINVAL on the others",
          "[uc][ud][verbs]") {
    const ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
                                 IBV_WR_RDMA_READ};
    for (ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
        INFO("qp type " << type_name(type));
        SideOptions o;
        o.qp_type = type;
        ConnOptions c;
        c.mtu = IBV_MTU_1024;
        const auto r = run_pair(
            {},
            [&](Host& h, Record& rec) {
                Side s(h, o);
                s.connect("t", 1, c);
                h.barrier("ready");
                for (int k = 0; k < 5; ++k) {
                    const ibv_wr_opcode op = ops[k];
                    const bool allowed = type == IBV_QPT_RC || (type == IBV_QPT_UC && op != IBV_WR_RDMA_READ) ||
                                         (type == IBV_QPT_UD && (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM));
                    // UD carries one MTU; the others a multi-packet message.
                    const std::uint32_t len = type == IBV_QPT_UD ? 1000 : 5000;
                    const std::size_t src = 0x1000 + static_cast<std::size_t>(k) * 0x4000;
                    fill(s, src, len, 100 + static_cast<std::uint64_t>(k));
                    int rc;
                    if (type == IBV_QPT_UD)
                        rc = s.post_ud(s.qps[0], 0, op, {s.sge(src, len)}, IBV_SEND_SIGNALED, 10 + k, 0x01020304u);
                    else
                        rc = s.post_send(s.qps[0], op, {s.sge(src, len)}, IBV_SEND_SIGNALED, 10 + k,
                                         s.remote_addr + 0x40000 + static_cast<std::size_t>(k) * 0x4000, s.remote_rkey,
                                         0x01020304u);
                    rec.num(std::string("post.") + std::to_string(k), rc);
                    if (!allowed || rc != 0) {
                        h.barrier("op" + std::to_string(k));
                        continue;
                    }
                    const auto wc = s.poll_ok(s.send_cq, 1, "send completion");
                    rec.num("wr_id." + std::to_string(k), static_cast<long long>(wc[0].wr_id));
                    if (op == IBV_WR_RDMA_READ)
                        rec.num("bad." + std::to_string(k),
                                bad_bytes(s, src, len, 200 + static_cast<std::uint64_t>(k)));
                    h.barrier("op" + std::to_string(k));
                }
                h.barrier("done");
                s.close();
            },
            [&](Host& h, Record& rec) {
                Side s(h, o);
                s.connect("t", 0, c);
                // READ source on this side.
                fill(s, 0x40000 + 4 * 0x4000, 5000, 204);
                for (int k = 0; k < 8; ++k) need_rc(s.post_recv(s.qps[0], {s.sge(0x80000 + k * 0x2000, 8192)}, 50 + k), "recv");
                h.barrier("ready");
                int recv_used = 0;
                for (int k = 0; k < 5; ++k) {
                    h.barrier("op" + std::to_string(k));
                    const ibv_wr_opcode op = ops[k];
                    const bool allowed = type == IBV_QPT_RC || (type == IBV_QPT_UC && op != IBV_WR_RDMA_READ) ||
                                         (type == IBV_QPT_UD && (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM));
                    if (!allowed) continue;
                    const std::uint32_t len = type == IBV_QPT_UD ? 1000 : 5000;
                    const bool to_recv = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
                    const bool consumes = to_recv || op == IBV_WR_RDMA_WRITE_WITH_IMM;
                    if (consumes) {
                        const auto wc = s.poll_ok(s.recv_cq, 1, "recv completion");
                        const std::string key = std::to_string(k);
                        rec.num("rwc.len." + key, wc[0].byte_len);
                        rec.num("rwc.imm." + key, (wc[0].wc_flags & IBV_WC_WITH_IMM) ? wc[0].imm_data : 0);
                        rec.num("rwc.opcode." + key, wc[0].opcode);
                        rec.num("rwc.src_qp_ok." + key, wc[0].src_qp == s.peer_info.qpn[0]);
                        rec.num("rwc.slid." + key, wc[0].slid);
                        ++recv_used;
                    } else {
                        // A WRITE without immediate tells the target nothing:
                        // the requester's completion (at once on UC) does not
                        // mean the bytes are in this host's memory yet.
                        h.sleep(us(50));
                    }
                    const std::size_t dst = to_recv ? 0x80000 + static_cast<std::size_t>(recv_used - 1) * 0x2000 +
                                                          (type == IBV_QPT_UD ? kGrh : 0)
                                                    : 0x40000 + static_cast<std::size_t>(k) * 0x4000;
                    if (op != IBV_WR_RDMA_READ)
                        rec.num("bad." + std::to_string(k), bad_bytes(s, dst, len, 100 + static_cast<std::uint64_t>(k)));
                }
                h.barrier("done");
                s.close();
            });
        REQUIRE(r.ok);
        INFO(r.error);
        for (int k = 0; k < 5; ++k) {
            const std::string key = std::to_string(k);
            const ibv_wr_opcode op = ops[k];
            const bool allowed = type == IBV_QPT_RC || (type == IBV_QPT_UC && op != IBV_WR_RDMA_READ) ||
                                 (type == IBV_QPT_UD && (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM));
            INFO("opcode " << k);
            if (!allowed) {
                CHECK(r.num("post." + key) == EINVAL);
                continue;
            }
            CHECK(r.num("post." + key) == 0);
            CHECK(r.num("wr_id." + key) == 10 + k);
            CHECK(r.num("bad." + key) == 0);
            if (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM) {
                const long want_len = type == IBV_QPT_UD ? 1000 + kGrh : 5000;
                CHECK(r.num("rwc.len." + key) == want_len);
                CHECK(r.num("rwc.src_qp_ok." + key) == 1);
                CHECK(r.num("rwc.slid." + key) == 1);
                CHECK(r.num("rwc.opcode." + key) == (op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV));
                if (op != IBV_WR_SEND) CHECK(r.num("rwc.imm." + key) == 0x01020304);
            }
        }
    }
}

TEST_CASE("ud datagrams carry the grh into the receive buffer and the wc reports src_qp, slid, sl and IBV_WC_GRH",
          "[ud][verbs]") {
    for (bool global : {false, true}) {
        INFO("global " << global);
        SideOptions o;
        o.qp_type = IBV_QPT_UD;
        ConnOptions c;
        c.global = global;
        c.sgid_index = 1;  // the second GID: the site-local prefix
        const auto r = run_pair(
            {},
            [&](Host& h, Record& rec) {
                Side s(h, o);
                s.connect("t", 1, c);
                need_rc(s.post_recv(s.qps[0], {s.sge(0x10000, 4096)}, 2), "recv");
                h.barrier("ready");
                fill(s, 0x100, 512, 7);
                need_rc(s.post_ud(s.qps[0], 0, IBV_WR_SEND, {s.sge(0x100, 512)}, IBV_SEND_SIGNALED, 1), "post");
                s.poll_ok(s.send_cq, 1, "send");
                // The answer comes back through an AH made from its completion.
                const auto wc = s.poll_ok(s.recv_cq, 1, "reply");
                rec.num("reply.bad", bad_bytes(s, 0x10000 + kGrh, 64, 8));
                rec.num("reply.grh", (wc[0].wc_flags & IBV_WC_GRH) != 0);
                h.barrier("done");
                s.close();
            },
            [&](Host& h, Record& rec) {
                Side s(h, o);
                s.connect("t", 0, c);
                need_rc(s.post_recv(s.qps[0], {s.sge(0x10000, 4096)}, 9), "recv");
                std::memset(s.buf + 0x10000, 0xee, kGrh);
                h.barrier("ready");
                const auto wc = s.poll_ok(s.recv_cq, 1, "recv");
                rec.num("len", wc[0].byte_len);
                rec.num("grh", (wc[0].wc_flags & IBV_WC_GRH) != 0);
                rec.num("src_qp_ok", wc[0].src_qp == s.peer_info.qpn[0]);
                rec.num("slid", wc[0].slid);
                rec.num("sl", wc[0].sl);
                rec.num("bad", bad_bytes(s, 0x10000 + kGrh, 512, 7));
                // The GRH area: written with the GRH when one came (IPVer 6,
                // NxtHdr 0x1B, SGID = the sender's GID 1, DGID = ours),
                // untouched otherwise.
                ibv_grh g;
                std::memcpy(&g, s.buf + 0x10000, sizeof g);
                rec.num("grh.ipver", be32toh(g.version_tclass_flow) >> 28);
                rec.num("grh.next_hdr", g.next_hdr);
                rec.num("grh.sgid_ok", std::memcmp(g.sgid.raw, s.peer_info.gid[1].raw, 16) == 0);
                ibv_gid mine;
                need_rc(ibv_query_gid(s.ctx, 1, 1, &mine), "gid");
                rec.num("grh.dgid_ok", std::memcmp(g.dgid.raw, mine.raw, 16) == 0);
                rec.num("grh.untouched", s.buf[0x10000] == 0xee && s.buf[0x10000 + kGrh - 1] == 0xee);
                // Reply through ibv_create_ah_from_wc.
                ibv_ah* ah = ibv_create_ah_from_wc(s.pd, const_cast<ibv_wc*>(&wc[0]),
                                                   reinterpret_cast<ibv_grh*>(s.buf + 0x10000), 1);
                need(ah != nullptr, "ibv_create_ah_from_wc");
                fill(s, 0x20000, 64, 8);
                ibv_sge sg = s.sge(0x20000, 64);
                ibv_send_wr wr{};
                wr.sg_list = &sg;
                wr.num_sge = 1;
                wr.opcode = IBV_WR_SEND;
                wr.send_flags = IBV_SEND_SIGNALED;
                wr.wr.ud.ah = ah;
                wr.wr.ud.remote_qpn = wc[0].src_qp;
                wr.wr.ud.remote_qkey = 0x11111111;
                ibv_send_wr* bad = nullptr;
                need_rc(ibv_post_send(s.qps[0], &wr, &bad), "reply");
                s.poll_ok(s.send_cq, 1, "reply send");
                h.barrier("done");
                need_rc(ibv_destroy_ah(ah), "destroy ah");
                s.close();
            });
        INFO(r.error);
        REQUIRE(r.ok);
        CHECK(r.num("len") == 512 + kGrh);
        CHECK(r.num("grh") == (global ? 1 : 0));
        CHECK(r.num("src_qp_ok") == 1);
        CHECK(r.num("slid") == 1);
        CHECK(r.num("sl") == 0);
        CHECK(r.num("bad") == 0);
        if (global) {
            CHECK(r.num("grh.ipver") == 6);
            CHECK(r.num("grh.next_hdr") == 0x1b);
            CHECK(r.num("grh.sgid_ok") == 1);
            CHECK(r.num("grh.dgid_ok") == 1);
        } else {
            CHECK(r.num("grh.untouched") == 1);
        }
        CHECK(r.num("reply.bad") == 0);
        CHECK(r.num("reply.grh") == (global ? 1 : 0));
    }
}

}  // namespace hcasim::test
