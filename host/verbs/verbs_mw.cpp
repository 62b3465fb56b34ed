// Memory windows in the libibverbs personality: ibv_alloc_mw,
// ibv_dealloc_mw and ibv_bind_mw (the context's ops; the header's inline
// wrappers check the window type and the PD of the region first), and the
// IBV_WR_BIND_MW and IBV_WR_LOCAL_INV work requests ibv_post_send takes.
//
// A window is an entry of the adapter's protection table, allocated by a
// firmware command. Binding and invalidating it are send-queue WQEs the
// adapter executes in order: a failure comes back as an
// IBV_WC_MW_BIND_ERR completion, not as an error of the call. Type 1
// windows are bound with ibv_bind_mw, which picks the next key as
// libibverbs' ibv_inc_rkey does and returns it in mw->rkey; type 2 windows
// (IBA type 2B: bound to one QP) with IBV_WR_BIND_MW, whose key the
// consumer picks, and are invalidated with IBV_WR_LOCAL_INV or by the
// peer's IBV_WR_SEND_WITH_INV.
#include <infiniband/verbs.h>

#include <cerrno>
#include <new>

#include "host/verbs/verbs_internal.hpp"

namespace hcasim::verbs {
namespace {

struct SimMw {
    ibv_mw mw;
};

constexpr unsigned kWindowRights = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
// A memory management WR has no data to inline (solicited is accepted and
// has nothing to mark).
constexpr unsigned kWindowSendFlags = IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_SOLICITED;

// Memory windows are bound on connected QPs only (not UD).
bool takes_windows(const SimQp* qp) {
    const hca::TransportService& svc = hca::transport_service(qp->dqp->type);
    return svc.connected && !svc.vi;
}

// The bind segment for window mw to become new_rkey over info, as the
// adapter takes it. Rights other than remote ones (IBV_ACCESS_ZERO_BASED
// among them: windows here are addressed by virtual address) are EINVAL.
int fill_bind(const ibv_mw* mw, std::uint32_t new_rkey, const ibv_mw_bind_info& info, std::uint8_t type,
              hca::BindSeg& bind) {
    if (info.mw_access_flags & ~kWindowRights) return EINVAL;
    if (!info.mr && (info.addr || info.length)) return EINVAL;
    if (type == hca::kBindType2 && !info.mr) return EINVAL;
    bind = hca::BindSeg{};
    bind.window_key = mw->rkey;
    bind.new_key = new_rkey;
    bind.region_key = info.mr ? info.mr->lkey : 0;
    bind.access = info.mw_access_flags;
    bind.addr = info.addr;
    bind.length = info.length;
    bind.type = type;
    return 0;
}

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
    if (!pd) return fail<ibv_mw>(EINVAL);
    if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return fail<ibv_mw>(EINVAL);
    auto* mw = new (std::nothrow) SimMw{};
    if (!mw) return fail<ibv_mw>(ENOMEM);
    std::uint32_t key = 0;
    const int err = drv(pd->context)->alloc_mw(reinterpret_cast<SimPd*>(pd)->pdn,
                                               type == IBV_MW_TYPE_1 ? hca::MptKind::Window1 : hca::MptKind::Window2, key);
    if (err) {
        delete mw;
        return fail<ibv_mw>(err);
    }
    mw->mw.context = pd->context;
    mw->mw.pd = pd;
    mw->mw.rkey = key;
    mw->mw.handle = key >> 8;
    mw->mw.type = type;
    return &mw->mw;
}

// A bound window may be freed: its rkey is invalid from then on.
int dealloc_mw(ibv_mw* mw) {
    if (!mw) return EINVAL;
    const int err = drv(mw->context)->dealloc_mw(mw->rkey);
    if (!err) delete reinterpret_cast<SimMw*>(mw);
    return err;
}

// ibv_bind_mw of a type 1 window: one bind WQE posted on qp. mw->rkey is
// the key the window will have once the bind has executed.
int bind_mw(ibv_qp* ibqp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
    if (!ibqp || !mw || !mw_bind) return EINVAL;
    SimQp* qp = sim(ibqp);
    if (qp->dqp->state < hca::QpState::Rts || !takes_windows(qp)) return EINVAL;
    if (mw_bind->send_flags & ~kWindowSendFlags) return EINVAL;
    hca::BindSeg bind;
    const std::uint32_t new_rkey = ibv_inc_rkey(mw->rkey);
    int err = fill_bind(mw, new_rkey, mw_bind->bind_info, hca::kBindType1, bind);
    if (err) return err;
    host::SendRequest r;
    r.wr_id = mw_bind->wr_id;
    r.op = hca::WqeOpcode::BindWindow;
    r.signaled = (mw_bind->send_flags & IBV_SEND_SIGNALED) != 0;
    r.fence = (mw_bind->send_flags & IBV_SEND_FENCE) != 0;
    r.bind = &bind;
    host::Driver* d = drv(ibqp->context);
    err = d->write_send_wqe(*qp->dqp, r);
    if (err) return err;
    d->ring_send_doorbell(*qp->dqp);
    mw->rkey = new_rkey;
    return 0;
}

}  // namespace

void init_memory_window_ops(ibv_context& ctx) {
    ctx.ops.alloc_mw = alloc_mw;
    ctx.ops.bind_mw = bind_mw;
    ctx.ops.dealloc_mw = dealloc_mw;
}

int memory_window_request(SimQp* qp, const ibv_send_wr& wr, host::SendRequest& r, hca::BindSeg& bind) {
    if (!takes_windows(qp) || (wr.send_flags & ~kWindowSendFlags)) return EINVAL;
    r.wr_id = wr.wr_id;
    r.signaled = (wr.send_flags & IBV_SEND_SIGNALED) != 0;
    r.fence = (wr.send_flags & IBV_SEND_FENCE) != 0;
    r.num_sge = 0;  // a memory management WR has no data: its scatter list is ignored
    if (wr.opcode == IBV_WR_LOCAL_INV) {
        r.op = hca::WqeOpcode::LocalInvalidate;
        r.invalidate_rkey = wr.invalidate_rkey;
        return 0;
    }
    // Type 1 windows are bound by ibv_bind_mw only.
    const ibv_mw* mw = wr.bind_mw.mw;
    if (wr.opcode != IBV_WR_BIND_MW || !mw || mw->type != IBV_MW_TYPE_2) return EINVAL;
    const int err = fill_bind(mw, wr.bind_mw.rkey, wr.bind_mw.bind_info, hca::kBindType2, bind);
    if (err) return err;
    r.op = hca::WqeOpcode::BindWindow;
    r.bind = &bind;
    return 0;
}

}  // namespace hcasim::verbs
