// The InfiniBand CM MAD codec: every field at the byte and bit IBA volume 1
// chapter 12 gives it, every message through encode and decode over many
// random values, and malformed MADs refused with a reason.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "model/packet/ib_cm_mad.hpp"

using namespace hcasim::packet::ibcm;

namespace {

constexpr std::size_t H = kMadHeaderBytes;

std::vector<std::uint8_t> encoded(const Mad& m) {
    REQUIRE(check(m).empty());
    std::vector<std::uint8_t> v(kMadBytes, 0xee);
    encode(m, v.data());
    return v;
}

Mad decoded(const std::vector<std::uint8_t>& v) {
    Mad m;
    std::string why;
    INFO(why);
    REQUIRE(decode(v.data(), v.size(), m, &why));
    return m;
}

std::vector<std::uint8_t> bytes(std::mt19937_64& rng, std::size_t max) {
    std::vector<std::uint8_t> v(rng() % (max + 1));
    for (auto& b : v) b = static_cast<std::uint8_t>(rng());
    return v;
}

Path random_path(std::mt19937_64& rng) {
    Path p;
    p.local_lid = static_cast<std::uint16_t>(rng());
    p.remote_lid = static_cast<std::uint16_t>(rng());
    for (auto& b : p.local_gid) b = static_cast<std::uint8_t>(rng());
    for (auto& b : p.remote_gid) b = static_cast<std::uint8_t>(rng());
    p.flow_label = static_cast<std::uint32_t>(rng() & 0xfffff);
    p.packet_rate = static_cast<std::uint8_t>(rng() & 0x3f);
    p.traffic_class = static_cast<std::uint8_t>(rng());
    p.hop_limit = static_cast<std::uint8_t>(rng());
    p.sl = static_cast<std::uint8_t>(rng() & 0xf);
    p.subnet_local = rng() & 1;
    p.local_ack_timeout = static_cast<std::uint8_t>(rng() & 0x1f);
    return p;
}

// One message of each kind with random values in every field.
std::vector<Mad> random_messages(std::mt19937_64& rng) {
    auto u24 = [&] { return static_cast<std::uint32_t>(rng() & 0xffffff); };
    auto u32 = [&] { return static_cast<std::uint32_t>(rng()); };
    auto bits = [&](unsigned n) { return static_cast<std::uint8_t>(rng() & ((1u << n) - 1)); };
    std::vector<Mad> out;
    Req q;
    q.local_comm_id = u32();
    q.service_id = rng();
    q.local_ca_guid = rng();
    q.local_qkey = u32();
    q.local_qpn = u24();
    q.responder_resources = bits(8);
    q.local_eecn = u24();
    q.initiator_depth = bits(8);
    q.remote_eecn = u24();
    q.remote_cm_response_timeout = bits(5);
    q.transport = static_cast<Transport>(bits(2));
    q.end_to_end_flow_control = bits(1);
    q.starting_psn = u24();
    q.local_cm_response_timeout = bits(5);
    q.retry_count = bits(3);
    q.pkey = static_cast<std::uint16_t>(rng());
    q.path_mtu = bits(4);
    q.rdc_exists = bits(1);
    q.rnr_retry_count = bits(3);
    q.max_cm_retries = bits(4);
    q.srq = bits(1);
    q.extended_transport = bits(3);
    q.primary = random_path(rng);
    q.alternate = random_path(rng);
    q.private_data = bytes(rng, kReqPrivateBytes);
    out.push_back({rng(), q});
    out.push_back({rng(), Mra{u32(), u32(), static_cast<Answered>(rng() % 3), bits(5), bytes(rng, kMraPrivateBytes)}});
    out.push_back({rng(), Rej{u32(), u32(), static_cast<Answered>(rng() % 3), static_cast<std::uint16_t>(rng()),
                              bytes(rng, kAdditionalInfoBytes), bytes(rng, kRejPrivateBytes)}});
    Rep p;
    p.local_comm_id = u32();
    p.remote_comm_id = u32();
    p.local_qkey = u32();
    p.local_qpn = u24();
    p.local_eecn = u24();
    p.starting_psn = u24();
    p.responder_resources = bits(8);
    p.initiator_depth = bits(8);
    p.target_ack_delay = bits(5);
    p.failover_accepted = bits(2);
    p.end_to_end_flow_control = bits(1);
    p.rnr_retry_count = bits(3);
    p.srq = bits(1);
    p.local_ca_guid = rng();
    p.private_data = bytes(rng, kRepPrivateBytes);
    out.push_back({rng(), p});
    out.push_back({rng(), Rtu{u32(), u32(), bytes(rng, kRtuPrivateBytes)}});
    out.push_back({rng(), Dreq{u32(), u32(), u24(), bytes(rng, kDreqPrivateBytes)}});
    out.push_back({rng(), Drep{u32(), u32(), bytes(rng, kDrepPrivateBytes)}});
    out.push_back({rng(), SidrReq{u32(), static_cast<std::uint16_t>(rng()), rng(), bytes(rng, kSidrReqPrivateBytes)}});
    out.push_back({rng(), SidrRep{u32(), static_cast<SidrStatus>(rng() % 6), u24(), rng(), u32(),
                                  bytes(rng, kAdditionalInfoBytes), bytes(rng, kSidrRepPrivateBytes)}});
    return out;
}

std::vector<std::uint8_t> private_of(const Mad& m) {
    return std::visit([](const auto& b) { return b.private_data; }, m.body);
}

}  // namespace

