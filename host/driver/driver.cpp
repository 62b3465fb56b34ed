#include "host/driver/driver.hpp"

#include "host/driver/host_thread.hpp"
#include "model/sim/tracer.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace hcasim::host {

using hca::Cqe;
using hca::DataSeg;
using hca::RecvWqeCtrl;
using hca::RemoteAddrSeg;
using hca::SendWqeCtrl;

namespace {

std::uint32_t log2_ceil(std::uint64_t v) {
    std::uint32_t l = 0;
    while ((1ull << l) < v) ++l;
    return l;
}

// mlx4's rule: BlueFlame only for a WQE the adapter needs nothing more for to
// start it: inline data, an RDMA READ, a WRITE without gather entries.
bool starts_without_fetch(const std::vector<std::uint8_t>& wqe) {
    SendWqeCtrl c{};
    std::memcpy(&c, wqe.data(), sizeof c);
    const auto op = static_cast<hca::WqeOpcode>(c.opcode);
    const bool write = op == hca::WqeOpcode::RdmaWrite || op == hca::WqeOpcode::RdmaWriteImm;
    return (c.flags & hca::kWqeInline) || op == hca::WqeOpcode::RdmaRead || (write && c.num_sge == 0);
}

}  // namespace

void* Driver::alloc_pinned(std::size_t bytes) {
    bytes = (bytes + 4095) & ~static_cast<std::size_t>(4095);
    void* p = std::aligned_alloc(4096, bytes);
    if (!p) return nullptr;
    std::memset(p, 0, bytes);
    m_pinned[p] = m_hca.pcie().memory().map(p, bytes);
    return p;
}

void Driver::free_pinned(void* p) {
    if (!p) return;
    auto it = m_pinned.find(p);
    if (it != m_pinned.end()) {
        m_hca.pcie().memory().unmap(it->second);
        m_pinned.erase(it);
    }
    std::free(p);
}

Driver::Driver(const DeviceInfo& info, hca::Hca& hca, firmware::CommandInterface& fw, const HostCosts& costs)
    : m_info(info), m_hca(hca), m_fw(fw), m_costs(costs), m_memory(hca.pcie().memory()) {
    m_hca.set_interrupt_sink(this);
}

Driver::~Driver() {
    // The node's memory and adapter go with the driver: only the host
    // memory behind the mappings needs giving back.
    for (auto& [p, bus] : m_pinned) std::free(const_cast<void*>(p));
}

int Driver::alloc_pd(std::uint32_t& pdn) {
    control_call();
    if (m_pds.size() >= m_hca.params().max_pd) return ENOMEM;
    pdn = m_next_pdn++;
    m_pds[pdn] = 0;
    return 0;
}

int Driver::dealloc_pd(std::uint32_t pdn) {
    control_call();
    auto it = m_pds.find(pdn);
    if (it == m_pds.end()) return EINVAL;
    if (it->second > 0) return EBUSY;
    m_pds.erase(it);
    return 0;
}

int Driver::reg_mr(std::uint32_t pdn, std::uint64_t addr, std::uint64_t length, std::uint32_t access,
                   std::uint32_t& key) {
    control_call();
    if (!m_pds.count(pdn)) return EINVAL;
    if (length == 0 || length > m_hca.params().max_mr_size) return EINVAL;
    // IBA: remote write (or atomic) access requires local write.
    if ((access & (hca::kRemoteWrite | hca::kRemoteAtomic)) && !(access & hca::kLocalWrite)) return EINVAL;
    // Pin the region: the adapter sees its bus address, never the pointer.
    auto& memory = m_hca.pcie().memory();
    const std::uint64_t bus =
        memory.map(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(addr)), length, current_address_space());
    key = m_fw.register_mr(pdn, addr, length, access, bus);
    if (key == 0) {
        memory.unmap(bus);
        return ENOMEM;
    }
    m_regions[key] = Registration{pdn, {bus}};
    ++m_pds[pdn];
    return 0;
}

int Driver::dereg_mr(std::uint32_t key) {
    control_call();
    auto it = m_regions.find(key);
    if (it == m_regions.end()) return EINVAL;
    if (!m_fw.deregister_mr(key)) return EBUSY;  // memory windows are bound to it
    for (const std::uint64_t bus : it->second.mappings) m_hca.pcie().memory().unmap(bus);
    --m_pds[it->second.pdn];
    m_regions.erase(it);
    return 0;
}

int Driver::alloc_mw(std::uint32_t pdn, hca::MptKind kind, std::uint32_t& key) {
    control_call();
    if (!m_pds.count(pdn) || kind == hca::MptKind::Region) return EINVAL;
    key = m_fw.alloc_window(pdn, kind);
    if (key == 0) return ENOMEM;
    m_windows[key >> 8] = pdn;
    ++m_pds[pdn];
    return 0;
}

int Driver::dealloc_mw(std::uint32_t key) {
    control_call();
    auto it = m_windows.find(key >> 8);
    if (it == m_windows.end()) return EINVAL;
    m_fw.free_window(key);
    --m_pds[it->second];
    m_windows.erase(it);
    return 0;
}

int Driver::create_cq(int entries, EventChannel* channel, DriverCq*& out) {
    control_call();
    if (entries < 1 || static_cast<std::uint32_t>(entries) > m_hca.params().max_cqe) return EINVAL;
    if (m_cqs.size() >= m_hca.params().max_cq) return ENOMEM;
    auto cq = std::make_unique<DriverCq>();
    cq->cqn = m_next_cqn++;
    cq->requested = entries;
    cq->log_size = log2_ceil(static_cast<std::uint64_t>(entries) + 1);
    cq->ring = static_cast<Cqe*>(alloc_pinned(sizeof(Cqe) << cq->log_size));
    cq->db = static_cast<hca::CqDoorbellRecord*>(alloc_pinned(sizeof(hca::CqDoorbellRecord)));
    if (!cq->ring || !cq->db) return ENOMEM;
    // Every entry starts owned by hardware for the first pass.
    for (std::uint32_t i = 0; i < (1u << cq->log_size); ++i) cq->ring[i].owner = 1;
    cq->channel = channel;
    if (channel) ++channel->cq_refs;
    m_fw.create_cq(cq->cqn, bus_of(cq->ring), cq->log_size, bus_of(cq->db));
    out = cq.get();
    m_cqs[cq->cqn] = std::move(cq);
    return 0;
}

