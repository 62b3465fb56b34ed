// The VI connection protocol carried in InfiniBand CM MADs (ib_cm_mad):
// a VI connection request is a REQ to the VI service ID, answered by MRA,
// REP, RTU or REJ and ended by DREQ/DREP, like any IB CM connection. The VI
// attributes that must match (reliability, maximum transfer, QoS, RDMA
// rights) and the two network addresses (host address and discriminator)
// travel in the messages' private data. encode()/decode() are the only code
// that knows where.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/packet/ib_cm_mad.hpp"

namespace hcasim::packet {

inline constexpr std::size_t kMadBytes = ibcm::kMadBytes;
inline constexpr std::uint8_t kMgmtClassCm = ibcm::kMgmtClass;
inline constexpr std::uint8_t kMadMethodSend = ibcm::kMethodSend;
inline constexpr std::uint32_t kGsiQkey = 0x80010000;
// The service ID VI connection requests name ("VIPL" in its low bytes, in
// the IBA range a vendor may assign).
inline constexpr std::uint64_t kViServiceId = 0x020000005649504cull;
// Host address plus discriminator, each of the two a REQ's 92 bytes of
// private data must hold beside the VI attributes.
inline constexpr std::size_t kCmMaxAddressBytes = 39;

// CM attribute IDs (IBA table 102).
using CmAttr = ibcm::Attr;

// REJ reasons of the VI protocol, carried beside the IBA reason they map to.
enum class CmReject : std::uint8_t {
    None = 0,
    NoMatch = 1,        // no server request waits for that discriminator
    Consumer = 2,       // the server rejected the request
    PeerNotReady = 3,   // peer-to-peer: no matching request posted yet
    Timeout = 4,        // the other side gave up waiting
};

struct CmNetAddress {
    std::vector<std::uint8_t> host;
    std::vector<std::uint8_t> discriminator;
    bool operator==(const CmNetAddress& o) const { return host == o.host && discriminator == o.discriminator; }
};

struct CmMessage {
    CmAttr attr = CmAttr::Req;
    std::uint64_t transaction_id = 0;
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    bool peer = false;               // peer-to-peer connection request
    CmReject reason = CmReject::None;
    std::uint32_t qpn = 0;           // the sender's VI
    std::uint32_t remote_qpn = 0;    // DREQ/DREP: the receiver's VI
    std::uint32_t start_psn = 0;
    std::uint16_t reliability = 0;   // VI reliability level bit
    std::uint32_t max_transfer = 0;
    std::uint8_t qos = 0;            // service level
    bool rdma_write = false;
    bool rdma_read = false;
    CmNetAddress local;              // the sender's address
    CmNetAddress remote;             // the address it wants
};

// Whether the addresses fit the private data (the caller checks first).
bool fits(const CmMessage& m);
// The IB CM message that carries m (SIDR messages are not in the protocol).
ibcm::Mad to_ib(const CmMessage& m);
// The VI message an IB CM message carries; false when it is not one of the
// VI protocol's (a REQ to another service, SIDR, private data that does not
// parse).
bool from_ib(const ibcm::Mad& mad, CmMessage& m);
// Writes a 256-byte MAD (to_ib, then ibcm::encode).
void encode(const CmMessage& m, std::uint8_t* mad);
// Parses a MAD; false when it is not a well-formed VI CM message.
bool decode(const std::uint8_t* mad, std::size_t len, CmMessage& m);

}  // namespace hcasim::packet
