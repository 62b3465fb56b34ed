// Shared receive queues and XRC in the libibverbs personality:
// ibv_create_srq, ibv_modify_srq, ibv_query_srq, ibv_destroy_srq,
// ibv_post_srq_recv, and the extended ibv_open_xrcd, ibv_close_xrcd,
// ibv_create_srq_ex, ibv_get_srq_num and XRC target QPs.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "host/verbs/verbs_internal.hpp"

using hcasim::host::Driver;
namespace host = hcasim::host;
using namespace hcasim::verbs;

namespace hcasim::verbs {

int recv_sges(const ibv_recv_wr& wr, host::Sge* out, int max) {
    if (wr.num_sge < 0 || wr.num_sge > max || (wr.num_sge > 0 && !wr.sg_list)) return EINVAL;
    for (int i = 0; i < wr.num_sge; ++i) out[i] = {wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
    return 0;
}

int post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    SimSrq* srq = sim(ibsrq);
    Driver* d = drv(ibsrq->context);
    int err = 0;
    bool posted = false;
    host::Sge sges[255];
    for (; wr; wr = wr->next) {
        err = recv_sges(*wr, sges, 255);
        if (!err) err = d->write_srq_wqe(*srq->dsrq, wr->wr_id, sges, static_cast<std::uint32_t>(wr->num_sge));
        if (err) break;
        posted = true;
    }
    if (posted) d->ring_srq_doorbell(*srq->dsrq);
    if (err && bad_wr) *bad_wr = wr;
    return err;
}

// The libibverbs object of an SRQ the driver created; a limit given at
// creation is armed at once.
ibv_srq* finish_srq(SimSrq* srq, ibv_pd* pd, void* srq_context, std::uint32_t limit) {
    if (limit) drv(pd->context)->arm_srq(*srq->dsrq, limit);
    srq->dsrq->user_context = &srq->srq;
    srq->srq.context = pd->context;
    srq->srq.srq_context = srq_context;
    srq->srq.pd = pd;
    srq->srq.handle = srq->dsrq->srqn;
    pthread_mutex_init(&srq->srq.mutex, nullptr);
    pthread_cond_init(&srq->srq.cond, nullptr);
    return &srq->srq;
}

}  // namespace hcasim::verbs

struct ibv_srq* ibv_create_srq(struct ibv_pd* pd, struct ibv_srq_init_attr* init) {
    if (!pd || !init) return fail<ibv_srq>(EINVAL);
    Driver* d = drv(pd->context);
    // srq_limit must not exceed max_wr; a limit given at creation arms at once.
    if (init->attr.srq_limit > init->attr.max_wr) return fail<ibv_srq>(EINVAL);
    auto* srq = new (std::nothrow) SimSrq{};
    if (!srq) return fail<ibv_srq>(ENOMEM);
    std::uint32_t max_wr = init->attr.max_wr, max_sge = init->attr.max_sge;
    const int err = d->create_srq(reinterpret_cast<SimPd*>(pd)->pdn, max_wr, max_sge, srq->dsrq);
    if (err) {
        delete srq;
        return fail<ibv_srq>(err);
    }
    init->attr.max_wr = max_wr;
    init->attr.max_sge = max_sge;
    return finish_srq(srq, pd, init->srq_context, init->attr.srq_limit);
}

int ibv_modify_srq(struct ibv_srq* ibsrq, struct ibv_srq_attr* attr, int mask) {
    if (!ibsrq || !attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))) return EINVAL;
    SimSrq* srq = sim(ibsrq);
    Driver* d = drv(ibsrq->context);
    if (mask & IBV_SRQ_MAX_WR) {
        if (const int err = d->resize_srq(*srq->dsrq, attr->max_wr)) return err;
    }
    if (mask & IBV_SRQ_LIMIT) return d->arm_srq(*srq->dsrq, attr->srq_limit);
    return 0;
}

int ibv_query_srq(struct ibv_srq* ibsrq, struct ibv_srq_attr* attr) {
    if (!ibsrq || !attr) return EINVAL;
    SimSrq* srq = sim(ibsrq);
    attr->max_wr = srq->dsrq->max_wr;
    attr->max_sge = srq->dsrq->max_sge;
    attr->srq_limit = drv(ibsrq->context)->query_srq_limit(*srq->dsrq);
    return 0;
}

int ibv_destroy_srq(struct ibv_srq* ibsrq) {
    if (!ibsrq) return EINVAL;
    SimSrq* srq = sim(ibsrq);
    SimContext* ctx = sim_ctx(ibsrq->context);
    if (srq->dsrq->qp_refs) return EBUSY;
    while (ibsrq->events_completed != srq->async_events_reported) sc_core::wait(ctx->acked);
    const int err = ctx->drv->destroy_srq(srq->dsrq);
    if (err) return err;
    pthread_mutex_destroy(&ibsrq->mutex);
    pthread_cond_destroy(&ibsrq->cond);
    delete srq;
    return 0;
}

// ---- XRC: domains, XRC SRQs and target QPs (the XRC annex of IBA) ----

