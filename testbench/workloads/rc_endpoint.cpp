#include "testbench/workloads/rc_endpoint.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "testbench/workloads/stall_watch.hpp"

namespace hcasim::testbench {

namespace {

const char* qp_type_text(ibv_qp_type t) {
    return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : t == IBV_QPT_UD ? "UD" : t == IBV_QPT_XRC_SEND ? "XRC_SEND" : "?";
}

}  // namespace

void check(int rc, const char* what) {
    if (rc != 0) throw std::runtime_error(std::string(what) + " failed: " + std::strerror(rc < 0 ? -rc : rc));
}

ibv_context* open_first_device() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) throw std::runtime_error(std::string("ibv_get_device_list failed: ") + std::strerror(errno));
    ibv_context* ctx = n > 0 ? ibv_open_device(list[0]) : nullptr;
    const int err = errno;
    ibv_free_device_list(list);
    if (n < 1) throw std::runtime_error("no RDMA device");
    if (!ctx) throw std::runtime_error(std::string("ibv_open_device failed: ") + std::strerror(err));
    return ctx;
}

std::vector<ibv_wc> poll_n(Host& h, ibv_cq* cq, int n, const char* what) {
    std::vector<ibv_wc> out(static_cast<std::size_t>(n));
    StallWatch watch(h);
    int got = 0;
    while (got < n) {
        watch.check(what);
        const int r = ibv_poll_cq(cq, n - got, out.data() + got);
        if (r < 0) throw std::runtime_error(std::string(what) + ": ibv_poll_cq failed");
        for (int i = got; i < got + r; ++i)
            if (out[static_cast<std::size_t>(i)].status != IBV_WC_SUCCESS)
                throw std::runtime_error(std::string(what) + ": completion " +
                                         ibv_wc_status_str(out[static_cast<std::size_t>(i)].status));
        got += r;
    }
    return out;
}

RcEndpoint::RcEndpoint(Host& host, const EndpointOptions& opt) : m_host(host), m_opt(opt) {
    try {
        open();
    } catch (...) {
        release();
        throw;
    }
}

void RcEndpoint::open() {
    const EndpointOptions& opt = m_opt;
    ctx = open_first_device();
    pd = need(ibv_alloc_pd(ctx), "ibv_alloc_pd", "hca.max_pd");
    if (opt.completion_channel) channel = need(ibv_create_comp_channel(ctx), "ibv_create_comp_channel");
    send_cq = need(ibv_create_cq(ctx, opt.cq_depth, nullptr, channel, 0), "ibv_create_cq", "hca.max_cq, hca.max_cqe");
    recv_cq = need(ibv_create_cq(ctx, opt.cq_depth, nullptr, channel, 0), "ibv_create_cq", "hca.max_cq, hca.max_cqe");
    buf = static_cast<std::uint8_t*>(std::aligned_alloc(4096, (opt.buffer_bytes + 4095) & ~std::size_t(4095)));
    if (!buf) throw std::runtime_error("out of memory for the buffer");
    std::memset(buf, 0, opt.buffer_bytes);
    if (opt.atomics) {
        ibv_device_attr dev{};
        check(ibv_query_device(ctx, &dev), "ibv_query_device");
        if (dev.atomic_cap == IBV_ATOMIC_NONE)
            throw EndpointUnsupported(EndpointUnsupported::Feature::Atomics,
                                      "the device reports atomic_cap = IBV_ATOMIC_NONE (ibv_query_device): it has no "
                                      "atomic operations");
    }
    mr = need(ibv_reg_mr(pd, buf, opt.buffer_bytes, opt.access), "ibv_reg_mr", "hca.max_mr");
    if (opt.qp_type == IBV_QPT_XRC_SEND) {
        open_xrc();
        return;
    }
    if (opt.srq) {
        ibv_srq_init_attr sa{};
        sa.attr.max_wr = opt.max_recv_wr;
        sa.attr.max_sge = opt.max_sge;
        srq = ibv_create_srq(pd, &sa);
        if (!srq && (errno == EOPNOTSUPP || errno == ENOSYS))
            throw EndpointUnsupported(EndpointUnsupported::Feature::Srq, "ibv_create_srq failed: Operation not supported");
        need(srq, "ibv_create_srq", "hca.max_srq, hca.max_srq_wr, hca.max_srq_sge");
    }
    for (int i = 0; i < opt.qps; ++i) {
        ibv_qp_init_attr init{};
        init.send_cq = send_cq;
        init.recv_cq = recv_cq;
        init.srq = srq;
        init.qp_type = opt.qp_type;
        init.cap.max_send_wr = opt.max_send_wr;
        init.cap.max_recv_wr = opt.max_recv_wr;
        init.cap.max_send_sge = opt.max_sge;
        init.cap.max_recv_sge = opt.max_sge;
        init.cap.max_inline_data = opt.max_inline;
        ibv_qp* qp = ibv_create_qp(pd, &init);
        if (!qp && errno == EOPNOTSUPP && opt.qp_type != IBV_QPT_RC)
            throw EndpointUnsupported(EndpointUnsupported::Feature::QpType,
                                      std::string("ibv_create_qp(IBV_QPT_") + qp_type_text(opt.qp_type) +
                                          ") failed: Operation not supported");
        qps.push_back(need(qp, "ibv_create_qp", "hca.max_qp, hca.max_qp_wr, hca.max_sge, hca.max_inline"));
    }
}

