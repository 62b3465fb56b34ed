// Subnet Administration MADs as IBA volume 1 chapter 15 lays them out (class
// 0x03, class version 2): the PathRecord and MCMemberRecord queries a host
// sends its SA and the answers it gets, in a 256-byte MAD, every field at its
// table's byte and bit position, big-endian, most significant bit first.
// Path resolution and multicast joins of every host API go through these;
// encode() and decode() are the only code that knows the layout.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

namespace hcasim::packet::sa {

inline constexpr std::size_t kMadBytes = 256;
inline constexpr std::size_t kMadHeaderBytes = 24;
// MAD header, RMPP header, SM_Key, AttributeOffset, reserved, ComponentMask
// of every SA MAD: the record starts after them.
inline constexpr std::size_t kSaHeaderBytes = 56;
inline constexpr std::size_t kSaDataBytes = kMadBytes - kSaHeaderBytes;
inline constexpr std::uint8_t kMgmtClass = 0x03;
inline constexpr std::uint8_t kClassVersion = 2;

// Methods: the common ones the records use and the SA's own Delete.
inline constexpr std::uint8_t kMethodGet = 0x01;
inline constexpr std::uint8_t kMethodSet = 0x02;
inline constexpr std::uint8_t kMethodGetResp = 0x81;
inline constexpr std::uint8_t kMethodDelete = 0x15;
inline constexpr std::uint8_t kMethodDeleteResp = 0x95;

// Attribute IDs of the records handled.
inline constexpr std::uint16_t kAttrPathRecord = 0x0035;
inline constexpr std::uint16_t kAttrMcMemberRecord = 0x0038;

// Record sizes on the wire. MCMemberRecord has 52 bytes of fields, padded to
// 56 so that AttributeOffset, in 8-byte units, spans it exactly.
inline constexpr std::size_t kPathRecordBytes = 64;
inline constexpr std::size_t kMcMemberRecordBytes = 56;

// MAD status values of the SA: its class-specific code sits
// in bits 8-14 of the status field, so ERR_NO_RECORDS (3) reads 0x0300.
inline constexpr std::uint16_t kStatusNoResources = 0x0100;
inline constexpr std::uint16_t kStatusReqInvalid = 0x0200;
inline constexpr std::uint16_t kStatusNoRecords = 0x0300;
inline constexpr std::uint16_t kStatusInsufficientComponents = 0x0600;

// ComponentMask bits of PathRecord (IBA 15.2.5.16): a set bit says the
// requester's value of that field must match. ServiceID spans two bits
// (ServiceID8MSB and ServiceID56LSB).
namespace path_mask {
inline constexpr std::uint64_t kServiceId = 3ull << 0;
inline constexpr std::uint64_t kDgid = 1ull << 2;
inline constexpr std::uint64_t kSgid = 1ull << 3;
inline constexpr std::uint64_t kDlid = 1ull << 4;
inline constexpr std::uint64_t kSlid = 1ull << 5;
inline constexpr std::uint64_t kRawTraffic = 1ull << 6;
inline constexpr std::uint64_t kFlowLabel = 1ull << 8;
inline constexpr std::uint64_t kHopLimit = 1ull << 9;
inline constexpr std::uint64_t kTrafficClass = 1ull << 10;
inline constexpr std::uint64_t kReversible = 1ull << 11;
inline constexpr std::uint64_t kNumbPath = 1ull << 12;
inline constexpr std::uint64_t kPkey = 1ull << 13;
inline constexpr std::uint64_t kQosClass = 1ull << 14;
inline constexpr std::uint64_t kSl = 1ull << 15;
inline constexpr std::uint64_t kMtuSelector = 1ull << 16;
inline constexpr std::uint64_t kMtu = 1ull << 17;
inline constexpr std::uint64_t kRateSelector = 1ull << 18;
inline constexpr std::uint64_t kRate = 1ull << 19;
inline constexpr std::uint64_t kPacketLifeTimeSelector = 1ull << 20;
inline constexpr std::uint64_t kPacketLifeTime = 1ull << 21;
inline constexpr std::uint64_t kPreference = 1ull << 22;
}  // namespace path_mask

// ComponentMask bits of MCMemberRecord (IBA 15.2.5.17).
namespace mcmember_mask {
inline constexpr std::uint64_t kMgid = 1ull << 0;
inline constexpr std::uint64_t kPortGid = 1ull << 1;
inline constexpr std::uint64_t kQkey = 1ull << 2;
inline constexpr std::uint64_t kMlid = 1ull << 3;
inline constexpr std::uint64_t kMtuSelector = 1ull << 4;
inline constexpr std::uint64_t kMtu = 1ull << 5;
inline constexpr std::uint64_t kTrafficClass = 1ull << 6;
inline constexpr std::uint64_t kPkey = 1ull << 7;
inline constexpr std::uint64_t kRateSelector = 1ull << 8;
inline constexpr std::uint64_t kRate = 1ull << 9;
inline constexpr std::uint64_t kPacketLifeTimeSelector = 1ull << 10;
inline constexpr std::uint64_t kPacketLifeTime = 1ull << 11;
inline constexpr std::uint64_t kSl = 1ull << 12;
inline constexpr std::uint64_t kFlowLabel = 1ull << 13;
inline constexpr std::uint64_t kHopLimit = 1ull << 14;
inline constexpr std::uint64_t kScope = 1ull << 15;
inline constexpr std::uint64_t kJoinState = 1ull << 16;
inline constexpr std::uint64_t kProxyJoin = 1ull << 17;
}  // namespace mcmember_mask

// JoinState bits of MCMemberRecord (IBA 15.2.5.17).
inline constexpr std::uint8_t kJoinFullMember = 0x1;
inline constexpr std::uint8_t kJoinNonMember = 0x2;
inline constexpr std::uint8_t kJoinSendOnlyNonMember = 0x4;

// The selectors' encoding: how the SA compares the MTU, rate or packet
// lifetime it is given. Best is the largest MTU or rate, the shortest
// lifetime.
enum class Selector : std::uint8_t { GreaterThan = 0, LessThan = 1, Exactly = 2, Best = 3 };

using Gid = std::array<std::uint8_t, 16>;

// IBA 15.2.5.16.
struct PathRecord {
    std::uint64_t service_id = 0;
    Gid dgid{};
    Gid sgid{};
    std::uint16_t dlid = 0;
    std::uint16_t slid = 0;
    bool raw_traffic = false;
    std::uint32_t flow_label = 0;               // 20 bits
    std::uint8_t hop_limit = 0;
    std::uint8_t traffic_class = 0;
    bool reversible = false;
    std::uint8_t numb_path = 0;                 // 7 bits
    std::uint16_t pkey = 0;
    std::uint16_t qos_class = 0;                // 12 bits
    std::uint8_t sl = 0;                        // 4 bits
    std::uint8_t mtu_selector = 0;              // 2 bits, Selector
    std::uint8_t mtu = 0;                       // 6 bits, IBA MTU encoding
    std::uint8_t rate_selector = 0;             // 2 bits
    std::uint8_t rate = 0;                      // 6 bits, IBA rate encoding
    std::uint8_t packet_life_time_selector = 0; // 2 bits
    std::uint8_t packet_life_time = 0;          // 6 bits: 4.096 us x 2^value
    std::uint8_t preference = 0;
};

// IBA 15.2.5.17.
struct McMemberRecord {
    Gid mgid{};
    Gid port_gid{};
    std::uint32_t qkey = 0;
    std::uint16_t mlid = 0;
    std::uint8_t mtu_selector = 0;              // 2 bits
    std::uint8_t mtu = 0;                       // 6 bits
    std::uint8_t traffic_class = 0;
    std::uint16_t pkey = 0;
    std::uint8_t rate_selector = 0;             // 2 bits
    std::uint8_t rate = 0;                      // 6 bits
    std::uint8_t packet_life_time_selector = 0; // 2 bits
    std::uint8_t packet_life_time = 0;          // 6 bits
    std::uint8_t sl = 0;                        // 4 bits
    std::uint32_t flow_label = 0;               // 20 bits
    std::uint8_t hop_limit = 0;
    std::uint8_t scope = 0;                     // 4 bits, as in the MGID
    std::uint8_t join_state = 0;                // 4 bits, kJoin*
    bool proxy_join = false;
};

using Record = std::variant<PathRecord, McMemberRecord>;

struct Mad {
    std::uint8_t method = kMethodGet;
    std::uint16_t status = 0;
    std::uint64_t transaction_id = 0;
    std::uint64_t component_mask = 0;
    Record record;
    std::uint16_t attr() const;
};

// Why m cannot be encoded (a method the SA does not define for its record,
// a field wider than its bits), or "" when it can.
std::string check(const Mad& m);
// Writes kMadBytes bytes: m must pass check(). SM_Key and the RMPP header are
// zero, AttributeOffset spans the record.
void encode(const Mad& m, std::uint8_t* mad);
// Parses an SA MAD carrying a PathRecord or an MCMemberRecord. False, with
// why set when given, for anything else or anything malformed.
bool decode(const std::uint8_t* mad, std::size_t len, Mad& m, std::string* why = nullptr);

}  // namespace hcasim::packet::sa
