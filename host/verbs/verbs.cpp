// The libibverbs API on the hcasim driver core. Programs include the system
// <infiniband/verbs.h> and link against hcasim instead of libibverbs; the
// header's inline fast-path verbs reach the ops table filled in here, and
// its extended verbs the verbs_context of verbs_ex.cpp.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <map>
#include <limits>
#include <new>

#include "host/driver/host_thread.hpp"
#include "host/verbs/verbs_abi.hpp"
#include "host/verbs/verbs_internal.hpp"

using hcasim::host::Driver;
namespace hca = hcasim::hca;
namespace fw = hcasim::firmware;
namespace host = hcasim::host;
using namespace hcasim::verbs;


namespace {

// An address vector's GRH as a QP context holds it.
hca::GlobalRoute global_route(const ibv_ah_attr& ah) {
    hca::GlobalRoute g;
    if (!ah.is_global) return g;
    g.present = true;
    g.sgid_index = ah.grh.sgid_index;
    g.hop_limit = ah.grh.hop_limit;
    g.traffic_class = ah.grh.traffic_class;
    g.flow_label = ah.grh.flow_label & 0xfffff;
    std::memcpy(g.dgid, ah.grh.dgid.raw, sizeof g.dgid);
    return g;
}

ibv_ah_attr ah_attr_of(std::uint16_t dlid, std::uint8_t sl, const hca::GlobalRoute& g) {
    ibv_ah_attr ah{};
    ah.dlid = dlid;
    ah.sl = sl;
    if (g.present) {
        ah.is_global = 1;
        ah.grh.sgid_index = g.sgid_index;
        ah.grh.hop_limit = g.hop_limit;
        ah.grh.traffic_class = g.traffic_class;
        ah.grh.flow_label = g.flow_label;
        std::memcpy(ah.grh.dgid.raw, g.dgid, sizeof g.dgid);
    }
    return ah;
}

ibv_wc_status wc_status(hca::CqeStatus s) {
    switch (s) {
    case hca::CqeStatus::Success: return IBV_WC_SUCCESS;
    case hca::CqeStatus::LocalLength: return IBV_WC_LOC_LEN_ERR;
    case hca::CqeStatus::LocalQpOperation: return IBV_WC_LOC_QP_OP_ERR;
    case hca::CqeStatus::LocalProtection: return IBV_WC_LOC_PROT_ERR;
    case hca::CqeStatus::WrFlush: return IBV_WC_WR_FLUSH_ERR;
    case hca::CqeStatus::MemoryManagement: return IBV_WC_MW_BIND_ERR;
    case hca::CqeStatus::BadResponse: return IBV_WC_BAD_RESP_ERR;
    case hca::CqeStatus::LocalAccess: return IBV_WC_LOC_ACCESS_ERR;
    case hca::CqeStatus::RemoteInvalidRequest: return IBV_WC_REM_INV_REQ_ERR;
    case hca::CqeStatus::RemoteAccess: return IBV_WC_REM_ACCESS_ERR;
    case hca::CqeStatus::RemoteOperation: return IBV_WC_REM_OP_ERR;
    case hca::CqeStatus::RetryExceeded: return IBV_WC_RETRY_EXC_ERR;
    case hca::CqeStatus::RnrRetryExceeded: return IBV_WC_RNR_RETRY_EXC_ERR;
    case hca::CqeStatus::RemoteAborted: return IBV_WC_REM_ABORT_ERR;
    case hca::CqeStatus::GeneralError: return IBV_WC_GENERAL_ERR;
    case hca::CqeStatus::FatalError: return IBV_WC_FATAL_ERR;
    }
    return IBV_WC_GENERAL_ERR;
}

ibv_wc_opcode wc_opcode(hca::CqeOpcode o) {
    switch (o) {
    case hca::CqeOpcode::Send: return IBV_WC_SEND;
    case hca::CqeOpcode::RdmaWrite: return IBV_WC_RDMA_WRITE;
    case hca::CqeOpcode::RdmaRead: return IBV_WC_RDMA_READ;
    case hca::CqeOpcode::Recv: return IBV_WC_RECV;
    case hca::CqeOpcode::RecvRdmaWithImm: return IBV_WC_RECV_RDMA_WITH_IMM;
    case hca::CqeOpcode::CompareSwap: return IBV_WC_COMP_SWAP;
    case hca::CqeOpcode::FetchAdd: return IBV_WC_FETCH_ADD;
    case hca::CqeOpcode::BindWindow: return IBV_WC_BIND_MW;
    case hca::CqeOpcode::LocalInvalidate: return IBV_WC_LOCAL_INV;
    }
    return IBV_WC_SEND;
}

// ---- fast path (the context's ops table) ----

int sim_poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
    if (num_entries < 0 || (num_entries > 0 && !wc)) return -EINVAL;
    Driver* d = drv(cq->context);
    hcasim::host::Completion c[16];
    int done = 0;
    while (done < num_entries) {
        const int want = std::min(num_entries - done, 16);
        const int n = d->poll_cq(*sim(cq)->dcq, want, c);
        for (int i = 0; i < n; ++i) to_ibv_wc(c[i], wc[done + i]);
        done += n;
        if (n < want) break;
    }
    return done;
}

int sim_req_notify_cq(ibv_cq* cq, int solicited_only) {
    return drv(cq->context)->req_notify_cq(*sim(cq)->dcq, solicited_only != 0);
}

int sim_post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
    return post_send_list(sim(ibqp), wr, bad_wr, false);
}

}  // namespace