// XRC: a private domain, one XRC SRQ on the receive CQ, and per
// connection an initiator and a target QP.
void RcEndpoint::open_xrc() {
    const EndpointOptions& opt = m_opt;
    ibv_xrcd_init_attr xa{};
    xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    xa.fd = -1;
    xa.oflags = O_CREAT;
    xrcd = ibv_open_xrcd(ctx, &xa);
    if (!xrcd && (errno == EOPNOTSUPP || errno == ENOSYS))
        throw EndpointUnsupported(EndpointUnsupported::Feature::QpType, "ibv_open_xrcd failed: Operation not supported");
    need(xrcd, "ibv_open_xrcd");
    ibv_srq_init_attr_ex sa{};
    sa.attr.max_wr = opt.max_recv_wr;
    sa.attr.max_sge = opt.max_sge;
    sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
    sa.srq_type = IBV_SRQT_XRC;
    sa.xrcd = xrcd;
    sa.cq = recv_cq;
    sa.pd = pd;
    srq = need(ibv_create_srq_ex(ctx, &sa), "ibv_create_srq_ex", "hca.max_srq, hca.max_srq_wr, hca.max_srq_sge");
    for (int i = 0; i < opt.qps; ++i) {
        ibv_qp_init_attr_ex init{};
        init.qp_type = IBV_QPT_XRC_SEND;
        init.send_cq = send_cq;
        init.cap.max_send_wr = opt.max_send_wr;
        init.cap.max_send_sge = opt.max_sge;
        init.cap.max_inline_data = opt.max_inline;
        init.comp_mask = IBV_QP_INIT_ATTR_PD;
        init.pd = pd;
        qps.push_back(need(ibv_create_qp_ex(ctx, &init), "ibv_create_qp_ex(XRC_SEND)",
                            "hca.max_qp, hca.max_qp_wr, hca.max_sge, hca.max_inline"));
        init = ibv_qp_init_attr_ex{};
        init.qp_type = IBV_QPT_XRC_RECV;
        init.comp_mask = IBV_QP_INIT_ATTR_XRCD;
        init.xrcd = xrcd;
        xrc_targets.push_back(need(ibv_create_qp_ex(ctx, &init), "ibv_create_qp_ex(XRC_RECV)", "hca.max_qp"));
    }
}

void RcEndpoint::post_recv(std::size_t q, ibv_recv_wr* wr) {
    ibv_recv_wr* bad = nullptr;
    if (srq) check(ibv_post_srq_recv(srq, wr, &bad), "ibv_post_srq_recv");
    else check(ibv_post_recv(qps[q], wr, &bad), "ibv_post_recv");
}

RcEndpoint::~RcEndpoint() { release(); }

void RcEndpoint::release() {
    disconnect();
    for (ibv_qp* q : qps) ibv_destroy_qp(q);
    qps.clear();
    for (ibv_qp* q : xrc_targets) ibv_destroy_qp(q);
    xrc_targets.clear();
    if (ah) ibv_destroy_ah(ah);
    if (srq) ibv_destroy_srq(srq);
    if (xrcd) ibv_close_xrcd(xrcd);
    if (mr) ibv_dereg_mr(mr);
    if (send_cq) ibv_destroy_cq(send_cq);
    if (recv_cq) ibv_destroy_cq(recv_cq);
    if (channel) ibv_destroy_comp_channel(channel);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
    std::free(buf);
}

