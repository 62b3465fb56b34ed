// The SA MAD codec: PathRecord and MCMemberRecord fields at the bytes and
// bits IBA volume 1 chapter 15 gives them, both records through encode and
// decode over many random values, and what is not a well-formed SA MAD of
// theirs refused with a reason.
#include <catch2/catch.hpp>

#include <random>
#include <tuple>
#include <vector>

#include "model/packet/sa_mad.hpp"

using namespace hcasim::packet::sa;

namespace {

constexpr std::size_t D = kSaHeaderBytes;

std::vector<std::uint8_t> encoded(const Mad& m) {
    INFO(check(m));
    REQUIRE(check(m).empty());
    std::vector<std::uint8_t> v(kMadBytes, 0xee);
    encode(m, v.data());
    return v;
}

Mad decoded(const std::vector<std::uint8_t>& v) {
    Mad m;
    std::string why;
    const bool ok = decode(v.data(), v.size(), m, &why);
    INFO(why);
    REQUIRE(ok);
    return m;
}

auto fields_of(const PathRecord& r) {
    return std::tie(r.service_id, r.dgid, r.sgid, r.dlid, r.slid, r.raw_traffic, r.flow_label, r.hop_limit,
                    r.traffic_class, r.reversible, r.numb_path, r.pkey, r.qos_class, r.sl, r.mtu_selector, r.mtu,
                    r.rate_selector, r.rate, r.packet_life_time_selector, r.packet_life_time, r.preference);
}

auto fields_of(const McMemberRecord& r) {
    return std::tie(r.mgid, r.port_gid, r.qkey, r.mlid, r.mtu_selector, r.mtu, r.traffic_class, r.pkey,
                    r.rate_selector, r.rate, r.packet_life_time_selector, r.packet_life_time, r.sl, r.flow_label,
                    r.hop_limit, r.scope, r.join_state, r.proxy_join);
}

struct Random {
    std::mt19937 rng;
    explicit Random(unsigned seed) : rng(seed) {}
    std::uint32_t bits(unsigned n) { return n >= 32 ? rng() : rng() & ((1u << n) - 1); }
    std::uint64_t u64() { return std::uint64_t{rng()} << 32 | rng(); }
    Gid gid() {
        Gid g;
        for (auto& b : g) b = static_cast<std::uint8_t>(rng());
        return g;
    }
    template <typename T>
    T pick(std::initializer_list<T> from) {
        return from.begin()[rng() % from.size()];
    }
};

PathRecord random_path(Random& r) {
    auto u8 = [&](unsigned n) { return static_cast<std::uint8_t>(r.bits(n)); };
    auto u16 = [&](unsigned n) { return static_cast<std::uint16_t>(r.bits(n)); };
    PathRecord p;
    p.service_id = r.u64();
    p.dgid = r.gid();
    p.sgid = r.gid();
    p.dlid = u16(16);
    p.slid = u16(16);
    p.raw_traffic = r.bits(1);
    p.flow_label = r.bits(20);
    p.hop_limit = u8(8);
    p.traffic_class = u8(8);
    p.reversible = r.bits(1);
    p.numb_path = u8(7);
    p.pkey = u16(16);
    p.qos_class = u16(12);
    p.sl = u8(4);
    p.mtu_selector = u8(2);
    p.mtu = u8(6);
    p.rate_selector = u8(2);
    p.rate = u8(6);
    p.packet_life_time_selector = u8(2);
    p.packet_life_time = u8(6);
    p.preference = u8(8);
    return p;
}

McMemberRecord random_member(Random& r) {
    auto u8 = [&](unsigned n) { return static_cast<std::uint8_t>(r.bits(n)); };
    auto u16 = [&](unsigned n) { return static_cast<std::uint16_t>(r.bits(n)); };
    McMemberRecord m;
    m.mgid = r.gid();
    m.port_gid = r.gid();
    m.qkey = r.bits(32);
    m.mlid = u16(16);
    m.mtu_selector = u8(2);
    m.mtu = u8(6);
    m.traffic_class = u8(8);
    m.pkey = u16(16);
    m.rate_selector = u8(2);
    m.rate = u8(6);
    m.packet_life_time_selector = u8(2);
    m.packet_life_time = u8(6);
    m.sl = u8(4);
    m.flow_label = r.bits(20);
    m.hop_limit = u8(8);
    m.scope = u8(4);
    m.join_state = u8(4);
    m.proxy_join = r.bits(1);
    return m;
}

}  // namespace

