// Test harness for the two-node integration tests.
//
// SystemC elaborates one design per process, so every scenario runs in a
// forked child (run_isolated). Host programs cannot fail a Catch assertion
// from inside a SystemC thread; instead they write key=value results into a
// Record shared by every program of the run, the child serialises it, and
// the test asserts on the parsed map in the parent.
//
// Also here: deterministic payload patterns, and a small verbs endpoint
// (Side) that gives the tests control over every QP attribute.
#pragma once

#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/sim/config.hpp"
#include "testbench/system/isolated.hpp"
#include "testbench/system/split_mix.hpp"
#include "testbench/system/system.hpp"

namespace hcasim::test {

using testbench::Host;

// ---------------------------------------------------------------------------
// Deterministic data.

using testbench::SplitMix64;

// Byte i of the stream for seed is the same whatever the buffer it lands in.
inline void fill_pattern(std::uint8_t* p, std::size_t n, std::uint64_t seed) { testbench::fill_split_mix(p, n, seed); }

inline std::vector<std::uint8_t> pattern(std::size_t n, std::uint64_t seed) {
    std::vector<std::uint8_t> v(n);
    fill_pattern(v.data(), n, seed);
    return v;
}

inline std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

// Page-aligned storage for buffers the adapter reads and writes: where a
// buffer starts within a page changes how DMA splits it, so a buffer from
// the heap would make a run's timing depend on the heap's layout.
template <typename T>
struct PageAllocator {
    using value_type = T;
    PageAllocator() = default;
    template <typename U>
    PageAllocator(const PageAllocator<U>&) {}
    T* allocate(std::size_t n) {
        const std::size_t bytes = (n * sizeof(T) + 4095) / 4096 * 4096;
        void* p = std::aligned_alloc(4096, bytes ? bytes : 4096);
        if (!p) throw std::bad_alloc();
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t) { std::free(p); }
    template <typename U>
    bool operator==(const PageAllocator<U>&) const { return true; }
    template <typename U>
    bool operator!=(const PageAllocator<U>&) const { return false; }
};
using PageBytes = std::vector<std::uint8_t, PageAllocator<std::uint8_t>>;

// Index of the first differing byte, or -1.
inline long long first_mismatch(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) return static_cast<long long>(i);
    return -1;
}

// ---------------------------------------------------------------------------
// Results: written by the programs in the child, read by the test.

class Record {
public:
    void set(const std::string& key, const std::string& value) {
        std::string v = value;
        for (char& c : v)
            if (c == '\n' || c == '\r') c = ' ';
        m_kv[key] = v;
    }
    template <typename T>
    void num(const std::string& key, T v) {
        std::ostringstream os;
        os.precision(17);
        os << +v;  // unary plus: a uint8_t prints as a number, not a character
        set(key, os.str());
    }
    // Compares got with want: <key>.mismatch is -1 when equal, else the
    // first differing byte; <key>.hash_got and .hash_want are FNV-1a.
    void bytes(const std::string& key, const std::uint8_t* got, const std::uint8_t* want, std::size_t n) {
        num(key + ".mismatch", first_mismatch(got, want, n));
        num(key + ".hash_got", fnv1a(got, n));
        num(key + ".hash_want", fnv1a(want, n));
    }
    void wc(const std::string& key, const ibv_wc& w) {
        num(key + ".status", static_cast<int>(w.status));
        num(key + ".opcode", static_cast<int>(w.opcode));
        num(key + ".byte_len", w.byte_len);
        num(key + ".wr_id", w.wr_id);
        num(key + ".qp_num", w.qp_num);
        num(key + ".wc_flags", w.wc_flags);
        num(key + ".imm", w.imm_data);
    }
    bool has(const std::string& key) const { return m_kv.count(key) != 0; }
    std::string str() const {
        std::string s;
        for (const auto& [k, v] : m_kv) s += k + "=" + v + "\n";
        return s;
    }

private:
    std::map<std::string, std::string> m_kv;
};

// What a program found wrong, for the test to check: <side>.errors counts
// it and <side>.first_errors holds the first few, for the failure's message.
struct ErrorTally {
    ErrorTally(Record& r, std::string s) : rec(r), side(std::move(s)) {}
    Record& rec;
    std::string side;
    int n = 0;
    std::string first;
    void operator()(const std::string& e) {
        if (n++ < 6) first += " | " + e;
    }
    void write() {
        rec.num(side + ".errors", n);
        rec.set(side + ".first_errors", first);
    }
};

struct RunResult {
    bool ok = false;    // the child finished and no program failed
    std::string error;  // why not
    std::map<std::string, std::string> kv;

    bool has(const std::string& k) const { return kv.count(k) != 0; }
    std::string get(const std::string& k) const {
        auto it = kv.find(k);
        return it == kv.end() ? std::string("<missing " + k + ">") : it->second;
    }
    // LLONG_MIN when the key is missing or not a number.
    long long num(const std::string& k) const {
        auto it = kv.find(k);
        if (it == kv.end()) return LLONG_MIN;
        try {
            return std::stoll(it->second);
        } catch (...) {
            return LLONG_MIN;
        }
    }
    unsigned long long unum(const std::string& k) const {
        auto it = kv.find(k);
        if (it == kv.end()) return ULLONG_MAX;
        try {
            return std::stoull(it->second);
        } catch (...) {
            return ULLONG_MAX;
        }
    }
    double real(const std::string& k) const {
        auto it = kv.find(k);
        if (it == kv.end()) return -1e300;
        try {
            return std::stod(it->second);
        } catch (...) {
            return -1e300;
        }
    }
};

// What went wrong in a two-node run whose programs keep an ErrorTally each
// ("node0", "node1"), for a failure's message; and whether nothing did.
inline std::string errors_of(const RunResult& r) {
    return r.error + r.get("node0.first_errors") + r.get("node1.first_errors");
}
inline bool clean(const RunResult& r) { return r.ok && r.num("node0.errors") == 0 && r.num("node1.errors") == 0; }

