#include "host/remote/rdma_cm_proxy.hpp"

#include <netdb.h>
#include <rdma/rdma_verbs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "host/rdma_cm/rdma_cm_internal.hpp"

namespace hcasim::remote {

struct RdmaCmProxy::Channel {
    rdma_event_channel* channel;
    int fd;                       // the program's eventfd (ours through pidfd_getfd)
    std::uint64_t signalled = 0;  // counted into fd and not yet taken
    bool stop = false;
    sc_core::sc_event stop_event;
};

namespace {
std::uint64_t ptr(const void* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); }
template <typename T>
T* from(std::uint64_t h) {
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(h));
}
sockaddr_storage storage_of(const sockaddr* a) {
    sockaddr_storage s{};
    if (a) std::memcpy(&s, a, a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    return s;
}
}  // namespace

RdmaCmProxy::RdmaCmProxy(VerbsProxy& verbs, int pidfd, std::function<void()> touch)
    : m_verbs(verbs), m_pidfd(pidfd), m_touch(std::move(touch)) {}

RdmaCmProxy::~RdmaCmProxy() {
    for (auto& [h, c] : m_channels)
        if (c->fd >= 0) ::close(c->fd);
}

bool RdmaCmProxy::handles(Op op) {
    return (op >= Op::CmCreateChannel && op <= Op::CmId) || op == Op::CmCreateSrq || op == Op::CmDestroySrq;
}

int RdmaCmProxy::take_fd(int remote_fd) {
    if (m_pidfd < 0 || remote_fd < 0) return -1;
    return static_cast<int>(syscall(SYS_pidfd_getfd, m_pidfd, remote_fd, 0));
}

rdma_cm_id* RdmaCmProxy::id_of(std::uint64_t h) const {
    auto it = m_ids.find(h);
    if (it == m_ids.end()) return nullptr;
    rdma_cm_id* id = it->second;
    // The program may have destroyed the id's QP, CQs or PD with the verbs
    // calls themselves (perftest does): the id no longer has them.
    using K = VerbsProxy::Kind;
    if (id->qp && !m_verbs.find<ibv_qp>(ptr(id->qp), K::Qp)) id->qp = nullptr;
    if (id->send_cq && !m_verbs.find<ibv_cq>(ptr(id->send_cq), K::Cq)) id->send_cq = nullptr;
    if (id->recv_cq && !m_verbs.find<ibv_cq>(ptr(id->recv_cq), K::Cq)) id->recv_cq = nullptr;
    if (id->send_cq_channel && !m_verbs.find<ibv_comp_channel>(ptr(id->send_cq_channel), K::Channel))
        id->send_cq_channel = nullptr;
    if (id->recv_cq_channel && !m_verbs.find<ibv_comp_channel>(ptr(id->recv_cq_channel), K::Channel))
        id->recv_cq_channel = nullptr;
    if (id->pd && !m_verbs.find<ibv_pd>(ptr(id->pd), K::Pd)) id->pd = nullptr;
    if (id->srq && !m_verbs.find<ibv_srq>(ptr(id->srq), K::Srq)) id->srq = nullptr;
    return id;
}