TEST_CASE("sa: a PathRecord GetResp puts every field where IBA 15.2.5.16 has it", "[unit][sa]") {
    PathRecord p;
    p.service_id = 0x0000000001060000ull | 4791;
    p.dgid[0] = 0xfe;
    p.dgid[15] = 0x02;
    p.sgid[0] = 0xfe;
    p.sgid[15] = 0x01;
    p.dlid = 0x1234;
    p.slid = 0x00ab;
    p.raw_traffic = true;
    p.flow_label = 0xabcde;
    p.hop_limit = 0x40;
    p.traffic_class = 0x9c;
    p.reversible = true;
    p.numb_path = 0x05;
    p.pkey = 0xffff;
    p.qos_class = 0xabc;
    p.sl = 0xd;
    p.mtu_selector = 2;  // exactly
    p.mtu = 5;           // 4096
    p.rate_selector = 3;
    p.rate = 0x10;
    p.packet_life_time_selector = 1;
    p.packet_life_time = 18;
    p.preference = 0x7e;
    const auto v = encoded({kMethodGetResp, kStatusNoRecords, 0x0102030405060708ull,
                            path_mask::kDgid | path_mask::kSgid | path_mask::kNumbPath, p});
    // Header: base version 1, class 3, class version 2, GetResp, status, TID, attribute 0x0035.
    CHECK(v[0] == 1);
    CHECK(v[1] == 0x03);
    CHECK(v[2] == 2);
    CHECK(v[3] == 0x81);
    CHECK(v[4] == 0x03);  // ERR_NO_RECORDS in the class-specific status bits
    CHECK(v[5] == 0x00);
    CHECK(v[8] == 0x01);
    CHECK(v[15] == 0x08);
    CHECK(v[16] == 0x00);
    CHECK(v[17] == 0x35);
    // No RMPP, no SM_Key; AttributeOffset 8 (64 bytes); ComponentMask bits 2, 3 and 12.
    for (std::size_t i = 24; i < 44; ++i) CHECK(v[i] == 0);
    CHECK(v[44] == 0);
    CHECK(v[45] == 8);
    CHECK(v[46] == 0);
    CHECK(v[47] == 0);
    for (std::size_t i = 48; i < 54; ++i) CHECK(v[i] == 0);
    CHECK(v[54] == 0x10);
    CHECK(v[55] == 0x0c);
    // The record.
    CHECK(v[D + 5] == 0x06);
    CHECK(v[D + 6] == 0x12);
    CHECK(v[D + 7] == 0xb7);
    CHECK(v[D + 8] == 0xfe);
    CHECK(v[D + 23] == 0x02);
    CHECK(v[D + 24] == 0xfe);
    CHECK(v[D + 39] == 0x01);
    CHECK(v[D + 40] == 0x12);  // DLID
    CHECK(v[D + 41] == 0x34);
    CHECK(v[D + 42] == 0x00);  // SLID
    CHECK(v[D + 43] == 0xab);
    // RawTraffic (1 bit), reserved (3), FlowLabel (20), HopLimit (8).
    CHECK(v[D + 44] == (0x80 | 0x0a));
    CHECK(v[D + 45] == 0xbc);
    CHECK(v[D + 46] == 0xde);
    CHECK(v[D + 47] == 0x40);
    CHECK(v[D + 48] == 0x9c);
    CHECK(v[D + 49] == (0x80 | 0x05));  // Reversible, NumbPath
    CHECK(v[D + 50] == 0xff);
    CHECK(v[D + 51] == 0xff);
    // QosClass (12 bits), then SL in the low nibble of byte 53.
    CHECK(v[D + 52] == 0xab);
    CHECK(v[D + 53] == 0xcd);
    CHECK(v[D + 54] == (2 << 6 | 5));  // MTU in the low 6 bits
    CHECK(v[D + 55] == (3 << 6 | 0x10));
    CHECK(v[D + 56] == (1 << 6 | 18));  // PacketLifeTime
    CHECK(v[D + 57] == 0x7e);
    for (std::size_t i = D + 58; i < kMadBytes; ++i) CHECK(v[i] == 0);
}

