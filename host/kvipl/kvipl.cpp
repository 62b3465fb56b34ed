// The KVIPL personality: the Kernel VI Provider Library on the driver core.
// Handles are provider objects; VIs are adapter QPs in descriptor mode, so
// posting links the consumer's descriptor into the queue's chain and rings a
// doorbell, and completion is the Done bit the adapter DMA-writes into the
// descriptor. Wait objects are kernel events signaled from the interrupt
// handlers; connections go through the adapter firmware's CM agent.
#include "host/kvipl/kvipl.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <type_traits>
#include <vector>

#include "host/driver/driver.hpp"
#include "host/driver/host_thread.hpp"

using hcasim::firmware::CmResult;
using hcasim::firmware::ViEndpoint;
using hcasim::host::Driver;
using hcasim::host::DriverCq;
using hcasim::host::DriverQp;
namespace hca = hcasim::hca;
namespace sim = hcasim::sim;
namespace packet = hcasim::packet;

// The adapter reads the very descriptor layout this header gives consumers.
static_assert(sizeof(KVIP_CONTROL_SEGMENT) == sizeof(hca::ViCtrlSeg), "control segment layout");
static_assert(offsetof(KVIP_CONTROL_SEGMENT, Status) == offsetof(hca::ViCtrlSeg, status), "status offset");
static_assert(offsetof(KVIP_CONTROL_SEGMENT, ImmediateData) == hca::kViWritebackOffset, "write-back offset");
static_assert(sizeof(KVIP_DATA_SEGMENT) == sizeof(hca::ViSeg), "data segment layout");
static_assert(sizeof(KVIP_ADDRESS_SEGMENT) == sizeof(hca::ViSeg), "address segment layout");
static_assert(KVIP_STATUS_DONE == hca::kViStatusDone && KVIP_STATUS_DESC_FLUSHED_ERROR == hca::kViStatusFlushed,
              "status bits");

namespace {

constexpr std::uint64_t kPage = 4096;
const wchar_t* const kDeviceName = L"hcasim0";
constexpr std::size_t kMaxAddressBytes = packet::kCmMaxAddressBytes;

struct Provider;

struct Posted {
    KVIP_DESCRIPTOR* desc;
    KVIP_MEM_HANDLE handle;
};

}  // namespace

struct _VIP_NIC {
    Provider* prov = nullptr;
    KVIP_WAIT_OBJECT* err_wait = nullptr;
    bool err_armed = true;
    std::deque<KVIP_ERROR_DESCRIPTOR> errors;
    KVIP_UCHAR address[2] = {};
};

struct _VIP_PTAG {
    _VIP_NIC* nic = nullptr;
    std::uint32_t pdn = 0;
};

struct _VIP_CQ {
    _VIP_NIC* nic = nullptr;
    DriverCq* cq = nullptr;
    KVIP_WAIT_OBJECT* wait = nullptr;
};

struct _VIP_VI {
    _VIP_NIC* nic = nullptr;
    DriverQp* qp = nullptr;
    KVIP_VI_ATTRIBUTES attr{};
    _VIP_CQ* scq = nullptr;
    _VIP_CQ* rcq = nullptr;
    KVIP_WAIT_OBJECT* swait = nullptr;
    KVIP_WAIT_OBJECT* rwait = nullptr;
    KVIP_VI_STATE state = KVIP_STATE_IDLE;
    bool peer = false;  // the pending connection is peer-to-peer
    std::deque<Posted> sq, rq;
    KVIP_PVOID context = nullptr;
    bool has_context = false;
    // Where the last Kvip*Done call on each queue (send, receive) that found
    // nothing ended, and on which thread: a call right there spins.
    hcasim::sim::Tick empty_poll_end[2] = {~hcasim::sim::Tick(0), ~hcasim::sim::Tick(0)};
    const sc_core::sc_process_b* empty_poll_thread[2] = {nullptr, nullptr};
};

namespace {

struct Conn {
    _VIP_NIC* nic;
    std::uint32_t id;
};

struct Region {
    _VIP_NIC* nic;
    std::uint64_t va;  // what the consumer registered (0 for physical pages)
    bool phys;
};

// The provider of one simulated host: every KVIPL object of that host.
struct Provider {
    Driver* drv = nullptr;
    std::vector<std::unique_ptr<_VIP_NIC>> nics;
    std::vector<std::unique_ptr<_VIP_PTAG>> ptags;
    std::vector<std::unique_ptr<_VIP_CQ>> cqs;
    std::vector<std::unique_ptr<_VIP_VI>> vis;
    std::vector<std::unique_ptr<Conn>> conns;
    std::map<std::uint32_t, Region> regions;  // by memory handle

