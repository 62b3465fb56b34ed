// RC atomics through the verbs API: compare & swap and fetch & add on 8
// aligned bytes of the responder's memory, under contention from several
// QPs on several nodes, their errors, and repeated requests.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>

#include "testbench/integration/harness.hpp"

namespace hcasim::test {
namespace {

constexpr int kAtomicAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                              IBV_ACCESS_REMOTE_ATOMIC;

SideOptions atomic_side(int qps = 1) {
    SideOptions o;
    o.qps = qps;
    o.access = kAtomicAccess;
    return o;
}

ConnOptions atomic_conn() {
    ConnOptions c;
    c.qp_access = kAtomicAccess;
    return c;
}

int post_atomic(Side& s, ibv_qp* qp, ibv_wr_opcode op, std::size_t result_off, std::uint64_t raddr,
                std::uint32_t rkey, std::uint64_t compare_add, std::uint64_t swap, std::uint64_t wr_id,
                std::uint32_t len = 8) {
    ibv_sge sge = s.sge(result_off, len);
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

// Node 0's side of a many-to-one test: one PD and one buffer, and nqps QPs
// for each peer, connected as Side::connect would connect them ("<tag><peer>").
void serve_peers(Host& h, Side& s, const std::string& tag, int peers, int nqps) {
    ibv_port_attr port{};
    need_rc(ibv_query_port(s.ctx, 1, &port), "ibv_query_port");
    const ConnOptions c = atomic_conn();
    for (int peer = 1; peer <= peers; ++peer) {
        std::vector<ibv_qp*> qps;
        SideInfo mine;
        mine.lid = port.lid;
        mine.psn = c.psn;
        mine.addr = reinterpret_cast<std::uintptr_t>(s.buf);
        mine.rkey = s.mr->rkey;
        mine.length = s.opt.buffer_bytes;
        mine.nqps = static_cast<std::uint32_t>(nqps);
        for (int q = 0; q < nqps; ++q) {
            qps.push_back(s.create_qp(s.send_cq, s.recv_cq));
            mine.qpn[q] = qps.back()->qp_num;
        }
        const std::string key = tag + std::to_string(peer);
        h.put_value(key + "/0", mine);
        const auto theirs = h.get_value<SideInfo>(key + "/" + std::to_string(peer));
        for (int q = 0; q < nqps; ++q) {
            ibv_qp* qp = qps[static_cast<std::size_t>(q)];
            need_rc(qp_to_init(qp, c.qp_access), "INIT");
            need_rc(qp_to_rtr(qp, theirs.lid, theirs.qpn[q], theirs.psn, c), "RTR");
            need_rc(qp_to_rts(qp, mine.psn, c), "RTS");
            s.qps.push_back(qp);
        }
    }
}

std::uint64_t load64(const Side& s, std::size_t off) {
    std::uint64_t v;
    std::memcpy(&v, s.buf + off, sizeof v);
    return v;
}

}  // namespace

TEST_CASE("fetch and add and compare and swap return the original value and change the target once",
          "[atomic][verbs]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, atomic_side());
            s.connect("a", 1, atomic_conn());
            h.barrier("ready");
            const std::uint64_t target = s.remote_addr + 0x100;
            need_rc(post_atomic(s, s.qps[0], IBV_WR_ATOMIC_FETCH_AND_ADD, 0x1000, target, s.remote_rkey, 5, 0, 1),
                    "fadd");
            need_rc(post_atomic(s, s.qps[0], IBV_WR_ATOMIC_CMP_AND_SWP, 0x1008, target, s.remote_rkey, 1005, 77, 2),
                    "cas hit");
            need_rc(post_atomic(s, s.qps[0], IBV_WR_ATOMIC_CMP_AND_SWP, 0x1010, target, s.remote_rkey, 1005, 99, 3),
                    "cas miss");
            const auto wc = s.poll_ok(s.send_cq, 3, "atomics");
            for (int i = 0; i < 3; ++i) {
                rec.num("wc" + std::to_string(i) + ".opcode", wc[static_cast<std::size_t>(i)].opcode);
                rec.num("wc" + std::to_string(i) + ".len", wc[static_cast<std::size_t>(i)].byte_len);
            }
            rec.num("orig.fadd", static_cast<long long>(load64(s, 0x1000)));
            rec.num("orig.cas_hit", static_cast<long long>(load64(s, 0x1008)));
            rec.num("orig.cas_miss", static_cast<long long>(load64(s, 0x1010)));
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, atomic_side());
            const std::uint64_t init = 1000;
            std::memcpy(s.buf + 0x100, &init, 8);
            std::memset(s.buf + 0xf8, 0xab, 8);
            std::memset(s.buf + 0x108, 0xcd, 8);
            s.connect("a", 0, atomic_conn());
            h.barrier("ready");
            h.barrier("done");
            rec.num("final", static_cast<long long>(load64(s, 0x100)));
            rec.num("guards", s.buf[0xf8] == 0xab && s.buf[0xff] == 0xab && s.buf[0x108] == 0xcd && s.buf[0x10f] == 0xcd);
            s.close();
        });
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.num("wc0.opcode") == IBV_WC_FETCH_ADD);
    CHECK(r.num("wc1.opcode") == IBV_WC_COMP_SWAP);
    CHECK(r.num("wc0.len") == 8);
    CHECK(r.num("orig.fadd") == 1000);
    CHECK(r.num("orig.cas_hit") == 1005);
    CHECK(r.num("orig.cas_miss") == 77);
    CHECK(r.num("final") == 77);
    CHECK(r.num("guards") == 1);
}

