// IBA packet layout (vol. 1, 5.2 and 9.2-9.4), building and validation. The
// CRC engines live in crc.cpp.
#include "model/packet/ib_packet.hpp"

#include "model/sim/assert.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>

namespace hcasim::packet {
namespace {

constexpr std::size_t kCrcBytes = kIcrcBytes + kVcrcBytes;
constexpr std::uint8_t kLnhLocal = 2;
constexpr std::uint8_t kLnhGlobal = 3;
constexpr std::uint8_t kGrhNextHdrIba = 0x1b;  // IBA transport follows the GRH
constexpr std::size_t kBthResv8aOffset = 4;

// Extension headers per opcode, in wire order DETH, XRCETH, RETH, AETH, ImmDt (IBA
// 9.2, table 38). Only opcodes listed here are valid.
struct LayoutEntry {
    Opcode op;
    OpcodeLayout layout;
};

// clang-format off
constexpr LayoutEntry kLayoutEntries[] = {
    //                                 valid  deth   reth   aeth   immdt  payload
    {Opcode::RcSendFirst,            {true, false, false, false, false, true}},
    {Opcode::RcSendMiddle,           {true, false, false, false, false, true}},
    {Opcode::RcSendLast,             {true, false, false, false, false, true}},
    {Opcode::RcSendLastImm,          {true, false, false, false, true,  true}},
    {Opcode::RcSendOnly,             {true, false, false, false, false, true}},
    {Opcode::RcSendOnlyImm,          {true, false, false, false, true,  true}},
    {Opcode::RcWriteFirst,           {true, false, true,  false, false, true}},
    {Opcode::RcWriteMiddle,          {true, false, false, false, false, true}},
    {Opcode::RcWriteLast,            {true, false, false, false, false, true}},
    {Opcode::RcWriteLastImm,         {true, false, false, false, true,  true}},
    {Opcode::RcWriteOnly,            {true, false, true,  false, false, true}},
    {Opcode::RcWriteOnlyImm,         {true, false, true,  false, true,  true}},
    {Opcode::RcReadRequest,          {true, false, true,  false, false, false}},
    {Opcode::RcReadResponseFirst,    {true, false, false, true,  false, true}},
    {Opcode::RcReadResponseMiddle,   {true, false, false, false, false, true}},
    {Opcode::RcReadResponseLast,     {true, false, false, true,  false, true}},
    {Opcode::RcReadResponseOnly,     {true, false, false, true,  false, true}},
    {Opcode::RcAcknowledge,          {true, false, false, true,  false, false}},
    {Opcode::RcAtomicAcknowledge,    {true, false, false, true,  false, false, false, true}},
    {Opcode::RcCompareSwap,          {true, false, false, false, false, false, true,  false}},
    {Opcode::RcFetchAdd,             {true, false, false, false, false, false, true,  false}},
    {Opcode::UdSendOnly,             {true, true,  false, false, false, true}},
    {Opcode::UdSendOnlyImm,          {true, true,  false, false, true,  true}},
};
// clang-format on

constexpr std::array<OpcodeLayout, 256> make_layout_table() {
    std::array<OpcodeLayout, 256> t{};
    for (const auto& e : kLayoutEntries) t[static_cast<std::uint8_t>(e.op)] = e.layout;
    // UC has RC's SEND and RDMA WRITE opcodes (0x00-0x0B) under its own
    // transport bits, with the same headers.
    for (std::uint8_t o = 0; o <= static_cast<std::uint8_t>(Opcode::RcWriteOnlyImm); ++o)
        t[kUcOpcodeBase | o] = t[o];
    // SEND with invalidate (RC only): a SEND LAST or ONLY whose IETH takes
    // the place of immediate data.
    t[static_cast<std::uint8_t>(Opcode::RcSendLastInv)] = t[static_cast<std::uint8_t>(Opcode::RcSendLast)];
    t[static_cast<std::uint8_t>(Opcode::RcSendOnlyInv)] = t[static_cast<std::uint8_t>(Opcode::RcSendOnly)];
    t[static_cast<std::uint8_t>(Opcode::RcSendLastInv)].ieth = true;
    t[static_cast<std::uint8_t>(Opcode::RcSendOnlyInv)].ieth = true;
    // XRC has all of RC's opcodes (with invalidate too); its requests add the XRCETH.
    for (std::uint8_t o = 0; o <= static_cast<std::uint8_t>(Opcode::RcSendOnlyInv); ++o) {
        if (!t[o].valid) continue;
        t[kXrcOpcodeBase | o] = t[o];
        const bool response = o >= static_cast<std::uint8_t>(Opcode::RcReadResponseFirst) &&
                              o <= static_cast<std::uint8_t>(Opcode::RcAtomicAcknowledge);
        t[kXrcOpcodeBase | o].xrceth = !response;
    }
    return t;
}

constexpr std::array<OpcodeLayout, 256> kLayoutTable = make_layout_table();

constexpr std::size_t sum_ext_bytes(const OpcodeLayout& l) {
    return (l.deth ? kDethBytes : 0) + (l.xrceth ? kXrcethBytes : 0) + (l.reth ? kRethBytes : 0) + (l.atomic_eth ? kAtomicEthBytes : 0) +
           (l.aeth ? kAethBytes : 0) + (l.atomic_ack_eth ? kAtomicAckEthBytes : 0) + (l.immdt ? kImmDtBytes : 0) +
           (l.ieth ? kIethBytes : 0);
}

// Extension header bytes per opcode, summed once: every packet needs them.
constexpr std::array<std::uint8_t, 256> make_ext_table() {
    std::array<std::uint8_t, 256> t{};
    for (std::size_t o = 0; o < 256; ++o) t[o] = static_cast<std::uint8_t>(sum_ext_bytes(kLayoutTable[o]));
    return t;
}
constexpr std::array<std::uint8_t, 256> kExtBytes = make_ext_table();

inline std::size_t ext_bytes(std::uint8_t opcode) { return kExtBytes[opcode]; }

constexpr std::size_t pad_for(std::size_t payload_len) { return (4 - (payload_len & 3)) & 3; }

// Big-endian header fields.
inline void put16(std::uint8_t* p, std::uint32_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
inline void put24(std::uint8_t* p, std::uint32_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 16);
    p[1] = static_cast<std::uint8_t>(v >> 8);
    p[2] = static_cast<std::uint8_t>(v);
}
inline void put32(std::uint8_t* p, std::uint32_t v) {
    put16(p, v >> 16);
    put16(p + 2, v);
}
inline void put64(std::uint8_t* p, std::uint64_t v) {
    put32(p, static_cast<std::uint32_t>(v >> 32));
    put32(p + 4, static_cast<std::uint32_t>(v));
}
inline std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
inline std::uint32_t get24(const std::uint8_t* p) {
    return std::uint32_t{p[0]} << 16 | std::uint32_t{p[1]} << 8 | p[2];
}
inline std::uint32_t get32(const std::uint8_t* p) { return std::uint32_t{get16(p)} << 16 | get16(p + 2); }
inline std::uint64_t get64(const std::uint8_t* p) { return std::uint64_t{get32(p)} << 32 | get32(p + 4); }

// The CRC fields go least-significant byte first (see ib_packet.hpp).
inline void put_le32(std::uint8_t* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void put_le16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v);
    p[1] = static_cast<std::uint8_t>(v >> 8);
}
inline std::uint32_t get_le32(const std::uint8_t* p) {
    return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
}
inline std::uint16_t get_le16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | p[1] << 8); }

