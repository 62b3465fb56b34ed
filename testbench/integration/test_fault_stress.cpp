// Seeded random stress of the RC error paths: many QPs between two nodes,
// each with a random chain of SENDs, WRITEs (with and without immediate data)
// and READs of random sizes over 1 to 3 pieces, and fetch-and-adds and
// compare-and-swaps (matching and not) on a cell of its own, some
// unsignaled, posted in random bursts across the QPs. On about half the QPs
// one work request, at a random place in the chain, is bad in one of five
// ways:
//
//  * a gather entry with an invalid lkey: IBV_WC_LOC_PROT_ERR at the
//    requester; the responder is not told;
//  * a WRITE, READ or atomic with an invalid rkey, or
//  * one whose range runs past the end of the peer's region:
//    IBV_WC_REM_ACCESS_ERR at the requester, IBV_EVENT_QP_ACCESS_ERR at the
//    responder, and nothing written;
//  * an atomic at an address not a multiple of 8: IBV_WC_REM_INV_REQ_ERR at
//    the requester, IBV_EVENT_QP_REQ_ERR at the responder;
//  * a SEND longer than the receive it lands in: IBV_WC_LOC_LEN_ERR at the
//    receiver, IBV_EVENT_QP_REQ_ERR there, IBV_WC_REM_INV_REQ_ERR at the
//    sender.
//
// Every work request before the bad one completes as it should, every one
// after it is flushed (IBV_WC_WR_FLUSH_ERR, signaled or not), the receives
// follow the same rule at the responder, and the other QPs, sharing the
// adapters and CQs, lose and corrupt nothing. Both nodes' whole buffers are
// compared with what the successful work requests put there (an atomic's
// original value, a cell's final value follow from the plan): a write that
// should not have happened, or a byte past a receive that was too short,
// shows. A request posted right after a gather error would race with the
// error (IB leaves its outcome open), so the bad gather is posted only once
// the requests before it on its QP are complete.
//
// Over lossy links the requester may learn of the bad request as a transport
// retry error instead (see SendQueueCheck). UC QPs take several bad requests
// each and go on after them (see make_uc_plan); over lossy links a UC
// message that loses a packet is lost whole, and each receive completion
// must then be a message sent after the one before it, intact.
//
// Both ways (add_back_chains): node 1 also sends a random chain to node 0
// on each QP. When the QP fails, node 1's requests stop at a point timing
// decides: a prefix of them succeeds, the first that does not is flushed or
// runs out of retries, the rest are flushed; node 0's receives for them
// succeed up to a point and are flushed after it, and each of their WRITEs
// has either landed or not, byte by byte.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "testbench/integration/fault_stress.hpp"
#include "testbench/integration/harness.hpp"
#include "testbench/integration/stress_seeds.hpp"
#include "testbench/system/split_mix.hpp"

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::test::fault;
using testbench::SplitMix64;

