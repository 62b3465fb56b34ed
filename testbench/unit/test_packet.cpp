// Unit tests for the IBA packet module: header layout, build/parse, the
// ICRC/VCRC engines and the validation in parse().
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "testbench/system/split_mix.hpp"
#include "model/packet/ib_packet.hpp"
#include "model/packet/opcode_table.hpp"

using namespace hcasim::packet;

namespace {

// ---------------------------------------------------------------------------
// Deterministic data.

using hcasim::testbench::SplitMix64;

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
    SplitMix64 r{seed};
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = r.byte();
    return v;
}

// ---------------------------------------------------------------------------
// Bitwise reference CRCs, written from the definitions and nothing else.

// Reflected (LSB-first) shift register; `crc` is the raw register.
std::uint32_t ref_crc32(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        crc ^= p[i];
        for (int k = 0; k < 8; ++k) crc = (crc & 1u) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
    }
    return crc;
}

std::uint16_t ref_crc16(std::uint16_t crc, const std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        crc = static_cast<std::uint16_t>(crc ^ p[i]);
        for (int k = 0; k < 8; ++k) crc = static_cast<std::uint16_t>((crc & 1u) ? (crc >> 1) ^ 0xD008u : crc >> 1);
    }
    return crc;
}

// The VCRC as a serial LFSR on G(x) = x^16 + x^12 + x^3 + x + 1 (0x100B),
// MSB-first register, bits fed least-significant first as they leave the
// wire, register preset to 1s, result bit-reversed and inverted. Independent
// of the reflected formulation above.
std::uint16_t vcrc_serial(const std::uint8_t* p, std::size_t n) {
    std::uint16_t reg = 0xffff;
    for (std::size_t i = 0; i < n; ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            const bool in = (p[i] >> bit) & 1u;
            const bool top = (reg >> 15) & 1u;
            reg = static_cast<std::uint16_t>(reg << 1);
            if (in != top) reg ^= 0x100B;
        }
    }
    std::uint16_t out = 0;
    for (int i = 0; i < 16; ++i) out = static_cast<std::uint16_t>(out | (((reg >> i) & 1u) << (15 - i)));
    return static_cast<std::uint16_t>(out ^ 0xffff);
}

const std::uint8_t* bytes(const char* s) { return reinterpret_cast<const std::uint8_t*>(s); }

// ---------------------------------------------------------------------------
// Packet helpers.

const std::vector<Opcode> kAllOpcodes = {
    Opcode::RcSendFirst,         Opcode::RcSendMiddle,         Opcode::RcSendLast,
    Opcode::RcSendLastImm,       Opcode::RcSendOnly,           Opcode::RcSendOnlyImm,
    Opcode::RcWriteFirst,        Opcode::RcWriteMiddle,        Opcode::RcWriteLast,
    Opcode::RcWriteLastImm,      Opcode::RcWriteOnly,          Opcode::RcWriteOnlyImm,
    Opcode::RcReadRequest,       Opcode::RcReadResponseFirst,  Opcode::RcReadResponseMiddle,
    Opcode::RcReadResponseLast,  Opcode::RcReadResponseOnly,   Opcode::RcAcknowledge,
    Opcode::UdSendOnly,          Opcode::UdSendOnlyImm,
};

std::uint8_t op(Opcode o) { return static_cast<std::uint8_t>(o); }

// Every field set to something other than its default or zero.
Headers sample_headers(Opcode opcode, bool with_grh) {
    Headers h;
    h.lrh.vl = 0xa;
    h.lrh.sl = 0x5;
    h.lrh.dlid = 0xbeef;
    h.lrh.slid = 0x1234;
    if (with_grh) {
        Grh g;
        g.ip_ver = 6;
        g.tclass = 0xa5;
        g.flow_label = 0xabcde;
        g.next_hdr = 0x1b;
        g.hop_limit = 0x3f;
        for (int i = 0; i < 16; ++i) {
            g.sgid[i] = static_cast<std::uint8_t>(0x10 + i);
            g.dgid[i] = static_cast<std::uint8_t>(0xf0 - i);
        }
        h.grh = g;
    }
    h.bth.opcode = op(opcode);
    h.bth.se = true;
    h.bth.migreq = true;
    h.bth.pkey = 0x8001;
    h.bth.dest_qp = 0xabcdef;
    h.bth.ack_req = true;
    h.bth.psn = 0xfedcba;
    const OpcodeLayout l = opcode_layout(op(opcode));
    if (l.deth) h.deth = Deth{0x80010002, 0x123456};
    if (l.reth) h.reth = Reth{0x0123456789abcdefull, 0xdeadbeef, 0x00001000};
    if (l.aeth) h.aeth = Aeth{static_cast<std::uint8_t>(kAethNak | kNakRemoteAccessError), 0x654321};
    if (l.immdt) h.immdt = 0xcafef00du;
    if (l.ieth) h.ieth = 0x00a1b2c3u;
    return h;
}

std::vector<std::uint8_t> make_packet(const Headers& h, const std::vector<std::uint8_t>& payload) {
    std::vector<std::uint8_t> buf(wire_bytes(h, payload.size()), 0xcc);
    const std::size_t n = build(h, payload.data(), payload.size(), buf.data());
    REQUIRE(n == buf.size());
    return buf;
}

// Recompute both CRCs after a deliberate edit, least-significant byte first.
void restamp_crcs(std::vector<std::uint8_t>& b) {
    const std::size_t at = b.size() - kIcrcBytes - kVcrcBytes;
    const std::uint32_t ic = icrc(b.data(), at);
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(ic >> (8 * i));
    const std::uint16_t vc = vcrc(b.data(), at + kIcrcBytes);
    b[at + 4] = static_cast<std::uint8_t>(vc);
    b[at + 5] = static_cast<std::uint8_t>(vc >> 8);
}

// What a switch does: recompute only the VCRC.
void restamp_vcrc(std::vector<std::uint8_t>& b) {
    const std::size_t at = b.size() - kVcrcBytes;
    const std::uint16_t vc = vcrc(b.data(), at);
    b[at] = static_cast<std::uint8_t>(vc);
    b[at + 1] = static_cast<std::uint8_t>(vc >> 8);
}

std::uint32_t stored_icrc(const std::vector<std::uint8_t>& b) {
    const std::size_t at = b.size() - 6;
    return std::uint32_t{b[at]} | std::uint32_t{b[at + 1]} << 8 | std::uint32_t{b[at + 2]} << 16 |
           std::uint32_t{b[at + 3]} << 24;
}
std::uint16_t stored_vcrc(const std::vector<std::uint8_t>& b) {
    const std::size_t at = b.size() - 2;
    return static_cast<std::uint16_t>(b[at] | b[at + 1] << 8);
}

