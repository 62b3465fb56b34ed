// Seeded random stress of the UD error paths: 2 to 8 UD QP pairs between two
// nodes, each sending a random chain of SENDs and SENDs with immediate data
// of 0 B up to the port's MTU, gathered from 1 to 3 pieces, into receives
// scattered over 1 to 3 pieces that hold the 40-byte GRH area first, some
// unsignaled, some naming their Q_Key by the bit-31 rule, posted in random
// bursts across the QPs, with or without a GRH on every packet. About one
// datagram in six is bad in one of five ways:
//
//  * a wrong Q_Key, or
//  * a destination QP number no QP has: the receiving adapter drops it
//    without a word (IBA 10.2.5; counted), takes no receive, and the sender
//    completes it successfully;
//  * a receive too short for the GRH area and the payload: that receive
//    completes with IBV_WC_LOC_LEN_ERR and the next datagram takes the next;
//  * longer than the port's MTU: IBV_WC_LOC_LEN_ERR at the sender, or
//  * a gather entry with an invalid lkey: IBV_WC_LOC_PROT_ERR at the sender.
//    Either sends nothing and leaves the QP in the send queue error state
//    (IBA 10.3.1): the sender has posted up to three more datagrams behind
//    it, which are flushed (IBV_WC_WR_FLUSH_ERR, signaled or not), and takes
//    the QP back to RTS once they are; its receive queue works on.
//
// An error completion comes whether the request was signaled or not. Every
// completion on both nodes (status, byte_len, immediate data, src_qp, slid,
// IBV_WC_GRH), both nodes' whole buffers (a datagram written where it should
// not be, or past a receive too short, shows), the drop counters, the QP
// states and the asynchronous events (none) are checked, and a receive left
// over at the end must stay posted.
//
// Over links that drop and corrupt 2 % of packets any datagram may be lost;
// every receive then has room for any datagram, and none is too short. Each
// receive completion must hold, intact, a datagram its peer sent after the
// one before it, and every datagram that left is accounted for: received,
// dropped by the adapter (Q_Key, QP number) or lost on the link.
#include <catch2/catch.hpp>

#include <cstdio>
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

constexpr std::uint32_t kGrh = 40;               // the GRH area ahead of a UD receive's payload
constexpr std::uint32_t kQkey = 0x11111111;      // every QP's Q_Key (ConnOptions)
constexpr std::uint32_t kNoQp = 0xabcde0;        // node 1 has no QP of this number (nor of the next 8)
constexpr double kLimitUs = 50000;

enum class UFault { None, WrongQkey, WrongQpn, RecvTooSmall, TooLong, LocalKey };

const char* fault_name(UFault f) {
    switch (f) {
    case UFault::None: return "none";
    case UFault::WrongQkey: return "wrong Q_Key";
    case UFault::WrongQpn: return "no such QP";
    case UFault::RecvTooSmall: return "receive too short";
    case UFault::TooLong: return "longer than the MTU";
    case UFault::LocalKey: return "invalid lkey";
    }
    return "?";
}

// The sender learns of it, and the QP enters the send queue error state.
bool local_error(UFault f) { return f == UFault::TooLong || f == UFault::LocalKey; }

struct UMsg {
    bool imm = false;
    std::uint32_t len = 0;
    std::vector<Piece> local;  // node 0
    bool signaled = true;
    bool own_qkey = false;     // remote_qkey with bit 31 set: the sending QP's own
    std::uint32_t imm_data = 0;
    UFault bad = UFault::None;
    bool flushed = false;      // posted behind a local error before the QP is back in RTS
    int recv = -1;             // the receive it lands in on node 1
    bool arrives() const { return !flushed && (bad == UFault::None || bad == UFault::RecvTooSmall); }
};

struct URecv {
    std::vector<Piece> pieces;  // on node 1
    int msg = -1;               // -1: a spare, left posted
};

struct UQp {
    std::vector<UMsg> msgs;
    std::vector<URecv> recvs;
    // The posting groups: a local error is posted with the datagrams flushed
    // behind it, and the QP posts nothing more until their completions are in.
    std::vector<std::size_t> group_end;  // for each msg, one past the last of its group
};

