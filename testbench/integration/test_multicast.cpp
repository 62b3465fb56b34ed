// UD multicast through the verbs API: ibv_attach_mcast / ibv_detach_mcast,
// the subnet manager's joins and the switch's multicast forwarding table,
// the adapter's group table and loopback, fabrics of up to 16 nodes, a
// seeded random stress test and the hcasim mcast workload.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <set>

#include "testbench/integration/harness.hpp"
#include "testbench/integration/stress_workload.hpp"

namespace hcasim::test {
namespace {

constexpr std::uint32_t kGrh = 40;  // the GRH area at the start of a UD receive buffer
constexpr std::uint32_t kQkey = 0x11111111;
constexpr std::uint16_t kMlid = 0xC001;
constexpr std::uint32_t kMulticastQpn = 0xFFFFFF;

// A group GID in the IPv4-over-IB style: ff12:401b::<k>.
ibv_gid group_gid(int k) {
    ibv_gid g{};
    g.raw[0] = 0xff;
    g.raw[1] = 0x12;
    g.raw[2] = 0x40;
    g.raw[3] = 0x1b;
    g.raw[14] = static_cast<std::uint8_t>(k >> 8);
    g.raw[15] = static_cast<std::uint8_t>(k);
    return g;
}

SideOptions ud_side(int qps = 1, std::uint32_t recv_wr = 64) {
    SideOptions o;
    o.qp_type = IBV_QPT_UD;
    o.qps = qps;
    o.max_recv_wr = recv_wr;
    o.cq_depth = 1024;
    return o;
}

void ud_to_rts(ibv_qp* qp, std::uint32_t qkey = kQkey) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = qkey;
    need_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), "INIT");
    a.qp_state = IBV_QPS_RTR;
    need_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE), "RTR");
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    need_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "RTS");
}

// An address handle to a group: its MLID, and a GRH naming its MGID.
ibv_ah* group_ah(ibv_pd* pd, const ibv_gid& g, std::uint16_t mlid) {
    ibv_ah_attr a{};
    a.dlid = mlid;
    a.port_num = 1;
    a.is_global = 1;
    a.grh.dgid = g;
    a.grh.sgid_index = 0;
    a.grh.hop_limit = 1;
    ibv_ah* ah = ibv_create_ah(pd, &a);
    need(ah != nullptr, "ibv_create_ah");
    return ah;
}

int post_to_group(Side& s, ibv_qp* qp, ibv_ah* ah, std::size_t off, std::uint32_t len, std::uint64_t wr_id,
                  bool with_imm = false, std::uint32_t imm = 0) {
    ibv_sge sge = s.sge(off, len);
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = len ? &sge : nullptr;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
    wr.imm_data = imm;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = kMulticastQpn;
    wr.wr.ud.remote_qkey = kQkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

std::uint8_t byte_of(std::uint64_t seed, std::size_t i) {
    return static_cast<std::uint8_t>((seed * 0x9e3779b97f4a7c15ull + (i + 1) * 0x2545f4914f6cdd1dull) >> 56);
}
void fill(Side& s, std::size_t off, std::size_t len, std::uint64_t seed) {
    for (std::size_t i = 0; i < len; ++i) s.buf[off + i] = byte_of(seed, i);
}
long bad_bytes(const Side& s, std::size_t off, std::size_t len, std::uint64_t seed) {
    long bad = 0;
    for (std::size_t i = 0; i < len; ++i) bad += s.buf[off + i] != byte_of(seed, i);
    return bad;
}

// The GRH a UD receive wrote at the start of its buffer.
ibv_grh grh_at(const Side& s, std::size_t off) {
    ibv_grh g;
    std::memcpy(&g, s.buf + off, sizeof g);
    return g;
}

ibv_gid port_gid(Side& s, int index = 0) {
    ibv_gid g;
    need_rc(ibv_query_gid(s.ctx, 1, index, &g), "ibv_query_gid");
    return g;
}

// What a member node publishes: its LID, GID 0 and QP numbers.
struct MemberInfo {
    std::uint16_t lid = 0;
    ibv_gid gid{};
    std::uint32_t qpn[8] = {};
};

MemberInfo publish(Host& h, Side& s, const std::string& tag) {
    MemberInfo m;
    ibv_port_attr port{};
    need_rc(ibv_query_port(s.ctx, 1, &port), "ibv_query_port");
    m.lid = port.lid;
    m.gid = port_gid(s);
    for (std::size_t i = 0; i < s.qps.size() && i < 8; ++i) m.qpn[i] = s.qps[i]->qp_num;
    h.put_value(tag + "/" + std::to_string(h.index()), m);
    return m;
}

Overrides switch_fabric(int nodes) { return {{"fabric.topology", "switch"}, {"fabric.nodes", std::to_string(nodes)}}; }

}  // namespace

