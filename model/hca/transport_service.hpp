// The transport service of a QP as data: what each QP type does differently
// (RC, UC, UD and the VI Architecture's three reliability levels) is looked
// up here by the requester, responder and completer instead of being
// branched on where it matters.
#pragma once

#include <cstdint>

#include "model/packet/opcode_table.hpp"

namespace hcasim::hca {

// XRC QPs come in two roles: the initiator sends (to an SRQ named in each
// request) and the target receives into the SRQs of its XRC domain.
enum class QpType : std::uint8_t { Rc, Uc, Ud, XrcInitiator, XrcTarget, ViUnreliable, ViReliableDelivery, ViReliableReception };

struct TransportService {
    const char* name;
    std::uint8_t opcode_base;    // top three bits of its BTH opcodes (IBA table 38)
    std::uint8_t opcode_types;   // packet::OpcodeQpType its packets carry
    bool connected;              // one peer, set at RTR; else addressed per WQE
    bool acknowledged;           // the responder ACKs and the requester waits for it
    bool reads;                  // RDMA READ allowed
    bool writes;                 // RDMA WRITE allowed
    bool atomics;                // compare & swap and fetch & add allowed
    bool rnr_nak;                // a message with no receive WQE is RNR NAKed (else dropped)
    bool resync_on_gap;          // PSN gaps drop the message in progress, the next start resynchronises
    bool checks_psn;             // the responder checks PSNs at all (not UD)
    bool ack_when_visible;       // VI reliable reception: ACK once the data is in host memory
    bool vi;                     // VI Architecture semantics (descriptors, VI errors)
};

// clang-format off
inline constexpr TransportService kTransportServices[] = {
    //  name          base  types            conn   acked  reads  writes atomic rnr    resync psn    visible vi
    {"RC",            0x00, packet::kQpRc,   true,  true,  true,  true,  true,  true,  false, true,  false,  false},
    {"UC",            0x20, packet::kQpUc,   true,  false, false, true,  false, false, true,  true,  false,  false},
    {"UD",            0x60, packet::kQpUd,   false, false, false, false, false, false, false, false, false,  false},
    {"XRC initiator", 0xa0, packet::kQpXrc,  true,  true,  true,  true,  true,  true,  false, true,  false,  false},
    {"XRC target",    0xa0, packet::kQpXrc,  true,  true,  true,  true,  true,  true,  false, true,  false,  false},
    // VI levels ride on RC packets; only the unreliable one goes without
    // ACKs. The VI Architecture has no atomics.
    {"VI unreliable", 0x00, packet::kQpRc,   true,  false, true,  true,  false, false, true,  true,  false,  true},
    {"VI reliable delivery", 0x00, packet::kQpRc, true, true, true, true, false, false, false, true, false, true},
    {"VI reliable reception", 0x00, packet::kQpRc, true, true, true, true, false, false, false, true, true, true},
};
// clang-format on

inline const TransportService& transport_service(QpType t) { return kTransportServices[static_cast<int>(t)]; }

}  // namespace hcasim::hca
