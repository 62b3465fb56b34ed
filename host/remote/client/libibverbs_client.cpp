// libibverbs.so.1 for programs `hcasim run` starts: the libibverbs ABI of
// Debian 12 (rdma-core 44), every call forwarded to the simulator, where the
// same verbs personality and driver core that in-process programs use carry
// it out on the node's adapter model. The objects a program holds are laid
// out as libibverbs lays them out, so the header's inline calls (ibv_post_send,
// ibv_poll_cq, ibv_query_port, ...) reach the ops filled in here.
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <pthread.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "host/remote/client/remote_client.hpp"
#include "host/verbs/verbs_abi.hpp"

using namespace hcasim::remote;
using namespace hcasim::verbs;

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct CDevice {
    ibv_device dev;
    std::uint32_t index;
    __be64 guid;
};

struct CContext {
    verbs_context vctx;  // first, as libibverbs lays it out
    std::uint64_t h;
};

struct CPd {
    ibv_pd pd;
    std::uint64_t h;
};
struct CMr {
    ibv_mr mr;
    std::uint64_t h;
};
struct CChannel {
    ibv_comp_channel ch;
    std::uint64_t h;
};
struct CCq {
    ibv_cq cq;
    std::uint64_t h;
};
struct CSrq {
    ibv_srq srq;
    std::uint64_t h;
    std::uint32_t srqn;  // what ibv_get_srq_num gives (an XRC sender addresses it)
};
struct CXrcd {
    ibv_xrcd xrcd;
    std::uint64_t h;
};
struct CQp {
    ibv_qp qp;
    std::uint64_t h;
    ibv_qp_init_attr init;
};
struct CAh {
    ibv_ah ah;
    std::uint64_t h;
};

// Every object of the program by its handle: librdmacm.so.1 names the
// program's own objects (a CQ it made and gave rdma_create_qp) by them.
std::mutex g_registry_lock;
std::map<std::uint64_t, void*> g_registry;
void remember(std::uint64_t h, void* p) {
    std::lock_guard<std::mutex> g(g_registry_lock);
    g_registry[h] = p;
}
void forget(std::uint64_t h) {
    std::lock_guard<std::mutex> g(g_registry_lock);
    g_registry.erase(h);
}

CContext* cctx(ibv_context* c) {
    return reinterpret_cast<CContext*>(reinterpret_cast<std::uint8_t*>(c) - offsetof(verbs_context, context));
}
template <typename C, typename T>
std::uint64_t handle(T* p) { return p ? reinterpret_cast<C*>(p)->h : 0; }

template <typename T>
T* fail(int err) {
    errno = err;
    return nullptr;
}

// Result of a call whose reply starts with an int: 0 or an errno value.
int status_of(Call& c) {
    if (!c.run()) return ENOSYS;
    return c.out().get<std::int32_t>();
}

// Frees the program's side of a CQ, SRQ or QP (whose struct has a mutex and
// a condition variable).
template <typename C, typename T>
void drop(T* obj) {
    forget(handle<C>(obj));
    pthread_mutex_destroy(&obj->mutex);
    pthread_cond_destroy(&obj->cond);
    delete reinterpret_cast<C*>(obj);
}

// Destroys it in the simulator, then the program's side.
template <typename C, typename T>
int destroy_call(Op op, T* obj) {
    Call c(op);
    c.in().put(handle<C>(obj));
    const int st = status_of(c);
    if (!st) drop<C>(obj);
    return st;
}

// ---- the context's ops -----------------------------------------------------

int op_poll_cq(ibv_cq* cq, int num, ibv_wc* wc) {
    if (num < 0) return -1;
    const int max = std::min<int>(num, static_cast<int>((kSlotBytes - 64) / sizeof(ibv_wc)));
    Call c(Op::PollCq);
    c.in().put(handle<CCq>(cq));
    c.in().put(static_cast<std::int32_t>(max));
    if (!c.run()) return -1;
    const int n = c.out().get<std::int32_t>();
    if (n > 0) c.out().bytes(wc, sizeof(ibv_wc) * static_cast<std::size_t>(n));
    return n;
}

int op_req_notify_cq(ibv_cq* cq, int solicited_only) {
    Call c(Op::ReqNotifyCq);
    c.in().put(handle<CCq>(cq));
    c.in().put(static_cast<std::int32_t>(solicited_only));
    return status_of(c);
}

// A send WR list as the simulator rebuilds it: each WR's fields, its
// address handle's handle, its gather list, and inline data by value (the
// program may reuse an inline buffer once the call returns).
int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
    Call c(Op::PostSend);
    c.in().put(handle<CQp>(qp));
    std::uint32_t count = 0;
    for (ibv_send_wr* w = wr; w; w = w->next) ++count;
    c.in().put(count);
    for (ibv_send_wr* w = wr; w; w = w->next) {
        c.in().put(*w);
        c.in().put(qp->qp_type == IBV_QPT_UD ? handle<CAh>(w->wr.ud.ah) : std::uint64_t{0});
        const int nsge = w->num_sge > 0 ? w->num_sge : 0;
        for (int i = 0; i < nsge; ++i) c.in().put(w->sg_list[i]);
        if (w->send_flags & IBV_SEND_INLINE)
            for (int i = 0; i < nsge; ++i)
                c.in().bytes(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(w->sg_list[i].addr)),
                             w->sg_list[i].length);
    }
    if (!c.run()) {
        if (bad_wr) *bad_wr = wr;
        return ENOMEM;
    }
    const int ret = c.out().get<std::int32_t>();
    const std::uint32_t bad = c.out().get<std::uint32_t>();
    if (ret && bad_wr) {
        ibv_send_wr* w = wr;
        for (std::uint32_t i = 0; i < bad && w; ++i) w = w->next;
        *bad_wr = w;
    }
    return ret;
}

template <typename Handle>
int post_recv_list(Op op, std::uint64_t h, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    Call c(op);
    c.in().put(h);
    std::uint32_t count = 0;
    for (ibv_recv_wr* w = wr; w; w = w->next) ++count;
    c.in().put(count);
    for (ibv_recv_wr* w = wr; w; w = w->next) {
        c.in().put(*w);
        for (int i = 0; i < w->num_sge; ++i) c.in().put(w->sg_list[i]);
    }
    if (!c.run()) {
        if (bad_wr) *bad_wr = wr;
        return ENOMEM;
    }
    const int ret = c.out().get<std::int32_t>();
    const std::uint32_t bad = c.out().get<std::uint32_t>();
    if (ret && bad_wr) {
        ibv_recv_wr* w = wr;
        for (std::uint32_t i = 0; i < bad && w; ++i) w = w->next;
        *bad_wr = w;
    }
    return ret;
}

