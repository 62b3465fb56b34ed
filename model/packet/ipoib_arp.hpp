// ARP over IPoIB (RFC 826 with the hardware address of RFC 4391 section
// 9.1.1): the 56-byte request and reply by which an IPoIB interface learns
// the QPN and GID behind an IPv4 address, big-endian on the wire. The
// simulator carries it between the adapters' management QPs in a vendor
// MAD; encode_mad() and decode_mad() are that wrapping.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hcasim::packet::ipoib {

inline constexpr std::size_t kArpBytes = 56;
inline constexpr std::size_t kHwAddrBytes = 20;
inline constexpr std::uint16_t kHwTypeInfiniband = 0x0020;
inline constexpr std::uint16_t kProtoIpv4 = 0x0800;
inline constexpr std::uint16_t kOpRequest = 1;
inline constexpr std::uint16_t kOpReply = 2;

// The vendor MAD the ARP rides in: class 0x0A lies in vendor range 1
// (0x09-0x0F), whose MADs have no OUI and are not RMPP.
inline constexpr std::size_t kMadBytes = 256;
inline constexpr std::size_t kMadHeaderBytes = 24;
inline constexpr std::uint8_t kNeighbourMgmtClass = 0x0A;
inline constexpr std::uint8_t kNeighbourClassVersion = 1;
inline constexpr std::uint8_t kMethodSend = 0x03;
inline constexpr std::uint16_t kAttrArp = 0x0001;

// An IPoIB link-layer address: a flags byte, the 24-bit QPN of the
// interface's UD QP, then the port GID. The flags go out as zero and are
// ignored on receipt (connected mode, which uses one of them, is not
// modelled).
struct HwAddr {
    std::uint32_t qpn = 0;  // 24 bits
    std::array<std::uint8_t, 16> gid{};
};

struct Arp {
    std::uint16_t op = kOpRequest;
    HwAddr sender_hw;
    std::uint32_t sender_ip = 0;  // host byte order
    HwAddr target_hw;             // zero in a request
    std::uint32_t target_ip = 0;  // host byte order
};

// Why a cannot be encoded (an operation other than request or reply, a QPN
// wider than 24 bits), or "" when it can.
std::string check(const Arp& a);
// Writes kArpBytes bytes: a must pass check().
void encode(const Arp& a, std::uint8_t* out);
// Parses an IPoIB ARP packet. False, with why set when given, for a hardware
// or protocol type or address length other than IPoIB's and IPv4's, or an
// operation other than request or reply.
bool decode(const std::uint8_t* in, std::size_t len, Arp& a, std::string* why = nullptr);

// Writes a kMadBytes vendor MAD (base version 1, class kNeighbourMgmtClass,
// class version 1, Send, attribute kAttrArp) with the ARP packet right
// after the common header. a must pass check().
void encode_mad(const Arp& a, std::uint64_t transaction_id, std::uint8_t* mad256);
// Parses such a MAD. False, with why set when given, for any other MAD or a
// malformed ARP packet in it.
bool decode_mad(const std::uint8_t* mad, std::size_t len, Arp& a, std::uint64_t& transaction_id,
                std::string* why = nullptr);

}  // namespace hcasim::packet::ipoib
