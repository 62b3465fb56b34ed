// The two IBA link CRCs (IBA vol. 1, 7.8.1 and 7.8.2), both in the reflected
// (LSB-first) form that matches the serial bit order on the link:
//
//   ICRC  CRC-32, polynomial 0x04C11DB7 (reflected 0xEDB88320), init
//         0xffffffff, final xor 0xffffffff: the Ethernet FCS CRC.
//   VCRC  CRC-16, polynomial 0x100B = x^16 + x^12 + x^3 + x + 1 (reflected
//         0xD008), init 0xffff, final xor 0xffff, input and output reflected.
//
// crc32_update / crc16_update take and return the raw register (no final
// xor), so a CRC can be computed over several pieces.
//
// Every packet is sealed and checked with both CRCs at up to 4 KiB each, so
// the engines fold 64 bytes at a time with carry-less multiplication
// (PCLMULQDQ) where the CPU has it, and otherwise fall back to slicing-by-8
// tables. crc32_crc16_update() computes both CRCs in one pass by folding
// modulo the product of the two polynomials (see there). All constants and
// tables are derived at compile time from the polynomials, so there are no
// hand-copied magic numbers to get wrong.
#include "model/packet/ib_packet.hpp"

#include <array>
#include <cstring>

// HCASIM_CRC_NO_CLMUL builds the table engine only (e.g. to test it alone).
#if (defined(__x86_64__) || defined(__i386__)) && !defined(HCASIM_CRC_NO_CLMUL)
#define HCASIM_CRC_HAVE_CLMUL 1
#include <immintrin.h>
#else
#define HCASIM_CRC_HAVE_CLMUL 0
#endif

