// librdmacm.so.1 for programs `hcasim run` starts: Debian 12's librdmacm ABI
// (RDMACM_1.0 to 1.3), every call forwarded to the simulator's librdmacm
// personality. The program's rdma_cm_id mirrors the simulator's: after each
// call and with each event the id's addresses, route and verbs objects come
// back, and the verbs objects rdma_cm made (device, PD, QP, CQs, channels)
// are mirrored through libibverbs.so.1 so the program's verbs work on them.
// Event channels are real file descriptors (eventfds the simulator counts
// events into).
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <fcntl.h>
#include <poll.h>
#include <netdb.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "host/remote/client/remote_client.hpp"

using namespace hcasim::remote;

#define EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {
ibv_context* hcasim_adopt_context(std::uint64_t h);
ibv_pd* hcasim_adopt_pd(std::uint64_t h, ibv_context* context, std::uint32_t handle);
ibv_comp_channel* hcasim_adopt_channel(std::uint64_t h, ibv_context* context);
ibv_cq* hcasim_adopt_cq(std::uint64_t h, ibv_context* context, ibv_comp_channel* channel, void* cq_context, int cqe);
ibv_qp* hcasim_adopt_qp(std::uint64_t h, ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, std::uint32_t qpn,
                        int qp_type, void* qp_context, int state);
ibv_srq* hcasim_adopt_srq(std::uint64_t h, ibv_context* context, ibv_pd* pd, std::uint32_t srqn);
void hcasim_drop_qp(ibv_qp* qp);
void hcasim_drop_cq(ibv_cq* cq);
void hcasim_drop_srq(ibv_srq* srq);
void hcasim_drop_channel(ibv_comp_channel* ch);
std::uint64_t hcasim_handle_of_pd(ibv_pd* pd);
std::uint64_t hcasim_handle_of_cq(ibv_cq* cq);
std::uint64_t hcasim_handle_of_qp(ibv_qp* qp);
std::uint64_t hcasim_handle_of_srq(ibv_srq* srq);
std::uint64_t hcasim_handle_of_xrcd(ibv_xrcd* xrcd);
std::uint64_t hcasim_handle_of_context(ibv_context* c);
void* hcasim_object_of(std::uint64_t h);
}

namespace {

struct CChannel {
    rdma_event_channel ch;
    std::uint64_t h;
};

struct CEvent {
    rdma_cm_event ev;
    std::uint64_t h;
    std::vector<std::uint8_t> private_data;
};

struct CId {
    rdma_cm_id id;
    std::uint64_t h;
    std::vector<ibv_sa_path_rec> paths;
    // What this id's own QP and CQs mirror (freed with rdma_destroy_qp).
    bool own_cqs = false;
    // The CQ and channel rdma_create_srq made for an XRC SRQ (freed with rdma_destroy_srq).
    bool own_srq_cq = false;
    // A synchronous id's last event (id.event points at it); librdmacm
    // acknowledges it, the program only reads it.
    std::unique_ptr<CEvent> event;
};

// The program's mirrors, by the simulator's handle: ids, and verbs objects
// rdma_cm made (shared by every id that uses them).
std::mutex g_lock;
std::map<std::uint64_t, CId*> g_ids;
std::map<std::uint64_t, void*> g_verbs;
std::map<std::uint64_t, CChannel*> g_channels;

int fail(int err) {
    errno = err;
    return -1;
}

// The reply's first int: 0, or the errno of a failure (returned as -1 with errno set).
int result(Call& c) {
    if (!c.run()) return fail(ENOSYS);
    const int st = c.out().get<std::int32_t>();
    return st ? fail(st) : 0;
}

template <typename T, typename Make>
T* mirror(std::uint64_t h, Make make) {
    if (!h) return nullptr;
    auto it = g_verbs.find(h);
    if (it != g_verbs.end()) return static_cast<T*>(it->second);
    // The program's own object (a CQ it made and gave rdma_create_qp).
    if (void* own = hcasim_object_of(h)) return static_cast<T*>(own);
    T* p = make();
    g_verbs[h] = p;
    return p;
}

// Reads an event's listener, type, status and parameters
// (RdmaCmProxy::put_event); returns the listener's handle.
std::uint64_t read_event(Reader& r, CEvent* e) {
    const auto listen_h = r.get<std::uint64_t>();
    e->ev.event = static_cast<rdma_cm_event_type>(r.get<std::int32_t>());
    e->ev.status = r.get<std::int32_t>();
    const bool ud = r.get<std::uint8_t>() != 0;
    if (ud) {
        const auto len = r.get<std::uint8_t>();
        const bool mcast = r.get<std::uint8_t>() != 0;
        if (mcast) {
            e->ev.param.ud.private_data = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(r.get<std::uint64_t>()));
            e->ev.param.ud.private_data_len = len;
        } else {
            e->private_data.resize(len);
            r.bytes(e->private_data.data(), len);
            e->ev.param.ud.private_data = e->private_data.empty() ? nullptr : e->private_data.data();
            e->ev.param.ud.private_data_len = len;
        }
        e->ev.param.ud.ah_attr = r.get<ibv_ah_attr>();
        e->ev.param.ud.qp_num = r.get<std::uint32_t>();
        e->ev.param.ud.qkey = r.get<std::uint32_t>();
    } else {
        rdma_conn_param p = r.get<rdma_conn_param>();
        e->private_data.resize(p.private_data ? p.private_data_len : 0);
        r.bytes(e->private_data.data(), e->private_data.size());
        p.private_data = e->private_data.empty() ? nullptr : e->private_data.data();
        p.private_data_len = static_cast<std::uint8_t>(e->private_data.size());
        e->ev.param.conn = p;
    }
    return listen_h;
}

