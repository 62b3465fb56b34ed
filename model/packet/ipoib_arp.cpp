#include "model/packet/ipoib_arp.hpp"

#include <cstdio>
#include <cstring>

namespace hcasim::packet::ipoib {

namespace {

// ARP packet offsets (RFC 826): the fixed header, then sender and target
// hardware and protocol addresses at the lengths the header gives.
constexpr std::size_t kHwType = 0, kProto = 2, kHwLen = 4, kProtoLen = 5, kOp = 6, kSenderHw = 8, kSenderIp = 28,
                      kTargetHw = 32, kTargetIp = 52;
// Within a hardware address: the flags byte, then QPN, then GID.
constexpr std::size_t kQpn = 1, kGid = 4;
// MAD header offsets (IBA 13.4.3).
constexpr std::size_t kBaseVersion = 0, kClass = 1, kVersion = 2, kMethod = 3, kStatus = 4, kTid = 8, kAttrId = 16;

void put(std::uint8_t* p, unsigned bytes, std::uint64_t v) {
    for (unsigned i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * (bytes - 1 - i)));
}

std::uint64_t get(const std::uint8_t* p, unsigned bytes) {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) v = v << 8 | p[i];
    return v;
}

void put_hw(std::uint8_t* p, const HwAddr& h) {
    p[0] = 0;
    put(p + kQpn, 3, h.qpn);
    std::memcpy(p + kGid, h.gid.data(), h.gid.size());
}

HwAddr get_hw(const std::uint8_t* p) {
    HwAddr h;
    h.qpn = static_cast<std::uint32_t>(get(p + kQpn, 3));
    std::memcpy(h.gid.data(), p + kGid, h.gid.size());
    return h;
}

std::string hex(unsigned v, int digits) {
    char s[12];
    std::snprintf(s, sizeof s, "0x%0*x", digits, v);
    return s;
}

}  // namespace

std::string check(const Arp& a) {
    if (a.op != kOpRequest && a.op != kOpReply)
        return "ARP operation " + std::to_string(a.op) + " is neither request (1) nor reply (2)";
    if (a.sender_hw.qpn >> 24) return "sender QPN " + hex(a.sender_hw.qpn, 6) + " does not fit its 24 bits";
    if (a.target_hw.qpn >> 24) return "target QPN " + hex(a.target_hw.qpn, 6) + " does not fit its 24 bits";
    return "";
}

void encode(const Arp& a, std::uint8_t* out) {
    put(out + kHwType, 2, kHwTypeInfiniband);
    put(out + kProto, 2, kProtoIpv4);
    out[kHwLen] = kHwAddrBytes;
    out[kProtoLen] = 4;
    put(out + kOp, 2, a.op);
    put_hw(out + kSenderHw, a.sender_hw);
    put(out + kSenderIp, 4, a.sender_ip);
    put_hw(out + kTargetHw, a.target_hw);
    put(out + kTargetIp, 4, a.target_ip);
}

bool decode(const std::uint8_t* in, std::size_t len, Arp& a, std::string* why) {
    auto fail = [&](const std::string& reason) {
        if (why) *why = reason;
        return false;
    };
    if (len < kArpBytes) return fail("an IPoIB ARP packet is 56 bytes, not " + std::to_string(len));
    const auto hw_type = static_cast<unsigned>(get(in + kHwType, 2));
    if (hw_type != kHwTypeInfiniband) return fail("hardware type " + std::to_string(hw_type) + ", not 32 (InfiniBand)");
    const auto proto = static_cast<unsigned>(get(in + kProto, 2));
    if (proto != kProtoIpv4) return fail("protocol " + hex(proto, 4) + ", not 0x0800 (IPv4)");
    if (in[kHwLen] != kHwAddrBytes)
        return fail("hardware address length " + std::to_string(in[kHwLen]) + ", not 20");
    if (in[kProtoLen] != 4) return fail("protocol address length " + std::to_string(in[kProtoLen]) + ", not 4");
    const auto op = static_cast<std::uint16_t>(get(in + kOp, 2));
    if (op != kOpRequest && op != kOpReply)
        return fail("ARP operation " + std::to_string(op) + " is neither request (1) nor reply (2)");
    a.op = op;
    a.sender_hw = get_hw(in + kSenderHw);
    a.sender_ip = static_cast<std::uint32_t>(get(in + kSenderIp, 4));
    a.target_hw = get_hw(in + kTargetHw);
    a.target_ip = static_cast<std::uint32_t>(get(in + kTargetIp, 4));
    return true;
}

void encode_mad(const Arp& a, std::uint64_t transaction_id, std::uint8_t* mad256) {
    std::memset(mad256, 0, kMadBytes);
    mad256[kBaseVersion] = 1;
    mad256[kClass] = kNeighbourMgmtClass;
    mad256[kVersion] = kNeighbourClassVersion;
    mad256[kMethod] = kMethodSend;
    put(mad256 + kTid, 8, transaction_id);
    put(mad256 + kAttrId, 2, kAttrArp);
    encode(a, mad256 + kMadHeaderBytes);
}

bool decode_mad(const std::uint8_t* mad, std::size_t len, Arp& a, std::uint64_t& transaction_id, std::string* why) {
    auto fail = [&](const std::string& reason) {
        if (why) *why = reason;
        return false;
    };
    if (len < kMadBytes) return fail("a neighbour MAD is 256 bytes, not " + std::to_string(len));
    if (mad[kBaseVersion] != 1) return fail("base version " + std::to_string(mad[kBaseVersion]) + ", not 1");
    if (mad[kClass] != kNeighbourMgmtClass)
        return fail("management class " + hex(mad[kClass], 2) + ", not 0x0a (neighbour)");
    if (mad[kVersion] != kNeighbourClassVersion)
        return fail("neighbour class version " + std::to_string(mad[kVersion]) + ", not 1");
    if (mad[kMethod] != kMethodSend) return fail("method " + hex(mad[kMethod], 2) + ", not Send");
    const auto status = static_cast<unsigned>(get(mad + kStatus, 2));
    if (status != 0) return fail("MAD status " + hex(status, 4) + ", not 0");
    const auto attr = static_cast<unsigned>(get(mad + kAttrId, 2));
    if (attr != kAttrArp) return fail("attribute " + hex(attr, 4) + ", not 0x0001 (ARP)");
    Arp parsed;
    if (!decode(mad + kMadHeaderBytes, len - kMadHeaderBytes, parsed, why)) return false;
    a = parsed;
    transaction_id = get(mad + kTid, 8);
    return true;
}

}  // namespace hcasim::packet::ipoib
