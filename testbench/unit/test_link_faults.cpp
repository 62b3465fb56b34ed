// The link's fault injection on its own: what arrives at the far end when a
// direction drops, corrupts or duplicates packets or the link is down, and
// whether the receiver is told to recompute the CRCs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/fabric/link.hpp"
#include "model/packet/ib_packet.hpp"

using namespace hcasim;

namespace {

struct Catcher : fabric::Endpoint {
    std::vector<packet::PacketPtr> got;
    void arrive(packet::PacketPtr pkt, sim::Tick, sim::Tick) override { got.push_back(std::move(pkt)); }
};

// A sealed RC SEND of n bytes, as a transmitter hands it to its link.
packet::PacketPtr sealed_send(std::size_t n) {
    packet::Headers h;
    h.lrh.dlid = 2;
    h.lrh.slid = 1;
    h.bth.opcode = static_cast<std::uint8_t>(packet::Opcode::RcSendOnly);
    h.bth.dest_qp = 0x12;
    h.bth.psn = 7;
    auto pkt = std::make_shared<packet::Packet>();
    pkt->bytes.resize(packet::wire_bytes(h, n));
    const std::size_t hdr = packet::write_headers(h, n, pkt->bytes.data());
    for (std::size_t i = 0; i < n; ++i) pkt->bytes[hdr + i] = static_cast<std::uint8_t>(i * 7 + 1);
    packet::seal(pkt->bytes.data(), pkt->bytes.size());
    pkt->sealed_intact = true;
    return pkt;
}

packet::ParseError verify(const packet::Packet& p) {
    packet::Parsed out;
    return packet::parse(p.bytes.data(), p.bytes.size(), out, packet::CrcCheck::Verify);
}

}  // namespace

TEST_CASE("a link without faults hands the sealed packet itself to the far end", "[link][faults]") {
    fabric::Link link(2.0, 5.0);
    Catcher a, b;
    link.connect(&a, &b);
    auto pkt = sealed_send(64);
    const packet::Packet* sent = pkt.get();
    link.send(&a, pkt, 1000, 2000);
    REQUIRE(b.got.size() == 1);
    CHECK(b.got[0].get() == sent);
    CHECK(b.got[0]->sealed_intact);
    CHECK_FALSE(link.faulty());
}

TEST_CASE("a corrupting link delivers a changed copy that the receiver must verify and that fails its CRCs",
          "[link][faults]") {
    fabric::Link link(2.0, 5.0);
    Catcher a, b;
    link.connect(&a, &b);
    link.inject_faults(&a, fabric::FaultRates{0, 1.0, 0}, 42);
    for (std::size_t n : {0u, 1u, 64u, 4096u}) {
        auto pkt = sealed_send(n);
        const std::vector<std::uint8_t, packet::DefaultInitAllocator<std::uint8_t>> original = pkt->bytes;
        b.got.clear();
        link.send(&a, pkt, 1000, 2000);
        REQUIRE(b.got.size() == 1);
        const packet::Packet& arrived = *b.got[0];
        CHECK(&arrived != pkt.get());
        CHECK_FALSE(arrived.sealed_intact);
        // Exactly one bit differs, and the sender's bytes are untouched.
        REQUIRE(arrived.bytes.size() == original.size());
        int bits = 0;
        for (std::size_t i = 0; i < original.size(); ++i) bits += __builtin_popcount(arrived.bytes[i] ^ original[i]);
        CHECK(bits == 1);
        CHECK(pkt->bytes == original);
        CHECK(verify(*pkt) == packet::ParseError::None);
        CHECK(verify(arrived) != packet::ParseError::None);
    }
    CHECK(link.fault_counts().corrupted == 4);
}

TEST_CASE("a dropping link delivers nothing and counts each loss; the other direction is untouched",
          "[link][faults]") {
    fabric::Link link(2.0, 5.0);
    Catcher a, b;
    link.connect(&a, &b);
    link.inject_faults(&a, fabric::FaultRates{1.0, 0, 0}, 1);
    for (int i = 0; i < 5; ++i) link.send(&a, sealed_send(16), 1000, 2000);
    link.send(&b, sealed_send(16), 1000, 2000);
    CHECK(b.got.empty());
    CHECK(a.got.size() == 1);
    CHECK(link.fault_counts().dropped == 5);
}

TEST_CASE("a duplicating link delivers the same packet twice", "[link][faults]") {
    fabric::Link link(2.0, 5.0);
    Catcher a, b;
    link.connect(&a, &b);
    link.inject_faults(&a, fabric::FaultRates{0, 0, 1.0}, 1);
    link.send(&a, sealed_send(16), 1000, 2000);
    REQUIRE(b.got.size() == 2);
    CHECK(b.got[0] == b.got[1]);
    CHECK(b.got[0]->sealed_intact);
    CHECK(link.fault_counts().duplicated == 1);
}

TEST_CASE("a link loses both ways while down and carries again after the outage", "[link][faults]") {
    fabric::Link link(2.0, 5.0);  // 10 ns each way
    Catcher a, b;
    link.connect(&a, &b);
    link.add_outage(1000000, 500000);  // down from 1 us for 0.5 us
    CHECK(link.up_at(999999));
    CHECK_FALSE(link.up_at(1000000));
    CHECK_FALSE(link.up_at(1499999));
    CHECK(link.up_at(1500000));
    link.send(&a, sealed_send(16), 500000, 600000);    // before
    link.send(&a, sealed_send(16), 1100000, 1200000);  // inside
    link.send(&b, sealed_send(16), 1100000, 1200000);  // inside, other way
    link.send(&a, sealed_send(16), 990000, 1000000);   // last bit arrives inside
    link.send(&a, sealed_send(16), 1600000, 1700000);  // after
    CHECK(b.got.size() == 2);
    CHECK(a.got.empty());
    CHECK(link.fault_counts().lost_link_down == 3);
}

TEST_CASE("the same seed makes the same losses and another seed others", "[link][faults]") {
    auto pattern = [](std::uint64_t seed) {
        fabric::Link link(2.0, 5.0);
        Catcher a, b;
        link.connect(&a, &b);
        link.inject_faults(&a, fabric::FaultRates{0.3, 0, 0}, seed);
        std::vector<int> seen;
        for (int i = 0; i < 200; ++i) {
            const std::size_t before = b.got.size();
            link.send(&a, sealed_send(8), 1000, 2000);
            seen.push_back(b.got.size() != before);
        }
        return seen;
    };
    CHECK(pattern(5) == pattern(5));
    CHECK(pattern(5) != pattern(6));
    const auto p = pattern(5);
    const long delivered = std::count(p.begin(), p.end(), 1);
    CHECK(delivered > 100);
    CHECK(delivered < 180);
}
