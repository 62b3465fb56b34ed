// What the librdmacm personality keeps behind the pointers programs hold:
// event channels, ids and events embed the librdmacm structs as their first
// member, so a program's pointer converts back to the object.
//
// Each node's rdma_cm lives in its host kernel: its ids, the ports bound in
// each port space and the listens. The connections themselves are the
// adapter firmware's CM agent's (firmware/cm_agent_ib.cpp); addresses are
// resolved by the driver's IPoIB neighbour and SA clients.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include <systemc>

#include "firmware/cm_agent.hpp"
#include "host/driver/driver.hpp"

namespace hcasim::verbs {
void release_at_teardown(ibv_context* context, ibv_pd* pd, ibv_xrcd* xrcd);
}

namespace hcasim::rdmacm {

struct NodeCm;
struct SimId;

struct SimEvent {
    rdma_cm_event ev;  // first: the program's pointer
    std::vector<std::uint8_t> private_data;
    // The active side's REP, taken in rdma_get_cm_event: the QP is brought
    // up and the RTU sent before the program sees ESTABLISHED.
    bool connect_response = false;
    packet::ibcm::Rep rep;
    std::uint32_t handle = 0;  // the id it is about
    std::uint64_t join = 0;    // a multicast event's join (its token)
};

struct SimChannel {
    rdma_event_channel ch;  // first
    host::Driver* drv = nullptr;
    std::deque<SimEvent*> queue;
    sc_core::sc_event arrived;
    int ids = 0;  // ids reporting to it
};

enum class IdState {
    Idle,
    AddrQuery,
    AddrResolved,
    RouteQuery,
    RouteResolved,
    Listening,
    Connecting,     // REQ or SIDR_REQ sent
    ConnectReply,   // REP arrived, RTU not yet sent
    RequestHeld,    // passive: the REQ waits for accept or reject
    Accepting,      // passive: REP sent
    Connected,
    Disconnected,
};

// One rdma_join_multicast of an id; the port's membership is the driver's
// (Driver::join_group), shared by every join of the group on the node.
struct McastJoin {
    sockaddr_in addr{};
    host::Driver::Gid mgid{};
    std::uint16_t mlid = 0;
    void* context = nullptr;
    std::uint64_t token = 0;  // the driver's
    bool attached = false;    // the id's QP
    bool leaving = false;     // rdma_leave_multicast waits for its events
    // Its events reported to the program and acknowledged (a leave waits
    // until the two agree).
    int events_reported = 0, events_acked = 0;
};

struct SimId {
    rdma_cm_id id;  // first
    std::uint32_t handle = 0;
    NodeCm* node = nullptr;
    SimChannel* own_channel = nullptr;  // synchronous ids: their private channel
    bool sync = false;
    IdState state = IdState::Idle;
    std::uint16_t port = 0;  // bound port (host order), 0: none
    std::uint32_t comm_id = 0;  // the CM agent's connection
    bool has_connection = false;
    // Listening.
    int backlog = 0;
    int requests_queued = 0;  // CONNECT_REQUEST events not yet taken
    std::uint32_t listen_handle = 0;  // a request's listener
    // The connection: path, the REQ (sent or received), PSNs.
    ibv_sa_path_rec path{};
    packet::ibcm::Req req;
    std::uint32_t psn = 0;
    std::uint32_t remote_qpn = 0;
    std::uint32_t remote_qkey = 0;
    std::uint8_t responder_resources = 0, initiator_depth = 0;
    // Options.
    std::uint8_t tos = 0;
    bool ack_timeout_set = false;
    std::uint8_t ack_timeout = 0;
    bool reuseaddr = false;
    // rdma_create_ep of a passive id: every request's id gets a QP like this.
    bool has_qp_init = false;
    ibv_qp_init_attr qp_init{};
    // What rdma_create_qp or rdma_create_ep made and must free.
    bool own_cqs = false;
    // What rdma_destroy_qp could not destroy (a CQ another QP still uses),
    // left as librdmacm leaves it.
    std::vector<const void*> orphans;
    // rdma_create_srq of an XRC SRQ without a CQ made its CQ and channel
    // (the id's receive ones); rdma_destroy_srq frees them.
    bool own_srq_cq = false;
    bool own_pd = false;
    // Events reported to the program and acknowledged (rdma_destroy_id and
    // rdma_migrate_id wait until the two agree).
    int events_reported = 0, events_acked = 0;
    sc_core::sc_event acked;
    std::map<std::uint64_t, McastJoin> joins;  // by token, in the order made
    std::uint32_t resolve_generation = 0;  // an address or route query in flight
};

struct NodeCm {
    host::Driver* drv = nullptr;
    ibv_context* verbs = nullptr;  // the node's device, opened for every id
    ibv_pd* pd = nullptr;          // the default protection domain of rdma_create_qp(NULL pd)
    ibv_xrcd* xrcd = nullptr;      // librdmacm's XRC domain of the device (a private one), made on first use
    std::map<std::uint32_t, SimId*> ids;
    std::uint32_t next_handle = 1;
    std::map<std::pair<int, std::uint16_t>, std::vector<std::uint32_t>> ports;  // (port space, port) -> ids bound to it
    std::uint16_t next_ephemeral = 0;
    std::uint32_t psn_state = 0;
    NodeCm() = default;
    NodeCm(const NodeCm&) = delete;
    NodeCm& operator=(const NodeCm&) = delete;
    // The host is going: its device context, default PD and XRC domain go with it.
    ~NodeCm() { verbs::release_at_teardown(verbs, pd, xrcd); }
    SimId* find(std::uint32_t h) {
        auto it = ids.find(h);
        return it == ids.end() ? nullptr : it->second;
    }
};

}  // namespace hcasim::rdmacm