    _VIP_VI* vi_of(std::uint32_t qpn) {
        for (auto& v : vis)
            if (v->qp->qpn == qpn) return v.get();
        return nullptr;
    }
    _VIP_CQ* cq_of(std::uint32_t cqn) {
        for (auto& c : cqs)
            if (c->cq->cqn == cqn) return c.get();
        return nullptr;
    }
    _VIP_PTAG* ptag_of(std::uint32_t pdn) {
        for (auto& p : ptags)
            if (p->pdn == pdn) return p.get();
        return nullptr;
    }
    bool owns(const _VIP_PTAG* p) const {
        return p && std::any_of(ptags.begin(), ptags.end(), [&](const auto& q) { return q.get() == p; });
    }
};

void report(_VIP_NIC* nic, const KVIP_ERROR_DESCRIPTOR& e) {
    nic->errors.push_back(e);
    if (nic->err_wait && nic->err_armed) {
        nic->err_armed = false;
        KeSetEvent(nic->err_wait);
    }
}

KVIP_ERROR_CODE error_code(hca::AsyncEventType t) {
    switch (t) {
    case hca::AsyncEventType::ViPostDescriptor: return KVIP_ERROR_POST_DESC;
    case hca::AsyncEventType::ViConnectionLost: return KVIP_ERROR_CONN_LOST;
    case hca::AsyncEventType::ViRecvQueueEmpty: return KVIP_ERROR_RECVQ_EMPTY;
    case hca::AsyncEventType::ViOverrun: return KVIP_ERROR_VI_OVERRUN;
    case hca::AsyncEventType::ViRdmaWriteProtection: return KVIP_ERROR_RDMAW_PROT;
    case hca::AsyncEventType::ViRdmaReadProtection: return KVIP_ERROR_RDMAR_PROT;
    case hca::AsyncEventType::ViCompletionProtection:
    case hca::AsyncEventType::CqError: return KVIP_ERROR_COMP_PROT;
    case hca::AsyncEventType::ViRdmaTransport: return KVIP_ERROR_RDMA_TRANSPORT;
    default: return KVIP_ERROR_CATASTROPHIC;
    }
}

// The adapter's asynchronous errors, turned into error descriptors of the
// NIC handle that owns the resource.
void on_async(Provider& prov, const hca::AsyncEvent& e) {
    KVIP_ERROR_DESCRIPTOR d{};
    d.ErrorCode = static_cast<VIP_ERROR_CODE>(error_code(e.type));
    if (e.type == hca::AsyncEventType::Catastrophic) {
        d.ResourceCode = VIP_RESOURCE_NIC;
        for (auto& v : prov.vis) v->state = KVIP_STATE_ERROR;
        for (auto& n : prov.nics) {
            d.NicHandle = n.get();
            report(n.get(), d);
        }
        return;
    }
    if (e.type == hca::AsyncEventType::CqError) {
        _VIP_CQ* cq = prov.cq_of(e.number);
        if (!cq) return;
        // The CQ became unusable: an error for every VI completing to it.
        for (auto& v : prov.vis) {
            if (v->scq != cq && v->rcq != cq) continue;
            d.NicHandle = v->nic;
            d.ViHandle = v.get();
            d.CQHandle = cq;
            d.ResourceCode = VIP_RESOURCE_CQ;
            report(v->nic, d);
        }
        return;
    }
    _VIP_VI* vi = prov.vi_of(e.number);
    if (!vi) return;
    d.NicHandle = vi->nic;
    d.ViHandle = vi;
    d.DescriptorPtr = reinterpret_cast<VIP_DESCRIPTOR*>(static_cast<std::uintptr_t>(e.desc_addr));
    d.OpCode = e.vi_op;
    d.ResourceCode = (e.type == hca::AsyncEventType::ViPostDescriptor ||
                      e.type == hca::AsyncEventType::ViCompletionProtection)
                         ? VIP_RESOURCE_DESCRIPTOR
                         : VIP_RESOURCE_VI;
    // The erroneous VI is in the error state unless the error left it
    // connected (an unreliable VI losing a message).
    const hca::QpContext* hw = prov.drv->hca().qp(vi->qp->qpn);
    if (hw && hw->qpc.state == hca::QpState::Err) vi->state = KVIP_STATE_ERROR;
    report(vi->nic, d);
}

Provider& provider_of(Driver* d) {
    if (!d->kvipl_provider) {
        auto prov = std::make_shared<Provider>();
        prov->drv = d;
        Provider* p = prov.get();
        d->kvipl_provider = prov;
        d->on_vi_async = [p](const hca::AsyncEvent& e) { on_async(*p, e); };
        d->on_vi_queue = [p](std::uint32_t qpn, bool recv) {
            _VIP_VI* vi = p->vi_of(qpn);
            if (!vi) return;
            if (KVIP_WAIT_OBJECT* w = recv ? vi->rwait : vi->swait) KeSetEvent(w);
        };
    }
    return *static_cast<Provider*>(d->kvipl_provider.get());
}

bool host_matches(const _VIP_NIC* nic, const KVIP_NET_ADDRESS* a) {
    return a && a->HostAddressLen == 2 && a->HostAddress[0] == nic->address[0] && a->HostAddress[1] == nic->address[1];
}

bool address_ok(const KVIP_NET_ADDRESS* a) {
    return a && a->HostAddressLen == 2 && static_cast<std::size_t>(a->HostAddressLen) + a->DiscriminatorLen <= kMaxAddressBytes;
}

packet::CmNetAddress to_cm(const KVIP_NET_ADDRESS* a) {
    packet::CmNetAddress c;
    c.host.assign(a->HostAddress, a->HostAddress + a->HostAddressLen);
    c.discriminator.assign(a->HostAddress + a->HostAddressLen, a->HostAddress + a->HostAddressLen + a->DiscriminatorLen);
    return c;
}

void from_cm(const packet::CmNetAddress& c, KVIP_NET_ADDRESS* a) {
    a->HostAddressLen = static_cast<KVIP_USHORT>(c.host.size());
    a->DiscriminatorLen = static_cast<KVIP_USHORT>(c.discriminator.size());
    std::memcpy(a->HostAddress, c.host.data(), c.host.size());
    std::memcpy(a->HostAddress + c.host.size(), c.discriminator.data(), c.discriminator.size());
}

std::uint8_t qos_level(KVIP_QOS q) { return static_cast<std::uint8_t>(reinterpret_cast<std::uintptr_t>(q)); }

ViEndpoint endpoint(const _VIP_VI* vi) {
    ViEndpoint e;
    e.qpn = vi->qp->qpn;
    e.reliability = vi->attr.ReliabilityLevel;
    e.max_transfer = vi->attr.MaxTransferSize;
    e.qos = qos_level(vi->attr.QoS);
    e.rdma_write = vi->attr.EnableRdmaWrite;
    e.rdma_read = vi->attr.EnableRdmaRead;
    return e;
}

void to_attributes(const ViEndpoint& e, KVIP_VI_ATTRIBUTES* a) {
    if (!a) return;
    std::memset(a, 0, sizeof *a);
    a->ReliabilityLevel = e.reliability;
    a->MaxTransferSize = e.max_transfer;
    a->QoS = reinterpret_cast<KVIP_QOS>(static_cast<std::uintptr_t>(e.qos));
    a->EnableRdmaWrite = e.rdma_write;
    a->EnableRdmaRead = e.rdma_read;
}

KVIP_RETURN from_cm(CmResult r) {
    switch (r) {
    case CmResult::Pending: return KVIP_NOT_DONE;
    case CmResult::Success: return KVIP_SUCCESS;
    case CmResult::Timeout: return KVIP_TIMEOUT;
    case CmResult::Reject: return KVIP_REJECT;
    case CmResult::NoMatch: return KVIP_NO_MATCH;
    case CmResult::NotReachable: return KVIP_NOT_REACHABLE;
    case CmResult::InvalidReliability: return KVIP_INVALID_RELIABILITY_LEVEL;
    case CmResult::InvalidMtu: return KVIP_INVALID_MTU;
    case CmResult::InvalidQos: return KVIP_INVALID_QOS;
    case CmResult::InvalidState: return KVIP_INVALID_STATE;
    }
    return KVIP_ERROR_RESOURCE;
}

sim::Tick timeout_ps(KVIP_ULONG ms) {
    return ms == KVIP_INFINITE ? 0 : static_cast<sim::Tick>(ms) * 1000 * sim::kPsPerUs;
}

// The checks KvipCreateVi and KvipSetViAttributes share.
KVIP_RETURN check_attributes(_VIP_NIC* nic, const KVIP_VI_ATTRIBUTES* a) {
    const hca::HcaParams& p = nic->prov->drv->hca().params();
    const auto r = a->ReliabilityLevel;
    if (r != KVIP_SERVICE_UNRELIABLE && r != KVIP_SERVICE_RELIABLE_DELIVERY && r != KVIP_SERVICE_RELIABLE_RECEPTION)
        return KVIP_INVALID_RELIABILITY_LEVEL;
    if (a->MaxTransferSize == 0 || a->MaxTransferSize > p.vi_max_transfer) return KVIP_INVALID_MTU;
    if (reinterpret_cast<std::uintptr_t>(a->QoS) > 15) return KVIP_INVALID_QOS;
    if (!nic->prov->owns(a->Ptag)) return KVIP_INVALID_PTAG;
    if (a->EnableRdmaRead && (!p.vi_rdma_read || r == KVIP_SERVICE_UNRELIABLE)) return KVIP_INVALID_RDMA_READ;
    return KVIP_SUCCESS;
}

Driver::ViConfig vi_config(const KVIP_VI_ATTRIBUTES* a) {
    Driver::ViConfig c;
    c.pdn = a->Ptag->pdn;
    c.reliability = static_cast<hca::ViReliability>(a->ReliabilityLevel);
    c.max_transfer = a->MaxTransferSize;
    c.access = hca::kLocalWrite | (a->EnableRdmaWrite ? hca::kRemoteWrite : 0u) | (a->EnableRdmaRead ? hca::kRemoteRead : 0u);
    c.sl = qos_level(a->QoS);
    return c;
}

std::uint32_t mem_access(const KVIP_MEM_ATTRIBUTES* a) {
    return hca::kLocalWrite | (a->EnableRdmaWrite ? hca::kRemoteWrite : 0u) | (a->EnableRdmaRead ? hca::kRemoteRead : 0u);
}

KVIP_RETURN check_mem_attributes(_VIP_NIC* nic, const KVIP_MEM_ATTRIBUTES* a) {
    if (!nic->prov->owns(a->Ptag)) return KVIP_INVALID_PTAG;
    if (a->EnableRdmaRead && !nic->prov->drv->hca().params().vi_rdma_read) return KVIP_INVALID_RDMA_READ;
    return KVIP_SUCCESS;
}

template <typename T>
void erase_owned(std::vector<std::unique_ptr<T>>& v, const T* p) {
    v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& q) { return q.get() == p; }), v.end());
}

