// Completion queues and the control verbs: completion channels and CQ
// arming, signaled and unsignaled sends, resizing and destroying CQs, and
// the query verbs.
#include <catch2/catch.hpp>

#include "testbench/integration/harness.hpp"

using namespace hcasim::test;

namespace {

double to_us(hcasim::sim::Tick t) { return static_cast<double>(t) / 1e6; }

}  // namespace

TEST_CASE("a completion channel delivers an event only after ibv_req_notify_cq armed the CQ",
          "[integration][cq][events]") {
    static int marker = 0;
    const auto r = run_pair(
        {},
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("ev", 1);
            fill_pattern(s.buf, 256, 1);
            // Message 1 arrives while the CQ is not armed.
            h.barrier("start");
            s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 64)}, 0, 1);
            // Message 2 comes 30 us after the receiver armed its CQ.
            h.barrier("armed");
            h.sleep(us(30));
            h.put_value("t_send2", h.now());
            s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(64, 64)}, IBV_SEND_SIGNALED, 2);
            s.poll_ok(s.send_cq, 1, "send 2");
            h.barrier("phase1 done");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.channel = true;
            o.cq_context = &marker;
            Side s(h, o);
            s.connect("ev", 0);
            for (std::uint64_t i = 0; i < 4; ++i) s.post_recv(s.qps[0], {s.sge(i * 256, 256)}, 10 + i);
            h.barrier("start");
            rec.num("msg1", s.poll(s.recv_cq, 1).size());
            h.sleep(us(20));  // time for any (wrong) interrupt to arrive
            rec.num("arm_rc", ibv_req_notify_cq(s.recv_cq, 0));
            const auto t_arm = h.now();
            h.barrier("armed");
            ibv_cq* cq = nullptr;
            void* ctx = nullptr;
            rec.num("get_rc", ibv_get_cq_event(s.channel, &cq, &ctx));
            const auto t_ev = h.now();
            rec.set("event_cq", cq == s.recv_cq ? "recv" : cq == s.send_cq ? "send" : "other");
            rec.num("event_ctx_ok", ctx == &marker);
            ibv_ack_cq_events(cq, 1);
            const auto t_send2 = h.get_value<hcasim::sim::Tick>("t_send2");
            rec.num("arm_to_event_us", to_us(t_ev - t_arm));
            rec.num("send2_to_event_us", t_ev >= t_send2 ? to_us(t_ev - t_send2) : -to_us(t_send2 - t_ev));
            const auto w = s.poll(s.recv_cq, 2, 50);
            rec.num("after_event", w.size());
            if (!w.empty()) rec.wc("msg2", w[0]);
            h.barrier("phase1 done");
            s.close();  // acknowledged events: the CQ can be destroyed
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("msg1") == 1);
    CHECK(r.num("arm_rc") == 0);
    CHECK(r.num("get_rc") == 0);
    CHECK(r.get("event_cq") == "recv");
    CHECK(r.num("event_ctx_ok") == 1);
    // The event is message 2's, not a late one for message 1.
    CHECK(r.real("arm_to_event_us") >= 30);
    CHECK(r.real("send2_to_event_us") > 0);
    CHECK(r.real("send2_to_event_us") < 20);
    CHECK(r.num("after_event") == 1);
    CHECK(r.num("msg2.status") == IBV_WC_SUCCESS);
    CHECK(r.unum("msg2.wr_id") == 11);
}