TEST_CASE("a multicast send through the switch reaches the attached qp of three member nodes with its bytes and grh",
          "[multicast][ud][verbs]") {
    constexpr int kNodes = 4;
    const std::uint32_t sizes[] = {1, 1000, 4096};
    const ibv_gid g = group_gid(1);
    std::vector<Program> programs;
    programs.push_back([&](Host& h, Record& rec) {
        Side s(h, ud_side());
        ud_to_rts(s.qps[0]);
        publish(h, s, "m");
        h.barrier("joined");
        ibv_ah* ah = group_ah(s.pd, g, kMlid);
        for (int k = 0; k < 3; ++k) {
            fill(s, 0x1000 + static_cast<std::size_t>(k) * 0x2000, sizes[k], 10 + static_cast<std::uint64_t>(k));
            need_rc(post_to_group(s, s.qps[0], ah, 0x1000 + static_cast<std::size_t>(k) * 0x2000, sizes[k], 100 + k),
                    "post");
            const auto wc = s.poll_ok(s.send_cq, 1, "multicast send");
            rec.num("send.wr_id." + std::to_string(k), static_cast<long long>(wc[0].wr_id));
        }
        h.barrier("received");
        rec.num("switch.copies", h.system().counter("switch0.multicast_copies"));
        rec.num("switch.packets", h.system().counter("switch0.multicast_packets"));
        rec.num("sm.groups", static_cast<long long>(h.system().subnet_manager().groups()));
        h.barrier("detached");
        rec.num("sm.groups_after", static_cast<long long>(h.system().subnet_manager().groups()));
        need_rc(ibv_destroy_ah(ah), "ibv_destroy_ah");
        s.close();
    });
    for (int node = 1; node < kNodes; ++node) {
        programs.push_back([&, node](Host& h, Record& rec) {
            Side s(h, ud_side());
            ud_to_rts(s.qps[0]);
            need_rc(ibv_attach_mcast(s.qps[0], &g, kMlid), "ibv_attach_mcast");
            for (int k = 0; k < 3; ++k)
                need_rc(s.post_recv(s.qps[0], {s.sge(0x10000 + static_cast<std::size_t>(k) * 0x2000, 4096 + kGrh)}, 50 + k),
                        "post_recv");
            h.barrier("joined");
            const MemberInfo sender = h.get_value<MemberInfo>("m/0");
            const auto wc = s.poll_ok(s.recv_cq, 3, "multicast receive");
            const std::string n = std::to_string(node);
            for (int k = 0; k < 3; ++k) {
                const std::string key = n + "." + std::to_string(k);
                const std::size_t slot = 0x10000 + static_cast<std::size_t>(k) * 0x2000;
                rec.num("wr_id." + key, static_cast<long long>(wc[k].wr_id));
                rec.num("len." + key, wc[k].byte_len);
                rec.num("grh_flag." + key, (wc[k].wc_flags & IBV_WC_GRH) != 0);
                rec.num("src_qp_ok." + key, wc[k].src_qp == sender.qpn[0]);
                rec.num("slid." + key, wc[k].slid);
                rec.num("qp_ok." + key, wc[k].qp_num == s.qps[0]->qp_num);
                rec.num("bad." + key, bad_bytes(s, slot + kGrh, sizes[k], 10 + static_cast<std::uint64_t>(k)));
                const ibv_grh grh = grh_at(s, slot);
                rec.num("grh.dgid_ok." + key, std::memcmp(grh.dgid.raw, g.raw, 16) == 0);
                rec.num("grh.sgid_ok." + key, std::memcmp(grh.sgid.raw, sender.gid.raw, 16) == 0);
                rec.num("grh.next_hdr." + key, grh.next_hdr);
            }
            h.barrier("received");
            need_rc(ibv_detach_mcast(s.qps[0], &g, kMlid), "ibv_detach_mcast");
            h.barrier("detached");
            s.close();
        });
    }
    const auto r = run_programs(switch_fabric(kNodes), programs, 0);
    HCASIM_REQUIRE_RUN(r);
    for (int k = 0; k < 3; ++k) CHECK(r.num("send.wr_id." + std::to_string(k)) == 100 + k);
    for (int node = 1; node < kNodes; ++node)
        for (int k = 0; k < 3; ++k) {
            const std::string key = std::to_string(node) + "." + std::to_string(k);
            INFO("node " << node << " message " << k);
            CHECK(r.num("wr_id." + key) == 50 + k);
            CHECK(r.num("len." + key) == static_cast<long long>(sizes[k] + kGrh));
            CHECK(r.num("grh_flag." + key) == 1);
            CHECK(r.num("src_qp_ok." + key) == 1);
            CHECK(r.num("slid." + key) == 1);
            CHECK(r.num("qp_ok." + key) == 1);
            CHECK(r.num("bad." + key) == 0);
            CHECK(r.num("grh.dgid_ok." + key) == 1);
            CHECK(r.num("grh.sgid_ok." + key) == 1);
            CHECK(r.num("grh.next_hdr." + key) == 0x1b);
        }
    // One packet in, one copy out of each member's port.
    CHECK(r.num("switch.packets") == 3);
    CHECK(r.num("switch.copies") == 9);
    CHECK(r.num("sm.groups") == 1);
    CHECK(r.num("sm.groups_after") == 0);
}

TEST_CASE("the sender's own qp gets its multicast only when attached and another attached qp on its node gets one copy",
          "[multicast][ud][verbs]") {
    const ibv_gid g = group_gid(2);
    for (const char* topology : {"back_to_back", "switch"}) {
        INFO("topology " << topology);
        const auto r = run_pair(
            {{"fabric.topology", topology}},
            [&](Host& h, Record& rec) {
                // qps[0] sends; qps[1] is attached from the start; qps[0]
                // joins for the second message.
                Side s(h, ud_side(2));
                for (ibv_qp* q : s.qps) ud_to_rts(q);
                for (int k = 0; k < 4; ++k)
                    for (std::size_t q = 0; q < 2; ++q)
                        need_rc(s.post_recv(s.qps[q], {s.sge(0x10000 + (q * 4 + static_cast<std::size_t>(k)) * 0x2000, 4096 + kGrh)},
                                            q * 10 + static_cast<std::uint64_t>(k)),
                                "post_recv");
                need_rc(ibv_attach_mcast(s.qps[1], &g, kMlid), "attach qp1");
                h.barrier("joined");
                ibv_ah* ah = group_ah(s.pd, g, kMlid);
                fill(s, 0x1000, 700, 21);
                need_rc(post_to_group(s, s.qps[0], ah, 0x1000, 700, 1), "post 1");
                s.poll_ok(s.send_cq, 1, "send 1");
                h.sleep(us(50));
                std::map<std::uint32_t, int> got;
                for (const auto& wc : s.poll(s.recv_cq, 8, 0)) ++got[wc.qp_num];
                rec.num("first.qp0", got[s.qps[0]->qp_num]);
                rec.num("first.qp1", got[s.qps[1]->qp_num]);
                rec.num("first.qp1_bad", bad_bytes(s, 0x10000 + 4 * 0x2000 + kGrh, 700, 21));
                need_rc(ibv_attach_mcast(s.qps[0], &g, kMlid), "attach qp0");
                h.barrier("second");
                fill(s, 0x1000, 900, 22);
                need_rc(post_to_group(s, s.qps[0], ah, 0x1000, 900, 2), "post 2");
                s.poll_ok(s.send_cq, 1, "send 2");
                h.sleep(us(50));
                got.clear();
                for (const auto& wc : s.poll(s.recv_cq, 8, 0)) ++got[wc.qp_num];
                rec.num("second.qp0", got[s.qps[0]->qp_num]);
                rec.num("second.qp1", got[s.qps[1]->qp_num]);
                rec.num("second.qp0_bad", bad_bytes(s, 0x10000 + kGrh, 900, 22));
                rec.num("second.qp1_bad", bad_bytes(s, 0x10000 + 5 * 0x2000 + kGrh, 900, 22));
                rec.num("loopback", h.system().counter("node0.hca.port.multicast_loopback_packets"));
                h.barrier("done");
                for (ibv_qp* q : s.qps) need_rc(ibv_detach_mcast(q, &g, kMlid), "detach");
                need_rc(ibv_destroy_ah(ah), "ibv_destroy_ah");
                s.close();
            },
            [&](Host& h, Record& rec) {
                Side s(h, ud_side());
                ud_to_rts(s.qps[0]);
                for (int k = 0; k < 4; ++k)
                    need_rc(s.post_recv(s.qps[0], {s.sge(0x10000 + static_cast<std::size_t>(k) * 0x2000, 4096 + kGrh)}, 7),
                            "post_recv");
                need_rc(ibv_attach_mcast(s.qps[0], &g, kMlid), "attach");
                h.barrier("joined");
                h.barrier("second");
                h.barrier("done");
                const auto wc = s.poll(s.recv_cq, 4, 0);
                rec.num("peer.received", static_cast<long long>(wc.size()));
                rec.num("peer.bad1", bad_bytes(s, 0x10000 + kGrh, 700, 21));
                rec.num("peer.bad2", bad_bytes(s, 0x12000 + kGrh, 900, 22));
                need_rc(ibv_detach_mcast(s.qps[0], &g, kMlid), "detach");
                s.close();
            });
        HCASIM_REQUIRE_RUN(r);
        CHECK(r.num("first.qp0") == 0);
        CHECK(r.num("first.qp1") == 1);
        CHECK(r.num("first.qp1_bad") == 0);
        CHECK(r.num("second.qp0") == 1);
        CHECK(r.num("second.qp1") == 1);
        CHECK(r.num("second.qp0_bad") == 0);
        CHECK(r.num("second.qp1_bad") == 0);
        CHECK(r.num("loopback") == 2);
        CHECK(r.num("peer.received") == 2);
        CHECK(r.num("peer.bad1") == 0);
        CHECK(r.num("peer.bad2") == 0);
    }
}

