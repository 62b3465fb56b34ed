// Dual-port adapters (port.count=2) and automatic path migration: an RC
// connection with an alternate path through the second ports arms (REARM,
// then ARMED once the peer is rearmed too), fails over when the primary
// link goes down or its retries run out, raises IBV_EVENT_PATH_MIG on both
// ends and delivers every byte; IBV_EVENT_PATH_MIG_ERR when the alternate
// port is down too. The verbs attributes are checked, not dropped.
#include <catch2/catch.hpp>

#include "testbench/integration/harness.hpp"

using namespace hcasim;
using namespace hcasim::test;

namespace {

constexpr sim::Tick kUs = sim::kPsPerUs;
constexpr std::uint32_t kBlock = 4096;

void sleep_until(Host& h, sim::Tick t) {
    if (h.now() < t) h.sleep(t - h.now());
}

struct PortsInfo {
    std::uint16_t lid1 = 0, lid2 = 0;
    std::uint32_t qpn = 0;
    std::uint64_t addr = 0;
    std::uint32_t rkey = 0;
};

PortsInfo exchange(Host& h, Side& s, const std::string& tag) {
    PortsInfo me;
    ibv_port_attr p{};
    need_rc(ibv_query_port(s.ctx, 1, &p), "ibv_query_port 1");
    me.lid1 = p.lid;
    if (ibv_query_port(s.ctx, 2, &p) == 0) me.lid2 = p.lid;
    me.qpn = s.qps[0]->qp_num;
    me.addr = reinterpret_cast<std::uintptr_t>(s.buf);
    me.rkey = s.mr->rkey;
    h.put_value(tag + "/" + std::to_string(h.index()), me);
    return h.get_value<PortsInfo>(tag + "/" + std::to_string(1 - h.index()));
}

// INIT on port 1, RTR with the primary path to the peer's port 1 and the
// alternate path from port 2 to the peer's port 2, RTS asking for REARM.
void connect_with_alternate(Side& s, const PortsInfo& peer, std::uint8_t timeout) {
    ConnOptions c;
    c.timeout = timeout;
    need_rc(qp_to_init(s.qps[0], c.qp_access), "INIT");
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer.qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.dlid = peer.lid1;
    a.ah_attr.port_num = 1;
    a.alt_ah_attr.dlid = peer.lid2;
    a.alt_ah_attr.port_num = 2;
    a.alt_port_num = 2;
    a.alt_timeout = timeout;
    need_rc(ibv_modify_qp(s.qps[0], &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH),
            "RTR with an alternate path");
    ibv_qp_attr r{};
    r.qp_state = IBV_QPS_RTS;
    r.sq_psn = 0;
    r.timeout = timeout;
    r.retry_cnt = c.retry_cnt;
    r.rnr_retry = 7;
    r.max_rd_atomic = 1;
    r.path_mig_state = IBV_MIG_REARM;
    need_rc(ibv_modify_qp(s.qps[0], &r,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_PATH_MIG_STATE),
            "RTS, REARM");
}

ibv_qp_attr query(Side& s) {
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    need_rc(ibv_query_qp(s.qps[0], &q, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PORT | IBV_QP_PATH_MIG_STATE, &qi),
            "ibv_query_qp");
    return q;
}

struct Scenario {
    std::string topology = "back_to_back";
    std::string link_down;
    std::uint8_t timeout = 10;  // 4.19 ms local ACK timeout
    int writes = 40;
    sim::Tick first_write = 1800 * kUs;
    sim::Tick spacing = 20 * kUs;
    int events0 = 0, events1 = 0;
};

// Node 0 writes `writes` patterned blocks, one every `spacing`, to node 1
// over an armed connection while the link schedule plays; both record
// their events, the final paths and every completion; node 1 checks the
// bytes.
RunResult run_apm(const Scenario& sc) {
    Overrides o{{"port.count", "2"}, {"fabric.topology", sc.topology}};
    if (!sc.link_down.empty()) o.push_back({"fault.link_down", sc.link_down});
    return run_pair(
        o,
        [sc](Host& h, Record& rec) {
            SideOptions so;
            so.buffer_bytes = (sc.writes + 1) * kBlock;
            Side s(h, so);
            const PortsInfo peer = exchange(h, s, "a");
            rec.num("peer_lid2", peer.lid2);
            connect_with_alternate(s, peer, sc.timeout);
            rec.num("mig_rearm", query(s).path_mig_state);
            h.barrier("connected");
            // A first write arms both ends: its request tells the peer, the
            // ACK tells us.
            need_rc(s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, IBV_SEND_SIGNALED, 999,
                                peer.addr + sc.writes * kBlock, peer.rkey),
                    "warm-up write");
            s.poll_ok(s.send_cq, 1, "warm-up write", 100000);
            rec.num("mig_armed", query(s).path_mig_state);
            h.barrier("armed");
            fill_pattern(s.buf, sc.writes * kBlock, 31);
            for (int i = 0; i < sc.writes; ++i) {
                sleep_until(h, sc.first_write + static_cast<sim::Tick>(i) * sc.spacing);
                need_rc(s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(i * kBlock, kBlock)}, IBV_SEND_SIGNALED,
                                    static_cast<std::uint64_t>(i), peer.addr + i * kBlock, peer.rkey),
                        "post write");
            }
            const auto wcs = s.poll(s.send_cq, sc.writes, 1e6);
            rec.num("wcs", wcs.size());
            int ok = 0;
            for (const auto& w : wcs) ok += w.status == IBV_WC_SUCCESS;
            rec.num("ok", ok);
            if (!wcs.empty()) rec.num("first_status", wcs[0].status);
            if (!wcs.empty()) rec.num("last_status", wcs.back().status);
            record_async_events(s, rec, "ev0", sc.events0);
            const ibv_qp_attr q = query(s);
            rec.num("port_after", q.port_num);
            rec.num("dlid_after", q.ah_attr.dlid);
            rec.num("mig_after", q.path_mig_state);
            rec.num("port2_tx", h.system().counter("node0.hca.port2.tx_packets"));
            h.barrier("done");
            s.close();
        },
        [sc](Host& h, Record& rec) {
            SideOptions so;
            so.buffer_bytes = (sc.writes + 1) * kBlock;
            Side s(h, so);
            const PortsInfo peer = exchange(h, s, "a");
            connect_with_alternate(s, peer, sc.timeout);
            h.barrier("connected");
            h.barrier("armed");
            rec.num("mig_armed1", query(s).path_mig_state);
            record_async_events(s, rec, "ev1", sc.events1);
            h.barrier("done");
            const auto want = pattern(sc.writes * kBlock, 31);
            rec.num("first_bad", first_mismatch(s.buf, want.data(), want.size()));
            const ibv_qp_attr q = query(s);
            rec.num("port_after1", q.port_num);
            rec.num("mig_after1", q.path_mig_state);
            s.close();
        });
}

}  // namespace

