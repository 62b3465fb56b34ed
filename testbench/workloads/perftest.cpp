#include "testbench/workloads/perftest.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

#include "testbench/workloads/rc_endpoint.hpp"

namespace hcasim::testbench {

Op parse_op(const std::string& s) {
    if (s == "send") return Op::Send;
    if (s == "write") return Op::Write;
    if (s == "read") return Op::Read;
    throw std::invalid_argument("unknown --op '" + s + "': expected send, write or read");
}

const char* op_name(Op op) {
    switch (op) {
    case Op::Send: return "send";
    case Op::Write: return "write";
    case Op::Read: return "read";
    }
    return "?";
}

std::vector<std::uint32_t> parse_sizes(const std::string& spec) {
    std::vector<std::uint32_t> out;
    auto number = [&](const std::string& t) {
        std::size_t pos = 0;
        unsigned long long v = 0;
        try {
            v = std::stoull(t, &pos, 0);
        } catch (...) {
            pos = 0;
        }
        if (pos != t.size() || v < 1 || v > (1ull << 31))
            throw std::invalid_argument("invalid size '" + t + "' in --sizes: expected 1 to 2147483648 bytes");
        return static_cast<std::uint32_t>(v);
    };
    const auto colon = spec.find(':');
    if (colon != std::string::npos) {
        const std::uint32_t lo = number(spec.substr(0, colon));
        const std::uint32_t hi = number(spec.substr(colon + 1));
        if (lo > hi) throw std::invalid_argument("invalid --sizes '" + spec + "': the first size exceeds the last");
        for (std::uint64_t s = lo; s <= hi; s *= 2) out.push_back(static_cast<std::uint32_t>(s));
        return out;
    }
    std::stringstream ss(spec);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(number(item));
    if (out.empty()) throw std::invalid_argument("empty --sizes");
    return out;
}

namespace {

ibv_mtu mtu_enum(int bytes) {
    switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: throw std::invalid_argument("invalid MTU " + std::to_string(bytes) + ": expected 256 to 4096, a power of two");
    }
}

// Drains whatever send completions are there (lat workloads).
void reap(ibv_cq* cq, int& outstanding) {
    ibv_wc wc[16];
    const int n = ibv_poll_cq(cq, 16, wc);
    for (int i = 0; i < n; ++i)
        if (wc[i].status != IBV_WC_SUCCESS)
            throw std::runtime_error(std::string("send completion: ") + ibv_wc_status_str(wc[i].status));
    outstanding -= n;
}

void post_one(ibv_qp* qp, ibv_wr_opcode op, std::uint8_t* local, std::uint32_t lkey, std::uint32_t size,
              std::uint64_t raddr, std::uint32_t rkey, unsigned flags, std::uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(local), size, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    check(ibv_post_send(qp, &wr, &bad), "ibv_post_send");
}

void post_recv(ibv_qp* qp, std::uint8_t* buf, std::uint32_t lkey, std::uint32_t size, std::uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), size, lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    check(ibv_post_recv(qp, &wr, &bad), "ibv_post_recv");
}

}  // namespace

// Polls a byte the peer writes by RDMA, as perftest's write_lat does: one
// read per poll_memory cost. Only an adapter write to host memory can change
// the byte, so the thread sleeps until one and resumes on its polling grid,
// which gives the time a poll-by-poll loop would. Gives up after 100 ms of
// simulated time, which no healthy run comes near.
void spin_until(Host& h, const volatile std::uint8_t* p, std::uint8_t value) {
    const sim::Tick cost = std::max<sim::Tick>(1, h.node().driver().costs().poll_memory);
    const sim::Tick t0 = h.now();
    const sim::Tick deadline = t0 + 100000 * sim::kPsPerUs;
    const sc_core::sc_event& written = h.node().pcie().memory().written();
    sc_core::wait(sim::to_sc(cost));
    while (*p != value) {
        if (h.now() > deadline) throw std::runtime_error("no RDMA WRITE data arrived within 100 ms of simulated time");
        sc_core::wait(sim::to_sc(deadline - h.now() + cost), written);
        const sim::Tick w = h.now();
        const sim::Tick grid = t0 + (w - t0 + cost - 1) / cost * cost;
        if (grid > w) sc_core::wait(sim::to_sc(grid - w));
    }
}

