// Memory windows (IBA 10.6.7) through the verbs API: type 1 windows bound
// with ibv_bind_mw, type 2 windows (type 2B: bound to one QP) bound with
// IBV_WR_BIND_MW and invalidated with IBV_WR_LOCAL_INV or the peer's
// IBV_WR_SEND_WITH_INV, RDMA WRITE, READ and atomics through them, and every
// error with the result libibverbs documents. Node 1 is the target: its
// memory is opened to node 0 through windows over regions that grant no
// remote rights of their own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <deque>

#include "testbench/integration/harness.hpp"
#include "testbench/integration/stress_workload.hpp"

using namespace hcasim::test;

namespace {

constexpr unsigned kAllRemote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
constexpr std::size_t kAreaBytes = 64 * 1024;
constexpr int kBindable = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;

ConnOptions atomic_conn() {
    ConnOptions c;
    c.qp_access |= IBV_ACCESS_REMOTE_ATOMIC;
    return c;
}

SideOptions qps(int n) {
    SideOptions o;
    o.qps = n;
    return o;
}

// Memory of the target that windows open: registered with access (by
// default local write and memory window bind, no remote rights) and filled
// with pattern(seed).
struct Area {
    std::uint8_t* buf = nullptr;
    ibv_mr* mr = nullptr;
    std::vector<std::uint8_t> want;  // what it must hold at the end

    Area(ibv_pd* pd, std::uint64_t seed, int access = kBindable) : want(pattern(kAreaBytes, seed)) {
        buf = static_cast<std::uint8_t*>(std::aligned_alloc(4096, kAreaBytes));
        need(buf != nullptr, "aligned_alloc");
        std::memcpy(buf, want.data(), kAreaBytes);
        mr = ibv_reg_mr(pd, buf, kAreaBytes, access);
        need(mr != nullptr, "ibv_reg_mr");
    }
    std::uint64_t addr(std::size_t off) const { return reinterpret_cast<std::uintptr_t>(buf) + off; }
    void check(Record& rec, const std::string& key) const { rec.bytes(key, buf, want.data(), kAreaBytes); }
    void release() {
        need_rc(ibv_dereg_mr(mr), "ibv_dereg_mr");
        std::free(buf);
    }
};

struct WindowRef {
    std::uint64_t addr = 0;
    std::uint32_t rkey = 0;
    std::uint32_t len = 0;
};

int bind_type1(ibv_qp* qp, ibv_mw* mw, ibv_mr* mr, std::uint64_t addr, std::uint64_t len, unsigned rights,
               std::uint64_t wr_id) {
    ibv_mw_bind b{};
    b.wr_id = wr_id;
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info.mr = mr;
    b.bind_info.addr = addr;
    b.bind_info.length = len;
    b.bind_info.mw_access_flags = rights;
    return ibv_bind_mw(qp, mw, &b);
}

int bind_type2(ibv_qp* qp, ibv_mw* mw, std::uint32_t rkey, ibv_mr* mr, std::uint64_t addr, std::uint64_t len,
               unsigned rights, std::uint64_t wr_id) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = rkey;
    wr.bind_mw.bind_info.mr = mr;
    wr.bind_mw.bind_info.addr = addr;
    wr.bind_mw.bind_info.length = len;
    wr.bind_mw.bind_info.mw_access_flags = rights;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

int local_invalidate(ibv_qp* qp, std::uint32_t rkey, std::uint64_t wr_id) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

int send_invalidate(ibv_qp* qp, std::vector<ibv_sge> sges, std::uint32_t rkey, std::uint64_t wr_id) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_SEND_WITH_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = sges.empty() ? nullptr : sges.data();
    wr.num_sge = static_cast<int>(sges.size());
    wr.invalidate_rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

int fetch_add(Side& s, ibv_qp* qp, std::size_t local_off, std::uint64_t raddr, std::uint32_t rkey, std::uint64_t add,
              std::uint64_t wr_id, unsigned flags = 0) {
    ibv_sge sge = s.sge(local_off, 8);
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED | flags;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = add;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

// Completions of a program's CQs by QP: QPs sharing a CQ complete in any
// order, and none is lost while another is waited for.
class Inbox {
public:
    // wait: how long next() waits, in simulated time.
    explicit Inbox(Side& s, hcasim::sim::Tick wait = us(5000)) : m_s(s), m_wait(wait) {}
    // The next completion of qp on cq, waiting up to the Inbox's wait.
    bool next(ibv_cq* cq, ibv_qp* qp, ibv_wc& out) {
        auto& q = m_pending[{cq, qp->qp_num}];
        const hcasim::sim::Tick deadline = m_s.host.now() + m_wait;
        while (q.empty() && m_s.host.now() < deadline) {
            ibv_wc w;
            if (ibv_poll_cq(cq, 1, &w) == 1) {
                m_pending[{cq, w.qp_num}].push_back(w);
                continue;
            }
            m_s.host.sleep(200 * hcasim::sim::kPsPerNs);
        }
        if (q.empty()) return false;
        out = q.front();
        q.pop_front();
        return true;
    }
    // The same, recorded under key (key.n: 1 if one came, else 0).
    void take(ibv_cq* cq, ibv_qp* qp, Record& rec, const std::string& key) {
        ibv_wc w;
        const bool got = next(cq, qp, w);
        rec.num(key + ".n", got ? 1 : 0);
        if (got) rec.wc(key, w);
    }

private:
    Side& m_s;
    hcasim::sim::Tick m_wait;
    std::map<std::pair<ibv_cq*, std::uint32_t>, std::deque<ibv_wc>> m_pending;
};

// RDMA WRITE data is the target's to look at once a later message on the
// same QP has arrived: the initiator ends with a zero-byte SEND, the target
// waits for its receive (posted with expect_send).
void send_after_writes(Side& s, Inbox& in, ibv_qp* qp, Record& rec) {
    rec.num("fence.post", s.post_send(qp, IBV_WR_SEND, {}, IBV_SEND_SIGNALED, 0xfe));
    in.take(s.send_cq, qp, rec, "fence.send");
}
void expect_send(Side& s, ibv_qp* qp, Record& rec) { rec.num("fence.recv_post", s.post_recv(qp, {}, 0xfe)); }
void wait_for_send(Side& s, Inbox& in, ibv_qp* qp, Record& rec) { in.take(s.recv_cq, qp, rec, "fence.recv"); }
void check_fence(const RunResult& r);

// The next async event: its type and the index of the side's QP it names.
void take_event(Side& s, Record& rec, const std::string& key) {
    ibv_async_event ev{};
    rec.num(key + ".rc", ibv_get_async_event(s.ctx, &ev));
    rec.num(key + ".type", static_cast<int>(ev.event_type));
    long idx = -1;
    for (std::size_t i = 0; i < s.qps.size(); ++i)
        if (ev.element.qp == s.qps[i]) idx = static_cast<long>(i);
    rec.num(key + ".qp", idx);
    ibv_ack_async_event(&ev);
}

std::uint64_t load64(const std::uint8_t* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
void store64(std::uint8_t* p, std::uint64_t v) { std::memcpy(p, &v, 8); }

void check_wc(const RunResult& r, const std::string& key, int status, int opcode, std::uint64_t wr_id) {
    INFO("completion " << key);
    CHECK(r.num(key + ".n") == 1);
    CHECK(r.num(key + ".status") == status);
    if (opcode >= 0) CHECK(r.num(key + ".opcode") == opcode);
    CHECK(r.unum(key + ".wr_id") == wr_id);
}

void check_fence(const RunResult& r) {
    CHECK(r.num("fence.post") == 0);
    CHECK(r.num("fence.recv_post") == 0);
    check_wc(r, "fence.send", IBV_WC_SUCCESS, IBV_WC_SEND, 0xfe);
    check_wc(r, "fence.recv", IBV_WC_SUCCESS, IBV_WC_RECV, 0xfe);
}

void check_event(const RunResult& r, const std::string& key, int type, long qp) {
    INFO("async event " << key);
    CHECK(r.num(key + ".rc") == 0);
    CHECK(r.num(key + ".type") == type);
    CHECK(r.num(key + ".qp") == qp);
}

}  // namespace

TEST_CASE("query_device reports type 1 and type 2b memory windows and alloc_mw refuses an unknown type",
          "[integration][mw]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(1));
            ibv_device_attr a{};
            rec.num("query", ibv_query_device(s.ctx, &a));
            rec.num("max_mw", a.max_mw);
            rec.num("flags", a.device_cap_flags);
            ibv_device_attr_ex x{};
            rec.num("query_ex", ibv_query_device_ex(s.ctx, nullptr, &x));
            rec.num("flags_ex", x.device_cap_flags_ex);
            errno = 0;
            ibv_mw* bad = ibv_alloc_mw(s.pd, static_cast<ibv_mw_type>(3));
            rec.num("bad_type", bad == nullptr ? errno : 0);
            ibv_mw* m1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            ibv_mw* m2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            need(m1 && m2, "ibv_alloc_mw");
            rec.num("m1.type", m1->type);
            rec.num("m2.type", m2->type);
            rec.num("keys_differ", m1->rkey != m2->rkey);
            rec.num("m1.pd", m1->pd == s.pd);
            // The protection domain is in use while windows are allocated in it.
            rec.num("dealloc_pd_busy", ibv_dealloc_pd(s.pd));
            rec.num("dealloc1", ibv_dealloc_mw(m1));
            rec.num("dealloc2", ibv_dealloc_mw(m2));
            s.close();
        },
        nullptr);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("query") == 0);
    CHECK(r.num("max_mw") > 0);
    CHECK((r.num("flags") & IBV_DEVICE_MEM_WINDOW) != 0);
    CHECK((r.num("flags") & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0);
    CHECK((r.num("flags") & IBV_DEVICE_MEM_WINDOW_TYPE_2A) == 0);
    CHECK(r.num("query_ex") == 0);
    CHECK((r.num("flags_ex") & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0);
    CHECK(r.num("bad_type") == EINVAL);
    CHECK(r.num("m1.type") == IBV_MW_TYPE_1);
    CHECK(r.num("m2.type") == IBV_MW_TYPE_2);
    CHECK(r.num("keys_differ") == 1);
    CHECK(r.num("m1.pd") == 1);
    CHECK(r.num("dealloc_pd_busy") == EBUSY);
    CHECK(r.num("dealloc1") == 0);
    CHECK(r.num("dealloc2") == 0);
}

TEST_CASE("a type 1 window bound with ibv_bind_mw opens exactly its range to rdma write read and atomics",
          "[integration][mw]") {
    constexpr std::size_t kOff = 4200, kLen = 8000, kWriteAt = 500, kWriteLen = 3000, kAddAt = 16;
    constexpr std::uint64_t kAdd = 0x0102030405060708ull;
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, qps(1));
            Inbox in(s);
            s.connect("t1", 1, atomic_conn());
            const auto win = h.get_value<WindowRef>("win");
            fill_pattern(s.buf, kWriteLen, 7);
            h.barrier("bound");
            rec.num("post_w", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, kWriteLen)}, IBV_SEND_SIGNALED, 1,
                                          win.addr + kWriteAt, win.rkey));
            in.take(s.send_cq, s.qps[0], rec, "write");
            rec.num("post_r", s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(0x10000, kLen)}, IBV_SEND_SIGNALED, 2,
                                          win.addr, win.rkey));
            in.take(s.send_cq, s.qps[0], rec, "read");
            rec.num("post_a", fetch_add(s, s.qps[0], 0x20000, win.addr + kAddAt, win.rkey, kAdd, 3));
            in.take(s.send_cq, s.qps[0], rec, "atomic");
            // What the read must have seen: the target's pattern with the write in it.
            std::vector<std::uint8_t> seen = pattern(kAreaBytes, 99);
            std::memcpy(seen.data() + kOff + kWriteAt, s.buf, kWriteLen);
            rec.bytes("read_data", s.buf + 0x10000, seen.data() + kOff, kLen);
            rec.num("orig_ok", load64(s.buf + 0x20000) == load64(seen.data() + kOff + kAddAt));
            send_after_writes(s, in, s.qps[0], rec);
            h.barrier("done");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, qps(1));
            Inbox in(s);
            s.connect("t1", 0, atomic_conn());
            Area area(s.pd, 99);
            ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            need(mw != nullptr, "ibv_alloc_mw");
            const std::uint32_t first = mw->rkey;
            rec.num("bind", bind_type1(s.qps[0], mw, area.mr, area.addr(kOff), kLen, kAllRemote, 77));
            rec.num("rkey_inc", mw->rkey == ibv_inc_rkey(first));
            in.take(s.send_cq, s.qps[0], rec, "bound");
            h.put_value("win", WindowRef{area.addr(kOff), mw->rkey, kLen});
            expect_send(s, s.qps[0], rec);
            h.barrier("bound");
            wait_for_send(s, in, s.qps[0], rec);
            h.barrier("done");
            fill_pattern(area.want.data() + kOff + kWriteAt, kWriteLen, 7);
            std::uint8_t* at = area.want.data() + kOff + kAddAt;
            store64(at, load64(at) + kAdd);
            area.check(rec, "area");
            rec.num("dealloc", ibv_dealloc_mw(mw));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("bind") == 0);
    CHECK(r.num("rkey_inc") == 1);
    check_wc(r, "bound", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 77);
    CHECK(r.num("post_w") == 0);
    check_wc(r, "write", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    check_wc(r, "read", IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 2);
    CHECK(r.num("read.byte_len") == kLen);
    check_wc(r, "atomic", IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 3);
    CHECK(r.num("read_data.mismatch") == -1);
    CHECK(r.num("orig_ok") == 1);
    check_fence(r);
    CHECK(r.num("area.mismatch") == -1);
    CHECK(r.num("dealloc") == 0);
}