TEST_CASE("a dual-port adapter reports both ports and the verbs path-migration attributes are checked and kept",
          "[integration][apm]") {
    const auto r = run_pair(
        {{"port.count", "2"}},
        [](Host& h, Record& rec) {
            Side s(h, {});
            const PortsInfo peer = exchange(h, s, "v");
            ibv_device_attr d{};
            need_rc(ibv_query_device(s.ctx, &d), "ibv_query_device");
            rec.num("ports", d.phys_port_cnt);
            rec.num("apm_cap", (d.device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG) != 0);
            ibv_port_attr p{};
            rec.num("query_port3", ibv_query_port(s.ctx, 3, &p));
            need_rc(ibv_query_port(s.ctx, 2, &p), "ibv_query_port 2");
            rec.num("port2_state", p.state);
            ibv_gid g1{}, g2{};
            need_rc(ibv_query_gid(s.ctx, 1, 0, &g1), "gid 1");
            need_rc(ibv_query_gid(s.ctx, 2, 0, &g2), "gid 2");
            rec.num("gids_differ", std::memcmp(g1.raw, g2.raw, 16) != 0);
            // The QP on port 2, its primary path to the peer's port 2.
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_INIT;
            a.port_num = 3;
            a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
            const int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
            rec.num("init_port3", ibv_modify_qp(s.qps[0], &a, init_mask));
            a.port_num = 2;
            need_rc(ibv_modify_qp(s.qps[0], &a, init_mask), "INIT on port 2");
            ibv_qp_attr t{};
            t.qp_state = IBV_QPS_RTR;
            t.path_mtu = IBV_MTU_1024;
            t.dest_qp_num = peer.qpn;
            t.max_dest_rd_atomic = 1;
            t.ah_attr.dlid = peer.lid2;
            t.ah_attr.port_num = 2;
            const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
            t.alt_ah_attr.dlid = peer.lid1;
            t.alt_port_num = 3;
            rec.num("alt_port3", ibv_modify_qp(s.qps[0], &t, rtr_mask | IBV_QP_ALT_PATH));
            t.alt_port_num = 1;
            t.alt_ah_attr.dlid = 0;
            rec.num("alt_dlid0", ibv_modify_qp(s.qps[0], &t, rtr_mask | IBV_QP_ALT_PATH));
            rec.num("state_after_refusals", static_cast<int>(qp_state(s.qps[0])));
            need_rc(ibv_modify_qp(s.qps[0], &t, rtr_mask), "RTR without an alternate path");
            ibv_qp_attr u{};
            u.qp_state = IBV_QPS_RTS;
            u.timeout = 12;
            u.retry_cnt = 7;
            u.rnr_retry = 7;
            u.max_rd_atomic = 1;
            const int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
            u.path_mig_state = IBV_MIG_REARM;
            rec.num("rearm_without_alt", ibv_modify_qp(s.qps[0], &u, rts_mask | IBV_QP_PATH_MIG_STATE));
            const unsigned bad_mig = 7;  // no ibv_mig_state has this value
            std::memcpy(&u.path_mig_state, &bad_mig, sizeof bad_mig);
            u.alt_ah_attr.dlid = peer.lid1;
            u.alt_ah_attr.sl = 3;
            u.alt_port_num = 1;
            u.alt_timeout = 9;
            rec.num("bad_mig_state", ibv_modify_qp(s.qps[0], &u, rts_mask | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE));
            u.path_mig_state = IBV_MIG_REARM;
            rec.num("rts_rearm", ibv_modify_qp(s.qps[0], &u, rts_mask | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE));
            ibv_qp_attr q{};
            ibv_qp_init_attr qi{};
            need_rc(ibv_query_qp(s.qps[0], &q, IBV_QP_STATE | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE, &qi),
                    "ibv_query_qp");
            rec.num("q.port", q.port_num);
            rec.num("q.dlid", q.ah_attr.dlid);
            rec.num("q.alt_port", q.alt_port_num);
            rec.num("q.alt_dlid", q.alt_ah_attr.dlid);
            rec.num("q.alt_sl", q.alt_ah_attr.sl);
            rec.num("q.alt_timeout", q.alt_timeout);
            rec.num("q.mig", q.path_mig_state);
            rec.num("peer_lid1", peer.lid1);
            rec.num("peer_lid2", peer.lid2);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions so;
            so.qp_type = IBV_QPT_UD;
            Side s(h, so);
            exchange(h, s, "v");
            // A datagram QP has no path to migrate.
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_INIT;
            a.port_num = 2;
            a.qkey = 0x11111111;
            need_rc(ibv_modify_qp(s.qps[0], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), "UD INIT");
            a.qp_state = IBV_QPS_RTR;
            a.alt_port_num = 1;
            a.alt_ah_attr.dlid = 1;
            rec.num("ud_alt", ibv_modify_qp(s.qps[0], &a, IBV_QP_STATE | IBV_QP_ALT_PATH));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("ports") == 2);
    CHECK(r.num("apm_cap") == 1);
    CHECK(r.num("query_port3") == EINVAL);
    CHECK(r.num("port2_state") == IBV_PORT_ACTIVE);
    CHECK(r.num("gids_differ") == 1);
    CHECK(r.num("init_port3") == EINVAL);
    CHECK(r.num("alt_port3") == EINVAL);
    CHECK(r.num("alt_dlid0") == EINVAL);
    CHECK(r.num("state_after_refusals") == IBV_QPS_INIT);
    CHECK(r.num("rearm_without_alt") == EINVAL);
    CHECK(r.num("bad_mig_state") == EINVAL);
    CHECK(r.num("rts_rearm") == 0);
    CHECK(r.num("q.port") == 2);
    CHECK(r.num("q.dlid") == r.num("peer_lid2"));
    CHECK(r.num("q.alt_port") == 1);
    CHECK(r.num("q.alt_dlid") == r.num("peer_lid1"));
    CHECK(r.num("q.alt_sl") == 3);
    CHECK(r.num("q.alt_timeout") == 9);
    CHECK(r.num("q.mig") == IBV_MIG_REARM);  // no packet from the peer yet
    CHECK(r.num("ud_alt") == EINVAL);
}

TEST_CASE("when the primary link goes down an armed rc connection migrates to port 2 on both ends and every byte "
          "arrives",
          "[integration][apm][outage]") {
    Scenario sc;
    sc.link_down = "node0.port@1990us+1000us";  // between the 10th and the 11th write
    sc.events0 = 3;  // PORT_ERR, PATH_MIG, PORT_ACTIVE
    sc.events1 = 3;
    const RunResult r = run_apm(sc);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("mig_rearm") == IBV_MIG_REARM);
    CHECK(r.num("mig_armed") == IBV_MIG_ARMED);
    CHECK(r.num("mig_armed1") == IBV_MIG_ARMED);
    CHECK(r.num("wcs") == sc.writes);
    CHECK(r.num("ok") == sc.writes);
    CHECK(r.num("first_bad") == -1);
    for (const char* side : {"ev0", "ev1"}) {
        INFO(side);
        CHECK(r.num(std::string(side) + ".0.type") == IBV_EVENT_PORT_ERR);
        CHECK(r.num(std::string(side) + ".0.port") == 1);
        CHECK(r.num(std::string(side) + ".1.type") == IBV_EVENT_PATH_MIG);
        CHECK(r.num(std::string(side) + ".1.our_qp") == 1);
        CHECK(r.num(std::string(side) + ".2.type") == IBV_EVENT_PORT_ACTIVE);
        CHECK(r.num(std::string(side) + ".2.port") == 1);
    }
    CHECK(r.num("port_after") == 2);
    CHECK(r.num("dlid_after") == r.num("peer_lid2"));
    CHECK(r.num("mig_after") == IBV_MIG_MIGRATED);
    CHECK(r.num("port_after1") == 2);
    CHECK(r.num("mig_after1") == IBV_MIG_MIGRATED);
    CHECK(r.num("port2_tx") >= 30);
}