ParseError parse_vec(const std::vector<std::uint8_t>& b) {
    Parsed p;
    return parse(b.data(), b.size(), p);
}

// Parses from a heap block of exactly n bytes, so a sanitizer build catches
// any read past the end.
ParseError parse_exact(const std::uint8_t* src, std::size_t n, Parsed& out) {
    std::unique_ptr<std::uint8_t[]> copy(new std::uint8_t[n == 0 ? 1 : n]);
    if (n != 0) std::memcpy(copy.get(), src, n);
    return parse(copy.get(), n, out);
}

void set_pkt_len_words(std::vector<std::uint8_t>& b, std::uint16_t words) {
    b[4] = static_cast<std::uint8_t>((b[4] & 0xf8) | ((words >> 8) & 0x7));
    b[5] = static_cast<std::uint8_t>(words);
}

void check_same_headers(const Headers& want, const Headers& got) {
    CHECK(got.lrh.vl == want.lrh.vl);
    CHECK(got.lrh.lver == want.lrh.lver);
    CHECK(got.lrh.sl == want.lrh.sl);
    CHECK(got.lrh.lnh == want.lrh.lnh);
    CHECK(got.lrh.dlid == want.lrh.dlid);
    CHECK(got.lrh.pkt_len == want.lrh.pkt_len);
    CHECK(got.lrh.slid == want.lrh.slid);
    REQUIRE(got.grh.has_value() == want.grh.has_value());
    if (want.grh) {
        CHECK(got.grh->ip_ver == want.grh->ip_ver);
        CHECK(got.grh->tclass == want.grh->tclass);
        CHECK(got.grh->flow_label == want.grh->flow_label);
        CHECK(got.grh->pay_len == want.grh->pay_len);
        CHECK(got.grh->next_hdr == want.grh->next_hdr);
        CHECK(got.grh->hop_limit == want.grh->hop_limit);
        CHECK(std::memcmp(got.grh->sgid, want.grh->sgid, 16) == 0);
        CHECK(std::memcmp(got.grh->dgid, want.grh->dgid, 16) == 0);
    }
    CHECK(got.bth.opcode == want.bth.opcode);
    CHECK(got.bth.se == want.bth.se);
    CHECK(got.bth.migreq == want.bth.migreq);
    CHECK(got.bth.pad_cnt == want.bth.pad_cnt);
    CHECK(got.bth.tver == want.bth.tver);
    CHECK(got.bth.pkey == want.bth.pkey);
    CHECK(got.bth.dest_qp == want.bth.dest_qp);
    CHECK(got.bth.ack_req == want.bth.ack_req);
    CHECK(got.bth.psn == want.bth.psn);
    REQUIRE(got.deth.has_value() == want.deth.has_value());
    if (want.deth) {
        CHECK(got.deth->qkey == want.deth->qkey);
        CHECK(got.deth->src_qp == want.deth->src_qp);
    }
    REQUIRE(got.reth.has_value() == want.reth.has_value());
    if (want.reth) {
        CHECK(got.reth->va == want.reth->va);
        CHECK(got.reth->rkey == want.reth->rkey);
        CHECK(got.reth->dma_len == want.reth->dma_len);
    }
    REQUIRE(got.aeth.has_value() == want.aeth.has_value());
    if (want.aeth) {
        CHECK(got.aeth->syndrome == want.aeth->syndrome);
        CHECK(got.aeth->msn == want.aeth->msn);
    }
    REQUIRE(got.immdt.has_value() == want.immdt.has_value());
    if (want.immdt) CHECK(*got.immdt == *want.immdt);
    REQUIRE(got.ieth.has_value() == want.ieth.has_value());
    if (want.ieth) CHECK(*got.ieth == *want.ieth);
}

}  // namespace

// ===========================================================================
// CRC engines

TEST_CASE("CRC-32 of \"123456789\" is the standard check value 0xCBF43926", "[packet][crc]") {
    const auto* s = bytes("123456789");
    CHECK((crc32_update(0xffffffffu, s, 9) ^ 0xffffffffu) == 0xCBF43926u);
    CHECK((crc32_update_portable(0xffffffffu, s, 9) ^ 0xffffffffu) == 0xCBF43926u);
    CHECK((ref_crc32(0xffffffffu, s, 9) ^ 0xffffffffu) == 0xCBF43926u);
}

TEST_CASE("The reflected VCRC agrees with a serial LFSR on polynomial 0x100B", "[packet][crc]") {
    const auto* s = bytes("123456789");
    const auto check = static_cast<std::uint16_t>(crc16_update(0xffff, s, 9) ^ 0xffff);
    CHECK(check == vcrc_serial(s, 9));
    CHECK(check == 0x0A3D);  // pins the parameters: reflected, init 0xffff, xorout 0xffff
    for (std::size_t n : {0u, 1u, 2u, 7u, 26u, 63u, 64u, 65u, 200u, 1000u}) {
        const auto data = random_bytes(n, 77 + n);
        INFO("length " << n);
        CHECK(static_cast<std::uint16_t>(crc16_update(0xffff, data.data(), n) ^ 0xffff) ==
              vcrc_serial(data.data(), n));
    }
}

TEST_CASE("Both CRC engines match the bitwise reference for every length up to 300 and unaligned starts",
          "[packet][crc]") {
    const auto data = random_bytes(300 + 64, 1);
    SplitMix64 seeds{2};
    for (std::size_t offset = 0; offset < 16; ++offset) {
        for (std::size_t n = 0; n <= 300; ++n) {
            const auto init32 = static_cast<std::uint32_t>(seeds.next());
            const auto init16 = static_cast<std::uint16_t>(seeds.next());
            const std::uint8_t* p = data.data() + offset;
            const std::uint32_t want32 = ref_crc32(init32, p, n);
            const std::uint16_t want16 = ref_crc16(init16, p, n);
            if (crc32_update(init32, p, n) != want32 || crc32_update_portable(init32, p, n) != want32 ||
                crc16_update(init16, p, n) != want16 || crc16_update_portable(init16, p, n) != want16) {
                FAIL("mismatch at offset " << offset << " length " << n);
            }
        }
    }
    SUCCEED();
}