struct UPlan {
    std::uint64_t seed = 0;
    std::uint32_t mtu = 4096;
    bool global = false;
    bool lossy = false;  // links drop and corrupt 2 % of packets
    std::vector<UQp> qps;
    std::size_t bytes0 = 0, bytes1 = 0;
    std::string describe() const {
        int bad = 0, n = 0;
        for (const auto& q : qps)
            for (const auto& m : q.msgs) {
                bad += m.bad != UFault::None;
                ++n;
            }
        std::ostringstream os;
        os << "seed " << seed << " (UD, " << qps.size() << " QPs, " << n << " datagrams, " << bad << " bad, MTU " << mtu
           << (global ? ", GRH" : "") << (lossy ? ", lossy links" : "") << ")";
        return os.str();
    }
};

std::uint32_t draw_size(SplitMix64& r, std::uint32_t mtu) {
    const std::uint64_t c = r.below(100);
    if (c < 8) return 0;
    if (c < 16) return mtu;
    if (c < 60) return static_cast<std::uint32_t>(r.range(1, std::min<std::uint32_t>(mtu, 256)));
    return static_cast<std::uint32_t>(r.range(1, mtu));
}

UPlan make_plan(std::uint64_t seed, bool lossy = false) {
    SplitMix64 r{seed * 0x9e3779b97f4a7c15ull + 31};
    UPlan p;
    p.seed = seed;
    p.lossy = lossy;
    p.mtu = 256u << r.below(5);
    p.global = r.chance(40);
    p.qps.resize(r.range(2, 8));
    std::size_t c0 = r.below(64), c1 = r.below(64);
    for (auto& q : p.qps) {
        const std::size_t n = r.range(4, 24);
        std::size_t flush_left = 0;  // datagrams still to be flushed behind a local error
        for (std::size_t j = 0; j < n; ++j) {
            UMsg m;
            m.imm = r.chance(40);
            m.imm_data = static_cast<std::uint32_t>(r.next());
            m.signaled = r.chance(70);
            m.own_qkey = r.chance(25);
            if (r.chance(17)) {
                const std::uint64_t k = r.below(5);
                m.bad = k == 0   ? UFault::WrongQkey
                        : k == 1 ? UFault::WrongQpn
                        : k == 2 ? UFault::RecvTooSmall
                        : k == 3 ? UFault::TooLong
                                 : UFault::LocalKey;
            }
            if (lossy && m.bad == UFault::RecvTooSmall) m.bad = UFault::None;  // any receive may take any datagram
            m.len = m.bad == UFault::TooLong ? p.mtu + static_cast<std::uint32_t>(r.range(1, 2048)) : draw_size(r, p.mtu);
            if (m.bad == UFault::LocalKey) m.len = std::max(m.len, 1u);  // an lkey is checked only with bytes under it
            m.local = place(r, c0, m.len, 3);
            if (flush_left > 0) {
                m.flushed = true;
                --flush_left;
            } else if (local_error(m.bad)) {
                flush_left = std::min<std::size_t>(r.below(4), n - j - 1);
            }
            if (m.arrives()) {
                URecv rv;
                rv.msg = static_cast<int>(j);
                const std::uint32_t need = kGrh + (lossy ? p.mtu : m.len);
                const std::uint32_t room = m.bad == UFault::RecvTooSmall ? static_cast<std::uint32_t>(r.range(1, need - 1))
                                                                       : need + (r.chance(30) ? static_cast<std::uint32_t>(r.range(1, 64)) : 0);
                rv.pieces = place(r, c1, room, 3);
                m.recv = static_cast<int>(q.recvs.size());
                q.recvs.push_back(rv);
            }
            q.msgs.push_back(m);
        }
        q.msgs.back().signaled = true;
        // Spare receives: no datagram may take them.
        for (std::uint64_t k = r.below(3); k > 0; --k) {
            URecv rv;
            rv.pieces = place(r, c1, kGrh + p.mtu, 3);
            q.recvs.push_back(rv);
        }
        q.group_end.resize(n);
        for (std::size_t j = 0; j < n;) {
            std::size_t e = j + 1;
            if (local_error(q.msgs[j].bad) && !q.msgs[j].flushed)
                while (e < n && q.msgs[e].flushed) ++e;
            for (std::size_t k = j; k < e; ++k) q.group_end[k] = e;
            j = e;
        }
    }
    p.bytes0 = (c0 + 64 + 4095) / 4096 * 4096;
    p.bytes1 = (c1 + 64 + 4095) / 4096 * 4096;
    return p;
}