TEST_CASE("behind a switch, the requester fails over when its retries run out after the peer's port went down",
          "[integration][apm][outage]") {
    Scenario sc;
    sc.topology = "switch";
    sc.link_down = "node1.port@1990us+100ms";
    sc.timeout = 8;  // 1.05 ms: 8 tries before the fail-over
    sc.events0 = 1;  // PATH_MIG when the retries ran out
    sc.events1 = 2;  // PORT_ERR, PATH_MIG
    const RunResult r = run_apm(sc);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("mig_armed") == IBV_MIG_ARMED);
    CHECK(r.num("ok") == sc.writes);
    CHECK(r.num("first_bad") == -1);
    CHECK(r.num("ev0.0.type") == IBV_EVENT_PATH_MIG);
    CHECK(r.num("ev0.0.our_qp") == 1);
    CHECK(r.num("ev1.0.type") == IBV_EVENT_PORT_ERR);
    CHECK(r.num("ev1.1.type") == IBV_EVENT_PATH_MIG);
    CHECK(r.num("port_after") == 2);
    CHECK(r.num("port_after1") == 2);
}

TEST_CASE("with the alternate port down too, the adapters raise IBV_EVENT_PATH_MIG_ERR and the request fails with "
          "IBV_WC_RETRY_EXC_ERR",
          "[integration][apm][outage]") {
    Scenario sc;
    sc.link_down = "node0.port2@1900us+500ms,node0.port@1990us+500ms";
    sc.timeout = 8;
    sc.writes = 20;
    // PORT_ERR (2), PORT_ERR (1), PATH_MIG_ERR; node 0's requester tries
    // again when its retries run out.
    sc.events0 = 4;
    sc.events1 = 3;
    const RunResult r = run_apm(sc);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("wcs") == sc.writes);
    CHECK(r.num("ok") == 10);  // those posted before the outage
    CHECK(r.num("last_status") == IBV_WC_WR_FLUSH_ERR);
    for (const char* side : {"ev0", "ev1"}) {
        INFO(side);
        CHECK(r.num(std::string(side) + ".0.type") == IBV_EVENT_PORT_ERR);
        CHECK(r.num(std::string(side) + ".0.port") == 2);
        CHECK(r.num(std::string(side) + ".1.type") == IBV_EVENT_PORT_ERR);
        CHECK(r.num(std::string(side) + ".1.port") == 1);
        CHECK(r.num(std::string(side) + ".2.type") == IBV_EVENT_PATH_MIG_ERR);
        CHECK(r.num(std::string(side) + ".2.our_qp") == 1);
    }
    CHECK(r.num("ev0.3.type") == IBV_EVENT_PATH_MIG_ERR);
    CHECK(r.num("port_after") == 1);
    CHECK(r.num("mig_after") == IBV_MIG_ARMED);
}

