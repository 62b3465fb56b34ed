// The extended verbs: ibv_query_device_ex, ibv_query_rt_values_ex,
// ibv_create_cq_ex with the ibv_start_poll / ibv_next_poll / ibv_end_poll
// and ibv_wc_read_* calls, ibv_create_qp_ex and ibv_qp_to_qp_ex with the
// ibv_wr_* calls. The header reaches them through the ops of the
// verbs_context every context is opened in and through the function
// pointers of struct ibv_cq_ex and struct ibv_qp_ex filled in here.
//
// They are built on the classic verbs: an extended CQ is an ibv_create_cq
// CQ (so ibv_poll_cq, ibv_req_notify_cq and completion channels work on
// ibv_cq_ex_to_cq() of it), its completions are what ibv_poll_cq returns,
// and ibv_wr_complete posts its batch through the ibv_post_send path, so
// the two build the same WQEs and accept the same opcodes and QP types.
#include <infiniband/verbs.h>

#include <cerrno>
#include <climits>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "host/verbs/verbs_internal.hpp"

namespace hcasim::verbs {
namespace {

// ---- device ----

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    std::size_t attr_size) {
    if (!context || !attr) return EINVAL;
    if (input && input->comp_mask) return EINVAL;
    if (attr_size < sizeof attr->orig_attr) return EINVAL;
    ibv_device_attr_ex a{};
    const int err = ibv_query_device(context, &a.orig_attr);
    if (err) return err;
    const hca::HcaParams& p = drv(context)->hca().params();
    // The completion timestamp counts core clock cycles (docs/architecture.md).
    a.completion_timestamp_mask = hca::kCqeTimestampMask;
    a.hca_core_clock = static_cast<std::uint64_t>(std::llround(p.core_clock_mhz * 1000.0));  // kHz
    a.device_cap_flags_ex = static_cast<unsigned int>(a.orig_attr.device_cap_flags);
    a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
    // A program built against a newer header passes a larger struct: the
    // fields this one does not know read as zero.
    std::memset(attr, 0, attr_size);
    std::memcpy(attr, &a, std::min(attr_size, sizeof a));
    return 0;
}

// The adapter's free-running core clock counter, the one CQE timestamps
// are taken from, read as mlx5 reports it (cycles in tv_nsec).
int query_rt_values(ibv_context* context, ibv_values_ex* values) {
    if (!context || !values) return EINVAL;
    if (values->comp_mask & ~static_cast<std::uint32_t>(IBV_VALUES_MASK_RAW_CLOCK)) return EINVAL;
    std::uint32_t mask = 0;
    if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
        const std::uint64_t cycles = drv(context)->hca().completion().clock().count_at(sim::now_ps());
        values->raw_clock.tv_sec = 0;
        values->raw_clock.tv_nsec = static_cast<long>(cycles & hca::kCqeTimestampMask);
        mask |= IBV_VALUES_MASK_RAW_CLOCK;
    }
    values->comp_mask = mask;
    return 0;
}

// ---- extended CQ ----

SimCq* ex_cq(ibv_cq_ex* cq) { return reinterpret_cast<SimCq*>(cq); }

void take(SimCq* s, const host::Completion& c) {
    to_ibv_wc(c, s->cur.wc);
    s->cur.timestamp = c.timestamp;
    s->cq_ex.status = s->cur.wc.status;
    s->cq_ex.wr_id = s->cur.wc.wr_id;
}

// One completion, at the cost and with the waiting of ibv_poll_cq(cq, 1).
int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
    if (attr && attr->comp_mask) return EINVAL;
    SimCq* s = ex_cq(cq);
    host::Completion c;
    if (drv(cq->context)->poll_cq(*s->dcq, 1, &c) == 0) return ENOENT;
    take(s, c);
    return 0;
}

// The next completion: the cost of one more CQE read in the same poll.
int next_poll(ibv_cq_ex* cq) {
    SimCq* s = ex_cq(cq);
    host::Completion c;
    if (drv(cq->context)->read_cqes(*s->dcq, 1, &c) == 0) return ENOENT;
    take(s, c);
    return 0;
}

// Each completion's consumer index is already published when it is read.
void end_poll(ibv_cq_ex*) {}

ibv_wc_opcode read_opcode(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.opcode; }
uint32_t read_vendor_err(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.byte_len; }
__be32 read_imm_data(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.imm_data; }
uint32_t read_qp_num(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.qp_num; }
uint32_t read_src_qp(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.wc_flags; }
uint32_t read_slid(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.slid; }
uint8_t read_sl(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* cq) { return ex_cq(cq)->cur.wc.dlid_path_bits; }
uint64_t read_completion_ts(ibv_cq_ex* cq) { return ex_cq(cq)->cur.timestamp; }

