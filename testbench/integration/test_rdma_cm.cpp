// rdma_cm and rdma_verbs: connections made the way most RDMA software makes
// them, through <rdma/rdma_cma.h>, with IPoIB addresses, ARP, SA path
// records and IB CM MADs on the simulated fabric.
#include <catch2/catch.hpp>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "testbench/integration/harness.hpp"

namespace hcasim::test {
namespace {

sockaddr_in ip_addr(const char* ip, std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

// Takes the channel's next event; it must be `want` (its status goes to
// rec under key when given). The event is returned unacknowledged.
rdma_cm_event* expect(rdma_event_channel* ch, rdma_cm_event_type want, Record& rec, const std::string& key) {
    rdma_cm_event* e = nullptr;
    need_rc(rdma_get_cm_event(ch, &e), "rdma_get_cm_event");
    rec.set(key, rdma_event_str(e->event));
    rec.num(key + ".status", e->status);
    rec.num(key + ".at_us", static_cast<double>(sim::now_ps()) / 1e6);
    need(e->event == want, std::string("expected ") + rdma_event_str(want) + ", got " + rdma_event_str(e->event) +
                               " status " + std::to_string(e->status));
    return e;
}

void expect_ack(rdma_event_channel* ch, rdma_cm_event_type want, Record& rec, const std::string& key) {
    need_rc(rdma_ack_cm_event(expect(ch, want, rec, key)), "rdma_ack_cm_event");
}

ibv_qp_init_attr rc_attr(std::uint32_t depth = 16) {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = depth;
    a.cap.max_recv_wr = depth;
    a.cap.max_send_sge = 4;
    a.cap.max_recv_sge = 4;
    a.sq_sig_all = 1;
    return a;
}

constexpr std::uint16_t kPort = 7471;

}  // namespace

TEST_CASE("rdma_cm connects an rc qp with private data both ways, moves bytes with rdma_verbs and disconnects",
          "[rdma_cm]") {
    constexpr std::size_t kLen = 3000;
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            // Server: listen, accept with private data, receive a message,
            // answer it, then the client disconnects.
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* listen = nullptr;
            need_rc(rdma_create_id(ch, &listen, nullptr, RDMA_PS_TCP), "create_id");
            sockaddr_in any = ip_addr("0.0.0.0", kPort);
            need_rc(rdma_bind_addr(listen, sa(any)), "bind");
            need_rc(rdma_listen(listen, 4), "listen");
            h.barrier("listening");
            rdma_cm_event* req = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, rec, "srv.req");
            rdma_cm_id* id = req->id;
            rec.num("srv.req.listen_is_listener", req->listen_id == listen);
            rec.num("srv.req.pd_len", req->param.conn.private_data_len);
            rec.set("srv.req.pd", std::string(static_cast<const char*>(req->param.conn.private_data), 5));
            rec.num("srv.req.initiator_depth", req->param.conn.initiator_depth);
            char peer[32];
            inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(id))->sin_addr, peer, sizeof peer);
            rec.set("srv.peer", peer);
            rec.num("srv.local_port", ntohs(rdma_get_src_port(id)));
            need_rc(rdma_ack_cm_event(req), "ack");
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            std::vector<std::uint8_t> buf(kLen);
            ibv_mr* mr = rdma_reg_msgs(id, buf.data(), buf.size());
            need(mr != nullptr, "reg_msgs");
            need_rc(rdma_post_recv(id, nullptr, buf.data(), buf.size(), mr), "post_recv");
            rdma_conn_param p{};
            const char reply[] = "welcome";
            p.private_data = reply;
            p.private_data_len = sizeof reply;
            p.responder_resources = 1;
            p.initiator_depth = 1;
            need_rc(rdma_accept(id, &p), "accept");
            expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, rec, "srv.established");
            ibv_wc wc{};
            need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
            rec.num("srv.recv.status", static_cast<int>(wc.status));
            rec.num("srv.recv.len", wc.byte_len);
            const auto want = pattern(kLen, 77);
            rec.bytes("srv.recv", buf.data(), want.data(), kLen);
            // Echo it back.
            need_rc(rdma_post_send(id, nullptr, buf.data(), kLen, mr, 0), "post_send");
            need(rdma_get_send_comp(id, &wc) == 1, "send comp");
            rec.num("srv.send.status", static_cast<int>(wc.status));
            expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, rec, "srv.disconnected");
            need_rc(rdma_disconnect(id), "disconnect after the peer");
            expect_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, rec, "srv.timewait");
            need_rc(rdma_dereg_mr(mr), "dereg");
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy id");
            need_rc(rdma_destroy_id(listen), "destroy listen");
            rdma_destroy_event_channel(ch);
        },
        [](Host& h, Record& rec) {
            h.barrier("listening");
            rdma_event_channel* ch = rdma_create_event_channel();
            rdma_cm_id* id = nullptr;
            need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), "create_id");
            sockaddr_in dst = ip_addr("192.168.0.1", kPort);
            const sim::Tick t0 = sim::now_ps();
            need_rc(rdma_resolve_addr(id, nullptr, sa(dst), 2000), "resolve_addr");
            expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, rec, "cli.addr");
            need_rc(rdma_resolve_route(id, 2000), "resolve_route");
            expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, rec, "cli.route");
            rec.num("cli.route.num_paths", id->route.num_paths);
            rec.num("cli.route.dlid", ntohs(id->route.path_rec->dlid));
            rec.num("cli.route.packet_life", id->route.path_rec->packet_life_time);
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            std::vector<std::uint8_t> buf(kLen), back(kLen);
            fill_pattern(buf.data(), kLen, 77);
            ibv_mr* mr = rdma_reg_msgs(id, buf.data(), buf.size());
            ibv_mr* mr_back = rdma_reg_msgs(id, back.data(), back.size());
            need(mr && mr_back, "reg_msgs");
            need_rc(rdma_post_recv(id, nullptr, back.data(), kLen, mr_back), "post_recv");
            rdma_conn_param p{};
            const char hello[] = "hello";
            p.private_data = hello;
            p.private_data_len = sizeof hello;
            p.initiator_depth = 1;
            p.responder_resources = 1;
            p.retry_count = 7;
            p.rnr_retry_count = 7;
            need_rc(rdma_connect(id, &p), "connect");
            rdma_cm_event* est = expect(ch, RDMA_CM_EVENT_ESTABLISHED, rec, "cli.established");
            rec.set("cli.established.pd", std::string(static_cast<const char*>(est->param.conn.private_data), 7));
            need_rc(rdma_ack_cm_event(est), "ack");
            rec.num("cli.setup_us", static_cast<double>(sim::now_ps() - t0) / 1e6);
            need_rc(rdma_post_send(id, nullptr, buf.data(), kLen, mr, 0), "post_send");
            ibv_wc wc{};
            need(rdma_get_send_comp(id, &wc) == 1, "send comp");
            rec.num("cli.send.status", static_cast<int>(wc.status));
            need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
            rec.num("cli.recv.len", wc.byte_len);
            rec.bytes("cli.echo", back.data(), buf.data(), kLen);
            need_rc(rdma_disconnect(id), "disconnect");
            expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, rec, "cli.disconnected");
            expect_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, rec, "cli.timewait");
            need_rc(rdma_dereg_mr(mr), "dereg");
            need_rc(rdma_dereg_mr(mr_back), "dereg");
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy");
            rdma_destroy_event_channel(ch);
        });
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.get("srv.req.listen_is_listener") == "1");
    CHECK(r.num("srv.req.pd_len") == 56);  // a REQ's private data less rdma_cm's header
    CHECK(r.get("srv.req.pd") == std::string("hello", 5));
    CHECK(r.get("srv.peer") == "192.168.0.2");
    CHECK(r.num("srv.local_port") == kPort);
    CHECK(r.num("cli.route.num_paths") == 1);
    CHECK(r.num("cli.route.dlid") == 1);
    CHECK(r.num("cli.route.packet_life") == 18);
    CHECK(r.get("cli.established.pd") == std::string("welcome", 7));
    CHECK(r.num("srv.recv.status") == IBV_WC_SUCCESS);
    CHECK(r.num("srv.recv.len") == static_cast<long long>(kLen));
    CHECK(r.num("srv.recv.mismatch") == -1);
    CHECK(r.num("cli.echo.mismatch") == -1);
    CHECK(r.num("cli.recv.len") == static_cast<long long>(kLen));
    CHECK(r.real("cli.setup_us") > 5.0);
    CHECK(r.real("cli.setup_us") < 1000.0);
    // Time wait: the path's local ACK time-out (4.096 us x 2^19) after the DREQ/DREP.
    CHECK(r.real("cli.timewait.at_us") - r.real("cli.disconnected.at_us") > 2.0e6);
}