// Reads an id's state (RdmaCmProxy::put_id) into its mirror, making the
// mirror (for ids the program has not seen yet: a connection request's)
// from like, the listening id it came from.
CId* read_id(Reader& r, CId* like = nullptr) {
    const auto h = r.get<std::uint64_t>();
    std::lock_guard<std::mutex> g(g_lock);
    CId*& m = g_ids[h];
    if (!m) {
        m = new CId{};
        m->h = h;
        if (like) {
            m->id.channel = like->id.channel;
            m->id.context = like->id.context;
        }
    }
    rdma_cm_id& id = m->id;
    id.ps = static_cast<rdma_port_space>(r.get<std::int32_t>());
    id.qp_type = static_cast<ibv_qp_type>(r.get<std::int32_t>());
    id.port_num = r.get<std::uint8_t>();
    id.route.addr.src_storage = r.get<sockaddr_storage>();
    id.route.addr.dst_storage = r.get<sockaddr_storage>();
    const auto paths = r.get<std::int32_t>();
    m->paths.resize(static_cast<std::size_t>(paths > 0 ? paths : 0));
    for (auto& p : m->paths) p = r.get<ibv_sa_path_rec>();
    id.route.path_rec = m->paths.empty() ? nullptr : m->paths.data();
    id.route.num_paths = static_cast<int>(m->paths.size());
    const auto ctx_h = r.get<std::uint64_t>();
    const auto pd_h = r.get<std::uint64_t>();
    const auto pd_handle = r.get<std::uint32_t>();
    const auto sch_h = r.get<std::uint64_t>();
    const auto rch_h = r.get<std::uint64_t>();
    const auto scq_h = r.get<std::uint64_t>();
    const auto scq_cqe = r.get<std::int32_t>();
    const auto rcq_h = r.get<std::uint64_t>();
    const auto rcq_cqe = r.get<std::int32_t>();
    const auto qp_h = r.get<std::uint64_t>();
    const auto qpn = r.get<std::uint32_t>();
    const auto qp_state = r.get<std::int32_t>();
    const auto srq_h = r.get<std::uint64_t>();
    const auto srq_pd_h = r.get<std::uint64_t>();
    const auto srq_pd_handle = r.get<std::uint32_t>();
    const auto srqn = r.get<std::uint32_t>();
    const auto event_h = r.get<std::uint64_t>();
    auto event = std::make_unique<CEvent>();
    std::uint64_t event_listen_h = 0;
    if (event_h) {
        event->h = event_h;
        event_listen_h = read_event(r, event.get());
    }
    id.verbs = mirror<ibv_context>(ctx_h, [&] { return hcasim_adopt_context(ctx_h); });
    id.pd = mirror<ibv_pd>(pd_h, [&] { return hcasim_adopt_pd(pd_h, id.verbs, pd_handle); });
    id.send_cq_channel = mirror<ibv_comp_channel>(sch_h, [&] { return hcasim_adopt_channel(sch_h, id.verbs); });
    id.recv_cq_channel = mirror<ibv_comp_channel>(rch_h, [&] { return hcasim_adopt_channel(rch_h, id.verbs); });
    // librdmacm's own CQs have the id as their context (rdma_get_send_comp relies on it).
    id.send_cq = mirror<ibv_cq>(scq_h, [&] { return hcasim_adopt_cq(scq_h, id.verbs, id.send_cq_channel, &id, scq_cqe); });
    id.recv_cq = mirror<ibv_cq>(rcq_h, [&] { return hcasim_adopt_cq(rcq_h, id.verbs, id.recv_cq_channel, &id, rcq_cqe); });
    id.qp = mirror<ibv_qp>(qp_h, [&] {
        return hcasim_adopt_qp(qp_h, id.pd, id.send_cq, id.recv_cq, qpn, id.qp_type, id.context, qp_state);
    });
    if (id.qp) id.qp->state = static_cast<ibv_qp_state>(qp_state);
    ibv_pd* srq_pd = mirror<ibv_pd>(srq_pd_h, [&] { return hcasim_adopt_pd(srq_pd_h, id.verbs, srq_pd_handle); });
    id.srq = mirror<ibv_srq>(srq_h, [&] { return hcasim_adopt_srq(srq_h, id.verbs, srq_pd, srqn); });
    // The same event stays the same object (the program may hold it); the
    // simulator may have put a new one where an acknowledged one was.
    const bool same = m->event && m->event->h == event_h && m->event->ev.event == event->ev.event &&
                      m->event->ev.status == event->ev.status && m->event->private_data == event->private_data;
    if (!event_h) {
        m->event.reset();
    } else if (!same) {
        auto l = g_ids.find(event_listen_h);
        event->ev.listen_id = event_listen_h && l != g_ids.end() ? &l->second->id : nullptr;
        event->ev.id = &id;
        m->event = std::move(event);
    }
    id.event = m->event ? &m->event->ev : nullptr;
    return m;
}

