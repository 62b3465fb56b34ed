// verbs_stress: a seeded random RC workload between two processes, built
// against the system <infiniband/verbs.h> and libibverbs like any RDMA
// program, for the tests to run unmodified through `hcasim run`.
//
//   verbs_stress -s SEED             (server: node 0)
//   verbs_stress -s SEED HOST        (client)
//   verbs_stress -s SEED -a N        (a server that aborts after N receive
//                                     completions: its QPs go with it, and the
//                                     client's further sends must fail)
//
// Both sides derive the same plan from the seed: a number of RC QPs, and a
// list of messages, each an RDMA WRITE, WRITE_WITH_IMM or SEND on a random
// QP with a random length, gather list (1 to 4 entries at random offsets),
// destination offset and signalling. The client fills every source byte
// from the plan and posts the messages keeping the send queues full; the
// server checks every receive completion (QP, opcode, length, immediate
// data) and every received byte, then, after a closing SEND on each QP has
// arrived (ordered after that QP's writes), every byte of every QP's
// write area and its guard bytes. Any difference is printed and the exit
// status is 1; a clean run prints a digest of all bytes and completions.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kPort = 18777;
constexpr std::uint32_t kAreaBytes = 64 * 1024;  // each QP's write area and its receive area
constexpr std::uint32_t kGuard = 64;             // bytes around each area that nothing may touch
constexpr int kDepth = 32;                       // send and receive queue depth

// splitmix64: the plan's only source of randomness.
struct Rng {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(next() % n); }
};

// The byte a message carries at offset i of its payload: one mixed word per
// 8 bytes, cheap enough that filling a message is not mistaken for spinning
// on memory (host.spin_cpu_us).
std::uint8_t pattern(std::uint64_t seed, std::uint32_t msg, std::uint32_t i) {
    std::uint64_t x = seed * 0x100000001b3ull ^ (static_cast<std::uint64_t>(msg) << 32) ^ (i >> 3);
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return static_cast<std::uint8_t>(x >> (8 * (i & 7)));
}

enum Kind { kWrite, kWriteImm, kSend, kClose };

struct Piece {
    std::uint32_t offset, length;  // within the client's source area of the QP
};
struct Message {
    Kind kind;
    int qp;
    std::size_t src_base;          // the client's source bytes of this message start here (never reused)
    std::uint32_t length;
    std::vector<Piece> gather;
    std::uint32_t dest;            // offset in the QP's write area (writes) or receive area (sends)
    bool signaled;
    std::uint32_t imm;
};

struct Plan {
    int qps;
    std::size_t src_bytes = 0;  // the client's source bytes, all messages
    std::vector<Message> msgs;
};

Plan make_plan(std::uint64_t seed) {
    Rng r{seed};
    Plan p;
    p.qps = 2 + static_cast<int>(r.below(7));
    const std::uint32_t n = 100 + r.below(300);
    for (std::uint32_t i = 0; i < n; ++i) {
        Message m{};
        m.kind = static_cast<Kind>(r.below(3));
        m.qp = static_cast<int>(r.below(static_cast<std::uint32_t>(p.qps)));
        // Mostly small, sometimes up to the whole area.
        const std::uint32_t max = r.below(4) == 0 ? kAreaBytes : 4096;
        m.length = r.below(max + 1);
        if (m.kind == kSend && m.length == 0) m.length = 1;
        m.dest = m.length == kAreaBytes ? 0 : r.below(kAreaBytes - m.length + 1);
        // Split the payload into 1 to 4 pieces at increasing source offsets.
        const std::uint32_t pieces = m.length < 4 ? 1 : 1 + r.below(4);
        std::uint32_t left = m.length, src = 0;
        for (std::uint32_t k = 0; k < pieces; ++k) {
            const std::uint32_t len = k + 1 == pieces ? left : r.below(left / (pieces - k) + 1);
            const std::uint32_t room = kAreaBytes - (src + left);
            src += room ? r.below(std::min<std::uint32_t>(room, 512) + 1) : 0;
            m.gather.push_back({src, len});
            src += len;
            left -= len;
        }
        m.signaled = r.below(4) == 0;
        m.imm = static_cast<std::uint32_t>(r.next());
        m.src_base = p.src_bytes;
        p.src_bytes += src + 64;
        p.msgs.push_back(m);
    }
    for (int q = 0; q < p.qps; ++q) {
        Message c{};
        c.kind = kClose;
        c.qp = q;
        c.length = 4;
        c.gather.push_back({0, 4});
        c.signaled = true;
        c.imm = 0xc1053000u + static_cast<std::uint32_t>(q);
        c.src_base = p.src_bytes;
        p.src_bytes += 64;
        p.msgs.push_back(c);
    }
    return p;
}

