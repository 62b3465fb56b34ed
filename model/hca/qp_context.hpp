// A queue pair as the adapter holds it: the architected QP context that
// firmware writes, and beside it the on-chip state each block keeps for the
// QP while it works. Blocks find a QP through QpTable::context, which also
// says when its context is available.
#pragma once

#include <cstdint>
#include <deque>
#include <type_traits>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/transport_service.hpp"
#include "model/sim/time.hpp"

namespace hcasim::hca {

// An address path of a connected QP (IBA 11.2.4.2): the primary path it
// uses and the alternate path automatic path migration moves it to.
struct AddressPath {
    std::uint16_t dlid = 0;
    std::uint8_t sl = 0;
    std::uint8_t port = 1;           // the adapter port it leaves from (1..port.count)
    std::uint8_t timeout = 14;       // local ACK timeout on this path: 4.096 us x 2^timeout
    GlobalRoute grh;
};

// The path migration state machine (IBA 17.2.8). MIGRATED has no alternate
// path to go to and its packets carry BTH MigReq set; software loads an
// alternate path and asks for REARM, whose packets carry MigReq clear; a
// rearmed QP arms when the peer's packets carry MigReq clear too (both ends
// rearmed); an armed QP migrates when its primary path fails, or follows a
// peer whose packets carry MigReq set again.
enum class PathMigState : std::uint8_t { Migrated = 0, Rearm = 1, Armed = 2 };

// The architected QP context (QPC): the fixed-size entry of the adapter's
// context table that firmware writes at CREATE_QP and MODIFY_QP and reads
// at QUERY_QP. The hardware changes only its state (to an error state) and,
// when it migrates, its path.
struct Qpc {
    QpState state = QpState::Reset;
    QpType type = QpType::Rc;        // a VI's transport comes from its reliability level
    ViReliability vi = ViReliability::None;  // VI mode: descriptors, not rings
    bool sq_sig_all = false;
    std::uint32_t pdn = 0;
    std::uint32_t send_cqn = 0;
    std::uint32_t recv_cqn = 0;
    std::uint32_t srqn = 0;          // receives come from this SRQ (0: the QP's own ring)
    std::uint32_t xrcd = 0;          // XRC targets: the XRC domain whose SRQs it serves

    // Rings in host memory.
    std::uint64_t sq_base = 0;
    std::uint64_t rq_base = 0;
    std::uint64_t rq_db_record = 0;  // RqDoorbellRecord in host memory
    std::uint8_t sq_log_size = 0;
    std::uint8_t sq_log_stride = 6;
    std::uint8_t rq_log_size = 0;
    std::uint8_t rq_log_stride = 4;
    std::uint16_t max_send_sge = 1;
    std::uint16_t max_recv_sge = 1;
    std::uint32_t max_inline = 0;
    std::uint32_t vi_max_transfer = 0;