TEST_CASE("a detached qp receives no more multicast while the other members still do", "[multicast][ud][verbs]") {
    const ibv_gid g = group_gid(3);
    for (int nodes : {2, 3}) {
        const bool with_switch = nodes == 3;
        INFO((with_switch ? "switch, 3 nodes" : "back to back"));
        std::vector<Program> programs;
        programs.push_back([&](Host& h, Record& rec) {
            Side s(h, ud_side());
            ud_to_rts(s.qps[0]);
            h.barrier("joined");
            ibv_ah* ah = group_ah(s.pd, g, kMlid);
            for (int k = 0; k < 2; ++k) {
                fill(s, 0x1000, 256, 30 + static_cast<std::uint64_t>(k));
                need_rc(post_to_group(s, s.qps[0], ah, 0x1000, 256, static_cast<std::uint64_t>(k)), "post");
                s.poll_ok(s.send_cq, 1, "send");
                h.barrier("sent" + std::to_string(k));
                h.barrier("checked" + std::to_string(k));
            }
            rec.num("switch.copies", h.system().counter("switch0.multicast_copies"));
            rec.num("node1.dropped", h.system().counter("node1.hca.multicast.dropped_no_members"));
            need_rc(ibv_destroy_ah(ah), "ibv_destroy_ah");
            s.close();
        });
        for (int node = 1; node < nodes; ++node) {
            programs.push_back([&, node](Host& h, Record& rec) {
                Side s(h, ud_side());
                ud_to_rts(s.qps[0]);
                for (int k = 0; k < 2; ++k)
                    need_rc(s.post_recv(s.qps[0], {s.sge(0x10000 + static_cast<std::size_t>(k) * 0x2000, 4096 + kGrh)}, 60 + k),
                            "post_recv");
                need_rc(ibv_attach_mcast(s.qps[0], &g, kMlid), "attach");
                h.barrier("joined");
                for (int k = 0; k < 2; ++k) {
                    h.barrier("sent" + std::to_string(k));
                    h.sleep(us(20));
                    const auto wc = s.poll(s.recv_cq, 2, 0);
                    const std::string key = std::to_string(node) + "." + std::to_string(k);
                    rec.num("got." + key, static_cast<long long>(wc.size()));
                    if (!wc.empty()) rec.num("bad." + key, bad_bytes(s, 0x10000 + static_cast<std::size_t>(k) * 0x2000 + kGrh, 256, 30 + static_cast<std::uint64_t>(k)));
                    // Node 1 leaves after the first message.
                    if (k == 0 && node == 1) need_rc(ibv_detach_mcast(s.qps[0], &g, kMlid), "detach");
                    h.barrier("checked" + std::to_string(k));
                }
                if (node != 1) need_rc(ibv_detach_mcast(s.qps[0], &g, kMlid), "detach");
                s.close();
            });
        }
        const auto r = with_switch ? run_programs(switch_fabric(3), programs, 0) : run_programs({}, programs);
        HCASIM_REQUIRE_RUN(r);
        CHECK(r.num("got.1.0") == 1);
        CHECK(r.num("bad.1.0") == 0);
        CHECK(r.num("got.1.1") == 0);
        if (with_switch) {
            CHECK(r.num("got.2.0") == 1);
            CHECK(r.num("got.2.1") == 1);
            CHECK(r.num("bad.2.1") == 0);
            // The subnet manager took node 1's port out of the forwarding table.
            CHECK(r.num("switch.copies") == 3);
            CHECK(r.num("node1.dropped") == 0);
        } else {
            // Back to back the packet still reaches node 1's port, whose
            // adapter has no QP in the group any more.
            CHECK(r.num("node1.dropped") == 1);
        }
    }
}

