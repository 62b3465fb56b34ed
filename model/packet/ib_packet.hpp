// InfiniBand packet headers (IBA 1.x, vol. 1, ch. 5 and 9) and their byte
// (de)serialisation. This is the only place in hcasim that knows header
// layouts: transport blocks fill in Headers and call build(), the receive side
// calls parse(). All multi-byte wire fields are big-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace hcasim::packet {

// Header sizes in bytes on the wire.
inline constexpr std::size_t kLrhBytes = 8;
inline constexpr std::size_t kGrhBytes = 40;
inline constexpr std::size_t kBthBytes = 12;
inline constexpr std::size_t kDethBytes = 8;
inline constexpr std::size_t kXrcethBytes = 4;
inline constexpr std::size_t kRethBytes = 16;
inline constexpr std::size_t kAethBytes = 4;
inline constexpr std::size_t kImmDtBytes = 4;
inline constexpr std::size_t kAtomicEthBytes = 28;
inline constexpr std::size_t kAtomicAckEthBytes = 8;
inline constexpr std::size_t kIethBytes = 4;
inline constexpr std::size_t kIcrcBytes = 4;
inline constexpr std::size_t kVcrcBytes = 2;

// BTH opcodes used by hcasim (IBA table 38). High 3 bits: transport (RC = 000,
// UC = 001, UD = 011); low 5 bits: operation. Every UC opcode 0x20-0x2B is
// valid; only those named here are spelled out.
enum class Opcode : std::uint8_t {
    RcSendFirst = 0x00,
    RcSendMiddle = 0x01,
    RcSendLast = 0x02,
    RcSendLastImm = 0x03,
    RcSendOnly = 0x04,
    RcSendOnlyImm = 0x05,
    RcWriteFirst = 0x06,
    RcWriteMiddle = 0x07,
    RcWriteLast = 0x08,
    RcWriteLastImm = 0x09,
    RcWriteOnly = 0x0a,
    RcWriteOnlyImm = 0x0b,
    RcReadRequest = 0x0c,
    RcReadResponseFirst = 0x0d,
    RcReadResponseMiddle = 0x0e,
    RcReadResponseLast = 0x0f,
    RcReadResponseOnly = 0x10,
    RcAcknowledge = 0x11,
    RcAtomicAcknowledge = 0x12,
    RcCompareSwap = 0x13,
    RcFetchAdd = 0x14,
    RcSendLastInv = 0x16,  // SEND with invalidate: the IETH names the rkey
    RcSendOnlyInv = 0x17,
    UcSendFirst = 0x20,
    UcSendOnly = 0x24,
    UcWriteOnly = 0x2a,
    UdSendOnly = 0x64,
    UdSendOnlyImm = 0x65,
};

// Transport bits of UC opcodes: UC's are RC's SEND and RDMA WRITE opcodes
// with these top three bits.
inline constexpr std::uint8_t kUcOpcodeBase = 0x20;
// XRC's are RC's opcodes with these top three bits; its requests carry the
// XRCETH after the BTH (and DETH), its responses do not.
inline constexpr std::uint8_t kXrcOpcodeBase = 0xa0;

// Which extension headers follow the BTH for an opcode, and whether it carries
// payload. Unknown opcodes return valid == false.
struct OpcodeLayout {
    bool valid = false;
    bool deth = false;
    bool reth = false;
    bool aeth = false;
    bool immdt = false;
    bool payload = false;  // may carry payload bytes
    bool atomic_eth = false;
    bool atomic_ack_eth = false;
    bool xrceth = false;   // XRC requests: the XRC SRQ they are for
    bool ieth = false;     // SEND with invalidate: the R_Key the responder invalidates
};
OpcodeLayout opcode_layout(std::uint8_t opcode);

// Local Route Header.
struct Lrh {
    std::uint8_t vl = 0;      // 4 bits, virtual lane (variant: masked in ICRC)
    std::uint8_t lver = 0;    // 4 bits, link version, must be 0
    std::uint8_t sl = 0;      // 4 bits, service level
    std::uint8_t lnh = 2;     // 2 bits, next header: 2 = IBA local (BTH), 3 = IBA global (GRH)
    std::uint16_t dlid = 0;
    std::uint16_t pkt_len = 0;  // 11 bits, packet length in 4-byte words from LRH to ICRC (filled by build)
    std::uint16_t slid = 0;
};

