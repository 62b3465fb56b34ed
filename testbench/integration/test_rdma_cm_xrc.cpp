// XRC through rdma_cm, as librdmacm does it and rdma_xserver/rdma_xclient
// use it: RDMA_PS_IB endpoints of type IBV_QPT_XRC_RECV (passive) and
// IBV_QPT_XRC_SEND (active), an XRC SRQ made by rdma_create_srq in
// librdmacm's XRC domain, its number handed to the client in the REP's
// private data, and sends addressed to that SRQ.
#include <catch2/catch.hpp>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>

#include <cstring>
#include <string>
#include <vector>

#include "testbench/integration/harness.hpp"

namespace hcasim::test {
namespace {

constexpr const char* kXrcService = "7495";

std::vector<std::uint8_t> pattern(std::size_t n, int seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed * 31 + i * 7 + 3);
    return v;
}
void dump(const RunResult& r) {
    for (const auto& [k, v] : r.kv) UNSCOPED_INFO(k << "=" << v);
}

// One XRC connection: the client sends each of sizes to the server's XRC
// SRQ, the server checks every byte of each.
RunResult xrc_run(const std::vector<std::size_t>& sizes) {
    std::size_t largest = 0;
    for (std::size_t n : sizes) largest = std::max(largest, n);
    const auto n_msgs = static_cast<std::uint32_t>(sizes.size());
    return run_pair(
        {},
        [=](Host& h, Record& rec) {
            rdma_addrinfo hints{}, *res = nullptr;
            hints.ai_flags = RAI_PASSIVE;
            hints.ai_port_space = RDMA_PS_IB;
            hints.ai_qp_type = IBV_QPT_XRC_RECV;
            need_rc(rdma_getaddrinfo(nullptr, kXrcService, &hints, &res), "getaddrinfo");
            ibv_qp_init_attr attr{};
            attr.cap.max_recv_wr = 1;
            attr.cap.max_recv_sge = 1;
            rdma_cm_id* listen_id = nullptr;
            need_rc(rdma_create_ep(&listen_id, res, nullptr, &attr), "create_ep passive");
            rdma_freeaddrinfo(res);
            rec.num("srv.listen.qp_type", listen_id->qp_type);
            need_rc(rdma_listen(listen_id, 1), "listen");
            h.barrier("listening");
            rdma_cm_id* id = nullptr;
            need_rc(rdma_get_request(listen_id, &id), "get_request");
            need(id->qp != nullptr, "the request's QP");
            rec.num("srv.qp_type", id->qp->qp_type);
            // rdma_create_srq makes an XRC SRQ for an XRC target id, in
            // librdmacm's domain, with a CQ of its own.
            ibv_srq_init_attr sa{};
            sa.attr.max_wr = n_msgs;
            sa.attr.max_sge = 1;
            sa.srq_context = id;
            need_rc(rdma_create_srq(id, nullptr, &sa), "create_srq");
            need(id->srq != nullptr && id->recv_cq != nullptr && id->recv_cq_channel != nullptr, "srq and its CQ");
            std::uint32_t srqn = 0;
            need_rc(ibv_get_srq_num(id->srq, &srqn), "get_srq_num");
            rec.num("srv.srqn", srqn);
            PageBytes rbuf(largest * sizes.size());
            ibv_mr* mr = rdma_reg_msgs(id, rbuf.data(), rbuf.size());
            need(mr != nullptr, "reg_msgs");
            for (std::size_t i = 0; i < sizes.size(); ++i)
                need_rc(rdma_post_recv(id, reinterpret_cast<void*>(i), rbuf.data() + i * largest, largest, mr),
                        "post_recv");
            const std::uint32_t wire = htonl(srqn);
            rdma_conn_param p{};
            p.private_data = &wire;
            p.private_data_len = sizeof wire;
            need_rc(rdma_accept(id, &p), "accept");
            rec.num("srv.qp_state", id->qp->state);
            for (std::size_t i = 0; i < sizes.size(); ++i) {
                ibv_wc wc{};
                need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
                const std::string k = "srv.recv" + std::to_string(i);
                rec.num(k + ".status", wc.status);
                rec.num(k + ".wr_id", static_cast<long long>(wc.wr_id));
                rec.num(k + ".byte_len", wc.byte_len);
                rec.num(k + ".qp_num_is_target", wc.qp_num == id->qp->qp_num);
                const auto want = pattern(sizes[i], static_cast<int>(i) + 1);
                rec.num(k + ".mismatch", first_mismatch(rbuf.data() + wc.wr_id * largest, want.data(), sizes[i]));
            }
            h.barrier("received");
            need_rc(rdma_disconnect(id), "disconnect");
            rdma_dereg_mr(mr);
            rdma_destroy_ep(id);
            rdma_destroy_ep(listen_id);
            rec.num("srv.done", 1);
        },
        [=](Host& h, Record& rec) {
            rdma_addrinfo hints{}, *res = nullptr;
            hints.ai_port_space = RDMA_PS_IB;
            hints.ai_qp_type = IBV_QPT_XRC_SEND;
            need_rc(rdma_getaddrinfo("node0", kXrcService, &hints, &res), "getaddrinfo");
            h.barrier("listening");
            ibv_qp_init_attr attr{};
            attr.cap.max_send_wr = n_msgs;
            attr.cap.max_send_sge = 1;
            attr.sq_sig_all = 1;
            rdma_cm_id* id = nullptr;
            need_rc(rdma_create_ep(&id, res, nullptr, &attr), "create_ep active");
            rdma_freeaddrinfo(res);
            need(id->qp != nullptr, "the id's QP");
            rec.num("cli.qp_type", id->qp->qp_type);
            rec.num("cli.has_recv_cq", id->recv_cq != nullptr);
            PageBytes sbuf(largest * sizes.size());
            for (std::size_t i = 0; i < sizes.size(); ++i) {
                const auto v = pattern(sizes[i], static_cast<int>(i) + 1);
                std::memcpy(sbuf.data() + i * largest, v.data(), v.size());
            }
            ibv_mr* mr = rdma_reg_msgs(id, sbuf.data(), sbuf.size());
            need(mr != nullptr, "reg_msgs");
            need_rc(rdma_connect(id, nullptr), "connect");
            need(id->event && id->event->param.conn.private_data_len >= 4, "the REP's private data");
            std::uint32_t wire = 0;
            std::memcpy(&wire, id->event->param.conn.private_data, sizeof wire);
            const std::uint32_t srqn = ntohl(wire);
            rec.num("cli.srqn", srqn);
            rec.num("cli.qp_state", id->qp->state);
            for (std::size_t i = 0; i < sizes.size(); ++i) {
                ibv_sge sge{reinterpret_cast<std::uintptr_t>(sbuf.data() + i * largest),
                            static_cast<std::uint32_t>(sizes[i]), mr->lkey};
                ibv_send_wr wr{};
                wr.wr_id = i;
                wr.sg_list = &sge;
                wr.num_sge = 1;
                wr.opcode = IBV_WR_SEND;
                wr.qp_type.xrc.remote_srqn = srqn;
                ibv_send_wr* bad = nullptr;
                need_rc(ibv_post_send(id->qp, &wr, &bad), "post_send");
            }
            for (std::size_t i = 0; i < sizes.size(); ++i) {
                ibv_wc wc{};
                need(rdma_get_send_comp(id, &wc) == 1, "send comp");
                rec.num("cli.send" + std::to_string(i) + ".status", wc.status);
            }
            h.barrier("received");
            need_rc(rdma_disconnect(id), "disconnect");
            rdma_dereg_mr(mr);
            rdma_destroy_ep(id);
            rec.num("cli.done", 1);
        });
}

}  // namespace