TEST_CASE("rebinding a type 1 window changes its rkey and the old rkey fails with IBV_WC_REM_ACCESS_ERR",
          "[integration][mw]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(1));
            Inbox in(s);
            s.connect("rebind", 1);
            fill_pattern(s.buf, 4096, 11);
            const auto a = h.get_value<WindowRef>("a");
            h.barrier("a");
            rec.num("post_a", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 1000)}, IBV_SEND_SIGNALED, 1,
                                          a.addr, a.rkey));
            in.take(s.send_cq, s.qps[0], rec, "write_a");
            h.barrier("written a");
            const auto b = h.get_value<WindowRef>("b");
            rec.num("post_b", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(1000, 1000)}, IBV_SEND_SIGNALED, 2,
                                          b.addr, b.rkey));
            in.take(s.send_cq, s.qps[0], rec, "write_b");
            // The first binding's rkey is stale now.
            rec.num("post_stale", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(2000, 1000)}, IBV_SEND_SIGNALED,
                                              3, a.addr, a.rkey));
            in.take(s.send_cq, s.qps[0], rec, "stale");
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, qps(1));
            Inbox in(s);
            s.connect("rebind", 0);
            Area area(s.pd, 5);
            ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            need(mw != nullptr, "ibv_alloc_mw");
            rec.num("bind_a", bind_type1(s.qps[0], mw, area.mr, area.addr(0), 4096, IBV_ACCESS_REMOTE_WRITE, 1));
            in.take(s.send_cq, s.qps[0], rec, "bound_a");
            const std::uint32_t key_a = mw->rkey;
            h.put_value("a", WindowRef{area.addr(0), key_a, 4096});
            h.barrier("a");
            h.barrier("written a");
            rec.num("bind_b", bind_type1(s.qps[0], mw, area.mr, area.addr(8192), 4096, IBV_ACCESS_REMOTE_WRITE, 2));
            in.take(s.send_cq, s.qps[0], rec, "bound_b");
            rec.num("key_changed", mw->rkey != key_a && mw->rkey == ibv_inc_rkey(key_a));
            h.put_value("b", WindowRef{area.addr(8192), mw->rkey, 4096});
            take_event(s, rec, "event");
            h.barrier("done");
            fill_pattern(area.want.data(), 1000, 11);
            std::vector<std::uint8_t> second(2000);
            fill_pattern(second.data(), 2000, 11);
            std::memcpy(area.want.data() + 8192, second.data() + 1000, 1000);
            area.check(rec, "area");
            rec.num("dealloc", ibv_dealloc_mw(mw));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    check_wc(r, "bound_a", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    check_wc(r, "bound_b", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 2);
    CHECK(r.num("key_changed") == 1);
    check_wc(r, "write_a", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    check_wc(r, "write_b", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2);
    CHECK(r.num("post_stale") == 0);
    check_wc(r, "stale", IBV_WC_REM_ACCESS_ERR, -1, 3);
    check_event(r, "event", IBV_EVENT_QP_ACCESS_ERR, 0);
    // Nothing of the refused write landed.
    CHECK(r.num("area.mismatch") == -1);
}

TEST_CASE("a type 2 window bound with IBV_WR_BIND_MW serves the qp it is bound to and refuses another",
          "[integration][mw]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(3));
            Inbox in(s);
            s.connect("t2", 1, atomic_conn());
            const auto win = h.get_value<WindowRef>("win");
            fill_pattern(s.buf, 6000, 21);
            h.barrier("bound");
            rec.num("post_w", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 6000)}, IBV_SEND_SIGNALED, 1,
                                          win.addr + 100, win.rkey));
            in.take(s.send_cq, s.qps[0], rec, "write");
            rec.num("post_r", s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(0x10000, 6000)}, IBV_SEND_SIGNALED, 2,
                                          win.addr + 100, win.rkey));
            in.take(s.send_cq, s.qps[0], rec, "read");
            rec.bytes("read_data", s.buf + 0x10000, s.buf, 6000);
            // The same rkey through the other QP: the window is not bound to it.
            rec.num("post_other", s.post_send(s.qps[1], IBV_WR_RDMA_WRITE, {s.sge(0x20000, 64)}, IBV_SEND_SIGNALED,
                                              3, win.addr, win.rkey));
            in.take(s.send_cq, s.qps[1], rec, "other");
            rec.num("post_other_r", s.post_send(s.qps[2], IBV_WR_RDMA_READ, {s.sge(0x20000, 64)}, IBV_SEND_SIGNALED,
                                                4, win.addr, win.rkey));
            in.take(s.send_cq, s.qps[2], rec, "other_read");
            h.barrier("used");
            verify_qp(h, s, 0, rec, "qp0");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, qps(3));
            Inbox in(s);
            s.connect("t2", 0, atomic_conn());
            Area area(s.pd, 31);
            ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            need(mw != nullptr, "ibv_alloc_mw");
            const std::uint32_t key = ibv_inc_rkey(mw->rkey);
            rec.num("bind", bind_type2(s.qps[0], mw, key, area.mr, area.addr(0), 16384, kAllRemote, 5));
            in.take(s.send_cq, s.qps[0], rec, "bound");
            h.put_value("win", WindowRef{area.addr(0), key, 16384});
            h.barrier("bound");
            take_event(s, rec, "event1");
            take_event(s, rec, "event2");
            h.barrier("used");
            verify_qp(h, s, 0, rec, "qp0");
            fill_pattern(area.want.data() + 100, 6000, 21);
            area.check(rec, "area");
            rec.num("dealloc", ibv_dealloc_mw(mw));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("bind") == 0);
    check_wc(r, "bound", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 5);
    check_wc(r, "write", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    check_wc(r, "read", IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 2);
    CHECK(r.num("read_data.mismatch") == -1);
    check_wc(r, "other", IBV_WC_REM_ACCESS_ERR, -1, 3);
    check_wc(r, "other_read", IBV_WC_REM_ACCESS_ERR, -1, 4);
    // The target's QPs the requests came in on break, in either order.
    CHECK(r.num("event1.type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("event2.type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("event1.qp") + r.num("event2.qp") == 3);
    CHECK(r.num("area.mismatch") == -1);
    check_qp_works(r, "qp0");
    CHECK(r.num("dealloc") == 0);
}

TEST_CASE("accesses outside a window but inside its region fail with IBV_WC_REM_ACCESS_ERR and change nothing",
          "[integration][mw]") {
    constexpr std::size_t kOff = 4200, kLen = 8000;
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, qps(5));
            Inbox in(s);
            s.connect("bounds", 1, atomic_conn());
            const auto win = h.get_value<WindowRef>("win");
            fill_pattern(s.buf, kLen, 41);
            h.barrier("bound");
            struct Case {
                ibv_wr_opcode op;
                std::uint64_t raddr;
                std::uint32_t len;
            };
            const Case cases[] = {
                {IBV_WR_RDMA_WRITE, win.addr - 1, 2},          // one byte before the start
                {IBV_WR_RDMA_WRITE, win.addr + kLen - 10, 20},  // over the end
                {IBV_WR_RDMA_READ, win.addr + kLen, 1},         // just past the end
                {IBV_WR_ATOMIC_FETCH_AND_ADD, win.addr + kLen, 8},
            };
            for (std::size_t i = 0; i < 4; ++i) {
                const std::string k = "c" + std::to_string(i);
                const Case& c = cases[i];
                const int rc = c.op == IBV_WR_ATOMIC_FETCH_AND_ADD
                                   ? fetch_add(s, s.qps[i], 0x20000, c.raddr, win.rkey, 1, i)
                                   : s.post_send(s.qps[i], c.op, {s.sge(c.op == IBV_WR_RDMA_READ ? 0x10000 : 0, c.len)},
                                                 IBV_SEND_SIGNALED, i, c.raddr, win.rkey);
                rec.num(k + ".post", rc);
                in.take(s.send_cq, s.qps[i], rec, k);
            }
            // The whole window, exactly.
            rec.num("post_full", s.post_send(s.qps[4], IBV_WR_RDMA_WRITE, {s.sge(0, kLen)}, IBV_SEND_SIGNALED, 9,
                                             win.addr, win.rkey));
            in.take(s.send_cq, s.qps[4], rec, "full");
            send_after_writes(s, in, s.qps[4], rec);
            h.barrier("done");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, qps(5));
            Inbox in(s);
            s.connect("bounds", 0, atomic_conn());
            // The region itself grants every remote right: only the window limits.
            Area area(s.pd, 43, kBindable | static_cast<int>(kAllRemote));
            ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            need(mw != nullptr, "ibv_alloc_mw");
            rec.num("bind", bind_type1(s.qps[0], mw, area.mr, area.addr(kOff), kLen, kAllRemote, 1));
            in.take(s.send_cq, s.qps[0], rec, "bound");
            h.put_value("win", WindowRef{area.addr(kOff), mw->rkey, kLen});
            expect_send(s, s.qps[4], rec);
            h.barrier("bound");
            for (int i = 0; i < 4; ++i) take_event(s, rec, "event" + std::to_string(i));
            wait_for_send(s, in, s.qps[4], rec);
            h.barrier("done");
            fill_pattern(area.want.data() + kOff, kLen, 41);
            area.check(rec, "area");
            rec.num("dealloc", ibv_dealloc_mw(mw));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    check_wc(r, "bound", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    long qp_sum = 0;
    for (int i = 0; i < 4; ++i) {
        const std::string k = "c" + std::to_string(i);
        CHECK(r.num(k + ".post") == 0);
        check_wc(r, k, IBV_WC_REM_ACCESS_ERR, -1, static_cast<std::uint64_t>(i));
        CHECK(r.num("event" + std::to_string(i) + ".type") == IBV_EVENT_QP_ACCESS_ERR);
        qp_sum += r.num("event" + std::to_string(i) + ".qp");
    }
    CHECK(qp_sum == 0 + 1 + 2 + 3);
    check_wc(r, "full", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 9);
    check_fence(r);
    CHECK(r.num("area.mismatch") == -1);
}

