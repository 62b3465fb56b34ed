// The adapter firmware's connection manager agent for VIs: it runs the VI
// connection protocol (client/server and peer-to-peer connect, reject,
// disconnect) with the agents of other adapters through CM datagrams on QP1,
// which cross the same ports, links and switches as data. It programs the
// VI's context when a connection is made (firmware writes the QP context
// directly) and tells the host through callbacks.
//
// Timing: every datagram it handles costs fw.cm_processing_us; a request or
// reply that gets no answer is sent again after fw.cm_response_timeout_us,
// fw.cm_max_retries times, before the peer counts as unreachable.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "firmware/command_interface.hpp"
#include "firmware/management_qp.hpp"
#include "model/packet/cm_mad.hpp"
#include "model/packet/ib_packet.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/block.hpp"

namespace hcasim::firmware {

void declare_cm_params(sim::ParamRegistry& r);

enum class CmResult {
    Pending,
    Success,
    Timeout,
    Reject,
    NoMatch,
    NotReachable,
    InvalidReliability,
    InvalidMtu,
    InvalidQos,
    InvalidState,
};

// What one VI tells its peer about itself.
struct ViEndpoint {
    std::uint32_t qpn = 0;
    std::uint16_t reliability = 0;
    std::uint32_t max_transfer = 0;
    std::uint8_t qos = 0;
    bool rdma_write = false;
    bool rdma_read = false;
};

// The attributes that must match for two VIs to connect.
CmResult match(const ViEndpoint& local, const ViEndpoint& remote);

class CmAgent : public sim::Block, public hca::CqeListener {
public:
    using Notify = std::function<void()>;

    CmAgent(const sc_core::sc_module_name& name, const sim::Config& cfg, hca::Hca& hca, CommandInterface& fw);

    // Server side: waits for a client request for local's discriminator.
    // timeout 0: no time-out. Returns the connection id.
    std::uint32_t listen(const packet::CmNetAddress& local, sim::Tick timeout, Notify done);
    CmResult listen_result(std::uint32_t id, packet::CmNetAddress* remote, ViEndpoint* remote_vi) const;
    // Host thread: connects the VI to the requester and waits for its
    // confirmation (or failure).
    CmResult accept(std::uint32_t id, const ViEndpoint& local);
    CmResult reject(std::uint32_t id);
    void forget(std::uint32_t id);

    // Client and peer side, keyed by the local VI.
    void connect(const ViEndpoint& local, const packet::CmNetAddress& local_addr,
                 const packet::CmNetAddress& remote_addr, sim::Tick timeout, bool peer, Notify done);
    CmResult connect_result(std::uint32_t qpn, ViEndpoint* remote_vi) const;
    void cancel(std::uint32_t qpn);
    // Ends the VI's connection and tells the peer.
    void disconnect(std::uint32_t qpn);
    // The peer ended the connection of a local VI.
    void on_connection_lost(std::function<void(std::uint32_t qpn)> fn) { m_lost = std::move(fn); }

private:
    struct Listen {
        packet::CmNetAddress local;
        sim::Tick deadline = 0;  // 0: none
        CmResult result = CmResult::Pending;
        bool requested = false;  // a client request matched it
        bool accepting = false;
        bool confirmed = false;
        CmResult accept_result = CmResult::Pending;
        packet::CmNetAddress remote;
        ViEndpoint remote_vi;
        std::uint16_t remote_lid = 0;
        std::uint32_t remote_comm_id = 0;
        std::uint32_t remote_psn = 0;
        std::uint32_t comm_id = 0;
        Notify done;
        sc_core::sc_event answered;
    };
    struct Connect {
        ViEndpoint local;
        packet::CmNetAddress local_addr, remote_addr;
        bool peer = false;
        sim::Tick deadline = 0;
        CmResult result = CmResult::Pending;
        ViEndpoint remote_vi;
        std::uint16_t remote_lid = 0;
        std::uint32_t comm_id = 0;
        std::uint32_t psn = 0;
        std::uint32_t retries_left = 0;
        bool heard = false;  // any answer since the last (re)send
        std::uint32_t generation = 0;
        Notify done;
    };
    struct Link {
        std::uint16_t lid;
        std::uint32_t remote_qpn;
    };

    void cqe_written(std::uint32_t cqn, sim::Tick visible) override;
    void receive(std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len, sim::Tick t);
    void handle(const packet::CmMessage& m, std::uint16_t slid, sim::Tick t);
    void send(const packet::CmMessage& m, std::uint16_t dlid, sim::Tick t);
    void send_request(Connect& c, sim::Tick t);
    void arm_retry(std::uint32_t qpn, std::uint32_t generation, sim::Tick t);
    void finish(Connect& c, CmResult r);
    // Brings the local VI to the connected state with its peer.
    void connect_vi(std::uint32_t qpn, std::uint16_t lid, std::uint32_t remote_qpn, std::uint32_t rq_psn,
                    std::uint32_t sq_psn);
    packet::CmMessage describe(const ViEndpoint& v) const;
    std::uint32_t next_psn();

    hca::Hca& m_hca;
    CommandInterface& m_fw;
    sim::Tick m_processing;
    sim::Tick m_response_timeout;
    std::uint32_t m_max_retries;
    std::map<std::uint32_t, Listen> m_listens;
    std::map<std::uint32_t, Connect> m_connects;  // by local qpn
    std::map<std::uint32_t, Link> m_links;        // connected VIs: where their peer is
    std::uint32_t m_next_id = 1;
    std::uint32_t m_psn_seed = 0x1234;
    std::function<void(std::uint32_t)> m_lost;
    sim::Timeline m_cpu;
    ManagementQp m_qp1;
};

}  // namespace hcasim::firmware