// Simulated time since the run began, in ns, of the clock edge the
// timestamp counted.
uint64_t read_completion_wallclock_ns(ibv_cq_ex* cq) {
    const sim::Clock& clock = drv(cq->context)->hca().completion().clock();
    return clock.cycles(ex_cq(cq)->cur.timestamp) / sim::kPsPerNs;
}

constexpr std::uint64_t kSupportedWcFlags =
    IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
constexpr std::uint32_t kKnownCqFlags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;

// Refuses what mlx5 refuses, and what this adapter lacks: a comp_mask bit
// or creation flag it does not know (EINVAL), a parent domain (there are
// none, EINVAL), IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN and wc_flags for VLAN,
// flow tag and tag matching fields (EOPNOTSUPP).
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* a) {
    if (!context || !a) return fail<ibv_cq_ex>(EINVAL);
    if (a->comp_mask & ~static_cast<std::uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
        return fail<ibv_cq_ex>(EINVAL);
    if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) {
        if (a->flags & ~kKnownCqFlags) return fail<ibv_cq_ex>(EINVAL);
        if (a->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) return fail<ibv_cq_ex>(EOPNOTSUPP);
    }
    if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) return fail<ibv_cq_ex>(EINVAL);
    if (a->wc_flags & ~kSupportedWcFlags) return fail<ibv_cq_ex>(EOPNOTSUPP);
    if (a->cqe > INT_MAX || a->comp_vector > INT_MAX) return fail<ibv_cq_ex>(EINVAL);
    ibv_cq* cq = ibv_create_cq(context, static_cast<int>(a->cqe), a->cq_context, a->channel,
                               static_cast<int>(a->comp_vector));
    if (!cq) return nullptr;
    SimCq* s = sim(cq);
    s->extended = true;
    ibv_cq_ex& x = s->cq_ex;
    x.start_poll = start_poll;
    x.next_poll = next_poll;
    x.end_poll = end_poll;
    x.read_opcode = read_opcode;
    x.read_vendor_err = read_vendor_err;
    x.read_wc_flags = read_wc_flags;
    // As in rdma-core, a field the CQ was not created with has no reader.
    const std::uint64_t f = a->wc_flags;
    if (f & IBV_WC_EX_WITH_BYTE_LEN) x.read_byte_len = read_byte_len;
    if (f & IBV_WC_EX_WITH_IMM) x.read_imm_data = read_imm_data;
    if (f & IBV_WC_EX_WITH_QP_NUM) x.read_qp_num = read_qp_num;
    if (f & IBV_WC_EX_WITH_SRC_QP) x.read_src_qp = read_src_qp;
    if (f & IBV_WC_EX_WITH_SLID) x.read_slid = read_slid;
    if (f & IBV_WC_EX_WITH_SL) x.read_sl = read_sl;
    if (f & IBV_WC_EX_WITH_DLID_PATH_BITS) x.read_dlid_path_bits = read_dlid_path_bits;
    if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) x.read_completion_ts = read_completion_ts;
    if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
        x.read_completion_wallclock_ns = read_completion_wallclock_ns;
    return &x;
}

// ---- extended QP: the ibv_wr_* calls ----
//
// Builders start a work request from qp_ex->wr_id and qp_ex->wr_flags,
// setters complete the last one, and ibv_wr_complete posts the batch as one
// ibv_post_send list: the same WQEs, one doorbell, and the error
// ibv_post_send gives for a WR it refuses. Unlike ibv_post_send, a refused
// WR leaves the whole batch unposted.

SimQp* ex_qp(ibv_qp_ex* q) { return reinterpret_cast<SimQp*>(q); }

ibv_send_wr& build(ibv_qp_ex* q, ibv_wr_opcode op) {
    WrBatch& b = *ex_qp(q)->batch;
    b.wrs.emplace_back();
    PendingWr& p = b.wrs.back();
    p.wr = ibv_send_wr{};
    p.wr.wr_id = q->wr_id;
    p.wr.opcode = op;
    // Inline follows from the setter used, as in rdma-core.
    p.wr.send_flags = q->wr_flags & ~static_cast<unsigned int>(IBV_SEND_INLINE);
    return p.wr;
}

// The work request a setter completes; null (and an error for
// ibv_wr_complete) when no builder came first.
PendingWr* last(ibv_qp_ex* q) {
    WrBatch& b = *ex_qp(q)->batch;
    if (b.wrs.empty()) {
        if (!b.err) b.err = EINVAL;
        return nullptr;
    }
    return &b.wrs.back();
}

void wr_send(ibv_qp_ex* q) { build(q, IBV_WR_SEND); }

void wr_send_imm(ibv_qp_ex* q, __be32 imm) { build(q, IBV_WR_SEND_WITH_IMM).imm_data = imm; }