TEST_CASE("a window grants only the remote rights given at its bind", "[integration][mw]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(4));
            Inbox in(s);
            s.connect("rights", 1, atomic_conn());
            const auto ro = h.get_value<WindowRef>("ro");
            const auto wo = h.get_value<WindowRef>("wo");
            fill_pattern(s.buf, 512, 51);
            h.barrier("bound");
            rec.num("p0", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 512)}, IBV_SEND_SIGNALED, 10, ro.addr,
                                      ro.rkey));
            in.take(s.send_cq, s.qps[0], rec, "write_ro");
            rec.num("p1", s.post_send(s.qps[1], IBV_WR_RDMA_READ, {s.sge(0x10000, 512)}, IBV_SEND_SIGNALED, 11,
                                      wo.addr, wo.rkey));
            in.take(s.send_cq, s.qps[1], rec, "read_wo");
            rec.num("p2", fetch_add(s, s.qps[2], 0x20000, wo.addr, wo.rkey, 5, 12));
            in.take(s.send_cq, s.qps[2], rec, "atomic_wo");
            // What each window does grant works.
            rec.num("p3", s.post_send(s.qps[3], IBV_WR_RDMA_READ, {s.sge(0x10000, 512)}, IBV_SEND_SIGNALED, 13,
                                      ro.addr, ro.rkey));
            in.take(s.send_cq, s.qps[3], rec, "read_ro");
            rec.num("p4", s.post_send(s.qps[3], IBV_WR_RDMA_WRITE, {s.sge(0, 512)}, IBV_SEND_SIGNALED, 14, wo.addr,
                                      wo.rkey));
            in.take(s.send_cq, s.qps[3], rec, "write_wo");
            send_after_writes(s, in, s.qps[3], rec);
            const auto target = pattern(kAreaBytes, 53);
            rec.bytes("read_data", s.buf + 0x10000, target.data(), 512);
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, qps(4));
            Inbox in(s);
            s.connect("rights", 0, atomic_conn());
            Area area(s.pd, 53);
            ibv_mw* ro = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            ibv_mw* wo = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            need(ro && wo, "ibv_alloc_mw");
            rec.num("b0", bind_type1(s.qps[0], ro, area.mr, area.addr(0), 4096, IBV_ACCESS_REMOTE_READ, 1));
            rec.num("b1", bind_type1(s.qps[0], wo, area.mr, area.addr(8192), 4096, IBV_ACCESS_REMOTE_WRITE, 2));
            in.take(s.send_cq, s.qps[0], rec, "bound_ro");
            in.take(s.send_cq, s.qps[0], rec, "bound_wo");
            h.put_value("ro", WindowRef{area.addr(0), ro->rkey, 4096});
            h.put_value("wo", WindowRef{area.addr(8192), wo->rkey, 4096});
            expect_send(s, s.qps[3], rec);
            h.barrier("bound");
            for (int i = 0; i < 3; ++i) take_event(s, rec, "event" + std::to_string(i));
            wait_for_send(s, in, s.qps[3], rec);
            h.barrier("done");
            fill_pattern(area.want.data() + 8192, 512, 51);
            area.check(rec, "area");
            rec.num("dealloc", ibv_dealloc_mw(ro) | ibv_dealloc_mw(wo));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    check_wc(r, "bound_ro", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    check_wc(r, "bound_wo", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 2);
    check_wc(r, "write_ro", IBV_WC_REM_ACCESS_ERR, -1, 10);
    check_wc(r, "read_wo", IBV_WC_REM_ACCESS_ERR, -1, 11);
    check_wc(r, "atomic_wo", IBV_WC_REM_ACCESS_ERR, -1, 12);
    check_wc(r, "read_ro", IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 13);
    check_wc(r, "write_wo", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 14);
    CHECK(r.num("read_data.mismatch") == -1);
    check_fence(r);
    for (int i = 0; i < 3; ++i) CHECK(r.num("event" + std::to_string(i) + ".type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("area.mismatch") == -1);
    CHECK(r.num("dealloc") == 0);
}

TEST_CASE("a type 2 window invalidated with IBV_WR_LOCAL_INV refuses its rkey and can be bound again under a new one",
          "[integration][mw]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(1));
            Inbox in(s);
            s.connect("linv", 1);
            fill_pattern(s.buf, 2048, 61);
            const auto first = h.get_value<WindowRef>("first");
            h.barrier("first");
            rec.num("p1", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 1024)}, IBV_SEND_SIGNALED, 1,
                                      first.addr, first.rkey));
            in.take(s.send_cq, s.qps[0], rec, "write1");
            h.barrier("written");
            const auto second = h.get_value<WindowRef>("second");
            rec.num("p2", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(1024, 1024)}, IBV_SEND_SIGNALED, 2,
                                      second.addr, second.rkey));
            in.take(s.send_cq, s.qps[0], rec, "write2");
            rec.num("p3", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 1024)}, IBV_SEND_SIGNALED, 3,
                                      first.addr, first.rkey));
            in.take(s.send_cq, s.qps[0], rec, "stale");
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, qps(1));
            Inbox in(s);
            s.connect("linv", 0);
            Area area(s.pd, 63);
            ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            need(mw != nullptr, "ibv_alloc_mw");
            const std::uint32_t k1 = ibv_inc_rkey(mw->rkey), k2 = ibv_inc_rkey(k1);
            rec.num("b1", bind_type2(s.qps[0], mw, k1, area.mr, area.addr(0), 4096, IBV_ACCESS_REMOTE_WRITE, 1));
            in.take(s.send_cq, s.qps[0], rec, "bound1");
            h.put_value("first", WindowRef{area.addr(0), k1, 4096});
            h.barrier("first");
            h.barrier("written");
            rec.num("inv", local_invalidate(s.qps[0], k1, 2));
            in.take(s.send_cq, s.qps[0], rec, "inv");
            // The same window, elsewhere, under the next key.
            rec.num("b2", bind_type2(s.qps[0], mw, k2, area.mr, area.addr(16384), 4096, IBV_ACCESS_REMOTE_WRITE, 3));
            in.take(s.send_cq, s.qps[0], rec, "bound2");
            h.put_value("second", WindowRef{area.addr(16384), k2, 4096});
            take_event(s, rec, "event");
            h.barrier("done");
            std::vector<std::uint8_t> sent(2048);
            fill_pattern(sent.data(), 2048, 61);
            std::memcpy(area.want.data(), sent.data(), 1024);
            std::memcpy(area.want.data() + 16384, sent.data() + 1024, 1024);
            area.check(rec, "area");
            rec.num("dealloc", ibv_dealloc_mw(mw));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    check_wc(r, "bound1", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    check_wc(r, "write1", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    CHECK(r.num("inv") == 0);
    check_wc(r, "inv", IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, 2);
    check_wc(r, "bound2", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 3);
    check_wc(r, "write2", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2);
    check_wc(r, "stale", IBV_WC_REM_ACCESS_ERR, -1, 3);
    check_event(r, "event", IBV_EVENT_QP_ACCESS_ERR, 0);
    CHECK(r.num("area.mismatch") == -1);
}

TEST_CASE("a send with invalidate invalidates the peer's type 2 window and its receive completes with IBV_WC_WITH_INV",
          "[integration][mw]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(1));
            Inbox in(s);
            ConnOptions c;
            c.mtu = IBV_MTU_1024;
            s.connect("sinv", 1, c);
            fill_pattern(s.buf, 5000, 71);
            const auto win = h.get_value<WindowRef>("win");
            h.barrier("bound");
            rec.num("p1", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 700)}, IBV_SEND_SIGNALED, 1, win.addr,
                                      win.rkey));
            in.take(s.send_cq, s.qps[0], rec, "write");
            // Longer than the MTU: only the last packet carries the IETH.
            rec.num("p2", send_invalidate(s.qps[0], {s.sge(1000, 4000)}, win.rkey, 2));
            in.take(s.send_cq, s.qps[0], rec, "send_inv");
            h.barrier("invalidated");
            rec.num("p3", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 700)}, IBV_SEND_SIGNALED, 3, win.addr,
                                      win.rkey));
            in.take(s.send_cq, s.qps[0], rec, "after");
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, qps(1));
            Inbox in(s);
            ConnOptions c;
            c.mtu = IBV_MTU_1024;
            s.connect("sinv", 0, c);
            Area area(s.pd, 73);
            ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            need(mw != nullptr, "ibv_alloc_mw");
            const std::uint32_t key = ibv_inc_rkey(ibv_inc_rkey(mw->rkey));
            rec.num("recv", s.post_recv(s.qps[0], {s.sge(0x8000, 4096)}, 40));
            rec.num("bind", bind_type2(s.qps[0], mw, key, area.mr, area.addr(0), 1024, IBV_ACCESS_REMOTE_WRITE, 1));
            in.take(s.send_cq, s.qps[0], rec, "bound");
            h.put_value("win", WindowRef{area.addr(0), key, 1024});
            rec.num("key", key);
            h.barrier("bound");
            in.take(s.recv_cq, s.qps[0], rec, "recv");
            std::vector<std::uint8_t> sent(5000);
            fill_pattern(sent.data(), 5000, 71);
            rec.bytes("recv_data", s.buf + 0x8000, sent.data() + 1000, 4000);
            h.barrier("invalidated");
            take_event(s, rec, "event");
            h.barrier("done");
            std::memcpy(area.want.data(), sent.data(), 700);
            area.check(rec, "area");
            rec.num("dealloc", ibv_dealloc_mw(mw));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    check_wc(r, "bound", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    check_wc(r, "write", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    check_wc(r, "send_inv", IBV_WC_SUCCESS, IBV_WC_SEND, 2);
    check_wc(r, "recv", IBV_WC_SUCCESS, IBV_WC_RECV, 40);
    CHECK(r.num("recv.byte_len") == 4000);
    CHECK((r.num("recv.wc_flags") & IBV_WC_WITH_INV) != 0);
    CHECK((r.num("recv.wc_flags") & IBV_WC_WITH_IMM) == 0);
    CHECK(r.unum("recv.imm") == r.unum("key"));  // wc.invalidated_rkey shares imm_data's place
    CHECK(r.num("recv_data.mismatch") == -1);
    check_wc(r, "after", IBV_WC_REM_ACCESS_ERR, -1, 3);
    check_event(r, "event", IBV_EVENT_QP_ACCESS_ERR, 0);
    CHECK(r.num("area.mismatch") == -1);
}

TEST_CASE("a send with invalidate of an rkey the responder cannot invalidate fails with IBV_WC_REM_INV_REQ_ERR on both sides",
          "[integration][mw][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(4));
            Inbox in(s);
            s.connect("badinv", 1);
            const auto keys = h.get_value<std::array<std::uint32_t, 3>>("keys");
            h.barrier("bound");
            for (std::size_t i = 0; i < 3; ++i) {
                const std::string k = "c" + std::to_string(i);
                rec.num(k + ".post", send_invalidate(s.qps[i], {s.sge(0, 100)}, keys[i], 10 + i));
                in.take(s.send_cq, s.qps[i], rec, k);
            }
            h.barrier("done");
            verify_qp(h, s, 3, rec, "qp3");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, qps(4));
            Inbox in(s);
            s.connect("badinv", 0);
            Area area(s.pd, 83);
            ibv_mw* t1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            ibv_mw* t2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            ibv_mw* unbound = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            need(t1 && t2 && unbound, "ibv_alloc_mw");
            rec.num("b1", bind_type1(s.qps[3], t1, area.mr, area.addr(0), 4096, IBV_ACCESS_REMOTE_READ, 1));
            const std::uint32_t k2 = ibv_inc_rkey(t2->rkey);
            rec.num("b2", bind_type2(s.qps[3], t2, k2, area.mr, area.addr(0), 4096, IBV_ACCESS_REMOTE_READ, 2));
            in.take(s.send_cq, s.qps[3], rec, "bound1");
            in.take(s.send_cq, s.qps[3], rec, "bound2");
            for (int i = 0; i < 3; ++i) rec.num("recv" + std::to_string(i), s.post_recv(s.qps[i], {s.sge(0, 4096)}, 50 + i));
            // A type 1 window; a type 2 window bound to QP 3, not QP 1; a window never bound.
            h.put_value("keys", std::array<std::uint32_t, 3>{t1->rkey, k2, unbound->rkey});
            h.barrier("bound");
            for (int i = 0; i < 3; ++i) {
                const std::string k = "r" + std::to_string(i);
                in.take(s.recv_cq, s.qps[i], rec, k);
                take_event(s, rec, "event" + std::to_string(i));
            }
            h.barrier("done");
            verify_qp(h, s, 3, rec, "qp3");
            rec.num("dealloc", ibv_dealloc_mw(t1) | ibv_dealloc_mw(t2) | ibv_dealloc_mw(unbound));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    check_wc(r, "bound1", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    check_wc(r, "bound2", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 2);
    for (int i = 0; i < 3; ++i) {
        const std::string k = "c" + std::to_string(i);
        CHECK(r.num(k + ".post") == 0);
        check_wc(r, k, IBV_WC_REM_INV_REQ_ERR, -1, static_cast<std::uint64_t>(10 + i));
        check_wc(r, "r" + std::to_string(i), IBV_WC_REM_INV_REQ_ERR, -1, static_cast<std::uint64_t>(50 + i));
        CHECK(r.num("event" + std::to_string(i) + ".type") == IBV_EVENT_QP_REQ_ERR);
    }
    check_qp_works(r, "qp3");
    CHECK(r.num("dealloc") == 0);
}

TEST_CASE("binds and invalidations the adapter refuses complete with IBV_WC_MW_BIND_ERR and break only their qp",
          "[integration][mw][errors]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(12));
            Inbox in(s);
            s.connect("binderr", 1);
            h.barrier("done");
            verify_qp(h, s, 11, rec, "qp11");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, qps(12));
            Inbox in(s);
            s.connect("binderr", 0);
            ibv_pd* pd2 = ibv_alloc_pd(s.ctx);
            need(pd2 != nullptr, "ibv_alloc_pd");
            Area area(s.pd, 91);
            Area no_bind(s.pd, 92, IBV_ACCESS_LOCAL_WRITE);
            Area read_only(s.pd, 93, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);  // no local write
            ibv_mw* w1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            ibv_mw* w2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            ibv_mw* w2b = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            ibv_mw* w2c = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            ibv_mw* other_pd1 = ibv_alloc_mw(pd2, IBV_MW_TYPE_1);
            ibv_mw* other_pd2 = ibv_alloc_mw(pd2, IBV_MW_TYPE_2);
            need(w1 && w2 && w2b && w2c && other_pd1 && other_pd2, "ibv_alloc_mw");
            const auto q = [&](int i) { return s.qps[static_cast<std::size_t>(i)]; };
            // Refused at once by the verbs library.
            rec.num("type2_bind_mw", bind_type1(q(11), w2, area.mr, area.addr(0), 64, IBV_ACCESS_REMOTE_READ, 1));
            rec.num("type1_wr", bind_type2(q(11), w1, ibv_inc_rkey(w1->rkey), area.mr, area.addr(0), 64,
                                           IBV_ACCESS_REMOTE_READ, 1));
            rec.num("pd_bind_mw", bind_type1(q(11), other_pd1, area.mr, area.addr(0), 64, IBV_ACCESS_REMOTE_READ, 1));
            rec.num("zero_based", bind_type1(q(11), w1, area.mr, area.addr(0), 64,
                                             IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED, 1));
            // A type 2 window bound to QP 9, for QP 8 and QP 10 below.
            const std::uint32_t kc = ibv_inc_rkey(w2c->rkey);
            int rc = bind_type2(q(9), w2c, kc, area.mr, area.addr(0), 64, IBV_ACCESS_REMOTE_READ, 1);
            in.take(s.send_cq, q(9), rec, "bind9");
            // Refused by the adapter: one QP each.
            rc |= bind_type1(q(0), w1, no_bind.mr, no_bind.addr(0), 64, IBV_ACCESS_REMOTE_READ, 100);
            rc |= bind_type1(q(1), w1, area.mr, area.addr(kAreaBytes - 32), 64, IBV_ACCESS_REMOTE_READ, 101);
            rc |= bind_type2(q(2), other_pd2, ibv_inc_rkey(other_pd2->rkey), area.mr, area.addr(0), 64,
                             IBV_ACCESS_REMOTE_READ, 102);
            rc |= bind_type1(q(3), w1, read_only.mr, read_only.addr(0), 64, IBV_ACCESS_REMOTE_WRITE, 103);
            rc |= local_invalidate(q(4), w1->rkey, 104);
            rc |= local_invalidate(q(5), w2->rkey, 105);
            rc |= bind_type2(q(6), w2b, ibv_inc_rkey(w2b->rkey), area.mr, area.addr(0), 64, IBV_ACCESS_REMOTE_READ, 1);
            rc |= bind_type2(q(6), w2b, ibv_inc_rkey(ibv_inc_rkey(w2b->rkey)), area.mr, area.addr(0), 64,
                             IBV_ACCESS_REMOTE_READ, 106);
            rc |= bind_type2(q(7), w2, w2b->rkey, area.mr, area.addr(0), 64, IBV_ACCESS_REMOTE_READ, 107);
            // A window's key is no lkey.
            ibv_sge by_window{area.addr(0), 64, kc};
            {
                ibv_send_wr wr{};
                wr.wr_id = 108;
                wr.opcode = IBV_WR_SEND;
                wr.send_flags = IBV_SEND_SIGNALED;
                wr.sg_list = &by_window;
                wr.num_sge = 1;
                ibv_send_wr* bad = nullptr;
                rc |= ibv_post_send(q(8), &wr, &bad);
            }
            // The window bound to QP 9 invalidated from QP 10.
            rc |= local_invalidate(q(10), kc, 110);
            rec.num("post_rc", rc);
            in.take(s.send_cq, q(6), rec, "first_bind6");
            const int failing[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10};
            for (int i : failing) {
                const std::string k = "q" + std::to_string(i);
                in.take(s.send_cq, q(i), rec, k);
                // The QP is in error: what it is given next is flushed.
                rec.num(k + ".post_after", s.post_send(q(i), IBV_WR_RDMA_WRITE, {s.sge(0, 8)}, IBV_SEND_SIGNALED,
                                                       999, s.remote_addr, s.remote_rkey));
                in.take(s.send_cq, q(i), rec, k + ".after");
                rec.num(k + ".state", static_cast<int>(qp_state(q(i))));
            }
            h.barrier("done");
            verify_qp(h, s, 11, rec, "qp11");
            // A region with windows bound to it stays; freed windows release it.
            rec.num("dereg_busy", ibv_dereg_mr(area.mr));
            int dealloc = 0;
            for (ibv_mw* m : {w1, w2, w2b, w2c, other_pd1, other_pd2}) dealloc |= ibv_dealloc_mw(m);
            rec.num("dealloc", dealloc);
            area.release();
            no_bind.release();
            read_only.release();
            rec.num("dealloc_pd2", ibv_dealloc_pd(pd2));
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("type2_bind_mw") == EINVAL);
    CHECK(r.num("type1_wr") == EINVAL);
    CHECK(r.num("pd_bind_mw") == EPERM);
    CHECK(r.num("zero_based") == EINVAL);
    CHECK(r.num("post_rc") == 0);
    check_wc(r, "first_bind6", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    check_wc(r, "bind9", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    const struct {
        int qp;
        int status;
        int opcode;
    } want[] = {
        {0, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW},    // region without IBV_ACCESS_MW_BIND
        {1, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW},    // range past the region's end
        {2, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW},    // window of another protection domain
        {3, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW},    // remote write on a region without local write
        {4, IBV_WC_MW_BIND_ERR, IBV_WC_LOCAL_INV},  // invalidation of a type 1 window
        {5, IBV_WC_MW_BIND_ERR, IBV_WC_LOCAL_INV},  // invalidation of a window not bound
        {6, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW},    // a type 2 window already bound
        {7, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW},    // new key naming another window
        {8, IBV_WC_LOC_PROT_ERR, IBV_WC_SEND},      // a window's key as an lkey
        {10, IBV_WC_MW_BIND_ERR, IBV_WC_LOCAL_INV}, // a type 2 window bound to another QP
    };
    for (const auto& w : want) {
        const std::string k = "q" + std::to_string(w.qp);
        check_wc(r, k, w.status, w.opcode, static_cast<std::uint64_t>(w.qp == 10 ? 110 : 100 + w.qp));
        CHECK(r.num(k + ".post_after") == 0);
        check_wc(r, k + ".after", IBV_WC_WR_FLUSH_ERR, -1, 999);
        CHECK(r.num(k + ".state") == IBV_QPS_ERR);
    }
    check_qp_works(r, "qp11");
    CHECK(r.num("dereg_busy") == EBUSY);
    CHECK(r.num("dealloc") == 0);
    CHECK(r.num("dealloc_pd2") == 0);
}

TEST_CASE("deallocating a bound window invalidates its rkey and frees its region for deregistration",
          "[integration][mw]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(2));
            Inbox in(s);
            s.connect("dealloc", 1);
            fill_pattern(s.buf, 256, 101);
            const auto w1 = h.get_value<WindowRef>("w1");
            const auto w2 = h.get_value<WindowRef>("w2");
            h.barrier("bound");
            rec.num("p0", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 256)}, IBV_SEND_SIGNALED, 1, w1.addr,
                                      w1.rkey));
            in.take(s.send_cq, s.qps[0], rec, "ok1");
            h.barrier("used");
            h.barrier("freed");
            rec.num("p1", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 256)}, IBV_SEND_SIGNALED, 2, w1.addr,
                                      w1.rkey));
            in.take(s.send_cq, s.qps[0], rec, "freed1");
            rec.num("p2", s.post_send(s.qps[1], IBV_WR_RDMA_READ, {s.sge(0x1000, 256)}, IBV_SEND_SIGNALED, 3, w2.addr,
                                      w2.rkey));
            in.take(s.send_cq, s.qps[1], rec, "freed2");
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            Side s(h, qps(2));
            Inbox in(s);
            s.connect("dealloc", 0);
            Area area(s.pd, 103);
            ibv_mw* m1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            ibv_mw* m2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            need(m1 && m2, "ibv_alloc_mw");
            rec.num("b1", bind_type1(s.qps[0], m1, area.mr, area.addr(0), 4096, kAllRemote, 1));
            const std::uint32_t k2 = ibv_inc_rkey(m2->rkey);
            rec.num("b2", bind_type2(s.qps[1], m2, k2, area.mr, area.addr(4096), 4096, kAllRemote, 2));
            in.take(s.send_cq, s.qps[0], rec, "bound1");
            in.take(s.send_cq, s.qps[1], rec, "bound2");
            h.put_value("w1", WindowRef{area.addr(0), m1->rkey, 4096});
            h.put_value("w2", WindowRef{area.addr(4096), k2, 4096});
            h.barrier("bound");
            h.barrier("used");
            rec.num("dereg_busy", ibv_dereg_mr(area.mr));
            rec.num("dealloc1", ibv_dealloc_mw(m1));
            rec.num("dealloc2", ibv_dealloc_mw(m2));
            h.barrier("freed");
            take_event(s, rec, "event_a");
            take_event(s, rec, "event_b");
            h.barrier("done");
            fill_pattern(area.want.data(), 256, 101);
            area.check(rec, "area");
            rec.num("dereg", ibv_dereg_mr(area.mr));
            std::free(area.buf);
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    check_wc(r, "bound1", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    check_wc(r, "bound2", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 2);
    check_wc(r, "ok1", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    CHECK(r.num("dereg_busy") == EBUSY);
    CHECK(r.num("dealloc1") == 0);
    CHECK(r.num("dealloc2") == 0);
    check_wc(r, "freed1", IBV_WC_REM_ACCESS_ERR, -1, 2);
    check_wc(r, "freed2", IBV_WC_REM_ACCESS_ERR, -1, 3);
    CHECK(r.num("event_a.type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("event_b.type") == IBV_EVENT_QP_ACCESS_ERR);
    CHECK(r.num("area.mismatch") == -1);
    CHECK(r.num("dereg") == 0);
}

TEST_CASE("a type 2 window bound on a uc qp takes that qp's rdma writes", "[integration][mw]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            SideOptions o = qps(1);
            o.qp_type = IBV_QPT_UC;
            Side s(h, o);
            Inbox in(s);
            s.connect("uc", 1);
            fill_pattern(s.buf, 9000, 111);
            const auto win = h.get_value<WindowRef>("win");
            h.barrier("bound");
            rec.num("p", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 9000)}, IBV_SEND_SIGNALED, 1, win.addr,
                                     win.rkey));
            in.take(s.send_cq, s.qps[0], rec, "write");
            rec.num("pi", s.post_send(s.qps[0], IBV_WR_SEND_WITH_INV, {s.sge(0, 8)}, IBV_SEND_SIGNALED, 2, 0, 0));
            // UC keeps order: once this SEND is in, so is the WRITE before it.
            rec.num("ps", s.post_send(s.qps[0], IBV_WR_SEND, {s.sge(0, 8)}, IBV_SEND_SIGNALED, 3));
            in.take(s.send_cq, s.qps[0], rec, "send");
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record& rec) {
            SideOptions o = qps(1);
            o.qp_type = IBV_QPT_UC;
            Side s(h, o);
            Inbox in(s);
            s.connect("uc", 0);
            Area area(s.pd, 113);
            ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            need(mw != nullptr, "ibv_alloc_mw");
            const std::uint32_t key = ibv_inc_rkey(mw->rkey);
            rec.num("bind", bind_type2(s.qps[0], mw, key, area.mr, area.addr(1000), 9000, IBV_ACCESS_REMOTE_WRITE, 1));
            in.take(s.send_cq, s.qps[0], rec, "bound");
            rec.num("recv", s.post_recv(s.qps[0], {s.sge(0, 64)}, 20));
            h.put_value("win", WindowRef{area.addr(1000), key, 9000});
            h.barrier("bound");
            in.take(s.recv_cq, s.qps[0], rec, "recv");
            rec.num("post_inv", local_invalidate(s.qps[0], key, 2));
            in.take(s.send_cq, s.qps[0], rec, "inv");
            h.barrier("done");
            fill_pattern(area.want.data() + 1000, 9000, 111);
            area.check(rec, "area");
            rec.num("dealloc", ibv_dealloc_mw(mw));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    check_wc(r, "bound", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 1);
    check_wc(r, "write", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    // UC has no SEND with invalidate (it needs acknowledgements).
    CHECK(r.num("pi") == EINVAL);
    check_wc(r, "send", IBV_WC_SUCCESS, IBV_WC_SEND, 3);
    check_wc(r, "recv", IBV_WC_SUCCESS, IBV_WC_RECV, 20);
    check_wc(r, "inv", IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, 2);
    CHECK(r.num("area.mismatch") == -1);
}

TEST_CASE("the ibv_wr_bind_mw ibv_wr_local_inv and ibv_wr_send_inv calls post what ibv_post_send does",
          "[integration][mw][verbs-ex]") {
    // Each side adds one extended QP with the memory window operations.
    const auto extended_qp = [](Side& s) {
        ibv_qp_init_attr_ex a{};
        a.send_cq = s.send_cq;
        a.recv_cq = s.recv_cq;
        a.qp_type = IBV_QPT_RC;
        a.cap.max_send_wr = 16;
        a.cap.max_recv_wr = 16;
        a.cap.max_send_sge = 1;
        a.cap.max_recv_sge = 1;
        a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        a.pd = s.pd;
        a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
                           IBV_QP_EX_WITH_SEND_WITH_INV;
        ibv_qp* qp = ibv_create_qp_ex(s.ctx, &a);
        need(qp != nullptr, "ibv_create_qp_ex");
        s.qps.push_back(qp);
        ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
        need(x != nullptr, "ibv_qp_to_qp_ex");
        return x;
    };
    const auto r = run_pair(
        {},
        [&](Host& h, Record& rec) {
            Side s(h, qps(0));
            Inbox in(s);
            ibv_qp_ex* x = extended_qp(s);
            s.connect("ex", 1);
            fill_pattern(s.buf, 300, 121);
            const auto win = h.get_value<WindowRef>("win");
            h.barrier("bound");
            ibv_wr_start(x);
            x->wr_id = 1;
            x->wr_flags = IBV_SEND_SIGNALED;
            ibv_wr_rdma_write(x, win.rkey, win.addr);
            ibv_wr_set_sge(x, s.mr->lkey, reinterpret_cast<std::uintptr_t>(s.buf), 300);
            x->wr_id = 2;
            ibv_wr_send_inv(x, win.rkey);
            ibv_wr_set_sge(x, s.mr->lkey, reinterpret_cast<std::uintptr_t>(s.buf), 16);
            rec.num("complete", ibv_wr_complete(x));
            in.take(s.send_cq, s.qps[0], rec, "write");
            in.take(s.send_cq, s.qps[0], rec, "send_inv");
            h.barrier("done");
            s.close();
        },
        [&](Host& h, Record& rec) {
            Side s(h, qps(0));
            Inbox in(s);
            ibv_qp_ex* x = extended_qp(s);
            s.connect("ex", 0);
            Area area(s.pd, 123);
            ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            ibv_mw* mw1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
            need(mw && mw1, "ibv_alloc_mw");
            const std::uint32_t key = ibv_inc_rkey(mw->rkey);
            rec.num("recv", s.post_recv(s.qps[0], {s.sge(0, 64)}, 30));
            ibv_mw_bind_info info{area.mr, area.addr(64), 1024, IBV_ACCESS_REMOTE_WRITE};
            ibv_wr_start(x);
            x->wr_id = 7;
            x->wr_flags = IBV_SEND_SIGNALED;
            ibv_wr_bind_mw(x, mw, key, &info);
            rec.num("complete", ibv_wr_complete(x));
            in.take(s.send_cq, s.qps[0], rec, "bound");
            // A type 1 window through ibv_wr_bind_mw: refused, nothing posted.
            ibv_wr_start(x);
            ibv_wr_bind_mw(x, mw1, ibv_inc_rkey(mw1->rkey), &info);
            rec.num("complete_type1", ibv_wr_complete(x));
            h.put_value("win", WindowRef{area.addr(64), key, 1024});
            h.barrier("bound");
            in.take(s.recv_cq, s.qps[0], rec, "recv_inv");
            // Invalidated by the peer: a local invalidate now finds it unbound.
            ibv_wr_start(x);
            x->wr_id = 8;
            x->wr_flags = IBV_SEND_SIGNALED;
            ibv_wr_local_inv(x, key);
            rec.num("complete_inv", ibv_wr_complete(x));
            in.take(s.send_cq, s.qps[0], rec, "inv");
            h.barrier("done");
            fill_pattern(area.want.data() + 64, 300, 121);
            area.check(rec, "area");
            rec.num("dealloc", ibv_dealloc_mw(mw) | ibv_dealloc_mw(mw1));
            area.release();
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("complete") == 0);
    check_wc(r, "bound", IBV_WC_SUCCESS, IBV_WC_BIND_MW, 7);
    CHECK(r.num("complete_type1") == EINVAL);
    check_wc(r, "write", IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    check_wc(r, "send_inv", IBV_WC_SUCCESS, IBV_WC_SEND, 2);
    check_wc(r, "recv_inv", IBV_WC_SUCCESS, IBV_WC_RECV, 30);
    CHECK((r.num("recv_inv.wc_flags") & IBV_WC_WITH_INV) != 0);
    CHECK(r.num("complete_inv") == 0);
    check_wc(r, "inv", IBV_WC_MW_BIND_ERR, IBV_WC_LOCAL_INV, 8);
    CHECK(r.num("area.mismatch") == -1);
    CHECK(r.num("dealloc") == 0);
}

TEST_CASE("a bind costs the mpt entry reads and write: less when the entries are cached", "[integration][mw][timing]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            Side s(h, qps(1));
            s.connect("timing", 1);
            Area area(s.pd, 131);
            ibv_mw* mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
            need(mw != nullptr, "ibv_alloc_mw");
            std::uint32_t key = mw->rkey;
            // Posted to completion seen, polling without pause.
            auto timed = [&](const std::string& k, auto post) {
                const hcasim::sim::Tick t0 = h.now();
                rec.num(k + ".post", post());
                ibv_wc w{};
                while (ibv_poll_cq(s.send_cq, 1, &w) == 0) {
                }
                rec.num(k + ".status", static_cast<int>(w.status));
                rec.num(k + ".ns", (h.now() - t0) / hcasim::sim::kPsPerNs);
            };
            auto bind = [&]() {
                key = ibv_inc_rkey(key);
                return bind_type2(s.qps[0], mw, key, area.mr, area.addr(0), 4096, IBV_ACCESS_REMOTE_READ, 1);
            };
            auto invalidate = [&]() { return local_invalidate(s.qps[0], key, 2); };
            timed("bind_cold", bind);  // neither entry has been used: both are fetched
            timed("inv", invalidate);
            timed("bind_warm", bind);
            timed("inv_warm", invalidate);
            rec.num("dealloc", ibv_dealloc_mw(mw));
            area.release();
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, qps(1));
            s.connect("timing", 0);
            h.barrier("done");
            s.close();
        });
    HCASIM_REQUIRE_RUN(r);
    for (const char* k : {"bind_cold", "inv", "bind_warm", "inv_warm"}) {
        INFO(k << ": " << r.num(std::string(k) + ".ns") << " ns");
        CHECK(r.num(std::string(k) + ".post") == 0);
        CHECK(r.num(std::string(k) + ".status") == IBV_WC_SUCCESS);
        CHECK(r.num(std::string(k) + ".ns") > 0);
    }
    // Two 64-byte reads of context memory (each a PCIe round trip of about
    // 550 ns) make the cold bind the slowest.
    CHECK(r.num("bind_cold.ns") > r.num("bind_warm.ns") + 800);
    CHECK(r.num("bind_warm.ns") >= r.num("inv_warm.ns"));
    CHECK(r.num("dealloc") == 0);
}