int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    return post_recv_list<CQp>(Op::PostRecv, handle<CQp>(qp), wr, bad_wr);
}
int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    return post_recv_list<CSrq>(Op::PostSrqRecv, handle<CSrq>(srq), wr, bad_wr);
}

int op_query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr, size_t attr_size) {
    Call c(Op::QueryPort);
    c.in().put(cctx(context)->h);
    c.in().put(port);
    const int st = status_of(c);
    if (st) return st;
    ibv_port_attr a{};
    c.out().get<std::uint32_t>();
    c.out().bytes(&a, sizeof a);
    std::memset(attr, 0, attr_size);
    std::memcpy(attr, &a, std::min(attr_size, sizeof a));
    return 0;
}

int op_query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                       size_t attr_size) {
    if (input && input->comp_mask) return EINVAL;
    Call c(Op::QueryDeviceEx);
    c.in().put(cctx(context)->h);
    const int st = status_of(c);
    if (st) return st;
    ibv_device_attr_ex a{};
    c.out().bytes(&a, sizeof a);
    std::memset(attr, 0, attr_size);
    std::memcpy(attr, &a, std::min(attr_size, sizeof a));
    return 0;
}

// ---- XRC: the extended context's ops (ibv_open_xrcd, ibv_create_srq_ex,
// ibv_create_qp_ex, ibv_get_srq_num are inline calls that reach them) ----

// The file descriptor that names a shared domain goes as the program's own;
// the simulator takes it (pidfd_getfd) and checks it as libibverbs would.
ibv_xrcd* op_open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
    if (!attr) return fail<ibv_xrcd>(EINVAL);
    Call c(Op::OpenXrcd);
    c.in().put(cctx(context)->h);
    c.in().put(attr->comp_mask);
    c.in().put(static_cast<std::int32_t>(attr->fd));
    c.in().put(static_cast<std::int32_t>(attr->oflags));
    const int st = status_of(c);
    if (st) return fail<ibv_xrcd>(st);
    auto* x = new CXrcd{};
    x->h = c.out().get<std::uint64_t>();
    x->xrcd.context = context;
    remember(x->h, &x->xrcd);
    return &x->xrcd;
}

int op_close_xrcd(ibv_xrcd* xrcd) {
    auto* x = reinterpret_cast<CXrcd*>(xrcd);
    Call c(Op::CloseXrcd);
    c.in().put(x->h);
    const int st = status_of(c);
    if (st) return st;
    forget(x->h);
    delete x;
    return 0;
}

std::uint64_t xrcd_handle(ibv_xrcd* x) { return x ? reinterpret_cast<CXrcd*>(x)->h : 0; }

ibv_srq* op_create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr) {
    if (!attr) return fail<ibv_srq>(EINVAL);
    auto* s = new CSrq{};
    Call c(Op::CreateSrqEx);
    c.in().put(cctx(context)->h);
    c.in().put(attr->comp_mask);
    c.in().put(static_cast<std::int32_t>(attr->srq_type));
    c.in().put((attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? handle<CPd>(attr->pd) : std::uint64_t{0});
    c.in().put((attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ? xrcd_handle(attr->xrcd) : std::uint64_t{0});
    c.in().put((attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ? handle<CCq>(attr->cq) : std::uint64_t{0});
    c.in().put(attr->attr);
    c.in().put(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&s->srq)));
    const int st = status_of(c);
    if (st) {
        delete s;
        return fail<ibv_srq>(st);
    }
    s->h = c.out().get<std::uint64_t>();
    remember(s->h, &s->srq);
    attr->attr = c.out().get<ibv_srq_attr>();
    s->srq.context = context;
    s->srq.pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : nullptr;
    s->srq.srq_context = attr->srq_context;
    s->srq.handle = c.out().get<std::uint32_t>();
    s->srqn = c.out().get<std::uint32_t>();
    pthread_mutex_init(&s->srq.mutex, nullptr);
    pthread_cond_init(&s->srq.cond, nullptr);
    return &s->srq;
}

int op_get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
    if (!srq || !srq_num) return EINVAL;
    *srq_num = reinterpret_cast<CSrq*>(srq)->srqn;
    return 0;
}

// ibv_create_qp_ex beyond a plain PD (which the header sends to
// ibv_create_qp): XRC target QPs in a domain, and anything the verbs
// personality decides on. Extended send operations would need an
// ibv_qp_ex posting through the channel, which is not offered.
ibv_qp* op_create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
    if (!attr) return fail<ibv_qp>(EINVAL);
    if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) return fail<ibv_qp>(EOPNOTSUPP);
    auto* q = new CQp{};
    ibv_pd* pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : nullptr;
    Call c(Op::CreateQpEx);
    c.in().put(cctx(context)->h);
    c.in().put(attr->comp_mask);
    c.in().put(handle<CPd>(pd));
    c.in().put((attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) ? xrcd_handle(attr->xrcd) : std::uint64_t{0});
    c.in().put(handle<CCq>(attr->send_cq));
    c.in().put(handle<CCq>(attr->recv_cq));
    c.in().put(handle<CSrq>(attr->srq));
    c.in().put(attr->cap);
    c.in().put(static_cast<std::int32_t>(attr->qp_type));
    c.in().put(static_cast<std::int32_t>(attr->sq_sig_all));
    c.in().put(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&q->qp)));
    const int st = status_of(c);
    if (st) {
        delete q;
        return fail<ibv_qp>(st);
    }
    q->h = c.out().get<std::uint64_t>();
    remember(q->h, &q->qp);
    q->qp.qp_num = c.out().get<std::uint32_t>();
    q->qp.handle = c.out().get<std::uint32_t>();
    attr->cap = c.out().get<ibv_qp_cap>();
    // A target QP has no PD, CQs or SRQ of its own (its domain's SRQs receive).
    const bool target = attr->qp_type == IBV_QPT_XRC_RECV;
    q->qp.context = context;
    q->qp.qp_context = attr->qp_context;
    q->qp.pd = target ? nullptr : pd;
    q->qp.send_cq = target ? nullptr : attr->send_cq;
    q->qp.recv_cq = target ? nullptr : attr->recv_cq;
    q->qp.srq = target ? nullptr : attr->srq;
    q->qp.state = IBV_QPS_RESET;
    q->qp.qp_type = attr->qp_type;
    q->init.qp_context = q->qp.qp_context;
    q->init.send_cq = q->qp.send_cq;
    q->init.recv_cq = q->qp.recv_cq;
    q->init.srq = q->qp.srq;
    q->init.cap = attr->cap;
    q->init.qp_type = attr->qp_type;
    q->init.sq_sig_all = attr->sq_sig_all;
    pthread_mutex_init(&q->qp.mutex, nullptr);
    pthread_cond_init(&q->qp.cond, nullptr);
    return &q->qp;
}

