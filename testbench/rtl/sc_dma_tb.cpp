// hcasim-rtl-sctb: a standalone SystemC testbench of the Verilog DMA engine,
// verilated with verilate(... SYSTEMC): the engine is an sc_module on
// sc_signals, clocked by an sc_clock. Unlike the co-simulation top, every
// stream here keeps its ready, and the testbench's host memory and packet
// buffer throttle them at random, so the engine's back-pressure paths run.
// It is verilated with other parameters than the simulator's, once per
// configuration of the engine's parameter range it covers: the build gives
// the data path width (HCASIM_SCTB_BITS) and the verilated model's header
// (HCASIM_SCTB_HEADER, class HCASIM_SCTB_DUT); see CMakeLists.txt. Checks
// every byte and status; exit status 1 on a mismatch or a hang.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <string>
#include <vector>

#include <systemc.h>

#include "model/sim/simulation_start.hpp"

// Verilator's headers are not ours: their warnings are off.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "testbench/system/split_mix.hpp"
#include HCASIM_SCTB_HEADER
#include "verilated.h"
#include "verilated_vcd_sc.h"
#pragma GCC diagnostic pop

namespace {

constexpr int kBits = HCASIM_SCTB_BITS;  // DATA_WIDTH of the verilated engine
constexpr int kW = kBits / 8;            // data path bytes
// Verilator gives a byte-lane mask of up to 32 lanes as a 32-bit word.
static_assert(kBits > 64 && kW <= 32, "the bench's ports are those of a 72- to 256-bit engine");
constexpr std::uint64_t kBase = 0x7f0000001000ull;  // host address of mem[0]
constexpr std::size_t kMem = 1 << 20;

using Rng = hcasim::testbench::SplitMix64;

sc_bv<kBits> to_bv(const std::uint8_t* p) {
    sc_bv<kBits> v;
    for (int w = 0; w < kW / 4; ++w) {
        std::uint32_t x;
        std::memcpy(&x, p + 4 * w, 4);
        v.set_word(w, x);
    }
    return v;
}

void from_bv(const sc_bv<kBits>& v, std::uint8_t* p) {
    for (int w = 0; w < kW / 4; ++w) {
        const std::uint32_t x = v.get_word(w);
        std::memcpy(p + 4 * w, &x, 4);
    }
}

struct Desc {
    std::uint64_t addr;
    std::uint32_t len;
    bool write;
    std::uint8_t tag;
    int expect;  // status code
    std::vector<std::uint8_t> buf;  // write source or read destination
    std::size_t off = 0;            // packet-buffer bytes moved so far
};

SC_MODULE(Bench) {
    sc_in<bool> clk;
    sc_signal<bool> rst{"rst"};
    sc_signal<std::uint32_t> cfg_mrrs{"cfg_mrrs"}, cfg_mps{"cfg_mps"};
    sc_signal<bool> desc_valid{"desc_valid"}, desc_ready{"desc_ready"}, desc_write{"desc_write"};
    sc_signal<std::uint64_t> desc_addr{"desc_addr"};
    sc_signal<std::uint32_t> desc_len{"desc_len"};
    sc_signal<std::uint32_t> desc_tag{"desc_tag"};
    sc_signal<bool> st_valid{"st_valid"}, st_ready{"st_ready"};
    sc_signal<std::uint32_t> st_tag{"st_tag"};
    sc_signal<std::uint32_t> st_error{"st_error"};
    sc_signal<bool> req_valid{"req_valid"}, req_ready{"req_ready"};
    sc_signal<std::uint64_t> req_addr{"req_addr"};
    sc_signal<std::uint32_t> req_len{"req_len"};
    sc_signal<std::uint32_t> req_tag{"req_tag"};
    sc_signal<bool> cpl_valid{"cpl_valid"}, cpl_ready{"cpl_ready"};
    sc_signal<sc_bv<kBits>> cpl_data{"cpl_data"};
    sc_signal<bool> rdd_valid{"rdd_valid"}, rdd_ready{"rdd_ready"}, rdd_last{"rdd_last"};
    sc_signal<sc_bv<kBits>> rdd_data{"rdd_data"};
    sc_signal<std::uint32_t> rdd_keep{"rdd_keep"};
    sc_signal<std::uint32_t> rdd_id{"rdd_id"};
    sc_signal<bool> wrd_valid{"wrd_valid"}, wrd_ready{"wrd_ready"}, wrd_tag_valid{"wrd_tag_valid"};
    sc_signal<sc_bv<kBits>> wrd_data{"wrd_data"};
    sc_signal<std::uint32_t> wrd_tag{"wrd_tag"};
    sc_signal<bool> wr_valid{"wr_valid"}, wr_ready{"wr_ready"}, wr_last{"wr_last"};
    sc_signal<std::uint64_t> wr_addr{"wr_addr"};
    sc_signal<std::uint32_t> wr_len{"wr_len"};
    sc_signal<sc_bv<kBits>> wr_data{"wr_data"};
    sc_signal<std::uint32_t> wr_keep{"wr_keep"};
    sc_signal<bool> busy{"busy"}, quiet{"quiet"};
    sc_signal<std::uint32_t> inflight{"inflight"};

    HCASIM_SCTB_DUT dut{"dut"};
    Rng rng{1};
    std::vector<std::uint8_t> mem, initial;
    std::vector<Desc> descs;
    std::size_t next_desc = 0, reported = 0;
    int errors = 0;
    unsigned max_inflight = 0;
    std::uint64_t cycle = 0, last_progress = 0;

    // Host reads in flight: host-aligned beats, when the first may go.
    struct Read {
        std::vector<std::uint8_t> beats;
        std::size_t n, next = 0;
        std::uint64_t due;
    };
    std::deque<Read> reads;
    // The write TLP being received.
    std::uint32_t tlp_beat = 0;

    void fail(const std::string& what) {
        if (errors++ < 10) std::cout << "sctb: cycle " << cycle << ": " << what << "\n";
    }

    SC_CTOR(Bench) {
        dut.clk(clk);
        dut.rst(rst);
        dut.cfg_mrrs(cfg_mrrs);
        dut.cfg_mps(cfg_mps);
        dut.s_axis_desc_valid(desc_valid);
        dut.s_axis_desc_ready(desc_ready);
        dut.s_axis_desc_addr(desc_addr);
        dut.s_axis_desc_len(desc_len);
        dut.s_axis_desc_write(desc_write);
        dut.s_axis_desc_tag(desc_tag);
        dut.m_axis_status_valid(st_valid);
        dut.m_axis_status_ready(st_ready);
        dut.m_axis_status_tag(st_tag);
        dut.m_axis_status_error(st_error);
        dut.m_axis_rd_req_valid(req_valid);
        dut.m_axis_rd_req_ready(req_ready);
        dut.m_axis_rd_req_addr(req_addr);
        dut.m_axis_rd_req_len(req_len);
        dut.m_axis_rd_req_tag(req_tag);
        dut.s_axis_rd_cpl_valid(cpl_valid);
        dut.s_axis_rd_cpl_ready(cpl_ready);
        dut.s_axis_rd_cpl_data(cpl_data);
        dut.m_axis_rd_data_valid(rdd_valid);
        dut.m_axis_rd_data_ready(rdd_ready);
        dut.m_axis_rd_data_data(rdd_data);
        dut.m_axis_rd_data_keep(rdd_keep);
        dut.m_axis_rd_data_last(rdd_last);
        dut.m_axis_rd_data_id(rdd_id);
        dut.s_axis_wr_data_valid(wrd_valid);
        dut.s_axis_wr_data_ready(wrd_ready);
        dut.s_axis_wr_data_data(wrd_data);
        dut.wr_data_tag_valid(wrd_tag_valid);
        dut.wr_data_tag(wrd_tag);
        dut.m_axis_wr_valid(wr_valid);
        dut.m_axis_wr_ready(wr_ready);
        dut.m_axis_wr_addr(wr_addr);
        dut.m_axis_wr_len(wr_len);
        dut.m_axis_wr_data(wr_data);
        dut.m_axis_wr_keep(wr_keep);
        dut.m_axis_wr_last(wr_last);
        dut.busy(busy);
        dut.quiet(quiet);
        dut.stat_rd_inflight(inflight);
        SC_METHOD(edge);
        sensitive << clk.pos();
        dont_initialize();
    }

    void make(std::uint64_t seed, int n) {
        rng.s = seed;
        mem.resize(kMem);
        for (auto& b : mem) b = static_cast<std::uint8_t>(rng.next());
        initial = mem;
        std::uint64_t cursor = rng.below(4096);
        for (int i = 0; i < n; ++i) {
            Desc d;
            d.write = rng.chance(50);
            d.tag = static_cast<std::uint8_t>(i);
            d.expect = 0;
            const int kind = static_cast<int>(rng.below(100));
            if (kind < 4) {
                d.addr = kBase + cursor;
                d.len = 0;
                d.expect = 1;
            } else if (kind < 7) {
                d.len = 100 + static_cast<std::uint32_t>(rng.below(5000));
                d.addr = ~std::uint64_t(0) - rng.below(d.len - 1);
                d.expect = 2;
            } else if (kind < 10) {
                d.addr = kBase + cursor;
                d.len = (1u << 24) + 1 + static_cast<std::uint32_t>(rng.below(1000));
                d.expect = 3;
            } else {
                const int size_class = static_cast<int>(rng.below(4));
                d.len = size_class == 0 ? 1 + static_cast<std::uint32_t>(rng.below(16))
                        : size_class == 1 ? 1 + static_cast<std::uint32_t>(rng.below(600))
                        : size_class == 2 ? 1 + static_cast<std::uint32_t>(rng.below(9000))
                                          : 1 + static_cast<std::uint32_t>(rng.below(40000));
                std::uint64_t start = cursor + rng.below(300);
                if (rng.chance(30)) start = (start | 4095) + 1 - 1 - rng.below(40);
                if (start < cursor) start += 4096;
                if (start + d.len + 8192 > kMem) break;
                d.addr = kBase + start;
                cursor = start + d.len;
                d.buf.assign(d.len, 0);
                if (d.write)
                    for (auto& b : d.buf) b = static_cast<std::uint8_t>(rng.next());
            }
            descs.push_back(std::move(d));
        }
    }

    void edge() {
        ++cycle;
        if (rst.read()) return;
        // Handshakes of the edge, from the values before it.
        if (desc_valid.read() && desc_ready.read()) ++next_desc, last_progress = cycle;
        if (st_valid.read() && st_ready.read()) {
            last_progress = cycle;
            const unsigned tag = st_tag.read();
            const int err = static_cast<int>(st_error.read());
            if (reported >= descs.size() || tag != descs[reported].tag)
                fail("status for tag " + std::to_string(tag) + " out of order");
            else if (err != descs[reported].expect)
                fail("tag " + std::to_string(tag) + " status " + std::to_string(err) + ", expected " +
                     std::to_string(descs[reported].expect));
            ++reported;
        }
        if (req_valid.read() && req_ready.read()) {
            last_progress = cycle;
            const std::uint64_t a = req_addr.read();
            const std::uint32_t n = static_cast<std::uint32_t>(req_len.read());
            if (a < kBase || a + n > kBase + kMem) fail("read request outside host memory");
            Read r;
            const std::uint32_t off = static_cast<std::uint32_t>(a % kW);
            r.n = (off + n + kW - 1) / kW;
            r.beats.assign(r.n * kW, 0);
            if (a >= kBase && a + n <= kBase + kMem) std::memcpy(r.beats.data() + off, &mem[a - kBase], n);
            r.due = cycle + 4 + rng.below(40);
            reads.push_back(std::move(r));
        }
        if (cpl_valid.read() && cpl_ready.read()) {
            last_progress = cycle;
            if (++reads.front().next == reads.front().n) reads.pop_front();
        }
        if (rdd_valid.read() && rdd_ready.read()) {
            last_progress = cycle;
            const unsigned id = rdd_id.read();
            if (id >= descs.size() || descs[id].write || descs[id].expect) {
                fail("read data for tag " + std::to_string(id));
            } else {
                Desc& d = descs[id];
                std::uint8_t beat[kW];
                from_bv(rdd_data.read(), beat);
                const unsigned keep = rdd_keep.read();
                for (int lane = 0; lane < kW; ++lane) {
                    if (!(keep >> lane & 1)) continue;
                    if (d.off + lane >= d.len) fail("read data past the end of tag " + std::to_string(id));
                    else d.buf[d.off + lane] = beat[lane];
                }
                d.off += kW;
                if (rdd_last.read() != (d.off >= d.len)) fail("last flag wrong for tag " + std::to_string(id));
            }
        }
        if (wrd_valid.read() && wrd_ready.read()) descs[wrd_tag.read()].off += kW, last_progress = cycle;
        if (wr_valid.read() && wr_ready.read()) {
            last_progress = cycle;
            const std::uint64_t a = wr_addr.read();
            const std::uint64_t base = (a & ~std::uint64_t(kW - 1)) + std::uint64_t(tlp_beat) * kW;
            std::uint8_t beat[kW];
            from_bv(wr_data.read(), beat);
            const unsigned keep = wr_keep.read();
            for (int lane = 0; lane < kW; ++lane) {
                if (!(keep >> lane & 1)) continue;
                const std::uint64_t x = base + lane;
                if (x < kBase || x >= kBase + kMem) fail("write outside host memory");
                else mem[x - kBase] = beat[lane];
            }
            ++tlp_beat;
            if (wr_last.read()) tlp_beat = 0;
        }
        max_inflight = std::max<unsigned>(max_inflight, inflight.read());

        // Inputs for the next edge: sources with gaps, sinks that stall.
        if (next_desc < descs.size() && rng.chance(70)) {
            const Desc& d = descs[next_desc];
            desc_valid = true;
            desc_addr = d.addr;
            desc_len = d.len;
            desc_write = d.write;
            desc_tag = d.tag;
        } else {
            desc_valid = false;
        }
        const bool cpl_now = !reads.empty() && reads.front().due <= cycle && rng.chance(75);
        cpl_valid = cpl_now;
        if (cpl_now) cpl_data = to_bv(reads.front().beats.data() + reads.front().next * kW);
        bool wrd_now = false;
        if (wrd_tag_valid.read() && rng.chance(75)) {
            const Desc& d = descs[wrd_tag.read()];
            if (d.write && d.off < d.len) {
                std::uint8_t beat[kW] = {};
                std::memcpy(beat, d.buf.data() + d.off, std::min<std::size_t>(kW, d.len - d.off));
                wrd_data = to_bv(beat);
                wrd_now = true;
            }
        }
        wrd_valid = wrd_now;
        st_ready = rng.chance(70);
        req_ready = rng.chance(80);
        rdd_ready = rng.chance(70);
        wr_ready = rng.chance(70);
        if (reported == descs.size() || cycle - last_progress > 100000) sc_stop();
    }

    int check() {
        if (reported != descs.size())
            fail("hang: " + std::to_string(descs.size() - reported) + " descriptor(s) never reported");
        std::vector<std::uint8_t> expect = initial;
        for (const Desc& d : descs) {
            if (d.expect) continue;
            const std::size_t at = d.addr - kBase;
            if (d.write) std::memcpy(&expect[at], d.buf.data(), d.len);
            else if (std::memcmp(d.buf.data(), &initial[at], d.len) != 0) fail("read data of tag " + std::to_string(d.tag) + " differs");
        }
        if (mem != expect) fail("host memory differs after the writes");
        return errors;
    }
};

}  // namespace

