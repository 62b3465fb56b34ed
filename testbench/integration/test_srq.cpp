// Shared receive queues: many QPs of every type that has a receive queue
// take their receive WQEs from one SRQ. Node 0 sends; node 1's QPs share an
// SRQ whose receive buffers are equal slots of its registered buffer, so any
// message may land in any slot: the checks follow each QP's messages in
// order (a QP delivers in order) and compare every byte of the slot the
// completion names, plus the guard bytes around it.
#include "testbench/integration/harness.hpp"
#include "testbench/integration/stress_seeds.hpp"

namespace hcasim::test {
namespace {

constexpr std::uint32_t kSlotBytes = 8192;
constexpr std::uint32_t kGrhArea = 40;

std::uint64_t msg_seed(std::uint64_t seed, int qp, int j) { return seed * 1000003u + static_cast<std::uint64_t>(qp) * 7919u + j; }

struct SrqPlan {
    std::vector<ibv_qp_type> types;   // one per QP
    int msgs_per_qp = 8;
    std::uint32_t max_size = 4096;
    std::uint64_t seed = 1;
    std::uint32_t srq_wr = 512;       // SRQ size
    int slots = 512;                  // receive buffers (posted again as they complete)
    int initial_posts = 512;          // posted before the sender starts
    bool trickle = false;             // repost a completed slot only after a random pause
    std::uint32_t limit = 0;          // armed SRQ limit (re-armed after each event)
    std::uint32_t qkey = 0x11111111;
    bool lossy = false;               // links drop and corrupt 1 % of packets (RC only)

    // Lossy: a local ACK timeout of 262 us (exponent 6) recovers a lost last
    // packet, and the waits leave room for many of them.
    std::uint8_t ack_timeout() const { return lossy ? 6 : ConnOptions{}.timeout; }
    double wait_us() const { return lossy ? 200000 : 20000; }

