#include "testbench/workloads/swarm.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "model/hca/hca_params.hpp"
#include "testbench/system/split_mix.hpp"
#include "testbench/workloads/rc_endpoint.hpp"

namespace hcasim::testbench {

namespace {

// What a worker publishes for each of its QPs: what the peer's QP needs to
// connect to it and to read its buffer.
struct SwarmQpInfo {
    std::uint16_t lid;
    std::uint32_t qpn;
    std::uint64_t addr;
    std::uint32_t rkey;
};

std::string qp_key(int machine, int thread, int vm, int peer) {
    return "swarm.m" + std::to_string(machine) + ".t" + std::to_string(thread) + ".vm" + std::to_string(vm) + ".to" +
           std::to_string(peer);
}

// The bytes worker (machine, thread) keeps in its buffer, which its peers'
// READs must bring back; seed 1 is the default run.
std::uint64_t pattern_seed(int machine, int thread, std::uint64_t seed) {
    return 0x5357524dull * 1000003ull + static_cast<std::uint64_t>(machine) * 4096 + static_cast<std::uint64_t>(thread) +
           (seed - 1) * 0x9e3779b97f4a7c15ull;
}

// One worker's verbs resources. Nothing but the buffer is released by the
// destructor (it may run while an exception unwinds a host thread): close()
// releases the rest.
struct SwarmWorker {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    std::uint8_t* buf = nullptr;
    ibv_mr* mr = nullptr;
    std::vector<ibv_cq*> cqs;  // one per QP, as rc-swarm's
    std::vector<ibv_qp*> qps;
    std::vector<int> peer_machine;  // of each QP

    SwarmWorker() = default;
    ~SwarmWorker() { std::free(buf); }
    SwarmWorker(const SwarmWorker&) = delete;
    SwarmWorker& operator=(const SwarmWorker&) = delete;

    void open() {
        ctx = open_first_device();
        pd = need(ibv_alloc_pd(ctx), "ibv_alloc_pd", "hca.max_pd");
        buf = static_cast<std::uint8_t*>(std::aligned_alloc(4096, kSwarmBufferBytes));
        if (!buf) throw std::runtime_error("out of memory for the buffer");
        mr = need(ibv_reg_mr(pd, buf, kSwarmBufferBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), "ibv_reg_mr",
                  "hca.max_mr");
    }

    void add_qp(int depth, int peer) {
        ibv_cq* cq = need(ibv_create_cq(ctx, depth, nullptr, nullptr, 0),
                          "ibv_create_cq of " + std::to_string(depth) + " entries", "hca.max_cq, hca.max_cqe");
        cqs.push_back(cq);
        ibv_qp_init_attr init{};
        init.send_cq = cq;
        init.recv_cq = cq;
        init.qp_type = IBV_QPT_RC;
        init.cap.max_send_wr = static_cast<std::uint32_t>(depth);
        init.cap.max_recv_wr = 1;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        ibv_qp* qp = need(ibv_create_qp(pd, &init), "ibv_create_qp of " + std::to_string(depth) + " work requests",
                          "hca.max_qp, hca.max_qp_wr");
        qps.push_back(qp);
        peer_machine.push_back(peer);
    }

    // path_mtu and rd_atomic: rc-swarm's 4096 and 16, or less where the port
    // or the device allows less.
    void connect(std::size_t q, const SwarmQpInfo& peer, ibv_mtu path_mtu, std::uint8_t rd_atomic) {
        ibv_qp* qp = qps[q];
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
        check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
              "ibv_modify_qp(INIT)");
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = path_mtu;
        a.dest_qp_num = peer.qpn;
        a.rq_psn = 0;
        a.ah_attr.dlid = peer.lid;
        a.ah_attr.port_num = 1;
        a.max_dest_rd_atomic = rd_atomic;
        a.min_rnr_timer = 1;
        check(ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              "ibv_modify_qp(RTR)");
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 0;
        a.timeout = kRcAckTimeout;
        a.retry_cnt = kRcRetryCount;
        a.rnr_retry = 7;
        a.max_rd_atomic = rd_atomic;
        check(ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_MAX_QP_RD_ATOMIC),
              "ibv_modify_qp(RTS)");
    }

    void close() {
        for (ibv_qp* qp : qps) check(ibv_destroy_qp(qp), "ibv_destroy_qp");
        for (ibv_cq* cq : cqs) check(ibv_destroy_cq(cq), "ibv_destroy_cq");
        qps.clear();
        cqs.clear();
        if (mr) check(ibv_dereg_mr(mr), "ibv_dereg_mr");
        if (pd) check(ibv_dealloc_pd(pd), "ibv_dealloc_pd");
        if (ctx) check(ibv_close_device(ctx), "ibv_close_device");
        mr = nullptr;
        pd = nullptr;
        ctx = nullptr;
    }
};

// Work requests each QP and its CQ hold: rc-swarm's send queue depth, or
// the window where it is deeper.
int queue_depth(const SwarmOptions& opt) { return std::max(32, opt.window); }

}  // namespace

