#include "testbench/workloads/connect.hpp"

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <map>
#include <stdexcept>
#include <string>

#include "testbench/workloads/rc_endpoint.hpp"

namespace hcasim::testbench {

namespace {

constexpr std::uint16_t kPort = 7174;
constexpr std::uint32_t kMessage = 64;
// What bounds rdma_create_qp: the QP and the CQs it makes for it.
constexpr const char* kQpBounds = "hca.max_qp, hca.max_qp_wr, hca.max_cq, hca.max_cqe";

// bounds: the parameters that bound what failed, for its message.
void ok(int rc, const char* what, const char* bounds = nullptr) {
    if (rc)
        throw std::runtime_error(std::string(what) + " failed: " + std::strerror(errno) +
                                 (bounds ? std::string(" (") + bounds + ")" : std::string()));
}

rdma_cm_event* next(rdma_event_channel* ch) {
    rdma_cm_event* e = nullptr;
    ok(rdma_get_cm_event(ch, &e), "rdma_get_cm_event");
    return e;
}

void expect(rdma_event_channel* ch, rdma_cm_event_type want) {
    rdma_cm_event* e = next(ch);
    const rdma_cm_event_type got = e->event;
    const int status = e->status;
    rdma_ack_cm_event(e);
    if (got != want)
        throw std::runtime_error(std::string("connect workload: expected ") + rdma_event_str(want) + ", got " +
                                 rdma_event_str(got) + " (status " + std::to_string(status) + ")");
}

ibv_qp_init_attr qp_attr() {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.sq_sig_all = 1;
    return a;
}

double us(sim::Tick t) { return static_cast<double>(t) / 1e6; }

double percentile(const std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

// Node 0: accepts every request, checks each connection's message, and
// frees the connection when the client disconnects.
void serve(Host& h, int total) {
    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) throw std::runtime_error("rdma_create_event_channel failed");
    rdma_cm_id* listen = nullptr;
    ok(rdma_create_id(ch, &listen, nullptr, RDMA_PS_TCP), "rdma_create_id");
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_port = htons(kPort);
    ok(rdma_bind_addr(listen, reinterpret_cast<sockaddr*>(&any)), "rdma_bind_addr");
    ok(rdma_listen(listen, 0), "rdma_listen");
    h.barrier("connect/listening");
    struct Conn {
        std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(kMessage);
        ibv_mr* mr = nullptr;
    };
    std::map<rdma_cm_id*, Conn> conns;
    int done = 0;
    while (done < total) {
        rdma_cm_event* e = next(ch);
        rdma_cm_id* id = e->id;
        const rdma_cm_event_type type = e->event;
        rdma_ack_cm_event(e);
        switch (type) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: {
            ibv_qp_init_attr a = qp_attr();
            ok(rdma_create_qp(id, nullptr, &a), "rdma_create_qp", kQpBounds);
            Conn& c = conns[id];
            c.mr = need(rdma_reg_msgs(id, c.buf.data(), c.buf.size()), "rdma_reg_msgs", "hca.max_mr");
            ok(rdma_post_recv(id, nullptr, c.buf.data(), c.buf.size(), c.mr), "rdma_post_recv");
            rdma_conn_param p{};
            p.responder_resources = 1;
            p.initiator_depth = 1;
            ok(rdma_accept(id, &p), "rdma_accept");
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED: break;
        case RDMA_CM_EVENT_DISCONNECTED: {
            Conn& c = conns.at(id);
            ibv_wc wc{};
            if (ibv_poll_cq(id->recv_cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS || wc.byte_len != kMessage)
                throw std::runtime_error("connect workload: a connection's message did not arrive");
            rdma_disconnect(id);
            rdma_dereg_mr(c.mr);
            rdma_destroy_qp(id);
            conns.erase(id);
            rdma_destroy_id(id);
            ++done;
            break;
        }
        default:
            throw std::runtime_error(std::string("connect workload: server got ") + rdma_event_str(type));
        }
    }
    rdma_destroy_id(listen);
    rdma_destroy_event_channel(ch);
}

void client(Host& h, int connections, std::vector<double>& setup, std::vector<double>& teardown, sim::Tick& first,
            sim::Tick& last) {
    h.barrier("connect/listening");
    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) throw std::runtime_error("rdma_create_event_channel failed");
    rdma_addrinfo hints{};
    hints.ai_port_space = RDMA_PS_TCP;
    rdma_addrinfo* res = nullptr;
    if (rdma_getaddrinfo("node0", std::to_string(kPort).c_str(), &hints, &res))
        throw std::runtime_error("rdma_getaddrinfo(node0) failed");
    std::vector<std::uint8_t> msg(kMessage, static_cast<std::uint8_t>(h.index()));
    for (int m = 0; m < connections; ++m) {
        rdma_cm_id* id = nullptr;
        ok(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), "rdma_create_id");
        const sim::Tick t0 = h.now();
        first = std::min(first, t0);
        ok(rdma_resolve_addr(id, nullptr, res->ai_dst_addr, 2000), "rdma_resolve_addr");
        expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
        ok(rdma_resolve_route(id, 2000), "rdma_resolve_route");
        expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
        ibv_qp_init_attr a = qp_attr();
        ok(rdma_create_qp(id, nullptr, &a), "rdma_create_qp", kQpBounds);
        ibv_mr* mr = need(rdma_reg_msgs(id, msg.data(), msg.size()), "rdma_reg_msgs", "hca.max_mr");
        rdma_conn_param p{};
        p.responder_resources = 1;
        p.initiator_depth = 1;
        p.retry_count = 7;
        p.rnr_retry_count = 7;
        ok(rdma_connect(id, &p), "rdma_connect");
        expect(ch, RDMA_CM_EVENT_ESTABLISHED);
        setup.push_back(us(h.now() - t0));
        ok(rdma_post_send(id, nullptr, msg.data(), msg.size(), mr, 0), "rdma_post_send");
        ibv_wc wc{};
        if (rdma_get_send_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
            throw std::runtime_error("connect workload: a send failed");
        const sim::Tick t2 = h.now();
        ok(rdma_disconnect(id), "rdma_disconnect");
        expect(ch, RDMA_CM_EVENT_DISCONNECTED);
        teardown.push_back(us(h.now() - t2));
        last = std::max(last, h.now());
        rdma_dereg_mr(mr);
        rdma_destroy_qp(id);
        rdma_destroy_id(id);
    }
    rdma_freeaddrinfo(res);
    rdma_destroy_event_channel(ch);
}

}  // namespace

ConnectResult run_connect(System& sys, const ConnectOptions& o) {
    if (o.clients < 1 || o.connections < 1) throw std::invalid_argument("connect needs at least one client and connection");
    if (sys.nodes() < o.clients + 1)
        throw std::invalid_argument("connect with " + std::to_string(o.clients) + " clients needs " +
                                    std::to_string(o.clients + 1) + " nodes");
    std::vector<std::vector<double>> setup(static_cast<std::size_t>(o.clients)), teardown(setup.size());
    sim::Tick first = ~sim::Tick(0), last = 0;
    std::vector<System::Program> programs;
    programs.push_back([&](Host& h) { serve(h, o.clients * o.connections); });
    for (int i = 0; i < o.clients; ++i)
        programs.push_back([&, i](Host& h) {
            client(h, o.connections, setup[static_cast<std::size_t>(i)], teardown[static_cast<std::size_t>(i)], first,
                   last);
        });
    const auto w0 = std::chrono::steady_clock::now();
    sys.run(programs);
    ConnectResult r;
    r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    for (std::size_t i = 0; i < setup.size(); ++i) {
        r.setup_us.insert(r.setup_us.end(), setup[i].begin(), setup[i].end());
        r.teardown_us.insert(r.teardown_us.end(), teardown[i].begin(), teardown[i].end());
    }
    std::sort(r.setup_us.begin(), r.setup_us.end());
    std::sort(r.teardown_us.begin(), r.teardown_us.end());
    r.connections = static_cast<int>(r.setup_us.size());
    r.seconds = last > first ? static_cast<double>(last - first) / 1e12 : 0;
    r.per_second = r.seconds > 0 ? r.connections / r.seconds : 0;
    return r;
}

void print_connect(std::ostream& os, bool csv, const ConnectOptions& o, const ConnectResult& r) {
    const auto& s = r.setup_us;
    const auto& t = r.teardown_us;
    if (csv) {
        os << "clients,connections,sim_seconds,connections_per_s,setup_min_us,setup_median_us,setup_p99_us,"
              "setup_max_us,teardown_median_us,wall_seconds\n";
        os << o.clients << "," << r.connections << "," << r.seconds << "," << r.per_second << "," << percentile(s, 0)
           << "," << percentile(s, 0.5) << "," << percentile(s, 0.99) << "," << percentile(s, 1) << ","
           << percentile(t, 0.5) << "," << r.wall_seconds << "\n";
        return;
    }
    os << std::fixed << std::setprecision(2);
    os << " rdma_cm connection set-up (RC, RDMA_PS_TCP): " << o.clients << " client(s) x " << o.connections
       << " connection(s) to node0\n";
    os << " connections        : " << r.connections << " in " << r.seconds * 1e3 << " ms simulated\n";
    os << " connections/second : " << r.per_second << "\n";
    os << " set-up [usec]      : min " << percentile(s, 0) << "  median " << percentile(s, 0.5) << "  99% "
       << percentile(s, 0.99) << "  max " << percentile(s, 1) << "\n";
    os << " tear-down [usec]   : min " << percentile(t, 0) << "  median " << percentile(t, 0.5) << "  max "
       << percentile(t, 1) << "\n";
    os << " (set-up: rdma_resolve_addr to ESTABLISHED; tear-down: rdma_disconnect to DISCONNECTED)\n";
}

}  // namespace hcasim::testbench