TEST_CASE("rdma_cm XRC endpoints: an XRC_SEND id connects to an XRC_RECV id, whose XRC SRQ receives every byte",
          "[rdma_cm][xrc]") {
    const std::vector<std::size_t> sizes{16, 3000, 1};  // one packet, several at 2048 MTU, one byte
    const RunResult r = xrc_run(sizes);
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.num("srv.listen.qp_type") == IBV_QPT_XRC_RECV);
    CHECK(r.num("srv.qp_type") == IBV_QPT_XRC_RECV);
    CHECK(r.num("cli.qp_type") == IBV_QPT_XRC_SEND);
    CHECK(r.num("cli.has_recv_cq") == 0);  // an XRC initiator receives nothing
    CHECK(r.num("srv.qp_state") == IBV_QPS_RTS);
    CHECK(r.num("cli.qp_state") == IBV_QPS_RTS);
    CHECK(r.num("cli.srqn") == r.num("srv.srqn"));
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::string k = "srv.recv" + std::to_string(i);
        CHECK(r.num("cli.send" + std::to_string(i) + ".status") == IBV_WC_SUCCESS);
        CHECK(r.num(k + ".status") == IBV_WC_SUCCESS);
        CHECK(r.num(k + ".wr_id") == static_cast<long long>(i));  // an SRQ is FIFO
        CHECK(r.num(k + ".byte_len") == static_cast<long long>(sizes[i]));
        CHECK(r.num(k + ".mismatch") == -1);
        CHECK(r.num(k + ".qp_num_is_target") == 1);
    }
    CHECK(r.num("srv.done") == 1);
    CHECK(r.num("cli.done") == 1);
}

