#include "host/remote/verbs_proxy.hpp"

#include <sys/syscall.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "host/driver/host_thread.hpp"
#include "host/verbs/verbs_abi.hpp"
#include "host/verbs/verbs_internal.hpp"

namespace hcasim::remote {

using verbs::SimChannel;

// A completion channel's eventfd: the watcher counts each event that has
// become ready into it, so the program's poll/epoll/select wakes.
struct VerbsProxy::ChannelFd {
    ibv_comp_channel* channel;
    int fd;
    std::uint64_t signalled = 0;  // counted into fd and not yet taken
    bool stop = false;
    sc_core::sc_event stop_event;
};

namespace {

}  // namespace

void VerbsProxy::count_into(int fd, std::uint64_t n) {
    if (fd < 0 || n == 0) return;
    if (m_touch) m_touch();
    // The eventfd belongs to a program that may have gone: a failed write
    // changes nothing the simulation sees.
    [[maybe_unused]] const ssize_t r = ::write(fd, &n, sizeof n);
}

namespace {

std::uint64_t ptr(const void* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); }

// An SRQ's number (what an XRC sender addresses).
std::uint32_t srq_num(ibv_srq* srq) {
    std::uint32_t n = 0;
    return ibv_get_srq_num(srq, &n) ? 0 : n;
}

// The object an asynchronous event names, or null for a port or device event.
const void* event_object(const ibv_async_event& e) {
    switch (verbs::async_element(e.event_type)) {
    case verbs::AsyncElement::Cq: return e.element.cq;
    case verbs::AsyncElement::Srq: return e.element.srq;
    case verbs::AsyncElement::Qp: return e.element.qp;
    case verbs::AsyncElement::Port: return nullptr;
    }
    return nullptr;
}

}  // namespace

VerbsProxy::VerbsProxy(int pidfd, std::function<void()> touch) : m_pidfd(pidfd), m_touch(std::move(touch)) {}

VerbsProxy::~VerbsProxy() {
    for (auto& [h, c] : m_channels)
        if (c->fd >= 0) ::close(c->fd);
    for (auto& [h, a] : m_async)
        if (a->fd >= 0) ::close(a->fd);
}

bool VerbsProxy::handles(Op op) {
    return (op >= Op::GetDeviceList && op <= Op::Adopt) || (op >= Op::OpenXrcd && op <= Op::CreateQpEx);
}


std::uint64_t VerbsProxy::add(const void* p, Kind kind, std::uint64_t client) {
    m_objects[ptr(p)] = Object{kind, m_next_order++, client};
    return ptr(p);
}

std::uint64_t VerbsProxy::adopt(const void* p, Kind kind) {
    if (!p) return 0;
    auto it = m_objects.find(ptr(p));
    if (it == m_objects.end()) {
        Object o{kind, m_next_order++, 0};
        o.borrowed = true;
        m_objects[ptr(p)] = o;
    }
    return ptr(p);
}

void VerbsProxy::own(const void* p) {
    auto it = p ? m_objects.find(ptr(p)) : m_objects.end();
    if (it != m_objects.end()) it->second.borrowed = false;
}

void VerbsProxy::forget(const void* p) {
    if (!p) return;
    auto c = m_channels.find(ptr(p));
    if (c != m_channels.end()) {
        c->second->stop = true;
        c->second->stop_event.notify(sc_core::SC_ZERO_TIME);
        if (c->second->fd >= 0) ::close(c->second->fd);
        c->second->fd = -1;
    }
    m_objects.erase(ptr(p));
}

void VerbsProxy::remove(const void* p) { m_objects.erase(ptr(p)); }

template <typename T>
int VerbsProxy::destroy(std::uint64_t h, Kind kind, int (*fn)(T*)) {
    T* obj = find<T>(h, kind);
    if (!obj) return EINVAL;
    const int st = fn(obj);
    if (!st) remove(obj);
    return st;
}

void VerbsProxy::share_pages(int remote_fd, std::uint64_t base, std::uint64_t bytes) {
    const int fd = take_fd(remote_fd);
    if (fd < 0) return;
    void* local = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (local == MAP_FAILED) return;  // DMA goes through process_vm_* instead
    std::shared_ptr<std::uint8_t> pages(static_cast<std::uint8_t*>(local),
                                        [bytes](std::uint8_t* p) { munmap(p, bytes); });
    host::current_driver()->hca().pcie().memory().share(host::current_address_space(),
                                                        reinterpret_cast<const void*>(static_cast<std::uintptr_t>(base)),
                                                        bytes, std::move(pages));
}