void RcEndpoint::connect(const std::string& tag, int peer_index) {
    ibv_port_attr port{};
    check(ibv_query_port(ctx, 1, &port), "ibv_query_port");
    const bool xrc = m_opt.qp_type == IBV_QPT_XRC_SEND;
    std::vector<std::uint8_t> mine(sizeof(PeerInfo) + sizeof(std::uint32_t) * 2 * qps.size());
    auto* info = reinterpret_cast<PeerInfo*>(mine.data());
    info->lid = port.lid;
    info->lid2 = 0;
    if (m_opt.dual_port) {
        ibv_port_attr port2{};
        check(ibv_query_port(ctx, 2, &port2), "ibv_query_port(2)");
        info->lid2 = port2.lid;
    }
    info->psn = 0x1000u * static_cast<std::uint32_t>(m_host.index() + 1);
    info->addr = reinterpret_cast<std::uintptr_t>(buf);
    info->rkey = mr->rkey;
    info->nqps = static_cast<std::uint32_t>(qps.size());
    for (std::size_t i = 0; i < qps.size(); ++i) info->qpn[i] = qps[i]->qp_num;
    if (xrc) {
        check(ibv_get_srq_num(srq, &info->srqn), "ibv_get_srq_num");
        for (std::size_t i = 0; i < qps.size(); ++i) info->qpn[qps.size() + i] = xrc_targets[i]->qp_num;
    }
    std::vector<std::uint8_t> theirs_bytes;
    if (m_opt.rdma_cm) {
        connect_rdma_cm(peer_index, *info);
        return;
    }
    m_host.put(tag + "/" + std::to_string(m_host.index()), mine);
    theirs_bytes = m_host.get(tag + "/" + std::to_string(peer_index));
    const auto* theirs = reinterpret_cast<const PeerInfo*>(theirs_bytes.data());
    if (theirs->nqps < qps.size()) throw std::runtime_error("peer has fewer QPs");
    remote_addr = theirs->addr;
    remote_rkey = theirs->rkey;
    remote_lid = theirs->lid;
    remote_qpn.assign(theirs->qpn, theirs->qpn + qps.size());
    if (m_opt.qp_type == IBV_QPT_UD) {
        ibv_ah_attr aa{};
        aa.dlid = theirs->lid;
        aa.port_num = 1;
        ah = need(ibv_create_ah(pd, &aa), "ibv_create_ah");
    }
    if (xrc) {
        // Our initiator i sends to the peer's target i; our target i takes the
        // requests of the peer's initiator i.
        remote_srqn = theirs->srqn;
        for (std::size_t i = 0; i < qps.size(); ++i) {
            connect_connected(qps[i], theirs->lid, theirs->qpn[theirs->nqps + i], theirs->psn, info->psn);
            connect_connected(xrc_targets[i], theirs->lid, theirs->qpn[i], theirs->psn, info->psn);
        }
        return;
    }
    for (std::size_t i = 0; i < qps.size(); ++i) {
        if (m_opt.qp_type == IBV_QPT_UD) connect_ud(qps[i], info->psn);
        else
            connect_connected(qps[i], m_opt.port_of(i) == 2 ? theirs->lid2 : theirs->lid, theirs->qpn[i], theirs->psn,
                              info->psn, m_opt.port_of(i));
    }
}

namespace {

// The part of PeerInfo one connection's private data carries.
struct CmPeerData {
    std::uint16_t lid;
    std::uint32_t psn;
    std::uint64_t addr;
    std::uint32_t rkey;
    std::uint32_t qpn;
} __attribute__((packed));
static_assert(sizeof(CmPeerData) <= 56, "fits a REQ's private data");

rdma_cm_event* next_event(rdma_event_channel* ch, rdma_cm_event_type want) {
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(ch, &e)) throw std::runtime_error(std::string("rdma_get_cm_event failed: ") + std::strerror(errno));
    if (e->event != want) {
        const std::string got = rdma_event_str(e->event);
        const int status = e->status;
        rdma_ack_cm_event(e);
        throw std::runtime_error(std::string("rdma_cm: expected ") + rdma_event_str(want) + ", got " + got +
                                 " (status " + std::to_string(status) + ")");
    }
    return e;
}

CmPeerData peer_data(const rdma_cm_event* e) {
    CmPeerData d{};
    if (e->param.conn.private_data_len < sizeof d) throw std::runtime_error("rdma_cm: short private data");
    std::memcpy(&d, e->param.conn.private_data, sizeof d);
    return d;
}

}  // namespace

