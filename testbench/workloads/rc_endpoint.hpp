// Verbs set-up shared by workloads and tests: open the device, allocate a PD,
// CQs, QPs (RC unless asked for UC, UD or XRC), optionally one shared
// receive queue, and a registered buffer; exchange connection data with the peer
// program out of band and bring the QPs to RTS, as perftest does.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "testbench/system/system.hpp"

namespace hcasim::testbench {

// The RC requester's retry budget the workloads set, as perftest does:
// local ACK timeout 4.096 us x 2^14 (67 ms), seven retries.
inline constexpr std::uint8_t kRcAckTimeout = 14;
inline constexpr std::uint8_t kRcRetryCount = 7;
// How long a request may go unanswered before its QP gives up.
inline constexpr sim::Tick kRcRetryBudget = (kRcRetryCount + 1) * (sim::Tick{4096} << kRcAckTimeout) * 1000;

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
    // IBV_QPT_XRC_SEND: XRC, as perftest's -c XRC: each side has an XRC
    // domain with one XRC SRQ, an initiator QP per connection (qps) and a
    // target QP the peer's initiator connects to (xrc_targets).
    ibv_qp_type qp_type = IBV_QPT_RC;
    std::uint32_t qkey = 0x11111111;  // UD: the Q_Key both sides use
    bool srq = false;                 // every QP receives from one SRQ of max_recv_wr entries
    bool atomics = false;             // needs atomic operations (ibv_query_device's atomic_cap)
    // Connect with rdma_cm (RC; UD by SIDR, with rdma_cm's Q_Key): node 0
    // listens on kRdmaCmPort, node 1 connects one id per QP, the connection
    // data in private data, as perftest's -R does. Otherwise the data goes
    // out of band.
    bool rdma_cm = false;
    // RC and UC: QPs take the adapter's two ports in turn (perftest's -O),
    // QP i port 1 + (first_port - 1 + i) mod 2; both sides agree on it.
    bool dual_port = false;
    int first_port = 1;
    std::uint8_t port_of(std::size_t qp) const {
        return static_cast<std::uint8_t>(dual_port ? 1 + (first_port - 1 + static_cast<int>(qp % 2)) % 2 : 1);
    }
};

// perftest's default port.
inline constexpr std::uint16_t kRdmaCmPort = 18515;

// The device cannot do what the options ask (the QP type, an SRQ, atomics):
// found at set-up, before anything was sent.
struct EndpointUnsupported : std::runtime_error {
    enum class Feature { QpType, Srq, Atomics };
    EndpointUnsupported(Feature f, const std::string& why) : std::runtime_error(why), feature(f) {}
    Feature feature;
};

struct PeerInfo {
    std::uint16_t lid;
    std::uint16_t lid2;    // port 2's, with EndpointOptions::dual_port
    std::uint32_t psn;
    std::uint64_t addr;
    std::uint32_t rkey;
    std::uint32_t srqn;    // XRC: the SRQ requests name
    std::uint32_t nqps;
    std::uint32_t qpn[1];  // followed by nqps - 1 more, then (XRC) the nqps target QPs
};

class RcEndpoint {
public:
    // Throws EndpointUnsupported when the device refuses the QP type, the
    // SRQ or atomics.
    RcEndpoint(Host& host, const EndpointOptions& opt);
    ~RcEndpoint();
    RcEndpoint(const RcEndpoint&) = delete;
    RcEndpoint& operator=(const RcEndpoint&) = delete;

    // Publishes this side under "<tag>/<index>", reads the peer's and moves
    // every QP to RTS: RC and UC connected to the peer's QP of the same
    // number; UD with an address handle to the peer's port, sending to
    // remote_qpn[i].
    void connect(const std::string& tag, int peer_index);
    // Disconnects and frees the rdma_cm ids (before the QPs go).
    void disconnect();
    // Posts a chain of receives for QP q: to its receive queue, or to the
    // shared receive queue.
    void post_recv(std::size_t q, ibv_recv_wr* wr);

    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_comp_channel* channel = nullptr;
    ibv_cq* send_cq = nullptr;
    ibv_cq* recv_cq = nullptr;
    std::vector<ibv_qp*> qps;
    ibv_srq* srq = nullptr;
    ibv_xrcd* xrcd = nullptr;             // XRC
    std::vector<ibv_qp*> xrc_targets;     // XRC: the peer's initiators connect to these
    std::uint32_t remote_srqn = 0;        // XRC: the peer's SRQ
    ibv_ah* ah = nullptr;                 // UD: to the peer's port
    std::uint32_t qkey() const { return m_opt.qkey; }  // UD: of every QP of both sides
    std::vector<std::uint32_t> remote_qpn;  // the peer's QP of each of ours
    std::uint8_t* buf = nullptr;
    ibv_mr* mr = nullptr;
    std::uint64_t remote_addr = 0;
    std::uint32_t remote_rkey = 0;
    std::uint16_t remote_lid = 0;

private:
    void open();
    void release();  // everything open() made, in reverse order
    void connect_ud(ibv_qp* qp, std::uint32_t sq_psn);
    void connect_connected(ibv_qp* qp, std::uint16_t dlid, std::uint32_t dest_qpn, std::uint32_t rq_psn,
                           std::uint32_t sq_psn, std::uint8_t port = 1);
    void open_xrc();
    void connect_rdma_cm(int peer_index, PeerInfo& mine);
    // Connected with rdma_cm: the ids of the QPs and their event channel.
    std::vector<rdma_cm_id*> m_cm_ids;
    rdma_cm_id* m_cm_listen = nullptr;
    rdma_event_channel* m_cm_channel = nullptr;

    Host& m_host;
    EndpointOptions m_opt;
};

// Throws std::runtime_error naming the verb and errno text when rc != 0.
void check(int rc, const char* what);
// p, which a verb returned; when null, throws std::runtime_error naming the
// verb, errno's text and, where given, the parameters that bound what it
// asked for ("hca.max_mr").
template <typename T>
T* need(T* p, const std::string& what, const char* bounds = nullptr) {
    if (!p)
        throw std::runtime_error(what + " failed: " + std::strerror(errno) +
                                 (bounds ? std::string(" (") + bounds + ")" : std::string()));
    return p;
}
// The first RDMA device, opened; throws naming what failed.
ibv_context* open_first_device();
// Polls cq until n completions arrive; every one must succeed. Gives up
// when the fabric falls silent with completions still missing (StallWatch).
std::vector<ibv_wc> poll_n(Host& h, ibv_cq* cq, int n, const char* what);

}  // namespace hcasim::testbench