int VerbsProxy::take_fd(int remote_fd) {
    if (m_pidfd < 0 || remote_fd < 0) return -1;
    return static_cast<int>(syscall(SYS_pidfd_getfd, m_pidfd, remote_fd, 0));
}

void VerbsProxy::watch_channel(ChannelFd& c) {
    sc_core::sc_spawn([this, &c]() {
        host::EventChannel& ch = reinterpret_cast<SimChannel*>(c.channel)->events;
        while (!c.stop) {
            const sim::Tick now = sim::now_ps();
            std::uint64_t ready = 0;
            sim::Tick next = ~sim::Tick(0);
            for (const auto& e : ch.events) {
                if (e.ready_at <= now) ++ready;
                else next = std::min(next, e.ready_at);
            }
            if (ready > c.signalled) {
                count_into(c.fd, ready - c.signalled);
                c.signalled = ready;
            }
            if (next != ~sim::Tick(0)) sc_core::wait(sim::to_sc(next - now), ch.arrived | c.stop_event);
            else sc_core::wait(ch.arrived | c.stop_event);
        }
    });
}

void VerbsProxy::watch_async(ibv_context* ctx, int fd) {
    auto a = std::make_unique<AsyncFd>();
    a->fd = fd;
    AsyncFd& af = *a;
    m_async[ptr(ctx)] = std::move(a);
    host::Driver* d = verbs::drv(ctx);
    sc_core::sc_spawn([this, d, &af]() {
        while (!af.stop) {
            const sim::Tick now = sim::now_ps();
            std::uint64_t ready = 0;
            sim::Tick next = ~sim::Tick(0);
            for (const auto& e : d->pending_async()) {
                if (e.ready_at <= now) ++ready;
                else next = std::min(next, e.ready_at);
            }
            if (ready > af.signalled) {
                count_into(af.fd, ready - af.signalled);
                af.signalled = ready;
            }
            if (next != ~sim::Tick(0)) sc_core::wait(sim::to_sc(next - now), d->async_arrived() | af.stop_event);
            else sc_core::wait(d->async_arrived() | af.stop_event);
        }
    });
}

void VerbsProxy::stop_watchers() {
    for (auto& [h, c] : m_channels) {
        c->stop = true;
        c->stop_event.notify(sc_core::SC_ZERO_TIME);
    }
    for (auto& [h, a] : m_async) {
        a->stop = true;
        a->stop_event.notify(sc_core::SC_ZERO_TIME);
    }
}