TEST_CASE("ibv_attach_mcast refuses non-ud qps, non-multicast gids and lids, another mlid and a busy destroy",
          "[multicast][verbs][errors]") {
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            SideOptions o = ud_side(3);
            o.qp_types = {IBV_QPT_UD, IBV_QPT_UD, IBV_QPT_UD};
            Side s(h, o);
            ibv_qp* rc = s.create_qp(s.send_cq, s.recv_cq, IBV_QPT_RC);
            ibv_qp* uc = s.create_qp(s.send_cq, s.recv_cq, IBV_QPT_UC);
            ibv_device_attr dev{};
            need_rc(ibv_query_device(s.ctx, &dev), "ibv_query_device");
            rec.num("max_mcast_grp", dev.max_mcast_grp);
            rec.num("max_mcast_qp_attach", dev.max_mcast_qp_attach);
            rec.num("max_total_mcast_qp_attach", dev.max_total_mcast_qp_attach);
            const ibv_gid g = group_gid(4);
            const ibv_gid other = group_gid(5);
            rec.num("rc", ibv_attach_mcast(rc, &g, kMlid));
            rec.num("uc", ibv_attach_mcast(uc, &g, kMlid));
            const ibv_gid unicast = port_gid(s);
            errno = 0;
            rec.num("unicast_gid", ibv_attach_mcast(s.qps[0], &unicast, kMlid));
            rec.num("unicast_gid.errno", errno);
            rec.num("lid_unicast", ibv_attach_mcast(s.qps[0], &g, 0xBFFF));
            rec.num("lid_permissive", ibv_attach_mcast(s.qps[0], &g, 0xFFFF));
            rec.num("null_gid", ibv_attach_mcast(s.qps[0], nullptr, kMlid));
            const sim::Tick t0 = h.now();
            rec.num("attach", ibv_attach_mcast(s.qps[0], &g, kMlid));
            rec.num("attach_us", static_cast<long long>((h.now() - t0) / sim::kPsPerUs));
            const sim::Tick t1 = h.now();
            rec.num("attach_again", ibv_attach_mcast(s.qps[0], &g, kMlid));
            rec.num("attach_again_us", static_cast<long long>((h.now() - t1) / sim::kPsPerUs));
            rec.num("second_qp_other_mlid", ibv_attach_mcast(s.qps[1], &g, kMlid + 1));
            rec.num("other_group_same_mlid", ibv_attach_mcast(s.qps[1], &other, kMlid));
            rec.num("groups_in_sm", static_cast<long long>(h.system().subnet_manager().groups()));
            rec.num("detach_not_attached", ibv_detach_mcast(s.qps[1], &g, kMlid));
            rec.num("detach_other_group", ibv_detach_mcast(s.qps[0], &other, kMlid));
            rec.num("detach_rc", ibv_detach_mcast(rc, &g, kMlid));
            rec.num("destroy_attached", ibv_destroy_qp(s.qps[0]));
            rec.num("detach", ibv_detach_mcast(s.qps[0], &g, kMlid));
            rec.num("detach_again", ibv_detach_mcast(s.qps[0], &g, kMlid));
            rec.num("groups_after", static_cast<long long>(h.system().subnet_manager().groups()));
            h.put_value("group-mlid", kMlid);
            need_rc(ibv_attach_mcast(s.qps[2], &g, kMlid), "attach qp2");
            h.barrier("node0-member");
            h.barrier("peer-tried");
            need_rc(ibv_detach_mcast(s.qps[2], &g, kMlid), "detach qp2");
            need_rc(ibv_destroy_qp(rc), "destroy rc");
            need_rc(ibv_destroy_qp(uc), "destroy uc");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, ud_side());
            ud_to_rts(s.qps[0]);
            const ibv_gid g = group_gid(4);
            h.barrier("node0-member");
            // The group exists at the subnet manager with kMlid.
            rec.num("peer_other_mlid", ibv_attach_mcast(s.qps[0], &g, kMlid + 7));
            rec.num("peer_same_mlid", ibv_attach_mcast(s.qps[0], &g, kMlid));
            need_rc(ibv_detach_mcast(s.qps[0], &g, kMlid), "detach");
            h.barrier("peer-tried");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("max_mcast_grp") == 8192);
    CHECK(r.num("max_mcast_qp_attach") == 248);
    CHECK(r.num("max_total_mcast_qp_attach") == 8192 * 248);
    CHECK(r.num("rc") == EINVAL);
    CHECK(r.num("uc") == EINVAL);
    CHECK(r.num("unicast_gid") == EINVAL);
    CHECK(r.num("unicast_gid.errno") == EINVAL);
    CHECK(r.num("lid_unicast") == EINVAL);
    CHECK(r.num("lid_permissive") == EINVAL);
    CHECK(r.num("null_gid") == EINVAL);
    CHECK(r.num("attach") == 0);
    // A first attach joins at the SA (sm.join_latency_us, 50) and runs one
    // firmware command (fw.command_latency_us, 10); a repeated one neither.
    CHECK(r.num("attach_us") >= 60);
    CHECK(r.num("attach_again") == 0);
    CHECK(r.num("attach_again_us") < 10);
    CHECK(r.num("second_qp_other_mlid") == EINVAL);
    CHECK(r.num("other_group_same_mlid") == EINVAL);
    CHECK(r.num("groups_in_sm") == 1);
    CHECK(r.num("detach_not_attached") == EINVAL);
    CHECK(r.num("detach_other_group") == EINVAL);
    CHECK(r.num("detach_rc") == EINVAL);
    CHECK(r.num("destroy_attached") == EBUSY);
    CHECK(r.num("detach") == 0);
    CHECK(r.num("detach_again") == EINVAL);
    CHECK(r.num("groups_after") == 0);
    CHECK(r.num("peer_other_mlid") == EINVAL);
    CHECK(r.num("peer_same_mlid") == 0);
}

TEST_CASE("a full group table or a full group refuses the attach with ENOMEM and takes the port's join back",
          "[multicast][verbs][errors]") {
    const auto r = run_programs(
        {{"hca.max_mcast_grp", "2"}, {"hca.max_mcast_qp_attach", "2"}},
        {[&](Host& h, Record& rec) {
             Side s(h, ud_side(3));
             ibv_device_attr dev{};
             need_rc(ibv_query_device(s.ctx, &dev), "ibv_query_device");
             rec.num("max_mcast_grp", dev.max_mcast_grp);
             rec.num("max_mcast_qp_attach", dev.max_mcast_qp_attach);
             rec.num("max_total_mcast_qp_attach", dev.max_total_mcast_qp_attach);
             const ibv_gid g1 = group_gid(11), g2 = group_gid(12), g3 = group_gid(13);
             need_rc(ibv_attach_mcast(s.qps[0], &g1, 0xC011), "attach 1");
             need_rc(ibv_attach_mcast(s.qps[1], &g1, 0xC011), "attach 2");
             rec.num("third_qp", ibv_attach_mcast(s.qps[2], &g1, 0xC011));
             need_rc(ibv_attach_mcast(s.qps[0], &g2, 0xC012), "attach g2");
             rec.num("third_group", ibv_attach_mcast(s.qps[0], &g3, 0xC013));
             rec.num("sm_groups", static_cast<long long>(h.system().subnet_manager().groups()));
             rec.num("sm_mlid_g3", h.system().subnet_manager().mlid_of([&] {
                 fabric::SubnetManager::Gid k;
                 std::memcpy(k.data(), g3.raw, 16);
                 return k;
             }()));
             // Room again once a group is gone.
             need_rc(ibv_detach_mcast(s.qps[0], &g2, 0xC012), "detach g2");
             rec.num("third_group_again", ibv_attach_mcast(s.qps[0], &g3, 0xC013));
             need_rc(ibv_detach_mcast(s.qps[0], &g3, 0xC013), "detach g3");
             need_rc(ibv_detach_mcast(s.qps[0], &g1, 0xC011), "detach");
             need_rc(ibv_detach_mcast(s.qps[1], &g1, 0xC011), "detach");
             s.close();
         },
         nullptr});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("max_mcast_grp") == 2);
    CHECK(r.num("max_mcast_qp_attach") == 2);
    CHECK(r.num("max_total_mcast_qp_attach") == 4);
    CHECK(r.num("third_qp") == ENOMEM);
    CHECK(r.num("third_group") == ENOMEM);
    CHECK(r.num("sm_groups") == 2);
    CHECK(r.num("sm_mlid_g3") == 0);
    CHECK(r.num("third_group_again") == 0);
}

