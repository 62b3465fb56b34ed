// The work-completion statuses of the error paths no well-behaved program
// reaches: a malformed WQE in a send ring, a receive ring or an SRQ (written
// into host memory as a faulty driver would, behind the verbs API's
// checks), an RDMA WRITE with immediate data that its responder refuses, a
// UC message abandoned on a WQE taken from an SRQ, a NAK with a reserved
// code and an adapter that fails under running work. Each gives the status
// the verbs API documents, and the QP and its peer end as the IBA says.
#include <catch2/catch.hpp>

#include "host/verbs/verbs_internal.hpp"
#include "model/hca/hw_formats.hpp"
#include "model/packet/ib_packet.hpp"
#include "testbench/integration/harness.hpp"

using namespace hcasim;
using namespace hcasim::test;

namespace {

constexpr std::uint8_t kTooManySges = 200;

void record_wcs(Record& rec, const std::string& key, const std::vector<ibv_wc>& wcs) {
    rec.num(key + ".n", static_cast<long long>(wcs.size()));
    for (std::size_t i = 0; i < wcs.size(); ++i) rec.wc(key + "." + std::to_string(i), wcs[i]);
}

// Writes two SENDs of len bytes from offset 0 into the send ring (wr_id
// and wr_id + 1), lets corrupt change the first WQE's bytes, then rings the
// doorbell (two WQEs: no BlueFlame copy, the adapter fetches the ring).
template <typename F>
void post_corrupted_sends(Side& s, std::uint32_t len, std::uint64_t wr_id, F corrupt) {
    host::Driver* d = verbs::drv(s.ctx);
    host::DriverQp& q = *verbs::sim(s.qps[0])->dqp;
    const host::Sge sge{reinterpret_cast<std::uintptr_t>(s.buf), len, s.mr->lkey};
    host::SendRequest r;
    r.signaled = true;
    r.sges = &sge;
    r.num_sge = 1;
    std::uint8_t* wqe = q.sq + static_cast<std::size_t>(q.sq_pi & (q.max_send_wr - 1)) * (1u << q.sq_log_stride);
    for (int i = 0; i < 2; ++i) {
        r.wr_id = wr_id + static_cast<std::uint64_t>(i);
        need_rc(d->write_send_wqe(q, r), "write_send_wqe");
    }
    corrupt(wqe);
    d->ring_send_doorbell(q);
}

}  // namespace