int Driver::resize_cq(DriverCq& cq, int entries) {
    control_call();
    if (entries < 1 || static_cast<std::uint32_t>(entries) > m_hca.params().max_cqe) return EINVAL;
    const std::uint32_t log_size = log2_ceil(static_cast<std::uint64_t>(entries) + 1);
    auto* ring = static_cast<Cqe*>(alloc_pinned(sizeof(Cqe) << log_size));
    if (!ring) return ENOMEM;
    for (std::uint32_t i = 0; i < (1u << log_size); ++i) ring[i].owner = 1;
    std::uint32_t moved = 0;
    if (!m_fw.resize_cq(cq.cqn, bus_of(ring), log_size, cq.consumer, moved)) {
        free_pinned(ring);
        return EINVAL;  // fewer entries than the CQEs it holds
    }
    free_pinned(cq.ring);
    cq.ring = ring;
    cq.log_size = log_size;
    cq.consumer = 0;
    cq.db->consumer_index = 0;
    cq.requested = entries;
    return 0;
}

int Driver::destroy_cq(DriverCq* cq) {
    control_call();
    if (cq->qp_refs > 0) return EBUSY;
    m_fw.destroy_cq(cq->cqn);
    if (cq->channel) {
        --cq->channel->cq_refs;
        auto& ev = cq->channel->events;
        ev.erase(std::remove_if(ev.begin(), ev.end(), [&](const EventChannel::Event& e) { return e.cq == cq; }),
                 ev.end());
    }
    free_pinned(cq->ring);
    free_pinned(cq->db);
    m_cqs.erase(cq->cqn);
    return 0;
}

int Driver::poll_cq(DriverCq& cq, int max, Completion* out) {
    const sim::Tick t0 = sim::now_ps();
    // Every other API call costs CPU time, so a thread that polls a CQ the
    // instant its last poll of it came back empty is spinning on it: only
    // such a poll may stand for a run of empty polls. A poll made once, in a
    // loop that goes on to other work, returns after one poll's time.
    const sc_core::sc_process_b* thread = sc_core::sc_get_current_process_b();
    const bool spinning = cq.empty_poll_end == t0 && cq.empty_poll_thread == thread;
    spend_cpu(m_costs.poll_cq);
    int n = read_cqes(cq, max, out);
    if (n == 0 && max > 0 && spinning && m_costs.poll_fast_forward && m_costs.poll_cq > 0) {
        // Sleep through the polls that cannot see a change, on the poll grid
        // (t0 + k * cost) a run of empty polls would have.
        const sim::Tick cost = m_costs.poll_cq;
        const sim::Tick horizon = t0 + m_costs.poll_horizon;
        while (n == 0 && sim::now_ps() + cost <= horizon) {
            sleep_to_next_useful_read(m_memory, t0, cost, horizon);
            n = read_cqes(cq, max, out);
        }
    }
    if (n == 0) {
        cq.empty_poll_end = sim::now_ps();
        cq.empty_poll_thread = thread;
    } else {
        cq.empty_poll_end = ~sim::Tick(0);
    }
    return n;
}

int Driver::read_cqes(DriverCq& cq, int max, Completion* out) {
    int n = 0;
    const std::uint32_t mask = (1u << cq.log_size) - 1;
    const bool fresh_writes = m_memory.wrote_now();
    while (n < max) {
        const Cqe& c = cq.ring[cq.consumer & mask];
        if ((c.owner & 1) != ((cq.consumer >> cq.log_size) & 1)) break;
        if (fresh_writes && m_memory.wrote_now(&c, sizeof c)) break;  // written at this very instant
        Completion& o = out[n];
        o = Completion{};
        o.status = static_cast<hca::CqeStatus>(c.status);
        o.opcode = static_cast<hca::CqeOpcode>(c.opcode);
        o.byte_len = c.byte_len;
        o.imm = c.imm_data;
        o.has_imm = c.flags & hca::kCqeWithImm;
        o.is_send = c.flags & hca::kCqeIsSend;
        o.solicited = c.flags & hca::kCqeSolicited;
        o.qpn = c.qpn;
        o.src_qp = c.src_qp;
        o.slid = c.slid;
        o.sl = c.sl;
        o.grh = (c.flags & hca::kCqeGrh) != 0;
        o.with_invalidate = (c.flags & hca::kCqeWithInvalidate) != 0;
        o.vendor_err = c.status;
        o.timestamp = hca::cqe_timestamp(c);
        if (DriverQp* qp = find_qp(c.qpn); qp && !qp->vi) {
            if (o.is_send) {
                o.wr_id = qp->sq_wrid[c.wqe_index & ((1u << qp->sq_log_size) - 1)];
                qp->sq_tail = static_cast<std::uint16_t>(c.wqe_index + 1);
            } else if (c.flags & hca::kCqeXrcSrq) {
                // An XRC target names the SRQ the WQE came from.
                DriverSrq* srq = find_srq(c.src_qp);
                o.wr_id = srq ? release_srq_slot(*srq, c.wqe_index) : 0;
                o.src_qp = 0;
            } else if (qp->srq) {
                o.wr_id = release_srq_slot(*qp->srq, c.wqe_index);
            } else {
                o.wr_id = qp->rq_wrid[c.wqe_index & ((1u << qp->rq_log_size) - 1)];
                qp->rq_tail = static_cast<std::uint16_t>(c.wqe_index + 1);
            }
        }
        ++cq.consumer;
        ++n;
    }
    if (n) {
        // Publish the consumer index so the adapter can reuse the entries.
        cq.db->consumer_index = cq.consumer;
        const sim::Tick t0 = sim::now_ps();
        spend_cpu(m_costs.poll_cqe * static_cast<sim::Tick>(n));
        if (sim::tracer().on())
            sim::tracer().slice(host_track(), "poll_cq", t0, sim::now_ps(), {{"cq", cq.cqn}, {"completions", n}});
    }
    return n;
}