TEST_CASE("software migrates an armed qp with IBV_MIG_MIGRATED and the peer follows on its next request",
          "[integration][apm]") {
    const auto r = run_pair(
        {{"port.count", "2"}},
        [](Host& h, Record& rec) {
            Side s(h, {});
            const PortsInfo peer = exchange(h, s, "m");
            connect_with_alternate(s, peer, 14);
            h.barrier("connected");
            need_rc(s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, IBV_SEND_SIGNALED, 1, peer.addr, peer.rkey),
                    "arming write");
            s.poll_ok(s.send_cq, 1, "arming write");
            ibv_qp_attr m{};
            m.qp_state = IBV_QPS_RTS;
            m.path_mig_state = IBV_MIG_MIGRATED;
            rec.num("migrate", ibv_modify_qp(s.qps[0], &m, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE));
            const ibv_qp_attr q = query(s);
            rec.num("port", q.port_num);
            rec.num("dlid", q.ah_attr.dlid);
            rec.num("peer_lid2", peer.lid2);
            fill_pattern(s.buf, 8192, 5);
            const auto before = h.system().counter("node0.hca.port2.tx_packets");
            need_rc(s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 8192)}, IBV_SEND_SIGNALED, 2, peer.addr,
                                peer.rkey),
                    "write on port 2");
            s.poll_ok(s.send_cq, 1, "write on port 2");
            rec.num("port2_packets", h.system().counter("node0.hca.port2.tx_packets") - before);
            h.barrier("written");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            const PortsInfo peer = exchange(h, s, "m");
            connect_with_alternate(s, peer, 14);
            h.barrier("connected");
            record_async_events(s, rec, "ev1", 1);
            h.barrier("written");
            const auto want = pattern(8192, 5);
            rec.num("first_bad", first_mismatch(s.buf, want.data(), want.size()));
            rec.num("port1", query(s).port_num);
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("migrate") == 0);
    CHECK(r.num("port") == 2);
    CHECK(r.num("dlid") == r.num("peer_lid2"));
    CHECK(r.num("port2_packets") == 2);
    CHECK(r.num("ev1.0.type") == IBV_EVENT_PATH_MIG);
    CHECK(r.num("ev1.0.our_qp") == 1);
    CHECK(r.num("first_bad") == -1);
    CHECK(r.num("port1") == 2);
}
