// rdma_cm beyond RC connections: RDMA_PS_UDP ids that find the server's UD
// QP with SIDR (accepted with private data both ways, or rejected), and
// rdma_create_ep built from rdma_getaddrinfo in the passive and the active
// role, as the programming manual's rdma_server and rdma_client do.
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

constexpr std::uint16_t kUdPort = 7490;
constexpr const char* kEpService = "7491";
constexpr std::size_t kGrh = 40;

sockaddr_in ip_addr(const char* ip, std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}
sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }
double now_us() { return static_cast<double>(sim::now_ps()) / 1e6; }

rdma_cm_event* expect(rdma_event_channel* ch, rdma_cm_event_type want, Record& rec, const std::string& key) {
    rdma_cm_event* e = nullptr;
    need_rc(rdma_get_cm_event(ch, &e), "rdma_get_cm_event");
    rec.set(key, rdma_event_str(e->event));
    rec.num(key + ".status", e->status);
    rec.num(key + ".at_us", now_us());
    need(e->event == want, key + ": expected " + rdma_event_str(want) + ", got " + rdma_event_str(e->event) +
                               " status " + std::to_string(e->status));
    return e;
}
// The event's private data as text, up to its first zero byte.
std::string text_of(const rdma_cm_event* e) {
    const auto* p = static_cast<const char*>(e->param.ud.private_data);
    if (!p) return "<none>";
    return std::string(p, strnlen(p, e->param.ud.private_data_len));
}
std::vector<std::uint8_t> pattern(std::size_t n, int seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed * 29 + i * 13 + 1);
    return v;
}
ibv_qp_init_attr ud_attr() {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_UD;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.sq_sig_all = 1;
    return a;
}
void dump(const RunResult& r) {
    for (const auto& [k, v] : r.kv) UNSCOPED_INFO(k << "=" << v);
}

// Node 0 serves RDMA_PS_UDP: it accepts node 1 (private data "welcome"),
// echoes node 1's datagram back with every byte inverted, and rejects
// node 2 (private data "go away").
void udp_server(Host& h, Record& rec) {
    rdma_event_channel* ch = rdma_create_event_channel();
    need(ch != nullptr, "channel");
    rdma_cm_id* l = nullptr;
    need_rc(rdma_create_id(ch, &l, nullptr, RDMA_PS_UDP), "create_id");
    sockaddr_in any = ip_addr("0.0.0.0", kUdPort);
    need_rc(rdma_bind_addr(l, sa(any)), "bind");
    need_rc(rdma_listen(l, 4), "listen");
    h.barrier("listening");
    PageBytes buf(kGrh + 4096);
    rdma_cm_id* accepted = nullptr;
    ibv_mr* mr = nullptr;
    for (int i = 0; i < 2; ++i) {
        rdma_cm_event* e = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, rec, "srv.req" + std::to_string(i));
        rdma_cm_id* id = e->id;
        const std::string said = text_of(e);
        rec.set("srv.req" + std::to_string(i) + ".pd", said);
        need_rc(rdma_ack_cm_event(e), "ack");
        if (said == "node2") {
            const char no[] = "go away";
            need_rc(rdma_reject(id, no, sizeof no), "reject");
            need_rc(rdma_destroy_id(id), "destroy");
            continue;
        }
        ibv_qp_init_attr qa = ud_attr();
        need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
        mr = rdma_reg_msgs(id, buf.data(), buf.size());
        need(mr != nullptr, "reg_msgs");
        need_rc(rdma_post_recv(id, nullptr, buf.data(), buf.size(), mr), "post_recv");
        const char yes[] = "welcome";
        rdma_conn_param p{};
        p.private_data = yes;
        p.private_data_len = sizeof yes;
        need_rc(rdma_accept(id, &p), "accept");
        rec.num("srv.qpn", id->qp->qp_num);
        accepted = id;
    }
    need(accepted != nullptr, "a client accepted");
    // The datagram: its sender and bytes; the answer goes back through an
    // address handle made from the completion, as UD servers do.
    ibv_wc wc{};
    need(rdma_get_recv_comp(accepted, &wc) == 1, "recv comp");
    rec.num("srv.recv.status", wc.status);
    rec.num("srv.recv.byte_len", wc.byte_len);
    rec.num("srv.recv.grh", (wc.wc_flags & IBV_WC_GRH) != 0);
    rec.num("srv.recv.src_qp", wc.src_qp);
    const auto want = pattern(wc.byte_len > kGrh ? wc.byte_len - kGrh : 0, 1);
    rec.num("srv.recv.mismatch", first_mismatch(buf.data() + kGrh, want.data(), want.size()));
    ibv_ah* ah = ibv_create_ah_from_wc(accepted->pd, &wc, reinterpret_cast<ibv_grh*>(buf.data()), 1);
    need(ah != nullptr, "create_ah_from_wc");
    PageBytes out(want.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint8_t>(~buf[kGrh + i]);
    ibv_mr* omr = rdma_reg_msgs(accepted, out.data(), out.size());
    need(omr != nullptr, "reg_msgs");
    need_rc(rdma_post_ud_send(accepted, nullptr, out.data(), out.size(), omr, 0, ah, wc.src_qp), "post_ud_send");
    need(rdma_get_send_comp(accepted, &wc) == 1, "send comp");
    rec.num("srv.send.status", wc.status);
    h.barrier("echoed");
    ibv_destroy_ah(ah);
    rdma_dereg_mr(omr);
    rdma_dereg_mr(mr);
    rdma_destroy_qp(accepted);
    need_rc(rdma_destroy_id(accepted), "destroy");
    need_rc(rdma_destroy_id(l), "destroy listener");
    rdma_destroy_event_channel(ch);
}