void check_swarm_options(const SwarmOptions& opt, const sim::Config& cfg) {
    const hca::HcaParams p = hca::HcaParams::from(cfg);
    if (opt.machines < 2 || opt.machines > 648)
        throw std::invalid_argument("invalid --machines " + std::to_string(opt.machines) +
                                    ": expected 2 to 648 (the nodes one switch connects)");
    if (opt.threads < 1 || opt.threads > 64)
        throw std::invalid_argument("invalid --threads " + std::to_string(opt.threads) + ": expected 1 to 64");
    if (opt.vms < 1 || opt.vms > 64)
        throw std::invalid_argument("invalid --vms " + std::to_string(opt.vms) + ": expected 1 to 64");
    if (opt.window < 1 || opt.window > 64)
        throw std::invalid_argument("invalid --window " + std::to_string(opt.window) +
                                    ": expected 1 to 64 READs in flight per thread");
    const auto depth = static_cast<std::uint32_t>(queue_depth(opt));
    if (depth > p.max_qp_wr || depth > p.max_cqe)
        throw std::invalid_argument("each swarm QP and its CQ hold " + std::to_string(depth) +
                                    " work requests (rc-swarm's 32, or --window): more than the device's " +
                                    std::to_string(std::min(p.max_qp_wr, p.max_cqe)) + " (hca.max_qp_wr, hca.max_cqe)");
    const std::uint64_t qps = opt.active_qps();
    if (qps > p.max_qp || qps > p.max_cq)
        throw std::invalid_argument("--threads " + std::to_string(opt.threads) + " x (--machines " +
                                    std::to_string(opt.machines) + " - 1) x --vms " + std::to_string(opt.vms) + " = " +
                                    std::to_string(qps) + " QPs (and as many CQs) per machine: more than the device's " +
                                    std::to_string(std::min(p.max_qp, p.max_cq)) + " (hca.max_qp, hca.max_cq)");
    // The READs land in slots at the front of the buffer; the peers read
    // behind them.
    const std::uint64_t slots = static_cast<std::uint64_t>(opt.window) * opt.size;
    if (opt.size < 1 || slots + 2 * (opt.size + 64) > kSwarmBufferBytes)
        throw std::invalid_argument("invalid --sizes " + std::to_string(opt.size) + " with --window " +
                                    std::to_string(opt.window) + ": the window's READ slots and the bytes read must fit a " +
                                    std::to_string(kSwarmBufferBytes / 1024) + " KiB buffer");
    if (!(opt.warmup_us >= 0) || !(opt.duration_us > 0))
        throw std::invalid_argument("the swarm's warm-up must be at least 0 and its duration above 0 us");
}