inline bool is_global(const std::uint8_t* buf) { return (buf[1] & 3) == kLnhGlobal; }
inline std::size_t bth_offset(bool global) { return kLrhBytes + (global ? kGrhBytes : 0); }

// The fields the ICRC sees as 1s (IBA 7.8.1): in a local packet the LRH VL;
// in a global packet the whole LRH (a router rewrites it) and the GRH TClass,
// FlowLabel and HopLmt; in both the BTH resv8a byte.
struct VariantByte {
    std::size_t offset;
    std::uint8_t mask;
};
// clang-format off
constexpr VariantByte kLocalVariant[] = {
    {0, 0xf0},                                          // VL
    {kLrhBytes + kBthResv8aOffset, 0xff},               // resv8a
};
constexpr VariantByte kGlobalVariant[] = {
    {0, 0xff}, {1, 0xff}, {2, 0xff}, {3, 0xff},         // LRH
    {4, 0xff}, {5, 0xff}, {6, 0xff}, {7, 0xff},
    {kLrhBytes + 0, 0x0f},                              // TClass[7:4]
    {kLrhBytes + 1, 0xff},                              // TClass[3:0], FlowLabel[19:16]
    {kLrhBytes + 2, 0xff}, {kLrhBytes + 3, 0xff},       // FlowLabel[15:0]
    {kLrhBytes + 7, 0xff},                              // HopLmt
    {kLrhBytes + kGrhBytes + kBthResv8aOffset, 0xff},   // resv8a
};
// clang-format on
constexpr std::size_t kLocalVariantCount = std::size(kLocalVariant);
constexpr std::size_t kGlobalVariantCount = std::size(kGlobalVariant);

