// Seeded random rdma_cm traffic: clients on a switch connect to one server
// again and again, each request with private data of a random length and
// content. The content decides, in a way both sides can compute, whether the
// server rejects (with private data derived from the request) or accepts
// (likewise), how long a message the client sends and who disconnects.
// Every event is checked for its type and status, every private data byte
// of every REQ, REP and REJ area (the derived bytes, then zeros), every
// message and echo byte, and every connection is torn down to TIMEWAIT_EXIT.
// The server runs one event loop for all clients, so requests, disconnects
// and time waits of different clients interleave as the seed has them.
// Over lossy links (1 % of packets dropped, 1 % corrupted, on every link)
// the same connections must come out the same; what only a loss excuses
// (a query asked again, a REQ repeated after its REJ was lost, a REJ for an
// invalid service ID once the server is gone, a last SEND unacknowledged
// when the peer left) takes one lost packet each.
// HCASIM_STRESS_SEEDS=N runs N seeds, HCASIM_STRESS_LOG=LEVEL logs them.
#include <catch2/catch.hpp>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <random>
#include <string>
#include <vector>

#include "testbench/integration/harness.hpp"
#include "testbench/integration/stress_seeds.hpp"

namespace hcasim::test {
namespace {

constexpr std::uint16_t kPort = 7500;
constexpr int kClients = 6;
constexpr std::size_t kReqArea = 56;   // a REQ's 92 bytes less rdma_cm's header
constexpr std::size_t kRepArea = 196;
constexpr std::size_t kRejArea = 148;
constexpr std::size_t kMaxMessage = 4096;

enum Decision : std::uint8_t { kReject = 0, kClientLeaves = 1, kServerLeaves = 2 };

// How many connections client `node` makes under `seed`: both sides know it.
int connections_of(std::uint64_t seed, int node) { return 3 + static_cast<int>((seed * 7 + node * 5) % 6); }

// A request's private data: [0] its length, [1] the decision, [2..3] the
// message length, then random bytes.
struct Request {
    std::vector<std::uint8_t> pd;
    Decision decision() const { return static_cast<Decision>(pd[1] % 3); }
    std::size_t message() const { return 1 + ((pd[2] | (pd[3] << 8)) % kMaxMessage); }
};

// What the server answers in an area of `area` bytes: bytes derived from the
// request over a length it also sets, zeros after (as the wire carries them).
std::vector<std::uint8_t> answer_of(const std::vector<std::uint8_t>& req, std::size_t area, std::size_t len) {
    std::vector<std::uint8_t> a(area, 0);
    for (std::size_t i = 0; i < len && i < area; ++i)
        a[i] = static_cast<std::uint8_t>(req[i % req.size()] ^ (0x5a + i * 3));
    return a;
}
std::size_t rep_len(const std::vector<std::uint8_t>& req) { return std::min(kRepArea, req.size() * 3); }
std::size_t rej_len(const std::vector<std::uint8_t>& req) { return std::min(kRejArea, req.size() * 2 + 1); }
std::uint8_t message_byte(const std::vector<std::uint8_t>& req, std::size_t i) {
    return static_cast<std::uint8_t>(req[1] * 31 + req.back() * 17 + i * 13 + req.size());
}

std::string node_ip(int node) { return "192.168.0." + std::to_string(node + 1); }
sockaddr_in ip_addr(const std::string& ip, std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
    return a;
}

ibv_qp_init_attr rc_attr() {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 2;
    a.cap.max_recv_wr = 2;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.sq_sig_all = 1;
    return a;
}

// Counts what went wrong instead of stopping: a failing seed reports all.
struct Tally {
    Record& rec;
    std::string who;
    long long bad = 0;
    void check(bool ok, const std::string& what) {
        if (ok) return;
        if (++bad <= 5) rec.set(who + ".bad" + std::to_string(bad), what);
    }
};

// Packets every link of the fabric (a node's each) dropped or damaged so far.
long long link_losses_now(Host& h) { return static_cast<long long>(link_losses(h, kClients + 1)); }

// Over lossy links the ACK of a side's last SEND may be lost after the
// peer has its message; if the peer then leaves, its QP no longer answers
// the SEND sent again, which ends in IBV_WC_RETRY_EXC_ERR though its bytes
// arrived (the peer checks them). Only the side whose peer leaves first
// can see that.
bool peer_left(bool lossy, bool peer_leaves, const ibv_wc& wc) {
    return lossy && peer_leaves && wc.status == IBV_WC_RETRY_EXC_ERR;
}

rdma_cm_event* next_event(rdma_event_channel* ch) {
    rdma_cm_event* e = nullptr;
    need_rc(rdma_get_cm_event(ch, &e), "rdma_get_cm_event");
    return e;
}

struct ServerConn {
    std::vector<std::uint8_t> req;
    PageBytes buf = PageBytes(kMaxMessage);
    ibv_mr* mr = nullptr;
    bool disconnected = false;
};

Program server(std::uint64_t seed, bool lossy) {
    return [seed, lossy](Host& h, Record& rec) {
        Tally t{rec, "srv"};
        int expected = 0;
        for (int n = 1; n <= kClients; ++n) expected += connections_of(seed, n);
        rdma_event_channel* ch = rdma_create_event_channel();
        need(ch != nullptr, "channel");
        rdma_cm_id* l = nullptr;
        need_rc(rdma_create_id(ch, &l, nullptr, RDMA_PS_TCP), "create_id");
        sockaddr_in any = ip_addr("0.0.0.0", kPort);
        need_rc(rdma_bind_addr(l, reinterpret_cast<sockaddr*>(&any)), "bind");
        need_rc(rdma_listen(l, 64), "listen");
        h.barrier("listening");
        std::map<rdma_cm_id*, ServerConn> conns;
        int requests = 0, finished = 0, rejected = 0, accepted = 0, unacked = 0, repeated = 0;
        std::set<std::vector<std::uint8_t>> seen;
        while (finished < expected) {
            rdma_cm_event* e = next_event(ch);
            rdma_cm_id* id = e->id;
            const rdma_cm_event_type type = e->event;
            t.check(e->status == 0, std::string("status ") + std::to_string(e->status) + " on " + rdma_event_str(type));
            if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
                const auto* p = static_cast<const std::uint8_t*>(e->param.conn.private_data);
                const std::size_t len = p && e->param.conn.private_data_len >= 4 ? p[0] : 0;
                t.check(e->param.conn.private_data_len == kReqArea && len >= 4 && len <= kReqArea,
                        "request private data length");
                std::vector<std::uint8_t> req(p, p + std::max<std::size_t>(4, std::min(len, kReqArea)));
                for (std::size_t i = req.size(); p && i < e->param.conn.private_data_len; ++i)
                    t.check(p[i] == 0, "request area beyond its data not zero");
                need_rc(rdma_ack_cm_event(e), "ack");
                Request r{req};
                // Over lossy links a REQ comes again when its REJ was lost:
                // the CM forgot the rejected request (as Linux's ib_cm does once it
                // has sent a REJ), so
                // it is a new request to the listener, rejected again alike.
                const bool again = !seen.insert(req).second;
                if (again) t.check(lossy && r.decision() == kReject, "a request came twice");
                else ++requests;
                if (again || r.decision() == kReject) {
                    const auto a = answer_of(req, kRejArea, rej_len(req));
                    need_rc(rdma_reject(id, a.data(), static_cast<std::uint8_t>(rej_len(req))), "reject");
                    need_rc(rdma_destroy_id(id), "destroy rejected");
                    if (again) {
                        ++repeated;
                    } else {
                        ++rejected;
                        ++finished;
                    }
                    continue;
                }
                ServerConn& c = conns[id];
                c.req = req;
                ibv_qp_init_attr qa = rc_attr();
                need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
                c.mr = rdma_reg_msgs(id, c.buf.data(), c.buf.size());
                need(c.mr != nullptr, "reg_msgs");
                need_rc(rdma_post_recv(id, nullptr, c.buf.data(), c.buf.size(), c.mr), "post_recv");
                const auto a = answer_of(req, kRepArea, rep_len(req));
                rdma_conn_param cp{};
                cp.private_data = a.data();
                cp.private_data_len = static_cast<std::uint8_t>(rep_len(req));
                cp.responder_resources = 1;
                cp.initiator_depth = 1;
                cp.rnr_retry_count = 7;
                need_rc(rdma_accept(id, &cp), "accept");
                ++accepted;
                // The client's message, checked, and echoed inverted.
                ibv_wc wc{};
                need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
                t.check(wc.status == IBV_WC_SUCCESS, std::string("recv ") + ibv_wc_status_str(wc.status));
                t.check(wc.byte_len == r.message(), "message length");
                for (std::size_t i = 0; i < wc.byte_len && i < c.buf.size(); ++i) {
                    if (c.buf[i] != message_byte(req, i)) {
                        t.check(false, "message byte " + std::to_string(i));
                        break;
                    }
                    c.buf[i] = static_cast<std::uint8_t>(~c.buf[i]);
                }
                need_rc(rdma_post_send(id, nullptr, c.buf.data(), wc.byte_len, c.mr, 0), "post_send");
                need(rdma_get_send_comp(id, &wc) == 1, "send comp");
                if (peer_left(lossy, r.decision() == kClientLeaves, wc)) ++unacked;
                else t.check(wc.status == IBV_WC_SUCCESS, std::string("send ") + ibv_wc_status_str(wc.status));
                if (r.decision() == kServerLeaves) need_rc(rdma_disconnect(id), "disconnect");
                continue;
            }
            need_rc(rdma_ack_cm_event(e), "ack");
            auto it = conns.find(id);
            if (it == conns.end()) {
                t.check(false, std::string("event of an unknown id: ") + rdma_event_str(type));
                continue;
            }
            ServerConn& c = it->second;
            if (type == RDMA_CM_EVENT_ESTABLISHED) continue;
            if (type == RDMA_CM_EVENT_DISCONNECTED) {
                t.check(!c.disconnected, "DISCONNECTED twice");
                c.disconnected = true;
                // The peer left first: this side answers with its own.
                if (Request{c.req}.decision() == kClientLeaves) need_rc(rdma_disconnect(id), "disconnect after peer");
                continue;
            }
            if (type == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
                t.check(c.disconnected, "TIMEWAIT_EXIT before DISCONNECTED");
                rdma_dereg_mr(c.mr);
                rdma_destroy_qp(id);
                need_rc(rdma_destroy_id(id), "destroy");
                conns.erase(it);
                ++finished;
                continue;
            }
            t.check(false, std::string("unexpected ") + rdma_event_str(type));
        }
        t.check(conns.empty(), "connections left over");
        rec.num("srv.requests", requests);
        rec.num("srv.accepted", accepted);
        rec.num("srv.rejected", rejected);
        rec.num("srv.unacked", unacked);
        rec.num("srv.repeated", repeated);
        rec.num("srv.lost", link_losses_now(h));
        rec.num("srv.bad", t.bad);
        need_rc(rdma_destroy_id(l), "destroy listener");
        rdma_destroy_event_channel(ch);
    };
}

// Over lossy links an address or route query whose packet is lost fails
// (ARP and the SA path query are not retried, as in the kernel): the client
// asks again, as an application would, up to this many times.
constexpr int kResolveTries = 8;

Program client(std::uint64_t seed, int node, bool lossy) {
    return [seed, node, lossy](Host& h, Record& rec) {
        const std::string k = "cli" + std::to_string(node);
        Tally t{rec, k};
        std::mt19937_64 rng(seed * 1000003 + static_cast<std::uint64_t>(node));
        rdma_event_channel* ch = rdma_create_event_channel();
        need(ch != nullptr, "channel");
        h.barrier("listening");
        int established = 0, rejected = 0, asked_again = 0, unacked = 0, late = 0;
        PageBytes buf(kMaxMessage);
        for (int c = 0; c < connections_of(seed, node); ++c) {
            // Some think first, so that clients' connections overlap differently.
            h.sleep(static_cast<sim::Tick>(rng() % 400) * sim::kPsPerUs);
            Request r;
            r.pd.resize(4 + rng() % (kReqArea - 3));
            for (auto& b : r.pd) b = static_cast<std::uint8_t>(rng());
            r.pd[0] = static_cast<std::uint8_t>(r.pd.size());
            rdma_cm_id* id = nullptr;
            need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), "create_id");
            sockaddr_in dst = ip_addr(node_ip(0), kPort);
            rdma_cm_event* e = nullptr;
            // One query, asked again while lossy links fail it with `error`.
            auto resolve = [&](auto ask, rdma_cm_event_type done, rdma_cm_event_type error, const char* what) {
                for (int tries = 1;; ++tries) {
                    need_rc(ask(), what);
                    e = next_event(ch);
                    const bool again = lossy && e->event == error && tries < kResolveTries;
                    if (!again) t.check(e->event == done && e->status == 0, rdma_event_str(done));
                    need_rc(rdma_ack_cm_event(e), "ack");
                    if (!again) return;
                    ++asked_again;
                }
            };
            resolve([&] { return rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000); },
                    RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ADDR_ERROR, "resolve_addr");
            resolve([&] { return rdma_resolve_route(id, 2000); }, RDMA_CM_EVENT_ROUTE_RESOLVED, RDMA_CM_EVENT_ROUTE_ERROR,
                    "resolve_route");
            ibv_qp_init_attr qa = rc_attr();
            need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
            ibv_mr* mr = rdma_reg_msgs(id, buf.data(), buf.size());
            need(mr != nullptr, "reg_msgs");
            need_rc(rdma_post_recv(id, nullptr, buf.data(), buf.size(), mr), "post_recv");
            rdma_conn_param cp{};
            cp.private_data = r.pd.data();
            cp.private_data_len = static_cast<std::uint8_t>(r.pd.size());
            cp.responder_resources = 1;
            cp.initiator_depth = 1;
            cp.retry_count = 7;
            cp.rnr_retry_count = 7;
            need_rc(rdma_connect(id, &cp), "connect");
            e = next_event(ch);
            const Decision d = r.decision();
            const auto* p = static_cast<const std::uint8_t*>(e->param.conn.private_data);
            if (d == kReject && lossy && e->event == RDMA_CM_EVENT_REJECTED && e->status == 8) {
                // Its REJ was lost, and the REQ sent again found the server
                // gone (invalid service ID).
                need_rc(rdma_ack_cm_event(e), "ack");
                ++rejected;
                ++late;
            } else if (d == kReject) {
                t.check(e->event == RDMA_CM_EVENT_REJECTED && e->status == 28,
                        std::string("expected REJECTED 28, got ") + rdma_event_str(e->event) + " " + std::to_string(e->status));
                const auto want = answer_of(r.pd, kRejArea, rej_len(r.pd));
                t.check(p && e->param.conn.private_data_len == kRejArea &&
                            first_mismatch(p, want.data(), kRejArea) == -1,
                        "REJ private data");
                need_rc(rdma_ack_cm_event(e), "ack");
                ++rejected;
            } else {
                t.check(e->event == RDMA_CM_EVENT_ESTABLISHED && e->status == 0,
                        std::string("expected ESTABLISHED, got ") + rdma_event_str(e->event) + " " + std::to_string(e->status));
                const auto want = answer_of(r.pd, kRepArea, rep_len(r.pd));
                t.check(p && e->param.conn.private_data_len == kRepArea &&
                            first_mismatch(p, want.data(), kRepArea) == -1,
                        "REP private data");
                need_rc(rdma_ack_cm_event(e), "ack");
                ++established;
                const std::size_t len = r.message();
                for (std::size_t i = 0; i < len; ++i) buf[i] = message_byte(r.pd, i);
                PageBytes sent(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(len));
                ibv_mr* smr = rdma_reg_msgs(id, sent.data(), sent.size());
                need(smr != nullptr, "reg_msgs");
                need_rc(rdma_post_send(id, nullptr, sent.data(), sent.size(), smr, 0), "post_send");
                ibv_wc wc{};
                need(rdma_get_send_comp(id, &wc) == 1, "send comp");
                if (peer_left(lossy, d == kServerLeaves, wc)) ++unacked;
                else t.check(wc.status == IBV_WC_SUCCESS, std::string("send ") + ibv_wc_status_str(wc.status));
                need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
                t.check(wc.status == IBV_WC_SUCCESS && wc.byte_len == len, "echo length");
                for (std::size_t i = 0; i < len; ++i) {
                    if (buf[i] != static_cast<std::uint8_t>(~sent[i])) {
                        t.check(false, "echo byte " + std::to_string(i));
                        break;
                    }
                }
                if (d == kClientLeaves) need_rc(rdma_disconnect(id), "disconnect");
                e = next_event(ch);
                t.check(e->event == RDMA_CM_EVENT_DISCONNECTED, std::string("expected DISCONNECTED, got ") +
                                                                     rdma_event_str(e->event));
                need_rc(rdma_ack_cm_event(e), "ack");
                // The server left first: answer with this side's own.
                if (d == kServerLeaves) need_rc(rdma_disconnect(id), "disconnect after peer");
                e = next_event(ch);
                t.check(e->event == RDMA_CM_EVENT_TIMEWAIT_EXIT, std::string("expected TIMEWAIT_EXIT, got ") +
                                                                      rdma_event_str(e->event));
                need_rc(rdma_ack_cm_event(e), "ack");
                rdma_dereg_mr(smr);
            }
            rdma_dereg_mr(mr);
            rdma_destroy_qp(id);
            need_rc(rdma_destroy_id(id), "destroy");
        }
        rec.num(k + ".established", established);
        rec.num(k + ".rejected", rejected);
        rec.num(k + ".asked_again", asked_again);
        rec.num(k + ".unacked", unacked);
        rec.num(k + ".late", late);
        rec.num(k + ".lost", link_losses_now(h));
        rec.num(k + ".bad", t.bad);
        rdma_destroy_event_channel(ch);
    };
}

