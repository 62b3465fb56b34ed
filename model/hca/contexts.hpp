// Adapter context tables: what the firmware writes when the driver creates a
// resource and what the hardware blocks read and update while they work
// (QPC, CQC, MPT). They live in adapter memory; hardware blocks reach them
// through the Hca that owns them.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "model/hca/hw_formats.hpp"
#include "model/hca/transport_service.hpp"
#include "model/sim/time.hpp"

namespace hcasim::hca {

enum class QpState : std::uint8_t { Reset, Init, Rtr, Rts, Sqd, Sqe, Err };

// Access rights, bit-compatible with enum ibv_access_flags.
enum Access : std::uint32_t {
    kLocalWrite = 1,
    kRemoteWrite = 2,
    kRemoteRead = 4,
    kRemoteAtomic = 8,
    kMwBind = 16,  // memory windows may be bound to the region
};
inline constexpr std::uint32_t kRemoteAccess = kRemoteWrite | kRemoteRead | kRemoteAtomic;

// What an entry of the memory protection table is: a registered region or
// a memory window of type 1 or type 2 (IBA 10.6.7; type 2 as type 2B).
enum class MptKind : std::uint8_t { Region, Window1, Window2 };

struct MemoryRegion {
    bool valid = false;
    std::uint32_t key = 0;   // lkey == rkey
    std::uint32_t pdn = 0;   // protection domain (VI: protection tag)
    std::uint64_t va = 0;
    std::uint64_t length = 0;
    std::uint32_t access = 0;
    std::uint64_t bus = 0;        // bus address of byte va (pinned contiguously)
    std::uint64_t mtt_index = 0;  // the region's first page translation entry
    // Physical page registration: the region is virtually contiguous from
    // va = 0 and page i lives at bus address pages[i]; empty for ordinary
    // regions.
    std::vector<std::uint64_t> pages;
    // A memory window is an entry of the same table: key, pdn, va, length
    // and access are those of its current binding, and it translates
    // through the region it is bound to.
    MptKind kind = MptKind::Region;
    bool bound = false;           // window: bound (else free: its key is invalid)
    std::uint32_t region = 0;     // window: key of the region it is bound to
    std::uint32_t bound_qpn = 0;  // type 2 window: the only QP that may use it
    std::uint32_t windows = 0;    // region: windows bound to it
    bool is_window() const { return kind != MptKind::Region; }
};

// A physical span the DMA engine moves, after translation.
struct DmaSpan {
    std::uint64_t addr;
    std::uint32_t len;
};

// Who is told of each CQE written to a CQ the firmware itself owns (its
// QP1's), instead of a completion interrupt to the host.
class CqeListener {
public:
    virtual ~CqeListener() = default;
    // The CQE is in the ring from visible on.
    virtual void cqe_written(std::uint32_t cqn, sim::Tick visible) = 0;
};

// The firmware's protection domain: the only one that may use the reserved
// L_Key. The driver numbers its PDs from 1.
inline constexpr std::uint32_t kFirmwarePd = 0;

struct CqContext {
    bool valid = false;
    std::uint32_t cqn = 0;
    std::uint64_t ring = 0;          // host address of the CQE ring
    std::uint32_t log_size = 0;      // entries = 1 << log_size
    std::uint64_t db_record = 0;     // host address of CqDoorbellRecord
    std::uint32_t producer = 0;      // next CQE the adapter writes (free-running)
    std::uint32_t cached_consumer = 0;
    // A read of the consumer index started ahead of need: what it read and
    // when that is on chip.
    bool refresh_pending = false;
    std::uint32_t refresh_consumer = 0;
    sim::Tick refresh_at = 0;
    bool armed = false;
    bool armed_solicited = false;
    bool overrun = false;
    CqeListener* listener = nullptr;  // a firmware-owned CQ
    std::uint32_t entries() const { return 1u << log_size; }
};

// VI endpoints: a QP context in VI mode takes descriptors instead of WQE rings.
enum class ViReliability : std::uint8_t { None = 0, Unreliable = 1, ReliableDelivery = 2, ReliableReception = 4 };

// The GRH fields of an address vector that is global (IBA 8.3).
struct GlobalRoute {
    bool present = false;
    std::uint8_t sgid_index = 0;
    std::uint8_t hop_limit = 0;
    std::uint8_t traffic_class = 0;
    std::uint32_t flow_label = 0;
    std::uint8_t dgid[16] = {};
};

// Where a datagram goes: the address vector and Q_Key of a UD send WQE.
struct DatagramAddress {
    std::uint16_t dlid = 0;
    std::uint8_t sl = 0;
    std::uint32_t dest_qpn = 0;
    std::uint32_t qkey = 0;
    GlobalRoute grh;
};

// One posted descriptor as its doorbell announced it.
struct ViDoorbellToken {
    std::uint64_t addr = 0;
    std::uint32_t handle = 0;
    bool chain_start = false;  // the queue was empty: not linked behind the last one
};

// One work queue of a VI as the adapter tracks it.
struct ViQueue {
    std::deque<ViDoorbellToken> posted;  // announced, not yet fetched
    std::uint64_t next_addr = 0;         // Next of the last fetched descriptor, as read
    std::uint32_t next_handle = 0;
    std::uint64_t last_addr = 0;         // the last fetched descriptor
    std::uint32_t last_handle = 0;
    std::uint32_t fetching = 0;          // descriptor fetches in flight
    sim::Tick last_ready = 0;            // when the last fetched descriptor was on chip
    bool armed = false;                  // interrupt on the next completion (no CQ)
    std::uint32_t outstanding = 0;       // posted and not yet written back
};

// A send WQE after the fetch engine parsed it, with its transmit progress.
struct SendWork {
    std::uint16_t wqe_index = 0;
    WqeOpcode op = WqeOpcode::Send;
    std::uint8_t flags = 0;
    std::uint32_t imm = 0;
    std::uint64_t raddr = 0;
    std::uint32_t rkey = 0;
    std::uint64_t swap_add = 0;      // atomics
    std::uint64_t compare = 0;
    BindSeg bind{};                  // BindWindow
    std::vector<DataSeg> sges;
    std::vector<std::uint8_t> inline_data;
    std::uint32_t length = 0;
    DatagramAddress ud;              // UD: where it goes
    std::uint32_t xrc_srqn = 0;      // XRC: the target's SRQ