// ---------------------------------------------------------------------------
// Seeded random traffic through windows: on 4 to 7 QPs, rounds in which the
// target binds each QP a window of random type over a random part of that
// QP's slice of one region (which grants no remote rights itself), with
// random rights; the initiator does random RDMA WRITEs, READs and a fetch &
// add inside it, and the window is retired (type 1 unbound; type 2
// invalidated locally or by the initiator's SEND with invalidate). Some QPs
// end with an invalid access (outside the window, without the right, under
// a stale rkey or another QP's type 2 window): IBV_WC_REM_ACCESS_ERR, the
// target's QP breaks, nothing lands, and the other QPs carry on. Every
// completion, every byte read and, at the end, every byte of the region is
// checked against a model both programs derive from the seed.
// Over lossy links (1 % of packets dropped, 1 % corrupted) the same plans
// must give the same bytes: a resent READ or fetch & add, a SEND with
// invalidate whose ACK was lost, must change nothing twice. An invalid
// access whose NAK is lost meets a target QP already in error, which drops
// what it is sent again: it may end in IBV_WC_RETRY_EXC_ERR instead.
// HCASIM_STRESS_SEED=S replays seed S alone, HCASIM_STRESS_SEEDS=N runs N.

namespace {
namespace mwstress {

constexpr std::size_t kSlice = 128 * 1024;  // of the region per QP
constexpr int kRounds = 4;
constexpr int kMaxQps = 7;
constexpr std::uint64_t kFenceId = 0xfe;

enum class Kind { Write, Read, FetchAdd };
enum class Bad { None, OutOfWindow, NoRight, Stale, OtherQp };

const char* kind_name(Kind k) { return k == Kind::Write ? "WRITE" : k == Kind::Read ? "READ" : "FETCH_ADD"; }
const char* bad_name(Bad b) {
    switch (b) {
    case Bad::None: return "none";
    case Bad::OutOfWindow: return "outside the window";
    case Bad::NoRight: return "without the right";
    case Bad::Stale: return "stale rkey";
    case Bad::OtherQp: return "another QP's window";
    }
    return "?";
}

struct Op {
    Kind kind = Kind::Write;
    std::uint64_t off = 0;  // from the start of its QP's slice
    std::uint32_t len = 0;
    std::uint64_t value = 0;  // WRITE: data seed; FETCH_ADD: the addend
};

struct Round {
    bool alive = false;  // the QP works when the round starts
    int type = 1;
    std::uint64_t woff = 0;
    std::uint32_t wlen = 0;
    unsigned rights = 0;
    std::vector<Op> ops;
    bool send_inv = false;  // type 2: retired by the initiator's SEND with invalidate
    Bad bad = Bad::None;    // the QP's last access, which must fail
    Op bad_op;
    int bad_qp = -1;     // OtherQp: whose window (bad_op.off is from that QP's slice)
};

struct Plan {
    std::uint64_t seed = 0;
    bool lossy = false;  // links drop and corrupt 1 % of packets
    int nqps = 0;
    Round r[kRounds][kMaxQps];
    std::string dump() const {
        std::ostringstream os;
        for (int k = 0; k < kRounds; ++k)
            for (int q = 0; q < nqps; ++q) {
                const Round& x = r[k][q];
                if (!x.alive) continue;
                os << "round " << k << " QP " << q << ": type " << x.type << " window [" << x.woff << ", +" << x.wlen
                   << ") rights " << x.rights << (x.send_inv ? " send_inv" : "") << "\n";
                for (const Op& op : x.ops) os << "  " << kind_name(op.kind) << " " << op.len << " B at " << op.off << "\n";
                if (x.bad != Bad::None)
                    os << "  bad: " << bad_name(x.bad) << " " << kind_name(x.bad_op.kind) << " " << x.bad_op.len << " B at "
                       << x.bad_op.off << "\n";
            }
        return os.str();
    }
    std::string describe() const {
        std::ostringstream os;
        os << "seed " << seed << ", " << nqps << " QPs" << (lossy ? ", lossy links" : "");
        for (int k = 0; k < kRounds; ++k)
            for (int q = 0; q < nqps; ++q)
                if (r[k][q].bad != Bad::None) os << ", QP " << q << " fails in round " << k << " (" << bad_name(r[k][q].bad) << ")";
        return os.str();
    }
};

unsigned draw_rights(SplitMix64& g) {
    const unsigned bits = static_cast<unsigned>(g.range(1, 7));
    return ((bits & 1) ? unsigned(IBV_ACCESS_REMOTE_WRITE) : 0u) | ((bits & 2) ? unsigned(IBV_ACCESS_REMOTE_READ) : 0u) |
           ((bits & 4) ? unsigned(IBV_ACCESS_REMOTE_ATOMIC) : 0u);
}

// An 8-byte aligned slot inside [woff, woff + wlen) of a slice (slices are
// page aligned), or false.
bool atomic_slot(SplitMix64& g, const Round& x, std::uint64_t& off) {
    const std::uint64_t first = (x.woff + 7) & ~std::uint64_t(7);
    if (first + 8 > x.woff + x.wlen) return false;
    off = first + 8 * g.below((x.woff + x.wlen - first) / 8);
    return true;
}

Op inside(SplitMix64& g, const Round& x, Kind kind) {
    Op op;
    op.kind = kind;
    op.len = static_cast<std::uint32_t>(g.range(1, std::min<std::uint32_t>(x.wlen, 16384)));
    op.off = x.woff + g.below(x.wlen - op.len + 1);
    op.value = g.next();
    return op;
}

Plan make_plan(std::uint64_t seed) {
    Plan p;
    p.seed = seed;
    // Hashed: neighbouring seeds must not give shifted copies of one stream.
    SplitMix64 g{stress::mix(seed, 0x6d77)};
    p.nqps = static_cast<int>(g.range(4, kMaxQps));
    int fails_in[kMaxQps];
    for (int q = 0; q < p.nqps; ++q) fails_in[q] = g.chance(40) ? static_cast<int>(g.below(kRounds)) : kRounds;
    for (int k = 0; k < kRounds; ++k) {
        for (int q = 0; q < p.nqps; ++q) {
            Round& x = p.r[k][q];
            x.alive = k <= fails_in[q];
            if (!x.alive) continue;
            x.type = g.chance(50) ? 1 : 2;
            x.woff = g.below(kSlice - 4096);
            x.wlen = static_cast<std::uint32_t>(g.range(64, std::min<std::uint64_t>(65536, kSlice - x.woff)));
            x.rights = draw_rights(g);
            std::vector<Kind> kinds;
            if (x.rights & IBV_ACCESS_REMOTE_WRITE) kinds.push_back(Kind::Write);
            if (x.rights & IBV_ACCESS_REMOTE_READ) kinds.push_back(Kind::Read);
            const int n = kinds.empty() ? 0 : static_cast<int>(g.range(1, 6));
            for (int i = 0; i < n; ++i) x.ops.push_back(inside(g, x, kinds[g.below(kinds.size())]));
            // A fetch & add last: a READ or WRITE after it could overtake its write-back.
            std::uint64_t slot = 0;
            if ((x.rights & IBV_ACCESS_REMOTE_ATOMIC) && (x.ops.empty() || g.chance(60)) && atomic_slot(g, x, slot)) {
                Op a;
                a.kind = Kind::FetchAdd;
                a.off = slot;
                a.len = 8;
                a.value = g.next();
                x.ops.push_back(a);
            }
            x.send_inv = x.type == 2 && k != fails_in[q] && g.chance(50);
        }
        // The invalid accesses, once every QP's window of the round is known.
        for (int q = 0; q < p.nqps; ++q) {
            Round& x = p.r[k][q];
            if (k != fails_in[q]) continue;
            std::vector<Bad> can{Bad::OutOfWindow};
            if (x.rights != kAllRemote) can.push_back(Bad::NoRight);
            if (k > 0) can.push_back(Bad::Stale);
            std::vector<int> others;
            for (int j = 0; j < p.nqps; ++j)
                if (j != q && p.r[k][j].alive && p.r[k][j].type == 2 && !p.r[k][j].send_inv) others.push_back(j);
            if (!others.empty()) can.push_back(Bad::OtherQp);
            x.bad = can[g.below(can.size())];
            switch (x.bad) {
            case Bad::OutOfWindow: {
                x.bad_op.kind = g.chance(50) ? Kind::Write : Kind::Read;
                x.bad_op.len = 2;
                // Straddling the start or the end, inside the slice.
                const bool before = x.woff > 0 && (x.woff + x.wlen == kSlice || g.chance(50));
                x.bad_op.off = before ? x.woff - 1 : x.woff + x.wlen - 1;
                x.bad_op.value = g.next();
                break;
            }
            case Bad::NoRight: {
                std::vector<Kind> missing;
                if (!(x.rights & IBV_ACCESS_REMOTE_WRITE)) missing.push_back(Kind::Write);
                if (!(x.rights & IBV_ACCESS_REMOTE_READ)) missing.push_back(Kind::Read);
                std::uint64_t slot = 0;
                if (!(x.rights & IBV_ACCESS_REMOTE_ATOMIC) && atomic_slot(g, x, slot)) missing.push_back(Kind::FetchAdd);
                if (missing.empty()) missing.push_back(Kind::Write);  // cannot happen: rights are not all
                x.bad_op = inside(g, x, missing[g.below(missing.size())]);
                if (x.bad_op.kind == Kind::FetchAdd) {
                    x.bad_op.off = slot;
                    x.bad_op.len = 8;
                }
                break;
            }
            case Bad::Stale:
                x.bad_op = inside(g, p.r[k - 1][q], Kind::Write);
                break;
            case Bad::OtherQp:
                x.bad_qp = others[g.below(others.size())];
                x.bad_op = inside(g, p.r[k][x.bad_qp], Kind::Write);
                break;
            case Bad::None: break;
            }
        }
    }
    return p;
}

std::uint64_t region_seed(std::uint64_t seed) { return seed ^ 0x77aa55; }

// Lossy: a local ACK timeout of 268 us (exponent 6) instead of 67 ms, and
// room to wait for seven of them in a row.
ConnOptions stress_conn(const Plan& p) {
    ConnOptions c = atomic_conn();
    if (p.lossy) c.timeout = 6;
    return c;
}
hcasim::sim::Tick stress_wait(const Plan& p) { return us(p.lossy ? 50000 : 5000); }

// What a valid op does to the model of the region; returns a FETCH_ADD's
// original value.
std::uint64_t apply(std::vector<std::uint8_t>& model, int q, const Op& op) {
    std::uint8_t* at = model.data() + static_cast<std::size_t>(q) * kSlice + op.off;
    if (op.kind == Kind::Write) fill_pattern(at, op.len, op.value);
    if (op.kind != Kind::FetchAdd) return 0;
    const std::uint64_t orig = load64(at);
    store64(at, orig + op.value);
    return orig;
}

struct WindowKeys {
    std::uint32_t key[kMaxQps] = {};
};

void initiator(Host& h, const Plan& p, Record& rec) {
    SideOptions o;
    o.qps = p.nqps;
    o.buffer_bytes = static_cast<std::size_t>(p.nqps) * kSlice;
    o.max_send_wr = 32;
    Side s(h, o);
    Inbox in(s, stress_wait(p));
    s.connect("mwstress", 1, stress_conn(p));
    std::vector<std::uint8_t> model = pattern(static_cast<std::size_t>(p.nqps) * kSlice, region_seed(p.seed));
    std::vector<std::string> errors;
    WindowKeys keys[kRounds];
    const std::uint64_t base = h.get_value<std::uint64_t>("region");
    auto raddr = [&](int q, std::uint64_t off) { return base + static_cast<std::uint64_t>(q) * kSlice + off; };
    auto post = [&](int q, const Op& op, std::uint32_t rkey, std::size_t local, std::uint64_t wr_id, unsigned flags) {
        ibv_qp* qp = s.qps[static_cast<std::size_t>(q)];
        if (op.kind == Kind::FetchAdd) return fetch_add(s, qp, local, raddr(q, op.off), rkey, op.value, wr_id, flags);
        if (op.kind == Kind::Write) fill_pattern(s.buf + local, op.len, op.value);
        else std::memset(s.buf + local, kGuardByte, op.len);
        return s.post_send(qp, op.kind == Kind::Write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ, {s.sge(local, op.len)},
                           IBV_SEND_SIGNALED | flags, wr_id, raddr(q, op.off), rkey);
    };
    // True when the completion came with the status `excused` allows instead.
    auto expect = [&](int q, const std::string& what, int status, std::uint64_t wr_id, int excused = -1) {
        ibv_wc w;
        if (!in.next(s.send_cq, s.qps[static_cast<std::size_t>(q)], w)) {
            errors.push_back("QP " + std::to_string(q) + " " + what + ": no completion");
            return false;
        }
        if (w.wr_id == wr_id && static_cast<int>(w.status) == excused) return true;
        if (w.status != status || w.wr_id != wr_id)
            errors.push_back("QP " + std::to_string(q) + " " + what + ": " + ibv_wc_status_str(w.status) + ", wr_id " +
                             std::to_string(w.wr_id));
        return false;
    };
    long ops = 0, bytes = 0, invalid = 0, nak_lost = 0;
    for (int k = 0; k < kRounds; ++k) {
        const std::string rk = std::to_string(k);
        keys[k] = h.get_value<WindowKeys>("keys/" + rk);
        h.barrier("bound/" + rk);
        // The valid accesses of every QP at once; a later access waits for
        // the READs before it (an RDMA WRITE may overtake a READ otherwise).
        struct Check {
            int q;
            std::size_t local;
            Op op;
            std::vector<std::uint8_t> want;
        };
        std::vector<Check> checks;
        for (int q = 0; q < p.nqps; ++q) {
            const Round& x = p.r[k][q];
            if (!x.alive) continue;
            std::size_t local = static_cast<std::size_t>(q) * kSlice;
            bool read_before = false;
            for (std::size_t i = 0; i < x.ops.size(); ++i) {
                const Op& op = x.ops[i];
                Check c{q, local, op, {}};
                if (op.kind == Kind::Read) {
                    const std::uint8_t* at = model.data() + static_cast<std::size_t>(q) * kSlice + op.off;
                    c.want.assign(at, at + op.len);
                } else {
                    const std::uint64_t orig = apply(model, q, op);
                    if (op.kind == Kind::FetchAdd) c.want.assign(reinterpret_cast<const std::uint8_t*>(&orig),
                                                                 reinterpret_cast<const std::uint8_t*>(&orig) + 8);
                }
                const int rc = post(q, op, keys[k].key[q], local, i, read_before ? IBV_SEND_FENCE : 0);
                if (rc) errors.push_back("QP " + std::to_string(q) + " round " + rk + ": post failed " + std::to_string(rc));
                read_before |= op.kind == Kind::Read;
                checks.push_back(std::move(c));
                local += (op.len + 64 + 7) & ~std::size_t(7);
                ++ops;
                bytes += op.len;
            }
        }
        {
            std::vector<std::size_t> next(static_cast<std::size_t>(p.nqps), 0);
            for (const Check& c : checks) {
                const std::size_t i = next[static_cast<std::size_t>(c.q)]++;
                expect(c.q, "round " + rk + " " + kind_name(c.op.kind), IBV_WC_SUCCESS, i);
                if (c.op.kind == Kind::Write) continue;
                const long long bad = first_mismatch(s.buf + c.local, c.want.data(), c.want.size());
                if (bad >= 0)
                    errors.push_back("QP " + std::to_string(c.q) + " round " + rk + " " + kind_name(c.op.kind) + " of " +
                                     std::to_string(c.op.len) + " B at " + std::to_string(c.op.off) +
                                     ": wrong data from byte " + std::to_string(bad));
            }
        }
        // Then the invalid accesses and the SENDs with invalidate.
        for (int q = 0; q < p.nqps; ++q) {
            const Round& x = p.r[k][q];
            if (!x.alive) continue;
            const std::size_t local = static_cast<std::size_t>(q) * kSlice;
            if (x.bad != Bad::None) {
                const std::uint32_t rkey = x.bad == Bad::Stale     ? keys[k - 1].key[q]
                                           : x.bad == Bad::OtherQp ? keys[k].key[x.bad_qp]
                                                                   : keys[k].key[q];
                Op op = x.bad_op;
                if (x.bad == Bad::OtherQp) {
                    // The other QP's window: an address in its slice.
                    op.off += static_cast<std::uint64_t>(x.bad_qp - q) * kSlice;
                }
                if (post(q, op, rkey, local, 100, 0)) errors.push_back("QP " + std::to_string(q) + ": invalid access not posted");
                ++invalid;
            } else if (x.send_inv) {
                if (send_invalidate(s.qps[static_cast<std::size_t>(q)], {s.sge(local, 32)}, keys[k].key[q], 200))
                    errors.push_back("QP " + std::to_string(q) + ": SEND with invalidate not posted");
            }
        }
        for (int q = 0; q < p.nqps; ++q) {
            const Round& x = p.r[k][q];
            if (!x.alive) continue;
            if (x.bad != Bad::None) {
                if (expect(q, std::string("round ") + rk + " access " + bad_name(x.bad), IBV_WC_REM_ACCESS_ERR, 100,
                           p.lossy ? IBV_WC_RETRY_EXC_ERR : -1))
                    ++nak_lost;
                if (x.bad_op.kind == Kind::Read &&
                    std::count(s.buf + q * kSlice, s.buf + q * kSlice + x.bad_op.len, kGuardByte) != x.bad_op.len)
                    errors.push_back("QP " + std::to_string(q) + ": a refused READ wrote into its buffer");
            } else if (x.send_inv) {
                expect(q, "round " + rk + " SEND with invalidate", IBV_WC_SUCCESS, 200);
            }
        }
        h.barrier("used/" + rk);
        h.barrier("retired/" + rk);
    }
    // A SEND on every QP still up: its WRITEs have landed when it arrives.
    for (int q = 0; q < p.nqps; ++q) {
        if (!p.r[kRounds - 1][q].alive || p.r[kRounds - 1][q].bad != Bad::None) continue;
        if (s.post_send(s.qps[static_cast<std::size_t>(q)], IBV_WR_SEND, {}, IBV_SEND_SIGNALED, kFenceId))
            errors.push_back("fence SEND not posted");
        expect(q, "last SEND", IBV_WC_SUCCESS, kFenceId);
    }
    h.barrier("end");
    std::string all;
    for (const auto& e : errors) all += e + "; ";
    rec.set("errors0", all);
    rec.num("ops", ops);
    rec.num("bytes", bytes);
    rec.num("invalid", invalid);
    rec.num("nak_lost", nak_lost);
    rec.num("lost", static_cast<long>(link_losses(h)));
    rec.num("end_ps", static_cast<long>(h.now()));
    h.barrier("closed");
    s.close();
}

void target(Host& h, const Plan& p, Record& rec) {
    SideOptions o;
    o.qps = p.nqps;
    o.max_send_wr = 32;
    Side s(h, o);
    Inbox in(s, stress_wait(p));
    s.connect("mwstress", 0, stress_conn(p));
    const std::size_t bytes = static_cast<std::size_t>(p.nqps) * kSlice;
    auto* region = static_cast<std::uint8_t*>(std::aligned_alloc(4096, bytes));
    need(region != nullptr, "aligned_alloc");
    fill_pattern(region, bytes, region_seed(p.seed));
    ibv_mr* mr = ibv_reg_mr(s.pd, region, bytes, kBindable);
    need(mr != nullptr, "ibv_reg_mr");
    h.put_value("region", static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(region)));
    std::vector<std::uint8_t> model(bytes);
    fill_pattern(model.data(), bytes, region_seed(p.seed));
    std::vector<ibv_mw*> mw1, mw2;
    std::vector<std::uint32_t> key2;
    for (int q = 0; q < p.nqps; ++q) {
        mw1.push_back(ibv_alloc_mw(s.pd, IBV_MW_TYPE_1));
        mw2.push_back(ibv_alloc_mw(s.pd, IBV_MW_TYPE_2));
        need(mw1.back() && mw2.back(), "ibv_alloc_mw");
        key2.push_back(mw2.back()->rkey);
    }
    std::vector<std::string> errors;
    auto expect = [&](ibv_cq* cq, int q, const std::string& what, std::uint64_t wr_id, ibv_wc* out = nullptr) {
        ibv_wc w{};
        if (!in.next(cq, s.qps[static_cast<std::size_t>(q)], w))
            errors.push_back("target QP " + std::to_string(q) + " " + what + ": no completion");
        else if (w.status != IBV_WC_SUCCESS || w.wr_id != wr_id)
            errors.push_back("target QP " + std::to_string(q) + " " + what + ": " + ibv_wc_status_str(w.status) +
                             ", wr_id " + std::to_string(w.wr_id));
        if (out) *out = w;
    };
    long events = 0;
    for (int k = 0; k < kRounds; ++k) {
        const std::string rk = std::to_string(k);
        WindowKeys keys;
        for (int q = 0; q < p.nqps; ++q) {
            const Round& x = p.r[k][q];
            if (!x.alive) continue;
            ibv_qp* qp = s.qps[static_cast<std::size_t>(q)];
            const std::uint64_t at = reinterpret_cast<std::uintptr_t>(region) + static_cast<std::uint64_t>(q) * kSlice + x.woff;
            int rc;
            if (x.type == 1) {
                rc = bind_type1(qp, mw1[static_cast<std::size_t>(q)], mr, at, x.wlen, x.rights, 10);
                keys.key[q] = mw1[static_cast<std::size_t>(q)]->rkey;
            } else {
                key2[static_cast<std::size_t>(q)] = ibv_inc_rkey(key2[static_cast<std::size_t>(q)]);
                keys.key[q] = key2[static_cast<std::size_t>(q)];
                rc = bind_type2(qp, mw2[static_cast<std::size_t>(q)], keys.key[q], mr, at, x.wlen, x.rights, 10);
            }
            if (x.send_inv && !rc) rc = s.post_recv(qp, {s.sge(static_cast<std::size_t>(q) * 64, 64)}, 30);
            if (rc) errors.push_back("target QP " + std::to_string(q) + " round " + rk + ": bind not posted");
        }
        for (int q = 0; q < p.nqps; ++q)
            if (p.r[k][q].alive) expect(s.send_cq, q, "round " + rk + " bind", 10);
        h.put_value("keys/" + rk, keys);
        h.barrier("bound/" + rk);
        h.barrier("used/" + rk);
        for (int q = 0; q < p.nqps; ++q) {
            const Round& x = p.r[k][q];
            if (!x.alive) continue;
            for (const Op& op : x.ops) apply(model, q, op);
            if (x.bad != Bad::None) {
                // The invalid access broke the QP it came in on.
                Record ev;
                take_event(s, ev, "e");
                const std::string got = ev.str();
                if (got.find("e.type=" + std::to_string(IBV_EVENT_QP_ACCESS_ERR) + "\n") == std::string::npos)
                    errors.push_back("round " + rk + ": expected an access error event, got " + got);
                ++events;
                continue;
            }
            ibv_qp* qp = s.qps[static_cast<std::size_t>(q)];
            if (x.type == 1) {
                // Unbound: no region, a new key.
                ibv_mw_bind b{};
                b.wr_id = 20;
                b.send_flags = IBV_SEND_SIGNALED;
                if (ibv_bind_mw(qp, mw1[static_cast<std::size_t>(q)], &b)) errors.push_back("unbind not posted");
                expect(s.send_cq, q, "round " + rk + " unbind", 20);
            } else if (x.send_inv) {
                ibv_wc w{};
                expect(s.recv_cq, q, "round " + rk + " SEND with invalidate", 30, &w);
                if (!(w.wc_flags & IBV_WC_WITH_INV) || w.invalidated_rkey != keys.key[q])
                    errors.push_back("target QP " + std::to_string(q) + " round " + rk + ": receive without the invalidated rkey");
            } else {
                if (local_invalidate(qp, keys.key[q], 40)) errors.push_back("local invalidate not posted");
                expect(s.send_cq, q, "round " + rk + " local invalidate", 40);
            }
        }
        h.barrier("retired/" + rk);
    }
    for (int q = 0; q < p.nqps; ++q) {
        if (!p.r[kRounds - 1][q].alive || p.r[kRounds - 1][q].bad != Bad::None) continue;
        if (s.post_recv(s.qps[static_cast<std::size_t>(q)], {}, kFenceId)) errors.push_back("fence receive not posted");
    }
    h.barrier("end");
    for (int q = 0; q < p.nqps; ++q) {
        if (!p.r[kRounds - 1][q].alive || p.r[kRounds - 1][q].bad != Bad::None) continue;
        expect(s.recv_cq, q, "last SEND", kFenceId);
    }
    const long long mismatch = first_mismatch(region, model.data(), bytes);
    if (mismatch >= 0)
        errors.push_back("region byte " + std::to_string(mismatch) + " (QP " + std::to_string(mismatch / static_cast<long long>(kSlice)) +
                         "'s slice) differs from the model");
    // Windows go, bound or not; then the region can.
    int rc = 0;
    for (int q = 0; q < p.nqps; ++q) rc |= ibv_dealloc_mw(mw1[static_cast<std::size_t>(q)]) | ibv_dealloc_mw(mw2[static_cast<std::size_t>(q)]);
    rc |= ibv_dereg_mr(mr);
    if (rc) errors.push_back("windows or region not freed");
    std::free(region);
    std::string all;
    for (const auto& e : errors) all += e + "; ";
    rec.set("errors1", all);
    rec.num("events", events);
    h.barrier("closed");
    s.close();
}

}  // namespace mwstress
}  // namespace

