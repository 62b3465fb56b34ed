#include "model/packet/cm_mad.hpp"

#include <type_traits>

namespace hcasim::packet {

namespace {

// The VI fields in private data: attributes, then the sender's and the
// wanted address, each as host length, discriminator length, bytes.
constexpr std::uint8_t kFlagPeer = 1, kFlagRdmaWrite = 2, kFlagRdmaRead = 4;
constexpr std::size_t kAttrBytes = 9;  // flags, reason, reliability, max transfer, qos

// IBA REJ reasons (table 109) the VI reasons are sent as.
std::uint16_t iba_reason(CmReject r) {
    switch (r) {
    case CmReject::NoMatch: return 8;   // invalid service ID
    case CmReject::Timeout: return 4;   // timeout
    case CmReject::None:
    case CmReject::Consumer:
    case CmReject::PeerNotReady: break;
    }
    return 28;  // consumer defined
}

void put16(std::vector<std::uint8_t>& v, std::uint32_t x) {
    v.push_back(static_cast<std::uint8_t>(x >> 8));
    v.push_back(static_cast<std::uint8_t>(x));
}
void put32(std::vector<std::uint8_t>& v, std::uint32_t x) {
    put16(v, x >> 16);
    put16(v, x);
}

std::vector<std::uint8_t> vi_fields(const CmMessage& m) {
    std::vector<std::uint8_t> v;
    v.push_back(static_cast<std::uint8_t>((m.peer ? kFlagPeer : 0) | (m.rdma_write ? kFlagRdmaWrite : 0) |
                                          (m.rdma_read ? kFlagRdmaRead : 0)));
    v.push_back(static_cast<std::uint8_t>(m.reason));
    put16(v, m.reliability);
    put32(v, m.max_transfer);
    v.push_back(m.qos);
    for (const CmNetAddress* a : {&m.local, &m.remote}) {
        v.push_back(static_cast<std::uint8_t>(a->host.size()));
        v.push_back(static_cast<std::uint8_t>(a->discriminator.size()));
        v.insert(v.end(), a->host.begin(), a->host.end());
        v.insert(v.end(), a->discriminator.begin(), a->discriminator.end());
    }
    return v;
}

bool parse_vi_fields(const std::vector<std::uint8_t>& v, CmMessage& m) {
    if (v.size() < kAttrBytes + 4) return false;
    const std::uint8_t flags = v[0];
    if (flags & ~(kFlagPeer | kFlagRdmaWrite | kFlagRdmaRead)) return false;
    if (v[1] > static_cast<std::uint8_t>(CmReject::Timeout)) return false;
    m.peer = flags & kFlagPeer;
    m.rdma_write = flags & kFlagRdmaWrite;
    m.rdma_read = flags & kFlagRdmaRead;
    m.reason = static_cast<CmReject>(v[1]);
    m.reliability = static_cast<std::uint16_t>(v[2] << 8 | v[3]);
    m.max_transfer = std::uint32_t{v[4]} << 24 | std::uint32_t{v[5]} << 16 | std::uint32_t{v[6]} << 8 | v[7];
    m.qos = v[8];
    std::size_t at = kAttrBytes;
    for (CmNetAddress* a : {&m.local, &m.remote}) {
        if (at + 2 > v.size()) return false;
        const std::size_t h = v[at], d = v[at + 1];
        if (h + d > kCmMaxAddressBytes || at + 2 + h + d > v.size()) return false;
        a->host.assign(v.begin() + static_cast<std::ptrdiff_t>(at + 2), v.begin() + static_cast<std::ptrdiff_t>(at + 2 + h));
        a->discriminator.assign(v.begin() + static_cast<std::ptrdiff_t>(at + 2 + h),
                                v.begin() + static_cast<std::ptrdiff_t>(at + 2 + h + d));
        at += 2 + h + d;
    }
    return true;
}

}  // namespace

bool fits(const CmMessage& m) {
    return m.local.host.size() + m.local.discriminator.size() <= kCmMaxAddressBytes &&
           m.remote.host.size() + m.remote.discriminator.size() <= kCmMaxAddressBytes;
}

ibcm::Mad to_ib(const CmMessage& m) {
    ibcm::Mad mad;
    mad.transaction_id = m.transaction_id;
    std::vector<std::uint8_t> pd = vi_fields(m);
    switch (m.attr) {
    case CmAttr::Req: {
        ibcm::Req r;
        r.local_comm_id = m.local_comm_id;
        r.service_id = kViServiceId;
        r.local_qpn = m.qpn;
        r.starting_psn = m.start_psn;
        r.transport = m.reliability == 1 ? ibcm::Transport::Uc : ibcm::Transport::Rc;
        r.primary.sl = m.qos & 0xf;
        r.private_data = std::move(pd);
        mad.body = std::move(r);
        break;
    }
    case CmAttr::Mra: {
        ibcm::Mra r;
        r.local_comm_id = m.local_comm_id;
        r.remote_comm_id = m.remote_comm_id;
        r.private_data = std::move(pd);
        mad.body = std::move(r);
        break;
    }
    case CmAttr::Rej: {
        ibcm::Rej r;
        r.local_comm_id = m.local_comm_id;
        r.remote_comm_id = m.remote_comm_id;
        r.reason = iba_reason(m.reason);
        r.private_data = std::move(pd);
        mad.body = std::move(r);
        break;
    }
    case CmAttr::Rep: {
        ibcm::Rep r;
        r.local_comm_id = m.local_comm_id;
        r.remote_comm_id = m.remote_comm_id;
        r.local_qpn = m.qpn;
        r.starting_psn = m.start_psn;
        r.private_data = std::move(pd);
        mad.body = std::move(r);
        break;
    }
    case CmAttr::Rtu: {
        ibcm::Rtu r;
        r.local_comm_id = m.local_comm_id;
        r.remote_comm_id = m.remote_comm_id;
        r.private_data = std::move(pd);
        mad.body = std::move(r);
        break;
    }
    case CmAttr::Dreq:
    case CmAttr::Drep: {
        // A VI's disconnection names the two VIs: the receiver's in the
        // DREQ's remote QPN, the sender's in private data.
        std::vector<std::uint8_t> qps = std::move(pd);
        put32(qps, m.qpn);
        put32(qps, m.remote_qpn);
        if (m.attr == CmAttr::Dreq) {
            ibcm::Dreq r;
            r.local_comm_id = m.local_comm_id;
            r.remote_comm_id = m.remote_comm_id;
            r.remote_qpn = m.remote_qpn;
            r.private_data = std::move(qps);
            mad.body = std::move(r);
        } else {
            ibcm::Drep r;
            r.local_comm_id = m.local_comm_id;
            r.remote_comm_id = m.remote_comm_id;
            r.private_data = std::move(qps);
            mad.body = std::move(r);
        }
        break;
    }
    case CmAttr::SidrReq:
    case CmAttr::SidrRep: break;  // not in the protocol: callers never build them
    }
    return mad;
}

bool from_ib(const ibcm::Mad& mad, CmMessage& m) {
    m = CmMessage{};
    m.attr = mad.attr();
    m.transaction_id = mad.transaction_id;
    return std::visit(
        [&m](const auto& b) -> bool {
            using T = std::decay_t<decltype(b)>;
            if constexpr (std::is_same_v<T, ibcm::SidrReq> || std::is_same_v<T, ibcm::SidrRep>) {
                return false;
            } else {
                if constexpr (std::is_same_v<T, ibcm::Req>) {
                    if (b.service_id != kViServiceId) return false;
                    m.qpn = b.local_qpn;
                    m.start_psn = b.starting_psn;
                } else {
                    m.remote_comm_id = b.remote_comm_id;
                }
                if constexpr (std::is_same_v<T, ibcm::Rep>) {
                    m.qpn = b.local_qpn;
                    m.start_psn = b.starting_psn;
                }
                m.local_comm_id = b.local_comm_id;
                if (!parse_vi_fields(b.private_data, m)) return false;
                if constexpr (std::is_same_v<T, ibcm::Dreq> || std::is_same_v<T, ibcm::Drep>) {
                    // The two QPNs follow the fields.
                    std::size_t at = kAttrBytes + 4 + m.local.host.size() + m.local.discriminator.size() +
                                     m.remote.host.size() + m.remote.discriminator.size();
                    const auto& v = b.private_data;
                    if (at + 8 > v.size()) return false;
                    auto get32 = [&v](std::size_t i) {
                        return std::uint32_t{v[i]} << 24 | std::uint32_t{v[i + 1]} << 16 | std::uint32_t{v[i + 2]} << 8 |
                               v[i + 3];
                    };
                    m.qpn = get32(at) & 0xffffff;
                    m.remote_qpn = get32(at + 4) & 0xffffff;
                }
                return true;
            }
        },
        mad.body);
}

void encode(const CmMessage& m, std::uint8_t* mad) { ibcm::encode(to_ib(m), mad); }

bool decode(const std::uint8_t* mad, std::size_t len, CmMessage& m) {
    ibcm::Mad ib;
    return ibcm::decode(mad, len, ib) && from_ib(ib, m);
}

}  // namespace hcasim::packet