// Global Route Header (only when lnh == 3).
struct Grh {
    std::uint8_t ip_ver = 6;
    std::uint8_t tclass = 0;     // variant
    std::uint32_t flow_label = 0;  // 20 bits, variant
    std::uint16_t pay_len = 0;   // filled by build
    std::uint8_t next_hdr = 0x1b;
    std::uint8_t hop_limit = 0;  // variant
    std::uint8_t sgid[16] = {};
    std::uint8_t dgid[16] = {};
};

// Base Transport Header.
struct Bth {
    std::uint8_t opcode = 0;
    bool se = false;          // solicited event
    bool migreq = false;
    std::uint8_t pad_cnt = 0;  // 2 bits, filled by build
    std::uint8_t tver = 0;     // 4 bits, must be 0
    std::uint16_t pkey = 0xffff;
    std::uint32_t dest_qp = 0;  // 24 bits
    bool ack_req = false;
    std::uint32_t psn = 0;      // 24 bits
};

struct Deth {
    std::uint32_t qkey = 0;
    std::uint32_t src_qp = 0;  // 24 bits
};

struct Reth {
    std::uint64_t va = 0;
    std::uint32_t rkey = 0;
    std::uint32_t dma_len = 0;
};

// AETH syndrome encodings (IBA 9.7.5.1): bits 6:5 select ACK / RNR NAK / NAK,
// bits 4:0 carry credits, the RNR timer or the NAK code.
struct Aeth {
    std::uint8_t syndrome = 0;
    std::uint32_t msn = 0;  // 24 bits
};
inline constexpr std::uint8_t kAethAck = 0x00;       // | credit count
inline constexpr std::uint8_t kAethRnrNak = 0x20;    // | RNR timer code
inline constexpr std::uint8_t kAethNak = 0x60;       // | NAK code below
inline constexpr std::uint8_t kAethKindMask = 0x60;   // ACK, RNR NAK or NAK
inline constexpr std::uint8_t kAethValueMask = 0x1f;  // credits, timer or NAK code
inline constexpr std::uint8_t kAethCreditsInvalid = 0x1f;  // an ACK that carries no end-to-end credits
inline constexpr std::uint8_t kNakPsnSequenceError = 0;
inline constexpr std::uint8_t kNakInvalidRequest = 1;
inline constexpr std::uint8_t kNakRemoteAccessError = 2;
inline constexpr std::uint8_t kNakRemoteOperationalError = 3;

// Atomic ETH (IBA 9.3.4): the target and operands of a compare & swap or
// fetch & add on 8 bytes.
struct AtomicEth {
    std::uint64_t va = 0;
    std::uint32_t rkey = 0;
    std::uint64_t swap_add = 0;
    std::uint64_t compare = 0;
};

struct Headers {
    Lrh lrh;
    std::optional<Grh> grh;
    Bth bth;
    std::optional<Deth> deth;
    std::optional<Reth> reth;
    std::optional<Aeth> aeth;
    std::optional<std::uint32_t> immdt;
    std::optional<AtomicEth> atomic_eth;
    std::optional<std::uint64_t> atomic_ack;  // AtomicAckETH: the original remote data
    std::optional<std::uint32_t> xrceth;      // XRCETH: the XRC SRQ number (24 bits)
    std::optional<std::uint32_t> ieth;        // IETH: the R_Key to invalidate
};

// Which extension headers go on the wire is decided by opcode_layout() of
// h.bth.opcode alone (values come from the matching optionals, zero when
// unset); a GRH is present exactly when h.grh is set, and LNH follows from it.

// Bytes from the LRH up to and including the last extension header.
std::size_t header_bytes(const Headers& h);

// Total bytes on the wire for a packet with this header set and payload
// length: headers + payload + pad to a 4-byte multiple + ICRC + VCRC.
std::size_t wire_bytes(const Headers& h, std::size_t payload_len);

// Writes the headers into buf (which must hold wire_bytes(h, payload_len)),
// filling LRH pkt_len, GRH pay_len and BTH pad_cnt from payload_len. The
// caller places payload_len bytes at buf + header_bytes(h) (before or after
// this call) and then calls seal(). Returns header_bytes(h).
std::size_t write_headers(const Headers& h, std::size_t payload_len, std::uint8_t* buf);