// In a forked child, Catch's fatal-signal handler would report a crash as
// a failure of the parent's test case, with a summary of its own; the
// default action lets the parent report "child killed by signal N" instead.
// Sanitizer builds keep their handlers, which print the useful report.
inline void default_fatal_signals() {
#if !defined(__SANITIZE_ADDRESS__)
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
#endif
}

using Program = std::function<void(Host&, Record&)>;
using Overrides = std::vector<std::pair<std::string, std::string>>;

// Links that drop and corrupt 1 % of the packets each way: the lossy links
// of the stress tests.
inline const Overrides kLossyLinks{{"fault.drop", "0.01"}, {"fault.corrupt", "0.01"}};
inline void add_lossy_links(Overrides& o) { o.insert(o.end(), kLossyLinks.begin(), kLossyLinks.end()); }

// Packets the first `links` links (a pair's only one by default) dropped
// or damaged.
inline std::uint64_t link_losses(Host& h, int links = 1) {
    std::uint64_t n = 0;
    for (int l = 0; l < links; ++l)
        n += h.system().counter("link" + std::to_string(l) + ".dropped") +
             h.system().counter("link" + std::to_string(l) + ".corrupted");
    return n;
}

// Runs one program per entry (program i on node i % nodes) in a fresh child
// process. An empty Program runs nothing. nodes = 0: fabric.nodes of the
// overrides.
inline RunResult run_programs(const Overrides& overrides, const std::vector<Program>& programs, int nodes = 2) {
    const testbench::IsolatedResult iso = testbench::run_isolated([&](std::ostream& os) {
        default_fatal_signals();
        sim::Config cfg;
        for (const auto& [k, v] : overrides) cfg.set(k, v);
        Record rec;
        try {
            testbench::System sys(cfg, nodes > 0 ? nodes : static_cast<int>(cfg.get_int("fabric.nodes")));
            std::vector<testbench::System::Program> progs;
            for (const Program& p : programs) {
                if (p)
                    progs.push_back([&rec, &p](Host& h) { p(h, rec); });
                else
                    progs.push_back(nullptr);
            }
            sys.run(progs);
        } catch (const std::exception& e) {
            rec.set("error", e.what());
        }
        os << rec.str();
    });
    RunResult r;
    std::istringstream in(iso.output);
    std::string line;
    while (std::getline(in, line)) {
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        r.kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    if (!iso.ok || !iso.error.empty()) r.error = iso.error.empty() ? "child failed" : iso.error;
    if (r.kv.count("error")) r.error += (r.error.empty() ? "" : "; ") + r.kv["error"];
    r.ok = iso.ok && iso.error.empty() && !r.kv.count("error");
    return r;
}

inline RunResult run_pair(const Overrides& overrides, const Program& p0, const Program& p1) {
    return run_programs(overrides, {p0, p1});
}

// Runs the hcasim command with args; its standard error is kept in out when
// with_stderr, else dropped.
struct CommandResult {
    int exit_code = -1;
    std::string out;
};
// Runs a shell command line; out is what it writes to standard output.
inline CommandResult run_command(const std::string& cmd) {
    CommandResult c;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return c;
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) c.out.append(buf, n);
    const int status = pclose(p);
    c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return c;
}
inline CommandResult run_hcasim(const std::string& args, bool with_stderr = false) {
    const std::string cmd = std::string("'") + HCASIM_BINARY + "' " + args;
    return run_command(with_stderr ? cmd + " 2>&1" : cmd + " 2>/dev/null");
}

// The value of counter name in --counters text output; -1 when absent.
inline long long counter_in(const std::string& out, const std::string& name) {
    const std::string key = name + " = ";
    const auto at = out.find(key);
    if (at == std::string::npos || (at > 0 && out[at - 1] != '\n')) return -1;
    return std::stoll(out.substr(at + key.size()));
}

// The first result row of hcasim lat / bw text output (one size: its row).
inline std::vector<double> hcasim_row(const std::string& out) {
    const auto header = out.find("#bytes");
    if (header == std::string::npos) return {};
    const auto row = out.find('\n', header) + 1;
    std::istringstream in(out.substr(row, out.find('\n', row) - row));
    std::vector<double> v;
    for (double d; in >> d;) v.push_back(d);
    return v;
}

// The total message rate (Mpps) of hcasim msgrate's text output.
inline double msgrate_total_mpps(const std::string& out) {
    const std::string key = "\n total ";
    const auto at = out.find(key);
    REQUIRE(at != std::string::npos);
    std::istringstream row(out.substr(at + key.size()));
    std::uint64_t messages = 0;
    double mpps = -1;
    row >> messages >> mpps;
    REQUIRE(mpps >= 0);
    return mpps;
}

// A file's bytes (empty if it cannot be read).
inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

// ---------------------------------------------------------------------------
// Verbs helpers for the programs (run in the child, on a SystemC thread).

inline void need(bool ok, const std::string& what) {
    if (!ok) throw std::runtime_error(what + " failed: " + std::strerror(errno));
}
inline void need_rc(int rc, const std::string& what) {
    if (rc != 0) throw std::runtime_error(what + " failed: " + std::strerror(rc < 0 ? -rc : rc));
}

inline sim::Tick us(double v) { return static_cast<sim::Tick>(v * 1e6); }