namespace hcasim::packet {
namespace {

// ---------------------------------------------------------------------------
// Compile-time polynomial arithmetic over GF(2).

constexpr std::uint64_t reflect(std::uint64_t v, unsigned bits) {
    std::uint64_t r = 0;
    for (unsigned i = 0; i < bits; ++i) {
        if ((v >> i) & 1u) r |= std::uint64_t{1} << (bits - 1 - i);
    }
    return r;
}

// v * x^n mod P, P of degree `width` given without its leading term (normal,
// MSB-first form), v of degree < width. The result has degree < width.
constexpr std::uint64_t mulxpow_mod(std::uint64_t v, unsigned n, std::uint64_t poly, unsigned width) {
    const std::uint64_t top = std::uint64_t{1} << (width - 1);
    const std::uint64_t mask = (top << 1) - 1;
    for (unsigned i = 0; i < n; ++i) {
        const bool carry = (v & top) != 0;
        v = (v << 1) & mask;
        if (carry) v ^= poly;
    }
    return v;
}

// x^n mod P.
constexpr std::uint64_t xpow_mod(unsigned n, std::uint64_t poly, unsigned width) {
    return mulxpow_mod(1, n, poly, width);
}

// ---------------------------------------------------------------------------
// Slicing-by-8 tables for a reflected CRC of up to 32 bits. t[k][b] is the
// register change caused by byte b followed by k zero bytes.

template <typename Reg>
using Tables = std::array<std::array<Reg, 256>, 8>;

template <typename Reg>
constexpr Tables<Reg> make_tables(Reg reflected_poly) {
    Tables<Reg> t{};
    for (unsigned b = 0; b < 256; ++b) {
        Reg c = static_cast<Reg>(b);
        for (int k = 0; k < 8; ++k) c = static_cast<Reg>((c & 1u) ? (c >> 1) ^ reflected_poly : (c >> 1));
        t[0][b] = c;
    }
    for (unsigned k = 1; k < 8; ++k) {
        for (unsigned b = 0; b < 256; ++b) {
            const Reg prev = t[k - 1][b];
            t[k][b] = static_cast<Reg>((prev >> 8) ^ t[0][prev & 0xffu]);
        }
    }
    return t;
}

constexpr std::uint64_t kPoly32 = 0x04C11DB7;  // x^32 term implied
constexpr std::uint64_t kPoly16 = 0x100B;      // x^16 term implied

// Carry-less product of two polynomials whose product has degree < 64.
constexpr std::uint64_t clmul_small(std::uint64_t a, std::uint64_t b) {
    std::uint64_t r = 0;
    for (unsigned i = 0; i < 64; ++i) {
        if ((b >> i) & 1u) r ^= a << i;
    }
    return r;
}

// P32 * P16, x^48 term implied. The two polynomials are coprime (P16 is
// irreducible and does not divide P32), which the fused engine relies on.
constexpr std::uint64_t kPoly48 =
    clmul_small((std::uint64_t{1} << 32) | kPoly32, (std::uint64_t{1} << 16) | kPoly16) & ((std::uint64_t{1} << 48) - 1);

constexpr Tables<std::uint32_t> kT32 = make_tables<std::uint32_t>(static_cast<std::uint32_t>(reflect(kPoly32, 32)));
constexpr Tables<std::uint16_t> kT16 = make_tables<std::uint16_t>(static_cast<std::uint16_t>(reflect(kPoly16, 16)));
static_assert(kT32[0][1] == 0x77073096u, "CRC-32 table does not match the Ethernet CRC");

inline std::uint32_t load_le32(const std::uint8_t* p) {
    return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
}

std::uint32_t crc32_tables(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
    const auto& t = kT32;
    for (; n >= 8; n -= 8, p += 8) {
        const std::uint32_t a = crc ^ load_le32(p);
        crc = t[7][a & 0xff] ^ t[6][(a >> 8) & 0xff] ^ t[5][(a >> 16) & 0xff] ^ t[4][a >> 24] ^ t[3][p[4]] ^
              t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    }
    // Header and CRC fields leave 4-byte remainders; one step beats four.
    if (n >= 4) {
        const std::uint32_t a = crc ^ load_le32(p);
        crc = t[3][a & 0xff] ^ t[2][(a >> 8) & 0xff] ^ t[1][(a >> 16) & 0xff] ^ t[0][a >> 24];
        n -= 4;
        p += 4;
    }
    for (; n > 0; --n) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
    return crc;
}

std::uint16_t crc16_tables(std::uint16_t crc, const std::uint8_t* p, std::size_t n) {
    const auto& t = kT16;
    for (; n >= 8; n -= 8, p += 8) {
        const unsigned a = crc ^ (unsigned{p[0]} | unsigned{p[1]} << 8);
        crc = static_cast<std::uint16_t>(t[7][a & 0xff] ^ t[6][a >> 8] ^ t[5][p[2]] ^ t[4][p[3]] ^ t[3][p[4]] ^
                                         t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]);
    }
    if (n >= 4) {
        const unsigned a = crc ^ (unsigned{p[0]} | unsigned{p[1]} << 8);
        crc = static_cast<std::uint16_t>(t[3][a & 0xff] ^ t[2][a >> 8] ^ t[1][p[2]] ^ t[0][p[3]]);
        n -= 4;
        p += 4;
    }
    for (; n > 0; --n) crc = static_cast<std::uint16_t>((crc >> 8) ^ t[0][(crc ^ *p++) & 0xff]);
    return crc;
}

// ---------------------------------------------------------------------------
// Carry-less folding.
//
// A 16-byte block loaded little-endian into a 128-bit register holds, in the
// reflected convention, the coefficient of x^(127-i) in bit i. Multiplying a
// 64-bit half (bit i ~ x^(63-i)) by a constant K laid out with bit j ~
// x^(32-j) (a 33-bit reflection) gives a product whose register reading is
// the true product times x^32. Folding a block forward by D bits, i.e.
// replacing X = H*x^64 + L by something congruent to X*x^D mod P that still
// fits in 128 bits, therefore needs
//     K_H = reflect33(x^(D+32) mod P)   for the high-degree half H (low qword)
//     K_L = reflect33(x^(D-32) mod P)   for the low-degree half L (high qword).
// This works for any CRC of width <= 32, so CRC-32 and CRC-16 share the code.
// After folding, the remaining 128-bit value is congruent to the message, and
// running the table CRC over its 16 bytes from a zero register yields exactly
// the CRC register; the last partial block goes through the tables as well.
//
// The same holds for a modulus of degree 48 if K is laid out as a 49-bit
// reflection (bit j ~ x^(48-j)): then K_H = x^(D+48), K_L = x^(D-16). Folding
// modulo P48 = P32 * P16 leaves a value congruent to the message modulo both
// P32 and P16, so one fold serves both CRCs at the cost of one.

struct FoldConstants {
    std::uint64_t k512_hi, k512_lo;  // fold by 4 blocks (512 bits)
    std::uint64_t k128_hi, k128_lo;  // fold by 1 block (128 bits)
};

constexpr FoldConstants make_fold_constants(std::uint64_t poly, unsigned width) {
    const unsigned w = width < 32 ? 32 : width;  // K layout: bit j ~ x^(w-j)
    return FoldConstants{
        reflect(xpow_mod(512 + w, poly, width), w + 1),
        reflect(xpow_mod(512 + w - 64, poly, width), w + 1),
        reflect(xpow_mod(128 + w, poly, width), w + 1),
        reflect(xpow_mod(128 + w - 64, poly, width), w + 1),
    };
}

constexpr FoldConstants kFold32 = make_fold_constants(kPoly32, 32);
constexpr FoldConstants kFold16 = make_fold_constants(kPoly16, 16);
constexpr FoldConstants kFold48 = make_fold_constants(kPoly48, 48);

// ---------------------------------------------------------------------------
// Starting registers for the fused fold.
//
// A single folded message cannot carry two different starting registers the
// usual way (xored into its first bytes). Instead, 6 bytes e are xored into
// the front of the message, chosen so that, from zero registers, e alone
// leaves each CRC in the state its own starting register would have reached
// after 6 zero bytes:
//     crc32(0, e) = crc32(r32, 0^6)   and   crc16(0, e) = crc16(r16, 0^6).
// From there both CRCs evolve identically over the rest of the message, so the
// fold of (message ^ e) from zero gives crc32(r32, message) and
// crc16(r16, message). e exists and is unique because the map from e to the
// pair of registers is linear on 48 bits and, the polynomials being coprime,
// invertible (Chinese remainder theorem). It is tabulated per nibble of r32
// and r16.

constexpr unsigned kPrefixBytes = 6;

constexpr std::uint64_t crc_bits(std::uint64_t reg, std::uint64_t bytes_le, unsigned n, std::uint64_t reflected_poly) {
    for (unsigned i = 0; i < n; ++i) {
        reg ^= (bytes_le >> (8 * i)) & 0xffu;
        for (int k = 0; k < 8; ++k) reg = (reg & 1u) ? (reg >> 1) ^ reflected_poly : (reg >> 1);
    }
    return reg;
}

constexpr std::uint64_t kRefl32 = reflect(kPoly32, 32);
constexpr std::uint64_t kRefl16 = reflect(kPoly16, 16);

// The pair of registers (crc32 in bits 0-31, crc16 in bits 32-47) that the
// 6 bytes e produce from zero registers.
constexpr std::uint64_t prefix_image(std::uint64_t e) {
    return crc_bits(0, e, kPrefixBytes, kRefl32) | crc_bits(0, e, kPrefixBytes, kRefl16) << 32;
}

struct PrefixSolver {
    // Row b has its highest set image bit at b; img is the image of pre.
    std::uint64_t img[48] = {};
    std::uint64_t pre[48] = {};
    bool invertible = true;
};

constexpr unsigned top_bit(std::uint64_t v) {
    unsigned b = 0;
    while (v >>= 1) ++b;
    return b;
}

constexpr PrefixSolver make_prefix_solver() {
    PrefixSolver s{};
    for (unsigned i = 0; i < 48; ++i) {
        std::uint64_t img = prefix_image(std::uint64_t{1} << i);
        std::uint64_t pre = std::uint64_t{1} << i;
        while (img != 0 && s.img[top_bit(img)] != 0) {
            const unsigned b = top_bit(img);
            img ^= s.img[b];
            pre ^= s.pre[b];
        }
        if (img == 0) {
            s.invertible = false;
            break;
        }
        s.img[top_bit(img)] = img;
        s.pre[top_bit(img)] = pre;
    }
    return s;
}

constexpr std::uint64_t solve_prefix(const PrefixSolver& s, std::uint64_t want) {
    std::uint64_t pre = 0;
    for (unsigned b = 48; b-- > 0;) {
        if ((want >> b) & 1u) {
            want ^= s.img[b];
            pre ^= s.pre[b];
        }
    }
    return pre;
}

constexpr PrefixSolver kPrefixSolver = make_prefix_solver();
static_assert(kPrefixSolver.invertible, "CRC polynomials are not coprime");

// kPrefix[k][v]: the prefix for nibble k of (r32 | r16 << 32) equal to v.
using PrefixTables = std::array<std::array<std::uint64_t, 16>, 12>;

constexpr PrefixTables make_prefix_tables() {
    const PrefixSolver& s = kPrefixSolver;
    PrefixTables t{};
    for (unsigned k = 0; k < 12; ++k) {
        for (std::uint64_t v = 0; v < 16; ++v) {
            const std::uint64_t regs = v << (4 * k);
            const std::uint64_t want = crc_bits(regs & 0xffffffffu, 0, kPrefixBytes, kRefl32) |
                                       crc_bits(regs >> 32, 0, kPrefixBytes, kRefl16) << 32;
            t[k][v] = solve_prefix(s, want);
        }
    }
    return t;
}

constexpr PrefixTables kPrefix = make_prefix_tables();

constexpr std::uint64_t fused_prefix(std::uint32_t crc32, std::uint16_t crc16) {
    const std::uint64_t regs = std::uint64_t{crc32} | std::uint64_t{crc16} << 32;
    std::uint64_t e = 0;
    for (unsigned k = 0; k < 12; ++k) e ^= kPrefix[k][(regs >> (4 * k)) & 0xfu];
    return e;
}

// Injecting the prefix at the front makes the whole fold wait for the
// starting registers, which for a packet are computed from its headers.
// Since folding is linear, the fold can instead start from zero registers and
// the prefix be added at the end, carried forward over the folded bytes in
// one multiplication: for `done` folded bytes the prefix's block moves
// D = 8*done - 128 bits, so (as K_H above) the multiplier is x^(D+48) mod P48.
// kLate[done / 16] holds it for every packet size IBA allows (PktLen is 11
// bits of 4-byte words); longer buffers take the prefix at the front.
constexpr std::size_t kLateMaxBlocks = 512;
using LateTable = std::array<std::uint64_t, kLateMaxBlocks + 1>;

constexpr LateTable make_late_table() {
    LateTable t{};  // entries below 4 blocks are never used (kFusedMin)
    std::uint64_t v = xpow_mod(4 * 128 - 80, kPoly48, 48);
    for (std::size_t q = 4; q <= kLateMaxBlocks; ++q) {
        t[q] = reflect(v, 49);
        v = mulxpow_mod(v, 128, kPoly48, 48);
    }
    return t;
}

constexpr LateTable kLate = make_late_table();
static_assert(kLate[300] == reflect(xpow_mod(300 * 128 - 80, kPoly48, 48), 49), "late-injection table is wrong");

static_assert(prefix_image(fused_prefix(0x12345678u, 0x9abc)) ==
                  (crc_bits(0x12345678u, 0, kPrefixBytes, kRefl32) | crc_bits(0x9abc, 0, kPrefixBytes, kRefl16) << 32),
              "fused starting prefix does not reproduce the starting registers");

// Below this many bytes the tables win over the SIMD set-up.
constexpr std::size_t kFoldMin = 64;
// Below this many bytes two separate CRCs, whose dependency chains the CPU
// overlaps, beat the fused fold with its longer set-up and finish.
constexpr std::size_t kFusedMin = 256;

#if HCASIM_CRC_HAVE_CLMUL

#define HCASIM_CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

HCASIM_CLMUL_TARGET inline __m128i load128(const std::uint8_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

HCASIM_CLMUL_TARGET inline __m128i fold(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

// Folds the first n & ~15 bytes (n >= 64) into 16 bytes, with `head` xored
// into the first 8 bytes: a starting CRC register (equivalent to xoring it
// into the leading message bits), or the fused prefix.
HCASIM_CLMUL_TARGET inline __m128i fold_to_16(std::uint64_t head, const std::uint8_t* p, std::size_t n,
                                               const FoldConstants& c) {
    const __m128i k512 = _mm_set_epi64x(static_cast<long long>(c.k512_lo), static_cast<long long>(c.k512_hi));
    const __m128i k128 = _mm_set_epi64x(static_cast<long long>(c.k128_lo), static_cast<long long>(c.k128_hi));
    __m128i x0 = _mm_xor_si128(load128(p), _mm_set_epi64x(0, static_cast<long long>(head)));
    __m128i x1 = load128(p + 16);
    __m128i x2 = load128(p + 32);
    __m128i x3 = load128(p + 48);
    p += 64;
    n -= 64;
    // Four independent chains hide the multiplier latency.
    for (; n >= 64; n -= 64, p += 64) {
        x0 = _mm_xor_si128(fold(x0, k512), load128(p));
        x1 = _mm_xor_si128(fold(x1, k512), load128(p + 16));
        x2 = _mm_xor_si128(fold(x2, k512), load128(p + 32));
        x3 = _mm_xor_si128(fold(x3, k512), load128(p + 48));
    }
    __m128i x = _mm_xor_si128(fold(x0, k128), x1);
    x = _mm_xor_si128(fold(x, k128), x2);
    x = _mm_xor_si128(fold(x, k128), x3);
    for (; n >= 16; n -= 16, p += 16) x = _mm_xor_si128(fold(x, k128), load128(p));
    return x;
}

HCASIM_CLMUL_TARGET void fold_blocks(std::uint64_t head, const std::uint8_t* p, std::size_t n, const FoldConstants& c,
                                     std::uint8_t out[16]) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), fold_to_16(head, p, n, c));
}

