// rdma_cm connections that do not simply succeed, and many that do:
// rejections (by the listener, for a missing service, for a full backlog),
// time-outs, unreachable addresses, argument errors, rdma_migrate_id, a
// thousand connections one after another and a hundred at once through a
// switch, and the determinism of all of it.
#include <catch2/catch.hpp>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "testbench/integration/harness.hpp"

namespace hcasim::test {
namespace {

constexpr std::uint16_t kPort = 7471;
constexpr sim::Tick kMs = sim::kPsPerMs;

sockaddr_in ip_addr(const char* ip, std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

std::string node_ip(int node) { return "192.168.0." + std::to_string(node + 1); }

std::string peer_ip(rdma_cm_id* id) {
    char peer[32] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(id))->sin_addr, peer, sizeof peer);
    return peer;
}

double now_us() { return static_cast<double>(sim::now_ps()) / 1e6; }

// Takes the channel's next event; it must be `want` (its status and time
// go to rec under key). The event is returned unacknowledged.
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

void expect_ack(rdma_event_channel* ch, rdma_cm_event_type want, Record& rec, const std::string& key) {
    need_rc(rdma_ack_cm_event(expect(ch, want, rec, key)), "rdma_ack_cm_event");
}

// "empty" when the channel has no event (rdma_get_cm_event fails with
// EAGAIN on a non-blocking channel), else what it returned.
std::string poll_channel(rdma_event_channel* ch) {
    const int flags = fcntl(ch->fd, F_GETFL);
    need(flags >= 0 && fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) == 0, "fcntl O_NONBLOCK");
    rdma_cm_event* e = nullptr;
    errno = 0;
    const int rc = rdma_get_cm_event(ch, &e);
    const int err = errno;
    need(fcntl(ch->fd, F_SETFL, flags) == 0, "fcntl restore");
    if (rc == 0) {
        const std::string what = std::string("event ") + rdma_event_str(e->event);
        rdma_ack_cm_event(e);
        return what;
    }
    if (rc == -1 && err == EAGAIN) return "empty";
    return "rc " + std::to_string(rc) + " errno " + std::to_string(err);
}

// The errno of a call expected to fail with -1 ("rc N" if it returned N).
std::string failure(int rc) {
    if (rc != -1) return "rc " + std::to_string(rc);
    return std::strerror(errno);
}

ibv_qp_init_attr rc_attr(std::uint32_t depth = 8) {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = depth;
    a.cap.max_recv_wr = depth;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.sq_sig_all = 1;
    return a;
}

// An id on ch with its address and route resolved toward ip:port.
rdma_cm_id* resolved_id(rdma_event_channel* ch, const std::string& ip, std::uint16_t port, Record& rec,
                        const std::string& key) {
    rdma_cm_id* id = nullptr;
    need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), key + " create_id");
    sockaddr_in dst = ip_addr(ip.c_str(), port);
    need_rc(rdma_resolve_addr(id, nullptr, sa(dst), 2000), key + " resolve_addr");
    expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, rec, key + ".addr");
    need_rc(rdma_resolve_route(id, 2000), key + " resolve_route");
    expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, rec, key + ".route");
    return id;
}

// A listener on 0.0.0.0:port.
rdma_cm_id* listener(rdma_event_channel* ch, std::uint16_t port, int backlog) {
    rdma_cm_id* l = nullptr;
    need_rc(rdma_create_id(ch, &l, nullptr, RDMA_PS_TCP), "create listen id");
    sockaddr_in any = ip_addr("0.0.0.0", port);
    need_rc(rdma_bind_addr(l, sa(any)), "bind");
    need_rc(rdma_listen(l, backlog), "listen");
    return l;
}

rdma_conn_param conn_param(const void* pd, std::uint8_t len) {
    rdma_conn_param p{};
    p.private_data = pd;
    p.private_data_len = len;
    p.initiator_depth = 1;
    p.responder_resources = 1;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    return p;
}

// Private data of a received event against want padded with zeros to
// the event's whole area: <key>.pd_len, <key>.pd.mismatch.
void record_private_data(Record& rec, const std::string& key, const rdma_cm_event* e, const void* want,
                         std::size_t want_len) {
    const std::size_t n = e->param.conn.private_data_len;
    rec.num(key + ".pd_len", n);
    rec.num(key + ".pd_null", e->param.conn.private_data == nullptr);
    if (!e->param.conn.private_data || n == 0) return;
    std::vector<std::uint8_t> expected(std::max(n, want_len), 0);
    if (want_len) std::memcpy(expected.data(), want, want_len);
    rec.bytes(key + ".pd", static_cast<const std::uint8_t*>(e->param.conn.private_data), expected.data(), n);
}

// ---------------------------------------------------------------------------
// The listener rejects the request with private data (run twice by the
// determinism test too).

const char kNoThanks[] = "no-thanks";  // 10 bytes with its NUL
const char kPlease[] = "please";

RunResult reject_run() {
    return run_pair(
        {},
        [](Host& h, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* l = listener(ch, kPort, 4);
            h.barrier("listening");
            rdma_cm_event* req = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, rec, "srv.req");
            rdma_cm_id* id = req->id;
            rec.num("srv.req.listen_is_listener", req->listen_id == l);
            rec.num("srv.req.id_is_new", id != l);
            record_private_data(rec, "srv.req", req, kPlease, sizeof kPlease);
            rec.set("srv.req.peer", peer_ip(id));
            rec.num("srv.reject_rc", rdma_reject(id, kNoThanks, sizeof kNoThanks));
            need_rc(rdma_ack_cm_event(req), "ack");
            // A rejected request's id has nothing left to wait for.
            rec.num("srv.destroy_rc", rdma_destroy_id(id));
            h.barrier("rejected");
            // Nothing else ever comes: no REQ resend, no event of the dead id.
            h.sleep(10 * 1000 * kMs);
            rec.set("srv.after", poll_channel(ch));
            rec.num("srv.destroy_listen_rc", rdma_destroy_id(l));
            rdma_destroy_event_channel(ch);
        },
        [](Host& h, Record& rec) {
            h.barrier("listening");
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* id = resolved_id(ch, node_ip(0), kPort, rec, "cli");
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            rdma_conn_param p = conn_param(kPlease, sizeof kPlease);
            rec.num("cli.connect_at_us", now_us());
            need_rc(rdma_connect(id, &p), "connect");
            rdma_cm_event* e = expect(ch, RDMA_CM_EVENT_REJECTED, rec, "cli.rejected");
            rec.num("cli.rejected.id_is_ours", e->id == id);
            record_private_data(rec, "cli.rejected", e, kNoThanks, sizeof kNoThanks);
            need_rc(rdma_ack_cm_event(e), "ack");
            h.barrier("rejected");
            rec.set("cli.after", poll_channel(ch));
            rdma_destroy_qp(id);
            rec.num("cli.destroy_rc", rdma_destroy_id(id));
            rdma_destroy_event_channel(ch);
        });
}

// ---------------------------------------------------------------------------
// A listen backlog of 2 and 5 requests before the listener looks (run
// twice by the determinism test too).

constexpr int kBacklogClients = 5;

const Overrides kSixNodes{{"fabric.topology", "switch"}, {"fabric.nodes", "6"}};