namespace hcasim::verbs {

void to_ibv_wc(const host::Completion& c, ibv_wc& w) {
    std::memset(&w, 0, sizeof w);
    w.wr_id = c.wr_id;
    w.status = wc_status(c.status);
    w.opcode = wc_opcode(c.opcode);
    w.vendor_err = c.vendor_err;
    w.byte_len = c.byte_len;
    w.qp_num = c.qpn;
    w.src_qp = c.src_qp;
    w.slid = c.slid;
    w.sl = c.sl;
    if (c.grh) w.wc_flags |= IBV_WC_GRH;
    if (c.has_imm) {
        w.imm_data = c.imm;
        w.wc_flags |= IBV_WC_WITH_IMM;
    }
    if (c.with_invalidate) {
        w.invalidated_rkey = c.imm;
        w.wc_flags |= IBV_WC_WITH_INV;
    }
}

int post_send_list(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, bool all_or_nothing) {
    Driver* d = drv(qp->qp.context);
    int err = 0;
    if (qp->dqp->state < hca::QpState::Rts) {
        err = EINVAL;
        if (bad_wr) *bad_wr = wr;
        return err;
    }
    hcasim::host::Sge sges[256];
    for (; wr; wr = wr->next) {
        hcasim::host::SendRequest r;
        hca::DatagramSeg datagram{};
        hca::BindSeg bind{};
        r.wr_id = wr->wr_id;
        switch (wr->opcode) {
        case IBV_WR_SEND: r.op = hca::WqeOpcode::Send; break;
        case IBV_WR_SEND_WITH_IMM: r.op = hca::WqeOpcode::SendImm; break;
        case IBV_WR_RDMA_WRITE: r.op = hca::WqeOpcode::RdmaWrite; break;
        case IBV_WR_RDMA_WRITE_WITH_IMM: r.op = hca::WqeOpcode::RdmaWriteImm; break;
        case IBV_WR_RDMA_READ: r.op = hca::WqeOpcode::RdmaRead; break;
        case IBV_WR_ATOMIC_CMP_AND_SWP: r.op = hca::WqeOpcode::AtomicCompareSwap; break;
        case IBV_WR_ATOMIC_FETCH_AND_ADD: r.op = hca::WqeOpcode::AtomicFetchAdd; break;
        case IBV_WR_SEND_WITH_INV: r.op = hca::WqeOpcode::SendInvalidate; break;
        case IBV_WR_BIND_MW:
        case IBV_WR_LOCAL_INV:
            // Memory management operations: no data (verbs_mw.cpp).
            err = memory_window_request(qp, *wr, r, bind);
            if (!err) err = d->write_send_wqe(*qp->dqp, r);
            if (!err) continue;
            break;
        default: err = EINVAL; break;
        }
        if (err) break;
        if (hca::is_atomic(r.op)) {
            // RC only; one 8-byte buffer for the original value (IBA 9.4.5).
            if ((qp->dqp->type != hca::QpType::Rc && qp->dqp->type != hca::QpType::XrcInitiator) || wr->num_sge != 1 ||
                !wr->sg_list ||
                wr->sg_list[0].length != hca::kAtomicBytes || (wr->send_flags & IBV_SEND_INLINE)) {
                err = EINVAL;
                break;
            }
            r.swap_add = r.op == hca::WqeOpcode::AtomicCompareSwap ? wr->wr.atomic.swap : wr->wr.atomic.compare_add;
            r.compare = wr->wr.atomic.compare_add;
            r.raddr = wr->wr.atomic.remote_addr;
            r.rkey = wr->wr.atomic.rkey;
        }
        // Operations the QP's transport does not have (IBA 9.8.2 table).
        const hca::QpType type = qp->dqp->type;
        const bool rdma = r.op == hca::WqeOpcode::RdmaWrite || r.op == hca::WqeOpcode::RdmaWriteImm ||
                          r.op == hca::WqeOpcode::RdmaRead;
        if ((type == hca::QpType::Ud && rdma) || (type == hca::QpType::Uc && r.op == hca::WqeOpcode::RdmaRead)) {
            err = EINVAL;
            break;
        }
        if (type == hca::QpType::XrcInitiator) {
            if (wr->qp_type.xrc.remote_srqn > 0xffffff) {
                err = EINVAL;
                break;
            }
            r.xrc_srqn = wr->qp_type.xrc.remote_srqn;
        }
        // SEND with invalidate needs an acknowledged service (RC).
        if (r.op == hca::WqeOpcode::SendInvalidate && !hca::transport_service(type).acknowledged) {
            err = EINVAL;
            break;
        }
        if (type == hca::QpType::Ud) {
            if (!wr->wr.ud.ah || wr->wr.ud.remote_qpn > 0xffffff) {
                err = EINVAL;
                break;
            }
            datagram = reinterpret_cast<SimAh*>(wr->wr.ud.ah)->av;
            datagram.dest_qpn = wr->wr.ud.remote_qpn;
            datagram.qkey = wr->wr.ud.remote_qkey;
            r.datagram = &datagram;
        }
        if (wr->num_sge < 0 || wr->num_sge > 255 || (wr->num_sge > 0 && !wr->sg_list)) {
            err = EINVAL;
            break;
        }
        const unsigned known = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;
        if (wr->send_flags & ~known) {
            err = EINVAL;
            break;
        }
        if ((wr->send_flags & IBV_SEND_INLINE) && r.op == hca::WqeOpcode::RdmaRead) {
            err = EINVAL;
            break;
        }
        r.signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
        r.solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
        r.inline_data = (wr->send_flags & IBV_SEND_INLINE) != 0;
        r.fence = (wr->send_flags & IBV_SEND_FENCE) != 0;
        r.imm = wr->imm_data;
        r.invalidate_rkey = wr->invalidate_rkey;
        if (!hca::is_atomic(r.op)) {
            r.raddr = wr->wr.rdma.remote_addr;
            r.rkey = wr->wr.rdma.rkey;
        }
        for (int i = 0; i < wr->num_sge; ++i) sges[i] = {wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
        r.sges = sges;
        r.num_sge = static_cast<std::uint32_t>(wr->num_sge);
        err = d->write_send_wqe(*qp->dqp, r);
        if (err) break;
    }
    if (err && all_or_nothing) d->discard_send_wqes(*qp->dqp);
    d->ring_send_doorbell(*qp->dqp);
    if (err && bad_wr) *bad_wr = wr;
    return err;
}

}  // namespace hcasim::verbs

namespace {

int sim_post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    SimQp* qp = sim(ibqp);
    Driver* d = drv(ibqp->context);
    if (qp->dqp->state == hca::QpState::Reset) {
        if (bad_wr) *bad_wr = wr;
        return EINVAL;
    }
    int err = 0;
    bool posted = false;
    hcasim::host::Sge sges[255];
    for (; wr; wr = wr->next) {
        err = recv_sges(*wr, sges, 255);
        if (!err) err = d->write_recv_wqe(*qp->dqp, wr->wr_id, sges, static_cast<std::uint32_t>(wr->num_sge));
        if (err) break;
        posted = true;
    }
    if (posted) d->ring_recv_doorbell(*qp->dqp);
    if (err && bad_wr) *bad_wr = wr;
    return err;
}

// ---- QP state machine (IBA 10.3.1, as ib_modify_qp_is_ok checks it for RC) ----

struct Transition {
    int required;
    int optional;
    bool valid;
};

Transition transition(ibv_qp_state cur, ibv_qp_state next) {
    const int any_to_reset_or_err = 0;
    if (next == IBV_QPS_RESET) return {IBV_QP_STATE, 0, true};
    if (next == IBV_QPS_ERR) return {IBV_QP_STATE, any_to_reset_or_err, true};
    switch (cur) {
    case IBV_QPS_RESET:
        if (next == IBV_QPS_INIT) return {IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0, true};
        break;
    case IBV_QPS_INIT:
        if (next == IBV_QPS_INIT)
            return {IBV_QP_STATE, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, true};
        if (next == IBV_QPS_RTR)
            return {IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                    IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX, true};
        break;
    case IBV_QPS_RTR:
        if (next == IBV_QPS_RTS)
            return {IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC,
                    IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
                        IBV_QP_PATH_MIG_STATE,
                    true};
        break;
    case IBV_QPS_RTS:
        if (next == IBV_QPS_RTS)
            return {IBV_QP_STATE,
                    IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
                        IBV_QP_MIN_RNR_TIMER,
                    true};
        if (next == IBV_QPS_SQD) return {IBV_QP_STATE, IBV_QP_EN_SQD_ASYNC_NOTIFY, true};
        break;
    case IBV_QPS_SQD:
        if (next == IBV_QPS_RTS)
            return {IBV_QP_STATE,
                    IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
                        IBV_QP_PATH_MIG_STATE,
                    true};
        if (next == IBV_QPS_SQD) return {IBV_QP_STATE, IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PATH_MIG_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_PKEY_INDEX, true};
        break;
    case IBV_QPS_SQE:
        if (next == IBV_QPS_RTS) return {IBV_QP_STATE, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER, true};
        break;
    default: break;
    }
    return {0, 0, false};
}

// UC and UD differ from RC in what a transition requires and allows (IBA
// 10.3.1, table of ib_modify_qp_is_ok): UC has no RDMA READ or RNR
// attributes, UD has no path at all but a Q_Key.
Transition transition(ibv_qp_state cur, ibv_qp_state next, hca::QpType type) {
    Transition t = transition(cur, next);
    if (!t.valid || type == hca::QpType::Rc || next == IBV_QPS_RESET || next == IBV_QPS_ERR) return t;
    // XRC: the initiator has no receive attributes, the target no send
    // queue to retry from (ib_modify_qp_is_ok's XRC_INI and XRC_TGT rows).
    if (type == hca::QpType::XrcInitiator || type == hca::QpType::XrcTarget) {
        const int recv_attrs = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        const int send_attrs = IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        if (type == hca::QpType::XrcInitiator && cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
            t.required &= ~recv_attrs;
            t.optional |= recv_attrs;
        }
        if (type == hca::QpType::XrcTarget && cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
            t.required &= ~send_attrs;
            t.optional |= send_attrs;
        }
        return t;
    }
    const bool uc = type == hca::QpType::Uc;
    const int rnr_and_reads = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_QP_RD_ATOMIC |
                              IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
    if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
        if (!uc) t.required = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
    } else if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
        if (!uc) t.optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
    } else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
        t.required &= ~rnr_and_reads;
        if (!uc) {
            t.required = IBV_QP_STATE;
            t.optional = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
        }
    } else if (cur == IBV_QPS_SQD && next == IBV_QPS_SQD) {
        t.optional = uc ? IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE
                        : IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
    } else if (next == IBV_QPS_RTS || next == IBV_QPS_SQD) {
        t.required &= ~rnr_and_reads;
        t.optional &= ~rnr_and_reads;
        if (!uc && next == IBV_QPS_RTS) t.optional = IBV_QP_CUR_STATE | IBV_QP_QKEY;
    }
    return t;
}