std::string where(const UPlan& p, std::size_t q, std::size_t j) {
    const UMsg& m = p.qps[q].msgs[j];
    std::ostringstream os;
    os << "QP " << q << " datagram " << j << " (" << (m.imm ? "SEND_WITH_IMM" : "SEND") << ", " << m.len << " B, "
       << m.local.size() << " pieces" << (m.signaled ? "" : ", unsignaled");
    if (m.bad != UFault::None) os << ", bad: " << fault_name(m.bad);
    if (m.flushed) os << ", flushed";
    os << ")";
    return os.str();
}

std::string what_is(const UPlan& p, int node, std::size_t off) {
    auto in = [off](const std::vector<Piece>& ps) {
        for (const auto& pc : ps)
            if (off >= pc.off && off < pc.off + pc.len) return true;
        return false;
    };
    for (std::size_t q = 0; q < p.qps.size(); ++q) {
        const UQp& uq = p.qps[q];
        if (node == 0) {
            for (std::size_t j = 0; j < uq.msgs.size(); ++j)
                if (in(uq.msgs[j].local)) return " (in " + where(p, q, j) + "'s local piece)";
        } else {
            for (std::size_t k = 0; k < uq.recvs.size(); ++k)
                if (in(uq.recvs[k].pieces))
                    return uq.recvs[k].msg < 0 ? " (in a spare receive of QP " + std::to_string(q) + ")"
                                               : " (in the receive of " + where(p, q, static_cast<std::size_t>(uq.recvs[k].msg)) + ")";
        }
    }
    return " (in no request's range)";
}

std::uint64_t send_id(std::size_t q, std::size_t j) { return (std::uint64_t(q) << 32) | j; }
std::uint64_t recv_id(std::size_t q, std::size_t k) { return (std::uint64_t(1) << 62) | (std::uint64_t(q) << 32) | k; }
std::uint64_t pattern0(const UPlan& p) { return p.seed * 4 + 1; }
std::uint64_t pattern1(const UPlan& p) { return p.seed * 4 + 2; }

// The send completions of QP q, in order: a signaled datagram that goes out
// succeeds, a local error fails whether signaled or not, and each flushed
// one is flushed whether signaled or not.
std::vector<std::pair<std::size_t, ibv_wc_status>> send_expectations(const UQp& q) {
    std::vector<std::pair<std::size_t, ibv_wc_status>> out;
    for (std::size_t j = 0; j < q.msgs.size(); ++j) {
        const UMsg& m = q.msgs[j];
        if (m.flushed) out.emplace_back(j, IBV_WC_WR_FLUSH_ERR);
        else if (m.bad == UFault::TooLong) out.emplace_back(j, IBV_WC_LOC_LEN_ERR);
        else if (m.bad == UFault::LocalKey) out.emplace_back(j, IBV_WC_LOC_PROT_ERR);
        else if (m.signaled) out.emplace_back(j, IBV_WC_SUCCESS);
    }
    return out;
}

SideOptions side_options(const UPlan& p, std::size_t bytes) {
    SideOptions o;
    o.qp_type = IBV_QPT_UD;
    o.qps = static_cast<int>(p.qps.size());
    o.buffer_bytes = bytes;
    o.max_sge = 4;
    o.max_send_wr = 64;
    o.max_recv_wr = 64;
    o.cq_depth = 1024;
    return o;
}

ConnOptions conn_options(const UPlan& p) {
    ConnOptions c;
    c.global = p.global;
    c.qkey = kQkey;
    return c;
}

std::uint64_t counter(Host& h, const std::string& path) { return h.system().counter(path); }