TEST_CASE("an arming gives one event and the next completion needs a new ibv_req_notify_cq",
          "[integration][cq][events]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("ev", 1);
            for (int m = 0; m < 4; ++m) {
                h.barrier("go" + std::to_string(m));
                h.sleep(us(10));
                h.put_value("t" + std::to_string(m), h.now());
                s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 32)}, IBV_SEND_SIGNALED, static_cast<std::uint64_t>(m));
                s.poll_ok(s.send_cq, 1, "send");
            }
            h.barrier("end");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.channel = true;
            Side s(h, o);
            s.connect("ev", 0);
            for (std::uint64_t i = 0; i < 8; ++i) s.post_recv(s.qps[0], {s.sge(i * 64, 64)}, i);
            // Armed once before message 0: event. Message 1 arrives unarmed.
            // Re-armed (after polling empty) before message 2: event for 2.
            ibv_req_notify_cq(s.recv_cq, 0);
            h.barrier("go0");
            ibv_cq* cq = nullptr;
            void* ctx = nullptr;
            ibv_get_cq_event(s.channel, &cq, &ctx);
            ibv_ack_cq_events(cq, 1);
            rec.num("ev0_after_t0", h.now() > h.get_value<hcasim::sim::Tick>("t0"));
            rec.num("polled0", s.poll(s.recv_cq, 1).size());
            h.barrier("go1");
            rec.num("polled1", s.poll(s.recv_cq, 1).size());
            h.sleep(us(20));
            ibv_req_notify_cq(s.recv_cq, 0);
            h.barrier("go2");
            ibv_get_cq_event(s.channel, &cq, &ctx);
            ibv_ack_cq_events(cq, 1);
            rec.num("ev2_after_t2", h.now() > h.get_value<hcasim::sim::Tick>("t2"));
            rec.num("polled2", s.poll(s.recv_cq, 1).size());
            // The standard loop: arm, then poll again to catch a completion
            // that arrived before the arming took effect.
            h.barrier("go3");
            h.sleep(us(15));
            ibv_req_notify_cq(s.recv_cq, 0);
            rec.num("polled3", s.poll(s.recv_cq, 1).size());
            h.barrier("end");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("ev0_after_t0") == 1);
    CHECK(r.num("polled0") == 1);
    CHECK(r.num("polled1") == 1);
    CHECK(r.num("ev2_after_t2") == 1);
    CHECK(r.num("polled2") == 1);
    CHECK(r.num("polled3") == 1);
}

TEST_CASE("a CQ armed for solicited completions wakes only on a send with IBV_SEND_SOLICITED",
          "[integration][cq][events]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("ev", 1);
            h.barrier("armed");
            // Unsolicited SEND and RDMA WRITE WITH IMM first, then a solicited SEND.
            s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 32)}, IBV_SEND_SIGNALED, 1);
            s.post_send(s.qps[0], IBV_WR_RDMA_WRITE_WITH_IMM, {s.sge(0, 32)}, IBV_SEND_SIGNALED, 2,
                        s.remote_addr + 8192, s.remote_rkey, 5);
            s.poll_ok(s.send_cq, 2, "unsolicited");
            h.sleep(us(30));
            h.put_value("t_solicited", h.now());
            s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 32)}, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 3);
            s.poll_ok(s.send_cq, 1, "solicited");
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.channel = true;
            Side s(h, o);
            s.connect("ev", 0);
            for (std::uint64_t i = 0; i < 3; ++i) s.post_recv(s.qps[0], {s.sge(i * 64, 64)}, i);
            rec.num("arm_rc", ibv_req_notify_cq(s.recv_cq, 1));
            h.barrier("armed");
            ibv_cq* cq = nullptr;
            void* ctx = nullptr;
            rec.num("get_rc", ibv_get_cq_event(s.channel, &cq, &ctx));
            ibv_ack_cq_events(cq, 1);
            const auto t_sol = h.get_value<hcasim::sim::Tick>("t_solicited");
            rec.num("event_after_solicited", h.now() > t_sol);
            const auto w = s.poll(s.recv_cq, 3, 50);
            rec.num("completions", w.size());
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("arm_rc") == 0);
    CHECK(r.num("get_rc") == 0);
    CHECK(r.num("event_after_solicited") == 1);
    CHECK(r.num("completions") == 3);
}