// The result of a call that sends the id's state back, failed or not: the
// mirror takes the state, errno stays the call's.
int result_with_id(Call& c) {
    const int rc = result(c);
    const int err = errno;
    if (c.ok()) read_id(c.out());
    errno = err;
    return rc;
}

CId* cid(rdma_cm_id* id) { return reinterpret_cast<CId*>(id); }

void put_addr(Writer& w, const sockaddr* a) {
    sockaddr_storage s{};
    if (a) std::memcpy(&s, a, a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    w.put(static_cast<std::uint8_t>(a != nullptr));
    w.put(s);
}

// Whether rdma_create_qp makes CQs (and channels) for a QP of this type: an
// XRC target QP has none, an XRC initiator only a send CQ.
bool makes_cqs(ibv_qp_type type, const ibv_qp_init_attr& a) {
    if (type == IBV_QPT_XRC_RECV) return false;
    if (type == IBV_QPT_XRC_SEND) return !a.send_cq;
    return !a.send_cq || !a.recv_cq;
}

// Frees the mirror of a CQ and of a channel rdma_cm made (g_lock held).
void drop_cq_mirror(ibv_cq*& cq) {
    if (!cq) return;
    g_verbs.erase(hcasim_handle_of_cq(cq));
    hcasim_drop_cq(cq);
    cq = nullptr;
}
void drop_channel_mirror(ibv_comp_channel*& ch) {
    if (!ch) return;
    for (auto it = g_verbs.begin(); it != g_verbs.end(); ++it)
        if (it->second == ch) {
            g_verbs.erase(it);
            break;
        }
    hcasim_drop_channel(ch);
    ch = nullptr;
}

// Frees the mirrors of an id's QP (and of the CQs and channels rdma_cm made
// for it) once the simulator has destroyed them.
void drop_qp_mirrors(CId* m, bool own_cqs) {
    std::lock_guard<std::mutex> g(g_lock);
    rdma_cm_id& id = m->id;
    if (id.qp) {
        g_verbs.erase(hcasim_handle_of_qp(id.qp));
        hcasim_drop_qp(id.qp);
        id.qp = nullptr;
    }
    if (own_cqs) {
        // The same CQ or channel may serve both directions.
        if (id.recv_cq == id.send_cq) id.recv_cq = nullptr;
        if (id.recv_cq_channel == id.send_cq_channel) id.recv_cq_channel = nullptr;
        drop_cq_mirror(id.send_cq);
        drop_cq_mirror(id.recv_cq);
        drop_channel_mirror(id.send_cq_channel);
        drop_channel_mirror(id.recv_cq_channel);
    }
}

// The same for an id's SRQ and the CQ and channel rdma_create_srq made for it.
void drop_srq_mirrors(CId* m) {
    std::lock_guard<std::mutex> g(g_lock);
    rdma_cm_id& id = m->id;
    if (id.srq) {
        g_verbs.erase(hcasim_handle_of_srq(id.srq));
        hcasim_drop_srq(id.srq);
        id.srq = nullptr;
    }
    if (m->own_srq_cq) {
        drop_cq_mirror(id.recv_cq);
        drop_channel_mirror(id.recv_cq_channel);
        m->own_srq_cq = false;
    }
}

}  // namespace

