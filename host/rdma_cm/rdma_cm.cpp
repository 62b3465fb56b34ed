// The librdmacm personality: the calls of <rdma/rdma_cma.h> and the
// non-inline ones of <rdma/rdma_verbs.h> on a simulated node, as librdmacm
// and the kernel's rdma_cm behave on InfiniBand.
//
// Addresses are IPv4 on each node's IPoIB interface. rdma_resolve_addr ARPs
// for the destination, rdma_resolve_route asks the SA for a PathRecord, and
// connections are IB CM exchanges of the adapter's CM agent: RDMA_PS_TCP and
// RDMA_PS_IB connect RC QPs (XRC initiator and target QPs for XRC ids) with
// REQ/REP/RTU, RDMA_PS_UDP and RDMA_PS_IPOIB resolve UD QPs with SIDR. As in librdmacm, the program's own thread brings
// its QP up (ibv_modify_qp) when it takes the events that need it, so that
// CPU time is the program's; the CM's messages and time-outs are the agent's.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "host/driver/host_thread.hpp"
#include "host/rdma_cm/rdma_cm_internal.hpp"
#include "model/packet/multicast.hpp"

using hcasim::host::Driver;
using namespace hcasim::rdmacm;
namespace ibcm = hcasim::packet::ibcm;
namespace fw = hcasim::firmware;

namespace hcasim::rdmacm {

namespace {

// librdmacm and the kernel's rdma_cm defaults.
constexpr std::uint8_t kCmResponseTimeout = 20;  // CMA_CM_RESPONSE_TIMEOUT: 4.096 us x 2^20
constexpr std::uint8_t kMaxCmRetries = 15;       // CMA_MAX_CM_RETRIES
constexpr int kMaxBacklog = 1024;                // net.rdma_ucm.max_backlog
constexpr std::size_t kCmaHeaderBytes = 36;      // version, IP version, port, two 16-byte addresses
constexpr std::uint16_t kEphemeralFirst = 32768;

int fail_errno(int err) {
    errno = err;
    return -1;
}

SimId* obj(rdma_cm_id* id) { return reinterpret_cast<SimId*>(id); }
SimChannel* obj(rdma_event_channel* ch) { return reinterpret_cast<SimChannel*>(ch); }
SimEvent* obj(rdma_cm_event* e) { return reinterpret_cast<SimEvent*>(e); }

NodeCm* node_of(Driver* d) {
    if (!d->rdma_cm_state) {
        auto n = std::make_shared<NodeCm>();
        n->drv = d;
        n->psn_state = 0x9e3779b9u ^ d->info().lid;
        n->next_ephemeral = kEphemeralFirst;
        d->rdma_cm_state = n;
    }
    return static_cast<NodeCm*>(d->rdma_cm_state.get());
}

// The node's device context, opened once (librdmacm opens every device).
ibv_context* device_of(NodeCm& n) {
    if (!n.verbs) {
        int num = 0;
        ibv_device** list = ibv_get_device_list(&num);
        if (list && num > 0) n.verbs = ibv_open_device(list[0]);
        ibv_free_device_list(list);
    }
    return n.verbs;
}

std::uint32_t ipv4_of(const sockaddr* a) {
    return ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr);
}
std::uint16_t port_of(const sockaddr* a) { return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port); }
void set_sin(sockaddr_in& s, std::uint32_t ip, std::uint16_t port) {
    s = sockaddr_in{};
    s.sin_family = AF_INET;
    s.sin_addr.s_addr = htonl(ip);
    s.sin_port = htons(port);
}

std::uint64_t service_id(int ps, std::uint16_t port) { return (std::uint64_t(ps) << 16) + port; }

bool is_ud(int ps) { return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB; }

void copy_gid(ibv_gid& g, const Driver::Gid& from) { std::memcpy(g.raw, from.data(), 16); }
Driver::Gid to_gid(const ibv_gid& g) {
    Driver::Gid r{};
    std::memcpy(r.data(), g.raw, 16);
    return r;
}

std::uint8_t mtu_enum(std::uint32_t bytes) {
    std::uint8_t e = 1;
    for (std::uint32_t b = 256; b < bytes && e < 5; b <<= 1) ++e;
    return e;
}

// The rdma_cm header at the front of a REQ's or SIDR_REQ's private data.
std::vector<std::uint8_t> cma_header(const SimId& s) {
    std::vector<std::uint8_t> h(kCmaHeaderBytes, 0);
    h[1] = 4 << 4;  // IPv4
    const std::uint16_t sport = port_of(&s.id.route.addr.src_addr);
    h[2] = static_cast<std::uint8_t>(sport >> 8);
    h[3] = static_cast<std::uint8_t>(sport);
    const std::uint32_t src = ipv4_of(&s.id.route.addr.src_addr), dst = ipv4_of(&s.id.route.addr.dst_addr);
    for (int i = 0; i < 4; ++i) {
        h[static_cast<std::size_t>(16 + i)] = static_cast<std::uint8_t>(src >> (24 - 8 * i));
        h[static_cast<std::size_t>(32 + i)] = static_cast<std::uint8_t>(dst >> (24 - 8 * i));
    }
    return h;
}

struct CmaHeader {
    std::uint16_t src_port = 0;
    std::uint32_t src = 0, dst = 0;
};
bool parse_cma_header(const std::vector<std::uint8_t>& pd, CmaHeader& h) {
    if (pd.size() < kCmaHeaderBytes || pd[0] != 0 || pd[1] >> 4 != 4) return false;
    h.src_port = static_cast<std::uint16_t>(pd[2] << 8 | pd[3]);
    for (int i = 0; i < 4; ++i) {
        h.src = h.src << 8 | pd[static_cast<std::size_t>(16 + i)];
        h.dst = h.dst << 8 | pd[static_cast<std::size_t>(32 + i)];
    }
    return true;
}

std::uint32_t next_psn(NodeCm& n) {
    n.psn_state = n.psn_state * 1664525u + 1013904223u;
    return (n.psn_state >> 8) & 0xffffff;
}

// Queues an event for the id's channel after the interrupt that carries it
// reaches the host. Runs in the simulation kernel or a host thread.
void post_event(NodeCm& n, std::uint32_t handle, rdma_cm_event_type type, int status,
                std::unique_ptr<SimEvent> e = nullptr) {
    if (!e) e = std::make_unique<SimEvent>();
    e->ev.event = type;
    e->ev.status = status;
    e->handle = handle;
    n.drv->after_interrupt([&n, handle, ev = std::shared_ptr<SimEvent>(e.release())]() mutable {
        SimId* s = n.find(handle);
        if (!s || !s->id.channel) return;
        if (ev->join) {
            // A multicast event of a join being left is not reported.
            auto j = s->joins.find(ev->join);
            if (j == s->joins.end() || j->second.leaving) return;
        }
        SimEvent* raw = new SimEvent(std::move(*ev));
        raw->ev.id = &s->id;
        if (raw->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            // The request's own id reports it; the listener is its listen_id.
            raw->ev.listen_id = n.find(s->listen_handle) ? &n.find(s->listen_handle)->id : nullptr;
        }
        if (!raw->private_data.empty()) {
            raw->ev.param.conn.private_data = raw->private_data.data();
            raw->ev.param.conn.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(raw->private_data.size(), 255));
        }
        SimChannel* ch = obj(s->id.channel);
        ch->queue.push_back(raw);
        const std::uint64_t one = 1;
        if (ch->ch.fd >= 0 && ::write(ch->ch.fd, &one, sizeof one) < 0) {
            // An eventfd write only fails on overflow: the queue is what counts.
        }
        ch->arrived.notify(sc_core::SC_ZERO_TIME);
    });
}

// Fills the private data of an event the way librdmacm reports it: the whole
// area the message has (the wire does not carry its length).
std::unique_ptr<SimEvent> event_with(std::vector<std::uint8_t> pd) {
    auto e = std::make_unique<SimEvent>();
    e->private_data = std::move(pd);
    return e;
}

void release_port(SimId& s) {
    if (!s.port) return;
    auto it = s.node->ports.find({s.id.ps, s.port});
    if (it != s.node->ports.end()) {
        auto& owners = it->second;
        owners.erase(std::remove(owners.begin(), owners.end(), s.handle), owners.end());
        if (owners.empty()) s.node->ports.erase(it);
    }
    s.port = 0;
}

// The kernel's cma_check_port: may s join the ids bound to its port? Ids
// that both allow reuse share; otherwise the wildcard address conflicts with
// every address and a specific address with itself.
int check_port(SimId& s, const std::vector<std::uint32_t>& owners, bool reuseaddr) {
    const std::uint32_t addr = ipv4_of(&s.id.route.addr.src_addr);
    for (std::uint32_t h : owners) {
        SimId* cur = s.node->find(h);
        if (!cur || cur == &s) continue;
        if (reuseaddr && cur->reuseaddr) continue;
        const std::uint32_t cur_addr = ipv4_of(&cur->id.route.addr.src_addr);
        if (addr == INADDR_ANY || cur_addr == INADDR_ANY) return EADDRNOTAVAIL;
        if (addr == cur_addr) return EADDRINUSE;
    }
    return 0;
}