// The fused fold from zero registers, with the prefix added at the end
// (multiplied by `late`, see kLate).
HCASIM_CLMUL_TARGET void fold_fused_late(std::uint64_t prefix, std::uint64_t late, const std::uint8_t* p, std::size_t n,
                                         std::uint8_t out[16]) {
    const __m128i carried = _mm_clmulepi64_si128(_mm_set_epi64x(0, static_cast<long long>(prefix)),
                                                 _mm_set_epi64x(0, static_cast<long long>(late)), 0x00);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_xor_si128(fold_to_16(0, p, n, kFold48), carried));
}

#undef HCASIM_CLMUL_TARGET

bool cpu_has_clmul() {
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }();
    return has;
}

#endif  // HCASIM_CRC_HAVE_CLMUL

}  // namespace

std::uint32_t crc32_update(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
#if HCASIM_CRC_HAVE_CLMUL
    if (n >= kFoldMin && cpu_has_clmul()) {
        std::uint8_t folded[16];
        fold_blocks(crc, p, n, kFold32, folded);
        const std::size_t done = n & ~std::size_t{15};
        return crc32_tables(crc32_tables(0, folded, 16), p + done, n - done);
    }
#endif
    return crc32_tables(crc, p, n);
}

std::uint16_t crc16_update(std::uint16_t crc, const std::uint8_t* p, std::size_t n) {
#if HCASIM_CRC_HAVE_CLMUL
    if (n >= kFoldMin && cpu_has_clmul()) {
        std::uint8_t folded[16];
        fold_blocks(crc, p, n, kFold16, folded);
        const std::size_t done = n & ~std::size_t{15};
        return crc16_tables(crc16_tables(0, folded, 16), p + done, n - done);
    }
#endif
    return crc16_tables(crc, p, n);
}