void VerbsProxy::execute(Op op, Reader& in, Writer& out) {
    auto status = [&](int st) { out.put(static_cast<std::int32_t>(st)); };
    switch (op) {
    case Op::GetDeviceList: {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        out.put(static_cast<std::uint32_t>(list ? n : 0));
        for (int i = 0; list && i < n; ++i) {
            out.bytes(list[i]->name, sizeof list[i]->name);
            out.bytes(list[i]->dev_name, sizeof list[i]->dev_name);
            out.bytes(list[i]->dev_path, sizeof list[i]->dev_path);
            out.bytes(list[i]->ibdev_path, sizeof list[i]->ibdev_path);
            out.put(ibv_get_device_guid(list[i]));
        }
        if (list) ibv_free_device_list(list);
        return;
    }
    case Op::OpenDevice: {
        const auto index = in.get<std::uint32_t>();
        const auto async_fd = in.get<std::int32_t>();
        if (in.bad()) return status(EINVAL);
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        if (!list || index >= static_cast<std::uint32_t>(n)) {
            if (list) ibv_free_device_list(list);
            return status(ENODEV);
        }
        ibv_context* ctx = ibv_open_device(list[index]);
        ibv_free_device_list(list);
        if (!ctx) return status(errno ? errno : ENOMEM);
        status(0);
        out.put(add(ctx, Kind::Context));
        watch_async(ctx, take_fd(async_fd));
        return;
    }
    case Op::CloseDevice: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        if (!ctx) return status(EINVAL);
        auto a = m_async.find(ptr(ctx));
        if (a != m_async.end()) {
            a->second->stop = true;
            a->second->stop_event.notify(sc_core::SC_ZERO_TIME);
            if (a->second->fd >= 0) ::close(a->second->fd);
            a->second->fd = -1;
        }
        // What the program still holds on the device goes with it, as when
        // it closes the uverbs file (perftest's ib_send_bw leaves its CQs).
        release(ctx);
        const int st = ibv_close_device(ctx);
        if (!st) remove(ctx);
        return status(st);
    }
    case Op::QueryDevice: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        if (!ctx) return status(EINVAL);
        ibv_device_attr a{};
        const int st = ibv_query_device(ctx, &a);
        status(st);
        if (!st) out.put(a);
        return;
    }
    case Op::QueryDeviceEx: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        if (!ctx) return status(EINVAL);
        ibv_device_attr_ex a{};
        const int st = ibv_query_device_ex(ctx, nullptr, &a);
        status(st);
        if (!st) out.put(a);
        return;
    }
    case Op::QueryPort: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        const auto port = in.get<std::uint8_t>();
        if (!ctx) return status(EINVAL);
        ibv_port_attr a{};
        const int st = ibv_query_port(ctx, port, &a);
        status(st);
        if (!st) {
            out.put(std::uint32_t{0});
            out.put(a);
        }
        return;
    }
    case Op::QueryGid: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        const auto port = in.get<std::uint8_t>();
        const auto index = in.get<std::int32_t>();
        if (!ctx) return status(EINVAL);
        ibv_gid gid{};
        if (ibv_query_gid(ctx, port, index, &gid)) return status(errno ? errno : EINVAL);
        status(0);
        out.put(gid);
        return;
    }
    case Op::QueryPkey: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        const auto port = in.get<std::uint8_t>();
        const auto index = in.get<std::int32_t>();
        if (!ctx) return status(EINVAL);
        __be16 pkey = 0;
        if (ibv_query_pkey(ctx, port, index, &pkey)) return status(errno ? errno : EINVAL);
        status(0);
        out.put(pkey);
        return;
    }
    case Op::AllocPd: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        if (!ctx) return status(EINVAL);
        ibv_pd* pd = ibv_alloc_pd(ctx);
        if (!pd) return status(errno ? errno : ENOMEM);
        status(0);
        out.put(add(pd, Kind::Pd));
        out.put(pd->handle);
        return;
    }
    case Op::DeallocPd: return status(destroy<ibv_pd>(in.get<std::uint64_t>(), Kind::Pd, ibv_dealloc_pd));
    case Op::RegMr: {
        auto* pd = find<ibv_pd>(in.get<std::uint64_t>(), Kind::Pd);
        const auto addr = in.get<std::uint64_t>();
        const auto length = in.get<std::uint64_t>();
        const auto iova = in.get<std::uint64_t>();
        const auto access = in.get<std::uint32_t>();
        const auto shared_fd = in.get<std::int32_t>();
        const auto shared_base = in.get<std::uint64_t>();
        const auto shared_bytes = in.get<std::uint64_t>();
        if (!pd || in.bad()) return status(EINVAL);
        if (shared_fd >= 0) share_pages(shared_fd, shared_base, shared_bytes);
        // The address is the program's: the driver pins it in the calling
        // thread's address space, which is the program's.
        ibv_mr* mr = ibv_reg_mr_iova2(pd, reinterpret_cast<void*>(static_cast<std::uintptr_t>(addr)), length, iova,
                                      access);
        if (!mr) return status(errno ? errno : ENOMEM);
        status(0);
        out.put(add(mr, Kind::Mr));
        out.put(mr->handle);
        out.put(mr->lkey);
        out.put(mr->rkey);
        return;
    }
    case Op::DeregMr: return status(destroy<ibv_mr>(in.get<std::uint64_t>(), Kind::Mr, ibv_dereg_mr));
    case Op::CreateCompChannel: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        const auto fd = in.get<std::int32_t>();
        if (!ctx) return status(EINVAL);
        ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
        if (!ch) return status(errno ? errno : ENOMEM);
        const std::uint64_t h = add(ch, Kind::Channel);
        auto c = std::make_unique<ChannelFd>();
        c->channel = ch;
        c->fd = take_fd(fd);
        watch_channel(*c);
        m_channels[h] = std::move(c);
        status(0);
        out.put(h);
        return;
    }
    case Op::DestroyCompChannel: {
        const auto h = in.get<std::uint64_t>();
        auto* ch = find<ibv_comp_channel>(h, Kind::Channel);
        if (!ch) return status(EINVAL);
        const int st = ibv_destroy_comp_channel(ch);
        if (st) return status(st);
        remove(ch);
        auto it = m_channels.find(h);
        if (it != m_channels.end()) {
            // The watcher may still be waiting on it: it stops and the
            // record stays (closed) until the proxy goes.
            it->second->stop = true;
            it->second->stop_event.notify(sc_core::SC_ZERO_TIME);
            if (it->second->fd >= 0) ::close(it->second->fd);
            it->second->fd = -1;
        }
        return status(0);
    }
    case Op::CreateCq: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        const auto cqe = in.get<std::int32_t>();
        const auto ch_h = in.get<std::uint64_t>();
        const auto vector = in.get<std::int32_t>();
        const auto client = in.get<std::uint64_t>();
        ibv_comp_channel* ch = ch_h ? find<ibv_comp_channel>(ch_h, Kind::Channel) : nullptr;
        if (!ctx || in.bad() || (ch_h && !ch)) return status(EINVAL);
        ibv_cq* cq = ibv_create_cq(ctx, cqe, nullptr, ch, vector);
        if (!cq) return status(errno ? errno : ENOMEM);
        status(0);
        out.put(add(cq, Kind::Cq, client));
        out.put(static_cast<std::int32_t>(cq->cqe));
        out.put(cq->handle);
        return;
    }
    case Op::ResizeCq: {
        auto* cq = find<ibv_cq>(in.get<std::uint64_t>(), Kind::Cq);
        const auto cqe = in.get<std::int32_t>();
        if (!cq) return status(EINVAL);
        const int st = ibv_resize_cq(cq, cqe);
        status(st);
        if (!st) out.put(static_cast<std::int32_t>(cq->cqe));
        return;
    }
    case Op::DestroyCq: return status(destroy<ibv_cq>(in.get<std::uint64_t>(), Kind::Cq, ibv_destroy_cq));
    case Op::PollCq: {
        auto* cq = find<ibv_cq>(in.get<std::uint64_t>(), Kind::Cq);
        const auto max = in.get<std::int32_t>();
        if (!cq || max < 0 || static_cast<std::size_t>(max) * sizeof(ibv_wc) + 64 > kSlotBytes) {
            out.put(std::int32_t{-1});
            return;
        }
        std::vector<ibv_wc> wc(static_cast<std::size_t>(std::max(max, 1)));
        const int n = ibv_poll_cq(cq, max, wc.data());
        out.put(static_cast<std::int32_t>(n));
        if (n > 0) out.bytes(wc.data(), sizeof(ibv_wc) * static_cast<std::size_t>(n));
        return;
    }
    case Op::ReqNotifyCq: {
        auto* cq = find<ibv_cq>(in.get<std::uint64_t>(), Kind::Cq);
        const auto solicited = in.get<std::int32_t>();
        if (!cq) return status(EINVAL);
        return status(ibv_req_notify_cq(cq, solicited));
    }
    case Op::GetCqEvent: {
        const auto h = in.get<std::uint64_t>();
        auto* ch = find<ibv_comp_channel>(h, Kind::Channel);
        if (!ch) return status(EINVAL);
        ibv_cq* cq = nullptr;
        void* unused = nullptr;
        if (ibv_get_cq_event(ch, &cq, &unused)) return status(EINVAL);
        auto& c = *m_channels.at(h);
        if (c.signalled) --c.signalled;
        auto it = m_objects.find(ptr(cq));
        status(0);
        out.put(it == m_objects.end() ? std::uint64_t{0} : it->second.client);
        return;
    }
    case Op::AckCqEvents: {
        auto* cq = find<ibv_cq>(in.get<std::uint64_t>(), Kind::Cq);
        const auto n = in.get<std::uint32_t>();
        if (cq) ibv_ack_cq_events(cq, n);
        return;
    }
    case Op::OpenXrcd: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        ibv_xrcd_init_attr a{};
        a.comp_mask = in.get<std::uint32_t>();
        const auto fd = in.get<std::int32_t>();
        a.oflags = in.get<std::int32_t>();
        if (!ctx || in.bad()) return status(EINVAL);
        // The file that names a shared domain is the program's: its own
        // descriptor, taken here, stands for it (a process on the same node
        // opening the same file shares the domain).
        int local = -1;
        if ((a.comp_mask & IBV_XRCD_INIT_ATTR_FD) && fd != -1) {
            local = take_fd(fd);
            if (local < 0) return status(EBADF);
        }
        a.fd = (a.comp_mask & IBV_XRCD_INIT_ATTR_FD) && fd != -1 ? local : fd;
        errno = 0;
        ibv_xrcd* x = ibv_open_xrcd(ctx, &a);
        const int err = errno;
        if (local >= 0) ::close(local);
        if (!x) return status(err ? err : EINVAL);
        status(0);
        out.put(add(x, Kind::Xrcd));
        return;
    }
    case Op::CloseXrcd: return status(destroy<ibv_xrcd>(in.get<std::uint64_t>(), Kind::Xrcd, ibv_close_xrcd));
    case Op::CreateSrqEx: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        ibv_srq_init_attr_ex a{};
        a.comp_mask = in.get<std::uint32_t>();
        a.srq_type = static_cast<ibv_srq_type>(in.get<std::int32_t>());
        const auto pd_h = in.get<std::uint64_t>();
        const auto xrcd_h = in.get<std::uint64_t>();
        const auto cq_h = in.get<std::uint64_t>();
        a.attr = in.get<ibv_srq_attr>();
        const auto client = in.get<std::uint64_t>();
        a.pd = pd_h ? find<ibv_pd>(pd_h, Kind::Pd) : nullptr;
        a.xrcd = xrcd_h ? find<ibv_xrcd>(xrcd_h, Kind::Xrcd) : nullptr;
        a.cq = cq_h ? find<ibv_cq>(cq_h, Kind::Cq) : nullptr;
        if (!ctx || in.bad() || (pd_h && !a.pd) || (xrcd_h && !a.xrcd) || (cq_h && !a.cq)) return status(EINVAL);
        errno = 0;
        ibv_srq* srq = ibv_create_srq_ex(ctx, &a);
        if (!srq) return status(errno ? errno : EINVAL);
        status(0);
        out.put(add(srq, Kind::Srq, client));
        out.put(a.attr);
        out.put(srq->handle);
        out.put(srq_num(srq));
        return;
    }
    case Op::CreateQpEx: {
        auto* ctx = find<ibv_context>(in.get<std::uint64_t>(), Kind::Context);
        ibv_qp_init_attr_ex a{};
        a.comp_mask = in.get<std::uint32_t>();
        const auto pd_h = in.get<std::uint64_t>();
        const auto xrcd_h = in.get<std::uint64_t>();
        const auto scq_h = in.get<std::uint64_t>();
        const auto rcq_h = in.get<std::uint64_t>();
        const auto srq_h = in.get<std::uint64_t>();
        a.cap = in.get<ibv_qp_cap>();
        a.qp_type = static_cast<ibv_qp_type>(in.get<std::int32_t>());
        a.sq_sig_all = in.get<std::int32_t>();
        const auto client = in.get<std::uint64_t>();
        a.pd = pd_h ? find<ibv_pd>(pd_h, Kind::Pd) : nullptr;
        a.xrcd = xrcd_h ? find<ibv_xrcd>(xrcd_h, Kind::Xrcd) : nullptr;
        a.send_cq = scq_h ? find<ibv_cq>(scq_h, Kind::Cq) : nullptr;
        a.recv_cq = rcq_h ? find<ibv_cq>(rcq_h, Kind::Cq) : nullptr;
        a.srq = srq_h ? find<ibv_srq>(srq_h, Kind::Srq) : nullptr;
        if (!ctx || in.bad() || (pd_h && !a.pd) || (xrcd_h && !a.xrcd) || (scq_h && !a.send_cq) ||
            (rcq_h && !a.recv_cq) || (srq_h && !a.srq))
            return status(EINVAL);
        // Extended send operations need an ibv_qp_ex the program's library
        // does not offer: refused there, and here too.
        if (a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) return status(EOPNOTSUPP);
        errno = 0;
        ibv_qp* qp = ibv_create_qp_ex(ctx, &a);
        if (!qp) return status(errno ? errno : EINVAL);
        status(0);
        out.put(add(qp, Kind::Qp, client));
        out.put(qp->qp_num);
        out.put(qp->handle);
        out.put(a.cap);
        return;
    }
    case Op::ModifySrq: {
        auto* srq = find<ibv_srq>(in.get<std::uint64_t>(), Kind::Srq);
        auto attr = in.get<ibv_srq_attr>();
        const auto mask = in.get<std::int32_t>();
        if (!srq || in.bad()) return status(EINVAL);
        return status(ibv_modify_srq(srq, &attr, mask));
    }
    case Op::QuerySrq: {
        auto* srq = find<ibv_srq>(in.get<std::uint64_t>(), Kind::Srq);
        if (!srq) return status(EINVAL);
        ibv_srq_attr a{};
        const int st = ibv_query_srq(srq, &a);
        status(st);
        if (!st) out.put(a);
        return;
    }
    case Op::DestroySrq: return status(destroy<ibv_srq>(in.get<std::uint64_t>(), Kind::Srq, ibv_destroy_srq));
    case Op::ModifyQp: {
        auto* qp = find<ibv_qp>(in.get<std::uint64_t>(), Kind::Qp);
        auto attr = in.get<ibv_qp_attr>();
        const auto mask = in.get<std::int32_t>();
        if (!qp || in.bad()) return status(EINVAL);
        return status(ibv_modify_qp(qp, &attr, mask));
    }
    case Op::QueryQp: {
        auto* qp = find<ibv_qp>(in.get<std::uint64_t>(), Kind::Qp);
        const auto mask = in.get<std::int32_t>();
        if (!qp) return status(EINVAL);
        ibv_qp_attr a{};
        ibv_qp_init_attr init{};
        const int st = ibv_query_qp(qp, &a, mask, &init);
        status(st);
        if (!st) {
            out.put(a);
            out.put(init.cap);
        }
        return;
    }
    case Op::DestroyQp: return status(destroy<ibv_qp>(in.get<std::uint64_t>(), Kind::Qp, ibv_destroy_qp));
    case Op::PostSend: {
        auto* qp = find<ibv_qp>(in.get<std::uint64_t>(), Kind::Qp);
        const auto count = in.get<std::uint32_t>();
        std::vector<ibv_send_wr> wrs(count);
        std::vector<std::vector<ibv_sge>> sges(count);
        bool bad = !qp || count > kSlotBytes / sizeof(ibv_send_wr);
        for (std::uint32_t i = 0; i < count && !bad; ++i) {
            ibv_send_wr& w = wrs[i];
            w = in.get<ibv_send_wr>();
            const auto ah_h = in.get<std::uint64_t>();
            if (qp->qp_type == IBV_QPT_UD) {
                w.wr.ud.ah = find<ibv_ah>(ah_h, Kind::Ah);
                if (!w.wr.ud.ah) bad = true;
            }
            if (w.num_sge < 0 || static_cast<std::size_t>(w.num_sge) > kSlotBytes / sizeof(ibv_sge)) {
                bad = true;
                break;
            }
            auto& s = sges[i];
            s.resize(static_cast<std::size_t>(w.num_sge));
            for (auto& g : s) g = in.get<ibv_sge>();
            if (w.send_flags & IBV_SEND_INLINE) {
                // The inline bytes came by value: point the gather list at them.
                for (auto& g : s) {
                    const std::uint8_t* p = in.view(g.length);
                    g.addr = ptr(p);
                }
            }
            w.sg_list = s.empty() ? nullptr : s.data();
            w.next = i + 1 < count ? &wrs[i + 1] : nullptr;
            if (in.bad()) bad = true;
        }
        if (bad) {
            status(EINVAL);
            out.put(std::uint32_t{0});
            return;
        }
        ibv_send_wr* bad_wr = nullptr;
        const int st = count ? ibv_post_send(qp, wrs.data(), &bad_wr) : 0;
        status(st);
        out.put(static_cast<std::uint32_t>(bad_wr ? bad_wr - wrs.data() : 0));
        return;
    }
    case Op::PostRecv:
    case Op::PostSrqRecv: {
        const auto h = in.get<std::uint64_t>();
        auto* qp = op == Op::PostRecv ? find<ibv_qp>(h, Kind::Qp) : nullptr;
        auto* srq = op == Op::PostSrqRecv ? find<ibv_srq>(h, Kind::Srq) : nullptr;
        const auto count = in.get<std::uint32_t>();
        std::vector<ibv_recv_wr> wrs(count);
        std::vector<std::vector<ibv_sge>> sges(count);
        bool bad = (!qp && !srq) || count > kSlotBytes / sizeof(ibv_recv_wr);
        for (std::uint32_t i = 0; i < count && !bad; ++i) {
            ibv_recv_wr& w = wrs[i];
            w = in.get<ibv_recv_wr>();
            if (w.num_sge < 0 || static_cast<std::size_t>(w.num_sge) > kSlotBytes / sizeof(ibv_sge)) {
                bad = true;
                break;
            }
            auto& s = sges[i];
            s.resize(static_cast<std::size_t>(w.num_sge));
            for (auto& g : s) g = in.get<ibv_sge>();
            w.sg_list = s.empty() ? nullptr : s.data();
            w.next = i + 1 < count ? &wrs[i + 1] : nullptr;
            if (in.bad()) bad = true;
        }
        if (bad) {
            status(EINVAL);
            out.put(std::uint32_t{0});
            return;
        }
        ibv_recv_wr* bad_wr = nullptr;
        int st = 0;
        if (count) st = qp ? ibv_post_recv(qp, wrs.data(), &bad_wr) : ibv_post_srq_recv(srq, wrs.data(), &bad_wr);
        status(st);
        out.put(static_cast<std::uint32_t>(bad_wr ? bad_wr - wrs.data() : 0));
        return;
    }
    case Op::CreateAh: {
        auto* pd = find<ibv_pd>(in.get<std::uint64_t>(), Kind::Pd);
        auto attr = in.get<ibv_ah_attr>();
        if (!pd || in.bad()) return status(EINVAL);
        ibv_ah* ah = ibv_create_ah(pd, &attr);
        if (!ah) return status(errno ? errno : EINVAL);
        status(0);
        out.put(add(ah, Kind::Ah));
        out.put(ah->handle);
        return;
    }
    case Op::DestroyAh: return status(destroy<ibv_ah>(in.get<std::uint64_t>(), Kind::Ah, ibv_destroy_ah));
    case Op::AttachMcast:
    case Op::DetachMcast: {
        auto* qp = find<ibv_qp>(in.get<std::uint64_t>(), Kind::Qp);
        const auto gid = in.get<ibv_gid>();
        const auto lid = in.get<std::uint16_t>();
        if (!qp || in.bad()) return status(EINVAL);
        return status(op == Op::AttachMcast ? ibv_attach_mcast(qp, &gid, lid) : ibv_detach_mcast(qp, &gid, lid));
    }
    case Op::GetAsyncEvent: {
        const auto h = in.get<std::uint64_t>();
        auto* ctx = find<ibv_context>(h, Kind::Context);
        if (!ctx) return status(EINVAL);
        ibv_async_event e{};
        if (ibv_get_async_event(ctx, &e)) return status(EIO);
        auto a = m_async.find(h);
        if (a != m_async.end() && a->second->signalled) --a->second->signalled;
        // The element: the program's own object, or the port number.
        std::uint64_t element = 0;
        auto client_of = [&](const void* p) {
            auto it = m_objects.find(ptr(p));
            return it == m_objects.end() ? std::uint64_t{0} : it->second.client;
        };
        const void* object = event_object(e);
        element = object ? client_of(object) : static_cast<std::uint64_t>(e.element.port_num);
        // Kept until the program acknowledges it (by the element's handle).
        m_unacked.push_back(e);
        status(0);
        out.put(static_cast<std::int32_t>(e.event_type));
        out.put(element);
        return;
    }
    case Op::AckAsyncEvent: {
        const auto type = in.get<std::int32_t>();
        const auto element = in.get<std::uint64_t>();
        // The oldest unacknowledged event of that type on that element.
        for (auto it = m_unacked.begin(); it != m_unacked.end(); ++it) {
            if (it->event_type != type) continue;
            const void* p = event_object(*it);
            if (p && ptr(p) != element) continue;
            ibv_ack_async_event(&*it);
            m_unacked.erase(it);
            break;
        }
        return;
    }
    case Op::Adopt: {
        const auto kind = static_cast<AdoptKind>(in.get<std::uint32_t>());
        const auto h = in.get<std::uint64_t>();
        const auto client = in.get<std::uint64_t>();
        const auto fd = in.get<std::int32_t>();
        auto it = m_objects.find(h);
        const Kind want = kind == AdoptKind::Context ? Kind::Context : kind == AdoptKind::Pd ? Kind::Pd
                        : kind == AdoptKind::Channel ? Kind::Channel : kind == AdoptKind::Cq ? Kind::Cq
                        : kind == AdoptKind::Srq ? Kind::Srq : Kind::Qp;
        if (in.bad() || it == m_objects.end() || it->second.kind != want) return status(EINVAL);
        it->second.client = client;
        if (kind == AdoptKind::Channel && !m_channels.count(h)) {
            auto c = std::make_unique<ChannelFd>();
            c->channel = reinterpret_cast<ibv_comp_channel*>(static_cast<std::uintptr_t>(h));
            c->fd = take_fd(fd);
            watch_channel(*c);
            m_channels[h] = std::move(c);
        }
        if (kind == AdoptKind::Context && !m_async.count(h))
            watch_async(reinterpret_cast<ibv_context*>(static_cast<std::uintptr_t>(h)), take_fd(fd));
        return status(0);
    }
    default: status(ENOSYS); return;
    }
}