TEST_CASE("Both CRC engines match the bitwise reference on large unaligned buffers", "[packet][crc]") {
    const auto data = random_bytes(70000, 3);
    for (std::size_t n : {1000u, 4095u, 4096u, 4097u, 4111u, 4138u, 8205u, 65543u}) {
        for (std::size_t offset : {0u, 1u, 3u, 8u, 13u}) {
            INFO("length " << n << " offset " << offset);
            const std::uint8_t* p = data.data() + offset;
            const std::uint32_t want32 = ref_crc32(0xffffffffu, p, n);
            const std::uint16_t want16 = ref_crc16(0xffff, p, n);
            CHECK(crc32_update(0xffffffffu, p, n) == want32);
            CHECK(crc32_update_portable(0xffffffffu, p, n) == want32);
            CHECK(crc16_update(0xffff, p, n) == want16);
            CHECK(crc16_update_portable(0xffff, p, n) == want16);
        }
    }
}

TEST_CASE("A CRC computed in pieces equals the CRC of the whole buffer", "[packet][crc]") {
    const auto data = random_bytes(5000, 4);
    SplitMix64 r{5};
    for (int trial = 0; trial < 200; ++trial) {
        const std::size_t n = r.next() % data.size();
        std::uint32_t c32 = 0xffffffffu;
        std::uint16_t c16 = 0xffff;
        std::size_t pos = 0;
        while (pos < n) {
            const std::size_t step = std::min<std::size_t>(n - pos, r.next() % 700);
            c32 = crc32_update(c32, data.data() + pos, step);
            c16 = crc16_update(c16, data.data() + pos, step);
            pos += step;
        }
        REQUIRE(c32 == crc32_update(0xffffffffu, data.data(), n));
        REQUIRE(c16 == crc16_update(0xffff, data.data(), n));
    }
}

TEST_CASE("Appending a CRC least-significant byte first leaves a constant residue", "[packet][crc]") {
    // The property that makes LSB-first the transmission order of a reflected
    // CRC: the register after data + CRC no longer depends on the data.
    std::set<std::uint32_t> residues32;
    std::set<std::uint16_t> residues16;
    for (std::size_t n : {0u, 5u, 100u, 4096u}) {
        auto d = random_bytes(n, 10 + n);
        const std::uint32_t c32 = ~crc32_update(0xffffffffu, d.data(), n);
        auto d32 = d;
        for (int i = 0; i < 4; ++i) d32.push_back(static_cast<std::uint8_t>(c32 >> (8 * i)));
        residues32.insert(crc32_update(0xffffffffu, d32.data(), d32.size()));
        const auto c16 = static_cast<std::uint16_t>(~crc16_update(0xffff, d.data(), n));
        d.push_back(static_cast<std::uint8_t>(c16));
        d.push_back(static_cast<std::uint8_t>(c16 >> 8));
        residues16.insert(crc16_update(0xffff, d.data(), d.size()));
    }
    CHECK(residues32.size() == 1);
    CHECK(*residues32.begin() == 0xDEBB20E3u);
    CHECK(residues16.size() == 1);
}

TEST_CASE("The fused CRC pass equals the two separate CRCs for every length up to 1100 and unaligned starts",
          "[packet][crc][fused]") {
    // Covers both sides of the length at which the fused fold takes over.
    const auto data = random_bytes(1100 + 16, 20);
    SplitMix64 seeds{21};
    for (std::size_t offset = 0; offset < 16; ++offset) {
        for (std::size_t n = 0; n <= 1100; ++n) {
            const auto init32 = static_cast<std::uint32_t>(seeds.next());
            const auto init16 = static_cast<std::uint16_t>(seeds.next());
            const std::uint8_t* p = data.data() + offset;
            const CrcRegisters got = crc32_crc16_update(init32, init16, p, n);
            if (got.crc32 != crc32_update(init32, p, n) || got.crc16 != crc16_update(init16, p, n) ||
                got.crc32 != crc32_update_portable(init32, p, n) || got.crc16 != crc16_update_portable(init16, p, n)) {
                FAIL("mismatch at offset " << offset << " length " << n);
            }
        }
    }
    SUCCEED();
}

TEST_CASE("The fused CRC pass matches the bitwise reference on large unaligned buffers", "[packet][crc][fused]") {
    // 8207/8208 straddle the largest length whose starting registers are added
    // after the fold (larger buffers take them up front).
    const auto data = random_bytes(70000, 22);
    SplitMix64 seeds{23};
    for (std::size_t n : {1000u, 4095u, 4096u, 4097u, 4111u, 4138u, 4172u, 8176u, 8191u, 8192u, 8195u, 8207u, 8208u,
                          8209u, 8223u, 8224u, 9001u, 65543u}) {
        for (std::size_t offset : {0u, 1u, 3u, 7u, 13u}) {
            INFO("length " << n << " offset " << offset);
            const std::uint8_t* p = data.data() + offset;
            for (int k = 0; k < 2; ++k) {
                const std::uint32_t init32 = k == 0 ? 0xffffffffu : static_cast<std::uint32_t>(seeds.next());
                const std::uint16_t init16 = k == 0 ? 0xffff : static_cast<std::uint16_t>(seeds.next());
                const CrcRegisters got = crc32_crc16_update(init32, init16, p, n);
                CHECK(got.crc32 == ref_crc32(init32, p, n));
                CHECK(got.crc16 == ref_crc16(init16, p, n));
            }
        }
    }
}

TEST_CASE("The fused CRC pass computed in pieces equals the CRCs of the whole buffer", "[packet][crc][fused]") {
    const auto data = random_bytes(9000, 24);
    SplitMix64 r{25};
    for (int trial = 0; trial < 200; ++trial) {
        const std::size_t n = r.next() % data.size();
        CrcRegisters c{0xffffffffu, 0xffff};
        std::size_t pos = 0;
        while (pos < n) {
            const std::size_t step = std::min<std::size_t>(n - pos, r.next() % 3000);
            c = crc32_crc16_update(c.crc32, c.crc16, data.data() + pos, step);
            pos += step;
        }
        REQUIRE(c.crc32 == crc32_update(0xffffffffu, data.data(), n));
        REQUIRE(c.crc16 == crc16_update(0xffff, data.data(), n));
    }
}

// ===========================================================================
// Layout

