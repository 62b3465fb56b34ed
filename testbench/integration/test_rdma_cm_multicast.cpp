// rdma_cm multicast: rdma_join_multicast and rdma_leave_multicast over real
// MCMemberRecord SETs and DELETEs to the SA, datagrams to the group reaching
// every member byte for byte and no one who left, MULTICAST_ERROR when the
// SA does not answer and when the SM asks the ports to register again, the
// argument errors, and the determinism of it all.
#include <catch2/catch.hpp>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <arpa/inet.h>

#include <cstring>
#include <set>
#include <vector>

#include "model/packet/multicast.hpp"
#include "testbench/integration/harness.hpp"

namespace hcasim::test {
namespace {

constexpr sim::Tick kMs = sim::kPsPerMs;
constexpr int kMembers = 4;
constexpr const char* kGroup = "224.1.2.3";
// What an RDMA_PS_UDP id's join of 224.1.2.3 asks the SA for.
constexpr const char* kGroupMgid = "ff12:4001:ffff::1:203";
constexpr std::size_t kGrh = 40;
constexpr std::size_t kSlot = kGrh + 512;
constexpr int kRecvSlots = 8;

sockaddr_in ip_addr(const char* ip, std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}
sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }
std::string node_ip(int node) { return "192.168.0." + std::to_string(node + 1); }
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
std::string failure(int rc) {
    if (rc != -1) return "rc " + std::to_string(rc);
    return std::strerror(errno);
}

// A datagram's length and bytes: its first two bytes say who sent it in
// which round.
std::uint32_t dgram_len(int node, int round) { return static_cast<std::uint32_t>(100 + 37 * node + 5 * round); }
std::vector<std::uint8_t> dgram(int node, int round) {
    std::vector<std::uint8_t> d(dgram_len(node, round));
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(node * 61 + round * 17 + i * 7 + 3);
    d[0] = static_cast<std::uint8_t>(node);
    d[1] = static_cast<std::uint8_t>(round);
    return d;
}

// A member: a UD id on its own address, its QP, receive buffers posted.
struct Member {
    rdma_event_channel* ch = nullptr;
    rdma_cm_id* id = nullptr;
    PageBytes rbuf = PageBytes(kRecvSlots * kSlot);
    PageBytes sbuf = PageBytes(512);
    ibv_mr* rmr = nullptr;
    ibv_mr* smr = nullptr;
    ibv_ah* ah = nullptr;
    std::uint32_t group_qpn = 0;