void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t raddr) {
    ibv_send_wr& w = build(q, IBV_WR_RDMA_WRITE);
    w.wr.rdma.remote_addr = raddr;
    w.wr.rdma.rkey = rkey;
}

void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t raddr, __be32 imm) {
    ibv_send_wr& w = build(q, IBV_WR_RDMA_WRITE_WITH_IMM);
    w.wr.rdma.remote_addr = raddr;
    w.wr.rdma.rkey = rkey;
    w.imm_data = imm;
}

void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t raddr) {
    ibv_send_wr& w = build(q, IBV_WR_RDMA_READ);
    w.wr.rdma.remote_addr = raddr;
    w.wr.rdma.rkey = rkey;
}

void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t raddr, uint64_t compare, uint64_t swap) {
    ibv_send_wr& w = build(q, IBV_WR_ATOMIC_CMP_AND_SWP);
    w.wr.atomic.remote_addr = raddr;
    w.wr.atomic.compare_add = compare;
    w.wr.atomic.swap = swap;
    w.wr.atomic.rkey = rkey;
}

void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t raddr, uint64_t add) {
    ibv_send_wr& w = build(q, IBV_WR_ATOMIC_FETCH_AND_ADD);
    w.wr.atomic.remote_addr = raddr;
    w.wr.atomic.compare_add = add;
    w.wr.atomic.rkey = rkey;
}

void wr_send_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
    build(q, IBV_WR_SEND_WITH_INV).invalidate_rkey = invalidate_rkey;
}

void wr_local_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
    build(q, IBV_WR_LOCAL_INV).invalidate_rkey = invalidate_rkey;
}

// A type 2 window (the WR ibv_wr_complete posts refuses type 1, as
// IBV_WR_BIND_MW does); bind_info is copied.
void wr_bind_mw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* bind_info) {
    ibv_send_wr& w = build(q, IBV_WR_BIND_MW);
    w.bind_mw.mw = mw;
    w.bind_mw.rkey = rkey;
    if (bind_info) w.bind_mw.bind_info = *bind_info;
    else w.bind_mw.mw = nullptr;  // refused at ibv_wr_complete
}

void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
    if (PendingWr* p = last(q)) {
        p->wr.wr.ud.ah = ah;
        p->wr.wr.ud.remote_qpn = remote_qpn;
        p->wr.wr.ud.remote_qkey = remote_qkey;
    }
}

void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
    if (PendingWr* p = last(q)) {
        p->inline_set = false;
        p->sges.clear();
        if (length) p->sges.push_back(ibv_sge{addr, length, lkey});  // zero bytes: no data segment
    }
}

void wr_set_sge_list(ibv_qp_ex* q, size_t n, const ibv_sge* list) {
    if (PendingWr* p = last(q)) {
        p->inline_set = false;
        p->sges.assign(list, list + n);
    }
}

void wr_set_inline_data_list(ibv_qp_ex* q, size_t n, const ibv_data_buf* bufs) {
    if (PendingWr* p = last(q)) {
        p->inline_set = true;
        p->sges.clear();
        p->inline_data.clear();
        for (size_t i = 0; i < n; ++i) {
            const auto* b = static_cast<const std::uint8_t*>(bufs[i].addr);
            p->inline_data.insert(p->inline_data.end(), b, b + bufs[i].length);
        }
    }
}

void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
    const ibv_data_buf one{addr, length};
    wr_set_inline_data_list(q, 1, &one);
}

void wr_start(ibv_qp_ex* q) {
    WrBatch& b = *ex_qp(q)->batch;
    b.wrs.clear();
    b.err = 0;
}

void wr_abort(ibv_qp_ex* q) { wr_start(q); }

int wr_complete(ibv_qp_ex* q) {
    SimQp* qp = ex_qp(q);
    WrBatch& b = *qp->batch;
    int err = b.err;
    if (!err && !b.wrs.empty()) {
        // Link the batch into the list ibv_post_send would have been given.
        for (std::size_t i = 0; i < b.wrs.size(); ++i) {
            PendingWr& p = b.wrs[i];
            ibv_send_wr& w = p.wr;
            if (p.inline_set) {
                p.sges.clear();
                if (!p.inline_data.empty())
                    p.sges.push_back(ibv_sge{reinterpret_cast<std::uintptr_t>(p.inline_data.data()),
                                             static_cast<std::uint32_t>(p.inline_data.size()), 0});
                w.send_flags |= IBV_SEND_INLINE;
            }
            w.sg_list = p.sges.empty() ? nullptr : p.sges.data();
            w.num_sge = static_cast<int>(p.sges.size());
            w.next = i + 1 < b.wrs.size() ? &b.wrs[i + 1].wr : nullptr;
        }
        ibv_send_wr* bad = nullptr;
        err = post_send_list(qp, &b.wrs[0].wr, &bad, true);
    }
    wr_start(q);
    return err;
}