TEST_CASE("opcode_layout gives the IBA extension headers for every hcasim opcode", "[packet][layout]") {
    struct Want {
        Opcode op;
        bool deth, reth, aeth, immdt, payload;
    };
    const Want table[] = {
        {Opcode::RcSendFirst, false, false, false, false, true},
        {Opcode::RcSendMiddle, false, false, false, false, true},
        {Opcode::RcSendLast, false, false, false, false, true},
        {Opcode::RcSendLastImm, false, false, false, true, true},
        {Opcode::RcSendOnly, false, false, false, false, true},
        {Opcode::RcSendOnlyImm, false, false, false, true, true},
        {Opcode::RcWriteFirst, false, true, false, false, true},
        {Opcode::RcWriteMiddle, false, false, false, false, true},
        {Opcode::RcWriteLast, false, false, false, false, true},
        {Opcode::RcWriteLastImm, false, false, false, true, true},
        {Opcode::RcWriteOnly, false, true, false, false, true},
        {Opcode::RcWriteOnlyImm, false, true, false, true, true},
        {Opcode::RcReadRequest, false, true, false, false, false},
        {Opcode::RcReadResponseFirst, false, false, true, false, true},
        {Opcode::RcReadResponseMiddle, false, false, false, false, true},
        {Opcode::RcReadResponseLast, false, false, true, false, true},
        {Opcode::RcReadResponseOnly, false, false, true, false, true},
        {Opcode::RcAcknowledge, false, false, true, false, false},
        {Opcode::RcAtomicAcknowledge, false, false, true, false, false},
        {Opcode::RcCompareSwap, false, false, false, false, false},
        {Opcode::RcFetchAdd, false, false, false, false, false},
        {Opcode::RcSendLastInv, false, false, false, false, true},
        {Opcode::RcSendOnlyInv, false, false, false, false, true},
        {Opcode::UdSendOnly, true, false, false, false, true},
        {Opcode::UdSendOnlyImm, true, false, false, true, true},
    };
    for (const auto& w : table) {
        INFO("opcode 0x" << std::hex << int(op(w.op)));
        const OpcodeLayout l = opcode_layout(op(w.op));
        CHECK(l.valid);
        CHECK(l.deth == w.deth);
        CHECK(l.reth == w.reth);
        CHECK(l.aeth == w.aeth);
        CHECK(l.immdt == w.immdt);
        CHECK(l.payload == w.payload);
    }
    int valid = 0;
    for (int o = 0; o < 256; ++o) valid += opcode_layout(static_cast<std::uint8_t>(o)).valid ? 1 : 0;
    // Every UC opcode mirrors the RC SEND or RDMA WRITE opcode with its low bits.
    for (std::uint8_t o = 0x20; o <= 0x2b; ++o) {
        INFO("opcode 0x" << std::hex << int(o));
        const OpcodeLayout uc = opcode_layout(o), rc = opcode_layout(o & 0x1f);
        CHECK(uc.valid);
        CHECK(uc.reth == rc.reth);
        CHECK(uc.immdt == rc.immdt);
        CHECK(uc.payload == rc.payload);
        CHECK_FALSE(uc.aeth);
    }
    // Every XRC opcode is the RC one with its transport bits; requests add
    // the XRCETH.
    for (std::uint8_t o = 0xa0; o <= 0xb7; ++o) {
        INFO("opcode 0x" << std::hex << int(o));
        const OpcodeLayout xrc = opcode_layout(o), rc = opcode_layout(o & 0x1f);
        CHECK(xrc.valid == rc.valid);
        CHECK(xrc.reth == rc.reth);
        CHECK(xrc.aeth == rc.aeth);
        CHECK(xrc.payload == rc.payload);
        CHECK(xrc.xrceth == (rc.valid && opcode_info(o).request));
    }
    CHECK(valid == static_cast<int>(std::size(table)) + 12 + 23);  // UC 12, XRC 23
    CHECK(opcode_layout(0x12).atomic_ack_eth);
    CHECK(opcode_layout(0x13).atomic_eth);
    CHECK(opcode_layout(0x14).atomic_eth);
    CHECK(opcode_layout(0x16).ieth);  // SEND with invalidate
    CHECK(opcode_layout(0x17).ieth);
    CHECK_FALSE(opcode_layout(0x36).valid);  // UC has no SEND with invalidate
    CHECK_FALSE(opcode_layout(0x15).valid);  // reserved
    CHECK_FALSE(opcode_layout(0x2c).valid);  // past UC's last opcode
    CHECK_FALSE(opcode_layout(0xff).valid);
}

TEST_CASE("wire_bytes adds headers, payload, pad, ICRC and VCRC", "[packet][layout]") {
    Headers h = sample_headers(Opcode::RcWriteFirst, false);
    CHECK(header_bytes(h) == 8 + 12 + 16);
    CHECK(wire_bytes(h, 4096) == 8 + 12 + 16 + 4096 + 4 + 2);
    CHECK(wire_bytes(h, 4095) == 8 + 12 + 16 + 4095 + 1 + 4 + 2);

    h = sample_headers(Opcode::UdSendOnlyImm, true);
    CHECK(header_bytes(h) == 8 + 40 + 12 + 8 + 4);
    CHECK(wire_bytes(h, 1) == 8 + 40 + 12 + 8 + 4 + 1 + 3 + 4 + 2);

    CHECK(wire_bytes(sample_headers(Opcode::RcAcknowledge, false), 0) == 8 + 12 + 4 + 4 + 2);
    CHECK(wire_bytes(sample_headers(Opcode::RcReadRequest, false), 0) == 8 + 12 + 16 + 4 + 2);
    CHECK(wire_bytes(sample_headers(Opcode::RcReadResponseMiddle, true), 256) == 8 + 40 + 12 + 256 + 4 + 2);
    CHECK(wire_bytes(sample_headers(Opcode::RcWriteOnlyImm, false), 3) == 8 + 12 + 16 + 4 + 3 + 1 + 4 + 2);
}

TEST_CASE("Only the headers the opcode calls for are written", "[packet][layout]") {
    Headers h = sample_headers(Opcode::RcSendOnly, false);
    h.reth = Reth{1, 2, 3};
    h.aeth = Aeth{0, 1};
    h.deth = Deth{1, 2};
    CHECK(header_bytes(h) == 8 + 12);
    const auto pkt = make_packet(h, {1, 2, 3, 4});
    Parsed p;
    REQUIRE(parse(pkt.data(), pkt.size(), p) == ParseError::None);
    CHECK_FALSE(p.h.reth.has_value());
    CHECK_FALSE(p.h.aeth.has_value());
    CHECK_FALSE(p.h.deth.has_value());
    CHECK(p.payload_offset == 20);
}

