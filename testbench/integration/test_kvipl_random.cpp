// KVIPL seeded random stress: many VIs between two nodes, each with a
// random chain of sends, RDMA writes and RDMA reads (with and without
// immediate data, some fenced) of random sizes, gathered from and scattered
// to random segments at odd offsets, posted in random bursts across the VIs.
// The work queues are polled, or complete to completion queues (KvipCQDone).
// Every descriptor's status, length and immediate data and every byte that
// lands is checked, on each reliability level, lossless and (reliable
// levels) over links that drop and corrupt packets. The seeds are chosen
// as in every stress test (stress_seeds.hpp).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "testbench/integration/kvipl_harness.hpp"
#include "testbench/integration/stress_seeds.hpp"
#include "testbench/system/split_mix.hpp"

namespace hcasim::test {
namespace {

using testbench::SplitMix64;

enum class ViOp { Send, Write, Read };

struct Segment {
    std::size_t off;  // in the node's data area of the VI
    std::uint32_t len;
};

struct ViMsg {
    ViOp op = ViOp::Send;
    bool imm = false;
    bool fence = false;
    std::uint32_t imm_data = 0;
    std::uint32_t len = 0;
    std::vector<Segment> local;  // on the sender: gathered (send, write) or scattered (read)
    std::size_t remote = 0;      // on the receiver: write destination or read source
    std::vector<Segment> recv;   // the receive descriptor it consumes (send, write with immediate)
    bool consumes_receive() const { return op == ViOp::Send || (op == ViOp::Write && imm); }
};

struct ViStream {
    std::vector<ViMsg> msgs;
    std::size_t sender_bytes = 0, receiver_bytes = 0;
    int receives = 0;
};

struct ViPlan {
    std::uint64_t seed = 0;
    KVIP_RELIABILITY_LEVEL reliability = KVIP_SERVICE_RELIABLE_DELIVERY;
    bool lossy = false;
    bool cq = false;  // the work queues complete to a completion queue, polled with KvipCQDone
    std::vector<ViStream> vis;
    std::string describe() const {
        std::size_t n = 0, bytes = 0;
        for (const auto& v : vis)
            for (const auto& m : v.msgs) {
                ++n;
                bytes += m.len;
            }
        std::ostringstream os;
        os << "seed " << seed << " (" << (reliability == KVIP_SERVICE_UNRELIABLE         ? "unreliable"
                                          : reliability == KVIP_SERVICE_RELIABLE_DELIVERY ? "reliable delivery"
                                                                                          : "reliable reception")
           << (lossy ? ", lossy links" : "") << (cq ? ", completion queues" : "") << ", " << vis.size() << " VIs, " << n << " descriptors, " << bytes << " B)";
        return os.str();
    }
};

constexpr std::size_t kMaxLocalSegments = 8;
constexpr std::size_t kMaxRecvSegments = 4;

std::uint32_t draw_len(SplitMix64& r) {
    const std::uint64_t c = r.below(100);
    if (c < 5) return 0;
    if (c < 35) return static_cast<std::uint32_t>(r.range(1, 256));
    if (c < 65) return static_cast<std::uint32_t>(r.range(257, 8192));
    if (c < 93) return static_cast<std::uint32_t>(r.range(8193, 65536));
    return static_cast<std::uint32_t>(r.range(65537, 262144));
}

// len bytes cut into up to max_segs segments at odd places from cursor on.
std::vector<Segment> draw_segments(SplitMix64& r, std::uint32_t len, std::size_t max_segs, std::size_t& cursor,
                                   std::uint32_t slack) {
    std::vector<Segment> segs;
    if (len == 0 && slack == 0) return segs;
    const std::size_t n = len == 0 ? 1 : std::min<std::size_t>(r.range(1, max_segs), len);
    std::uint32_t left = len;
    for (std::size_t i = 0; i < n; ++i) {
        cursor += r.below(48);  // an odd gap: segments start anywhere
        std::uint32_t l = i + 1 == n ? left : static_cast<std::uint32_t>(r.range(1, left - (n - 1 - i)));
        left -= l;
        if (i + 1 == n) l += slack;
        segs.push_back({cursor, l});
        cursor += l;
    }
    return segs;
}

ViPlan make_vi_plan(std::uint64_t seed, bool lossy) {
    SplitMix64 r{seed * 0x9e3779b97f4a7c15ull + 11};
    ViPlan p;
    p.seed = seed;
    p.lossy = lossy;
    // Drawn apart, so that the rest of a seed's plan stays as it was.
    p.cq = SplitMix64{seed ^ 0xc0c0}.chance(40);
    const std::uint64_t level = lossy ? r.range(1, 2) : r.below(3);
    p.reliability = level == 0 ? KVIP_SERVICE_UNRELIABLE
                    : level == 1 ? KVIP_SERVICE_RELIABLE_DELIVERY
                                 : KVIP_SERVICE_RELIABLE_RECEPTION;
    const bool reads = p.reliability != KVIP_SERVICE_UNRELIABLE;
    p.vis.resize(r.range(2, 8));
    for (auto& v : p.vis) {
        const std::size_t n = r.range(4, 30);
        std::size_t s_cur = r.below(64), r_cur = r.below(64);
        bool after_read = false;
        for (std::size_t i = 0; i < n; ++i) {
            ViMsg m;
            const std::uint64_t c = r.below(100);
            m.op = c < 45 ? ViOp::Send : (c < 75 || !reads) ? ViOp::Write : ViOp::Read;
            m.len = draw_len(r);
            if (m.op != ViOp::Send && m.len == 0) m.len = 1;
            m.imm = m.op != ViOp::Read && r.chance(30);
            m.imm_data = static_cast<std::uint32_t>(r.next());
            // A fence waits for the reads before it.
            m.fence = after_read && r.chance(30);
            m.local = draw_segments(r, m.len, kMaxLocalSegments, s_cur, 0);
            if (m.op != ViOp::Send) {
                r_cur += r.below(48);
                m.remote = r_cur;
                r_cur += m.len;
            }
            if (m.consumes_receive()) {
                // Room to spare in some: the length is what arrived.
                const auto slack = static_cast<std::uint32_t>(r.chance(30) ? r.range(1, 100) : 0);
                m.recv = draw_segments(r, m.op == ViOp::Send ? m.len : 0, kMaxRecvSegments, r_cur, slack);
                ++v.receives;
            }
            after_read = after_read || m.op == ViOp::Read;
            v.msgs.push_back(m);
        }
        v.sender_bytes = s_cur + 64;
        v.receiver_bytes = r_cur + 64;
    }
    return p;
}

std::uint64_t sender_pattern(const ViPlan& p, std::size_t vi) { return p.seed * 1000 + vi * 2 + 1; }
std::uint64_t receiver_pattern(const ViPlan& p, std::size_t vi) { return p.seed * 1000 + vi * 2 + 2; }

std::string disc(std::size_t vi) { return "vi" + std::to_string(vi); }

ViOptions vi_options(const ViPlan& p, std::size_t bytes, std::size_t descriptors, bool recv_side) {
    ViOptions o;
    o.reliability = p.reliability;
    o.send_cq = p.cq && !recv_side;
    o.recv_cq = p.cq && recv_side;
    o.data_bytes = (bytes + 4095) / 4096 * 4096;
    o.descriptors = std::max<std::size_t>(descriptors, 1);
    return o;
}

KVIP_ULONG status_of(const ViMsg& m) {
    const KVIP_ULONG op = m.op == ViOp::Send    ? KVIP_STATUS_OP_SEND
                          : m.op == ViOp::Write ? KVIP_STATUS_OP_RDMA_WRITE
                                                : KVIP_STATUS_OP_RDMA_READ;
    return KVIP_STATUS_DONE | op | (m.imm ? KVIP_STATUS_IMMEDIATE : 0);
}

// Errors found in a program: the count and the first few.
struct Errors {
    Errors(Record& r, const char* s) : rec(r), side(s) {}
    Record& rec;
    const char* side;
    int n = 0;
    std::string first;
    void operator()(const std::string& e) {
        if (n++ < 6) first += " | " + e;
    }
    void write() {
        rec.num(std::string(side) + ".errors", n);
        rec.set(std::string(side) + ".first_errors", first);
    }
};

// The next done descriptor of a work queue: from the queue, or, when it
// completes to a CQ, once the CQ names this VI and queue. wrong says what
// went wrong: a CQ entry for another queue or without a done descriptor, or
// a descriptor other than want.
KVIP_RETURN next_done(const ViPlan& p, ViEnd& e, bool recv, const KVIP_DESCRIPTOR* want, KVIP_DESCRIPTOR** got,
                      std::string& wrong) {
    if (p.cq) {
        KVIP_VI_HANDLE vi = nullptr;
        KVIP_BOOLEAN rq = KVIP_FALSE;
        const KVIP_RETURN rc = KvipCQDone(e.cq, &vi, &rq);
        if (rc == KVIP_NOT_DONE) return rc;
        if (rc != KVIP_SUCCESS || vi != e.vi || (rq != KVIP_FALSE) != recv) {
            wrong = "KvipCQDone returned " + std::to_string(rc) + (vi != e.vi ? " for another VI" : "") +
                    ((rq != KVIP_FALSE) != recv ? " for the other queue" : "");
            return KVIP_ERROR_RESOURCE;
        }
    }
    const KVIP_RETURN rc = recv ? KvipRecvDone(e.vi, got) : KvipSendDone(e.vi, got);
    if (p.cq && rc == KVIP_NOT_DONE) {
        wrong = "a completion queue entry without a done descriptor";
        return KVIP_ERROR_RESOURCE;
    }
    if (rc != KVIP_NOT_DONE && *got != want)
        wrong = std::string(recv ? "KvipRecvDone" : "KvipSendDone") + " returned another descriptor (" +
                std::to_string(rc) + ")";
    return rc;
}

std::string where(std::size_t vi, std::size_t j, const ViMsg& m) {
    std::ostringstream os;
    os << "VI " << vi << " descriptor " << j << " ("
       << (m.op == ViOp::Send ? "send" : m.op == ViOp::Write ? "RDMA write" : "RDMA read") << (m.imm ? " with immediate" : "")
       << (m.fence ? ", fenced" : "") << ", " << m.len << " B, " << m.local.size() << " segments)";
    return os.str();
}

// The bytes of segs in order from data.
std::vector<std::uint8_t> gather(const std::uint8_t* data, const std::vector<Segment>& segs, std::uint32_t len) {
    std::vector<std::uint8_t> out;
    out.reserve(len);
    for (const auto& s : segs) out.insert(out.end(), data + s.off, data + s.off + s.len);
    out.resize(len);
    return out;
}

constexpr double kLimitUs = 5e6;  // simulated; a lossy run waits out ACK timeouts

void sender(const ViPlan& p, Host& h, Record& rec) {
    Errors err(rec, "sender");
    std::vector<std::unique_ptr<ViEnd>> ends;
    for (std::size_t v = 0; v < p.vis.size(); ++v) {
        ends.push_back(std::make_unique<ViEnd>(vi_options(p, p.vis[v].sender_bytes, p.vis[v].msgs.size(), false)));
        fill_pattern(ends[v]->data, p.vis[v].sender_bytes, sender_pattern(p, v));
    }
    for (std::size_t v = 0; v < p.vis.size(); ++v)
        if (dial(h, *ends[v], 1, disc(v)) != KVIP_SUCCESS) err("VI " + std::to_string(v) + " did not connect");
    h.barrier("posted");
    std::vector<std::uint64_t> raddr(p.vis.size());
    std::vector<KVIP_MEM_HANDLE> rmh(p.vis.size());
    for (std::size_t v = 0; v < p.vis.size(); ++v) {
        raddr[v] = h.get_value<std::uint64_t>(disc(v) + "/addr");
        rmh[v] = h.get_value<KVIP_MEM_HANDLE>(disc(v) + "/mh");
    }
    // What each VI's peer filled its memory with: the reads' sources.
    std::vector<std::vector<std::uint8_t>> peer;
    for (std::size_t v = 0; v < p.vis.size(); ++v) peer.push_back(pattern(p.vis[v].receiver_bytes, receiver_pattern(p, v)));
    SplitMix64 r{p.seed ^ 0x5e4d};
    std::vector<std::size_t> posted(p.vis.size(), 0), done(p.vis.size(), 0);
    auto post = [&](std::size_t v) {
        ViEnd& e = *ends[v];
        const std::size_t j = posted[v]++;
        const ViMsg& m = p.vis[v].msgs[j];
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
        if (rc != KVIP_SUCCESS) err(where(v, j, m) + ": KvipPostSend returned " + std::to_string(rc));
    };
    // Takes what completed, in order, on every VI.
    auto reap = [&]() {
        for (std::size_t v = 0; v < p.vis.size(); ++v) {
            ViEnd& e = *ends[v];
            while (done[v] < posted[v]) {
                KVIP_DESCRIPTOR* got = nullptr;
                std::string wrong;
                const std::size_t j = done[v];
                const auto* want = reinterpret_cast<const KVIP_DESCRIPTOR*>(e.desc_area + j * ViEnd::kSlot);
                const KVIP_RETURN rc = next_done(p, e, false, want, &got, wrong);
                if (rc == KVIP_NOT_DONE) break;
                ++done[v];
                const ViMsg& m = p.vis[v].msgs[j];
                if (!wrong.empty()) {
                    err(where(v, j, m) + ": " + wrong);
                    done[v] = posted[v] = p.vis[v].msgs.size();
                    break;
                }
                if (rc != KVIP_SUCCESS || got->CS.Status != status_of(m) || got->CS.Length != m.len) {
                    std::ostringstream os;
                    os << where(v, j, m) << ": return " << rc << ", status 0x" << std::hex << got->CS.Status << " (want 0x"
                       << status_of(m) << std::dec << "), length " << got->CS.Length;
                    err(os.str());
                    continue;
                }
                if (m.op == ViOp::Read) {
                    const auto got_bytes = gather(e.data, m.local, m.len);
                    const long long bad = first_mismatch(got_bytes.data(), peer[v].data() + m.remote, m.len);
                    if (bad >= 0) err(where(v, j, m) + ": read byte " + std::to_string(bad) + " differs");
                }
            }
        }
    };
    auto all = [&](const std::vector<std::size_t>& c) {
        for (std::size_t v = 0; v < p.vis.size(); ++v)
            if (c[v] < p.vis[v].msgs.size()) return false;
        return true;
    };
    // Random bursts on random VIs, reaping now and then between them.
    while (!all(posted)) {
        std::size_t v = r.below(p.vis.size());
        while (posted[v] == p.vis[v].msgs.size()) v = (v + 1) % p.vis.size();
        for (std::uint64_t k = r.range(1, 6); k > 0 && posted[v] < p.vis[v].msgs.size(); --k) post(v);
        if (r.chance(40)) reap();
    }
    const sim::Tick end = h.now() + us(kLimitUs);
    while (!all(done) && h.now() < end) reap();
    for (std::size_t v = 0; v < p.vis.size(); ++v)
        if (done[v] < p.vis[v].msgs.size())
            err("VI " + std::to_string(v) + ": " + std::to_string(done[v]) + " of " +
                std::to_string(p.vis[v].msgs.size()) + " descriptors completed");
    h.barrier("sent");
    rec.num("sender.end_ps", h.now());
    err.write();
    h.barrier("end");
}

void receiver(const ViPlan& p, Host& h, Record& rec) {
    Errors err(rec, "receiver");
    std::vector<std::unique_ptr<ViEnd>> ends;
    for (std::size_t v = 0; v < p.vis.size(); ++v) {
        ends.push_back(std::make_unique<ViEnd>(vi_options(p, p.vis[v].receiver_bytes, p.vis[v].receives, true)));
        ViEnd& e = *ends[v];
        fill_pattern(e.data, p.vis[v].receiver_bytes, receiver_pattern(p, v));
        e.publish(h, disc(v));
        int slot = 0;
        for (const ViMsg& m : p.vis[v].msgs) {
            if (!m.consumes_receive()) continue;
            KVIP_DESCRIPTOR* d = e.desc(static_cast<std::size_t>(slot++));
            d->CS.Control = KVIP_CONTROL_OP_SENDRECV;
            std::uint32_t room = 0;
            for (std::size_t s = 0; s < m.recv.size(); ++s) {
                d->DS[s].Local.Data.Address = e.data + m.recv[s].off;
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
    for (std::size_t v = 0; v < p.vis.size(); ++v)
        if (serve(h, *ends[v], disc(v)) != KVIP_SUCCESS) err("VI " + std::to_string(v) + " did not accept");
    h.barrier("posted");
    // Every receive completes in order with what its send carried.
    std::vector<std::size_t> next(p.vis.size(), 0);  // message index of the next receive
    std::vector<int> slot(p.vis.size(), 0);
    auto skip = [&](std::size_t v) {
        while (next[v] < p.vis[v].msgs.size() && !p.vis[v].msgs[next[v]].consumes_receive()) ++next[v];
    };
    for (std::size_t v = 0; v < p.vis.size(); ++v) skip(v);
    // What each VI's peer sends and writes from.
    std::vector<std::vector<std::uint8_t>> peer;
    for (std::size_t v = 0; v < p.vis.size(); ++v) peer.push_back(pattern(p.vis[v].sender_bytes, sender_pattern(p, v)));
    auto all = [&]() {
        for (std::size_t v = 0; v < p.vis.size(); ++v)
            if (next[v] < p.vis[v].msgs.size()) return false;
        return true;
    };
    const sim::Tick end = h.now() + us(kLimitUs);
    while (!all() && h.now() < end) {
        for (std::size_t v = 0; v < p.vis.size(); ++v) {
            ViEnd& e = *ends[v];
            while (next[v] < p.vis[v].msgs.size()) {
                KVIP_DESCRIPTOR* got = nullptr;
                std::string wrong;
                const auto s = static_cast<std::size_t>(slot[v]);
                const auto* slot_desc = reinterpret_cast<const KVIP_DESCRIPTOR*>(e.desc_area + s * ViEnd::kSlot);
                const KVIP_RETURN rc = next_done(p, e, true, slot_desc, &got, wrong);
                if (rc == KVIP_NOT_DONE) break;
                ++slot[v];
                const std::size_t j = next[v]++;
                const ViMsg& m = p.vis[v].msgs[j];
                skip(v);
                if (!wrong.empty()) {
                    err(where(v, j, m) + ": " + wrong);
                    next[v] = p.vis[v].msgs.size();
                    break;
                }
                const KVIP_ULONG want = KVIP_STATUS_DONE |
                                        (m.op == ViOp::Send ? KVIP_STATUS_OP_RECEIVE : KVIP_STATUS_OP_REMOTE_RDMA_WRITE) |
                                        (m.imm ? KVIP_STATUS_IMMEDIATE : 0);
                if (rc != KVIP_SUCCESS || got->CS.Status != want || got->CS.Length != m.len ||
                    (m.imm && got->CS.ImmediateData != m.imm_data)) {
                    std::ostringstream os;
                    os << where(v, j, m) << ": receive return " << rc << ", status 0x" << std::hex << got->CS.Status
                       << " (want 0x" << want << "), immediate 0x" << got->CS.ImmediateData << std::dec << ", length "
                       << got->CS.Length;
                    err(os.str());
                    continue;
                }
                if (m.op == ViOp::Send) {
                    const auto want_bytes = gather(peer[v].data(), m.local, m.len);
                    const auto got_bytes = gather(e.data, m.recv, m.len);
                    const long long bad = first_mismatch(got_bytes.data(), want_bytes.data(), m.len);
                    if (bad >= 0) err(where(v, j, m) + ": received byte " + std::to_string(bad) + " differs");
                }
            }
        }
    }
    for (std::size_t v = 0; v < p.vis.size(); ++v)
        if (next[v] < p.vis[v].msgs.size()) err(where(v, next[v], p.vis[v].msgs[next[v]]) + ": never received");
    h.barrier("sent");
    // Unreliable writes are done when they leave the sender: let them land.
    h.sleep(us(1000));
    for (std::size_t v = 0; v < p.vis.size(); ++v) {
        for (std::size_t j = 0; j < p.vis[v].msgs.size(); ++j) {
            const ViMsg& m = p.vis[v].msgs[j];
            if (m.op != ViOp::Write) continue;
            const auto want_bytes = gather(peer[v].data(), m.local, m.len);
            const long long bad = first_mismatch(ends[v]->data + m.remote, want_bytes.data(), m.len);
            if (bad >= 0) err(where(v, j, m) + ": written byte " + std::to_string(bad) + " differs");
        }
    }
    rec.num("receiver.end_ps", h.now());
    err.write();
    h.barrier("end");
}

RunResult run_vi_plan(const ViPlan& p, const char* dma = "systemc") {
    Overrides cfg{{"hca.dma.impl", dma}};
    if (p.lossy) cfg.insert(cfg.end(), {{"fault.drop", "0.01"}, {"fault.corrupt", "0.01"}});
    if (const char* level = std::getenv("HCASIM_STRESS_LOG")) cfg.emplace_back("sim.log_level", level);
    return run_pair(
        cfg, [&p](Host& h, Record& rec) { sender(p, h, rec); }, [&p](Host& h, Record& rec) { receiver(p, h, rec); });
}

void run_vi_seeds(std::uint64_t first, int normal, bool lossy, const char* dma = "systemc") {
    for (std::uint64_t seed : stress::seeds(first, normal)) {
        const ViPlan p = make_vi_plan(seed, lossy);
        if (std::getenv("HCASIM_STRESS_DUMP"))
            for (std::size_t v = 0; v < p.vis.size(); ++v)
                for (std::size_t j = 0; j < p.vis[v].msgs.size(); ++j) std::printf("%s\n", where(v, j, p.vis[v].msgs[j]).c_str());
        const RunResult r = run_vi_plan(p, dma);
        if (stress::long_mode())
            std::printf("kvipl stress %s, dma %s: %s, %.0f us simulated\n", p.describe().c_str(), dma,
                        r.ok && r.num("sender.errors") == 0 && r.num("receiver.errors") == 0 ? "ok" : "FAILED",
                        static_cast<double>(r.num("receiver.end_ps")) / 1e6);
        INFO(p.describe() << ", replay with HCASIM_STRESS_SEED=" << seed << ": " << r.error << r.get("sender.first_errors")
                          << r.get("receiver.first_errors"));
        REQUIRE(r.ok);
        CHECK(r.num("sender.errors") == 0);
        CHECK(r.num("receiver.errors") == 0);
    }
}

}  // namespace

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

// Seeds the lossy case failed over 200 seeds. 9525: a 249855 B RDMA read
// asked again whole after each lost answer packet seldom got all its answer
// through and failed with a transport error; a READ is now asked again for
// the part not yet in. 9623: a fenced read waited for ever for a read
// before it whose slot an ACK had given back without waking the requester.
TEST_CASE("kvipl reads over lossy links resume where their answer broke off and wake fenced descriptors",
          "[kvipl][lossy]") {
    for (std::uint64_t seed : {9525u, 9623u}) {
        const ViPlan p = make_vi_plan(seed, true);
        const RunResult r = run_vi_plan(p);
        INFO(p.describe() << ": " << r.error << r.get("sender.first_errors") << r.get("receiver.first_errors"));
        REQUIRE(r.ok);
        CHECK(r.num("sender.errors") == 0);
        CHECK(r.num("receiver.errors") == 0);
    }
}

TEST_CASE("the same random kvipl plan run twice gives identical records", "[kvipl][stress][determinism]") {
    const ViPlan p = make_vi_plan(9001, true);
    const RunResult a = run_vi_plan(p);
    const RunResult b = run_vi_plan(p);
    HCASIM_REQUIRE_RUN(a);
    CHECK(a.kv == b.kv);
    CHECK(a.num("sender.end_ps") > 0);
}

}  // namespace hcasim::test