namespace {

enum class FOp { Send, Write, WriteImm, Read, FetchAdd, CmpSwap };
enum class Fault { None, LocalKey, RemoteKey, RemoteBounds, RecvTooSmall, Misaligned };

bool is_atomic(FOp op) { return op == FOp::FetchAdd || op == FOp::CmpSwap; }

const char* fop_name(FOp op) {
    switch (op) {
    case FOp::Send: return "SEND";
    case FOp::Write: return "WRITE";
    case FOp::WriteImm: return "WRITE_WITH_IMM";
    case FOp::Read: return "READ";
    case FOp::FetchAdd: return "FETCH_AND_ADD";
    case FOp::CmpSwap: return "CMP_AND_SWP";
    }
    return "?";
}

const char* fault_name(Fault f) {
    switch (f) {
    case Fault::None: return "none";
    case Fault::LocalKey: return "invalid lkey";
    case Fault::RemoteKey: return "invalid rkey";
    case Fault::RemoteBounds: return "range past the region";
    case Fault::RecvTooSmall: return "receive too short";
    case Fault::Misaligned: return "misaligned atomic";
    }
    return "?";
}

struct FWr {
    FOp op = FOp::Send;
    std::uint32_t len = 0;
    std::vector<Piece> local;  // node 0: gathered (SEND, WRITE) or scattered into (READ)
    std::size_t remote = 0;    // node 1: WRITE destination or READ source
    int recv = -1;             // the receive it consumes on node 1
    bool signaled = true;
    std::uint32_t imm = 0;
    std::uint64_t operand = 0;  // FETCH_AND_ADD: what it adds; CMP_AND_SWP: what it swaps in
    bool cas_match = false;     // CMP_AND_SWP: compares with the cell's value (else with another)
    Fault bad = Fault::None;    // UC: this request is bad, and the QP goes on after it
};

struct FRecv {
    std::vector<Piece> pieces;  // on node 1
    int wr = -1;  // the work request that consumes it
};

struct FQp {
    std::vector<FWr> wrs;
    std::vector<FRecv> recvs;
    // Both ways: node 1's requests to node 0 on this QP (local pieces on
    // node 1, remote ranges and receives on node 0) and node 0's receives.
    std::vector<FWr> back;
    std::vector<FRecv> back_recvs;
    Fault fault = Fault::None;
    int at = -1;           // the bad work request
    std::size_t cell = 0;  // node 1: the 8 bytes this QP's atomics work on
    bool bad_before(int j) const { return fault != Fault::None && j >= at; }
    // How request j is bad: the RC QP's bad request, or a UC request of its own.
    Fault fault_at(std::size_t j) const { return static_cast<int>(j) == at ? fault : wrs[j].bad; }
    // Request j is carried out in full at the responder.
    bool executed(std::size_t j) const { return !bad_before(static_cast<int>(j)) && wrs[j].bad == Fault::None; }
};

constexpr std::size_t kZone = 32 * 1024;  // the end of node 1's buffer: only out-of-range requests aim there
constexpr std::uint32_t kMaxLen = 24 * 1024;  // the longest request

struct FPlan {
    std::uint64_t seed = 0;
    ibv_mtu mtu = IBV_MTU_4096;
    ibv_qp_type type = IBV_QPT_RC;
    bool atomics = false;  // each QP has a cell on node 1 for its atomics
    bool lossy = false;    // links drop and corrupt 1 % of packets
    bool both_ways = false;  // node 1 sends too (add_back_chains)
    std::vector<FQp> qps;
    std::size_t bytes0 = 0, bytes1 = 0;  // buffer sizes; node 1's ends with kZone
    std::string describe() const {
        int faults = 0, wrs = 0;
        int back = 0;
        for (const auto& q : qps) {
            faults += q.fault != Fault::None;
            for (const auto& w : q.wrs) faults += w.bad != Fault::None;
            wrs += static_cast<int>(q.wrs.size());
            back += static_cast<int>(q.back.size());
        }
        std::ostringstream os;
        os << "seed " << seed << " (" << (type == IBV_QPT_UC ? "UC, " : "") << qps.size() << " QPs, " << wrs << " work requests, " << faults
           << " bad, MTU " << (128 << mtu) << (lossy ? ", lossy links" : "") << (both_ways ? ", and " + std::to_string(back) + " from node 1" : "") << ")";
        return os.str();
    }
};

std::uint32_t draw_len(SplitMix64& r) {
    const std::uint64_t c = r.below(100);
    if (c < 55) return static_cast<std::uint32_t>(r.range(1, 512));
    if (c < 93) return static_cast<std::uint32_t>(r.range(513, 8192));
    return static_cast<std::uint32_t>(r.range(8193, kMaxLen));
}

// The rest of request j once its operation is drawn: its size (at least 2
// bytes when it is to run past the region or overflow its receive), its
// pieces (from cursor c0 on the requesting node), its remote range, immediate
// data, signalling and the receive it takes from recvs (when it takes one,
// from c1 on the responding node; a too-short one lacks at least a byte).
void draw_request(SplitMix64& r, std::vector<FRecv>& recvs, FWr& w, int j, Fault f, bool takes_recv, std::size_t& c0,
                  std::size_t& c1) {
    w.len = draw_len(r);
    if (f == Fault::RecvTooSmall || f == Fault::RemoteBounds) w.len = std::max(w.len, 2u);
    w.local = place(r, c0, w.len, 3);
    if (w.op != FOp::Send) {
        c1 += r.below(40);
        w.remote = c1;
        c1 += w.len;
    }
    w.imm = static_cast<std::uint32_t>(r.next());
    w.signaled = r.chance(70);
    if (!takes_recv) return;
    FRecv rv;
    rv.wr = j;
    // A SEND's receive has room to spare now and then.
    std::uint32_t room = w.op == FOp::Send ? w.len + (r.chance(30) ? static_cast<std::uint32_t>(r.range(1, 64)) : 0) : 0;
    if (f == Fault::RecvTooSmall) room = static_cast<std::uint32_t>(r.range(1, w.len - 1));
    if (room > 0) rv.pieces = place(r, c1, room, 3);
    w.recv = static_cast<int>(recvs.size());
    recvs.push_back(rv);
}

// Whole pages past the last piece on each node; node 1's end with kZone.
void size_buffers(FPlan& p, std::size_t c0, std::size_t c1) {
    p.bytes0 = (c0 + 64 + 4095) / 4096 * 4096;
    p.bytes1 = (c1 + 64 + 4095) / 4096 * 4096 + kZone;
}

// Plans without atomics are the plans of the seeds the RTL case first
// failed, kept for their regression test.
FPlan make_plan(std::uint64_t seed, bool atomics = true) {
    SplitMix64 r{seed * 0x9e3779b97f4a7c15ull + 17};
    FPlan p;
    p.seed = seed;
    p.atomics = atomics;
    p.mtu = static_cast<ibv_mtu>(r.range(IBV_MTU_256, IBV_MTU_4096));
    p.qps.resize(r.range(2, 8));
    std::size_t c0 = r.below(64), c1 = r.below(64);
    for (auto& q : p.qps) {
        const int n = static_cast<int>(r.range(4, 20));
        if (r.chance(55)) {
            const std::uint64_t k = r.below(atomics ? 5 : 4);
            q.fault = k == 0   ? Fault::LocalKey
                      : k == 1 ? Fault::RemoteKey
                      : k == 2 ? Fault::RemoteBounds
                      : k == 3 ? Fault::RecvTooSmall
                               : Fault::Misaligned;
            q.at = static_cast<int>(r.below(static_cast<std::uint64_t>(n)));
        }
        if (atomics) {
            c1 = (c1 + r.below(40) + 7) / 8 * 8;
            q.cell = c1;
            c1 += 8;
        }
        for (int j = 0; j < n; ++j) {
            FWr w;
            const std::uint64_t c = r.below(100);
            w.op = c < 40 ? FOp::Send : c < 65 ? FOp::Write : c < 80 ? FOp::WriteImm : FOp::Read;
            if (atomics && r.chance(15)) w.op = r.chance(50) ? FOp::FetchAdd : FOp::CmpSwap;
            // The bad request is of a kind its fault applies to. (A bad
            // local key on a READ or atomic would be met only when its answer
            // arrives, racing with the requests after it.)
            if (j == q.at) {
                if (q.fault == Fault::LocalKey && (w.op == FOp::Read || is_atomic(w.op))) w.op = FOp::Write;
                if ((q.fault == Fault::RemoteKey || q.fault == Fault::RemoteBounds) && w.op == FOp::Send) w.op = FOp::Read;
                if (q.fault == Fault::RecvTooSmall) w.op = FOp::Send;
                if (q.fault == Fault::Misaligned && !is_atomic(w.op)) w.op = FOp::FetchAdd;
            }
            if (is_atomic(w.op)) {
                w.len = 8;
                w.local = place(r, c0, 8, 1);
                w.remote = q.cell;
                w.operand = r.next();
                w.cas_match = r.chance(50);
                w.signaled = r.chance(70);
                q.wrs.push_back(w);
                continue;
            }
            draw_request(r, q.recvs, w, j, j == q.at ? q.fault : Fault::None, w.op == FOp::Send || w.op == FOp::WriteImm, c0, c1);
            q.wrs.push_back(w);
        }
        // The bad request always reports; so does the last, and the one
        // before a bad gather (which is posted once that one is complete).
        if (q.at >= 0) q.wrs[static_cast<std::size_t>(q.at)].signaled = true;
        if (q.fault == Fault::LocalKey && q.at > 0) q.wrs[static_cast<std::size_t>(q.at - 1)].signaled = true;
        q.wrs.back().signaled = true;
    }
    size_buffers(p, c0, c1);
    return p;
}

// UC: SENDs, WRITEs and WRITEs with immediate data, about one in seven of
// them bad (a WRITE with an invalid rkey or past the region, a SEND longer
// than its receive). A UC responder drops a bad WRITE without a word, and a
// WRITE with immediate data dropped so takes no receive: the next message
// that needs one gets it. The requester learns of nothing and goes on.
// Lossy: a lost message leaves its receive to the next, so every receive
// has room for any message, and no SEND is too long.
FPlan make_uc_plan(std::uint64_t seed, bool lossy = false) {
    SplitMix64 r{seed * 0x9e3779b97f4a7c15ull + 23};
    FPlan p;
    p.seed = seed;
    p.lossy = lossy;
    p.type = IBV_QPT_UC;
    p.mtu = static_cast<ibv_mtu>(r.range(IBV_MTU_256, IBV_MTU_4096));
    p.qps.resize(r.range(2, 8));
    std::size_t c0 = r.below(64), c1 = r.below(64);
    for (auto& q : p.qps) {
        const int n = static_cast<int>(r.range(4, 24));
        for (int j = 0; j < n; ++j) {
            FWr w;
            const std::uint64_t c = r.below(100);
            w.op = c < 45 ? FOp::Send : c < 75 ? FOp::Write : FOp::WriteImm;
            if (r.chance(15))
                w.bad = w.op == FOp::Send ? Fault::RecvTooSmall : r.chance(50) ? Fault::RemoteKey : Fault::RemoteBounds;
            if (lossy && w.bad == Fault::RecvTooSmall) w.bad = Fault::None;
            draw_request(r, q.recvs, w, j, w.bad, w.op == FOp::Send || (w.op == FOp::WriteImm && w.bad == Fault::None), c0, c1);
            if (lossy && w.recv >= 0) q.recvs.back().pieces = place(r, c1, kMaxLen, 3);
            q.wrs.push_back(w);
        }
        q.wrs.back().signaled = true;
    }
    size_buffers(p, c0, c1);
    return p;
}

// Node 1's chains (both ways): 2 to 12 SENDs, WRITEs, WRITEs with immediate
// data and READs per QP, none of them bad, in space past what the plan uses
// on each node (node 1's kZone moves to the new end).
void add_back_chains(FPlan& p) {
    SplitMix64 r{p.seed * 0x9e3779b97f4a7c15ull + 41};
    p.both_ways = true;
    std::size_t c0 = p.bytes0, c1 = p.bytes1;
    for (auto& q : p.qps) {
        const int n = static_cast<int>(r.range(2, 12));
        for (int j = 0; j < n; ++j) {
            FWr w;
            const std::uint64_t c = r.below(100);
            w.op = c < 35 ? FOp::Send : c < 60 ? FOp::Write : c < 75 ? FOp::WriteImm : FOp::Read;
            // Node 1 requests, node 0 responds.
            draw_request(r, q.back_recvs, w, j, Fault::None, w.op == FOp::Send || w.op == FOp::WriteImm, c1, c0);
            q.back.push_back(w);
        }
        q.back.back().signaled = true;
    }
    p.bytes0 = (c0 + 64 + 4095) / 4096 * 4096;
    p.bytes1 = (c1 + 64 + 4095) / 4096 * 4096 + kZone;
}

std::uint64_t send_id(std::size_t q, std::size_t j) { return (std::uint64_t(q) << 32) | j; }
std::uint64_t recv_id(std::size_t q, std::size_t k) { return (std::uint64_t(1) << 62) | (std::uint64_t(q) << 32) | k; }

std::string where(const FPlan& p, std::size_t q, std::size_t j) {
    const FQp& fq = p.qps[q];
    const FWr& w = fq.wrs[j];
    std::ostringstream os;
    os << "QP " << q << " WR " << j << " (" << fop_name(w.op) << ", " << w.len << " B, " << w.local.size() << " pieces"
       << (w.signaled ? "" : ", unsignaled");
    if (w.bad != Fault::None) os << ", bad: " << fault_name(w.bad);
    if (fq.fault != Fault::None) os << "; " << fault_name(fq.fault) << " at WR " << fq.at;
    os << ")";
    return os.str();
}

// What a completion should say.
struct Expect {
    std::uint64_t wr_id;
    ibv_wc_status status;
    std::size_t wr;  // the work request it reports (for messages)
};

// The status the bad request of q completes with.
ibv_wc_status fault_status(const FQp& q) {
    return q.fault == Fault::LocalKey                                            ? IBV_WC_LOC_PROT_ERR
           : q.fault == Fault::RecvTooSmall || q.fault == Fault::Misaligned ? IBV_WC_REM_INV_REQ_ERR
                                                                            : IBV_WC_REM_ACCESS_ERR;
}

// Node 0's send queue of one QP, followed completion by completion: the
// signaled requests before the first that fails succeed, then one fails,
// then every later one, signaled or not, is flushed in order. The first to
// fail is the bad one with its status; over lossy links, where the NAK that
// tells of it may be lost and the responder, in the error state, answers
// nothing more, it may instead be the bad one or one before it whose ACK
// was lost too, with IBV_WC_RETRY_EXC_ERR (the responder executed it all
// the same).
struct SendQueueCheck {
    const FQp* q = nullptr;
    bool lossy = false;
    std::size_t next = 0;    // the first request not yet accounted for
    int failed = -1;         // the first that failed
    std::size_t ok_upto = 0; // requests known done: [0, ok_upto)
    bool finished() const { return next == q->wrs.size(); }
    // Empty when the completion of request j with status st is right.
    std::string take(std::size_t j, ibv_wc_status st) {
        auto says = [&](const char* what) {
            return std::string(what) + " (" + ibv_wc_status_str(st) + ", the next unaccounted request " + std::to_string(next) + ")";
        };
        if (j < next || j >= q->wrs.size()) return says("a completion out of order");
        if (failed >= 0) {
            if (st != IBV_WC_WR_FLUSH_ERR || j != next) return says("after a failure every request must be flushed in order");
            ++next;
            return "";
        }
        for (std::size_t k = next; k < j; ++k)
            if (q->wrs[k].signaled) return says("a signaled request was passed over");
        const int jj = static_cast<int>(j);
        if (st == IBV_WC_SUCCESS) {
            if (!q->wrs[j].signaled) return says("an unsignaled request reported success");
            if (q->bad_before(jj)) return says("the bad request or one after it succeeded");
            next = ok_upto = j + 1;
            return "";
        }
        const bool as_planned = jj == q->at && st == fault_status(*q);
        const bool retries_out = lossy && q->fault != Fault::None && q->fault != Fault::LocalKey && jj <= q->at &&
                                 st == IBV_WC_RETRY_EXC_ERR;
        if (!as_planned && !retries_out)
            return says(jj == q->at ? "the bad request failed otherwise" : "a request failed that should not have");
        failed = jj;
        ok_upto = j;
        next = j + 1;
        return "";
    }
};

// The completions node 1's receive queue of QP q gives, in order. After a
// bad gather the responder hears of nothing: the receives of the requests
// from the bad one on stay posted.
std::vector<Expect> recv_expectations(const FQp& q, std::size_t qi, std::uint32_t mtu) {
    std::vector<Expect> out;
    for (std::size_t k = 0; k < q.recvs.size(); ++k) {
        const int j = q.recvs[k].wr;
        ibv_wc_status st = q.wrs[static_cast<std::size_t>(j)].bad == Fault::RecvTooSmall ? IBV_WC_LOC_LEN_ERR : IBV_WC_SUCCESS;
        if (q.bad_before(j)) {
            if (q.fault == Fault::LocalKey) break;
            // The receive a bad request consumes reports what was wrong
            // with it: a SEND too long, or a WRITE with immediate out of the
            // region's bounds or keys (a local access error, as libibverbs
            // defines it) when its one packet carries the immediate data and
            // takes the receive; a longer one fails on its first packet,
            // which takes none, and its receive is flushed with the rest.
            const bool one_packet = q.wrs[static_cast<std::size_t>(j)].len <= mtu;
            st = j != q.at                        ? IBV_WC_WR_FLUSH_ERR
                 : q.fault == Fault::RecvTooSmall ? IBV_WC_LOC_LEN_ERR
                 : one_packet                     ? IBV_WC_LOC_ACCESS_ERR
                                                  : IBV_WC_WR_FLUSH_ERR;
        }
        out.push_back({recv_id(qi, k), st, static_cast<std::size_t>(j)});
    }
    return out;
}

// The value of QP q's cell before each of its work requests (and, last,
// after them all), from what node 1's pattern put there; the requests from
// a bad one on are never executed.
std::vector<std::uint64_t> cell_values(const FQp& q, const std::vector<std::uint8_t>& node1) {
    std::uint64_t v = 0;
    std::memcpy(&v, node1.data() + q.cell, sizeof v);
    std::vector<std::uint64_t> out;
    for (std::size_t j = 0; j < q.wrs.size(); ++j) {
        out.push_back(v);
        const FWr& w = q.wrs[j];
        if (q.bad_before(static_cast<int>(j))) continue;
        if (w.op == FOp::FetchAdd) v += w.operand;
        if (w.op == FOp::CmpSwap && w.cas_match) v = w.operand;
    }
    out.push_back(v);
    return out;
}

// What a CMP_AND_SWP compares with: the cell's value, or one it cannot be.
std::uint64_t compare_of(const FWr& w, std::uint64_t before) { return w.cas_match ? before : ~before; }

std::uint64_t pattern0(const FPlan& p) { return p.seed * 4 + 1; }
std::uint64_t pattern1(const FPlan& p) { return p.seed * 4 + 2; }

// What node's byte at offset off belongs to, for a failure's message.
std::string what_is(const FPlan& p, int node, std::size_t off) {
    auto in = [off](std::size_t a, std::size_t n) { return off >= a && off < a + n; };
    for (std::size_t q = 0; q < p.qps.size(); ++q)
        for (std::size_t j = 0; j < p.qps[q].wrs.size(); ++j) {
            const FWr& w = p.qps[q].wrs[j];
            if (node == 0) {
                for (const auto& pc : w.local)
                    if (in(pc.off, pc.len)) return " (in " + where(p, q, j) + "'s local piece)";
            } else {
                if (p.atomics && in(p.qps[q].cell, 8)) return " (in QP " + std::to_string(q) + "'s atomic cell)";
                if (w.op != FOp::Send && in(w.remote, w.len)) return " (in " + where(p, q, j) + "'s remote range)";
                if (w.recv >= 0)
                    for (const auto& pc : p.qps[q].recvs[static_cast<std::size_t>(w.recv)].pieces)
                        if (in(pc.off, pc.len)) return " (in the receive of " + where(p, q, j) + ")";
            }
        }
    for (std::size_t q = 0; q < p.qps.size(); ++q)
        for (std::size_t j = 0; j < p.qps[q].back.size(); ++j) {
            const FWr& w = p.qps[q].back[j];
            const std::string name = "node 1's QP " + std::to_string(q) + " WR " + std::to_string(j) + " (" + fop_name(w.op) +
                                     ", " + std::to_string(w.len) + " B)";
            if (node == 1) {
                for (const auto& pc : w.local)
                    if (in(pc.off, pc.len)) return " (in " + name + "'s local piece)";
            } else {
                if (w.op != FOp::Send && in(w.remote, w.len)) return " (in " + name + "'s remote range)";
                if (w.recv >= 0)
                    for (const auto& pc : p.qps[q].back_recvs[static_cast<std::size_t>(w.recv)].pieces)
                        if (in(pc.off, pc.len)) return " (in the receive of " + name + ")";
            }
        }
    return " (in no request's range)";
}

constexpr double kLimitUs = 50000;

SideOptions side_options(const FPlan& p, std::size_t bytes) {
    SideOptions o;
    o.qps = static_cast<int>(p.qps.size());
    o.buffer_bytes = bytes;
    o.max_sge = 4;
    o.max_send_wr = 64;
    o.max_recv_wr = 64;
    o.cq_depth = 1024;
    o.qp_type = p.type;
    if (p.atomics) o.access |= IBV_ACCESS_REMOTE_ATOMIC;
    return o;
}

ConnOptions conn_options(const FPlan& p) {
    ConnOptions c;
    c.mtu = p.mtu;
    // 262 us: a lost NAK, or node 1's requests to a QP node 0 broke, cost
    // the retries, 2 ms.
    if (p.lossy || p.both_ways) c.timeout = 6;
    if (p.atomics) c.qp_access |= IBV_ACCESS_REMOTE_ATOMIC;
    if (p.type == IBV_QPT_UC) c.qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    return c;
}

// Node 1's send queue of a QP in a both-ways plan, completion by
// completion: signaled requests succeed up to a point; on a QP with a bad
// request the first that does not succeed is flushed or runs out of retries
// (node 0 broke and answers no more), and every later one, signaled or not,
// is flushed in order.
struct BackSendCheck {
    const FQp* q = nullptr;
    std::size_t next = 0;     // the first request not yet accounted for
    std::size_t ok_upto = 0;  // requests known done: [0, ok_upto)
    bool failed = false;
    bool finished() const { return next == q->back.size(); }
    std::string take(std::size_t j, ibv_wc_status st) {
        auto says = [&](const char* what) {
            return std::string(what) + " (" + ibv_wc_status_str(st) + ", the next unaccounted request " + std::to_string(next) + ")";
        };
        if (j < next || j >= q->back.size()) return says("a completion out of order");
        if (failed) {
            if (st != IBV_WC_WR_FLUSH_ERR || j != next) return says("after a failure every request must be flushed in order");
            ++next;
            return "";
        }
        for (std::size_t k = next; k < j; ++k)
            if (q->back[k].signaled) return says("a signaled request was passed over");
        if (st == IBV_WC_SUCCESS) {
            if (!q->back[j].signaled) return says("an unsignaled request reported success");
            next = ok_upto = j + 1;
            return "";
        }
        if (q->fault == Fault::None || (st != IBV_WC_WR_FLUSH_ERR && st != IBV_WC_RETRY_EXC_ERR))
            return says("a request failed that should not have");
        failed = true;
        ok_upto = j;
        next = j + 1;
        return "";
    }
};

// Node 0's receives for node 1's requests on a QP: they succeed up to a
// point, and on a QP with a bad request (which always breaks node 0's end)
// the rest are flushed.
struct BackRecvCheck {
    const FQp* q = nullptr;
    std::size_t next = 0;  // the next receive to complete
    std::size_t ok = 0;    // how many succeeded
    bool finished() const { return next == q->back_recvs.size(); }
    std::string take(const ibv_wc& c, std::size_t qi) {
        if (next == q->back_recvs.size() || c.wr_id != recv_id(qi, next)) return "a receive completion out of order";
        const FWr& w = q->back[static_cast<std::size_t>(q->back_recvs[next].wr)];
        ++next;
        if (c.status == IBV_WC_WR_FLUSH_ERR && q->fault != Fault::None) return "";
        if (c.status != IBV_WC_SUCCESS || ok + 1 != next) return std::string("receive ") + ibv_wc_status_str(c.status) + " out of turn";
        ++ok;
        const bool imm = w.op == FOp::WriteImm;
        if (c.byte_len != w.len || c.opcode != (imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV) ||
            ((c.wc_flags & IBV_WC_WITH_IMM) != 0) != imm || (imm && c.imm_data != w.imm))
            return "receive completion opcode " + std::to_string(c.opcode) + ", byte_len " + std::to_string(c.byte_len);
        return "";
    }
};

std::string back_where(std::size_t q, std::size_t j) {
    return "node 1's QP " + std::to_string(q) + " WR " + std::to_string(j);
}

// Node 1's requests of a both-ways plan: posts them in random bursts across
// the QPs while reaping, and accounts for every completion.
void run_back_chains(const FPlan& p, Host& h, Side& s, ErrorTally& err, CompletionLog& log, std::vector<BackSendCheck>& check,
                     const std::function<void()>& reap_other, sim::Tick end) {
    const std::size_t nq = p.qps.size();
    std::vector<std::size_t> posted(nq, 0);
    auto reap = [&]() {
        drain(s, s.send_cq, h, log, [&](const ibv_wc& c, std::size_t q) {
            const std::size_t j = c.wr_id & 0xffffffffu;
            if (q == nq || (c.wr_id >> 32) != q) {
                err("a completion no request of node 1 asked for: wr_id " + std::to_string(c.wr_id));
                return;
            }
            const std::string wrong = check[q].take(j, c.status);
            if (!wrong.empty()) err(back_where(q, j) + ": " + wrong);
        });
        reap_other();
    };
    auto post = [&](std::size_t q) {
        const std::size_t j = posted[q]++;
        const FWr& w = p.qps[q].back[j];
        std::vector<ibv_sge> sges;
        for (const auto& pc : w.local) sges.push_back(s.sge(pc.off, pc.len));
        const ibv_wr_opcode op = w.op == FOp::Send       ? IBV_WR_SEND
                                 : w.op == FOp::Write    ? IBV_WR_RDMA_WRITE
                                 : w.op == FOp::WriteImm ? IBV_WR_RDMA_WRITE_WITH_IMM
                                                         : IBV_WR_RDMA_READ;
        if (s.post_send(s.qps[q], op, sges, w.signaled ? unsigned{IBV_SEND_SIGNALED} : 0u, send_id(q, j), s.remote_addr + w.remote,
                        s.remote_rkey, w.imm) != 0)
            err(back_where(q, j) + ": ibv_post_send failed");
    };
    SplitMix64 r{p.seed ^ 0xbacc};
    for (;;) {
        std::vector<std::size_t> can;
        for (std::size_t q = 0; q < nq; ++q)
            if (posted[q] < p.qps[q].back.size()) can.push_back(q);
        if (can.empty() || h.now() >= end) break;
        const std::size_t q = can[r.below(can.size())];
        for (std::uint64_t k = r.range(1, 4); k > 0 && posted[q] < p.qps[q].back.size(); --k) post(q);
        reap();
        h.sleep(r.range(0, 400) * sim::kPsPerNs);
    }
    auto all = [&]() {
        for (const auto& c : check)
            if (!c.finished()) return false;
        return true;
    };
    while (!all() && h.now() < end) {
        reap();
        h.sleep(200 * sim::kPsPerNs);
    }
    for (std::size_t q = 0; q < nq; ++q)
        if (!check[q].finished())
            err("node 1's QP " + std::to_string(q) + ": the completions account for " + std::to_string(check[q].next) + " of " +
                std::to_string(p.qps[q].back.size()) + " requests");
}

void requester(const FPlan& p, Host& h, Record& rec) {
    ErrorTally err(rec, "node0");
    Side s(h, side_options(p, p.bytes0));
    fill_pattern(s.buf, p.bytes0, pattern0(p));
    s.connect("f", 1, conn_options(p));
    // Both ways: node 0's receives for node 1's requests.
    for (std::size_t q = 0; q < p.qps.size(); ++q)
        for (std::size_t k = 0; k < p.qps[q].back_recvs.size(); ++k) {
            std::vector<ibv_sge> sges;
            for (const auto& pc : p.qps[q].back_recvs[k].pieces) sges.push_back(s.sge(pc.off, pc.len));
            if (s.post_recv(s.qps[q], sges, recv_id(q, k)) != 0) err("QP " + std::to_string(q) + ": ibv_post_recv failed");
        }
    h.barrier("posted");
    const std::size_t nq = p.qps.size();
    std::vector<BackRecvCheck> back(nq);
    for (std::size_t q = 0; q < nq; ++q) back[q] = BackRecvCheck{&p.qps[q]};
    std::vector<SendQueueCheck> check(nq);
    for (std::size_t q = 0; q < nq; ++q) check[q] = SendQueueCheck{&p.qps[q], p.lossy};
    std::vector<std::size_t> posted(nq, 0);
    const std::vector<std::uint8_t> mine = pattern(p.bytes0, pattern0(p));
    const std::vector<std::uint8_t> peer = pattern(p.bytes1, pattern1(p));
    std::vector<std::vector<std::uint64_t>> cells;
    for (const auto& fq : p.qps) cells.push_back(cell_values(fq, peer));
    auto post = [&](std::size_t q) {
        const FQp& fq = p.qps[q];
        const std::size_t j = posted[q]++;
        const FWr& w = fq.wrs[j];
        std::vector<ibv_sge> sges;
        for (const auto& pc : w.local) sges.push_back(s.sge(pc.off, pc.len));
        std::uint64_t raddr = s.remote_addr + w.remote;
        std::uint32_t rkey = s.remote_rkey;
        const Fault f = fq.fault_at(j);
        if (f == Fault::LocalKey) sges[static_cast<std::size_t>(w.imm % sges.size())].lkey ^= 0x5500;
        if (f == Fault::RemoteKey) rkey ^= 0x7700;
        if (f == Fault::RemoteBounds) raddr = s.remote_addr + p.bytes1 - (is_atomic(w.op) ? 0 : w.len / 2);
        if (f == Fault::Misaligned) raddr += 4;
        if (is_atomic(w.op)) {
            ibv_send_wr wr{};
            wr.wr_id = send_id(q, j);
            wr.sg_list = sges.data();
            wr.num_sge = 1;
            wr.opcode = w.op == FOp::FetchAdd ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
            wr.send_flags = w.signaled ? unsigned{IBV_SEND_SIGNALED} : 0u;
            wr.wr.atomic.remote_addr = raddr;
            wr.wr.atomic.rkey = rkey;
            wr.wr.atomic.compare_add = w.op == FOp::FetchAdd ? w.operand : compare_of(w, cells[q][j]);
            wr.wr.atomic.swap = w.operand;
            ibv_send_wr* bad = nullptr;
            const int rc = ibv_post_send(s.qps[q], &wr, &bad);
            if (rc != 0) err(where(p, q, j) + ": ibv_post_send returned " + std::to_string(rc));
            return;
        }
        const ibv_wr_opcode op = w.op == FOp::Send       ? IBV_WR_SEND
                                 : w.op == FOp::Write    ? IBV_WR_RDMA_WRITE
                                 : w.op == FOp::WriteImm ? IBV_WR_RDMA_WRITE_WITH_IMM
                                                         : IBV_WR_RDMA_READ;
        const int rc = s.post_send(s.qps[q], op, sges, w.signaled ? unsigned{IBV_SEND_SIGNALED} : 0u, send_id(q, j), raddr, rkey, w.imm);
        if (rc != 0) err(where(p, q, j) + ": ibv_post_send returned " + std::to_string(rc));
    };
    CompletionLog log;
    auto reap = [&]() {
        drain(s, s.send_cq, h, log, [&](const ibv_wc& c, std::size_t q) {
            const std::size_t j = c.wr_id & 0xffffffffu;
            if (q == nq || (c.wr_id >> 32) != q || j >= p.qps[q].wrs.size()) {
                err("a completion no request asked for: wr_id " + std::to_string(c.wr_id) + ", status " + ibv_wc_status_str(c.status));
                return;
            }
            const std::string wrong = check[q].take(j, c.status);
            if (!wrong.empty()) {
                err(where(p, q, j) + ": " + wrong);
                return;
            }
            const FWr& w = p.qps[q].wrs[j];
            if (c.status == IBV_WC_SUCCESS && (w.op == FOp::Read || is_atomic(w.op)) && c.byte_len != w.len)
                err(where(p, q, j) + ": completion byte_len " + std::to_string(c.byte_len));
        });
        if (!p.both_ways) return;
        drain(s, s.recv_cq, h, log, [&](const ibv_wc& c, std::size_t q) {
            const std::string wrong = q == nq ? "a receive completion of no QP" : back[q].take(c, q);
            if (!wrong.empty()) err("QP " + std::to_string(q) + " receive for node 1: " + wrong);
        });
    };
    auto all_posted = [&]() {
        for (std::size_t q = 0; q < nq; ++q)
            if (posted[q] < p.qps[q].wrs.size()) return false;
        return true;
    };
    auto all_accounted = [&]() {
        for (const auto& c : check)
            if (!c.finished()) return false;
        for (const auto& c : back)
            if (!c.finished()) return false;
        return true;
    };
    // A QP may post its next request unless that is a bad gather and the
    // requests before it are not all complete.
    auto may_post = [&](std::size_t q) {
        const FQp& fq = p.qps[q];
        if (posted[q] == fq.wrs.size()) return false;
        return !(fq.fault == Fault::LocalKey && static_cast<int>(posted[q]) == fq.at && check[q].ok_upto < posted[q]);
    };
    SplitMix64 r{p.seed ^ 0xfa17};
    const sim::Tick end = h.now() + us(kLimitUs);
    while (!all_posted() && h.now() < end) {
        std::size_t q = r.below(nq);
        std::size_t tries = 0;
        while (!may_post(q) && tries++ < nq) q = (q + 1) % nq;
        if (tries > nq) {
            reap();
            h.sleep(200 * sim::kPsPerNs);
            continue;
        }
        for (std::uint64_t k = r.range(1, 5); k > 0 && may_post(q); --k) post(q);
        if (r.chance(40)) reap();
    }
    while (!all_accounted() && h.now() < end) {
        reap();
        h.sleep(200 * sim::kPsPerNs);
    }
    for (std::size_t q = 0; q < nq; ++q) {
        if (!check[q].finished())
            err("QP " + std::to_string(q) + ": the completions account for " + std::to_string(check[q].next) + " of " +
                std::to_string(p.qps[q].wrs.size()) + " requests (" + std::to_string(posted[q]) + " posted)");
        if (!back[q].finished())
            err("QP " + std::to_string(q) + ": " + std::to_string(back[q].next) + " of " + std::to_string(p.qps[q].back_recvs.size()) +
                " receives for node 1 completed");
    }
    h.barrier("completed");
    h.sleep(us(100));  // node 1's last WRITEs land
    reap();  // nothing more may come
    // Node 0's buffer: its pattern, with what each successful READ and
    // atomic brought. Those the responder executed but whose answer the
    // requester gave up on (a transport retry error before the bad request)
    // may have brought some or all of it.
    std::vector<std::uint8_t> want = mine;
    std::vector<bool> defined(want.size(), true);
    for (std::size_t q = 0; q < nq; ++q)
        for (std::size_t j = 0; j < p.qps[q].wrs.size(); ++j) {
            const FWr& w = p.qps[q].wrs[j];
            if (p.qps[q].bad_before(static_cast<int>(j))) continue;
            if (check[q].failed >= 0 && static_cast<int>(j) >= check[q].failed) {
                if (w.op == FOp::Read || is_atomic(w.op)) undefine(defined, w.local);
                continue;
            }
            if (is_atomic(w.op)) {
                std::memcpy(want.data() + w.local[0].off, &cells[q][j], 8);  // the original value
                continue;
            }
            if (w.op == FOp::Read) scatter(want, w.local, peer.data() + w.remote, w.len);
        }
    // Both ways: node 1's WRITEs and SENDs. On a QP that failed, a WRITE may
    // or may not have landed (byte by byte), unless node 1 saw it succeed or
    // the receive of its immediate data says it did; a receive flushed holds
    // whatever came. What node 1 saw succeed, this end must have received.
    std::vector<std::uint8_t> either = want;
    for (std::size_t q = 0; q < nq; ++q) {
        const FQp& fq = p.qps[q];
        const std::size_t ok_there = p.both_ways ? h.get_value<std::size_t>("back_ok/" + std::to_string(q)) : 0;
        for (std::size_t j = 0; j < fq.back.size(); ++j) {
            const FWr& w = fq.back[j];
            const bool received = w.recv >= 0 && static_cast<std::size_t>(w.recv) < back[q].ok;
            if (j < ok_there && w.recv >= 0 && !received)
                err(back_where(q, j) + " succeeded there, but its receive here did not");
            if (w.op == FOp::Write || w.op == FOp::WriteImm) {
                const auto bytes = gathered(peer, w.local);
                std::copy(bytes.begin(), bytes.end(),
                          (fq.fault == Fault::None || received || j < ok_there ? want : either).begin() + static_cast<long>(w.remote));
            }
            if (w.op != FOp::Send) continue;
            const auto& pieces = fq.back_recvs[static_cast<std::size_t>(w.recv)].pieces;
            if (received) {
                const auto bytes = gathered(peer, w.local);
                scatter(want, pieces, bytes.data(), bytes.size());
            } else {
                undefine(defined, pieces);
            }
        }
    }
    compare(err, 0, s.buf, want, defined, [&p](std::size_t off) { return what_is(p, 0, off); }, &either);
    finish(s, h, rec, err, 0, log);
}

void responder(const FPlan& p, Host& h, Record& rec) {
    ErrorTally err(rec, "node1");
    Side s(h, side_options(p, p.bytes1));
    fill_pattern(s.buf, p.bytes1, pattern1(p));
    const std::size_t nq = p.qps.size();
    s.connect("f", 0, conn_options(p));
    // Every receive is posted before the requester starts.
    post_receives(s, p, err, recv_id);
    h.barrier("posted");
    std::vector<std::vector<Expect>> expect(nq);
    for (std::size_t q = 0; q < nq; ++q) expect[q] = recv_expectations(p.qps[q], q, 128u << p.mtu);
    std::vector<std::size_t> seen(nq, 0);
    const std::vector<std::uint8_t> peer = pattern(p.bytes0, pattern0(p));
    auto all = [&]() {
        for (std::size_t q = 0; q < nq; ++q)
            if (seen[q] < expect[q].size()) return false;
        return true;
    };
    const sim::Tick end = h.now() + us(kLimitUs);
    CompletionLog log;
    // UC over lossy links: a message that lost a packet is lost whole and
    // leaves its receive to the next. Receive k of q holds the first message
    // after the one before it that can be there, whole and intact (a SEND's
    // bytes in the receive, a WRITE's with immediate data in its range).
    const bool uc_lossy = p.lossy && p.type == IBV_QPT_UC;
    std::vector<std::vector<std::size_t>> landed(nq);
    auto take_lossy = [&](const ibv_wc& c, std::size_t q) {
        const FQp& fq = p.qps[q];
        const std::size_t k = landed[q].size();
        if (k == fq.recvs.size() || c.wr_id != recv_id(q, k) || c.status != IBV_WC_SUCCESS) {
            err("QP " + std::to_string(q) + ": receive completion wr_id " + std::to_string(c.wr_id) + " " +
                ibv_wc_status_str(c.status) + " where receive " + std::to_string(k) + " should succeed");
            return;
        }
        const std::vector<std::uint8_t> got = gathered(s.buf, fq.recvs[k].pieces);
        for (std::size_t j = landed[q].empty() ? 0 : landed[q].back() + 1; j < fq.wrs.size(); ++j) {
            const FWr& w = fq.wrs[j];
            const bool imm = w.op == FOp::WriteImm;
            if (w.recv < 0 || !fq.executed(j) || c.byte_len != w.len ||
                c.opcode != (imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV) || ((c.wc_flags & IBV_WC_WITH_IMM) != 0) != imm ||
                (imm && c.imm_data != w.imm))
                continue;
            const auto sent = gathered(peer, w.local);
            const std::uint8_t* at = imm ? s.buf + w.remote : got.data();
            if ((imm || got.size() >= sent.size()) && std::equal(sent.begin(), sent.end(), at)) {
                landed[q].push_back(j);
                return;
            }
        }
        err("QP " + std::to_string(q) + " receive " + std::to_string(k) + ": opcode " + std::to_string(c.opcode) +
            ", byte_len " + std::to_string(c.byte_len) + ", holds no message sent after the one before it");
        landed[q].push_back(fq.wrs.size());
    };
    auto reap = [&]() {
        drain(s, s.recv_cq, h, log, [&](const ibv_wc& c, std::size_t q) {
            if (uc_lossy && q < nq) {
                take_lossy(c, q);
                return;
            }
            // Both ways: past a bad gather node 1's own requests on the QP may
            // run out of retries, which breaks this end and flushes the
            // receives node 0 will never use.
            if (q < nq && p.both_ways && p.qps[q].fault == Fault::LocalKey && seen[q] >= expect[q].size() &&
                seen[q] < p.qps[q].recvs.size() && c.status == IBV_WC_WR_FLUSH_ERR && c.wr_id == recv_id(q, seen[q])) {
                ++seen[q];
                return;
            }
            if (q == nq || seen[q] == expect[q].size()) {
                err("a receive completion no request should give: wr_id " + std::to_string(c.wr_id) + ", status " +
                    ibv_wc_status_str(c.status));
                return;
            }
            const Expect& e = expect[q][seen[q]++];
            const FWr& w = p.qps[q].wrs[e.wr];
            if (c.wr_id != e.wr_id || c.status != e.status) {
                err(where(p, q, e.wr) + ": receive completion wr_id " + std::to_string(c.wr_id) + " " +
                    ibv_wc_status_str(c.status) + ", want " + std::to_string(e.wr_id) + " " + ibv_wc_status_str(e.status));
                return;
            }
            if (c.status != IBV_WC_SUCCESS) return;
            const bool imm = w.op == FOp::WriteImm;
            if (c.byte_len != w.len || c.opcode != (imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV) ||
                ((c.wc_flags & IBV_WC_WITH_IMM) != 0) != imm || (imm && c.imm_data != w.imm))
                err(where(p, q, e.wr) + ": receive completion opcode " + std::to_string(c.opcode) + ", byte_len " +
                    std::to_string(c.byte_len) + ", flags " + std::to_string(c.wc_flags));
        });
    };
    std::vector<BackSendCheck> back(nq);
    for (std::size_t q = 0; q < nq; ++q) back[q] = BackSendCheck{&p.qps[q]};
    if (p.both_ways) {
        run_back_chains(p, h, s, err, log, back, reap, end);
        std::size_t cut = 0;
        for (std::size_t q = 0; q < nq; ++q) {
            cut += p.qps[q].back.size() - back[q].ok_upto;
            h.put_value("back_ok/" + std::to_string(q), back[q].ok_upto);
        }
        rec.num("node1.requests_cut_off", cut);
    }
    // Over lossy UC links how many come is not known: the requester's
    // completions say when the last has left.
    while (!uc_lossy && !all() && h.now() < end) {
        reap();
        h.sleep(200 * sim::kPsPerNs);
    }
    for (std::size_t q = 0; q < nq && !uc_lossy; ++q)
        if (seen[q] < expect[q].size())
            err("QP " + std::to_string(q) + ": " + std::to_string(seen[q]) + " of " + std::to_string(expect[q].size()) +
                " receive completions");
    h.barrier("completed");
    // A WRITE's ACK may reach the requester before the last of its data is
    // in this host's memory (it is on its way over PCIe): let it land.
    h.sleep(us(100));
    reap();
    // Node 1's buffer: its pattern, with what each successful WRITE and
    // SEND put there. A receive that failed (too short, or a SEND cut off by
    // a bad gather) and the range of a WRITE cut off that way hold whatever
    // arrived; nothing else may have changed.
    const std::vector<std::uint8_t> initial = pattern(p.bytes1, pattern1(p));
    std::vector<std::uint8_t> want = initial;
    std::vector<bool> defined(want.size(), true);
    if (uc_lossy) {
        // A SEND's bytes in the receive it landed in (beyond them, and in a
        // receive no message completed, whatever a lost message left); a
        // WRITE's range, byte by byte, as it was or as the WRITE has it,
        // unless its immediate data says it landed whole; a bad WRITE's
        // range as it was.
        std::vector<std::uint8_t> either = initial;
        for (std::size_t q = 0; q < nq; ++q) {
            const FQp& fq = p.qps[q];
            for (const auto& rv : fq.recvs) undefine(defined, rv.pieces);
            for (std::size_t k = 0; k < landed[q].size() && landed[q][k] < fq.wrs.size(); ++k) {
                const FWr& w = fq.wrs[landed[q][k]];
                if (w.op != FOp::Send) continue;
                std::vector<Piece> used;
                std::uint32_t left = w.len;
                for (const auto& pc : fq.recvs[k].pieces) {
                    if (left == 0) break;
                    used.push_back({pc.off, std::min(pc.len, left)});
                    left -= used.back().len;
                }
                const auto bytes = gathered(peer, w.local);
                scatter(want, used, bytes.data(), bytes.size());
                for (const auto& pc : used)
                    std::fill(defined.begin() + static_cast<long>(pc.off), defined.begin() + static_cast<long>(pc.off + pc.len), true);
            }
            for (std::size_t j = 0; j < fq.wrs.size(); ++j) {
                const FWr& w = fq.wrs[j];
                if (w.op == FOp::Send || !fq.executed(j)) continue;
                const auto bytes = gathered(peer, w.local);
                const bool whole = std::find(landed[q].begin(), landed[q].end(), j) != landed[q].end();
                std::copy(bytes.begin(), bytes.end(), (whole ? want : either).begin() + static_cast<long>(w.remote));
            }
        }
        compare(err, 1, s.buf, want, defined, [&p](std::size_t off) { return what_is(p, 1, off); }, &either);
        std::size_t lost = 0;
        for (std::size_t q = 0; q < nq; ++q) lost += p.qps[q].recvs.size() - landed[q].size();
        rec.num("node1.lost_messages", lost);
        finish(s, h, rec, err, 1, log);
        return;
    }
    for (std::size_t q = 0; q < nq; ++q) {
        const FQp& fq = p.qps[q];
        for (std::size_t j = 0; j < fq.wrs.size(); ++j) {
            const FWr& w = fq.wrs[j];
            const int jj = static_cast<int>(j);
            const bool ok = fq.executed(j);
            const bool cut_off = (jj == fq.at && (fq.fault == Fault::LocalKey || fq.fault == Fault::RecvTooSmall)) ||
                                 w.bad == Fault::RecvTooSmall;
            if (w.op == FOp::Write || w.op == FOp::WriteImm) {
                if (ok) {
                    const auto bytes = gathered(peer, w.local);
                    std::copy(bytes.begin(), bytes.end(), want.begin() + static_cast<long>(w.remote));
                } else if (cut_off) {
                    undefine(defined, {{w.remote, w.len}});
                }
            }
            if (w.op == FOp::Send) {
                const FRecv& rv = fq.recvs[static_cast<std::size_t>(w.recv)];
                if (ok) {
                    const auto bytes = gathered(peer, w.local);
                    scatter(want, rv.pieces, bytes.data(), bytes.size());
                } else if (cut_off) {
                    undefine(defined, rv.pieces);
                }
            }
        }
    }
    if (p.atomics) {
        for (const auto& fq : p.qps) {
            const std::uint64_t final_value = cell_values(fq, initial).back();
            std::memcpy(want.data() + fq.cell, &final_value, 8);
        }
    }
    // Both ways: what node 1's READs that succeeded brought; the others may
    // have brought any part of it.
    for (std::size_t q = 0; q < nq; ++q)
        for (std::size_t j = 0; j < p.qps[q].back.size(); ++j) {
            const FWr& w = p.qps[q].back[j];
            if (w.op != FOp::Read) continue;
            if (j < back[q].ok_upto) scatter(want, w.local, peer.data() + w.remote, w.len);
            else undefine(defined, w.local);
        }
    compare(err, 1, s.buf, want, defined, [&p](std::size_t off) { return what_is(p, 1, off); });
    // One event for each QP a bad request reached.
    std::map<std::pair<int, long>, int> want_events;
    for (std::size_t q = 0; q < nq; ++q) {
        const Fault f = p.qps[q].fault;
        if (f == Fault::RemoteKey || f == Fault::RemoteBounds) ++want_events[{IBV_EVENT_QP_ACCESS_ERR, static_cast<long>(q)}];
        if (f == Fault::RecvTooSmall || f == Fault::Misaligned) ++want_events[{IBV_EVENT_QP_REQ_ERR, static_cast<long>(q)}];
    }
    finish(s, h, rec, err, 1, log, want_events);
}

RunResult run_fault_plan(const FPlan& p, const char* dma) {
    Overrides cfg{{"hca.dma.impl", dma}};
    if (p.lossy) add_lossy_links(cfg);
    if (const char* level = std::getenv("HCASIM_STRESS_LOG")) cfg.emplace_back("sim.log_level", level);
    return run_pair(
        cfg, [&p](Host& h, Record& rec) { requester(p, h, rec); }, [&p](Host& h, Record& rec) { responder(p, h, rec); });
}

void run_fault_seeds(std::uint64_t first, int normal, const char* dma, bool lossy = false, bool uc = false) {
    for (std::uint64_t seed : stress::seeds(first, normal)) {
        FPlan p = uc ? make_uc_plan(seed, lossy) : make_plan(seed);
        p.lossy = lossy;
        if (std::getenv("HCASIM_STRESS_DUMP"))
            for (std::size_t q = 0; q < p.qps.size(); ++q)
                for (std::size_t j = 0; j < p.qps[q].wrs.size(); ++j) std::printf("%s\n", where(p, q, j).c_str());
        const RunResult r = run_fault_plan(p, dma);
        if (stress::long_mode())
            std::printf("fault stress %s, dma %s: %s%s\n", p.describe().c_str(), dma, clean(r) ? "ok" : "FAILED",
                        r.has("node1.lost_messages") ? (", " + r.get("node1.lost_messages") + " messages lost").c_str() : "");
        INFO(p.describe() << ", replay with HCASIM_STRESS_SEED=" << seed << ": " << errors_of(r));
        REQUIRE(r.ok);
        CHECK(clean(r));
    }
}

}  // namespace