int Driver::req_notify_cq(DriverCq& cq, bool solicited_only) {
    spend_cpu(m_costs.req_notify);
    hca::DoorbellWrite w;
    w.offset = hca::kUarCqArm;
    w.number = cq.cqn;
    w.index = cq.consumer;
    w.solicited = solicited_only;
    store_to_adapter(std::move(w));
    return 0;
}

int Driver::create_qp(std::uint32_t pdn, DriverCq* send_cq, DriverCq* recv_cq, const QpCaps& caps, bool sq_sig_all,
                      DriverQp*& out, hca::QpType type, DriverSrq* srq) {
    control_call();
    const hca::HcaParams& p = m_hca.params();
    const bool xrc_ini = type == hca::QpType::XrcInitiator;
    if (!m_pds.count(pdn) || !send_cq || (!recv_cq && !xrc_ini)) return EINVAL;
    if (caps.max_send_wr > p.max_qp_wr || caps.max_recv_wr > p.max_qp_wr || caps.max_send_sge > p.max_sge ||
        caps.max_recv_sge > p.max_sge || caps.max_inline > p.max_inline)
        return EINVAL;
    if (m_qps.size() >= p.max_qp) return ENOMEM;
    auto qp = std::make_unique<DriverQp>();
    qp->qpn = m_next_qpn++;
    qp->pdn = pdn;
    qp->send_cq = send_cq;
    qp->recv_cq = recv_cq;
    qp->max_send_sge = std::max<std::uint32_t>(1, caps.max_send_sge);
    qp->max_recv_sge = std::max<std::uint32_t>(1, caps.max_recv_sge);
    qp->max_inline = caps.max_inline;
    qp->sq_sig_all = sq_sig_all;
    qp->type = type;
    // Send WQE: control + remote address (UD: datagram) segment + max(data
    // segments, inline bytes), padded to a power of two of at least one 64 B
    // basic block.
    const std::uint32_t head = sizeof(hca::SendWqeCtrl) +
                               (type == hca::QpType::Ud ? sizeof(hca::DatagramSeg) : sizeof(hca::RemoteAddrSeg)) +
                               (type == hca::QpType::XrcInitiator ? sizeof(hca::XrcSeg) : 0);
    const std::uint32_t body = std::max(qp->max_send_sge * 16u, (qp->max_inline + 15u) & ~15u);
    // An atomic WQE has its own segment and one data segment.
    const std::uint32_t atomic_wqe = head + sizeof(hca::AtomicSeg) + sizeof(DataSeg);
    qp->sq_log_stride = std::max<std::uint32_t>(6, log2_ceil(std::max(head + body, atomic_wqe)));
    qp->sq_log_size = log2_ceil(std::max<std::uint32_t>(1, caps.max_send_wr));
    qp->rq_log_stride = std::max<std::uint32_t>(5, log2_ceil(16u + qp->max_recv_sge * 16u));
    qp->rq_log_size = log2_ceil(std::max<std::uint32_t>(1, caps.max_recv_wr));
    // On an SRQ the QP has no receive ring of its own (its receive caps are
    // ignored, as the verbs API says); a minimal one keeps the layout uniform.
    // An XRC initiator only sends.
    if (xrc_ini) {
        recv_cq = nullptr;
        qp->recv_cq = nullptr;
    }
    if (srq || xrc_ini) {
        qp->srq = srq;
        qp->max_recv_sge = 1;
        qp->rq_log_size = 0;
        qp->rq_log_stride = 5;
    }
    // Report what was really allocated, as libibverbs providers do.
    qp->max_send_wr = 1u << qp->sq_log_size;
    qp->max_recv_wr = 1u << qp->rq_log_size;
    qp->max_inline = std::min<std::uint32_t>(p.max_inline, (1u << qp->sq_log_stride) - head);
    qp->max_send_sge = std::min<std::uint32_t>(p.max_sge, ((1u << qp->sq_log_stride) - head) / 16u);
    qp->max_recv_sge = srq || xrc_ini ? 0 : std::min<std::uint32_t>(p.max_sge, ((1u << qp->rq_log_stride) - 16u) / 16u);
    if (srq || xrc_ini) qp->max_recv_wr = 0;
    qp->sq = static_cast<std::uint8_t*>(alloc_pinned(static_cast<std::size_t>(1) << (qp->sq_log_size + qp->sq_log_stride)));
    qp->rq = static_cast<std::uint8_t*>(alloc_pinned(static_cast<std::size_t>(1) << (qp->rq_log_size + qp->rq_log_stride)));
    qp->rq_db = static_cast<hca::RqDoorbellRecord*>(alloc_pinned(sizeof(hca::RqDoorbellRecord)));
    if (!qp->sq || !qp->rq || !qp->rq_db) return ENOMEM;
    qp->sq_wrid.assign(qp->max_send_wr, 0);
    qp->rq_wrid.assign(std::size_t{1} << qp->rq_log_size, 0);
    firmware::QpRings r;
    r.pdn = pdn;
    r.send_cqn = send_cq->cqn;
    r.recv_cqn = recv_cq ? recv_cq->cqn : 0;
    r.sq_sig_all = sq_sig_all;
    r.sq_base = bus_of(qp->sq);
    r.sq_log_size = qp->sq_log_size;
    r.sq_log_stride = qp->sq_log_stride;
    r.rq_base = bus_of(qp->rq);
    r.rq_log_size = qp->rq_log_size;
    r.rq_log_stride = qp->rq_log_stride;
    r.rq_db_record = srq || xrc_ini ? 0 : bus_of(qp->rq_db);
    r.srqn = srq ? srq->srqn : 0;
    r.max_send_sge = qp->max_send_sge;
    r.max_recv_sge = qp->max_recv_sge;
    r.max_inline = qp->max_inline;
    r.type = type;
    m_fw.create_qp(qp->qpn, r);
    ++send_cq->qp_refs;
    if (recv_cq) ++recv_cq->qp_refs;
    ++m_pds[pdn];
    if (srq) ++srq->qp_refs;
    out = qp.get();
    m_qps[qp->qpn] = std::move(qp);
    return 0;
}