TEST_CASE("fetch and adds from several qps on several nodes through a switch sum up exactly", "[atomic][verbs]") {
    // Nodes 1..3 each run 2 QPs to node 0 and add their node number to one
    // counter kAdds times per QP, with several atomics outstanding.
    constexpr int kNodes = 4, kQps = 2, kAdds = 40;
    std::vector<Program> programs;
    programs.push_back([](Host& h, Record& rec) {
        SideOptions o = atomic_side(0);
        o.cq_depth = 4096;
        Side s(h, o);
        serve_peers(h, s, "c", kNodes - 1, kQps);
        h.barrier("ready");
        h.barrier("done");
        rec.num("final", static_cast<long long>(load64(s, 0x40)));
        s.close();
    });
    for (int node = 1; node < kNodes; ++node) {
        programs.push_back([node](Host& h, Record& rec) {
            Side s(h, atomic_side(kQps));
            s.connect("c" + std::to_string(node), 0, atomic_conn());
            const std::uint64_t counter = s.remote_addr + 0x40;
            const std::uint32_t rkey = s.remote_rkey;
            h.barrier("ready");
            int posted = 0;
            for (int i = 0; i < kAdds; ++i)
                for (int q = 0; q < kQps; ++q) {
                    const std::size_t off = 0x1000 + static_cast<std::size_t>(posted) * 8;
                    need_rc(post_atomic(s, s.qps[static_cast<std::size_t>(q)], IBV_WR_ATOMIC_FETCH_AND_ADD, off,
                                        counter, rkey, static_cast<std::uint64_t>(node), 0,
                                        static_cast<std::uint64_t>(posted)),
                            "fadd");
                    ++posted;
                    if (posted % 16 == 0) s.poll_ok(s.send_cq, 16, "fadds");
                }
            s.poll_ok(s.send_cq, posted % 16, "fadds");
            // Every original value is distinct: no add was lost or repeated.
            std::set<std::uint64_t> seen;
            for (int i = 0; i < posted; ++i) seen.insert(load64(s, 0x1000 + static_cast<std::size_t>(i) * 8));
            rec.num("distinct." + std::to_string(node), static_cast<long long>(seen.size()));
            for (int i = 0; i < posted; ++i) h.put_value("orig." + std::to_string(node) + "." + std::to_string(i),
                                                          load64(s, 0x1000 + static_cast<std::size_t>(i) * 8));
            h.barrier("done");
            s.close();
        });
    }
    const auto r = run_programs({{"fabric.topology", "switch"}}, programs, kNodes);
    INFO(r.error);
    REQUIRE(r.ok);
    long long sum = 0;
    for (int node = 1; node < kNodes; ++node) {
        sum += static_cast<long long>(node) * kQps * kAdds;
        CHECK(r.num("distinct." + std::to_string(node)) == kQps * kAdds);
    }
    CHECK(r.num("final") == sum);
}