TEST_CASE("LRH PktLen counts 4-byte words from the LRH through the ICRC", "[packet][layout]") {
    // RC SEND ONLY, 1 payload byte: 8 + 12 + 1 + 3 pad + 4 = 28 bytes = 7 words.
    auto pkt = make_packet(sample_headers(Opcode::RcSendOnly, false), {0x42});
    CHECK(pkt.size() == 30);
    CHECK(((pkt[4] & 0x7) << 8 | pkt[5]) == 7);
    // The same with a GRH: 40 more bytes, 17 words.
    pkt = make_packet(sample_headers(Opcode::RcSendOnly, true), {0x42});
    CHECK(((pkt[4] & 0x7) << 8 | pkt[5]) == 17);
    // RC WRITE FIRST with 4096 bytes: (8 + 12 + 16 + 4096 + 4) / 4 = 1034.
    pkt = make_packet(sample_headers(Opcode::RcWriteFirst, false), std::vector<std::uint8_t>(4096, 7));
    CHECK(((pkt[4] & 0x7) << 8 | pkt[5]) == 1034);
    Parsed p;
    REQUIRE(parse(pkt.data(), pkt.size(), p) == ParseError::None);
    CHECK(p.h.lrh.pkt_len == 1034);
}

TEST_CASE("Headers are laid out big-endian at the IBA offsets", "[packet][layout]") {
    SECTION("LRH, BTH and RETH of a local RC WRITE FIRST") {
        const auto pkt = make_packet(sample_headers(Opcode::RcWriteFirst, false), {1, 2, 3, 4, 5});
        const std::vector<std::uint8_t> want = {
            0xa0, 0x52, 0xbe, 0xef, 0x00, 0x0c, 0x12, 0x34,                          // LRH: VL|LVer, SL|LNH, DLID, PktLen, SLID
            0x06, 0xf0, 0x80, 0x01, 0x00, 0xab, 0xcd, 0xef, 0x80, 0xfe, 0xdc, 0xba,  // BTH: SE|M|Pad=3|TVer
            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,                          // RETH VA
            0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x10, 0x00,                          // R_Key, DMALen
            0x01, 0x02, 0x03, 0x04, 0x05, 0x00, 0x00, 0x00,                          // payload, pad
        };
        REQUIRE(pkt.size() == want.size() + 6);
        CHECK(std::vector<std::uint8_t>(pkt.begin(), pkt.begin() + want.size()) == want);
        CHECK(stored_icrc(pkt) == icrc(pkt.data(), pkt.size() - 6));
        CHECK(stored_vcrc(pkt) == vcrc(pkt.data(), pkt.size() - 2));
    }
    SECTION("GRH and DETH of a global UD SEND ONLY with immediate") {
        const auto pkt = make_packet(sample_headers(Opcode::UdSendOnlyImm, true), {});
        REQUIRE(pkt.size() == 8 + 40 + 12 + 8 + 4 + 6);
        CHECK(pkt[1] == 0x53);  // SL 5, LNH 3
        const std::vector<std::uint8_t> grh_word01 = {0x6a, 0x5a, 0xbc, 0xde, 0x00, 0x1c, 0x1b, 0x3f};
        CHECK(std::vector<std::uint8_t>(pkt.begin() + 8, pkt.begin() + 16) == grh_word01);  // PayLen 28
        CHECK(pkt[16] == 0x10);
        CHECK(pkt[31] == 0x1f);
        CHECK(pkt[32] == 0xf0);
        CHECK(pkt[47] == 0xe1);
        CHECK(pkt[48] == 0x65);
        CHECK(pkt[49] == 0xc0);  // SE|M, pad 0
        const std::vector<std::uint8_t> deth_imm = {0x80, 0x01, 0x00, 0x02, 0x00, 0x12, 0x34, 0x56,
                                                    0xca, 0xfe, 0xf0, 0x0d};
        CHECK(std::vector<std::uint8_t>(pkt.begin() + 60, pkt.begin() + 72) == deth_imm);
    }
    SECTION("IETH of a SEND ONLY with invalidate, after the BTH and before the payload") {
        const auto pkt = make_packet(sample_headers(Opcode::RcSendOnlyInv, false), {9, 8, 7, 6});
        REQUIRE(pkt.size() == 8 + 12 + 4 + 4 + 6);
        const std::vector<std::uint8_t> ieth_payload = {0x00, 0xa1, 0xb2, 0xc3, 9, 8, 7, 6};
        CHECK(std::vector<std::uint8_t>(pkt.begin() + 20, pkt.begin() + 28) == ieth_payload);
    }
    SECTION("AETH of an acknowledge") {
        const auto pkt = make_packet(sample_headers(Opcode::RcAcknowledge, false), {});
        const std::vector<std::uint8_t> aeth = {0x62, 0x65, 0x43, 0x21};
        CHECK(std::vector<std::uint8_t>(pkt.begin() + 20, pkt.begin() + 24) == aeth);
    }
}

TEST_CASE("write_headers fills PktLen, PayLen, PadCnt and LNH itself", "[packet][layout]") {
    Headers h = sample_headers(Opcode::RcSendFirst, true);
    h.lrh.lnh = 2;  // contradicts the GRH
    h.lrh.pkt_len = 1;
    h.grh->pay_len = 2;
    h.bth.pad_cnt = 3;
    const auto pkt = make_packet(h, std::vector<std::uint8_t>(6, 9));
    Parsed p;
    REQUIRE(parse(pkt.data(), pkt.size(), p) == ParseError::None);
    CHECK(p.h.lrh.lnh == 3);
    CHECK(p.h.lrh.pkt_len == (pkt.size() - 2) / 4);
    CHECK(p.h.grh->pay_len == pkt.size() - 8 - 40 - 2);
    CHECK(p.h.bth.pad_cnt == 2);
}

TEST_CASE("seal zeroes the pad bytes before computing the CRCs", "[packet][layout]") {
    const Headers h = sample_headers(Opcode::RcSendOnly, false);
    std::vector<std::uint8_t> buf(wire_bytes(h, 5), 0xee);
    const std::size_t hdr = write_headers(h, 5, buf.data());
    REQUIRE(hdr == header_bytes(h));
    std::memset(buf.data() + hdr, 0x11, 5);
    seal(buf.data(), buf.size());
    CHECK(buf[hdr + 5] == 0);
    CHECK(buf[hdr + 6] == 0);
    CHECK(buf[hdr + 7] == 0);
    CHECK(parse_vec(buf) == ParseError::None);
}

// ===========================================================================
// Round trip