hca::QpState to_hw(ibv_qp_state s) {
    switch (s) {
    case IBV_QPS_RESET: return hca::QpState::Reset;
    case IBV_QPS_INIT: return hca::QpState::Init;
    case IBV_QPS_RTR: return hca::QpState::Rtr;
    case IBV_QPS_RTS: return hca::QpState::Rts;
    case IBV_QPS_SQD: return hca::QpState::Sqd;
    case IBV_QPS_SQE: return hca::QpState::Sqe;
    default: return hca::QpState::Err;
    }
}

ibv_qp_state to_ibv(hca::QpState s) {
    switch (s) {
    case hca::QpState::Reset: return IBV_QPS_RESET;
    case hca::QpState::Init: return IBV_QPS_INIT;
    case hca::QpState::Rtr: return IBV_QPS_RTR;
    case hca::QpState::Rts: return IBV_QPS_RTS;
    case hca::QpState::Sqd: return IBV_QPS_SQD;
    case hca::QpState::Sqe: return IBV_QPS_SQE;
    case hca::QpState::Err: return IBV_QPS_ERR;
    }
    return IBV_QPS_ERR;
}

std::uint32_t mtu_bytes(ibv_mtu m) { return 128u << static_cast<int>(m); }

ibv_mtu ibv_mtu_of(std::uint32_t bytes) {
    switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    default: return IBV_MTU_4096;
    }
}


}  // namespace

