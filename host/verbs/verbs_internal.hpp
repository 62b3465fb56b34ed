// What the two halves of the libibverbs personality share: the objects
// behind the pointers programs hold (verbs.cpp: the classic verbs;
// verbs_srq.cpp: shared receive queues; verbs_ex.cpp: the extended ones reached through struct verbs_context,
// struct ibv_cq_ex and struct ibv_qp_ex).
//
// Each object embeds the libibverbs struct a program sees as its first
// member, so the program's pointer converts back to the object. CQs and QPs
// embed the extended struct, whose first part is the classic one
// (ibv_cq_ex_to_cq() and ibv_qp_to_qp_ex() are casts).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "host/driver/driver.hpp"

namespace hcasim::verbs {

struct SimDevice {
    ibv_device dev;
    host::Driver* drv;
    int contexts;  // open contexts using it
    bool listed;   // still in a device list the program has not freed
};

// An extended context: the header's verbs_get_ctx() finds the verbs_context
// in front of the ibv_context programs hold.
struct SimContext {
    verbs_context vctx;
    host::Driver* drv;
    SimDevice* device;
    // Notified when the program acknowledges events: destroying an object
    // waits until every event reported on it has been acknowledged.
    sc_core::sc_event acked;
};

struct SimPd {
    ibv_pd pd;
    std::uint32_t pdn;
};

struct SimChannel {
    ibv_comp_channel ch;
    host::EventChannel events;
};

// The completion ibv_start_poll / ibv_next_poll stand on, as ibv_poll_cq
// would have returned it.
struct PolledCompletion {
    ibv_wc wc;
    std::uint64_t timestamp;  // adapter core clock cycles (hca::kCqeTimestampBits wide)
};

struct SimCq {
    union {
        ibv_cq_ex cq_ex;  // first: value-initialising SimCq zeroes all of it
        ibv_cq cq;
    };
    host::DriverCq* dcq;
    std::uint32_t async_events_reported = 0;
    bool extended = false;  // created by ibv_create_cq_ex
    PolledCompletion cur{};
};

// One work request built with the ibv_wr_* calls, kept until
// ibv_wr_complete posts the batch through the ibv_post_send path.
struct PendingWr {
    ibv_send_wr wr;
    std::vector<ibv_sge> sges;
    std::vector<std::uint8_t> inline_data;  // copied when set, as the API allows reusing the buffer at once
    bool inline_set = false;
};

struct WrBatch {
    std::vector<PendingWr> wrs;
    int err = 0;  // first error a setter found (reported by ibv_wr_complete)
};

struct SimQp {
    union {
        ibv_qp_ex qp_ex;  // first: value-initialising SimQp zeroes all of it
        ibv_qp qp;
    };
    host::DriverQp* dqp;
    ibv_qp_init_attr init;
    std::uint32_t async_events_reported = 0;
    // Created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: ibv_qp_to_qp_ex() gives
    // qp_ex and the ibv_wr_* calls build their batch here.
    std::unique_ptr<WrBatch> batch;
};

struct SimSrq {
    ibv_srq srq;
    host::DriverSrq* dsrq;
    std::uint32_t async_events_reported = 0;
};
inline SimSrq* sim(ibv_srq* s) { return reinterpret_cast<SimSrq*>(s); }

struct SimXrcd {
    ibv_xrcd xrcd;
    std::uint32_t xrcdn;
};

struct SimMr {
    ibv_mr mr;
};

// An address handle: the address vector a UD send WQE carries, already in
// the adapter's datagram segment form (no adapter resource, as with mlx4).
struct SimAh {
    ibv_ah ah;
    hca::DatagramSeg av;
};

inline SimContext* sim_ctx(ibv_context* c) {
    return reinterpret_cast<SimContext*>(reinterpret_cast<std::uint8_t*>(c) - offsetof(verbs_context, context));
}
inline host::Driver* drv(ibv_context* c) { return sim_ctx(c)->drv; }
inline SimCq* sim(ibv_cq* c) { return reinterpret_cast<SimCq*>(c); }
inline SimQp* sim(ibv_qp* q) { return reinterpret_cast<SimQp*>(q); }

template <typename T>
T* fail(int err) {
    errno = err;
    return nullptr;
}

// verbs.cpp
// What ibv_poll_cq reports for a completion the driver read.
void to_ibv_wc(const host::Completion& c, ibv_wc& w);
// Writes the WQEs of a list of send WRs and rings the send doorbell once,
// as ibv_post_send does. When a WR is refused the ones before it are posted
// (ibv_post_send) or, with all_or_nothing, none of the list is
// (ibv_wr_complete).
int post_send_list(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, bool all_or_nothing);

// verbs_srq.cpp
// ibv_post_srq_recv (the context's ops table).
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
// Copies a receive WR's scatter list for the driver; EINVAL if malformed.
int recv_sges(const ibv_recv_wr& wr, host::Sge* out, int max);
// Fills the SRQ and XRC ops of an extended context.
void init_srq_ops(verbs_context& v);
// ibv_create_qp_ex of an IBV_QPT_XRC_RECV QP in xrcd.
ibv_qp* create_xrc_target(ibv_context* context, ibv_qp_init_attr_ex* a);

// verbs_srq.cpp
// ibv_post_srq_recv (the context's ops table).
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
// Copies a receive WR's scatter list for the driver; EINVAL if malformed.
int recv_sges(const ibv_recv_wr& wr, host::Sge* out, int max);

// verbs_mw.cpp
// Fills the memory window ops of a context (ibv_alloc_mw, ibv_bind_mw,
// ibv_dealloc_mw).
void init_memory_window_ops(ibv_context& ctx);
// An IBV_WR_BIND_MW or IBV_WR_LOCAL_INV as the driver's request (r.bind
// points to bind); EINVAL if the QP or the WR cannot have it.
int memory_window_request(SimQp* qp, const ibv_send_wr& wr, host::SendRequest& r, hca::BindSeg& bind);

// verbs_ex.cpp
// Fills the extended ops of a context ibv_open_device is opening.
void init_extended_context(verbs_context& v);

}  // namespace hcasim::verbs