Program udp_client(int node) {
    return [node](Host& h, Record& rec) {
        const std::string k = "cli" + std::to_string(node);
        rdma_event_channel* ch = rdma_create_event_channel();
        need(ch != nullptr, "channel");
        rdma_cm_id* id = nullptr;
        need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP), "create_id");
        h.barrier("listening");
        if (node == 2) h.sleep(100 * sim::kPsPerUs);  // after node 1: the server takes them in turn
        sockaddr_in dst = ip_addr("192.168.0.1", kUdPort);
        need_rc(rdma_resolve_addr(id, nullptr, sa(dst), 2000), "resolve_addr");
        need_rc(rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, rec, k + ".addr")), "ack");
        need_rc(rdma_resolve_route(id, 2000), "resolve_route");
        need_rc(rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, rec, k + ".route")), "ack");
        ibv_qp_init_attr qa = ud_attr();
        need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
        const std::string hello = "node" + std::to_string(node);
        rdma_conn_param p{};
        p.private_data = hello.c_str();
        p.private_data_len = static_cast<std::uint8_t>(hello.size() + 1);
        const double t0 = now_us();
        need_rc(rdma_connect(id, &p), "connect");
        rdma_cm_event* e = nullptr;
        need_rc(rdma_get_cm_event(ch, &e), "get event");
        rec.set(k + ".result", rdma_event_str(e->event));
        rec.num(k + ".result.status", e->status);
        rec.num(k + ".result.us", now_us() - t0);
        rec.set(k + ".result.pd", text_of(e));
        if (e->event != RDMA_CM_EVENT_ESTABLISHED) {
            need_rc(rdma_ack_cm_event(e), "ack");
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy");
            rdma_destroy_event_channel(ch);
            h.barrier("echoed");
            return;
        }
        const rdma_ud_param ud = e->param.ud;
        rec.num(k + ".ud.qp_num", ud.qp_num);
        rec.num(k + ".ud.qkey", ud.qkey);
        rec.num(k + ".ud.dlid", ud.ah_attr.dlid);
        need_rc(rdma_ack_cm_event(e), "ack");
        ibv_ah* ah = ibv_create_ah(id->pd, const_cast<ibv_ah_attr*>(&ud.ah_attr));
        need(ah != nullptr, "create_ah");
        PageBytes rbuf(kGrh + 4096);
        const auto sent = pattern(1000, 1);
        PageBytes sbuf(sent.begin(), sent.end());
        ibv_mr* rmr = rdma_reg_msgs(id, rbuf.data(), rbuf.size());
        ibv_mr* smr = rdma_reg_msgs(id, sbuf.data(), sbuf.size());
        need(rmr && smr, "reg_msgs");
        need_rc(rdma_post_recv(id, nullptr, rbuf.data(), rbuf.size(), rmr), "post_recv");
        need_rc(rdma_post_ud_send(id, nullptr, sbuf.data(), sbuf.size(), smr, 0, ah, ud.qp_num), "post_ud_send");
        ibv_wc wc{};
        need(rdma_get_send_comp(id, &wc) == 1, "send comp");
        rec.num(k + ".send.status", wc.status);
        rec.num(k + ".qpn", id->qp->qp_num);
        need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
        rec.num(k + ".echo.status", wc.status);
        rec.num(k + ".echo.byte_len", wc.byte_len);
        std::vector<std::uint8_t> want(sbuf.size());
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<std::uint8_t>(~sbuf[i]);
        rec.num(k + ".echo.mismatch", first_mismatch(rbuf.data() + kGrh, want.data(), want.size()));
        h.barrier("echoed");
        ibv_destroy_ah(ah);
        rdma_dereg_mr(rmr);
        rdma_dereg_mr(smr);
        rdma_destroy_qp(id);
        need_rc(rdma_destroy_id(id), "destroy");
        rdma_destroy_event_channel(ch);
    };
}