extern "C" {

struct ibv_device** ibv_get_device_list(int* num_devices) {
    Driver* d = hcasim::host::current_driver();
    if (!d) {
        if (num_devices) *num_devices = 0;
        errno = ENOSYS;
        return nullptr;
    }
    d->control_call();
    auto* dev = new (std::nothrow) SimDevice{};
    auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
    if (!dev || !list) {
        delete dev;
        std::free(list);
        errno = ENOMEM;
        return nullptr;
    }
    dev->drv = d;
    dev->listed = true;
    dev->dev.node_type = IBV_NODE_CA;
    dev->dev.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(dev->dev.name, sizeof dev->dev.name, "%s", d->info().name.c_str());
    std::snprintf(dev->dev.dev_name, sizeof dev->dev.dev_name, "uverbs0");
    std::snprintf(dev->dev.dev_path, sizeof dev->dev.dev_path, "/sys/class/infiniband_verbs/uverbs0");
    std::snprintf(dev->dev.ibdev_path, sizeof dev->dev.ibdev_path, "/sys/class/infiniband/%s", dev->dev.name);
    list[0] = &dev->dev;
    if (num_devices) *num_devices = 1;
    return list;
}

void ibv_free_device_list(struct ibv_device** list) {
    if (!list) return;
    // A device stays valid while a context opened from it is open.
    for (ibv_device** d = list; *d; ++d) {
        auto* sd = reinterpret_cast<SimDevice*>(*d);
        sd->listed = false;
        if (sd->contexts == 0) delete sd;
    }
    std::free(list);
}

const char* ibv_get_device_name(struct ibv_device* device) { return device ? device->name : nullptr; }

__be64 ibv_get_device_guid(struct ibv_device* device) {
    if (!device) return 0;
    return htobe64(reinterpret_cast<SimDevice*>(device)->drv->info().node_guid);
}

struct ibv_context* ibv_open_device(struct ibv_device* device) {
    if (!device) return fail<ibv_context>(EINVAL);
    auto* sd = reinterpret_cast<SimDevice*>(device);
    sd->drv->control_call();
    auto* c = new (std::nothrow) SimContext{};
    if (!c) return fail<ibv_context>(ENOMEM);
    c->drv = sd->drv;
    c->device = sd;
    ++sd->contexts;
    ibv_context& ctx = c->vctx.context;
    ctx.device = device;
    ctx.cmd_fd = -1;
    ctx.async_fd = -1;
    ctx.num_comp_vectors = 1;
    ctx.ops.poll_cq = sim_poll_cq;
    ctx.ops.req_notify_cq = sim_req_notify_cq;
    ctx.ops.post_send = sim_post_send;
    ctx.ops.post_recv = sim_post_recv;
    ctx.ops.post_srq_recv = hcasim::verbs::post_srq_recv;
    init_memory_window_ops(ctx);
    // An extended context: the header's inline verbs find the extended ops
    // in the verbs_context in front of it (those left null report EOPNOTSUPP).
    ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
    c->vctx.sz = sizeof(verbs_context);
    init_extended_context(c->vctx);
    pthread_mutex_init(&ctx.mutex, nullptr);
    return &ctx;
}

extern "C++" {
namespace hcasim::verbs {
// What a library that keeps a context and a PD for the life of the process
// (rdma_cm) frees when the simulated host goes: memory only, no simulated
// time and no driver calls (the driver is going too).
void release_at_teardown(ibv_context* context, ibv_pd* pd, ibv_xrcd* xrcd) {
    delete reinterpret_cast<SimXrcd*>(xrcd);
    delete reinterpret_cast<SimPd*>(pd);
    if (!context) return;
    SimContext* c = sim_ctx(context);
    pthread_mutex_destroy(&context->mutex);
    if (--c->device->contexts == 0 && !c->device->listed) delete c->device;
    delete c;
}
}  // namespace hcasim::verbs
}

int ibv_close_device(struct ibv_context* context) {
    if (!context) return EINVAL;
    SimContext* c = sim_ctx(context);
    c->drv->control_call();
    pthread_mutex_destroy(&context->mutex);
    if (--c->device->contexts == 0 && !c->device->listed) delete c->device;
    delete c;
    return 0;
}

int ibv_query_device(struct ibv_context* context, struct ibv_device_attr* a) {
    if (!context || !a) return EINVAL;
    Driver* d = drv(context);
    d->control_call();
    const hca::HcaParams& p = d->hca().params();
    std::memset(a, 0, sizeof *a);
    std::snprintf(a->fw_ver, sizeof a->fw_ver, "2.42.5000");
    a->node_guid = htobe64(d->info().node_guid);
    a->sys_image_guid = htobe64(d->info().node_guid);
    a->max_mr_size = p.max_mr_size;
    a->page_size_cap = 0xfffff000;
    a->vendor_id = 0x02c9;
    a->vendor_part_id = 4099;
    a->hw_ver = 1;
    a->max_qp = static_cast<int>(p.max_qp);
    a->max_qp_wr = static_cast<int>(p.max_qp_wr);
    a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_CHANGE_PHY_PORT |
                          IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_XRC;
    // Memory windows of type 1 and 2B; they share the protection table with
    // the regions.
    a->device_cap_flags |= IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
    // Connected QPs take an alternate path and migrate to it.
    a->device_cap_flags |= IBV_DEVICE_AUTO_PATH_MIG;
    a->max_mw = static_cast<int>(p.max_mr);
    a->max_sge = static_cast<int>(p.max_sge);
    a->max_sge_rd = static_cast<int>(p.max_sge);
    a->max_cq = static_cast<int>(p.max_cq);
    a->max_cqe = static_cast<int>(p.max_cqe);
    a->max_mr = static_cast<int>(p.max_mr);
    a->max_pd = static_cast<int>(p.max_pd);
    a->max_srq = static_cast<int>(p.max_srq);
    a->max_srq_wr = static_cast<int>(p.max_srq_wr);
    a->max_srq_sge = static_cast<int>(p.max_srq_sge);
    a->max_qp_rd_atom = static_cast<int>(p.max_qp_rd_atom);
    a->max_qp_init_rd_atom = static_cast<int>(p.max_qp_rd_atom);
    a->max_res_rd_atom = static_cast<int>(p.max_qp_rd_atom * p.max_qp);
    a->atomic_cap = IBV_ATOMIC_HCA;  // atomic with respect to this adapter's own atomics
    // The adapter's multicast group table: max_mcast_grp entries of
    // max_mcast_qp_attach QPs each.
    const hca::MulticastTable& mcg = d->hca().multicast();
    a->max_mcast_grp = static_cast<int>(mcg.max_groups());
    a->max_mcast_qp_attach = static_cast<int>(mcg.max_qps_per_group());
    a->max_total_mcast_qp_attach = static_cast<int>(std::min<std::uint64_t>(
        static_cast<std::uint64_t>(mcg.max_groups()) * mcg.max_qps_per_group(), std::numeric_limits<int>::max()));
    a->max_pkeys = 1;
    a->max_ah = std::numeric_limits<int>::max();  // address handles live in host memory only
    a->local_ca_ack_delay = 15;
    a->phys_port_cnt = static_cast<std::uint8_t>(drv(context)->hca().port_count());
    return 0;
}

// The header maps ibv_query_port to an inline wrapper that calls this with a
// zeroed struct ibv_port_attr; the parentheses keep the macro from expanding.
int(ibv_query_port)(struct ibv_context* context, uint8_t port_num, struct _compat_ibv_port_attr* compat) {
    if (!context || !compat) return EINVAL;
    Driver* d = drv(context);
    d->control_call();
    if (!d->hca().ports().valid(port_num)) return EINVAL;
    auto* a = reinterpret_cast<ibv_port_attr*>(compat);
    const hca::Port& port = d->hca().port(port_num);
    const bool up = port.link_up();
    a->state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
    a->max_mtu = ibv_mtu_of(port.max_mtu());
    a->active_mtu = ibv_mtu_of(port.max_mtu());
    a->gid_tbl_len = static_cast<int>(port.gids().size());
    a->port_cap_flags = 0;
    a->max_msg_sz = 0x80000000u;
    a->pkey_tbl_len = static_cast<std::uint16_t>(port.pkeys().size());
    a->lid = port.lid();
    a->sm_lid = port.sm_lid();
    a->lmc = 0;
    a->max_vl_num = 1;
    a->sm_sl = 0;
    a->subnet_timeout = 18;
    a->phys_state = up ? 5 : 3;  // LinkUp, Disabled
    a->link_layer = IBV_LINK_LAYER_INFINIBAND;
    a->active_width = port.rate().width == 1 ? 1 : port.rate().width == 4 ? 2 : port.rate().width == 8 ? 4 : 8;
    const double lane = port.rate().lane_gbps;
    a->active_speed = lane < 3 ? 1 : lane < 6 ? 2 : lane < 10.2 ? 4 : lane < 11 ? 8 : lane < 15 ? 16 : 32;
    return 0;
}

int ibv_query_gid(struct ibv_context* context, uint8_t port_num, int index, union ibv_gid* gid) {
    if (!context || !gid) return EINVAL;
    Driver* d = drv(context);
    d->control_call();
    if (!d->hca().ports().valid(port_num)) return EINVAL;
    const auto& gids = d->hca().port(port_num).gids();
    if (index < 0 || static_cast<std::size_t>(index) >= gids.size()) return EINVAL;
    std::memcpy(gid->raw, gids[static_cast<std::size_t>(index)].data(), sizeof gid->raw);
    return 0;
}

int ibv_query_pkey(struct ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
    if (!context || !pkey) return EINVAL;
    Driver* d = drv(context);
    d->control_call();
    if (!d->hca().ports().valid(port_num)) return EINVAL;
    const auto& pkeys = d->hca().port(port_num).pkeys();
    if (index < 0 || static_cast<std::size_t>(index) >= pkeys.size()) return EINVAL;
    *pkey = htobe16(pkeys[static_cast<std::size_t>(index)]);
    return 0;
}

struct ibv_pd* ibv_alloc_pd(struct ibv_context* context) {
    if (!context) return fail<ibv_pd>(EINVAL);
    auto* pd = new (std::nothrow) SimPd{};
    if (!pd) return fail<ibv_pd>(ENOMEM);
    const int err = drv(context)->alloc_pd(pd->pdn);
    if (err) {
        delete pd;
        return fail<ibv_pd>(err);
    }
    pd->pd.context = context;
    pd->pd.handle = pd->pdn;
    return &pd->pd;
}

int ibv_dealloc_pd(struct ibv_pd* pd) {
    if (!pd) return EINVAL;
    auto* s = reinterpret_cast<SimPd*>(pd);
    const int err = drv(pd->context)->dealloc_pd(s->pdn);
    if (!err) delete s;
    return err;
}

struct ibv_mr*(ibv_reg_mr)(struct ibv_pd* pd, void* addr, size_t length, int access) {
    if (!pd) return fail<ibv_mr>(EINVAL);
    const int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_RELAXED_ORDERING;
    if (access & ~known) return fail<ibv_mr>(EINVAL);
    if (!addr && length) return fail<ibv_mr>(EINVAL);
    auto* mr = new (std::nothrow) SimMr{};
    if (!mr) return fail<ibv_mr>(ENOMEM);
    std::uint32_t key = 0;
    const int err = drv(pd->context)->reg_mr(reinterpret_cast<SimPd*>(pd)->pdn, reinterpret_cast<std::uintptr_t>(addr),
                                             length, static_cast<std::uint32_t>(access & 0x1f), key);
    if (err) {
        delete mr;
        return fail<ibv_mr>(err);
    }
    mr->mr.context = pd->context;
    mr->mr.pd = pd;
    mr->mr.addr = addr;
    mr->mr.length = length;
    mr->mr.handle = key;
    mr->mr.lkey = key;
    mr->mr.rkey = key;
    return &mr->mr;
}

struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
    // hcasim maps an MR at its own virtual address only.
    if (iova != reinterpret_cast<std::uintptr_t>(addr)) return fail<ibv_mr>(EOPNOTSUPP);
    return (ibv_reg_mr)(pd, addr, length, static_cast<int>(access));
}

