// Attributes of every IBA BTH opcode (IBA vol. 1, 9.2 and table 38; XRC
// annex), one entry per opcode in the style of the Linux rxe driver's
// rxe_opcode[] table. The table is data only: it lists opcodes hcasim does not
// implement (RD, SEND with invalidate) with their correct attributes, and
// which opcodes the packet layer accepts is decided by opcode_layout() in
// ib_packet.hpp alone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/packet/ib_packet.hpp"

namespace hcasim::packet {

// Extension headers following the BTH (bit flags of OpcodeInfo::headers).
enum OpcodeHeader : std::uint16_t {
    kHdrRdeth = 1u << 0,         // RD: reliable datagram ETH (4 bytes)
    kHdrDeth = 1u << 1,          // datagram ETH (8 bytes)
    kHdrXrceth = 1u << 2,        // XRC: XRC ETH (4 bytes)
    kHdrReth = 1u << 3,          // RDMA ETH (16 bytes)
    kHdrAtomicEth = 1u << 4,     // atomic ETH (28 bytes)
    kHdrAeth = 1u << 5,          // ACK ETH (4 bytes)
    kHdrAtomicAckEth = 1u << 6,  // atomic ACK ETH (8 bytes)
    kHdrImmDt = 1u << 7,         // immediate data (4 bytes)
    kHdrIeth = 1u << 8,          // invalidate ETH (4 bytes)
};

// Transport service (bit flags of OpcodeInfo::qp_types). An opcode belongs to
// exactly one of them, given by its top three bits.
enum OpcodeQpType : std::uint8_t {
    kQpRc = 1u << 0,   // 0x00-0x1F
    kQpUc = 1u << 1,   // 0x20-0x3F
    kQpRd = 1u << 2,   // 0x40-0x5F
    kQpUd = 1u << 3,   // 0x60-0x7F
    kQpXrc = 1u << 4,  // 0xA0-0xBF
};

// Place of the packet in its message (bit flags of OpcodeInfo::position;
// exactly one is set on a valid opcode). Single-packet operations (READ
// request, ACKs, atomics, RESYNC) are "only".
enum OpcodePosition : std::uint8_t {
    kPosFirst = 1u << 0,
    kPosMiddle = 1u << 1,
    kPosLast = 1u << 2,
    kPosOnly = 1u << 3,
};

struct OpcodeInfo {
    const char* name = "INVALID";
    bool valid = false;
    std::uint16_t headers = 0;   // OpcodeHeader flags
    std::uint8_t qp_types = 0;   // OpcodeQpType flags
    std::uint8_t position = 0;   // OpcodePosition flags
    bool payload = false;        // may carry payload bytes
    bool request = false;        // sent by the requester (else a response)
    bool ack_req = false;        // a request the responder must acknowledge (reliable services)
    // The operation the packet belongs to; responses are marked with the
    // operation they answer (READ response: read; ATOMIC ACK: atomic). A
    // plain ACK and RD RESYNC have none.
    bool send = false;
    bool write = false;
    bool read = false;
    bool atomic = false;
    bool consumes_rwqe = false;  // takes a receive WQE at the responder

    constexpr bool has(OpcodeHeader h) const { return (headers & h) != 0; }
    constexpr bool first() const { return (position & kPosFirst) != 0; }
    constexpr bool middle() const { return (position & kPosMiddle) != 0; }
    constexpr bool last() const { return (position & kPosLast) != 0; }
    constexpr bool only() const { return (position & kPosOnly) != 0; }
    constexpr bool starts_message() const { return (position & (kPosFirst | kPosOnly)) != 0; }
    constexpr bool ends_message() const { return (position & (kPosLast | kPosOnly)) != 0; }
    constexpr bool response() const { return valid && !request; }
};

// The entry for an opcode; an opcode IBA does not define gives an entry with
// valid == false.
const OpcodeInfo& opcode_info(std::uint8_t opcode);
inline const OpcodeInfo& opcode_info(Opcode opcode) { return opcode_info(static_cast<std::uint8_t>(opcode)); }

// Bytes of the extension headers an entry lists (0 for an invalid entry).
std::size_t extension_header_bytes(const OpcodeInfo& info);

// Wire sizes of the extension headers ib_packet.hpp does not define.
inline constexpr std::size_t kRdethBytes = 4;

}  // namespace hcasim::packet