    // Attributes set by MODIFY_QP.
    std::uint32_t access = 0;
    std::uint32_t path_mtu = 4096;
    std::uint32_t dest_qpn = 0;
    std::uint32_t qkey = 0;          // UD
    std::uint32_t sq_psn = 0;        // first PSN the requester sends
    std::uint32_t rq_psn = 0;        // first PSN the responder expects
    std::uint16_t dlid = 0;
    std::uint8_t sl = 0;
    std::uint8_t retry_cnt = 7;
    std::uint8_t rnr_retry = 7;
    std::uint8_t min_rnr_timer = 0;
    std::uint8_t timeout = 14;
    std::uint8_t max_rd_atomic = 1;
    std::uint8_t max_dest_rd_atomic = 1;
    bool sqd_notify = false;         // in SQD: raise SQ drained once no send work is in progress
    GlobalRoute grh;                 // connected QPs whose path is global
    std::uint8_t port = 1;           // the port the primary path leaves from
    PathMigState mig = PathMigState::Migrated;
    AddressPath alt;                 // the alternate path (valid when mig is Armed)
};
static_assert(std::is_trivially_copyable_v<Qpc>, "the QPC is a fixed image firmware copies");
// One context table entry: as on ConnectX-class adapters, room for the
// primary and the alternate address path.
inline constexpr std::size_t kQpcBytes = 256;
static_assert(sizeof(Qpc) <= kQpcBytes, "the QPC outgrew its context table entry");

// Path migration (IBA 17.2.8): the alternate path becomes the primary one
// and nothing is left armed.
inline void load_alternate_path(Qpc& c) {
    c.dlid = c.alt.dlid;
    c.sl = c.alt.sl;
    c.port = c.alt.port;
    c.timeout = c.alt.timeout;
    c.grh = c.alt.grh;
    c.mig = PathMigState::Migrated;
}

// What MODIFY_QP changed beyond the image itself: the adapter (re)loads its
// working copies from these fields.
enum QpcLoad : std::uint32_t {
    kLoadSqPsn = 1,
    kLoadRqPsn = 2,
    kLoadRetryCnt = 4,
    kLoadRnrRetry = 8,
    kLoadState = 16,
};

// The WQE fetch engine's view of the work queues: producer indices the
// doorbells (and receive doorbell records) announced, how far it fetched,
// and the receive WQEs it holds on chip. Indices are free-running 16-bit.
struct QpFetchState {
    std::uint16_t sq_pi = 0;        // from the last send doorbell
    std::uint16_t sq_fetched = 0;   // next WQE the fetch engine reads
    bool sq_fetch_busy = false;
    std::uint16_t rq_pi = 0;        // as last read from the doorbell record
    std::uint16_t rq_fetched = 0;
    bool rq_fetch_busy = false;
    std::deque<RecvWork> rq_cache;  // prefetched receive WQEs
};

// The descriptor engine's two VI work queues.
struct QpDescriptorState {
    ViQueue sq, rq;
};

// The send queue on chip, worked by the requester and retired by the
// completer.
struct RequesterState {
    std::deque<SendWork> send_q;    // fetched, not yet completed
    std::size_t tx_index = 0;       // next WQE of send_q to transmit
    std::uint32_t tx_offset = 0;    // bytes of it already packetised
    std::uint32_t next_psn = 0;
    std::uint32_t outstanding_reads = 0;
    std::uint8_t rnr_retries_left = 7;
    std::uint8_t retries_left = 7;  // transport retries (local ACK timeout)
    std::uint32_t acked_psn = kPsnMask;  // newest PSN an ACK covered: an ACK past it is forward progress
    bool ack_timer_armed = false;   // a timer event is pending
    sim::Tick ack_deadline = 0;     // it fires a retry if still unacknowledged then
    sim::Tick tx_hold_until = 0;    // RNR back-off
    sim::Tick local_op_done = 0;    // the last bind or local invalidate is done: later WQEs start after it
    bool sq_drained_reported = false;  // SQD: the drained event went out
};

// The transmit pipeline's ordering state and the scheduler's mark.
struct TransmitState {
    sim::Tick last_tx_ready = 0;    // keeps one QP's packets in order through the pipeline
    sim::Tick last_wire_end = 0;    // ... and on the wire
    bool scheduled = false;         // in the scheduler's ring
    bool context_held = false;      // the send side keeps the QP context on chip
    bool responded_last = false;    // the QP's last packet was a response: requests have the next turn
};

// The responder's state of the inbound request stream.
struct ResponderState {
    bool comm_established = false;  // a request arrived (in RTR: reported once)
    std::uint32_t epsn = 0;
    std::uint32_t msn = 0;
    bool nak_outstanding = false;   // sent RNR/sequence NAK, dropping until epsn
    bool recv_in_progress = false;
    std::uint32_t recv_offset = 0;
    std::vector<DmaSpan> recv_spans;
    bool write_in_progress = false;
    std::uint32_t write_remaining = 0;
    std::uint32_t write_total = 0;
    std::vector<DmaSpan> write_spans;
    std::uint32_t unacked_packets = 0;
    std::deque<ReadResponseJob> read_jobs;
    // Results of the last atomics executed, answered again when a request is
    // repeated (never executed twice): max_dest_rd_atomic entries.
    struct SavedAtomic {
        std::uint32_t psn;
        std::uint64_t orig;
        std::uint32_t msn;
    };
    std::deque<SavedAtomic> atomic_results;
    // An ACK or NAK held back behind READ responses still to be sent:
    // responses leave in PSN order (IBA 9.7.5.1).
    bool ack_deferred = false;
    std::uint8_t deferred_syndrome = 0;
    std::uint32_t deferred_psn = 0;
    // A request failed behind READ responses still to be sent: they go
    // first, then its NAK, and the QP enters the error state with the NAK;
    // meanwhile it takes no further request.
    bool error_deferred = false;
    // An XRC target's current message: the SRQ its first packet named, that
    // SRQ's CQ and the protection domain of the memory it may touch.
    std::uint32_t xrc_srqn = 0;
    std::uint32_t xrc_cqn = 0;
    std::uint32_t xrc_pdn = 0;
    bool last_wqe_reached = false;  // reported once the QP left an SRQ in error
};

// The QP's own counters, named as rdma_hw_stats names them for a QP
// (rdma statistic qp): what its requester, responder and completions met.
struct QpCounters {
    std::uint64_t local_ack_timeout_err = 0;
    std::uint64_t packet_seq_err = 0;       // sequence error NAKs received
    std::uint64_t implied_nak_seq_err = 0;
    std::uint64_t rnr_nak_retry_err = 0;    // RNR NAKs received
    std::uint64_t out_of_sequence = 0;      // requests after a gap
    std::uint64_t duplicate_request = 0;
    std::uint64_t out_of_buffer = 0;        // requests that found no receive WQE
    std::uint64_t rx_write_requests = 0;
    std::uint64_t rx_read_requests = 0;
    std::uint64_t rx_atomic_requests = 0;
    std::uint64_t req_cqe_error = 0;
    std::uint64_t req_cqe_flush_error = 0;
    std::uint64_t resp_cqe_error = 0;
    std::uint64_t resp_cqe_flush_error = 0;