TEST_CASE("Every opcode round-trips through build and parse with and without a GRH", "[packet][roundtrip]") {
    const std::size_t sizes[] = {0, 1, 3, 4, 255, 256, 4096};
    for (Opcode o : kAllOpcodes) {
        for (bool grh : {false, true}) {
            for (std::size_t len : sizes) {
                const OpcodeLayout layout = opcode_layout(op(o));
                if (!layout.payload && len != 0) continue;
                INFO("opcode 0x" << std::hex << int(op(o)) << std::dec << " grh " << grh << " payload " << len);
                const Headers h = sample_headers(o, grh);
                const auto payload = random_bytes(len, 1000 + len + op(o));
                const auto pkt = make_packet(h, payload);
                const std::size_t pad = (4 - len % 4) % 4;
                REQUIRE(pkt.size() == header_bytes(h) + len + pad + 6);

                Parsed p;
                REQUIRE(parse(pkt.data(), pkt.size(), p) == ParseError::None);
                Headers want = h;
                want.lrh.lnh = grh ? 3 : 2;
                want.lrh.pkt_len = static_cast<std::uint16_t>((pkt.size() - 2) / 4);
                if (grh) want.grh->pay_len = static_cast<std::uint16_t>(pkt.size() - 8 - 40 - 2);
                want.bth.pad_cnt = static_cast<std::uint8_t>(pad);
                check_same_headers(want, p.h);
                CHECK(p.payload_offset == header_bytes(h));
                REQUIRE(p.payload_len == len);
                CHECK(std::equal(payload.begin(), payload.end(), pkt.begin() + p.payload_offset));
                for (std::size_t i = 0; i < pad; ++i) CHECK(pkt[p.payload_offset + len + i] == 0);
            }
        }
    }
}

TEST_CASE("Pad count is the number of bytes to the next 4-byte boundary", "[packet][roundtrip]") {
    const std::pair<std::size_t, int> cases[] = {{0, 0}, {1, 3}, {2, 2}, {3, 1}, {4, 0}, {255, 1}, {256, 0}, {4096, 0}};
    for (const auto& [len, pad] : cases) {
        const auto pkt = make_packet(sample_headers(Opcode::RcSendMiddle, false), std::vector<std::uint8_t>(len, 1));
        CHECK(((pkt[9] >> 4) & 3) == pad);
    }
}

// ===========================================================================
// CRC coverage

TEST_CASE("Changing VL leaves the ICRC unchanged but changes the VCRC", "[packet][icrc]") {
    for (bool grh : {false, true}) {
        auto pkt = make_packet(sample_headers(Opcode::RcSendOnly, grh), random_bytes(100, 6));
        const std::uint32_t icrc_before = stored_icrc(pkt);
        const std::uint16_t vcrc_before = stored_vcrc(pkt);
        pkt[0] ^= 0x10;  // lowest VL bit
        restamp_crcs(pkt);
        CHECK(stored_icrc(pkt) == icrc_before);
        CHECK(stored_vcrc(pkt) != vcrc_before);
        Parsed p;
        REQUIRE(parse(pkt.data(), pkt.size(), p) == ParseError::None);
        CHECK(p.h.lrh.vl == 0xb);
    }
}

TEST_CASE("A switch may rewrite VL and recompute only the VCRC", "[packet][icrc]") {
    auto pkt = make_packet(sample_headers(Opcode::RcWriteOnly, false), random_bytes(4096, 7));
    pkt[0] = static_cast<std::uint8_t>((pkt[0] & 0x0f) | 0x30);
    restamp_vcrc(pkt);
    Parsed p;
    REQUIRE(parse(pkt.data(), pkt.size(), p) == ParseError::None);
    CHECK(p.h.lrh.vl == 3);
}

TEST_CASE("The ICRC skips exactly the variant fields", "[packet][icrc]") {
    SECTION("local packet: only VL and BTH resv8a are variant") {
        const auto base = make_packet(sample_headers(Opcode::RcSendOnly, false), random_bytes(40, 8));
        const std::size_t at = base.size() - 6;
        const std::uint32_t ref = icrc(base.data(), at);
        for (std::size_t byte = 0; byte < at; ++byte) {
            for (int bit = 0; bit < 8; ++bit) {
                auto pkt = base;
                pkt[byte] ^= static_cast<std::uint8_t>(1u << bit);
                const bool variant = (byte == 0 && bit >= 4) || byte == 8 + 4;
                INFO("byte " << byte << " bit " << bit);
                CHECK((icrc(pkt.data(), at) == ref) == variant);
            }
        }
    }
    SECTION("global packet: the LRH, TClass, FlowLabel, HopLmt and BTH resv8a are variant") {
        const auto base = make_packet(sample_headers(Opcode::UdSendOnly, true), random_bytes(40, 9));
        const std::size_t at = base.size() - 6;
        const std::uint32_t ref = icrc(base.data(), at);
        for (std::size_t byte = 0; byte < at; ++byte) {
            for (int bit = 0; bit < 8; ++bit) {
                // LNH must stay 3 for the packet to remain global.
                if (byte == 1 && bit < 2) continue;
                auto pkt = base;
                pkt[byte] ^= static_cast<std::uint8_t>(1u << bit);
                const bool variant = byte < 8 || (byte == 8 && bit < 4) || (byte >= 9 && byte <= 11) ||
                                     byte == 15 || byte == 48 + 4;
                INFO("byte " << byte << " bit " << bit);
                CHECK((icrc(pkt.data(), at) == ref) == variant);
            }
        }
    }
}

TEST_CASE("Every single-bit flip in a packet is detected", "[packet][icrc]") {
    const std::vector<std::uint8_t> small =
        make_packet(sample_headers(Opcode::UdSendOnlyImm, true), random_bytes(5, 10));
    const std::vector<std::uint8_t> large =
        make_packet(sample_headers(Opcode::RcWriteFirst, false), random_bytes(4096, 11));
    for (const auto* base : {&small, &large}) {
        REQUIRE(parse_vec(*base) == ParseError::None);
        auto pkt = *base;
        for (std::size_t byte = 0; byte < pkt.size(); ++byte) {
            for (int bit = 0; bit < 8; ++bit) {
                pkt[byte] ^= static_cast<std::uint8_t>(1u << bit);
                if (parse_vec(pkt) == ParseError::None) FAIL("undetected flip at byte " << byte << " bit " << bit);
                pkt[byte] ^= static_cast<std::uint8_t>(1u << bit);
            }
        }
    }
    SUCCEED();
}