// Send operations each QP type can post (as rxe accepts them).
std::uint64_t send_ops_of(ibv_qp_type t) {
    const std::uint64_t sends = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    const std::uint64_t writes = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    const std::uint64_t windows = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
    switch (t) {
    case IBV_QPT_RC:
        return sends | writes | windows | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
               IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV;
    case IBV_QPT_UC: return sends | writes | windows;
    case IBV_QPT_UD: return sends;
    default: return 0;
    }
}

void set_send_ops(SimQp* qp, std::uint64_t ops) {
    ibv_qp_ex& x = qp->qp_ex;
    if (ops & IBV_QP_EX_WITH_SEND) x.wr_send = wr_send;
    if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM) x.wr_send_imm = wr_send_imm;
    if (ops & IBV_QP_EX_WITH_RDMA_WRITE) x.wr_rdma_write = wr_rdma_write;
    if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) x.wr_rdma_write_imm = wr_rdma_write_imm;
    if (ops & IBV_QP_EX_WITH_RDMA_READ) x.wr_rdma_read = wr_rdma_read;
    if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) x.wr_atomic_fetch_add = wr_atomic_fetch_add;
    if (ops & IBV_QP_EX_WITH_SEND_WITH_INV) x.wr_send_inv = wr_send_inv;
    if (ops & IBV_QP_EX_WITH_LOCAL_INV) x.wr_local_inv = wr_local_inv;
    if (ops & IBV_QP_EX_WITH_BIND_MW) x.wr_bind_mw = wr_bind_mw;
    x.wr_set_ud_addr = wr_set_ud_addr;
    x.wr_set_sge = wr_set_sge;
    x.wr_set_sge_list = wr_set_sge_list;
    x.wr_set_inline_data = wr_set_inline_data;
    x.wr_set_inline_data_list = wr_set_inline_data_list;
    x.wr_start = wr_start;
    x.wr_complete = wr_complete;
    x.wr_abort = wr_abort;
}

constexpr std::uint32_t kDefinedQpMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                         IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
                                         IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
constexpr std::uint32_t kSupportedQpMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

// A comp_mask bit the header does not define is EINVAL; creation flags, TSO, RSS, and send operations the QP type cannot post
// are EOPNOTSUPP. Everything else is ibv_create_qp's to decide.
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* a) {
    if (!context || !a) return fail<ibv_qp>(EINVAL);
    if (a->comp_mask & ~kDefinedQpMask) return fail<ibv_qp>(EINVAL);
    if (a->comp_mask & ~kSupportedQpMask) return fail<ibv_qp>(EOPNOTSUPP);
    if (a->qp_type == IBV_QPT_XRC_RECV) return create_xrc_target(context, a);
    if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != context) return fail<ibv_qp>(EINVAL);
    const bool with_ops = (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
    if (with_ops && (a->send_ops_flags & ~send_ops_of(a->qp_type))) return fail<ibv_qp>(EOPNOTSUPP);
    auto batch = with_ops ? std::unique_ptr<WrBatch>(new (std::nothrow) WrBatch) : nullptr;
    if (with_ops && !batch) return fail<ibv_qp>(ENOMEM);
    ibv_qp_init_attr init{};
    init.qp_context = a->qp_context;
    init.send_cq = a->send_cq;
    init.recv_cq = a->recv_cq;
    init.srq = a->srq;
    init.cap = a->cap;
    init.qp_type = a->qp_type;
    init.sq_sig_all = a->sq_sig_all;
    ibv_qp* qp = ibv_create_qp(a->pd, &init);
    if (!qp) return nullptr;
    a->cap = init.cap;  // what was really allocated
    if (with_ops) {
        sim(qp)->batch = std::move(batch);
        set_send_ops(sim(qp), a->send_ops_flags);
    }
    return qp;
}

}  // namespace

void init_extended_context(verbs_context& v) {
    v.query_device_ex = query_device_ex;
    v.query_rt_values = query_rt_values;
    v.create_cq_ex = create_cq_ex;
    v.create_qp_ex = create_qp_ex;
    init_srq_ops(v);
}

}  // namespace hcasim::verbs

extern "C" {

// As rdma-core: the extended QP of a QP created with
// IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, else null.
struct ibv_qp_ex* ibv_qp_to_qp_ex(struct ibv_qp* qp) {
    if (!qp) return nullptr;
    hcasim::verbs::SimQp* s = hcasim::verbs::sim(qp);
    return s->batch ? &s->qp_ex : nullptr;
}

}  // extern "C"