// The ops of a context, as libibverbs lays them out: the classic ones the
// header's inline calls use, and the extended ones it reaches through the
// verbs_context (shared ibv_open_qp is not offered, as in the verbs
// personality).
void fill_ops(CContext* x) {
    ibv_context& ctx = x->vctx.context;
    ctx.ops.poll_cq = op_poll_cq;
    ctx.ops.req_notify_cq = op_req_notify_cq;
    ctx.ops.post_send = op_post_send;
    ctx.ops.post_recv = op_post_recv;
    ctx.ops.post_srq_recv = op_post_srq_recv;
    ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
    x->vctx.sz = sizeof(verbs_context);
    x->vctx.query_port = op_query_port;
    x->vctx.query_device_ex = op_query_device_ex;
    x->vctx.open_xrcd = op_open_xrcd;
    x->vctx.close_xrcd = op_close_xrcd;
    x->vctx.create_srq_ex = op_create_srq_ex;
    x->vctx.get_srq_num = op_get_srq_num;
    x->vctx.create_qp_ex = op_create_qp_ex;
}

}  // namespace

// ---- devices and contexts -----------------------------------------------------

EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
    if (num_devices) *num_devices = 0;
    Call c(Op::GetDeviceList);
    if (!c.run()) {
        // Outside `hcasim run` there is no adapter: an empty list, as on a
        // machine without RDMA devices.
        auto** empty = static_cast<ibv_device**>(std::calloc(1, sizeof(ibv_device*)));
        if (!empty) errno = ENOMEM;
        return empty;
    }
    const auto n = c.out().get<std::uint32_t>();
    auto** list = static_cast<ibv_device**>(std::calloc(n + 1, sizeof(ibv_device*)));
    if (!list) return fail<ibv_device*>(ENOMEM);
    for (std::uint32_t i = 0; i < n; ++i) {
        auto* d = new CDevice{};
        d->index = i;
        d->dev.node_type = IBV_NODE_CA;
        d->dev.transport_type = IBV_TRANSPORT_IB;
        c.out().bytes(d->dev.name, sizeof d->dev.name);
        c.out().bytes(d->dev.dev_name, sizeof d->dev.dev_name);
        c.out().bytes(d->dev.dev_path, sizeof d->dev.dev_path);
        c.out().bytes(d->dev.ibdev_path, sizeof d->dev.ibdev_path);
        d->guid = c.out().get<__be64>();
        list[i] = &d->dev;
    }
    if (num_devices) *num_devices = static_cast<int>(n);
    return list;
}

EXPORT void ibv_free_device_list(ibv_device** list) {
    if (!list) return;
    // Devices stay: contexts opened from them may outlive the list.
    std::free(list);
}

EXPORT const char* ibv_get_device_name(ibv_device* device) { return device ? device->name : nullptr; }
EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
    return device ? reinterpret_cast<CDevice*>(device)->guid : 0;
}
EXPORT int ibv_get_device_index(ibv_device* device) {
    return device ? static_cast<int>(reinterpret_cast<CDevice*>(device)->index) : -1;
}

EXPORT ibv_context* ibv_open_device(ibv_device* device) {
    if (!device) return fail<ibv_context>(EINVAL);
    const int async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (async_fd < 0) return nullptr;
    Call c(Op::OpenDevice);
    c.in().put(reinterpret_cast<CDevice*>(device)->index);
    c.in().put(static_cast<std::int32_t>(async_fd));
    const int st = status_of(c);
    if (st) {
        close(async_fd);
        return fail<ibv_context>(st);
    }
    auto* x = new CContext{};
    x->h = c.out().get<std::uint64_t>();
    remember(x->h, &x->vctx.context);
    ibv_context& ctx = x->vctx.context;
    ctx.device = device;
    ctx.cmd_fd = -1;
    ctx.async_fd = async_fd;
    ctx.num_comp_vectors = 1;
    fill_ops(x);
    pthread_mutex_init(&ctx.mutex, nullptr);
    return &ctx;
}

EXPORT int ibv_close_device(ibv_context* context) {
    if (!context) return EINVAL;
    Call c(Op::CloseDevice);
    c.in().put(cctx(context)->h);
    const int st = status_of(c);
    if (st) return st;
    close(context->async_fd);
    pthread_mutex_destroy(&context->mutex);
    forget(cctx(context)->h);
    delete cctx(context);
    return 0;
}

EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
    if (!context || !attr) return EINVAL;
    Call c(Op::QueryDevice);
    c.in().put(cctx(context)->h);
    const int st = status_of(c);
    if (!st) c.out().bytes(attr, sizeof *attr);
    return st;
}

// The classic entry point of ibv_query_port (binaries built against old
// headers call it; new ones reach op_query_port through the context).
EXPORT int(ibv_query_port)(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr) {
    if (!context || !attr) return EINVAL;
    return op_query_port(context, port, reinterpret_cast<ibv_port_attr*>(attr), sizeof(ibv_port_attr));
}

EXPORT int ibv_query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
    if (!context || !gid) return -1;
    Call c(Op::QueryGid);
    c.in().put(cctx(context)->h);
    c.in().put(port);
    c.in().put(static_cast<std::int32_t>(index));
    const int st = status_of(c);
    if (st) {
        errno = st;
        return -1;
    }
    c.out().bytes(gid, sizeof *gid);
    return 0;
}

EXPORT int ibv_query_pkey(ibv_context* context, uint8_t port, int index, __be16* pkey) {
    if (!context || !pkey) return -1;
    Call c(Op::QueryPkey);
    c.in().put(cctx(context)->h);
    c.in().put(port);
    c.in().put(static_cast<std::int32_t>(index));
    const int st = status_of(c);
    if (st) {
        errno = st;
        return -1;
    }
    *pkey = c.out().get<__be16>();
    return 0;
}

EXPORT int ibv_get_pkey_index(ibv_context* context, uint8_t port, __be16 pkey) {
    for (int i = 0; i < 128; ++i) {
        __be16 p = 0;
        if (ibv_query_pkey(context, port, i, &p)) break;
        if (p == pkey) return i;
    }
    errno = ENOENT;
    return -1;
}

// An InfiniBand port's GIDs are all of type IB.
EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port, unsigned int index, int* type) {
    ibv_gid gid{};
    if (ibv_query_gid(context, port, static_cast<int>(index), &gid)) return -1;
    *type = 0;  // IBV_GID_TYPE_SYSFS_IB_ROCE_V1 of <infiniband/driver.h>
    return 0;
}

EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                             uint32_t flags, size_t entry_size) {
    if (!context || !entry || flags || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
    ibv_gid gid{};
    if (ibv_query_gid(context, static_cast<uint8_t>(port), static_cast<int>(index), &gid)) return errno ? errno : EINVAL;
    if (!gid.global.subnet_prefix && !gid.global.interface_id) return ENODATA;
    std::memset(entry, 0, entry_size);
    entry->gid = gid;
    entry->gid_index = index;
    entry->port_num = port;
    entry->gid_type = IBV_GID_TYPE_IB;
    entry->ndev_ifindex = 0;
    return 0;
}

EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries, uint32_t flags,
                                    size_t entry_size) {
    if (!context || flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
    ibv_device_attr dev{};
    if (ibv_query_device(context, &dev)) return -EIO;
    std::size_t n = 0;
    for (uint32_t port = 1; port <= dev.phys_port_cnt; ++port) {
        ibv_port_attr pa{};
        if (op_query_port(context, static_cast<uint8_t>(port), &pa, sizeof pa)) return -EIO;
        for (int i = 0; i < pa.gid_tbl_len; ++i) {
            if (n >= max_entries) return -EINVAL;
            auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<std::uint8_t*>(entries) + n * entry_size);
            if (_ibv_query_gid_ex(context, port, static_cast<uint32_t>(i), e, 0, entry_size) == 0) ++n;
        }
    }
    return static_cast<ssize_t>(n);
}

// ---- protection domains and memory regions ----------------------------------

EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
    if (!context) return fail<ibv_pd>(EINVAL);
    Call c(Op::AllocPd);
    c.in().put(cctx(context)->h);
    const int st = status_of(c);
    if (st) return fail<ibv_pd>(st);
    auto* p = new CPd{};
    p->h = c.out().get<std::uint64_t>();
    remember(p->h, &p->pd);
    p->pd.context = context;
    p->pd.handle = c.out().get<std::uint32_t>();
    return &p->pd;
}

EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
    if (!pd) return EINVAL;
    Call c(Op::DeallocPd);
    c.in().put(handle<CPd>(pd));
    const int st = status_of(c);
    if (!st) {
        forget(handle<CPd>(pd));
        delete reinterpret_cast<CPd*>(pd);
    }
    return st;
}

// Moves the pages of [addr, addr+length) onto a memfd that the simulator
// maps too, so that its DMA copies within its own memory instead of making
// a system call per packet. The pages keep their bytes and address; only a
// range inside one private anonymous read-write mapping is moved (a heap or
// mmap buffer, as RDMA programs register), and a range already moved stays.
// Returns the memfd (the caller closes it once the simulator has it), or -1
// when nothing was moved: the simulator then reaches the pages through
// process_vm_readv/writev.
struct SharedPages {
    int fd = -1;
    std::uintptr_t base = 0;
    std::size_t bytes = 0;
};
// The ranges moved so far. A child of fork gets its own copy of each, as
// the kernel gives it of pinned pages: a shared mapping would let the two
// processes see each other's writes.
std::mutex g_shared_lock;
std::vector<std::pair<std::uintptr_t, std::size_t>> g_shared_ranges;

void copy_shared_pages_in_child() {
    for (const auto& [base, bytes] : g_shared_ranges) {
        void* copy = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (copy == MAP_FAILED) continue;
        std::memcpy(copy, reinterpret_cast<void*>(base), bytes);
        if (mremap(copy, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(base)) == MAP_FAILED)
            munmap(copy, bytes);
    }
}

SharedPages share_pages(void* addr, size_t length) {
    static const int at_fork = pthread_atfork([] { g_shared_lock.lock(); }, [] { g_shared_lock.unlock(); },
                                              [] {
                                                  copy_shared_pages_in_child();
                                                  g_shared_lock.unlock();
                                              });
    (void)at_fork;
    const std::lock_guard<std::mutex> hold(g_shared_lock);  // a fork sees a range moved whole or not at all
    SharedPages s;
    if (!addr || length == 0) return s;
    const long page = sysconf(_SC_PAGESIZE);
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const std::uintptr_t base = a - a % static_cast<std::uintptr_t>(page);
    const std::uintptr_t end = (a + length + static_cast<std::uintptr_t>(page) - 1) / static_cast<std::uintptr_t>(page) *
                               static_cast<std::uintptr_t>(page);
    FILE* maps = std::fopen("/proc/self/maps", "re");
    if (!maps) return s;
    bool movable = false;
    char line[512];
    while (std::fgets(line, sizeof line, maps)) {
        unsigned long lo = 0, hi = 0;
        char perms[8] = {};
        unsigned long long offset = 0;
        char dev[16] = {};
        unsigned long inode = 0;
        int name_at = 0;
        if (std::sscanf(line, "%lx-%lx %7s %llx %15s %lu %n", &lo, &hi, perms, &offset, dev, &inode, &name_at) < 6) continue;
        if (base < lo || end > hi) continue;
        const char* name = line + name_at;
        const bool anonymous = inode == 0 && (name[0] == '\n' || name[0] == '\0' || std::strncmp(name, "[heap]", 6) == 0);
        movable = anonymous && std::strcmp(perms, "rw-p") == 0;
        break;
    }
    std::fclose(maps);
    if (!movable) return s;
    const std::size_t bytes = end - base;
    const int fd = memfd_create("hcasim-mr", MFD_CLOEXEC);
    if (fd < 0) return s;
    void* copy = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(bytes)) == 0)
        copy = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (copy == MAP_FAILED) {
        close(fd);
        return s;
    }
    std::memcpy(copy, reinterpret_cast<void*>(base), bytes);
    munmap(copy, bytes);
    if (mmap(reinterpret_cast<void*>(base), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        close(fd);
        return s;
    }
    s.fd = fd;
    s.base = base;
    s.bytes = bytes;
    g_shared_ranges.emplace_back(base, bytes);
    return s;
}

EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
    if (!pd) return fail<ibv_mr>(EINVAL);
    const SharedPages shared = share_pages(addr, length);
    Call c(Op::RegMr);
    c.in().put(handle<CPd>(pd));
    c.in().put(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(addr)));
    c.in().put(static_cast<std::uint64_t>(length));
    c.in().put(iova);
    c.in().put(static_cast<std::uint32_t>(access));
    c.in().put(static_cast<std::int32_t>(shared.fd));
    c.in().put(static_cast<std::uint64_t>(shared.base));
    c.in().put(static_cast<std::uint64_t>(shared.bytes));
    const int st = status_of(c);
    if (shared.fd >= 0) close(shared.fd);
    if (st) return fail<ibv_mr>(st);
    auto* m = new CMr{};
    m->h = c.out().get<std::uint64_t>();
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    m->mr.handle = c.out().get<std::uint32_t>();
    m->mr.lkey = c.out().get<std::uint32_t>();
    m->mr.rkey = c.out().get<std::uint32_t>();
    return &m->mr;
}