TEST_CASE("ib cm: a REQ puts every field where IBA table 106 has it", "[unit][cm][ibcm]") {
    Req q;
    q.local_comm_id = 0x11223344;
    q.service_id = 0x0000000001060000ull | 4791;  // rdma_cm's TCP port space, port 4791
    q.local_ca_guid = 0x0002c90300a1b2c3ull;
    q.local_qkey = 0x80010000;
    q.local_qpn = 0xabcdef;
    q.responder_resources = 4;
    q.initiator_depth = 3;
    q.remote_cm_response_timeout = 20;
    q.transport = Transport::Uc;
    q.end_to_end_flow_control = true;
    q.starting_psn = 0x123456;
    q.local_cm_response_timeout = 18;
    q.retry_count = 7;
    q.pkey = 0xffff;
    q.path_mtu = 5;  // 4096
    q.rnr_retry_count = 6;
    q.max_cm_retries = 15;
    q.srq = true;
    q.primary.local_lid = 0x0001;
    q.primary.remote_lid = 0x0002;
    q.primary.local_gid[0] = 0xfe;
    q.primary.remote_gid[15] = 0x42;
    q.primary.flow_label = 0xabcde;
    q.primary.packet_rate = 0x3f;
    q.primary.hop_limit = 1;
    q.primary.sl = 9;
    q.primary.subnet_local = true;
    q.primary.local_ack_timeout = 14;
    q.alternate.local_lid = 0x0003;
    q.private_data = {0xaa, 0xbb};
    const auto v = encoded({0x0102030405060708ull, q});
    // Header: base version, class 7, class version 2, Send, TID, attribute 0x0010.
    CHECK(v[0] == 1);
    CHECK(v[1] == 0x07);
    CHECK(v[2] == 2);
    CHECK(v[3] == 0x03);
    CHECK(v[8] == 0x01);
    CHECK(v[15] == 0x08);
    CHECK(v[16] == 0x00);
    CHECK(v[17] == 0x10);
    CHECK(v[H + 0] == 0x11);
    CHECK(v[H + 3] == 0x44);
    CHECK(v[H + 14] == 0x12);  // service ID, bytes 8-15: 0x...0106 12b7
    CHECK(v[H + 15] == 0xb7);
    CHECK(v[H + 16] == 0x00);
    CHECK(v[H + 23] == 0xc3);
    CHECK(v[H + 28] == 0x80);
    CHECK(v[H + 32] == 0xab);
    CHECK(v[H + 34] == 0xef);
    CHECK(v[H + 35] == 4);
    CHECK(v[H + 39] == 3);
    // Byte 43: remote CM response timeout (5 bits), transport (2), end-to-end flow control (1).
    CHECK(v[H + 43] == (20 << 3 | 1 << 1 | 1));
    CHECK(v[H + 44] == 0x12);
    CHECK(v[H + 46] == 0x56);
    CHECK(v[H + 47] == (18 << 3 | 7));
    CHECK(v[H + 48] == 0xff);
    CHECK(v[H + 50] == (5 << 4 | 6));
    CHECK(v[H + 51] == (15 << 4 | 1 << 3));
    CHECK(v[H + 53] == 0x01);
    CHECK(v[H + 55] == 0x02);
    CHECK(v[H + 56] == 0xfe);
    CHECK(v[H + 87] == 0x42);
    // Flow label (20 bits) then packet rate in the low 6 bits of byte 91.
    CHECK(v[H + 88] == 0xab);
    CHECK(v[H + 89] == 0xcd);
    CHECK(v[H + 90] == 0xe0);
    CHECK(v[H + 91] == 0x3f);
    CHECK(v[H + 93] == 1);
    CHECK(v[H + 94] == (9 << 4 | 1 << 3));
    CHECK(v[H + 95] == 14 << 3);
    CHECK(v[H + 97] == 0x03);
    CHECK(v[H + 140] == 0xaa);
    CHECK(v[H + 141] == 0xbb);
    CHECK(v[H + 142] == 0);
    CHECK(v[kMadBytes - 1] == 0);
}