// ---- event channels -----------------------------------------------------------

EXPORT rdma_event_channel* rdma_create_event_channel(void) {
    const int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (fd < 0) return nullptr;
    Call c(Op::CmCreateChannel);
    c.in().put(static_cast<std::int32_t>(fd));
    if (result(c)) {
        const int err = errno;
        close(fd);
        errno = err;
        return nullptr;
    }
    auto* ch = new CChannel{};
    ch->h = c.out().get<std::uint64_t>();
    ch->ch.fd = fd;
    std::lock_guard<std::mutex> g(g_lock);
    g_channels[ch->h] = ch;
    return &ch->ch;
}

EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
    if (!channel) return;
    auto* ch = reinterpret_cast<CChannel*>(channel);
    Call c(Op::CmDestroyChannel);
    c.in().put(ch->h);
    result(c);
    close(ch->ch.fd);
    std::lock_guard<std::mutex> g(g_lock);
    g_channels.erase(ch->h);
    delete ch;
}

// ---- ids ----------------------------------------------------------------------

EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
    if (!id) return fail(EINVAL);
    Call c(Op::CmCreateId);
    c.in().put(channel ? reinterpret_cast<CChannel*>(channel)->h : std::uint64_t{0});
    c.in().put(static_cast<std::int32_t>(ps));
    if (result(c)) return -1;
    CId* m = read_id(c.out());
    m->id.channel = channel;
    m->id.context = context;
    *id = &m->id;
    return 0;
}

EXPORT int rdma_destroy_id(rdma_cm_id* id) {
    if (!id) return fail(EINVAL);
    Call c(Op::CmDestroyId);
    c.in().put(cid(id)->h);
    if (result(c)) return -1;
    std::lock_guard<std::mutex> g(g_lock);
    g_ids.erase(cid(id)->h);
    delete cid(id);
    return 0;
}

EXPORT int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
    if (!id || !channel) return fail(EINVAL);
    Call c(Op::CmMigrateId);
    c.in().put(cid(id)->h);
    c.in().put(reinterpret_cast<CChannel*>(channel)->h);
    if (result(c)) return -1;
    id->channel = channel;
    return 0;
}

EXPORT int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
    if (!id || (optlen && !optval) || optlen > 4096) return fail(EINVAL);
    Call c(Op::CmSetOption);
    c.in().put(cid(id)->h);
    c.in().put(static_cast<std::int32_t>(level));
    c.in().put(static_cast<std::int32_t>(optname));
    c.in().put(static_cast<std::uint32_t>(optlen));
    c.in().bytes(optval, optlen);
    return result(c);
}

namespace {
int address_call(Op op, rdma_cm_id* id, const sockaddr* src, const sockaddr* dst, int timeout_ms) {
    if (!id) return fail(EINVAL);
    Call c(op);
    c.in().put(cid(id)->h);
    put_addr(c.in(), src);
    put_addr(c.in(), dst);
    c.in().put(static_cast<std::int32_t>(timeout_ms));
    return result_with_id(c);
}
}  // namespace

EXPORT int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) { return address_call(Op::CmBindAddr, id, addr, nullptr, 0); }

EXPORT int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
    return address_call(Op::CmResolveAddr, id, src_addr, dst_addr, timeout_ms);
}