void sender(const UPlan& p, Host& h, Record& rec) {
    ErrorTally err(rec, "node0");
    Side s(h, side_options(p, p.bytes0));
    fill_pattern(s.buf, p.bytes0, pattern0(p));
    s.connect("u", 1, conn_options(p));
    h.barrier("posted");
    const std::size_t nq = p.qps.size();
    std::vector<std::vector<std::pair<std::size_t, ibv_wc_status>>> expect(nq);
    for (std::size_t q = 0; q < nq; ++q) expect[q] = send_expectations(p.qps[q]);
    std::vector<std::size_t> posted(nq, 0), seen(nq, 0);
    // A QP waits for the completions of a local error's group up to here
    // (0: it waits for nothing), then goes back to RTS.
    std::vector<std::size_t> waits_through(nq, 0);
    auto post = [&](std::size_t q) {
        const UMsg& m = p.qps[q].msgs[posted[q]];
        const std::size_t j = posted[q]++;
        std::vector<ibv_sge> sges;
        for (const auto& pc : m.local) sges.push_back(s.sge(pc.off, pc.len));
        if (m.bad == UFault::LocalKey) sges[m.imm_data % sges.size()].lkey ^= 0x5500;
        const std::uint32_t qkey = m.bad == UFault::WrongQkey ? kQkey ^ 0x00ff0000u
                                   : m.own_qkey               ? 0x80000000u | (m.imm_data & 0x7fffffffu)
                                                              : kQkey;
        ibv_send_wr wr{};
        wr.wr_id = send_id(q, j);
        wr.sg_list = sges.empty() ? nullptr : sges.data();
        wr.num_sge = static_cast<int>(sges.size());
        wr.opcode = m.imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
        wr.send_flags = m.signaled ? unsigned{IBV_SEND_SIGNALED} : 0u;
        wr.imm_data = m.imm_data;
        wr.wr.ud.ah = s.ah;
        wr.wr.ud.remote_qpn = m.bad == UFault::WrongQpn ? kNoQp + static_cast<std::uint32_t>(q) : s.peer_info.qpn[q];
        wr.wr.ud.remote_qkey = qkey;
        ibv_send_wr* bad = nullptr;
        if (const int rc = ibv_post_send(s.qps[q], &wr, &bad); rc != 0)
            err(where(p, q, j) + ": ibv_post_send returned " + std::to_string(rc));
        if (local_error(m.bad) && !m.flushed) waits_through[q] = p.qps[q].group_end[j];
    };
    CompletionLog log;
    auto reap = [&]() {
        drain(s, s.send_cq, h, log, [&](const ibv_wc& c, std::size_t q) {
            const std::size_t j = c.wr_id & 0xffffffffu;
            if (q == nq || (c.wr_id >> 32) != q || seen[q] == expect[q].size()) {
                err("a send completion no request should give: wr_id " + std::to_string(c.wr_id) + ", status " +
                    ibv_wc_status_str(c.status));
                return;
            }
            const auto [want_j, want_st] = expect[q][seen[q]++];
            if (j != want_j || c.status != want_st)
                err(where(p, q, want_j) + ": send completion for datagram " + std::to_string(j) + " " +
                    ibv_wc_status_str(c.status) + ", want " + ibv_wc_status_str(want_st));
            else if (c.status == IBV_WC_SUCCESS && c.opcode != IBV_WC_SEND)
                err(where(p, q, j) + ": send completion opcode " + std::to_string(c.opcode));
        });
    };
    // The completions of QP q are in through datagram `through` (exclusive).
    auto done_through = [&](std::size_t q, std::size_t through) {
        return seen[q] == expect[q].size() || expect[q][seen[q]].first >= through;
    };
    // A QP whose local error group is complete goes back to RTS.
    auto recover = [&](std::size_t q) {
        if (waits_through[q] == 0 || !done_through(q, waits_through[q])) return;
        const std::size_t bad = waits_through[q] - 1;
        waits_through[q] = 0;
        if (const ibv_qp_state st = qp_state(s.qps[q]); st != IBV_QPS_SQE)
            err(where(p, q, bad) + ": the QP is in state " + std::to_string(st) + " after its send error, want SQE");
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTS;
        if (const int rc = ibv_modify_qp(s.qps[q], &a, IBV_QP_STATE); rc != 0)
            err(where(p, q, bad) + ": ibv_modify_qp(RTS) from SQE returned " + std::to_string(rc));
    };
    auto may_post = [&](std::size_t q) { return posted[q] < p.qps[q].msgs.size() && waits_through[q] == 0; };
    auto all_posted = [&]() {
        for (std::size_t q = 0; q < nq; ++q)
            if (posted[q] < p.qps[q].msgs.size()) return false;
        return true;
    };
    auto all_seen = [&]() {
        for (std::size_t q = 0; q < nq; ++q)
            if (seen[q] < expect[q].size()) return false;
        return true;
    };
    SplitMix64 r{p.seed ^ 0x0dd5};
    const sim::Tick end = h.now() + us(kLimitUs);
    while (!all_posted() && h.now() < end) {
        for (std::size_t q = 0; q < nq; ++q) recover(q);
        std::size_t q = r.below(nq);
        std::size_t tries = 0;
        while (!may_post(q) && tries++ < nq) q = (q + 1) % nq;
        if (tries > nq) {
            reap();
            h.sleep(200 * sim::kPsPerNs);
            continue;
        }
        // A burst; a local error's group goes out whole, and ends it.
        for (std::uint64_t k = r.range(1, 5); k > 0 && may_post(q); --k) {
            const std::size_t end_of_group = p.qps[q].group_end[posted[q]];
            while (posted[q] < end_of_group) post(q);
        }
        if (r.chance(40)) reap();
    }
    while (!all_seen() && h.now() < end) {
        reap();
        for (std::size_t q = 0; q < nq; ++q) recover(q);
        h.sleep(200 * sim::kPsPerNs);
    }
    for (std::size_t q = 0; q < nq; ++q) {
        if (seen[q] < expect[q].size())
            err("QP " + std::to_string(q) + ": " + std::to_string(seen[q]) + " of " + std::to_string(expect[q].size()) +
                " send completions (" + std::to_string(posted[q]) + " of " + std::to_string(p.qps[q].msgs.size()) +
                " datagrams posted)");
        if (const ibv_qp_state st = qp_state(s.qps[q]); st != IBV_QPS_RTS)
            err("QP " + std::to_string(q) + " ends in state " + std::to_string(st) + ", want RTS");
    }
    h.barrier("completed");
    reap();  // nothing more may come
    // A sender's buffer only gives.
    compare(err, 0, s.buf, pattern(p.bytes0, pattern0(p)), std::vector<bool>(p.bytes0, true),
            [&p](std::size_t off) { return what_is(p, 0, off); });
    finish(s, h, rec, err, 0, log);
}