int bind_port(SimId& s, std::uint16_t port) {
    NodeCm& n = *s.node;
    if (port == 0) {
        for (int tries = 0; tries < 65536 - kEphemeralFirst; ++tries) {
            const std::uint16_t p = n.next_ephemeral;
            n.next_ephemeral = n.next_ephemeral == 65535 ? kEphemeralFirst : static_cast<std::uint16_t>(n.next_ephemeral + 1);
            if (!n.ports.count({s.id.ps, p})) {
                port = p;
                break;
            }
        }
        if (port == 0) return EADDRINUSE;
    } else if (auto it = n.ports.find({s.id.ps, port}); it != n.ports.end()) {
        if (int err = check_port(s, it->second, s.reuseaddr)) return err;
    }
    release_port(s);
    s.port = port;
    n.ports[{static_cast<int>(s.id.ps), port}].push_back(s.handle);
    reinterpret_cast<sockaddr_in&>(s.id.route.addr.src_addr).sin_port = htons(port);
    return 0;
}

// The sync ids' wait (librdmacm's ucma_complete): takes the id's next event
// and turns a failure into errno.
int complete(SimId& s) {
    if (!s.sync) return 0;
    if (s.id.event) {
        rdma_ack_cm_event(s.id.event);
        s.id.event = nullptr;
    }
    if (rdma_get_cm_event(s.id.channel, &s.id.event)) return -1;
    const rdma_cm_event& e = *s.id.event;
    if (e.status) {
        if (e.event == RDMA_CM_EVENT_REJECTED) return fail_errno(ECONNREFUSED);
        return fail_errno(e.status < 0 ? -e.status : e.status);
    }
    return 0;
}

void fill_path(SimId& s, const hcasim::host::PathInfo& p) {
    ibv_sa_path_rec& r = s.path;
    r = ibv_sa_path_rec{};
    std::memcpy(r.sgid.raw, p.sgid.data(), 16);
    std::memcpy(r.dgid.raw, p.dgid.data(), 16);
    r.slid = htons(p.slid);
    r.dlid = htons(p.dlid);
    r.pkey = htons(p.pkey);
    r.sl = p.sl;
    r.mtu = p.mtu;
    r.mtu_selector = 2;  // exactly
    r.rate = p.rate;
    r.rate_selector = 2;
    r.packet_life_time = p.packet_life;
    r.packet_life_time_selector = 2;
    r.numb_path = 1;
    r.reversible = 1;
    r.hop_limit = 0;
    r.traffic_class = s.tos;
    s.id.route.path_rec = &s.path;
    s.id.route.num_paths = 1;
}

// The QP's local ACK time-out: the option when set, else the path's.
std::uint8_t ack_timeout(const SimId& s) {
    if (s.ack_timeout_set) return s.ack_timeout;
    return static_cast<std::uint8_t>(std::min(31, s.path.packet_life_time + 1));
}

int modify(ibv_qp* qp, ibv_qp_attr& a, int mask) { return ibv_modify_qp(qp, &a, mask); }