int ibv_dereg_mr(struct ibv_mr* mr) {
    if (!mr) return EINVAL;
    const int err = drv(mr->context)->dereg_mr(mr->lkey);
    if (!err) delete reinterpret_cast<SimMr*>(mr);
    return err;
}

struct ibv_comp_channel* ibv_create_comp_channel(struct ibv_context* context) {
    if (!context) return fail<ibv_comp_channel>(EINVAL);
    drv(context)->control_call();
    auto* ch = new (std::nothrow) SimChannel{};
    if (!ch) return fail<ibv_comp_channel>(ENOMEM);
    ch->ch.context = context;
    ch->ch.fd = -1;
    ch->ch.refcnt = 0;
    return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel* channel) {
    if (!channel) return EINVAL;
    auto* ch = reinterpret_cast<SimChannel*>(channel);
    drv(channel->context)->control_call();
    if (ch->events.cq_refs > 0) return EBUSY;
    delete ch;
    return 0;
}

struct ibv_cq* ibv_create_cq(struct ibv_context* context, int cqe, void* cq_context, struct ibv_comp_channel* channel,
                             int comp_vector) {
    if (!context) return fail<ibv_cq>(EINVAL);
    if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) return fail<ibv_cq>(EINVAL);
    auto* cq = new (std::nothrow) SimCq{};
    if (!cq) return fail<ibv_cq>(ENOMEM);
    host::EventChannel* ec = channel ? &reinterpret_cast<SimChannel*>(channel)->events : nullptr;
    const int err = drv(context)->create_cq(cqe, ec, cq->dcq);
    if (err) {
        delete cq;
        return fail<ibv_cq>(err);
    }
    cq->dcq->user_context = cq;
    cq->cq.context = context;
    cq->cq.channel = channel;
    cq->cq.cq_context = cq_context;
    cq->cq.handle = cq->dcq->cqn;
    cq->cq.cqe = static_cast<int>((1u << cq->dcq->log_size) - 1);
    pthread_mutex_init(&cq->cq.mutex, nullptr);
    pthread_cond_init(&cq->cq.cond, nullptr);
    return &cq->cq;
}

int ibv_resize_cq(struct ibv_cq* cq, int cqe) {
    if (!cq) return EINVAL;
    const int err = drv(cq->context)->resize_cq(*sim(cq)->dcq, cqe);
    if (!err) cq->cqe = static_cast<int>((1u << sim(cq)->dcq->log_size) - 1);
    return err;
}

int ibv_destroy_cq(struct ibv_cq* cq) {
    if (!cq) return EINVAL;
    // Wait (in simulated time) until every completion and asynchronous
    // event reported on it is acknowledged, as libibverbs does.
    SimContext* ctx = sim_ctx(cq->context);
    while (cq->comp_events_completed != sim(cq)->dcq->events_delivered ||
           cq->async_events_completed != sim(cq)->async_events_reported)
        sc_core::wait(ctx->acked);
    const int err = drv(cq->context)->destroy_cq(sim(cq)->dcq);
    if (err) return err;
    pthread_mutex_destroy(&cq->mutex);
    pthread_cond_destroy(&cq->cond);
    delete sim(cq);
    return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel* channel, struct ibv_cq** cq, void** cq_context) {
    if (!channel || !cq) return -1;
    host::DriverCq* dcq = nullptr;
    drv(channel->context)->get_cq_event(reinterpret_cast<SimChannel*>(channel)->events, dcq);
    auto* s = static_cast<SimCq*>(dcq->user_context);
    *cq = &s->cq;
    if (cq_context) *cq_context = s->cq.cq_context;
    return 0;
}

void ibv_ack_cq_events(struct ibv_cq* cq, unsigned int nevents) {
    if (!cq) return;
    cq->comp_events_completed += nevents;
    sim_ctx(cq->context)->acked.notify(sc_core::SC_ZERO_TIME);
}

