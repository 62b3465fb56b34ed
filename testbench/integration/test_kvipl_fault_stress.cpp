// Seeded stress of the KVIPL error paths: random chains of sends, RDMA
// writes and RDMA reads from node 0 to node 1 on many VIs (kvipl_stress_plan),
// some of whose descriptors are bad in one of the ways the VI Architecture
// reports: a segment under an invalid memory handle, a malformed descriptor,
// an RDMA operation on memory the peer has not opened to it or past its
// region, a send longer than its receive descriptor, a receive descriptor
// under an invalid handle, a send with no receive descriptor posted.
//
// On a reliable VI the first bad descriptor breaks the connection: every
// descriptor before it completes with its data, it carries the error, and
// every later one is flushed; the receiving VI breaks too when the fault is
// its to see, and reports what no descriptor can carry as an asynchronous
// error. On an unreliable VI each bad descriptor fails alone and the VI goes
// on. The other VIs, on the same adapters, lose nothing. Every status,
// length, immediate, asynchronous error and every byte of both nodes'
// memory is checked against the plan.
//
// Over links that drop and corrupt 1 % of packets (reliable VIs only) the
// NAK that tells the sender of a bad descriptor may be lost; the receiving
// VI, broken, answers nothing more, and the sender runs out of retries:
// then the bad descriptor, or one before it whose acknowledgement was lost
// too, carries the transport error instead, the rest are flushed, and the
// sender's adapter reports Connection Lost. The receiving side is exactly as
// without losses.
//
// On an unreliable VI over such links a message may be lost, and the next
// one that arrives takes its receive descriptor: each receive that completes
// must then hold what the next arriving message makes of it (a send too long
// for it fails with a length error, one into a segment under an invalid
// handle with a protection error), in order, and each message skipped needs
// a packet lost. The sender's side is as without losses.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "testbench/integration/kvipl_harness.hpp"
#include "testbench/integration/kvipl_stress_plan.hpp"
#include "testbench/integration/stress_seeds.hpp"
#include "testbench/system/split_mix.hpp"