TEST_CASE("a 16-node switch fabric delivers a multicast to 15 members and ud datagrams between every pair of nodes",
          "[multicast][ud][verbs][fabric]") {
    constexpr int kNodes = 16;
    constexpr std::uint32_t kMcastBytes = 2000;
    constexpr std::uint32_t kPairBytes = 300;
    const ibv_gid g = group_gid(16);
    auto seed_of = [](int from, int to) { return static_cast<std::uint64_t>(1000 + from * 100 + to); };
    std::vector<Program> programs;
    for (int node = 0; node < kNodes; ++node) {
        programs.push_back([&, node](Host& h, Record& rec) {
            Side s(h, ud_side(1, 64));
            ud_to_rts(s.qps[0]);
            publish(h, s, "p");
            if (node != 0) need_rc(ibv_attach_mcast(s.qps[0], &g, kMlid), "attach");
            // Slot k of 16 receives; the multicast's and one from each peer.
            for (int k = 0; k < kNodes; ++k)
                need_rc(s.post_recv(s.qps[0], {s.sge(0x40000 + static_cast<std::size_t>(k) * 0x1000, 4096)},
                                    static_cast<std::uint64_t>(k)),
                        "post_recv");
            h.barrier("joined");
            std::vector<MemberInfo> peers(kNodes);
            for (int p = 0; p < kNodes; ++p) peers[static_cast<std::size_t>(p)] = h.get_value<MemberInfo>("p/" + std::to_string(p));
            const std::string n = std::to_string(node);
            if (node == 0) {
                ibv_ah* ah = group_ah(s.pd, g, kMlid);
                fill(s, 0x1000, kMcastBytes, 77);
                need_rc(post_to_group(s, s.qps[0], ah, 0x1000, kMcastBytes, 1), "multicast");
                s.poll_ok(s.send_cq, 1, "multicast send");
                need_rc(ibv_destroy_ah(ah), "ibv_destroy_ah");
            } else {
                const auto wc = s.poll_ok(s.recv_cq, 1, "multicast receive");
                const std::size_t slot = 0x40000 + static_cast<std::size_t>(wc[0].wr_id) * 0x1000;
                rec.num("mcast.len." + n, wc[0].byte_len);
                rec.num("mcast.bad." + n, bad_bytes(s, slot + kGrh, kMcastBytes, 77));
                rec.num("mcast.slid." + n, wc[0].slid);
                const ibv_grh grh = grh_at(s, slot);
                rec.num("mcast.dgid_ok." + n, std::memcmp(grh.dgid.raw, g.raw, 16) == 0);
            }
            h.barrier("multicast");
            // Every node sends one datagram to every other node.
            std::vector<ibv_ah*> ahs;
            for (int to = 0; to < kNodes; ++to) {
                if (to == node) continue;
                ibv_ah_attr a{};
                a.dlid = peers[static_cast<std::size_t>(to)].lid;
                a.port_num = 1;
                ibv_ah* ah = ibv_create_ah(s.pd, &a);
                need(ah != nullptr, "ibv_create_ah");
                ahs.push_back(ah);
                const std::size_t off = 0x10000 + static_cast<std::size_t>(to) * 0x400;
                fill(s, off, kPairBytes, seed_of(node, to));
                ibv_sge sge = s.sge(off, kPairBytes);
                ibv_send_wr wr{};
                wr.wr_id = static_cast<std::uint64_t>(to);
                wr.sg_list = &sge;
                wr.num_sge = 1;
                wr.opcode = IBV_WR_SEND;
                wr.send_flags = IBV_SEND_SIGNALED;
                wr.wr.ud.ah = ah;
                wr.wr.ud.remote_qpn = peers[static_cast<std::size_t>(to)].qpn[0];
                wr.wr.ud.remote_qkey = kQkey;
                ibv_send_wr* bad = nullptr;
                need_rc(ibv_post_send(s.qps[0], &wr, &bad), "post");
            }
            s.poll_ok(s.send_cq, kNodes - 1, "unicast sends");
            const auto wc = s.poll_ok(s.recv_cq, kNodes - 1, "unicast receives");
            std::set<int> from;
            long bad = 0, src_qp_wrong = 0;
            for (const auto& w : wc) {
                const int src = static_cast<int>(w.slid) - 1;
                from.insert(src);
                const std::size_t slot = 0x40000 + static_cast<std::size_t>(w.wr_id) * 0x1000;
                bad += bad_bytes(s, slot + kGrh, kPairBytes, seed_of(src, node));
                src_qp_wrong += w.src_qp != peers[static_cast<std::size_t>(src)].qpn[0];
                bad += w.byte_len != kPairBytes + kGrh;
            }
            rec.num("pairs.senders." + n, static_cast<long long>(from.size()));
            rec.num("pairs.from_self." + n, static_cast<long long>(from.count(node)));
            rec.num("pairs.bad." + n, bad);
            rec.num("pairs.src_qp_wrong." + n, src_qp_wrong);
            h.barrier("pairs");
            if (node == 0) {
                rec.num("switch.copies", h.system().counter("switch0.multicast_copies"));
                rec.num("switch.unicast", h.system().counter("switch0.packets_forwarded"));
            }
            for (ibv_ah* ah : ahs) need_rc(ibv_destroy_ah(ah), "ibv_destroy_ah");
            if (node != 0) need_rc(ibv_detach_mcast(s.qps[0], &g, kMlid), "detach");
            s.close();
        });
    }
    const auto r = run_programs(switch_fabric(kNodes), programs, 0);
    HCASIM_REQUIRE_RUN(r);
    for (int node = 0; node < kNodes; ++node) {
        const std::string n = std::to_string(node);
        INFO("node " << node);
        if (node != 0) {
            CHECK(r.num("mcast.len." + n) == kMcastBytes + kGrh);
            CHECK(r.num("mcast.bad." + n) == 0);
            CHECK(r.num("mcast.slid." + n) == 1);
            CHECK(r.num("mcast.dgid_ok." + n) == 1);
        }
        CHECK(r.num("pairs.senders." + n) == kNodes - 1);
        CHECK(r.num("pairs.from_self." + n) == 0);
        CHECK(r.num("pairs.bad." + n) == 0);
        CHECK(r.num("pairs.src_qp_wrong." + n) == 0);
    }
    CHECK(r.num("switch.copies") == kNodes - 1);
    CHECK(r.num("switch.unicast") == kNodes * (kNodes - 1));
}