int Driver::modify_qp(DriverQp& qp, const firmware::QpAttributes& a, std::uint32_t fw_mask) {
    control_call();
    if (!m_fw.modify_qp(qp.qpn, a, fw_mask)) return EINVAL;
    if (fw_mask & firmware::kAttrState) {
        qp.state = a.state;
        if (a.state == hca::QpState::Reset) {
            qp.sq_pi = qp.sq_tail = qp.rq_pi = qp.rq_tail = 0;
            if (qp.rq_db) qp.rq_db->producer_index = 0;
            qp.sq_unrung = 0;
        }
    }
    // Remember what was set, for query.
    auto& s = qp.attr;
    if (fw_mask & firmware::kAttrState) s.state = a.state;
    if (fw_mask & firmware::kAttrAccess) s.access = a.access;
    if (fw_mask & firmware::kAttrPathMtu) s.path_mtu = a.path_mtu;
    if (fw_mask & firmware::kAttrAv) {
        s.dlid = a.dlid;
        s.sl = a.sl;
        s.grh = a.grh;
    }
    if (fw_mask & firmware::kAttrQkey) s.qkey = a.qkey;
    if (fw_mask & firmware::kAttrPort) s.port = a.port;
    if (fw_mask & firmware::kAttrAltPath) s.alt = a.alt;
    if (fw_mask & firmware::kAttrPathMigState) s.mig = a.mig;
    if (fw_mask & firmware::kAttrDestQpn) s.dest_qpn = a.dest_qpn;
    if (fw_mask & firmware::kAttrRqPsn) s.rq_psn = a.rq_psn;
    if (fw_mask & firmware::kAttrSqPsn) s.sq_psn = a.sq_psn;
    if (fw_mask & firmware::kAttrMaxDestRdAtomic) s.max_dest_rd_atomic = a.max_dest_rd_atomic;
    if (fw_mask & firmware::kAttrMaxRdAtomic) s.max_rd_atomic = a.max_rd_atomic;
    if (fw_mask & firmware::kAttrMinRnrTimer) s.min_rnr_timer = a.min_rnr_timer;
    if (fw_mask & firmware::kAttrTimeout) s.timeout = a.timeout;
    if (fw_mask & firmware::kAttrRetryCnt) s.retry_cnt = a.retry_cnt;
    if (fw_mask & firmware::kAttrRnrRetry) s.rnr_retry = a.rnr_retry;
    return 0;
}

void Driver::query_qp_state(DriverQp& qp) {
    control_call();
    // The adapter may have changed the state and, migrating, the paths.
    if (!m_fw.query_qp(qp.qpn, qp.attr)) qp.attr.state = hca::QpState::Err;
    qp.state = qp.attr.state;
}

int Driver::destroy_qp(DriverQp* qp) {
    control_call();
    // As the kernel's ib_destroy_qp: not while attached to a multicast group.
    if (mcast_attachments(qp->qpn)) return EBUSY;
    m_fw.destroy_qp(qp->qpn);
    if (qp->send_cq) --qp->send_cq->qp_refs;
    if (qp->recv_cq) --qp->recv_cq->qp_refs;
    if (qp->type == hca::QpType::XrcTarget)
        --m_xrcds[qp->xrcd].refs;
    else
        --m_pds[qp->pdn];
    if (qp->srq) --qp->srq->qp_refs;
    free_pinned(qp->sq);
    free_pinned(qp->rq);
    free_pinned(qp->rq_db);
    m_qps.erase(qp->qpn);
    return 0;
}

DriverQp* Driver::find_qp(std::uint32_t qpn) {
    auto it = m_qps.find(qpn);
    return it == m_qps.end() ? nullptr : it->second.get();
}

DriverCq* Driver::find_cq(std::uint32_t cqn) {
    auto it = m_cqs.find(cqn);
    return it == m_cqs.end() ? nullptr : it->second.get();
}