// INIT with the access rights rdma_cm gives connected QPs.
int qp_to_init(SimId& s, bool remote_read) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = s.id.port_num ? s.id.port_num : 1;
    a.pkey_index = 0;
    if (s.id.qp->qp_type == IBV_QPT_UD) {
        a.qkey = RDMA_UDP_QKEY;
        return modify(s.id.qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    }
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | (remote_read ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
    return modify(s.id.qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

// RTR and RTS toward the peer: remote_psn is what it starts sending with.
// As ib_cm's QP attributes: an XRC initiator gets no responder attributes
// (it receives nothing), an XRC target no requester ones (it sends only
// responses).
int qp_to_rts(SimId& s, std::uint32_t remote_qpn, std::uint32_t remote_psn, std::uint8_t retry, std::uint8_t rnr_retry) {
    if (int err = qp_to_init(s, s.responder_resources > 0)) return err;
    const ibv_qp_type type = s.id.qp->qp_type;
    int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (type != IBV_QPT_XRC_SEND) rtr_mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT;
    if (type != IBV_QPT_XRC_RECV) rts_mask |= IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(s.path.mtu);
    a.dest_qp_num = remote_qpn;
    a.rq_psn = remote_psn;
    a.max_dest_rd_atomic = s.responder_resources;
    a.min_rnr_timer = 0;
    a.ah_attr.dlid = ntohs(s.path.dlid);
    a.ah_attr.sl = s.path.sl;
    a.ah_attr.static_rate = 0;
    a.ah_attr.port_num = s.id.port_num ? s.id.port_num : 1;
    if (int err = modify(s.id.qp, a, rtr_mask)) return err;
    ibv_qp_attr r{};
    r.qp_state = IBV_QPS_RTS;
    r.sq_psn = s.psn;
    r.max_rd_atomic = s.initiator_depth;
    r.timeout = ack_timeout(s);
    r.retry_cnt = retry;
    r.rnr_retry = rnr_retry;
    return modify(s.id.qp, r, rts_mask);
}

// librdmacm's XRC domain of the device (ucma_get_xrcd): a private one,
// opened on first use and kept.
ibv_xrcd* node_xrcd(NodeCm& n, ibv_context* verbs) {
    if (!n.xrcd) {
        ibv_xrcd_init_attr a{};
        a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        a.fd = -1;
        a.oflags = O_CREAT;
        n.xrcd = ibv_open_xrcd(verbs, &a);
    }
    return n.xrcd;
}

// Frees the CQs and channels rdma_cm made for an id (either may be absent).
void destroy_cqs(SimId& s, bool send, bool recv) {
    // One still in use (a QP of another id shares it) stays, as with
    // librdmacm, which ignores the failure; the id forgets it either way.
    auto cq_gone = [&s](ibv_cq*& cq) {
        if (cq && ibv_destroy_cq(cq)) s.orphans.push_back(cq);
        cq = nullptr;
    };
    auto channel_gone = [&s](ibv_comp_channel*& ch) {
        if (ch && ibv_destroy_comp_channel(ch)) s.orphans.push_back(ch);
        ch = nullptr;
    };
    if (send) {
        cq_gone(s.id.send_cq);
        channel_gone(s.id.send_cq_channel);
    }
    if (recv) {
        cq_gone(s.id.recv_cq);
        channel_gone(s.id.recv_cq_channel);
    }
}

// One CQ with its completion channel, the id its context (rdma_get_send_comp
// and rdma_get_recv_comp rely on it): 0, or an errno with nothing left made.
int make_cq(SimId& s, int size, ibv_cq*& cq, ibv_comp_channel*& channel) {
    channel = ibv_create_comp_channel(s.id.verbs);
    if (!channel) return errno ? errno : ENOMEM;
    cq = ibv_create_cq(s.id.verbs, std::max(1, size), &s.id, channel, 0);
    if (!cq) {
        const int err = errno ? errno : ENOMEM;
        ibv_destroy_comp_channel(channel);
        channel = nullptr;
        return err;
    }
    return 0;
}

int qp_to_error(SimId& s) {
    if (!s.id.qp) return 0;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    return modify(s.id.qp, a, IBV_QP_STATE);
}

// A UD QP is usable as soon as it exists.
int ud_qp_up(SimId& s) {
    if (int err = qp_to_init(s, false)) return err;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    if (int err = modify(s.id.qp, a, IBV_QP_STATE)) return err;
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = s.psn;
    return modify(s.id.qp, a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

void fill_ah(const SimId& s, ibv_ah_attr& ah, std::uint16_t dlid) {
    ah = ibv_ah_attr{};
    ah.dlid = dlid;
    ah.sl = s.path.sl;
    ah.port_num = s.id.port_num ? s.id.port_num : 1;
}

bool is_ipv4_multicast(std::uint32_t ip) { return (ip >> 28) == 0xe; }

// The kernel's cma_set_mgid for IPv4 (ip_ib_mc_map): the IPoIB broadcast
// group's prefix ff12:401b (link-local scope) and P_Key 0xffff, then the
// address's low 28 bits. RDMA_PS_UDP puts 0x01 where IPoIB has 0x1b, so
// that rdma_cm's groups are its own.
Driver::Gid mgid_of(int ps, std::uint32_t ip) {
    Driver::Gid g{};
    g[0] = 0xff;
    g[1] = 0x12;
    g[2] = 0x40;
    g[3] = ps == RDMA_PS_UDP ? 0x01 : 0x1b;
    g[4] = 0xff;
    g[5] = 0xff;
    g[12] = static_cast<std::uint8_t>((ip >> 24) & 0x0f);
    g[13] = static_cast<std::uint8_t>(ip >> 16);
    g[14] = static_cast<std::uint8_t>(ip >> 8);
    g[15] = static_cast<std::uint8_t>(ip);
    return g;
}

// The SA's answer to a join, or the loss of the membership later, reported
// on the id with the join's context in the private data, as librdmacm does.
void on_join_answer(NodeCm& n, std::uint32_t handle, std::uint64_t token, int err, const Driver::McastGroup& g) {
    SimId* s = n.find(handle);
    if (!s || !s->joins.count(token)) return;
    McastJoin& j = s->joins[token];
    auto ev = std::make_unique<SimEvent>();
    ev->join = token;
    ev->ev.param.ud.private_data = j.context;
    if (err) {
        post_event(n, handle, RDMA_CM_EVENT_MULTICAST_ERROR, -err, std::move(ev));
        return;
    }
    j.mlid = g.mlid;
    rdma_ud_param& ud = ev->ev.param.ud;
    ud.qp_num = 0xffffff;  // the multicast QPN
    ud.qkey = g.qkey;
    ud.ah_attr.dlid = g.mlid;
    ud.ah_attr.sl = g.sl;
    ud.ah_attr.static_rate = g.rate;
    ud.ah_attr.is_global = 1;
    copy_gid(ud.ah_attr.grh.dgid, g.mgid);
    ud.ah_attr.grh.flow_label = g.flow_label;
    ud.ah_attr.grh.hop_limit = g.hop_limit;
    ud.ah_attr.grh.traffic_class = g.traffic_class;
    ud.ah_attr.port_num = s->id.port_num ? s->id.port_num : 1;
    post_event(n, handle, RDMA_CM_EVENT_MULTICAST_JOIN, 0, std::move(ev));
}

void on_join_lost(NodeCm& n, std::uint32_t handle, std::uint64_t token) {
    SimId* s = n.find(handle);
    if (!s || !s->joins.count(token)) return;
    auto ev = std::make_unique<SimEvent>();
    ev->join = token;
    ev->ev.param.ud.private_data = s->joins[token].context;
    post_event(n, handle, RDMA_CM_EVENT_MULTICAST_ERROR, -ENETRESET, std::move(ev));
}

// The CM agent's events for one connected id, turned into rdma_cm events.
// The listener on a port for an address: the one bound to that address, or
// else one bound to the wildcard (any listener at all when any_at_all).
std::uint32_t listener_on(NodeCm& n, const std::pair<int, std::uint16_t>& key, std::uint32_t addr, bool any_at_all) {
    auto it = n.ports.find(key);
    if (it == n.ports.end()) return 0;
    std::uint32_t wildcard = 0;
    for (std::uint32_t h : it->second) {
        SimId* l = n.find(h);
        if (!l || l->state != IdState::Listening) continue;
        const std::uint32_t bound = ipv4_of(&l->id.route.addr.src_addr);
        if (any_at_all || bound == addr) return h;
        if (bound == INADDR_ANY && !wildcard) wildcard = h;
    }
    return wildcard;
}

fw::IbCmHandler connection_handler(NodeCm& n, std::uint32_t handle);

void on_connection_event(NodeCm& n, std::uint32_t handle, const fw::IbCmEvent& e) {
    SimId* s = n.find(handle);
    if (!s) return;
    using T = fw::IbCmEvent::Type;
    switch (e.type) {
    case T::RepReceived: {
        s->state = IdState::ConnectReply;
        auto ev = event_with(e.rep.private_data);
        ev->connect_response = true;
        ev->rep = e.rep;
        post_event(n, handle, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, std::move(ev));
        return;
    }
    case T::Established:
        s->state = IdState::Connected;
        post_event(n, handle, RDMA_CM_EVENT_ESTABLISHED, 0, event_with(e.private_data));
        return;
    case T::Rejected:
        s->state = IdState::Disconnected;
        s->has_connection = false;
        post_event(n, handle, RDMA_CM_EVENT_REJECTED, e.reason, event_with(e.private_data));
        return;
    case T::Unreachable:
        s->state = IdState::Disconnected;
        s->has_connection = false;
        post_event(n, handle, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
        return;
    case T::DreqReceived:
    case T::DisconnectDone:
        if (s->state == IdState::Disconnected) return;  // told already
        s->state = IdState::Disconnected;
        post_event(n, handle, RDMA_CM_EVENT_DISCONNECTED, 0, event_with(e.private_data));
        return;
    case T::TimewaitExit:
        s->has_connection = false;
        post_event(n, handle, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
        return;
    case T::SidrRepReceived: {
        s->has_connection = false;
        const auto& r = e.sidr_rep;
        if (r.status != ibcm::SidrStatus::Valid) {
            // The kernel reports the SIDR_REP's status itself (2: rejected).
            s->state = IdState::Disconnected;
            post_event(n, handle, RDMA_CM_EVENT_UNREACHABLE, static_cast<int>(r.status), event_with(r.private_data));
            return;
        }
        s->state = IdState::Connected;
        s->remote_qpn = r.qpn;
        s->remote_qkey = r.qkey;
        auto ev = event_with(r.private_data);
        ev->ev.param.ud.qp_num = r.qpn;
        ev->ev.param.ud.qkey = r.qkey;
        fill_ah(*s, ev->ev.param.ud.ah_attr, e.remote_lid);
        post_event(n, handle, RDMA_CM_EVENT_ESTABLISHED, 0, std::move(ev));
        return;
    }
    case T::SidrTimeout:
        s->has_connection = false;
        s->state = IdState::Disconnected;
        post_event(n, handle, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
        return;
    case T::ReqReceived:
    case T::SidrReqReceived: return;  // listeners only
    }
}

fw::IbCmHandler connection_handler(NodeCm& n, std::uint32_t handle) {
    return [&n, handle](const fw::IbCmEvent& e) { on_connection_event(n, handle, e); };
}

SimId* new_id(NodeCm& n, rdma_event_channel* channel, void* context, rdma_port_space ps, ibv_qp_type qp_type) {
    auto* s = new SimId{};
    s->handle = n.next_handle++;
    s->node = &n;
    s->id.channel = channel;
    s->id.context = context;
    s->id.ps = ps;
    s->id.qp_type = qp_type;
    s->id.port_num = 1;
    s->psn = next_psn(n);
    n.ids[s->handle] = s;
    if (channel) obj(channel)->ids++;
    return s;
}

// A listener's REQs and SIDR_REQs: each becomes a new id reported with
// CONNECT_REQUEST, unless the backlog of requests not yet taken is full.
void on_listen_event(NodeCm& n, std::uint32_t listen_handle, const fw::IbCmEvent& e) {
    SimId* l = n.find(listen_handle);
    fw::CmAgent& cm = *n.drv->cm();
    const bool sidr = e.type == fw::IbCmEvent::Type::SidrReqReceived;
    if (!sidr && e.type != fw::IbCmEvent::Type::ReqReceived) return;
    const std::vector<std::uint8_t>& pd = sidr ? e.sidr_req.private_data : e.req.private_data;
    CmaHeader h;
    if (!l || l->state != IdState::Listening || l->requests_queued >= l->backlog || !parse_cma_header(pd, h)) {
        // The kernel's ucma refuses a request beyond the backlog: the new
        // connection is destroyed, which rejects it.
        if (sidr) {
            ibcm::SidrRep rep;
            rep.status = ibcm::SidrStatus::Rejected;
            cm.ib_send_sidr_rep(e.id, rep);
        } else {
            cm.ib_send_rej(e.id, fw::kRejConsumer, {});
        }
        return;
    }
    SimId* s = new_id(n, l->id.channel, l->id.context, l->id.ps, l->id.qp_type);
    s->listen_handle = listen_handle;
    s->id.verbs = l->id.verbs;
    s->sync = l->sync;
    s->comm_id = e.id;
    s->has_connection = true;
    s->state = IdState::RequestHeld;
    s->req = e.req;
    s->remote_qpn = e.req.local_qpn;
    set_sin(s->id.route.addr.src_sin, h.dst, l->port);
    set_sin(s->id.route.addr.dst_sin, h.src, h.src_port);
    hcasim::host::PathInfo p;
    p.slid = n.drv->hca().port().lid();
    p.dlid = e.remote_lid;
    p.sl = sidr ? 0 : e.req.primary.sl;
    p.mtu = sidr ? mtu_enum(n.drv->hca().port().max_mtu()) : e.req.path_mtu;
    p.packet_life = sidr ? 0 : static_cast<std::uint8_t>(e.req.primary.local_ack_timeout ? e.req.primary.local_ack_timeout - 1 : 0);
    p.sgid = e.req.primary.remote_gid;
    p.dgid = e.req.primary.local_gid;
    fill_path(*s, p);
    copy_gid(s->id.route.addr.addr.ibaddr.sgid, p.sgid);
    copy_gid(s->id.route.addr.addr.ibaddr.dgid, p.dgid);
    s->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
    cm.ib_set_handler(e.id, connection_handler(n, s->handle));
    l->requests_queued++;
    auto ev = event_with(std::vector<std::uint8_t>(pd.begin() + kCmaHeaderBytes, pd.end()));
    if (!sidr) {
        ev->ev.param.conn.responder_resources = e.req.responder_resources;
        ev->ev.param.conn.initiator_depth = e.req.initiator_depth;
        ev->ev.param.conn.flow_control = e.req.end_to_end_flow_control;
        ev->ev.param.conn.retry_count = e.req.retry_count;
        ev->ev.param.conn.rnr_retry_count = e.req.rnr_retry_count;
        ev->ev.param.conn.srq = e.req.srq;
        ev->ev.param.conn.qp_num = e.req.local_qpn;
    }
    post_event(n, s->handle, RDMA_CM_EVENT_CONNECT_REQUEST, 0, std::move(ev));
}

// A REQ or SIDR_REQ for a listened port: the listener for the address in its
// rdma_cm header takes it (none rejects it).
void on_port_request(NodeCm& n, const std::pair<int, std::uint16_t>& key, const fw::IbCmEvent& e) {
    const bool sidr = e.type == fw::IbCmEvent::Type::SidrReqReceived;
    CmaHeader h;
    const bool parsed = parse_cma_header(sidr ? e.sidr_req.private_data : e.req.private_data, h);
    on_listen_event(n, parsed ? listener_on(n, key, h.dst, false) : 0, e);
}

NodeCm* current_node() {
    Driver* d = host::current_driver();
    return d ? node_of(d) : nullptr;
}

// Takes the events of the id that are still queued (destroy), or only
// those of one of its multicast joins (leave).
void drop_queued(SimChannel& ch, std::uint32_t handle, std::uint64_t join = 0) {
    for (auto it = ch.queue.begin(); it != ch.queue.end();) {
        if ((*it)->handle == handle && (!join || (*it)->join == join)) {
            delete *it;
            std::uint64_t v = 1;
            if (ch.ch.fd >= 0 && ::read(ch.ch.fd, &v, sizeof v) < 0) {
                // The count matches the queue: never empty here.
            }
            it = ch.queue.erase(it);
        } else {
            ++it;
        }
    }
}

// Moves the id, and its events still queued, to another channel.
void move_to_channel(SimId& s, SimChannel* to) {
    SimChannel* from = obj(s.id.channel);
    if (from == to) return;
    if (from) {
        for (auto it = from->queue.begin(); it != from->queue.end();) {
            if ((*it)->handle != s.handle) {
                ++it;
                continue;
            }
            to->queue.push_back(*it);
            std::uint64_t v = 1;
            if (from->ch.fd >= 0 && ::read(from->ch.fd, &v, sizeof v) < 0) {
                // The count matches the queue: never empty here.
            }
            if (to->ch.fd >= 0 && ::write(to->ch.fd, &v, sizeof v) < 0) {
                // Only on overflow: the queue is what counts.
            }
            it = from->queue.erase(it);
        }
        from->ids--;
    }
    to->ids++;
    if (!to->queue.empty()) to->arrived.notify(sc_core::SC_ZERO_TIME);
    s.id.channel = &to->ch;
}

rdma_conn_param default_conn_param(NodeCm& n) {
    rdma_conn_param p{};
    const auto depth = static_cast<std::uint8_t>(std::min<std::uint32_t>(n.drv->hca().params().max_qp_rd_atom, 255));
    p.responder_resources = depth;
    p.initiator_depth = depth;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    return p;
}

int connect_ud(SimId& s, const rdma_conn_param* p) {
    NodeCm& n = *s.node;
    ibcm::SidrReq req;
    req.pkey = 0xffff;
    req.service_id = service_id(s.id.ps, port_of(&s.id.route.addr.dst_addr));
    req.private_data = cma_header(s);
    if (p && p->private_data_len) {
        if (p->private_data_len > ibcm::kSidrReqPrivateBytes - kCmaHeaderBytes) return fail_errno(EINVAL);
        const auto* b = static_cast<const std::uint8_t*>(p->private_data);
        req.private_data.insert(req.private_data.end(), b, b + p->private_data_len);
    }
    n.drv->firmware_mailbox();
    const hcasim::sim::Tick wait = fw::cm_time(kCmResponseTimeout) + 2 * fw::cm_time(s.path.packet_life_time);
    s.comm_id = n.drv->cm()->ib_send_sidr_req(std::move(req), ntohs(s.path.dlid), wait, kMaxCmRetries,
                                              connection_handler(n, s.handle));
    s.has_connection = true;
    s.state = IdState::Connecting;
    return complete(s);
}

}  // namespace
}  // namespace hcasim::rdmacm

extern "C" {

rdma_event_channel* rdma_create_event_channel(void) {
    Driver* d = hcasim::host::current_driver();
    if (!d) {
        errno = ENODEV;
        return nullptr;
    }
    d->control_call();
    auto* ch = new SimChannel{};
    ch->drv = d;
    ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ch->ch.fd < 0) {
        delete ch;
        return nullptr;
    }
    return &ch->ch;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
    if (!channel) return;
    SimChannel* ch = obj(channel);
    ch->drv->control_call();
    for (SimEvent* e : ch->queue) delete e;
    if (ch->ch.fd >= 0) ::close(ch->ch.fd);
    delete ch;
}

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
    NodeCm* n = current_node();
    if (!n) return fail_errno(ENODEV);
    if (!id) return fail_errno(EINVAL);
    ibv_qp_type type;
    switch (ps) {
    case RDMA_PS_TCP:
    case RDMA_PS_IB: type = IBV_QPT_RC; break;
    case RDMA_PS_UDP:
    case RDMA_PS_IPOIB: type = IBV_QPT_UD; break;
    default: return fail_errno(EINVAL);
    }
    n->drv->control_call();
    SimChannel* own = nullptr;
    if (!channel) {
        // A synchronous id: its calls wait for their own events.
        rdma_event_channel* c = rdma_create_event_channel();
        if (!c) return -1;
        own = obj(c);
        channel = c;
    }
    SimId* s = new_id(*n, channel, context, ps, type);
    s->own_channel = own;
    s->sync = own != nullptr;
    *id = &s->id;
    return 0;
}

int rdma_destroy_id(rdma_cm_id* id) {
    if (!id) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    if (s->id.event) {
        rdma_ack_cm_event(s->id.event);
        s->id.event = nullptr;
    }
    // Every multicast group the id joined is left.
    for (auto& [token, j] : s->joins) {
        if (j.attached && s->id.qp) ibv_detach_mcast(s->id.qp, reinterpret_cast<const ibv_gid*>(j.mgid.data()), j.mlid);
        n.drv->leave_group(token);
    }
    s->joins.clear();
    if (s->has_connection) n.drv->cm()->ib_destroy(s->comm_id);
    const auto key = std::make_pair(static_cast<int>(s->id.ps), s->port);
    const bool was_listening = s->state == IdState::Listening;
    release_port(*s);
    if (was_listening && !listener_on(n, key, INADDR_ANY, true)) n.drv->cm()->ib_cancel_listen(service_id(key.first, key.second));
    n.ids.erase(s->handle);  // no more events
    // librdmacm waits until every event reported on the id is acknowledged.
    while (s->events_acked < s->events_reported) sc_core::wait(s->acked);
    if (SimChannel* ch = obj(s->id.channel)) {
        drop_queued(*ch, s->handle);
        ch->ids--;
    }
    if (s->own_channel) rdma_destroy_event_channel(&s->own_channel->ch);
    delete s;
    return 0;
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
    if (!id) return fail_errno(EINVAL);
    SimId* s = obj(id);
    s->node->drv->control_call();
    // Events reported on the old channel must be acknowledged first; those
    // still queued there move with the id.
    while (s->events_acked < s->events_reported) sc_core::wait(s->acked);
    if (!channel) {
        // Synchronous from now on, on a channel of its own.
        if (s->own_channel) return 0;
        rdma_event_channel* c = rdma_create_event_channel();
        if (!c) return -1;
        move_to_channel(*s, obj(c));
        s->own_channel = obj(c);
        s->sync = true;
        return 0;
    }
    SimChannel* old_own = s->own_channel;
    move_to_channel(*s, obj(channel));
    if (old_own && old_own != obj(channel)) rdma_destroy_event_channel(&old_own->ch);
    s->own_channel = nullptr;
    s->sync = false;
    return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
    if (!id || !addr) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    if (addr->sa_family != AF_INET) return fail_errno(EAFNOSUPPORT);
    if (s->port) return fail_errno(EINVAL);  // bound already
    const std::uint32_t ip = ipv4_of(addr);
    if (ip != INADDR_ANY && ip != n.drv->ip() && (ip >> 24) != 127) return fail_errno(EADDRNOTAVAIL);
    set_sin(s->id.route.addr.src_sin, ip, 0);
    if (int err = bind_port(*s, port_of(addr))) return fail_errno(err);
    if (ip != INADDR_ANY) {
        s->id.verbs = device_of(n);
        const auto gid = n.drv->hca().port().gids().at(0);
        copy_gid(s->id.route.addr.addr.ibaddr.sgid, gid);
        s->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
    }
    return 0;
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
    if (!id || !dst_addr || timeout_ms <= 0) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    if (dst_addr->sa_family != AF_INET || (src_addr && src_addr->sa_family != AF_INET)) return fail_errno(EAFNOSUPPORT);
    if (!s->port) {
        sockaddr_in any{};
        any.sin_family = AF_INET;
        any.sin_addr.s_addr = htonl(src_addr ? ipv4_of(src_addr) : n.drv->ip());
        any.sin_port = src_addr ? htons(port_of(src_addr)) : 0;
        if (ipv4_of(reinterpret_cast<sockaddr*>(&any)) == INADDR_ANY) any.sin_addr.s_addr = htonl(n.drv->ip());
        if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&any))) return -1;
    } else {
        n.drv->control_call();
    }
    if (s->state != IdState::Idle && s->state != IdState::AddrResolved) return fail_errno(EINVAL);
    if (ipv4_of(&s->id.route.addr.src_addr) == INADDR_ANY) {
        s->id.route.addr.src_sin.sin_addr.s_addr = htonl(n.drv->ip());
    }
    s->id.verbs = device_of(n);
    copy_gid(s->id.route.addr.addr.ibaddr.sgid, n.drv->hca().port().gids().at(0));
    s->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
    const std::uint32_t dst = ipv4_of(dst_addr);
    std::memcpy(&s->id.route.addr.dst_storage, dst_addr, sizeof(sockaddr_in));
    s->state = IdState::AddrQuery;
    const std::uint32_t handle = s->handle, generation = ++s->resolve_generation;
    NodeCm* np = &n;
    auto done = [np, handle, generation](int err, std::uint16_t, const Driver::Gid& gid) {
        SimId* x = np->find(handle);
        if (!x || x->resolve_generation != generation || x->state != IdState::AddrQuery) return;
        if (err) {
            x->state = IdState::Idle;
            post_event(*np, handle, RDMA_CM_EVENT_ADDR_ERROR, -err);
            return;
        }
        copy_gid(x->id.route.addr.addr.ibaddr.dgid, gid);
        x->state = IdState::AddrResolved;
        post_event(*np, handle, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    };
    if (is_ipv4_multicast(dst)) {
        // A group needs no neighbour: its GID is its address's MGID.
        const Driver::Gid g = mgid_of(s->id.ps, dst);
        n.drv->after_interrupt([done, g]() { done(0, 0, g); });
    } else if (!n.drv->subnet() || (!n.drv->subnet()->contains(dst) && dst != n.drv->ip())) {
        // No route to it: the kernel fails the resolution at once.
        n.drv->after_interrupt([done]() { done(ENETUNREACH, 0, Driver::Gid{}); });
    } else {
        n.drv->resolve_neighbour(dst, static_cast<hcasim::sim::Tick>(timeout_ms) * hcasim::sim::kPsPerMs, done);
    }
    return complete(*s);
}

int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
    if (!id || timeout_ms <= 0) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    if (s->state != IdState::AddrResolved && s->state != IdState::RouteResolved) return fail_errno(EINVAL);
    if (s->path.numb_path && s->id.route.num_paths) {
        // Set with RDMA_OPTION_IB_PATH: nothing to ask.
        s->state = IdState::RouteResolved;
        post_event(n, s->handle, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
        return complete(*s);
    }
    s->state = IdState::RouteQuery;
    const std::uint32_t handle = s->handle, generation = ++s->resolve_generation;
    NodeCm* np = &n;
    n.drv->query_path(to_gid(s->id.route.addr.addr.ibaddr.dgid), static_cast<hcasim::sim::Tick>(timeout_ms) * hcasim::sim::kPsPerMs,
                      [np, handle, generation](int err, const hcasim::host::PathInfo& p) {
                          SimId* x = np->find(handle);
                          if (!x || x->resolve_generation != generation || x->state != IdState::RouteQuery) return;
                          if (err) {
                              x->state = IdState::AddrResolved;
                              post_event(*np, handle, RDMA_CM_EVENT_ROUTE_ERROR, -err);
                              return;
                          }
                          fill_path(*x, p);
                          x->state = IdState::RouteResolved;
                          post_event(*np, handle, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
                      });
    return complete(*s);
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (!id || !qp_init_attr) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    if (!s->id.verbs) return fail_errno(EINVAL);  // not bound to a device yet
    if (s->id.qp) return fail_errno(EINVAL);
    if (qp_init_attr->qp_type != s->id.qp_type) return fail_errno(EINVAL);
    if (!pd) {
        if (!n.pd) n.pd = ibv_alloc_pd(s->id.verbs);
        pd = n.pd;
        if (!pd) return -1;
    }
    ibv_qp_init_attr a = *qp_init_attr;
    // An XRC target QP is made in librdmacm's XRC domain and has no CQs (its
    // receives complete to their XRC SRQ's); an XRC initiator receives
    // nothing, so only a send CQ is made for it.
    const bool xrc_recv = a.qp_type == IBV_QPT_XRC_RECV;
    ibv_xrcd* xrcd = xrc_recv ? node_xrcd(n, s->id.verbs) : nullptr;
    if (xrc_recv && !xrcd) return -1;
    if (xrc_recv) {
        a.send_cq = a.recv_cq = nullptr;
    } else if (a.qp_type == IBV_QPT_XRC_SEND) {
        if (!a.send_cq) {
            if (int err = make_cq(*s, static_cast<int>(a.cap.max_send_wr), s->id.send_cq, s->id.send_cq_channel))
                return fail_errno(err);
            s->own_cqs = true;
            a.send_cq = s->id.send_cq;
        } else {
            s->id.send_cq = a.send_cq;
        }
    } else if (!a.send_cq || !a.recv_cq) {
        // librdmacm makes the CQs, each with a completion channel, with
        // the id as their context (rdma_get_send_comp relies on it).
        s->id.recv_cq_channel = ibv_create_comp_channel(s->id.verbs);
        s->id.send_cq_channel = ibv_create_comp_channel(s->id.verbs);
        s->id.recv_cq = ibv_create_cq(s->id.verbs, static_cast<int>(std::max(1u, a.cap.max_recv_wr)), id,
                                      s->id.recv_cq_channel, 0);
        s->id.send_cq = ibv_create_cq(s->id.verbs, static_cast<int>(std::max(1u, a.cap.max_send_wr)), id,
                                      s->id.send_cq_channel, 0);
        if (!s->id.recv_cq || !s->id.send_cq) {
            const int err = errno;
            if (s->id.recv_cq) ibv_destroy_cq(s->id.recv_cq);
            if (s->id.send_cq) ibv_destroy_cq(s->id.send_cq);
            ibv_destroy_comp_channel(s->id.recv_cq_channel);
            ibv_destroy_comp_channel(s->id.send_cq_channel);
            s->id.recv_cq = s->id.send_cq = nullptr;
            s->id.recv_cq_channel = s->id.send_cq_channel = nullptr;
            return fail_errno(err);
        }
        s->own_cqs = true;
        if (!a.send_cq) a.send_cq = s->id.send_cq;
        if (!a.recv_cq) a.recv_cq = s->id.recv_cq;
    } else {
        s->id.send_cq = a.send_cq;
        s->id.recv_cq = a.recv_cq;
    }
    if (!a.srq && s->id.srq && !xrc_recv && a.qp_type != IBV_QPT_XRC_SEND) a.srq = s->id.srq;
    ibv_qp* qp = nullptr;
    if (xrc_recv) {
        ibv_qp_init_attr_ex x{};
        x.qp_context = a.qp_context;
        x.qp_type = IBV_QPT_XRC_RECV;
        x.comp_mask = IBV_QP_INIT_ATTR_XRCD;
        x.xrcd = xrcd;
        qp = ibv_create_qp_ex(s->id.verbs, &x);
        if (qp) a.cap = x.cap;
    } else {
        qp = ibv_create_qp(pd, &a);
    }
    if (!qp) {
        const int err = errno;
        if (s->own_cqs) destroy_cqs(*s, true, true);
        s->own_cqs = false;
        return fail_errno(err);
    }
    s->id.qp = qp;
    s->id.pd = pd;
    *qp_init_attr = a;
    const int err = s->id.qp_type == IBV_QPT_UD ? ud_qp_up(*s) : qp_to_init(*s, false);
    if (err) {
        ibv_destroy_qp(qp);
        s->id.qp = nullptr;
        return fail_errno(err);
    }
    return 0;
}

void rdma_destroy_qp(rdma_cm_id* id) {
    if (!id || !id->qp) return;
    SimId* s = obj(id);
    ibv_destroy_qp(s->id.qp);
    s->id.qp = nullptr;
    if (s->own_cqs) {
        destroy_cqs(*s, true, true);
        s->own_cqs = false;
    }
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
    if (!id) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    if (s->state != IdState::RouteResolved) return fail_errno(EINVAL);
    if (is_ud(s->id.ps)) return connect_ud(*s, conn_param);
    // No parameters: librdmacm's defaults (the device's read depths, seven
    // retries of each kind, no private data).
    rdma_conn_param defaults = default_conn_param(n);
    if (!conn_param) conn_param = &defaults;
    if (conn_param->private_data_len > ibcm::kReqPrivateBytes - kCmaHeaderBytes ||
        (conn_param->private_data_len && !conn_param->private_data))
        return fail_errno(EINVAL);
    if (!s->id.qp && !conn_param->qp_num) return fail_errno(EINVAL);
    auto& dev = n.drv->hca();
    s->responder_resources = std::min<std::uint8_t>(conn_param->responder_resources, 16);
    s->initiator_depth = std::min<std::uint8_t>(conn_param->initiator_depth, 16);
    ibcm::Req req;
    req.service_id = service_id(s->id.ps, port_of(&s->id.route.addr.dst_addr));
    req.local_ca_guid = n.drv->info().node_guid;
    req.local_qpn = s->id.qp ? s->id.qp->qp_num : conn_param->qp_num;
    req.responder_resources = s->responder_resources;
    req.initiator_depth = s->initiator_depth;
    req.remote_cm_response_timeout = kCmResponseTimeout;
    req.local_cm_response_timeout = kCmResponseTimeout;
    // An XRC initiator's REQ names the XRC transport (IBA 14.6.3.1).
    const bool xrc = s->id.qp_type == IBV_QPT_XRC_SEND;
    req.transport = xrc ? ibcm::Transport::Extended : ibcm::Transport::Rc;
    req.extended_transport = xrc ? 1 : 0;
    req.end_to_end_flow_control = conn_param->flow_control;
    req.starting_psn = s->psn;
    req.retry_count = conn_param->retry_count & 7;
    req.rnr_retry_count = conn_param->rnr_retry_count & 7;
    req.max_cm_retries = kMaxCmRetries;
    req.pkey = 0xffff;
    req.path_mtu = s->path.mtu;
    req.srq = s->id.qp ? s->id.qp->srq != nullptr : conn_param->srq;
    req.primary.local_lid = dev.port().lid();
    req.primary.remote_lid = ntohs(s->path.dlid);
    std::memcpy(req.primary.local_gid.data(), s->path.sgid.raw, 16);
    std::memcpy(req.primary.remote_gid.data(), s->path.dgid.raw, 16);
    req.primary.sl = s->path.sl & 0xf;
    req.primary.packet_rate = s->path.rate & 0x3f;
    req.primary.traffic_class = s->tos;
    req.primary.subnet_local = true;
    req.primary.local_ack_timeout = static_cast<std::uint8_t>(std::min(31, s->path.packet_life_time + 1));
    req.private_data = cma_header(*s);
    if (conn_param->private_data_len) {
        const auto* b = static_cast<const std::uint8_t*>(conn_param->private_data);
        req.private_data.insert(req.private_data.end(), b, b + conn_param->private_data_len);
    }
    s->req = req;
    if (xrc) {
        // ib_cm leaves out what an XRC initiator has no use for: the target
        // answers no reads, and retries are the initiator's own.
        req.responder_resources = 0;
        req.retry_count = 0;
        req.rnr_retry_count = 0;
        req.srq = false;
    }
    n.drv->firmware_mailbox();
    s->comm_id = n.drv->cm()->ib_send_req(std::move(req), ntohs(s->path.dlid), connection_handler(n, s->handle));
    s->req.local_comm_id = s->comm_id;
    s->has_connection = true;
    s->state = IdState::Connecting;
    return complete(*s);
}

int rdma_establish(rdma_cm_id* id) {
    // For programs that handle CONNECT_RESPONSE themselves (no QP on the id).
    if (!id) return fail_errno(EINVAL);
    SimId* s = obj(id);
    s->node->drv->control_call();
    if (s->state != IdState::ConnectReply) return fail_errno(EINVAL);
    s->node->drv->firmware_mailbox();
    if (int err = s->node->drv->cm()->ib_send_rtu(s->comm_id, {})) return fail_errno(err);
    s->state = IdState::Connected;
    post_event(*s->node, s->handle, RDMA_CM_EVENT_ESTABLISHED, 0);
    return complete(*s);
}

int rdma_listen(rdma_cm_id* id, int backlog) {
    if (!id) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    if (!s->port) {
        sockaddr_in any{};
        any.sin_family = AF_INET;
        if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&any))) return -1;
    }
    if (s->state == IdState::Listening) {
        s->backlog = backlog > 0 && backlog < kMaxBacklog ? backlog : kMaxBacklog;
        return 0;
    }
    if (s->state != IdState::Idle) return fail_errno(EINVAL);
    // As in the kernel's rdma_listen: SO_REUSEADDR shares a port between
    // ids, but a listener must be alone at its address on it, and is no
    // longer shared from then on.
    const auto key = std::make_pair(static_cast<int>(s->id.ps), s->port);
    if (s->reuseaddr) {
        if (int err = check_port(*s, n.ports.at(key), false)) return fail_errno(err);
    }
    if (!listener_on(n, key, INADDR_ANY, true)) {
        // One CM listen per service ID; its requests go to the listener
        // bound to the address they are for.
        NodeCm* np = &n;
        if (int err = n.drv->cm()->ib_listen(service_id(s->id.ps, s->port),
                                             [np, key](const fw::IbCmEvent& e) { on_port_request(*np, key, e); }))
            return fail_errno(err);
    }
    s->backlog = backlog > 0 && backlog < kMaxBacklog ? backlog : kMaxBacklog;
    s->state = IdState::Listening;
    s->reuseaddr = false;
    if (!s->id.verbs) s->id.verbs = device_of(n);
    return 0;
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
    if (!listen || !id) return fail_errno(EINVAL);
    SimId* l = obj(listen);
    if (!l->sync) return fail_errno(EINVAL);
    if (l->id.event) {
        rdma_ack_cm_event(l->id.event);
        l->id.event = nullptr;
    }
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(l->id.channel, &e)) return -1;
    if (e->status) {
        const int err = e->status < 0 ? -e->status : e->status;
        rdma_ack_cm_event(e);
        return fail_errno(err);
    }
    if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        rdma_ack_cm_event(e);
        return fail_errno(EINVAL);
    }
    SimId* s = obj(e->id);
    // The new id is synchronous too, on a channel of its own; the request
    // stays its event until its next call (rdma_accept, rdma_reject).
    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) {
        rdma_ack_cm_event(e);
        return -1;
    }
    move_to_channel(*s, obj(ch));
    s->own_channel = obj(ch);
    s->sync = true;
    s->id.event = e;
    if (l->has_qp_init) {
        ibv_qp_init_attr a = l->qp_init;
        if (rdma_create_qp(&s->id, l->id.pd, &a)) {
            const int err = errno;
            rdma_reject(&s->id, nullptr, 0);
            rdma_destroy_id(&s->id);
            return fail_errno(err);
        }
    }
    *id = &s->id;
    return 0;
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
    if (!id) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    if (s->state != IdState::RequestHeld) return fail_errno(EINVAL);
    if (s->id.event) {
        rdma_ack_cm_event(s->id.event);
        s->id.event = nullptr;
    }
    if (is_ud(s->id.ps)) {
        // The id's QP, or one the program made itself (conn_param's qp_num).
        if (!s->id.qp && !(conn_param && conn_param->qp_num)) return fail_errno(EINVAL);
        ibcm::SidrRep rep;
        rep.status = ibcm::SidrStatus::Valid;
        rep.qpn = s->id.qp ? s->id.qp->qp_num : conn_param->qp_num;
        rep.qkey = RDMA_UDP_QKEY;
        if (conn_param && conn_param->private_data_len) {
            if (conn_param->private_data_len > ibcm::kSidrRepPrivateBytes) return fail_errno(EINVAL);
            const auto* b = static_cast<const std::uint8_t*>(conn_param->private_data);
            rep.private_data.assign(b, b + conn_param->private_data_len);
        }
        n.drv->firmware_mailbox();
        const int err = n.drv->cm()->ib_send_sidr_rep(s->comm_id, std::move(rep));
        s->has_connection = false;
        s->state = IdState::Connected;
        return err ? fail_errno(err) : 0;
    }
    rdma_conn_param defaults = default_conn_param(n);
    if (!conn_param) conn_param = &defaults;
    if (conn_param->private_data_len > ibcm::kRepPrivateBytes ||
        (conn_param->private_data_len && !conn_param->private_data))
        return fail_errno(EINVAL);
    if (!s->id.qp && !conn_param->qp_num) return fail_errno(EINVAL);
    // Never more than the requester asked for.
    s->responder_resources = std::min(conn_param->responder_resources, s->req.initiator_depth);
    s->initiator_depth = std::min(conn_param->initiator_depth, s->req.responder_resources);
    if (s->id.qp) {
        if (int err = qp_to_rts(*s, s->req.local_qpn, s->req.starting_psn, s->req.retry_count,
                                conn_param->rnr_retry_count & 7))
            return fail_errno(err);
    }
    ibcm::Rep rep;
    const std::uint32_t qpn = s->id.qp ? s->id.qp->qp_num : conn_param->qp_num;
    rep.starting_psn = s->psn;
    rep.responder_resources = s->responder_resources;
    rep.target_ack_delay = 0;
    rep.rnr_retry_count = conn_param->rnr_retry_count & 7;
    if (s->id.qp_type == IBV_QPT_XRC_RECV) {
        // As ib_cm: an XRC target's QPN goes in the local EECN field, and
        // its receives are always an SRQ's.
        rep.local_eecn = qpn;
        rep.srq = true;
    } else {
        rep.local_qpn = qpn;
        rep.initiator_depth = s->initiator_depth;
        rep.end_to_end_flow_control = conn_param->flow_control;
        rep.srq = s->id.qp ? s->id.qp->srq != nullptr : conn_param->srq;
    }
    rep.local_ca_guid = n.drv->info().node_guid;
    if (conn_param->private_data_len) {
        const auto* b = static_cast<const std::uint8_t*>(conn_param->private_data);
        rep.private_data.assign(b, b + conn_param->private_data_len);
    }
    n.drv->firmware_mailbox();
    if (int err = n.drv->cm()->ib_send_rep(s->comm_id, std::move(rep))) return fail_errno(err);
    s->state = IdState::Accepting;
    return complete(*s);
}

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    if (!id) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    if (s->state != IdState::RequestHeld) return fail_errno(EINVAL);
    if (private_data_len && !private_data) return fail_errno(EINVAL);
    if (s->id.event) {
        rdma_ack_cm_event(s->id.event);
        s->id.event = nullptr;
    }
    std::vector<std::uint8_t> pd;
    if (private_data_len) {
        const auto* b = static_cast<const std::uint8_t*>(private_data);
        pd.assign(b, b + private_data_len);
    }
    n.drv->firmware_mailbox();
    int err;
    if (is_ud(s->id.ps)) {
        if (pd.size() > ibcm::kSidrRepPrivateBytes) return fail_errno(EINVAL);
        ibcm::SidrRep rep;
        rep.status = ibcm::SidrStatus::Rejected;
        rep.private_data = std::move(pd);
        err = n.drv->cm()->ib_send_sidr_rep(s->comm_id, std::move(rep));
    } else {
        if (pd.size() > ibcm::kRejPrivateBytes) return fail_errno(EINVAL);
        err = n.drv->cm()->ib_send_rej(s->comm_id, fw::kRejConsumer, std::move(pd));
    }
    s->has_connection = false;
    s->state = IdState::Disconnected;
    return err ? fail_errno(err) : 0;
}