TEST_CASE("ib cm: REJ, REP, DREQ and SIDR_REP fields sit where IBA tables 108, 110, 112 and 120 have them",
          "[unit][cm][ibcm]") {
    Rej j;
    j.local_comm_id = 1;
    j.remote_comm_id = 2;
    j.message_rejected = Answered::Rep;
    j.reason = 28;  // consumer reject
    j.additional_info = {9, 8, 7};
    j.private_data = {0x5a};
    auto v = encoded({7, j});
    CHECK(v[17] == 0x12);
    CHECK(v[H + 8] == 1 << 6);
    CHECK(v[H + 9] == 3 << 1);  // rejected information length, 7 bits
    CHECK(v[H + 11] == 28);
    CHECK(v[H + 12] == 9);
    CHECK(v[H + 14] == 7);
    CHECK(v[H + 84] == 0x5a);

    Rep p;
    p.local_qkey = 0xdeadbeef;
    p.local_qpn = 0x000102;
    p.starting_psn = 0xfffffe;
    p.responder_resources = 16;
    p.initiator_depth = 8;
    p.target_ack_delay = 15;
    p.failover_accepted = 2;
    p.rnr_retry_count = 7;
    p.srq = true;
    p.local_ca_guid = 0x1122334455667788ull;
    p.private_data = {1};
    v = encoded({8, p});
    CHECK(v[17] == 0x13);
    CHECK(v[H + 8] == 0xde);
    CHECK(v[H + 14] == 0x02);
    CHECK(v[H + 22] == 0xfe);
    CHECK(v[H + 24] == 16);
    CHECK(v[H + 25] == 8);
    CHECK(v[H + 26] == (15 << 3 | 2 << 1));
    CHECK(v[H + 27] == (7 << 5 | 1 << 4));
    CHECK(v[H + 28] == 0x11);
    CHECK(v[H + 35] == 0x88);
    CHECK(v[H + 36] == 1);

    v = encoded({9, Dreq{5, 6, 0x00abcd, {3}}});
    CHECK(v[17] == 0x15);
    CHECK(v[H + 9] == 0xab);
    CHECK(v[H + 10] == 0xcd);
    CHECK(v[H + 12] == 3);

    v = encoded({10, SidrRep{0x01020304, SidrStatus::NoQp, 0x00beef, 0x0102ull, 0x11111111, {0xcc}, {0xdd}}});
    CHECK(v[17] == 0x18);
    CHECK(v[H + 4] == 3);
    CHECK(v[H + 5] == 1);
    CHECK(v[H + 9] == 0xbe);
    CHECK(v[H + 19] == 0x02);
    CHECK(v[H + 20] == 0x11);
    CHECK(v[H + 24] == 0xcc);
    CHECK(v[H + 96] == 0xdd);
}