namespace hcasim::test {
namespace {

using testbench::SplitMix64;

enum class Fault {
    None,
    LocalHandle,    // a local segment under an invalid memory handle
    Format,         // a reserved control bit
    RemoteHandle,   // an RDMA operation naming an invalid memory handle of the peer
    RemoteRange,    // an RDMA operation running past the peer's region
    ShortReceive,   // a send longer than its receive descriptor
    ReceiveHandle,  // the send's receive descriptor has a segment under an invalid handle
    NoReceive,      // no receive descriptor for the send (nor any after it)
};

const char* name(Fault f) {
    switch (f) {
    case Fault::None: return "none";
    case Fault::LocalHandle: return "invalid local handle";
    case Fault::Format: return "reserved control bit";
    case Fault::RemoteHandle: return "invalid remote handle";
    case Fault::RemoteRange: return "past the remote region";
    case Fault::ShortReceive: return "receive too short";
    case Fault::ReceiveHandle: return "receive under an invalid handle";
    case Fault::NoReceive: return "no receive posted";
    }
    return "?";
}

constexpr KVIP_MEM_HANDLE kBadHandle = 0x5eadbee;

struct FVi {
    ViStream s;
    std::vector<Fault> fault;  // per descriptor
    std::size_t region = 0;    // bytes of node 1's registered data area
    std::size_t first_bad() const {
        for (std::size_t j = 0; j < fault.size(); ++j)
            if (fault[j] != Fault::None) return j;
        return fault.size();
    }
};

struct FPlan {
    std::uint64_t seed = 0;
    KVIP_RELIABILITY_LEVEL reliability = KVIP_SERVICE_RELIABLE_DELIVERY;
    std::uint32_t mtu = 4096;
    bool lossy = false;  // links drop and corrupt 1 % of packets
    // An unreliable VI over lossy links: which receive a message takes
    // depends on what was lost before it.
    bool shifts() const { return lossy && !reliable(); }
    std::vector<FVi> vis;
    bool reliable() const { return reliability != KVIP_SERVICE_UNRELIABLE; }
    std::string describe() const {
        std::size_t n = 0, bad = 0;
        for (const auto& v : vis)
            for (Fault f : v.fault) {
                ++n;
                if (f != Fault::None) ++bad;
            }
        std::ostringstream os;
        os << "seed " << seed << " ("
           << (reliability == KVIP_SERVICE_UNRELIABLE         ? "unreliable"
               : reliability == KVIP_SERVICE_RELIABLE_DELIVERY ? "reliable delivery"
                                                               : "reliable reception")
           << ", MTU " << mtu << ", " << vis.size() << " VIs, " << n << " descriptors, " << bad << " bad"
           << (lossy ? ", lossy links" : "") << ")";
        return os.str();
    }
};

// Which faults message m can carry on this VI.
std::vector<Fault> possible(const ViMsg& m, bool reliable) {
    std::vector<Fault> f{Fault::Format};
    if (m.len > 0) f.push_back(Fault::LocalHandle);  // checked before the first packet leaves
    if (m.op != ViOp::Send) {
        f.push_back(Fault::RemoteHandle);
        f.push_back(Fault::RemoteRange);
    }
    if (m.op == ViOp::Send && m.len > 0) {
        f.push_back(Fault::ShortReceive);
        f.push_back(Fault::ReceiveHandle);
    }
    // A write with immediate data would land its bytes before the packet
    // that needs the receive: only a send meets the empty queue first.
    if (reliable && m.op == ViOp::Send) f.push_back(Fault::NoReceive);
    return f;
}

// Lossy plans are of the reliable levels unless unreliable is asked for.
FPlan make_plan(std::uint64_t seed, bool lossy = false, bool unreliable = false) {
    SplitMix64 r{seed * 0x9e3779b97f4a7c15ull + 29};
    FPlan p;
    p.seed = seed;
    p.lossy = lossy;
    std::uint64_t level = lossy ? 1 + r.below(2) : r.below(3);
    if (unreliable) level = 0;
    p.reliability = level == 0 ? KVIP_SERVICE_UNRELIABLE
                    : level == 1 ? KVIP_SERVICE_RELIABLE_DELIVERY
                                 : KVIP_SERVICE_RELIABLE_RECEPTION;
    p.mtu = 1024u << r.below(3);
    p.vis.resize(r.range(2, 8));
    for (FVi& v : p.vis) {
        v.s = draw_stream(r, p.reliable());
        v.fault.assign(v.s.msgs.size(), Fault::None);
        v.region = (v.s.receiver_bytes + 4095) / 4096 * 4096;
        if (p.reliable()) {
            // One bad descriptor on about half the VIs.
            if (r.chance(55)) {
                const std::size_t j = r.below(v.s.msgs.size());
                const auto f = possible(v.s.msgs[j], true);
                v.fault[j] = f[r.below(f.size())];
            }
        } else {
            // About one in seven, several on a VI.
            for (std::size_t j = 0; j < v.s.msgs.size(); ++j)
                if (r.chance(14)) {
                    const auto f = possible(v.s.msgs[j], false);
                    v.fault[j] = f[r.below(f.size())];
                }
        }
        // A bad receive is one the plan shrinks or spoils now.
        for (std::size_t j = 0; j < v.s.msgs.size(); ++j) {
            ViMsg& m = v.s.msgs[j];
            if (v.fault[j] == Fault::ShortReceive) {
                // The same segments, cut short of the message.
                std::uint32_t room = static_cast<std::uint32_t>(r.below(m.len));
                std::vector<Segment> cut;
                for (const Segment& seg : m.recv) {
                    if (room == 0) break;
                    cut.push_back({seg.off, std::min(seg.len, room)});
                    room -= cut.back().len;
                }
                m.recv = cut;
            }
            if (v.fault[j] == Fault::RemoteRange)
                m.remote = v.region - std::min<std::size_t>(m.len / 2, v.region) + (m.len < 2 ? 1 : 0);
        }
    }
    return p;
}

// What becomes of one message, by the plan.
struct Outcome {
    KVIP_ULONG send_status = 0;     // of the sender's descriptor
    KVIP_ULONG send_length = 0;
    bool receive_posted = false;    // node 1 posts a receive descriptor for it
    enum class Recv { None, Done, Pending } recv = Recv::None;
    KVIP_ULONG recv_status = 0;     // when Done
    KVIP_ULONG recv_length = 0;
    bool imm = false;               // the receive descriptor carries its immediate data
    bool lands = false;             // its bytes reach their destination
    bool scribbles = false;         // some of them may reach a receive that is too short
};

// Whether a bad RDMA write with immediate data fails on the packet that
// carries the immediate (it is one packet), which takes the receive.
bool one_packet(const FPlan& p, const ViMsg& m) { return m.len <= p.mtu; }

KVIP_ULONG op_bits(const ViMsg& m) { return status_of(m) & ~KVIP_STATUS_DONE; }

// The sender's side and the receiver's, message by message, and what the
// receiving VI reports asynchronously (KVIP_ERROR_* codes in order).
std::vector<Outcome> outcomes(const FPlan& p, const FVi& v, std::vector<KVIP_ULONG>& async, bool& target_breaks) {
    std::vector<Outcome> o(v.s.msgs.size());
    const std::size_t b = p.reliable() ? v.first_bad() : v.s.msgs.size();
    target_breaks = false;
    async.clear();
    for (std::size_t j = 0; j < o.size(); ++j) {
        const ViMsg& m = v.s.msgs[j];
        Outcome& x = o[j];
        const Fault f = v.fault[j];
        // Descriptors after a reliable VI broke: flushed on the sender; their
        // receives flushed if the target broke, else left posted.
        if (j > b) {
            x.send_status = KVIP_STATUS_DONE | KVIP_STATUS_DESC_FLUSHED_ERROR;
            x.receive_posted = m.consumes_receive() && v.fault[b] != Fault::NoReceive;
            if (x.receive_posted) {
                x.recv = target_breaks ? Outcome::Recv::Done : Outcome::Recv::Pending;
                x.recv_status = KVIP_STATUS_DONE | KVIP_STATUS_DESC_FLUSHED_ERROR | KVIP_STATUS_OP_RECEIVE;
            }
            continue;
        }
        x.send_status = status_of(m);
        x.send_length = m.len;
        x.receive_posted = m.consumes_receive();
        x.recv = x.receive_posted ? Outcome::Recv::Done : Outcome::Recv::None;
        x.recv_status = KVIP_STATUS_DONE |
                        (m.op == ViOp::Send ? KVIP_STATUS_OP_RECEIVE : KVIP_STATUS_OP_REMOTE_RDMA_WRITE) |
                        (m.imm ? KVIP_STATUS_IMMEDIATE : 0);
        x.recv_length = m.len;
        x.imm = m.imm;
        x.lands = true;
        if (f == Fault::None) continue;
        x.lands = false;
        x.recv_length = 0;
        x.imm = false;
        const bool breaks = p.reliable();
        switch (f) {
        case Fault::None: break;
        case Fault::LocalHandle:
        case Fault::Format:
            // Never leaves: the sender alone sees it.
            x.send_status = KVIP_STATUS_DONE | (f == Fault::Format ? KVIP_STATUS_FORMAT_ERROR : KVIP_STATUS_PROTECTION_ERROR) |
                            op_bits(m);
            x.send_length = 0;
            x.receive_posted = x.receive_posted && breaks;  // unreliable: the next message takes the next receive
            x.recv = x.receive_posted ? Outcome::Recv::Pending : Outcome::Recv::None;
            break;
        case Fault::RemoteHandle:
        case Fault::RemoteRange:
            if (breaks) {
                x.send_status = KVIP_STATUS_DONE | KVIP_STATUS_RDMA_PROT_ERROR | op_bits(m);
                x.send_length = 0;
                target_breaks = true;
            }
            if (m.op == ViOp::Read) {
                async.push_back(KVIP_ERROR_RDMAR_PROT);
            } else if (m.imm && one_packet(p, m)) {
                // The packet with the immediate fails: its receive carries the error.
                x.recv_status = KVIP_STATUS_DONE | KVIP_STATUS_RDMA_PROT_ERROR | KVIP_STATUS_OP_REMOTE_RDMA_WRITE |
                                KVIP_STATUS_IMMEDIATE;
                x.imm = true;
            } else {
                async.push_back(KVIP_ERROR_RDMAW_PROT);
                if (m.imm) {
                    // The first packet failed; the one with the immediate never comes.
                    x.receive_posted = breaks;
                    x.recv = breaks ? Outcome::Recv::Done : Outcome::Recv::None;
                    x.recv_status = KVIP_STATUS_DONE | KVIP_STATUS_DESC_FLUSHED_ERROR | KVIP_STATUS_OP_RECEIVE;
                }
            }
            break;
        case Fault::ShortReceive:
        case Fault::ReceiveHandle:
            if (breaks) {
                x.send_status = KVIP_STATUS_DONE | KVIP_STATUS_REMOTE_DESC_ERROR | op_bits(m);
                x.send_length = 0;
                target_breaks = true;
            }
            x.recv_status = KVIP_STATUS_DONE |
                            (f == Fault::ShortReceive ? KVIP_STATUS_LENGTH_ERROR : KVIP_STATUS_PROTECTION_ERROR) |
                            KVIP_STATUS_OP_RECEIVE;
            x.scribbles = f == Fault::ShortReceive;
            break;
        case Fault::NoReceive:
            x.send_status = KVIP_STATUS_DONE | KVIP_STATUS_REMOTE_DESC_ERROR | op_bits(m);
            x.send_length = 0;
            x.receive_posted = false;
            x.recv = Outcome::Recv::None;
            async.push_back(KVIP_ERROR_RECVQ_EMPTY);
            target_breaks = true;
            break;
        }
    }
    return o;
}

std::string what(std::size_t vi, std::size_t j, const ViMsg& m, Fault f) {
    return where(0, vi, j, m) + (f == Fault::None ? "" : std::string(" [bad: ") + name(f) + "]");
}

// Folds a descriptor's completion (VI, index, status, length) and the
// simulated time it was taken at into hash: two runs of a plan must agree.
void fold(std::uint64_t& hash, std::uint64_t vi, std::uint64_t j, const KVIP_DESCRIPTOR* d, sim::Tick now) {
    const std::uint64_t words[] = {vi, j, d ? d->CS.Status : ~0u, d ? d->CS.Length : ~0u, now};
    hash = (hash ^ fnv1a(reinterpret_cast<const std::uint8_t*>(words), sizeof words)) * 1099511628211ull;
}

// Simulated; over lossy links a lost NAK costs the sender its eight local
// ACK timeouts of 67 ms.
double limit_us(const FPlan& p) { return p.lossy ? 2e6 : 2e5; }

// Whether the sender of a reliable VI may learn of its bad descriptor, the
// b-th, by running out of retries (a lost NAK): when the receiving VI broke.
bool may_time_out(const FPlan& p, const FVi& v, std::size_t b) {
    if (!p.lossy || b >= v.fault.size()) return false;
    const Fault f = v.fault[b];
    return f != Fault::LocalHandle && f != Fault::Format;
}

// Whether got is want in order, with some left out.
bool in_order_within(const std::vector<KVIP_ULONG>& got, const std::vector<KVIP_ULONG>& want) {
    std::size_t i = 0;
    for (const KVIP_ULONG c : got) {
        while (i < want.size() && want[i] != c) ++i;
        if (i == want.size()) return false;
        ++i;
    }
    return true;
}

// Node 0 posts every VI's chain and checks what completes; node 1 posts the
// receives and checks what completes, what stays posted, its asynchronous
// errors and its memory.
void sender(const FPlan& p, Host& h, Record& rec) {
    ErrorTally err(rec, "node0");
    const std::size_t n = p.vis.size();
    std::vector<std::unique_ptr<ViEnd>> ends;
    std::vector<std::vector<Outcome>> out(n);
    for (std::size_t v = 0; v < n; ++v) {
        std::vector<KVIP_ULONG> async;
        bool breaks = false;
        out[v] = outcomes(p, p.vis[v], async, breaks);
        ViOptions o;
        o.reliability = p.reliability;
        o.data_bytes = std::max<std::size_t>((p.vis[v].s.sender_bytes + 4095) / 4096 * 4096, 4096);
        o.descriptors = std::max<std::size_t>(p.vis[v].s.msgs.size(), 1);
        ends.push_back(std::make_unique<ViEnd>(o));
        fill_pattern(ends[v]->data, p.vis[v].s.sender_bytes, p.seed * 1000 + v * 2 + 1);
        if (dial(h, *ends[v], 1, "vi" + std::to_string(v)) != KVIP_SUCCESS) err("VI " + std::to_string(v) + " did not connect");
    }
    h.barrier("posted");
    std::vector<std::uint64_t> raddr(n);
    std::vector<KVIP_MEM_HANDLE> rmh(n);
    for (std::size_t v = 0; v < n; ++v) {
        raddr[v] = h.get_value<std::uint64_t>("vi" + std::to_string(v) + "/addr");
        rmh[v] = h.get_value<KVIP_MEM_HANDLE>("vi" + std::to_string(v) + "/mh");
    }
    std::vector<std::size_t> posted(n, 0), done(n, 0);
    // The descriptor of each VI that ran out of retries (lossy links), if any.
    constexpr std::size_t kNone = ~std::size_t{0};
    std::vector<std::size_t> timed_out(n, kNone);
    std::uint64_t log = 1469598103934665603ull;
    auto post = [&](std::size_t v) {
        ViEnd& e = *ends[v];
        const std::size_t j = posted[v]++;
        const ViMsg& m = p.vis[v].s.msgs[j];
        const Fault f = p.vis[v].fault[j];
        KVIP_DESCRIPTOR* d = e.desc(j);
        d->CS.Control = static_cast<KVIP_USHORT>(
            (m.op == ViOp::Send ? KVIP_CONTROL_OP_SENDRECV : m.op == ViOp::Write ? KVIP_CONTROL_OP_RDMAWRITE : KVIP_CONTROL_OP_RDMAREAD) |
            (m.imm ? KVIP_CONTROL_IMMEDIATE : 0) | (m.fence ? KVIP_CONTROL_QFENCE : 0) | (f == Fault::Format ? 0x100 : 0));
        d->CS.ImmediateData = m.imm_data;
        d->CS.Length = m.len;
        std::size_t s = 0;
        if (m.op != ViOp::Send) {
            d->DS[s].Remote.Data.AddressBits = raddr[v] + m.remote;
            d->DS[s].Remote.Handle = f == Fault::RemoteHandle ? kBadHandle : rmh[v];
            ++s;
        }
        for (const auto& seg : m.local) {
            d->DS[s].Local.Data.Address = e.data + seg.off;
            d->DS[s].Local.Handle = f == Fault::LocalHandle && &seg == &m.local.back() ? kBadHandle : e.data_mh;
            d->DS[s].Local.Length = seg.len;
            ++s;
        }
        d->CS.SegCount = static_cast<KVIP_USHORT>(s);
        const KVIP_RETURN rc = KvipPostSend(e.vi, d, e.desc_mh);
        if (rc != KVIP_SUCCESS) err(what(v, j, m, f) + ": KvipPostSend returned " + std::to_string(rc));
    };
    auto take = [&](std::size_t v) {
        ViEnd& e = *ends[v];
        if (done[v] == posted[v]) return false;
        KVIP_DESCRIPTOR* got = nullptr;
        const KVIP_RETURN rc = KvipSendDone(e.vi, &got);
        if (rc == KVIP_NOT_DONE) return false;
        if (rc != KVIP_SUCCESS && rc != KVIP_DESCRIPTOR_ERROR) {
            err("VI " + std::to_string(v) + ": KvipSendDone returned " + std::to_string(rc));
            return false;
        }
        const std::size_t j = done[v]++;
        fold(log, v, j, got, h.now());
        const ViMsg& m = p.vis[v].s.msgs[j];
        Outcome x = out[v][j];
        const std::string at = what(v, j, m, p.vis[v].fault[j]);
        if (got != reinterpret_cast<const KVIP_DESCRIPTOR*>(e.desc_area + j * ViEnd::kSlot)) {
            err(at + ": KvipSendDone returned another descriptor");
            done[v] = posted[v] = p.vis[v].s.msgs.size();
            return true;
        }
        const KVIP_ULONG status = got->CS.Status;
        // A lost NAK: the bad descriptor, or one before it, ran out of
        // retries; everything after it is flushed.
        const KVIP_ULONG transport = KVIP_STATUS_DONE | KVIP_STATUS_TRANSPORT_ERROR | op_bits(m);
        if (timed_out[v] < j) {
            x.send_status = KVIP_STATUS_DONE | KVIP_STATUS_DESC_FLUSHED_ERROR;
            x.send_length = 0;
        } else if (status == transport && may_time_out(p, p.vis[v], p.vis[v].first_bad()) && j <= p.vis[v].first_bad()) {
            timed_out[v] = j;
            x.send_status = transport;
            x.send_length = 0;
        }
        // A flushed descriptor the adapter had not fetched carries no operation.
        const bool flushed_ok = (x.send_status & KVIP_STATUS_DESC_FLUSHED_ERROR) &&
                                (status & ~(KVIP_STATUS_OP_MASK | KVIP_STATUS_IMMEDIATE)) == x.send_status;
        const KVIP_RETURN want_rc = (x.send_status & KVIP_STATUS_ERROR_MASK) ? KVIP_DESCRIPTOR_ERROR : KVIP_SUCCESS;
        if (rc != want_rc || !(status == x.send_status || flushed_ok) || got->CS.Length != x.send_length) {
            std::ostringstream os;
            os << at << ": return " << rc << " (want " << want_rc << "), status 0x" << std::hex << status << " (want 0x"
               << x.send_status << std::dec << "), length " << got->CS.Length << " (want " << x.send_length << ")";
            err(os.str());
        }
        return true;
    };
    SplitMix64 r{p.seed ^ 0x5e4d};
    auto reap = [&]() {
        for (std::size_t v = 0; v < n; ++v)
            while (take(v)) {
            }
    };
    // A descriptor that fails on the sender's adapter before it leaves is
    // posted on a reliable VI only once those before it are done: breaking
    // the VI while they are still under way would flush them (the VI
    // Architecture leaves which it does open).
    auto ready = [&](std::size_t v) {
        const std::size_t j = posted[v];
        if (j == p.vis[v].s.msgs.size()) return false;
        const Fault f = p.vis[v].fault[j];
        return !(p.reliable() && (f == Fault::LocalHandle || f == Fault::Format) && done[v] < j);
    };
    const sim::Tick end = h.now() + us(limit_us(p));
    for (;;) {
        std::vector<std::size_t> can;
        bool left = false;
        for (std::size_t v = 0; v < n; ++v) {
            if (posted[v] < p.vis[v].s.msgs.size()) left = true;
            if (ready(v)) can.push_back(v);
        }
        if (!left) break;
        if (can.empty()) {
            if (h.now() > end) break;
            reap();
            continue;
        }
        const std::size_t v = can[r.below(can.size())];
        for (std::uint64_t k = r.range(1, 6); k > 0 && ready(v); --k) post(v);
        if (r.chance(40)) reap();
    }
    auto all_done = [&] {
        for (std::size_t v = 0; v < n; ++v)
            if (done[v] < p.vis[v].s.msgs.size()) return false;
        return true;
    };
    while (!all_done() && h.now() < end) reap();
    for (std::size_t v = 0; v < n; ++v) {
        if (done[v] < p.vis[v].s.msgs.size())
            err("VI " + std::to_string(v) + ": " + std::to_string(done[v]) + " of " +
                std::to_string(p.vis[v].s.msgs.size()) + " descriptors completed");
        // Reads brought their bytes, and nothing else wrote this node's memory.
        std::vector<std::uint8_t> want = pattern(p.vis[v].s.sender_bytes, p.seed * 1000 + v * 2 + 1);
        const std::vector<std::uint8_t> peer = pattern(p.vis[v].s.receiver_bytes, p.seed * 1000 + v * 2 + 2);
        for (std::size_t j = 0; j < p.vis[v].s.msgs.size(); ++j) {
            const ViMsg& m = p.vis[v].s.msgs[j];
            if (m.op != ViOp::Read || !out[v][j].lands) continue;
            std::size_t from = m.remote;
            for (const auto& seg : m.local) {
                // A read the sender gave up on holds whatever of its answer came.
                const std::uint8_t* src = j >= timed_out[v] ? ends[v]->data + seg.off : peer.data() + from;
                std::copy(src, src + seg.len, want.begin() + static_cast<std::ptrdiff_t>(seg.off));
                from += seg.len;
            }
        }
        const long long bad = first_mismatch(ends[v]->data, want.data(), want.size());
        if (bad >= 0) err("VI " + std::to_string(v) + ": node 0's byte " + std::to_string(bad) + " differs");
        // The sender's own adapter reports nothing asynchronously, unless
        // the VI lost its connection running out of retries.
        std::vector<KVIP_ULONG> got, want_async;
        if (timed_out[v] != kNone) {
            want_async.push_back(KVIP_ERROR_CONN_LOST);
            // It comes through the adapter's event queue, after the descriptors.
            KeWaitForSingleObject(&ends[v]->err_event, 10);
        }
        for (;;) {
            KVIP_ERROR_DESCRIPTOR ed{};
            KVIP_ERROR_DESCRIPTOR* pe = &ed;
            if (KvipErrorNotificationDone(ends[v]->nic, &pe) != KVIP_SUCCESS) break;
            got.push_back(ed.ErrorCode);
        }
        if (got != want_async)
            err("VI " + std::to_string(v) + ": node 0 got " + std::to_string(got.size()) + " asynchronous errors, the first " +
                std::to_string(got.empty() ? 0 : got[0]) + "; want " + (want_async.empty() ? "none" : "Connection Lost"));
    }
    rec.num("node0.completions", log);
    rec.num("node0.timed_out", static_cast<long>(std::count_if(timed_out.begin(), timed_out.end(), [](std::size_t j) { return j != kNone; })));
    rec.num("node0.end_ps", h.now());
    err.write();
    h.barrier("sent");
    h.barrier("end");
}

void receiver(const FPlan& p, Host& h, Record& rec) {
    ErrorTally err(rec, "node1");
    const std::size_t n = p.vis.size();
    std::vector<std::unique_ptr<ViEnd>> ends;
    std::vector<std::vector<Outcome>> out(n);
    std::vector<std::vector<KVIP_ULONG>> async(n);
    std::vector<bool> breaks(n);
    // The messages whose receives are posted, in order, per VI.
    std::vector<std::vector<std::size_t>> receives(n);
    for (std::size_t v = 0; v < n; ++v) {
        const FVi& fv = p.vis[v];
        bool b = false;
        out[v] = outcomes(p, fv, async[v], b);
        breaks[v] = b;
        ViOptions o;
        o.reliability = p.reliability;
        o.data_bytes = std::max<std::size_t>(fv.region, 4096);
        o.descriptors = std::max<std::size_t>(fv.s.msgs.size(), 1);
        ends.push_back(std::make_unique<ViEnd>(o));
        ViEnd& e = *ends[v];
        fill_pattern(e.data, fv.s.receiver_bytes, p.seed * 1000 + v * 2 + 2);
        h.put_value("vi" + std::to_string(v) + "/addr", reinterpret_cast<std::uint64_t>(e.data));
        h.put_value("vi" + std::to_string(v) + "/mh", e.data_mh);
        for (std::size_t j = 0; j < fv.s.msgs.size(); ++j) {
            if (!out[v][j].receive_posted) continue;
            const ViMsg& m = fv.s.msgs[j];
            KVIP_DESCRIPTOR* d = e.desc(receives[v].size());
            d->CS.Control = KVIP_CONTROL_OP_SENDRECV;
            std::uint32_t room = 0;
            for (std::size_t s = 0; s < m.recv.size(); ++s) {
                d->DS[s].Local.Data.Address = e.data + m.recv[s].off;
                d->DS[s].Local.Handle = fv.fault[j] == Fault::ReceiveHandle && s == 0 ? kBadHandle : e.data_mh;
                d->DS[s].Local.Length = m.recv[s].len;
                room += m.recv[s].len;
            }
            d->CS.SegCount = static_cast<KVIP_USHORT>(m.recv.size());
            d->CS.Length = room;
            receives[v].push_back(j);
            const KVIP_RETURN rc = KvipPostRecv(e.vi, d, e.desc_mh);
            if (rc != KVIP_SUCCESS) err(what(v, j, m, fv.fault[j]) + ": KvipPostRecv returned " + std::to_string(rc));
        }
    }
    for (std::size_t v = 0; v < n; ++v)
        if (serve(h, *ends[v], "vi" + std::to_string(v)) != KVIP_SUCCESS) err("VI " + std::to_string(v) + " did not connect");
    h.barrier("posted");
    std::vector<std::size_t> taken(n, 0);
    std::uint64_t log = 1469598103934665603ull;
    // The receives the plan says complete come first, in order; pending ones
    // never complete.
    auto expected = [&](std::size_t v) {
        std::size_t k = 0;
        for (std::size_t j : receives[v])
            if (out[v][j].recv == Outcome::Recv::Done) ++k;
        return k;
    };
    // When messages may shift (p.shifts()): per VI, the first of its
    // receive-consuming messages (by index into receives) that may still
    // arrive, which messages did, and how many were skipped in all; and the
    // bytes each VI's sender sends from.
    std::vector<std::size_t> next_c(n, 0);
    std::vector<std::vector<bool>> arrived(n);
    std::vector<std::vector<std::uint8_t>> sent(n);
    for (std::size_t v = 0; v < n; ++v) {
        arrived[v].assign(p.vis[v].s.msgs.size(), false);
        sent[v] = pattern(p.vis[v].s.sender_bytes, p.seed * 1000 + v * 2 + 1);
    }
    std::size_t skipped = 0;
    // Receives a message other than their own took, and of those, the ones
    // it failed where on its own receive it would not have, or the reverse.
    std::size_t shifted = 0, shift_turned = 0;
    // What message j makes of the receive posted for message q. A write's
    // immediate needs no room; a send is checked against the segments first,
    // then against their length.
    auto lands_in = [&](std::size_t v, std::size_t j, std::size_t q) {
        const FVi& fv = p.vis[v];
        const ViMsg& m = fv.s.msgs[j];
        Outcome x = out[v][j];
        if (m.op != ViOp::Send) return x;
        const ViMsg& rq = fv.s.msgs[q];
        std::uint64_t room = 0;
        for (const Segment& seg : rq.recv) room += seg.len;
        const bool bad_handle = fv.fault[q] == Fault::ReceiveHandle && !rq.recv.empty() && rq.recv[0].len > 0;
        x.recv_status = KVIP_STATUS_DONE | KVIP_STATUS_OP_RECEIVE | (m.imm ? KVIP_STATUS_IMMEDIATE : 0);
        x.recv_length = m.len;
        x.imm = m.imm;
        x.lands = !bad_handle && m.len <= room;
        if (!x.lands) {
            x.recv_status = KVIP_STATUS_DONE | (bad_handle ? KVIP_STATUS_PROTECTION_ERROR : KVIP_STATUS_LENGTH_ERROR) |
                            KVIP_STATUS_OP_RECEIVE;
            x.recv_length = 0;
            x.imm = false;
        }
        return x;
    };
    // Receive k, done: the first message from next_c on that it can hold as
    // it is; those before it were lost.
    auto take_shifted = [&](std::size_t v, std::size_t k, KVIP_RETURN rc, const KVIP_DESCRIPTOR& got) {
        const FVi& fv = p.vis[v];
        const std::size_t q = receives[v][k];
        for (std::size_t c = next_c[v]; c < receives[v].size(); ++c) {
            const std::size_t j = receives[v][c];
            const ViMsg& m = fv.s.msgs[j];
            const Outcome x = lands_in(v, j, q);
            const KVIP_RETURN want_rc = (x.recv_status & KVIP_STATUS_ERROR_MASK) ? KVIP_DESCRIPTOR_ERROR : KVIP_SUCCESS;
            if (rc != want_rc || got.CS.Status != x.recv_status || got.CS.Length != x.recv_length ||
                (x.imm && got.CS.ImmediateData != m.imm_data))
                continue;
            if (m.op == ViOp::Send && x.lands) {
                const auto want_bytes = gather(sent[v].data(), m.local, m.len);
                const auto got_bytes = gather(ends[v]->data, fv.s.msgs[q].recv, m.len);
                if (first_mismatch(got_bytes.data(), want_bytes.data(), m.len) >= 0) continue;
            }
            skipped += c - next_c[v];
            if (j != q) {
                ++shifted;
                shift_turned += (x.recv_status & KVIP_STATUS_ERROR_MASK) != (out[v][j].recv_status & KVIP_STATUS_ERROR_MASK);
            }
            arrived[v][j] = true;
            next_c[v] = c + 1;
            return;
        }
        std::ostringstream os;
        os << "VI " << v << " receive " << k << ": return " << rc << ", status 0x" << std::hex << got.CS.Status
           << ", immediate 0x" << got.CS.ImmediateData << std::dec << ", length " << got.CS.Length
           << " is what no message from descriptor "
           << (next_c[v] < receives[v].size() ? receives[v][next_c[v]] : fv.s.msgs.size()) << " on makes of it";
        err(os.str());
        next_c[v] = receives[v].size();
    };
    auto take = [&](std::size_t v) {
        ViEnd& e = *ends[v];
        if (taken[v] == receives[v].size()) return false;
        KVIP_DESCRIPTOR* got = nullptr;
        const KVIP_RETURN rc = KvipRecvDone(e.vi, &got);
        if (rc == KVIP_NOT_DONE) return false;
        if (rc != KVIP_SUCCESS && rc != KVIP_DESCRIPTOR_ERROR) {
            err("VI " + std::to_string(v) + ": KvipRecvDone returned " + std::to_string(rc));
            return false;
        }
        const std::size_t k = taken[v]++;
        fold(log, v, k, got, h.now());
        if (p.shifts()) {
            if (got != reinterpret_cast<const KVIP_DESCRIPTOR*>(e.desc_area + k * ViEnd::kSlot))
                err("VI " + std::to_string(v) + " receive " + std::to_string(k) + ": KvipRecvDone returned another descriptor");
            else
                take_shifted(v, k, rc, *got);
            return true;
        }
        const std::size_t j = receives[v][k];
        const ViMsg& m = p.vis[v].s.msgs[j];
        const Outcome& x = out[v][j];
        const std::string at = what(v, j, m, p.vis[v].fault[j]) + ", its receive";
        if (got != reinterpret_cast<const KVIP_DESCRIPTOR*>(e.desc_area + k * ViEnd::kSlot)) {
            err(at + ": KvipRecvDone returned another descriptor");
            return true;
        }
        if (x.recv != Outcome::Recv::Done) {
            err(at + ": completed, but it should have stayed posted");
            return true;
        }
        const KVIP_RETURN want_rc = (x.recv_status & KVIP_STATUS_ERROR_MASK) ? KVIP_DESCRIPTOR_ERROR : KVIP_SUCCESS;
        if (rc != want_rc || got->CS.Status != x.recv_status || got->CS.Length != x.recv_length ||
            (x.imm && got->CS.ImmediateData != m.imm_data)) {
            std::ostringstream os;
            os << at << ": return " << rc << " (want " << want_rc << "), status 0x" << std::hex << got->CS.Status
               << " (want 0x" << x.recv_status << "), immediate 0x" << got->CS.ImmediateData << std::dec << ", length "
               << got->CS.Length << " (want " << x.recv_length << ")";
            err(os.str());
        }
        return true;
    };
    const sim::Tick end = h.now() + us(limit_us(p));
    for (;;) {
        bool all = true;
        for (std::size_t v = 0; v < n; ++v) {
            while (take(v)) {
            }
            if (taken[v] < expected(v)) all = false;
        }
        // Where messages may be lost, their receives take what arrived once
        // everything is sent.
        if (all || p.shifts() || h.now() > end) break;
        h.sleep(us(1));
    }
    h.barrier("sent");
    // Unreliable writes are done when they leave the sender: let them land,
    // and let anything that should not complete have the time to.
    h.sleep(us(1000));
    for (std::size_t v = 0; v < n; ++v) {
        const FVi& fv = p.vis[v];
        ViEnd& e = *ends[v];
        while (take(v)) {
        }
        if (!p.shifts() && taken[v] != expected(v))
            err("VI " + std::to_string(v) + ": " + std::to_string(taken[v]) + " receives completed, want " +
                std::to_string(expected(v)));
        // Asynchronous errors, in order, and the VI's state.
        std::vector<KVIP_ULONG> got;
        for (;;) {
            KVIP_ERROR_DESCRIPTOR ed{};
            KVIP_ERROR_DESCRIPTOR* pe = &ed;
            if (KvipErrorNotificationDone(e.nic, &pe) != KVIP_SUCCESS) break;
            got.push_back(ed.ErrorCode);
            if (ed.ViHandle != e.vi) err("VI " + std::to_string(v) + ": an asynchronous error names another VI");
        }
        // Where messages may be lost, a lost one reports nothing: what came
        // is what the plan says, in order, with gaps.
        const bool async_ok = p.shifts() ? in_order_within(got, async[v]) : got == async[v];
        if (p.shifts() && async_ok) skipped += async[v].size() - got.size();
        if (!async_ok) {
            std::ostringstream os;
            os << "VI " << v << ": asynchronous errors";
            for (auto c : got) os << " " << c;
            os << ", want";
            for (auto c : async[v]) os << " " << c;
            err(os.str());
        }
        KVIP_VI_STATE st{};
        KvipQueryVi(e.vi, &st, nullptr, nullptr, nullptr);
        const KVIP_VI_STATE want_st = breaks[v] ? KVIP_STATE_ERROR : KVIP_STATE_CONNECTED;
        if (st != want_st)
            err("VI " + std::to_string(v) + ": state " + std::to_string(st) + ", want " + std::to_string(want_st));
        // Memory: what landed, and nothing else (a too-short receive may
        // hold the start of its message).
        std::vector<std::uint8_t> want = pattern(fv.s.receiver_bytes, p.seed * 1000 + v * 2 + 2);
        std::vector<bool> any(fv.s.receiver_bytes, false);
        const std::vector<std::uint8_t>& src = sent[v];
        // Where messages may be lost: each receive's bytes were checked as it
        // completed, and any may hold what an abandoned message left there; a
        // write not known to have arrived may have landed up to a gap.
        auto maybe_cut = [&](std::size_t j) {
            return p.shifts() && fv.s.msgs[j].op == ViOp::Write && out[v][j].lands && !arrived[v][j];
        };
        for (std::size_t j = 0; j < fv.s.msgs.size(); ++j) {
            const ViMsg& m = fv.s.msgs[j];
            const Outcome& x = out[v][j];
            if (x.scribbles || (p.shifts() && x.receive_posted))
                for (const auto& seg : m.recv)
                    for (std::size_t i = 0; i < seg.len; ++i) any[seg.off + i] = true;
            if (!x.lands || m.op == ViOp::Read || (p.shifts() && m.op == ViOp::Send)) continue;
            if (maybe_cut(j)) {
                for (std::size_t i = 0; i < m.len; ++i) any[m.remote + i] = true;
                continue;
            }
            const auto bytes = gather(src.data(), m.local, m.len);
            if (m.op == ViOp::Write) {
                std::copy(bytes.begin(), bytes.end(), want.begin() + static_cast<std::ptrdiff_t>(m.remote));
            } else {
                std::size_t from = 0;
                for (const auto& seg : m.recv) {
                    const std::size_t l = std::min<std::size_t>(seg.len, m.len - from);
                    std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(from),
                              bytes.begin() + static_cast<std::ptrdiff_t>(from + l), want.begin() + static_cast<std::ptrdiff_t>(seg.off));
                    from += l;
                }
            }
        }
        for (std::size_t i = 0; i < fv.s.receiver_bytes; ++i)
            if (!any[i] && e.data[i] != want[i]) {
                err("VI " + std::to_string(v) + ": node 1's byte " + std::to_string(i) + " differs");
                break;
            }
        for (std::size_t j = 0; j < fv.s.msgs.size(); ++j) {
            if (!maybe_cut(j)) continue;
            const ViMsg& m = fv.s.msgs[j];
            const auto bytes = gather(src.data(), m.local, m.len);
            const std::uint8_t* at = e.data + m.remote;
            const long long cut = first_mismatch(at, bytes.data(), m.len);
            if (cut < 0) continue;
            const long long bad = first_mismatch(at + cut, want.data() + m.remote + cut, m.len - static_cast<std::size_t>(cut));
            if (bad >= 0)
                err(what(v, j, m, fv.fault[j]) + ": written byte " + std::to_string(cut + bad) +
                    " differs from both what it carried and what was there");
        }
    }
    if (p.shifts()) {
        // Each message lost, or asynchronous error missing, takes a packet lost.
        const std::uint64_t lost = link_losses(h);
        if (skipped > lost)
            err(std::to_string(skipped) + " messages or their errors were lost, but only " + std::to_string(lost) +
                " packets");
        rec.num("node1.skipped", static_cast<long>(skipped));
        rec.num("node1.shifted", static_cast<long>(shifted));
        rec.num("node1.shift_turned", static_cast<long>(shift_turned));
    }
    rec.num("node1.completions", log);
    rec.num("node1.end_ps", h.now());
    err.write();
    h.barrier("end");
}

RunResult run_plan(const FPlan& p, const char* dma = "systemc") {
    Overrides cfg{{"hca.dma.impl", dma}, {"port.max_mtu", std::to_string(p.mtu)}};
    if (p.lossy) add_lossy_links(cfg);
    if (const char* level = std::getenv("HCASIM_STRESS_LOG")) cfg.emplace_back("sim.log_level", level);
    return run_pair(
        cfg, [&p](Host& h, Record& rec) { sender(p, h, rec); }, [&p](Host& h, Record& rec) { receiver(p, h, rec); });
}

void run_seeds(std::uint64_t first, int normal, const char* dma = "systemc", bool lossy = false, bool unreliable = false) {
    for (std::uint64_t seed : stress::seeds(first, normal)) {
        const FPlan p = make_plan(seed, lossy, unreliable);
        if (std::getenv("HCASIM_STRESS_DUMP"))
            for (std::size_t v = 0; v < p.vis.size(); ++v)
                for (std::size_t j = 0; j < p.vis[v].s.msgs.size(); ++j)
                    std::printf("%s\n", what(v, j, p.vis[v].s.msgs[j], p.vis[v].fault[j]).c_str());
        const RunResult r = run_plan(p, dma);
        if (stress::long_mode())
            std::printf("kvipl fault stress %s, dma %s: %s, %.0f us simulated%s\n", p.describe().c_str(), dma,
                        clean(r) ? "ok" : "FAILED", static_cast<double>(r.num("node1.end_ps")) / 1e6,
                        (r.num("node0.timed_out") > 0 ? ", " + r.get("node0.timed_out") + " VIs out of retries"
                         : p.shifts()                 ? ", " + r.get("node1.skipped") + " messages lost, " +
                                                            r.get("node1.shifted") + " took another's receive, " +
                                                            r.get("node1.shift_turned") + " of them failing or not as on their own"
                                                      : std::string())
                            .c_str());
        INFO(p.describe() << ", replay with HCASIM_STRESS_SEED=" << seed << ": " << errors_of(r));
        REQUIRE(r.ok);
        CHECK(clean(r));
    }
}

// One plan run twice: clean, and the same records, end time included.
void runs_alike(const FPlan& p) {
    const RunResult a = run_plan(p);
    const RunResult b = run_plan(p);
    HCASIM_REQUIRE_RUN(a);
    CHECK(clean(a));
    CHECK(a.kv == b.kv);
    CHECK(a.num("node1.end_ps") > 0);
}

}  // namespace