int main(int argc, char** argv) {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
    return sc_core::sc_elab_and_sim(argc, argv);
}

int sc_main(int argc, char** argv) {
    // The bench ends the run itself once every descriptor has reported.
    sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    std::uint64_t seed = 1;
    int n = 150;
    std::string vcd;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--descriptors" && i + 1 < argc) n = std::atoi(argv[++i]);
        else if (a == "--vcd" && i + 1 < argc) vcd = argv[++i];
        else {
            std::cerr << "usage: hcasim-rtl-sctb [--seed S] [--descriptors N (1..250)] [--vcd FILE]\n";
            return 2;
        }
    }
    if (n < 1 || n > 250) {
        std::cerr << "hcasim-rtl-sctb: error: --descriptors " << n << ": expected 1 to 250\n";
        return 2;
    }
    if (!vcd.empty()) Verilated::traceEverOn(true);
    sc_clock clk("clk", 2, SC_NS);
    Bench tb("tb");
    tb.clk(clk);
    tb.make(seed, n);
    tb.cfg_mrrs = 512;
    tb.cfg_mps = 128;
    tb.rst = true;
    VerilatedVcdSc* trace = nullptr;
    if (!vcd.empty()) {
        hcasim::sim::start(SC_ZERO_TIME);
        trace = new VerilatedVcdSc;
        tb.dut.trace(trace, 99);
        trace->open(vcd.c_str());
    }
    hcasim::sim::start(sc_time(10, SC_NS));
    tb.rst = false;
    hcasim::sim::start();
    if (trace) {
        trace->close();
        delete trace;
    }
    const int errors = tb.check();
    std::uint64_t bytes = 0;
    for (const auto& d : tb.descs) bytes += d.expect ? 0 : d.len;
    std::cout << "sctb (" << kBits << "-bit data path): seed " << seed << ", " << tb.descs.size() << " descriptors, " << bytes << " bytes, "
              << tb.cycle << " cycles, " << tb.max_inflight << " reads in flight at most: "
              << (errors ? "FAILED" : "ok") << "\n";
    return errors ? 1 : 0;
}