TEST_CASE("ib cm: every message survives encode and decode with random values over many seeds",
          "[unit][cm][ibcm][random]") {
    for (std::uint64_t seed = 1; seed <= 200; ++seed) {
        std::mt19937_64 rng(seed);
        for (const Mad& m : random_messages(rng)) {
            INFO("seed " << seed << ", attribute " << static_cast<int>(m.attr()));
            const auto v = encoded(m);
            const Mad back = decoded(v);
            CHECK(back.attr() == m.attr());
            CHECK(back.transaction_id == m.transaction_id);
            // The wire carries the whole private data area: what was sent,
            // then zeros.
            auto want = private_of(m);
            const auto got = private_of(back);
            REQUIRE(got.size() >= want.size());
            want.resize(got.size(), 0);
            CHECK(got == want);
            if (const auto* j = std::get_if<Rej>(&m.body)) CHECK(std::get<Rej>(back.body).additional_info == j->additional_info);
            if (const auto* s = std::get_if<SidrRep>(&m.body))
                CHECK(std::get<SidrRep>(back.body).additional_info == s->additional_info);
            // Every other field: encoding what came back gives the same bytes.
            CHECK(encoded(back) == v);
        }
    }
}

TEST_CASE("ib cm: what a message cannot carry is refused before it is sent", "[unit][cm][ibcm]") {
    Req q;
    q.private_data.assign(kReqPrivateBytes + 1, 1);
    CHECK(check({1, q}).find("93 bytes of private data") != std::string::npos);
    q.private_data.assign(kReqPrivateBytes, 1);
    CHECK(check({1, q}).empty());
    q.local_qpn = 1u << 24;
    CHECK(check({1, q}).find("local QPN") != std::string::npos);
    q.local_qpn = 1;
    q.primary.sl = 16;
    CHECK(check({1, q}).find("SL 16") != std::string::npos);
    Rej j;
    j.additional_info.assign(73, 0);
    CHECK(check({1, j}).find("at most 72") != std::string::npos);
    CHECK(check({1, Rtu{1, 2, std::vector<std::uint8_t>(kRtuPrivateBytes + 1)}}).find("at most 224") != std::string::npos);
    CHECK(check({1, SidrReq{1, 2, 3, std::vector<std::uint8_t>(kSidrReqPrivateBytes + 1)}}).find("at most 216") !=
          std::string::npos);
}

TEST_CASE("ib cm: malformed MADs are refused with a reason", "[unit][cm][ibcm]") {
    const auto good = encoded({1, Rtu{1, 2, {}}});
    Mad m;
    std::string why;
    CHECK_FALSE(decode(good.data(), 255, m, &why));
    CHECK(why.find("256 bytes") != std::string::npos);
    auto bad = good;
    bad[1] = 0x04;  // a DevMgt MAD
    CHECK_FALSE(decode(bad.data(), bad.size(), m, &why));
    CHECK(why.find("management class 4") != std::string::npos);
    bad = good;
    bad[2] = 1;
    CHECK_FALSE(decode(bad.data(), bad.size(), m, &why));
    CHECK(why.find("class version 1") != std::string::npos);
    bad = good;
    bad[3] = 0x01;  // Get
    CHECK_FALSE(decode(bad.data(), bad.size(), m, &why));
    CHECK(why.find("method 1") != std::string::npos);
    bad = good;
    bad[5] = 0x04;
    CHECK_FALSE(decode(bad.data(), bad.size(), m, &why));
    CHECK(why.find("status 4") != std::string::npos);
    bad = good;
    bad[17] = 0x19;  // LAP: not among the messages handled
    CHECK_FALSE(decode(bad.data(), bad.size(), m, &why));
    CHECK(why.find("none of REQ") != std::string::npos);
    auto rej = encoded({1, Rej{}});
    rej[H + 9] = 100 << 1;  // additional information longer than its area
    CHECK_FALSE(decode(rej.data(), rej.size(), m, &why));
    CHECK(why.find("72 bytes") != std::string::npos);
    CHECK(decode(good.data(), good.size(), m, &why));
}