// seal() and parse() compute the ICRC as a plain CRC-32 over the real packet
// bytes, so that it can share one pass with the VCRC. Forcing a variant field
// to 1s xors its 0 bits (delta) into the message, and by linearity xoring a
// byte d into the message at offset j has the same effect as xoring Z^-j(d)
// into the starting register, Z being the register's step over one zero byte
// (for j < 4 that is d << 8j: the register overlays the first four bytes).
// Z^-j is tabulated per nibble for each variant byte.
constexpr std::uint32_t kCrc32Reflected = 0xEDB88320u;

// Inverse of one bit step r -> (r >> 1) ^ (r & 1 ? poly : 0). The poly's top
// bit is set and (r >> 1)'s is not, so the top bit tells whether it was xored.
constexpr std::uint32_t crc32_unstep(std::uint32_t r) {
    const std::uint32_t lsb = r >> 31;
    return ((lsb != 0 ? r ^ kCrc32Reflected : r) << 1) | lsb;
}

using UnshiftTable = std::array<std::array<std::uint32_t, 16>, 2>;  // [low/high nibble][value]

template <std::size_t N>
constexpr std::array<UnshiftTable, N> make_unshift_tables(const VariantByte (&bytes)[N]) {
    std::array<UnshiftTable, N> t{};
    for (std::size_t k = 0; k < N; ++k) {
        for (unsigned half = 0; half < 2; ++half) {
            for (std::uint32_t v = 0; v < 16; ++v) {
                std::uint32_t r = v << (4 * half);
                for (std::size_t i = 0; i < 8 * bytes[k].offset; ++i) r = crc32_unstep(r);
                t[k][half][v] = r;
            }
        }
    }
    return t;
}

constexpr std::array<UnshiftTable, kLocalVariantCount> kLocalUnshift = make_unshift_tables(kLocalVariant);
constexpr std::array<UnshiftTable, kGlobalVariantCount> kGlobalUnshift = make_unshift_tables(kGlobalVariant);
static_assert(kGlobalUnshift[3][1][0xa] == 0xa0000000u, "a byte at offset 3 must overlay the register's top byte");

template <std::size_t N>
std::uint32_t masking_register(const std::uint8_t* buf, const VariantByte (&bytes)[N],
                               const std::array<UnshiftTable, N>& tables) {
    std::uint32_t r = 0;
    for (std::size_t k = 0; k < N; ++k) {
        const auto delta = static_cast<std::uint8_t>(bytes[k].mask & ~buf[bytes[k].offset]);
        r ^= tables[k][0][delta & 0xf] ^ tables[k][1][delta >> 4];
    }
    return r;
}

// The CRC-32 starting register that makes a CRC over the real bytes of a
// packet equal to the ICRC's CRC over its masked copy. Needs the headers
// through the BTH.
std::uint32_t icrc_start_register(const std::uint8_t* buf) {
    const std::uint32_t masking = is_global(buf) ? masking_register(buf, kGlobalVariant, kGlobalUnshift)
                                                 : masking_register(buf, kLocalVariant, kLocalUnshift);
    return 0xffffffffu ^ masking;
}

// Raw ICRC and VCRC registers over the first len bytes of a packet (len =
// offset of the ICRC field, at least through the BTH), in one pass. The VCRC
// register still has to take in the ICRC field.
CrcRegisters link_crc_registers(const std::uint8_t* buf, std::size_t len) {
    return crc32_crc16_update(icrc_start_register(buf), 0xffff, buf, len);
}

}  // namespace

OpcodeLayout opcode_layout(std::uint8_t opcode) { return kLayoutTable[opcode]; }

std::size_t header_bytes(const Headers& h) {
    return bth_offset(h.grh.has_value()) + kBthBytes + ext_bytes(h.bth.opcode);
}

std::size_t wire_bytes(const Headers& h, std::size_t payload_len) {
    return header_bytes(h) + payload_len + pad_for(payload_len) + kCrcBytes;
}