RunResult backlog_run() {
    std::vector<Program> programs;
    programs.push_back([](Host& h, Record& rec) {
        rdma_event_channel* ch = rdma_create_event_channel();
        need(ch != nullptr, "channel");
        rdma_cm_id* l = listener(ch, kPort, 2);
        h.barrier("listening");
        h.barrier("requested");
        // Every REQ has arrived (they take microseconds) before the
        // listener takes its first event.
        h.sleep(10 * kMs);
        std::set<rdma_cm_id*> ids;
        for (int i = 0; i < 2; ++i) {
            rdma_cm_event* req = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, rec, "srv.req" + std::to_string(i));
            rdma_cm_id* id = req->id;
            rec.set("srv.req" + std::to_string(i) + ".peer", peer_ip(id));
            need_rc(rdma_ack_cm_event(req), "ack");
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            rdma_conn_param p = conn_param(nullptr, 0);
            need_rc(rdma_accept(id, &p), "accept");
            ids.insert(id);
        }
        std::set<rdma_cm_id*> established;
        for (int i = 0; i < 2; ++i) {
            rdma_cm_event* e = expect(ch, RDMA_CM_EVENT_ESTABLISHED, rec, "srv.est" + std::to_string(i));
            established.insert(e->id);
            need_rc(rdma_ack_cm_event(e), "ack");
        }
        rec.num("srv.established_ids_match", established == ids);
        // The three others were refused when they came: no request left.
        rec.set("srv.after_accepts", poll_channel(ch));
        h.barrier("established");
        // The two connected clients leave; the three refused ones come back
        // one by one and, the backlog being free, connect.
        std::map<rdma_cm_id*, int> disc, tw;
        int late_requests = 0;
        while (tw.size() < static_cast<std::size_t>(kBacklogClients)) {
            rdma_cm_event* e = nullptr;
            need_rc(rdma_get_cm_event(ch, &e), "get event");
            rdma_cm_id* id = e->id;
            const rdma_cm_event_type t = e->event;
            const int status = e->status;
            need_rc(rdma_ack_cm_event(e), "ack");
            need(status == 0, "status " + std::to_string(status));
            if (t == RDMA_CM_EVENT_CONNECT_REQUEST) {
                ++late_requests;
                rec.set("srv.late_req" + std::to_string(late_requests) + ".peer", peer_ip(id));
                ids.insert(id);
                ibv_qp_init_attr qa = rc_attr();
                need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
                rdma_conn_param p = conn_param(nullptr, 0);
                need_rc(rdma_accept(id, &p), "accept");
                continue;
            }
            need(ids.count(id) != 0, "an event of an unknown id");
            if (t == RDMA_CM_EVENT_ESTABLISHED) {
                need(!established.count(id), "ESTABLISHED twice");
                established.insert(id);
            } else if (t == RDMA_CM_EVENT_DISCONNECTED) {
                need(established.count(id) && disc[id] == 0, "DISCONNECTED out of order");
                disc[id]++;
                need_rc(rdma_disconnect(id), "disconnect after the peer");
            } else if (t == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
                need(disc[id] == 1 && tw[id] == 0, "TIMEWAIT_EXIT out of order");
                tw[id]++;
                rdma_destroy_qp(id);
                need_rc(rdma_destroy_id(id), "destroy");
            } else {
                need(false, std::string("unexpected ") + rdma_event_str(t));
            }
        }
        rec.num("srv.late_requests", late_requests);
        rec.num("srv.established_total", established.size());
        rec.num("srv.disconnected", disc.size());
        rec.num("srv.timewait", tw.size());
        rec.set("srv.after_all", poll_channel(ch));
        rec.num("srv.cm.ib_reqs_received", static_cast<long long>(h.system().counter("node0.cm_agent.ib_reqs_received")));
        need_rc(rdma_destroy_id(l), "destroy listen");
        rdma_destroy_event_channel(ch);
    });
    for (int n = 1; n <= kBacklogClients; ++n) {
        programs.push_back([n](Host& h, Record& rec) {
            const std::string k = "cli" + std::to_string(n);
            h.barrier("listening");
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* id = resolved_id(ch, node_ip(0), kPort, rec, k);
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            rdma_conn_param p = conn_param(nullptr, 0);
            rec.num(k + ".connect_at_us", now_us());
            need_rc(rdma_connect(id, &p), "connect");
            h.barrier("requested");
            rdma_cm_event* e = nullptr;
            need_rc(rdma_get_cm_event(ch, &e), "get event");
            const bool ok = e->event == RDMA_CM_EVENT_ESTABLISHED;
            rec.set(k + ".result", rdma_event_str(e->event));
            rec.num(k + ".result.status", e->status);
            rec.num(k + ".result.at_us", now_us());
            if (!ok) record_private_data(rec, k + ".result", e, nullptr, 0);
            need_rc(rdma_ack_cm_event(e), "ack");
            h.barrier("established");
            if (!ok) {
                // A refused id is done with: try again on a new one, a
                // millisecond apart so that the listener keeps up.
                rdma_destroy_qp(id);
                need_rc(rdma_destroy_id(id), "destroy");
                h.sleep(static_cast<sim::Tick>(n) * kMs);
                id = resolved_id(ch, node_ip(0), kPort, rec, k + ".retry");
                ibv_qp_init_attr qa2 = rc_attr();
                need_rc(rdma_create_qp(id, nullptr, &qa2), "create_qp");
                need_rc(rdma_connect(id, &p), "connect again");
                expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, rec, k + ".retry.est");
            }
            need_rc(rdma_disconnect(id), "disconnect");
            expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, rec, k + ".disconnected");
            expect_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, rec, k + ".timewait");
            rec.set(k + ".after", poll_channel(ch));
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy");
            rdma_destroy_event_channel(ch);
        });
    }
    return run_programs(kSixNodes, programs, 6);
}

void dump(const RunResult& r) {
    for (const auto& [k, v] : r.kv) UNSCOPED_INFO(k << "=" << v);
}

}  // namespace

TEST_CASE("rdma_reject's private data reaches the client's REJECTED event with status 28", "[rdma_cm]") {
    const RunResult r = reject_run();
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.get("srv.req") == "RDMA_CM_EVENT_CONNECT_REQUEST");
    CHECK(r.num("srv.req.listen_is_listener") == 1);
    CHECK(r.num("srv.req.id_is_new") == 1);
    CHECK(r.get("srv.req.peer") == "192.168.0.2");
    CHECK(r.num("srv.req.pd_len") == 56);  // the REQ's 92 bytes less rdma_cm's 36-byte header
    CHECK(r.num("srv.req.pd.mismatch") == -1);
    CHECK(r.num("srv.reject_rc") == 0);
    CHECK(r.num("srv.destroy_rc") == 0);
    CHECK(r.get("srv.after") == "empty");
    CHECK(r.num("srv.destroy_listen_rc") == 0);
    CHECK(r.get("cli.rejected") == "RDMA_CM_EVENT_REJECTED");
    CHECK(r.num("cli.rejected.status") == 28);  // IB_CM_REJ_CONSUMER_DEFINED
    CHECK(r.num("cli.rejected.id_is_ours") == 1);
    CHECK(r.num("cli.rejected.pd_null") == 0);
    CHECK(r.num("cli.rejected.pd_len") == 148);  // the REJ's whole private data area
    CHECK(r.num("cli.rejected.pd.mismatch") == -1);  // "no-thanks\0", then zeros
    CHECK(r.get("cli.after") == "empty");
    CHECK(r.num("cli.destroy_rc") == 0);
    // A REQ, a REJ and the CM's processing: microseconds, no time-out.
    const double took = r.real("cli.rejected.at_us") - r.real("cli.connect_at_us");
    CHECK(took > 1.0);
    CHECK(took < 1000.0);
}