// The QP numbers, PSNs, LIDs, addresses and rkeys go in the CM messages'
// private data; each side still brings its own QP up with the workload's
// attributes, so the data path is the same as with the exchange.
// UD QPs find each other with SIDR (RDMA_PS_UDP): the SIDR_REP gives the
// client the server's QPN, Q_Key and address; the server takes the client's
// from the request's private data.
void RcEndpoint::connect_rdma_cm(int peer_index, PeerInfo& mine) {
    const bool ud = m_opt.qp_type == IBV_QPT_UD;
    if (m_opt.qp_type != IBV_QPT_RC && !ud) throw std::runtime_error("rdma_cm connects RC and UD QPs only");
    const rdma_port_space ps = ud ? RDMA_PS_UDP : RDMA_PS_TCP;
    auto ah_to = [&](std::uint16_t lid) {
        if (ah) return;
        ibv_ah_attr aa{};
        aa.dlid = lid;
        aa.port_num = 1;
        ah = need(ibv_create_ah(pd, &aa), "ibv_create_ah");
    };
    m_cm_channel = need(rdma_create_event_channel(), "rdma_create_event_channel");
    const bool server = m_host.index() < peer_index;
    auto data_of = [&](std::size_t i) {
        CmPeerData d{mine.lid, mine.psn, mine.addr, mine.rkey, qps[i]->qp_num};
        return d;
    };
    remote_qpn.assign(qps.size(), 0);
    if (server) {
        check(rdma_create_id(m_cm_channel, &m_cm_listen, nullptr, ps), "rdma_create_id");
        sockaddr_in any{};
        any.sin_family = AF_INET;
        any.sin_port = htons(kRdmaCmPort);
        check(rdma_bind_addr(m_cm_listen, reinterpret_cast<sockaddr*>(&any)), "rdma_bind_addr");
        check(rdma_listen(m_cm_listen, static_cast<int>(qps.size())), "rdma_listen");
        m_host.put("rdma_cm/listening", {1});
        for (std::size_t i = 0; i < qps.size(); ++i) {
            rdma_cm_event* req = next_event(m_cm_channel, RDMA_CM_EVENT_CONNECT_REQUEST);
            const CmPeerData theirs = peer_data(req);
            rdma_cm_id* id = req->id;
            check(rdma_ack_cm_event(req), "rdma_ack_cm_event");
            m_cm_ids.push_back(id);
            remote_addr = theirs.addr;
            remote_rkey = theirs.rkey;
            remote_lid = theirs.lid;
            remote_qpn[i] = theirs.qpn;
            // Ready to receive before the REP goes.
            if (ud) {
                connect_ud(qps[i], mine.psn);
                ah_to(theirs.lid);
            } else {
                connect_connected(qps[i], theirs.lid, theirs.qpn, theirs.psn, mine.psn);
            }
            CmPeerData ours = data_of(i);
            rdma_conn_param p{};
            p.private_data = &ours;
            p.private_data_len = sizeof ours;
            p.responder_resources = m_opt.max_rd_atomic;
            p.initiator_depth = m_opt.max_rd_atomic;
            p.rnr_retry_count = m_opt.rnr_retry;
            p.qp_num = qps[i]->qp_num;
            check(rdma_accept(id, &p), "rdma_accept");
            // A SIDR_REP ends it; an RC connection waits for the RTU.
            if (!ud) check(rdma_ack_cm_event(next_event(m_cm_channel, RDMA_CM_EVENT_ESTABLISHED)), "rdma_ack_cm_event");
        }
        return;
    }
    m_host.get("rdma_cm/listening");
    rdma_addrinfo hints{};
    hints.ai_port_space = ps;
    rdma_addrinfo* res = nullptr;
    const std::string server_name = "node" + std::to_string(peer_index);
    if (rdma_getaddrinfo(server_name.c_str(), std::to_string(kRdmaCmPort).c_str(), &hints, &res))
        throw std::runtime_error("rdma_getaddrinfo(" + server_name + ") failed");
    for (std::size_t i = 0; i < qps.size(); ++i) {
        rdma_cm_id* id = nullptr;
        check(rdma_create_id(m_cm_channel, &id, nullptr, ps), "rdma_create_id");
        m_cm_ids.push_back(id);
        check(rdma_resolve_addr(id, nullptr, res->ai_dst_addr, 2000), "rdma_resolve_addr");
        check(rdma_ack_cm_event(next_event(m_cm_channel, RDMA_CM_EVENT_ADDR_RESOLVED)), "rdma_ack_cm_event");
        check(rdma_resolve_route(id, 2000), "rdma_resolve_route");
        check(rdma_ack_cm_event(next_event(m_cm_channel, RDMA_CM_EVENT_ROUTE_RESOLVED)), "rdma_ack_cm_event");
        CmPeerData ours = data_of(i);
        rdma_conn_param p{};
        p.private_data = &ours;
        p.private_data_len = sizeof ours;
        p.responder_resources = m_opt.max_rd_atomic;
        p.initiator_depth = m_opt.max_rd_atomic;
        p.retry_count = kRcRetryCount;
        p.rnr_retry_count = m_opt.rnr_retry;
        p.qp_num = qps[i]->qp_num;
        check(rdma_connect(id, &p), "rdma_connect");
        if (ud) {
            rdma_cm_event* rep = next_event(m_cm_channel, RDMA_CM_EVENT_ESTABLISHED);
            const rdma_ud_param u = rep->param.ud;
            check(rdma_ack_cm_event(rep), "rdma_ack_cm_event");
            if (u.qkey != m_opt.qkey)
                throw std::runtime_error("rdma_cm: the server's Q_Key " + std::to_string(u.qkey) + " is not ours");
            remote_lid = u.ah_attr.dlid;
            remote_qpn[i] = u.qp_num;
            if (!ah) ah = need(ibv_create_ah(pd, const_cast<ibv_ah_attr*>(&u.ah_attr)), "ibv_create_ah");
            connect_ud(qps[i], mine.psn);
            continue;
        }
        // No QP on the id: the response comes to us, and we send the RTU.
        rdma_cm_event* resp = next_event(m_cm_channel, RDMA_CM_EVENT_CONNECT_RESPONSE);
        const CmPeerData theirs = peer_data(resp);
        check(rdma_ack_cm_event(resp), "rdma_ack_cm_event");
        remote_addr = theirs.addr;
        remote_rkey = theirs.rkey;
        remote_lid = theirs.lid;
        remote_qpn[i] = theirs.qpn;
        connect_connected(qps[i], theirs.lid, theirs.qpn, theirs.psn, mine.psn);
        check(rdma_establish(id), "rdma_establish");
        check(rdma_ack_cm_event(next_event(m_cm_channel, RDMA_CM_EVENT_ESTABLISHED)), "rdma_ack_cm_event");
    }
    rdma_freeaddrinfo(res);
}