TEST_CASE("with sq_sig_all 0 only signaled work requests produce completions", "[integration][cq]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.sq_sig_all = 0;
            Side s(h, o);
            s.connect("sig", 1);
            h.barrier("ready");
            const std::vector<int> signaled{2, 5, 8, 9};
            for (int i = 0; i < 10; ++i) {
                const bool sig = std::find(signaled.begin(), signaled.end(), i) != signaled.end();
                const auto op = i % 2 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
                s.post_send(s.qps[0], op, {s.sge(static_cast<std::size_t>(i) * 64, 64)}, sig ? IBV_SEND_SIGNALED : 0,
                            static_cast<std::uint64_t>(i), s.remote_addr + 65536, s.remote_rkey);
            }
            const auto w = s.poll(s.send_cq, 10, 200);
            rec.num("n", w.size());
            std::string ids;
            for (const auto& x : w) ids += std::to_string(x.wr_id) + (x.status == IBV_WC_SUCCESS ? "" : "!") + " ";
            rec.set("ids", ids);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("sig", 0);
            for (std::uint64_t i = 0; i < 5; ++i) s.post_recv(s.qps[0], {s.sge(i * 64, 64)}, i);
            h.barrier("ready");
            rec.num("received", s.poll(s.recv_cq, 5).size());
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("n") == 4);
    CHECK(r.get("ids") == "2 5 8 9 ");
    // Receives complete whatever the sender signals.
    CHECK(r.num("received") == 5);
}

TEST_CASE("with sq_sig_all 1 every work request produces a completion", "[integration][cq]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.sq_sig_all = 1;
            Side s(h, o);
            s.connect("sig", 1);
            h.barrier("ready");
            for (int i = 0; i < 10; ++i) {
                const auto op = i % 3 == 0 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
                s.post_send(s.qps[0], op, {s.sge(static_cast<std::size_t>(i) * 64, 64)}, 0,
                            static_cast<std::uint64_t>(i), s.remote_addr + 65536, s.remote_rkey);
            }
            const auto w = s.poll(s.send_cq, 11, 200);
            rec.num("n", w.size());
            std::string ids;
            for (const auto& x : w) ids += std::to_string(x.wr_id) + (x.status == IBV_WC_SUCCESS ? "" : "!") + " ";
            rec.set("ids", ids);
            ibv_qp_attr a{};
            ibv_qp_init_attr init{};
            ibv_query_qp(s.qps[0], &a, 0, &init);
            rec.num("sq_sig_all", init.sq_sig_all);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("sig", 0);
            h.barrier("ready");
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("n") == 10);
    CHECK(r.get("ids") == "0 1 2 3 4 5 6 7 8 9 ");
    CHECK(r.num("sq_sig_all") == 1);
}