TEST_CASE("rdma_connect to a port nobody listens on is REJECTED with status 8 (invalid service ID)", "[rdma_cm]") {
    // Node 0 runs no program: its adapter's CM agent answers alone.
    const auto r = run_pair(
        {}, nullptr,
        [](Host& h, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* id = resolved_id(ch, node_ip(0), kPort + 1, rec, "cli");
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            rdma_conn_param p = conn_param(kPlease, sizeof kPlease);
            rec.num("cli.connect_at_us", now_us());
            need_rc(rdma_connect(id, &p), "connect");
            rdma_cm_event* e = expect(ch, RDMA_CM_EVENT_REJECTED, rec, "cli.rejected");
            record_private_data(rec, "cli.rejected", e, nullptr, 0);
            rec.num("srv.cm.ib_reqs_refused", static_cast<long long>(h.system().counter("node0.cm_agent.ib_reqs_refused")));
            need_rc(rdma_ack_cm_event(e), "ack");
            rec.set("cli.after", poll_channel(ch));
            rdma_destroy_qp(id);
            rec.num("cli.destroy_rc", rdma_destroy_id(id));
            rdma_destroy_event_channel(ch);
        });
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.get("cli.rejected") == "RDMA_CM_EVENT_REJECTED");
    CHECK(r.num("cli.rejected.status") == 8);  // IB_CM_REJ_INVALID_SERVICE_ID
    CHECK(r.num("srv.cm.ib_reqs_refused") == 1);
    CHECK(r.num("cli.rejected.pd_len") == 148);
    CHECK(r.num("cli.rejected.pd.mismatch") == -1);  // all zeros
    CHECK(r.get("cli.after") == "empty");
    CHECK(r.num("cli.destroy_rc") == 0);
    const double took = r.real("cli.rejected.at_us") - r.real("cli.connect_at_us");
    CHECK(took > 1.0);
    CHECK(took < 1000.0);
}

TEST_CASE("a REQ to a node that stops answering after route resolution is UNREACHABLE with -ETIMEDOUT after 16 tries",
          "[rdma_cm]") {
    // Three nodes on a switch: node 0 is the SA, node 2's link goes down for
    // good at 1 ms, after node 1 has resolved its address and route.
    const Overrides cfg{{"fabric.topology", "switch"},
                        {"fabric.nodes", "3"},
                        {"fault.link_down", "node2.port@1ms+1000s"}};
    const auto r = run_programs(
        cfg,
        {nullptr,
         [](Host& h, Record& rec) {
             rdma_event_channel* ch = rdma_create_event_channel();
             need(ch != nullptr, "channel");
             rdma_cm_id* id = resolved_id(ch, node_ip(2), kPort, rec, "cli");
             rec.num("cli.route.packet_life", id->route.path_rec->packet_life_time);
             need(sim::now_ps() < kMs, "route resolved before the link goes down");
             ibv_qp_init_attr qa = rc_attr();
             need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
             h.sleep(2 * kMs - sim::now_ps());
             rdma_conn_param p = conn_param(kPlease, sizeof kPlease);
             rec.num("cli.connect_at_us", now_us());
             need_rc(rdma_connect(id, &p), "connect");
             rdma_cm_event* e = expect(ch, RDMA_CM_EVENT_UNREACHABLE, rec, "cli.unreachable");
             rec.num("cli.unreachable.id_is_ours", e->id == id);
             for (const char* c : {"ib_reqs_sent", "ib_retries", "ib_unreachable"})
                 rec.num(std::string("cli.cm.") + c,
                         static_cast<long long>(h.system().counter(std::string("node1.cm_agent.") + c)));
             need_rc(rdma_ack_cm_event(e), "ack");
             rec.set("cli.after", poll_channel(ch));
             rdma_destroy_qp(id);
             rec.num("cli.destroy_rc", rdma_destroy_id(id));
             rdma_destroy_event_channel(ch);
         },
         nullptr},
        3);
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.num("cli.route.packet_life") == 18);
    CHECK(r.get("cli.unreachable") == "RDMA_CM_EVENT_UNREACHABLE");
    CHECK(r.num("cli.unreachable.status") == -ETIMEDOUT);
    CHECK(r.num("cli.unreachable.id_is_ours") == 1);
    CHECK(r.num("cli.cm.ib_reqs_sent") == 1);
    CHECK(r.num("cli.cm.ib_retries") == 15);
    CHECK(r.num("cli.cm.ib_unreachable") == 1);
    CHECK(r.get("cli.after") == "empty");
    CHECK(r.num("cli.destroy_rc") == 0);
    // 1 + 15 tries, each waiting the CM response time (4.096 us x 2^20)
    // plus two packet lifetimes (4.096 us x 2^18 each).
    const double one_try_s = 4.096e-6 * std::ldexp(1.0, 20) + 2 * 4.096e-6 * std::ldexp(1.0, 18);
    const double took_s = (r.real("cli.unreachable.at_us") - r.real("cli.connect_at_us")) / 1e6;
    CHECK(took_s > 90.0);
    CHECK(took_s < 110.0);
    CHECK(std::fabs(took_s - 16 * one_try_s) < 1e-3);
}

TEST_CASE("rdma_resolve_addr fails outside the subnet with -ENETUNREACH at once and for an address nobody owns "
          "with -ETIMEDOUT at the time-out",
          "[rdma_cm]") {
    const auto r = run_pair(
        {}, nullptr,
        [](Host&, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* far = nullptr;
            need_rc(rdma_create_id(ch, &far, nullptr, RDMA_PS_TCP), "create_id");
            sockaddr_in out = ip_addr("10.9.9.9", kPort);
            rec.num("far.start_us", now_us());
            rec.num("far.rc", rdma_resolve_addr(far, nullptr, sa(out), 2000));
            expect_ack(ch, RDMA_CM_EVENT_ADDR_ERROR, rec, "far.event");
            need_rc(rdma_destroy_id(far), "destroy");

            rdma_cm_id* none = nullptr;
            need_rc(rdma_create_id(ch, &none, nullptr, RDMA_PS_TCP), "create_id");
            sockaddr_in nobody = ip_addr("192.168.0.200", kPort);
            rec.num("none.start_us", now_us());
            rec.num("none.rc", rdma_resolve_addr(none, nullptr, sa(nobody), 500));
            expect_ack(ch, RDMA_CM_EVENT_ADDR_ERROR, rec, "none.event");
            // The failed id can resolve again, toward an address that answers.
            sockaddr_in good = ip_addr("192.168.0.1", kPort);
            rec.num("again.rc", rdma_resolve_addr(none, nullptr, sa(good), 500));
            expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, rec, "again.event");
            rec.set("after", poll_channel(ch));
            need_rc(rdma_destroy_id(none), "destroy");
            rdma_destroy_event_channel(ch);
        });
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.num("far.rc") == 0);
    CHECK(r.get("far.event") == "RDMA_CM_EVENT_ADDR_ERROR");
    CHECK(r.num("far.event.status") == -ENETUNREACH);
    CHECK(r.real("far.event.at_us") - r.real("far.start_us") < 100.0);
    CHECK(r.num("none.rc") == 0);
    CHECK(r.get("none.event") == "RDMA_CM_EVENT_ADDR_ERROR");
    CHECK(r.num("none.event.status") == -ETIMEDOUT);
    const double waited_ms = (r.real("none.event.at_us") - r.real("none.start_us")) / 1e3;
    CHECK(waited_ms >= 500.0);
    CHECK(waited_ms < 501.0);
    CHECK(r.num("again.rc") == 0);
    CHECK(r.get("again.event") == "RDMA_CM_EVENT_ADDR_RESOLVED");
    CHECK(r.get("after") == "empty");
}

