// The adapter firmware's connection manager agent: it speaks InfiniBand CM
// (REQ, MRA, REP, RTU, REJ, DREQ, DREP, SIDR_REQ, SIDR_REP) with the agents
// of other adapters through MADs on QP1, which cross the same ports, links
// and switches as data. Two kinds of consumer use it:
//  - VIs (KVIPL): the agent runs the VI connection protocol itself
//    (client/server and peer-to-peer connect, reject, disconnect; the VI
//    attributes travel in private data), programs the VI's context when a
//    connection is made and tells the host through callbacks;
//  - IB CM connections whose QP the host drives (rdma_cm, cm_agent_ib.cpp):
//    the agent sends and answers the messages, keeps their time-outs,
//    retries and time wait, and reports each event to the consumer.
//
// Timing: every datagram it handles costs fw.cm_processing_us. A VI request
// or reply that gets no answer is sent again after fw.cm_response_timeout_us,
// fw.cm_max_retries times, before the peer counts as unreachable; IB CM
// connections wait and retry as their REQ says.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

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

// What happened to an IB CM connection (or SIDR exchange).
struct IbCmEvent {
    enum class Type {
        ReqReceived,      // a REQ for a service listened on: a new connection (req, remote_lid)
        RepReceived,      // the active side's REQ was accepted (rep): send the RTU
        Established,      // the passive side's REP was answered by an RTU
        Rejected,         // REJ (reason, private_data); the connection is gone
        Unreachable,      // a REQ or REP went unanswered max_cm_retries times
        DreqReceived,     // the peer disconnected; the DREP has gone out
        DisconnectDone,   // our DREQ was answered by a DREP (or went unanswered)
        TimewaitExit,     // the connection's time wait is over; it is gone
        SidrReqReceived,  // a SIDR_REQ for a service listened on (sidr_req, remote_lid)
        SidrRepReceived,  // the answer to our SIDR_REQ (sidr_rep)
        SidrTimeout,      // our SIDR_REQ went unanswered
    };
    Type type = Type::ReqReceived;
    std::uint32_t id = 0;  // the connection's local communication ID (SIDR: request ID)
    std::uint16_t remote_lid = 0;
    packet::ibcm::Req req;
    packet::ibcm::Rep rep;
    packet::ibcm::SidrReq sidr_req;
    packet::ibcm::SidrRep sidr_rep;
    std::uint16_t reason = 0;               // Rejected: IBA table 109
    std::vector<std::uint8_t> private_data;  // REJ, RTU, DREQ, DREP
};
using IbCmHandler = std::function<void(const IbCmEvent&)>;

// IBA REJ reasons (table 109) the agent sends itself.
inline constexpr std::uint16_t kRejTimeout = 4;
inline constexpr std::uint16_t kRejInvalidServiceId = 8;
inline constexpr std::uint16_t kRejStaleConnection = 10;
inline constexpr std::uint16_t kRejConsumer = 28;

// A CM time-out field's value (4.096 us x 2^value).
sim::Tick cm_time(std::uint8_t value);

class CmAgent : public sim::Block, public hca::CqeListener {
public:
    using Notify = std::function<void()>;
    // A datagram of another management class (SA, IPoIB neighbour) arrived
    // at t; false when nobody takes it.
    using OtherClass = std::function<bool(std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len, sim::Tick t)>;

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

    // IB CM connections (cm_agent_ib.cpp). Calls return 0 or EINVAL (no such
    // connection, or not in a state the message may leave).
    // Listens on a service ID: its REQs and SIDR_REQs become connections
    // reported to handler. EADDRINUSE when another consumer has it.
    int ib_listen(std::uint64_t service_id, IbCmHandler handler);
    void ib_cancel_listen(std::uint64_t service_id);
    // Sends a REQ to dlid; the connection's events go to handler. The local
    // communication ID is filled in and returned.
    std::uint32_t ib_send_req(packet::ibcm::Req req, std::uint16_t dlid, IbCmHandler handler);
    // Where the events of a connection a REQ created go from now on.
    int ib_set_handler(std::uint32_t id, IbCmHandler handler);
    int ib_send_rep(std::uint32_t id, packet::ibcm::Rep rep);
    int ib_send_rtu(std::uint32_t id, std::vector<std::uint8_t> private_data);
    int ib_send_rej(std::uint32_t id, std::uint16_t reason, std::vector<std::uint8_t> private_data);
    int ib_send_dreq(std::uint32_t id, std::vector<std::uint8_t> private_data);
    // SIDR: the request ID is filled in and returned; wait is one try's
    // wait for the answer.
    std::uint32_t ib_send_sidr_req(packet::ibcm::SidrReq req, std::uint16_t dlid, sim::Tick wait,
                                   std::uint32_t retries, IbCmHandler handler);
    int ib_send_sidr_rep(std::uint32_t id, packet::ibcm::SidrRep rep);
    // The consumer is done with the connection: a REQ it holds is rejected,
    // a connection that is up is disconnected, and no more events come.
    void ib_destroy(std::uint32_t id);
    // IB CM connections in any state (time wait included).
    std::size_t ib_connections() const { return m_ib.size(); }

    // Management datagrams of other classes go to fn; send_mad sends one.
    void on_other_class(OtherClass fn) { m_other_class = std::move(fn); }
    void send_mad(const std::uint8_t* mad, std::uint16_t dlid, sim::Tick t);

    struct IbConnection {
        enum class State { ReqSent, ReqRcvd, RepSent, RepRcvd, Established, DreqSent, Timewait, SidrSent, SidrRcvd };
        State state = State::ReqSent;
        std::uint32_t remote_comm_id = 0;
        std::uint16_t remote_lid = 0;
        std::uint64_t service_id = 0;
        packet::ibcm::Req req;        // ours or the peer's: its time-outs and retries
        sim::Tick wait = 0;           // one try's wait for the answer
        std::uint32_t retries_left = 0;
        std::uint32_t generation = 0;  // of the pending retry timer
        packet::ibcm::Mad last;       // what a retry sends again
        IbCmHandler handler;          // empty once the consumer is done with it
    };

private:
    void handle_ib(const packet::ibcm::Mad& m, std::uint16_t slid, sim::Tick t);
    // Whether an IB CM message is for one of the IB CM connections (or
    // listens) rather than the VI protocol.
    bool owns_ib(const packet::ibcm::Mad& m) const;
    void ib_report(std::uint32_t id, IbCmEvent e);
    // Sends a connection's message and waits for its answer, resending.
    void ib_send_and_wait(std::uint32_t id, packet::ibcm::Mad m, sim::Tick t);
    void ib_arm(std::uint32_t id, sim::Tick at_t);
    void ib_timewait(std::uint32_t id, sim::Tick t);
    // Sends the connection's peer a REJ.
    void ib_reject(std::uint32_t id, const IbConnection& c, std::uint16_t reason, std::vector<std::uint8_t> private_data,
                   sim::Tick t);
    std::uint64_t next_tid() { return ++m_tid; }
    std::map<std::uint32_t, IbConnection> m_ib;     // by local communication ID
    std::map<std::uint64_t, IbCmHandler> m_ib_listens;  // by service ID
    std::uint64_t m_tid = 0;
    OtherClass m_other_class;

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
    void send(const packet::ibcm::Mad& m, std::uint16_t dlid, sim::Tick t);
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
