// The IPoIB ARP codec: every field at the byte RFC 826 and RFC 4391 give it,
// requests and replies through encode and decode, bare and in the
// neighbour MAD, over many random values, and what is not IPoIB ARP refused
// with a reason.
#include <catch2/catch.hpp>

#include <random>
#include <tuple>
#include <vector>

#include "model/packet/ipoib_arp.hpp"

using namespace hcasim::packet::ipoib;

namespace {

std::vector<std::uint8_t> encoded(const Arp& a) {
    INFO(check(a));
    REQUIRE(check(a).empty());
    std::vector<std::uint8_t> v(kArpBytes, 0xee);
    encode(a, v.data());
    return v;
}

std::vector<std::uint8_t> encoded_mad(const Arp& a, std::uint64_t tid) {
    REQUIRE(check(a).empty());
    std::vector<std::uint8_t> v(kMadBytes, 0xee);
    encode_mad(a, tid, v.data());
    return v;
}

auto fields_of(const Arp& a) {
    return std::tie(a.op, a.sender_hw.qpn, a.sender_hw.gid, a.sender_ip, a.target_hw.qpn, a.target_hw.gid,
                    a.target_ip);
}

HwAddr random_hw(std::mt19937& rng) {
    HwAddr h;
    h.qpn = rng() & 0xffffff;
    for (auto& b : h.gid) b = static_cast<std::uint8_t>(rng());
    return h;
}

Arp random_arp(std::mt19937& rng) {
    Arp a;
    a.op = rng() & 1 ? kOpReply : kOpRequest;
    a.sender_hw = random_hw(rng);
    a.sender_ip = rng();
    a.target_hw = random_hw(rng);
    a.target_ip = rng();
    return a;
}

Arp sample() {
    Arp a;
    a.op = kOpReply;
    a.sender_hw.qpn = 0x000048;
    a.sender_hw.gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0xc9, 0x03, 0x00, 0xa1, 0xb2, 0xc3};
    a.sender_ip = 0x0a000102;  // 10.0.1.2
    a.target_hw.qpn = 0xabcdef;
    a.target_hw.gid[0] = 0xfe;
    a.target_hw.gid[15] = 0x42;
    a.target_ip = 0xc0a80001;  // 192.168.0.1
    return a;
}

}  // namespace

TEST_CASE("ipoib arp: every field sits where RFC 826 and RFC 4391 put it", "[unit][ipoib]") {
    const auto v = encoded(sample());
    REQUIRE(v.size() == 56);
    CHECK(v[0] == 0x00);  // hardware type 32
    CHECK(v[1] == 0x20);
    CHECK(v[2] == 0x08);  // IPv4
    CHECK(v[3] == 0x00);
    CHECK(v[4] == 20);
    CHECK(v[5] == 4);
    CHECK(v[6] == 0);
    CHECK(v[7] == 2);  // reply
    // Sender hardware address: flags, QPN, GID.
    CHECK(v[8] == 0);
    CHECK(v[9] == 0x00);
    CHECK(v[10] == 0x00);
    CHECK(v[11] == 0x48);
    CHECK(v[12] == 0xfe);
    CHECK(v[13] == 0x80);
    CHECK(v[25] == 0xa1);
    CHECK(v[27] == 0xc3);
    // Sender IPv4, network order.
    CHECK(v[28] == 10);
    CHECK(v[29] == 0);
    CHECK(v[30] == 1);
    CHECK(v[31] == 2);
    CHECK(v[32] == 0);
    CHECK(v[33] == 0xab);
    CHECK(v[34] == 0xcd);
    CHECK(v[35] == 0xef);
    CHECK(v[36] == 0xfe);
    CHECK(v[51] == 0x42);
    CHECK(v[52] == 192);
    CHECK(v[53] == 168);
    CHECK(v[54] == 0);
    CHECK(v[55] == 1);
}

TEST_CASE("ipoib arp: the neighbour MAD carries the packet after its common header", "[unit][ipoib]") {
    const auto v = encoded_mad(sample(), 0x1122334455667788ull);
    CHECK(v[0] == 1);
    CHECK(v[1] == 0x0a);
    CHECK(v[2] == 1);
    CHECK(v[3] == 0x03);
    CHECK(v[4] == 0);
    CHECK(v[5] == 0);
    CHECK(v[8] == 0x11);
    CHECK(v[15] == 0x88);
    CHECK(v[16] == 0x00);
    CHECK(v[17] == 0x01);
    for (std::size_t i = 18; i < kMadHeaderBytes; ++i) CHECK(v[i] == 0);
    const auto arp = encoded(sample());
    CHECK(std::vector<std::uint8_t>(v.begin() + kMadHeaderBytes, v.begin() + kMadHeaderBytes + kArpBytes) == arp);
    for (std::size_t i = kMadHeaderBytes + kArpBytes; i < kMadBytes; ++i) CHECK(v[i] == 0);
}