EXPORT int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
    if (!id) return fail(EINVAL);
    Call c(Op::CmResolveRoute);
    c.in().put(cid(id)->h);
    c.in().put(static_cast<std::int32_t>(timeout_ms));
    return result_with_id(c);
}

EXPORT int rdma_listen(rdma_cm_id* id, int backlog) {
    if (!id) return fail(EINVAL);
    Call c(Op::CmListen);
    c.in().put(cid(id)->h);
    c.in().put(static_cast<std::int32_t>(backlog));
    return result(c);
}

namespace {
int conn_call(Op op, rdma_cm_id* id, rdma_conn_param* p) {
    if (!id) return fail(EINVAL);
    Call c(op);
    c.in().put(cid(id)->h);
    c.in().put(static_cast<std::uint8_t>(p != nullptr));
    rdma_conn_param copy{};
    if (p) copy = *p;
    if (!copy.private_data) copy.private_data_len = 0;
    c.in().put(copy);
    c.in().bytes(copy.private_data, copy.private_data_len);
    return result_with_id(c);
}

int id_call(Op op, rdma_cm_id* id) {
    if (!id) return fail(EINVAL);
    Call c(op);
    c.in().put(cid(id)->h);
    return result_with_id(c);
}
}  // namespace

EXPORT int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) { return conn_call(Op::CmConnect, id, conn_param); }
EXPORT int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) { return conn_call(Op::CmAccept, id, conn_param); }
EXPORT int rdma_disconnect(rdma_cm_id* id) { return id_call(Op::CmDisconnect, id); }
EXPORT int rdma_establish(rdma_cm_id* id) { return id_call(Op::CmEstablish, id); }

EXPORT int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    if (!id) return fail(EINVAL);
    Call c(Op::CmReject);
    c.in().put(cid(id)->h);
    const std::uint8_t len = private_data ? private_data_len : 0;
    c.in().put(len);
    c.in().bytes(private_data, len);
    return result(c);
}

EXPORT int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
    if (!id) return fail(EINVAL);
    Call c(Op::CmNotify);
    c.in().put(cid(id)->h);
    c.in().put(static_cast<std::int32_t>(event));
    return result(c);
}

// ---- QPs ------------------------------------------------------------------------

EXPORT int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (!id || !qp_init_attr) return fail(EINVAL);
    Call c(Op::CmCreateQp);
    c.in().put(cid(id)->h);
    c.in().put(hcasim_handle_of_pd(pd));
    c.in().put(hcasim_handle_of_cq(qp_init_attr->send_cq));
    c.in().put(hcasim_handle_of_cq(qp_init_attr->recv_cq));
    c.in().put(hcasim_handle_of_srq(qp_init_attr->srq));
    c.in().put(qp_init_attr->cap);
    c.in().put(static_cast<std::int32_t>(qp_init_attr->qp_type));
    c.in().put(static_cast<std::int32_t>(qp_init_attr->sq_sig_all));
    const bool own_cqs = makes_cqs(qp_init_attr->qp_type, *qp_init_attr);
    const int rc = result(c);
    const int err = errno;
    if (c.ok()) {
        const auto cap = c.out().get<ibv_qp_cap>();
        CId* m = read_id(c.out());
        if (!rc) {
            qp_init_attr->cap = cap;
            m->own_cqs = own_cqs;
            if (!qp_init_attr->send_cq) qp_init_attr->send_cq = id->send_cq;
            if (!qp_init_attr->recv_cq) qp_init_attr->recv_cq = id->recv_cq;
            if (id->qp) id->qp->qp_context = qp_init_attr->qp_context;
        }
    }
    errno = err;
    return rc;
}

EXPORT int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
    if (!id || !attr) return fail(EINVAL);
    // The standard verbs' part of it; extended send ops are not offered.
    if (attr->comp_mask & ~static_cast<std::uint32_t>(IBV_QP_INIT_ATTR_PD)) return fail(EOPNOTSUPP);
    ibv_qp_init_attr a{};
    a.qp_context = attr->qp_context;
    a.send_cq = attr->send_cq;
    a.recv_cq = attr->recv_cq;
    a.srq = attr->srq;
    a.cap = attr->cap;
    a.qp_type = attr->qp_type;
    a.sq_sig_all = attr->sq_sig_all;
    const int rc = rdma_create_qp(id, (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : nullptr, &a);
    if (!rc) {
        attr->cap = a.cap;
        attr->send_cq = a.send_cq;
        attr->recv_cq = a.recv_cq;
    }
    return rc;
}