void RcEndpoint::disconnect() {
    for (rdma_cm_id* id : m_cm_ids) {
        rdma_disconnect(id);
        rdma_destroy_id(id);
    }
    m_cm_ids.clear();
    if (m_cm_listen) rdma_destroy_id(m_cm_listen);
    m_cm_listen = nullptr;
    if (m_cm_channel) rdma_destroy_event_channel(m_cm_channel);
    m_cm_channel = nullptr;
}

// UD: the Q_Key at INIT, nothing at RTR, the send PSN at RTS.
void RcEndpoint::connect_ud(ibv_qp* qp, std::uint32_t sq_psn) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qkey = m_opt.qkey;
    check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), "ibv_modify_qp(INIT)");
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    check(ibv_modify_qp(qp, &a, IBV_QP_STATE), "ibv_modify_qp(RTR)");
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = sq_psn;
    check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "ibv_modify_qp(RTS)");
}

// RC and UC: connected to one peer QP; UC has no RDMA READ or atomics, no
// acknowledgements and so no timers, retries or read/atomic depths.
void RcEndpoint::connect_connected(ibv_qp* qp, std::uint16_t dlid, std::uint32_t dest_qpn, std::uint32_t rq_psn,
                                   std::uint32_t sq_psn, std::uint8_t port) {
    // XRC initiators have RC's send attributes, targets its receive ones.
    const bool xrc_ini = qp->qp_type == IBV_QPT_XRC_SEND, xrc_tgt = qp->qp_type == IBV_QPT_XRC_RECV;
    const bool rc = m_opt.qp_type == IBV_QPT_RC || xrc_ini || xrc_tgt;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = port;
    a.qp_access_flags = m_opt.access & (rc ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                                 IBV_ACCESS_REMOTE_ATOMIC
                                           : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
          "ibv_modify_qp(INIT)");
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = m_opt.mtu;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = rq_psn;
    a.ah_attr.dlid = dlid;
    a.ah_attr.port_num = port;
    int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (rc && !xrc_ini) {
        a.max_dest_rd_atomic = m_opt.max_rd_atomic;
        a.min_rnr_timer = m_opt.min_rnr_timer;
        rtr |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
    check(ibv_modify_qp(qp, &a, rtr), "ibv_modify_qp(RTR)");
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = sq_psn;
    int rts = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (rc) {
        a.timeout = kRcAckTimeout;
        rts |= IBV_QP_TIMEOUT;
    }
    if (rc && !xrc_tgt) {
        a.retry_cnt = kRcRetryCount;
        a.rnr_retry = m_opt.rnr_retry;
        a.max_rd_atomic = m_opt.max_rd_atomic;
        rts |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    check(ibv_modify_qp(qp, &a, rts), "ibv_modify_qp(RTS)");
}

}  // namespace hcasim::testbench