TEST_CASE("seal stores exactly icrc() and vcrc() and parse accepts it, for every length and odd alignments",
          "[packet][icrc][fused]") {
    // icrc() masks a copy of the headers; seal() and parse() fold the masking
    // into the CRC-32's starting register and share one pass with the VCRC.
    std::vector<std::size_t> lengths;
    for (std::size_t n = 0; n <= 300; ++n) lengths.push_back(n);
    for (std::size_t n : {1000u, 1001u, 4093u, 4094u, 4095u, 4096u}) lengths.push_back(n);
    SplitMix64 r{30};
    for (bool grh : {false, true}) {
        for (std::size_t len : lengths) {
            for (std::size_t offset : {1u, 3u, 6u}) {
                INFO("grh " << grh << " payload " << len << " offset " << offset);
                Headers h = sample_headers(len % 3 == 0 ? Opcode::RcWriteOnly : Opcode::UdSendOnly, grh);
                h.lrh.vl = static_cast<std::uint8_t>(r.next() & 0xf);
                if (grh) {
                    h.grh->tclass = static_cast<std::uint8_t>(r.next());
                    h.grh->flow_label = static_cast<std::uint32_t>(r.next() & 0xfffff);
                    h.grh->hop_limit = static_cast<std::uint8_t>(r.next());
                }
                const std::size_t total = wire_bytes(h, len);
                std::vector<std::uint8_t> storage(total + offset, 0xcc);
                std::uint8_t* buf = storage.data() + offset;
                const std::size_t hdr = write_headers(h, len, buf);
                buf[(grh ? 48 : 8) + 4] = static_cast<std::uint8_t>(r.next());  // BTH resv8a, also masked
                for (std::size_t i = 0; i < len; ++i) buf[hdr + i] = r.byte();
                seal(buf, total);

                const std::size_t at = total - 6;
                const std::uint32_t stored_ic = std::uint32_t{buf[at]} | std::uint32_t{buf[at + 1]} << 8 |
                                                std::uint32_t{buf[at + 2]} << 16 | std::uint32_t{buf[at + 3]} << 24;
                const auto stored_vc = static_cast<std::uint16_t>(buf[at + 4] | buf[at + 5] << 8);
                REQUIRE(stored_ic == icrc(buf, at));
                REQUIRE(stored_vc == vcrc(buf, at + 4));

                Parsed p;
                REQUIRE(parse(buf, total, p) == ParseError::None);
                CHECK(p.payload_len == len);
                // One flipped bit in the body: a VCRC error; with the VCRC
                // restamped by vcrc(), an ICRC error.
                if (len != 0) {
                    const std::size_t flip = hdr + r.next() % len;
                    buf[flip] ^= 0x04;
                    CHECK(parse(buf, total, p) == ParseError::BadVcrc);
                    const std::uint16_t vc = vcrc(buf, at + 4);
                    buf[at + 4] = static_cast<std::uint8_t>(vc);
                    buf[at + 5] = static_cast<std::uint8_t>(vc >> 8);
                    CHECK(parse(buf, total, p) == ParseError::BadIcrc);
                }
            }
        }
    }
}

TEST_CASE("seal and parse agree with icrc() for every value of every header byte", "[packet][icrc][fused]") {
    // Exercises the ICRC's masking at each variant offset, for a short packet
    // (two separate CRC passes) and a long one (the fused pass).
    for (bool grh : {false, true}) {
        for (std::size_t len : {5u, 300u}) {
            const auto base = make_packet(sample_headers(Opcode::RcSendOnly, grh), random_bytes(len, 31 + len));
            const std::size_t at = base.size() - 6;
            const std::size_t headers = (grh ? 48 : 8) + 12;
            for (std::size_t byte = 0; byte < headers; ++byte) {
                for (unsigned v = 0; v < 256; ++v) {
                    auto pkt = base;
                    pkt[byte] = static_cast<std::uint8_t>(v);
                    if (byte == 0) pkt[0] &= 0xf0;                                                  // LVer 0
                    if (byte == 1) pkt[1] = static_cast<std::uint8_t>((pkt[1] & 0xfc) | (base[1] & 3));  // keep LNH
                    seal(pkt.data(), pkt.size());
                    if (stored_icrc(pkt) != icrc(pkt.data(), at) || stored_vcrc(pkt) != vcrc(pkt.data(), at + 4)) {
                        FAIL("grh " << grh << " payload " << len << " byte " << byte << " value " << v);
                    }
                    auto restamped = pkt;
                    restamp_crcs(restamped);
                    if (restamped != pkt) FAIL("restamp differs at byte " << byte << " value " << v);
                    const ParseError e = parse_vec(pkt);
                    if (e == ParseError::BadVcrc || e == ParseError::BadIcrc) {
                        FAIL("parse rejects a sealed packet: byte " << byte << " value " << v);
                    }
                }
            }
        }
    }
    SUCCEED();
}

// ===========================================================================
// Parse errors

