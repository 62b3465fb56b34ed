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
// Every packet is checked twice (ICRC and VCRC) at up to 4 KiB each, so the
// engines fold 64 bytes at a time with carry-less multiplication (PCLMULQDQ)
// where the CPU has it, and otherwise fall back to slicing-by-8 tables. All
// constants and tables are derived at compile time from the polynomials, so
// there are no hand-copied magic numbers to get wrong.
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

// x^n mod P, P of degree `width` given without its leading term (normal,
// MSB-first form). The result has degree < width.
constexpr std::uint64_t xpow_mod(unsigned n, std::uint64_t poly, unsigned width) {
    const std::uint64_t top = std::uint64_t{1} << (width - 1);
    const std::uint64_t mask = (top << 1) - 1;
    std::uint64_t r = 1;  // x^0
    for (unsigned i = 0; i < n; ++i) {
        const bool carry = (r & top) != 0;
        r = (r << 1) & mask;
        if (carry) r ^= poly;
    }
    return r;
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

struct FoldConstants {
    std::uint64_t k512_hi, k512_lo;  // fold by 4 blocks (512 bits)
    std::uint64_t k128_hi, k128_lo;  // fold by 1 block (128 bits)
};

constexpr FoldConstants make_fold_constants(std::uint64_t poly, unsigned width) {
    return FoldConstants{
        reflect(xpow_mod(512 + 32, poly, width), 33),
        reflect(xpow_mod(512 - 32, poly, width), 33),
        reflect(xpow_mod(128 + 32, poly, width), 33),
        reflect(xpow_mod(128 - 32, poly, width), 33),
    };
}

constexpr FoldConstants kFold32 = make_fold_constants(kPoly32, 32);
constexpr FoldConstants kFold16 = make_fold_constants(kPoly16, 16);

// Below this many bytes the tables win over the SIMD set-up.
constexpr std::size_t kFoldMin = 64;

#if HCASIM_CRC_HAVE_CLMUL

#define HCASIM_CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

HCASIM_CLMUL_TARGET inline __m128i load128(const std::uint8_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

HCASIM_CLMUL_TARGET inline __m128i fold(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

// Folds the first n & ~15 bytes (n >= 64) into 16 bytes at out, with the
// starting register xored into the first bytes (a CRC register is equivalent
// to xoring it into the leading message bits).
HCASIM_CLMUL_TARGET void fold_blocks(std::uint32_t reg, const std::uint8_t* p, std::size_t n, const FoldConstants& c,
                                     std::uint8_t out[16]) {
    const __m128i k512 = _mm_set_epi64x(static_cast<long long>(c.k512_lo), static_cast<long long>(c.k512_hi));
    const __m128i k128 = _mm_set_epi64x(static_cast<long long>(c.k128_lo), static_cast<long long>(c.k128_hi));
    __m128i x0 = _mm_xor_si128(load128(p), _mm_cvtsi32_si128(static_cast<int>(reg)));
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
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), x);
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