namespace {

// The rows of a CSV report: every line that starts with a digit.
std::vector<std::vector<double>> csv_rows(const std::string& out) {
    std::vector<std::vector<double>> rows;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0]))) continue;
        std::vector<double> row;
        std::istringstream cells(line);
        for (std::string cell; std::getline(cells, cell, ',');) row.push_back(std::atof(cell.c_str()));
        rows.push_back(row);
    }
    return rows;
}

}  // namespace

TEST_CASE("lat and bw --cm rdma_cm connect with rdma_cm (UD by SIDR) and give the figures of the out-of-band exchange",
          "[rdma_cm][cli]") {
    for (const std::string w : {"lat --sizes 2:4096 -n 200", "bw --sizes 64:65536 -n 400 --qps 4",
                                "lat --op read --sizes 64:4096 -n 100",
                                "lat --qp-type ud --op send --sizes 2:4096 -n 200",
                                "bw --qp-type ud --op send --sizes 64:4096 -n 200 --qps 4"}) {
        INFO(w);
        const auto a = run_hcasim(w + " --format csv");
        const auto b = run_hcasim(w + " --format csv --cm rdma_cm");
        REQUIRE(a.exit_code == 0);
        REQUIRE(b.exit_code == 0);
        const auto ra = csv_rows(a.out), rb = csv_rows(b.out);
        REQUIRE(ra.size() == rb.size());
        REQUIRE(!ra.empty());
        for (std::size_t i = 0; i < ra.size(); ++i) {
            REQUIRE(ra[i].size() == rb[i].size());
            CHECK(ra[i][0] == rb[i][0]);  // size
            CHECK(ra[i][1] == rb[i][1]);  // iterations
            // Averages: the same data path, started at another clock phase.
            const std::size_t avg = w.rfind("lat", 0) == 0 ? 5 : 3;
            CHECK(rb[i][avg] == Approx(ra[i][avg]).epsilon(0.01));
        }
    }
    // What rdma_cm cannot connect is refused by name.
    const auto uc = run_hcasim("lat --qp-type uc --cm rdma_cm", true);
    CHECK(uc.exit_code == 2);
    CHECK(uc.out.find("--cm rdma_cm") != std::string::npos);
    const auto bad = run_hcasim("bw --cm tcp", true);
    CHECK(bad.exit_code == 2);
    CHECK(bad.out.find("--cm") != std::string::npos);
}