TEST_CASE("rdma_create_srq_ex needs the SRQ type, as librdmacm's does", "[rdma_cm][xrc]") {
    const RunResult r = run_pair(
        {},
        [](Host&, Record& rec) {
            rdma_cm_id* id = nullptr;
            need_rc(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_IB), "create_id");
            sockaddr_in self{};  // bound to the node's own address: the id has the device
            self.sin_family = AF_INET;
            inet_pton(AF_INET, "192.168.0.1", &self.sin_addr);
            need_rc(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&self)), "bind");
            ibv_srq_init_attr_ex x{};
            x.attr.max_wr = 4;
            x.attr.max_sge = 1;
            errno = 0;
            rec.num("no_type.rc", rdma_create_srq_ex(id, &x));
            rec.num("no_type.errno", errno);
            // A basic one with the type given.
            x.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
            x.srq_type = IBV_SRQT_BASIC;
            rec.num("basic.rc", rdma_create_srq_ex(id, &x));
            rec.num("basic.has_srq", id->srq != nullptr);
            rec.num("basic.has_recv_cq", id->recv_cq != nullptr);
            rdma_destroy_srq(id);
            // An XRC one: librdmacm's domain, and a CQ made for it.
            x = ibv_srq_init_attr_ex{};
            x.attr.max_wr = 4;
            x.attr.max_sge = 1;
            x.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
            x.srq_type = IBV_SRQT_XRC;
            rec.num("xrc.rc", rdma_create_srq_ex(id, &x));
            rec.num("xrc.has_xrcd", x.xrcd != nullptr);
            rec.num("xrc.cq_is_recv_cq", x.cq != nullptr && x.cq == id->recv_cq);
            rdma_destroy_srq(id);
            rec.num("xrc.recv_cq_after_destroy", id->recv_cq != nullptr);
            need_rc(rdma_destroy_id(id), "destroy_id");
        },
        {});
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.num("no_type.rc") == -1);
    CHECK(r.num("no_type.errno") == EINVAL);
    CHECK(r.num("basic.rc") == 0);
    CHECK(r.num("basic.has_srq") == 1);
    CHECK(r.num("basic.has_recv_cq") == 0);
    CHECK(r.num("xrc.rc") == 0);
    CHECK(r.num("xrc.has_xrcd") == 1);
    CHECK(r.num("xrc.cq_is_recv_cq") == 1);
    CHECK(r.num("xrc.recv_cq_after_destroy") == 0);
}

}  // namespace hcasim::test