    int qps() const { return static_cast<int>(types.size()); }
    // Sizes and SGE counts of QP q's messages (UD: up to the MTU).
    std::vector<std::uint32_t> sizes(int q) const {
        SplitMix64 r{seed * 31 + static_cast<std::uint64_t>(q)};
        std::vector<std::uint32_t> v;
        for (int j = 0; j < msgs_per_qp; ++j) {
            const std::uint32_t cap = types[static_cast<std::size_t>(q)] == IBV_QPT_UD ? std::min(max_size, 4096u) : max_size;
            v.push_back(static_cast<std::uint32_t>(r.range(0, cap)));
        }
        return v;
    }
};

// Node 0: every QP sends its messages, in random chains with random SGE
// splits and signalling, until every signalled one completed.
void srq_sender(Host& h, Record& rec, const SrqPlan& p) {
    SideOptions o;
    o.qps = p.qps();
    o.qp_types = p.types;
    o.max_send_wr = 64;
    o.buffer_bytes = static_cast<std::size_t>(p.qps() * p.msgs_per_qp + 1) * 12288;
    Side s(h, o);
    ConnOptions c;
    c.qkey = p.qkey;
    c.timeout = p.ack_timeout();
    s.connect("srq", 1, c);
    SplitMix64 r{p.seed ^ 0x5eed};
    std::vector<std::vector<std::uint32_t>> sizes;
    for (int q = 0; q < p.qps(); ++q) sizes.push_back(p.sizes(q));
    std::vector<int> next(static_cast<std::size_t>(p.qps()), 0);
    int signalled = 0, left = p.qps() * p.msgs_per_qp;
    std::vector<int> in_flight(static_cast<std::size_t>(p.qps()), 0);
    h.barrier("srq-posted");
    while (left > 0) {
        const int q = static_cast<int>(r.range(0, static_cast<std::uint64_t>(p.qps()) - 1));
        auto& j = next[static_cast<std::size_t>(q)];
        if (j == p.msgs_per_qp) continue;
        const int chain = static_cast<int>(r.range(1, 4));
        for (int k = 0; k < chain && j < p.msgs_per_qp; ++k, ++j, --left) {
            const std::uint32_t size = sizes[static_cast<std::size_t>(q)][static_cast<std::size_t>(j)];
            // Each message has its own source area: unsignalled ones may still be
            // read by the adapter while later ones are being written.
            const std::size_t off = static_cast<std::size_t>(q * p.msgs_per_qp + j) * 12288 + static_cast<std::size_t>(r.range(0, 2047));
            fill_pattern(s.buf + off, size, msg_seed(p.seed, q, j));
            std::vector<ibv_sge> sges;
            const int pieces = size == 0 ? 0 : static_cast<int>(r.range(1, 3));
            std::uint32_t at = 0;
            for (int i = 0; i < pieces; ++i) {
                const std::uint32_t len = i + 1 == pieces ? size - at : static_cast<std::uint32_t>(r.range(0, size - at));
                sges.push_back(s.sge(off + at, len));
                at += len;
            }
            // A QP's send queue must not overflow: every 16th WR is signalled
            // and waited for when the queue gets full.
            const bool sig = j + 1 == p.msgs_per_qp || r.chance(25) || in_flight[static_cast<std::size_t>(q)] >= 32;
            const bool imm = r.chance(30);
            const ibv_wr_opcode op = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
            const unsigned flags = sig ? IBV_SEND_SIGNALED : 0;
            const std::uint64_t wr_id = (static_cast<std::uint64_t>(q) << 32) | static_cast<std::uint32_t>(j);
            ibv_qp* qp = s.qps[static_cast<std::size_t>(q)];
            const int rc = qp->qp_type == IBV_QPT_UD
                               ? s.post_ud(qp, q, op, sges, flags, wr_id, htobe32(static_cast<std::uint32_t>(j)), p.qkey)
                               : s.post_send(qp, op, sges, flags, wr_id, 0, 0, htobe32(static_cast<std::uint32_t>(j)));
            need_rc(rc, "ibv_post_send");
            ++in_flight[static_cast<std::size_t>(q)];
            if (sig) {
                ++signalled;
                // Wait for this one: everything before it on the QP is done.
                for (;;) {
                    auto w = s.poll_ok(s.send_cq, 1, "send completion", p.wait_us());
                    const int wq = static_cast<int>(w[0].wr_id >> 32);
                    in_flight[static_cast<std::size_t>(wq)] = 0;
                    --signalled;
                    if (wq == q) break;
                }
            }
        }
    }
    if (signalled) s.poll_ok(s.send_cq, signalled, "last send completions", p.wait_us());
    rec.num("sender.done", 1);
    h.barrier("srq-done");
    s.close();
}

// Node 1: one SRQ under every QP; checks each receive completion against
// the next message of its QP.
void srq_receiver(Host& h, Record& rec, const SrqPlan& p) {
    SideOptions o;
    o.qps = p.qps();
    o.qp_types = p.types;
    o.srq = true;
    o.srq_max_wr = p.srq_wr;
    o.max_sge = 2;
    o.cq_depth = 4096;
    o.buffer_bytes = static_cast<std::size_t>(p.slots) * kSlotBytes + 4096;
    Side s(h, o);
    ConnOptions c;
    c.qkey = p.qkey;
    c.timeout = p.ack_timeout();
    s.connect("srq", 0, c);
    std::map<int, int> qp_index;
    for (int q = 0; q < p.qps(); ++q) qp_index[static_cast<int>(s.qps[static_cast<std::size_t>(q)]->qp_num)] = q;
    std::vector<std::vector<std::uint32_t>> sizes;
    for (int q = 0; q < p.qps(); ++q) sizes.push_back(p.sizes(q));
    SplitMix64 r{p.seed ^ 0xabcdef};
    // A slot: [guard | data area | guard], received into through 1 or 2 SGEs.
    auto post_slot = [&](int k) {
        std::uint8_t* base = s.buf + static_cast<std::size_t>(k) * kSlotBytes;
        std::memset(base, kGuardByte, kSlotBytes);
        const std::uint32_t area = kSlotBytes - 2 * kGuardBytes;
        const std::size_t off = static_cast<std::size_t>(k) * kSlotBytes + kGuardBytes;
        std::vector<ibv_sge> sges;
        if (r.chance(50)) {
            const std::uint32_t first = static_cast<std::uint32_t>(r.range(0, area));
            sges = {s.sge(off, first), s.sge(off + first, area - first)};
        } else {
            sges = {s.sge(off, area)};
        }
        need_rc(s.post_recv(nullptr, sges, static_cast<std::uint64_t>(k)), "ibv_post_srq_recv");
    };
    auto arm = [&]() {
        if (!p.limit) return;
        ibv_srq_attr a{};
        a.srq_limit = p.limit;
        need_rc(ibv_modify_srq(s.srq, &a, IBV_SRQ_LIMIT), "ibv_modify_srq(limit)");
    };
    int posted = 0;
    for (; posted < std::min(p.initial_posts, p.slots); ++posted) post_slot(posted);
    std::deque<int> free_slots;
    for (int k = posted; k < p.slots; ++k) free_slots.push_back(k);
    arm();
    h.barrier("srq-posted");
    std::vector<int> next(static_cast<std::size_t>(p.qps()), 0);
    int left = p.qps() * p.msgs_per_qp, bad = 0, limit_events = 0;
    const sim::Tick deadline = h.now() + us(10 * p.wait_us());
    std::deque<std::pair<sim::Tick, int>> delayed;  // slots to post again later (trickle)
    while (left > 0 && bad == 0) {
        if (h.now() > deadline) throw std::runtime_error(std::to_string(left) + " messages never arrived");
        ibv_wc wc[16];
        const int n = ibv_poll_cq(s.recv_cq, 16, wc);
        for (int i = 0; i < n; ++i) {
            const ibv_wc& w = wc[i];
            auto it = qp_index.find(static_cast<int>(w.qp_num));
            if (w.status != IBV_WC_SUCCESS || it == qp_index.end() || w.wr_id >= static_cast<std::uint64_t>(p.slots)) {
                rec.set("bad", std::string("completion ") + ibv_wc_status_str(w.status) + " qp_num " +
                                   std::to_string(w.qp_num) + " wr_id " + std::to_string(w.wr_id));
                ++bad;
                break;
            }
            const int q = it->second;
            const int j = next[static_cast<std::size_t>(q)]++;
            if (j == p.msgs_per_qp) {
                rec.set("bad", "QP " + std::to_string(q) + " received more than its " + std::to_string(p.msgs_per_qp) +
                                   " messages");
                ++bad;
                break;
            }
            const bool ud = p.types[static_cast<std::size_t>(q)] == IBV_QPT_UD;
            const std::uint32_t size = sizes[static_cast<std::size_t>(q)][static_cast<std::size_t>(j)];
            const int k = static_cast<int>(w.wr_id);
            const std::uint8_t* base = s.buf + static_cast<std::size_t>(k) * kSlotBytes;
            const std::uint8_t* data = base + kGuardBytes + (ud ? kGrhArea : 0);
            const auto want = pattern(size, msg_seed(p.seed, q, j));
            bool ok = w.byte_len == size + (ud ? kGrhArea : 0) && w.opcode == IBV_WC_RECV &&
                      first_mismatch(data, want.data(), size) < 0;
            if ((w.wc_flags & IBV_WC_WITH_IMM) && be32toh(w.imm_data) != static_cast<std::uint32_t>(j)) ok = false;
            for (std::size_t g = 0; g < kGuardBytes; ++g)
                if (base[g] != kGuardByte || base[kSlotBytes - 1 - g] != kGuardByte) ok = false;
            if (!ok) {
                rec.set("bad", "QP " + std::to_string(q) + " message " + std::to_string(j) + " of " +
                                   std::to_string(size) + " B in slot " + std::to_string(k) + ": byte_len " +
                                   std::to_string(w.byte_len) + ", data or guard bytes differ");
                ++bad;
                break;
            }
            --left;
            if (p.trickle)
                delayed.emplace_back(h.now() + static_cast<sim::Tick>(r.range(0, 20000)) * sim::kPsPerNs, k);
            else
                free_slots.push_back(k);
        }
        while (!delayed.empty() && delayed.front().first <= h.now()) {
            free_slots.push_back(delayed.front().second);
            delayed.pop_front();
        }
        while (!free_slots.empty()) {
            post_slot(free_slots.front());
            free_slots.pop_front();
        }
        if (p.limit) {
            // The limit event is reported without blocking when one came.
            ibv_srq_attr a{};
            need_rc(ibv_query_srq(s.srq, &a), "ibv_query_srq");
            if (a.srq_limit == 0) {
                ++limit_events;
                arm();
            }
        }
        if (n == 0) h.sleep(500 * sim::kPsPerNs);
    }
    rec.num("receiver.left", left);
    rec.num("receiver.bad", bad);
    rec.num("receiver.limit_rearms", limit_events);
    rec.num("receiver.link_losses", link_losses(h));
    for (int q = 0; q < p.qps(); ++q) rec.num("receiver.qp" + std::to_string(q), next[static_cast<std::size_t>(q)]);
    h.barrier("srq-done");
    s.close();
}

RunResult run_srq(const SrqPlan& p, const Overrides& ov = {}) {
    return run_pair(ov, [p](Host& h, Record& r) { srq_sender(h, r, p); },
                    [p](Host& h, Record& r) { srq_receiver(h, r, p); });
}

void check_srq(const RunResult& res, const SrqPlan& p) {
    INFO("seed " << p.seed << ": " << res.error << " " << res.get("bad"));
    REQUIRE(res.ok);
    CHECK(res.num("receiver.bad") == 0);
    CHECK(res.num("receiver.left") == 0);
    for (int q = 0; q < p.qps(); ++q) CHECK(res.num("receiver.qp" + std::to_string(q)) == p.msgs_per_qp);
}

}  // namespace

TEST_CASE("one SRQ shared by 16 RC QPs receives every message of every QP", "[srq]") {
    SrqPlan p;
    p.types.assign(16, IBV_QPT_RC);
    p.msgs_per_qp = 12;
    p.max_size = 6000;
    p.seed = 7;
    check_srq(run_srq(p), p);
}

TEST_CASE("RC, UC and UD QPs share one SRQ", "[srq]") {
    SrqPlan p;
    for (int i = 0; i < 12; ++i) p.types.push_back(i % 3 == 0 ? IBV_QPT_RC : i % 3 == 1 ? IBV_QPT_UC : IBV_QPT_UD);
    p.msgs_per_qp = 10;
    p.seed = 11;
    check_srq(run_srq(p), p);
}

TEST_CASE("RC QPs on a starved SRQ wait with RNR NAKs and lose nothing", "[srq]") {
    SrqPlan p;
    p.types.assign(8, IBV_QPT_RC);
    p.msgs_per_qp = 16;
    p.srq_wr = 8;
    p.slots = 8;
    p.initial_posts = 4;
    p.trickle = true;
    p.seed = 3;
    check_srq(run_srq(p), p);
}

TEST_CASE("the SRQ limit event fires each time the SRQ runs low and is armed again", "[srq]") {
    SrqPlan p;
    p.types.assign(4, IBV_QPT_RC);
    p.msgs_per_qp = 24;
    p.srq_wr = 32;
    p.slots = 32;
    p.initial_posts = 32;
    p.trickle = true;
    p.limit = 8;
    p.seed = 5;
    const auto res = run_srq(p);
    check_srq(res, p);
    CHECK(res.num("receiver.limit_rearms") >= 1);
}

namespace {

// Random SRQ traffic over seeds (chosen as in every stress test,
// stress_seeds.hpp) through the DMA engine dma names. A seed draws the shape;
// its traffic is drawn from the plan seed, as far on from first_plan_seed as
// the seed is from first_seed; odd steps mix RC, UC and UD. Over lossy links
// every QP is RC: the others would lose messages.
void srq_stress(const char* dma, int default_seeds, std::uint64_t first_seed, std::uint64_t first_plan_seed,
                bool lossy = false) {
    for (const std::uint64_t seed : stress::seeds(first_seed, default_seeds)) {
        const std::uint64_t step = seed - first_seed;
        SplitMix64 r{seed};
        SrqPlan p;
        p.seed = first_plan_seed + step;
        p.lossy = lossy;
        const int qps = static_cast<int>(r.range(2, 24));
        const bool mixed = !lossy && step % 2 == 1;
        for (int q = 0; q < qps; ++q)
            p.types.push_back(!mixed ? IBV_QPT_RC : q % 3 == 0 ? IBV_QPT_RC : q % 3 == 1 ? IBV_QPT_UC : IBV_QPT_UD);
        // Lossy plans carry more, so that most seeds lose some packets.
        p.msgs_per_qp = static_cast<int>(lossy ? r.range(8, 40) : r.range(1, 12));
        p.max_size = static_cast<std::uint32_t>(r.range(1, 8000));
        if (!mixed) {
            // RC alone may starve: RNR NAKs and retries bring the messages through.
            p.srq_wr = static_cast<std::uint32_t>(r.range(4, 64));
            p.slots = static_cast<int>(p.srq_wr);
            p.initial_posts = static_cast<int>(r.range(1, p.srq_wr));
            p.trickle = true;
            p.limit = static_cast<std::uint32_t>(r.range(0, p.srq_wr / 2));
        } else {
            // UC and UD drop what finds no WQE: every receive is there first.
            p.srq_wr = static_cast<std::uint32_t>(qps * p.msgs_per_qp);
            p.slots = static_cast<int>(p.srq_wr);
            p.initial_posts = p.slots;
        }
        INFO(dma << " dma engine, plan seed " << p.seed << ", replay with HCASIM_STRESS_SEED=" << seed);
        Overrides ov{{"hca.dma.impl", dma}};
        if (lossy) add_lossy_links(ov);
        const RunResult res = run_srq(p, ov);
        if (stress::long_mode())
            std::printf("srq stress, seed %llu: %d QPs%s%s\n", static_cast<unsigned long long>(seed), qps,
                        mixed ? " (RC, UC, UD)" : "",
                        lossy ? (", " + res.get("receiver.link_losses") + " packets lost or corrupted").c_str() : "");
        check_srq(res, p);
    }
}

}  // namespace

TEST_CASE("random SRQ traffic over many QPs and seeds loses and corrupts nothing", "[srq][stress]") {
    srq_stress("systemc", 6, 0x5a5a0000u, 100);
}

TEST_CASE("random SRQ traffic through the rtl dma engine loses and corrupts nothing", "[srq][stress][rtl]") {
    srq_stress("rtl", 3, 0x5a5b0000u, 200);
}

// Resent SENDs must take no second receive WQE from the SRQ, and a message
// cut short by a loss must finish in the WQE it started in, among RNR NAKs
// when the SRQ runs dry.
TEST_CASE("random SRQ traffic over links that drop and corrupt 1% of packets loses and corrupts nothing",
          "[srq][stress][lossy]") {
    srq_stress("systemc", 4, 0x5a5c0000u, 300, true);
}

TEST_CASE("SRQ verbs refuse bad attributes and work requests with the documented errors", "[srq]") {
    const auto res = run_programs({}, {[](Host& h, Record& rec) {
        SideOptions o;
        o.qps = 0;
        Side s(h, o);
        ibv_device_attr dev{};
        need_rc(ibv_query_device(s.ctx, &dev), "ibv_query_device");
        rec.num("max_srq", dev.max_srq);
        rec.num("max_srq_wr", dev.max_srq_wr);
        rec.num("max_srq_sge", dev.max_srq_sge);
        rec.num("resize_cap", (dev.device_cap_flags & IBV_DEVICE_SRQ_RESIZE) != 0);
        auto create = [&](std::uint32_t wr, std::uint32_t sge, std::uint32_t limit) {
            ibv_srq_init_attr a{};
            a.attr.max_wr = wr;
            a.attr.max_sge = sge;
            a.attr.srq_limit = limit;
            errno = 0;
            ibv_srq* q = ibv_create_srq(s.pd, &a);
            if (q) ibv_destroy_srq(q);
            return q ? 0 : errno;
        };
        rec.num("create.zero_wr", create(0, 1, 0));
        rec.num("create.too_many_wr", create(static_cast<std::uint32_t>(dev.max_srq_wr) + 1, 1, 0));
        rec.num("create.too_many_sge", create(16, static_cast<std::uint32_t>(dev.max_srq_sge) + 1, 0));
        rec.num("create.limit_above_wr", create(16, 1, 17));
        rec.num("create.ok", create(16, 1, 4));

        ibv_srq_init_attr a{};
        a.attr.max_wr = 4;
        a.attr.max_sge = 1;
        ibv_srq* srq = ibv_create_srq(s.pd, &a);
        need(srq != nullptr, "ibv_create_srq");
        rec.num("granted.max_wr", a.attr.max_wr);
        rec.num("granted.max_sge", a.attr.max_sge);
        ibv_srq_attr m{};
        m.srq_limit = a.attr.max_wr + 1;
        rec.num("modify.limit_above_wr", ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT));
        m.max_wr = 0;
        rec.num("modify.zero_wr", ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR));
        // Too many SGEs: refused, nothing posted, bad_wr names it.
        ibv_sge sg[3] = {s.sge(0, 8), s.sge(8, 8), s.sge(16, 8)};
        ibv_recv_wr w1{}, w2{};
        w1.wr_id = 1;
        w1.sg_list = sg;
        w1.num_sge = 1;
        w1.next = &w2;
        w2.wr_id = 2;
        w2.sg_list = sg;
        w2.num_sge = 3;
        ibv_recv_wr* bad = nullptr;
        rec.num("post.too_many_sge", ibv_post_srq_recv(srq, &w1, &bad));
        rec.num("post.bad_wr_is_second", bad == &w2);
        // Full: max_wr posted (one already), then ENOMEM.
        int full = 0;
        for (std::uint32_t i = 1; i <= a.attr.max_wr; ++i) {
            ibv_recv_wr w{};
            w.wr_id = 10 + i;
            w.sg_list = sg;
            w.num_sge = 1;
            full = ibv_post_srq_recv(srq, &w, &bad);
            if (full) break;
        }
        rec.num("post.full", full);
        // A QP on the SRQ has no receive queue of its own.
        ibv_qp_init_attr qi{};
        qi.send_cq = s.send_cq;
        qi.recv_cq = s.recv_cq;
        qi.srq = srq;
        qi.qp_type = IBV_QPT_RC;
        qi.cap.max_send_wr = 4;
        qi.cap.max_send_sge = 1;
        qi.cap.max_recv_wr = 16;
        ibv_qp* qp = ibv_create_qp(s.pd, &qi);
        need(qp != nullptr, "ibv_create_qp(srq)");
        rec.num("qp.srq_set", qp->srq == srq);
        rec.num("qp.max_recv_wr", qi.cap.max_recv_wr);
        need_rc(qp_to_init(qp, IBV_ACCESS_LOCAL_WRITE), "INIT");
        ibv_recv_wr w{};
        w.sg_list = sg;
        w.num_sge = 1;
        rec.num("qp.post_recv", ibv_post_recv(qp, &w, &bad));
        rec.num("destroy.in_use", ibv_destroy_srq(srq));
        // An SRQ of another protection domain cannot serve the QP.
        ibv_pd* other = ibv_alloc_pd(s.ctx);
        errno = 0;
        ibv_qp* q2 = ibv_create_qp(other, &qi);
        rec.num("qp.other_pd", q2 ? 0 : errno);
        need_rc(ibv_destroy_qp(qp), "ibv_destroy_qp");
        rec.num("destroy.after_qp", ibv_destroy_srq(srq));
        need_rc(ibv_dealloc_pd(other), "ibv_dealloc_pd");
        s.close();
    }}, 1);
    INFO(res.error);
    REQUIRE(res.ok);
    CHECK(res.num("max_srq") > 0);
    CHECK(res.num("max_srq_wr") > 0);
    CHECK(res.num("max_srq_sge") > 0);
    CHECK(res.num("resize_cap") == 1);
    CHECK(res.num("create.zero_wr") == EINVAL);
    CHECK(res.num("create.too_many_wr") == EINVAL);
    CHECK(res.num("create.too_many_sge") == EINVAL);
    CHECK(res.num("create.limit_above_wr") == EINVAL);
    CHECK(res.num("create.ok") == 0);
    CHECK(res.num("granted.max_wr") >= 4);
    CHECK(res.num("granted.max_sge") >= 1);
    CHECK(res.num("modify.limit_above_wr") == EINVAL);
    CHECK(res.num("modify.zero_wr") == EINVAL);
    CHECK(res.num("post.too_many_sge") == EINVAL);
    CHECK(res.num("post.bad_wr_is_second") == 1);
    CHECK(res.num("post.full") == ENOMEM);
    CHECK(res.num("qp.srq_set") == 1);
    CHECK(res.num("qp.max_recv_wr") == 0);
    CHECK(res.num("qp.post_recv") == EINVAL);
    CHECK(res.num("destroy.in_use") == EBUSY);
    CHECK(res.num("qp.other_pd") == EINVAL);
    CHECK(res.num("destroy.after_qp") == 0);
}