EXPORT ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
    return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr), static_cast<unsigned>(access));
}
EXPORT ibv_mr*(ibv_reg_mr_iova)(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
    return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

EXPORT int ibv_dereg_mr(ibv_mr* mr) {
    if (!mr) return EINVAL;
    Call c(Op::DeregMr);
    c.in().put(handle<CMr>(mr));
    const int st = status_of(c);
    if (!st) delete reinterpret_cast<CMr*>(mr);
    return st;
}

// ---- completion channels and CQs ---------------------------------------------

// A completion channel is a real file descriptor: an eventfd the simulator
// counts each completion event into, so poll, epoll and select loops work.
EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
    if (!context) return fail<ibv_comp_channel>(EINVAL);
    const int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (fd < 0) return nullptr;
    Call c(Op::CreateCompChannel);
    c.in().put(cctx(context)->h);
    c.in().put(static_cast<std::int32_t>(fd));
    const int st = status_of(c);
    if (st) {
        close(fd);
        return fail<ibv_comp_channel>(st);
    }
    auto* ch = new CChannel{};
    ch->h = c.out().get<std::uint64_t>();
    remember(ch->h, &ch->ch);
    ch->ch.context = context;
    ch->ch.fd = fd;
    return &ch->ch;
}

EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
    if (!channel) return EINVAL;
    Call c(Op::DestroyCompChannel);
    c.in().put(handle<CChannel>(channel));
    const int st = status_of(c);
    if (st) return st;
    close(channel->fd);
    forget(handle<CChannel>(channel));
    delete reinterpret_cast<CChannel*>(channel);
    return 0;
}

EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                             int comp_vector) {
    if (!context) return fail<ibv_cq>(EINVAL);
    auto* q = new CCq{};
    Call c(Op::CreateCq);
    c.in().put(cctx(context)->h);
    c.in().put(static_cast<std::int32_t>(cqe));
    c.in().put(handle<CChannel>(channel));
    c.in().put(static_cast<std::int32_t>(comp_vector));
    c.in().put(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&q->cq)));
    const int st = status_of(c);
    if (st) {
        delete q;
        return fail<ibv_cq>(st);
    }
    q->h = c.out().get<std::uint64_t>();
    remember(q->h, &q->cq);
    q->cq.context = context;
    q->cq.channel = channel;
    q->cq.cq_context = cq_context;
    q->cq.cqe = c.out().get<std::int32_t>();
    q->cq.handle = c.out().get<std::uint32_t>();
    pthread_mutex_init(&q->cq.mutex, nullptr);
    pthread_cond_init(&q->cq.cond, nullptr);
    return &q->cq;
}

EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
    if (!cq) return EINVAL;
    Call c(Op::ResizeCq);
    c.in().put(handle<CCq>(cq));
    c.in().put(static_cast<std::int32_t>(cqe));
    const int st = status_of(c);
    if (!st) cq->cqe = c.out().get<std::int32_t>();
    return st;
}

EXPORT int ibv_destroy_cq(ibv_cq* cq) {
    if (!cq) return EINVAL;
    return destroy_call<CCq>(Op::DestroyCq, cq);
}

// Waits in the kernel on the channel's fd, as libibverbs reads it, then
// takes the event the simulator counted there.
EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
    if (!channel || !cq) return -1;
    std::uint64_t one = 0;
    if (read(channel->fd, &one, sizeof one) != sizeof one) return -1;  // EAGAIN on an O_NONBLOCK channel
    Call c(Op::GetCqEvent);
    c.in().put(handle<CChannel>(channel));
    const int st = status_of(c);
    if (st) {
        errno = st;
        return -1;
    }
    // The CQ is the program's own object, named back by its address.
    auto* q = reinterpret_cast<ibv_cq*>(static_cast<std::uintptr_t>(c.out().get<std::uint64_t>()));
    *cq = q;
    if (cq_context) *cq_context = q->cq_context;
    return 0;
}

EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
    if (!cq || !nevents) return;
    Call c(Op::AckCqEvents);
    c.in().put(handle<CCq>(cq));
    c.in().put(static_cast<std::uint32_t>(nevents));
    c.run();
}

// ---- shared receive queues -----------------------------------------------------

// The classic calls are the extended ones with a PD and nothing else: one
// call to the simulator each.
EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
    if (!pd || !attr) return fail<ibv_srq>(EINVAL);
    ibv_srq_init_attr_ex ex{};
    ex.srq_context = attr->srq_context;
    ex.attr = attr->attr;
    ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    ex.srq_type = IBV_SRQT_BASIC;
    ex.pd = pd;
    ibv_srq* srq = op_create_srq_ex(pd->context, &ex);
    if (srq) attr->attr = ex.attr;
    return srq;
}

EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
    if (!srq || !attr) return EINVAL;
    Call c(Op::ModifySrq);
    c.in().put(handle<CSrq>(srq));
    c.in().put(*attr);
    c.in().put(static_cast<std::int32_t>(mask));
    return status_of(c);
}

EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
    if (!srq || !attr) return EINVAL;
    Call c(Op::QuerySrq);
    c.in().put(handle<CSrq>(srq));
    const int st = status_of(c);
    if (!st) *attr = c.out().get<ibv_srq_attr>();
    return st;
}

EXPORT int ibv_destroy_srq(ibv_srq* srq) {
    if (!srq) return EINVAL;
    return destroy_call<CSrq>(Op::DestroySrq, srq);
}

// ---- queue pairs ---------------------------------------------------------------

EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
    if (!pd || !init) return fail<ibv_qp>(EINVAL);
    // An XRC target QP needs its domain, which only ibv_create_qp_ex names.
    if (init->qp_type == IBV_QPT_XRC_RECV) return fail<ibv_qp>(EINVAL);
    ibv_qp_init_attr_ex ex{};
    ex.qp_context = init->qp_context;
    ex.send_cq = init->send_cq;
    ex.recv_cq = init->recv_cq;
    ex.srq = init->srq;
    ex.cap = init->cap;
    ex.qp_type = init->qp_type;
    ex.sq_sig_all = init->sq_sig_all;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd;
    ibv_qp* qp = op_create_qp_ex(pd->context, &ex);
    if (qp) init->cap = ex.cap;
    return qp;
}

EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
    if (!qp || !attr) return EINVAL;
    Call c(Op::ModifyQp);
    c.in().put(handle<CQp>(qp));
    c.in().put(*attr);
    c.in().put(static_cast<std::int32_t>(mask));
    const int st = status_of(c);
    if (!st && (mask & IBV_QP_STATE)) qp->state = attr->qp_state;
    return st;
}

EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
    if (!qp || !attr) return EINVAL;
    Call c(Op::QueryQp);
    c.in().put(handle<CQp>(qp));
    c.in().put(static_cast<std::int32_t>(mask));
    const int st = status_of(c);
    if (st) return st;
    *attr = c.out().get<ibv_qp_attr>();
    const auto cap = c.out().get<ibv_qp_cap>();
    if (init) {
        *init = reinterpret_cast<CQp*>(qp)->init;
        init->cap = cap;
    }
    qp->state = attr->qp_state;
    return 0;
}