TEST_CASE("sa: an MCMemberRecord join puts every field where IBA 15.2.5.17 has it", "[unit][sa]") {
    McMemberRecord m;
    m.mgid = {0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};  // IPv4 broadcast
    m.port_gid[0] = 0xfe;
    m.port_gid[15] = 0x07;
    m.qkey = 0x0000000b;
    m.mlid = 0xc001;
    m.mtu_selector = 2;
    m.mtu = 4;
    m.traffic_class = 0x11;
    m.pkey = 0xffff;
    m.rate_selector = 2;
    m.rate = 3;
    m.packet_life_time_selector = 2;
    m.packet_life_time = 0x3f;
    m.sl = 0xa;
    m.flow_label = 0x12345;
    m.hop_limit = 0xff;
    m.scope = 2;
    m.join_state = kJoinSendOnlyNonMember;
    m.proxy_join = true;
    const std::uint64_t mask = mcmember_mask::kMgid | mcmember_mask::kPortGid | mcmember_mask::kQkey |
                               mcmember_mask::kPkey | mcmember_mask::kSl | mcmember_mask::kFlowLabel |
                               mcmember_mask::kJoinState;
    const auto v = encoded({kMethodSet, 0, 42, mask, m});
    CHECK(v[3] == 0x02);
    CHECK(v[17] == 0x38);
    CHECK(v[45] == 7);  // AttributeOffset: 56 bytes
    // ComponentMask: bits 0, 1, 2, 7, 12, 13 and 16.
    CHECK(v[53] == 0x01);
    CHECK(v[54] == 0x30);
    CHECK(v[55] == 0x87);
    CHECK(v[D + 0] == 0xff);
    CHECK(v[D + 1] == 0x12);
    CHECK(v[D + 15] == 0xff);
    CHECK(v[D + 16] == 0xfe);
    CHECK(v[D + 31] == 0x07);
    CHECK(v[D + 35] == 0x0b);  // Q_Key
    CHECK(v[D + 36] == 0xc0);  // MLID
    CHECK(v[D + 37] == 0x01);
    CHECK(v[D + 38] == (2 << 6 | 4));
    CHECK(v[D + 39] == 0x11);
    CHECK(v[D + 40] == 0xff);
    CHECK(v[D + 42] == (2 << 6 | 3));
    CHECK(v[D + 43] == 0xbf);
    // SL (4 bits), FlowLabel (20), HopLimit (8).
    CHECK(v[D + 44] == 0xa1);
    CHECK(v[D + 45] == 0x23);
    CHECK(v[D + 46] == 0x45);
    CHECK(v[D + 47] == 0xff);
    CHECK(v[D + 48] == (2 << 4 | 4));  // Scope, then JoinState in the low nibble
    CHECK(v[D + 49] == 0x80);          // ProxyJoin
    for (std::size_t i = D + 50; i < kMadBytes; ++i) CHECK(v[i] == 0);
}

TEST_CASE("sa: component mask bits are those of IBA and Linux's IB_SA_*_REC_*", "[unit][sa]") {
    CHECK(path_mask::kServiceId == 0x3);
    CHECK(path_mask::kDgid == 0x4);
    CHECK(path_mask::kSgid == 0x8);
    CHECK(path_mask::kDlid == 0x10);
    CHECK(path_mask::kSlid == 0x20);
    CHECK(path_mask::kRawTraffic == 0x40);
    CHECK(path_mask::kFlowLabel == 0x100);
    CHECK(path_mask::kPkey == 0x2000);
    CHECK(path_mask::kQosClass == 0x4000);
    CHECK(path_mask::kSl == 0x8000);
    CHECK(path_mask::kMtu == 0x20000);
    CHECK(path_mask::kPacketLifeTime == 0x200000);
    CHECK(path_mask::kPreference == 0x400000);
    CHECK(mcmember_mask::kMlid == 0x8);
    CHECK(mcmember_mask::kTrafficClass == 0x40);
    CHECK(mcmember_mask::kRate == 0x200);
    CHECK(mcmember_mask::kHopLimit == 0x4000);
    CHECK(mcmember_mask::kScope == 0x8000);
    CHECK(mcmember_mask::kJoinState == 0x10000);
    CHECK(mcmember_mask::kProxyJoin == 0x20000);
    CHECK(kStatusReqInvalid == 0x0200);
    CHECK(kStatusNoRecords == 0x0300);
}