int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
    if (!id || !addr) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    if (addr->sa_family != AF_INET) return fail_errno(EAFNOSUPPORT);
    // The id must be bound to the device: rdma_bind_addr to an address, or
    // rdma_resolve_addr.
    if (!s->id.verbs || (s->state != IdState::Idle && s->state != IdState::AddrResolved)) return fail_errno(EINVAL);
    const std::uint32_t ip = ipv4_of(addr);
    if (ip == INADDR_ANY) return fail_errno(EINVAL);  // no SA-assigned MGIDs
    McastJoin j;
    std::memcpy(&j.addr, addr, sizeof j.addr);
    j.mgid = mgid_of(s->id.ps, ip);
    j.context = context;
    const std::uint32_t handle = s->handle;
    NodeCm* np = &n;
    // Both callbacks run later, in the simulation kernel: the token is known.
    auto token = std::make_shared<std::uint64_t>(0);
    j.token = n.drv->join_group(
        j.mgid, RDMA_UDP_QKEY,
        [np, handle, token](int err, const Driver::McastGroup& g) { on_join_answer(*np, handle, *token, err, g); },
        [np, handle, token]() { on_join_lost(*np, handle, *token); });
    *token = j.token;
    s->joins[j.token] = j;
    return complete(*s);
}

int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
    if (!id || !addr) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    auto it = s->joins.begin();
    while (it != s->joins.end() &&
           (it->second.leaving || addr->sa_family != AF_INET || ipv4_of(addr) != ipv4_of(reinterpret_cast<sockaddr*>(&it->second.addr))))
        ++it;
    if (it == s->joins.end()) return fail_errno(EADDRNOTAVAIL);
    McastJoin& j = it->second;
    j.leaving = true;
    if (j.attached && s->id.qp) ibv_detach_mcast(s->id.qp, reinterpret_cast<const ibv_gid*>(j.mgid.data()), j.mlid);
    n.drv->leave_group(j.token);
    // Its events not yet taken go; those taken must be acknowledged first.
    if (SimChannel* ch = obj(s->id.channel)) drop_queued(*ch, s->handle, j.token);
    while (j.events_acked < j.events_reported) sc_core::wait(s->acked);
    s->joins.erase(it);
    return 0;
}