SwarmResult run_swarm(System& sys, const SwarmOptions& opt) {
    check_swarm_options(opt, sys.config());
    if (sys.nodes() != opt.machines)
        throw std::invalid_argument("the swarm needs " + std::to_string(opt.machines) + " nodes, the system has " +
                                    std::to_string(sys.nodes()));
    const int machines = opt.machines, threads = opt.threads;
    const int depth = queue_depth(opt);
    // READs outstanding per QP: rc-swarm's 16, or the device's limit.
    const auto rd_atomic = static_cast<std::uint8_t>(std::clamp<std::uint32_t>(hca::HcaParams::from(sys.config()).max_qp_rd_atom, 1, 16));
    const std::uint32_t size = opt.size;
    const std::uint64_t slot_bytes = static_cast<std::uint64_t>(opt.window) * size;

    // Every worker's pattern, to check each READ against.
    std::vector<std::vector<std::uint8_t>> patterns(static_cast<std::size_t>(machines * threads));
    for (int m = 0; m < machines; ++m)
        for (int t = 0; t < threads; ++t) {
            auto& p = patterns[static_cast<std::size_t>(m * threads + t)];
            p.resize(kSwarmBufferBytes);
            fill_split_mix(p.data(), p.size(), pattern_seed(m, t, opt.seed));
        }
    std::vector<std::uint64_t> reads(static_cast<std::size_t>(machines), 0), all_reads(reads);
    double wall = 0;

    auto worker = [&](Host& h, int t) {
        const int me = h.index();
        SwarmWorker w;
        w.open();
        std::memcpy(w.buf, patterns[static_cast<std::size_t>(me * threads + t)].data(), kSwarmBufferBytes);
        ibv_port_attr port{};
        check(ibv_query_port(w.ctx, 1, &port), "ibv_query_port");
        const ibv_mtu path_mtu = std::min(IBV_MTU_4096, port.active_mtu);
        // One QP per (emulated machine, other machine), in that order.
        for (int vm = 0; vm < opt.vms; ++vm)
            for (int peer = 0; peer < machines; ++peer) {
                if (peer == me) continue;
                w.add_qp(depth, peer);
                const SwarmQpInfo info{port.lid, w.qps.back()->qp_num, reinterpret_cast<std::uintptr_t>(w.buf),
                                       w.mr->rkey};
                h.put_value(qp_key(me, t, vm, peer), info);
            }
        std::vector<SwarmQpInfo> remote;
        std::size_t q = 0;
        for (int vm = 0; vm < opt.vms; ++vm)
            for (int peer = 0; peer < machines; ++peer) {
                if (peer == me) continue;
                remote.push_back(h.get_value<SwarmQpInfo>(qp_key(peer, t, vm, me)));
                w.connect(q++, remote.back(), path_mtu, rd_atomic);
            }
        h.barrier("swarm.connected");

        const std::size_t nq = w.qps.size();
        SplitMix64 rng{pattern_seed(me, t, opt.seed) ^ 0xa5a5a5a5ull};
        struct Slot {
            std::size_t qp = 0;
            std::uint64_t offset = 0;
            std::uint64_t id = 0;
            bool busy = false;
        };
        std::vector<Slot> slots(static_cast<std::size_t>(opt.window));
        const sim::Tick start = h.now() + sim::ns_to_ps(opt.warmup_us * 1000.0);
        const sim::Tick end = start + sim::ns_to_ps(opt.duration_us * 1000.0);
        const auto wall0 = std::chrono::steady_clock::now();
        // Offsets are 64 B-aligned and behind the peer's own READ slots.
        const std::uint64_t first_line = (slot_bytes + 63) / 64, last_line = (kSwarmBufferBytes - size) / 64;
        std::uint64_t issued = 0, counted = 0;
        int in_flight = 0;
        std::size_t at = 0;  // the oldest slot, reused next
        for (;;) {
            Slot& s = slots[at];
            if (s.busy) {
                // The oldest READ: its QP's CQ returns it first (one QP
                // completes in order, and the slots are reused in order).
                const ibv_wc wc = poll_n(h, w.cqs[s.qp], 1, "RDMA READ").front();
                if (wc.wr_id != s.id)
                    throw std::runtime_error("RDMA READ " + std::to_string(wc.wr_id) + " completed in place of " +
                                             std::to_string(s.id));
                const int peer = w.peer_machine[s.qp];
                const std::uint8_t* want = patterns[static_cast<std::size_t>(peer * threads + t)].data() + s.offset;
                if (std::memcmp(w.buf + at * size, want, size) != 0)
                    throw std::runtime_error("RDMA READ " + std::to_string(s.id) + " from machine " + std::to_string(peer) +
                                             " offset " + std::to_string(s.offset) + " brought the wrong bytes");
                // Cleared, so a READ that wrote nothing would not pass.
                std::memset(w.buf + at * size, 0, size);
                s.busy = false;
                --in_flight;
                const sim::Tick now = h.now();
                if (now >= start && now < end) ++counted;
            }
            if (h.now() >= end) {
                // Stop posting; collect what is still in flight.
                if (in_flight == 0) break;
                at = (at + 1) % slots.size();
                continue;
            }
            s.qp = static_cast<std::size_t>(rng.below(nq));
            s.offset = 64 * rng.range(first_line, last_line);
            s.id = issued++;
            s.busy = true;
            ++in_flight;
            ibv_sge sge{reinterpret_cast<std::uintptr_t>(w.buf + at * size), size, w.mr->lkey};
            ibv_send_wr wr{};
            wr.wr_id = s.id;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_RDMA_READ;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.wr.rdma.remote_addr = remote[s.qp].addr + s.offset;
            wr.wr.rdma.rkey = remote[s.qp].rkey;
            ibv_send_wr* bad = nullptr;
            check(ibv_post_send(w.qps[s.qp], &wr, &bad), "ibv_post_send(RDMA READ)");
            at = (at + 1) % slots.size();
        }
        wall = std::max(wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count());
        reads[static_cast<std::size_t>(me)] += counted;
        all_reads[static_cast<std::size_t>(me)] += issued;
        // Nobody closes before every peer has stopped reading its buffer.
        h.barrier("swarm.done");
        w.close();
    };

    std::vector<System::Program> programs;
    std::vector<std::string> names;
    for (int t = 0; t < threads; ++t)
        for (int m = 0; m < machines; ++m) {
            programs.push_back([&worker, t](Host& h) { worker(h, t); });
            names.push_back("swarm worker " + std::to_string(t));
        }
    sys.run(programs, names);

    SwarmResult r;
    r.wall_seconds = wall;
    double sum = 0;
    for (int m = 0; m < machines; ++m) {
        SwarmMachineRow row;
        row.machine = m;
        row.reads = reads[static_cast<std::size_t>(m)];
        row.all_reads = all_reads[static_cast<std::size_t>(m)];
        row.mops = static_cast<double>(row.reads) / opt.duration_us;
        const std::string node = "node" + std::to_string(m) + ".hca.";
        row.qpc_misses = sys.counter(node + "qpc_cache.misses");
        row.cqc_misses = sys.counter(node + "cqc_cache.misses");
        sum += row.mops;
        r.min_mops = m == 0 ? row.mops : std::min(r.min_mops, row.mops);
        r.max_mops = std::max(r.max_mops, row.mops);
        r.machines.push_back(row);
    }
    r.mean_mops = sum / machines;
    return r;
}

}  // namespace hcasim::testbench