struct SideOptions {
    int qps = 1;
    int cq_depth = 512;
    bool separate_recv_cq = true;  // false: one CQ for both queues
    std::uint32_t max_send_wr = 64;
    std::uint32_t max_recv_wr = 64;
    std::uint32_t max_sge = 4;
    std::uint32_t max_inline = 0;
    int sq_sig_all = 0;
    std::size_t buffer_bytes = 1 << 20;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    bool channel = false;
    void* cq_context = nullptr;  // given to ibv_create_cq for both CQs
    ibv_qp_type qp_type = IBV_QPT_RC;
    std::vector<ibv_qp_type> qp_types;  // per QP when not empty (else qp_type for all)
    bool srq = false;                   // every QP takes its receives from one SRQ
    std::uint32_t srq_max_wr = 512;
};

struct ConnOptions {
    ibv_mtu mtu = IBV_MTU_4096;
    std::uint8_t rnr_retry = 7;
    std::uint8_t min_rnr_timer = 1;  // 10 us
    std::uint8_t retry_cnt = 7;
    std::uint8_t timeout = 14;
    std::uint8_t max_rd_atomic = 16;
    int qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    std::uint32_t psn = 0x1000;  // this side's first send PSN (the peer's expected PSN)
    bool global = false;         // a GRH on every packet (the path through GID index sgid_index)
    std::uint8_t sgid_index = 0;
    std::uint32_t qkey = 0x11111111;  // UD
};

// What a side publishes to its peer.
struct SideInfo {
    std::uint16_t lid = 0;
    std::uint32_t psn = 0;
    std::uint64_t addr = 0;
    std::uint32_t rkey = 0;
    std::uint64_t length = 0;
    std::uint32_t nqps = 0;
    std::uint32_t qpn[32] = {};
    ibv_gid gid[2] = {};  // GID table indices 0 and 1
};

inline int qp_to_init(ibv_qp* qp, int access) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = access;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

inline int qp_to_rtr(ibv_qp* qp, std::uint16_t dlid, std::uint32_t dest_qpn, std::uint32_t rq_psn,
                     const ConnOptions& c) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = c.mtu;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = c.max_rd_atomic;
    a.min_rnr_timer = c.min_rnr_timer;
    a.ah_attr.dlid = dlid;
    a.ah_attr.port_num = 1;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

inline int qp_to_rts(ibv_qp* qp, std::uint32_t sq_psn, const ConnOptions& c) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = sq_psn;
    a.timeout = c.timeout;
    a.retry_cnt = c.retry_cnt;
    a.rnr_retry = c.rnr_retry;
    a.max_rd_atomic = c.max_rd_atomic;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC);
}

inline ibv_qp_state qp_state(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(qp, &a, IBV_QP_STATE, &init) != 0) return static_cast<ibv_qp_state>(-1);
    return a.qp_state;
}

// One node's verbs resources: device, PD, CQs, RC QPs and one registered
// buffer. The destructor releases nothing (it may run while an exception
// unwinds a SystemC thread, where blocking verbs must not be called): call
// close() at the end of a program that succeeded.
class Side {
public:
    Side(Host& h, const SideOptions& o) : host(h), opt(o) {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        need(list != nullptr && n > 0, "ibv_get_device_list");
        device = list[0];
        ctx = ibv_open_device(list[0]);
        need(ctx != nullptr, "ibv_open_device");
        ibv_free_device_list(list);
        pd = ibv_alloc_pd(ctx);
        need(pd != nullptr, "ibv_alloc_pd");
        if (o.channel) {
            channel = ibv_create_comp_channel(ctx);
            need(channel != nullptr, "ibv_create_comp_channel");
        }
        send_cq = ibv_create_cq(ctx, o.cq_depth, o.cq_context, channel, 0);
        need(send_cq != nullptr, "ibv_create_cq");
        recv_cq = send_cq;
        if (o.separate_recv_cq) {
            recv_cq = ibv_create_cq(ctx, o.cq_depth, o.cq_context, channel, 0);
            need(recv_cq != nullptr, "ibv_create_cq");
        }
        const std::size_t bytes = (o.buffer_bytes + 4095) & ~std::size_t(4095);
        buf = static_cast<std::uint8_t*>(std::aligned_alloc(4096, bytes));
        need(buf != nullptr, "aligned_alloc");
        std::memset(buf, 0, bytes);
        mr = ibv_reg_mr(pd, buf, o.buffer_bytes, o.access);
        need(mr != nullptr, "ibv_reg_mr");
        if (o.srq) {
            ibv_srq_init_attr sa{};
            sa.attr.max_wr = o.srq_max_wr;
            sa.attr.max_sge = o.max_sge;
            srq = ibv_create_srq(pd, &sa);
            need(srq != nullptr, "ibv_create_srq");
        }
        for (int i = 0; i < o.qps; ++i)
            qps.push_back(create_qp(send_cq, recv_cq,
                                    static_cast<std::size_t>(i) < o.qp_types.size() ? o.qp_types[static_cast<std::size_t>(i)]
                                                                                   : o.qp_type));
    }
    ~Side() = default;
    Side(const Side&) = delete;
    Side& operator=(const Side&) = delete;

    ibv_qp* create_qp(ibv_cq* scq, ibv_cq* rcq) { return create_qp(scq, rcq, opt.qp_type); }
    ibv_qp* create_qp(ibv_cq* scq, ibv_cq* rcq, ibv_qp_type type) {
        ibv_qp_init_attr init{};
        init.send_cq = scq;
        init.recv_cq = rcq;
        init.srq = srq;
        init.qp_type = type;
        init.sq_sig_all = opt.sq_sig_all;
        init.cap.max_send_wr = opt.max_send_wr;
        init.cap.max_recv_wr = opt.max_recv_wr;
        init.cap.max_send_sge = opt.max_sge;
        init.cap.max_recv_sge = opt.max_sge;
        init.cap.max_inline_data = opt.max_inline;
        ibv_qp* qp = ibv_create_qp(pd, &init);
        need(qp != nullptr, "ibv_create_qp");
        return qp;
    }

