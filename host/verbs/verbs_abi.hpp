// What the libibverbs ABI itself defines, needed both by the verbs
// personality (host/verbs) and by the drop-in libibverbs.so.1 that programs
// run by `hcasim run` load (host/remote/client): libibverbs' own strings,
// so programs print what they would on real hardware, and which object an
// asynchronous event names. Only <infiniband/verbs.h>: the drop-in library
// has nothing of the simulator in it.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>

namespace hcasim::verbs {

// The object struct ibv_async_event's element holds for an event type.
enum class AsyncElement { Cq, Srq, Qp, Port };

inline AsyncElement async_element(ibv_event_type t) {
    switch (t) {
    case IBV_EVENT_CQ_ERR: return AsyncElement::Cq;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: return AsyncElement::Srq;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: return AsyncElement::Qp;
    default: return AsyncElement::Port;  // port and device events
    }
}

inline const char* node_type_text(ibv_node_type node_type) {
    switch (node_type) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
    }
}

inline const char* port_state_text(ibv_port_state port_state) {
    switch (port_state) {
    case IBV_PORT_NOP: return "no state change (NOP)";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_ACTIVE_DEFER: return "active defer";
    default: return "unknown";
    }
}

inline const char* event_type_text(ibv_event_type event) {
    switch (event) {
    case IBV_EVENT_CQ_ERR: return "CQ error";
    case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
    case IBV_EVENT_QP_REQ_ERR: return "invalid request local work queue error";
    case IBV_EVENT_QP_ACCESS_ERR: return "local access violation work queue error";
    case IBV_EVENT_COMM_EST: return "communication established";
    case IBV_EVENT_SQ_DRAINED: return "send queue drained";
    case IBV_EVENT_PATH_MIG: return "path migrated";
    case IBV_EVENT_PATH_MIG_ERR: return "path migration request error";
    case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
    case IBV_EVENT_PORT_ACTIVE: return "port active";
    case IBV_EVENT_PORT_ERR: return "port error";
    case IBV_EVENT_LID_CHANGE: return "LID change";
    case IBV_EVENT_PKEY_CHANGE: return "P_Key change";
    case IBV_EVENT_SM_CHANGE: return "SM change";
    case IBV_EVENT_SRQ_ERR: return "SRQ catastrophic error";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ limit reached";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "last WQE reached";
    case IBV_EVENT_CLIENT_REREGISTER: return "client reregistration";
    case IBV_EVENT_GID_CHANGE: return "GID table change";
    case IBV_EVENT_WQ_FATAL: return "WQ fatal";
    default: return "unknown";
    }
}

inline const char* wc_status_text(ibv_wc_status status) {
    static const char* const kStrings[] = {
        "success",
        "local length error",
        "local QP operation error",
        "local EE context operation error",
        "local protection error",
        "Work Request Flushed Error",
        "memory management operation error",
        "bad response error",
        "local access error",
        "remote invalid request error",
        "remote access error",
        "remote operation error",
        "transport retry counter exceeded",
        "RNR retry counter exceeded",
        "local RDD violation error",
        "remote invalid RD request",
        "operation aborted",
        "invalid EE context number",
        "invalid EE context state",
        "fatal error",
        "response timeout error",
        "general error",
        "TM error",
        "TM rendezvous error",
    };
    const auto i = static_cast<std::size_t>(status);
    return i < sizeof kStrings / sizeof kStrings[0] ? kStrings[i] : "unknown";
}

}  // namespace hcasim::verbs