int Driver::write_send_wqe(DriverQp& qp, const SendRequest& r) {
    const sim::Tick t0 = sim::now_ps();
    spend_cpu(m_costs.post_send);
    if (static_cast<std::uint16_t>(qp.sq_pi - qp.sq_tail) >= qp.max_send_wr) return ENOMEM;
    if (r.num_sge > qp.max_send_sge) return EINVAL;
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < r.num_sge; ++i) total += r.sges[i].length;
    if (total > 0x80000000ull) return EINVAL;
    if (r.inline_data && total > qp.max_inline) return EINVAL;
    const std::uint32_t stride = 1u << qp.sq_log_stride;
    std::uint8_t* wqe = qp.sq + static_cast<std::size_t>(qp.sq_pi & (qp.max_send_wr - 1)) * stride;
    SendWqeCtrl ctrl{};
    ctrl.opcode = static_cast<std::uint8_t>(r.op);
    ctrl.flags = static_cast<std::uint8_t>((r.signaled ? hca::kWqeSignaled : 0) | (r.solicited ? hca::kWqeSolicited : 0) |
                                           (r.inline_data ? hca::kWqeInline : 0) | (r.fence ? hca::kWqeFence : 0));
    ctrl.imm_data = r.imm;
    ctrl.wqe_index = qp.sq_pi;
    std::uint32_t off = sizeof ctrl;
    if (qp.type == hca::QpType::XrcInitiator) {
        const hca::XrcSeg xs{r.xrc_srqn, {}};
        std::memcpy(wqe + off, &xs, sizeof xs);
        off += sizeof xs;
    }
    // Memory management operations carry no data; invalidations name their
    // rkey in the control segment, a bind has its own segment.
    if (hca::is_local_operation(r.op) && (r.num_sge || r.inline_data)) return EINVAL;
    if (r.op == hca::WqeOpcode::LocalInvalidate || r.op == hca::WqeOpcode::SendInvalidate)
        ctrl.imm_data = r.invalidate_rkey;
    if (r.op == hca::WqeOpcode::BindWindow) {
        if (!r.bind || qp.type == hca::QpType::Ud) return EINVAL;
        std::memcpy(wqe + off, r.bind, sizeof *r.bind);
        off += sizeof *r.bind;
    }
    if (qp.type == hca::QpType::Ud) {
        if (!r.datagram) return EINVAL;
        std::memcpy(wqe + off, r.datagram, sizeof *r.datagram);
        off += sizeof *r.datagram;
    } else if (r.op == hca::WqeOpcode::RdmaWrite || r.op == hca::WqeOpcode::RdmaWriteImm ||
               r.op == hca::WqeOpcode::RdmaRead || hca::is_atomic(r.op)) {
        RemoteAddrSeg ra{r.raddr, r.rkey, 0};
        std::memcpy(wqe + off, &ra, sizeof ra);
        off += sizeof ra;
        if (hca::is_atomic(r.op)) {
            const hca::AtomicSeg as{r.swap_add, r.compare};
            std::memcpy(wqe + off, &as, sizeof as);
            off += sizeof as;
        }
    }
    // The WQE must fit its slot.
    if (off + (r.inline_data ? total : std::uint64_t{r.num_sge} * sizeof(DataSeg)) > stride) return EINVAL;
    if (r.inline_data) {
        // The CPU copies the payload into the WQE now; the buffer is free at once.
        ctrl.inline_bytes = static_cast<std::uint32_t>(total);
        for (std::uint32_t i = 0; i < r.num_sge; ++i) {
            std::memcpy(wqe + off, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(r.sges[i].addr)),
                        r.sges[i].length);
            off += r.sges[i].length;
        }
    } else {
        ctrl.num_sge = static_cast<std::uint8_t>(r.num_sge);
        for (std::uint32_t i = 0; i < r.num_sge; ++i) {
            DataSeg d{r.sges[i].addr, r.sges[i].lkey, r.sges[i].length};
            std::memcpy(wqe + off, &d, sizeof d);
            off += sizeof d;
        }
    }
    std::memcpy(wqe, &ctrl, sizeof ctrl);
    qp.sq_wrid[qp.sq_pi & (qp.max_send_wr - 1)] = r.wr_id;
    // Keep the size of the last WQE for a BlueFlame write.
    m_bf.assign(wqe, wqe + ((off + hca::kWqeBasicBlock - 1) & ~(hca::kWqeBasicBlock - 1)));
    // A work request's flow starts where the host writes its WQE.
    if (sim::tracer().on())
        sim::tracer().slice(host_track(), "post_send WQE", t0, sim::now_ps(), {{"qp", qp.qpn}, {"wqe", qp.sq_pi}},
                            sim::Tracer::flow_of(m_hca.name(), qp.qpn, qp.sq_pi));
    ++qp.sq_pi;
    ++qp.sq_unrung;
    return 0;
}

std::string Driver::host_track() const {
    const std::string hca = m_hca.name();
    const int k = current_thread_index();
    return hca.substr(0, hca.find('.')) + ".host" + (k > 0 ? std::to_string(k) : std::string());
}

int Driver::write_recv_wqe(DriverQp& qp, std::uint64_t wr_id, const Sge* sges, std::uint32_t n) {
    spend_cpu(m_costs.post_recv);
    // Its receives go to an SRQ, or it has none (XRC).
    if (qp.srq || qp.type == hca::QpType::XrcInitiator || qp.type == hca::QpType::XrcTarget) return EINVAL;
    if (static_cast<std::uint16_t>(qp.rq_pi - qp.rq_tail) >= qp.max_recv_wr) return ENOMEM;
    if (n > qp.max_recv_sge) return EINVAL;
    const std::uint32_t stride = 1u << qp.rq_log_stride;
    std::uint8_t* wqe = qp.rq + static_cast<std::size_t>(qp.rq_pi & (qp.max_recv_wr - 1)) * stride;
    RecvWqeCtrl ctrl{};
    ctrl.wqe_index = qp.rq_pi;
    ctrl.num_sge = static_cast<std::uint8_t>(n);
    std::memcpy(wqe, &ctrl, sizeof ctrl);
    for (std::uint32_t i = 0; i < n; ++i) {
        DataSeg d{sges[i].addr, sges[i].lkey, sges[i].length};
        std::memcpy(wqe + sizeof ctrl + i * sizeof d, &d, sizeof d);
    }
    qp.rq_wrid[qp.rq_pi & (qp.max_recv_wr - 1)] = wr_id;
    ++qp.rq_pi;
    return 0;
}

void Driver::ring_send_doorbell(DriverQp& qp) {
    if (qp.sq_unrung == 0) return;
    hca::DoorbellWrite w;
    w.number = qp.qpn;
    w.index = qp.sq_pi;
    // A lone small WQE goes by BlueFlame: the WQE itself is written to the
    // adapter, which then needs no fetch DMA. By mlx4's rule only one with
    // nothing to gather; by mlx5's (hca.blueflame_any_wqe) any.
    const hca::HcaParams& p = m_hca.params();
    if (p.blueflame && qp.sq_unrung == 1 && m_bf.size() <= p.blueflame_max_bytes &&
        (p.blueflame_any_wqe || starts_without_fetch(m_bf))) {
        w.offset = hca::kUarBlueFlame;
        w.wqe = m_bf;
    } else {
        w.offset = hca::kUarSendDoorbell;
    }
    qp.sq_unrung = 0;
    store_to_adapter(std::move(w));
}

void Driver::store_to_adapter(hca::DoorbellWrite&& w) {
    m_hca.doorbells().mmio_write(sim::now_ps(), std::move(w));
    spend_cpu(m_costs.mmio_store);
}

void Driver::discard_send_wqes(DriverQp& qp) {
    qp.sq_pi = static_cast<std::uint16_t>(qp.sq_pi - qp.sq_unrung);
    qp.sq_unrung = 0;
}

void Driver::ring_recv_doorbell(DriverQp& qp) {
    // The WQEs are written before the record (a store barrier on real
    // hardware), so the adapter never reads an index ahead of its WQEs.
    qp.rq_db->producer_index = qp.rq_pi;
}

// ---- Shared receive queues ----

