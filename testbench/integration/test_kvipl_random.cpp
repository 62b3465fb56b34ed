// KVIPL seeded random stress: many VIs between two nodes, each with a
// random chain of sends, RDMA writes and RDMA reads (with and without
// immediate data, some fenced) of random sizes, gathered from and scattered
// to random segments at odd offsets, posted in random bursts across the VIs.
// On some seeds each VI carries a second chain the other way at the same
// time, so that a VI answers its peer's reads while it sends and reads.
// The work queues are polled, or complete to completion queues (KvipCQDone).
// Every descriptor's status, length and immediate data and every byte that
// lands is checked, on each reliability level, lossless and over links that
// drop and corrupt packets. There an unreliable VI may lose messages: each
// one that arrives must arrive whole, once and in order, into the next
// receive descriptor, and a lost RDMA write may have landed only up to its
// gap. The seeds are chosen as in every stress test (stress_seeds.hpp).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string_view>

#include "testbench/integration/kvipl_harness.hpp"
#include "testbench/integration/kvipl_stress_plan.hpp"
#include "testbench/integration/stress_seeds.hpp"
#include "testbench/system/split_mix.hpp"

namespace hcasim::test {
namespace {

using testbench::SplitMix64;

struct ViPlan {
    std::uint64_t seed = 0;
    KVIP_RELIABILITY_LEVEL reliability = KVIP_SERVICE_RELIABLE_DELIVERY;
    bool lossy = false;
    bool cq = false;  // the work queues complete to a completion queue, polled with KvipCQDone
    bool vi_nic = false;  // both nodes are vi-pci66 NICs: a LANai's control program on PCI and a Myrinet link
    std::vector<ViStream> vis;   // node 0 to node 1, one stream a VI
    std::vector<ViStream> back;  // node 1 to node 0 on the same VIs; empty streams when one way
    // Unreliable over lossy links: messages may be lost.
    bool may_lose() const { return lossy && reliability == KVIP_SERVICE_UNRELIABLE; }
    bool both_ways() const {
        for (const auto& b : back)
            if (!b.msgs.empty()) return true;
        return false;
    }
    // The stream a node sends on a VI, and the one it receives.
    const ViStream& out(int node, std::size_t vi) const { return node == 0 ? vis[vi] : back[vi]; }
    const ViStream& in(int node, std::size_t vi) const { return node == 0 ? back[vi] : vis[vi]; }
    std::string describe() const {
        std::size_t n = 0, bytes = 0;
        for (const auto* streams : {&vis, &back})
            for (const auto& v : *streams)
                for (const auto& m : v.msgs) {
                    ++n;
                    bytes += m.len;
                }
        std::ostringstream os;
        os << "seed " << seed << " (" << (reliability == KVIP_SERVICE_UNRELIABLE         ? "unreliable"
                                          : reliability == KVIP_SERVICE_RELIABLE_DELIVERY ? "reliable delivery"
                                                                                          : "reliable reception")
           << (lossy ? ", lossy links" : "") << (cq ? ", completion queues" : "") << (vi_nic ? ", vi-pci66" : "") << ", " << vis.size() << " VIs"
           << (both_ways() ? " both ways" : "") << ", " << n << " descriptors, " << bytes << " B)";
        return os.str();
    }
};

enum class Ways { One, Both, Drawn };
enum class Level { Drawn, Unreliable };

ViPlan make_vi_plan(std::uint64_t seed, bool lossy, Ways ways = Ways::Drawn, Level forced = Level::Drawn) {
    SplitMix64 r{seed * 0x9e3779b97f4a7c15ull + 11};
    ViPlan p;
    p.seed = seed;
    p.lossy = lossy;
    // Drawn apart, so that the rest of a seed's plan stays as it was.
    p.cq = SplitMix64{seed ^ 0xc0c0}.chance(40);
    p.vi_nic = SplitMix64{seed ^ 0x1a9a1}.chance(30);
    SplitMix64 rb{seed ^ 0xb0b0};
    const bool both = ways == Ways::Both || (ways == Ways::Drawn && rb.chance(50));
    const std::uint64_t level = lossy ? r.range(1, 2) : r.below(3);
    p.reliability = level == 0 || forced == Level::Unreliable ? KVIP_SERVICE_UNRELIABLE
                    : level == 1 ? KVIP_SERVICE_RELIABLE_DELIVERY
                                 : KVIP_SERVICE_RELIABLE_RECEPTION;
    const bool reads = p.reliability != KVIP_SERVICE_UNRELIABLE;
    p.vis.resize(r.range(2, 8));
    for (auto& v : p.vis) v = draw_stream(r, reads);
    p.back.resize(p.vis.size());
    if (both)
        for (auto& v : p.back) v = draw_stream(rb, reads);
    if (p.may_lose()) {
        SplitMix64 rw{seed ^ 0x1055};
        for (auto* streams : {&p.vis, &p.back})
            for (auto& v : *streams) widen_receives(rw, v);
    }
    return p;
}

// The patterns a stream's two ends fill their memory with: the sender's
// (what sends and writes carry) and the receiver's (what reads fetch).
// Node 0's streams keep the keys of the one-way plans.
std::uint64_t sender_pattern(const ViPlan& p, int from, std::size_t vi) { return p.seed * 1000 + from * 500 + vi * 2 + 1; }
std::uint64_t receiver_pattern(const ViPlan& p, int from, std::size_t vi) { return p.seed * 1000 + from * 500 + vi * 2 + 2; }

std::string disc(std::size_t vi) { return "vi" + std::to_string(vi); }

constexpr double kLimitUs = 5e6;  // simulated; a lossy run waits out ACK timeouts

// One node's program: on each VI it posts the stream it sends and takes the
// one it receives. Each VI's memory holds what the node sends and reads into
// (the first sender_bytes of its outgoing stream), then what the peer writes
// into, sends to and reads from (the incoming stream's receiver_bytes). Its
// descriptor slots hold the outgoing stream's descriptors, then the receives.
// Node 0 connects each VI to node 1.
void node(const ViPlan& p, int self, Host& h, Record& rec) {
    const int peer_node = 1 - self;
    ErrorTally err(rec, "node" + std::to_string(self));
    const std::size_t n_vis = p.vis.size();
    std::vector<std::unique_ptr<ViEnd>> ends;
    std::vector<std::size_t> in_base(n_vis);  // where the incoming stream's area starts
    for (std::size_t v = 0; v < n_vis; ++v) {
        const ViStream& out = p.out(self, v);
        const ViStream& in = p.in(self, v);
        in_base[v] = out.sender_bytes;
        ViOptions o;
        o.reliability = p.reliability;
        o.send_cq = p.cq && !out.msgs.empty();
        o.recv_cq = p.cq && in.receives > 0;
        o.data_bytes = std::max<std::size_t>((out.sender_bytes + in.receiver_bytes + 4095) / 4096 * 4096, 4096);
        o.descriptors = std::max<std::size_t>(out.msgs.size() + static_cast<std::size_t>(in.receives), 1);
        ends.push_back(std::make_unique<ViEnd>(o));
        ViEnd& e = *ends[v];
        fill_pattern(e.data, out.sender_bytes, sender_pattern(p, self, v));
        fill_pattern(e.data + in_base[v], in.receiver_bytes, receiver_pattern(p, peer_node, v));
        h.put_value(disc(v) + "/" + std::to_string(self) + "/addr", reinterpret_cast<std::uint64_t>(e.data + in_base[v]));
        h.put_value(disc(v) + "/" + std::to_string(self) + "/mh", e.data_mh);
        // Every receive is posted before the peer may send.
        std::size_t slot = out.msgs.size();
        for (const ViMsg& m : in.msgs) {
            if (!m.consumes_receive()) continue;
            KVIP_DESCRIPTOR* d = e.desc(slot++);
            d->CS.Control = KVIP_CONTROL_OP_SENDRECV;
            std::uint32_t room = 0;
            for (std::size_t s = 0; s < m.recv.size(); ++s) {
                d->DS[s].Local.Data.Address = e.data + in_base[v] + m.recv[s].off;
                d->DS[s].Local.Handle = e.data_mh;
                d->DS[s].Local.Length = m.recv[s].len;
                room += m.recv[s].len;
            }
            d->CS.SegCount = static_cast<KVIP_USHORT>(m.recv.size());
            d->CS.Length = room;
            const KVIP_RETURN rc = KvipPostRecv(e.vi, d, e.desc_mh);
            if (rc != KVIP_SUCCESS) err("VI " + std::to_string(v) + ": KvipPostRecv returned " + std::to_string(rc));
        }
    }
    for (std::size_t v = 0; v < n_vis; ++v) {
        const KVIP_RETURN rc = self == 0 ? dial(h, *ends[v], 1, disc(v)) : serve(h, *ends[v], disc(v));
        if (rc != KVIP_SUCCESS) err("VI " + std::to_string(v) + " did not connect");
    }
    h.barrier("posted");
    std::vector<std::uint64_t> raddr(n_vis);
    std::vector<KVIP_MEM_HANDLE> rmh(n_vis);
    // What the peer filled its memory with: reads' sources, sends' and writes' data.
    std::vector<std::vector<std::uint8_t>> peer_in, peer_out;
    // What this node filled the incoming stream's area with: what a lost write
    // leaves where it did not land.
    std::vector<std::vector<std::uint8_t>> own_in;
    for (std::size_t v = 0; v < n_vis; ++v) {
        raddr[v] = h.get_value<std::uint64_t>(disc(v) + "/" + std::to_string(peer_node) + "/addr");
        rmh[v] = h.get_value<KVIP_MEM_HANDLE>(disc(v) + "/" + std::to_string(peer_node) + "/mh");
        peer_in.push_back(pattern(p.out(self, v).receiver_bytes, receiver_pattern(p, self, v)));
        peer_out.push_back(pattern(p.in(self, v).sender_bytes, sender_pattern(p, peer_node, v)));
        if (p.may_lose()) own_in.push_back(pattern(p.in(self, v).receiver_bytes, receiver_pattern(p, peer_node, v)));
    }
    // Incoming messages that arrived (found by a receive), and the layout of
    // each receive descriptor, in the order they were posted.
    std::vector<std::vector<bool>> arrived(n_vis);
    std::vector<std::vector<const std::vector<Segment>*>> receive_segs(n_vis);
    for (std::size_t v = 0; v < n_vis; ++v) {
        arrived[v].assign(p.in(self, v).msgs.size(), false);
        for (const ViMsg& m : p.in(self, v).msgs)
            if (m.consumes_receive()) receive_segs[v].push_back(&m.recv);
    }

    SplitMix64 r{self == 0 ? p.seed ^ 0x5e4d : p.seed ^ 0x4d5e};
    // Outgoing: descriptors posted and done. Incoming: the message of the next
    // receive (or past the end) and the receives done.
    std::vector<std::size_t> posted(n_vis, 0), done(n_vis, 0), next_in(n_vis, 0), received(n_vis, 0);
    auto skip = [&](std::size_t v) {
        const auto& msgs = p.in(self, v).msgs;
        while (next_in[v] < msgs.size() && !msgs[next_in[v]].consumes_receive()) ++next_in[v];
    };
    for (std::size_t v = 0; v < n_vis; ++v) skip(v);
    // After a queue gave the wrong descriptor, the VI is not followed further.
    auto give_up = [&](std::size_t v) {
        done[v] = posted[v] = p.out(self, v).msgs.size();
        next_in[v] = p.in(self, v).msgs.size();
    };
    auto post = [&](std::size_t v) {
        ViEnd& e = *ends[v];
        const std::size_t j = posted[v]++;
        const ViMsg& m = p.out(self, v).msgs[j];
        KVIP_DESCRIPTOR* d = e.desc(j);
        d->CS.Control = static_cast<KVIP_USHORT>(
            (m.op == ViOp::Send ? KVIP_CONTROL_OP_SENDRECV : m.op == ViOp::Write ? KVIP_CONTROL_OP_RDMAWRITE : KVIP_CONTROL_OP_RDMAREAD) |
            (m.imm ? KVIP_CONTROL_IMMEDIATE : 0) | (m.fence ? KVIP_CONTROL_QFENCE : 0));
        d->CS.ImmediateData = m.imm_data;
        d->CS.Length = m.len;
        std::size_t s = 0;
        if (m.op != ViOp::Send) {
            d->DS[s].Remote.Data.AddressBits = raddr[v] + m.remote;
            d->DS[s].Remote.Handle = rmh[v];
            ++s;
        }
        for (const auto& seg : m.local) {
            d->DS[s].Local.Data.Address = e.data + seg.off;
            d->DS[s].Local.Handle = e.data_mh;
            d->DS[s].Local.Length = seg.len;
            ++s;
        }
        d->CS.SegCount = static_cast<KVIP_USHORT>(s);
        const KVIP_RETURN rc = KvipPostSend(e.vi, d, e.desc_mh);
        if (rc != KVIP_SUCCESS) err(where(self, v, j, m) + ": KvipPostSend returned " + std::to_string(rc));
    };
    // The send queue's next done descriptor, checked; false when none is done.
    auto take_send = [&](std::size_t v) {
        ViEnd& e = *ends[v];
        if (done[v] == posted[v]) return false;
        KVIP_DESCRIPTOR* got = nullptr;
        const KVIP_RETURN rc = KvipSendDone(e.vi, &got);
        if (rc == KVIP_NOT_DONE) return false;
        const std::size_t j = done[v]++;
        const ViMsg& m = p.out(self, v).msgs[j];
        if (got != reinterpret_cast<const KVIP_DESCRIPTOR*>(e.desc_area + j * ViEnd::kSlot)) {
            err(where(self, v, j, m) + ": KvipSendDone returned another descriptor (" + std::to_string(rc) + ")");
            give_up(v);
            return true;
        }
        if (rc != KVIP_SUCCESS || got->CS.Status != status_of(m) || got->CS.Length != m.len) {
            std::ostringstream os;
            os << where(self, v, j, m) << ": return " << rc << ", status 0x" << std::hex << got->CS.Status << " (want 0x"
               << status_of(m) << std::dec << "), length " << got->CS.Length;
            err(os.str());
        } else if (m.op == ViOp::Read) {
            const auto got_bytes = gather(e.data, m.local, m.len);
            const long long bad = first_mismatch(got_bytes.data(), peer_in[v].data() + m.remote, m.len);
            if (bad >= 0) err(where(self, v, j, m) + ": read byte " + std::to_string(bad) + " differs");
        }
        return true;
    };
    // What receive k of a VI that may lose messages holds: the first message
    // from the next expected on that it matches, whole (status, length,
    // immediate data, bytes). Those before it were lost.
    auto take_arrival = [&](std::size_t v, std::size_t k, KVIP_RETURN rc, const KVIP_DESCRIPTOR& got) {
        const auto& msgs = p.in(self, v).msgs;
        const std::vector<Segment>& segs = *receive_segs[v][k];
        for (std::size_t j = next_in[v]; rc == KVIP_SUCCESS && j < msgs.size(); ++j) {
            const ViMsg& m = msgs[j];
            if (!m.consumes_receive()) continue;
            const KVIP_ULONG want = KVIP_STATUS_DONE |
                                    (m.op == ViOp::Send ? KVIP_STATUS_OP_RECEIVE : KVIP_STATUS_OP_REMOTE_RDMA_WRITE) |
                                    (m.imm ? KVIP_STATUS_IMMEDIATE : 0);
            if (got.CS.Status != want || got.CS.Length != m.len || (m.imm && got.CS.ImmediateData != m.imm_data)) continue;
            if (m.op == ViOp::Send) {
                const auto want_bytes = gather(peer_out[v].data(), m.local, m.len);
                const auto got_bytes = gather(ends[v]->data + in_base[v], segs, m.len);
                if (first_mismatch(got_bytes.data(), want_bytes.data(), m.len) >= 0) continue;
            }
            arrived[v][j] = true;
            next_in[v] = j + 1;
            skip(v);
            return true;
        }
        std::ostringstream os;
        os << "VI " << v << " receive " << k << " from node " << peer_node << ": return " << rc << ", status 0x" << std::hex
           << got.CS.Status << ", immediate 0x" << got.CS.ImmediateData << std::dec << ", length " << got.CS.Length
           << " is no message from descriptor " << next_in[v] << " on, whole";
        err(os.str());
        give_up(v);
        return true;
    };
    // The receive queue's next done descriptor, checked against the message
    // that consumed it; false when none is done.
    auto take_receive = [&](std::size_t v) {
        ViEnd& e = *ends[v];
        const auto& msgs = p.in(self, v).msgs;
        if (next_in[v] == msgs.size()) return false;
        KVIP_DESCRIPTOR* got = nullptr;
        const KVIP_RETURN rc = KvipRecvDone(e.vi, &got);
        if (rc == KVIP_NOT_DONE) return false;
        const std::size_t k = received[v]++;
        const std::size_t slot = p.out(self, v).msgs.size() + k;
        if (got != reinterpret_cast<const KVIP_DESCRIPTOR*>(e.desc_area + slot * ViEnd::kSlot)) {
            err(where(peer_node, v, next_in[v], msgs[next_in[v]]) + ": KvipRecvDone returned another descriptor (" +
                std::to_string(rc) + ")");
            give_up(v);
            return true;
        }
        if (p.may_lose()) return take_arrival(v, k, rc, *got);
        const std::size_t j = next_in[v]++;
        skip(v);
        const ViMsg& m = msgs[j];
        const KVIP_ULONG want = KVIP_STATUS_DONE |
                                (m.op == ViOp::Send ? KVIP_STATUS_OP_RECEIVE : KVIP_STATUS_OP_REMOTE_RDMA_WRITE) |
                                (m.imm ? KVIP_STATUS_IMMEDIATE : 0);
        if (rc != KVIP_SUCCESS || got->CS.Status != want || got->CS.Length != m.len ||
            (m.imm && got->CS.ImmediateData != m.imm_data)) {
            std::ostringstream os;
            os << where(peer_node, v, j, m) << ": receive return " << rc << ", status 0x" << std::hex << got->CS.Status
               << " (want 0x" << want << "), immediate 0x" << got->CS.ImmediateData << std::dec << ", length "
               << got->CS.Length;
            err(os.str());
        } else if (m.op == ViOp::Send) {
            const auto want_bytes = gather(peer_out[v].data(), m.local, m.len);
            const auto got_bytes = gather(e.data + in_base[v], m.recv, m.len);
            const long long bad = first_mismatch(got_bytes.data(), want_bytes.data(), m.len);
            if (bad >= 0) err(where(peer_node, v, j, m) + ": received byte " + std::to_string(bad) + " differs");
        }
        return true;
    };
    // Takes what completed on every VI: from its queues in turn, or in the
    // order its completion queue gives, which must name this VI and a queue
    // with a done descriptor.
    auto reap = [&]() {
        for (std::size_t v = 0; v < n_vis; ++v) {
            ViEnd& e = *ends[v];
            if (!e.cq) {
                while (take_send(v) | take_receive(v)) {
                }
                continue;
            }
            for (;;) {
                KVIP_VI_HANDLE vi = nullptr;
                KVIP_BOOLEAN rq = KVIP_FALSE;
                const KVIP_RETURN rc = KvipCQDone(e.cq, &vi, &rq);
                if (rc == KVIP_NOT_DONE) break;
                if (rc != KVIP_SUCCESS || vi != e.vi) {
                    err("VI " + std::to_string(v) + ": KvipCQDone returned " + std::to_string(rc) +
                        (vi != e.vi ? " for another VI" : ""));
                    give_up(v);
                    break;
                }
                if (!(rq != KVIP_FALSE ? take_receive(v) : take_send(v))) {
                    err("VI " + std::to_string(v) + ": a completion queue entry for the " + (rq != KVIP_FALSE ? "receive" : "send") +
                        " queue without a done descriptor");
                    give_up(v);
                    break;
                }
            }
        }
    };
    auto finished = [&](const std::vector<std::size_t>& c, bool incoming) {
        for (std::size_t v = 0; v < n_vis; ++v)
            if (c[v] < (incoming ? p.in(self, v) : p.out(self, v)).msgs.size()) return false;
        return true;
    };
    // After the last messages landed: takes what arrived; nothing arrives
    // twice or more than was sent, and losses do not stop a VI. A message of
    // one packet arrives with 98 % odds (1 % dropped, 1 % corrupted), so each VI
    // delivers one of any five such messages after a loss, and a node that
    // receives twenty or more of them at least half.
    auto check_losses = [&]() {
        reap();
        std::size_t short_sent = 0, short_arrived = 0, lost = 0;
        for (std::size_t v = 0; v < n_vis; ++v) {
            ViEnd& e = *ends[v];
            KVIP_DESCRIPTOR* got = nullptr;
            // KvipRecvDone gives no descriptor while none is done, or none is posted.
            if (!e.cq && next_in[v] == p.in(self, v).msgs.size() && (KvipRecvDone(e.vi, &got), got != nullptr))
                err("VI " + std::to_string(v) + ": a receive completed after every message was accounted for");
            const auto& in = p.in(self, v).msgs;
            std::size_t since_loss = 0, lost_at = in.size();
            for (std::size_t j = 0; j < in.size(); ++j) {
                const ViMsg& m = in[j];
                if (!m.consumes_receive()) continue;
                const bool one_packet = m.len <= 4096;
                short_sent += one_packet;
                short_arrived += one_packet && arrived[v][j];
                if (!arrived[v][j]) {
                    ++lost;
                    if (lost_at == in.size()) lost_at = j;
                }
                if (lost_at < j && one_packet) {
                    if (arrived[v][j]) since_loss = 0, lost_at = in.size();
                    else if (++since_loss == 5)
                        err(where(peer_node, v, lost_at, in[lost_at]) + " was lost, and no message of one packet after it arrived");
                }
            }
        }
        if (short_sent >= 20 && short_arrived * 2 < short_sent)
            err("node" + std::to_string(self) + " received " + std::to_string(short_arrived) + " of " +
                std::to_string(short_sent) + " messages of one packet");
        rec.num("node" + std::to_string(self) + ".lost", lost);
    };
    // Random bursts on random VIs, reaping now and then between them.
    while (!finished(posted, false)) {
        std::size_t v = r.below(n_vis);
        while (posted[v] == p.out(self, v).msgs.size()) v = (v + 1) % n_vis;
        for (std::uint64_t k = r.range(1, 6); k > 0 && posted[v] < p.out(self, v).msgs.size(); --k) post(v);
        if (r.chance(40)) reap();
    }
    // A VI that may lose messages cannot wait for all of them: its receiver
    // takes what arrived once both ends have sent everything.
    const sim::Tick end = h.now() + us(kLimitUs);
    while (!(finished(done, false) && (p.may_lose() || finished(next_in, true))) && h.now() < end) reap();
    for (std::size_t v = 0; v < n_vis; ++v) {
        const auto& out = p.out(self, v).msgs;
        const auto& in = p.in(self, v).msgs;
        if (done[v] < out.size())
            err("VI " + std::to_string(v) + ": " + std::to_string(done[v]) + " of " + std::to_string(out.size()) +
                " descriptors completed");
        if (!p.may_lose() && next_in[v] < in.size()) err(where(peer_node, v, next_in[v], in[next_in[v]]) + ": never received");
    }
    h.barrier("sent");
    // Unreliable writes are done when they leave the sender: let them land.
    h.sleep(us(1000));
    if (p.may_lose()) check_losses();
    for (std::size_t v = 0; v < n_vis; ++v) {
        const auto& in = p.in(self, v).msgs;
        for (std::size_t j = 0; j < in.size(); ++j) {
            const ViMsg& m = in[j];
            if (m.op != ViOp::Write) continue;
            const auto want_bytes = gather(peer_out[v].data(), m.local, m.len);
            const std::uint8_t* at = ends[v]->data + in_base[v] + m.remote;
            const long long bad = first_mismatch(at, want_bytes.data(), m.len);
            if (bad < 0) continue;
            // A write that may have been lost landed up to its first gap, if at
            // all, and left the bytes after it as they were.
            const long long left = p.may_lose() && !arrived[v][j]
                                       ? first_mismatch(at + bad, own_in[v].data() + m.remote + bad, m.len - bad)
                                       : 0;
            if (left >= 0)
                err(where(peer_node, v, j, m) + ": written byte " + std::to_string(bad + left) + " differs" +
                    (p.may_lose() && !arrived[v][j] ? " from both what it carried and what was there" : ""));
        }
    }
    rec.num("node" + std::to_string(self) + ".end_ps", h.now());
    err.write();
    h.barrier("end");
}

RunResult run_vi_plan(const ViPlan& p, const char* dma = "systemc") {
    Overrides cfg{{"hca.dma.impl", dma}};
    // The VI NIC preset's bus is PCI, which the Verilog DMA engine does not speak.
    if (p.vi_nic && std::string_view(dma) == "systemc") {
        cfg.emplace_back("node0.preset", "vi-pci66");
        cfg.emplace_back("node1.preset", "vi-pci66");
        cfg.emplace_back("link.speed", "myrinet2000");
        cfg.emplace_back("link.width", "1");
    }
    if (p.lossy) add_lossy_links(cfg);
    if (const char* level = std::getenv("HCASIM_STRESS_LOG")) cfg.emplace_back("sim.log_level", level);
    return run_pair(
        cfg, [&p](Host& h, Record& rec) { node(p, 0, h, rec); }, [&p](Host& h, Record& rec) { node(p, 1, h, rec); });
}

void run_vi_seeds(std::uint64_t first, int normal, bool lossy, const char* dma = "systemc", Ways ways = Ways::Drawn,
                  Level level = Level::Drawn) {
    for (std::uint64_t seed : stress::seeds(first, normal)) {
        const ViPlan p = make_vi_plan(seed, lossy, ways, level);
        if (std::getenv("HCASIM_STRESS_DUMP"))
            for (int from : {0, 1})
                for (std::size_t v = 0; v < p.vis.size(); ++v)
                    for (std::size_t j = 0; j < p.out(from, v).msgs.size(); ++j)
                        std::printf("%s\n", where(from, v, j, p.out(from, v).msgs[j]).c_str());
        const RunResult r = run_vi_plan(p, dma);
        if (stress::long_mode())
            std::printf("kvipl stress %s, dma %s: %s, %.0f us simulated%s\n", p.describe().c_str(), dma,
                        clean(r) ? "ok" : "FAILED", static_cast<double>(r.num("node1.end_ps")) / 1e6,
                        p.may_lose() ? (", " + std::to_string(r.num("node0.lost") + r.num("node1.lost")) + " messages lost")
                                           .c_str()
                                     : "");
        INFO(p.describe() << ", replay with HCASIM_STRESS_SEED=" << seed << ": " << errors_of(r));
        REQUIRE(r.ok);
        CHECK(r.num("node0.errors") == 0);
        CHECK(r.num("node1.errors") == 0);
    }
}

}  // namespace

// Half the seeds of these three cases send both ways on every VI.
TEST_CASE("random kvipl traffic on many vis moves every byte and completes every descriptor on every reliability level",
          "[kvipl][stress]") {
    run_vi_seeds(9001, 8, false);
}

TEST_CASE("random kvipl traffic over links that drop and corrupt 1% of packets moves every byte on the reliable levels",
          "[kvipl][stress][lossy]") {
    run_vi_seeds(9501, 4, true);
}

TEST_CASE("random kvipl traffic through the rtl dma engine moves every byte and completes every descriptor",
          "[kvipl][stress][rtl]") {
    run_vi_seeds(9803, 4, false, "rtl");
}

// Each VI sends, writes and reads both ways at once: its hardware answers
// the peer's reads and acknowledges its writes among its own requests, over
// links that lose packets.
TEST_CASE("random kvipl traffic both ways on every vi over links that drop and corrupt 1% of packets moves every byte",
          "[kvipl][stress][lossy][both_ways]") {
    run_vi_seeds(9901, 4, true, "systemc", Ways::Both);
}

// Unreliable VIs lose the messages whose packets the links drop or corrupt;
// every other message arrives whole, in order and once.
TEST_CASE("random kvipl traffic on unreliable vis over lossy links delivers each message whole or not at all, in order "
          "and once",
          "[kvipl][stress][lossy][unreliable]") {
    run_vi_seeds(9401, 4, true, "systemc", Ways::Drawn, Level::Unreliable);
}

TEST_CASE("random kvipl traffic on unreliable vis over lossy links through the rtl dma engine delivers each message "
          "whole or not at all",
          "[kvipl][stress][lossy][unreliable][rtl]") {
    run_vi_seeds(9451, 2, true, "rtl", Ways::Drawn, Level::Unreliable);
}

// Seeds the lossy case failed over 200 seeds, one way. 9525: a 249855 B
// RDMA read asked again whole after each lost answer packet seldom got all
// its answer through and failed with a transport error; a READ is now asked
// again for the part not yet in. 9623: a fenced read waited for ever for a
// read before it whose slot an ACK had given back without waking the
// requester.
TEST_CASE("kvipl reads over lossy links resume where their answer broke off and wake fenced descriptors",
          "[kvipl][lossy]") {
    for (std::uint64_t seed : {9525u, 9623u}) {
        const ViPlan p = make_vi_plan(seed, true, Ways::One);
        const RunResult r = run_vi_plan(p);
        INFO(p.describe() << ": " << errors_of(r));
        REQUIRE(r.ok);
        CHECK(r.num("node0.errors") == 0);
        CHECK(r.num("node1.errors") == 0);
    }
}

TEST_CASE("the same random kvipl plan run twice gives identical records", "[kvipl][stress][determinism]") {
    // Reliable, and unreliable with the same messages lost both times.
    for (const Level level : {Level::Drawn, Level::Unreliable}) {
        const ViPlan p = make_vi_plan(9001, true, Ways::Both, level);
        const RunResult a = run_vi_plan(p);
        const RunResult b = run_vi_plan(p);
        INFO(p.describe());
        HCASIM_REQUIRE_RUN(a);
        CHECK(a.kv == b.kv);
        CHECK(a.num("node0.end_ps") > 0);
        CHECK(a.num("node1.end_ps") > 0);
        if (p.may_lose()) CHECK(a.num("node0.lost") + a.num("node1.lost") > 0);
    }
}

}  // namespace hcasim::test