TEST_CASE("ibv_query_device ibv_query_port ibv_query_gid and ibv_query_pkey return sensible values",
          "[integration][query]") {
    auto program = [](Host& h, Record& rec) {
        Side s(h, {});
        const std::string n = "n" + std::to_string(h.index()) + ".";
        ibv_device_attr d{};
        rec.num(n + "dev.rc", ibv_query_device(s.ctx, &d));
        rec.num(n + "dev.max_qp", d.max_qp);
        rec.num(n + "dev.max_qp_wr", d.max_qp_wr);
        rec.num(n + "dev.max_sge", d.max_sge);
        rec.num(n + "dev.max_cq", d.max_cq);
        rec.num(n + "dev.max_cqe", d.max_cqe);
        rec.num(n + "dev.max_mr", d.max_mr);
        rec.num(n + "dev.max_pd", d.max_pd);
        rec.num(n + "dev.max_qp_rd_atom", d.max_qp_rd_atom);
        rec.num(n + "dev.phys_port_cnt", d.phys_port_cnt);
        rec.num(n + "dev.vendor_id", d.vendor_id);
        rec.num(n + "dev.node_guid", be64toh(d.node_guid));
        rec.set(n + "dev.fw_ver", d.fw_ver);
        rec.num(n + "dev.guid_matches", d.node_guid == ibv_get_device_guid(s.device));
        ibv_port_attr p{};
        rec.num(n + "port.rc", ibv_query_port(s.ctx, 1, &p));
        rec.num(n + "port.state", static_cast<int>(p.state));
        rec.num(n + "port.lid", p.lid);
        rec.num(n + "port.active_mtu", static_cast<int>(p.active_mtu));
        rec.num(n + "port.max_mtu", static_cast<int>(p.max_mtu));
        rec.num(n + "port.link_layer", static_cast<int>(p.link_layer));
        rec.num(n + "port.gid_tbl_len", p.gid_tbl_len);
        rec.num(n + "port.pkey_tbl_len", p.pkey_tbl_len);
        rec.num(n + "port.active_width", static_cast<int>(p.active_width));
        rec.num(n + "port.active_speed", static_cast<int>(p.active_speed));
        rec.num(n + "port.max_msg_sz", p.max_msg_sz);
        ibv_port_attr p2{};
        rec.num(n + "port2.rc", ibv_query_port(s.ctx, 2, &p2));
        ibv_gid gid{};
        rec.num(n + "gid.rc", ibv_query_gid(s.ctx, 1, 0, &gid));
        rec.num(n + "gid.prefix", be64toh(gid.global.subnet_prefix));
        rec.num(n + "gid.iid", be64toh(gid.global.interface_id));
        ibv_gid gid1{};
        rec.num(n + "gid1.rc", ibv_query_gid(s.ctx, 1, 1, &gid1));
        rec.num(n + "gid1.prefix", be64toh(gid1.global.subnet_prefix));
        rec.num(n + "gid1.iid", be64toh(gid1.global.interface_id));
        ibv_gid past{};
        rec.num(n + "gid_past.rc", ibv_query_gid(s.ctx, 1, p.gid_tbl_len, &past));
        __be16 pkey = 0;
        rec.num(n + "pkey.rc", ibv_query_pkey(s.ctx, 1, 0, &pkey));
        rec.num(n + "pkey", be16toh(pkey));
        rec.set(n + "name", ibv_get_device_name(s.device) ? ibv_get_device_name(s.device) : "(null)");
        rec.num(n + "guid", be64toh(ibv_get_device_guid(s.device)));
        h.barrier("done");
        s.close();
    };
    const auto r = run_pair({}, program, program);
    HCASIM_REQUIRE_RUN(r);
    for (const std::string n : {"n0.", "n1."}) {
        INFO("node " << n);
        CHECK(r.num(n + "dev.rc") == 0);
        CHECK(r.num(n + "dev.max_qp") > 0);
        CHECK(r.num(n + "dev.max_qp_wr") >= 1024);
        CHECK(r.num(n + "dev.max_sge") >= 4);
        CHECK(r.num(n + "dev.max_cq") > 0);
        CHECK(r.num(n + "dev.max_cqe") >= 1024);
        CHECK(r.num(n + "dev.max_mr") > 0);
        CHECK(r.num(n + "dev.max_pd") > 0);
        CHECK(r.num(n + "dev.max_qp_rd_atom") >= 1);
        CHECK(r.num(n + "dev.phys_port_cnt") == 1);
        CHECK(r.num(n + "dev.vendor_id") != 0);
        CHECK(r.unum(n + "dev.node_guid") != 0);
        CHECK_FALSE(r.get(n + "dev.fw_ver").empty());
        CHECK(r.num(n + "dev.guid_matches") == 1);
        CHECK(r.num(n + "port.rc") == 0);
        CHECK(r.num(n + "port.state") == IBV_PORT_ACTIVE);
        CHECK(r.num(n + "port.lid") != 0);
        CHECK(r.num(n + "port.active_mtu") == IBV_MTU_4096);
        CHECK(r.num(n + "port.max_mtu") == IBV_MTU_4096);
        CHECK(r.num(n + "port.link_layer") == IBV_LINK_LAYER_INFINIBAND);
        CHECK(r.num(n + "port.gid_tbl_len") >= 1);
        CHECK(r.num(n + "port.pkey_tbl_len") >= 1);
        CHECK(r.num(n + "port.active_width") == 2);   // 4x
        CHECK(r.num(n + "port.active_speed") == 16);  // FDR
        CHECK(r.num(n + "port.max_msg_sz") >= (1 << 30));
        CHECK(r.num(n + "port2.rc") != 0);
        CHECK(r.num(n + "gid.rc") == 0);
        CHECK(r.unum(n + "gid.prefix") == 0xfe80000000000000ull);
        CHECK(r.unum(n + "gid.iid") == r.unum(n + "dev.node_guid"));
        // Every index the port reports answers; the one past the end does not.
        CHECK(r.num(n + "port.gid_tbl_len") == 2);
        CHECK(r.num(n + "gid1.rc") == 0);
        CHECK(r.unum(n + "gid1.prefix") == 0xfec0000000000000ull);
        CHECK(r.unum(n + "gid1.iid") == r.unum(n + "dev.node_guid"));
        CHECK(r.num(n + "gid_past.rc") == EINVAL);
        CHECK(r.num(n + "pkey.rc") == 0);
        CHECK(r.num(n + "pkey") == 0xffff);
        CHECK(r.get(n + "name") != "(null)");
        CHECK_FALSE(r.get(n + "name").empty());
        CHECK(r.unum(n + "guid") == r.unum(n + "dev.node_guid"));
    }
    CHECK(r.num("n0.port.lid") != r.num("n1.port.lid"));
    CHECK(r.unum("n0.guid") != r.unum("n1.guid"));
}

