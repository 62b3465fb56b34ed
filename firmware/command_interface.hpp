// The adapter firmware's command interface: the driver posts a command
// (create/modify/destroy a QP or CQ, register memory) to the mailbox and the
// firmware executes it on the adapter's context tables. Each command takes
// fw.command_latency_us of simulated time, charged to the host thread that
// waits for it.
#pragma once

#include <cstdint>
#include <vector>

#include "model/hca/hca.hpp"
#include "model/sim/config.hpp"

namespace hcasim::firmware {

void declare_firmware_params(sim::ParamRegistry& r);

// QP attributes as the firmware takes them (API-neutral).
enum QpAttrMask : std::uint32_t {
    kAttrState = 1 << 0,
    kAttrAccess = 1 << 1,
    kAttrPort = 1 << 2,
    kAttrPkeyIndex = 1 << 3,
    kAttrPathMtu = 1 << 4,
    kAttrAv = 1 << 5,
    kAttrDestQpn = 1 << 6,
    kAttrRqPsn = 1 << 7,
    kAttrMaxDestRdAtomic = 1 << 8,
    kAttrMinRnrTimer = 1 << 9,
    kAttrSqPsn = 1 << 10,
    kAttrTimeout = 1 << 11,
    kAttrRetryCnt = 1 << 12,
    kAttrRnrRetry = 1 << 13,
    kAttrMaxRdAtomic = 1 << 14,
    kAttrQkey = 1 << 15,
    kAttrSqdNotify = 1 << 16,  // with a move to SQD: report SQ drained
    kAttrAltPath = 1 << 17,    // the alternate path
    kAttrPathMigState = 1 << 18,
};

struct QpAttributes {
    hca::QpState state = hca::QpState::Reset;
    std::uint32_t access = 0;
    std::uint32_t path_mtu = 4096;
    std::uint16_t dlid = 0;
    std::uint8_t sl = 0;
    std::uint32_t dest_qpn = 0;
    std::uint32_t rq_psn = 0;
    std::uint32_t sq_psn = 0;
    std::uint8_t max_dest_rd_atomic = 1;
    std::uint8_t max_rd_atomic = 1;
    std::uint8_t min_rnr_timer = 0;
    std::uint8_t timeout = 14;
    std::uint8_t retry_cnt = 7;
    std::uint8_t rnr_retry = 7;
    std::uint32_t qkey = 0;
    hca::GlobalRoute grh;  // with kAttrAv: the path's GRH, when global
    bool sqd_notify = false;
    std::uint8_t port = 1;
    hca::AddressPath alt;
    hca::PathMigState mig = hca::PathMigState::Migrated;
};

struct QpRings {
    std::uint32_t pdn = 0;
    std::uint32_t send_cqn = 0;
    std::uint32_t recv_cqn = 0;
    bool sq_sig_all = false;
    std::uint64_t sq_base = 0;
    std::uint32_t sq_log_size = 0;
    std::uint32_t sq_log_stride = 6;
    std::uint64_t rq_base = 0;
    std::uint32_t rq_log_size = 0;
    std::uint32_t rq_log_stride = 4;
    std::uint64_t rq_db_record = 0;  // bus address of the RqDoorbellRecord
    std::uint32_t max_send_sge = 1;
    std::uint32_t max_recv_sge = 1;
    std::uint32_t max_inline = 0;
    hca::QpType type = hca::QpType::Rc;
    std::uint32_t srqn = 0;          // receives from this SRQ instead of the ring
    std::uint32_t xrcd = 0;          // XRC targets: their XRC domain
    // VI mode: descriptors instead of rings.
    hca::ViReliability vi = hca::ViReliability::None;
    std::uint32_t vi_max_transfer = 0;
};

// A shared receive queue as the driver lays it out.
struct SrqRing {
    std::uint32_t pdn = 0;
    std::uint64_t base = 0;          // bus address of slot 0
    std::uint32_t log_size = 0;
    std::uint32_t log_stride = 5;
    std::uint64_t db_record = 0;     // bus address of its RqDoorbellRecord
    std::uint32_t max_sge = 1;
    std::uint32_t xrcd = 0;          // XRC SRQs: their domain and CQ
    std::uint32_t cqn = 0;
};

class CommandInterface {
public:
    CommandInterface(const sim::Config& cfg, hca::Hca& hca);