std::size_t write_headers(const Headers& h, std::size_t payload_len, std::uint8_t* buf) {
    const OpcodeLayout& layout = kLayoutTable[h.bth.opcode];
    const std::size_t total = wire_bytes(h, payload_len);
    const auto pad = static_cast<std::uint8_t>(pad_for(payload_len));
    std::uint8_t* p = buf;

    // LRH: VL|LVer, SL|Rsv2|LNH, DLID, Rsv5|PktLen, SLID.
    p[0] = static_cast<std::uint8_t>((h.lrh.vl & 0xf) << 4 | (h.lrh.lver & 0xf));
    p[1] = static_cast<std::uint8_t>((h.lrh.sl & 0xf) << 4 | (h.grh ? kLnhGlobal : kLnhLocal));
    put16(p + 2, h.lrh.dlid);
    put16(p + 4, static_cast<std::uint32_t>((total - kVcrcBytes) / 4) & 0x7ff);  // LRH..ICRC in words
    put16(p + 6, h.lrh.slid);
    p += kLrhBytes;

    if (h.grh) {
        // GRH: IPVer|TClass|FlowLabel, PayLen, NxtHdr, HopLmt, SGID, DGID.
        const Grh& g = *h.grh;
        put32(p, std::uint32_t{g.ip_ver & 0xfu} << 28 | std::uint32_t{g.tclass} << 20 | (g.flow_label & 0xfffff));
        put16(p + 4, static_cast<std::uint32_t>(total - kLrhBytes - kGrhBytes - kVcrcBytes));  // through ICRC
        p[6] = g.next_hdr;
        p[7] = g.hop_limit;
        std::memcpy(p + 8, g.sgid, 16);
        std::memcpy(p + 24, g.dgid, 16);
        p += kGrhBytes;
    }

    // BTH: OpCode, SE|M|PadCnt|TVer, P_Key, Resv8a, DestQP, A|Resv7, PSN.
    const Bth& b = h.bth;
    p[0] = b.opcode;
    p[1] = static_cast<std::uint8_t>((b.se ? 0x80 : 0) | (b.migreq ? 0x40 : 0) | pad << 4 | (b.tver & 0xf));
    put16(p + 2, b.pkey);
    p[kBthResv8aOffset] = 0;
    put24(p + 5, b.dest_qp);
    p[8] = b.ack_req ? 0x80 : 0;
    put24(p + 9, b.psn);
    p += kBthBytes;

    if (layout.deth) {  // Q_Key, Reserved, SrcQP
        const Deth d = h.deth.value_or(Deth{});
        put32(p, d.qkey);
        p[4] = 0;
        put24(p + 5, d.src_qp);
        p += kDethBytes;
    }
    if (layout.xrceth) {  // Reserved, XRCSRQ
        put32(p, h.xrceth.value_or(0) & 0xffffff);
        p += kXrcethBytes;
    }
    if (layout.reth) {  // VA, R_Key, DMALen
        const Reth r = h.reth.value_or(Reth{});
        put64(p, r.va);
        put32(p + 8, r.rkey);
        put32(p + 12, r.dma_len);
        p += kRethBytes;
    }
    if (layout.atomic_eth) {  // VA, R_Key, Swap (Add) Data, Compare Data
        const AtomicEth a = h.atomic_eth.value_or(AtomicEth{});
        put64(p, a.va);
        put32(p + 8, a.rkey);
        put64(p + 12, a.swap_add);
        put64(p + 20, a.compare);
        p += kAtomicEthBytes;
    }
    if (layout.aeth) {  // Syndrome, MSN
        const Aeth a = h.aeth.value_or(Aeth{});
        p[0] = a.syndrome;
        put24(p + 1, a.msn);
        p += kAethBytes;
    }
    if (layout.atomic_ack_eth) {  // Original Remote Data
        put64(p, h.atomic_ack.value_or(0));
        p += kAtomicAckEthBytes;
    }
    if (layout.immdt) {
        put32(p, h.immdt.value_or(0));
        p += kImmDtBytes;
    }
    if (layout.ieth) {  // R_Key
        put32(p, h.ieth.value_or(0));
        p += kIethBytes;
    }
    return static_cast<std::size_t>(p - buf);
}

void seal(std::uint8_t* buf, std::size_t total_len) {
    if (total_len < kLrhBytes + kBthBytes + kCrcBytes) return;
    const std::size_t bth = bth_offset(is_global(buf));
    if (total_len < bth + kBthBytes + kCrcBytes) return;
    const std::size_t icrc_at = total_len - kCrcBytes;
    const std::size_t pad = (buf[bth + 1] >> 4) & 3;
    if (pad <= icrc_at - bth - kBthBytes) std::memset(buf + icrc_at - pad, 0, pad);
    const CrcRegisters regs = link_crc_registers(buf, icrc_at);
    put_le32(buf + icrc_at, ~regs.crc32);
    // The VCRC covers the ICRC just stored.
    put_le16(buf + icrc_at + kIcrcBytes,
             static_cast<std::uint16_t>(~crc16_update(regs.crc16, buf + icrc_at, kIcrcBytes)));
}

