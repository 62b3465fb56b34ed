// Shared receive queues in the libibverbs personality: ibv_create_srq,
// ibv_modify_srq, ibv_query_srq, ibv_destroy_srq and ibv_post_srq_recv.
#include <infiniband/verbs.h>

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
    if (init->attr.srq_limit) d->arm_srq(*srq->dsrq, init->attr.srq_limit);
    init->attr.max_wr = max_wr;
    init->attr.max_sge = max_sge;
    srq->dsrq->user_context = &srq->srq;
    srq->srq.context = pd->context;
    srq->srq.srq_context = init->srq_context;
    srq->srq.pd = pd;
    srq->srq.handle = srq->dsrq->srqn;
    pthread_mutex_init(&srq->srq.mutex, nullptr);
    pthread_cond_init(&srq->srq.cond, nullptr);
    return &srq->srq;
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
