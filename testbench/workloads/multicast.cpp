#include "testbench/workloads/multicast.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "model/hca/hca_params.hpp"
#include "testbench/workloads/perftest.hpp"
#include "testbench/workloads/rc_endpoint.hpp"

namespace hcasim::testbench {

namespace {

ibv_gid workload_mgid() {
    ibv_gid g{};
    const std::uint8_t prefix[] = {0xff, 0x12, 0x40, 0x1b};
    std::memcpy(g.raw, prefix, sizeof prefix);
    g.raw[15] = 1;
    return g;
}

// The receives each receiver keeps posted: two TX depths, as perftest's
// receive depth, as many as a queue holds.
std::uint32_t rx_depth(const MulticastOptions& opt, const hca::HcaParams& p) {
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(2 * static_cast<std::uint64_t>(opt.tx_depth), p.max_qp_wr));
}

// The latency phase signals every 16th send, as the lat workloads (more
// often when the send queue is shorter), and the last of each size.
bool signaled(int it, int iterations, int tx_depth) {
    const int every = std::min(kLatencySignalEvery, tx_depth);
    return it % every == every - 1 || it == iterations - 1;
}

// One node's verbs resources: a UD QP, its CQs and one registered buffer.
// Nothing is released by the destructor but the buffer (it may run while an
// exception unwinds a host thread): close() releases the rest.
struct GroupEndpoint {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* send_cq = nullptr;
    ibv_cq* recv_cq = nullptr;
    ibv_qp* qp = nullptr;
    ibv_ah* ah = nullptr;  // the sender's, to the group
    std::uint8_t* buf = nullptr;
    ibv_mr* mr = nullptr;
    std::size_t bytes = 0;
    bool attached = false;

    GroupEndpoint(const MulticastOptions& opt, std::uint32_t max_size, std::uint32_t recv_wr) {
        ctx = open_first_device();
        pd = need(ibv_alloc_pd(ctx), "ibv_alloc_pd", "hca.max_pd");
        send_cq = ibv_create_cq(ctx, opt.tx_depth + 16, nullptr, nullptr, 0);
        recv_cq = ibv_create_cq(ctx, static_cast<int>(recv_wr) + 16, nullptr, nullptr, 0);
        need(send_cq, "ibv_create_cq", "hca.max_cq, hca.max_cqe");
        need(recv_cq, "ibv_create_cq", "hca.max_cq, hca.max_cqe");
        // Data in front, then the receive slot: GRH area and the largest message.
        bytes = (2 * static_cast<std::size_t>(max_size) + kGrhBytes + 4096 + 4095) & ~std::size_t(4095);
        buf = static_cast<std::uint8_t*>(std::aligned_alloc(4096, bytes));
        if (!buf) throw std::runtime_error("out of memory for the buffer");
        std::memset(buf, 0, bytes);
        mr = need(ibv_reg_mr(pd, buf, bytes, IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr", "hca.max_mr");
        ibv_qp_init_attr init{};
        init.send_cq = send_cq;
        init.recv_cq = recv_cq;
        init.qp_type = IBV_QPT_UD;
        init.cap.max_send_wr = static_cast<std::uint32_t>(opt.tx_depth);
        init.cap.max_recv_wr = recv_wr;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = opt.inline_max;
        qp = need(ibv_create_qp(pd, &init), "ibv_create_qp(UD)", "hca.max_qp, hca.max_qp_wr");
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qkey = kWorkloadQkey;
        check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), "ibv_modify_qp(INIT)");
        a.qp_state = IBV_QPS_RTR;
        check(ibv_modify_qp(qp, &a, IBV_QP_STATE), "ibv_modify_qp(RTR)");
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 0;
        check(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "ibv_modify_qp(RTS)");
    }
    ~GroupEndpoint() { std::free(buf); }
    GroupEndpoint(const GroupEndpoint&) = delete;
    GroupEndpoint& operator=(const GroupEndpoint&) = delete;

    std::uint8_t* recv_slot() { return buf + bytes / 2; }