struct Dest {
    std::uint32_t qpn[16];
    std::uint32_t psn[16];
    std::uint16_t lid;
    std::uint64_t addr;
    std::uint32_t rkey;
};

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "verbs_stress: %s failed: %s\n", what, std::strerror(errno));
    std::exit(2);
}

int exchange(const char* host, const Dest& mine, Dest& theirs) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = host ? 0 : AI_PASSIVE;
    if (getaddrinfo(host, std::to_string(kPort).c_str(), &hints, &res)) die("getaddrinfo");
    int fd = socket(res->ai_family, res->ai_socktype, 0);
    if (fd < 0) die("socket");
    if (host) {
        if (connect(fd, res->ai_addr, res->ai_addrlen)) die("connect");
    } else {
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 1)) die("listen");
        const int c = accept(fd, nullptr, nullptr);
        if (c < 0) die("accept");
        close(fd);
        fd = c;
    }
    freeaddrinfo(res);
    if (write(fd, &mine, sizeof mine) != static_cast<ssize_t>(sizeof mine)) die("write");
    std::size_t got = 0;
    while (got < sizeof theirs) {
        const ssize_t n = read(fd, reinterpret_cast<char*>(&theirs) + got, sizeof theirs - got);
        if (n <= 0) die("read");
        got += static_cast<std::size_t>(n);
    }
    return fd;
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t seed = 1;
    long abort_after = -1;
    int opt;
    while ((opt = getopt(argc, argv, "s:a:")) != -1) {
        if (opt == 's') seed = std::strtoull(optarg, nullptr, 10);
        else if (opt == 'a') abort_after = std::strtol(optarg, nullptr, 10);
        else return 2;
    }
    const char* host = optind < argc ? argv[optind] : nullptr;
    const bool client = host != nullptr;
    const Plan plan = make_plan(seed);
    const int qps = plan.qps;

    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n == 0) die("ibv_get_device_list");
    ibv_context* ctx = ibv_open_device(list[0]);
    if (!ctx) die("ibv_open_device");
    ibv_free_device_list(list);
    ibv_pd* pd = ibv_alloc_pd(ctx);
    if (!pd) die("ibv_alloc_pd");
    // Per QP: a guarded write area and a guarded receive area (server), or
    // a source area (client).
    const std::size_t stride = kAreaBytes + 2 * kGuard;
    const std::size_t bytes = stride * 2 * static_cast<std::size_t>(qps);
    std::vector<std::uint8_t> buf(bytes, 0xee);
    auto write_area = [&](int q) { return buf.data() + stride * (2 * q) + kGuard; };
    auto recv_area = [&](int q) { return buf.data() + stride * (2 * q + 1) + kGuard; };
    ibv_mr* mr = ibv_reg_mr(pd, buf.data(), bytes,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mr) die("ibv_reg_mr");
    // The server's SEND receives: up to kDepth are posted ahead of the one
    // being checked, so each takes the next of kDepth + 1 slots of its QP;
    // a later SEND cannot land on bytes not yet checked.
    const std::size_t slots = client ? 0 : kDepth + 1;
    std::vector<std::uint8_t> slot_buf(client ? 1 : stride * slots * static_cast<std::size_t>(qps), 0xee);
    auto slot_area = [&](int q, std::size_t slot) {
        return slot_buf.data() + stride * (static_cast<std::size_t>(q) * slots + slot) + kGuard;
    };
    ibv_mr* slot_mr = ibv_reg_mr(pd, slot_buf.data(), slot_buf.size(), IBV_ACCESS_LOCAL_WRITE);
    if (!slot_mr) die("ibv_reg_mr");
    std::vector<std::size_t> slot_of(plan.msgs.size(), 0);
    {
        std::vector<std::size_t> sends_on(static_cast<std::size_t>(qps), 0);
        for (std::size_t i = 0; i < plan.msgs.size(); ++i)
            if (plan.msgs[i].kind == kSend && slots)
                slot_of[i] = sends_on[static_cast<std::size_t>(plan.msgs[i].qp)]++ % slots;
    }
    // The client's sources: each message its own bytes, so no source is
    // rewritten before the adapter has read it.
    std::vector<std::uint8_t> source(client ? plan.src_bytes : 1, 0);
    ibv_mr* src_mr = ibv_reg_mr(pd, source.data(), source.size(), IBV_ACCESS_LOCAL_WRITE);
    if (!src_mr) die("ibv_reg_mr");
    ibv_cq* cq = ibv_create_cq(ctx, 4 * kDepth * qps, nullptr, nullptr, 0);
    if (!cq) die("ibv_create_cq");
    ibv_port_attr port{};
    if (ibv_query_port(ctx, 1, &port)) die("ibv_query_port");
    std::vector<ibv_qp*> qp(static_cast<std::size_t>(qps));
    Dest mine{};
    for (int q = 0; q < qps; ++q) {
        ibv_qp_init_attr ia{};
        ia.send_cq = ia.recv_cq = cq;
        ia.cap.max_send_wr = ia.cap.max_recv_wr = kDepth;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 4;
        ia.qp_type = IBV_QPT_RC;
        qp[q] = ibv_create_qp(pd, &ia);
        if (!qp[q]) die("ibv_create_qp");
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
        if (ibv_modify_qp(qp[q], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            die("ibv_modify_qp INIT");
        mine.qpn[q] = qp[q]->qp_num;
        mine.psn[q] = static_cast<std::uint32_t>(seed * 7919 + static_cast<std::uint64_t>(q) * 104729) & 0xffffff;
    }
    mine.lid = port.lid;
    mine.addr = reinterpret_cast<std::uintptr_t>(buf.data());
    mine.rkey = mr->rkey;

    // The server posts the receive of every SEND of the plan, per QP in plan
    // order (RC delivers them in that order), up to the queue depth.
    std::vector<std::vector<std::size_t>> sends(static_cast<std::size_t>(qps));
    for (std::size_t i = 0; i < plan.msgs.size(); ++i)
        if (plan.msgs[i].kind == kSend || plan.msgs[i].kind == kClose || plan.msgs[i].kind == kWriteImm)
            sends[static_cast<std::size_t>(plan.msgs[i].qp)].push_back(i);
    std::vector<std::size_t> posted(static_cast<std::size_t>(qps), 0), received(static_cast<std::size_t>(qps), 0);
    auto post_recvs = [&](int q) {
        auto& list_q = sends[static_cast<std::size_t>(q)];
        auto& p = posted[static_cast<std::size_t>(q)];
        while (p < list_q.size() && p - received[static_cast<std::size_t>(q)] < kDepth) {
            const Message& m = plan.msgs[list_q[p]];
            // A SEND's bytes go to its slot; a WRITE_WITH_IMM's or the closing
            // SEND's 4 bytes to the QP's receive area.
            ibv_sge sge{reinterpret_cast<std::uintptr_t>(recv_area(q)), 4, mr->lkey};
            if (m.kind == kSend)
                sge = {reinterpret_cast<std::uintptr_t>(slot_area(q, slot_of[list_q[p]]) + m.dest), kAreaBytes - m.dest,
                       slot_mr->lkey};
            ibv_recv_wr wr{}, *bad = nullptr;
            wr.wr_id = list_q[p];
            wr.sg_list = &sge;
            wr.num_sge = 1;
            if (ibv_post_recv(qp[q], &wr, &bad)) die("ibv_post_recv");
            ++p;
        }
    };
    if (!client)
        for (int q = 0; q < qps; ++q) post_recvs(q);

    Dest theirs{};
    const int sock = exchange(host, mine, theirs);
    for (int q = 0; q < qps; ++q) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = IBV_MTU_2048;
        a.dest_qp_num = theirs.qpn[q];
        a.rq_psn = theirs.psn[q];
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.dlid = theirs.lid;
        a.ah_attr.port_num = 1;
        if (ibv_modify_qp(qp[q], &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            die("ibv_modify_qp RTR");
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = mine.psn[q];
        a.max_rd_atomic = 1;
        if (ibv_modify_qp(qp[q], &a,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                              IBV_QP_MAX_QP_RD_ATOMIC))
            die("ibv_modify_qp RTS");
    }
    // Ready: the server has its receives posted before the client sends.
    char go = 'g';
    if (write(sock, &go, 1) != 1 || read(sock, &go, 1) != 1) die("sync");

    int errors = 0;
    std::uint64_t digest = 1469598103934665603ull;
    auto mix = [&](std::uint64_t v) { digest = (digest ^ v) * 1099511628211ull; };
    auto report = [&](const char* what, std::size_t msg, std::uint64_t got, std::uint64_t want) {
        if (++errors <= 20)
            std::printf("seed %" PRIu64 ": message %zu: %s is %" PRIu64 ", expected %" PRIu64 "\n", seed, msg, what, got,
                        want);
    };

    if (client) {
        // Fill the sources and post every message, each QP's send queue kept full.
        // Per QP: WRs posted, and retired (a signaled completion retires
        // its WR and every earlier one of its QP).
        std::vector<std::size_t> posted_q(static_cast<std::size_t>(qps), 0), retired_q(static_cast<std::size_t>(qps), 0);
        std::vector<std::size_t> seq(plan.msgs.size(), 0);
        std::size_t signaled_expected = 0, signaled_seen = 0;
        auto reap = [&](bool block) {
            ibv_wc wc[16];
            int got;
            do {
                got = ibv_poll_cq(cq, 16, wc);
                if (got < 0) die("ibv_poll_cq");
                for (int k = 0; k < got; ++k) {
                    const Message& m = plan.msgs[wc[k].wr_id];
                    if (wc[k].status != IBV_WC_SUCCESS) report("send status", wc[k].wr_id, wc[k].status, IBV_WC_SUCCESS);
                    if (wc[k].qp_num != qp[m.qp]->qp_num) report("send completion QP", wc[k].wr_id, wc[k].qp_num, qp[m.qp]->qp_num);
                    retired_q[static_cast<std::size_t>(m.qp)] = seq[wc[k].wr_id] + 1;
                    ++signaled_seen;
                    mix(wc[k].wr_id);
                }
            } while (block && got == 0);
        };
        for (std::size_t i = 0; i < plan.msgs.size(); ++i) {
            const Message& m = plan.msgs[i];
            const auto q = static_cast<std::size_t>(m.qp);
            std::uint8_t* src = source.data() + m.src_base;
            std::uint32_t at = 0;
            ibv_sge sge[4];
            for (std::size_t k = 0; k < m.gather.size(); ++k) {
                for (std::uint32_t b = 0; b < m.gather[k].length; ++b)
                    src[m.gather[k].offset + b] = m.kind == kClose ? static_cast<std::uint8_t>(0xc0 + m.qp)
                                                                   : pattern(seed, static_cast<std::uint32_t>(i), at + b);
                sge[k] = {reinterpret_cast<std::uintptr_t>(src + m.gather[k].offset), m.gather[k].length, src_mr->lkey};
                at += m.gather[k].length;
            }
            // Keep room: the WR that fills the queue is signaled.
            const std::size_t outstanding = posted_q[q] - retired_q[q];
            const bool signal = m.signaled || outstanding + 1 >= kDepth;
            ibv_send_wr wr{}, *bad = nullptr;
            wr.wr_id = i;
            wr.sg_list = sge;
            wr.num_sge = static_cast<int>(m.gather.size());
            wr.send_flags = signal ? IBV_SEND_SIGNALED : 0;
            wr.opcode = m.kind == kWrite ? IBV_WR_RDMA_WRITE : m.kind == kWriteImm ? IBV_WR_RDMA_WRITE_WITH_IMM
                        : m.kind == kSend    ? IBV_WR_SEND_WITH_IMM
                                             : IBV_WR_SEND_WITH_IMM;
            wr.imm_data = htonl(m.imm);
            if (m.kind == kWrite || m.kind == kWriteImm) {
                wr.wr.rdma.remote_addr = theirs.addr + stride * (2 * q) + kGuard + m.dest;
                wr.wr.rdma.rkey = theirs.rkey;
            }
            if (ibv_post_send(qp[q], &wr, &bad)) die("ibv_post_send");
            seq[i] = posted_q[q]++;
            if (signal) {
                ++signaled_expected;
                // A full queue: wait until its signaled WR retires it.
                while (posted_q[q] - retired_q[q] >= kDepth) reap(true);
            }
            reap(false);
        }
        while (signaled_seen < signaled_expected) reap(true);
    } else {
        // Every receive completion in order per QP: opcode, length, immediate, bytes.
        std::size_t expected = 0, seen = 0;
        for (auto& l : sends) expected += l.size();
        std::vector<std::vector<std::uint8_t>> area_expect(static_cast<std::size_t>(qps),
                                                           std::vector<std::uint8_t>(kAreaBytes, 0xee));
        while (seen < expected) {
            ibv_wc wc[16];
            const int got = ibv_poll_cq(cq, 16, wc);
            if (got < 0) die("ibv_poll_cq");
            for (int k = 0; k < got; ++k, ++seen) {
                if (abort_after >= 0 && static_cast<long>(seen) == abort_after) {
                    std::printf("seed %" PRIu64 ": aborting after %zu receives\n", seed, seen);
                    std::fflush(stdout);
                    std::abort();
                }
                const std::size_t i = wc[k].wr_id;
                const Message& m = plan.msgs[i];
                const auto q = static_cast<std::size_t>(m.qp);
                const std::size_t want_i = sends[q][received[q]];
                if (i != want_i) report("receive order (message)", i, i, want_i);
                ++received[q];
                if (wc[k].status != IBV_WC_SUCCESS) report("receive status", i, wc[k].status, IBV_WC_SUCCESS);
                if (wc[k].qp_num != qp[m.qp]->qp_num) report("receive QP", i, wc[k].qp_num, qp[m.qp]->qp_num);
                const ibv_wc_opcode op = m.kind == kWriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
                if (wc[k].opcode != op) report("receive opcode", i, wc[k].opcode, op);
                if (!(wc[k].wc_flags & IBV_WC_WITH_IMM) || ntohl(wc[k].imm_data) != m.imm)
                    report("immediate data", i, ntohl(wc[k].imm_data), m.imm);
                // A write with immediate reports the length it wrote.
                if (wc[k].byte_len != m.length) report("byte_len", i, wc[k].byte_len, m.length);
                if (m.kind == kSend) {
                    const std::uint8_t* got_bytes = slot_area(m.qp, slot_of[i]) + m.dest;
                    for (std::uint32_t b = 0; b < m.length; ++b)
                        if (got_bytes[b] != pattern(seed, static_cast<std::uint32_t>(i), b)) {
                            report("received byte offset", i, b, b);
                            break;
                        }
                }
                if (m.kind == kClose)
                    for (std::uint32_t b = 0; b < 4; ++b)
                        if (recv_area(m.qp)[b] != 0xc0 + m.qp) report("closing byte", i, recv_area(m.qp)[b], 0xc0u + m.qp);
                mix(i);
                mix(wc[k].byte_len);
                post_recvs(m.qp);
            }
        }
        // Every write of every QP landed, in order: the area as the plan says.
        for (std::size_t i = 0; i < plan.msgs.size(); ++i) {
            const Message& m = plan.msgs[i];
            if (m.kind != kWrite && m.kind != kWriteImm) continue;
            for (std::uint32_t b = 0; b < m.length; ++b)
                area_expect[static_cast<std::size_t>(m.qp)][m.dest + b] = pattern(seed, static_cast<std::uint32_t>(i), b);
        }
        for (int q = 0; q < qps; ++q) {
            const std::uint8_t* a = write_area(q);
            for (std::uint32_t b = 0; b < kAreaBytes; ++b)
                if (a[b] != area_expect[static_cast<std::size_t>(q)][b]) {
                    report("write area byte (QP index, offset)", static_cast<std::size_t>(q), b, b);
                    break;
                }
            for (std::uint32_t g = 1; g <= kGuard; ++g)
                if (a[-static_cast<std::ptrdiff_t>(g)] != 0xee || a[kAreaBytes + g - 1] != 0xee) {
                    report("guard byte touched (QP index)", static_cast<std::size_t>(q), g, 0);
                    break;
                }
            for (std::uint32_t b = 0; b < kAreaBytes; b += 1024) mix(a[b]);
        }
    }
    // Both done: close together.
    if (write(sock, &go, 1) != 1 || read(sock, &go, 1) != 1) die("final sync");
    close(sock);
    for (auto* q : qp) ibv_destroy_qp(q);
    ibv_destroy_cq(cq);
    ibv_dereg_mr(mr);
    ibv_dereg_mr(slot_mr);
    ibv_dereg_mr(src_mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    std::printf("seed %" PRIu64 ": %d QPs, %zu messages, %d errors, digest %016" PRIx64 "\n", seed, qps,
                plan.msgs.size(), errors, digest);
    return errors ? 1 : 0;
}
