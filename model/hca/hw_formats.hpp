// The adapter's host-visible formats: work queue entries, completion queue
// entries, doorbell registers. One definition shared by the driver, the model
// and the tests. Every struct is packed and its size checked; fields are in
// host byte order (little-endian x86 host, as the adapter's DMA sees it).
#pragma once

#include <cstddef>
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
    AtomicCompareSwap = 5,
    AtomicFetchAdd = 6,
    // Memory windows (IBA 10.6.7). BindWindow: control then a BindSeg.
    // LocalInvalidate and SendInvalidate carry the rkey to invalidate in
    // the control segment's imm_data (host byte order); SendInvalidate is a
    // SEND otherwise.
    BindWindow = 7,
    LocalInvalidate = 8,
    SendInvalidate = 9,
};

// An atomic WQE: control, remote address, this, then one 8-byte data
// segment for the original value.
struct AtomicSeg {
    std::uint64_t swap_add;  // swap value (compare & swap) or addend
    std::uint64_t compare;
};
static_assert(sizeof(AtomicSeg) == 16, "atomic segment is 16 bytes");
inline constexpr std::uint32_t kAtomicBytes = 8;

inline bool is_atomic(WqeOpcode op) { return op == WqeOpcode::AtomicCompareSwap || op == WqeOpcode::AtomicFetchAdd; }
// Answered by the responder with data (READ response, ATOMIC ACKNOWLEDGE),
// not by an ACK: each holds one of the QP's max_rd_atomic.
inline bool is_read_or_atomic(WqeOpcode op) { return op == WqeOpcode::RdmaRead || is_atomic(op); }

// A bind WQE: control, then this. The window gets [addr, addr+length) of
// the region, the rights and the new key; a type 1 bind of length 0 with
// no region unbinds it.
struct BindSeg {
    std::uint32_t window_key;  // its index (key >> 8) names the window's MPT entry
    std::uint32_t new_key;     // the window's key once bound
    std::uint32_t region_key;  // lkey of the region it binds to (0: unbind, type 1)
    std::uint32_t access;      // remote rights it grants (Access bits)
    std::uint64_t addr;
    std::uint64_t length;
    std::uint8_t type;         // kBindType1 (the Bind MW verb) or kBindType2 (a bind WR)
    std::uint8_t reserved[15];
};
static_assert(sizeof(BindSeg) == 48, "bind segment is 48 bytes");
inline constexpr std::uint8_t kBindType1 = 1;
inline constexpr std::uint8_t kBindType2 = 2;
// Memory management operations: executed by the adapter, nothing on the wire.
inline bool is_local_operation(WqeOpcode op) { return op == WqeOpcode::BindWindow || op == WqeOpcode::LocalInvalidate; }

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

// UD send WQEs carry this instead of a remote address segment: the address
// vector (from the address handle) and the destination QP and Q_Key.
struct DatagramSeg {
    std::uint32_t dest_qpn;
    std::uint32_t qkey;
    std::uint16_t dlid;
    std::uint8_t sl;
    std::uint8_t flags;          // kDatagramGlobal
    std::uint8_t sgid_index;
    std::uint8_t hop_limit;
    std::uint8_t traffic_class;
    std::uint8_t reserved0;
    std::uint32_t flow_label;
    std::uint8_t dgid[16];
    std::uint32_t reserved1[3];
};
static_assert(sizeof(DatagramSeg) == 48, "datagram segment is 48 bytes");
inline constexpr std::uint8_t kDatagramGlobal = 1 << 0;  // send with a GRH

// XRC initiator send WQEs carry this after the control segment: the SRQ at
// the target the request is for (the XRCETH).
struct XrcSeg {
    std::uint32_t remote_srqn;
    std::uint32_t reserved[3];
};
static_assert(sizeof(XrcSeg) == 16, "XRC segment is 16 bytes");

// The reserved L_Key: a data segment under it holds a bus address, not a
// registered virtual one. Only the firmware's QPs may use it (IBA 10.6.3.4's
// privileged reserved L_Key); any other protection domain gets a protection
// error. Its index (0) is one no region ever has.
inline constexpr std::uint32_t kReservedLkey = 0x000000ff;

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
    // Shared receive queues: the ring slot of the next WQE in the adapter's
    // list (the driver links freed slots at the tail, as mlx4 does), so
    // slots can be reused out of order. Unused on a QP's own receive ring.
    std::uint16_t next_index;
    std::uint16_t reserved1;
    std::uint32_t reserved2[2];
};
static_assert(sizeof(RecvWqeCtrl) == 16, "receive control segment is 16 bytes");