TEST_CASE("ibv_query_port reports the configured link width and speed", "[integration][query]") {
    const auto r = run_programs({{"link.speed", "qdr"}, {"link.width", "8"}, {"port.max_mtu", "2048"}},
                                {[](Host& h, Record& rec) {
                                    Side s(h, {});
                                    ibv_port_attr p{};
                                    ibv_query_port(s.ctx, 1, &p);
                                    rec.num("width", static_cast<int>(p.active_width));
                                    rec.num("speed", static_cast<int>(p.active_speed));
                                    rec.num("active_mtu", static_cast<int>(p.active_mtu));
                                    rec.num("max_mtu", static_cast<int>(p.max_mtu));
                                    s.close();
                                },
                                 nullptr});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("width") == 4);  // 8x
    CHECK(r.num("speed") == 4);  // QDR
    CHECK(r.num("active_mtu") == IBV_MTU_2048);
    CHECK(r.num("max_mtu") == IBV_MTU_2048);
}

TEST_CASE("ibv_query_qp reflects every attribute ibv_modify_qp set", "[integration][query]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.max_send_wr = 100;
            o.max_recv_wr = 30;
            o.max_sge = 3;
            o.max_inline = 60;
            Side s(h, o);
            ibv_qp* qp = s.qps[0];
            auto query = [&](const std::string& k) {
                ibv_qp_attr a{};
                ibv_qp_init_attr init{};
                rec.num(k + ".rc", ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV, &init));
                rec.num(k + ".state", static_cast<int>(a.qp_state));
                rec.num(k + ".access", a.qp_access_flags);
                rec.num(k + ".mtu", static_cast<int>(a.path_mtu));
                rec.num(k + ".dest_qp", a.dest_qp_num);
                rec.num(k + ".rq_psn", a.rq_psn);
                rec.num(k + ".sq_psn", a.sq_psn);
                rec.num(k + ".dlid", a.ah_attr.dlid);
                rec.num(k + ".port", static_cast<int>(a.port_num));
                rec.num(k + ".timeout", static_cast<int>(a.timeout));
                rec.num(k + ".retry_cnt", static_cast<int>(a.retry_cnt));
                rec.num(k + ".rnr_retry", static_cast<int>(a.rnr_retry));
                rec.num(k + ".min_rnr_timer", static_cast<int>(a.min_rnr_timer));
                rec.num(k + ".max_rd_atomic", static_cast<int>(a.max_rd_atomic));
                rec.num(k + ".max_dest_rd_atomic", static_cast<int>(a.max_dest_rd_atomic));
                rec.num(k + ".cap_send_wr", a.cap.max_send_wr);
                rec.num(k + ".init_send_wr", init.cap.max_send_wr);
                rec.num(k + ".init_recv_wr", init.cap.max_recv_wr);
                rec.num(k + ".init_send_sge", init.cap.max_send_sge);
                rec.num(k + ".init_inline", init.cap.max_inline_data);
                rec.num(k + ".init_cqs", init.send_cq == s.send_cq && init.recv_cq == s.recv_cq);
                rec.num(k + ".init_type", static_cast<int>(init.qp_type));
            };
            query("reset");
            need_rc(qp_to_init(qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), "INIT");
            query("init");
            const auto peer = h.get_value<SideInfo>("peer");
            ConnOptions c;
            c.mtu = IBV_MTU_2048;
            c.timeout = 17;
            c.retry_cnt = 5;
            c.rnr_retry = 6;
            c.min_rnr_timer = 12;
            c.max_rd_atomic = 4;
            need_rc(qp_to_rtr(qp, peer.lid, peer.qpn[0], 0xabcdef, c), "RTR");
            query("rtr");
            need_rc(qp_to_rts(qp, 0x123456, c), "RTS");
            query("rts");
            rec.num("peer_lid", peer.lid);
            rec.num("peer_qpn", peer.qpn[0]);
            ibv_qp_attr err{};
            err.qp_state = IBV_QPS_ERR;
            rec.num("to_err", ibv_modify_qp(qp, &err, IBV_QP_STATE));
            query("err");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});
            h.put_value("peer", s.describe());
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("reset.rc") == 0);
    CHECK(r.num("reset.state") == IBV_QPS_RESET);
    CHECK(r.num("reset.init_send_wr") >= 100);
    CHECK(r.num("reset.init_recv_wr") >= 30);
    CHECK(r.num("reset.init_send_sge") >= 3);
    CHECK(r.num("reset.init_inline") >= 60);
    CHECK(r.num("reset.init_cqs") == 1);
    CHECK(r.num("reset.init_type") == IBV_QPT_RC);
    CHECK(r.num("reset.cap_send_wr") == r.num("reset.init_send_wr"));
    CHECK(r.num("init.state") == IBV_QPS_INIT);
    CHECK(r.num("init.access") == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    CHECK(r.num("init.port") == 1);
    CHECK(r.num("rtr.state") == IBV_QPS_RTR);
    CHECK(r.num("rtr.mtu") == IBV_MTU_2048);
    CHECK(r.num("rtr.dest_qp") == r.num("peer_qpn"));
    CHECK(r.num("rtr.rq_psn") == 0xabcdef);
    CHECK(r.num("rtr.dlid") == r.num("peer_lid"));
    CHECK(r.num("rtr.min_rnr_timer") == 12);
    CHECK(r.num("rtr.max_dest_rd_atomic") == 4);
    CHECK(r.num("rts.state") == IBV_QPS_RTS);
    CHECK(r.num("rts.sq_psn") == 0x123456);
    CHECK(r.num("rts.timeout") == 17);
    CHECK(r.num("rts.retry_cnt") == 5);
    CHECK(r.num("rts.rnr_retry") == 6);
    CHECK(r.num("rts.max_rd_atomic") == 4);
    CHECK(r.num("rts.mtu") == IBV_MTU_2048);
    CHECK(r.num("rts.access") == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    CHECK(r.num("to_err") == 0);
    CHECK(r.num("err.state") == IBV_QPS_ERR);
}

TEST_CASE("ibv_resize_cq keeps the completions not yet polled", "[integration][cq]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.cq_depth = 8;
            Side s(h, o);
            s.connect("rs", 1);
            h.barrier("ready");
            for (std::uint64_t i = 0; i < 6; ++i)
                s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(i * 64, 64)}, IBV_SEND_SIGNALED, i,
                            s.remote_addr + i * 64, s.remote_rkey);
            h.sleep(us(100));  // all six are done; nobody polled
            rec.num("cqe_before", s.send_cq->cqe);
            rec.num("shrink_rc", ibv_resize_cq(s.send_cq, 2));  // fewer entries than it holds
            rec.num("grow_rc", ibv_resize_cq(s.send_cq, 64));
            rec.num("cqe_after", s.send_cq->cqe);
            auto w = s.poll(s.send_cq, 6, 50);
            std::string ids;
            for (const auto& x : w) ids += std::to_string(x.wr_id) + (x.status == IBV_WC_SUCCESS ? "" : "!") + " ";
            rec.set("kept", ids);
            rec.num("extra", s.poll(s.send_cq, 1, 20).size());
            // The resized ring keeps working across many passes.
            int good = 0;
            std::uint64_t next = 100;
            for (int round = 0; round < 20; ++round) {
                for (int k = 0; k < 10; ++k, ++next)
                    s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, IBV_SEND_SIGNALED, next, s.remote_addr,
                                s.remote_rkey);
                w = s.poll(s.send_cq, 10);
                for (std::size_t k = 0; k < w.size(); ++k)
                    good += w[k].status == IBV_WC_SUCCESS && w[k].wr_id == next - 10 + k;
            }
            rec.num("later_good", good);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("rs", 0);
            h.barrier("ready");
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("cqe_before") >= 8);
    CHECK(r.num("shrink_rc") != 0);
    CHECK(r.num("grow_rc") == 0);
    CHECK(r.num("cqe_after") >= 64);
    CHECK(r.get("kept") == "0 1 2 3 4 5 ");
    CHECK(r.num("extra") == 0);
    CHECK(r.num("later_good") == 200);
}