    void post_recvs(int k, std::uint32_t len) {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(recv_slot()), len, mr->lkey};
        std::vector<ibv_recv_wr> wrs(static_cast<std::size_t>(k));
        for (int i = 0; i < k; ++i) {
            wrs[static_cast<std::size_t>(i)].sg_list = &sge;
            wrs[static_cast<std::size_t>(i)].num_sge = 1;
            wrs[static_cast<std::size_t>(i)].next = i + 1 < k ? &wrs[static_cast<std::size_t>(i) + 1] : nullptr;
        }
        ibv_recv_wr* bad = nullptr;
        if (k > 0) check(ibv_post_recv(qp, wrs.data(), &bad), "ibv_post_recv");
    }

    void send(std::uint32_t size, unsigned flags, std::uint64_t wr_id) {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), size, mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = flags;
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = 0xFFFFFF;  // every multicast packet's DestQP
        wr.wr.ud.remote_qkey = kWorkloadQkey;
        ibv_send_wr* bad = nullptr;
        check(ibv_post_send(qp, &wr, &bad), "ibv_post_send");
    }

    void close(const ibv_gid& mgid) {
        if (attached) check(ibv_detach_mcast(qp, &mgid, kWorkloadMlid), "ibv_detach_mcast");
        if (ah) check(ibv_destroy_ah(ah), "ibv_destroy_ah");
        check(ibv_destroy_qp(qp), "ibv_destroy_qp");
        check(ibv_dereg_mr(mr), "ibv_dereg_mr");
        check(ibv_destroy_cq(recv_cq), "ibv_destroy_cq");
        check(ibv_destroy_cq(send_cq), "ibv_destroy_cq");
        check(ibv_dealloc_pd(pd), "ibv_dealloc_pd");
        check(ibv_close_device(ctx), "ibv_close_device");
    }
};

// Polls for one completion; a run that waits longer than limit for it is stuck.
ibv_wc poll_one(Host& h, ibv_cq* cq, sim::Tick limit, const char* what) {
    const sim::Tick deadline = h.now() + limit;
    ibv_wc wc{};
    for (;;) {
        const int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0) throw std::runtime_error(std::string(what) + ": ibv_poll_cq failed");
        if (n == 1) break;
        if (h.now() > deadline)
            throw std::runtime_error(std::string(what) + ": nothing arrived within " +
                                     std::to_string(limit / sim::kPsPerUs / 1000) + " ms of simulated time");
    }
    if (wc.status != IBV_WC_SUCCESS) throw std::runtime_error(std::string(what) + ": " + ibv_wc_status_str(wc.status));
    return wc;
}

}  // namespace

std::string workload_mgid_text() { return "ff12:401b::1"; }

void check_multicast_options(const MulticastOptions& opt, const sim::Config& cfg) {
    const hca::HcaParams p = hca::HcaParams::from(cfg);
    const auto port_mtu = static_cast<std::uint32_t>(cfg.get_int("port.max_mtu"));
    if (opt.sizes.empty()) throw std::invalid_argument("no message sizes (--sizes)");
    for (std::uint32_t s : opt.sizes)
        if (s < 1 || s > port_mtu)
            throw std::invalid_argument("--sizes " + std::to_string(s) +
                                        " is more than a multicast (UD) message carries: at most the port's MTU, "
                                        "port.max_mtu = " + std::to_string(port_mtu) + " bytes");
    if (opt.iterations < 1)
        throw std::invalid_argument("invalid -n/--iters " + std::to_string(opt.iterations) + ": expected at least 1");
    if (opt.tx_depth < 1 || static_cast<std::uint64_t>(opt.tx_depth) > p.max_qp_wr)
        throw std::invalid_argument("invalid --tx-depth " + std::to_string(opt.tx_depth) + ": expected 1 to hca.max_qp_wr = " +
                                    std::to_string(p.max_qp_wr));
    if (opt.inline_max > p.max_inline)
        throw std::invalid_argument("--inline " + std::to_string(opt.inline_max) +
                                    " is more than the device allows: hca.max_inline = " + std::to_string(p.max_inline) +
                                    " bytes");
    const std::uint64_t cqes = std::max<std::uint64_t>(static_cast<std::uint64_t>(opt.tx_depth), rx_depth(opt, p)) + 16;
    if (cqes > p.max_cqe)
        throw std::invalid_argument("--tx-depth " + std::to_string(opt.tx_depth) + " needs completion queues of " +
                                    std::to_string(cqes) + " entries, more than the device allows: hca.max_cqe = " +
                                    std::to_string(p.max_cqe));
}