// ---- Completion queue entry (32 bytes).
enum class CqeOpcode : std::uint8_t {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    Recv = 3,
    RecvRdmaWithImm = 4,
    CompareSwap = 5,
    FetchAdd = 6,
    BindWindow = 7,
    LocalInvalidate = 8,
};

// Syndromes the adapter reports; the driver maps them to ibv_wc_status.
enum class CqeStatus : std::uint8_t {
    Success = 0,
    LocalLength = 1,
    LocalQpOperation = 2,
    LocalProtection = 4,
    WrFlush = 5,
    MemoryManagement = 6,  // a bind or local invalidate failed (IBV_WC_MW_BIND_ERR)
    BadResponse = 7,
    LocalAccess = 8,
    RemoteInvalidRequest = 9,
    RemoteAccess = 10,
    RemoteOperation = 11,
    RetryExceeded = 12,
    RnrRetryExceeded = 13,
    RemoteAborted = 16,
    GeneralError = 21,
    FatalError = 22,       // the adapter failed while the WQE was in progress
};

enum CqeFlags : std::uint8_t {
    kCqeIsSend = 1 << 0,    // completion of a send-queue WQE
    kCqeWithImm = 1 << 1,   // imm_data is valid
    kCqeSolicited = 1 << 2,
    kCqeGrh = 1 << 3,       // UD receive: a GRH came (in the buffer's first 40 bytes)
    kCqeXrcSrq = 1 << 4,    // XRC target receive: src_qp is the SRQ the WQE came from
    kCqeWithInvalidate = 1 << 5,  // SEND with invalidate: imm_data is the rkey invalidated (host order)
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
    std::uint32_t timestamp_lo;  // adapter core clock cycles when the CQE was written: bits 0-31
    std::uint16_t timestamp_hi;  // bits 32-47
    std::uint8_t sl;             // receive: service level of the packet
    std::uint8_t owner;       // bit 0 flips each pass over the ring
};
static_assert(sizeof(Cqe) == 32, "CQE is 32 bytes");
static_assert(offsetof(Cqe, timestamp_lo) == 24 && offsetof(Cqe, owner) == 31, "CQE layout");

// The completion timestamp counts hca.core_clock_mhz cycles from time zero
// and wraps at 48 bits (as mlx4's CQE timestamp does).
inline constexpr unsigned kCqeTimestampBits = 48;
inline constexpr std::uint64_t kCqeTimestampMask = (std::uint64_t{1} << kCqeTimestampBits) - 1;
inline void set_cqe_timestamp(Cqe& c, std::uint64_t cycles) {
    c.timestamp_lo = static_cast<std::uint32_t>(cycles);
    c.timestamp_hi = static_cast<std::uint16_t>(cycles >> 32);
}
inline std::uint64_t cqe_timestamp(const Cqe& c) {
    return c.timestamp_lo | (static_cast<std::uint64_t>(c.timestamp_hi) << 32);
}

// ---- Doorbell records in host memory, written by the driver, read by the
// ---- adapter when its cached copy says a ring is full.
struct CqDoorbellRecord {
    std::uint32_t consumer_index;
    std::uint32_t reserved;
};
static_assert(sizeof(CqDoorbellRecord) == 8, "CQ doorbell record is 8 bytes");

// Receive queue doorbell record: the driver publishes its producer index
// here in host memory instead of writing an MMIO doorbell (as mlx4 does);
// the adapter DMA-reads it when it needs receive WQEs it does not know of.
struct RqDoorbellRecord {
    std::uint32_t producer_index;  // low 16 bits: WQEs posted (free-running)
    std::uint32_t reserved;
};
static_assert(sizeof(RqDoorbellRecord) == 8, "RQ doorbell record is 8 bytes");

// ---- MMIO doorbell registers in BAR0 (one UAR page per context).
inline constexpr std::uint32_t kUarSendDoorbell = 0x14;   // u32 qpn, u16 producer index
inline constexpr std::uint32_t kUarCqArm = 0x0c;          // u32 cqn, u32 consumer index, u8 solicited
inline constexpr std::uint32_t kUarBlueFlame = 0x800;     // WQE written by the CPU, 64 B per write
inline constexpr std::uint32_t kDoorbellBytes = 8;
inline constexpr std::uint32_t kBlueFlameChunkBytes = 64;  // one write-combined store