    Member(int node, Record& rec, const std::string& k) {
        ch = rdma_create_event_channel();
        need(ch != nullptr, "channel");
        need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP), "create_id");
        // As mckey does: the group is the destination, the own address the source.
        sockaddr_in src = ip_addr(node_ip(node).c_str(), 0), grp = ip_addr(kGroup, 0);
        need_rc(rdma_resolve_addr(id, sa(src), sa(grp), 2000), "resolve_addr");
        need_rc(rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, rec, k + ".addr")), "ack");
        ibv_qp_init_attr qa{};
        qa.qp_type = IBV_QPT_UD;
        qa.cap.max_send_wr = 4;
        qa.cap.max_recv_wr = kRecvSlots;
        qa.cap.max_send_sge = 1;
        qa.cap.max_recv_sge = 1;
        qa.sq_sig_all = 1;
        need_rc(rdma_create_qp(id, nullptr, &qa), "create_qp");
        rmr = rdma_reg_msgs(id, rbuf.data(), rbuf.size());
        smr = rdma_reg_msgs(id, sbuf.data(), sbuf.size());
        need(rmr && smr, "reg_msgs");
        for (int i = 0; i < kRecvSlots; ++i)
            need_rc(rdma_post_recv(id, reinterpret_cast<void*>(static_cast<std::uintptr_t>(i)), rbuf.data() + i * kSlot,
                                   kSlot, rmr),
                    "post_recv");
    }
    // Joins the group and takes MULTICAST_JOIN; its UD data go to rec.
    void join(Record& rec, const std::string& k, void* context) {
        sockaddr_in grp = ip_addr(kGroup, 0);
        need_rc(rdma_join_multicast(id, sa(grp), context), "join_multicast");
        rdma_cm_event* e = expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, rec, k);
        const rdma_ud_param& ud = e->param.ud;
        rec.num(k + ".context_ok", ud.private_data == context);
        rec.num(k + ".qp_num", ud.qp_num);
        rec.num(k + ".qkey", ud.qkey);
        rec.num(k + ".mlid", ud.ah_attr.dlid);
        rec.num(k + ".is_global", ud.ah_attr.is_global);
        char mgid[64] = {};
        inet_ntop(AF_INET6, ud.ah_attr.grh.dgid.raw, mgid, sizeof mgid);
        rec.set(k + ".mgid", mgid);
        if (ah) ibv_destroy_ah(ah);
        ah = ibv_create_ah(id->pd, const_cast<ibv_ah_attr*>(&ud.ah_attr));
        need(ah != nullptr, "create_ah");
        group_qpn = ud.qp_num;
        need_rc(rdma_ack_cm_event(e), "ack");
    }
    void send(int node, int round) {
        const auto d = dgram(node, round);
        std::memcpy(sbuf.data(), d.data(), d.size());
        need_rc(rdma_post_ud_send(id, nullptr, sbuf.data(), d.size(), smr, 0, ah, group_qpn), "post_ud_send");
        ibv_wc wc{};
        need(rdma_get_send_comp(id, &wc) == 1, "send comp");
        need(wc.status == IBV_WC_SUCCESS, std::string("send: ") + ibv_wc_status_str(wc.status));
    }
    // Takes one datagram: the sender it names, or -1 when its length or
    // bytes are not what that sender sent in round.
    int receive(int round) {
        ibv_wc wc{};
        need(rdma_get_recv_comp(id, &wc) == 1, "recv comp");
        need(wc.status == IBV_WC_SUCCESS, std::string("recv: ") + ibv_wc_status_str(wc.status));
        const std::size_t slot = wc.wr_id;
        const std::uint8_t* p = rbuf.data() + slot * kSlot + kGrh;
        const int sender = p[0];
        if (sender >= kMembers || p[1] != round) return -1;
        const auto want = dgram(sender, round);
        if (wc.byte_len != kGrh + want.size() || !(wc.wc_flags & IBV_WC_GRH) ||
            first_mismatch(p, want.data(), want.size()) != -1)
            return -1;
        // The slot is posted again for the next round.
        need_rc(rdma_post_recv(id, reinterpret_cast<void*>(slot), rbuf.data() + slot * kSlot, kSlot, rmr), "post_recv");
        return sender;
    }
    ~Member() {
        if (ah) ibv_destroy_ah(ah);
        rdma_dereg_mr(rmr);
        rdma_dereg_mr(smr);
        rdma_destroy_qp(id);
        rdma_destroy_id(id);
        rdma_destroy_event_channel(ch);
    }
};

// Four members through a switch: all send in round 1; members 2 and 3
// leave; member 0 sends in round 2, which only member 1 may receive.
Program member_program(int node) {
    return [node](Host& h, Record& rec) {
        const std::string k = "n" + std::to_string(node);
        Member m(node, rec, k);
        int marker = node;
        m.join(rec, k + ".join", &marker);
        h.barrier("joined");
        rec.num(k + ".r1.start_us", now_us());
        m.send(node, 1);
        rec.num(k + ".r1.sent_us", now_us());
        std::string from;
        int bad = 0;
        // Its own datagram too: the adapter loops a multicast packet back to
        // its QPs attached to the group.
        for (int i = 0; i < kMembers; ++i) {
            const int s = m.receive(1);
            if (s < 0) ++bad;
            else from += std::to_string(s);
        }
        rec.set(k + ".r1.from", from);
        rec.num(k + ".r1.bad", bad);
        rec.num(k + ".r1.received_us", now_us());
        h.barrier("round1");
        rec.num(k + ".r1.barrier_us", now_us());
        sockaddr_in grp = ip_addr(kGroup, 0);
        if (node >= 2) {
            need_rc(rdma_leave_multicast(m.id, sa(grp)), "leave");
            rec.num(k + ".left_at_us", now_us());
            rec.set(k + ".leave_again", failure(rdma_leave_multicast(m.id, sa(grp))));
        }
        h.barrier("left");
        if (node == 0) {
            m.send(0, 2);
            rec.num(k + ".r2.from", m.receive(2));
        }
        if (node == 1) rec.num(k + ".r2.from", m.receive(2));
        if (node >= 2) {
            h.sleep(2 * kMs);
            ibv_wc wc{};
            rec.num(k + ".r2.stray", ibv_poll_cq(m.id->recv_cq, 1, &wc));
        }
        h.barrier("round2");
        if (node < 2) need_rc(rdma_leave_multicast(m.id, sa(grp)), "leave");
    };
}

RunResult members_run() {
    const Overrides cfg{{"fabric.topology", "switch"}, {"fabric.nodes", std::to_string(kMembers)}};
    std::vector<Program> programs;
    for (int n = 0; n < kMembers; ++n) programs.push_back(member_program(n));
    return run_programs(cfg, programs, kMembers);
}

void dump(const RunResult& r) {
    for (const auto& [k, v] : r.kv) UNSCOPED_INFO(k << "=" << v);
}

}  // namespace

