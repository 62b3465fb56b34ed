// Verbs set-up shared by workloads and tests: open the device, allocate a PD,
// CQs, RC QPs and a registered buffer, exchange connection data with the
// peer program out of band and bring the QPs to RTS, as perftest does.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "testbench/system/system.hpp"

namespace hcasim::testbench {

struct EndpointOptions {
    std::size_t buffer_bytes = 1 << 20;
    int qps = 1;
    int cq_depth = 1024;
    std::uint32_t max_send_wr = 256;
    std::uint32_t max_recv_wr = 256;
    std::uint32_t max_sge = 4;
    std::uint32_t max_inline = 0;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    bool completion_channel = false;
    ibv_mtu mtu = IBV_MTU_4096;
    std::uint8_t max_rd_atomic = 16;
    std::uint8_t min_rnr_timer = 1;   // 0.01 ms
    std::uint8_t rnr_retry = 7;       // retry forever
};

struct PeerInfo {
    std::uint16_t lid;
    std::uint32_t psn;
    std::uint64_t addr;
    std::uint32_t rkey;
    std::uint32_t nqps;
    std::uint32_t qpn[1];  // followed by nqps - 1 more
};

class RcEndpoint {
public:
    RcEndpoint(Host& host, const EndpointOptions& opt);
    ~RcEndpoint();
    RcEndpoint(const RcEndpoint&) = delete;
    RcEndpoint& operator=(const RcEndpoint&) = delete;

    // Publishes this side under "<tag>/<index>", reads the peer's and moves
    // every QP to RTS connected to the peer's QP of the same number.
    void connect(const std::string& tag, int peer_index);

    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_comp_channel* channel = nullptr;
    ibv_cq* send_cq = nullptr;
    ibv_cq* recv_cq = nullptr;
    std::vector<ibv_qp*> qps;
    std::uint8_t* buf = nullptr;
    ibv_mr* mr = nullptr;
    std::uint64_t remote_addr = 0;
    std::uint32_t remote_rkey = 0;
    std::uint16_t remote_lid = 0;

private:
    Host& m_host;
    EndpointOptions m_opt;
};

// Throws std::runtime_error naming the verb and errno text when rc != 0.
void check(int rc, const char* what);
// Polls cq until n completions arrive; every one must succeed.
std::vector<ibv_wc> poll_n(ibv_cq* cq, int n, const char* what);

}  // namespace hcasim::testbench