    // Publishes this side under "<tag>/<my index>", reads the peer's and
    // brings every QP to RTS connected to the peer's QP of the same index.
    void connect(const std::string& tag, int peer, const ConnOptions& c = {}) {
        ibv_port_attr port{};
        SideInfo mine = describe(c.psn, &port);
        for (int g = 0; g < 2 && g < port.gid_tbl_len; ++g) need_rc(ibv_query_gid(ctx, 1, g, &mine.gid[g]), "ibv_query_gid");
        host.put_value(tag + "/" + std::to_string(host.index()), mine);
        peer_info = host.get_value<SideInfo>(tag + "/" + std::to_string(peer));
        remote_addr = peer_info.addr;
        remote_rkey = peer_info.rkey;
        ibv_ah_attr av{};
        av.dlid = peer_info.lid;
        av.port_num = 1;
        if (c.global) {
            av.is_global = 1;
            av.grh.dgid = peer_info.gid[c.sgid_index];
            av.grh.sgid_index = c.sgid_index;
            av.grh.hop_limit = 1;
        }
        bool any_ud = false;
        for (std::size_t i = 0; i < qps.size(); ++i) {
            const ibv_qp_type type = qps[i]->qp_type;
            if (type == IBV_QPT_UD) {
                any_ud = true;
                ibv_qp_attr a{};
                a.qp_state = IBV_QPS_INIT;
                a.port_num = 1;
                a.qkey = c.qkey;
                need_rc(ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
                        "ibv_modify_qp(INIT)");
                a.qp_state = IBV_QPS_RTR;
                need_rc(ibv_modify_qp(qps[i], &a, IBV_QP_STATE), "ibv_modify_qp(RTR)");
                a.qp_state = IBV_QPS_RTS;
                a.sq_psn = mine.psn;
                need_rc(ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "ibv_modify_qp(RTS)");
                continue;
            }
            need_rc(qp_to_init(qps[i], c.qp_access), "ibv_modify_qp(INIT)");
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_RTR;
            a.path_mtu = c.mtu;
            a.dest_qp_num = peer_info.qpn[i];
            a.rq_psn = peer_info.psn;
            a.max_dest_rd_atomic = c.max_rd_atomic;
            a.min_rnr_timer = c.min_rnr_timer;
            a.ah_attr = av;
            const int rc_only = type == IBV_QPT_RC ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0;
            need_rc(ibv_modify_qp(qps[i], &a,
                                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | rc_only),
                    "ibv_modify_qp(RTR)");
            if (type == IBV_QPT_RC) {
                need_rc(qp_to_rts(qps[i], mine.psn, c), "ibv_modify_qp(RTS)");
            } else {
                ibv_qp_attr r{};
                r.qp_state = IBV_QPS_RTS;
                r.sq_psn = mine.psn;
                need_rc(ibv_modify_qp(qps[i], &r, IBV_QP_STATE | IBV_QP_SQ_PSN), "ibv_modify_qp(RTS)");
            }
        }
        if (any_ud) {
            ah = ibv_create_ah(pd, &av);
            need(ah != nullptr, "ibv_create_ah");
        }
    }

    // What this side publishes: port 1's LID, the buffer, its rkey and the
    // QP numbers (port: port 1's attributes, as queried for the LID).
    SideInfo describe(std::uint32_t psn = 0, ibv_port_attr* port = nullptr) {
        ibv_port_attr p{};
        need_rc(ibv_query_port(ctx, 1, &p), "ibv_query_port");
        if (port) *port = p;
        SideInfo me;
        me.lid = p.lid;
        me.psn = psn & 0xffffff;
        me.addr = reinterpret_cast<std::uintptr_t>(buf);
        me.rkey = mr->rkey;
        me.length = opt.buffer_bytes;
        me.nqps = static_cast<std::uint32_t>(qps.size());
        for (std::size_t i = 0; i < qps.size() && i < 32; ++i) me.qpn[i] = qps[i]->qp_num;
        return me;
    }

    ibv_sge sge(std::size_t offset, std::uint32_t len) const {
        return ibv_sge{reinterpret_cast<std::uintptr_t>(buf + offset), len, mr->lkey};
    }

    int post_send(ibv_qp* qp, ibv_wr_opcode op, std::vector<ibv_sge> sges, unsigned flags, std::uint64_t wr_id,
                  std::uint64_t raddr = 0, std::uint32_t rkey = 0, std::uint32_t imm = 0) {
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = sges.empty() ? nullptr : sges.data();
        wr.num_sge = static_cast<int>(sges.size());
        wr.opcode = op;
        wr.send_flags = flags;
        wr.imm_data = imm;
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey = rkey;
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(qp, &wr, &bad);
    }