RunResult udp_run() {
    const Overrides cfg{{"fabric.topology", "switch"}, {"fabric.nodes", "3"}};
    return run_programs(cfg, {udp_server, udp_client(1), udp_client(2)}, 3);
}

}  // namespace

TEST_CASE("RDMA_PS_UDP: SIDR finds the server's UD QP with private data both ways, datagrams move both ways byte "
          "for byte, and a rejected client gets UNREACHABLE with status 2 and the server's private data",
          "[rdma_cm][sidr]") {
    const RunResult r = udp_run();
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.get("srv.req0.pd") == "node1");
    CHECK(r.get("srv.req1.pd") == "node2");
    CHECK(r.get("cli1.result") == "RDMA_CM_EVENT_ESTABLISHED");
    CHECK(r.num("cli1.result.status") == 0);
    CHECK(r.get("cli1.result.pd") == "welcome");
    CHECK(r.num("cli1.ud.qp_num") == r.num("srv.qpn"));
    CHECK(r.unum("cli1.ud.qkey") == RDMA_UDP_QKEY);
    CHECK(r.num("cli1.ud.dlid") == 1);  // node 0's LID
    // SIDR_REQ and SIDR_REP through the switch and the firmware: tens of
    // microseconds, not the CM's seconds of time-out.
    CHECK(r.real("cli1.result.us") < 1000.0);
    CHECK(r.num("cli1.send.status") == IBV_WC_SUCCESS);
    CHECK(r.num("srv.recv.status") == IBV_WC_SUCCESS);
    CHECK(r.num("srv.recv.byte_len") == static_cast<long long>(kGrh + 1000));
    // Inside one subnet SIDR's address handle has no GRH (the GRH area of
    // the receive buffer is still skipped).
    CHECK(r.num("srv.recv.grh") == 0);
    CHECK(r.num("srv.recv.src_qp") == r.num("cli1.qpn"));
    CHECK(r.num("srv.recv.mismatch") == -1);
    CHECK(r.num("srv.send.status") == IBV_WC_SUCCESS);
    CHECK(r.num("cli1.echo.status") == IBV_WC_SUCCESS);
    CHECK(r.num("cli1.echo.byte_len") == static_cast<long long>(kGrh + 1000));
    CHECK(r.num("cli1.echo.mismatch") == -1);
    CHECK(r.get("cli2.result") == "RDMA_CM_EVENT_UNREACHABLE");
    CHECK(r.num("cli2.result.status") == 2);  // IB_SIDR_REJECT, as the kernel reports it
    CHECK(r.get("cli2.result.pd") == "go away");
}

TEST_CASE("SIDR runs are deterministic", "[rdma_cm][sidr]") {
    const RunResult a = udp_run(), b = udp_run();
    INFO(a.error << " / " << b.error);
    REQUIRE(a.ok);
    REQUIRE(b.ok);
    CHECK(a.has("cli1.result.us"));
    CHECK(a.kv == b.kv);
}