// An id as the program's rdma_cm_id shows it; every verbs object in it
// adopted so that the program can name it.
void RdmaCmProxy::put_id(Writer& out, rdma_cm_id* id) {
    using K = VerbsProxy::Kind;
    m_ids[ptr(id)] = id;
    out.put(ptr(id));
    out.put(static_cast<std::int32_t>(id->ps));
    out.put(static_cast<std::int32_t>(id->qp_type));
    out.put(id->port_num);
    out.put(id->route.addr.src_storage);
    out.put(id->route.addr.dst_storage);
    const int paths = id->route.path_rec ? id->route.num_paths : 0;
    out.put(static_cast<std::int32_t>(paths));
    for (int i = 0; i < paths; ++i) out.put(id->route.path_rec[i]);
    out.put(m_verbs.adopt(id->verbs, K::Context));
    out.put(m_verbs.adopt(id->pd, K::Pd));
    out.put(id->pd ? id->pd->handle : 0u);
    out.put(m_verbs.adopt(id->send_cq_channel, K::Channel));
    out.put(m_verbs.adopt(id->recv_cq_channel, K::Channel));
    out.put(m_verbs.adopt(id->send_cq, K::Cq));
    out.put(static_cast<std::int32_t>(id->send_cq ? id->send_cq->cqe : 0));
    out.put(m_verbs.adopt(id->recv_cq, K::Cq));
    out.put(static_cast<std::int32_t>(id->recv_cq ? id->recv_cq->cqe : 0));
    out.put(m_verbs.adopt(id->qp, K::Qp));
    out.put(id->qp ? id->qp->qp_num : 0u);
    out.put(static_cast<std::int32_t>(id->qp ? id->qp->state : IBV_QPS_RESET));
    out.put(m_verbs.adopt(id->srq, K::Srq));
    out.put(id->srq ? m_verbs.adopt(id->srq->pd, K::Pd) : std::uint64_t{0});
    out.put(id->srq && id->srq->pd ? id->srq->pd->handle : 0u);
    std::uint32_t srqn = 0;
    if (id->srq) ibv_get_srq_num(id->srq, &srqn);
    out.put(srqn);
    // A synchronous id keeps its last event in id->event (rdma_xclient
    // reads the REP's private data there); librdmacm acknowledges it.
    out.put(ptr(id->event));
    if (id->event) put_event(out, id->event);
}

// An event's listener, type, status and parameters.
void RdmaCmProxy::put_event(Writer& out, const rdma_cm_event* e) {
    out.put(ptr(e->listen_id));
    out.put(static_cast<std::int32_t>(e->event));
    out.put(static_cast<std::int32_t>(e->status));
    const bool ud = e->id && (e->id->ps == RDMA_PS_UDP || e->id->ps == RDMA_PS_IPOIB);
    out.put(static_cast<std::uint8_t>(ud));
    if (ud) {
        out.put(e->param.ud.private_data_len);
        // A multicast event's private data is the program's own join context.
        const bool mcast = e->event == RDMA_CM_EVENT_MULTICAST_JOIN || e->event == RDMA_CM_EVENT_MULTICAST_ERROR;
        out.put(static_cast<std::uint8_t>(mcast));
        if (mcast) out.put(ptr(e->param.ud.private_data));
        else out.bytes(e->param.ud.private_data, e->param.ud.private_data ? e->param.ud.private_data_len : 0);
        out.put(e->param.ud.ah_attr);
        out.put(e->param.ud.qp_num);
        out.put(e->param.ud.qkey);
    } else {
        rdma_conn_param p = e->param.conn;
        out.put(p);
        out.bytes(p.private_data, p.private_data ? p.private_data_len : 0);
    }
}

void RdmaCmProxy::destroy_qp(rdma_cm_id* id) {
    auto* s = reinterpret_cast<rdmacm::SimId*>(id);
    // Taken before the destroy clears them from the id.
    const std::initializer_list<const void*> made = {id->qp, s->own_cqs ? id->send_cq : nullptr,
                                                     s->own_cqs ? id->recv_cq : nullptr,
                                                     s->own_cqs ? id->send_cq_channel : nullptr,
                                                     s->own_cqs ? id->recv_cq_channel : nullptr};
    rdma_destroy_qp(id);
    forget_destroyed(made, s->orphans);
}

// An SRQ rdma_cm made goes with rdma_destroy_srq, and the CQ and channel
// it made for it.
void RdmaCmProxy::destroy_srq(rdma_cm_id* id) {
    auto* s = reinterpret_cast<rdmacm::SimId*>(id);
    const std::initializer_list<const void*> made = {id->srq, s->own_srq_cq ? id->recv_cq : nullptr,
                                                     s->own_srq_cq ? id->recv_cq_channel : nullptr};
    rdma_destroy_srq(id);
    forget_destroyed(made, s->orphans);
}

// Forgotten only after the destroy: a call of another thread meanwhile would
// take objects the proxy no longer knows for ones the program destroyed
// itself and clear them from the id (id_of), and the destroy would then
// leave them to no one. A CQ another id's QP still uses outlives the
// destroy, as with librdmacm (cmtime hands every id the first one's CQs):
// it is the program's now, and goes when the program does.
void RdmaCmProxy::forget_destroyed(std::initializer_list<const void*> made, std::vector<const void*>& orphans) {
    for (const void* p : made) {
        if (std::find(orphans.begin(), orphans.end(), p) != orphans.end()) m_verbs.own(p);
        else m_verbs.forget(p);
    }
    orphans.clear();
}