    // To the SRQ when the side has one (qp is then ignored).
    int post_recv(ibv_qp* qp, std::vector<ibv_sge> sges, std::uint64_t wr_id) {
        ibv_recv_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = sges.empty() ? nullptr : sges.data();
        wr.num_sge = static_cast<int>(sges.size());
        ibv_recv_wr* bad = nullptr;
        return srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad);
    }

    // Up to n completions, waiting at most timeout_us of simulated time.
    std::vector<ibv_wc> poll(ibv_cq* cq, int n, double timeout_us = 20000) {
        std::vector<ibv_wc> out;
        const sim::Tick deadline = host.now() + us(timeout_us);
        ibv_wc wc[16];
        while (static_cast<int>(out.size()) < n) {
            const int want = std::min(16, n - static_cast<int>(out.size()));
            const int got = ibv_poll_cq(cq, want, wc);
            if (got < 0) throw std::runtime_error("ibv_poll_cq returned " + std::to_string(got));
            out.insert(out.end(), wc, wc + got);
            if (got == 0) {
                if (host.now() >= deadline) break;
                host.sleep(200 * sim::kPsPerNs);  // 200 ns between empty polls
            }
        }
        return out;
    }

    // Exactly n successful completions or an exception naming what happened.
    std::vector<ibv_wc> poll_ok(ibv_cq* cq, int n, const std::string& what, double timeout_us = 20000) {
        auto v = poll(cq, n, timeout_us);
        if (static_cast<int>(v.size()) < n)
            throw std::runtime_error(what + ": " + std::to_string(v.size()) + " of " + std::to_string(n) +
                                     " completions within " + std::to_string(timeout_us) + " us");
        for (const auto& w : v)
            if (w.status != IBV_WC_SUCCESS)
                throw std::runtime_error(what + ": completion " + ibv_wc_status_str(w.status) + " (wr_id " +
                                         std::to_string(w.wr_id) + ")");
        return v;
    }

    // A UD send of sges to the peer's QP of index peer_qp.
    int post_ud(ibv_qp* qp, int peer_qp, ibv_wr_opcode op, std::vector<ibv_sge> sges, unsigned flags,
                std::uint64_t wr_id, std::uint32_t imm = 0, std::uint32_t qkey = 0x11111111) {
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = sges.empty() ? nullptr : sges.data();
        wr.num_sge = static_cast<int>(sges.size());
        wr.opcode = op;
        wr.send_flags = flags;
        wr.imm_data = imm;
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = peer_info.qpn[peer_qp];
        wr.wr.ud.remote_qkey = qkey;
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(qp, &wr, &bad);
    }

    void close() {
        if (ah) need_rc(ibv_destroy_ah(ah), "ibv_destroy_ah");
        ah = nullptr;
        for (ibv_qp* q : qps) need_rc(ibv_destroy_qp(q), "ibv_destroy_qp");
        qps.clear();
        if (srq) need_rc(ibv_destroy_srq(srq), "ibv_destroy_srq");
        srq = nullptr;
        need_rc(ibv_dereg_mr(mr), "ibv_dereg_mr");
        if (recv_cq != send_cq) need_rc(ibv_destroy_cq(recv_cq), "ibv_destroy_cq");
        need_rc(ibv_destroy_cq(send_cq), "ibv_destroy_cq");
        if (channel) need_rc(ibv_destroy_comp_channel(channel), "ibv_destroy_comp_channel");
        need_rc(ibv_dealloc_pd(pd), "ibv_dealloc_pd");
        need_rc(ibv_close_device(ctx), "ibv_close_device");
        std::free(buf);
        buf = nullptr;
    }

    Host& host;
    SideOptions opt;
    ibv_device* device = nullptr;
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_comp_channel* channel = nullptr;
    ibv_cq* send_cq = nullptr;
    ibv_cq* recv_cq = nullptr;
    std::vector<ibv_qp*> qps;
    ibv_srq* srq = nullptr;
    std::uint8_t* buf = nullptr;
    ibv_mr* mr = nullptr;
    SideInfo peer_info;
    ibv_ah* ah = nullptr;  // UD: to the peer
    std::uint64_t remote_addr = 0;
    std::uint32_t remote_rkey = 0;
};

// The next async event of s's device as key.rc and key.type, and what it
// names: key.port for a port event (else 0); for a QP event key.our_qp
// (whether it is s's first QP) and key.qp (the QP's index in s.qps, -1 if
// none); for an SRQ event key.our_srq; for CQ_ERR key.cq ("send", "recv" or
// "other").
inline void record_async_event(Side& s, Record& rec, const std::string& key) {
    ibv_async_event ev{};
    rec.num(key + ".rc", ibv_get_async_event(s.ctx, &ev));
    rec.num(key + ".type", static_cast<int>(ev.event_type));
    bool port_event = false, qp_event = false;
    switch (ev.event_type) {
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE: port_event = true; break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: rec.num(key + ".our_srq", ev.element.srq == s.srq); break;
    case IBV_EVENT_CQ_ERR:
        rec.set(key + ".cq", ev.element.cq == s.send_cq ? "send" : ev.element.cq == s.recv_cq ? "recv" : "other");
        break;
    case IBV_EVENT_DEVICE_FATAL: break;
    default: qp_event = true;
    }
    rec.num(key + ".port", port_event ? ev.element.port_num : 0);
    const bool first_qp = qp_event && !s.qps.empty() && ev.element.qp == s.qps[0];
    rec.num(key + ".our_qp", first_qp);
    if (qp_event) {
        long index = -1;
        for (std::size_t i = 0; i < s.qps.size(); ++i)
            if (ev.element.qp == s.qps[i]) index = static_cast<long>(i);
        rec.num(key + ".qp", index);
    }
    ibv_ack_async_event(&ev);
}

// The next n async events as key.0, key.1, ...
inline void record_async_events(Side& s, Record& rec, const std::string& key, int n) {
    for (int i = 0; i < n; ++i) record_async_event(s, rec, key + "." + std::to_string(i));
}

// ---------------------------------------------------------------------------
// Data transfer cases: node 0 is the requester, node 1 the responder. Data
// goes from a source to a sink, each one or more pieces (SGEs) of the
// side's registered buffer; the sink is surrounded by guard bytes that must
// survive. SEND: requester pieces -> receive WQE pieces. WRITE (followed by a
// zero-byte SEND: IB ordering makes the data visible to the responder once
// that SEND's receive completes) and WRITE WITH IMM: requester pieces ->
// contiguous remote range. READ: contiguous remote range -> requester pieces.

enum class XOp { Send, Write, WriteImm, Read };

inline const char* xop_name(XOp op) {
    switch (op) {
    case XOp::Send: return "SEND";
    case XOp::Write: return "RDMA WRITE";
    case XOp::WriteImm: return "RDMA WRITE WITH IMM";
    case XOp::Read: return "RDMA READ";
    }
    return "?";
}