RunResult random_run(std::uint64_t seed, bool lossy = false) {
    Overrides cfg{{"fabric.topology", "switch"}, {"fabric.nodes", std::to_string(kClients + 1)},
                  {"sim.seed", std::to_string(seed)}};
    if (lossy) add_lossy_links(cfg);
    if (const char* level = std::getenv("HCASIM_STRESS_LOG")) cfg.emplace_back("sim.log_level", level);
    std::vector<Program> programs{server(seed, lossy)};
    for (int n = 1; n <= kClients; ++n) programs.push_back(client(seed, n, lossy));
    return run_programs(cfg, programs, kClients + 1);
}

// Packets the links of a run dropped or damaged, as the program that
// finished last saw them.
long long link_losses_of(const RunResult& r) {
    long long n = r.num("srv.lost");
    for (int c = 1; c <= kClients; ++c) n = std::max(n, r.num("cli" + std::to_string(c) + ".lost"));
    return n;
}

void run_seeds(std::uint64_t first, int count, bool lossy) {
    long long lost = 0;
    for (const std::uint64_t seed : stress::seeds(first, count)) {
        const RunResult r = random_run(seed, lossy);
        std::string bad;
        for (const auto& [k, v] : r.kv)
            if (k.find(".bad") != std::string::npos && k.find(".bad") + 4 < k.size()) bad += k + "=" + v + "; ";
        INFO("seed " << seed << (lossy ? " (lossy links)" : "") << ": " << r.error << bad);
        REQUIRE(r.ok);
        long long established = 0, rejected = 0, connections = 0, asked_again = 0, unacked = r.num("srv.unacked"),
                  late = 0;
        for (int n = 1; n <= kClients; ++n) {
            const std::string k = "cli" + std::to_string(n);
            CHECK(r.num(k + ".bad") == 0);
            established += r.num(k + ".established");
            rejected += r.num(k + ".rejected");
            asked_again += r.num(k + ".asked_again");
            unacked += r.num(k + ".unacked");
            late += r.num(k + ".late");
            connections += connections_of(seed, n);
        }
        CHECK(r.num("srv.bad") == 0);
        CHECK(established + rejected == connections);
        CHECK(r.num("srv.requests") == connections);
        CHECK(r.num("srv.accepted") == established);
        CHECK(r.num("srv.rejected") == rejected);
        CHECK(rejected > 0);
        CHECK(established > 0);
        // What only losses excuse takes one each.
        const long long losses = link_losses_of(r);
        CHECK(asked_again + unacked + late + r.num("srv.repeated") <= losses);
        if (!lossy) CHECK(losses == 0);
        lost += losses;
        if (stress::long_mode())
            std::printf("rdma_cm random seed %llu%s: %lld packets lost, %lld queries asked again, %lld sends unacknowledged, "
                        "%lld REQs repeated, %lld rejected late\n",
                        static_cast<unsigned long long>(seed), lossy ? " (lossy)" : "", losses, asked_again, unacked,
                        static_cast<long long>(r.num("srv.repeated")), late);
    }
    if (lossy) CHECK(lost > 0);
}

}  // namespace

TEST_CASE("seeded random rdma_cm connections: every event, private data byte and message byte as the seed decides",
          "[rdma_cm][stress]") {
    run_seeds(9001, 20, false);
}

TEST_CASE("seeded random rdma_cm connections over lossy links come out as the seed decides, and only losses excuse a "
          "query asked again or a last send unacknowledged",
          "[rdma_cm][stress][lossy]") {
    run_seeds(9101, 8, true);
}

TEST_CASE("seeded random rdma_cm connections are deterministic", "[rdma_cm][stress]") {
    for (const bool lossy : {false, true}) {
        const RunResult a = random_run(4242, lossy), b = random_run(4242, lossy);
        INFO((lossy ? "lossy: " : "") << a.error << " / " << b.error);
        REQUIRE(a.ok);
        REQUIRE(b.ok);
        CHECK(a.has("srv.requests"));
        CHECK((link_losses_of(a) > 0) == lossy);
        CHECK(a.kv == b.kv);
    }
}

}  // namespace hcasim::test