TEST_CASE("a malformed send wqe completes with IBV_WC_LOC_QP_OP_ERR and what follows is flushed",
          "[integration][errors][wc_status]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("q", 1);
            post_corrupted_sends(s, 64, 41, [](std::uint8_t* wqe) {
                wqe[offsetof(hca::SendWqeCtrl, num_sge)] = kTooManySges;
            });
            rec.num("post_after", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 43));
            record_wcs(rec, "wc", s.poll(s.send_cq, 3, 1000));
            rec.num("state", static_cast<int>(qp_state(s.qps[0])));
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("q", 0);
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    REQUIRE(r.num("wc.n") == 3);
    CHECK(r.num("wc.0.status") == IBV_WC_LOC_QP_OP_ERR);
    CHECK(r.unum("wc.0.wr_id") == 41);
    CHECK(r.num("wc.1.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.unum("wc.1.wr_id") == 42);
    CHECK(r.num("wc.2.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.unum("wc.2.wr_id") == 43);
    CHECK(r.num("state") == IBV_QPS_ERR);
}

TEST_CASE("a malformed receive wqe completes with IBV_WC_LOC_QP_OP_ERR, breaks its qp and the sender gets "
          "IBV_WC_REM_OP_ERR",
          "[integration][errors][wc_status]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("r", 1);
            h.barrier("posted");
            rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 7));
            record_wcs(rec, "send", s.poll(s.send_cq, 1, 1000));
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            host::Driver* d = verbs::drv(s.ctx);
            host::DriverQp& q = *verbs::sim(s.qps[0])->dqp;
            const host::Sge sge{reinterpret_cast<std::uintptr_t>(s.buf), 4096, s.mr->lkey};
            std::uint8_t* wqe = q.rq + static_cast<std::size_t>(q.rq_pi & (q.max_recv_wr - 1)) * (1u << q.rq_log_stride);
            need_rc(d->write_recv_wqe(q, 70, &sge, 1), "write_recv_wqe");
            wqe[offsetof(hca::RecvWqeCtrl, num_sge)] = kTooManySges;
            d->ring_recv_doorbell(q);
            s.connect("r", 0);
            h.barrier("posted");
            record_wcs(rec, "recv", s.poll(s.recv_cq, 1, 1000));
            record_async_events(s, rec, "ev", 1);
            rec.num("state", static_cast<int>(qp_state(s.qps[0])));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    REQUIRE(r.num("recv.n") == 1);
    CHECK(r.num("recv.0.status") == IBV_WC_LOC_QP_OP_ERR);
    CHECK(r.unum("recv.0.wr_id") == 70);
    CHECK(r.num("ev.0.type") == IBV_EVENT_QP_FATAL);
    CHECK(r.num("ev.0.qp") == 0);
    CHECK(r.num("state") == IBV_QPS_ERR);
    REQUIRE(r.num("send.n") == 1);
    CHECK(r.num("send.0.status") == IBV_WC_REM_OP_ERR);
}

TEST_CASE("an rdma write with immediate data and a bad rkey completes the responder's receive with "
          "IBV_WC_LOC_ACCESS_ERR and the request with IBV_WC_REM_ACCESS_ERR",
          "[integration][errors][wc_status]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("a", 1);
            h.barrier("posted");
            rec.num("post", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE_WITH_IMM, {s.sge(0, 256)}, IBV_SEND_SIGNALED, 3,
                                        s.remote_addr, s.remote_rkey + 0x100, htobe32(0xabcd)));
            record_wcs(rec, "send", s.poll(s.send_cq, 1, 1000));
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("a", 0);
            std::memset(s.buf, 0x11, 4096);
            need_rc(s.post_recv(s.qps[0], {s.sge(0, 64)}, 90), "post_recv");
            need_rc(s.post_recv(s.qps[0], {s.sge(64, 64)}, 91), "post_recv");
            h.barrier("posted");
            record_wcs(rec, "recv", s.poll(s.recv_cq, 2, 1000));
            record_async_events(s, rec, "ev", 1);
            int touched = 0;
            for (int i = 0; i < 4096; ++i) touched += s.buf[i] != 0x11;
            rec.num("touched", touched);
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    REQUIRE(r.num("recv.n") == 2);
    CHECK(r.num("recv.0.status") == IBV_WC_LOC_ACCESS_ERR);
    CHECK(r.unum("recv.0.wr_id") == 90);
    CHECK(r.num("recv.1.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.num("ev.0.type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("touched") == 0);
    REQUIRE(r.num("send.n") == 1);
    CHECK(r.num("send.0.status") == IBV_WC_REM_ACCESS_ERR);
}

TEST_CASE("a uc send abandoned on a wqe taken from an srq completes it with IBV_WC_REM_ABORT_ERR and the next "
          "message is received",
          "[integration][errors][wc_status][srq]") {
    // The sender's packets are crafted: SEND FIRST (PSN 0), then a SEND ONLY
    // with PSN 2, as if the SEND LAST (PSN 1) had been lost.
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.qp_type = IBV_QPT_UC;
            o.srq = true;
            Side s(h, o);
            ConnOptions c;
            c.mtu = IBV_MTU_1024;
            c.psn = 0;
            for (int i = 0; i < 3; ++i) need_rc(s.post_recv(nullptr, {s.sge(i * 4096, 4096)}, 100 + i), "post_srq_recv");
            s.connect("u", 1, c);
            ibv_port_attr port{};
            need_rc(ibv_query_port(s.ctx, 1, &port), "ibv_query_port");
            auto send = [&](packet::Opcode op, std::uint32_t psn, std::size_t n, std::uint8_t fill) {
                packet::Headers hd;
                hd.lrh.slid = s.peer_info.lid;
                hd.lrh.dlid = port.lid;
                hd.lrh.lnh = 2;
                hd.bth.opcode = static_cast<std::uint8_t>(op);
                hd.bth.dest_qp = s.qps[0]->qp_num;
                hd.bth.psn = psn;
                auto pkt = std::make_shared<packet::Packet>();
                pkt->bytes.resize(packet::wire_bytes(hd, n));
                const std::size_t hdr = packet::write_headers(hd, n, pkt->bytes.data());
                std::memset(pkt->bytes.data() + hdr, fill, n);
                packet::seal(pkt->bytes.data(), pkt->bytes.size());
                h.node().hca().port().arrive(pkt, h.now(), h.now());
                h.sleep(2 * sim::kPsPerUs);
            };
            send(packet::Opcode::UcSendFirst, 0, 1024, 0xa1);
            send(packet::Opcode::UcSendOnly, 2, 300, 0xb2);
            record_wcs(rec, "recv", s.poll(s.recv_cq, 2, 1000));
            bool intact = true;
            for (int i = 0; i < 300; ++i) intact &= s.buf[4096 + i] == 0xb2;
            rec.num("intact", intact);
            rec.num("state", static_cast<int>(qp_state(s.qps[0])));
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            SideOptions o;
            o.qp_type = IBV_QPT_UC;
            Side s(h, o);
            ConnOptions c;
            c.mtu = IBV_MTU_1024;
            c.psn = 0;
            s.connect("u", 0, c);
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    REQUIRE(r.num("recv.n") == 2);
    CHECK(r.num("recv.0.status") == IBV_WC_REM_ABORT_ERR);
    CHECK(r.unum("recv.0.wr_id") == 100);
    CHECK(r.num("recv.1.status") == IBV_WC_SUCCESS);
    CHECK(r.unum("recv.1.wr_id") == 101);
    CHECK(r.num("recv.1.byte_len") == 300);
    CHECK(r.num("intact") == 1);
    CHECK(r.num("state") == IBV_QPS_RTS);
}

TEST_CASE("a nak with a reserved code completes the request with IBV_WC_GENERAL_ERR", "[integration][errors][wc_status]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            ConnOptions c;
            c.psn = 0;
            s.connect("g", 1, c);
            ibv_port_attr port{};
            need_rc(ibv_query_port(s.ctx, 1, &port), "ibv_query_port");
            h.barrier("peer gone");  // the peer's QP is destroyed: nothing answers but the crafted NAK
            rec.num("post", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 32)}, IBV_SEND_SIGNALED, 5));
            h.sleep(5 * sim::kPsPerUs);
            packet::Headers hd;
            hd.lrh.slid = s.peer_info.lid;
            hd.lrh.dlid = port.lid;
            hd.lrh.lnh = 2;
            hd.bth.opcode = static_cast<std::uint8_t>(packet::Opcode::RcAcknowledge);
            hd.bth.dest_qp = s.qps[0]->qp_num;
            hd.bth.psn = 0;
            hd.aeth = packet::Aeth{static_cast<std::uint8_t>(packet::kAethNak | 9), 0};
            auto pkt = std::make_shared<packet::Packet>();
            pkt->bytes.resize(packet::wire_bytes(hd, 0));
            packet::write_headers(hd, 0, pkt->bytes.data());
            packet::seal(pkt->bytes.data(), pkt->bytes.size());
            h.node().hca().port().arrive(pkt, h.now(), h.now());
            record_wcs(rec, "wc", s.poll(s.send_cq, 1, 1000));
            rec.num("state", static_cast<int>(qp_state(s.qps[0])));
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});
            s.connect("g", 0);
            need_rc(ibv_destroy_qp(s.qps[0]), "ibv_destroy_qp");
            s.qps.clear();
            h.barrier("peer gone");
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    REQUIRE(r.num("wc.n") == 1);
    CHECK(r.num("wc.0.status") == IBV_WC_GENERAL_ERR);
    CHECK(r.unum("wc.0.wr_id") == 5);
    CHECK(r.num("state") == IBV_QPS_ERR);
}