TEST_CASE("growing an SRQ keeps the WQEs already posted and adds room", "[srq]") {
    // Node 1 posts 3 receives on a 3-WQE SRQ, grows it to 40 and posts 37
    // more; node 0's 40 SENDs must land in the 40 receives in posting order.
    const auto res = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            Side s(h, o);
            s.connect("grow", 1);
            h.barrier("grown");
            for (int j = 0; j < 40; ++j) {
                fill_pattern(s.buf + static_cast<std::size_t>(j) * 256, 200, 900 + static_cast<std::uint64_t>(j));
                need_rc(s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(static_cast<std::size_t>(j) * 256, 200)},
                                    j % 8 == 7 ? IBV_SEND_SIGNALED : 0, static_cast<std::uint64_t>(j)),
                        "ibv_post_send");
                if (j % 8 == 7) s.poll_ok(s.send_cq, 1, "send");
            }
            rec.num("sent", 40);
            h.barrier("end");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.srq = true;
            o.srq_max_wr = 3;
            Side s(h, o);
            ibv_srq_attr q{};
            need_rc(ibv_query_srq(s.srq, &q), "ibv_query_srq");
            rec.num("before.max_wr", q.max_wr);
            s.connect("grow", 0);
            int posted = 0;
            for (; posted < static_cast<int>(q.max_wr); ++posted)
                need_rc(s.post_recv(nullptr, {s.sge(static_cast<std::size_t>(posted) * 256, 256)}, static_cast<std::uint64_t>(posted)),
                        "ibv_post_srq_recv");
            ibv_srq_attr grow{};
            grow.max_wr = 40;
            rec.num("resize", ibv_modify_srq(s.srq, &grow, IBV_SRQ_MAX_WR));
            need_rc(ibv_query_srq(s.srq, &q), "ibv_query_srq");
            rec.num("after.max_wr", q.max_wr);
            for (; posted < 40; ++posted)
                need_rc(s.post_recv(nullptr, {s.sge(static_cast<std::size_t>(posted) * 256, 256)}, static_cast<std::uint64_t>(posted)),
                        "ibv_post_srq_recv");
            h.barrier("grown");
            const auto wcs = s.poll_ok(s.recv_cq, 40, "receives");
            int in_order = 0, data_ok = 0;
            for (int j = 0; j < 40; ++j) {
                in_order += wcs[static_cast<std::size_t>(j)].wr_id == static_cast<std::uint64_t>(j);
                const auto want = pattern(200, 900 + static_cast<std::uint64_t>(j));
                data_ok += first_mismatch(s.buf + static_cast<std::size_t>(j) * 256, want.data(), 200) < 0;
            }
            rec.num("in_order", in_order);
            rec.num("data_ok", data_ok);
            h.barrier("end");
            s.close();
        });
    INFO(res.error);
    REQUIRE(res.ok);
    CHECK(res.num("before.max_wr") == 3);
    CHECK(res.num("resize") == 0);
    CHECK(res.num("after.max_wr") >= 40);
    CHECK(res.num("in_order") == 40);
    CHECK(res.num("data_ok") == 40);
}