TEST_CASE("random rc traffic with a bad work request on half the qps fails exactly that request, flushes the rest of its "
          "qp and leaves every other byte and completion as it should be",
          "[stress][errors]") {
    run_fault_seeds(11001, 6, "systemc");
}

TEST_CASE("random rc traffic with bad work requests through the rtl dma engine fails exactly those and nothing else",
          "[stress][errors][rtl]") {
    run_fault_seeds(11101, 3, "rtl");
}

// Seeds the RTL case failed before the responder held a failed request's
// NAK behind the READ responses still to be sent: a READ out of the peer's
// region, behind a READ whose answer was still being read from memory, was
// NAKed at once, and the earlier READ was flushed without its data.
TEST_CASE("a request that fails behind reads still being answered is nak'ed after their data", "[errors][rtl]") {
    for (std::uint64_t seed : {11104u, 11106u}) {
        const FPlan p = make_plan(seed, false);
        const RunResult r = run_fault_plan(p, "rtl");
        INFO(p.describe() << ": " << errors_of(r));
        REQUIRE(r.ok);
        CHECK(clean(r));
    }
}

// Over lossy links the requester may give up on the bad request, or on one
// before it, with IBV_WC_RETRY_EXC_ERR when the NAK is lost (the responder,
// in the error state, answers no resend); everything else is as without
// losses: the responder's side exactly, every other QP exactly.
TEST_CASE("random rc traffic with bad work requests over links that drop and corrupt 1% of packets fails only those "
          "qps and loses nothing else",
          "[stress][errors][lossy]") {
    run_fault_seeds(11201, 4, "systemc", true);
}