TEST_CASE("a listen backlog of 2: of 5 requests made before the listener looks 2 connect and 3 are REJECTED "
          "with status 28",
          "[rdma_cm]") {
    const RunResult r = backlog_run();
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    int established = 0, rejected = 0;
    std::set<std::string> connected_peers, late_peers;
    for (int n = 1; n <= kBacklogClients; ++n) {
        const std::string k = "cli" + std::to_string(n);
        INFO("client on node " << n);
        CHECK(r.get(k + ".after") == "empty");
        CHECK(r.get(k + ".disconnected") == "RDMA_CM_EVENT_DISCONNECTED");
        CHECK(r.get(k + ".timewait") == "RDMA_CM_EVENT_TIMEWAIT_EXIT");
        if (r.get(k + ".result") == "RDMA_CM_EVENT_ESTABLISHED") {
            ++established;
            connected_peers.insert(node_ip(n));
            CHECK(r.num(k + ".result.status") == 0);
            CHECK_FALSE(r.has(k + ".retry.est"));
        } else {
            late_peers.insert(node_ip(n));
            CHECK(r.get(k + ".retry.est") == "RDMA_CM_EVENT_ESTABLISHED");
            ++rejected;
            CHECK(r.get(k + ".result") == "RDMA_CM_EVENT_REJECTED");
            CHECK(r.num(k + ".result.status") == 28);
            CHECK(r.num(k + ".result.pd_len") == 148);
            CHECK(r.num(k + ".result.pd.mismatch") == -1);
            // Refused as it came, long before the listener woke at 10 ms.
            CHECK(r.real(k + ".result.at_us") < 10000.0);
        }
    }
    CHECK(established == 2);
    CHECK(rejected == 3);
    // First come, first served: the two that got in asked first.
    double last_in = 0, first_out = 1e300;
    for (int n = 1; n <= kBacklogClients; ++n) {
        const std::string k = "cli" + std::to_string(n);
        const double at = r.real(k + ".connect_at_us");
        if (r.get(k + ".result") == "RDMA_CM_EVENT_ESTABLISHED") last_in = std::max(last_in, at);
        else first_out = std::min(first_out, at);
    }
    CHECK(last_in < first_out);
    // The two requests the listener took are those of the clients that connected.
    CHECK(connected_peers == std::set<std::string>{r.get("srv.req0.peer"), r.get("srv.req1.peer")});
    CHECK(r.num("srv.established_ids_match") == 1);
    CHECK(r.get("srv.after_accepts") == "empty");
    CHECK(r.num("srv.late_requests") == 3);
    CHECK(late_peers == std::set<std::string>{r.get("srv.late_req1.peer"), r.get("srv.late_req2.peer"),
                                              r.get("srv.late_req3.peer")});
    CHECK(r.num("srv.established_total") == kBacklogClients);
    CHECK(r.num("srv.disconnected") == kBacklogClients);
    CHECK(r.num("srv.timewait") == kBacklogClients);
    CHECK(r.get("srv.after_all") == "empty");
    // Each REQ arrived once (a REJ, no resend), the three retries besides.
    CHECK(r.num("srv.cm.ib_reqs_received") == kBacklogClients + 3);
}

namespace {

// ---------------------------------------------------------------------------
// A thousand connections between two nodes, one after another.

constexpr int kSerialConnections = 1000;
constexpr std::size_t kMsgBytes = 256;

std::uint64_t request_seed(std::uint32_t i) { return 0x10000 + i; }
std::uint64_t reply_seed(std::uint32_t i) { return 0x90000 + i; }

struct ServerConn {
    std::uint32_t index = 0;
    std::vector<std::uint8_t> buf;
    ibv_mr* mr = nullptr;
    bool established = false, disconnected = false;
};

}  // namespace

TEST_CASE("1000 rdma_cm connections one after another each move a message both ways and are torn down",
          "[rdma_cm]") {
    const auto wall0 = std::chrono::steady_clock::now();
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* l = listener(ch, kPort, 16);
            h.barrier("listening");
            std::map<rdma_cm_id*, ServerConn> conns;
            int requests = 0, established = 0, disconnected = 0, timewait = 0, bad_data = 0, bad_order = 0,
                bad_status = 0;
            long long first_bad = -1;
            while (timewait < kSerialConnections) {
                rdma_cm_event* e = nullptr;
                need_rc(rdma_get_cm_event(ch, &e), "get event");
                rdma_cm_id* id = e->id;
                const rdma_cm_event_type t = e->event;
                if (e->status) ++bad_status;
                if (t == RDMA_CM_EVENT_CONNECT_REQUEST) {
                    need(e->listen_id == l && conns.count(id) == 0, "request on a new id of the listener");
                    need(e->param.conn.private_data_len >= 4, "request private data");
                    std::uint32_t index = 0;
                    std::memcpy(&index, e->param.conn.private_data, 4);
                    need_rc(rdma_ack_cm_event(e), "ack");
                    if (index != static_cast<std::uint32_t>(requests)) ++bad_order;
                    ++requests;
                    ServerConn& c = conns[id];
                    c.index = index;
                    c.buf.assign(kMsgBytes, 0);
                    ibv_qp_init_attr qa = rc_attr();
                    need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
                    c.mr = rdma_reg_msgs(id, c.buf.data(), c.buf.size());
                    need(c.mr != nullptr, "reg_msgs");
                    need_rc(rdma_post_recv(id, nullptr, c.buf.data(), kMsgBytes, c.mr), "post_recv");
                    rdma_conn_param p = conn_param(nullptr, 0);
                    need_rc(rdma_accept(id, &p), "accept");
                    continue;
                }
                need_rc(rdma_ack_cm_event(e), "ack");
                need(conns.count(id) != 0, std::string("an event of an unknown id: ") + rdma_event_str(t));
                ServerConn& c = conns[id];
                if (t == RDMA_CM_EVENT_ESTABLISHED) {
                    need(!c.established, "ESTABLISHED twice");
                    c.established = true;
                    ++established;
                    ibv_wc wc{};
                    need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
                    const auto want = pattern(kMsgBytes, request_seed(c.index));
                    if (wc.status != IBV_WC_SUCCESS || wc.byte_len != kMsgBytes ||
                        first_mismatch(c.buf.data(), want.data(), kMsgBytes) != -1) {
                        if (first_bad < 0) first_bad = c.index;
                        ++bad_data;
                    }
                    fill_pattern(c.buf.data(), kMsgBytes, reply_seed(c.index));
                    need_rc(rdma_post_send(id, nullptr, c.buf.data(), kMsgBytes, c.mr, 0), "post_send");
                    need(rdma_get_send_comp(id, &wc) == 1, "send comp");
                    if (wc.status != IBV_WC_SUCCESS) ++bad_data;
                } else if (t == RDMA_CM_EVENT_DISCONNECTED) {
                    need(c.established && !c.disconnected, "DISCONNECTED out of order");
                    c.disconnected = true;
                    ++disconnected;
                    need_rc(rdma_disconnect(id), "disconnect after the peer");
                } else if (t == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
                    need(c.disconnected, "TIMEWAIT_EXIT before DISCONNECTED");
                    ++timewait;
                    need_rc(rdma_dereg_mr(c.mr), "dereg");
                    rdma_destroy_qp(id);
                    need_rc(rdma_destroy_id(id), "destroy");
                    conns.erase(id);
                } else {
                    need(false, std::string("unexpected ") + rdma_event_str(t));
                }
            }
            rec.num("srv.requests", requests);
            rec.num("srv.established", established);
            rec.num("srv.disconnected", disconnected);
            rec.num("srv.timewait", timewait);
            rec.num("srv.bad_data", bad_data);
            rec.num("srv.first_bad", first_bad);
            rec.num("srv.bad_order", bad_order);
            rec.num("srv.bad_status", bad_status);
            rec.num("srv.left", conns.size());
            rec.set("srv.after", poll_channel(ch));
            need_rc(rdma_destroy_id(l), "destroy listen");
            rdma_destroy_event_channel(ch);
        },
        [](Host& h, Record& rec) {
            h.barrier("listening");
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            int established = 0, disconnected = 0, timewait = 0, bad_data = 0;
            long long first_bad = -1;
            std::vector<std::uint8_t> out(kMsgBytes), back(kMsgBytes);
            Record quiet;  // the per-connection events are counted, not kept
            for (std::uint32_t i = 0; i < static_cast<std::uint32_t>(kSerialConnections); ++i) {
                rdma_cm_id* id = resolved_id(ch, node_ip(0), kPort, quiet, "cli");
                ibv_qp_init_attr qa = rc_attr();
                need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
                fill_pattern(out.data(), kMsgBytes, request_seed(i));
                std::fill(back.begin(), back.end(), 0);
                ibv_mr* mr = rdma_reg_msgs(id, out.data(), kMsgBytes);
                ibv_mr* mr_back = rdma_reg_msgs(id, back.data(), kMsgBytes);
                need(mr && mr_back, "reg_msgs");
                need_rc(rdma_post_recv(id, nullptr, back.data(), kMsgBytes, mr_back), "post_recv");
                rdma_conn_param p = conn_param(&i, sizeof i);
                need_rc(rdma_connect(id, &p), "connect");
                expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, quiet, "est");
                ++established;
                need_rc(rdma_post_send(id, nullptr, out.data(), kMsgBytes, mr, 0), "post_send");
                ibv_wc wc{};
                need(rdma_get_send_comp(id, &wc) == 1, "send comp");
                const bool sent = wc.status == IBV_WC_SUCCESS;
                need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
                const auto want = pattern(kMsgBytes, reply_seed(i));
                if (!sent || wc.status != IBV_WC_SUCCESS || wc.byte_len != kMsgBytes ||
                    first_mismatch(back.data(), want.data(), kMsgBytes) != -1) {
                    if (first_bad < 0) first_bad = i;
                    ++bad_data;
                }
                need_rc(rdma_disconnect(id), "disconnect");
                expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, quiet, "disc");
                ++disconnected;
                expect_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, quiet, "tw");
                ++timewait;
                need_rc(rdma_dereg_mr(mr), "dereg");
                need_rc(rdma_dereg_mr(mr_back), "dereg");
                rdma_destroy_qp(id);
                need_rc(rdma_destroy_id(id), "destroy");
            }
            rec.num("cli.established", established);
            rec.num("cli.disconnected", disconnected);
            rec.num("cli.timewait", timewait);
            rec.num("cli.bad_data", bad_data);
            rec.num("cli.first_bad", first_bad);
            rec.num("cli.end_s", now_us() / 1e6);
            rec.set("cli.after", poll_channel(ch));
            rdma_destroy_event_channel(ch);
        });
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    INFO(r.error);
    dump(r);
    UNSCOPED_INFO("wall time " << wall_s << " s");
    REQUIRE(r.ok);
    CHECK(r.num("srv.requests") == kSerialConnections);
    CHECK(r.num("srv.established") == kSerialConnections);
    CHECK(r.num("srv.disconnected") == kSerialConnections);
    CHECK(r.num("srv.timewait") == kSerialConnections);
    CHECK(r.num("srv.bad_data") == 0);
    CHECK(r.num("srv.first_bad") == -1);
    CHECK(r.num("srv.bad_order") == 0);
    CHECK(r.num("srv.bad_status") == 0);
    CHECK(r.num("srv.left") == 0);
    CHECK(r.get("srv.after") == "empty");
    CHECK(r.num("cli.established") == kSerialConnections);
    CHECK(r.num("cli.disconnected") == kSerialConnections);
    CHECK(r.num("cli.timewait") == kSerialConnections);
    CHECK(r.num("cli.bad_data") == 0);
    CHECK(r.num("cli.first_bad") == -1);
    CHECK(r.get("cli.after") == "empty");
    // Each connection's time wait (4.096 us x 2^19) passed before the next.
    CHECK(r.real("cli.end_s") > kSerialConnections * 4.096e-6 * std::ldexp(1.0, 19));
    CHECK(wall_s < 20.0);
}