int Driver::create_srq(std::uint32_t pdn, std::uint32_t& max_wr, std::uint32_t& max_sge, DriverSrq*& out,
                       std::uint32_t xrcd, DriverCq* cq) {
    control_call();
    const hca::HcaParams& p = m_hca.params();
    if (!m_pds.count(pdn) || max_wr == 0 || max_wr > p.max_srq_wr || max_sge > p.max_srq_sge) return EINVAL;
    if (xrcd && (!m_xrcds.count(xrcd) || !cq)) return EINVAL;
    if (m_srqs.size() >= p.max_srq) return ENOMEM;
    auto srq = std::make_unique<DriverSrq>();
    srq->srqn = m_next_srqn++;
    srq->pdn = pdn;
    srq->max_sge = std::max<std::uint32_t>(1, max_sge);
    srq->log_stride = std::max<std::uint32_t>(5, log2_ceil(16u + srq->max_sge * 16u));
    srq->max_sge = std::min<std::uint32_t>(p.max_srq_sge, ((1u << srq->log_stride) - 16u) / 16u);
    // One slot more than the WQEs it may hold: the sentinel.
    srq->log_size = log2_ceil(max_wr + 1);
    srq->max_wr = (1u << srq->log_size) - 1;
    srq->ring = static_cast<std::uint8_t*>(alloc_pinned(static_cast<std::size_t>(1) << (srq->log_size + srq->log_stride)));
    srq->db = static_cast<hca::RqDoorbellRecord*>(alloc_pinned(sizeof(hca::RqDoorbellRecord)));
    if (!srq->ring || !srq->db) {
        free_pinned(srq->ring);
        free_pinned(srq->db);
        return ENOMEM;
    }
    const std::uint32_t slots = 1u << srq->log_size;
    srq->wrid.assign(slots, 0);
    link_srq_slots(*srq, 0, slots);
    srq->head = 0;
    srq->tail = static_cast<std::uint16_t>(slots - 1);
    srq->xrcd = xrcd;
    srq->cq = cq;
    firmware::SrqRing r;
    r.pdn = pdn;
    r.base = bus_of(srq->ring);
    r.log_size = srq->log_size;
    r.log_stride = srq->log_stride;
    r.db_record = bus_of(srq->db);
    r.max_sge = srq->max_sge;
    r.xrcd = xrcd;
    r.cqn = cq ? cq->cqn : 0;
    m_fw.create_srq(srq->srqn, r);
    ++m_pds[pdn];
    if (xrcd) ++m_xrcds[xrcd].refs;
    if (cq) ++cq->qp_refs;
    max_wr = srq->max_wr;
    max_sge = srq->max_sge;
    out = srq.get();
    m_srqs[srq->srqn] = std::move(srq);
    return 0;
}

void Driver::link_srq_slots(DriverSrq& srq, std::uint32_t first, std::uint32_t end) {
    const std::uint32_t stride = 1u << srq.log_stride;
    for (std::uint32_t i = first; i < end; ++i) {
        RecvWqeCtrl ctrl{};
        ctrl.next_index = static_cast<std::uint16_t>((i + 1) & ((1u << srq.log_size) - 1));
        std::memcpy(srq.ring + static_cast<std::size_t>(i) * stride, &ctrl, sizeof ctrl);
    }
}

std::uint64_t Driver::release_srq_slot(DriverSrq& srq, std::uint16_t slot) {
    const std::uint32_t stride = 1u << srq.log_stride;
    const std::uint16_t s = static_cast<std::uint16_t>(slot & ((1u << srq.log_size) - 1));
    // Link the slot behind the free list's last one.
    auto* tail = reinterpret_cast<RecvWqeCtrl*>(srq.ring + static_cast<std::size_t>(srq.tail) * stride);
    tail->next_index = s;
    srq.tail = s;
    if (srq.outstanding) --srq.outstanding;
    return srq.wrid[s];
}

int Driver::destroy_srq(DriverSrq* srq) {
    control_call();
    if (srq->qp_refs) return EBUSY;
    m_fw.destroy_srq(srq->srqn);
    --m_pds[srq->pdn];
    if (srq->xrcd) --m_xrcds[srq->xrcd].refs;
    if (srq->cq) --srq->cq->qp_refs;
    free_pinned(srq->ring);
    free_pinned(srq->db);
    m_srqs.erase(srq->srqn);
    return 0;
}

int Driver::arm_srq(DriverSrq& srq, std::uint32_t limit) {
    control_call();
    if (limit > srq.max_wr) return EINVAL;
    m_fw.arm_srq(srq.srqn, limit);
    return 0;
}

std::uint32_t Driver::query_srq_limit(DriverSrq& srq) {
    control_call();
    return m_fw.query_srq_limit(srq.srqn);
}

int Driver::resize_srq(DriverSrq& srq, std::uint32_t max_wr) {
    control_call();
    if (max_wr == 0 || max_wr > m_hca.params().max_srq_wr || max_wr < srq.outstanding) return EINVAL;
    const std::uint32_t log_size = log2_ceil(max_wr + 1);
    if (log_size <= srq.log_size) {
        // The ring already has the slots: only the consumer's bound moves.
        srq.max_wr = std::max(max_wr, (1u << srq.log_size) - 1);
        return 0;
    }
    // Every slot keeps its index in the larger ring, so the WQEs the adapter
    // holds and the completions still to come name the same slots; the new
    // slots join the free list behind its tail.
    const std::uint32_t old_slots = 1u << srq.log_size, slots = 1u << log_size;
    const std::uint32_t stride = 1u << srq.log_stride;
    auto* ring = static_cast<std::uint8_t*>(alloc_pinned(static_cast<std::size_t>(slots) * stride));
    if (!ring) return ENOMEM;
    std::memcpy(ring, srq.ring, static_cast<std::size_t>(old_slots) * stride);
    std::uint8_t* old = srq.ring;
    srq.ring = ring;
    srq.log_size = log_size;
    link_srq_slots(srq, old_slots, slots);
    auto* tail = reinterpret_cast<RecvWqeCtrl*>(srq.ring + static_cast<std::size_t>(srq.tail) * stride);
    tail->next_index = static_cast<std::uint16_t>(old_slots);
    srq.tail = static_cast<std::uint16_t>(slots - 1);
    srq.wrid.resize(slots, 0);
    if (!m_fw.resize_srq(srq.srqn, bus_of(srq.ring), log_size)) return EINVAL;
    free_pinned(old);
    srq.max_wr = slots - 1;
    return 0;
}

