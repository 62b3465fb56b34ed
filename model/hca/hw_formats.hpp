// The adapter's host-visible formats: work queue entries, completion queue
// entries, doorbell registers. One definition shared by the driver, the model
// and the tests. Every struct is packed and its size checked; fields are in
// host byte order (little-endian x86 host, as the adapter's DMA sees it).
#pragma once

#include <cstdint>

namespace hcasim::hca {

// ---- Send queue WQE: control segment, [remote address segment],
// ---- then data segments or inline data. Stride is a power of two >= 64.

enum class WqeOpcode : std::uint8_t {
    Send = 0,
    SendImm = 1,
    RdmaWrite = 2,
    RdmaWriteImm = 3,
    RdmaRead = 4,
};

enum WqeFlags : std::uint8_t {
    kWqeSignaled = 1 << 0,   // write a CQE when this WQE completes
    kWqeSolicited = 1 << 1,  // set BTH.SE on the last packet
    kWqeInline = 1 << 2,     // payload follows the control/raddr segments
    kWqeFence = 1 << 3,      // wait for outstanding RDMA reads first
};

struct SendWqeCtrl {
    std::uint8_t opcode;        // WqeOpcode
    std::uint8_t flags;         // WqeFlags
    std::uint8_t num_sge;       // data segments that follow (0 if inline)
    std::uint8_t reserved0;
    std::uint32_t inline_bytes;  // inline payload length
    std::uint32_t imm_data;     // network byte order, as it goes on the wire
    std::uint16_t wqe_index;    // producer index of this WQE (CQE echoes it)
    std::uint16_t reserved1;
};
static_assert(sizeof(SendWqeCtrl) == 16, "control segment is 16 bytes");

struct RemoteAddrSeg {
    std::uint64_t remote_addr;
    std::uint32_t rkey;
    std::uint32_t reserved;
};
static_assert(sizeof(RemoteAddrSeg) == 16, "remote address segment is 16 bytes");

struct DataSeg {
    std::uint64_t addr;
    std::uint32_t lkey;
    std::uint32_t length;
};
static_assert(sizeof(DataSeg) == 16, "data segment is 16 bytes");

// ---- Receive queue WQE: header then data segments. Stride power of two.
struct RecvWqeCtrl {
    std::uint16_t wqe_index;
    std::uint8_t num_sge;
    std::uint8_t reserved0;
    std::uint32_t reserved1[3];
};
static_assert(sizeof(RecvWqeCtrl) == 16, "receive control segment is 16 bytes");

// ---- Completion queue entry (32 bytes).
enum class CqeOpcode : std::uint8_t {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    Recv = 3,
    RecvRdmaWithImm = 4,
};

// Syndromes the adapter reports; the driver maps them to ibv_wc_status.
enum class CqeStatus : std::uint8_t {
    Success = 0,
    LocalLength = 1,
    LocalQpOperation = 2,
    LocalProtection = 4,
    WrFlush = 5,
    BadResponse = 7,
    LocalAccess = 8,
    RemoteInvalidRequest = 9,
    RemoteAccess = 10,
    RemoteOperation = 11,
    RetryExceeded = 12,
    RnrRetryExceeded = 13,
    RemoteAborted = 16,
    GeneralError = 21,
};

enum CqeFlags : std::uint8_t {
    kCqeIsSend = 1 << 0,    // completion of a send-queue WQE
    kCqeWithImm = 1 << 1,   // imm_data is valid
    kCqeSolicited = 1 << 2,
};

struct Cqe {
    std::uint32_t qpn;
    std::uint32_t byte_len;
    std::uint32_t imm_data;   // network byte order
    std::uint32_t src_qp;
    std::uint16_t wqe_index;
    std::uint16_t slid;
    std::uint8_t opcode;      // CqeOpcode
    std::uint8_t status;      // CqeStatus
    std::uint8_t flags;       // CqeFlags
    std::uint8_t vendor_err;
    std::uint32_t reserved;
    std::uint8_t reserved1[3];
    std::uint8_t owner;       // bit 0 flips each pass over the ring
};
static_assert(sizeof(Cqe) == 32, "CQE is 32 bytes");

// ---- Doorbell records in host memory, written by the driver, read by the
// ---- adapter when its cached copy says a ring is full.
struct CqDoorbellRecord {
    std::uint32_t consumer_index;
    std::uint32_t reserved;
};
static_assert(sizeof(CqDoorbellRecord) == 8, "CQ doorbell record is 8 bytes");

// ---- MMIO doorbell registers in BAR0 (one UAR page per context).
inline constexpr std::uint32_t kUarSendDoorbell = 0x14;   // u32 qpn, u16 producer index
inline constexpr std::uint32_t kUarRecvDoorbell = 0x18;   // u32 qpn, u16 producer index
inline constexpr std::uint32_t kUarCqArm = 0x0c;          // u32 cqn, u32 consumer index, u8 solicited
inline constexpr std::uint32_t kUarBlueFlame = 0x800;     // WQE written by the CPU, 64 B per write
inline constexpr std::uint32_t kDoorbellBytes = 8;
inline constexpr std::uint32_t kBlueFlameChunkBytes = 64;  // one write-combined store

inline constexpr std::uint32_t kWqeBasicBlock = 64;  // WQEs are cache-line aligned and padded

}  // namespace hcasim::hca