KVIP_RETURN post(_VIP_VI* vi, bool recv, KVIP_DESCRIPTOR* desc, KVIP_MEM_HANDLE handle) {
    std::deque<Posted>& q = recv ? vi->rq : vi->sq;
    // Link the descriptor behind the queue's tail, then ring its doorbell.
    desc->CS.Next.AddressBits = 0;
    desc->CS.NextHandle = 0;
    desc->CS.Status = 0;
    desc->CS.Length = recv ? 0 : desc->CS.Length;
    const bool chain_start = q.empty();
    if (!chain_start) {
        q.back().desc->CS.Next.Address = desc;
        q.back().desc->CS.NextHandle = handle;
    }
    q.push_back({desc, handle});
    vi->nic->prov->drv->post_vi_descriptor(*vi->qp, recv, reinterpret_cast<std::uintptr_t>(desc), handle, chain_start);
    return KVIP_SUCCESS;
}

KVIP_RETURN done(_VIP_VI* vi, bool recv, KVIP_DESCRIPTOR** out) {
    Driver* d = vi->nic->prov->drv;
    const sim::Tick t0 = sim::now_ps();
    // As Driver::poll_cq: only a call made the instant the last one on this
    // queue found nothing, by the same thread, may stand for a run of them.
    const sc_core::sc_process_b* thread = sc_core::sc_get_current_process_b();
    const bool spinning = vi->empty_poll_end[recv] == t0 && vi->empty_poll_thread[recv] == thread;
    hcasim::host::spend_cpu(d->costs().poll_cq);
    std::deque<Posted>& q = recv ? vi->rq : vi->sq;
    if (q.empty()) {
        if (out) *out = nullptr;
        return KVIP_DESCRIPTOR_ERROR;
    }
    KVIP_DESCRIPTOR* head = q.front().desc;
    const hcasim::pcie::HostMemory& memory = d->hca().pcie().memory();
    // The adapter DMA-writes Status: read it as the CPU would, and not
    // before the instant after the write (HostMemory::wrote_now).
    auto status_now = [&]() -> KVIP_ULONG {
        const KVIP_ULONG status = *static_cast<volatile KVIP_ULONG*>(&head->CS.Status);
        if (!(status & KVIP_STATUS_DONE) || memory.wrote_now(&head->CS.Status, sizeof status)) return 0;
        return status;
    };
    KVIP_ULONG status = status_now();
    const sim::Tick cost = d->costs().poll_cq;
    if (!status && spinning && d->costs().poll_fast_forward && cost > 0) {
        // Sleep through the calls that cannot see a change, on their grid.
        const sim::Tick horizon = t0 + d->costs().poll_horizon;
        while (!status && sim::now_ps() + cost <= horizon) {
            hcasim::host::sleep_to_next_useful_read(memory, t0, cost, horizon);
            status = status_now();
        }
    }
    if (!status) {
        vi->empty_poll_end[recv] = sim::now_ps();
        vi->empty_poll_thread[recv] = thread;
        return KVIP_NOT_DONE;
    }
    vi->empty_poll_end[recv] = ~sim::Tick(0);
    q.pop_front();
    if (out) *out = head;
    return (status & KVIP_STATUS_ERROR_MASK) ? KVIP_DESCRIPTOR_ERROR : KVIP_SUCCESS;
}

}  // namespace