void receiver(const UPlan& p, Host& h, Record& rec) {
    ErrorTally err(rec, "node1");
    Side s(h, side_options(p, p.bytes1));
    fill_pattern(s.buf, p.bytes1, pattern1(p));
    const std::size_t nq = p.qps.size();
    s.connect("u", 0, conn_options(p));
    post_receives(s, p, err, recv_id);
    h.barrier("posted");
    // The receives datagrams land in, in order (the spares come last); over
    // lossy links any of them may take any datagram.
    std::vector<std::size_t> expected(nq, 0);
    std::uint64_t bad_qkey = 0, no_qp = 0, on_wire = 0;
    for (std::size_t q = 0; q < nq; ++q) {
        for (const auto& m : p.qps[q].msgs) {
            expected[q] += m.arrives();
            bad_qkey += !m.flushed && m.bad == UFault::WrongQkey;
            no_qp += !m.flushed && m.bad == UFault::WrongQpn;
            on_wire += !m.flushed && !local_error(m.bad);
        }
        if (p.lossy) expected[q] = p.qps[q].recvs.size();
    }
    const std::vector<std::uint8_t> peer = pattern(p.bytes0, pattern0(p));
    // Lossy: the first datagram from `from` on that can be the one in receive
    // k of q, whole and intact; msgs.size() when none is.
    auto find_landed = [&](std::size_t q, std::size_t k, std::size_t from, const ibv_wc& c) {
        const UQp& uq = p.qps[q];
        const std::vector<std::uint8_t> got = fault::gathered(s.buf, uq.recvs[k].pieces);
        for (std::size_t j = from; j < uq.msgs.size(); ++j) {
            const UMsg& m = uq.msgs[j];
            if (!m.arrives() || c.byte_len != kGrh + m.len || ((c.wc_flags & IBV_WC_WITH_IMM) != 0) != m.imm ||
                (m.imm && c.imm_data != m.imm_data))
                continue;
            const std::vector<std::uint8_t> sent = fault::gathered(peer, m.local);
            if (got.size() >= kGrh + sent.size() && std::equal(sent.begin(), sent.end(), got.begin() + kGrh)) return j;
        }
        return uq.msgs.size();
    };
    std::vector<std::vector<std::size_t>> landed(nq);  // the datagram in each receive taken
    CompletionLog log;
    auto reap = [&]() {
        drain(s, s.recv_cq, h, log, [&](const ibv_wc& c, std::size_t q) {
            if (q == nq || landed[q].size() == expected[q]) {
                err("a receive completion no datagram should give: wr_id " + std::to_string(c.wr_id) + ", status " +
                    ibv_wc_status_str(c.status));
                return;
            }
            const std::size_t k = landed[q].size();
            std::size_t j = static_cast<std::size_t>(p.qps[q].recvs[k].msg);
            if (p.lossy) {
                j = find_landed(q, k, landed[q].empty() ? 0 : landed[q].back() + 1, c);
                if (j == p.qps[q].msgs.size()) {
                    err("QP " + std::to_string(q) + " receive " + std::to_string(k) + ": " + ibv_wc_status_str(c.status) +
                        ", byte_len " + std::to_string(c.byte_len) + ", holds no datagram sent after the one before it");
                    landed[q].push_back(j);
                    return;
                }
            }
            landed[q].push_back(j);
            const UMsg& m = p.qps[q].msgs[j];
            const ibv_wc_status want = m.bad == UFault::RecvTooSmall ? IBV_WC_LOC_LEN_ERR : IBV_WC_SUCCESS;
            if (c.wr_id != recv_id(q, k) || c.status != want) {
                err(where(p, q, j) + ": receive completion wr_id " + std::to_string(c.wr_id) + " " +
                    ibv_wc_status_str(c.status) + ", want " + std::to_string(recv_id(q, k)) + " " + ibv_wc_status_str(want));
                return;
            }
            if (c.status != IBV_WC_SUCCESS) return;
            const bool grh = (c.wc_flags & IBV_WC_GRH) != 0, imm = (c.wc_flags & IBV_WC_WITH_IMM) != 0;
            if (c.byte_len != kGrh + m.len || c.opcode != IBV_WC_RECV || imm != m.imm || (imm && c.imm_data != m.imm_data) ||
                grh != p.global || c.src_qp != s.peer_info.qpn[q] || c.slid != s.peer_info.lid)
                err(where(p, q, j) + ": receive completion byte_len " + std::to_string(c.byte_len) + ", opcode " +
                    std::to_string(c.opcode) + ", flags " + std::to_string(c.wc_flags) + ", src_qp " +
                    std::to_string(c.src_qp) + ", slid " + std::to_string(c.slid));
        });
    };
    auto all = [&]() {
        for (std::size_t q = 0; q < nq; ++q)
            if (landed[q].size() < expected[q]) return false;
        return true;
    };
    // Over lossy links how many come is not known: the sender's completions
    // say when the last has left.
    const sim::Tick end = h.now() + us(kLimitUs);
    while (!p.lossy && !all() && h.now() < end) {
        reap();
        h.sleep(200 * sim::kPsPerNs);
    }
    h.barrier("completed");
    h.sleep(us(20));  // a stray datagram, or the last over lossy links, would be in by now
    reap();
    std::uint64_t took = 0;
    for (std::size_t q = 0; q < nq; ++q) {
        took += landed[q].size();
        if (!p.lossy && landed[q].size() < expected[q])
            err("QP " + std::to_string(q) + ": " + std::to_string(landed[q].size()) + " of " + std::to_string(expected[q]) +
                " receive completions");
    }
    // Node 1's buffer: its pattern, with each datagram received in full;
    // the GRH area holds the GRH when there is one, else stays untouched; a
    // receive too short holds whatever arrived; nothing else may change.
    std::vector<std::uint8_t> want = pattern(p.bytes1, pattern1(p));
    std::vector<bool> defined(want.size(), true);
    for (std::size_t qi = 0; qi < nq; ++qi)
        for (std::size_t k = 0; k < p.qps[qi].recvs.size(); ++k) {
            const UQp& q = p.qps[qi];
            const URecv& rv = q.recvs[k];
            if (k >= landed[qi].size() || landed[qi][k] >= q.msgs.size()) continue;
            const UMsg& m = q.msgs[landed[qi][k]];
            if (m.bad == UFault::RecvTooSmall) {
                undefine(defined, rv.pieces);
                continue;
            }
            std::vector<std::uint8_t> bytes = fault::gathered(want, rv.pieces);
            const std::vector<std::uint8_t> payload = fault::gathered(peer, m.local);
            std::copy(payload.begin(), payload.end(), bytes.begin() + kGrh);
            scatter(want, rv.pieces, bytes.data(), bytes.size());
            if (p.global) {
                std::size_t left = kGrh;
                for (const auto& pc : rv.pieces) {
                    const std::size_t k = std::min<std::size_t>(pc.len, left);
                    std::fill(defined.begin() + static_cast<long>(pc.off), defined.begin() + static_cast<long>(pc.off + k), false);
                    left -= k;
                    if (left == 0) break;
                }
            }
        }
    compare(err, 1, s.buf, want, defined, [&p](std::size_t off) { return what_is(p, 1, off); });
    // Every datagram that left is received, dropped by this adapter or lost
    // on the link (which carries nothing else).
    const std::uint64_t got_qkey = counter(h, "node1.hca.responder.dropped_bad_qkey");
    const std::uint64_t got_no_qp = counter(h, "node1.hca.rx_pipeline.dropped_unknown_qp");
    const std::uint64_t lost = link_losses(h);
    if ((p.lossy ? got_qkey > bad_qkey || got_no_qp > no_qp : got_qkey != bad_qkey || got_no_qp != no_qp) ||
        took + got_qkey + got_no_qp + lost != on_wire)
        err("dropped for a wrong Q_Key " + std::to_string(got_qkey) + ", for no such QP " + std::to_string(got_no_qp) +
            ", lost on the link " + std::to_string(lost) + ", received " + std::to_string(took) + "; sent " +
            std::to_string(on_wire) + ", " + std::to_string(bad_qkey) + " with a wrong Q_Key, " + std::to_string(no_qp) +
            " to no such QP");
    for (std::size_t q = 0; q < nq; ++q)
        if (const ibv_qp_state st = qp_state(s.qps[q]); st != IBV_QPS_RTS)
            err("node 1 QP " + std::to_string(q) + " ends in state " + std::to_string(st) + ", want RTS");
    rec.num("node1.lost", lost);
    finish(s, h, rec, err, 1, log);
}