std::size_t build(const Headers& h, const std::uint8_t* payload, std::size_t payload_len, std::uint8_t* buf) {
    const std::size_t hdr = write_headers(h, payload_len, buf);
    if (payload_len != 0) std::memcpy(buf + hdr, payload, payload_len);
    const std::size_t total = wire_bytes(h, payload_len);
    seal(buf, total);
    return total;
}

std::uint32_t icrc(const std::uint8_t* buf, std::size_t len) {
    // Copy the headers that hold variant fields, force those fields to 1s,
    // and CRC the copy followed by the rest of the packet in place.
    std::uint8_t head[kLrhBytes + kGrhBytes + kBthBytes];
    const bool global = len >= 2 && is_global(buf);
    const std::size_t n = std::min(len, bth_offset(global) + kBthBytes);
    if (n != 0) std::memcpy(head, buf, n);
    auto force = [&](const auto& variant) {
        for (const VariantByte& v : variant) {
            if (v.offset < n) head[v.offset] |= v.mask;
        }
    };
    if (global) {
        force(kGlobalVariant);
    } else {
        force(kLocalVariant);
    }
    std::uint32_t crc = crc32_update(0xffffffffu, head, n);
    crc = crc32_update(crc, buf + n, len - n);
    return ~crc;
}

std::uint16_t vcrc(const std::uint8_t* buf, std::size_t len) {
    return static_cast<std::uint16_t>(~crc16_update(0xffff, buf, len));
}

bool vcrc_intact(const std::uint8_t* buf, std::size_t n) {
    return n >= kVcrcBytes && get_le16(buf + n - kVcrcBytes) == vcrc(buf, n - kVcrcBytes);
}

const char* to_string(ParseError e) {
    switch (e) {
        case ParseError::None: return "none";
        case ParseError::Truncated: return "truncated";
        case ParseError::BadLinkVersion: return "bad link version";
        case ParseError::BadNextHeader: return "bad next header";
        case ParseError::BadLength: return "bad length";
        case ParseError::BadVcrc: return "bad VCRC";
        case ParseError::BadIcrc: return "bad ICRC";
        case ParseError::BadTransportVersion: return "bad transport version";
        case ParseError::BadOpcode: return "bad opcode";
        case ParseError::BadPad: return "bad pad count";
    }
    return "unknown";
}

const char* counter_name(ParseError e) {
    switch (e) {
        case ParseError::None: return "dropped_none";
        case ParseError::Truncated: return "dropped_truncated";
        case ParseError::BadLinkVersion: return "dropped_bad_link_version";
        case ParseError::BadNextHeader: return "dropped_bad_next_header";
        case ParseError::BadLength: return "dropped_bad_length";
        case ParseError::BadVcrc: return "dropped_bad_vcrc";
        case ParseError::BadIcrc: return "dropped_bad_icrc";
        case ParseError::BadTransportVersion: return "dropped_bad_transport_version";
        case ParseError::BadOpcode: return "dropped_bad_opcode";
        case ParseError::BadPad: return "dropped_bad_pad_count";
    }
    return "dropped_unknown";
}

