#include "model/packet/cm_mad.hpp"

#include <cstring>

namespace hcasim::packet {

namespace {

// Offsets in the MAD.
constexpr std::size_t kBaseVersion = 0, kMgmtClass = 1, kClassVersion = 2, kMethod = 3, kStatus = 4,
                      kTransactionId = 8, kAttributeId = 16, kData = 24;
// Offsets in the data area.
constexpr std::size_t kLocalCommId = 0, kRemoteCommId = 4, kQpn = 8, kRemoteQpn = 12, kStartPsn = 16,
                      kMaxTransfer = 20, kReliability = 24, kReason = 26, kQos = 28, kFlags = 29,
                      kLocalAddr = 32, kRemoteAddr = kLocalAddr + 4 + kCmMaxAddressBytes;
constexpr std::uint8_t kFlagPeer = 1, kFlagRdmaWrite = 2, kFlagRdmaRead = 4;
static_assert(kData + kRemoteAddr + 4 + kCmMaxAddressBytes <= kMadBytes, "VI CM fields fit in a MAD");

void put16(std::uint8_t* p, std::uint32_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
    put16(p, v >> 16);
    put16(p + 2, v);
}
std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
std::uint32_t get32(const std::uint8_t* p) { return std::uint32_t{get16(p)} << 16 | get16(p + 2); }

void put_addr(std::uint8_t* p, const CmNetAddress& a) {
    put16(p, static_cast<std::uint32_t>(a.host.size()));
    put16(p + 2, static_cast<std::uint32_t>(a.discriminator.size()));
    if (!a.host.empty()) std::memcpy(p + 4, a.host.data(), a.host.size());
    if (!a.discriminator.empty()) std::memcpy(p + 4 + a.host.size(), a.discriminator.data(), a.discriminator.size());
}

bool get_addr(const std::uint8_t* p, CmNetAddress& a) {
    const std::size_t h = get16(p), d = get16(p + 2);
    if (h + d > kCmMaxAddressBytes) return false;
    a.host.assign(p + 4, p + 4 + h);
    a.discriminator.assign(p + 4 + h, p + 4 + h + d);
    return true;
}

}  // namespace

bool fits(const CmMessage& m) {
    return m.local.host.size() + m.local.discriminator.size() <= kCmMaxAddressBytes &&
           m.remote.host.size() + m.remote.discriminator.size() <= kCmMaxAddressBytes;
}

void encode(const CmMessage& m, std::uint8_t* mad) {
    std::memset(mad, 0, kMadBytes);
    mad[kBaseVersion] = 1;
    mad[kMgmtClass] = kMgmtClassCm;
    mad[kClassVersion] = 2;
    mad[kMethod] = kMadMethodSend;
    put32(mad + kTransactionId, static_cast<std::uint32_t>(m.transaction_id >> 32));
    put32(mad + kTransactionId + 4, static_cast<std::uint32_t>(m.transaction_id));
    put16(mad + kAttributeId, static_cast<std::uint16_t>(m.attr));
    std::uint8_t* d = mad + kData;
    put32(d + kLocalCommId, m.local_comm_id);
    put32(d + kRemoteCommId, m.remote_comm_id);
    put32(d + kQpn, m.qpn);
    put32(d + kRemoteQpn, m.remote_qpn);
    put32(d + kStartPsn, m.start_psn);
    put32(d + kMaxTransfer, m.max_transfer);
    put16(d + kReliability, m.reliability);
    put16(d + kReason, static_cast<std::uint16_t>(m.reason));
    d[kQos] = m.qos;
    d[kFlags] = static_cast<std::uint8_t>((m.peer ? kFlagPeer : 0) | (m.rdma_write ? kFlagRdmaWrite : 0) |
                                          (m.rdma_read ? kFlagRdmaRead : 0));
    put_addr(d + kLocalAddr, m.local);
    put_addr(d + kRemoteAddr, m.remote);
}

bool decode(const std::uint8_t* mad, std::size_t len, CmMessage& m) {
    if (len < kMadBytes) return false;
    if (mad[kBaseVersion] != 1 || mad[kMgmtClass] != kMgmtClassCm || mad[kMethod] != kMadMethodSend) return false;
    if (get16(mad + kStatus) != 0) return false;
    const std::uint16_t attr = get16(mad + kAttributeId);
    if (attr < static_cast<std::uint16_t>(CmAttr::Req) || attr > static_cast<std::uint16_t>(CmAttr::Drep)) return false;
    m.attr = static_cast<CmAttr>(attr);
    m.transaction_id = std::uint64_t{get32(mad + kTransactionId)} << 32 | get32(mad + kTransactionId + 4);
    const std::uint8_t* d = mad + kData;
    m.local_comm_id = get32(d + kLocalCommId);
    m.remote_comm_id = get32(d + kRemoteCommId);
    m.qpn = get32(d + kQpn) & 0xffffff;
    m.remote_qpn = get32(d + kRemoteQpn) & 0xffffff;
    m.start_psn = get32(d + kStartPsn) & 0xffffff;
    m.max_transfer = get32(d + kMaxTransfer);
    m.reliability = get16(d + kReliability);
    m.reason = static_cast<CmReject>(get16(d + kReason));
    if (get16(d + kReason) > static_cast<std::uint16_t>(CmReject::Timeout)) return false;
    m.qos = d[kQos];
    m.peer = d[kFlags] & kFlagPeer;
    m.rdma_write = d[kFlags] & kFlagRdmaWrite;
    m.rdma_read = d[kFlags] & kFlagRdmaRead;
    return get_addr(d + kLocalAddr, m.local) && get_addr(d + kRemoteAddr, m.remote);
}

}  // namespace hcasim::packet