struct XCase {
    XOp op;
    std::uint32_t size;
    std::size_t src_off = 0;  // first source byte in the source side's buffer
    std::size_t dst_off = 0;  // first sink byte in the sink side's buffer
    int src_sges = 1;
    int dst_sges = 1;
    bool inline_data = false;
    int qp = 0;

    std::string describe() const {
        std::ostringstream os;
        os << xop_name(op) << " of " << size << " B from offset " << src_off << " (" << src_sges << " SGE) to offset "
           << dst_off << " (" << dst_sges << " SGE)" << (inline_data ? " inline" : "") << " on QP " << qp;
        return os.str();
    }
};

inline constexpr std::size_t kGuardBytes = 64;
inline constexpr std::uint8_t kGuardByte = 0x5a;
inline constexpr std::size_t kPieceGap = 4096 + 13 + 2 * kGuardBytes;

struct Piece {
    std::size_t off;
    std::uint32_t len;
};

// size bytes cut into n uneven pieces laid out from off with gaps between.
inline std::vector<Piece> pieces(std::size_t off, std::uint32_t size, int n) {
    std::vector<Piece> out;
    if (n <= 1 || size < static_cast<std::uint32_t>(n)) {
        out.push_back({off, size});
        return out;
    }
    std::uint32_t left = size;
    for (int j = 0; j < n; ++j) {
        std::uint32_t len = j + 1 == n ? left : (j == 0 ? size / 4 + 1 : size / (2 * n) + 3);
        if (len == 0) len = 1;
        if (len > left - static_cast<std::uint32_t>(n - j - 1)) len = left - static_cast<std::uint32_t>(n - j - 1);
        out.push_back({off, len});
        off += len + kPieceGap;
        left -= len;
    }
    return out;
}

inline std::size_t extent(const std::vector<Piece>& ps) { return ps.back().off + ps.back().len + kGuardBytes; }

inline std::size_t buffer_for(const std::vector<XCase>& cases) {
    std::size_t need = 0;
    for (const auto& c : cases) {
        need = std::max(need, extent(pieces(c.src_off, c.size, c.src_sges)));
        need = std::max(need, extent(pieces(c.dst_off, c.size, c.dst_sges)));
    }
    return (need + 2 * 4096 + 4095) & ~std::size_t(4095);
}

inline std::uint64_t case_seed(std::size_t i, const XCase& c) {
    return 0x5eed0000ull + i * 977 + static_cast<std::uint64_t>(c.op) * 131 + c.size;
}

inline void scatter(std::uint8_t* buf, const std::vector<Piece>& ps, const std::uint8_t* data) {
    for (const auto& p : ps) {
        std::memcpy(buf + p.off, data, p.len);
        data += p.len;
    }
}

inline std::vector<std::uint8_t> gather(const std::uint8_t* buf, const std::vector<Piece>& ps) {
    std::vector<std::uint8_t> out;
    for (const auto& p : ps) out.insert(out.end(), buf + p.off, buf + p.off + p.len);
    return out;
}

inline void guard(std::uint8_t* buf, const std::vector<Piece>& ps) {
    for (const auto& p : ps) std::memset(buf + p.off - std::min(p.off, kGuardBytes), kGuardByte,
                                         p.len + std::min(p.off, kGuardBytes) + kGuardBytes);
}

// Guard bytes around the pieces that were overwritten.
inline int damaged_guards(const std::uint8_t* buf, const std::vector<Piece>& ps) {
    int bad = 0;
    for (const auto& p : ps) {
        for (std::size_t k = 1; k <= std::min(p.off, kGuardBytes); ++k) bad += buf[p.off - k] != kGuardByte;
        for (std::size_t k = 0; k < kGuardBytes; ++k) bad += buf[p.off + p.len + k] != kGuardByte;
    }
    return bad;
}

inline std::vector<ibv_sge> sges_of(const Side& s, const std::vector<Piece>& ps) {
    std::vector<ibv_sge> v;
    for (const auto& p : ps) v.push_back(s.sge(p.off, p.len));
    return v;
}

inline std::uint32_t imm_for(std::size_t i) { return htobe32(0xc0de0000u + static_cast<std::uint32_t>(i)); }

// The two programs of a run of cases. Results per case i under "c<i>.":
// req.* (the requester's first completion), nreq, resp.* (the responder's
// receive completion), data.* (sink bytes against the pattern), guard.
inline void run_cases_requester(Host& h, Side& s, const std::vector<XCase>& cases, Record& rec) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const XCase& c = cases[i];
        const std::string key = "c" + std::to_string(i);
        ibv_qp* qp = s.qps[static_cast<std::size_t>(c.qp)];
        const std::vector<std::uint8_t> want = pattern(c.size, case_seed(i, c));
        const auto src = pieces(c.src_off, c.size, c.src_sges);
        const auto dst = pieces(c.dst_off, c.size, c.dst_sges);
        h.barrier(key + ".a");
        if (c.op == XOp::Read) guard(s.buf, dst);
        else scatter(s.buf, src, want.data());
        h.barrier(key + ".b");
        const unsigned inl = c.inline_data ? IBV_SEND_INLINE : 0;
        int rc = 0, expect = 1;
        switch (c.op) {
        case XOp::Send:
            rc = s.post_send(qp, IBV_WR_SEND, sges_of(s, src), IBV_SEND_SIGNALED | inl, i);
            break;
        case XOp::Write:
            rc = s.post_send(qp, IBV_WR_RDMA_WRITE, sges_of(s, src), IBV_SEND_SIGNALED | inl, i,
                             s.remote_addr + c.dst_off, s.remote_rkey);
            if (!rc) rc = s.post_send(qp, IBV_WR_SEND, {}, IBV_SEND_SIGNALED, 1000000 + i);
            expect = 2;
            break;
        case XOp::WriteImm:
            rc = s.post_send(qp, IBV_WR_RDMA_WRITE_WITH_IMM, sges_of(s, src), IBV_SEND_SIGNALED | inl, i,
                             s.remote_addr + c.dst_off, s.remote_rkey, imm_for(i));
            break;
        case XOp::Read:
            rc = s.post_send(qp, IBV_WR_RDMA_READ, sges_of(s, dst), IBV_SEND_SIGNALED, i, s.remote_addr + c.src_off,
                             s.remote_rkey);
            break;
        }
        rec.num(key + ".post_rc", rc);
        // Inline data is copied when posted: the buffer may change at once.
        if (c.inline_data)
            for (const auto& p : src) std::memset(s.buf + p.off, 0xee, p.len);
        const auto wcs = rc ? std::vector<ibv_wc>{} : s.poll(s.send_cq, expect, 50000);
        rec.num(key + ".nreq", wcs.size());
        if (!wcs.empty()) rec.wc(key + ".req", wcs[0]);
        if (wcs.size() > 1) rec.wc(key + ".req2", wcs[1]);
        if (c.op == XOp::Read) {
            const auto got = gather(s.buf, dst);
            rec.bytes(key + ".data", got.data(), want.data(), want.size());
            rec.num(key + ".guard", damaged_guards(s.buf, dst));
        }
        h.barrier(key + ".c");
    }
}

