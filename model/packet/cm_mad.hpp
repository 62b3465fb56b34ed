// Connection management datagrams (IBA 16.7, class 0x07) carrying the VI
// connection protocol: a 24-byte MAD common header, then the VI connection
// fields below, in a 256-byte MAD sent as a UD SEND to QP1. All wire fields
// are big-endian; encode()/decode() are the only code that knows the layout.
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
inline constexpr std::size_t kCmMaxAddressBytes = 64;  // host address + discriminator

// CM attribute IDs (IBA table 102): this protocol uses REQ to DREP.
using CmAttr = ibcm::Attr;

// REJ reasons this protocol uses.
enum class CmReject : std::uint16_t {
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

// Writes a 256-byte MAD. Addresses longer than their fields are an error
// the caller checks first (fits()).
bool fits(const CmMessage& m);
void encode(const CmMessage& m, std::uint8_t* mad);
// Parses a MAD; false when it is not a well-formed VI CM message.
bool decode(const std::uint8_t* mad, std::size_t len, CmMessage& m);

}  // namespace hcasim::packet