namespace {

struct MwStressTotals {
    long lost = 0;      // packets the links dropped or damaged
    long invalid = 0;   // invalid accesses
    long nak_lost = 0;  // of them, ended in IBV_WC_RETRY_EXC_ERR
};

RunResult run_mw_plan(const mwstress::Plan& plan) {
    Overrides ov;
    if (plan.lossy) add_lossy_links(ov);
    return run_pair(
        ov, [&](Host& h, Record& rec) { mwstress::initiator(h, plan, rec); },
        [&](Host& h, Record& rec) { mwstress::target(h, plan, rec); });
}

// Runs count seeds from first (or the ones HCASIM_STRESS_SEED(S) name).
MwStressTotals run_mw_stress(std::uint64_t first, int count, bool lossy) {
    MwStressTotals t;
    for (std::uint64_t seed : stress::seeds(first, count)) {
        mwstress::Plan plan = mwstress::make_plan(seed);
        plan.lossy = lossy;
        if (stress::env("HCASIM_STRESS_DUMP")) std::printf("%s", plan.dump().c_str());
        const auto r = run_mw_plan(plan);
        INFO(plan.describe() << "; replay with HCASIM_STRESS_SEED=" << seed);
        HCASIM_REQUIRE_RUN(r);
        CHECK(r.get("errors0") == "");
        CHECK(r.get("errors1") == "");
        CHECK(r.num("events") == r.num("invalid"));
        CHECK(r.num("ops") > 0);
        // A lost NAK takes a lost packet.
        CHECK(r.num("nak_lost") <= r.num("lost"));
        if (!lossy) CHECK(r.num("lost") == 0);
        t.lost += r.num("lost");
        t.invalid += r.num("invalid");
        t.nak_lost += r.num("nak_lost");
    }
    return t;
}

}  // namespace