TEST_CASE("a QP on an SRQ that fails reports Last WQE Reached and leaves the SRQ to the others", "[srq]") {
    const auto res = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o;
            o.qps = 2;
            Side s(h, o);
            s.connect("lastwqe", 1);
            h.barrier("failed");
            for (int j = 0; j < 4; ++j) {
                fill_pattern(s.buf + static_cast<std::size_t>(j) * 512, 300, 70 + static_cast<std::uint64_t>(j));
                need_rc(s.post_send(s.qps[1], IBV_WR_SEND, {s.sge(static_cast<std::size_t>(j) * 512, 300)}, IBV_SEND_SIGNALED,
                                    static_cast<std::uint64_t>(j)),
                        "ibv_post_send");
            }
            s.poll_ok(s.send_cq, 4, "sends on the QP that lives");
            rec.num("sent", 4);
            h.barrier("end");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o;
            o.qps = 2;
            o.srq = true;
            o.srq_max_wr = 16;
            Side s(h, o);
            s.connect("lastwqe", 0);
            for (int k = 0; k < 8; ++k)
                need_rc(s.post_recv(nullptr, {s.sge(static_cast<std::size_t>(k) * 512, 512)}, static_cast<std::uint64_t>(k)),
                        "ibv_post_srq_recv");
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_ERR;
            need_rc(ibv_modify_qp(s.qps[0], &a, IBV_QP_STATE), "ibv_modify_qp(ERR)");
            ibv_async_event e{};
            need_rc(ibv_get_async_event(s.ctx, &e), "ibv_get_async_event");
            rec.num("event.type", e.event_type);
            rec.num("event.qp", e.element.qp == s.qps[0]);
            ibv_ack_async_event(&e);
            h.barrier("failed");
            const auto wcs = s.poll_ok(s.recv_cq, 4, "receives on the QP that lives");
            int ok = 0;
            for (int j = 0; j < 4; ++j) {
                const ibv_wc& w = wcs[static_cast<std::size_t>(j)];
                const auto want = pattern(300, 70 + static_cast<std::uint64_t>(j));
                ok += w.qp_num == s.qps[1]->qp_num && w.wr_id == static_cast<std::uint64_t>(j) &&
                      first_mismatch(s.buf + w.wr_id * 512, want.data(), 300) < 0;
            }
            rec.num("ok", ok);
            h.barrier("end");
            s.close();
        });
    INFO(res.error);
    REQUIRE(res.ok);
    CHECK(res.num("event.type") == IBV_EVENT_QP_LAST_WQE_REACHED);
    CHECK(res.num("event.qp") == 1);
    CHECK(res.num("ok") == 4);
}

}  // namespace hcasim::test