TEST_CASE("ipoib arp: requests and replies survive encode and decode over many seeds", "[unit][ipoib][random]") {
    for (unsigned seed = 0; seed < 200; ++seed) {
        INFO("seed " << seed);
        std::mt19937 rng(seed);
        const Arp a = random_arp(rng);
        const std::uint64_t tid = std::uint64_t{rng()} << 32 | rng();
        const auto v = encoded(a);
        Arp back;
        std::string why;
        REQUIRE(decode(v.data(), v.size(), back, &why));
        CHECK(fields_of(back) == fields_of(a));
        CHECK(encoded(back) == v);
        const auto mad = encoded_mad(a, tid);
        Arp from_mad;
        std::uint64_t back_tid = 0;
        const bool ok = decode_mad(mad.data(), mad.size(), from_mad, back_tid, &why);
        INFO(why);
        REQUIRE(ok);
        CHECK(fields_of(from_mad) == fields_of(a));
        CHECK(back_tid == tid);
    }
}

TEST_CASE("ipoib arp: what is not IPoIB ARP is refused with a reason", "[unit][ipoib]") {
    const auto good = encoded(sample());
    Arp a;
    std::string why;
    auto refused = [&](const std::vector<std::uint8_t>& v, std::size_t len, const char* reason) {
        why.clear();
        a = Arp{};
        const bool ok = decode(v.data(), len, a, &why);
        INFO(why);
        CHECK_FALSE(ok);
        CHECK(why.find(reason) != std::string::npos);
        CHECK(a.sender_ip == 0);
    };
    refused(good, 55, "56 bytes");
    auto bad = good;
    bad[1] = 1;  // Ethernet
    refused(bad, bad.size(), "hardware type 1");
    bad = good;
    bad[2] = 0x86;
    bad[3] = 0xdd;
    refused(bad, bad.size(), "protocol 0x86dd");
    bad = good;
    bad[4] = 6;
    refused(bad, bad.size(), "hardware address length 6");
    bad = good;
    bad[5] = 16;
    refused(bad, bad.size(), "protocol address length 16");
    bad = good;
    bad[7] = 3;  // RARP request
    refused(bad, bad.size(), "operation 3");
    bad = good;
    bad[7] = 0;
    refused(bad, bad.size(), "operation 0");
    // The flags byte is ignored on receipt.
    bad = good;
    bad[8] = 0x80;
    bad[32] = 0x80;
    CHECK(decode(bad.data(), bad.size(), a, &why));
    CHECK(fields_of(a) == fields_of(sample()));

    Arp wide = sample();
    wide.sender_hw.qpn = 1u << 24;
    CHECK(check(wide).find("sender QPN") != std::string::npos);
    wide = sample();
    wide.target_hw.qpn = 0xffffffff;
    CHECK(check(wide).find("target QPN") != std::string::npos);
    wide = sample();
    wide.op = 4;
    CHECK(check(wide).find("operation 4") != std::string::npos);
}

TEST_CASE("ipoib arp: a MAD that is not a neighbour ARP is refused with a reason", "[unit][ipoib]") {
    const auto good = encoded_mad(sample(), 5);
    Arp a;
    std::uint64_t tid = 0;
    std::string why;
    auto refused = [&](const std::vector<std::uint8_t>& v, std::size_t len, const char* reason) {
        why.clear();
        tid = 0;
        const bool ok = decode_mad(v.data(), len, a, tid, &why);
        INFO(why);
        CHECK_FALSE(ok);
        CHECK(why.find(reason) != std::string::npos);
        CHECK(tid == 0);
    };
    refused(good, 200, "256 bytes");
    auto bad = good;
    bad[0] = 2;
    refused(bad, bad.size(), "base version 2");
    bad = good;
    bad[1] = 0x03;  // SA
    refused(bad, bad.size(), "management class 0x03");
    bad = good;
    bad[2] = 2;
    refused(bad, bad.size(), "class version 2");
    bad = good;
    bad[3] = 0x83;
    refused(bad, bad.size(), "method 0x83");
    bad = good;
    bad[4] = 0x01;
    refused(bad, bad.size(), "status 0x0100");
    bad = good;
    bad[17] = 0x02;
    refused(bad, bad.size(), "attribute 0x0002");
    bad = good;
    bad[kMadHeaderBytes + 1] = 0x01;  // the ARP inside says Ethernet
    refused(bad, bad.size(), "hardware type 1");
    CHECK(decode_mad(good.data(), good.size(), a, tid, &why));
    CHECK(tid == 5);
}