TEST_CASE("compare and swap races: exactly one qp wins and the others see the winner", "[atomic][verbs]") {
    constexpr int kNodes = 4;
    std::vector<Program> programs;
    programs.push_back([](Host& h, Record& rec) {
        Side s(h, atomic_side(0));
        serve_peers(h, s, "c", kNodes - 1, 1);
        h.barrier("ready");
        h.barrier("done");
        rec.num("final", static_cast<long long>(load64(s, 0x80)));
        s.close();
    });
    for (int node = 1; node < kNodes; ++node) {
        programs.push_back([node](Host& h, Record& rec) {
            Side s(h, atomic_side());
            s.connect("c" + std::to_string(node), 0, atomic_conn());
            const std::uint64_t lock = s.remote_addr + 0x80;
            const std::uint32_t rkey = s.remote_rkey;
            h.barrier("ready");
            need_rc(post_atomic(s, s.qps[0], IBV_WR_ATOMIC_CMP_AND_SWP, 0x1000, lock, rkey, 0,
                                static_cast<std::uint64_t>(node), 1),
                    "cas");
            const auto wc = s.poll(s.send_cq, 1);
            rec.num("status." + std::to_string(node), wc.empty() ? -1 : wc[0].status);
            rec.num("orig." + std::to_string(node), static_cast<long long>(load64(s, 0x1000)));
            h.barrier("done");
            s.close();
        });
    }
    const auto r = run_programs({{"fabric.topology", "switch"}}, programs, kNodes);
    INFO(r.error);
    REQUIRE(r.ok);
    for (int node = 1; node < kNodes; ++node) CHECK(r.num("status." + std::to_string(node)) == IBV_WC_SUCCESS);
    const long long winner = r.num("final");
    CHECK(winner >= 1);
    CHECK(winner < kNodes);
    int wins = 0;
    for (int node = 1; node < kNodes; ++node) {
        const long long orig = r.num("orig." + std::to_string(node));
        if (orig == 0) {
            ++wins;
            CHECK(node == winner);
        } else {
            CHECK(orig == winner);
        }
    }
    CHECK(wins == 1);
}

TEST_CASE("atomic errors: misalignment, access rights, local buffer and qp type", "[atomic][verbs]") {
    // Each case runs on a fresh pair: an error breaks the RC connection.
    struct Case {
        const char* name;
        std::uint64_t offset;    // of the target in the peer's buffer
        bool mr_atomic;          // the peer's region allows remote atomics
        bool qp_atomic;          // the peer's QP allows remote atomics
        ibv_wc_status want;
    };
    const Case cases[] = {
        {"misaligned", 0x104, true, true, IBV_WC_REM_INV_REQ_ERR},
        {"region without remote atomic", 0x100, false, true, IBV_WC_REM_ACCESS_ERR},
        {"qp without remote atomic", 0x100, true, false, IBV_WC_REM_ACCESS_ERR},
    };
    for (const Case& k : cases) {
        INFO(k.name);
        const auto r = run_pair(
            {},
            [&](Host& h, Record& rec) {
                Side s(h, atomic_side());
                s.connect("e", 1, atomic_conn());
                h.barrier("ready");
                need_rc(post_atomic(s, s.qps[0], IBV_WR_ATOMIC_FETCH_AND_ADD, 0x1000, s.remote_addr + k.offset,
                                    s.remote_rkey, 1, 0, 5),
                        "fadd");
                const auto wc = s.poll(s.send_cq, 1);
                rec.num("n", wc.size());
                if (!wc.empty()) rec.num("status", wc[0].status);
                h.barrier("done");
                s.close();
            },
            [&](Host& h, Record& rec) {
                SideOptions o = atomic_side();
                if (!k.mr_atomic) o.access &= ~IBV_ACCESS_REMOTE_ATOMIC;
                Side s(h, o);
                std::memset(s.buf + 0x100, 0x5a, 16);
                ConnOptions c = atomic_conn();
                if (!k.qp_atomic) c.qp_access &= ~IBV_ACCESS_REMOTE_ATOMIC;
                s.connect("e", 0, c);
                h.barrier("ready");
                h.barrier("done");
                bool untouched = true;
                for (int i = 0; i < 16; ++i) untouched &= s.buf[0x100 + i] == 0x5a;
                rec.num("untouched", untouched);
                s.close();
            });
        INFO(r.error);
        REQUIRE(r.ok);
        CHECK(r.num("n") == 1);
        CHECK(r.num("status") == k.want);
        CHECK(r.num("untouched") == 1);
    }

    // Refused when posted: a result buffer other than 8 bytes, inline, or a
    // QP type without atomics.
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, atomic_side());
            s.connect("p", 1, atomic_conn());
            rec.num("len4", post_atomic(s, s.qps[0], IBV_WR_ATOMIC_FETCH_AND_ADD, 0x1000, s.remote_addr, s.remote_rkey,
                                        1, 0, 1, 4));
            SideOptions uo = atomic_side();
            uo.qp_type = IBV_QPT_UC;
            Side u(h, uo);
            u.connect("u", 1, atomic_conn());
            rec.num("uc", post_atomic(u, u.qps[0], IBV_WR_ATOMIC_FETCH_AND_ADD, 0x1000, u.remote_addr, u.remote_rkey,
                                      1, 0, 1));
            h.barrier("done");
            u.close();
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, atomic_side());
            s.connect("p", 0, atomic_conn());
            SideOptions uo = atomic_side();
            uo.qp_type = IBV_QPT_UC;
            Side u(h, uo);
            u.connect("u", 0, atomic_conn());
            h.barrier("done");
            u.close();
            s.close();
        });
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.num("len4") == EINVAL);
    CHECK(r.num("uc") == EINVAL);
}