TEST_CASE("fabric.nodes outside 2 to 648 is refused naming the value, and more than 2 back to back naming fabric.nodes",
          "[multicast][config][fabric]") {
    for (const char* bad : {"1", "0", "649", "-2", "two"}) {
        sim::Config cfg;
        try {
            cfg.set("fabric.nodes", bad);
            FAIL("fabric.nodes=" << bad << " was accepted");
        } catch (const sim::ConfigError& e) {
            const std::string what = e.what();
            CHECK(what.find(std::string("'") + bad + "'") != std::string::npos);
            CHECK(what.find("fabric.nodes") != std::string::npos);
            CHECK(what.find("an integer from 2 to 648") != std::string::npos);
        }
    }
    for (const char* good : {"2", "16", "36", "648"}) {
        sim::Config cfg;
        CHECK_NOTHROW(cfg.set("fabric.nodes", good));
    }
    const auto built = testbench::run_isolated([](std::ostream& os) {
        sim::Config cfg;
        cfg.set("fabric.nodes", "3");
        try {
            testbench::System sys(cfg);
            os << "built " << sys.nodes();
        } catch (const sim::ConfigError& e) {
            os << e.what();
        }
    });
    REQUIRE(built.ok);
    CHECK(built.output.find("fabric.nodes=3") != std::string::npos);
    CHECK(built.output.find("fabric.topology=switch") != std::string::npos);
    const auto sixteen = testbench::run_isolated([](std::ostream& os) {
        sim::Config cfg;
        cfg.set("fabric.topology", "switch");
        cfg.set("fabric.nodes", "16");
        testbench::System sys(cfg);
        os << sys.nodes() << " " << sys.node(15).hca().port().lid() << " " << sys.fabric_switch()->ports();
    });
    REQUIRE(sixteen.ok);
    CHECK(sixteen.output == "16 16 16");
    // The hcasim command refuses them the same way.
    const auto low = run_hcasim("lat --set fabric.nodes=1", true);
    CHECK(low.exit_code == 2);
    CHECK(low.out.find("invalid value '1' for fabric.nodes") != std::string::npos);
    const auto b2b = run_hcasim("bw --set fabric.nodes=4", true);
    CHECK(b2b.exit_code == 2);
    CHECK(b2b.out.find("fabric.nodes=4") != std::string::npos);
}

namespace {

// The seeded random multicast plan (HCASIM_STRESS_SEEDS=N runs N seeds,
// HCASIM_STRESS_SEED=S replays seed S): 3 to 6 nodes behind a switch, 1 to 3 UD
// QPs each, 2 to 4 groups with random members (a QP may be in several, a
// node's QPs in the same one), and messages from random QPs (members or not)
// to random groups, 0 bytes to the port's MTU, with or without immediate
// data. A message that carries no immediate names itself in its first four
// bytes; the rest is a pattern of (seed, message).
struct StressMessage {
    int id = 0;
    int node = 0, qp = 0;  // the sender
    int group = 0;
    std::uint32_t size = 0;
    bool imm = false;
};

struct StressPlan {
    std::uint64_t seed = 0;
    int nodes = 0, qps = 0, groups = 0;
    std::uint32_t mtu = 4096;
    std::vector<std::vector<bool>> member;  // [group][node * qps + qp]
    std::vector<StressMessage> messages;