inline void run_cases_responder(Host& h, Side& s, const std::vector<XCase>& cases, Record& rec) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const XCase& c = cases[i];
        const std::string key = "c" + std::to_string(i);
        ibv_qp* qp = s.qps[static_cast<std::size_t>(c.qp)];
        const std::vector<std::uint8_t> want = pattern(c.size, case_seed(i, c));
        const auto src = pieces(c.src_off, c.size, c.src_sges);
        const auto dst = pieces(c.dst_off, c.size, c.dst_sges);
        h.barrier(key + ".a");
        int rc = 0;
        if (c.op == XOp::Read) {
            scatter(s.buf, src, want.data());
        } else {
            guard(s.buf, dst);
            rc = s.post_recv(qp, c.op == XOp::Send ? sges_of(s, dst) : std::vector<ibv_sge>{}, 2000000 + i);
        }
        rec.num(key + ".recv_rc", rc);
        h.barrier(key + ".b");
        if (c.op != XOp::Read && rc == 0) {
            const auto wcs = s.poll(s.recv_cq, 1, 50000);
            rec.num(key + ".nresp", wcs.size());
            if (!wcs.empty()) rec.wc(key + ".resp", wcs[0]);
            const auto got = gather(s.buf, dst);
            rec.bytes(key + ".data", got.data(), want.data(), want.size());
            rec.num(key + ".guard", damaged_guards(s.buf, dst));
        }
        h.barrier(key + ".c");
    }
}

struct CaseRun {
    Overrides cfg;
    SideOptions side;
    ConnOptions conn;
};

inline RunResult run_cases(const std::vector<XCase>& cases, CaseRun run = {}) {
    run.side.buffer_bytes = std::max(run.side.buffer_bytes, buffer_for(cases));
    for (const auto& c : cases) run.side.qps = std::max(run.side.qps, c.qp + 1);
    return run_pair(
        run.cfg,
        [&](Host& h, Record& rec) {
            Side s(h, run.side);
            s.connect("cases", 1, run.conn);
            run_cases_requester(h, s, cases, rec);
            s.close();
        },
        [&](Host& h, Record& rec) {
            ConnOptions conn = run.conn;
            conn.psn = run.conn.psn + 0x10000;
            Side s(h, run.side);
            s.connect("cases", 0, conn);
            run_cases_responder(h, s, cases, rec);
            s.close();
        });
}

// Parent side: every case completed successfully and delivered its bytes.
inline void check_cases(const RunResult& r, const std::vector<XCase>& cases) {
    INFO("run error: " << r.error);
    CHECK(r.ok);
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const XCase& c = cases[i];
        const std::string k = "c" + std::to_string(i);
        INFO("case " << i << ": " << c.describe());
        CHECK(r.num(k + ".post_rc") == 0);
        CHECK(r.num(k + ".nreq") == (c.op == XOp::Write ? 2 : 1));
        CHECK(r.num(k + ".req.status") == IBV_WC_SUCCESS);
        CHECK(r.unum(k + ".req.wr_id") == i);
        const int req_opcode = c.op == XOp::Send    ? IBV_WC_SEND
                               : c.op == XOp::Read  ? IBV_WC_RDMA_READ
                                                    : IBV_WC_RDMA_WRITE;
        CHECK(r.num(k + ".req.opcode") == req_opcode);
        if (c.op == XOp::Write) {
            CHECK(r.num(k + ".req2.status") == IBV_WC_SUCCESS);
            CHECK(r.num(k + ".req2.opcode") == IBV_WC_SEND);
        }
        if (c.op == XOp::Read) CHECK(r.num(k + ".req.byte_len") == c.size);
        if (c.op != XOp::Read) {
            CHECK(r.num(k + ".recv_rc") == 0);
            CHECK(r.num(k + ".nresp") == 1);
            CHECK(r.num(k + ".resp.status") == IBV_WC_SUCCESS);
            CHECK(r.unum(k + ".resp.wr_id") == 2000000 + i);
            CHECK(r.num(k + ".resp.opcode") == (c.op == XOp::WriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV));
            CHECK(r.num(k + ".resp.byte_len") == (c.op == XOp::Write ? 0 : c.size));
            if (c.op == XOp::WriteImm) {
                CHECK((r.num(k + ".resp.wc_flags") & IBV_WC_WITH_IMM) != 0);
                CHECK(r.unum(k + ".resp.imm") == imm_for(i));
            } else {
                CHECK((r.num(k + ".resp.wc_flags") & IBV_WC_WITH_IMM) == 0);
            }
        }
        CHECK(r.num(k + ".data.mismatch") == -1);
        CHECK(r.get(k + ".data.hash_got") == r.get(k + ".data.hash_want"));
        CHECK(r.num(k + ".guard") == 0);
    }
}