TEST_CASE("sa: both records survive encode and decode with random values over many seeds", "[unit][sa][random]") {
    for (unsigned seed = 0; seed < 200; ++seed) {
        INFO("seed " << seed);
        Random r(seed);
        const Mad path{r.pick({kMethodGet, kMethodGetResp}), static_cast<std::uint16_t>(r.bits(16)), r.u64(),
                       r.u64(), random_path(r)};
        const Mad member{r.pick({kMethodGet, kMethodSet, kMethodGetResp, kMethodDelete, kMethodDeleteResp}),
                         static_cast<std::uint16_t>(r.bits(16)), r.u64(), r.u64(), random_member(r)};
        for (const Mad& m : {path, member}) {
            const auto v = encoded(m);
            const Mad back = decoded(v);
            CHECK(back.attr() == m.attr());
            CHECK(back.method == m.method);
            CHECK(back.status == m.status);
            CHECK(back.transaction_id == m.transaction_id);
            CHECK(back.component_mask == m.component_mask);
            REQUIRE(back.record.index() == m.record.index());
            if (const auto* p = std::get_if<PathRecord>(&m.record))
                CHECK(fields_of(std::get<PathRecord>(back.record)) == fields_of(*p));
            else
                CHECK(fields_of(std::get<McMemberRecord>(back.record)) == fields_of(std::get<McMemberRecord>(m.record)));
            CHECK(encoded(back) == v);
        }
    }
}

TEST_CASE("sa: what a record cannot carry is refused before it is sent", "[unit][sa]") {
    PathRecord p;
    CHECK(check({kMethodGet, 0, 1, 0, p}).empty());
    CHECK(check({kMethodSet, 0, 1, 0, p}).find("not defined for PathRecord") != std::string::npos);
    CHECK(check({kMethodDelete, 0, 1, 0, p}).find("not defined for PathRecord") != std::string::npos);
    p.sl = 16;
    CHECK(check({kMethodGet, 0, 1, 0, p}).find("SL 16") != std::string::npos);
    p.sl = 15;
    p.mtu = 64;
    CHECK(check({kMethodGet, 0, 1, 0, p}).find("MTU 64") != std::string::npos);
    p.mtu = 5;
    p.numb_path = 128;
    CHECK(check({kMethodGet, 0, 1, 0, p}).find("NumbPath") != std::string::npos);
    p.numb_path = 1;
    p.qos_class = 0x1000;
    CHECK(check({kMethodGet, 0, 1, 0, p}).find("QoS class") != std::string::npos);
    McMemberRecord m;
    CHECK(check({kMethodDelete, 0, 1, 0, m}).empty());
    m.join_state = 16;
    CHECK(check({kMethodSet, 0, 1, 0, m}).find("join state 16") != std::string::npos);
    m.join_state = kJoinFullMember;
    m.flow_label = 1u << 20;
    CHECK(check({kMethodSet, 0, 1, 0, m}).find("flow label") != std::string::npos);
    m.flow_label = 0;
    m.packet_life_time_selector = 4;
    CHECK(check({kMethodSet, 0, 1, 0, m}).find("packet lifetime selector") != std::string::npos);
}

TEST_CASE("sa: malformed SA MADs are refused with a reason", "[unit][sa]") {
    const auto good = encoded({kMethodGet, 0, 9, path_mask::kDgid, PathRecord{}});
    Mad m;
    std::string why;
    auto refused = [&](const std::vector<std::uint8_t>& v, std::size_t len, const char* reason) {
        why.clear();
        m = Mad{};
        const bool ok = decode(v.data(), len, m, &why);
        INFO(why);
        CHECK_FALSE(ok);
        CHECK(why.find(reason) != std::string::npos);
        CHECK(m.transaction_id == 0);  // nothing taken from a refused MAD
    };
    refused(good, 255, "256 bytes");
    auto bad = good;
    bad[0] = 2;
    refused(bad, bad.size(), "base version 2");
    bad = good;
    bad[1] = 0x07;  // a CM MAD
    refused(bad, bad.size(), "management class 7");
    bad = good;
    bad[2] = 1;
    refused(bad, bad.size(), "class version 1");
    bad = good;
    bad[3] = 0x12;  // GetTable: not handled
    refused(bad, bad.size(), "method 0x12");
    bad = good;
    bad[3] = kMethodDelete;
    refused(bad, bad.size(), "not defined for PathRecord");
    bad = good;
    bad[17] = 0x11;  // NodeRecord
    refused(bad, bad.size(), "attribute 0x0011");
    bad = good;
    bad[45] = 7;  // an MCMemberRecord's offset on a PathRecord
    refused(bad, bad.size(), "AttributeOffset 7");
    // A requester that leaves AttributeOffset zero is understood.
    bad = good;
    bad[45] = 0;
    CHECK(decode(bad.data(), bad.size(), m, &why));
    CHECK(m.transaction_id == 9);
    CHECK(m.component_mask == path_mask::kDgid);
    const auto join = encoded({kMethodSet, 0, 3, 0, McMemberRecord{}});
    CHECK(decode(join.data(), join.size(), m, &why));
    CHECK(std::holds_alternative<McMemberRecord>(m.record));
    CHECK(m.method == kMethodSet);
}
