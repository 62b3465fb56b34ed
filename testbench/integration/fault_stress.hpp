// What the seeded error-path stress tests of the verbs share (RC and UC in
// test_fault_stress.cpp, UD in test_ud_fault_stress.cpp): laying out a
// request's pieces, the buffer each node should end with, the asynchronous
// events a node saw, and a hash of every completion polled.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "host/verbs/verbs_internal.hpp"
#include "testbench/integration/harness.hpp"
#include "testbench/system/split_mix.hpp"

namespace hcasim::test::fault {

// len bytes cut into 1 to max_pieces pieces (none for 0 bytes) from cursor
// on, each after a gap of up to 39 bytes: pieces start anywhere, and a byte
// past one is someone else's.
inline std::vector<Piece> place(testbench::SplitMix64& r, std::size_t& cursor, std::uint32_t len, int max_pieces) {
    std::vector<Piece> out;
    const int n = static_cast<int>(std::min<std::uint64_t>(r.range(1, static_cast<std::uint64_t>(max_pieces)), len));
    std::uint32_t left = len;
    for (int i = 0; i < n; ++i) {
        cursor += r.below(40);
        const std::uint32_t l =
            i + 1 == n ? left : static_cast<std::uint32_t>(r.range(1, left - static_cast<std::uint32_t>(n - 1 - i)));
        left -= l;
        out.push_back({cursor, l});
        cursor += l;
    }
    return out;
}

// Puts the first n bytes of data into pieces of mem, in order.
inline void scatter(std::vector<std::uint8_t>& mem, const std::vector<Piece>& pieces, const std::uint8_t* data, std::size_t n) {
    std::size_t from = 0;
    for (const auto& pc : pieces) {
        const std::size_t k = std::min<std::size_t>(pc.len, n - from);
        std::copy(data + from, data + from + k, mem.begin() + static_cast<long>(pc.off));
        from += k;
    }
}

// Marks pieces as holding whatever arrived.
inline void undefine(std::vector<bool>& defined, const std::vector<Piece>& pieces) {
    for (const auto& pc : pieces)
        std::fill(defined.begin() + static_cast<long>(pc.off), defined.begin() + static_cast<long>(pc.off + pc.len), false);
}

// The bytes of pieces of mem (a pattern, or a node's buffer), in order.
inline std::vector<std::uint8_t> gathered(const std::uint8_t* mem, const std::vector<Piece>& pieces) {
    std::vector<std::uint8_t> out;
    for (const auto& pc : pieces) out.insert(out.end(), mem + pc.off, mem + pc.off + pc.len);
    return out;
}
inline std::vector<std::uint8_t> gathered(const std::vector<std::uint8_t>& mem, const std::vector<Piece>& pieces) {
    return gathered(mem.data(), pieces);
}

// Compares node's buffer with what it should hold (defined[i] false: any
// byte; with either, a byte may also be either[i]: a request that may or may
// not have been carried out); what_is names what the first wrong byte
// belongs to.
inline void compare(ErrorTally& err, int node, const std::uint8_t* got, const std::vector<std::uint8_t>& want,
                    const std::vector<bool>& defined, const std::function<std::string(std::size_t)>& what_is,
                    const std::vector<std::uint8_t>* either = nullptr) {
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
        if (defined[i] && got[i] != want[i] && !(either && got[i] == (*either)[i])) {
            if (bad++ == 0) first = i;
        }
    if (bad > 0)
        err("node " + std::to_string(node) + "'s buffer: " + std::to_string(bad) + " bytes differ, the first at offset " +
            std::to_string(first) + what_is(first));
}

// Takes the async events already queued and counts them by type and by the
// index of the QP they name (-1: none of s's).
inline std::map<std::pair<int, long>, int> take_events(Side& s) {
    std::map<std::pair<int, long>, int> seen;
    const std::size_t n = verbs::drv(s.ctx)->pending_async().size();
    for (std::size_t i = 0; i < n; ++i) {
        ibv_async_event ev{};
        if (ibv_get_async_event(s.ctx, &ev) != 0) break;
        long qp = -1;
        for (std::size_t k = 0; k < s.qps.size(); ++k)
            if (ev.element.qp == s.qps[k]) qp = static_cast<long>(k);
        ++seen[{static_cast<int>(ev.event_type), qp}];
        ibv_ack_async_event(&ev);
    }
    return seen;
}

inline std::string events_text(const std::map<std::pair<int, long>, int>& m) {
    std::ostringstream os;
    for (const auto& [k, n] : m) os << " " << ibv_event_type_str(static_cast<ibv_event_type>(k.first)) << "/QP " << k.second << " x" << n;
    return m.empty() ? " none" : os.str();
}

// Every completion a node polls, in order, with the simulated time it was
// polled at, folded into one number: two runs of a plan must agree on it.
struct CompletionLog {
    std::uint64_t hash = 1469598103934665603ull;
    void add(const ibv_wc& c, sim::Tick now) {
        const std::uint64_t words[] = {c.wr_id, static_cast<std::uint64_t>(c.status), c.byte_len, c.qp_num, now};
        hash = (hash ^ fnv1a(reinterpret_cast<const std::uint8_t*>(words), sizeof words)) * 1099511628211ull;
    }
};

// Polls cq until it is empty, logging each completion and handing it on
// with the index of its QP in s.qps (s.qps.size() when it names none).
template <class Each>
void drain(Side& s, ibv_cq* cq, Host& h, CompletionLog& log, Each&& each) {
    ibv_wc wc[16];
    for (;;) {
        const int n = ibv_poll_cq(cq, 16, wc);
        if (n <= 0) return;
        for (int i = 0; i < n; ++i) {
            log.add(wc[i], h.now());
            std::size_t q = s.qps.size();
            for (std::size_t k = 0; k < s.qps.size(); ++k)
                if (s.qps[k]->qp_num == wc[i].qp_num) q = k;
            each(wc[i], q);
        }
    }
}

// Posts every receive of the plan's QPs (qps[q].recvs[k].pieces), with
// wr_id recv_id(q, k), before the peer sends.
template <class Plan, class RecvId>
void post_receives(Side& s, const Plan& p, ErrorTally& err, RecvId&& recv_id) {
    for (std::size_t q = 0; q < p.qps.size(); ++q)
        for (std::size_t k = 0; k < p.qps[q].recvs.size(); ++k) {
            std::vector<ibv_sge> sges;
            for (const auto& pc : p.qps[q].recvs[k].pieces) sges.push_back(s.sge(pc.off, pc.len));
            if (s.post_recv(s.qps[q], sges, recv_id(q, k)) != 0) err("QP " + std::to_string(q) + ": ibv_post_recv failed");
        }
}

// The end of node's program: the asynchronous events it must have seen, its
// completion hash and simulated end time, what it found wrong.
inline void finish(Side& s, Host& h, Record& rec, ErrorTally& err, int node, const CompletionLog& log,
                   const std::map<std::pair<int, long>, int>& want_events = {}) {
    const std::string name = "node" + std::to_string(node);
    const auto events = take_events(s);
    if (events != want_events)
        err(name + " asynchronous events:" + events_text(events) + ", want" + events_text(want_events));
    rec.num(name + ".completions", log.hash);
    rec.num(name + ".end_ps", h.now());
    err.write();
    h.barrier("end");
    s.close();
}

}  // namespace hcasim::test::fault