    // f(name, value) for each counter, in this order.
    template <typename F>
    void each(F f) const {
        f("local_ack_timeout_err", local_ack_timeout_err);
        f("packet_seq_err", packet_seq_err);
        f("implied_nak_seq_err", implied_nak_seq_err);
        f("rnr_nak_retry_err", rnr_nak_retry_err);
        f("out_of_sequence", out_of_sequence);
        f("duplicate_request", duplicate_request);
        f("out_of_buffer", out_of_buffer);
        f("rx_write_requests", rx_write_requests);
        f("rx_read_requests", rx_read_requests);
        f("rx_atomic_requests", rx_atomic_requests);
        f("req_cqe_error", req_cqe_error);
        f("req_cqe_flush_error", req_cqe_flush_error);
        f("resp_cqe_error", resp_cqe_error);
        f("resp_cqe_flush_error", resp_cqe_flush_error);
    }
    QpCounters& operator+=(const QpCounters& o) {
        local_ack_timeout_err += o.local_ack_timeout_err;
        packet_seq_err += o.packet_seq_err;
        implied_nak_seq_err += o.implied_nak_seq_err;
        rnr_nak_retry_err += o.rnr_nak_retry_err;
        out_of_sequence += o.out_of_sequence;
        duplicate_request += o.duplicate_request;
        out_of_buffer += o.out_of_buffer;
        rx_write_requests += o.rx_write_requests;
        rx_read_requests += o.rx_read_requests;
        rx_atomic_requests += o.rx_atomic_requests;
        req_cqe_error += o.req_cqe_error;
        req_cqe_flush_error += o.req_cqe_flush_error;
        resp_cqe_error += o.resp_cqe_error;
        resp_cqe_flush_error += o.resp_cqe_flush_error;
        return *this;
    }
};

struct QpContext {
    bool valid = false;
    std::uint32_t qpn = 0;
    Qpc qpc;                        // architected: written by firmware
    QpCounters counters;
    QpFetchState fetch;
    QpDescriptorState desc;
    RequesterState req;
    TransmitState tx;
    ResponderState resp;

    bool is_vi() const { return qpc.vi != ViReliability::None; }
    QpType transport() const {
        switch (qpc.vi) {
        case ViReliability::Unreliable: return QpType::ViUnreliable;
        case ViReliability::ReliableDelivery: return QpType::ViReliableDelivery;
        case ViReliability::ReliableReception: return QpType::ViReliableReception;
        case ViReliability::None: break;
        }
        return qpc.type;
    }
    const TransportService& service() const { return transport_service(transport()); }
    std::uint32_t sq_entries() const { return 1u << qpc.sq_log_size; }
    std::uint32_t rq_entries() const { return 1u << qpc.rq_log_size; }

    // The receive side's SRQ, CQ and protection domain: an XRC target takes
    // them from the SRQ its current message named.
    bool xrc_target() const { return qpc.type == QpType::XrcTarget; }
    std::uint32_t recv_srqn() const { return xrc_target() ? resp.xrc_srqn : qpc.srqn; }
    std::uint32_t recv_cqn() const { return xrc_target() ? resp.xrc_cqn : qpc.recv_cqn; }
    std::uint32_t recv_pdn() const { return xrc_target() ? resp.xrc_pdn : qpc.pdn; }
};

}  // namespace hcasim::hca