inline constexpr std::uint32_t kWqeBasicBlock = 64;  // WQEs are cache-line aligned and padded

// ---- VI descriptors (VI Architecture 1.0, VIPL 1.0 layout). The consumer
// ---- builds them in registered memory; the adapter fetches them by DMA,
// ---- follows Next/NextHandle and writes ImmediateData, Length and Status back.
inline constexpr std::uint32_t kViDescAlign = 64;

struct ViCtrlSeg {
    std::uint64_t next;          // virtual address of the next descriptor (0: none yet)
    std::uint32_t next_handle;   // memory handle of the next descriptor
    std::uint16_t seg_count;     // address + data segments that follow
    std::uint16_t control;       // kViCtrl*
    std::uint32_t reserved;
    std::uint32_t imm_data;      // immediate data (receive: written by the adapter)
    std::uint32_t length;        // bytes transferred, written by the adapter
    std::uint32_t status;        // kViStatus*, written by the adapter
};
static_assert(sizeof(ViCtrlSeg) == 32, "VI control segment is 32 bytes");

// Address segment (remote address, handle, reserved) and data segment
// (local address, handle, length) share one 16-byte shape.
struct ViSeg {
    std::uint64_t addr;
    std::uint32_t handle;
    std::uint32_t length;
};
static_assert(sizeof(ViSeg) == 16, "VI address and data segments are 16 bytes");

// The adapter writes back ImmediateData, Length and Status in one 12-byte write.
inline constexpr std::uint32_t kViWritebackOffset = 20;
inline constexpr std::uint32_t kViWritebackBytes = 12;
inline constexpr std::uint32_t kViNextBytes = 12;  // Next and NextHandle, re-read to follow a chain

inline constexpr std::uint16_t kViCtrlOpSendRecv = 0x0;
inline constexpr std::uint16_t kViCtrlOpRdmaWrite = 0x1;
inline constexpr std::uint16_t kViCtrlOpRdmaRead = 0x2;
inline constexpr std::uint16_t kViCtrlOpReserved = 0x3;
inline constexpr std::uint16_t kViCtrlOpMask = 0x3;
inline constexpr std::uint16_t kViCtrlImmediate = 0x4;
inline constexpr std::uint16_t kViCtrlQfence = 0x8;
inline constexpr std::uint16_t kViCtrlReserved = 0xfff0;

inline constexpr std::uint32_t kViStatusDone = 0x1;
inline constexpr std::uint32_t kViStatusFormatError = 0x2;
inline constexpr std::uint32_t kViStatusProtectionError = 0x4;
inline constexpr std::uint32_t kViStatusLengthError = 0x8;
inline constexpr std::uint32_t kViStatusPartialError = 0x10;
inline constexpr std::uint32_t kViStatusFlushed = 0x20;
inline constexpr std::uint32_t kViStatusTransportError = 0x40;
inline constexpr std::uint32_t kViStatusRdmaProtError = 0x80;
inline constexpr std::uint32_t kViStatusRemoteDescError = 0x100;
inline constexpr std::uint32_t kViStatusOpSend = 0x00000;
inline constexpr std::uint32_t kViStatusOpReceive = 0x10000;
inline constexpr std::uint32_t kViStatusOpRdmaWrite = 0x20000;
inline constexpr std::uint32_t kViStatusOpRemoteRdmaWrite = 0x30000;
inline constexpr std::uint32_t kViStatusOpRdmaRead = 0x40000;
inline constexpr std::uint32_t kViStatusImmediate = 0x80000;

// ---- VI doorbells: one 16-byte MMIO write per posted descriptor carries
// ---- the VI, the queue, the descriptor's address and handle, and whether it
// ---- starts a new chain (the queue was empty) or was linked behind the last.
inline constexpr std::uint32_t kUarViSendDoorbell = 0x20;
inline constexpr std::uint32_t kUarViRecvDoorbell = 0x30;
inline constexpr std::uint32_t kUarViArm = 0x40;  // u32 vi, u8 queue: interrupt on the next completion
inline constexpr std::uint32_t kViDoorbellBytes = 16;

}  // namespace hcasim::hca