TEST_CASE("random kvipl traffic with bad descriptors fails each where the vi architecture says and loses nothing else",
          "[kvipl][stress][errors]") {
    run_seeds(12001, 8);
}

TEST_CASE("random kvipl traffic with bad descriptors through the rtl dma engine fails each where it should",
          "[kvipl][stress][errors][rtl]") {
    run_seeds(12101, 3, "rtl");
}

TEST_CASE("random kvipl traffic with bad descriptors over links that drop and corrupt 1% of packets fails only those "
          "vis and loses nothing else",
          "[kvipl][stress][errors][lossy]") {
    run_seeds(12201, 4, "systemc", true);
}

TEST_CASE("the same kvipl plan with bad descriptors over lossy links run twice gives identical records",
          "[kvipl][stress][errors][determinism]") {
    runs_alike(make_plan(12201, true));
}

TEST_CASE("random kvipl traffic with bad descriptors on unreliable vis over lossy links fails each receive by the "
          "message that takes it and loses nothing else",
          "[kvipl][stress][errors][lossy][unreliable]") {
    run_seeds(12301, 8, "systemc", true, true);
}

TEST_CASE("random kvipl traffic with bad descriptors on unreliable vis over lossy links through the rtl dma engine "
          "fails each receive by the message that takes it",
          "[kvipl][stress][errors][lossy][unreliable][rtl]") {
    run_seeds(12401, 3, "rtl", true, true);
}

TEST_CASE("the same kvipl plan with bad descriptors on unreliable vis over lossy links run twice gives identical records",
          "[kvipl][stress][errors][lossy][unreliable][determinism]") {
    runs_alike(make_plan(12301, true, true));
}

}  // namespace hcasim::test