int ibv_get_async_event(struct ibv_context* context, struct ibv_async_event* event) {
    if (!context || !event) return -1;
    Driver* d = drv(context);
    hca::AsyncEvent e{};
    d->get_async_event(e);
    std::memset(event, 0, sizeof *event);
    switch (e.type) {
    case hca::AsyncEventType::CqError: event->event_type = IBV_EVENT_CQ_ERR; break;
    case hca::AsyncEventType::SrqLimitReached: event->event_type = IBV_EVENT_SRQ_LIMIT_REACHED; break;
    case hca::AsyncEventType::QpLastWqeReached: event->event_type = IBV_EVENT_QP_LAST_WQE_REACHED; break;
    case hca::AsyncEventType::CommEstablished: event->event_type = IBV_EVENT_COMM_EST; break;
    case hca::AsyncEventType::SqDrained: event->event_type = IBV_EVENT_SQ_DRAINED; break;
    case hca::AsyncEventType::PathMigrated: event->event_type = IBV_EVENT_PATH_MIG; break;
    case hca::AsyncEventType::PathMigrationError: event->event_type = IBV_EVENT_PATH_MIG_ERR; break;
    case hca::AsyncEventType::SrqError: event->event_type = IBV_EVENT_SRQ_ERR; break;
    case hca::AsyncEventType::QpFatal: event->event_type = IBV_EVENT_QP_FATAL; break;
    case hca::AsyncEventType::QpRequestError: event->event_type = IBV_EVENT_QP_REQ_ERR; break;
    case hca::AsyncEventType::QpAccessError: event->event_type = IBV_EVENT_QP_ACCESS_ERR; break;
    case hca::AsyncEventType::PortActive: event->event_type = IBV_EVENT_PORT_ACTIVE; break;
    case hca::AsyncEventType::PortError: event->event_type = IBV_EVENT_PORT_ERR; break;
    case hca::AsyncEventType::LidChange: event->event_type = IBV_EVENT_LID_CHANGE; break;
    case hca::AsyncEventType::PkeyChange: event->event_type = IBV_EVENT_PKEY_CHANGE; break;
    case hca::AsyncEventType::SmChange: event->event_type = IBV_EVENT_SM_CHANGE; break;
    case hca::AsyncEventType::ClientReregister: event->event_type = IBV_EVENT_CLIENT_REREGISTER; break;
    case hca::AsyncEventType::Catastrophic: event->event_type = IBV_EVENT_DEVICE_FATAL; break;
    default: event->event_type = IBV_EVENT_DEVICE_FATAL; break;  // VI events never reach verbs
    }
    if (e.type == hca::AsyncEventType::CqError) {
        if (host::DriverCq* cq = d->find_cq(e.number)) {
            auto* scq = static_cast<SimCq*>(cq->user_context);
            event->element.cq = &scq->cq;
            ++scq->async_events_reported;
        }
    }
    if (e.type == hca::AsyncEventType::SrqLimitReached || e.type == hca::AsyncEventType::SrqError) {
        if (host::DriverSrq* srq = d->find_srq(e.number)) {
            event->element.srq = static_cast<ibv_srq*>(srq->user_context);
            ++sim(event->element.srq)->async_events_reported;
        }
    }
    if (e.type == hca::AsyncEventType::QpFatal || e.type == hca::AsyncEventType::QpRequestError ||
        e.type == hca::AsyncEventType::QpAccessError || e.type == hca::AsyncEventType::QpLastWqeReached ||
        e.type == hca::AsyncEventType::CommEstablished || e.type == hca::AsyncEventType::SqDrained ||
        e.type == hca::AsyncEventType::PathMigrated || e.type == hca::AsyncEventType::PathMigrationError) {
        if (host::DriverQp* qp = d->find_qp(e.number)) {
            event->element.qp = static_cast<ibv_qp*>(qp->user_context);
            ++sim(event->element.qp)->async_events_reported;
        }
    }
    if (e.type == hca::AsyncEventType::PortActive || e.type == hca::AsyncEventType::PortError ||
        e.type == hca::AsyncEventType::LidChange || e.type == hca::AsyncEventType::PkeyChange ||
        e.type == hca::AsyncEventType::SmChange || e.type == hca::AsyncEventType::ClientReregister)
        event->element.port_num = static_cast<int>(e.number);
    return 0;
}

// As libibverbs: every event taken with ibv_get_async_event is acknowledged
// once; destroying its QP or CQ waits for that.
void ibv_ack_async_event(struct ibv_async_event* event) {
    if (!event) return;
    ibv_context* context = nullptr;
    switch (hcasim::verbs::async_element(event->event_type)) {
    case hcasim::verbs::AsyncElement::Cq:
        if (!event->element.cq) return;
        ++event->element.cq->async_events_completed;
        context = event->element.cq->context;
        break;
    case hcasim::verbs::AsyncElement::Qp:
        if (!event->element.qp) return;
        ++event->element.qp->events_completed;
        context = event->element.qp->context;
        break;
    case hcasim::verbs::AsyncElement::Srq:
        if (!event->element.srq) return;
        ++event->element.srq->events_completed;
        context = event->element.srq->context;
        break;
    case hcasim::verbs::AsyncElement::Port:
        return;  // port and device events belong to no object
    }
    sim_ctx(context)->acked.notify(sc_core::SC_ZERO_TIME);
}

struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* init) {
    if (!pd || !init) return fail<ibv_qp>(EINVAL);
    hca::QpType type;
    switch (init->qp_type) {
    case IBV_QPT_RC: type = hca::QpType::Rc; break;
    case IBV_QPT_UC: type = hca::QpType::Uc; break;
    case IBV_QPT_UD: type = hca::QpType::Ud; break;
    case IBV_QPT_XRC_SEND: type = hca::QpType::XrcInitiator; break;
    case IBV_QPT_XRC_RECV: return fail<ibv_qp>(EINVAL);  // needs an XRC domain: ibv_create_qp_ex
    default: return fail<ibv_qp>(EOPNOTSUPP);
    }
    if (!init->send_cq || (!init->recv_cq && type != hca::QpType::XrcInitiator)) return fail<ibv_qp>(EINVAL);
    if (type == hca::QpType::XrcInitiator && init->srq) return fail<ibv_qp>(EINVAL);
    // A shared receive queue must be in the QP's protection domain.
    if (init->srq && init->srq->pd != pd) return fail<ibv_qp>(EINVAL);
    auto* qp = new (std::nothrow) SimQp{};
    if (!qp) return fail<ibv_qp>(ENOMEM);
    Driver* d = drv(pd->context);
    const Driver::QpCaps caps{init->cap.max_send_wr, init->cap.max_recv_wr, init->cap.max_send_sge,
                              init->cap.max_recv_sge, init->cap.max_inline_data};
    const int err = d->create_qp(reinterpret_cast<SimPd*>(pd)->pdn, sim(init->send_cq)->dcq,
                                 init->recv_cq ? sim(init->recv_cq)->dcq : nullptr,
                                 caps, init->sq_sig_all != 0, qp->dqp, type,
                                 init->srq ? sim(init->srq)->dsrq : nullptr);
    if (err) {
        delete qp;
        return fail<ibv_qp>(err);
    }
    qp->dqp->user_context = &qp->qp;
    // Report the capabilities really allocated.
    init->cap.max_send_wr = qp->dqp->max_send_wr;
    init->cap.max_recv_wr = qp->dqp->max_recv_wr;
    init->cap.max_send_sge = qp->dqp->max_send_sge;
    init->cap.max_recv_sge = qp->dqp->max_recv_sge;
    init->cap.max_inline_data = qp->dqp->max_inline;
    qp->init = *init;
    qp->qp.context = pd->context;
    qp->qp.qp_context = init->qp_context;
    qp->qp.pd = pd;
    qp->qp.send_cq = init->send_cq;
    qp->qp.recv_cq = init->recv_cq;
    qp->qp.srq = init->srq;
    qp->qp.handle = qp->dqp->qpn;
    qp->qp.qp_num = qp->dqp->qpn;
    qp->qp.state = IBV_QPS_RESET;
    qp->qp.qp_type = init->qp_type;
    pthread_mutex_init(&qp->qp.mutex, nullptr);
    pthread_cond_init(&qp->qp.cond, nullptr);
    return &qp->qp;
}