namespace {

constexpr int kManyClients = 100;
constexpr std::size_t kHelloBytes = 64;

// What client n sends: its node number, then bytes of its own.
std::vector<std::uint8_t> hello_of(std::uint32_t n) {
    std::vector<std::uint8_t> v = pattern(kHelloBytes, 0x4e0000 + n);
    std::memcpy(v.data(), &n, sizeof n);
    return v;
}

struct ManyConn {
    std::uint32_t node = 0;  // from the peer address
    std::vector<std::uint8_t> buf;
    ibv_mr* mr = nullptr;
    bool established = false, disconnected = false;
};

}  // namespace

TEST_CASE("100 clients through a switch connect to one listener and each sends 64 bytes with its node number",
          "[rdma_cm]") {
    const Overrides cfg{{"fabric.topology", "switch"}, {"fabric.nodes", "101"}};
    std::vector<Program> programs;
    programs.push_back([](Host& h, Record& rec) {
        rdma_event_channel* ch = rdma_create_event_channel();
        need(ch != nullptr, "channel");
        rdma_cm_id* l = listener(ch, kPort, 128);
        h.barrier("listening");
        std::map<rdma_cm_id*, ManyConn> conns;
        std::set<std::uint32_t> nodes_seen;
        int requests = 0, established = 0, bad_pd = 0, bad_status = 0;
        while (established < kManyClients) {
            rdma_cm_event* e = nullptr;
            need_rc(rdma_get_cm_event(ch, &e), "get event");
            rdma_cm_id* id = e->id;
            const rdma_cm_event_type t = e->event;
            if (e->status) ++bad_status;
            if (t == RDMA_CM_EVENT_CONNECT_REQUEST) {
                ++requests;
                ManyConn& c = conns[id];
                in_addr a{};
                inet_pton(AF_INET, peer_ip(id).c_str(), &a);
                c.node = (ntohl(a.s_addr) & 0xffff) - 1;
                std::uint32_t claimed = ~0u;
                if (e->param.conn.private_data_len >= 4) std::memcpy(&claimed, e->param.conn.private_data, 4);
                if (claimed != c.node) ++bad_pd;
                nodes_seen.insert(c.node);
                need_rc(rdma_ack_cm_event(e), "ack");
                c.buf.assign(kHelloBytes, 0);
                ibv_qp_init_attr qa = rc_attr();
                need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
                c.mr = rdma_reg_msgs(id, c.buf.data(), c.buf.size());
                need(c.mr != nullptr, "reg_msgs");
                need_rc(rdma_post_recv(id, nullptr, c.buf.data(), kHelloBytes, c.mr), "post_recv");
                rdma_conn_param p = conn_param(nullptr, 0);
                need_rc(rdma_accept(id, &p), "accept");
                continue;
            }
            need_rc(rdma_ack_cm_event(e), "ack");
            need(t == RDMA_CM_EVENT_ESTABLISHED, std::string("unexpected ") + rdma_event_str(t));
            need(conns.count(id) && !conns[id].established, "ESTABLISHED of an unknown id or twice");
            conns[id].established = true;
            ++established;
        }
        // Each message says who sent it, and it is the peer the id names.
        int good = 0, bad = 0;
        for (auto& [id, c] : conns) {
            ibv_wc wc{};
            need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
            const auto want = hello_of(c.node);
            if (wc.status == IBV_WC_SUCCESS && wc.byte_len == kHelloBytes &&
                first_mismatch(c.buf.data(), want.data(), kHelloBytes) == -1)
                ++good;
            else
                ++bad;
        }
        rec.num("srv.requests", requests);
        rec.num("srv.established", established);
        rec.num("srv.distinct_nodes", nodes_seen.size());
        rec.num("srv.min_node", nodes_seen.empty() ? -1 : static_cast<long long>(*nodes_seen.begin()));
        rec.num("srv.max_node", nodes_seen.empty() ? -1 : static_cast<long long>(*nodes_seen.rbegin()));
        rec.num("srv.bad_pd", bad_pd);
        rec.num("srv.good_msgs", good);
        rec.num("srv.bad_msgs", bad);
        h.barrier("checked");
        int disconnected = 0, timewait = 0;
        while (timewait < kManyClients) {
            rdma_cm_event* e = nullptr;
            need_rc(rdma_get_cm_event(ch, &e), "get event");
            rdma_cm_id* id = e->id;
            const rdma_cm_event_type t = e->event;
            if (e->status) ++bad_status;
            need_rc(rdma_ack_cm_event(e), "ack");
            need(conns.count(id) != 0, "an event of an unknown id");
            ManyConn& c = conns[id];
            if (t == RDMA_CM_EVENT_DISCONNECTED) {
                need(!c.disconnected, "DISCONNECTED twice");
                c.disconnected = true;
                ++disconnected;
                need_rc(rdma_disconnect(id), "disconnect after the peer");
            } else if (t == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
                need(c.disconnected, "TIMEWAIT_EXIT before DISCONNECTED");
                ++timewait;
                need_rc(rdma_dereg_mr(c.mr), "dereg");
                rdma_destroy_qp(id);
                need_rc(rdma_destroy_id(id), "destroy");
                conns.erase(id);
            } else {
                need(false, std::string("unexpected ") + rdma_event_str(t));
            }
        }
        rec.num("srv.disconnected", disconnected);
        rec.num("srv.timewait", timewait);
        rec.num("srv.bad_status", bad_status);
        rec.set("srv.after", poll_channel(ch));
        need_rc(rdma_destroy_id(l), "destroy listen");
        rdma_destroy_event_channel(ch);
    });
    for (int n = 1; n <= kManyClients; ++n) {
        programs.push_back([n](Host& h, Record& rec) {
            const std::string k = "cli" + std::to_string(n);
            h.barrier("listening");
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            Record quiet;
            rdma_cm_id* id = resolved_id(ch, node_ip(0), kPort, quiet, k);
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            const std::uint32_t me = static_cast<std::uint32_t>(n);
            std::vector<std::uint8_t> msg = hello_of(me);
            ibv_mr* mr = rdma_reg_msgs(id, msg.data(), msg.size());
            need(mr != nullptr, "reg_msgs");
            rdma_conn_param p = conn_param(&me, sizeof me);
            need_rc(rdma_connect(id, &p), "connect");
            expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, rec, k + ".est");
            need_rc(rdma_post_send(id, nullptr, msg.data(), msg.size(), mr, 0), "post_send");
            ibv_wc wc{};
            need(rdma_get_send_comp(id, &wc) == 1, "send comp");
            rec.num(k + ".send.status", static_cast<int>(wc.status));
            h.barrier("checked");
            need_rc(rdma_disconnect(id), "disconnect");
            expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, rec, k + ".disc");
            expect_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, rec, k + ".tw");
            need_rc(rdma_dereg_mr(mr), "dereg");
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy");
            rdma_destroy_event_channel(ch);
        });
    }
    const auto r = run_programs(cfg, programs, 0);
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.num("srv.requests") == kManyClients);
    CHECK(r.num("srv.established") == kManyClients);
    CHECK(r.num("srv.distinct_nodes") == kManyClients);
    CHECK(r.num("srv.min_node") == 1);
    CHECK(r.num("srv.max_node") == kManyClients);
    CHECK(r.num("srv.bad_pd") == 0);
    CHECK(r.num("srv.good_msgs") == kManyClients);
    CHECK(r.num("srv.bad_msgs") == 0);
    CHECK(r.num("srv.disconnected") == kManyClients);
    CHECK(r.num("srv.timewait") == kManyClients);
    CHECK(r.num("srv.bad_status") == 0);
    CHECK(r.get("srv.after") == "empty");
    for (int n = 1; n <= kManyClients; ++n) {
        const std::string k = "cli" + std::to_string(n);
        INFO("client on node " << n);
        CHECK(r.get(k + ".est") == "RDMA_CM_EVENT_ESTABLISHED");
        CHECK(r.num(k + ".send.status") == IBV_WC_SUCCESS);
        CHECK(r.get(k + ".disc") == "RDMA_CM_EVENT_DISCONNECTED");
        CHECK(r.get(k + ".tw") == "RDMA_CM_EVENT_TIMEWAIT_EXIT");
    }
}