TEST_CASE("work in progress when the adapter fails completes with IBV_WC_FATAL_ERR and the rest is flushed",
          "[integration][errors][wc_status]") {
    constexpr std::uint32_t kBig = 1 << 20;  // about 170 us on the wire
    const auto r = run_pair(
        {{"fault.catastrophic", "node0@300us"}},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.buffer_bytes = 2 * kBig;
            Side s(h, o);
            s.connect("f", 1);
            if (h.now() < 250 * sim::kPsPerUs) h.sleep(250 * sim::kPsPerUs - h.now());
            rec.num("posted_at_us", static_cast<long long>(h.now() / sim::kPsPerUs));
            rec.num("post1", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, kBig)}, IBV_SEND_SIGNALED, 1,
                                         s.remote_addr, s.remote_rkey));
            rec.num("post2", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(kBig, 4096)}, IBV_SEND_SIGNALED, 2,
                                         s.remote_addr, s.remote_rkey));
            record_wcs(rec, "wc", s.poll(s.send_cq, 2, 2000));
            record_async_events(s, rec, "ev", 1);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            SideOptions o;
            o.buffer_bytes = 2 * kBig;
            Side s(h, o);
            s.connect("f", 0);
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("posted_at_us") < 300);
    REQUIRE(r.num("wc.n") == 2);
    CHECK(r.num("wc.0.status") == IBV_WC_FATAL_ERR);
    CHECK(r.unum("wc.0.wr_id") == 1);
    CHECK(r.num("wc.1.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.num("ev.0.type") == IBV_EVENT_DEVICE_FATAL);
}

TEST_CASE("a malformed wqe in a shared receive queue raises IBV_EVENT_SRQ_ERR and breaks every qp on it",
          "[integration][errors][wc_status][srq]") {
    // Node 1's two QPs take their receives from one SRQ whose third WQE is
    // malformed; node 0 sends three messages to QP 0, the third of which
    // needs that WQE.
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, {});
            s.connect("s", 1);
            h.barrier("posted");
            for (int i = 0; i < 3; ++i) {
                rec.num("post" + std::to_string(i),
                        s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 128)}, IBV_SEND_SIGNALED, 10 + i));
                record_wcs(rec, "send" + std::to_string(i), s.poll(s.send_cq, 1, 1000));
            }
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.srq = true;
            o.qps = 2;
            Side s(h, o);
            host::Driver* d = verbs::drv(s.ctx);
            host::DriverSrq& q = *verbs::sim(s.srq)->dsrq;
            for (int i = 0; i < 4; ++i) {
                const host::Sge sge{reinterpret_cast<std::uintptr_t>(s.buf + i * 4096), 4096, s.mr->lkey};
                std::uint8_t* wqe = q.ring + static_cast<std::size_t>(q.head) * (1u << q.log_stride);
                need_rc(d->write_srq_wqe(q, 200 + i, &sge, 1), "write_srq_wqe");
                if (i == 2) wqe[offsetof(hca::RecvWqeCtrl, num_sge)] = kTooManySges;
            }
            d->ring_srq_doorbell(q);
            s.connect("s", 0);
            h.barrier("posted");
            // SRQ_ERR, then for each QP QP_FATAL and LAST_WQE_REACHED.
            record_async_events(s, rec, "ev", 5);
            record_wcs(rec, "recv", s.poll(s.recv_cq, 4, 200));
            rec.num("state0", static_cast<int>(qp_state(s.qps[0])));
            rec.num("state1", static_cast<int>(qp_state(s.qps[1])));
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("send0.0.status") == IBV_WC_SUCCESS);
    CHECK(r.num("send1.0.status") == IBV_WC_SUCCESS);
    CHECK(r.num("send2.0.status") == IBV_WC_REM_OP_ERR);
    // The malformed WQE and the one after it stay unconsumed.
    REQUIRE(r.num("recv.n") == 2);
    CHECK(r.num("recv.0.status") == IBV_WC_SUCCESS);
    CHECK(r.unum("recv.0.wr_id") == 200);
    CHECK(r.num("recv.1.status") == IBV_WC_SUCCESS);
    CHECK(r.unum("recv.1.wr_id") == 201);
    CHECK(r.num("ev.0.type") == IBV_EVENT_SRQ_ERR);
    CHECK(r.num("ev.0.our_srq") == 1);
    CHECK(r.num("ev.1.type") == IBV_EVENT_QP_FATAL);
    CHECK(r.num("ev.2.type") == IBV_EVENT_QP_LAST_WQE_REACHED);
    CHECK(r.num("ev.3.type") == IBV_EVENT_QP_FATAL);
    CHECK(r.num("ev.4.type") == IBV_EVENT_QP_LAST_WQE_REACHED);
    CHECK(r.num("ev.1.qp") != r.num("ev.3.qp"));
    CHECK(r.num("state0") == IBV_QPS_ERR);
    CHECK(r.num("state1") == IBV_QPS_ERR);
}