TEST_CASE("rdma_create_ep from rdma_getaddrinfo: a passive endpoint takes a request with its QP made, an active one "
          "connects by host name, and bytes move both ways",
          "[rdma_cm][create_ep]") {
    constexpr std::size_t kLen = 777;
    auto qp_attr = []() {
        ibv_qp_init_attr a{};
        a.cap.max_send_wr = 2;
        a.cap.max_recv_wr = 2;
        a.cap.max_send_sge = 1;
        a.cap.max_recv_sge = 1;
        a.sq_sig_all = 1;
        return a;
    };
    const RunResult r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            rdma_addrinfo hints{}, *res = nullptr;
            hints.ai_flags = RAI_PASSIVE;
            hints.ai_port_space = RDMA_PS_TCP;
            need_rc(rdma_getaddrinfo(nullptr, kEpService, &hints, &res), "getaddrinfo");
            rec.num("srv.ai_qp_type", res->ai_qp_type);
            rec.num("srv.ai_src_port", ntohs(reinterpret_cast<sockaddr_in*>(res->ai_src_addr)->sin_port));
            ibv_qp_init_attr attr = qp_attr();
            rdma_cm_id* listen_id = nullptr;
            need_rc(rdma_create_ep(&listen_id, res, nullptr, &attr), "create_ep passive");
            need_rc(rdma_listen(listen_id, 2), "listen");
            h.barrier("listening");
            rdma_cm_id* id = nullptr;
            need_rc(rdma_get_request(listen_id, &id), "get_request");
            rec.num("srv.has_qp", id->qp != nullptr);
            const auto sent = pattern(kLen, 2);
            PageBytes rbuf(kLen), sbuf(sent.begin(), sent.end());
            ibv_mr* rmr = rdma_reg_msgs(id, rbuf.data(), rbuf.size());
            ibv_mr* smr = rdma_reg_msgs(id, sbuf.data(), sbuf.size());
            need(rmr && smr, "reg_msgs");
            need_rc(rdma_post_recv(id, nullptr, rbuf.data(), rbuf.size(), rmr), "post_recv");
            need_rc(rdma_accept(id, nullptr), "accept");
            ibv_wc wc{};
            need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
            rec.num("srv.recv.status", wc.status);
            const auto want = pattern(kLen, 1);
            rec.num("srv.recv.mismatch", first_mismatch(rbuf.data(), want.data(), kLen));
            need_rc(rdma_post_send(id, nullptr, sbuf.data(), sbuf.size(), smr, 0), "post_send");
            need(rdma_get_send_comp(id, &wc) == 1, "send comp");
            rec.num("srv.send.status", wc.status);
            need_rc(rdma_disconnect(id), "disconnect");
            rdma_dereg_mr(rmr);
            rdma_dereg_mr(smr);
            rdma_destroy_ep(id);
            rdma_destroy_ep(listen_id);
            rdma_freeaddrinfo(res);
        },
        [&](Host& h, Record& rec) {
            rdma_addrinfo hints{}, *res = nullptr;
            hints.ai_port_space = RDMA_PS_TCP;
            need_rc(rdma_getaddrinfo("node0", kEpService, &hints, &res), "getaddrinfo");
            char dst[32] = {};
            inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_dst_addr)->sin_addr, dst, sizeof dst);
            rec.set("cli.ai_dst", dst);
            h.barrier("listening");
            ibv_qp_init_attr attr = qp_attr();
            rdma_cm_id* id = nullptr;
            need_rc(rdma_create_ep(&id, res, nullptr, &attr), "create_ep active");
            rec.num("cli.has_qp", id->qp != nullptr);
            const auto sent = pattern(kLen, 1);
            PageBytes rbuf(kLen), sbuf(sent.begin(), sent.end());
            ibv_mr* rmr = rdma_reg_msgs(id, rbuf.data(), rbuf.size());
            ibv_mr* smr = rdma_reg_msgs(id, sbuf.data(), sbuf.size());
            need(rmr && smr, "reg_msgs");
            need_rc(rdma_post_recv(id, nullptr, rbuf.data(), rbuf.size(), rmr), "post_recv");
            need_rc(rdma_connect(id, nullptr), "connect");
            rec.num("cli.connected_at_us", now_us());
            need_rc(rdma_post_send(id, nullptr, sbuf.data(), sbuf.size(), smr, 0), "post_send");
            ibv_wc wc{};
            need(rdma_get_send_comp(id, &wc) == 1, "send comp");
            rec.num("cli.send.status", wc.status);
            need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
            rec.num("cli.recv.status", wc.status);
            const auto want = pattern(kLen, 2);
            rec.num("cli.recv.mismatch", first_mismatch(rbuf.data(), want.data(), kLen));
            // The server disconnects: the synchronous id's disconnect answers it.
            need_rc(rdma_disconnect(id), "disconnect");
            rdma_dereg_mr(rmr);
            rdma_dereg_mr(smr);
            rdma_destroy_ep(id);
            rdma_freeaddrinfo(res);
        });
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.num("srv.ai_qp_type") == IBV_QPT_RC);
    CHECK(r.num("srv.ai_src_port") == 7491);
    CHECK(r.get("cli.ai_dst") == "192.168.0.1");
    CHECK(r.num("srv.has_qp") == 1);
    CHECK(r.num("cli.has_qp") == 1);
    CHECK(r.num("srv.recv.status") == IBV_WC_SUCCESS);
    CHECK(r.num("srv.recv.mismatch") == -1);
    CHECK(r.num("srv.send.status") == IBV_WC_SUCCESS);
    CHECK(r.num("cli.send.status") == IBV_WC_SUCCESS);
    CHECK(r.num("cli.recv.status") == IBV_WC_SUCCESS);
    CHECK(r.num("cli.recv.mismatch") == -1);
}

}  // namespace hcasim::test