int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
    if (!id) return fail_errno(EINVAL);
    SimId* s = obj(id);
    s->node->drv->control_call();
    // Only the communication-established event means anything to the CM.
    if (event != IBV_EVENT_COMM_EST) return fail_errno(EINVAL);
    if (!s->has_connection) return fail_errno(EINVAL);
    return 0;
}

int rdma_disconnect(rdma_cm_id* id) {
    if (!id) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    n.drv->control_call();
    if (s->state != IdState::Connected && s->state != IdState::Accepting && s->state != IdState::ConnectReply &&
        s->state != IdState::Disconnected)
        return fail_errno(EINVAL);
    if (int err = qp_to_error(*s)) return fail_errno(err);
    if (s->state == IdState::Disconnected) return 0;  // the peer went first: its DREP has gone out
    if (is_ud(s->id.ps)) return fail_errno(EINVAL);
    n.drv->firmware_mailbox();
    if (int err = n.drv->cm()->ib_send_dreq(s->comm_id, {})) return fail_errno(err);
    return complete(*s);
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
    if (!channel || !event) return fail_errno(EINVAL);
    SimChannel* ch = obj(channel);
    ch->drv->control_call();
    while (ch->queue.empty()) {
        if (ch->ch.fd >= 0 && (fcntl(ch->ch.fd, F_GETFL) & O_NONBLOCK)) return fail_errno(EAGAIN);
        sc_core::wait(ch->arrived);
    }
    SimEvent* e = ch->queue.front();
    ch->queue.pop_front();
    std::uint64_t v;
    if (ch->ch.fd >= 0 && ::read(ch->ch.fd, &v, sizeof v) < 0) {
        // Counted with every event queued: cannot be empty here.
    }
    NodeCm& n = *node_of(ch->drv);
    SimId* s = n.find(e->handle);
    if (s) {
        s->events_reported++;
        if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            if (SimId* l = n.find(s->listen_handle)) l->requests_queued--;
        }
        if (e->join) {
            auto j = s->joins.find(e->join);
            if (j != s->joins.end()) {
                j->second.events_reported++;
                if (e->ev.event == RDMA_CM_EVENT_MULTICAST_JOIN && s->id.qp && !j->second.attached) {
                    // librdmacm attaches the id's QP here, in the program's
                    // thread; a failure turns the event into an error with
                    // status -1 and errno set.
                    const int err = ibv_attach_mcast(s->id.qp, &e->ev.param.ud.ah_attr.grh.dgid,
                                                     e->ev.param.ud.ah_attr.dlid);
                    if (err) {
                        errno = err;
                        e->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
                        e->ev.status = -1;
                    } else {
                        j->second.attached = true;
                    }
                }
            }
        }
        if (e->connect_response && s->id.qp) {
            // librdmacm brings the QP up and sends the RTU here, in the
            // program's thread, and reports ESTABLISHED instead.
            s->responder_resources = std::min(s->responder_resources, e->rep.initiator_depth);
            s->initiator_depth = std::min(s->initiator_depth, e->rep.responder_resources);
            // An XRC target's QPN came in the EECN field.
            const std::uint32_t remote_qpn =
                s->id.qp_type == IBV_QPT_XRC_SEND ? e->rep.local_eecn : e->rep.local_qpn;
            int err = qp_to_rts(*s, remote_qpn, e->rep.starting_psn, s->req.retry_count, e->rep.rnr_retry_count);
            if (!err) {
                n.drv->firmware_mailbox();
                err = n.drv->cm()->ib_send_rtu(s->comm_id, {});
            }
            if (err) {
                n.drv->cm()->ib_send_rej(s->comm_id, fw::kRejConsumer, {});
                s->has_connection = false;
                s->state = IdState::Disconnected;
                e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
                e->ev.status = -err;
            } else {
                s->state = IdState::Connected;
                e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
            }
        }
        if (e->ev.event == RDMA_CM_EVENT_CONNECT_RESPONSE || e->ev.event == RDMA_CM_EVENT_ESTABLISHED ||
            e->ev.event == RDMA_CM_EVENT_REJECTED || e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            e->ev.param.conn.private_data = e->private_data.empty() ? nullptr : e->private_data.data();
            e->ev.param.conn.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(e->private_data.size(), 255));
        }
    }
    *event = &e->ev;
    return 0;
}

