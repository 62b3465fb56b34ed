// Multicast addressing (IBA 4.1.1, 7.11.1, 9.6.1.2): the LID range the
// subnet manager hands out for groups, what makes a GID a group's, the
// destination QP every multicast packet carries, and the two fields a switch
// or port reads off the wire without parsing the packet.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/packet/ib_packet.hpp"

namespace hcasim::packet {

// Multicast LIDs; 0xFFFF above them is the permissive LID, not a group's.
inline constexpr std::uint16_t kMulticastLidFirst = 0xC000;
inline constexpr std::uint16_t kMulticastLidLast = 0xFFFE;
// The BTH DestQP of every multicast packet: the receiving adapter picks the
// QPs from its group table, not from the packet.
inline constexpr std::uint32_t kMulticastQpn = 0xFFFFFF;

inline bool is_multicast_lid(std::uint16_t lid) { return lid >= kMulticastLidFirst && lid <= kMulticastLidLast; }
// A multicast GID starts with 0xFF, as an IPv6 multicast address does.
inline bool is_multicast_gid(const std::uint8_t* gid) { return gid[0] == 0xFF; }

// The DLID of a packet on the wire (LRH bytes 2-3); 0 when too short.
inline std::uint16_t wire_dlid(const std::uint8_t* buf, std::size_t n) {
    return n >= kLrhBytes ? static_cast<std::uint16_t>(buf[2] << 8 | buf[3]) : 0;
}

// The DGID of a packet on the wire when it has a GRH (LRH LNH = 3), else null.
inline const std::uint8_t* wire_dgid(const std::uint8_t* buf, std::size_t n) {
    constexpr std::size_t kDgidOffset = kLrhBytes + 24;  // GRH: 8 bytes, then SGID, then DGID
    if (n < kLrhBytes + kGrhBytes || (buf[1] & 3) != 3) return nullptr;
    return buf + kDgidOffset;
}

}  // namespace hcasim::packet
