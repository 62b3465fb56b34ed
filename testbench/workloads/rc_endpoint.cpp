#include "testbench/workloads/rc_endpoint.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace hcasim::testbench {

void check(int rc, const char* what) {
    if (rc != 0) throw std::runtime_error(std::string(what) + " failed: " + std::strerror(rc < 0 ? -rc : rc));
}

template <typename T>
static T* need(T* p, const char* what) {
    if (!p) throw std::runtime_error(std::string(what) + " failed: " + std::strerror(errno));
    return p;
}

std::vector<ibv_wc> poll_n(ibv_cq* cq, int n, const char* what) {
    std::vector<ibv_wc> out(static_cast<std::size_t>(n));
    int got = 0;
    while (got < n) {
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
    int n = 0;
    ibv_device** list = need(ibv_get_device_list(&n), "ibv_get_device_list");
    if (n < 1) throw std::runtime_error("no RDMA device");
    ctx = need(ibv_open_device(list[0]), "ibv_open_device");
    ibv_free_device_list(list);
    pd = need(ibv_alloc_pd(ctx), "ibv_alloc_pd");
    if (opt.completion_channel) channel = need(ibv_create_comp_channel(ctx), "ibv_create_comp_channel");
    send_cq = need(ibv_create_cq(ctx, opt.cq_depth, nullptr, channel, 0), "ibv_create_cq");
    recv_cq = need(ibv_create_cq(ctx, opt.cq_depth, nullptr, channel, 0), "ibv_create_cq");
    buf = static_cast<std::uint8_t*>(std::aligned_alloc(4096, (opt.buffer_bytes + 4095) & ~std::size_t(4095)));
    if (!buf) throw std::runtime_error("out of memory for the buffer");
    std::memset(buf, 0, opt.buffer_bytes);
    mr = need(ibv_reg_mr(pd, buf, opt.buffer_bytes, opt.access), "ibv_reg_mr");
    for (int i = 0; i < opt.qps; ++i) {
        ibv_qp_init_attr init{};
        init.send_cq = send_cq;
        init.recv_cq = recv_cq;
        init.qp_type = IBV_QPT_RC;
        init.cap.max_send_wr = opt.max_send_wr;
        init.cap.max_recv_wr = opt.max_recv_wr;
        init.cap.max_send_sge = opt.max_sge;
        init.cap.max_recv_sge = opt.max_sge;
        init.cap.max_inline_data = opt.max_inline;
        qps.push_back(need(ibv_create_qp(pd, &init), "ibv_create_qp"));
    }
}

RcEndpoint::~RcEndpoint() {
    for (ibv_qp* q : qps) ibv_destroy_qp(q);
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
    std::vector<std::uint8_t> mine(sizeof(PeerInfo) + sizeof(std::uint32_t) * qps.size());
    auto* info = reinterpret_cast<PeerInfo*>(mine.data());
    info->lid = port.lid;
    info->psn = 0x1000u * static_cast<std::uint32_t>(m_host.index() + 1);
    info->addr = reinterpret_cast<std::uintptr_t>(buf);
    info->rkey = mr->rkey;
    info->nqps = static_cast<std::uint32_t>(qps.size());
    for (std::size_t i = 0; i < qps.size(); ++i) info->qpn[i] = qps[i]->qp_num;
    m_host.put(tag + "/" + std::to_string(m_host.index()), mine);
    const std::vector<std::uint8_t> theirs_bytes = m_host.get(tag + "/" + std::to_string(peer_index));
    const auto* theirs = reinterpret_cast<const PeerInfo*>(theirs_bytes.data());
    if (theirs->nqps < qps.size()) throw std::runtime_error("peer has fewer QPs");
    remote_addr = theirs->addr;
    remote_rkey = theirs->rkey;
    remote_lid = theirs->lid;
    for (std::size_t i = 0; i < qps.size(); ++i) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = 1;
        a.qp_access_flags = m_opt.access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        check(ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
              "ibv_modify_qp(INIT)");
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = m_opt.mtu;
        a.dest_qp_num = theirs->qpn[i];
        a.rq_psn = theirs->psn;
        a.max_dest_rd_atomic = m_opt.max_rd_atomic;
        a.min_rnr_timer = m_opt.min_rnr_timer;
        a.ah_attr.dlid = theirs->lid;
        a.ah_attr.port_num = 1;
        check(ibv_modify_qp(qps[i], &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              "ibv_modify_qp(RTR)");
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = info->psn;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = m_opt.rnr_retry;
        a.max_rd_atomic = m_opt.max_rd_atomic;
        check(ibv_modify_qp(qps[i], &a,
                            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_MAX_QP_RD_ATOMIC),
              "ibv_modify_qp(RTS)");
    }
}

}  // namespace hcasim::testbench