EXPORT int ibv_destroy_qp(ibv_qp* qp) {
    if (!qp) return EINVAL;
    return destroy_call<CQp>(Op::DestroyQp, qp);
}

// Only QPs created with send ops flags have an ibv_qp_ex.
EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp*) { return fail<ibv_qp_ex>(EOPNOTSUPP); }

EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    if (!qp || !gid) return EINVAL;
    Call c(Op::AttachMcast);
    c.in().put(handle<CQp>(qp));
    c.in().put(*gid);
    c.in().put(lid);
    return status_of(c);
}

EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    if (!qp || !gid) return EINVAL;
    Call c(Op::DetachMcast);
    c.in().put(handle<CQp>(qp));
    c.in().put(*gid);
    c.in().put(lid);
    return status_of(c);
}

// ---- address handles -------------------------------------------------------------

EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
    if (!pd || !attr) return fail<ibv_ah>(EINVAL);
    Call c(Op::CreateAh);
    c.in().put(handle<CPd>(pd));
    c.in().put(*attr);
    const int st = status_of(c);
    if (st) return fail<ibv_ah>(st);
    auto* a = new CAh{};
    a->h = c.out().get<std::uint64_t>();
    a->ah.context = pd->context;
    a->ah.pd = pd;
    a->ah.handle = c.out().get<std::uint32_t>();
    return &a->ah;
}

EXPORT int ibv_destroy_ah(ibv_ah* ah) {
    if (!ah) return EINVAL;
    Call c(Op::DestroyAh);
    c.in().put(handle<CAh>(ah));
    const int st = status_of(c);
    if (!st) delete reinterpret_cast<CAh*>(ah);
    return st;
}

// As libibverbs: the reply's path is the reverse of the one the WC came on.
EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                               ibv_ah_attr* ah_attr) {
    if (!context || !wc || !ah_attr) return EINVAL;
    std::memset(ah_attr, 0, sizeof *ah_attr);
    ah_attr->dlid = wc->slid;
    ah_attr->sl = wc->sl;
    ah_attr->src_path_bits = wc->dlid_path_bits;
    ah_attr->port_num = port_num;
    if (wc->wc_flags & IBV_WC_GRH) {
        if (!grh) return EINVAL;
        ah_attr->is_global = 1;
        ah_attr->grh.dgid = grh->sgid;
        const std::uint32_t flow = be32toh(grh->version_tclass_flow);
        ah_attr->grh.flow_label = flow & 0xfffff;
        ah_attr->grh.hop_limit = 0xff;
        ah_attr->grh.traffic_class = static_cast<uint8_t>((flow >> 20) & 0xff);
        // The source GID index: the local GID the packet was sent to.
        ibv_port_attr pa{};
        if (const int st = op_query_port(context, port_num, &pa, sizeof pa)) return st;
        for (int i = 0; i < pa.gid_tbl_len; ++i) {
            ibv_gid g{};
            if (ibv_query_gid(context, port_num, i, &g)) break;
            if (!std::memcmp(&g, &grh->dgid, sizeof g)) {
                ah_attr->grh.sgid_index = static_cast<uint8_t>(i);
                return 0;
            }
        }
        return ENOENT;
    }
    return 0;
}

EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
    ibv_ah_attr attr{};
    if (!pd) return fail<ibv_ah>(EINVAL);
    const int st = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr);
    if (st) return fail<ibv_ah>(st);
    return ibv_create_ah(pd, &attr);
}

// ---- asynchronous events --------------------------------------------------------

// Waits in the kernel on the context's async fd, then takes the event.
EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
    if (!context || !event) return -1;
    std::uint64_t one = 0;
    if (read(context->async_fd, &one, sizeof one) != sizeof one) return -1;
    Call c(Op::GetAsyncEvent);
    c.in().put(cctx(context)->h);
    const int st = status_of(c);
    if (st) {
        errno = st;
        return -1;
    }
    std::memset(event, 0, sizeof *event);
    event->event_type = static_cast<ibv_event_type>(c.out().get<std::int32_t>());
    // The element: the program's own object, named back by its address, or the port.
    const auto element = c.out().get<std::uint64_t>();
    switch (async_element(event->event_type)) {
    case AsyncElement::Cq: event->element.cq = reinterpret_cast<ibv_cq*>(static_cast<std::uintptr_t>(element)); break;
    case AsyncElement::Srq: event->element.srq = reinterpret_cast<ibv_srq*>(static_cast<std::uintptr_t>(element)); break;
    case AsyncElement::Qp: event->element.qp = reinterpret_cast<ibv_qp*>(static_cast<std::uintptr_t>(element)); break;
    case AsyncElement::Port: event->element.port_num = static_cast<int>(element); break;
    }
    return 0;
}

EXPORT void ibv_ack_async_event(ibv_async_event* event) {
    if (!event) return;
    Call c(Op::AckAsyncEvent);
    c.in().put(static_cast<std::int32_t>(event->event_type));
    std::uint64_t element = 0;
    switch (async_element(event->event_type)) {
    case AsyncElement::Cq: element = handle<CCq>(event->element.cq); break;
    case AsyncElement::Srq: element = handle<CSrq>(event->element.srq); break;
    case AsyncElement::Qp: element = handle<CQp>(event->element.qp); break;
    case AsyncElement::Port: break;
    }
    c.in().put(element);
    c.run();
}

// ---- what needs no adapter ------------------------------------------------------

EXPORT int ibv_fork_init(void) { return 0; }
EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
EXPORT int ibv_dontfork_range(void*, size_t) { return 0; }
EXPORT int ibv_dofork_range(void*, size_t) { return 0; }

// There is no sysfs of the simulated adapter to read.
EXPORT int ibv_read_sysfs_file(const char*, const char*, char*, size_t) { return -1; }
EXPORT int ibv_read_ibdev_sysfs_file(char*, size_t, ibv_device*, const char*, ...) { return -1; }
EXPORT const char* ibv_get_sysfs_path(void) { return "/sys"; }

// libibverbs' own strings (host/verbs/verbs_abi.hpp, shared with the verbs personality).
EXPORT const char* ibv_node_type_str(ibv_node_type t) { return node_type_text(t); }
EXPORT const char* ibv_port_state_str(ibv_port_state s) { return port_state_text(s); }
EXPORT const char* ibv_event_type_str(ibv_event_type e) { return event_type_text(e); }
EXPORT const char* ibv_wc_status_str(ibv_wc_status s) { return wc_status_text(s); }