namespace {

ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* a) {
    if (!context || !a) return fail<ibv_xrcd>(EINVAL);
    if (a->comp_mask & ~static_cast<std::uint32_t>(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS))
        return fail<ibv_xrcd>(EOPNOTSUPP);
    if (!(a->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
        return fail<ibv_xrcd>(EINVAL);
    if (a->oflags & ~(O_CREAT | O_EXCL)) return fail<ibv_xrcd>(EINVAL);
    // A file names a domain every process opening it shares (by inode); -1
    // opens a private one.
    std::uint64_t inode = 0;
    if (a->fd != -1) {
        struct stat st;
        if (fstat(a->fd, &st) != 0) return fail<ibv_xrcd>(EBADF);
        inode = (static_cast<std::uint64_t>(st.st_dev) << 40) ^ static_cast<std::uint64_t>(st.st_ino) ^ 1u;
    }
    Driver* d = drv(context);
    auto* x = new (std::nothrow) SimXrcd{};
    if (!x) return fail<ibv_xrcd>(ENOMEM);
    if (inode && (a->oflags & O_EXCL)) {
        std::uint32_t existing = 0;
        if (d->open_xrcd(inode, false, existing) == 0) {
            d->close_xrcd(existing);
            delete x;
            return fail<ibv_xrcd>(EINVAL);
        }
    }
    const int err = d->open_xrcd(inode, (a->oflags & O_CREAT) != 0, x->xrcdn);
    if (err) {
        delete x;
        return fail<ibv_xrcd>(err == ENOENT ? EINVAL : err);
    }
    x->xrcd.context = context;
    return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
    if (!xrcd) return EINVAL;
    auto* x = reinterpret_cast<SimXrcd*>(xrcd);
    const int err = drv(xrcd->context)->close_xrcd(x->xrcdn);
    if (err) return err;
    delete x;
    return 0;
}

ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* a) {
    if (!context || !a) return fail<ibv_srq>(EINVAL);
    const std::uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                                IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
    if (a->comp_mask & ~known) return fail<ibv_srq>(EINVAL);
    if (a->comp_mask & IBV_SRQ_INIT_ATTR_TM) return fail<ibv_srq>(EOPNOTSUPP);
    const ibv_srq_type type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? a->srq_type : IBV_SRQT_BASIC;
    if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd || a->pd->context != context) return fail<ibv_srq>(EINVAL);
    if (type == IBV_SRQT_TM) return fail<ibv_srq>(EOPNOTSUPP);
    if (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC) return fail<ibv_srq>(EINVAL);
    if (type == IBV_SRQT_BASIC) {
        ibv_srq_init_attr init{a->srq_context, a->attr};
        ibv_srq* s = ibv_create_srq(a->pd, &init);
        if (s) a->attr = init.attr;
        return s;
    }
    // An XRC SRQ belongs to a domain and completes to its own CQ.
    if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->xrcd || !a->cq)
        return fail<ibv_srq>(EINVAL);
    if (a->attr.srq_limit > a->attr.max_wr) return fail<ibv_srq>(EINVAL);
    Driver* d = drv(context);
    auto* srq = new (std::nothrow) SimSrq{};
    if (!srq) return fail<ibv_srq>(ENOMEM);
    std::uint32_t max_wr = a->attr.max_wr, max_sge = a->attr.max_sge;
    const int err = d->create_srq(reinterpret_cast<SimPd*>(a->pd)->pdn, max_wr, max_sge, srq->dsrq,
                                  reinterpret_cast<SimXrcd*>(a->xrcd)->xrcdn, sim(a->cq)->dcq);
    if (err) {
        delete srq;
        return fail<ibv_srq>(err);
    }
    a->attr.max_wr = max_wr;
    a->attr.max_sge = max_sge;
    return finish_srq(srq, a->pd, a->srq_context, a->attr.srq_limit);
}

int get_srq_num(ibv_srq* srq, std::uint32_t* num) {
    if (!srq || !num) return EINVAL;
    *num = sim(srq)->dsrq->srqn;
    return 0;
}

}  // namespace

namespace hcasim::verbs {

ibv_qp* create_xrc_target(ibv_context* context, ibv_qp_init_attr_ex* a) {
    if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd || a->xrcd->context != context ||
        (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
        return fail<ibv_qp>(EINVAL);
    auto* qp = new (std::nothrow) SimQp{};
    if (!qp) return fail<ibv_qp>(ENOMEM);
    const int err = drv(context)->create_xrc_target(reinterpret_cast<SimXrcd*>(a->xrcd)->xrcdn, qp->dqp);
    if (err) {
        delete qp;
        return fail<ibv_qp>(err);
    }
    qp->dqp->user_context = &qp->qp;
    a->cap = ibv_qp_cap{};
    qp->init.qp_context = a->qp_context;
    qp->init.qp_type = IBV_QPT_XRC_RECV;
    qp->qp.context = context;
    qp->qp.qp_context = a->qp_context;
    qp->qp.handle = qp->dqp->qpn;
    qp->qp.qp_num = qp->dqp->qpn;
    qp->qp.state = IBV_QPS_RESET;
    qp->qp.qp_type = IBV_QPT_XRC_RECV;
    pthread_mutex_init(&qp->qp.mutex, nullptr);
    pthread_cond_init(&qp->qp.cond, nullptr);
    return &qp->qp;
}

void init_srq_ops(verbs_context& v) {
    v.open_xrcd = open_xrcd;
    v.close_xrcd = close_xrcd;
    v.create_srq_ex = create_srq_ex;
    v.get_srq_num = get_srq_num;
}

}  // namespace hcasim::verbs
