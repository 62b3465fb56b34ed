// The narrow services the adapter's blocks call out through. The adapter
// wires each block to its neighbours once, in its constructor; a test wires
// stubs instead and drives one block on its own.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/hca/async_event.hpp"
#include "model/hca/contexts.hpp"
#include "model/hca/hw_formats.hpp"
#include "model/hca/qp_context.hpp"
#include "model/packet/ib_packet.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/time.hpp"

namespace hcasim::hca {

// QpMismatch: a type 2 memory window used from a QP it is not bound to.
enum class Protection { Ok, BadKey, PdMismatch, OutOfBounds, AccessDenied, QpMismatch };
const char* to_string(Protection p);

struct Translation {
    Protection status = Protection::Ok;
    sim::Tick ready = 0;
};

// The outcome of a memory management operation (bind, invalidate) on the
// protection table; anything but Ok fails the operation.
enum class WindowStatus {
    Ok,
    NoWindow,          // the key names no window (of the kind the operation needs)
    WrongType,         // a type 1 bind of a type 2 window or the reverse; invalidation of a type 1 window
    AlreadyBound,      // a type 2 window must be invalidated before it is bound again
    BadNewKey,         // the new key does not name the window's entry
    NoRegion,          // the region key names no region
    NoBindRight,       // the region was registered without IBV_ACCESS_MW_BIND
    PdMismatch,        // window, region and QP are not in one protection domain
    OutOfBounds,       // the range is not inside the region
    RightsExceedRegion,  // remote write or atomic on a region without local write
    NotBound,          // invalidation of a window that is not bound, or under a stale key
    QpMismatch,        // invalidation of a type 2 window from a QP it is not bound to
};
const char* to_string(WindowStatus s);

struct WindowResult {
    WindowStatus status = WindowStatus::Ok;
    sim::Tick ready = 0;  // when the operation is done (or has failed)
};

// A QP found by number, and when its context is available to the block
// that asked.
struct QpAccess {
    QpContext* qp = nullptr;  // null when there is none
    sim::Tick ready = 0;
};

// The QP context table: the one way blocks find a QP by number.
class QpTable {
public:
    virtual ~QpTable() = default;
    // The QP qpn as a block asking at t gets it.
    virtual QpAccess context(std::uint32_t qpn, sim::Tick t) = 0;
    // A block working on QP qpn keeps its context on chip until it releases
    // it: a context the cache holds is never the one a miss evicts. Returns
    // false (and holds nothing) when the context is not on chip or being
    // filled.
    virtual bool hold_context(std::uint32_t qpn) = 0;
    virtual void release_context(std::uint32_t qpn) = 0;
    // A block's own working state of QP qpn, without reading its context
    // (null when the QP is gone): for state the block keeps on chip anyway.
    virtual QpContext* working_state(std::uint32_t qpn) = 0;
};

// The send side holds a QP's context from fetching its WQEs to sending their
// last packet, as a send engine keeps the QP it works on: one hold per QP.
inline void hold_for_send(QpTable& table, QpContext& qp) {
    if (!qp.tx.context_held) qp.tx.context_held = table.hold_context(qp.qpn);
}
inline void release_after_send(QpTable& table, QpContext& qp) {
    if (qp.tx.context_held) table.release_context(qp.qpn);
    qp.tx.context_held = false;
}

// The shared receive queues by number (the SRQ engine), null when none.
class SrqTable {
public:
    virtual ~SrqTable() = default;
    virtual SrqContext* srq(std::uint32_t srqn) = 0;
};

// The SRQ engine as the fetch engine sees it: WQEs handed to QPs on demand.
class SharedReceiveQueues : public SrqTable {
public:
    // Hands qp the next WQE on chip (or fetches one when demand); returns
    // when the engine is done deciding.
    virtual sim::Tick take(QpContext& qp, SrqContext& srq, sim::Tick t, bool demand) = 0;
    // Refills the SRQ's on-chip WQEs ahead of need.
    virtual void top_up(SrqContext& srq, sim::Tick t) = 0;
};

// The CQ contexts by number, null when none.
class CqTable {
public:
    virtual ~CqTable() = default;
    virtual CqContext* cq(std::uint32_t cqn) = 0;
    // When CQ cqn's context is on chip for a block asking at t.
    virtual sim::Tick cq_context_ready(std::uint32_t cqn, sim::Tick t) = 0;
};

// Interrupts to the host other than asynchronous events.
class InterruptRaiser {
public:
    virtual ~InterruptRaiser() = default;
    // The completion interrupt of an armed CQ.
    virtual void raise_completion(sim::Tick t, std::uint32_t cqn) = 0;
    // The interrupt of an armed VI work queue that has no CQ.
    virtual void raise_vi_queue(sim::Tick t, std::uint32_t qpn, bool recv_queue) = 0;
};

// CQ arming (the completion engine), as the doorbell unit sees it.
class CompletionArming {
public:
    virtual ~CompletionArming() = default;
    // Arms the CQ for its next CQE (any, or solicited only).
    virtual void arm(sim::Tick t, std::uint32_t cqn, std::uint32_t consumer, bool solicited) = 0;
};

// The VI descriptor engine, as the doorbell unit and the fetch engine see it.
class DescriptorQueues {
public:
    virtual ~DescriptorQueues() = default;
    // The doorbell of one posted descriptor, decoded at t.
    virtual void posted(QpContext& qp, bool recv, const ViDoorbellToken& tok, sim::Tick t) = 0;
    // Fetches the next posted descriptors of a queue; demand: a message is
    // waiting for a receive descriptor.
    virtual void fetch(QpContext& qp, bool recv, sim::Tick t, bool demand = false) = 0;
    // Arms a queue's interrupt for its next completion.
    virtual void arm(QpContext& qp, bool recv) = 0;
};

// Address translation and protection checks (the translation unit). Appends
// the physical spans of [va, va + len) to out.
class AddressTranslator {
public:
    virtual ~AddressTranslator() = default;
    virtual Translation translate(sim::Tick t, std::uint32_t key, std::uint32_t pdn, std::uint64_t va,
                                  std::uint64_t len, std::uint32_t access, std::vector<DmaSpan>& out) = 0;
    // The same for a remote access under rkey by a request that came in on
    // QP qpn: rkey names a region or a bound memory window, whose range and
    // rights then govern (a type 2 window serves only the QP it is bound to).
    virtual Translation translate_remote(sim::Tick t, std::uint32_t rkey, std::uint32_t qpn, std::uint32_t pdn,
                                         std::uint64_t va, std::uint64_t len, std::uint32_t access,
                                         std::vector<DmaSpan>& out) = 0;
    // Memory management operations of QP qpn (in protection domain pdn):
    // binds a window as the bind WQE says, and invalidates the type 2
    // window key names (a local invalidate, or the peer's SEND with
    // invalidate that came in on qpn).
    virtual WindowResult bind_window(sim::Tick t, const BindSeg& bind, std::uint32_t qpn, std::uint32_t pdn) = 0;
    virtual WindowResult invalidate_window(sim::Tick t, std::uint32_t key, std::uint32_t qpn, std::uint32_t pdn) = 0;
};

// Work-queue entries brought on chip (the WQE fetch engine).
class WorkQueueFetcher {
public:
    virtual ~WorkQueueFetcher() = default;
    // Fetches the next send WQEs of qp, if any are posted.
    virtual void fetch_send(QpContext& qp, sim::Tick t) = 0;
    // Brings receive WQEs on chip; demand: a message is waiting for one.
    // Returns when the fetch engine is done deciding.
    virtual sim::Tick prefetch_recv(QpContext& qp, sim::Tick t, bool demand) = 0;
    // The head receive WQE was used up.
    virtual void recv_consumed(QpContext& qp, sim::Tick t) = 0;
    // Takes a WQE that came with its BlueFlame doorbell; returns when it is
    // parsed (t if it was not taken).
    virtual sim::Tick blueflame(QpContext& qp, const std::vector<std::uint8_t>& wqe, sim::Tick t) = 0;
};

// Work completions: CQEs (verbs) and descriptor write-backs (VI).
class CompletionWriter {
public:
    virtual ~CompletionWriter() = default;
    // False when the CQ cannot take it (overrun or gone).
    virtual bool post_cqe(sim::Tick t, std::uint32_t cqn, const Cqe& cqe) = 0;
    virtual void complete_descriptor(QpContext& qp, bool recv, std::uint64_t desc_addr, std::uint32_t desc_handle,
                                     std::uint32_t status, std::uint32_t length, std::optional<std::uint32_t> imm,
                                     sim::Tick t) = 0;
};

// QP errors and asynchronous events (the adapter).
class QpErrorHandler {
public:
    virtual ~QpErrorHandler() = default;
    virtual void raise_async(sim::Tick t, AsyncEvent e) = 0;
    // Moves qp to the error state and flushes its work.
    virtual void enter_error(QpContext& qp, sim::Tick t) = 0;
    // A locally caused send error on an unacknowledged service (UC, UD):
    // the send queue error state (IBA 10.3.1), where the send queue is
    // flushed and the receive queue goes on working.
    virtual void enter_send_queue_error(QpContext& qp, sim::Tick t) = 0;
    // Completes every posted WQE of both queues with a flush error (a QP
    // already in the error state that was rung), or of the send queue only.
    virtual void flush(QpContext& qp, sim::Tick t) = 0;
    virtual void flush_send(QpContext& qp, sim::Tick t) = 0;
    // An SRQ can give out no more WQEs: it reports the SRQ error, and every
    // QP on it reports a fatal error and goes to the error state.
    virtual void fail_srq(std::uint32_t srqn, sim::Tick t) = 0;
};

// Where a packet goes: LRH, BTH destination QP and, when global, the GRH.
struct Route {
    std::uint16_t dlid = 0;
    std::uint8_t sl = 0;
    std::uint32_t dest_qpn = 0;
    const GlobalRoute* grh = nullptr;  // null or not present: no GRH
    std::uint8_t port = 1;             // the adapter port it leaves from
    bool migreq = false;               // BTH MigReq
};
// A connected QP's route: its primary path, and MigReq set while it has no
// alternate path armed (IBA 17.2.8).
inline Route route_of(const QpContext& qp) {
    return Route{qp.qpc.dlid, qp.qpc.sl, qp.qpc.dest_qpn, &qp.qpc.grh, qp.qpc.port, qp.qpc.mig == PathMigState::Migrated};
}

// Automatic path migration, as the transport blocks ask for it.
class PathMigrator {
public:
    virtual ~PathMigrator() = default;
    // The requester ran out of retries on the primary path: true when the
    // QP migrated to its alternate path (and may retry there).
    virtual bool fail_over(QpContext& qp, sim::Tick t) = 0;
    // A packet from the peer reached the QP; its MigReq bit says whether
    // the peer is migrated or (re)armed.
    virtual void peer_state(QpContext& qp, bool migreq, sim::Tick t) = 0;
};

// The transmit pipeline, as packet producers see it.
class TransmitPath {
public:
    virtual ~TransmitPath() = default;
    // qp has something to send (from t on).
    virtual void kick(QpContext& qp, sim::Tick t) = 0;
    // A packet along route with these headers and room for payload_len
    // payload bytes at *payload.
    virtual packet::PacketPtr make_packet(const Route& route, packet::Headers& h, std::uint32_t payload_len,
                                          std::uint8_t** payload) = 0;
    // What the producer must hear of a packet that waited in the port for
    // flow-control credits, once it is on the wire.
    enum class OnWire : std::uint8_t {
        Nothing,          // a response: nothing waits for its wire time
        Request,          // an RC request: its ACK timer runs from then
        LastUnacknowledged  // a UC/UD WQE's last packet: the WQE is done then
    };
    // Seals pkt and books it through the pipeline and onto the port once its
    // payload is in the packet buffer (data_ready). True when it is booked on
    // the wire now (qp.tx.last_wire_end is its end); false when it waits for
    // flow-control credits, and the producer hears of it (PacketProducer::
    // on_wire) when it goes.
    virtual bool launch(QpContext& qp, packet::PacketPtr pkt, sim::Tick data_ready, OnWire then = OnWire::Nothing) = 0;
    // An ACK, RNR NAK or NAK with this AETH syndrome for psn, sent at t.
    virtual void send_ack(QpContext& qp, sim::Tick t, std::uint8_t syndrome, std::uint32_t psn) = 0;
};

// A source of packets the transmit pipeline asks, one packet per turn of a QP.
class PacketProducer {
public:
    virtual ~PacketProducer() = default;
    virtual bool has_work(const QpContext& qp) const = 0;
    // Produces (launches) at most one packet of qp, executes one memory
    // management operation of it, or completes one WQE that failed before
    // its first packet; true if it did.
    virtual bool produce(QpContext& qp, sim::Tick now) = 0;
    // A packet of qp that waited for flow-control credits is on the wire
    // until end (launch said it would tell).
    virtual void on_wire(QpContext& qp, TransmitPath::OnWire what, sim::Tick end) {
        (void)qp;
        (void)what;
        (void)end;
    }
};

// The requester, as the completer sees it: go back and resend.
class RequestRewinder {
public:
    virtual ~RequestRewinder() = default;
    // Resend from psn (after an RNR or sequence NAK or a time-out), not
    // before resume_at.
    virtual void rewind(QpContext& qp, std::uint32_t psn, sim::Tick resume_at) = 0;
};

// The completer, as the requester sees it.
class SendCompleter {
public:
    virtual ~SendCompleter() = default;
    // Completes, in order, the send WQEs at the head of the queue that are done.
    virtual void retire(QpContext& qp, sim::Tick t) = 0;
    // Starts the local ACK timeout if it is not running.
    virtual void arm_ack_timer(QpContext& qp, sim::Tick t) = 0;
};

// A block that takes the packets the receive pipeline classifies for it.
class PacketHandler {
public:
    virtual ~PacketHandler() = default;
    // p was parsed from pkt; its payload starts at payload. t: when the
    // receive pipeline is done with it. pkt must stay alive until the DMA
    // writes that point into it land (the DMA engine holds it).
    virtual void handle(QpContext& qp, const packet::Parsed& p, const packet::PacketPtr& pkt,
                        const std::uint8_t* payload, sim::Tick t) = 0;
};

}  // namespace hcasim::hca