int Driver::write_srq_wqe(DriverSrq& srq, std::uint64_t wr_id, const Sge* sges, std::uint32_t n) {
    spend_cpu(m_costs.post_recv);
    if (n > srq.max_sge) return EINVAL;
    if (srq.head == srq.tail || srq.outstanding >= srq.max_wr) return ENOMEM;
    const std::uint32_t stride = 1u << srq.log_stride;
    const std::uint16_t slot = srq.head;
    std::uint8_t* wqe = srq.ring + static_cast<std::size_t>(slot) * stride;
    RecvWqeCtrl ctrl;
    std::memcpy(&ctrl, wqe, sizeof ctrl);
    // The slot's link to the next free one stays: the adapter follows it.
    srq.head = ctrl.next_index;
    ctrl.wqe_index = slot;
    ctrl.num_sge = static_cast<std::uint8_t>(n);
    std::memcpy(wqe, &ctrl, sizeof ctrl);
    for (std::uint32_t i = 0; i < n; ++i) {
        DataSeg d{sges[i].addr, sges[i].lkey, sges[i].length};
        std::memcpy(wqe + sizeof ctrl + i * sizeof d, &d, sizeof d);
    }
    srq.wrid[slot] = wr_id;
    ++srq.posted;
    ++srq.outstanding;
    return 0;
}

void Driver::ring_srq_doorbell(DriverSrq& srq) {
    // WQEs first, then the count (a store barrier on real hardware).
    srq.db->producer_index = srq.posted;
}

// ---- XRC domains and target QPs ----

int Driver::open_xrcd(std::uint64_t inode, bool create, std::uint32_t& xrcd) {
    control_call();
    if (inode) {
        for (auto& [n, d] : m_xrcds)
            if (d.inode == inode) {
                ++d.opens;
                xrcd = n;
                return 0;
            }
        if (!create) return ENOENT;
    }
    xrcd = m_next_xrcd++;
    m_xrcds[xrcd] = XrcDomain{inode, 1, 0};
    return 0;
}

int Driver::close_xrcd(std::uint32_t xrcd) {
    control_call();
    auto it = m_xrcds.find(xrcd);
    if (it == m_xrcds.end()) return EINVAL;
    if (it->second.opens == 1 && it->second.refs) return EBUSY;
    if (--it->second.opens == 0) m_xrcds.erase(it);
    return 0;
}

int Driver::create_xrc_target(std::uint32_t xrcd, DriverQp*& out) {
    control_call();
    auto d = m_xrcds.find(xrcd);
    if (d == m_xrcds.end()) return EINVAL;
    if (m_qps.size() >= m_hca.params().max_qp) return ENOMEM;
    // A target has no queues of its own: it answers from the SRQs of its
    // domain, named packet by packet.
    auto qp = std::make_unique<DriverQp>();
    qp->qpn = m_next_qpn++;
    qp->type = hca::QpType::XrcTarget;
    qp->xrcd = xrcd;
    qp->sq_log_stride = 6;
    qp->rq_log_stride = 5;
    qp->sq = static_cast<std::uint8_t*>(alloc_pinned(64));
    if (!qp->sq) return ENOMEM;
    qp->sq_wrid.assign(1, 0);
    qp->rq_wrid.assign(1, 0);
    firmware::QpRings r;
    r.sq_base = bus_of(qp->sq);
    r.sq_log_size = 0;
    r.type = hca::QpType::XrcTarget;
    r.xrcd = xrcd;
    m_fw.create_qp(qp->qpn, r);
    ++d->second.refs;
    out = qp.get();
    m_qps[qp->qpn] = std::move(qp);
    return 0;
}

DriverSrq* Driver::find_srq(std::uint32_t srqn) {
    auto it = m_srqs.find(srqn);
    return it == m_srqs.end() ? nullptr : it->second.get();
}

int Driver::get_cq_event(EventChannel& ch, DriverCq*& cq) {
    for (;;) {
        if (!ch.events.empty()) {
            const sim::Tick now = sim::now_ps();
            if (ch.events.front().ready_at <= now) {
                cq = ch.events.front().cq;
                ch.events.pop_front();
                ++cq->events_delivered;
                return 0;
            }
            sc_core::wait(sim::to_sc(ch.events.front().ready_at - now));
            continue;
        }
        sc_core::wait(ch.arrived);
    }
}

bool Driver::get_async_event(hca::AsyncEvent& e) {
    for (;;) {
        if (!m_async.empty()) {
            const sim::Tick now = sim::now_ps();
            if (m_async.front().ready_at <= now) {
                e = m_async.front().event;
                m_async.pop_front();
                return true;
            }
            sc_core::wait(sim::to_sc(m_async.front().ready_at - now));
            continue;
        }
        sc_core::wait(m_async_arrived);
    }
}

void Driver::completion_event(std::uint32_t cqn) {
    auto it = m_cqs.find(cqn);
    if (it != m_cqs.end() && it->second->on_interrupt) {
        DriverCq* cq = it->second.get();
        after_interrupt([cq]() { cq->on_interrupt(); });
        return;
    }
    if (it == m_cqs.end() || !it->second->channel) return;
    EventChannel& ch = *it->second->channel;
    ch.events.push_back({it->second.get(), sim::now_ps() + m_costs.interrupt});
    ch.arrived.notify(sim::to_sc(m_costs.interrupt));
}

void Driver::after_interrupt(std::function<void()> fn) {
    // The adapter's completion engine serves as the interrupt controller's clock.
    m_hca.completion().at(sim::now_ps() + m_costs.interrupt, [fn = std::move(fn)]() { fn(); });
}

void Driver::vi_queue_event(std::uint32_t qpn, bool recv_queue) {
    if (on_vi_queue) after_interrupt([this, qpn, recv_queue]() { on_vi_queue(qpn, recv_queue); });
}