// Payload bytes are a pseudo-random pattern of (sim.seed, node): a run is a
// function of its seed.
void fill_pattern(Host& h, std::uint8_t* p, std::size_t n) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(h.system().config().get_int("sim.seed")) * 1000003u +
                        static_cast<std::uint64_t>(h.index()));
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(rng() >> 56);
}

BandwidthRow bandwidth_row(std::uint32_t size, int iterations, sim::Tick t0, sim::Tick t1,
                           std::vector<sim::Tick> message_done, int tx_depth, double wall_seconds) {
    BandwidthRow r;
    r.wall_seconds = wall_seconds;
    r.bytes = size;
    r.iterations = static_cast<std::uint64_t>(iterations);
    const double secs = static_cast<double>(t1 - t0) / 1e12;
    r.bw_avg_MBps = static_cast<double>(size) * iterations / secs / kPerftestMB;
    r.msg_rate_Mpps = iterations / secs / 1e6;
    // Peak: the best rate over any window of half the run (at least tx_depth
    // messages).
    std::sort(message_done.begin(), message_done.end());
    const std::size_t window = static_cast<std::size_t>(std::max(tx_depth, iterations / 2));
    double peak = r.bw_avg_MBps;
    for (std::size_t hi = window; hi < message_done.size(); ++hi) {
        const sim::Tick dt = message_done[hi] - message_done[hi - window];
        if (dt > 0)
            peak = std::max(peak, static_cast<double>(size) * static_cast<double>(window) /
                                      (static_cast<double>(dt) / 1e12) / kPerftestMB);
    }
    r.bw_peak_MBps = peak;
    return r;
}

std::vector<LatencyRow> run_latency(System& sys, const LatencyOptions& opt) {
    const std::uint32_t max_size = *std::max_element(opt.sizes.begin(), opt.sizes.end());
    std::vector<LatencyRow> rows;
    EndpointOptions eo;
    eo.buffer_bytes = 2 * static_cast<std::size_t>(max_size) + 4096;
    eo.max_inline = opt.inline_max;
    eo.mtu = mtu_enum(opt.mtu);
    eo.max_send_wr = 128;
    eo.max_recv_wr = 128;
    const int rx_depth = 64;

    auto program = [&](Host& h) {
        const bool client = h.index() == 0;
        RcEndpoint ep(h, eo);
        // Only the outgoing half: the incoming half starts at zero, below
        // every tag the peer writes.
        fill_pattern(h, ep.buf, max_size);
        ep.connect("lat", 1 - h.index());
        ibv_qp* qp = ep.qps[0];
        std::uint8_t* out = ep.buf;                   // what we send
        std::uint8_t* in = ep.buf + max_size + 2048;  // where the peer writes or we receive
        const std::uint64_t peer_in = ep.remote_addr + max_size + 2048;
        // Receives are sized for the largest message, so they serve every size.
        if (opt.op == Op::Send)
            for (int i = 0; i < rx_depth; ++i) post_recv(qp, in, ep.mr->lkey, max_size, 0);
        for (std::uint32_t size : opt.sizes) {
            h.barrier("size" + std::to_string(size));
            std::vector<sim::Tick> samples;
            samples.reserve(static_cast<std::size_t>(opt.iterations));
            int outstanding = 0;
            const unsigned inl = size <= opt.inline_max ? IBV_SEND_INLINE : 0;
            for (int it = 0; it < opt.iterations; ++it) {
                const std::uint8_t tag = static_cast<std::uint8_t>(it % 255 + 1);
                // The client marks its buffer before it posts; the server only
                // after the ping arrived, when its previous write has been read.
                if (client) out[size - 1] = tag;
                if (opt.op == Op::Read) {
                    if (!client) break;
                    const sim::Tick t0 = h.now();
                    post_one(qp, IBV_WR_RDMA_READ, in, ep.mr->lkey, size, ep.remote_addr, ep.remote_rkey,
                             IBV_SEND_SIGNALED, static_cast<std::uint64_t>(it));
                    poll_n(ep.send_cq, 1, "RDMA READ");
                    samples.push_back(h.now() - t0);
                    continue;
                }
                const sim::Tick t0 = h.now();
                if (!client) {
                    // The server answers each ping.
                    if (opt.op == Op::Write) {
                        spin_until(h, in + size - 1, tag);
                    } else {
                        poll_n(ep.recv_cq, 1, "receive");
                        post_recv(qp, in, ep.mr->lkey, max_size, 0);
                    }
                }
                out[size - 1] = tag;
                // Signal every 16th post so the send queue drains.
                const unsigned sig = (it % 16 == 15) ? IBV_SEND_SIGNALED : 0;
                if (sig) ++outstanding;
                post_one(qp, opt.op == Op::Write ? IBV_WR_RDMA_WRITE : IBV_WR_SEND, out, ep.mr->lkey, size, peer_in,
                         ep.remote_rkey, sig | inl, static_cast<std::uint64_t>(it));
                if (client) {
                    if (opt.op == Op::Write) {
                        spin_until(h, in + size - 1, tag);
                    } else {
                        poll_n(ep.recv_cq, 1, "receive");
                        post_recv(qp, in, ep.mr->lkey, max_size, 0);
                    }
                    // Ping-pong: half the round trip is the one-way latency.
                    samples.push_back((h.now() - t0) / 2);
                }
                if (outstanding) reap(ep.send_cq, outstanding);
            }
            while (outstanding > 0) reap(ep.send_cq, outstanding);
            h.barrier("done" + std::to_string(size));
            if (client) rows.push_back(latency_stats(size, std::move(samples)));
        }
    };
    sys.run({program, program});
    return rows;
}