TEST_CASE("a repeated atomic is answered from its saved result and never executed twice", "[atomic][verbs]") {
    // Host memory slow enough that the atomic's read outlasts the
    // requester's ACK timeout: it sends the atomic again, and the responder
    // must answer the repeat without adding a second time.
    ConnOptions c = atomic_conn();
    c.timeout = 1;  // 8.2 us
    const auto r = run_pair(
        {{"host.memory_latency_ns", "20000"}},
        [&](Host& h, Record& rec) {
            Side s(h, atomic_side());
            s.connect("d", 1, c);
            h.barrier("ready");
            need_rc(post_atomic(s, s.qps[0], IBV_WR_ATOMIC_FETCH_AND_ADD, 0x1000, s.remote_addr + 0x200, s.remote_rkey,
                                3, 0, 1),
                    "fadd");
            const auto wc = s.poll(s.send_cq, 1, 200000);
            rec.num("n", wc.size());
            if (!wc.empty()) rec.num("status", wc[0].status);
            rec.num("orig", static_cast<long long>(load64(s, 0x1000)));
            h.barrier("done");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, atomic_side());
            const std::uint64_t init = 10;
            std::memcpy(s.buf + 0x200, &init, 8);
            s.connect("d", 0, c);
            h.barrier("ready");
            h.barrier("done");
            h.sleep(us(100));
            rec.num("final", static_cast<long long>(load64(s, 0x200)));
            rec.num("repeats", static_cast<long long>(h.system().counter("node1.hca.responder.duplicate_atomics")));
            s.close();
        });
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.num("n") == 1);
    CHECK(r.num("status") == IBV_WC_SUCCESS);
    CHECK(r.num("orig") == 10);
    CHECK(r.num("final") == 13);
    CHECK(r.num("repeats") >= 1);
}

// The adapter executes hca.atomic_units atomics at once, each holding its
// unit from its DMA read until the original value is on chip. perftest's
// atomics go round 64 cache lines, so no two of a window share bytes: with
// one unit the rate is one atomic per DMA read round trip, with two about
// twice that, and without a limit (and a posting thread not held after its
// doorbell stores) posting and the WQE fetch bound it.
TEST_CASE("the atomic unit bounds the atomic rate: one atomic per DMA read round trip per unit",
          "[atomic][timing]") {
    const auto rate = [](const std::string& set) {
        const CommandResult r = run_hcasim("bw --op atomic_fadd -n 5000 " + set);
        INFO(r.out);
        REQUIRE(r.exit_code == 0);
        const auto row = hcasim_row(r.out);
        REQUIRE(row.size() >= 5);
        return row[4];
    };
    const double one = rate("");
    const double two = rate("--set hca.atomic_units=2");
    const double unlimited = rate("--set hca.atomic_units=0 --set host.cpu.mmio_store_ns=0");
    CHECK(two == Approx(2 * one).epsilon(0.1));
    CHECK(unlimited > 3 * one);
    // One unit: the time per atomic is about the DMA read round trip
    // (host.memory_latency_ns plus the PCIe crossings both ways), well
    // above the 100 ns of host memory alone and below a READ's latency.
    const double ns_per_atomic = 1000.0 / one;
    CHECK(ns_per_atomic > 300);
    CHECK(ns_per_atomic < 1000);
    // A bad unit count is refused, naming the parameter.
    const CommandResult bad = run_hcasim("bw --op atomic_fadd -n 50 --set hca.atomic_units=257", true);
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.out, Catch::Contains("hca.atomic_units"));
}

}  // namespace hcasim::test