void RdmaCmProxy::execute(Op op, Reader& in, Writer& out) {
    auto status = [&](int rc) { out.put(static_cast<std::int32_t>(rc ? (errno ? errno : EINVAL) : 0)); };
    errno = 0;
    switch (op) {
    case Op::CmCreateChannel: {
        const auto fd = in.get<std::int32_t>();
        rdma_event_channel* ch = rdma_create_event_channel();
        if (!ch) return status(-1);
        auto c = std::make_unique<Channel>();
        c->channel = ch;
        c->fd = take_fd(fd);
        Channel& cr = *c;
        auto* sim = reinterpret_cast<rdmacm::SimChannel*>(ch);
        std::function<void()> touch = m_touch;
        sc_core::sc_spawn([&cr, sim, touch]() {
            while (!cr.stop) {
                const std::uint64_t queued = sim->queue.size();
                if (queued > cr.signalled) {
                    const std::uint64_t n = queued - cr.signalled;
                    if (cr.fd >= 0) [[maybe_unused]] const ssize_t w = ::write(cr.fd, &n, sizeof n);
                    cr.signalled = queued;
                    if (touch) touch();
                }
                sc_core::wait(sim->arrived | cr.stop_event);
            }
        });
        m_channels[ptr(ch)] = std::move(c);
        status(0);
        out.put(ptr(ch));
        return;
    }
    case Op::CmDestroyChannel: {
        auto it = m_channels.find(in.get<std::uint64_t>());
        if (it == m_channels.end()) return status(-1);
        it->second->stop = true;
        it->second->stop_event.notify(sc_core::SC_ZERO_TIME);
        if (it->second->fd >= 0) ::close(it->second->fd);
        it->second->fd = -1;
        rdma_destroy_event_channel(it->second->channel);
        it->second->channel = nullptr;
        return status(0);
    }
    case Op::CmCreateId: {
        const auto ch_h = in.get<std::uint64_t>();
        const auto ps = in.get<std::int32_t>();
        auto ch = m_channels.find(ch_h);
        if (ch_h && (ch == m_channels.end() || !ch->second->channel)) {
            errno = EINVAL;
            return status(-1);
        }
        rdma_cm_id* id = nullptr;
        if (rdma_create_id(ch_h ? ch->second->channel : nullptr, &id, nullptr, static_cast<rdma_port_space>(ps)))
            return status(-1);
        status(0);
        put_id(out, id);
        return;
    }
    case Op::CmDestroyId:
    case Op::CmDestroyEp: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        if (!id) {
            errno = EINVAL;
            return status(-1);
        }
        if (op == Op::CmDestroyEp) {
            if (id->qp) destroy_qp(id);
            if (id->srq) destroy_srq(id);
            rdma_destroy_ep(id);
            m_ids.erase(ptr(id));
            return status(0);
        }
        const int rc = rdma_destroy_id(id);
        if (!rc) m_ids.erase(ptr(id));
        return status(rc);
    }
    case Op::CmMigrateId: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        auto ch = m_channels.find(in.get<std::uint64_t>());
        if (!id || ch == m_channels.end() || !ch->second->channel) {
            errno = EINVAL;
            return status(-1);
        }
        return status(rdma_migrate_id(id, ch->second->channel));
    }
    case Op::CmSetOption: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        const auto level = in.get<std::int32_t>();
        const auto name = in.get<std::int32_t>();
        const auto len = in.get<std::uint32_t>();
        const std::uint8_t* v = in.view(len);
        if (!id || (len && !v)) {
            errno = EINVAL;
            return status(-1);
        }
        std::vector<std::uint8_t> value(v, v + len);
        return status(rdma_set_option(id, level, name, value.data(), len));
    }
    case Op::CmBindAddr:
    case Op::CmResolveAddr: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        const auto has_src = in.get<std::uint8_t>();
        auto src = in.get<sockaddr_storage>();
        const auto has_dst = in.get<std::uint8_t>();
        auto dst = in.get<sockaddr_storage>();
        const auto timeout = in.get<std::int32_t>();
        if (!id || in.bad()) {
            errno = EINVAL;
            return status(-1);
        }
        int rc;
        if (op == Op::CmBindAddr) rc = rdma_bind_addr(id, has_src ? reinterpret_cast<sockaddr*>(&src) : nullptr);
        else
            rc = rdma_resolve_addr(id, has_src ? reinterpret_cast<sockaddr*>(&src) : nullptr,
                                   has_dst ? reinterpret_cast<sockaddr*>(&dst) : nullptr, timeout);
        status(rc);
        put_id(out, id);
        return;
    }
    case Op::CmResolveRoute: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        const auto timeout = in.get<std::int32_t>();
        if (!id) {
            errno = EINVAL;
            return status(-1);
        }
        status(rdma_resolve_route(id, timeout));
        put_id(out, id);
        return;
    }
    case Op::CmListen: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        const auto backlog = in.get<std::int32_t>();
        if (!id) {
            errno = EINVAL;
            return status(-1);
        }
        return status(rdma_listen(id, backlog));
    }
    case Op::CmConnect:
    case Op::CmAccept: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        const auto has = in.get<std::uint8_t>();
        rdma_conn_param p = in.get<rdma_conn_param>();
        const std::uint8_t* pd = in.view(p.private_data_len);
        if (!id || in.bad()) {
            errno = EINVAL;
            return status(-1);
        }
        std::vector<std::uint8_t> pdata(pd, pd + p.private_data_len);
        p.private_data = pdata.empty() ? nullptr : pdata.data();
        const int rc = op == Op::CmConnect ? rdma_connect(id, has ? &p : nullptr) : rdma_accept(id, has ? &p : nullptr);
        status(rc);
        put_id(out, id);
        return;
    }
    case Op::CmReject: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        const auto len = in.get<std::uint8_t>();
        const std::uint8_t* pd = in.view(len);
        if (!id || in.bad()) {
            errno = EINVAL;
            return status(-1);
        }
        std::vector<std::uint8_t> pdata(pd, pd + len);
        return status(rdma_reject(id, pdata.empty() ? nullptr : pdata.data(), len));
    }
    case Op::CmNotify: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        const auto ev = in.get<std::int32_t>();
        if (!id) {
            errno = EINVAL;
            return status(-1);
        }
        return status(rdma_notify(id, static_cast<ibv_event_type>(ev)));
    }
    case Op::CmDisconnect:
    case Op::CmEstablish:
    case Op::CmId: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        if (!id) {
            errno = EINVAL;
            return status(-1);
        }
        const int rc = op == Op::CmDisconnect ? rdma_disconnect(id) : op == Op::CmEstablish ? rdma_establish(id) : 0;
        status(rc);
        put_id(out, id);
        return;
    }
    case Op::CmCreateQp: {
        using K = VerbsProxy::Kind;
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        const auto pd_h = in.get<std::uint64_t>();
        const auto scq_h = in.get<std::uint64_t>();
        const auto rcq_h = in.get<std::uint64_t>();
        const auto srq_h = in.get<std::uint64_t>();
        ibv_qp_init_attr a{};
        a.cap = in.get<ibv_qp_cap>();
        a.qp_type = static_cast<ibv_qp_type>(in.get<std::int32_t>());
        a.sq_sig_all = in.get<std::int32_t>();
        ibv_pd* pd = pd_h ? m_verbs.find<ibv_pd>(pd_h, K::Pd) : nullptr;
        a.send_cq = scq_h ? m_verbs.find<ibv_cq>(scq_h, K::Cq) : nullptr;
        a.recv_cq = rcq_h ? m_verbs.find<ibv_cq>(rcq_h, K::Cq) : nullptr;
        a.srq = srq_h ? m_verbs.find<ibv_srq>(srq_h, K::Srq) : nullptr;
        if (!id || in.bad() || (pd_h && !pd) || (scq_h && !a.send_cq) || (rcq_h && !a.recv_cq) || (srq_h && !a.srq)) {
            errno = EINVAL;
            return status(-1);
        }
        const int rc = rdma_create_qp(id, pd, &a);
        status(rc);
        out.put(a.cap);
        put_id(out, id);
        return;
    }
    case Op::CmDestroyQp: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        if (!id) {
            errno = EINVAL;
            return status(-1);
        }
        destroy_qp(id);
        status(0);
        put_id(out, id);
        return;
    }
    case Op::CmCreateSrq: {
        using K = VerbsProxy::Kind;
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        ibv_srq_init_attr_ex a{};
        a.comp_mask = in.get<std::uint32_t>();
        a.srq_type = static_cast<ibv_srq_type>(in.get<std::int32_t>());
        const auto pd_h = in.get<std::uint64_t>();
        const auto xrcd_h = in.get<std::uint64_t>();
        const auto cq_h = in.get<std::uint64_t>();
        a.attr = in.get<ibv_srq_attr>();
        a.pd = pd_h ? m_verbs.find<ibv_pd>(pd_h, K::Pd) : nullptr;
        a.xrcd = xrcd_h ? m_verbs.find<ibv_xrcd>(xrcd_h, K::Xrcd) : nullptr;
        a.cq = cq_h ? m_verbs.find<ibv_cq>(cq_h, K::Cq) : nullptr;
        if (!id || in.bad() || (pd_h && !a.pd) || (xrcd_h && !a.xrcd) || (cq_h && !a.cq)) {
            errno = EINVAL;
            return status(-1);
        }
        status(rdma_create_srq_ex(id, &a));
        out.put(a.attr);
        put_id(out, id);
        return;
    }
    case Op::CmDestroySrq: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        if (!id) {
            errno = EINVAL;
            return status(-1);
        }
        destroy_srq(id);
        status(0);
        put_id(out, id);
        return;
    }
    case Op::CmGetEvent: {
        auto ch = m_channels.find(in.get<std::uint64_t>());
        if (ch == m_channels.end() || !ch->second->channel) {
            errno = EINVAL;
            return status(-1);
        }
        // The program took one count from its eventfd before calling. Take
        // it off here, before the event leaves the queue: a connect response
        // brings the QP up inside the call, in simulated time, and an event
        // queued meanwhile must be counted (the queue is one shorter by then).
        if (ch->second->signalled) --ch->second->signalled;
        rdma_cm_event* e = nullptr;
        if (rdma_get_cm_event(ch->second->channel, &e)) return status(-1);
        m_events[ptr(e)] = e;
        status(0);
        out.put(ptr(e));
        put_event(out, e);
        if (m_ids.count(ptr(e->id))) id_of(ptr(e->id));
        put_id(out, e->id);
        return;
    }
    case Op::CmAckEvent: {
        auto it = m_events.find(in.get<std::uint64_t>());
        if (it == m_events.end()) {
            errno = EINVAL;
            return status(-1);
        }
        const int rc = rdma_ack_cm_event(it->second);
        m_events.erase(it);
        return status(rc);
    }
    case Op::CmJoinMulticast:
    case Op::CmLeaveMulticast: {
        rdma_cm_id* id = id_of(in.get<std::uint64_t>());
        auto addr = in.get<sockaddr_storage>();
        const auto context = in.get<std::uint64_t>();
        if (!id || in.bad()) {
            errno = EINVAL;
            return status(-1);
        }
        return status(op == Op::CmJoinMulticast
                          ? rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&addr), from<void>(context))
                          : rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&addr)));
    }
    case Op::CmGetRequest: {
        rdma_cm_id* listen = id_of(in.get<std::uint64_t>());
        if (!listen) {
            errno = EINVAL;
            return status(-1);
        }
        rdma_cm_id* id = nullptr;
        if (rdma_get_request(listen, &id)) return status(-1);
        status(0);
        put_id(out, id);
        return;
    }
    case Op::CmGetAddrinfo: {
        const auto has_node = in.get<std::uint8_t>();
        const auto node_len = in.get<std::uint32_t>();
        const std::uint8_t* node = in.view(node_len);
        const auto has_service = in.get<std::uint8_t>();
        const auto service_len = in.get<std::uint32_t>();
        const std::uint8_t* service = in.view(service_len);
        const auto has_hints = in.get<std::uint8_t>();
        rdma_addrinfo hints{};
        hints.ai_flags = in.get<std::int32_t>();
        hints.ai_family = in.get<std::int32_t>();
        hints.ai_qp_type = in.get<std::int32_t>();
        hints.ai_port_space = in.get<std::int32_t>();
        if (in.bad()) {
            out.put(std::int32_t{EAI_FAIL});
            return;
        }
        const std::string n(reinterpret_cast<const char*>(node), node_len);
        const std::string sv(reinterpret_cast<const char*>(service), service_len);
        rdma_addrinfo* res = nullptr;
        const int rc = rdma_getaddrinfo(has_node ? n.c_str() : nullptr, has_service ? sv.c_str() : nullptr,
                                        has_hints ? &hints : nullptr, &res);
        out.put(static_cast<std::int32_t>(rc));
        out.put(static_cast<std::int32_t>(errno));
        if (rc) return;
        std::uint32_t count = 0;
        for (rdma_addrinfo* r = res; r; r = r->ai_next) ++count;
        out.put(count);
        for (rdma_addrinfo* r = res; r; r = r->ai_next) {
            out.put(static_cast<std::int32_t>(r->ai_flags));
            out.put(static_cast<std::int32_t>(r->ai_family));
            out.put(static_cast<std::int32_t>(r->ai_qp_type));
            out.put(static_cast<std::int32_t>(r->ai_port_space));
            out.put(static_cast<std::uint8_t>(r->ai_src_addr != nullptr));
            out.put(storage_of(r->ai_src_addr));
            out.put(static_cast<std::uint8_t>(r->ai_dst_addr != nullptr));
            out.put(storage_of(r->ai_dst_addr));
        }
        rdma_freeaddrinfo(res);
        return;
    }
    case Op::CmCreateEp: {
        rdma_addrinfo res{};
        res.ai_flags = in.get<std::int32_t>();
        res.ai_family = in.get<std::int32_t>();
        res.ai_qp_type = in.get<std::int32_t>();
        res.ai_port_space = in.get<std::int32_t>();
        const auto has_src = in.get<std::uint8_t>();
        auto src = in.get<sockaddr_storage>();
        const auto has_dst = in.get<std::uint8_t>();
        auto dst = in.get<sockaddr_storage>();
        const auto pd_h = in.get<std::uint64_t>();
        const auto has_qp = in.get<std::uint8_t>();
        const auto scq_h = in.get<std::uint64_t>();
        const auto rcq_h = in.get<std::uint64_t>();
        ibv_qp_init_attr a{};
        a.cap = in.get<ibv_qp_cap>();
        a.qp_type = static_cast<ibv_qp_type>(in.get<std::int32_t>());
        a.sq_sig_all = in.get<std::int32_t>();
        using K = VerbsProxy::Kind;
        ibv_pd* pd = pd_h ? m_verbs.find<ibv_pd>(pd_h, K::Pd) : nullptr;
        a.send_cq = scq_h ? m_verbs.find<ibv_cq>(scq_h, K::Cq) : nullptr;
        a.recv_cq = rcq_h ? m_verbs.find<ibv_cq>(rcq_h, K::Cq) : nullptr;
        if (in.bad() || (pd_h && !pd) || (scq_h && !a.send_cq) || (rcq_h && !a.recv_cq)) {
            errno = EINVAL;
            return status(-1);
        }
        if (has_src) {
            res.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
            res.ai_src_len = src.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
        }
        if (has_dst) {
            res.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst);
            res.ai_dst_len = dst.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
        }
        rdma_cm_id* id = nullptr;
        const int rc = rdma_create_ep(&id, &res, pd, has_qp ? &a : nullptr);
        status(rc);
        if (!rc) {
            out.put(a.cap);
            put_id(out, id);
        }
        return;
    }
    default: errno = ENOSYS; status(-1); return;
    }
}

void RdmaCmProxy::release_all() {
    // Events taken and not acknowledged are acknowledged, as closing the
    // rdma_cm file does; then every id goes, its QP first.
    for (auto& [h, e] : m_events) rdma_ack_cm_event(e);
    m_events.clear();
    std::vector<std::uint64_t> handles;
    for (auto& [h, id] : m_ids) handles.push_back(h);
    for (auto it = handles.rbegin(); it != handles.rend(); ++it) {
        rdma_cm_id* id = id_of(*it);
        if (id->qp) destroy_qp(id);
        if (id->srq) destroy_srq(id);
        rdma_destroy_id(id);
    }
    m_ids.clear();
    for (auto& [h, c] : m_channels) {
        c->stop = true;
        c->stop_event.notify(sc_core::SC_ZERO_TIME);
        if (c->channel) rdma_destroy_event_channel(c->channel);
        c->channel = nullptr;
    }
}

}  // namespace hcasim::remote
