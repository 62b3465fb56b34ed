// A requester that receives a response the request cannot have caused: an
// RDMA READ answered with more or fewer bytes than it asked for completes
// with IBV_WC_BAD_RESP_ERR and nothing of the answer reaches its buffer.
// The answer is a well-formed, sealed packet put on the requester's port, as
// a faulty responder would send it.
#include <catch2/catch.hpp>

#include "model/packet/ib_packet.hpp"
#include "testbench/integration/harness.hpp"

using namespace hcasim;
using namespace hcasim::test;

namespace {

// A READ RESPONSE ONLY from (slid) to the QP (dlid, qpn) with psn and n bytes.
packet::PacketPtr read_response(std::uint16_t slid, std::uint16_t dlid, std::uint32_t qpn, std::uint32_t psn,
                                std::size_t n) {
    packet::Headers h;
    h.lrh.slid = slid;
    h.lrh.dlid = dlid;
    h.lrh.lnh = 2;
    h.bth.opcode = static_cast<std::uint8_t>(packet::Opcode::RcReadResponseOnly);
    h.bth.dest_qp = qpn;
    h.bth.psn = psn;
    h.bth.pkey = 0xffff;
    h.aeth = packet::Aeth{packet::kAethAck | packet::kAethCreditsInvalid, 1};
    auto pkt = std::make_shared<packet::Packet>();
    pkt->bytes.resize(packet::wire_bytes(h, n));
    const std::size_t hdr = packet::write_headers(h, n, pkt->bytes.data());
    for (std::size_t i = 0; i < n; ++i) pkt->bytes[hdr + i] = 0x5a;
    packet::seal(pkt->bytes.data(), pkt->bytes.size());
    return pkt;
}

RunResult run_bad_read(std::size_t answered_bytes) {
    return run_pair(
        {},
        [answered_bytes](Host& h, Record& rec) {
            Side s(h, {});
            ibv_port_attr port{};
            need_rc(ibv_query_port(s.ctx, 1, &port), "ibv_query_port");
            const auto peer = h.get_value<SideInfo>("peer");
            ConnOptions c;
            // The QP talks to a QP number the peer does not have: only the
            // crafted answer comes back.
            need_rc(qp_to_init(s.qps[0], c.qp_access), "INIT");
            need_rc(qp_to_rtr(s.qps[0], peer.lid, peer.qpn[0] + 100, 0, c), "RTR");
            need_rc(qp_to_rts(s.qps[0], 0, c), "RTS");
            std::memset(s.buf, kGuardByte, 4096);
            rec.num("post", s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(0, 100)}, IBV_SEND_SIGNALED, 77,
                                        peer.addr, peer.rkey));
            h.sleep(5 * sim::kPsPerUs);
            h.node().hca().port().arrive(read_response(peer.lid, port.lid, s.qps[0]->qp_num, 0, answered_bytes),
                                         h.now(), h.now());
            const auto w = s.poll(s.send_cq, 1, 1000);
            rec.num("completions", static_cast<long long>(w.size()));
            if (!w.empty()) rec.wc("wc", w[0]);
            int touched = 0;
            for (int i = 0; i < 4096; ++i) touched += s.buf[i] != kGuardByte;
            rec.num("touched", touched);
            rec.num("state", static_cast<int>(qp_state(s.qps[0])));
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});
            h.put_value("peer", s.describe());
            h.barrier("done");
            s.close();
        });
}

}  // namespace

TEST_CASE("an rdma read answered with more bytes than it asked for completes with IBV_WC_BAD_RESP_ERR",
          "[integration][errors]") {
    const auto r = run_bad_read(200);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    REQUIRE(r.num("completions") == 1);
    CHECK(r.num("wc.status") == IBV_WC_BAD_RESP_ERR);
    CHECK(r.unum("wc.wr_id") == 77);
    CHECK(r.num("touched") == 0);
    CHECK(r.num("state") == IBV_QPS_ERR);
}

TEST_CASE("an rdma read answered with fewer bytes than it asked for completes with IBV_WC_BAD_RESP_ERR",
          "[integration][errors]") {
    const auto r = run_bad_read(40);
    HCASIM_REQUIRE_RUN(r);
    REQUIRE(r.num("completions") == 1);
    CHECK(r.num("wc.status") == IBV_WC_BAD_RESP_ERR);
    CHECK(r.unum("wc.wr_id") == 77);
    CHECK(r.num("state") == IBV_QPS_ERR);
}