// UC: the bad requests are dropped by the responder (a too-long SEND
// completes its receive with IBV_WC_LOC_LEN_ERR), the sender completes them
// all successfully, and every other message on the same QP and on the
// others arrives intact.
TEST_CASE("random uc traffic with bad work requests drops exactly those and delivers every other message intact",
          "[stress][errors][uc]") {
    run_fault_seeds(11301, 6, "systemc", false, true);
}

namespace {

// Both ways: node 1 sends its own random chain on every QP while node 0's
// bad requests break some of them; what of node 1's requests completes is
// up to timing, and everything else is as one way (over lossy links too).
void run_both_ways_seeds(std::uint64_t first, int normal, bool lossy) {
    for (std::uint64_t seed : stress::seeds(first, normal)) {
        FPlan p = make_plan(seed);
        p.lossy = lossy;
        add_back_chains(p);
        const RunResult r = run_fault_plan(p, "systemc");
        if (stress::long_mode())
            std::printf("fault stress %s: %s, %s of node 1's requests cut off\n", p.describe().c_str(), clean(r) ? "ok" : "FAILED",
                        r.get("node1.requests_cut_off").c_str());
        INFO(p.describe() << ", replay with HCASIM_STRESS_SEED=" << seed << ": " << errors_of(r));
        REQUIRE(r.ok);
        CHECK(clean(r));
    }
}

}  // namespace