namespace {

// The client's connected id moves to a second channel, before the
// server's DREQ arrives (late = false) or after, with the DISCONNECTED
// event still queued on the first channel (late = true).
RunResult migrate_run(bool late) {
    return run_pair(
        {},
        [](Host& h, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* l = listener(ch, kPort, 4);
            h.barrier("listening");
            rdma_cm_event* req = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, rec, "srv.req");
            rdma_cm_id* id = req->id;
            need_rc(rdma_ack_cm_event(req), "ack");
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            rdma_conn_param p = conn_param(nullptr, 0);
            need_rc(rdma_accept(id, &p), "accept");
            expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, rec, "srv.est");
            h.barrier("ready");
            need_rc(rdma_disconnect(id), "disconnect");
            expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, rec, "srv.disc");
            expect_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, rec, "srv.tw");
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy");
            need_rc(rdma_destroy_id(l), "destroy listen");
            rdma_destroy_event_channel(ch);
        },
        [late](Host& h, Record& rec) {
            h.barrier("listening");
            rdma_event_channel* ch = rdma_create_event_channel();
            rdma_event_channel* ch2 = rdma_create_event_channel();
            need(ch && ch2, "channels");
            rdma_cm_id* id = resolved_id(ch, node_ip(0), kPort, rec, "cli");
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            rdma_conn_param p = conn_param(nullptr, 0);
            need_rc(rdma_connect(id, &p), "connect");
            expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, rec, "cli.est");
            if (!late) rec.num("cli.migrate_rc", rdma_migrate_id(id, ch2));
            h.barrier("ready");
            // The DREQ arrives within microseconds.
            h.sleep(1 * kMs);
            if (late) rec.num("cli.migrate_rc", rdma_migrate_id(id, ch2));
            rec.num("cli.channel_is_new", id->channel == ch2);
            pollfd fds[2] = {{ch->fd, POLLIN, 0}, {ch2->fd, POLLIN, 0}};
            rec.num("cli.poll_rc", poll(fds, 2, 0));
            rec.num("cli.old_readable", (fds[0].revents & POLLIN) != 0);
            rec.num("cli.new_readable", (fds[1].revents & POLLIN) != 0);
            rec.set("cli.old_after_dreq", poll_channel(ch));
            rdma_cm_event* e = expect(ch2, RDMA_CM_EVENT_DISCONNECTED, rec, "cli.disc");
            rec.num("cli.disc.id_is_ours", e->id == id);
            need_rc(rdma_ack_cm_event(e), "ack");
            need_rc(rdma_disconnect(id), "disconnect after the peer");
            expect_ack(ch2, RDMA_CM_EVENT_TIMEWAIT_EXIT, rec, "cli.tw");
            rec.set("cli.old_at_end", poll_channel(ch));
            rec.set("cli.new_at_end", poll_channel(ch2));
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy");
            rdma_destroy_event_channel(ch);
            rdma_destroy_event_channel(ch2);
        });
}

void check_migrate(const RunResult& r) {
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.num("cli.migrate_rc") == 0);
    CHECK(r.num("cli.channel_is_new") == 1);
    CHECK(r.num("cli.poll_rc") == 1);
    CHECK(r.num("cli.old_readable") == 0);
    CHECK(r.num("cli.new_readable") == 1);
    CHECK(r.get("cli.old_after_dreq") == "empty");
    CHECK(r.get("cli.disc") == "RDMA_CM_EVENT_DISCONNECTED");
    CHECK(r.num("cli.disc.id_is_ours") == 1);
    CHECK(r.get("cli.tw") == "RDMA_CM_EVENT_TIMEWAIT_EXIT");
    CHECK(r.get("cli.old_at_end") == "empty");
    CHECK(r.get("cli.new_at_end") == "empty");
    CHECK(r.get("srv.disc") == "RDMA_CM_EVENT_DISCONNECTED");
    CHECK(r.get("srv.tw") == "RDMA_CM_EVENT_TIMEWAIT_EXIT");
}

}  // namespace

TEST_CASE("rdma_migrate_id moves a connected id to another channel: its DISCONNECTED arrives there only",
          "[rdma_cm]") {
    SECTION("migrated before the DREQ arrives") { check_migrate(migrate_run(false)); }
    SECTION("migrated with the DISCONNECTED event queued on the old channel") { check_migrate(migrate_run(true)); }
}