void VerbsProxy::release_all() {
    stop_watchers();
    release(nullptr);
}

namespace {

ibv_context* context_of(VerbsProxy::Kind k, void* p) {
    switch (k) {
    case VerbsProxy::Kind::Qp: return static_cast<ibv_qp*>(p)->context;
    case VerbsProxy::Kind::Srq: return static_cast<ibv_srq*>(p)->context;
    case VerbsProxy::Kind::Ah: return static_cast<ibv_ah*>(p)->context;
    case VerbsProxy::Kind::Cq: return static_cast<ibv_cq*>(p)->context;
    case VerbsProxy::Kind::Mr: return static_cast<ibv_mr*>(p)->context;
    case VerbsProxy::Kind::Pd: return static_cast<ibv_pd*>(p)->context;
    case VerbsProxy::Kind::Xrcd: return static_cast<ibv_xrcd*>(p)->context;
    case VerbsProxy::Kind::Channel: return static_cast<ibv_comp_channel*>(p)->context;
    case VerbsProxy::Kind::Context: return static_cast<ibv_context*>(p);
    }
    return nullptr;
}

}  // namespace

void VerbsProxy::release(const ibv_context* ctx) {
    auto ours = [&](Kind k, std::uint64_t h) {
        return !ctx || context_of(k, reinterpret_cast<void*>(static_cast<std::uintptr_t>(h))) == ctx;
    };
    // Events the program took and never acknowledged: acknowledged now, as
    // closing the uverbs file does, so that destroying their objects does not wait.
    for (auto it = m_unacked.begin(); it != m_unacked.end();) {
        const void* object = event_object(*it);
        const auto o = object ? m_objects.find(ptr(object)) : m_objects.end();
        if (ctx && (o == m_objects.end() || !ours(o->second.kind, o->first))) {
            ++it;
            continue;
        }
        ibv_ack_async_event(&*it);
        it = m_unacked.erase(it);
    }
    std::vector<std::pair<std::uint64_t, Object>> objs(m_objects.begin(), m_objects.end());
    const Kind order[] = {Kind::Qp, Kind::Srq,  Kind::Ah,      Kind::Cq,     Kind::Mr,
                          Kind::Pd, Kind::Xrcd, Kind::Channel, Kind::Context};
    for (Kind k : order) {
        if (ctx && k == Kind::Context) break;  // the caller closes it
        std::vector<std::pair<std::uint64_t, Object>> of;
        for (auto& o : objs)
            if (o.second.kind == k && !o.second.borrowed && ours(k, o.first)) of.push_back(o);
        std::sort(of.begin(), of.end(), [](const auto& a, const auto& b) { return a.second.order > b.second.order; });
        for (auto& [h, o] : of) {
            void* p = reinterpret_cast<void*>(static_cast<std::uintptr_t>(h));
            switch (k) {
            case Kind::Qp: ibv_destroy_qp(static_cast<ibv_qp*>(p)); break;
            case Kind::Srq: ibv_destroy_srq(static_cast<ibv_srq*>(p)); break;
            case Kind::Ah: ibv_destroy_ah(static_cast<ibv_ah*>(p)); break;
            case Kind::Cq: {
                auto* cq = static_cast<ibv_cq*>(p);
                // Events delivered and never acknowledged: acknowledged now.
                cq->comp_events_completed = static_cast<std::uint32_t>(verbs::sim(cq)->dcq->events_delivered);
                ibv_destroy_cq(cq);
                break;
            }
            case Kind::Mr: ibv_dereg_mr(static_cast<ibv_mr*>(p)); break;
            case Kind::Pd: ibv_dealloc_pd(static_cast<ibv_pd*>(p)); break;
            case Kind::Xrcd: ibv_close_xrcd(static_cast<ibv_xrcd*>(p)); break;
            case Kind::Channel:
                if (ctx) forget(p);  // its watcher stops and its fd closes
                ibv_destroy_comp_channel(static_cast<ibv_comp_channel*>(p));
                break;
            case Kind::Context: ibv_close_device(static_cast<ibv_context*>(p)); break;
            }
            m_objects.erase(h);
        }
    }
}

}  // namespace hcasim::remote