EXPORT int ibv_rate_to_mult(ibv_rate rate) {
    switch (rate) {
    case IBV_RATE_2_5_GBPS: return 1;
    case IBV_RATE_5_GBPS: return 2;
    case IBV_RATE_10_GBPS: return 4;
    case IBV_RATE_20_GBPS: return 8;
    case IBV_RATE_30_GBPS: return 12;
    case IBV_RATE_40_GBPS: return 16;
    case IBV_RATE_60_GBPS: return 24;
    case IBV_RATE_80_GBPS: return 32;
    case IBV_RATE_120_GBPS: return 48;
    default: return -1;
    }
}

EXPORT ibv_rate mult_to_ibv_rate(int mult) {
    switch (mult) {
    case 1: return IBV_RATE_2_5_GBPS;
    case 2: return IBV_RATE_5_GBPS;
    case 4: return IBV_RATE_10_GBPS;
    case 8: return IBV_RATE_20_GBPS;
    case 12: return IBV_RATE_30_GBPS;
    case 16: return IBV_RATE_40_GBPS;
    case 24: return IBV_RATE_60_GBPS;
    case 32: return IBV_RATE_80_GBPS;
    case 48: return IBV_RATE_120_GBPS;
    default: return IBV_RATE_MAX;
    }
}

EXPORT int ibv_rate_to_mbps(ibv_rate rate) {
    switch (rate) {
    case IBV_RATE_2_5_GBPS: return 2500;
    case IBV_RATE_5_GBPS: return 5000;
    case IBV_RATE_10_GBPS: return 10000;
    case IBV_RATE_20_GBPS: return 20000;
    case IBV_RATE_30_GBPS: return 30000;
    case IBV_RATE_40_GBPS: return 40000;
    case IBV_RATE_56_GBPS: return 56000;
    case IBV_RATE_60_GBPS: return 60000;
    case IBV_RATE_80_GBPS: return 80000;
    case IBV_RATE_100_GBPS: return 100000;
    case IBV_RATE_120_GBPS: return 120000;
    case IBV_RATE_14_GBPS: return 14062;
    case IBV_RATE_25_GBPS: return 25781;
    case IBV_RATE_50_GBPS: return 53125;
    case IBV_RATE_168_GBPS: return 168750;
    case IBV_RATE_200_GBPS: return 206250;
    case IBV_RATE_300_GBPS: return 309375;
    case IBV_RATE_28_GBPS: return 28125;
    case IBV_RATE_400_GBPS: return 425000;
    case IBV_RATE_600_GBPS: return 637500;
    default: return -1;
    }
}

EXPORT ibv_rate mbps_to_ibv_rate(int mbps) {
    for (int r = IBV_RATE_2_5_GBPS; r <= IBV_RATE_600_GBPS; ++r)
        if (ibv_rate_to_mbps(static_cast<ibv_rate>(r)) == mbps) return static_cast<ibv_rate>(r);
    return IBV_RATE_MAX;
}

// The ECE and import calls need a kernel object to share: not supported.
EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
EXPORT ibv_context* ibv_import_device(int) { return fail<ibv_context>(EOPNOTSUPP); }
EXPORT ibv_pd* ibv_import_pd(ibv_context*, uint32_t) { return fail<ibv_pd>(EOPNOTSUPP); }
EXPORT void ibv_unimport_pd(ibv_pd*) {}
EXPORT ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) { return fail<ibv_mr>(EOPNOTSUPP); }
EXPORT void ibv_unimport_mr(ibv_mr*) {}
EXPORT ibv_dm* ibv_import_dm(ibv_context*, uint32_t) { return fail<ibv_dm>(EOPNOTSUPP); }
EXPORT void ibv_unimport_dm(ibv_dm*) {}
EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) { return fail<ibv_mr>(EOPNOTSUPP); }
EXPORT int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) { return IBV_REREG_MR_ERR_INPUT; }
EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }
EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t[6], uint16_t*) { return EOPNOTSUPP; }

// ---- the kernel-ABI conversions librdmacm uses ------------------------------

EXPORT void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
    std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
    dst->grh.flow_label = src->grh.flow_label;
    dst->grh.sgid_index = src->grh.sgid_index;
    dst->grh.hop_limit = src->grh.hop_limit;
    dst->grh.traffic_class = src->grh.traffic_class;
    dst->dlid = src->dlid;
    dst->sl = src->sl;
    dst->src_path_bits = src->src_path_bits;
    dst->static_rate = src->static_rate;
    dst->is_global = src->is_global;
    dst->port_num = src->port_num;
}

EXPORT void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
    dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
    dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
    dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
    dst->qkey = src->qkey;
    dst->rq_psn = src->rq_psn;
    dst->sq_psn = src->sq_psn;
    dst->dest_qp_num = src->dest_qp_num;
    dst->qp_access_flags = src->qp_access_flags;
    dst->cap.max_send_wr = src->max_send_wr;
    dst->cap.max_recv_wr = src->max_recv_wr;
    dst->cap.max_send_sge = src->max_send_sge;
    dst->cap.max_recv_sge = src->max_recv_sge;
    dst->cap.max_inline_data = src->max_inline_data;
    ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
    ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
    dst->pkey_index = src->pkey_index;
    dst->alt_pkey_index = src->alt_pkey_index;
    dst->en_sqd_async_notify = src->en_sqd_async_notify;
    dst->sq_draining = src->sq_draining;
    dst->max_rd_atomic = src->max_rd_atomic;
    dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
    dst->min_rnr_timer = src->min_rnr_timer;
    dst->port_num = src->port_num;
    dst->timeout = src->timeout;
    dst->retry_cnt = src->retry_cnt;
    dst->rnr_retry = src->rnr_retry;
    dst->alt_port_num = src->alt_port_num;
    dst->alt_timeout = src->alt_timeout;
}

EXPORT void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
    std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid);
    std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid);
    dst->dlid = src->dlid;
    dst->slid = src->slid;
    dst->raw_traffic = static_cast<int>(src->raw_traffic);
    dst->flow_label = src->flow_label;
    dst->hop_limit = src->hop_limit;
    dst->traffic_class = src->traffic_class;
    dst->reversible = static_cast<int>(src->reversible);
    dst->numb_path = src->numb_path;
    dst->pkey = src->pkey;
    dst->sl = src->sl;
    dst->mtu_selector = src->mtu_selector;
    dst->mtu = src->mtu;
    dst->rate_selector = src->rate_selector;
    dst->rate = src->rate;
    dst->packet_life_time_selector = src->packet_life_time_selector;
    dst->packet_life_time = src->packet_life_time;
    dst->preference = src->preference;
}