std::vector<BandwidthRow> run_bandwidth(System& sys, const BandwidthOptions& opt) {
    const std::uint32_t max_size = *std::max_element(opt.sizes.begin(), opt.sizes.end());
    std::vector<BandwidthRow> rows;
    EndpointOptions eo;
    // Each QP streams from and into its own slice of the buffer.
    eo.buffer_bytes = static_cast<std::size_t>(max_size) * 2 + 4096;
    eo.qps = opt.qps;
    eo.max_inline = opt.inline_max;
    eo.mtu = mtu_enum(opt.mtu);
    eo.max_send_wr = static_cast<std::uint32_t>(opt.tx_depth);
    eo.max_recv_wr = static_cast<std::uint32_t>(opt.tx_depth) * 2;
    eo.cq_depth = std::max(1024, opt.qps * opt.tx_depth * 2 + 16);
    eo.max_sge = 1;

    // A signaled completion at least every tx_depth posts, or the sender
    // would wait for one that never comes (perftest's rule too).
    const int cq_mod = std::max(1, std::min(opt.cq_mod, opt.tx_depth));
    auto program = [&](Host& h) {
        const bool client = h.index() == 0;
        RcEndpoint ep(h, eo);
        fill_pattern(h, ep.buf, eo.buffer_bytes);
        ep.connect("bw", 1 - h.index());
        const int nq = static_cast<int>(ep.qps.size());
        for (std::uint32_t size : opt.sizes) {
            const int iters = opt.iterations;
            std::vector<int> posted(static_cast<std::size_t>(nq), 0), done(static_cast<std::size_t>(nq), 0);
            auto quota = [&](int q) { return iters / nq + (q < iters % nq ? 1 : 0); };
            if (opt.op == Op::Send && !client) {
                for (int q = 0; q < nq; ++q)
                    for (int i = 0; i < std::min(quota(q), opt.tx_depth * 2); ++i, ++posted[static_cast<std::size_t>(q)])
                        post_recv(ep.qps[static_cast<std::size_t>(q)], ep.buf + max_size, ep.mr->lkey, max_size,
                                  static_cast<std::uint64_t>(q));
            }
            h.barrier("bw" + std::to_string(size));
            if (client) {
                // When each message completed: a signaled completion covers the
                // unsignaled messages of its QP since the previous one, which
                // are spread evenly over that interval.
                std::vector<sim::Tick> message_done;
                message_done.reserve(static_cast<std::size_t>(iters));
                std::vector<sim::Tick> qp_last(static_cast<std::size_t>(nq), 0);
                const sim::Tick t0 = h.now();
                const auto wall0 = std::chrono::steady_clock::now();
                int total_done = 0;
                ibv_wc wc[32];
                const ibv_wr_opcode wop = opt.op == Op::Send    ? IBV_WR_SEND
                                          : opt.op == Op::Write ? IBV_WR_RDMA_WRITE
                                                                : IBV_WR_RDMA_READ;
                const unsigned inl = (size <= opt.inline_max && opt.op != Op::Read) ? IBV_SEND_INLINE : 0;
                sim::Tick last_progress = t0;
                // Post to every QP once, then only to QPs whose completions
                // made room: the loop costs O(completions), not O(QPs).
                std::vector<int> refill;
                for (int q = 0; q < nq; ++q) refill.push_back(q);
                while (total_done < iters) {
                    if (h.now() - last_progress > 100000 * sim::kPsPerUs)
                        throw std::runtime_error("bandwidth run made no progress for 100 ms of simulated time");
                    for (int q : refill) {
                        auto& p = posted[static_cast<std::size_t>(q)];
                        auto& d = done[static_cast<std::size_t>(q)];
                        while (p < quota(q) && p - d < opt.tx_depth) {
                            ++p;
                            const bool sig = p % cq_mod == 0 || p == quota(q);
                            post_one(ep.qps[static_cast<std::size_t>(q)], wop, ep.buf, ep.mr->lkey, size,
                                     ep.remote_addr + max_size, ep.remote_rkey,
                                     (sig ? IBV_SEND_SIGNALED : 0) | inl,
                                     (static_cast<std::uint64_t>(q) << 32) | static_cast<std::uint64_t>(p));
                        }
                    }
                    refill.clear();
                    const int n = ibv_poll_cq(ep.send_cq, 32, wc);
                    for (int i = 0; i < n; ++i) {
                        if (wc[i].status != IBV_WC_SUCCESS)
                            throw std::runtime_error(std::string("bandwidth completion: ") + ibv_wc_status_str(wc[i].status));
                        const int q = static_cast<int>(wc[i].wr_id >> 32);
                        const int upto = static_cast<int>(wc[i].wr_id & 0xffffffffu);
                        auto& d = done[static_cast<std::size_t>(q)];
                        sim::Tick& prev = qp_last[static_cast<std::size_t>(q)];
                        if (prev == 0) prev = t0;
                        const int k = upto - d;
                        for (int j = 1; j <= k; ++j)
                            message_done.push_back(prev + (h.now() - prev) * static_cast<sim::Tick>(j) / static_cast<sim::Tick>(k));
                        prev = h.now();
                        total_done += k;
                        d = upto;
                        refill.push_back(q);
                        last_progress = h.now();
                    }
                }
                const sim::Tick t1 = h.now();
                rows.push_back(bandwidth_row(
                    size, iters, t0, t1, std::move(message_done), opt.tx_depth,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count()));
            } else if (opt.op == Op::Send) {
                // Repost what each poll returned as one chained list: one
                // doorbell per batch, as perftest's receiver does.
                int received = 0;
                ibv_wc wc[32];
                std::vector<ibv_sge> sges(32);
                std::vector<ibv_recv_wr> wrs(32);
                while (received < iters) {
                    const int n = ibv_poll_cq(ep.recv_cq, 32, wc);
                    std::vector<int> per_qp(static_cast<std::size_t>(nq), 0);
                    for (int i = 0; i < n; ++i) {
                        if (wc[i].status != IBV_WC_SUCCESS)
                            throw std::runtime_error(std::string("receive completion: ") + ibv_wc_status_str(wc[i].status));
                        ++received;
                        ++per_qp[static_cast<std::size_t>(wc[i].wr_id)];
                    }
                    for (int q = 0; q < nq; ++q) {
                        auto& p = posted[static_cast<std::size_t>(q)];
                        const int k = std::min(per_qp[static_cast<std::size_t>(q)], quota(q) - p);
                        if (k <= 0) continue;
                        for (int i = 0; i < k; ++i) {
                            sges[static_cast<std::size_t>(i)] = {reinterpret_cast<std::uintptr_t>(ep.buf + max_size), max_size, ep.mr->lkey};
                            wrs[static_cast<std::size_t>(i)] = ibv_recv_wr{};
                            wrs[static_cast<std::size_t>(i)].wr_id = static_cast<std::uint64_t>(q);
                            wrs[static_cast<std::size_t>(i)].sg_list = &sges[static_cast<std::size_t>(i)];
                            wrs[static_cast<std::size_t>(i)].num_sge = 1;
                            wrs[static_cast<std::size_t>(i)].next = i + 1 < k ? &wrs[static_cast<std::size_t>(i) + 1] : nullptr;
                        }
                        ibv_recv_wr* bad = nullptr;
                        check(ibv_post_recv(ep.qps[static_cast<std::size_t>(q)], wrs.data(), &bad), "ibv_post_recv");
                        p += k;
                    }
                }
            }
            h.barrier("bwdone" + std::to_string(size));
        }
    };
    sys.run({program, program});
    return rows;
}

}  // namespace hcasim::testbench