TEST_CASE("rdma_cm multicast: four members join through the switch, each datagram reaches every other member "
          "byte for byte, and those who left get nothing",
          "[rdma_cm][multicast]") {
    const RunResult r = members_run();
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    const long long mlid = r.num("n0.join.mlid");
    CHECK(packet::is_multicast_lid(static_cast<std::uint16_t>(mlid)));
    for (int n = 0; n < kMembers; ++n) {
        const std::string k = "n" + std::to_string(n);
        CHECK(r.get(k + ".addr") == "RDMA_CM_EVENT_ADDR_RESOLVED");
        CHECK(r.get(k + ".join") == "RDMA_CM_EVENT_MULTICAST_JOIN");
        CHECK(r.num(k + ".join.status") == 0);
        CHECK(r.num(k + ".join.context_ok") == 1);
        CHECK(r.unum(k + ".join.qp_num") == 0xffffff);
        CHECK(r.unum(k + ".join.qkey") == RDMA_UDP_QKEY);
        CHECK(r.num(k + ".join.mlid") == mlid);  // one group, one MLID from the SA
        CHECK(r.num(k + ".join.is_global") == 1);
        CHECK(r.get(k + ".join.mgid") == kGroupMgid);
        // A SET to the SA on node 0 and its answer: the SA's handling (45 us)
        // and two MAD crossings, well under a millisecond.
        const double join_us = r.real(k + ".join.at_us") - r.real(k + ".addr.at_us");
        CHECK(join_us > 45.0);
        CHECK(join_us < 1000.0);
        // Every member's datagram, each once, none corrupted.
        std::string want;
        for (int s = 0; s < kMembers; ++s) want += std::to_string(s);
        std::string got = r.get(k + ".r1.from");
        std::sort(got.begin(), got.end());
        CHECK(got == want);
        CHECK(r.num(k + ".r1.bad") == 0);
    }
    CHECK(r.num("n0.r2.from") == 0);
    CHECK(r.num("n1.r2.from") == 0);
    for (int n = 2; n < kMembers; ++n) {
        const std::string k = "n" + std::to_string(n);
        CHECK(r.num(k + ".r2.stray") == 0);
        CHECK(r.get(k + ".leave_again") == std::strerror(EADDRNOTAVAIL));
    }
}

TEST_CASE("rdma_cm multicast runs are deterministic", "[rdma_cm][multicast]") {
    const RunResult a = members_run(), b = members_run();
    INFO(a.error << " / " << b.error);
    REQUIRE(a.ok);
    REQUIRE(b.ok);
    CHECK(a.has("n3.join.at_us"));
    for (const auto& [k, v] : a.kv)
        if (b.get(k) != v) UNSCOPED_INFO(k << ": " << v << " then " << b.get(k));
    CHECK(a.kv == b.kv);
}

TEST_CASE("rdma_join_multicast and rdma_leave_multicast refuse bad arguments with the errno librdmacm gives",
          "[rdma_cm][multicast]") {
    const RunResult r = run_pair(
        {}, nullptr, [](Host&, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* id = nullptr;
            need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP), "create_id");
            sockaddr_in grp = ip_addr(kGroup, 0), any = ip_addr("0.0.0.0", 0), own = ip_addr("192.168.0.2", 0);
            rec.set("unbound", failure(rdma_join_multicast(id, sa(grp), nullptr)));
            need_rc(rdma_bind_addr(id, sa(any)), "bind any");
            rec.set("bound_to_any", failure(rdma_join_multicast(id, sa(grp), nullptr)));
            need_rc(rdma_destroy_id(id), "destroy");
            need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP), "create_id");
            need_rc(rdma_bind_addr(id, sa(own)), "bind own");
            sockaddr_in6 v6{};
            v6.sin6_family = AF_INET6;
            rec.set("ipv6", failure(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&v6), nullptr)));
            rec.set("wildcard_group", failure(rdma_join_multicast(id, sa(any), nullptr)));
            rec.set("null_addr", failure(rdma_join_multicast(id, nullptr, nullptr)));
            rec.set("leave_not_joined", failure(rdma_leave_multicast(id, sa(grp))));
            // Bound to its own address, with no QP: the join works, and
            // nothing is attached.
            const double t0 = now_us();
            rec.num("join_rc", rdma_join_multicast(id, sa(grp), nullptr));
            rdma_cm_event* e = nullptr;
            need_rc(rdma_get_cm_event(ch, &e), "get event");
            rec.set("join", rdma_event_str(e->event));
            rec.num("join_us", now_us() - t0);
            need_rc(rdma_ack_cm_event(e), "ack");
            rec.num("leave_rc", rdma_leave_multicast(id, sa(grp)));
            need_rc(rdma_destroy_id(id), "destroy");
            rdma_destroy_event_channel(ch);
        });
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    const std::string inval = std::strerror(EINVAL);
    CHECK(r.get("unbound") == inval);
    CHECK(r.get("bound_to_any") == inval);
    CHECK(r.get("ipv6") == std::strerror(EAFNOSUPPORT));
    CHECK(r.get("wildcard_group") == inval);
    CHECK(r.get("null_addr") == inval);
    CHECK(r.get("leave_not_joined") == std::strerror(EADDRNOTAVAIL));
    CHECK(r.num("join_rc") == 0);
    CHECK(r.get("join") == "RDMA_CM_EVENT_MULTICAST_JOIN");
    // The SA's 45 us, two MAD crossings with the agents' handling, the
    // interrupt and the calls: more than the SA's part, well under 100 us.
    CHECK(r.real("join_us") > 45.0);
    CHECK(r.real("join_us") < 100.0);
    CHECK(r.num("leave_rc") == 0);
}