TEST_CASE("random rdma through random memory windows on many qps moves every byte and refuses every invalid access",
          "[integration][mw][stress]") {
    run_mw_stress(9001, 8, false);
}

TEST_CASE("random rdma through random memory windows over lossy links changes every byte once and refuses every invalid access",
          "[integration][mw][stress][lossy]") {
    const MwStressTotals t = run_mw_stress(9101, 16, true);
    INFO(t.lost << " packets lost, " << t.nak_lost << " of " << t.invalid << " invalid accesses ended in retry exceeded");
    CHECK(t.lost > 0);
    // Most NAKs arrive: a responder that refused by dropping would give
    // retry exceeded every time.
    if (t.invalid >= 8) CHECK(t.nak_lost * 4 <= t.invalid);
}

TEST_CASE("the same memory window plan over lossy links run twice gives identical records",
          "[integration][mw][stress][lossy][determinism]") {
    mwstress::Plan plan = mwstress::make_plan(9101);
    plan.lossy = true;
    const RunResult a = run_mw_plan(plan), b = run_mw_plan(plan);
    HCASIM_REQUIRE_RUN(a);
    HCASIM_REQUIRE_RUN(b);
    CHECK(a.get("errors0") == "");
    CHECK(a.num("lost") > 0);
    CHECK(a.kv == b.kv);
}