std::vector<MulticastRow> run_multicast(System& sys, const MulticastOptions& opt) {
    check_multicast_options(opt, sys.config());
    const int nodes = sys.nodes();
    if (nodes < 2) throw sim::ConfigError("a multicast run needs a sender and at least one receiver: fabric.nodes >= 2");
    const int receivers = nodes - 1;
    const hca::HcaParams device = hca::HcaParams::from(sys.config());
    const std::uint32_t max_size = *std::max_element(opt.sizes.begin(), opt.sizes.end());
    const std::uint32_t recv_wr = rx_depth(opt, device);
    const std::uint32_t recv_bytes = max_size + kGrhBytes;
    const ibv_gid mgid = workload_mgid();
    const int iters = opt.iterations;
    const std::size_t nsizes = opt.sizes.size();

    // Shared by the programs (the out-of-band channel of the run).
    std::vector<sim::Tick> posted_at(static_cast<std::size_t>(iters));  // latency: node 0's post of message it
    int polled = 0;                                                      // receivers done with the current message
    sim::Tick stream_start = 0;
    bool sender_done = false;
    // Results by size and receiver.
    std::vector<MulticastRow> results(nsizes * static_cast<std::size_t>(nodes));
    const sim::Tick wait_limit = stall_limit(sys, static_cast<std::uint64_t>(recv_wr) * max_size);

    auto sender = [&](Host& h) {
        GroupEndpoint ep(opt, max_size, 1);
        fill_pattern(h, ep.buf, max_size);
        ibv_ah_attr av{};
        av.dlid = kWorkloadMlid;
        av.port_num = 1;
        av.is_global = 1;
        av.grh.dgid = mgid;
        av.grh.sgid_index = 0;
        av.grh.hop_limit = 1;
        ep.ah = ibv_create_ah(ep.pd, &av);
        if (!ep.ah) throw std::runtime_error(std::string("ibv_create_ah failed: ") + std::strerror(errno));
        h.barrier("joined");
        for (std::size_t si = 0; si < nsizes; ++si) {
            const std::uint32_t size = opt.sizes[si];
            const std::string tag = std::to_string(size);
            h.barrier("lat" + tag);
            const unsigned inl = size <= opt.inline_max ? IBV_SEND_INLINE : 0;
            for (int it = 0; it < iters; ++it) {
                const bool sig = signaled(it, iters, opt.tx_depth);
                posted_at[static_cast<std::size_t>(it)] = h.now();
                ep.send(size, (sig ? IBV_SEND_SIGNALED : 0) | inl, static_cast<std::uint64_t>(it));
                // The next message goes once every receiver has this one.
                h.get("mcast/" + tag + "/" + std::to_string(it));
                if (sig) poll_one(h, ep.send_cq, wait_limit, "multicast send completion");
            }
            sender_done = false;
            h.barrier("bw" + tag);
            stream_start = h.now();
            const int cq_mod = std::max(1, std::min(32, opt.tx_depth));
            int posted = 0, done = 0;
            sim::Tick last_progress = h.now();
            ibv_wc wc[32];
            while (done < iters) {
                for (; posted < iters && posted - done < opt.tx_depth; ++posted) {
                    const bool sig = (posted + 1) % cq_mod == 0 || posted + 1 == iters;
                    ep.send(size, sig ? IBV_SEND_SIGNALED : 0, static_cast<std::uint64_t>(posted + 1));
                }
                const int n = ibv_poll_cq(ep.send_cq, 32, wc);
                for (int i = 0; i < n; ++i) {
                    if (wc[i].status != IBV_WC_SUCCESS)
                        throw std::runtime_error(std::string("multicast send completion: ") + ibv_wc_status_str(wc[i].status));
                    done = static_cast<int>(wc[i].wr_id);
                    last_progress = h.now();
                }
                if (h.now() - last_progress > wait_limit)
                    throw std::runtime_error("multicast bandwidth run made no progress for " +
                                             std::to_string(wait_limit / sim::kPsPerUs / 1000) + " ms of simulated time");
            }
            sender_done = true;
            h.barrier("bwdone" + tag);
        }
        ep.close(mgid);
    };

    auto receiver = [&](Host& h) {
        GroupEndpoint ep(opt, max_size, recv_wr);
        check(ibv_attach_mcast(ep.qp, &mgid, kWorkloadMlid), "ibv_attach_mcast");
        ep.attached = true;
        ep.post_recvs(static_cast<int>(recv_wr), recv_bytes);
        h.barrier("joined");
        const std::size_t me = static_cast<std::size_t>(h.index());
        for (std::size_t si = 0; si < nsizes; ++si) {
            const std::uint32_t size = opt.sizes[si];
            const std::string tag = std::to_string(size);
            MulticastRow& row = results[si * static_cast<std::size_t>(nodes) + me];
            row.bytes = size;
            row.receiver = h.index();
            h.barrier("lat" + tag);
            std::vector<sim::Tick> samples;
            samples.reserve(static_cast<std::size_t>(iters));
            for (int it = 0; it < iters; ++it) {
                poll_one(h, ep.recv_cq, wait_limit, "multicast receive");
                samples.push_back(h.now() - posted_at[static_cast<std::size_t>(it)]);
                ep.post_recvs(1, recv_bytes);
                if (++polled == receivers) {
                    polled = 0;
                    h.put("mcast/" + tag + "/" + std::to_string(it), {});
                }
            }
            row.latency = latency_stats(size, std::move(samples));
            h.barrier("bw" + tag);
            std::uint64_t got = 0;
            sim::Tick last = 0, idle_since = h.now();
            ibv_wc wc[32];
            while (got < static_cast<std::uint64_t>(iters)) {
                const int n = ibv_poll_cq(ep.recv_cq, 32, wc);
                if (n < 0) throw std::runtime_error("multicast receive: ibv_poll_cq failed");
                for (int i = 0; i < n; ++i)
                    if (wc[i].status != IBV_WC_SUCCESS)
                        throw std::runtime_error(std::string("multicast receive: ") + ibv_wc_status_str(wc[i].status));
                if (n > 0) {
                    got += static_cast<std::uint64_t>(n);
                    last = h.now();
                    ep.post_recvs(n, recv_bytes);
                }
                // UD does not resend: once the sender is done, what has not
                // come by the run's stall limit is lost.
                if (n > 0 || !sender_done) idle_since = h.now();
                else if (h.now() - idle_since > wait_limit) break;
            }
            row.sent = static_cast<std::uint64_t>(iters);
            row.received = got;
            // Node 0 set the start when it left the barrier, before any message.
            const double secs = last > stream_start ? static_cast<double>(last - stream_start) / 1e12 : 0;
            row.bw_avg_MBps = secs > 0 ? static_cast<double>(got) * size / secs / kPerftestMB : 0;
            row.msg_rate_Mpps = secs > 0 ? static_cast<double>(got) / secs / 1e6 : 0;
            h.barrier("bwdone" + tag);
        }
        ep.close(mgid);
    };

    std::vector<System::Program> programs{sender};
    std::vector<std::string> names{"multicast sender"};
    for (int i = 1; i < nodes; ++i) {
        programs.push_back(receiver);
        names.push_back("multicast receiver");
    }
    sys.run(programs, names);
    std::vector<MulticastRow> rows;
    for (std::size_t si = 0; si < nsizes; ++si)
        for (int r = 1; r < nodes; ++r) rows.push_back(results[si * static_cast<std::size_t>(nodes) + static_cast<std::size_t>(r)]);
    return rows;
}

}  // namespace hcasim::testbench