extern "C" {

// ---- 3.1 Hardware connection ----------------------------------------------

KVIP_RETURN KvipOpenNic(const KVIP_WCHAR* DeviceName, KVIP_WAIT_OBJECT* ErrorNotificationWaitObject,
                        KVIP_NIC_HANDLE* NicHandle) {
    Driver* d = hcasim::host::current_driver();
    if (!DeviceName || !NicHandle || !d || std::wcscmp(DeviceName, kDeviceName) != 0) return KVIP_INVALID_PARAMETER;
    d->control_call();
    Provider& p = provider_of(d);
    auto nic = std::make_unique<_VIP_NIC>();
    nic->prov = &p;
    nic->err_wait = ErrorNotificationWaitObject;
    nic->address[0] = static_cast<KVIP_UCHAR>(d->info().lid >> 8);
    nic->address[1] = static_cast<KVIP_UCHAR>(d->info().lid);
    *NicHandle = nic.get();
    p.nics.push_back(std::move(nic));
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipCloseNic(KVIP_NIC_HANDLE NicHandle) {
    Provider& p = *NicHandle->prov;
    Driver* d = p.drv;
    d->control_call();
    // Everything the NIC handle created goes with it, each with its own
    // teardown. It leaves the provider's tables first: a teardown waits for
    // the adapter, and another thread may close its own NIC handle meanwhile.
    auto release = [NicHandle](auto& owned, auto owner_of, auto teardown) {
        std::remove_reference_t<decltype(owned)> mine;
        for (auto it = owned.begin(); it != owned.end();) {
            if (owner_of(*it) != NicHandle) {
                ++it;
                continue;
            }
            mine.insert(mine.end(), std::move(*it));
            it = owned.erase(it);
        }
        for (const auto& o : mine) teardown(o);
    };
    auto nic_of = [](const auto& o) { return o->nic; };
    release(p.vis, nic_of, [d](const auto& vi) {
        d->cm()->cancel(vi->qp->qpn);
        d->cm()->disconnect(vi->qp->qpn);
        d->reset_vi(*vi->qp);
        d->destroy_vi(vi->qp);
    });
    release(p.conns, nic_of, [d](const auto& c) { d->cm()->forget(c->id); });
    release(p.cqs, nic_of, [d](const auto& cq) { d->destroy_cq(cq->cq); });
    release(p.regions, [](const auto& r) { return r.second.nic; }, [d](const auto& r) { d->dereg_mr(r.first); });
    release(p.ptags, nic_of, [d](const auto& t) { d->dealloc_pd(t->pdn); });
    erase_owned(p.nics, static_cast<const _VIP_NIC*>(NicHandle));
    return KVIP_SUCCESS;
}

// ---- 3.2 Endpoint creation and destruction --------------------------------

KVIP_RETURN KvipCreateVi(KVIP_NIC_HANDLE NicHandle, KVIP_VI_ATTRIBUTES* ViAttribs, KVIP_CQ_HANDLE SendCQHandle,
                         KVIP_CQ_HANDLE RecvCQHandle, KVIP_WAIT_OBJECT* SendWaitObject,
                         KVIP_WAIT_OBJECT* RecvWaitObject, KVIP_VI_HANDLE* ViHandle) {
    if (!ViAttribs || !ViHandle) return KVIP_INVALID_PARAMETER;
    // A queue completes either to a CQ or to its own wait object.
    if ((SendCQHandle && SendWaitObject) || (RecvCQHandle && RecvWaitObject)) return KVIP_INVALID_PARAMETER;
    Provider& p = *NicHandle->prov;
    const KVIP_RETURN bad = check_attributes(NicHandle, ViAttribs);
    if (bad != KVIP_SUCCESS) return bad;
    DriverQp* qp = nullptr;
    if (p.drv->create_vi(vi_config(ViAttribs), SendCQHandle ? SendCQHandle->cq : nullptr,
                         RecvCQHandle ? RecvCQHandle->cq : nullptr, qp) != 0)
        return KVIP_ERROR_RESOURCE;
    auto vi = std::make_unique<_VIP_VI>();
    vi->nic = NicHandle;
    vi->qp = qp;
    vi->attr = *ViAttribs;
    vi->scq = SendCQHandle;
    vi->rcq = RecvCQHandle;
    vi->swait = SendWaitObject;
    vi->rwait = RecvWaitObject;
    // Queues with a wait object start armed.
    if (SendWaitObject) p.drv->arm_vi_queue(*qp, false);
    if (RecvWaitObject) p.drv->arm_vi_queue(*qp, true);
    *ViHandle = vi.get();
    p.vis.push_back(std::move(vi));
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipDestroyVi(KVIP_VI_HANDLE ViHandle) {
    Provider& p = *ViHandle->nic->prov;
    if (ViHandle->state != KVIP_STATE_IDLE || !ViHandle->sq.empty() || !ViHandle->rq.empty()) return KVIP_INVALID_STATE;
    p.drv->cm()->cancel(ViHandle->qp->qpn);
    p.drv->destroy_vi(ViHandle->qp);
    erase_owned(p.vis, static_cast<const _VIP_VI*>(ViHandle));
    return KVIP_SUCCESS;
}

// ---- 3.3 Connection management --------------------------------------------

KVIP_RETURN KvipConnectServerRequest(KVIP_NIC_HANDLE NicHandle, KVIP_NET_ADDRESS* LocalAddr, KVIP_ULONG Timeout,
                                     KVIP_WAIT_OBJECT* WaitObject, KVIP_CONN_HANDLE* ConnHandle) {
    if (Timeout == 0 || !ConnHandle || !address_ok(LocalAddr) || !host_matches(NicHandle, LocalAddr))
        return KVIP_INVALID_PARAMETER;
    Provider& p = *NicHandle->prov;
    p.drv->firmware_mailbox();
    const std::uint32_t id = p.drv->cm()->listen(to_cm(LocalAddr), timeout_ps(Timeout), [WaitObject]() {
        if (WaitObject) KeSetEvent(WaitObject);
    });
    auto c = std::make_unique<Conn>(Conn{NicHandle, id});
    *ConnHandle = c.get();
    p.conns.push_back(std::move(c));
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipConnectServerDone(KVIP_CONN_HANDLE ConnHandle, KVIP_NET_ADDRESS* RemoteAddr,
                                  KVIP_VI_ATTRIBUTES* RemoteViAttribs) {
    auto* c = static_cast<Conn*>(ConnHandle);
    Driver* d = c->nic->prov->drv;
    hcasim::host::spend_cpu(d->costs().poll_cq);
    packet::CmNetAddress remote;
    ViEndpoint vi;
    const CmResult r = d->cm()->listen_result(c->id, &remote, &vi);
    if (r == CmResult::Success) {
        if (RemoteAddr) from_cm(remote, RemoteAddr);
        to_attributes(vi, RemoteViAttribs);
    }
    return r == CmResult::Reject ? KVIP_NOT_DONE : from_cm(r);
}

KVIP_RETURN KvipConnectClientRequest(KVIP_VI_HANDLE ViHandle, KVIP_NET_ADDRESS* LocalAddr, KVIP_NET_ADDRESS* RemoteAddr,
                                     KVIP_ULONG Timeout, KVIP_WAIT_OBJECT* WaitObject) {
    if (Timeout == 0 || !address_ok(LocalAddr) || !address_ok(RemoteAddr) || !host_matches(ViHandle->nic, LocalAddr))
        return KVIP_INVALID_PARAMETER;
    if (ViHandle->state != KVIP_STATE_IDLE) return KVIP_INVALID_PARAMETER;
    Driver* d = ViHandle->nic->prov->drv;
    d->firmware_mailbox();
    ViHandle->state = KVIP_STATE_CONNECT_PENDING;
    ViHandle->peer = false;
    d->cm()->connect(endpoint(ViHandle), to_cm(LocalAddr), to_cm(RemoteAddr), timeout_ps(Timeout), false, [WaitObject]() {
        if (WaitObject) KeSetEvent(WaitObject);
    });
    return KVIP_SUCCESS;
}

namespace {

KVIP_RETURN connect_done(KVIP_VI_HANDLE vi, KVIP_VI_ATTRIBUTES* remote, bool peer) {
    Driver* d = vi->nic->prov->drv;
    hcasim::host::spend_cpu(d->costs().poll_cq);
    if (vi->state == KVIP_STATE_CONNECTED && vi->peer == peer) {
        ViEndpoint e;
        if (d->cm()->connect_result(vi->qp->qpn, &e) == CmResult::Success) to_attributes(e, remote);
        return KVIP_SUCCESS;
    }
    if (vi->state != KVIP_STATE_CONNECT_PENDING || vi->peer != peer) return KVIP_INVALID_STATE;
    ViEndpoint e;
    const CmResult r = d->cm()->connect_result(vi->qp->qpn, &e);
    if (r == CmResult::Pending) return KVIP_NOT_DONE;
    if (r == CmResult::Success) {
        vi->state = KVIP_STATE_CONNECTED;
        to_attributes(e, remote);
        return KVIP_SUCCESS;
    }
    vi->state = KVIP_STATE_IDLE;
    return from_cm(r);
}

}  // namespace

KVIP_RETURN KvipConnectClientDone(KVIP_VI_HANDLE ViHandle, KVIP_VI_ATTRIBUTES* RemoteViAttribs) {
    return connect_done(ViHandle, RemoteViAttribs, false);
}

KVIP_RETURN KvipConnectAccept(KVIP_CONN_HANDLE ConnHandle, KVIP_VI_HANDLE ViHandle) {
    auto* c = static_cast<Conn*>(ConnHandle);
    if (ViHandle->state != KVIP_STATE_IDLE) return KVIP_INVALID_STATE;
    Driver* d = c->nic->prov->drv;
    d->firmware_mailbox();
    const CmResult r = d->cm()->accept(c->id, endpoint(ViHandle));
    if (r == CmResult::Success) {
        ViHandle->state = KVIP_STATE_CONNECTED;
        ViHandle->peer = false;
    }
    return r == CmResult::InvalidState ? KVIP_ERROR_RESOURCE : from_cm(r);
}

KVIP_RETURN KvipConnectReject(KVIP_CONN_HANDLE ConnHandle) {
    auto* c = static_cast<Conn*>(ConnHandle);
    Driver* d = c->nic->prov->drv;
    d->firmware_mailbox();
    const CmResult r = d->cm()->reject(c->id);
    if (r == CmResult::InvalidState) return KVIP_ERROR_RESOURCE;
    return from_cm(r);
}

KVIP_RETURN KvipDisconnect(KVIP_VI_HANDLE ViHandle) {
    Driver* d = ViHandle->nic->prov->drv;
    d->cm()->cancel(ViHandle->qp->qpn);
    d->cm()->disconnect(ViHandle->qp->qpn);
    // Pending descriptors complete flushed; the VI is idle again.
    d->reset_vi(*ViHandle->qp);
    ViHandle->state = KVIP_STATE_IDLE;
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipConnectPeerRequest(KVIP_VI_HANDLE ViHandle, KVIP_NET_ADDRESS* LocalAddr, KVIP_NET_ADDRESS* RemoteAddr,
                                   KVIP_ULONG Timeout, KVIP_WAIT_OBJECT* WaitObject) {
    if (Timeout == 0 || !address_ok(LocalAddr) || !address_ok(RemoteAddr) || !host_matches(ViHandle->nic, LocalAddr))
        return KVIP_INVALID_PARAMETER;
    if (ViHandle->state != KVIP_STATE_IDLE) return KVIP_INVALID_STATE;
    Driver* d = ViHandle->nic->prov->drv;
    d->firmware_mailbox();
    ViHandle->state = KVIP_STATE_CONNECT_PENDING;
    ViHandle->peer = true;
    d->cm()->connect(endpoint(ViHandle), to_cm(LocalAddr), to_cm(RemoteAddr), timeout_ps(Timeout), true, [WaitObject]() {
        if (WaitObject) KeSetEvent(WaitObject);
    });
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipConnectPeerDone(KVIP_VI_HANDLE ViHandle, KVIP_VI_ATTRIBUTES* RemoteViAttribs) {
    return connect_done(ViHandle, RemoteViAttribs, true);
}

// ---- 3.4 Memory protection and registration -------------------------------

KVIP_RETURN KvipCreatePtag(KVIP_NIC_HANDLE NicHandle, KVIP_PROTECTION_HANDLE* Ptag) {
    if (!Ptag) return KVIP_INVALID_PARAMETER;
    Provider& p = *NicHandle->prov;
    std::uint32_t pdn = 0;
    if (p.ptags.size() >= p.drv->hca().params().vi_max_ptags || p.drv->alloc_pd(pdn) != 0) return KVIP_ERROR_RESOURCE;
    auto t = std::make_unique<_VIP_PTAG>(_VIP_PTAG{NicHandle, pdn});
    *Ptag = t.get();
    p.ptags.push_back(std::move(t));
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipDestroyPtag(KVIP_NIC_HANDLE NicHandle, KVIP_PROTECTION_HANDLE Ptag) {
    Provider& p = *NicHandle->prov;
    if (!p.owns(Ptag)) return KVIP_ERROR_RESOURCE;
    if (p.drv->dealloc_pd(Ptag->pdn) != 0) return KVIP_ERROR_RESOURCE;  // a VI or region still uses it
    erase_owned(p.ptags, static_cast<const _VIP_PTAG*>(Ptag));
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipRegisterMem(KVIP_NIC_HANDLE NicHandle, KVIP_PVOID VirtualAddress, KVIP_ULONG Length,
                            KVIP_MEM_ATTRIBUTES* MemAttribs, KVIP_MEM_HANDLE* MemoryHandle) {
    if (MemoryHandle) *MemoryHandle = 0;
    if (!VirtualAddress || Length == 0 || !MemAttribs || !MemoryHandle) return KVIP_INVALID_PARAMETER;
    const KVIP_RETURN bad = check_mem_attributes(NicHandle, MemAttribs);
    if (bad != KVIP_SUCCESS) return bad;
    Provider& p = *NicHandle->prov;
    // Registration is page granular.
    const std::uint64_t va = reinterpret_cast<std::uintptr_t>(VirtualAddress);
    const std::uint64_t base = va & ~(kPage - 1);
    const std::uint64_t end = (va + Length + kPage - 1) & ~(kPage - 1);
    std::uint32_t key = 0;
    if (p.drv->reg_mr(MemAttribs->Ptag->pdn, base, end - base, mem_access(MemAttribs), key) != 0)
        return KVIP_ERROR_RESOURCE;
    p.regions[key] = Region{NicHandle, va, false};
    *MemoryHandle = key;
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipDeregisterMem(KVIP_NIC_HANDLE NicHandle, KVIP_PVOID VirtualAddress, KVIP_MEM_HANDLE MemoryHandle) {
    Provider& p = *NicHandle->prov;
    auto it = p.regions.find(MemoryHandle);
    if (it == p.regions.end() || it->second.phys || it->second.nic != NicHandle ||
        reinterpret_cast<std::uintptr_t>(VirtualAddress) != it->second.va)
        return KVIP_INVALID_PARAMETER;
    if (p.drv->dereg_mr(MemoryHandle) != 0) return KVIP_ERROR_RESOURCE;
    p.regions.erase(it);
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipRegisterPhysPages(KVIP_NIC_HANDLE NicHandle, KVIP_PHYS_ADDRESS PhysAddress[], KVIP_ULONG NumPhysPages,
                                  KVIP_MEM_ATTRIBUTES* MemAttribs, KVIP_MEM_HANDLE* MemoryHandle) {
    if (MemoryHandle) *MemoryHandle = 0;
    if (!PhysAddress || NumPhysPages == 0 || !MemAttribs || !MemoryHandle) return KVIP_INVALID_PARAMETER;
    std::vector<std::uint64_t> pages(NumPhysPages);
    for (KVIP_ULONG i = 0; i < NumPhysPages; ++i) {
        pages[i] = reinterpret_cast<std::uintptr_t>(PhysAddress[i]);
        if (pages[i] == 0 || pages[i] % kPage != 0) return KVIP_INVALID_PARAMETER;
    }
    const KVIP_RETURN bad = check_mem_attributes(NicHandle, MemAttribs);
    if (bad != KVIP_SUCCESS) return bad;
    Provider& p = *NicHandle->prov;
    std::uint32_t key = 0;
    if (p.drv->reg_pages(MemAttribs->Ptag->pdn, pages, mem_access(MemAttribs), key) != 0) return KVIP_ERROR_RESOURCE;
    p.regions[key] = Region{NicHandle, 0, true};
    *MemoryHandle = key;
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipDeregisterPhysPages(KVIP_NIC_HANDLE NicHandle, KVIP_MEM_HANDLE MemoryHandle) {
    Provider& p = *NicHandle->prov;
    auto it = p.regions.find(MemoryHandle);
    if (it == p.regions.end() || !it->second.phys || it->second.nic != NicHandle) return KVIP_INVALID_PARAMETER;
    if (p.drv->dereg_mr(MemoryHandle) != 0) return KVIP_ERROR_RESOURCE;
    p.regions.erase(it);
    return KVIP_SUCCESS;
}

// ---- 3.5 Data transfer and completion -------------------------------------

KVIP_RETURN KvipPostSend(KVIP_VI_HANDLE ViHandle, KVIP_DESCRIPTOR* DescriptorPtr, KVIP_MEM_HANDLE MemoryHandle) {
    return post(ViHandle, false, DescriptorPtr, MemoryHandle);
}

KVIP_RETURN KvipSendDone(KVIP_VI_HANDLE ViHandle, KVIP_DESCRIPTOR** DescriptorPtr) {
    return done(ViHandle, false, DescriptorPtr);
}

KVIP_RETURN KvipRearmSend(KVIP_VI_HANDLE ViHandle) {
    if (ViHandle->scq) return KVIP_ERROR_RESOURCE;
    if (!ViHandle->swait) return KVIP_INVALID_PARAMETER;
    ViHandle->nic->prov->drv->arm_vi_queue(*ViHandle->qp, false);
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipPostRecv(KVIP_VI_HANDLE ViHandle, KVIP_DESCRIPTOR* DescriptorPtr, KVIP_MEM_HANDLE MemoryHandle) {
    return post(ViHandle, true, DescriptorPtr, MemoryHandle);
}

KVIP_RETURN KvipRecvDone(KVIP_VI_HANDLE ViHandle, KVIP_DESCRIPTOR** DescriptorPtr) {
    return done(ViHandle, true, DescriptorPtr);
}

KVIP_RETURN KvipRearmRecv(KVIP_VI_HANDLE ViHandle) {
    if (ViHandle->rcq) return KVIP_ERROR_RESOURCE;
    if (!ViHandle->rwait) return KVIP_INVALID_PARAMETER;
    ViHandle->nic->prov->drv->arm_vi_queue(*ViHandle->qp, true);
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipCQDone(KVIP_CQ_HANDLE CQHandle, KVIP_VI_HANDLE* ViHandle, KVIP_BOOLEAN* RecvQueue) {
    Provider& p = *CQHandle->nic->prov;
    hcasim::host::spend_cpu(p.drv->costs().poll_cq);
    hcasim::host::Completion c;
    if (p.drv->read_cqes(*CQHandle->cq, 1, &c) == 0) return KVIP_NOT_DONE;
    if (ViHandle) *ViHandle = p.vi_of(c.qpn);
    if (RecvQueue) *RecvQueue = c.is_send ? KVIP_FALSE : KVIP_TRUE;
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipRearmCQ(KVIP_CQ_HANDLE CQHandle) {
    if (!CQHandle->wait) return KVIP_INVALID_PARAMETER;
    CQHandle->nic->prov->drv->req_notify_cq(*CQHandle->cq, false);
    return KVIP_SUCCESS;
}

// ---- 3.6 Completion queue management --------------------------------------

KVIP_RETURN KvipCreateCQ(KVIP_NIC_HANDLE NicHandle, KVIP_ULONG EntryCount, KVIP_WAIT_OBJECT* CQWaitObject,
                         KVIP_CQ_HANDLE* CQHandle) {
    if (!CQHandle) return KVIP_ERROR_RESOURCE;
    Provider& p = *NicHandle->prov;
    if (EntryCount == 0 || EntryCount > p.drv->hca().params().max_cqe) return KVIP_ERROR_RESOURCE;
    DriverCq* cq = nullptr;
    if (p.drv->create_cq(static_cast<int>(EntryCount), nullptr, cq) != 0) return KVIP_ERROR_RESOURCE;
    auto h = std::make_unique<_VIP_CQ>(_VIP_CQ{NicHandle, cq, CQWaitObject});
    if (CQWaitObject) {
        cq->on_interrupt = [CQWaitObject]() { KeSetEvent(CQWaitObject); };
        p.drv->req_notify_cq(*cq, false);
    }
    *CQHandle = h.get();
    p.cqs.push_back(std::move(h));
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipDestroyCQ(KVIP_CQ_HANDLE CQHandle) {
    Provider& p = *CQHandle->nic->prov;
    if (CQHandle->cq->qp_refs > 0) return KVIP_ERROR_RESOURCE;
    if (p.drv->destroy_cq(CQHandle->cq) != 0) return KVIP_ERROR_RESOURCE;
    erase_owned(p.cqs, static_cast<const _VIP_CQ*>(CQHandle));
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipResizeCQ(KVIP_CQ_HANDLE CQHandle, KVIP_ULONG EntryCount) {
    Provider& p = *CQHandle->nic->prov;
    if (EntryCount == 0 || EntryCount > p.drv->hca().params().max_cqe) return KVIP_ERROR_RESOURCE;
    return p.drv->resize_cq(*CQHandle->cq, static_cast<int>(EntryCount)) == 0 ? KVIP_SUCCESS : KVIP_ERROR_RESOURCE;
}

// ---- 3.7 Querying information ---------------------------------------------

KVIP_RETURN KvipQueryNic(KVIP_NIC_HANDLE NicHandle, KVIP_NIC_ATTRIBUTES* NicAttribs) {
    if (!NicAttribs) return KVIP_ERROR_RESOURCE;
    Driver* d = NicHandle->prov->drv;
    d->control_call();
    const hca::HcaParams& p = d->hca().params();
    std::memset(NicAttribs, 0, sizeof *NicAttribs);
    std::snprintf(NicAttribs->Name, sizeof NicAttribs->Name, "%s", d->info().name.c_str());
    NicAttribs->HardwareVersion = 0x00010000;
    NicAttribs->ProviderVersion = 0x00010000;
    NicAttribs->NicAddressLen = 2;
    NicAttribs->LocalNicAddress = NicHandle->address;
    NicAttribs->ThreadSafe = KVIP_TRUE;
    NicAttribs->MaxDiscriminatorLen = static_cast<KVIP_USHORT>(kMaxAddressBytes - 2);
    NicAttribs->MaxRegisterBytes = static_cast<KVIP_ULONG>(std::min<std::uint64_t>(p.max_mr_size, 0xffffffffu));
    NicAttribs->MaxRegisterRegions = p.max_mr;
    NicAttribs->MaxRegisterBlockBytes = NicAttribs->MaxRegisterBytes;
    NicAttribs->MaxVI = p.max_qp;
    NicAttribs->MaxDescriptorsPerQueue = p.vi_max_descriptors;
    NicAttribs->MaxSegmentsPerDesc = p.vi_max_segments;
    NicAttribs->MaxCQ = p.max_cq;
    NicAttribs->MaxCQEntries = p.max_cqe;
    NicAttribs->MaxTransferSize = p.vi_max_transfer;
    NicAttribs->NativeMTU = d->hca().port().max_mtu();
    NicAttribs->MaxPtags = p.vi_max_ptags;
    NicAttribs->ReliabilityLevelSupport =
        KVIP_SERVICE_UNRELIABLE | KVIP_SERVICE_RELIABLE_DELIVERY | KVIP_SERVICE_RELIABLE_RECEPTION;
    NicAttribs->RDMAReadSupport = p.vi_rdma_read ? KVIP_TRUE : KVIP_FALSE;
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipSetViAttributes(KVIP_VI_HANDLE ViHandle, KVIP_VI_ATTRIBUTES* ViAttribs) {
    if (!ViAttribs) return KVIP_ERROR_RESOURCE;
    if (ViHandle->state != KVIP_STATE_IDLE) return KVIP_INVALID_STATE;
    const KVIP_RETURN bad = check_attributes(ViHandle->nic, ViAttribs);
    if (bad != KVIP_SUCCESS) return bad;  // nothing changes
    if (ViHandle->nic->prov->drv->modify_vi(*ViHandle->qp, vi_config(ViAttribs)) != 0) return KVIP_ERROR_RESOURCE;
    ViHandle->attr = *ViAttribs;
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipQueryVi(KVIP_VI_HANDLE ViHandle, KVIP_VI_STATE* State, KVIP_VI_ATTRIBUTES* ViAttribs,
                        KVIP_BOOLEAN* ViSendQEmpty, KVIP_BOOLEAN* ViRecvQEmpty) {
    Driver* d = ViHandle->nic->prov->drv;
    // The adapter may have broken the connection since the host last looked.
    d->query_qp_state(*ViHandle->qp);
    if (ViHandle->qp->state == hca::QpState::Err) ViHandle->state = KVIP_STATE_ERROR;
    if (State) *State = ViHandle->state;
    if (ViAttribs) *ViAttribs = ViHandle->attr;
    if (ViSendQEmpty) *ViSendQEmpty = ViHandle->sq.empty() ? KVIP_TRUE : KVIP_FALSE;
    if (ViRecvQEmpty) *ViRecvQEmpty = ViHandle->rq.empty() ? KVIP_TRUE : KVIP_FALSE;
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipSetMemAttributes(KVIP_NIC_HANDLE NicHandle, KVIP_PVOID Address, KVIP_MEM_HANDLE MemHandle,
                                 KVIP_MEM_ATTRIBUTES* MemAttribs) {
    Provider& p = *NicHandle->prov;
    auto it = p.regions.find(MemHandle);
    if (!MemAttribs || it == p.regions.end() || it->second.nic != NicHandle ||
        reinterpret_cast<std::uintptr_t>(Address) != it->second.va)
        return KVIP_ERROR_RESOURCE;
    const KVIP_RETURN bad = check_mem_attributes(NicHandle, MemAttribs);
    if (bad != KVIP_SUCCESS) return bad;
    return p.drv->modify_mr(MemHandle, MemAttribs->Ptag->pdn, mem_access(MemAttribs)) == 0 ? KVIP_SUCCESS
                                                                                           : KVIP_ERROR_RESOURCE;
}

KVIP_RETURN KvipQueryMem(KVIP_NIC_HANDLE NicHandle, KVIP_PVOID Address, KVIP_MEM_HANDLE MemHandle,
                         KVIP_MEM_ATTRIBUTES* MemAttribs) {
    Provider& p = *NicHandle->prov;
    p.drv->control_call();
    auto it = p.regions.find(MemHandle);
    const hca::MemoryRegion* mr = p.drv->find_mr(MemHandle);
    if (!MemAttribs || it == p.regions.end() || !mr || it->second.nic != NicHandle ||
        reinterpret_cast<std::uintptr_t>(Address) != it->second.va)
        return KVIP_ERROR_RESOURCE;
    MemAttribs->Ptag = p.ptag_of(mr->pdn);
    MemAttribs->EnableRdmaWrite = (mr->access & hca::kRemoteWrite) ? KVIP_TRUE : KVIP_FALSE;
    MemAttribs->EnableRdmaRead = (mr->access & hca::kRemoteRead) ? KVIP_TRUE : KVIP_FALSE;
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipQuerySystemManagementInfo(KVIP_NIC_HANDLE NicHandle, KVIP_ULONG InfoType, KVIP_PVOID SysManInfo) {
    if (InfoType != KVIP_SMI_PORT_COUNTERS || !SysManInfo) return KVIP_INVALID_PARAMETER;
    Driver* d = NicHandle->prov->drv;
    d->control_call();
    auto& port = d->hca().port();
    auto& rx = d->hca().rx();
    auto* info = static_cast<KVIP_SMI_PORT_COUNTERS_INFO*>(SysManInfo);
    auto get = [](const hcasim::sim::Block& b, const char* name) -> KVIP_UINT64 {
        auto it = b.counters().find(name);
        return it == b.counters().end() ? 0 : it->second;
    };
    info->PacketsSent = get(port, "tx_packets");
    info->BytesSent = get(port, "tx_bytes");
    info->PacketsReceived = get(port, "rx_packets");
    info->BytesReceived = get(port, "rx_bytes");
    KVIP_UINT64 dropped = 0;
    for (const auto& [name, value] : rx.counters())
        if (name.rfind("dropped_", 0) == 0) dropped += value;
    info->PacketsDropped = dropped;
    return KVIP_SUCCESS;
}

// ---- 3.8 Error handling ---------------------------------------------------

KVIP_RETURN KvipErrorNotificationDone(KVIP_NIC_HANDLE NicHandle, KVIP_ERROR_DESCRIPTOR** ErrorDescriptor) {
    if (!ErrorDescriptor || !*ErrorDescriptor) return KVIP_INVALID_PARAMETER;
    hcasim::host::spend_cpu(NicHandle->prov->drv->costs().poll_cq);
    if (NicHandle->errors.empty()) {
        *ErrorDescriptor = nullptr;
        return KVIP_NOT_DONE;
    }
    **ErrorDescriptor = NicHandle->errors.front();
    NicHandle->errors.pop_front();
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipRearmErrorNotification(KVIP_NIC_HANDLE NicHandle) {
    if (!NicHandle) return KVIP_INVALID_PARAMETER;
    NicHandle->err_armed = true;
    return KVIP_SUCCESS;
}

// ---- 3.9 VI context -------------------------------------------------------

KVIP_RETURN KvipSetViContext(KVIP_VI_HANDLE ViHandle, KVIP_PVOID ViContext) {
    if (!ViHandle) return KVIP_INVALID_PARAMETER;
    ViHandle->context = ViContext;
    ViHandle->has_context = true;
    return KVIP_SUCCESS;
}

KVIP_RETURN KvipGetViContext(KVIP_VI_HANDLE ViHandle, KVIP_PVOID* ViContext) {
    if (!ViHandle || !ViContext) return KVIP_INVALID_PARAMETER;
    if (!ViHandle->has_context) return KVIP_ERROR_RESOURCE;
    *ViContext = ViHandle->context;
    return KVIP_SUCCESS;
}

}  // extern "C"