TEST_CASE("a join the SA never answers ends in MULTICAST_ERROR -ETIMEDOUT after the kernel's 3 s", "[rdma_cm][multicast]") {
    // Node 1's port loses everything it sends, its SET among it.
    const RunResult r = run_pair(
        {{"fault.node1.port.drop", "1"}}, nullptr, [](Host&, Record& rec) {
            rdma_event_channel* ch = rdma_create_event_channel();
            need(ch != nullptr, "channel");
            rdma_cm_id* id = nullptr;
            need_rc(rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP), "create_id");
            sockaddr_in grp = ip_addr(kGroup, 0), own = ip_addr("192.168.0.2", 0);
            need_rc(rdma_bind_addr(id, sa(own)), "bind");
            int marker = 0;
            const double t0 = now_us();
            need_rc(rdma_join_multicast(id, sa(grp), &marker), "join");
            rdma_cm_event* e = expect(id->channel, RDMA_CM_EVENT_MULTICAST_ERROR, rec, "err");
            rec.num("err.after_us", now_us() - t0);
            rec.num("err.context_ok", e->param.ud.private_data == &marker);
            need_rc(rdma_ack_cm_event(e), "ack");
            // The failed join is still the id's until it is left.
            rec.num("leave_rc", rdma_leave_multicast(id, sa(grp)));
            need_rc(rdma_destroy_id(id), "destroy");
            rdma_destroy_event_channel(ch);
        });
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    CHECK(r.num("err.status") == -ETIMEDOUT);
    CHECK(r.num("err.context_ok") == 1);
    CHECK(r.real("err.after_us") >= 3e6);
    CHECK(r.real("err.after_us") < 3.01e6);
    CHECK(r.num("leave_rc") == 0);
}

TEST_CASE("a client reregistration costs every member its join (MULTICAST_ERROR -ENETRESET); members that leave and "
          "join again get the group's datagrams again",
          "[rdma_cm][multicast]") {
    auto program = [](int node) {
        return [node](Host& h, Record& rec) {
            const std::string k = "n" + std::to_string(node);
            Member m(node, rec, k);
            int first = 1, second = 2;
            m.join(rec, k + ".join1", &first);
            rdma_cm_event* e = expect(m.ch, RDMA_CM_EVENT_MULTICAST_ERROR, rec, k + ".lost");
            rec.num(k + ".lost.context_ok", e->param.ud.private_data == &first);
            need_rc(rdma_ack_cm_event(e), "ack");
            sockaddr_in grp = ip_addr(kGroup, 0);
            need_rc(rdma_leave_multicast(m.id, sa(grp)), "leave");
            m.join(rec, k + ".join2", &second);
            h.barrier("joined again");
            if (node == 0) m.send(0, 3);
            rec.num(k + ".from", m.receive(3));
            h.barrier("done");
            need_rc(rdma_leave_multicast(m.id, sa(grp)), "leave");
        };
    };
    const RunResult r = run_pair({{"sm.client_reregister", "5ms"}}, program(0), program(1));
    INFO(r.error);
    dump(r);
    REQUIRE(r.ok);
    for (const std::string k : {"n0", "n1"}) {
        CHECK(r.num(k + ".lost.status") == -ENETRESET);
        CHECK(r.num(k + ".lost.context_ok") == 1);
        CHECK(r.real(k + ".lost.at_us") > 5000.0);
        CHECK(r.num(k + ".join2.context_ok") == 1);
        CHECK(r.num(k + ".join2.mlid") == r.num(k + ".join1.mlid"));
    }
    CHECK(r.num("n0.from") == 0);
    CHECK(r.num("n1.from") == 0);
}

}  // namespace hcasim::test