    // Each call blocks the calling host thread for the command latency, then
    // applies the command. They return false if the adapter refuses.
    bool create_cq(std::uint32_t cqn, std::uint64_t ring, std::uint32_t log_size, std::uint64_t db_record);
    // Moves the unpolled CQEs (consumer .. producer) into the new ring.
    bool resize_cq(std::uint32_t cqn, std::uint64_t ring, std::uint32_t log_size, std::uint32_t consumer,
                   std::uint32_t& moved);
    bool destroy_cq(std::uint32_t cqn);
    bool create_qp(std::uint32_t qpn, const QpRings& rings);
    bool modify_qp(std::uint32_t qpn, const QpAttributes& a, std::uint32_t mask);
    // The same change applied by firmware itself (its CM agent), at once.
    bool apply_modify_qp(std::uint32_t qpn, const QpAttributes& a, std::uint32_t mask);
    // One mailbox command's time for a command without context changes.
    void mailbox() { execute(); }
    bool destroy_qp(std::uint32_t qpn);
    // QUERY_QP: the state and what the adapter may change of the paths
    // (automatic path migration) into a; false when there is no such QP.
    bool query_qp(std::uint32_t qpn, QpAttributes& a);
    // Registers [va, va+length), which the driver pinned at bus address bus.
    std::uint32_t register_mr(std::uint32_t pdn, std::uint64_t va, std::uint64_t length, std::uint32_t access,
                              std::uint64_t bus);
    // Registers pages (bus addresses, page aligned) as one region that is
    // virtually contiguous from 0.
    std::uint32_t register_pages(std::uint32_t pdn, const std::vector<std::uint64_t>& pages, std::uint32_t access);
    // Changes a region's protection domain and access in place.
    bool modify_mr(std::uint32_t key, std::uint32_t pdn, std::uint32_t access);
    // Changes a VI's reliability level, transfer size, tag and RDMA rights (Idle VIs).
    bool modify_vi(std::uint32_t qpn, hca::ViReliability rel, std::uint32_t max_transfer, std::uint32_t pdn,
                   std::uint32_t access, std::uint8_t sl);
    // Refused (false) while memory windows are bound to the region.
    bool deregister_mr(std::uint32_t key);
    // Memory windows: a new one (hca::MptKind::Window1 or Window2) in pdn,
    // unbound; returns its key, or 0 when the protection table is full.
    std::uint32_t alloc_window(std::uint32_t pdn, hca::MptKind kind);
    // Frees a window, bound or not: its key is invalid from then on.
    bool free_window(std::uint32_t key);

    // Shared receive queues.
    bool create_srq(std::uint32_t srqn, const SrqRing& ring);
    bool destroy_srq(std::uint32_t srqn);
    // Arms the limit event at limit WQEs (0 disarms).
    bool arm_srq(std::uint32_t srqn, std::uint32_t limit);
    // The limit still armed (0 once the event fired).
    std::uint32_t query_srq_limit(std::uint32_t srqn);
    // Moves the SRQ to a larger ring in which the driver copied every slot
    // at the same index, so WQEs on chip and in flight keep their names.
    bool resize_srq(std::uint32_t srqn, std::uint64_t base, std::uint32_t log_size);

    // The adapter's multicast group table (firmware/mcg_commands.cpp).
    enum class McastStatus { Ok, NoUdQp, TableFull, GroupFull, NotAttached };
    // Attaches qpn, a UD QP, to the group mgid (once: attaching again is Ok).
    McastStatus attach_mcast(const hca::MulticastTable::Gid& mgid, std::uint32_t qpn);
    McastStatus detach_mcast(const hca::MulticastTable::Gid& mgid, std::uint32_t qpn);

    std::uint64_t commands() const { return m_commands; }

private:
    void execute();
    static QpRings rings_of(const hca::Qpc& c);
    static void fill(hca::Qpc& c, const QpRings& r);

    hca::Hca& m_hca;
    sim::Tick m_latency;
    std::uint64_t m_commands = 0;
};

}  // namespace hcasim::firmware