    std::uint32_t first_psn = 0;
    std::uint32_t npsn = 0;          // PSNs this WQE uses
    bool started = false;
    bool sent = false;               // went out once: its PSNs are its own, and an answer to a READ or
                                     // atomic is taken even when a rewind has it waiting to go out again
    bool fully_sent = false;
    bool acked = false;              // SEND/WRITE: acknowledged; READ: all response data placed
    CqeStatus error = CqeStatus::Success;
    std::uint32_t read_received = 0;
    // READ: read_received when a gap in its answer last had it asked again,
    // so the rest of the answer already on its way does not ask once more.
    std::uint32_t read_gap_asked_at = UINT32_MAX;
    sim::Tick done_at = 0;           // when its last data write was issued (READ)
    std::vector<DmaSpan> spans;      // translated local buffer
    // VI descriptor this work came from (write-back target).
    std::uint64_t desc_addr = 0;
    std::uint32_t desc_handle = 0;
    std::uint32_t vi_error = 0;      // kViStatus* error bits found at fetch
};

struct RecvWork {
    std::uint16_t wqe_index = 0;
    std::vector<DataSeg> sges;
    std::uint32_t length = 0;
    sim::Tick ready_at = 0;          // when the fetch DMA has brought it on chip
    std::uint64_t desc_addr = 0;     // VI descriptor this work came from
    std::uint32_t desc_handle = 0;
    std::uint32_t vi_error = 0;      // kViStatus* error bits found at fetch
    bool malformed = false;          // more data segments than the queue allows
};

// A shared receive queue (IBA 10.2.9.5): a ring of receive WQEs many QPs
// take from. Its WQEs form a list through RecvWqeCtrl::next_index, because
// the driver frees slots in completion order, not ring order. The adapter
// keeps a few of them on chip and hands each to the QP whose message needs
// it, so a QP holds no WQE it is not using.
struct SrqContext {
    bool valid = false;
    std::uint32_t srqn = 0;
    std::uint32_t pdn = 0;
    std::uint64_t base = 0;           // host address of slot 0
    std::uint32_t log_size = 0;       // slots = 1 << log_size
    std::uint32_t log_stride = 5;
    std::uint64_t db_record = 0;      // RqDoorbellRecord: WQEs posted (free-running)
    std::uint32_t max_sge = 1;
    std::uint32_t xrcd = 0;           // XRC SRQs: the domain its target QPs belong to (0: none)
    std::uint32_t cqn = 0;            // XRC SRQs: receive completions go here

    std::uint16_t posted = 0;         // as last read from the doorbell record
    std::uint16_t fetched = 0;        // WQEs brought on chip
    std::uint16_t taken = 0;          // WQEs handed to QPs
    std::uint16_t head = 0;           // slot of the next WQE to fetch
    bool fetch_busy = false;
    bool failed = false;              // a malformed WQE broke it: it gives out no more
    std::deque<RecvWork> cache;       // fetched, not yet handed to a QP
    std::uint32_t limit = 0;          // armed limit (0: disarmed)
    std::uint32_t entries() const { return 1u << log_size; }
};

// An RDMA READ (or an atomic) the responder is answering; responses leave
// in the order of their requests.
struct ReadResponseJob {
    bool atomic = false;             // an ATOMIC ACKNOWLEDGE carrying orig
    std::uint64_t orig = 0;
    sim::Tick ready = 0;             // when an atomic's original value is on chip
    std::uint64_t va = 0;
    std::uint32_t rkey = 0;
    std::uint32_t length = 0;
    std::uint32_t offset = 0;
    std::uint32_t first_psn = 0;
    std::uint32_t msn = 0;
    std::vector<DmaSpan> spans;
};

inline constexpr std::uint32_t kPsnMask = 0xffffff;
inline std::uint32_t psn_add(std::uint32_t a, std::uint32_t b) { return (a + b) & kPsnMask; }
// Packets (and PSNs) a message of len bytes takes at this MTU: one when empty.
inline std::uint32_t packets_for(std::uint32_t len, std::uint32_t mtu) { return len == 0 ? 1 : (len + mtu - 1) / mtu; }
// Signed distance b - a in 24-bit PSN space.
inline std::int32_t psn_diff(std::uint32_t b, std::uint32_t a) {
    std::int32_t d = static_cast<std::int32_t>((b - a) & kPsnMask);
    return d >= 0x800000 ? d - 0x1000000 : d;
}

}  // namespace hcasim::hca