EXPORT void rdma_destroy_qp(rdma_cm_id* id) {
    if (!id || !id->qp) return;
    Call c(Op::CmDestroyQp);
    c.in().put(cid(id)->h);
    if (result(c)) return;
    drop_qp_mirrors(cid(id), cid(id)->own_cqs);
    cid(id)->own_cqs = false;
    read_id(c.out());
}

// ---- shared receive queues ---------------------------------------------------

// The simulator's rdma_cm decides everything (the type is required, an XRC
// SRQ gets librdmacm's domain and a CQ of its own when none is given); the
// SRQ, and that CQ and its channel, come back in the id's state.
EXPORT int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
    if (!id || !attr) return fail(EINVAL);
    const std::uint32_t mask = attr->comp_mask;
    const bool makes_cq = (mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC &&
                          (!(mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq);
    Call c(Op::CmCreateSrq);
    c.in().put(cid(id)->h);
    c.in().put(mask);
    c.in().put(static_cast<std::int32_t>(attr->srq_type));
    c.in().put((mask & IBV_SRQ_INIT_ATTR_PD) ? hcasim_handle_of_pd(attr->pd) : std::uint64_t{0});
    c.in().put((mask & IBV_SRQ_INIT_ATTR_XRCD) ? hcasim_handle_of_xrcd(attr->xrcd) : std::uint64_t{0});
    c.in().put((mask & IBV_SRQ_INIT_ATTR_CQ) ? hcasim_handle_of_cq(attr->cq) : std::uint64_t{0});
    c.in().put(attr->attr);
    const int rc = result(c);
    const int err = errno;
    if (c.ok()) {
        const auto a = c.out().get<ibv_srq_attr>();
        CId* m = read_id(c.out());
        if (!rc && id->srq) {
            attr->attr = a;
            id->srq->srq_context = attr->srq_context;
            m->own_srq_cq = makes_cq;
            // What librdmacm fills in (a domain it opened stays its own).
            attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
            attr->pd = id->srq->pd;
            if (attr->srq_type == IBV_SRQT_XRC) {
                attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
                if (makes_cq) attr->cq = id->recv_cq;
            }
        }
    }
    errno = err;
    return rc;
}

// As librdmacm: an XRC SRQ for an XRC target id, a basic one otherwise.
EXPORT int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
    if (!id || !attr) return fail(EINVAL);
    ibv_srq_init_attr_ex x{};
    x.srq_context = attr->srq_context;
    x.attr = attr->attr;
    x.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    x.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
    x.pd = pd;
    const int rc = rdma_create_srq_ex(id, &x);
    attr->attr = x.attr;
    return rc;
}

EXPORT void rdma_destroy_srq(rdma_cm_id* id) {
    if (!id || !id->srq) return;
    Call c(Op::CmDestroySrq);
    c.in().put(cid(id)->h);
    if (result(c)) return;
    drop_srq_mirrors(cid(id));
    read_id(c.out());
}

// ---- events -------------------------------------------------------------------

EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
    if (!channel || !event) return fail(EINVAL);
    // Wait in the kernel on the channel's fd, as librdmacm reads it; an
    // O_NONBLOCK channel gives EAGAIN.
    std::uint64_t one = 0;
    if (read(channel->fd, &one, sizeof one) != sizeof one) return -1;
    Call c(Op::CmGetEvent);
    c.in().put(reinterpret_cast<CChannel*>(channel)->h);
    if (result(c)) return -1;
    Reader& r = c.out();
    auto* e = new CEvent{};
    e->h = r.get<std::uint64_t>();
    const auto listen_h = read_event(r, e);
    CId* listen = nullptr;
    {
        std::lock_guard<std::mutex> g(g_lock);
        auto it = g_ids.find(listen_h);
        if (it != g_ids.end()) listen = it->second;
    }
    CId* m = read_id(r, listen);
    e->ev.id = &m->id;
    e->ev.listen_id = listen ? &listen->id : nullptr;
    *event = &e->ev;
    return 0;
}

EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
    if (!event) return fail(EINVAL);
    auto* e = reinterpret_cast<CEvent*>(event);
    Call c(Op::CmAckEvent);
    c.in().put(e->h);
    const int rc = result(c);
    delete e;
    return rc;
}

EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
    static const char* const names[] = {
        "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",       "RDMA_CM_EVENT_ROUTE_RESOLVED",
        "RDMA_CM_EVENT_ROUTE_ERROR",      "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
        "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",      "RDMA_CM_EVENT_REJECTED",
        "RDMA_CM_EVENT_ESTABLISHED",      "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
        "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",  "RDMA_CM_EVENT_ADDR_CHANGE",
        "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
    const int i = static_cast<int>(event);
    return i >= 0 && i <= RDMA_CM_EVENT_TIMEWAIT_EXIT ? names[i] : "UNKNOWN EVENT";
}

EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
    if (!listen || !id) return fail(EINVAL);
    Call c(Op::CmGetRequest);
    c.in().put(cid(listen)->h);
    if (result(c)) return -1;
    CId* m = read_id(c.out(), cid(listen));
    *id = &m->id;
    return 0;
}

// ---- multicast -------------------------------------------------------------------

EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
    if (!id || !addr) return fail(EINVAL);
    Call c(Op::CmJoinMulticast);
    c.in().put(cid(id)->h);
    sockaddr_storage s{};
    std::memcpy(&s, addr, addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    c.in().put(s);
    c.in().put(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(context)));
    return result(c);
}

EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context) {
    if (!attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) return fail(EINVAL);
    return rdma_join_multicast(id, attr->addr, context);
}

EXPORT int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
    if (!id || !addr) return fail(EINVAL);
    Call c(Op::CmLeaveMulticast);
    c.in().put(cid(id)->h);
    sockaddr_storage s{};
    std::memcpy(&s, addr, addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    c.in().put(s);
    c.in().put(std::uint64_t{0});
    return result(c);
}

// ---- addresses, endpoints, devices --------------------------------------------

EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
    if (!res) return EAI_FAIL;
    Call c(Op::CmGetAddrinfo);
    auto put_text = [&](const char* t) {
        c.in().put(static_cast<std::uint8_t>(t != nullptr));
        const auto n = static_cast<std::uint32_t>(t ? std::strlen(t) : 0);
        c.in().put(n);
        c.in().bytes(t, n);
    };
    put_text(node);
    put_text(service);
    c.in().put(static_cast<std::uint8_t>(hints != nullptr));
    c.in().put(static_cast<std::int32_t>(hints ? hints->ai_flags : 0));
    c.in().put(static_cast<std::int32_t>(hints ? hints->ai_family : 0));
    c.in().put(static_cast<std::int32_t>(hints ? hints->ai_qp_type : 0));
    c.in().put(static_cast<std::int32_t>(hints ? hints->ai_port_space : 0));
    if (!c.run()) {
        errno = ENOSYS;
        return EAI_SYSTEM;
    }
    const int rc = c.out().get<std::int32_t>();
    const int err = c.out().get<std::int32_t>();
    if (rc) {
        errno = err;
        return rc;
    }
    const auto count = c.out().get<std::uint32_t>();
    rdma_addrinfo* head = nullptr;
    rdma_addrinfo** tail = &head;
    for (std::uint32_t i = 0; i < count; ++i) {
        auto* a = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
        a->ai_flags = c.out().get<std::int32_t>();
        a->ai_family = c.out().get<std::int32_t>();
        a->ai_qp_type = c.out().get<std::int32_t>();
        a->ai_port_space = c.out().get<std::int32_t>();
        for (int k = 0; k < 2; ++k) {
            const bool has = c.out().get<std::uint8_t>() != 0;
            const auto s = c.out().get<sockaddr_storage>();
            if (!has) continue;
            const socklen_t len = s.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
            auto* p = static_cast<sockaddr*>(std::malloc(len));
            std::memcpy(p, &s, len);
            if (k == 0) {
                a->ai_src_addr = p;
                a->ai_src_len = len;
            } else {
                a->ai_dst_addr = p;
                a->ai_dst_len = len;
            }
        }
        *tail = a;
        tail = &a->ai_next;
    }
    *res = head;
    return 0;
}

EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
    while (res) {
        rdma_addrinfo* next = res->ai_next;
        std::free(res->ai_src_addr);
        std::free(res->ai_dst_addr);
        std::free(res->ai_src_canonname);
        std::free(res->ai_dst_canonname);
        std::free(res);
        res = next;
    }
}

EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (!id || !res) return fail(EINVAL);
    Call c(Op::CmCreateEp);
    c.in().put(static_cast<std::int32_t>(res->ai_flags));
    c.in().put(static_cast<std::int32_t>(res->ai_family));
    c.in().put(static_cast<std::int32_t>(res->ai_qp_type));
    c.in().put(static_cast<std::int32_t>(res->ai_port_space));
    put_addr(c.in(), res->ai_src_addr);
    put_addr(c.in(), res->ai_dst_addr);
    c.in().put(hcasim_handle_of_pd(pd));
    c.in().put(static_cast<std::uint8_t>(qp_init_attr != nullptr));
    c.in().put(qp_init_attr ? hcasim_handle_of_cq(qp_init_attr->send_cq) : std::uint64_t{0});
    c.in().put(qp_init_attr ? hcasim_handle_of_cq(qp_init_attr->recv_cq) : std::uint64_t{0});
    c.in().put(qp_init_attr ? qp_init_attr->cap : ibv_qp_cap{});
    c.in().put(static_cast<std::int32_t>(qp_init_attr ? qp_init_attr->qp_type : 0));
    c.in().put(static_cast<std::int32_t>(qp_init_attr ? qp_init_attr->sq_sig_all : 0));
    if (result(c)) return -1;
    const auto cap = c.out().get<ibv_qp_cap>();
    CId* m = read_id(c.out());
    m->own_cqs = qp_init_attr && makes_cqs(static_cast<ibv_qp_type>(res->ai_qp_type), *qp_init_attr);
    if (qp_init_attr && m->id.qp) {
        qp_init_attr->cap = cap;
        qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    }
    *id = &m->id;
    return 0;
}

EXPORT void rdma_destroy_ep(rdma_cm_id* id) {
    if (!id) return;
    Call c(Op::CmDestroyEp);
    c.in().put(cid(id)->h);
    if (result(c)) return;
    drop_qp_mirrors(cid(id), cid(id)->own_cqs);
    drop_srq_mirrors(cid(id));
    std::lock_guard<std::mutex> g(g_lock);
    g_ids.erase(cid(id)->h);
    delete cid(id);
}

EXPORT ibv_context** rdma_get_devices(int* num_devices) {
    // The node's device, as rdma_cm opened it for its ids.
    rdma_cm_id* probe = nullptr;
    rdma_event_channel* ch = nullptr;
    if (num_devices) *num_devices = 0;
    if (rdma_create_id(ch, &probe, nullptr, RDMA_PS_TCP)) return nullptr;
    sockaddr_in any{};
    any.sin_family = AF_INET;
    ibv_context* dev = nullptr;
    if (!rdma_bind_addr(probe, reinterpret_cast<sockaddr*>(&any))) dev = probe->verbs;
    rdma_destroy_id(probe);
    auto** list = static_cast<ibv_context**>(std::calloc(2, sizeof(ibv_context*)));
    if (!list) return nullptr;
    list[0] = dev;
    if (num_devices) *num_devices = dev ? 1 : 0;
    return list;
}

EXPORT void rdma_free_devices(ibv_context** list) { std::free(list); }

EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) {
    const sockaddr* a = &id->route.addr.src_addr;
    return a->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(a)->sin6_port
                                    : reinterpret_cast<const sockaddr_in*>(a)->sin_port;
}

EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) {
    const sockaddr* a = &id->route.addr.dst_addr;
    return a->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(a)->sin6_port
                                    : reinterpret_cast<const sockaddr_in*>(a)->sin_port;
}

EXPORT int rdma_init_qp_attr(rdma_cm_id*, ibv_qp_attr*, int*) { return fail(EOPNOTSUPP); }
EXPORT int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) { return fail(EOPNOTSUPP); }
EXPORT int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) { return fail(EOPNOTSUPP); }
EXPORT int rdma_reject_ece(rdma_cm_id*, const void*, uint8_t) { return fail(EOPNOTSUPP); }

// rsockets' poll: the utilities poll rdma_cm channel fds with it, which are
// real file descriptors here, so poll itself serves.
EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) { return poll(fds, nfds, timeout); }