EXPORT void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
    std::memcpy(dst->dgid, src->dgid.raw, sizeof src->dgid);
    std::memcpy(dst->sgid, src->sgid.raw, sizeof src->sgid);
    dst->dlid = src->dlid;
    dst->slid = src->slid;
    dst->raw_traffic = static_cast<__u32>(src->raw_traffic);
    dst->flow_label = src->flow_label;
    dst->hop_limit = src->hop_limit;
    dst->traffic_class = src->traffic_class;
    dst->reversible = static_cast<__u32>(src->reversible);
    dst->numb_path = src->numb_path;
    dst->pkey = src->pkey;
    dst->sl = src->sl;
    dst->mtu_selector = src->mtu_selector;
    dst->mtu = src->mtu;
    dst->rate_selector = src->rate_selector;
    dst->rate = src->rate;
    dst->packet_life_time_selector = src->packet_life_time_selector;
    dst->packet_life_time = src->packet_life_time;
    dst->preference = src->preference;
}

// ---- objects rdma_cm made: librdmacm.so.1 mirrors them here ---------------
//
// The simulator's rdma_cm opens the device, allocates the default PD and
// creates QPs, CQs and completion channels for the program; these give the
// program its own objects for them, laid out as every other, so the verbs it
// calls on id->qp or id->send_cq work as on its own.

namespace {
int adopt_call(AdoptKind kind, std::uint64_t h, const void* client, int fd) {
    Call c(Op::Adopt);
    c.in().put(static_cast<std::uint32_t>(kind));
    c.in().put(h);
    c.in().put(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(client)));
    c.in().put(static_cast<std::int32_t>(fd));
    return status_of(c);
}

ibv_device* adopted_device() {
    // The one device of the node, for the contexts rdma_cm opened.
    static ibv_device* dev = [] {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        ibv_device* d = list && n > 0 ? list[0] : nullptr;
        std::free(list);  // the devices stay
        return d;
    }();
    return dev;
}
}  // namespace

EXPORT ibv_context* hcasim_adopt_context(std::uint64_t h) {
    const int async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    auto* x = new CContext{};
    x->h = h;
    ibv_context& ctx = x->vctx.context;
    ctx.device = adopted_device();
    ctx.cmd_fd = -1;
    ctx.async_fd = async_fd;
    ctx.num_comp_vectors = 1;
    fill_ops(x);
    pthread_mutex_init(&ctx.mutex, nullptr);
    remember(h, &ctx);
    adopt_call(AdoptKind::Context, h, &ctx, async_fd);
    return &ctx;
}

EXPORT ibv_pd* hcasim_adopt_pd(std::uint64_t h, ibv_context* context, std::uint32_t handle) {
    auto* p = new CPd{};
    p->h = h;
    p->pd.context = context;
    p->pd.handle = handle;
    remember(h, &p->pd);
    adopt_call(AdoptKind::Pd, h, &p->pd, -1);
    return &p->pd;
}

EXPORT ibv_comp_channel* hcasim_adopt_channel(std::uint64_t h, ibv_context* context) {
    auto* ch = new CChannel{};
    ch->h = h;
    ch->ch.context = context;
    ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    remember(h, &ch->ch);
    adopt_call(AdoptKind::Channel, h, &ch->ch, ch->ch.fd);
    return &ch->ch;
}

EXPORT ibv_cq* hcasim_adopt_cq(std::uint64_t h, ibv_context* context, ibv_comp_channel* channel, void* cq_context,
                               int cqe) {
    auto* q = new CCq{};
    q->h = h;
    q->cq.context = context;
    q->cq.channel = channel;
    q->cq.cq_context = cq_context;
    q->cq.cqe = cqe;
    pthread_mutex_init(&q->cq.mutex, nullptr);
    pthread_cond_init(&q->cq.cond, nullptr);
    remember(h, &q->cq);
    adopt_call(AdoptKind::Cq, h, &q->cq, -1);
    return &q->cq;
}

EXPORT ibv_qp* hcasim_adopt_qp(std::uint64_t h, ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, std::uint32_t qpn,
                               int qp_type, void* qp_context, int state) {
    auto* q = new CQp{};
    q->h = h;
    q->qp.context = pd->context;
    q->qp.qp_context = qp_context;
    q->qp.pd = pd;
    q->qp.send_cq = send_cq;
    q->qp.recv_cq = recv_cq;
    q->qp.qp_num = qpn;
    q->qp.qp_type = static_cast<ibv_qp_type>(qp_type);
    q->qp.state = static_cast<ibv_qp_state>(state);
    q->init.send_cq = send_cq;
    q->init.recv_cq = recv_cq;
    q->init.qp_type = q->qp.qp_type;
    pthread_mutex_init(&q->qp.mutex, nullptr);
    pthread_cond_init(&q->qp.cond, nullptr);
    remember(h, &q->qp);
    adopt_call(AdoptKind::Qp, h, &q->qp, -1);
    return &q->qp;
}

EXPORT ibv_srq* hcasim_adopt_srq(std::uint64_t h, ibv_context* context, ibv_pd* pd, std::uint32_t srqn) {
    auto* s = new CSrq{};
    s->h = h;
    s->srqn = srqn;
    s->srq.context = context;
    s->srq.pd = pd;
    pthread_mutex_init(&s->srq.mutex, nullptr);
    pthread_cond_init(&s->srq.cond, nullptr);
    remember(h, &s->srq);
    adopt_call(AdoptKind::Srq, h, &s->srq, -1);
    return &s->srq;
}

// rdma_cm freed what these mirror: only the program's side goes.
EXPORT void hcasim_drop_qp(ibv_qp* qp) {
    if (qp) drop<CQp>(qp);
}
EXPORT void hcasim_drop_cq(ibv_cq* cq) {
    if (cq) drop<CCq>(cq);
}
EXPORT void hcasim_drop_srq(ibv_srq* srq) {
    if (srq) drop<CSrq>(srq);
}
EXPORT void hcasim_drop_channel(ibv_comp_channel* ch) {
    if (!ch) return;
    forget(handle<CChannel>(ch));
    close(ch->fd);
    delete reinterpret_cast<CChannel*>(ch);
}
EXPORT std::uint64_t hcasim_handle_of_pd(ibv_pd* pd) { return handle<CPd>(pd); }
EXPORT std::uint64_t hcasim_handle_of_cq(ibv_cq* cq) { return handle<CCq>(cq); }
EXPORT std::uint64_t hcasim_handle_of_qp(ibv_qp* qp) { return handle<CQp>(qp); }
EXPORT std::uint64_t hcasim_handle_of_srq(ibv_srq* srq) { return handle<CSrq>(srq); }
EXPORT std::uint64_t hcasim_handle_of_xrcd(ibv_xrcd* xrcd) { return xrcd_handle(xrcd); }
EXPORT std::uint64_t hcasim_handle_of_context(ibv_context* c) { return c ? cctx(c)->h : 0; }

// The program's object of a handle, if it has one.
EXPORT void* hcasim_object_of(std::uint64_t h) {
    std::lock_guard<std::mutex> g(g_registry_lock);
    auto it = g_registry.find(h);
    return it == g_registry.end() ? nullptr : it->second;
}