TEST_CASE("parse reports each malformation with its own error", "[packet][parse]") {
    const auto good = make_packet(sample_headers(Opcode::RcSendOnly, false), random_bytes(64, 12));
    REQUIRE(parse_vec(good) == ParseError::None);

    SECTION("Truncated: shorter than an LRH") {
        Parsed p;
        for (std::size_t n = 0; n < 8; ++n) CHECK(parse_exact(good.data(), n, p) == ParseError::Truncated);
        CHECK(parse(nullptr, 0, p) == ParseError::Truncated);
    }
    SECTION("Truncated: shorter than LRH, BTH and the CRCs") {
        Parsed p;
        for (std::size_t n = 8; n < 26; ++n) CHECK(parse_exact(good.data(), n, p) == ParseError::Truncated);
        const auto global = make_packet(sample_headers(Opcode::RcSendOnly, true), {});
        for (std::size_t n = 8; n < 66; ++n) CHECK(parse_exact(global.data(), n, p) == ParseError::Truncated);
    }
    SECTION("Truncated: the opcode announces an extension header that is missing") {
        // A 12-byte WRITE MIDDLE relabelled WRITE FIRST: too short for its RETH.
        auto pkt = make_packet(sample_headers(Opcode::RcWriteMiddle, false), std::vector<std::uint8_t>(12, 3));
        pkt[8] = op(Opcode::RcWriteFirst);
        restamp_crcs(pkt);
        CHECK(parse_vec(pkt) == ParseError::Truncated);
    }
    SECTION("BadLinkVersion") {
        Headers h = sample_headers(Opcode::RcSendOnly, false);
        h.lrh.lver = 1;
        CHECK(parse_vec(make_packet(h, {1, 2})) == ParseError::BadLinkVersion);
    }
    SECTION("BadNextHeader: raw LNH values") {
        for (std::uint8_t lnh : {0, 1}) {
            auto pkt = good;
            pkt[1] = static_cast<std::uint8_t>((pkt[1] & ~3u) | lnh);
            restamp_crcs(pkt);
            CHECK(parse_vec(pkt) == ParseError::BadNextHeader);
        }
    }
    SECTION("BadNextHeader: GRH NxtHdr is not IBA transport") {
        Headers h = sample_headers(Opcode::RcSendOnly, true);
        h.grh->next_hdr = 0x11;
        CHECK(parse_vec(make_packet(h, {1})) == ParseError::BadNextHeader);
    }
    SECTION("BadLength: PktLen disagrees with the byte count") {
        for (int delta : {-1, 1, 100}) {
            auto pkt = good;
            set_pkt_len_words(pkt, static_cast<std::uint16_t>((pkt.size() - 2) / 4 + delta));
            restamp_crcs(pkt);
            CHECK(parse_vec(pkt) == ParseError::BadLength);
        }
        auto longer = good;
        longer.push_back(0);
        CHECK(parse_vec(longer) == ParseError::BadLength);
        auto shorter = good;
        shorter.pop_back();
        CHECK(parse_vec(shorter) == ParseError::BadLength);
    }
    SECTION("BadLength: GRH PayLen disagrees with the byte count") {
        auto pkt = make_packet(sample_headers(Opcode::RcSendOnly, true), {1, 2, 3, 4});
        pkt[8 + 5] ^= 0x04;
        restamp_crcs(pkt);
        CHECK(parse_vec(pkt) == ParseError::BadLength);
    }
    SECTION("BadLength: payload bytes on an opcode that carries none") {
        // An ACK grown by 4 bytes, with PktLen and CRCs made consistent.
        auto pkt = make_packet(sample_headers(Opcode::RcAcknowledge, false), {});
        pkt.insert(pkt.begin() + 24, {0, 0, 0, 0});
        set_pkt_len_words(pkt, static_cast<std::uint16_t>((pkt.size() - 2) / 4));
        restamp_crcs(pkt);
        CHECK(parse_vec(pkt) == ParseError::BadLength);
    }
    SECTION("BadVcrc") {
        auto pkt = good;
        pkt[30] ^= 0x01;
        CHECK(parse_vec(pkt) == ParseError::BadVcrc);
        pkt = good;
        pkt.back() ^= 0x80;
        CHECK(parse_vec(pkt) == ParseError::BadVcrc);
    }
    SECTION("BadIcrc: payload corrupted and the VCRC recomputed after it") {
        auto pkt = good;
        pkt[30] ^= 0x01;
        restamp_vcrc(pkt);
        CHECK(parse_vec(pkt) == ParseError::BadIcrc);
    }
    SECTION("BadTransportVersion") {
        Headers h = sample_headers(Opcode::RcSendOnly, false);
        h.bth.tver = 1;
        CHECK(parse_vec(make_packet(h, {1, 2, 3})) == ParseError::BadTransportVersion);
    }
    SECTION("BadOpcode") {
        for (std::uint8_t bad : {0x15, 0x1f, 0x2c, 0x66, 0xff}) {
            Headers h = sample_headers(Opcode::RcSendOnly, false);
            h.bth.opcode = bad;
            CHECK(parse_vec(make_packet(h, {1, 2, 3, 4})) == ParseError::BadOpcode);
        }
    }
    SECTION("BadPad: pad count on an opcode without payload") {
        for (Opcode o : {Opcode::RcAcknowledge, Opcode::RcReadRequest}) {
            auto pkt = make_packet(sample_headers(o, false), {});
            pkt[9] = static_cast<std::uint8_t>(pkt[9] | 0x20);
            restamp_crcs(pkt);
            CHECK(parse_vec(pkt) == ParseError::BadPad);
        }
    }
    SECTION("BadPad: more pad than bytes after the headers") {
        auto pkt = make_packet(sample_headers(Opcode::RcSendOnly, false), {});
        pkt[9] = static_cast<std::uint8_t>(pkt[9] | 0x30);
        restamp_crcs(pkt);
        CHECK(parse_vec(pkt) == ParseError::BadPad);
    }
}

TEST_CASE("Every ParseError has a distinct name", "[packet][parse]") {
    std::set<std::string> names;
    for (ParseError e : {ParseError::None, ParseError::Truncated, ParseError::BadLinkVersion, ParseError::BadNextHeader,
                         ParseError::BadLength, ParseError::BadVcrc, ParseError::BadIcrc,
                         ParseError::BadTransportVersion, ParseError::BadOpcode, ParseError::BadPad}) {
        names.insert(to_string(e));
    }
    CHECK(names.size() == 10);
}

TEST_CASE("parse rejects every prefix of a packet without reading past it", "[packet][parse]") {
    for (bool grh : {false, true}) {
        const auto pkt = make_packet(sample_headers(Opcode::RcWriteOnlyImm, grh), random_bytes(77, 13));
        Parsed p;
        for (std::size_t n = 0; n < pkt.size(); ++n) CHECK(parse_exact(pkt.data(), n, p) != ParseError::None);
        CHECK(parse_exact(pkt.data(), pkt.size(), p) == ParseError::None);
    }
}

TEST_CASE("parse survives random input, including input with valid CRCs", "[packet][parse]") {
    SplitMix64 r{14};
    Parsed p;
    for (int trial = 0; trial < 3000; ++trial) {
        auto junk = random_bytes(r.next() % 200, r.next());
        (void)parse_exact(junk.data(), junk.size(), p);
    }
    // Structurally plausible packets get past the link checks and exercise the
    // transport-level checks; any packet accepted must be self-consistent.
    int accepted = 0;
    for (int trial = 0; trial < 20000; ++trial) {
        const std::size_t words = 6 + r.next() % 40;
        auto pkt = random_bytes(words * 4 + 2, r.next());
        pkt[0] &= 0xf0;
        pkt[1] = static_cast<std::uint8_t>((pkt[1] & 0xfc) | ((r.next() & 1) ? 3 : 2));
        set_pkt_len_words(pkt, static_cast<std::uint16_t>(words));
        const bool global = (pkt[1] & 3) == 3;
        if (global && pkt.size() >= 16) {
            pkt[8 + 6] = 0x1b;
            const std::size_t pay = pkt.size() - 8 - 40 - 2;
            pkt[8 + 4] = static_cast<std::uint8_t>(pay >> 8);
            pkt[8 + 5] = static_cast<std::uint8_t>(pay);
        }
        const std::size_t bth = global ? 48 : 8;
        if (bth + 12 <= pkt.size()) {
            pkt[bth] = op(kAllOpcodes[r.next() % kAllOpcodes.size()]);
            if (r.next() % 4 != 0) pkt[bth + 1] &= 0xf0;  // mostly TVer 0
        }
        restamp_crcs(pkt);
        const ParseError e = parse_exact(pkt.data(), pkt.size(), p);
        if (e == ParseError::None) {
            ++accepted;
            REQUIRE(p.payload_offset + p.payload_len + p.h.bth.pad_cnt + 6 == pkt.size());
            REQUIRE(p.payload_offset == header_bytes(p.h));
        }
    }
    CHECK(accepted > 1000);
}
