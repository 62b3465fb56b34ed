#include "firmware/command_interface.hpp"

#include <cstring>

namespace hcasim::firmware {

void declare_firmware_params(sim::ParamRegistry& r) {
    r.add_per_node({"fw.command_latency_us", sim::ParamSpec::Kind::Real, "us", "10", 0, 1e6, {},
           "firmware command execution time (create/modify/destroy QP or CQ, register memory)",
           "estimate: mailbox commands of ConnectX-class firmware take microseconds to tens of microseconds"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kFirmware + 10, "firmware", declare_firmware_params};

CommandInterface::CommandInterface(const sim::Config& cfg, hca::Hca& hca)
    : m_hca(hca), m_latency(static_cast<sim::Tick>(cfg.get_real("fw.command_latency_us") * sim::kPsPerUs)) {}

void CommandInterface::execute() {
    ++m_commands;
    if (m_latency) sc_core::wait(sim::to_sc(m_latency));
}

bool CommandInterface::create_cq(std::uint32_t cqn, std::uint64_t ring, std::uint32_t log_size,
                                 std::uint64_t db_record) {
    execute();
    hca::CqContext& cq = m_hca.install_cq(cqn);
    cq.ring = ring;
    cq.log_size = log_size;
    cq.db_record = db_record;
    return true;
}

bool CommandInterface::resize_cq(std::uint32_t cqn, std::uint64_t ring, std::uint32_t log_size,
                                 std::uint32_t consumer, std::uint32_t& moved) {
    execute();
    hca::CqContext* cq = m_hca.cq(cqn);
    if (!cq) return false;
    const std::uint32_t pending = cq->producer - consumer;
    if (pending > (1u << log_size)) return false;
    // Copy unpolled CQEs in order to the start of the new ring.
    auto& memory = m_hca.pcie().memory();
    auto* from = reinterpret_cast<hca::Cqe*>(memory.host_bytes(cq->ring, sizeof(hca::Cqe) << cq->log_size));
    auto* to = reinterpret_cast<hca::Cqe*>(memory.host_bytes(ring, sizeof(hca::Cqe) << log_size));
    for (std::uint32_t i = 0; i < pending; ++i) {
        to[i] = from[(consumer + i) & (cq->entries() - 1)];
        to[i].owner = 0;
    }
    cq->ring = ring;
    cq->log_size = log_size;
    cq->producer = pending;
    cq->cached_consumer = 0;
    cq->refresh_pending = false;  // a read in flight counts the old ring
    cq->overrun = false;
    moved = pending;
    return true;
}

bool CommandInterface::destroy_cq(std::uint32_t cqn) {
    execute();
    if (!m_hca.cq(cqn)) return false;
    m_hca.remove_cq(cqn);
    return true;
}

bool CommandInterface::create_qp(std::uint32_t qpn, const QpRings& r) {
    execute();
    hca::Qpc image;
    fill(image, r);
    m_hca.install_qp(qpn, image);
    return true;
}

QpRings CommandInterface::rings_of(const hca::Qpc& c) {
    QpRings r;
    r.pdn = c.pdn;
    r.send_cqn = c.send_cqn;
    r.recv_cqn = c.recv_cqn;
    r.sq_sig_all = c.sq_sig_all;
    r.sq_base = c.sq_base;
    r.sq_log_size = c.sq_log_size;
    r.sq_log_stride = c.sq_log_stride;
    r.rq_base = c.rq_base;
    r.rq_log_size = c.rq_log_size;
    r.rq_log_stride = c.rq_log_stride;
    r.rq_db_record = c.rq_db_record;
    r.max_send_sge = c.max_send_sge;
    r.max_recv_sge = c.max_recv_sge;
    r.max_inline = c.max_inline;
    r.vi = c.vi;
    r.vi_max_transfer = c.vi_max_transfer;
    r.type = c.type;
    r.srqn = c.srqn;
    r.xrcd = c.xrcd;
    return r;
}

void CommandInterface::fill(hca::Qpc& c, const QpRings& r) {
    c.pdn = r.pdn;
    c.send_cqn = r.send_cqn;
    c.recv_cqn = r.recv_cqn;
    c.sq_sig_all = r.sq_sig_all;
    c.sq_base = r.sq_base;
    c.sq_log_size = static_cast<std::uint8_t>(r.sq_log_size);
    c.sq_log_stride = static_cast<std::uint8_t>(r.sq_log_stride);
    c.rq_base = r.rq_base;
    c.rq_log_size = static_cast<std::uint8_t>(r.rq_log_size);
    c.rq_log_stride = static_cast<std::uint8_t>(r.rq_log_stride);
    c.rq_db_record = r.rq_db_record;
    c.max_send_sge = static_cast<std::uint16_t>(r.max_send_sge);
    c.max_recv_sge = static_cast<std::uint16_t>(r.max_recv_sge);
    c.max_inline = r.max_inline;
    c.vi = r.vi;
    c.vi_max_transfer = r.vi_max_transfer;
    c.type = r.type;
    c.srqn = r.srqn;
    c.xrcd = r.xrcd;
}

bool CommandInterface::modify_qp(std::uint32_t qpn, const QpAttributes& a, std::uint32_t mask) {
    execute();
    return apply_modify_qp(qpn, a, mask);
}

// Read, change and write back the QP's context entry, as MODIFY_QP does
// with its mailbox image.
bool CommandInterface::apply_modify_qp(std::uint32_t qpn, const QpAttributes& a, std::uint32_t mask) {
    hca::QpContext* qp = m_hca.qp(qpn);
    if (!qp) return false;
    hca::Qpc c = qp->qpc;
    std::uint32_t loads = 0;
    if (mask & kAttrAccess) c.access = a.access;
    if (mask & kAttrPathMtu) c.path_mtu = a.path_mtu;
    if (mask & kAttrAv) {
        c.dlid = a.dlid;
        c.sl = a.sl;
        c.grh = a.grh;
    }
    if (mask & kAttrQkey) c.qkey = a.qkey;
    if (mask & kAttrPort) c.port = a.port;
    if (mask & kAttrAltPath) c.alt = a.alt;
    if (mask & kAttrPathMigState) {
        if (a.mig == hca::PathMigState::Migrated && c.mig == hca::PathMigState::Armed)
            hca::load_alternate_path(c);  // software-initiated migration
        else
            c.mig = a.mig;
    }
    if (mask & kAttrSqdNotify) c.sqd_notify = a.sqd_notify;
    if (mask & kAttrDestQpn) c.dest_qpn = a.dest_qpn;
    if (mask & kAttrRqPsn) {
        c.rq_psn = a.rq_psn & hca::kPsnMask;
        loads |= hca::kLoadRqPsn;
    }
    if (mask & kAttrSqPsn) {
        c.sq_psn = a.sq_psn & hca::kPsnMask;
        loads |= hca::kLoadSqPsn;
    }
    if (mask & kAttrMaxDestRdAtomic) c.max_dest_rd_atomic = a.max_dest_rd_atomic;
    if (mask & kAttrMaxRdAtomic) c.max_rd_atomic = a.max_rd_atomic;
    if (mask & kAttrMinRnrTimer) c.min_rnr_timer = a.min_rnr_timer;
    if (mask & kAttrTimeout) c.timeout = a.timeout;
    if (mask & kAttrRetryCnt) {
        c.retry_cnt = a.retry_cnt;
        loads |= hca::kLoadRetryCnt;
    }
    if (mask & kAttrRnrRetry) {
        c.rnr_retry = a.rnr_retry;
        loads |= hca::kLoadRnrRetry;
    }
    if (mask & kAttrState) {
        const hca::QpState old = c.state;
        c.state = a.state;
        if (a.state == hca::QpState::Reset && old != hca::QpState::Reset) {
            // Back to reset: the adapter forgets all queue state but the rings
            // (and a VI's attributes, which outlive its connections).
            hca::Qpc fresh;
            fill(fresh, rings_of(c));
            if (c.vi != hca::ViReliability::None) {
                fresh.access = c.access;
                fresh.sl = c.sl;
            }
            m_hca.remove_qp(qpn);
            m_hca.install_qp(qpn, fresh);
            return true;
        }
        loads |= hca::kLoadState;
    }
    m_hca.write_qpc(*qp, c, loads);
    return true;
}

bool CommandInterface::query_qp(std::uint32_t qpn, QpAttributes& a) {
    execute();
    const hca::QpContext* qp = m_hca.qp(qpn);
    if (!qp) return false;
    const hca::Qpc& c = qp->qpc;
    a.state = c.state;
    a.dlid = c.dlid;
    a.sl = c.sl;
    a.grh = c.grh;
    a.port = c.port;
    a.timeout = c.timeout;
    a.alt = c.alt;
    a.mig = c.mig;
    return true;
}

bool CommandInterface::destroy_qp(std::uint32_t qpn) {
    execute();
    if (!m_hca.qp(qpn)) return false;
    m_hca.remove_qp(qpn);
    return true;
}

std::uint32_t CommandInterface::register_mr(std::uint32_t pdn, std::uint64_t va, std::uint64_t length,
                                            std::uint32_t access, std::uint64_t bus) {
    execute();
    return m_hca.mpt().add(pdn, va, length, access, bus);
}

std::uint32_t CommandInterface::register_pages(std::uint32_t pdn, const std::vector<std::uint64_t>& pages,
                                               std::uint32_t access) {
    execute();
    const std::uint32_t key =
        m_hca.mpt().add(pdn, 0, static_cast<std::uint64_t>(pages.size()) * 4096, access, pages.front());
    if (key) m_hca.mpt().set_pages(key, pages);
    return key;
}

bool CommandInterface::modify_mr(std::uint32_t key, std::uint32_t pdn, std::uint32_t access) {
    execute();
    m_hca.translation().invalidate(key);
    return m_hca.mpt().modify(key, pdn, access);
}

bool CommandInterface::modify_vi(std::uint32_t qpn, hca::ViReliability rel, std::uint32_t max_transfer,
                                 std::uint32_t pdn, std::uint32_t access, std::uint8_t sl) {
    execute();
    hca::QpContext* qp = m_hca.qp(qpn);
    if (!qp || !qp->is_vi()) return false;
    hca::Qpc c = qp->qpc;
    c.vi = rel;
    c.vi_max_transfer = max_transfer;
    c.pdn = pdn;
    c.access = access;
    c.sl = sl;
    m_hca.write_qpc(*qp, c, 0);
    return true;
}

bool CommandInterface::deregister_mr(std::uint32_t key) {
    execute();
    // The region is the program's again only when no write the adapter
    // issued is still on its way into it.
    const sim::Tick drained = m_hca.dma().last_write_visible();
    if (drained > sim::now_ps()) sc_core::wait(sim::to_sc(drained - sim::now_ps()));
    m_hca.translation().invalidate(key);
    return m_hca.mpt().remove(key);
}

std::uint32_t CommandInterface::alloc_window(std::uint32_t pdn, hca::MptKind kind) {
    execute();
    return m_hca.mpt().add_window(pdn, kind);
}

bool CommandInterface::free_window(std::uint32_t key) {
    execute();
    m_hca.translation().invalidate(key);
    return m_hca.mpt().remove_window(key);
}

bool CommandInterface::create_srq(std::uint32_t srqn, const SrqRing& r) {
    execute();
    hca::SrqContext& srq = m_hca.srqs().install(srqn);
    srq.pdn = r.pdn;
    srq.base = r.base;
    srq.log_size = r.log_size;
    srq.log_stride = r.log_stride;
    srq.db_record = r.db_record;
    srq.max_sge = r.max_sge;
    srq.xrcd = r.xrcd;
    srq.cqn = r.cqn;
    return true;
}

bool CommandInterface::destroy_srq(std::uint32_t srqn) {
    execute();
    if (!m_hca.srqs().find(srqn)) return false;
    m_hca.srqs().remove(srqn);
    return true;
}

bool CommandInterface::arm_srq(std::uint32_t srqn, std::uint32_t limit) {
    execute();
    hca::SrqContext* srq = m_hca.srqs().find(srqn);
    if (!srq) return false;
    m_hca.srqs().arm(*srq, limit, sim::now_ps());
    return true;
}

std::uint32_t CommandInterface::query_srq_limit(std::uint32_t srqn) {
    execute();
    const hca::SrqContext* srq = m_hca.srqs().find(srqn);
    return srq ? srq->limit : 0;
}

bool CommandInterface::resize_srq(std::uint32_t srqn, std::uint64_t base, std::uint32_t log_size) {
    execute();
    hca::SrqContext* srq = m_hca.srqs().find(srqn);
    if (!srq || log_size < srq->log_size) return false;
    srq->base = base;
    srq->log_size = log_size;
    return true;
}

}  // namespace hcasim::firmware