    bool is_member(int g, int node, int qp) const {
        return member[static_cast<std::size_t>(g)][static_cast<std::size_t>(node * qps + qp)];
    }
    bool node_member(int g, int node) const {
        for (int q = 0; q < qps; ++q)
            if (is_member(g, node, q)) return true;
        return false;
    }
    // Messages each QP must receive (its groups' messages, its own included).
    int expected(int node, int qp) const {
        int n = 0;
        for (const auto& m : messages) n += is_member(m.group, node, qp);
        return n;
    }
    std::uint16_t mlid(int g) const { return static_cast<std::uint16_t>(0xC100 + g); }
    std::string describe() const {
        std::ostringstream os;
        os << "seed " << seed << ": " << nodes << " nodes x " << qps << " qps, " << groups << " groups, mtu " << mtu
           << ", " << messages.size() << " messages";
        return os.str();
    }
};

StressPlan make_stress_plan(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
    StressPlan p;
    p.seed = seed;
    p.nodes = pick(3, 6);
    p.qps = pick(1, 3);
    p.groups = pick(2, 4);
    const std::uint32_t mtus[] = {256, 1024, 2048, 4096};
    p.mtu = mtus[pick(0, 3)];
    p.member.assign(static_cast<std::size_t>(p.groups), std::vector<bool>(static_cast<std::size_t>(p.nodes * p.qps)));
    for (auto& g : p.member) {
        bool any = false;
        for (std::size_t i = 0; i < g.size(); ++i) any |= (g[i] = rng() % 2 == 0);
        if (!any) g[static_cast<std::size_t>(pick(0, static_cast<int>(g.size()) - 1))] = true;
    }
    const int n = pick(40, 90);
    for (int i = 0; i < n; ++i) {
        StressMessage m;
        m.id = i;
        m.node = pick(0, p.nodes - 1);
        m.qp = pick(0, p.qps - 1);
        m.group = pick(0, p.groups - 1);
        // Sizes at the edges (0, 1, the MTU) as often as in between.
        const int kind = pick(0, 5);
        m.size = kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? p.mtu : static_cast<std::uint32_t>(pick(0, static_cast<int>(p.mtu)));
        m.imm = m.size < 4 || rng() % 2 == 0;
        p.messages.push_back(m);
    }
    return p;
}

std::uint8_t stress_byte(const StressPlan& p, int id, std::size_t i) { return byte_of(p.seed * 1000 + static_cast<std::uint64_t>(id), i); }

// The payload of message m as it must arrive.
std::vector<std::uint8_t> stress_payload(const StressPlan& p, const StressMessage& m) {
    std::vector<std::uint8_t> v(m.size);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = stress_byte(p, m.id, i);
    if (!m.imm) std::memcpy(v.data(), &m.id, 4);
    return v;
}

ibv_gid stress_gid(int g) { return group_gid(0x100 + g); }

// Runs the plan; every node checks what its QPs received and records the
// number of errors and the first of them. Lossy: every link drops and
// corrupts 1 % of packets.
RunResult run_stress_plan(const StressPlan& plan, bool lossy = false) {
    std::vector<Program> programs;
    for (int node = 0; node < plan.nodes; ++node) {
        programs.push_back([&plan, node](Host& h, Record& rec) {
            const std::uint32_t slot_bytes = plan.mtu + kGrh;
            int most = 1;
            for (int q = 0; q < plan.qps; ++q) most = std::max(most, plan.expected(node, q));
            SideOptions o = ud_side(plan.qps, static_cast<std::uint32_t>(most));
            o.max_send_wr = static_cast<std::uint32_t>(plan.messages.size());
            o.cq_depth = 4096;
            const std::size_t send_area = plan.messages.size() * plan.mtu;
            o.buffer_bytes = send_area + static_cast<std::size_t>(plan.qps * most) * slot_bytes + 4096;
            Side s(h, o);
            for (ibv_qp* q : s.qps) ud_to_rts(q);
            publish(h, s, "s");
            for (int g = 0; g < plan.groups; ++g) {
                const ibv_gid gid = stress_gid(g);
                for (int q = 0; q < plan.qps; ++q)
                    if (plan.is_member(g, node, q))
                        need_rc(ibv_attach_mcast(s.qps[static_cast<std::size_t>(q)], &gid, plan.mlid(g)), "attach");
            }
            auto slot_of = [&](int q, std::uint64_t k) {
                return send_area + (static_cast<std::size_t>(q) * static_cast<std::size_t>(most) + k) * slot_bytes;
            };
            for (int q = 0; q < plan.qps; ++q)
                for (int k = 0; k < plan.expected(node, q); ++k)
                    need_rc(s.post_recv(s.qps[static_cast<std::size_t>(q)], {s.sge(slot_of(q, static_cast<std::uint64_t>(k)), slot_bytes)},
                                        static_cast<std::uint64_t>(k)),
                            "post_recv");
            h.barrier("joined");
            std::vector<MemberInfo> peers(static_cast<std::size_t>(plan.nodes));
            for (int p = 0; p < plan.nodes; ++p)
                peers[static_cast<std::size_t>(p)] = h.get_value<MemberInfo>("s/" + std::to_string(p));
            std::vector<ibv_ah*> ahs;
            for (int g = 0; g < plan.groups; ++g) ahs.push_back(group_ah(s.pd, stress_gid(g), plan.mlid(g)));
            int sent = 0;
            for (const auto& m : plan.messages) {
                if (m.node != node) continue;
                const std::size_t off = static_cast<std::size_t>(m.id) * plan.mtu;
                const auto payload = stress_payload(plan, m);
                if (m.size) std::memcpy(s.buf + off, payload.data(), m.size);
                need_rc(post_to_group(s, s.qps[static_cast<std::size_t>(m.qp)], ahs[static_cast<std::size_t>(m.group)], off,
                                      m.size, static_cast<std::uint64_t>(m.id), m.imm, htobe32(static_cast<std::uint32_t>(m.id))),
                        "post");
                ++sent;
            }
            long errors = 0;
            std::string first;
            auto fail = [&](const std::string& what) {
                if (errors++ == 0) first = what;
            };
            for (const auto& wc : s.poll(s.send_cq, sent)) {
                if (wc.status != IBV_WC_SUCCESS) fail("send " + std::to_string(wc.wr_id) + ": " + ibv_wc_status_str(wc.status));
            }
            int expected = 0;
            for (int q = 0; q < plan.qps; ++q) expected += plan.expected(node, q);
            const auto got = s.poll(s.recv_cq, expected + 1, 2000);
            rec.num("received." + std::to_string(node), static_cast<long long>(got.size()));
            std::map<std::uint32_t, int> qp_index;
            for (int q = 0; q < plan.qps; ++q) qp_index[s.qps[static_cast<std::size_t>(q)]->qp_num] = q;
            std::set<std::pair<int, int>> seen;  // (qp, message)
            for (const auto& wc : got) {
                const std::string at = "node " + std::to_string(node) + " wr " + std::to_string(wc.wr_id);
                if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) {
                    fail(at + ": status " + ibv_wc_status_str(wc.status));
                    continue;
                }
                const int q = qp_index.count(wc.qp_num) ? qp_index[wc.qp_num] : -1;
                if (q < 0) {
                    fail(at + ": unknown qp");
                    continue;
                }
                const std::size_t slot = slot_of(q, wc.wr_id);
                int id = -1;
                if (wc.wc_flags & IBV_WC_WITH_IMM) id = static_cast<int>(be32toh(wc.imm_data));
                else if (wc.byte_len >= kGrh + 4) std::memcpy(&id, s.buf + slot + kGrh, 4);
                if (id < 0 || id >= static_cast<int>(plan.messages.size())) {
                    fail(at + ": no message id");
                    continue;
                }
                const StressMessage& m = plan.messages[static_cast<std::size_t>(id)];
                const std::string msg = at + " message " + std::to_string(id);
                if (!plan.is_member(m.group, node, q)) fail(msg + ": qp " + std::to_string(q) + " is not in the group");
                if (!seen.insert({q, id}).second) fail(msg + ": received twice");
                if (wc.byte_len != m.size + kGrh) fail(msg + ": byte_len " + std::to_string(wc.byte_len));
                if (!(wc.wc_flags & IBV_WC_GRH)) fail(msg + ": no IBV_WC_GRH");
                if (((wc.wc_flags & IBV_WC_WITH_IMM) != 0) != m.imm) fail(msg + ": immediate flag");
                const MemberInfo& from = peers[static_cast<std::size_t>(m.node)];
                if (wc.src_qp != from.qpn[m.qp]) fail(msg + ": src_qp");
                if (wc.slid != from.lid) fail(msg + ": slid " + std::to_string(wc.slid));
                const ibv_grh grh = grh_at(s, slot);
                const ibv_gid gid = stress_gid(m.group);
                if (std::memcmp(grh.dgid.raw, gid.raw, 16) != 0) fail(msg + ": GRH DGID");
                if (std::memcmp(grh.sgid.raw, from.gid.raw, 16) != 0) fail(msg + ": GRH SGID");
                const auto want = stress_payload(plan, m);
                const long long bad = m.size ? first_mismatch(s.buf + slot + kGrh, want.data(), m.size) : -1;
                if (bad >= 0) fail(msg + ": byte " + std::to_string(bad) + " differs");
            }
            rec.num("errors." + std::to_string(node), errors);
            rec.set("first_error." + std::to_string(node), first);
            h.barrier("checked");
            rec.num("loopback." + std::to_string(node),
                    h.system().counter("node" + std::to_string(node) + ".hca.port.multicast_loopback_packets"));
            if (node == 0) rec.num("switch.copies", h.system().counter("switch0.multicast_copies"));
            for (ibv_ah* ah : ahs) need_rc(ibv_destroy_ah(ah), "ibv_destroy_ah");
            for (int g = 0; g < plan.groups; ++g) {
                const ibv_gid gid = stress_gid(g);
                for (int q = 0; q < plan.qps; ++q)
                    if (plan.is_member(g, node, q))
                        need_rc(ibv_detach_mcast(s.qps[static_cast<std::size_t>(q)], &gid, plan.mlid(g)), "detach");
            }
            h.barrier("left");
            if (node == 0) rec.num("sm.groups_left", static_cast<long long>(h.system().subnet_manager().groups()));
            s.close();
        });
    }
    Overrides cfg{{"fabric.topology", "switch"},
                  {"fabric.nodes", std::to_string(plan.nodes)},
                  {"port.max_mtu", std::to_string(plan.mtu)},
                  {"sim.seed", std::to_string(plan.seed % 4294967296ull)}};
    if (lossy) add_lossy_links(cfg);
    return run_programs(cfg, programs, 0);
}

}  // namespace