TEST_CASE("hcasim connect makes every connection and prints rates and set-up percentiles, deterministically",
          "[rdma_cm][cli]") {
    const auto one = run_hcasim("connect --connections 50 --format csv");
    REQUIRE(one.exit_code == 0);
    const auto rows = csv_rows(one.out);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0][0] == 1);   // clients
    CHECK(rows[0][1] == 50);  // connections made
    CHECK(rows[0][3] > 100);  // per simulated second
    CHECK(rows[0][4] > 10);   // set-up min, us: firmware commands and CM messages
    CHECK(rows[0][4] <= rows[0][5]);
    CHECK(rows[0][5] <= rows[0][6]);
    CHECK(rows[0][6] <= rows[0][7]);
    const auto many = run_hcasim("connect --clients 16 --connections 5 --format csv");
    REQUIRE(many.exit_code == 0);
    const auto mrows = csv_rows(many.out);
    REQUIRE(mrows.size() == 1);
    CHECK(mrows[0][1] == 80);
    // A busier server: requests wait behind each other.
    CHECK(mrows[0][5] > rows[0][5]);
    // The same run twice: the same figures (wall time aside).
    const auto again = run_hcasim("connect --clients 16 --connections 5 --format csv");
    const auto arows = csv_rows(again.out);
    REQUIRE(arows.size() == 1);
    for (std::size_t i = 0; i + 1 < mrows[0].size(); ++i) CHECK(arows[0][i] == mrows[0][i]);
    const auto bad = run_hcasim("connect --clients 0", true);
    CHECK(bad.exit_code == 2);
    CHECK(bad.out.find("--clients") != std::string::npos);
    // A device too small for the workload: the failing call names the
    // parameters that bound it.
    const auto small = run_hcasim("connect --clients 2 --connections 3 --set hca.max_mr=1", true);
    CHECK(small.exit_code == 1);
    CHECK(small.out.find("rdma_reg_msgs failed: Cannot allocate memory (hca.max_mr)") != std::string::npos);
    const auto shallow = run_hcasim("connect --clients 2 --connections 3 --set hca.max_qp_wr=1", true);
    CHECK(shallow.exit_code == 1);
    CHECK(shallow.out.find("rdma_create_qp failed: Invalid argument (hca.max_qp, hca.max_qp_wr") != std::string::npos);
}

}  // namespace hcasim::test