TEST_CASE("ibv_destroy_cq of a CQ that a QP still uses fails with EBUSY", "[integration][cq]") {
    const auto r = run_programs({}, {[](Host& h, Record& rec) {
                                         Side s(h, {});
                                         rec.num("busy_send", ibv_destroy_cq(s.send_cq));
                                         rec.num("busy_recv", ibv_destroy_cq(s.recv_cq));
                                         ibv_comp_channel* ch = ibv_create_comp_channel(s.ctx);
                                         ibv_cq* cq = ibv_create_cq(s.ctx, 16, nullptr, ch, 0);
                                         rec.num("busy_channel", ibv_destroy_comp_channel(ch));
                                         rec.num("free_cq", ibv_destroy_cq(cq));
                                         rec.num("free_channel", ibv_destroy_comp_channel(ch));
                                         rec.num("busy_pd", ibv_dealloc_pd(s.pd));
                                         // Closing in order works: the QPs go first.
                                         s.close();
                                         rec.num("closed", 1);
                                     },
                                     nullptr});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("busy_send") == EBUSY);
    CHECK(r.num("busy_recv") == EBUSY);
    CHECK(r.num("busy_channel") == EBUSY);
    CHECK(r.num("free_cq") == 0);
    CHECK(r.num("free_channel") == 0);
    CHECK(r.num("busy_pd") == EBUSY);
    CHECK(r.num("closed") == 1);
}