int ibv_modify_qp(struct ibv_qp* ibqp, struct ibv_qp_attr* attr, int mask) {
    if (!ibqp || !attr) return EINVAL;
    SimQp* qp = sim(ibqp);
    Driver* d = drv(ibqp->context);
    const ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : to_ibv(qp->dqp->state);
    const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
    if (cur != to_ibv(qp->dqp->state) || next > IBV_QPS_ERR) return EINVAL;
    const Transition t = transition(cur, next, qp->dqp->type);
    if (!t.valid) return EINVAL;
    if ((mask & t.required) != t.required) return EINVAL;
    if (mask & ~(t.required | t.optional)) return EINVAL;

    fw::QpAttributes a = qp->dqp->attr;
    std::uint32_t m = 0;
    if (mask & IBV_QP_STATE) {
        a.state = to_hw(next);
        m |= fw::kAttrState;
    }
    const hca::PortSet& ports = d->hca().ports();
    if (mask & IBV_QP_PORT) {
        if (!ports.valid(attr->port_num)) return EINVAL;
        a.port = attr->port_num;
        m |= fw::kAttrPort;
    }
    if (mask & IBV_QP_PKEY_INDEX) {
        if (attr->pkey_index != 0) return EINVAL;
    }
    if (mask & IBV_QP_ACCESS_FLAGS) {
        if (attr->qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                      IBV_ACCESS_REMOTE_ATOMIC))
            return EINVAL;
        a.access = static_cast<std::uint32_t>(attr->qp_access_flags);
        m |= fw::kAttrAccess;
    }
    if (mask & IBV_QP_PATH_MTU) {
        if (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096) return EINVAL;
        const std::uint32_t bytes = mtu_bytes(attr->path_mtu);
        if (bytes > d->hca().port().max_mtu()) return EINVAL;
        a.path_mtu = bytes;
        m |= fw::kAttrPathMtu;
    }
    if (mask & IBV_QP_AV) {
        const ibv_ah_attr& ah = attr->ah_attr;
        // The primary path leaves from the QP's port (ah_attr.port_num, when
        // given, must be a port of the device).
        const unsigned port = (mask & IBV_QP_PORT) ? attr->port_num : a.port;
        if (ah.dlid == 0 || (ah.port_num != 0 && !ports.valid(ah.port_num)) || ah.sl > 15) return EINVAL;
        if (ah.is_global && ah.grh.sgid_index >= ports(port).gids().size()) return EINVAL;
        a.dlid = ah.dlid;
        a.sl = ah.sl;
        a.grh = global_route(ah);
        m |= fw::kAttrAv;
    }
    if (mask & IBV_QP_QKEY) {
        a.qkey = attr->qkey;
        m |= fw::kAttrQkey;
    }
    // Automatic path migration: the alternate path (its own port, which may
    // be the primary one) and the migration state software asks for.
    if (mask & IBV_QP_ALT_PATH) {
        const ibv_ah_attr& ah = attr->alt_ah_attr;
        if (!ports.valid(attr->alt_port_num) || ah.dlid == 0 || ah.sl > 15 || attr->alt_timeout > 31 ||
            attr->alt_pkey_index != 0 || (ah.port_num != 0 && ah.port_num != attr->alt_port_num))
            return EINVAL;
        if (ah.is_global && ah.grh.sgid_index >= ports(attr->alt_port_num).gids().size()) return EINVAL;
        a.alt.dlid = ah.dlid;
        a.alt.sl = ah.sl;
        a.alt.port = attr->alt_port_num;
        a.alt.timeout = attr->alt_timeout;
        a.alt.grh = global_route(ah);
        m |= fw::kAttrAltPath;
    }
    if (mask & IBV_QP_PATH_MIG_STATE) {
        // Read as the integer the program stored: a value outside the enum
        // is refused, not undefined.
        std::underlying_type_t<ibv_mig_state> mig;
        std::memcpy(&mig, &attr->path_mig_state, sizeof mig);
        switch (mig) {
        case IBV_MIG_MIGRATED: a.mig = hca::PathMigState::Migrated; break;
        case IBV_MIG_REARM: a.mig = hca::PathMigState::Rearm; break;
        case IBV_MIG_ARMED: a.mig = hca::PathMigState::Armed; break;
        default: return EINVAL;
        }
        // Arming needs an alternate path to arm.
        if (a.mig != hca::PathMigState::Migrated && a.alt.dlid == 0) return EINVAL;
        m |= fw::kAttrPathMigState;
    }
    if (next == IBV_QPS_SQD && cur != IBV_QPS_SQD) {
        // Each move to SQD says again whether the drained event is wanted.
        a.sqd_notify = (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && attr->en_sqd_async_notify;
        m |= fw::kAttrSqdNotify;
    }
    if (mask & IBV_QP_DEST_QPN) {
        if (attr->dest_qp_num > 0xffffff) return EINVAL;
        a.dest_qpn = attr->dest_qp_num;
        m |= fw::kAttrDestQpn;
    }
    if (mask & IBV_QP_RQ_PSN) {
        a.rq_psn = attr->rq_psn & 0xffffff;
        m |= fw::kAttrRqPsn;
    }
    if (mask & IBV_QP_SQ_PSN) {
        a.sq_psn = attr->sq_psn & 0xffffff;
        m |= fw::kAttrSqPsn;
    }
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) {
        if (attr->max_dest_rd_atomic > d->hca().params().max_qp_rd_atom) return EINVAL;
        a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
        m |= fw::kAttrMaxDestRdAtomic;
    }
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) {
        if (attr->max_rd_atomic > d->hca().params().max_qp_rd_atom) return EINVAL;
        a.max_rd_atomic = attr->max_rd_atomic;
        m |= fw::kAttrMaxRdAtomic;
    }
    if (mask & IBV_QP_MIN_RNR_TIMER) {
        if (attr->min_rnr_timer > 31) return EINVAL;
        a.min_rnr_timer = attr->min_rnr_timer;
        m |= fw::kAttrMinRnrTimer;
    }
    if (mask & IBV_QP_TIMEOUT) {
        if (attr->timeout > 31) return EINVAL;
        a.timeout = attr->timeout;
        m |= fw::kAttrTimeout;
    }
    if (mask & IBV_QP_RETRY_CNT) {
        if (attr->retry_cnt > 7) return EINVAL;
        a.retry_cnt = attr->retry_cnt;
        m |= fw::kAttrRetryCnt;
    }
    if (mask & IBV_QP_RNR_RETRY) {
        if (attr->rnr_retry > 7) return EINVAL;
        a.rnr_retry = attr->rnr_retry;
        m |= fw::kAttrRnrRetry;
    }
    const int err = d->modify_qp(*qp->dqp, a, m);
    if (!err) ibqp->state = next;
    return err;
}