TEST_CASE("rdma_cm runs are deterministic: the same events at the same simulated times", "[rdma_cm]") {
    SECTION("a rejected request") {
        const RunResult a = reject_run(), b = reject_run();
        INFO(a.error << " / " << b.error);
        REQUIRE(a.ok);
        REQUIRE(b.ok);
        CHECK(a.has("cli.rejected.at_us"));
        CHECK(a.kv == b.kv);
    }
    SECTION("five clients against a backlog of two") {
        const RunResult a = backlog_run(), b = backlog_run();
        INFO(a.error << " / " << b.error);
        REQUIRE(a.ok);
        REQUIRE(b.ok);
        CHECK(a.has("cli1.result.at_us"));
        CHECK(a.kv == b.kv);
    }
}

TEST_CASE("rdma_cm argument errors: too much private data / a foreign address / a port in use / a wrong optlen",
          "[rdma_cm]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* l = listener(ch, kPort, 4);
            // Two listens on one address and port: the second cannot even bind.
            rdma_cm_id *x1 = nullptr, *x2 = nullptr;
            need_rc(rdma_create_id(ch, &x1, nullptr, RDMA_PS_TCP), "create_id");
            need_rc(rdma_create_id(ch, &x2, nullptr, RDMA_PS_TCP), "create_id");
            sockaddr_in p3 = ip_addr("192.168.0.1", kPort + 3);
            rec.num("srv.bind_x1_rc", rdma_bind_addr(x1, sa(p3)));
            rec.num("srv.listen_x1_rc", rdma_listen(x1, 4));
            rec.set("srv.bind_x2", failure(rdma_bind_addr(x2, sa(p3))));
            // SO_REUSEADDR lets two ids bind a port; neither may listen on it
            // while the other is bound there too.
            rdma_cm_id *a = nullptr, *b = nullptr, *c = nullptr;
            need_rc(rdma_create_id(ch, &a, nullptr, RDMA_PS_TCP), "create_id");
            need_rc(rdma_create_id(ch, &b, nullptr, RDMA_PS_TCP), "create_id");
            need_rc(rdma_create_id(ch, &c, nullptr, RDMA_PS_TCP), "create_id");
            int one = 1;
            rec.num("srv.reuse_a_rc", rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof one));
            rec.num("srv.reuse_b_rc", rdma_set_option(b, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof one));
            sockaddr_in p2 = ip_addr("192.168.0.1", kPort + 1);
            rec.num("srv.bind_a_rc", rdma_bind_addr(a, sa(p2)));
            rec.num("srv.bind_b_rc", rdma_bind_addr(b, sa(p2)));
            rec.set("srv.listen_a", failure(rdma_listen(a, 4)));
            rec.set("srv.listen_b", failure(rdma_listen(b, 4)));
            // b goes; a may listen now, and c may not bind the port.
            need_rc(rdma_destroy_id(b), "destroy b");
            rec.num("srv.listen_a_alone_rc", rdma_listen(a, 4));
            rec.set("srv.reuse_a_listening", failure(rdma_set_option(a, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR,
                                                                     &one, sizeof one)));
            rec.set("srv.bind_c_after", failure(rdma_bind_addr(c, sa(p2))));
            rdma_cm_id* other = nullptr;
            need_rc(rdma_create_id(ch, &other, nullptr, RDMA_PS_TCP), "create_id");
            // Options with a wrong optlen, then the right one.
            std::uint8_t tos = 32, timeout = 14;
            int tos_int = 32, timeout_int = 14;
            std::uint8_t one_byte = 1;
            rec.set("srv.tos_int", failure(rdma_set_option(other, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos_int, sizeof tos_int)));
            rec.num("srv.tos_rc", rdma_set_option(other, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos));
            rec.set("srv.ack_timeout_int", failure(rdma_set_option(other, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                                                                   &timeout_int, sizeof timeout_int)));
            rec.num("srv.ack_timeout_rc",
                    rdma_set_option(other, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout));
            rec.set("srv.reuse_byte", failure(rdma_set_option(other, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR,
                                                              &one_byte, sizeof one_byte)));
            for (rdma_cm_id* x : {other, c, a, x1, x2}) need_rc(rdma_destroy_id(x), "destroy");
            h.barrier("listening");
            rdma_cm_event* req = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, rec, "srv.req");
            rdma_cm_id* id = req->id;
            std::uint8_t want[56];
            for (std::size_t i = 0; i < sizeof want; ++i) want[i] = static_cast<std::uint8_t>(0xa0 + i);
            record_private_data(rec, "srv.req", req, want, sizeof want);
            need_rc(rdma_ack_cm_event(req), "ack");
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            rdma_conn_param p = conn_param(nullptr, 0);
            need_rc(rdma_accept(id, &p), "accept");
            expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, rec, "srv.est");
            expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, rec, "srv.disc");
            need_rc(rdma_disconnect(id), "disconnect after the peer");
            expect_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, rec, "srv.tw");
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy");
            rec.set("srv.after", poll_channel(ch));
            need_rc(rdma_destroy_id(l), "destroy listen");
            rdma_destroy_event_channel(ch);
        },
        [](Host& h, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* id = nullptr;
            need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), "create_id");
            // Node 1 is 192.168.0.2: .9 and the peer's .1 are not its own.
            sockaddr_in foreign = ip_addr("192.168.0.9", 0), peer = ip_addr("192.168.0.1", 0);
            sockaddr_in mine = ip_addr("192.168.0.2", 0);
            rec.set("cli.bind_foreign", failure(rdma_bind_addr(id, sa(foreign))));
            rec.set("cli.bind_peer", failure(rdma_bind_addr(id, sa(peer))));
            rec.num("cli.bind_own_rc", rdma_bind_addr(id, sa(mine)));
            h.barrier("listening");
            sockaddr_in dst = ip_addr("192.168.0.1", kPort);
            need_rc(rdma_resolve_addr(id, nullptr, sa(dst), 2000), "resolve_addr");
            expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED, rec, "cli.addr");
            std::uint8_t pd[57];
            for (std::size_t i = 0; i < sizeof pd; ++i) pd[i] = static_cast<std::uint8_t>(0xa0 + i);
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            rdma_conn_param p56 = conn_param(pd, 56), p57 = conn_param(pd, 57);
            // Before the route: the wrong state, whatever the data.
            rec.set("cli.connect_before_route", failure(rdma_connect(id, &p56)));
            need_rc(rdma_resolve_route(id, 2000), "resolve_route");
            expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, rec, "cli.route");
            rec.set("cli.connect_57", failure(rdma_connect(id, &p57)));
            rec.num("cli.connect_56_rc", rdma_connect(id, &p56));
            expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, rec, "cli.est");
            need_rc(rdma_disconnect(id), "disconnect");
            expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, rec, "cli.disc");
            expect_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, rec, "cli.tw");
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy");
            rec.set("cli.after", poll_channel(ch));
            rdma_destroy_event_channel(ch);
        });
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    const std::string inval = std::strerror(EINVAL), inuse = std::strerror(EADDRINUSE),
                      notavail = std::strerror(EADDRNOTAVAIL);
    CHECK(r.num("srv.bind_x1_rc") == 0);
    CHECK(r.num("srv.listen_x1_rc") == 0);
    CHECK(r.get("srv.bind_x2") == inuse);
    CHECK(r.num("srv.reuse_a_rc") == 0);
    CHECK(r.num("srv.reuse_b_rc") == 0);
    CHECK(r.num("srv.bind_a_rc") == 0);
    CHECK(r.num("srv.bind_b_rc") == 0);
    CHECK(r.get("srv.listen_a") == inuse);
    CHECK(r.get("srv.listen_b") == inuse);
    CHECK(r.num("srv.listen_a_alone_rc") == 0);
    CHECK(r.get("srv.reuse_a_listening") == inval);
    CHECK(r.get("srv.bind_c_after") == inuse);
    CHECK(r.get("srv.tos_int") == inval);
    CHECK(r.num("srv.tos_rc") == 0);
    CHECK(r.get("srv.ack_timeout_int") == inval);
    CHECK(r.num("srv.ack_timeout_rc") == 0);
    CHECK(r.get("srv.reuse_byte") == inval);
    CHECK(r.get("cli.bind_foreign") == notavail);
    CHECK(r.get("cli.bind_peer") == notavail);
    CHECK(r.num("cli.bind_own_rc") == 0);
    CHECK(r.get("cli.connect_before_route") == inval);
    CHECK(r.get("cli.connect_57") == inval);
    CHECK(r.num("cli.connect_56_rc") == 0);
    CHECK(r.get("cli.est") == "RDMA_CM_EVENT_ESTABLISHED");
    CHECK(r.num("srv.req.pd_len") == 56);
    CHECK(r.num("srv.req.pd.mismatch") == -1);
    CHECK(r.get("srv.est") == "RDMA_CM_EVENT_ESTABLISHED");
    CHECK(r.get("srv.disc") == "RDMA_CM_EVENT_DISCONNECTED");
    CHECK(r.get("srv.tw") == "RDMA_CM_EVENT_TIMEWAIT_EXIT");
    CHECK(r.get("cli.tw") == "RDMA_CM_EVENT_TIMEWAIT_EXIT");
    CHECK(r.get("srv.after") == "empty");
    CHECK(r.get("cli.after") == "empty");
}