TEST_CASE("ibv_get_device_name and ibv_get_device_guid name each simulated adapter", "[integration][query]") {
    auto program = [](Host& h, Record& rec) {
        int n = -1;
        ibv_device** list = ibv_get_device_list(&n);
        const std::string k = "n" + std::to_string(h.index()) + ".";
        rec.num(k + "count", n);
        if (list && n > 0) {
            const char* name = ibv_get_device_name(list[0]);
            rec.set(k + "name", name ? name : "(null)");
            rec.num(k + "guid", be64toh(ibv_get_device_guid(list[0])));
            rec.num(k + "node_type", static_cast<int>(list[0]->node_type));
            rec.num(k + "transport", static_cast<int>(list[0]->transport_type));
            rec.num(k + "terminated", list[n] == nullptr);
            ibv_context* ctx = ibv_open_device(list[0]);
            ibv_device_attr d{};
            ibv_query_device(ctx, &d);
            rec.num(k + "query_guid", be64toh(d.node_guid));
            ibv_close_device(ctx);
        }
        ibv_free_device_list(list);
    };
    const auto r = run_pair({}, program, program);
    HCASIM_REQUIRE_RUN(r);
    for (const std::string k : {"n0.", "n1."}) {
        INFO(k);
        CHECK(r.num(k + "count") == 1);
        CHECK(r.get(k + "name") != "(null)");
        CHECK_FALSE(r.get(k + "name").empty());
        CHECK(r.unum(k + "guid") != 0);
        CHECK(r.unum(k + "guid") == r.unum(k + "query_guid"));
        CHECK(r.num(k + "node_type") == IBV_NODE_CA);
        CHECK(r.num(k + "transport") == IBV_TRANSPORT_IB);
        CHECK(r.num(k + "terminated") == 1);
    }
    CHECK(r.unum("n0.guid") != r.unum("n1.guid"));
}