int ibv_query_qp(struct ibv_qp* ibqp, struct ibv_qp_attr* attr, int, struct ibv_qp_init_attr* init) {
    if (!ibqp || !attr || !init) return EINVAL;
    SimQp* qp = sim(ibqp);
    drv(ibqp->context)->query_qp_state(*qp->dqp);
    ibqp->state = to_ibv(qp->dqp->state);
    const fw::QpAttributes& a = qp->dqp->attr;
    std::memset(attr, 0, sizeof *attr);
    attr->qp_state = to_ibv(qp->dqp->state);
    attr->cur_qp_state = attr->qp_state;
    attr->path_mtu = ibv_mtu_of(a.path_mtu);
    attr->qp_access_flags = static_cast<int>(a.access);
    attr->rq_psn = a.rq_psn;
    attr->sq_psn = a.sq_psn;
    attr->dest_qp_num = a.dest_qpn;
    attr->ah_attr = ah_attr_of(a.dlid, a.sl, a.grh);
    attr->qkey = a.qkey;
    attr->ah_attr.port_num = a.port;
    attr->port_num = a.port;
    if (a.alt.dlid != 0) {
        attr->alt_ah_attr = ah_attr_of(a.alt.dlid, a.alt.sl, a.alt.grh);
        attr->alt_ah_attr.port_num = a.alt.port;
        attr->alt_port_num = a.alt.port;
        attr->alt_timeout = a.alt.timeout;
    }
    attr->max_rd_atomic = a.max_rd_atomic;
    attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr->min_rnr_timer = a.min_rnr_timer;
    attr->timeout = a.timeout;
    attr->retry_cnt = a.retry_cnt;
    attr->rnr_retry = a.rnr_retry;
    attr->path_mig_state = a.mig == hca::PathMigState::Armed  ? IBV_MIG_ARMED
                           : a.mig == hca::PathMigState::Rearm ? IBV_MIG_REARM
                                                               : IBV_MIG_MIGRATED;
    attr->sq_draining = qp->dqp->state == hca::QpState::Sqd && !drv(ibqp->context)->hca().sq_drained(qp->dqp->qpn);
    attr->en_sqd_async_notify = a.sqd_notify;
    attr->cap = qp->init.cap;
    *init = qp->init;
    return 0;
}

// ---- Address handles ----

struct ibv_ah* ibv_create_ah(struct ibv_pd* pd, struct ibv_ah_attr* attr) {
    if (!pd || !attr) return fail<ibv_ah>(EINVAL);
    Driver* d = drv(pd->context);
    d->control_call();
    if (!d->hca().ports().valid(attr->port_num) || attr->dlid == 0 || attr->sl > 15) return fail<ibv_ah>(EINVAL);
    const auto& gids = d->hca().port(attr->port_num).gids();
    if (attr->is_global && attr->grh.sgid_index >= gids.size()) return fail<ibv_ah>(EINVAL);
    auto* ah = new (std::nothrow) SimAh{};
    if (!ah) return fail<ibv_ah>(ENOMEM);
    ah->ah.context = pd->context;
    ah->ah.pd = pd;
    ah->av.dlid = attr->dlid;
    ah->av.sl = attr->sl;
    if (attr->is_global) {
        ah->av.flags = hca::kDatagramGlobal;
        ah->av.sgid_index = attr->grh.sgid_index;
        ah->av.hop_limit = attr->grh.hop_limit;
        ah->av.traffic_class = attr->grh.traffic_class;
        ah->av.flow_label = attr->grh.flow_label & 0xfffff;
        std::memcpy(ah->av.dgid, attr->grh.dgid.raw, sizeof ah->av.dgid);
    }
    return &ah->ah;
}

int ibv_destroy_ah(struct ibv_ah* ah) {
    if (!ah) return EINVAL;
    drv(ah->context)->control_call();
    delete reinterpret_cast<SimAh*>(ah);
    return 0;
}

// The address vector that answers a received datagram (as libibverbs builds
// it): back to its source LID and SL, and through its GRH, swapped, if one came.
int ibv_init_ah_from_wc(struct ibv_context* context, uint8_t port_num, struct ibv_wc* wc, struct ibv_grh* grh,
                        struct ibv_ah_attr* ah_attr) {
    if (!context || !wc || !ah_attr || !drv(context)->hca().ports().valid(port_num)) return EINVAL;
    std::memset(ah_attr, 0, sizeof *ah_attr);
    ah_attr->dlid = wc->slid;
    ah_attr->sl = wc->sl;
    ah_attr->src_path_bits = wc->dlid_path_bits;
    ah_attr->port_num = port_num;
    if (wc->wc_flags & IBV_WC_GRH) {
        if (!grh) return EINVAL;
        // Our GID the sender addressed becomes the source GID index.
        const auto& gids = drv(context)->hca().port(port_num).gids();
        std::size_t index = gids.size();
        for (std::size_t i = 0; i < gids.size(); ++i)
            if (std::memcmp(gids[i].data(), grh->dgid.raw, 16) == 0) index = i;
        if (index == gids.size()) return ENOENT;
        ah_attr->is_global = 1;
        std::memcpy(ah_attr->grh.dgid.raw, grh->sgid.raw, 16);
        ah_attr->grh.sgid_index = static_cast<std::uint8_t>(index);
        ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
        ah_attr->grh.hop_limit = 0xff;
        ah_attr->grh.traffic_class = static_cast<std::uint8_t>((be32toh(grh->version_tclass_flow) >> 20) & 0xff);
    }
    return 0;
}

struct ibv_ah* ibv_create_ah_from_wc(struct ibv_pd* pd, struct ibv_wc* wc, struct ibv_grh* grh, uint8_t port_num) {
    if (!pd) return fail<ibv_ah>(EINVAL);
    ibv_ah_attr attr;
    const int err = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr);
    if (err) return fail<ibv_ah>(err);
    return ibv_create_ah(pd, &attr);
}

int ibv_destroy_qp(struct ibv_qp* ibqp) {
    if (!ibqp) return EINVAL;
    SimQp* qp = sim(ibqp);
    // Wait (in simulated time) until every asynchronous event reported on it
    // is acknowledged, as libibverbs does.
    SimContext* ctx = sim_ctx(ibqp->context);
    while (ibqp->events_completed != qp->async_events_reported) sc_core::wait(ctx->acked);
    const int err = drv(ibqp->context)->destroy_qp(qp->dqp);
    if (err) return err;
    pthread_mutex_destroy(&ibqp->mutex);
    pthread_cond_destroy(&ibqp->cond);
    delete qp;
    return 0;
}

// The strings are libibverbs' own, so programs print what they would on
// real hardware (host/verbs/verbs_abi.hpp).
const char* ibv_node_type_str(enum ibv_node_type node_type) { return hcasim::verbs::node_type_text(node_type); }
const char* ibv_port_state_str(enum ibv_port_state port_state) { return hcasim::verbs::port_state_text(port_state); }
const char* ibv_event_type_str(enum ibv_event_type event) { return hcasim::verbs::event_type_text(event); }

// The simulated adapter never pins the program's pages against fork()'s
// copy-on-write: there is nothing to prepare.
int ibv_fork_init(void) { return 0; }

const char* ibv_wc_status_str(enum ibv_wc_status status) { return hcasim::verbs::wc_status_text(status); }

}  // extern "C"
