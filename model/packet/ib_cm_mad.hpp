// InfiniBand communication management MADs as IBA volume 1 chapter 12 lays
// them out (class 0x07, class version 2): REQ, MRA, REJ, REP, RTU, DREQ, DREP,
// SIDR_REQ and SIDR_REP in a 256-byte MAD, every field at its table's byte
// and bit position, big-endian, most significant bit first. The connection
// managers of every host API speak these; encode() and decode() are the only
// code that knows the layout.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace hcasim::packet::ibcm {

inline constexpr std::size_t kMadBytes = 256;
inline constexpr std::size_t kMadHeaderBytes = 24;
inline constexpr std::uint8_t kMgmtClass = 0x07;
inline constexpr std::uint8_t kClassVersion = 2;
inline constexpr std::uint8_t kMethodSend = 0x03;

// Attribute IDs (IBA table 102).
enum class Attr : std::uint16_t {
    Req = 0x0010,
    Mra = 0x0011,
    Rej = 0x0012,
    Rep = 0x0013,
    Rtu = 0x0014,
    Dreq = 0x0015,
    Drep = 0x0016,
    SidrReq = 0x0017,
    SidrRep = 0x0018,
};

// Private data each message carries (IBA tables 106-120): what rdma_cm
// hands its users, less the header rdma_cm itself puts in a REQ.
inline constexpr std::size_t kReqPrivateBytes = 92;
inline constexpr std::size_t kMraPrivateBytes = 222;
inline constexpr std::size_t kRejPrivateBytes = 148;
inline constexpr std::size_t kRepPrivateBytes = 196;
inline constexpr std::size_t kRtuPrivateBytes = 224;
inline constexpr std::size_t kDreqPrivateBytes = 220;
inline constexpr std::size_t kDrepPrivateBytes = 224;
inline constexpr std::size_t kSidrReqPrivateBytes = 216;
inline constexpr std::size_t kSidrRepPrivateBytes = 136;
// REJ's additional rejection information and SIDR_REP's additional
// information.
inline constexpr std::size_t kAdditionalInfoBytes = 72;

using Gid = std::array<std::uint8_t, 16>;

// One path of a REQ (primary or alternate).
struct Path {
    std::uint16_t local_lid = 0;
    std::uint16_t remote_lid = 0;
    Gid local_gid{};
    Gid remote_gid{};
    std::uint32_t flow_label = 0;    // 20 bits
    std::uint8_t packet_rate = 0;    // 6 bits, IBA rate encoding
    std::uint8_t traffic_class = 0;
    std::uint8_t hop_limit = 0;
    std::uint8_t sl = 0;             // 4 bits
    bool subnet_local = false;
    std::uint8_t local_ack_timeout = 0;  // 5 bits: 4.096 us x 2^value
};

// Transport service types of a REQ.
enum class Transport : std::uint8_t { Rc = 0, Uc = 1, Rd = 2, Extended = 3 };

struct Req {
    std::uint32_t local_comm_id = 0;
    std::uint64_t service_id = 0;
    std::uint64_t local_ca_guid = 0;
    std::uint32_t local_qkey = 0;
    std::uint32_t local_qpn = 0;            // 24 bits
    std::uint8_t responder_resources = 0;
    std::uint32_t local_eecn = 0;           // 24 bits
    std::uint8_t initiator_depth = 0;
    std::uint32_t remote_eecn = 0;          // 24 bits
    std::uint8_t remote_cm_response_timeout = 0;  // 5 bits
    Transport transport = Transport::Rc;    // 2 bits
    bool end_to_end_flow_control = false;
    std::uint32_t starting_psn = 0;         // 24 bits
    std::uint8_t local_cm_response_timeout = 0;   // 5 bits
    std::uint8_t retry_count = 0;           // 3 bits
    std::uint16_t pkey = 0;
    std::uint8_t path_mtu = 0;              // 4 bits, IBA MTU encoding
    bool rdc_exists = false;
    std::uint8_t rnr_retry_count = 0;       // 3 bits
    std::uint8_t max_cm_retries = 0;        // 4 bits
    bool srq = false;
    std::uint8_t extended_transport = 0;    // 3 bits (XRC: 1)
    Path primary;
    Path alternate;
    std::vector<std::uint8_t> private_data;  // up to kReqPrivateBytes
};

// Which message an MRA or REJ answers.
enum class Answered : std::uint8_t { Req = 0, Rep = 1, Other = 2 };

struct Mra {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    Answered message_mraed = Answered::Req;  // 2 bits
    std::uint8_t service_timeout = 0;        // 5 bits
    std::vector<std::uint8_t> private_data;
};

struct Rej {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    Answered message_rejected = Answered::Req;  // 2 bits
    std::uint16_t reason = 0;                   // IBA table 109
    std::vector<std::uint8_t> additional_info;  // ARI, up to kAdditionalInfoBytes
    std::vector<std::uint8_t> private_data;
};

struct Rep {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    std::uint32_t local_qkey = 0;
    std::uint32_t local_qpn = 0;            // 24 bits
    std::uint32_t local_eecn = 0;           // 24 bits
    std::uint32_t starting_psn = 0;         // 24 bits
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
    std::uint8_t target_ack_delay = 0;      // 5 bits
    std::uint8_t failover_accepted = 0;     // 2 bits
    bool end_to_end_flow_control = false;
    std::uint8_t rnr_retry_count = 0;       // 3 bits
    bool srq = false;
    std::uint64_t local_ca_guid = 0;
    std::vector<std::uint8_t> private_data;
};

struct Rtu {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    std::vector<std::uint8_t> private_data;
};

struct Dreq {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    std::uint32_t remote_qpn = 0;           // 24 bits
    std::vector<std::uint8_t> private_data;
};

struct Drep {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    std::vector<std::uint8_t> private_data;
};

struct SidrReq {
    std::uint32_t request_id = 0;
    std::uint16_t pkey = 0;
    std::uint64_t service_id = 0;
    std::vector<std::uint8_t> private_data;
};

// SIDR_REP status values (IBA table 121).
enum class SidrStatus : std::uint8_t { Valid = 0, NoService = 1, Rejected = 2, NoQp = 3, Redirect = 4, Version = 5 };

struct SidrRep {
    std::uint32_t request_id = 0;
    SidrStatus status = SidrStatus::Valid;
    std::uint32_t qpn = 0;                  // 24 bits
    std::uint64_t service_id = 0;
    std::uint32_t qkey = 0;
    std::vector<std::uint8_t> additional_info;
    std::vector<std::uint8_t> private_data;
};

using Body = std::variant<Req, Mra, Rej, Rep, Rtu, Dreq, Drep, SidrReq, SidrRep>;

struct Mad {
    std::uint64_t transaction_id = 0;
    Body body;
    Attr attr() const;
};

// Why m cannot be encoded (a private data or additional information area
// longer than its message has, a field wider than its bits), or "" when it
// can.
std::string check(const Mad& m);
// Writes kMadBytes bytes: m must pass check(). Private data shorter than its
// area is padded with zeros, as on the wire.
void encode(const Mad& m, std::uint8_t* mad);
// Parses a CM MAD. Private data comes back as the whole area the message
// has (the wire does not carry its length). False, with why set when given,
// for anything that is not a well-formed CM MAD of one of the nine messages.
bool decode(const std::uint8_t* mad, std::size_t len, Mad& m, std::string* why = nullptr);

}  // namespace hcasim::packet::ibcm