CrcRegisters crc32_crc16_update(std::uint32_t crc32, std::uint16_t crc16, const std::uint8_t* p, std::size_t n) {
    if (n < kFusedMin) return CrcRegisters{crc32_update(crc32, p, n), crc16_update(crc16, p, n)};
#if HCASIM_CRC_HAVE_CLMUL
    if (cpu_has_clmul()) {
        std::uint8_t folded[16];
        const std::size_t done = n & ~std::size_t{15};
        const std::uint64_t prefix = fused_prefix(crc32, crc16);
        if (done / 16 <= kLateMaxBlocks) {
            fold_fused_late(prefix, kLate[done / 16], p, n, folded);
        } else {
            fold_blocks(prefix, p, n, kFold48, folded);
        }
        return CrcRegisters{crc32_tables(crc32_tables(0, folded, 16), p + done, n - done),
                            crc16_tables(crc16_tables(0, folded, 16), p + done, n - done)};
    }
#endif
    return CrcRegisters{crc32_tables(crc32, p, n), crc16_tables(crc16, p, n)};
}

// Table-only entry points, so tests can check both engines on any machine.
std::uint32_t crc32_update_portable(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
    return crc32_tables(crc, p, n);
}
std::uint16_t crc16_update_portable(std::uint16_t crc, const std::uint8_t* p, std::size_t n) {
    return crc16_tables(crc, p, n);
}
bool crc_accelerated() {
#if HCASIM_CRC_HAVE_CLMUL
    return cpu_has_clmul();
#else
    return false;
#endif
}

}  // namespace hcasim::packet