// Zeroes the pad bytes and computes ICRC and VCRC over a packet whose headers
// and payload are in place. total_len == wire_bytes(h, payload_len).
void seal(std::uint8_t* buf, std::size_t total_len);

// write_headers + copy of the payload + seal in one call. buf must hold
// wire_bytes(h, payload_len); payload may be null when payload_len is 0.
// Returns wire_bytes(h, payload_len).
std::size_t build(const Headers& h, const std::uint8_t* payload, std::size_t payload_len, std::uint8_t* buf);

enum class ParseError {
    None,
    Truncated,        // shorter than the headers it announces
    BadLinkVersion,   // LRH LVer != 0
    BadNextHeader,    // LRH LNH not 2 or 3, or GRH NxtHdr not 0x1B (IBA transport)
    BadLength,        // LRH PktLen or GRH PayLen disagrees with the byte count, or
                      // bytes after the headers of an opcode that carries no payload
    BadVcrc,
    BadIcrc,
    BadTransportVersion,  // BTH TVer != 0
    BadOpcode,            // opcode hcasim does not know
    BadPad,               // pad count on an opcode that carries no payload, or more
                          // pad than bytes after the headers
};
const char* to_string(ParseError e);
// The receiver's drop counter for e: dropped_bad_vcrc, dropped_truncated, ...
const char* counter_name(ParseError e);

struct Parsed {
    Headers h;
    std::size_t payload_offset = 0;
    std::size_t payload_len = 0;
};

// Whether parse() recomputes the link CRCs. Bytes the model knows to be
// exactly what seal() left (no fault touched them on the way) cannot fail
// the check, so the receiver may skip recomputing it; every other packet is
// verified.
enum class CrcCheck { Verify, SealedIntact };

// Parses and validates (lengths, versions, VCRC, ICRC) a packet of n bytes.
ParseError parse(const std::uint8_t* buf, std::size_t n, Parsed& out, CrcCheck crc = CrcCheck::Verify);

// CRCs as IBA defines them (7.8.1, 7.8.2). icrc() covers the packet up to but
// not including the ICRC field, with the variant fields forced to 1s: in a
// local packet (LNH = 2) the LRH VL field; in a global packet (LNH = 3) the
// whole LRH (a router rewrites it) and the GRH TClass, FlowLabel and HopLmt;
// in both the BTH resv8a byte. vcrc() covers everything from the LRH through
// the ICRC. Both return the final CRC value (after the final xor); seal()
// stores each least-significant byte first, the order a reflected CRC is
// transmitted in (as the Ethernet FCS, and as Linux rxe stores the ICRC).
std::uint32_t icrc(const std::uint8_t* buf, std::size_t len_before_icrc);
std::uint16_t vcrc(const std::uint8_t* buf, std::size_t len_before_vcrc);
// Whether a packet of n wire bytes ends in the VCRC of the bytes before it,
// as every hop checks it.
bool vcrc_intact(const std::uint8_t* buf, std::size_t n);

// The raw CRCs: CRC-32 (IEEE 802.3 polynomial 0x04C11DB7, reflected, init and
// xorout 0xffffffff) and CRC-16 (polynomial 0x100B, init 0xffff, xorout 0xffff,
// reflected) as IBA uses them, with an incremental form.
std::uint32_t crc32_update(std::uint32_t crc, const std::uint8_t* p, std::size_t n);  // crc is the raw register
std::uint16_t crc16_update(std::uint16_t crc, const std::uint8_t* p, std::size_t n);

// Both raw CRCs over the same bytes in one pass, as seal() and parse() use
// them: equal to {crc32_update(crc32, p, n), crc16_update(crc16, p, n)}, and
// on long buffers with PCLMULQDQ at little more than the cost of one of them.
struct CrcRegisters {
    std::uint32_t crc32;
    std::uint16_t crc16;
};
CrcRegisters crc32_crc16_update(std::uint32_t crc32, std::uint16_t crc16, const std::uint8_t* p, std::size_t n);

// The same CRCs through the table engine only (the functions above use
// carry-less multiplication when the CPU has it), and whether that faster
// engine is in use on this machine.
std::uint32_t crc32_update_portable(std::uint32_t crc, const std::uint8_t* p, std::size_t n);
std::uint16_t crc16_update_portable(std::uint16_t crc, const std::uint8_t* p, std::size_t n);
bool crc_accelerated();

}  // namespace hcasim::packet
