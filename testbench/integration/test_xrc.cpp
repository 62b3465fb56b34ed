// XRC (the eXtended Reliable Connected transport): XRC domains opened
// through a file as ibv_xsrq_pingpong does, XRC SRQs with their own CQs, and
// initiator and target QPs. An initiator's request names the SRQ it is for;
// the target takes the receive WQE, the CQ and the protection domain from
// that SRQ.
#include <fcntl.h>
#include <unistd.h>

#include <array>

#include "testbench/integration/harness.hpp"
#include "testbench/integration/stress_seeds.hpp"

namespace hcasim::test {
namespace {

// What one side publishes: as xsrq_pingpong's pingpong_dest.
struct XrcInfo {
    std::uint16_t lid;
    std::uint32_t recv_qpn;
    std::uint32_t send_qpn;
    std::uint32_t psn;
    std::uint32_t srqn[2];
    std::uint64_t addr;
    std::uint32_t rkey;
};

// One node's XRC resources: a domain, two XRC SRQs (each with its CQ), a
// target QP in the domain and an initiator QP.
struct XrcSide {
    XrcSide(Host& h, const std::string& tag) : host(h), side(h, options()) {
        char path[] = "/tmp/hcasim_xrc_XXXXXX";
        fd = mkstemp(path);
        need(fd >= 0, "mkstemp");
        unlink(path);
        ibv_xrcd_init_attr xa{};
        xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        xa.fd = fd;
        xa.oflags = O_CREAT;
        xrcd = ibv_open_xrcd(side.ctx, &xa);
        need(xrcd != nullptr, "ibv_open_xrcd");
        for (int i = 0; i < 2; ++i) {
            cq[i] = ibv_create_cq(side.ctx, 256, nullptr, nullptr, 0);
            need(cq[i] != nullptr, "ibv_create_cq");
            ibv_srq_init_attr_ex a{};
            a.attr.max_wr = 64;
            a.attr.max_sge = 1;
            a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
            a.srq_type = IBV_SRQT_XRC;
            a.xrcd = xrcd;
            a.cq = cq[i];
            a.pd = side.pd;
            srq[i] = ibv_create_srq_ex(side.ctx, &a);
            need(srq[i] != nullptr, "ibv_create_srq_ex");
            need_rc(ibv_get_srq_num(srq[i], &srqn[i]), "ibv_get_srq_num");
        }
        ibv_qp_init_attr_ex init{};
        init.qp_type = IBV_QPT_XRC_RECV;
        init.comp_mask = IBV_QP_INIT_ATTR_XRCD;
        init.xrcd = xrcd;
        recv_qp = ibv_create_qp_ex(side.ctx, &init);
        need(recv_qp != nullptr, "ibv_create_qp_ex(XRC_RECV)");
        ibv_qp_attr mod{};
        mod.qp_state = IBV_QPS_INIT;
        mod.port_num = 1;
        mod.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        need_rc(ibv_modify_qp(recv_qp, &mod, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
                "recv QP to INIT");
        init = {};
        init.qp_type = IBV_QPT_XRC_SEND;
        init.send_cq = side.send_cq;
        init.cap.max_send_wr = 64;
        init.cap.max_send_sge = 1;
        init.comp_mask = IBV_QP_INIT_ATTR_PD;
        init.pd = side.pd;
        send_qp = ibv_create_qp_ex(side.ctx, &init);
        need(send_qp != nullptr, "ibv_create_qp_ex(XRC_SEND)");
        mod.qp_access_flags = 0;
        need_rc(ibv_modify_qp(send_qp, &mod, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
                "send QP to INIT");
        // Exchange and connect exactly as ibv_xsrq_pingpong's connect_qps().
        ibv_port_attr port{};
        need_rc(ibv_query_port(side.ctx, 1, &port), "ibv_query_port");
        XrcInfo mine{port.lid, recv_qp->qp_num, send_qp->qp_num, 0x100u + static_cast<std::uint32_t>(h.index()),
                     {srqn[0], srqn[1]}, reinterpret_cast<std::uintptr_t>(side.buf), side.mr->rkey};
        h.put_value(tag + "/" + std::to_string(h.index()), mine);
        peer = h.get_value<XrcInfo>(tag + "/" + std::to_string(1 - h.index()));
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        a.dest_qp_num = peer.send_qpn;
        a.path_mtu = IBV_MTU_1024;
        a.rq_psn = peer.psn;
        a.min_rnr_timer = 12;
        a.ah_attr.dlid = peer.lid;
        a.ah_attr.port_num = 1;
        need_rc(ibv_modify_qp(recv_qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
                "recv QP to RTR");
        a = {};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.sq_psn = mine.psn;
        need_rc(ibv_modify_qp(recv_qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN), "recv QP to RTS");
        a = {};
        a.qp_state = IBV_QPS_RTR;
        a.dest_qp_num = peer.recv_qpn;
        a.path_mtu = IBV_MTU_1024;
        a.rq_psn = peer.psn;
        a.ah_attr.dlid = peer.lid;
        a.ah_attr.port_num = 1;
        need_rc(ibv_modify_qp(send_qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN),
                "send QP to RTR");
        a = {};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = mine.psn;
        a.max_rd_atomic = 4;
        need_rc(ibv_modify_qp(send_qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT |
                                               IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
                "send QP to RTS");
    }
    static SideOptions options() {
        SideOptions o;
        o.qps = 0;
        o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        return o;
    }

    int post_recv(int s, std::size_t off, std::uint32_t len, std::uint64_t wr_id) {
        ibv_sge sg = side.sge(off, len);
        ibv_recv_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sg;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        return ibv_post_srq_recv(srq[s], &wr, &bad);
    }
    int post_send(ibv_wr_opcode op, std::uint32_t remote_srqn, std::size_t off, std::uint32_t len, std::uint64_t wr_id,
                  std::uint64_t raddr = 0) {
        ibv_sge sg = side.sge(off, len);
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.opcode = op;
        wr.sg_list = &sg;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.qp_type.xrc.remote_srqn = remote_srqn;
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey = peer.rkey;
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(send_qp, &wr, &bad);
    }

    void close() {
        need_rc(ibv_destroy_qp(send_qp), "ibv_destroy_qp");
        need_rc(ibv_destroy_qp(recv_qp), "ibv_destroy_qp");
        for (int i = 0; i < 2; ++i) {
            need_rc(ibv_destroy_srq(srq[i]), "ibv_destroy_srq");
            need_rc(ibv_destroy_cq(cq[i]), "ibv_destroy_cq");
        }
        need_rc(ibv_close_xrcd(xrcd), "ibv_close_xrcd");
        ::close(fd);
        side.close();
    }

    Host& host;
    Side side;
    int fd = -1;
    ibv_xrcd* xrcd = nullptr;
    ibv_cq* cq[2] = {};
    ibv_srq* srq[2] = {};
    std::uint32_t srqn[2] = {};
    ibv_qp* recv_qp = nullptr;
    ibv_qp* send_qp = nullptr;
    XrcInfo peer{};
};

}  // namespace

TEST_CASE("XRC ping-pong as ibv_xsrq_pingpong lands each message in the SRQ it names", "[xrc]") {
    // Node 0 sends 16 messages alternating between node 1's two SRQs; node 1
    // answers each one through its own initiator to node 0's SRQ 0.
    constexpr int kMsgs = 16;
    constexpr std::uint32_t kLen = 3000;  // 3 packets at a 1 KiB MTU
    auto program = [](Host& h, Record& rec) {
        XrcSide x(h, "xrc");
        const bool client = h.index() == 0;
        // The server's receives alternate between its SRQs; the client's all
        // go to SRQ 0, where every answer lands.
        for (int i = 0; i < kMsgs; ++i) need_rc(x.post_recv(client ? 0 : i % 2, 0x10000 + static_cast<std::size_t>(i) * 4096, 4096,
                                                            static_cast<std::uint64_t>(i)),
                                                "ibv_post_srq_recv");
        h.barrier("posted");
        int ok = 0, cq_ok = 0;
        for (int i = 0; i < kMsgs; ++i) {
            if (client) {
                fill_pattern(x.side.buf + static_cast<std::size_t>(i) * 4096, kLen, 500 + static_cast<std::uint64_t>(i));
                need_rc(x.post_send(IBV_WR_SEND, x.peer.srqn[i % 2], static_cast<std::size_t>(i) * 4096, kLen,
                                    static_cast<std::uint64_t>(i)),
                        "ibv_post_send");
                x.side.poll_ok(x.side.send_cq, 1, "send");
                // The answer comes to SRQ 0 (its CQ 0) whatever the message.
                const auto w = x.side.poll_ok(x.cq[0], 1, "answer");
                const auto want = pattern(kLen, 700 + static_cast<std::uint64_t>(i));
                ok += w[0].byte_len == kLen && w[0].qp_num == x.recv_qp->qp_num &&
                      first_mismatch(x.side.buf + 0x10000 + w[0].wr_id * 4096, want.data(), kLen) < 0;
                cq_ok += w[0].wr_id == static_cast<std::uint64_t>(i);
            } else {
                const auto w = x.side.poll_ok(x.cq[i % 2], 1, "message");
                const auto want = pattern(kLen, 500 + static_cast<std::uint64_t>(i));
                ok += w[0].byte_len == kLen && w[0].qp_num == x.recv_qp->qp_num && w[0].opcode == IBV_WC_RECV &&
                      first_mismatch(x.side.buf + 0x10000 + w[0].wr_id * 4096, want.data(), kLen) < 0;
                cq_ok += static_cast<int>(w[0].wr_id % 2) == i % 2;
                fill_pattern(x.side.buf + static_cast<std::size_t>(i) * 4096, kLen, 700 + static_cast<std::uint64_t>(i));
                need_rc(x.post_send(IBV_WR_SEND, x.peer.srqn[0], static_cast<std::size_t>(i) * 4096, kLen,
                                    static_cast<std::uint64_t>(i)),
                        "ibv_post_send");
                x.side.poll_ok(x.side.send_cq, 1, "answer send");
            }
        }
        rec.num("node" + std::to_string(h.index()) + ".ok", ok);
        rec.num("node" + std::to_string(h.index()) + ".cq_ok", cq_ok);
        h.barrier("done");
        x.close();
    };
    const auto res = run_pair({}, program, program);
    INFO(res.error);
    REQUIRE(res.ok);
    CHECK(res.num("node0.ok") == kMsgs);
    CHECK(res.num("node1.ok") == kMsgs);
    CHECK(res.num("node1.cq_ok") == kMsgs);
    CHECK(res.num("node0.cq_ok") == kMsgs);  // SRQ 0's WQEs in posting order
}

TEST_CASE("XRC RDMA WRITE, READ and fetch-and-add reach the target's memory", "[xrc]") {
    auto program = [](Host& h, Record& rec) {
        XrcSide x(h, "xrcrdma");
        h.barrier("ready");
        if (h.index() == 0) {
            fill_pattern(x.side.buf, 5000, 42);
            need_rc(x.post_send(IBV_WR_RDMA_WRITE, x.peer.srqn[0], 0, 5000, 1, x.peer.addr + 0x20000), "write");
            x.side.poll_ok(x.side.send_cq, 1, "write");
            need_rc(x.post_send(IBV_WR_RDMA_READ, x.peer.srqn[1], 0x8000, 5000, 2, x.peer.addr + 0x20000), "read");
            x.side.poll_ok(x.side.send_cq, 1, "read");
            const auto want = pattern(5000, 42);
            rec.num("read_back", first_mismatch(x.side.buf + 0x8000, want.data(), 5000));
            ibv_sge sg = x.side.sge(0x9000, 8);
            ibv_send_wr wr{};
            wr.wr_id = 3;
            wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
            wr.sg_list = &sg;
            wr.num_sge = 1;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.qp_type.xrc.remote_srqn = x.peer.srqn[0];
            wr.wr.atomic.remote_addr = x.peer.addr + 0x30000;
            wr.wr.atomic.rkey = x.peer.rkey;
            wr.wr.atomic.compare_add = 5;
            ibv_send_wr* bad = nullptr;
            need_rc(ibv_post_send(x.send_qp, &wr, &bad), "fetch and add");
            const auto w = x.side.poll_ok(x.side.send_cq, 1, "fetch and add");
            std::uint64_t orig = 0;
            std::memcpy(&orig, x.side.buf + 0x9000, 8);
            rec.num("fadd.opcode", w[0].opcode);
            rec.num("fadd.orig", orig);
        }
        h.barrier("done");
        if (h.index() == 1) {
            const auto want = pattern(5000, 42);
            rec.num("written", first_mismatch(x.side.buf + 0x20000, want.data(), 5000));
            std::uint64_t v = 0;
            std::memcpy(&v, x.side.buf + 0x30000, 8);
            rec.num("after_add", v);
        }
        x.close();
    };
    const auto res = run_pair({}, program, program);
    INFO(res.error);
    REQUIRE(res.ok);
    CHECK(res.num("read_back") == -1);
    CHECK(res.num("written") == -1);
    CHECK(res.num("fadd.opcode") == IBV_WC_FETCH_ADD);
    CHECK(res.num("fadd.orig") == 0);
    CHECK(res.num("after_add") == 5);
}

TEST_CASE("an XRC request naming an SRQ outside the target's domain fails with a remote invalid request", "[xrc]") {
    auto program = [](Host& h, Record& rec) {
        XrcSide x(h, "xrcbad");
        // Node 1 has an ordinary SRQ too, in no XRC domain.
        ibv_srq_init_attr plain{};
        plain.attr.max_wr = 4;
        plain.attr.max_sge = 1;
        ibv_srq* other = ibv_create_srq(x.side.pd, &plain);
        need(other != nullptr, "ibv_create_srq");
        std::uint32_t other_num = 0;
        need_rc(ibv_get_srq_num(other, &other_num), "ibv_get_srq_num");
        h.put_value("plain/" + std::to_string(h.index()), other_num);
        const auto peer_plain = h.get_value<std::uint32_t>("plain/" + std::to_string(1 - h.index()));
        need_rc(x.post_recv(0, 0x10000, 4096, 9), "ibv_post_srq_recv");
        ibv_recv_wr wr{};
        ibv_sge sg = x.side.sge(0x18000, 4096);
        wr.sg_list = &sg;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        need_rc(ibv_post_srq_recv(other, &wr, &bad), "ibv_post_srq_recv(plain)");
        h.barrier("ready");
        if (h.index() == 0) {
            need_rc(x.post_send(IBV_WR_SEND, peer_plain, 0, 64, 1), "ibv_post_send");
            const auto w = x.side.poll(x.side.send_cq, 1);
            rec.num("status", w.empty() ? -1 : static_cast<int>(w[0].status));
        }
        // The domain is in use: closing it is refused.
        rec.num("close_busy." + std::to_string(h.index()), ibv_close_xrcd(x.xrcd));
        h.barrier("done");
        need_rc(ibv_destroy_srq(other), "ibv_destroy_srq");
        if (h.index() == 1) {
            // Nothing landed in either SRQ's buffers.
            rec.num("untouched", x.side.buf[0x10000] == 0 && x.side.buf[0x18000] == 0);
        }
        if (h.index() == 0) {
            // The initiator is in the error state now: its QP goes away cleanly.
            rec.num("ini_state", qp_state(x.send_qp));
        }
        x.close();
    };
    const auto res = run_pair({}, program, program);
    INFO(res.error);
    REQUIRE(res.ok);
    CHECK(res.num("status") == IBV_WC_REM_INV_REQ_ERR);
    CHECK(res.num("close_busy.0") == EBUSY);
    CHECK(res.num("close_busy.1") == EBUSY);
    CHECK(res.num("untouched") == 1);
    CHECK(res.num("ini_state") == IBV_QPS_ERR);
}

TEST_CASE("XRC verbs refuse what the XRC annex forbids", "[xrc]") {
    const auto res = run_programs({}, {[](Host& h, Record& rec) {
        SideOptions o;
        o.qps = 0;
        Side s(h, o);
        ibv_device_attr dev{};
        need_rc(ibv_query_device(s.ctx, &dev), "ibv_query_device");
        rec.num("cap", (dev.device_cap_flags & IBV_DEVICE_XRC) != 0);
        ibv_xrcd_init_attr xa{};
        xa.comp_mask = IBV_XRCD_INIT_ATTR_FD;
        xa.fd = -1;
        errno = 0;
        rec.num("xrcd.no_oflags", ibv_open_xrcd(s.ctx, &xa) ? 0 : errno);
        xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        char path[] = "/tmp/hcasim_xrc_XXXXXX";
        const int fd = mkstemp(path);
        unlink(path);
        xa.fd = fd;
        xa.oflags = 0;  // no O_CREAT and no domain yet
        errno = 0;
        rec.num("xrcd.no_create", ibv_open_xrcd(s.ctx, &xa) ? 0 : errno);
        xa.oflags = O_CREAT;
        ibv_xrcd* a = ibv_open_xrcd(s.ctx, &xa);
        xa.oflags = 0;
        ibv_xrcd* b = ibv_open_xrcd(s.ctx, &xa);  // the same file: the same domain
        need(a && b, "ibv_open_xrcd");
        xa.oflags = O_CREAT | O_EXCL;
        errno = 0;
        rec.num("xrcd.excl", ibv_open_xrcd(s.ctx, &xa) ? 0 : errno);
        // An XRC SRQ needs its domain and CQ.
        ibv_srq_init_attr_ex sa{};
        sa.attr.max_wr = 4;
        sa.attr.max_sge = 1;
        sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_PD;
        sa.srq_type = IBV_SRQT_XRC;
        sa.xrcd = a;
        sa.pd = s.pd;
        errno = 0;
        rec.num("srq.no_cq", ibv_create_srq_ex(s.ctx, &sa) ? 0 : errno);
        sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
        sa.cq = s.recv_cq;
        sa.xrcd = b;  // created through the second opener
        ibv_srq* srq = ibv_create_srq_ex(s.ctx, &sa);
        need(srq != nullptr, "ibv_create_srq_ex");
        // An XRC SEND QP has no receive queue; an XRC RECV QP needs a domain.
        ibv_qp_init_attr qi{};
        qi.qp_type = IBV_QPT_XRC_SEND;
        qi.send_cq = s.send_cq;
        qi.cap.max_send_wr = 4;
        qi.cap.max_send_sge = 1;
        ibv_qp* ini = ibv_create_qp(s.pd, &qi);
        need(ini != nullptr, "ibv_create_qp(XRC_SEND)");
        rec.num("ini.max_recv_wr", qi.cap.max_recv_wr);
        need_rc(qp_to_init(ini, 0), "INIT");
        ibv_recv_wr rw{};
        ibv_recv_wr* bad = nullptr;
        rec.num("ini.post_recv", ibv_post_recv(ini, &rw, &bad));
        qi.qp_type = IBV_QPT_XRC_RECV;
        errno = 0;
        rec.num("tgt.via_create_qp", ibv_create_qp(s.pd, &qi) ? 0 : errno);
        // The domain closes only when its last opener closes it with nothing in it.
        rec.num("close.a", ibv_close_xrcd(a));
        rec.num("close.b_busy", ibv_close_xrcd(b));
        need_rc(ibv_destroy_srq(srq), "ibv_destroy_srq");
        rec.num("close.b", ibv_close_xrcd(b));
        need_rc(ibv_destroy_qp(ini), "ibv_destroy_qp");
        close(fd);
        s.close();
    }}, 1);
    INFO(res.error);
    REQUIRE(res.ok);
    CHECK(res.num("cap") == 1);
    CHECK(res.num("xrcd.no_oflags") == EINVAL);
    CHECK(res.num("xrcd.no_create") == EINVAL);
    CHECK(res.num("xrcd.excl") == EINVAL);
    CHECK(res.num("srq.no_cq") == EINVAL);
    CHECK(res.num("ini.max_recv_wr") == 0);
    CHECK(res.num("ini.post_recv") == EINVAL);
    CHECK(res.num("tgt.via_create_qp") == EINVAL);
    CHECK(res.num("close.a") == 0);
    CHECK(res.num("close.b_busy") == EBUSY);
    CHECK(res.num("close.b") == 0);
}

}  // namespace hcasim::test

namespace hcasim::test {
namespace {

struct XrcStressPlan {
    std::uint64_t seed = 1;
    int pairs = 2;   // initiator (node 0) -> target (node 1) connections
    int srqs = 2;    // XRC SRQs of node 1's domain, each with its CQ
    struct Msg {
        int srq;
        std::uint32_t size;
        bool imm;
    };
    std::vector<std::vector<Msg>> msgs;  // per pair
    // Lossy plans carry more: up to 16 messages a pair, the most the sender's
    // buffer lays out.
    static XrcStressPlan make(std::uint64_t seed, bool lossy = false) {
        SplitMix64 r{seed};
        XrcStressPlan p;
        p.seed = seed;
        p.pairs = static_cast<int>(r.range(1, 6));
        p.srqs = static_cast<int>(r.range(1, 4));
        p.msgs.resize(static_cast<std::size_t>(p.pairs));
        for (auto& v : p.msgs) {
            const int n = static_cast<int>(lossy ? r.range(8, 16) : r.range(1, 12));
            for (int j = 0; j < n; ++j)
                v.push_back({static_cast<int>(r.range(0, static_cast<std::uint64_t>(p.srqs) - 1)),
                             static_cast<std::uint32_t>(r.range(0, 6000)), r.chance(30)});
        }
        return p;
    }
};

constexpr std::uint32_t kXrcSlot = 8192;

std::uint64_t xrc_msg_seed(std::uint64_t seed, int q, int j) { return seed * 7777 + static_cast<std::uint64_t>(q) * 131 + j; }

}  // namespace

namespace {

// Random XRC traffic over seeds (chosen as in every stress test,
// stress_seeds.hpp) through the DMA engine dma names; lossy: over links that
// drop and corrupt 1 % of packets, with a local ACK timeout of 262 us
// (exponent 6) and waits that leave room for many of them.
void xrc_stress(const char* dma, int default_seeds, std::uint64_t first_seed, bool lossy = false) {
    const double wait_us = lossy ? 200000 : 20000;
    for (const std::uint64_t seed : stress::seeds(first_seed, default_seeds)) {
        const XrcStressPlan plan = XrcStressPlan::make(seed, lossy);
        auto sender = [plan, lossy, wait_us](Host& h, Record& rec) {
            SideOptions o;
            o.qps = 0;
            o.buffer_bytes = 16u << 20;
            Side s(h, o);
            std::vector<ibv_qp*> ini;
            ibv_port_attr port{};
            need_rc(ibv_query_port(s.ctx, 1, &port), "ibv_query_port");
            for (int q = 0; q < plan.pairs; ++q) {
                ibv_qp_init_attr_ex init{};
                init.qp_type = IBV_QPT_XRC_SEND;
                init.send_cq = s.send_cq;
                init.cap.max_send_wr = 32;
                init.cap.max_send_sge = 2;
                init.comp_mask = IBV_QP_INIT_ATTR_PD;
                init.pd = s.pd;
                ini.push_back(ibv_create_qp_ex(s.ctx, &init));
                need(ini.back() != nullptr, "ibv_create_qp_ex(XRC_SEND)");
                need_rc(qp_to_init(ini.back(), 0), "INIT");
            }
            std::array<std::uint32_t, 8> inin{};
            for (int q = 0; q < plan.pairs; ++q) inin[static_cast<std::size_t>(q)] = ini[static_cast<std::size_t>(q)]->qp_num;
            h.put_value("ini", inin);
            const auto tgt = h.get_value<std::array<std::uint32_t, 8>>("tgt");
            const auto srqn = h.get_value<std::array<std::uint32_t, 4>>("srqn");
            ConnOptions c;
            if (lossy) c.timeout = 6;
            for (int q = 0; q < plan.pairs; ++q) {
                ibv_qp_attr a{};
                a.qp_state = IBV_QPS_RTR;
                a.path_mtu = IBV_MTU_2048;
                a.dest_qp_num = tgt[static_cast<std::size_t>(q)];
                a.rq_psn = 0;
                a.ah_attr.dlid = 2;
                a.ah_attr.port_num = 1;
                need_rc(ibv_modify_qp(ini[static_cast<std::size_t>(q)], &a,
                                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN),
                        "RTR");
                need_rc(qp_to_rts(ini[static_cast<std::size_t>(q)], 0x77, c), "RTS");
            }
            h.barrier("connected");
            SplitMix64 r{plan.seed ^ 0x11};
            std::vector<int> next(static_cast<std::size_t>(plan.pairs), 0);
            int left = 0, unsignalled = 0;
            for (const auto& v : plan.msgs) left += static_cast<int>(v.size());
            while (left > 0) {
                const int q = static_cast<int>(r.range(0, static_cast<std::uint64_t>(plan.pairs) - 1));
                int& j = next[static_cast<std::size_t>(q)];
                if (j == static_cast<int>(plan.msgs[static_cast<std::size_t>(q)].size())) continue;
                const auto& m = plan.msgs[static_cast<std::size_t>(q)][static_cast<std::size_t>(j)];
                const std::size_t off = static_cast<std::size_t>(q * 16 + j) * 8192 + r.range(0, 1000);
                fill_pattern(s.buf + off, m.size, xrc_msg_seed(plan.seed, q, j));
                const std::uint32_t first = m.size ? static_cast<std::uint32_t>(r.range(0, m.size)) : 0;
                ibv_sge sg[2] = {s.sge(off, first), s.sge(off + first, m.size - first)};
                ibv_send_wr wr{};
                wr.wr_id = static_cast<std::uint64_t>(q) << 32 | static_cast<std::uint32_t>(j);
                wr.opcode = m.imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
                wr.imm_data = htobe32(static_cast<std::uint32_t>(j));
                wr.sg_list = sg;
                wr.num_sge = 2;
                const bool sig = r.chance(30) || unsignalled >= 16;
                wr.send_flags = sig ? IBV_SEND_SIGNALED : 0;
                wr.qp_type.xrc.remote_srqn = srqn[static_cast<std::size_t>(m.srq)];
                ibv_send_wr* bad = nullptr;
                need_rc(ibv_post_send(ini[static_cast<std::size_t>(q)], &wr, &bad), "ibv_post_send");
                ++j;
                --left;
                unsignalled = sig ? 0 : unsignalled + 1;
                if (sig) s.poll_ok(s.send_cq, 1, "send", wait_us);
            }
            h.barrier("received");
            for (ibv_qp* q : ini) need_rc(ibv_destroy_qp(q), "ibv_destroy_qp");
            rec.num("sent", 1);
            s.close();
        };
        auto receiver = [plan, wait_us](Host& h, Record& rec) {
            SideOptions o;
            o.qps = 0;
            int total = 0;
            std::vector<int> per_srq(static_cast<std::size_t>(plan.srqs), 0);
            for (const auto& v : plan.msgs)
                for (const auto& m : v) ++per_srq[static_cast<std::size_t>(m.srq)], ++total;
            o.buffer_bytes = static_cast<std::size_t>(total + 1) * kXrcSlot;
            Side s(h, o);
            ibv_xrcd_init_attr xa{};
            xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
            xa.fd = -1;
            xa.oflags = O_CREAT;
            ibv_xrcd* xrcd = ibv_open_xrcd(s.ctx, &xa);
            need(xrcd != nullptr, "ibv_open_xrcd");
            std::vector<ibv_cq*> cqs;
            std::vector<ibv_srq*> srqs;
            std::array<std::uint32_t, 4> srqn{};
            int slot = 0;
            std::vector<int> slot_srq;
            for (int i = 0; i < plan.srqs; ++i) {
                cqs.push_back(ibv_create_cq(s.ctx, 256, nullptr, nullptr, 0));
                ibv_srq_init_attr_ex a{};
                a.attr.max_wr = 128;
                a.attr.max_sge = 2;
                a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
                a.srq_type = IBV_SRQT_XRC;
                a.xrcd = xrcd;
                a.cq = cqs.back();
                a.pd = s.pd;
                srqs.push_back(ibv_create_srq_ex(s.ctx, &a));
                need(srqs.back() != nullptr, "ibv_create_srq_ex");
                need_rc(ibv_get_srq_num(srqs.back(), &srqn[static_cast<std::size_t>(i)]), "ibv_get_srq_num");
                for (int k = 0; k < per_srq[static_cast<std::size_t>(i)]; ++k, ++slot) {
                    std::memset(s.buf + static_cast<std::size_t>(slot) * kXrcSlot, kGuardByte, kXrcSlot);
                    ibv_sge sg = s.sge(static_cast<std::size_t>(slot) * kXrcSlot + kGuardBytes, kXrcSlot - 2 * kGuardBytes);
                    ibv_recv_wr wr{};
                    wr.wr_id = static_cast<std::uint64_t>(slot);
                    wr.sg_list = &sg;
                    wr.num_sge = 1;
                    ibv_recv_wr* bad = nullptr;
                    need_rc(ibv_post_srq_recv(srqs.back(), &wr, &bad), "ibv_post_srq_recv");
                    slot_srq.push_back(i);
                }
            }
            std::array<std::uint32_t, 8> tgtn{};
            std::vector<ibv_qp*> tgt;
            std::map<std::uint32_t, int> tgt_index;
            for (int q = 0; q < plan.pairs; ++q) {
                ibv_qp_init_attr_ex init{};
                init.qp_type = IBV_QPT_XRC_RECV;
                init.comp_mask = IBV_QP_INIT_ATTR_XRCD;
                init.xrcd = xrcd;
                tgt.push_back(ibv_create_qp_ex(s.ctx, &init));
                need(tgt.back() != nullptr, "ibv_create_qp_ex(XRC_RECV)");
                tgtn[static_cast<std::size_t>(q)] = tgt.back()->qp_num;
                tgt_index[tgt.back()->qp_num] = q;
            }
            h.put_value("tgt", tgtn);
            h.put_value("srqn", srqn);
            ConnOptions c;
            const auto inin = h.get_value<std::array<std::uint32_t, 8>>("ini");
            for (int q = 0; q < plan.pairs; ++q) {
                ibv_qp* t = tgt[static_cast<std::size_t>(q)];
                need_rc(qp_to_init(t, IBV_ACCESS_REMOTE_WRITE), "INIT");
                need_rc(qp_to_rtr(t, 1, inin[static_cast<std::size_t>(q)], 0x77, c), "RTR");
                ibv_qp_attr a{};
                a.qp_state = IBV_QPS_RTS;
                a.timeout = 14;
                a.sq_psn = 0;
                need_rc(ibv_modify_qp(t, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN), "RTS");
            }
            h.barrier("connected");
            // Per (pair, SRQ): the messages in order.
            std::map<std::pair<int, int>, std::vector<int>> expect;
            for (int q = 0; q < plan.pairs; ++q)
                for (int j = 0; j < static_cast<int>(plan.msgs[static_cast<std::size_t>(q)].size()); ++j)
                    expect[{q, plan.msgs[static_cast<std::size_t>(q)][static_cast<std::size_t>(j)].srq}].push_back(j);
            std::map<std::pair<int, int>, std::size_t> got;
            int received = 0, bad = 0;
            const sim::Tick deadline = h.now() + us(5 * wait_us);
            while (received < total && !bad && h.now() < deadline) {
                for (int i = 0; i < plan.srqs; ++i) {
                    ibv_wc w{};
                    if (ibv_poll_cq(cqs[static_cast<std::size_t>(i)], 1, &w) != 1) continue;
                    ++received;
                    auto it = tgt_index.find(w.qp_num);
                    const int k = static_cast<int>(w.wr_id);
                    if (w.status != IBV_WC_SUCCESS || it == tgt_index.end() || k >= slot ||
                        slot_srq[static_cast<std::size_t>(k)] != i) {
                        rec.set("bad", std::string("completion ") + ibv_wc_status_str(w.status) + " on CQ " +
                                           std::to_string(i) + " wr_id " + std::to_string(w.wr_id));
                        ++bad;
                        break;
                    }
                    const int q = it->second;
                    auto& order = expect[{q, i}];
                    std::size_t& n = got[{q, i}];
                    if (n >= order.size()) {
                        rec.set("bad", "extra message on SRQ " + std::to_string(i));
                        ++bad;
                        break;
                    }
                    const int j = order[n++];
                    const auto& m = plan.msgs[static_cast<std::size_t>(q)][static_cast<std::size_t>(j)];
                    const std::uint8_t* base = s.buf + static_cast<std::size_t>(k) * kXrcSlot;
                    const auto want = pattern(m.size, xrc_msg_seed(plan.seed, q, j));
                    bool ok = w.byte_len == m.size && first_mismatch(base + kGuardBytes, want.data(), m.size) < 0 &&
                              ((w.wc_flags & IBV_WC_WITH_IMM) != 0) == m.imm &&
                              (!m.imm || be32toh(w.imm_data) == static_cast<std::uint32_t>(j));
                    for (std::size_t g = 0; g < kGuardBytes; ++g)
                        ok = ok && base[g] == kGuardByte && base[kXrcSlot - 1 - g] == kGuardByte;
                    if (!ok) {
                        rec.set("bad", "pair " + std::to_string(q) + " message " + std::to_string(j) + " on SRQ " +
                                           std::to_string(i) + ": bytes, length or immediate differ");
                        ++bad;
                    }
                }
                h.sleep(300 * sim::kPsPerNs);
            }
            rec.num("received", received);
            rec.num("total", total);
            rec.num("bad", bad);
            rec.num("link_losses", link_losses(h));
            h.barrier("received");
            for (ibv_qp* t : tgt) need_rc(ibv_destroy_qp(t), "ibv_destroy_qp");
            for (std::size_t i = 0; i < srqs.size(); ++i) {
                need_rc(ibv_destroy_srq(srqs[i]), "ibv_destroy_srq");
                need_rc(ibv_destroy_cq(cqs[i]), "ibv_destroy_cq");
            }
            need_rc(ibv_close_xrcd(xrcd), "ibv_close_xrcd");
            s.close();
        };
        Overrides ov{{"hca.dma.impl", dma}};
        if (lossy) add_lossy_links(ov);
        const auto res = run_pair(ov, sender, receiver);
        if (stress::long_mode() && lossy)
            std::printf("xrc stress, seed %llu: %d pairs, %d SRQs, %s packets lost or corrupted\n",
                        static_cast<unsigned long long>(plan.seed), plan.pairs, plan.srqs, res.get("link_losses").c_str());
        INFO(dma << " dma engine, seed " << plan.seed << ": " << res.error << " " << res.get("bad"));
        REQUIRE(res.ok);
        CHECK(res.num("bad") == 0);
        CHECK(res.num("received") == res.num("total"));
    }
}

}  // namespace

TEST_CASE("random XRC traffic from many initiators into many SRQs of one domain loses and corrupts nothing",
          "[xrc][stress]") {
    xrc_stress("systemc", 6, 0x3c0000u);
}

TEST_CASE("random XRC traffic through the rtl dma engine loses and corrupts nothing", "[xrc][stress][rtl]") {
    xrc_stress("rtl", 3, 0x3d0000u);
}

// A resent SEND must take no second WQE from the SRQ it names.
TEST_CASE("random XRC traffic over links that drop and corrupt 1% of packets loses and corrupts nothing",
          "[xrc][stress][lossy]") {
    xrc_stress("systemc", 4, 0x3e0000u, true);
}

}  // namespace hcasim::test