RunResult run_plan(const UPlan& p, const char* dma = "systemc") {
    Overrides cfg{{"hca.dma.impl", dma}, {"port.max_mtu", std::to_string(p.mtu)}};
    if (p.lossy) cfg.insert(cfg.end(), {{"fault.drop", "0.02"}, {"fault.corrupt", "0.02"}});
    if (const char* level = std::getenv("HCASIM_STRESS_LOG")) cfg.emplace_back("sim.log_level", level);
    return run_pair(
        cfg, [&p](Host& h, Record& rec) { sender(p, h, rec); }, [&p](Host& h, Record& rec) { receiver(p, h, rec); });
}

void run_seeds(std::uint64_t first, int normal, const char* dma = "systemc", bool lossy = false) {
    for (std::uint64_t seed : stress::seeds(first, normal)) {
        const UPlan p = make_plan(seed, lossy);
        if (std::getenv("HCASIM_STRESS_DUMP"))
            for (std::size_t q = 0; q < p.qps.size(); ++q)
                for (std::size_t j = 0; j < p.qps[q].msgs.size(); ++j) std::printf("%s\n", where(p, q, j).c_str());
        const RunResult r = run_plan(p, dma);
        if (stress::long_mode())
            std::printf("ud fault stress %s, dma %s: %s%s\n", p.describe().c_str(), dma, clean(r) ? "ok" : "FAILED",
                        p.lossy ? (", " + r.get("node1.lost") + " lost on the link").c_str() : "");
        INFO(p.describe() << ", replay with HCASIM_STRESS_SEED=" << seed << ": " << errors_of(r));
        REQUIRE(r.ok);
        CHECK(clean(r));
    }
}

}  // namespace

TEST_CASE("random ud datagrams with bad ones among them fail or drop exactly those and deliver every other byte",
          "[stress][errors][ud]") {
    run_seeds(13001, 8);
}

TEST_CASE("random ud datagrams with bad ones among them through the rtl dma engine fail or drop exactly those",
          "[stress][errors][ud][rtl]") {
    run_seeds(13101, 3, "rtl");
}

TEST_CASE("random ud datagrams with bad ones among them over links that drop and corrupt 2% of packets deliver only "
          "whole, intact datagrams and account for every one",
          "[stress][errors][ud][lossy]") {
    run_seeds(13201, 6, "systemc", true);
}

TEST_CASE("the same plan of ud datagrams with bad ones over lossy links run twice gives identical records",
          "[stress][errors][ud][determinism]") {
    const UPlan p = make_plan(13201, true);
    const RunResult a = run_plan(p);
    const RunResult b = run_plan(p);
    HCASIM_REQUIRE_RUN(a);
    CHECK(a.num("node0.errors") == 0);
    CHECK(a.kv == b.kv);
    CHECK(a.num("node1.end_ps") > 0);
}