namespace {

// ids[0] and ids[1] share a port with SO_REUSEADDR; one of them goes and
// ids[2] (without it) tries the port, before or after the other listens.
RunResult reuse_run(bool listen_first) {
    return run_pair(
        {},
        [listen_first](Host&, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            int one = 1;
            for (int first_goes = 0; first_goes < 2; ++first_goes) {
                const std::string k = first_goes ? "first_goes" : "second_goes";
                const std::uint16_t port = static_cast<std::uint16_t>(kPort + 10 + first_goes);
                rdma_cm_id* ids[3] = {};
                for (auto& id : ids) need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), "create_id");
                sockaddr_in own = ip_addr("192.168.0.1", port);
                for (int i = 0; i < 2; ++i) {
                    need_rc(rdma_set_option(ids[i], RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof one), "reuse");
                    rec.num(k + ".bind" + std::to_string(i) + "_rc", rdma_bind_addr(ids[i], sa(own)));
                }
                rdma_cm_id* stays = ids[first_goes ? 1 : 0];
                need_rc(rdma_destroy_id(ids[first_goes ? 0 : 1]), "destroy");
                if (listen_first) rec.num(k + ".listen_rc", rdma_listen(stays, 4));
                rec.set(k + ".bind_other", failure(rdma_bind_addr(ids[2], sa(own))));
                if (!listen_first) rec.num(k + ".listen_rc", rdma_listen(stays, 4));
                rec.num(k + ".port_of_stays", ntohs(rdma_get_src_port(stays)));
                need_rc(rdma_destroy_id(ids[2]), "destroy");
                need_rc(rdma_destroy_id(stays), "destroy");
            }
            rdma_destroy_event_channel(ch);
        },
        nullptr);
}

void check_reuse(const RunResult& r) {
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    for (const char* k : {"second_goes", "first_goes"}) {
        INFO(k);
        const std::string p(k);
        CHECK(r.num(p + ".bind0_rc") == 0);
        CHECK(r.num(p + ".bind1_rc") == 0);
        CHECK(r.get(p + ".bind_other") == std::strerror(EADDRINUSE));
        CHECK(r.num(p + ".listen_rc") == 0);
    }
    CHECK(r.num("second_goes.port_of_stays") == kPort + 10);
    CHECK(r.num("first_goes.port_of_stays") == kPort + 11);
}

}  // namespace

TEST_CASE("SO_REUSEADDR: a shared port stays taken while the sharer left listens on it", "[rdma_cm]") {
    check_reuse(reuse_run(true));
}

// The node keeps one owner per port: when the sharer holding that entry
// goes, the port looks free although the other is still bound to it.
TEST_CASE("SO_REUSEADDR: a shared port stays taken while the sharer left is only bound to it",
          "[rdma_cm]") {
    check_reuse(reuse_run(false));
}

// The kernel's cma_check_port: a conflict where either id is bound to the
// wildcard address is EADDRNOTAVAIL; EADDRINUSE is for the same address.
TEST_CASE("a port conflict involving the wildcard address fails with EADDRNOTAVAIL as in the kernel",
          "[rdma_cm]") {
    const auto r = run_pair(
        {},
        [](Host&, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            auto fresh = [&]() {
                rdma_cm_id* id = nullptr;
                need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), "create_id");
                return id;
            };
            std::vector<rdma_cm_id*> ids;
            // A wildcard listener, then the wildcard and a specific address.
            rdma_cm_id* l = listener(ch, kPort, 4);
            ids.push_back(l);
            sockaddr_in any = ip_addr("0.0.0.0", kPort), own = ip_addr("192.168.0.1", kPort);
            ids.push_back(fresh());
            rec.set("any_on_any", failure(rdma_bind_addr(ids.back(), sa(any))));
            rec.set("own_on_any", failure(rdma_bind_addr(ids.back(), sa(own))));
            // A specific listener, then the wildcard.
            rdma_cm_id* l2 = fresh();
            ids.push_back(l2);
            sockaddr_in own2 = ip_addr("192.168.0.1", kPort + 1), any2 = ip_addr("0.0.0.0", kPort + 1);
            need_rc(rdma_bind_addr(l2, sa(own2)), "bind");
            need_rc(rdma_listen(l2, 4), "listen");
            ids.push_back(fresh());
            rec.set("any_on_own", failure(rdma_bind_addr(ids.back(), sa(any2))));
            // Two specific addresses share a port, each with its listener.
            sockaddr_in loop4 = ip_addr("127.0.0.1", kPort + 3), own4 = ip_addr("192.168.0.1", kPort + 3);
            rdma_cm_id *lo = fresh(), *ow = fresh();
            ids.push_back(lo);
            ids.push_back(ow);
            rec.num("two_addrs_bind_rc", rdma_bind_addr(lo, sa(loop4)) + rdma_bind_addr(ow, sa(own4)));
            rec.num("two_addrs_listen_rc", rdma_listen(lo, 4) + rdma_listen(ow, 4));
            // Two SO_REUSEADDR ids on the wildcard: neither may listen.
            sockaddr_in any3 = ip_addr("0.0.0.0", kPort + 2);
            rdma_cm_id *a = fresh(), *b = fresh();
            ids.push_back(a);
            ids.push_back(b);
            int one = 1;
            for (rdma_cm_id* x : {a, b}) {
                need_rc(rdma_set_option(x, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof one), "reuse");
                need_rc(rdma_bind_addr(x, sa(any3)), "bind");
            }
            rec.set("first_listen_on_any", failure(rdma_listen(a, 4)));
            rec.set("second_listen_on_any", failure(rdma_listen(b, 4)));
            for (rdma_cm_id* x : ids) need_rc(rdma_destroy_id(x), "destroy");
            rdma_destroy_event_channel(ch);
        },
        nullptr);
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    const std::string notavail = std::strerror(EADDRNOTAVAIL);
    CHECK(r.get("any_on_any") == notavail);
    CHECK(r.get("own_on_any") == notavail);
    CHECK(r.get("any_on_own") == notavail);
    CHECK(r.num("two_addrs_bind_rc") == 0);
    CHECK(r.num("two_addrs_listen_rc") == 0);
    CHECK(r.get("first_listen_on_any") == notavail);
    CHECK(r.get("second_listen_on_any") == notavail);
}

}  // namespace hcasim::test