int rdma_ack_cm_event(rdma_cm_event* event) {
    if (!event) return fail_errno(EINVAL);
    SimEvent* e = obj(event);
    Driver* d = hcasim::host::current_driver();
    if (d) {
        d->control_call();
        NodeCm& n = *node_of(d);
        if (SimId* s = n.find(e->handle)) {
            s->events_acked++;
            if (e->join) {
                auto j = s->joins.find(e->join);
                if (j != s->joins.end()) j->second.events_acked++;
            }
            s->acked.notify(sc_core::SC_ZERO_TIME);
        } else if (e->ev.id) {
            // The id is being destroyed and waits for this acknowledgement.
            SimId* gone = reinterpret_cast<SimId*>(e->ev.id);
            gone->events_acked++;
            gone->acked.notify(sc_core::SC_ZERO_TIME);
        }
    }
    delete e;
    return 0;
}

const char* rdma_event_str(rdma_cm_event_type event) {
    switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    }
    return "UNKNOWN EVENT";
}

int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
    if (!id || !optval) return fail_errno(EINVAL);
    SimId* s = obj(id);
    s->node->drv->control_call();
    if (level == RDMA_OPTION_ID) {
        switch (optname) {
        case RDMA_OPTION_ID_TOS:
            if (optlen != sizeof(std::uint8_t)) return fail_errno(EINVAL);
            s->tos = *static_cast<std::uint8_t*>(optval);
            return 0;
        case RDMA_OPTION_ID_REUSEADDR:
            if (optlen != sizeof(int)) return fail_errno(EINVAL);
            // The kernel's rdma_set_reuseaddr: a listener may not share again.
            if (!((*static_cast<int*>(optval) && s->state != IdState::Listening) || s->state == IdState::Idle))
                return fail_errno(EINVAL);
            s->reuseaddr = *static_cast<int*>(optval) != 0;
            return 0;
        case RDMA_OPTION_ID_AFONLY:
            if (optlen != sizeof(int)) return fail_errno(EINVAL);
            return 0;  // IPv4 only: nothing to restrict
        case RDMA_OPTION_ID_ACK_TIMEOUT:
            if (optlen != sizeof(std::uint8_t)) return fail_errno(EINVAL);
            s->ack_timeout = *static_cast<std::uint8_t*>(optval) & 31;
            s->ack_timeout_set = true;
            return 0;
        default: return fail_errno(ENOSYS);
        }
    }
    if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
        if (optlen < sizeof(ibv_path_data) || optlen % sizeof(ibv_path_data)) return fail_errno(EINVAL);
        if (s->state != IdState::AddrResolved) return fail_errno(EINVAL);
        const auto* pd = static_cast<const ibv_path_data*>(optval);
        ibv_sa_path_rec r{};
        std::memcpy(r.dgid.raw, pd->path.dgid.raw, 16);
        std::memcpy(r.sgid.raw, pd->path.sgid.raw, 16);
        r.dlid = pd->path.dlid;
        r.slid = pd->path.slid;
        r.pkey = pd->path.pkey;
        r.sl = static_cast<std::uint8_t>(ntohs(pd->path.qosclass_sl) & 0xf);
        r.mtu = pd->path.mtu & 0x3f;
        r.rate = pd->path.rate & 0x3f;
        r.packet_life_time = pd->path.packetlifetime & 0x3f;
        r.numb_path = 1;
        s->path = r;
        s->id.route.path_rec = &s->path;
        s->id.route.num_paths = 1;
        return 0;
    }
    return fail_errno(ENOSYS);
}