namespace {

// Lossless, every copy arrives; over lossy links each copy that arrives must
// be intact (the checks above) and arrive once, and most do: a copy crosses
// two links, and some 96 % of copies get through both; of a hundred or more,
// at least 80 %.
void multicast_stress(std::uint64_t first_seed, int normal, bool lossy) {
    for (const std::uint64_t seed : stress::seeds(first_seed, normal)) {
        const StressPlan plan = make_stress_plan(seed);
        INFO(plan.describe() << (lossy ? ", lossy links" : "") << ", replay with HCASIM_STRESS_SEED=" << seed);
        const RunResult r = run_stress_plan(plan, lossy);
        HCASIM_REQUIRE_RUN(r);
        long long copies = 0, received = 0, receivable = 0;
        for (int node = 0; node < plan.nodes; ++node) {
            const std::string n = std::to_string(node);
            INFO("node " << node << ": " << r.get("first_error." + n));
            int expected = 0;
            for (int q = 0; q < plan.qps; ++q) expected += plan.expected(node, q);
            CHECK(r.num("errors." + n) == 0);
            if (lossy) CHECK(r.num("received." + n) <= expected);
            else CHECK(r.num("received." + n) == expected);
            received += r.num("received." + n);
            receivable += expected;
            // A node's own packet comes back to it through its adapter when
            // one of its QPs is in the group, never through the switch.
            long long loopback = 0;
            for (const auto& m : plan.messages) loopback += m.node == node && plan.node_member(m.group, node);
            CHECK(r.num("loopback." + n) == loopback);
        }
        for (const auto& m : plan.messages)
            for (int node = 0; node < plan.nodes; ++node) copies += node != m.node && plan.node_member(m.group, node);
        // Lossy: a packet lost on its way to the switch is copied to no one.
        if (lossy) CHECK(r.num("switch.copies") <= copies);
        else CHECK(r.num("switch.copies") == copies);
        if (lossy && receivable >= 100) CHECK(received * 10 >= receivable * 8);
        if (stress::long_mode() && lossy)
            std::printf("multicast stress %s: %lld of %lld copies received\n", plan.describe().c_str(), received, receivable);
        CHECK(r.num("sm.groups_left") == 0);
    }
}

}  // namespace

TEST_CASE("random multicast traffic to random groups on 3 to 6 nodes delivers every byte and completion exactly once",
          "[multicast][stress]") {
    multicast_stress(31001, 8, false);
}

TEST_CASE("random multicast traffic over links that drop and corrupt 1% of packets delivers each copy intact and at "
          "most once",
          "[multicast][stress][lossy]") {
    multicast_stress(31501, 4, true);
}

TEST_CASE("hcasim mcast prints latency and bandwidth per size and receiver and the same output on every run",
          "[multicast][cli][determinism]") {
    const std::string args = "mcast --set fabric.topology=switch --set fabric.nodes=5 --sizes 8,2048 -n 300";
    const auto a = run_hcasim(args);
    const auto b = run_hcasim(args);
    REQUIRE(a.exit_code == 0);
    CHECK(a.out == b.out);
    CHECK(a.out.find("Multicast Send Latency Test") != std::string::npos);
    CHECK(a.out.find("Multicast Send BW Test") != std::string::npos);
    CHECK(a.out.find("5: node0 sends, node1 to node4 receive") != std::string::npos);
    const auto csv = run_hcasim(args + " --format csv");
    REQUIRE(csv.exit_code == 0);
    std::istringstream in(csv.out);
    std::string line;
    std::getline(in, line);
    CHECK(line == "bytes,receiver,iterations,t_min_us,t_max_us,t_typical_us,t_avg_us,t_stdev_us,t_99_us,t_999_us,sent,"
                  "received,bw_avg_MBps,msg_rate_Mpps");
    int rows = 0;
    while (std::getline(in, line)) {
        std::vector<std::string> f;
        std::istringstream cells(line);
        for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
        REQUIRE(f.size() == 14);
        INFO(line);
        CHECK(f[0] == (rows < 4 ? "8" : "2048"));
        CHECK(f[1] == "node" + std::to_string(rows % 4 + 1));
        CHECK(f[2] == "300");
        const double t_min = std::stod(f[3]), t_max = std::stod(f[4]), t_typical = std::stod(f[5]);
        CHECK(t_min > 0.5);
        CHECK(t_min <= t_typical);
        CHECK(t_typical <= t_max);
        CHECK(f[10] == "300");
        CHECK(f[11] == "300");
        CHECK(std::stod(f[12]) > 0);
        ++rows;
    }
    CHECK(rows == 8);
    const auto big = run_hcasim("mcast --sizes 8192", true);
    CHECK(big.exit_code == 2);
    CHECK(big.out.find("port.max_mtu = 4096") != std::string::npos);
    const auto op = run_hcasim("mcast --op write", true);
    CHECK(op.exit_code == 2);
    CHECK(op.out.find("mcast does not use --op") != std::string::npos);
}

TEST_CASE("lat and bw on more than two nodes run between node 0 and node 1 and two nodes stay as they were",
          "[multicast][cli][fabric]") {
    const auto two = run_hcasim("lat --sizes 2,64 -n 50");
    const auto two_set = run_hcasim("lat --sizes 2,64 -n 50 --set fabric.nodes=2");
    REQUIRE(two.exit_code == 0);
    CHECK(two.out == two_set.out);
    const auto four = run_hcasim("bw --sizes 4096 -n 50 --set fabric.topology=switch --set fabric.nodes=4 --counters");
    REQUIRE(four.exit_code == 0);
    CHECK(four.out.find("fabric.nodes    : 4") != std::string::npos);
    // Node 2 and node 3 are built and idle.
    CHECK(four.out.find("node3.hca.port.tx_packets = 0") != std::string::npos);
    CHECK(four.out.find("node2.hca.port.rx_packets = 0") != std::string::npos);
    CHECK(four.out.find("node1.hca.port.rx_packets = 0") == std::string::npos);
}

}  // namespace hcasim::test