ParseError parse(const std::uint8_t* buf, std::size_t n, Parsed& out, CrcCheck crc) {
    out = Parsed{};
    // Link layer first: nothing past the LRH is trusted until both CRCs pass.
    if (buf == nullptr || n < kLrhBytes) return ParseError::Truncated;
    if ((buf[0] & 0xf) != 0) return ParseError::BadLinkVersion;
    const std::uint8_t lnh = buf[1] & 3;
    if (lnh != kLnhLocal && lnh != kLnhGlobal) return ParseError::BadNextHeader;
    const bool global = lnh == kLnhGlobal;
    const std::size_t bth_at = bth_offset(global);
    if (n < bth_at + kBthBytes + kCrcBytes) return ParseError::Truncated;
    const std::uint16_t pkt_len = get16(buf + 4) & 0x7ff;
    if (std::size_t{pkt_len} * 4 + kVcrcBytes != n) return ParseError::BadLength;
    const std::size_t icrc_at = n - kCrcBytes;
#if !defined(HCASIM_CHECK_INVARIANTS)
    if (crc == CrcCheck::Verify)
#endif
    {
        const CrcRegisters regs = link_crc_registers(buf, icrc_at);
        // The VCRC covers the ICRC as received, so a damaged ICRC is a VCRC error.
        const auto vcrc_value = static_cast<std::uint16_t>(~crc16_update(regs.crc16, buf + icrc_at, kIcrcBytes));
        const bool vcrc_ok = get_le16(buf + icrc_at + kIcrcBytes) == vcrc_value;
        const bool icrc_ok = get_le32(buf + icrc_at) == ~regs.crc32;
        // The checking build verifies sealed packets too: a failure there is
        // a model bug (bytes changed after sealing), not a line error.
        HCASIM_ASSERT(crc == CrcCheck::Verify || (vcrc_ok && icrc_ok));
        if (!vcrc_ok) return ParseError::BadVcrc;
        if (!icrc_ok) return ParseError::BadIcrc;
    }

    Headers& h = out.h;
    h.lrh.vl = buf[0] >> 4;
    h.lrh.lver = 0;
    h.lrh.sl = buf[1] >> 4;
    h.lrh.lnh = lnh;
    h.lrh.dlid = get16(buf + 2);
    h.lrh.pkt_len = pkt_len;
    h.lrh.slid = get16(buf + 6);

    if (global) {
        const std::uint8_t* p = buf + kLrhBytes;
        Grh g;
        const std::uint32_t w0 = get32(p);
        g.ip_ver = static_cast<std::uint8_t>(w0 >> 28);
        g.tclass = static_cast<std::uint8_t>(w0 >> 20);
        g.flow_label = w0 & 0xfffff;
        g.pay_len = get16(p + 4);
        g.next_hdr = p[6];
        g.hop_limit = p[7];
        std::memcpy(g.sgid, p + 8, 16);
        std::memcpy(g.dgid, p + 24, 16);
        if (g.next_hdr != kGrhNextHdrIba) return ParseError::BadNextHeader;
        if (std::size_t{g.pay_len} != n - kLrhBytes - kGrhBytes - kVcrcBytes) return ParseError::BadLength;
        h.grh = g;
    }

    const std::uint8_t* p = buf + bth_at;
    Bth& b = h.bth;
    b.opcode = p[0];
    b.se = (p[1] & 0x80) != 0;
    b.migreq = (p[1] & 0x40) != 0;
    b.pad_cnt = (p[1] >> 4) & 3;
    b.tver = p[1] & 0xf;
    b.pkey = get16(p + 2);
    b.dest_qp = get24(p + 5);
    b.ack_req = (p[8] & 0x80) != 0;
    b.psn = get24(p + 9);
    if (b.tver != 0) return ParseError::BadTransportVersion;
    const OpcodeLayout& layout = kLayoutTable[b.opcode];
    if (!layout.valid) return ParseError::BadOpcode;

    const std::size_t hdr = bth_at + kBthBytes + ext_bytes(b.opcode);
    if (icrc_at < hdr) return ParseError::Truncated;
    const std::size_t body = icrc_at - hdr;  // payload + pad
    if (!layout.payload) {
        if (b.pad_cnt != 0) return ParseError::BadPad;
        if (body != 0) return ParseError::BadLength;
    }
    if (b.pad_cnt > body) return ParseError::BadPad;

    p += kBthBytes;
    if (layout.deth) {
        h.deth = Deth{get32(p), get24(p + 5)};
        p += kDethBytes;
    }
    if (layout.xrceth) {
        h.xrceth = get24(p + 1);
        p += kXrcethBytes;
    }
    if (layout.reth) {
        h.reth = Reth{get64(p), get32(p + 8), get32(p + 12)};
        p += kRethBytes;
    }
    if (layout.atomic_eth) {
        h.atomic_eth = AtomicEth{get64(p), get32(p + 8), get64(p + 12), get64(p + 20)};
        p += kAtomicEthBytes;
    }
    if (layout.aeth) {
        h.aeth = Aeth{p[0], get24(p + 1)};
        p += kAethBytes;
    }
    if (layout.atomic_ack_eth) {
        h.atomic_ack = get64(p);
        p += kAtomicAckEthBytes;
    }
    if (layout.immdt) h.immdt = get32(p);
    if (layout.ieth) h.ieth = get32(p);  // never with ImmDt: each is the last header

    out.payload_offset = hdr;
    out.payload_len = body - b.pad_cnt;
    return ParseError::None;
}

}  // namespace hcasim::packet