uint16_t rdma_get_src_port(rdma_cm_id* id) { return id ? id->route.addr.src_sin.sin_port : 0; }
uint16_t rdma_get_dst_port(rdma_cm_id* id) { return id ? id->route.addr.dst_sin.sin_port : 0; }

ibv_context** rdma_get_devices(int* num_devices) {
    NodeCm* n = current_node();
    if (!n) {
        if (num_devices) *num_devices = 0;
        errno = ENODEV;
        return nullptr;
    }
    n->drv->control_call();
    auto** list = static_cast<ibv_context**>(std::calloc(2, sizeof(ibv_context*)));
    if (!list) {
        errno = ENOMEM;
        return nullptr;
    }
    list[0] = device_of(*n);
    if (num_devices) *num_devices = list[0] ? 1 : 0;
    return list;
}

void rdma_free_devices(ibv_context** list) { std::free(list); }

// As librdmacm: the SRQ's type must be given; the id's PD (or the default
// one) when none is; an XRC SRQ without a domain or CQ gets librdmacm's
// domain and a CQ of max_wr entries with its channel, which become the
// id's receive CQ and channel (rdma_get_recv_comp waits on them).
int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
    if (!id || !attr || !id->verbs) return fail_errno(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) return fail_errno(EINVAL);
    SimId* s = obj(id);
    NodeCm& n = *s->node;
    if (id->srq) return fail_errno(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
        if (!id->pd) {
            if (!n.pd) n.pd = ibv_alloc_pd(id->verbs);
            if (!n.pd) return -1;
        }
        attr->pd = id->pd ? id->pd : n.pd;
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    }
    bool made_cq = false;
    if (attr->srq_type == IBV_SRQT_XRC) {
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
            attr->xrcd = node_xrcd(n, id->verbs);
            if (!attr->xrcd) return -1;
        }
        if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
            if (id->recv_cq) return fail_errno(EINVAL);  // the id's receive CQ is taken
            if (int err = make_cq(*s, static_cast<int>(attr->attr.max_wr), s->id.recv_cq, s->id.recv_cq_channel))
                return fail_errno(err);
            made_cq = true;
            attr->cq = id->recv_cq;
        }
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    }
    ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
    if (!srq) {
        const int err = errno;
        if (made_cq) destroy_cqs(*s, false, true);
        return fail_errno(err);
    }
    s->own_srq_cq = made_cq;
    if (!id->pd) id->pd = attr->pd;
    id->srq = srq;
    return 0;
}