TEST_CASE("random rc traffic both ways with bad work requests from one side cuts the other side's requests off cleanly",
          "[stress][errors][both_ways]") {
    run_both_ways_seeds(11501, 6, false);
}

TEST_CASE("random rc traffic both ways with bad work requests over lossy links cuts the other side's requests off cleanly",
          "[stress][errors][both_ways][lossy]") {
    run_both_ways_seeds(11601, 3, true);
}

// UC over links that drop and corrupt 1 % of packets: a message that loses
// a packet is lost whole; what arrives is intact and in order.
TEST_CASE("random uc traffic with bad work requests over lossy links delivers only whole, intact messages in order",
          "[stress][errors][uc][lossy]") {
    run_fault_seeds(11401, 4, "systemc", true, true);
}

TEST_CASE("the same plan of bad work requests over lossy links run twice gives identical records",
          "[stress][errors][determinism]") {
    FPlan p = make_plan(11202);
    p.lossy = true;
    const RunResult a = run_fault_plan(p, "systemc");
    const RunResult b = run_fault_plan(p, "systemc");
    HCASIM_REQUIRE_RUN(a);
    CHECK(a.num("node0.errors") == 0);
    CHECK(a.kv == b.kv);
    CHECK(a.num("node0.end_ps") > 0);
}