int Driver::create_vi(const ViConfig& c, DriverCq* send_cq, DriverCq* recv_cq, DriverQp*& out) {
    control_call();
    if (!m_pds.count(c.pdn)) return EINVAL;
    if (m_qps.size() >= m_hca.params().max_qp) return ENOMEM;
    auto qp = std::make_unique<DriverQp>();
    qp->qpn = m_next_qpn++;
    qp->pdn = c.pdn;
    qp->send_cq = send_cq;
    qp->recv_cq = recv_cq;
    qp->vi = true;
    firmware::QpRings r;
    r.pdn = c.pdn;
    r.send_cqn = send_cq ? send_cq->cqn : 0;
    r.recv_cqn = recv_cq ? recv_cq->cqn : 0;
    r.sq_sig_all = true;
    r.vi = c.reliability;
    r.vi_max_transfer = c.max_transfer;
    m_fw.create_qp(qp->qpn, r);
    m_fw.modify_vi(qp->qpn, c.reliability, c.max_transfer, c.pdn, c.access, c.sl);
    firmware::QpAttributes a;
    a.state = hca::QpState::Init;
    a.access = c.access;
    m_fw.modify_qp(qp->qpn, a, firmware::kAttrState | firmware::kAttrAccess);
    qp->state = hca::QpState::Init;
    if (send_cq) ++send_cq->qp_refs;
    if (recv_cq) ++recv_cq->qp_refs;
    ++m_pds[c.pdn];
    out = qp.get();
    m_qps[qp->qpn] = std::move(qp);
    return 0;
}

int Driver::modify_vi(DriverQp& qp, const ViConfig& c) {
    control_call();
    if (!m_pds.count(c.pdn)) return EINVAL;
    if (!m_fw.modify_vi(qp.qpn, c.reliability, c.max_transfer, c.pdn, c.access, c.sl)) return EINVAL;
    if (c.pdn != qp.pdn) {
        --m_pds[qp.pdn];
        ++m_pds[c.pdn];
        qp.pdn = c.pdn;
    }
    return 0;
}

void Driver::reset_vi(DriverQp& qp) {
    control_call();
    firmware::QpAttributes a;
    a.state = hca::QpState::Err;
    m_fw.modify_qp(qp.qpn, a, firmware::kAttrState);
    a.state = hca::QpState::Reset;
    m_fw.modify_qp(qp.qpn, a, firmware::kAttrState);
    a.state = hca::QpState::Init;
    m_fw.modify_qp(qp.qpn, a, firmware::kAttrState);
    qp.state = hca::QpState::Init;
}

int Driver::destroy_vi(DriverQp* qp) {
    control_call();
    m_fw.destroy_qp(qp->qpn);
    if (qp->send_cq) --qp->send_cq->qp_refs;
    if (qp->recv_cq) --qp->recv_cq->qp_refs;
    --m_pds[qp->pdn];
    m_qps.erase(qp->qpn);
    return 0;
}

void Driver::post_vi_descriptor(DriverQp& qp, bool recv, std::uint64_t addr, std::uint32_t handle, bool chain_start) {
    spend_cpu(recv ? m_costs.post_recv : m_costs.post_send);
    hca::DoorbellWrite w;
    w.offset = recv ? hca::kUarViRecvDoorbell : hca::kUarViSendDoorbell;
    w.number = qp.qpn;
    w.vi = hca::ViDoorbellToken{addr, handle, chain_start};
    store_to_adapter(std::move(w));
}

void Driver::arm_vi_queue(DriverQp& qp, bool recv) {
    spend_cpu(m_costs.req_notify);
    hca::DoorbellWrite w;
    w.offset = hca::kUarViArm;
    w.number = qp.qpn;
    w.recv_queue = recv;
    store_to_adapter(std::move(w));
}

int Driver::reg_pages(std::uint32_t pdn, const std::vector<std::uint64_t>& pages, std::uint32_t access,
                      std::uint32_t& key) {
    control_call();
    if (!m_pds.count(pdn) || pages.empty()) return EINVAL;
    // The consumer names host pages; each is pinned at a bus page of its own.
    auto& memory = m_hca.pcie().memory();
    std::vector<std::uint64_t> bus(pages.size());
    for (std::size_t i = 0; i < pages.size(); ++i)
        bus[i] = memory.map(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(pages[i])), 4096);
    key = m_fw.register_pages(pdn, bus, access);
    if (key == 0) {
        for (const std::uint64_t b : bus) memory.unmap(b);
        return ENOMEM;
    }
    m_regions[key] = Registration{pdn, std::move(bus)};
    ++m_pds[pdn];
    return 0;
}

int Driver::modify_mr(std::uint32_t key, std::uint32_t pdn, std::uint32_t access) {
    control_call();
    auto it = m_regions.find(key);
    if (it == m_regions.end() || !m_pds.count(pdn)) return EINVAL;
    if (!m_fw.modify_mr(key, pdn, access)) return EINVAL;
    --m_pds[it->second.pdn];
    ++m_pds[pdn];
    it->second.pdn = pdn;
    return 0;
}

void Driver::async_event(const hca::AsyncEvent& e) {
    const bool vi_event = e.type >= hca::AsyncEventType::ViPostDescriptor;
    if (on_vi_async && (vi_event || e.type == hca::AsyncEventType::CqError))
        after_interrupt([this, e]() { on_vi_async(e); });
    if (vi_event && e.type != hca::AsyncEventType::Catastrophic) return;
    if (e.type == hca::AsyncEventType::QpFatal || e.type == hca::AsyncEventType::QpRequestError ||
        e.type == hca::AsyncEventType::QpAccessError) {
        if (DriverQp* qp = find_qp(e.number)) qp->state = hca::QpState::Err;
    }
    // The kernel's SA multicast client takes these to mean the SM may have
    // dropped the port's memberships.
    if (e.type == hca::AsyncEventType::ClientReregister || e.type == hca::AsyncEventType::LidChange ||
        e.type == hca::AsyncEventType::PortError)
        lose_groups();
    m_async.push_back({e, sim::now_ps() + m_costs.interrupt});
    m_async_arrived.notify(sim::to_sc(m_costs.interrupt));
}

}  // namespace hcasim::host