// An XRC SRQ for an XRC target id, a basic one for any other.
int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
    if (!id || !attr) return fail_errno(EINVAL);
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

void rdma_destroy_srq(rdma_cm_id* id) {
    if (!id || !id->srq) return;
    SimId* s = obj(id);
    ibv_destroy_srq(id->srq);
    id->srq = nullptr;
    if (s->own_srq_cq) destroy_cqs(*s, false, true);
    s->own_srq_cq = false;
}

}  // extern "C"

// rdma_getaddrinfo and the endpoint calls built on it.
extern "C" {

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
    if (!res || (!node && !service)) {
        errno = EINVAL;
        return EAI_NONAME;
    }
    Driver* d = hcasim::host::current_driver();
    if (!d) {
        errno = ENODEV;
        return EAI_SYSTEM;
    }
    d->control_call();
    const int flags = hints ? hints->ai_flags : 0;
    if (hints && hints->ai_family && hints->ai_family != AF_INET) {
        errno = EAFNOSUPPORT;
        return EAI_FAMILY;
    }
    const int ps = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
    if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IPOIB && ps != RDMA_PS_IB) {
        errno = EINVAL;
        return EAI_SERVICE;
    }
    // The service is a port number (the simulated hosts have no services file).
    long port = 0;
    if (service) {
        char* end = nullptr;
        port = std::strtol(service, &end, 10);
        if (!*service || *end || port < 0 || port > 65535) {
            errno = EINVAL;
            return EAI_SERVICE;
        }
    }
    // The node: a dotted address, or a host name of the simulated subnet.
    std::uint32_t ip = INADDR_ANY;
    if (node) {
        in_addr a{};
        if (inet_pton(AF_INET, node, &a) == 1) {
            ip = ntohl(a.s_addr);
        } else if (flags & RAI_NUMERICHOST) {
            errno = EINVAL;
            return EAI_NONAME;
        } else if (const auto* h = d->subnet() ? d->subnet()->by_name(node) : nullptr) {
            ip = h->ip;
        } else if (std::strcmp(node, "localhost") == 0) {
            ip = d->ip();
        } else {
            errno = ENOENT;
            return EAI_NONAME;
        }
    }
    auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
    auto* addr = static_cast<sockaddr_in*>(std::calloc(1, sizeof(sockaddr_in)));
    if (!r || !addr) {
        std::free(r);
        std::free(addr);
        errno = ENOMEM;
        return EAI_MEMORY;
    }
    r->ai_flags = flags;
    r->ai_family = AF_INET;
    r->ai_port_space = ps;
    r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : is_ud(ps) ? IBV_QPT_UD : IBV_QPT_RC;
    set_sin(*addr, ip, static_cast<std::uint16_t>(port));
    if (flags & RAI_PASSIVE) {
        r->ai_src_addr = reinterpret_cast<sockaddr*>(addr);
        r->ai_src_len = sizeof(sockaddr_in);
    } else {
        r->ai_dst_addr = reinterpret_cast<sockaddr*>(addr);
        r->ai_dst_len = sizeof(sockaddr_in);
        if (node) r->ai_dst_canonname = strdup(node);
    }
    *res = r;
    return 0;
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
    while (res) {
        rdma_addrinfo* next = res->ai_next;
        std::free(res->ai_src_addr);
        std::free(res->ai_dst_addr);
        std::free(res->ai_src_canonname);
        std::free(res->ai_dst_canonname);
        std::free(res->ai_route);
        std::free(res->ai_connect);
        std::free(res);
        res = next;
    }
}

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (!id || !res) return fail_errno(EINVAL);
    rdma_cm_id* cm_id = nullptr;
    if (rdma_create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space))) return -1;
    SimId* s = obj(cm_id);
    // As librdmacm's rdma_create_id2: the id has the QP type asked for (an
    // XRC one in RDMA_PS_IB).
    if (res->ai_qp_type) s->id.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    auto undo = [&]() {
        const int err = errno;
        rdma_destroy_id(cm_id);
        return fail_errno(err);
    };
    if (res->ai_flags & RAI_PASSIVE) {
        if (!res->ai_src_addr || rdma_bind_addr(cm_id, res->ai_src_addr)) return undo();
        // Every request's id gets its QP when rdma_get_request takes it.
        if (qp_init_attr) {
            s->has_qp_init = true;
            s->qp_init = *qp_init_attr;
            s->qp_init.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
        }
        cm_id->pd = pd;
        *id = cm_id;
        return 0;
    }
    if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) || rdma_resolve_route(cm_id, 2000))
        return undo();
    if (qp_init_attr) {
        qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
        if (rdma_create_qp(cm_id, pd, qp_init_attr)) return undo();
    }
    *id = cm_id;
    return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
    if (!id) return;
    if (id->qp) rdma_destroy_qp(id);
    if (id->srq) rdma_destroy_srq(id);
    rdma_destroy_id(id);
}

}  // extern "C"