// ---------------------------------------------------------------------------
// "The other QPs keep working": both programs call verify_qp with the same
// tag. Node 0 SENDs 4097 B, RDMA WRITEs 65539 B (then a zero-byte SEND) and
// RDMA READs 8195 B on the QP; node 1 checks what arrived. Completions of
// other QPs found on the CQs are counted under <tag>.stray, not consumed
// silently. Uses the upper half of the buffers.

// Up to n completions of QP qpn; others go to stray.
inline std::vector<ibv_wc> poll_qp(Side& s, ibv_cq* cq, std::uint32_t qpn, int n, std::vector<ibv_wc>& stray,
                                   double timeout_us = 20000) {
    std::vector<ibv_wc> out;
    const sim::Tick deadline = s.host.now() + us(timeout_us);
    while (static_cast<int>(out.size()) < n) {
        ibv_wc w;
        const int got = ibv_poll_cq(cq, 1, &w);
        if (got < 0) throw std::runtime_error("ibv_poll_cq failed");
        if (got == 1) {
            (w.qp_num == qpn ? out : stray).push_back(w);
            continue;
        }
        if (s.host.now() >= deadline) break;
        s.host.sleep(200 * sim::kPsPerNs);
    }
    return out;
}

inline void verify_qp(Host& h, Side& s, std::size_t q, Record& rec, const std::string& tag, ibv_cq* scq = nullptr,
                      ibv_cq* rcq = nullptr) {
    if (!scq) scq = s.send_cq;
    if (!rcq) rcq = s.recv_cq;
    ibv_qp* qp = s.qps[q];
    const std::size_t base = s.opt.buffer_bytes / 2;
    constexpr std::uint32_t kSend = 4097, kWrite = 65539, kRead = 8195;
    const std::size_t send_src = base + 3, send_dst = base + 0x2000 + 5;
    const std::size_t write_src = base + 0x4000 + 7, write_dst = base + 0x18000 + 9;
    const std::size_t read_src = base + 0x30000 + 11, read_dst = base + 0x34000 + 13;
    const std::uint64_t seed = 0xabc000 + std::hash<std::string>{}(tag) % 1000;
    std::vector<ibv_wc> stray;
    if (h.index() == 0) {
        fill_pattern(s.buf + send_src, kSend, seed + 1);
        fill_pattern(s.buf + write_src, kWrite, seed + 2);
        std::memset(s.buf + read_dst, 0, kRead);
        h.barrier(tag + ".a");
        int rc = s.post_send(qp, IBV_WR_SEND, {s.sge(send_src, kSend)}, IBV_SEND_SIGNALED, 1);
        rc |= s.post_send(qp, IBV_WR_RDMA_WRITE, {s.sge(write_src, kWrite)}, IBV_SEND_SIGNALED, 2,
                          s.remote_addr + write_dst, s.remote_rkey);
        rc |= s.post_send(qp, IBV_WR_SEND, {}, IBV_SEND_SIGNALED, 3);
        rc |= s.post_send(qp, IBV_WR_RDMA_READ, {s.sge(read_dst, kRead)}, IBV_SEND_SIGNALED, 4,
                          s.remote_addr + read_src, s.remote_rkey);
        rec.num(tag + ".post_rc", rc);
        const auto wcs = poll_qp(s, scq, qp->qp_num, 4, stray);
        int ok = 0;
        for (const auto& w : wcs) ok += w.status == IBV_WC_SUCCESS;
        rec.num(tag + ".req_ok", ok);
        const auto want = pattern(kRead, seed + 3);
        rec.bytes(tag + ".read", s.buf + read_dst, want.data(), kRead);
        rec.num(tag + ".stray0", stray.size());
        h.barrier(tag + ".b");
    } else {
        fill_pattern(s.buf + read_src, kRead, seed + 3);
        std::memset(s.buf + send_dst, 0, kSend);
        std::memset(s.buf + write_dst, 0, kWrite);
        int rc = s.post_recv(qp, {s.sge(send_dst, kSend)}, 1);
        rc |= s.post_recv(qp, {}, 2);
        rec.num(tag + ".recv_rc", rc);
        h.barrier(tag + ".a");
        const auto wcs = poll_qp(s, rcq, qp->qp_num, 2, stray);
        int ok = 0;
        for (const auto& w : wcs) ok += w.status == IBV_WC_SUCCESS;
        rec.num(tag + ".resp_ok", ok);
        const auto want_send = pattern(kSend, seed + 1);
        const auto want_write = pattern(kWrite, seed + 2);
        rec.bytes(tag + ".send", s.buf + send_dst, want_send.data(), kSend);
        rec.bytes(tag + ".write", s.buf + write_dst, want_write.data(), kWrite);
        rec.num(tag + ".stray1", stray.size());
        h.barrier(tag + ".b");
    }
}

// Parent side of verify_qp.
inline void check_qp_works(const RunResult& r, const std::string& tag) {
    INFO("the QP verified as '" << tag << "' still transfers data");
    CHECK(r.num(tag + ".post_rc") == 0);
    CHECK(r.num(tag + ".recv_rc") == 0);
    CHECK(r.num(tag + ".req_ok") == 4);
    CHECK(r.num(tag + ".resp_ok") == 2);
    CHECK(r.num(tag + ".send.mismatch") == -1);
    CHECK(r.num(tag + ".write.mismatch") == -1);
    CHECK(r.num(tag + ".read.mismatch") == -1);
}

}  // namespace hcasim::test

// Use in the parent after a run: shows the child's error with the failure.
#define HCASIM_REQUIRE_RUN(r)         \
    do {                              \
        INFO("run error: " << (r).error); \
        REQUIRE((r).ok);              \
    } while (0)
