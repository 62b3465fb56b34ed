// hcasim-regress: the verification regression of the Verilog DMA engine
// against the SystemC model. A seeded constrained-random generator makes
// cases (lists of descriptors issued together); each case runs on both
// implementations, each behind its own PCIe host interface and host memory,
// from identical memory images. A case passes when both memory images and
// both sets of read data equal the expected bytes, both report the expected
// statuses in descriptor order, and the model's cycle count is within the
// tolerance of the RTL's. Functional coverage of the descriptors is printed
// as a table. Same seed, same output, byte for byte.
#include <cinttypes>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <boost/program_options.hpp>

#include "testbench/cli/cli_input.hpp"
#include "testbench/system/split_mix.hpp"
#include "model/hca/rtl_dma_engine.hpp"
#include "model/hca/systemc_dma_engine.hpp"
#include "model/pcie/pcie_host_interface.hpp"
#include "model/sim/config.hpp"
#include "model/sim/simulation_start.hpp"

namespace po = boost::program_options;
using namespace hcasim;
using hca::DmaCompletion;
using hca::DmaDescriptor;
using hca::DmaStatus;

namespace {

using testbench::SplitMix64;

void fill(std::uint8_t* p, std::size_t n, std::uint64_t seed) { testbench::fill_split_mix(p, n, seed); }

// Host window each implementation's descriptors address: 4 KiB aligned, so
// offsets have the same alignment on both sides.
constexpr std::uint64_t kWindow = 40ull << 20;
constexpr std::uint64_t kCaseBudget = 14ull << 20;  // bytes moved per case at most
constexpr std::uint32_t kGuard = 64;                // bytes after each read buffer that must stay untouched
constexpr std::uint8_t kFresh = 0xa5;               // what a read buffer holds before the read
// Cases start at multiples of 13 us: an edge of the 500 MHz core, the
// 250 MHz PCIe core and the symbol clock of every PCIe generation.
constexpr sim::Tick kCaseAlign = 13 * sim::kPsPerUs;

enum class ErrorKind { None, ZeroLength, TooLong, AddressWrap };

struct Desc {
    bool write = false;
    std::uint64_t off = 0;   // in the window (good descriptors and too-long ones)
    std::uint64_t abs = 0;   // absolute address (address-wrap errors)
    std::uint32_t len = 0;
    ErrorKind error = ErrorKind::None;
    std::uint64_t data_seed = 0;
};

struct Case {
    std::uint64_t seed = 0;
    std::vector<Desc> d;
    std::uint64_t extent = 0;  // window bytes the case touches
};

const char* kSizeBins[] = {"1 B", "2-31 B", "32-255 B", "256 B-4 KiB", "4-64 KiB", "64 KiB-1 MiB", "1-6 MiB"};
const char* kAlignBins[] = {"4 KiB aligned", "32 B aligned", "4 B aligned", "unaligned"};

int size_bin(std::uint32_t len) {
    if (len == 1) return 0;
    if (len < 32) return 1;
    if (len < 256) return 2;
    if (len <= 4096) return 3;
    if (len <= 65536) return 4;
    if (len <= (1u << 20)) return 5;
    return 6;
}

int align_bin(std::uint64_t off) {
    if (off % 4096 == 0) return 0;
    if (off % 32 == 0) return 1;
    if (off % 4 == 0) return 2;
    return 3;
}

std::uint32_t pick_size(SplitMix64& r, std::uint64_t budget) {
    for (;;) {
        const std::uint64_t w = r.below(100);
        std::uint32_t len;
        if (w < 6) len = 1;
        else if (w < 20) len = static_cast<std::uint32_t>(r.range(2, 31));
        else if (w < 36) len = static_cast<std::uint32_t>(r.range(32, 255));
        else if (w < 62) len = static_cast<std::uint32_t>(r.range(256, 4096));
        else if (w < 82) len = static_cast<std::uint32_t>(r.range(4097, 65536));
        else if (w < 95) len = static_cast<std::uint32_t>(r.range(65537, 1u << 20));
        else len = static_cast<std::uint32_t>(r.range((1u << 20) + 1, 6u << 20));
        if (len <= budget) return len;
        if (budget < 1) return 1;
    }
}

Case make_case(std::uint64_t seed) {
    Case c;
    c.seed = seed;
    SplitMix64 r{seed};
    const int n = static_cast<int>(r.range(1, 12));
    // Direction pattern: all reads, all writes, alternating or random.
    const int pattern = static_cast<int>(r.below(4));
    std::uint64_t cursor = r.below(4096);
    std::uint64_t budget = kCaseBudget;
    for (int i = 0; i < n; ++i) {
        Desc d;
        d.write = pattern == 0 ? false : pattern == 1 ? true : pattern == 2 ? (i % 2 == 1) : r.below(2) == 1;
        d.data_seed = r.next();
        const std::uint64_t e = r.below(100);
        if (e < 3) {
            d.error = ErrorKind::ZeroLength;
            d.off = cursor;
            d.len = 0;
        } else if (e < 5) {
            d.error = ErrorKind::TooLong;
            d.off = cursor;
            d.len = hca::kDmaMaxDescriptorBytes + 1 + static_cast<std::uint32_t>(r.below(1u << 20));
        } else if (e < 7) {
            d.error = ErrorKind::AddressWrap;
            d.len = static_cast<std::uint32_t>(r.range(2, 8192));
            d.abs = ~std::uint64_t(0) - r.below(d.len - 1);  // the last byte would be past 2^64 - 1
        } else {
            d.len = pick_size(r, budget);
            budget -= d.len;
            // Start: sometimes just below a 4 KiB boundary, then the alignment class.
            std::uint64_t start = cursor + r.below(256);
            if (r.below(4) == 0) {
                start = (start | 4095) + 1 - r.range(1, 300);
                if (start < cursor) start += 4096;  // regions stay disjoint
            }
            switch (r.below(4)) {
            case 0: start = (start + 4095) & ~std::uint64_t(4095); break;
            case 1: start = ((start + 31) & ~std::uint64_t(31)) | ((start & 4095) == 0 ? 32 : 0); break;
            case 2: start = ((start + 3) & ~std::uint64_t(3)) | ((start & 31) == 0 ? 4 : 0); break;
            default: start |= 1; break;
            }
            d.off = start;
            cursor = start + d.len;
        }
        c.d.push_back(d);
    }
    c.extent = cursor + 4096;
    return c;
}

struct Coverage {
    std::map<std::string, std::uint64_t> bins;
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;
    Coverage() {
        auto group = [&](const std::string& g, std::vector<std::string> names) {
            for (const auto& nm : names) bins[g + ": " + nm] = 0;
            groups.emplace_back(g, std::move(names));
        };
        group("size", {std::begin(kSizeBins), std::end(kSizeBins)});
        group("alignment", {std::begin(kAlignBins), std::end(kAlignBins)});
        group("crossing", {"crosses 4 KiB", "read crosses MRRS", "write crosses MPS", "within one MRRS/MPS"});
        group("direction", {"read", "write", "back-to-back same direction", "direction change"});
        group("error", {"zero length", "too long", "address wrap"});
        group("outstanding reads", {"1", "2-7", "8-31", "32 (all)"});
    }
    void hit(const std::string& g, const std::string& nm) { ++bins.at(g + ": " + nm); }
};

void cover(Coverage& cov, const Case& c, std::uint32_t mrrs, std::uint32_t mps, std::uint32_t max_inflight) {
    for (std::size_t i = 0; i < c.d.size(); ++i) {
        const Desc& d = c.d[i];
        if (i > 0) cov.hit("direction", c.d[i - 1].write == d.write ? "back-to-back same direction" : "direction change");
        if (d.error == ErrorKind::ZeroLength) cov.hit("error", "zero length");
        if (d.error == ErrorKind::TooLong) cov.hit("error", "too long");
        if (d.error == ErrorKind::AddressWrap) cov.hit("error", "address wrap");
        if (d.error != ErrorKind::None) continue;
        cov.hit("direction", d.write ? "write" : "read");
        cov.hit("size", kSizeBins[size_bin(d.len)]);
        cov.hit("alignment", kAlignBins[align_bin(d.off)]);
        const std::uint64_t last = d.off + d.len - 1;
        const bool x4k = d.off / 4096 != last / 4096;
        const bool xmrrs = d.off / mrrs != last / mrrs;
        const bool xmps = d.off / mps != last / mps;
        if (x4k) cov.hit("crossing", "crosses 4 KiB");
        if (!d.write && xmrrs) cov.hit("crossing", "read crosses MRRS");
        if (d.write && xmps) cov.hit("crossing", "write crosses MPS");
        if (!(d.write ? xmps : xmrrs)) cov.hit("crossing", "within one MRRS/MPS");
    }
    static_assert(rtl::RtlDmaCore::kOutstandingReads == 32, "the outstanding-read bins assume 32");
    if (max_inflight >= 32) cov.hit("outstanding reads", "32 (all)");
    else if (max_inflight >= 8) cov.hit("outstanding reads", "8-31");
    else if (max_inflight >= 2) cov.hit("outstanding reads", "2-7");
    else if (max_inflight == 1) cov.hit("outstanding reads", "1");
}

DmaStatus expected_status(const Desc& d) {
    switch (d.error) {
    case ErrorKind::ZeroLength: return DmaStatus::ZeroLength;
    case ErrorKind::TooLong: return DmaStatus::TooLong;
    case ErrorKind::AddressWrap: return DmaStatus::AddressWrap;
    case ErrorKind::None: break;
    }
    return DmaStatus::Ok;
}

struct Options {
    std::uint64_t iterations = 200;
    std::uint64_t seed = 1;
    std::vector<std::uint64_t> cases;  // replay these case seeds only
    std::string vcd;
    double tolerance_pct = 25.0;
    double total_tolerance_pct = 2.0;
    std::uint64_t tolerance_cycles = 2048;
    bool quiet = false;
    bool list = false;
    bool ungated = false;
    std::vector<std::string> sets;
};

// One side of the comparison: host memory, its PCIe link and an engine.
struct Side {
    std::unique_ptr<pcie::HostMemory> memory;
    std::uint64_t window_bus = 0;  // where the window is pinned in the side's bus address space
    std::unique_ptr<pcie::PcieHostInterface> pcie;
    hca::DmaEngine* engine = nullptr;
    std::uint8_t* window = nullptr;
    std::vector<std::vector<std::uint8_t>> buffers;  // packet-buffer side, per descriptor
};

struct CaseResult {
    bool ok = true;
    std::vector<std::string> problems;
    std::uint64_t systemc_cycles = 0;
    std::uint64_t rtl_cycles = 0;
    std::uint64_t bytes = 0;
    std::uint32_t max_inflight = 0;
};

class Regression : public sc_core::sc_module {
public:
    SC_HAS_PROCESS(Regression);
    Regression(const sc_core::sc_module_name& name, const sim::Config& cfg, const Options& o)
        : sc_core::sc_module(name), m_o(o), m_hp(hca::HcaParams::from(cfg)), m_pp(pcie::PcieParams::from(cfg)),
          m_clock(sim::Clock::from_mhz("hca.core", m_hp.core_clock_mhz)) {
        const double mem_ns = cfg.get_real("host.memory_latency_ns");
        for (int s = 0; s < 2; ++s) {
            Side& side = m_side[s];
            side.memory = std::make_unique<pcie::HostMemory>(mem_ns);
            side.pcie = std::make_unique<pcie::PcieHostInterface>(s == 0 ? "systemc_pcie" : "rtl_pcie", m_pp, *side.memory);
            side.window = static_cast<std::uint8_t*>(std::aligned_alloc(4096, kWindow));
            if (!side.window) throw std::runtime_error("cannot allocate the host memory window");
            side.window_bus = side.memory->map(side.window, kWindow);
        }
        m_systemc = std::make_unique<hca::SystemcDmaEngine>("systemc_dma", m_hp, *m_side[0].pcie);
        m_rtl = std::make_unique<hca::RtlDmaEngine>("rtl_dma", m_hp, *m_side[1].pcie, 1, "", !o.ungated);
        m_side[0].engine = m_systemc.get();
        m_side[1].engine = m_rtl.get();
        if (!o.vcd.empty()) m_rtl->trace_channel0(o.vcd);
        SC_THREAD(main);
    }
    ~Regression() override {
        for (auto& s : m_side) std::free(s.window);
    }

    std::ostringstream out;
    int failures = 0;

private:
    // Lays out the case in a side's window and packet buffers.
    std::vector<DmaDescriptor> prepare(Side& s, const Case& c) {
        fill(s.window, c.extent, c.seed ^ 0x5eed);
        s.buffers.assign(c.d.size(), {});
        std::vector<DmaDescriptor> out;
        for (std::size_t i = 0; i < c.d.size(); ++i) {
            const Desc& d = c.d[i];
            DmaDescriptor x;
            x.addr = d.error == ErrorKind::AddressWrap ? d.abs : s.window_bus + d.off;
            x.len = d.len;
            x.to_host = d.write;
            x.tag = static_cast<std::uint8_t>(i);
            const bool moves = d.error == ErrorKind::None;
            auto& b = s.buffers[i];
            b.assign((moves ? d.len : 0) + kGuard, kFresh);
            if (moves && d.write) fill(b.data(), d.len, d.data_seed);
            x.buffer = b.data();
            out.push_back(x);
        }
        return out;
    }

    // Runs one case on one side; returns the cycles from issue to the last effect.
    std::uint64_t run_side(Side& s, const Case& c, std::vector<DmaCompletion>& st) {
        std::vector<DmaDescriptor> d = prepare(s, c);
        // Every case starts on an edge shared by all the clocks involved and
        // with the link's DLLP accounting cleared: its timing does not depend
        // on the cases before it, so it replays from its seed alone.
        const sim::Tick t0 = (sim::now_ps() / kCaseAlign + 1) * kCaseAlign;
        s.pcie->forget_dllp_accounting();
        const sim::Tick end = s.engine->execute(t0, d.data(), d.size(), st);
        // Let the posted writes land.
        wait(sim::to_sc(end - sim::now_ps() + 1000));
        m_last_t0 = t0;
        return static_cast<std::uint64_t>(std::ceil(static_cast<double>(end - t0) / m_clock.period_ps()));
    }

    void check_side(const char* who, Side& s, const Case& c, const std::vector<DmaCompletion>& st,
                    const std::vector<std::uint8_t>& golden, CaseResult& r) {
        auto problem = [&](const std::string& p) {
            r.ok = false;
            r.problems.push_back(std::string(who) + ": " + p);
        };
        if (st.size() != c.d.size()) problem("reported " + std::to_string(st.size()) + " statuses for " + std::to_string(c.d.size()) + " descriptors");
        for (std::size_t i = 0; i < st.size() && i < c.d.size(); ++i) {
            if (st[i].tag != i) problem("status " + std::to_string(i) + " has tag " + std::to_string(st[i].tag) + " (out of order)");
            else if (st[i].status != expected_status(c.d[i]))
                problem("descriptor " + std::to_string(i) + " status " + hca::to_string(st[i].status) + ", expected " +
                        hca::to_string(expected_status(c.d[i])));
        }
        // Host memory image.
        for (std::uint64_t i = 0; i < c.extent; ++i) {
            if (s.window[i] != golden[i]) {
                problem("host memory differs at window offset " + std::to_string(i));
                break;
            }
        }
        // Read data, and nothing past it.
        for (std::size_t i = 0; i < c.d.size(); ++i) {
            const Desc& d = c.d[i];
            const auto& b = s.buffers[i];
            const bool moves = d.error == ErrorKind::None;
            const std::size_t n = moves ? d.len : 0;
            if (moves && !d.write) {
                // Regions are disjoint: a read returns the initial image.
                if (std::memcmp(b.data(), m_initial.data() + d.off, n) != 0)
                    problem("read data of descriptor " + std::to_string(i) + " differs from host memory");
            }
            for (std::size_t k = (moves && !d.write) ? n : 0; k < b.size(); ++k) {
                if (moves && d.write && k < n) continue;
                if (b[k] != kFresh) {
                    problem("descriptor " + std::to_string(i) + " wrote its packet buffer at byte " + std::to_string(k));
                    break;
                }
            }
        }
    }

    CaseResult run_case(const Case& c) {
        CaseResult r;
        // The expected image: the initial bytes with every good write applied.
        m_initial.resize(c.extent);
        fill(m_initial.data(), c.extent, c.seed ^ 0x5eed);
        std::vector<std::uint8_t> golden = m_initial;
        for (const Desc& d : c.d) {
            if (d.error != ErrorKind::None) continue;
            r.bytes += d.len;
            if (d.write) fill(golden.data() + d.off, d.len, d.data_seed);
        }
        std::vector<DmaCompletion> st_systemc, st_rtl;
        try {
            r.systemc_cycles = run_side(m_side[0], c, st_systemc);
            for (auto& x : st_systemc) x.time -= m_last_t0;
            check_side("systemc", m_side[0], c, st_systemc, golden, r);
        } catch (const std::exception& e) {
            r.ok = false;
            r.problems.push_back(std::string("systemc: ") + e.what());
        }
        try {
            r.rtl_cycles = run_side(m_side[1], c, st_rtl);
            for (auto& x : st_rtl) x.time -= m_last_t0;
            r.max_inflight = m_rtl->last_max_inflight();
            check_side("rtl", m_side[1], c, st_rtl, golden, r);
        } catch (const std::exception& e) {
            r.ok = false;
            r.problems.push_back(std::string("rtl: ") + e.what());
        }
        m_st[0] = st_systemc;
        m_st[1] = st_rtl;
        const double drift = std::fabs(static_cast<double>(r.systemc_cycles) - static_cast<double>(r.rtl_cycles));
        const double allowed = std::max(static_cast<double>(m_o.tolerance_cycles), m_o.tolerance_pct / 100.0 * static_cast<double>(r.rtl_cycles));
        if (drift > allowed) {
            r.ok = false;
            std::ostringstream os;
            os << "cycle counts differ by " << static_cast<std::uint64_t>(drift) << " (systemc " << r.systemc_cycles << ", rtl "
               << r.rtl_cycles << "), more than the tolerance of " << static_cast<std::uint64_t>(allowed);
            r.problems.push_back(os.str());
        }
        return r;
    }

    void main() {
        std::vector<std::uint64_t> seeds = m_o.cases;
        if (seeds.empty()) {
            SplitMix64 r{m_o.seed};
            for (std::uint64_t i = 0; i < m_o.iterations; ++i) seeds.push_back(r.next() >> 16);
        }
        Coverage cov;
        std::uint64_t descs = 0, bytes = 0, systemc_total = 0, rtl_total = 0, errors = 0;
        double worst = 0;
        char line[256];
        if (!m_o.quiet) out << "case        seed              descs  bytes      systemc_cycles  rtl_cycles  drift\n";
        // The report comes at the end: meanwhile a terminal shows how far the run is.
        const bool progress = isatty(STDERR_FILENO) != 0;
        for (std::size_t i = 0; i < seeds.size(); ++i) {
            const Case c = make_case(seeds[i]);
            CaseResult r = run_case(c);
            if (progress)
                std::fprintf(stderr, "\rhcasim-regress: case %zu of %zu, %zu failed ", i + 1, seeds.size(),
                             static_cast<std::size_t>(failures) + !r.ok);
            cover(cov, c, m_pp.mrrs, m_pp.mps, r.max_inflight);
            descs += c.d.size();
            bytes += r.bytes;
            for (const Desc& d : c.d) errors += d.error != ErrorKind::None;
            systemc_total += r.systemc_cycles;
            rtl_total += r.rtl_cycles;
            const double drift = r.rtl_cycles ? (static_cast<double>(r.systemc_cycles) - static_cast<double>(r.rtl_cycles)) /
                                                    static_cast<double>(r.rtl_cycles) * 100.0
                                              : 0.0;
            worst = std::max(worst, std::fabs(drift));
            if (!m_o.quiet || !r.ok) {
                std::snprintf(line, sizeof line, "%-11zu %-17" PRIu64 " %-6zu %-10" PRIu64 " %-15" PRIu64 " %-11" PRIu64 " %+.2f%%%s\n",
                              i, c.seed, c.d.size(), r.bytes, r.systemc_cycles, r.rtl_cycles, drift, r.ok ? "" : "  FAIL");
                out << line;
            }
            if (m_o.list) {
                for (std::size_t k = 0; k < c.d.size(); ++k) {
                    const Desc& d = c.d[k];
                    auto cyc = [&](int side) {
                        return k < m_st[side].size() ? static_cast<double>(m_st[side][k].time) / m_clock.period_ps() : 0.0;
                    };
                    std::snprintf(line, sizeof line, "    %2zu %-5s off 0x%-9" PRIx64 " len %-9u status at cycle systemc %-8.0f rtl %-8.0f%s\n",
                                  k, d.write ? "write" : "read", d.error == ErrorKind::AddressWrap ? d.abs : d.off, d.len, cyc(0), cyc(1),
                                  d.error == ErrorKind::None ? "" : d.error == ErrorKind::ZeroLength ? " zero length"
                                                                   : d.error == ErrorKind::TooLong ? " too long" : " address wrap");
                    out << line;
                }
            }
            if (!r.ok) {
                ++failures;
                for (const auto& p : r.problems) out << "    " << p << "\n";
                out << "    replay: hcasim-regress --case " << c.seed << "\n";
                if (m_o.vcd.empty()) {
                    // Run the case again on a freshly reset engine, with its waveform.
                    const std::string path = "hcasim-regress-case-" + std::to_string(c.seed) + ".vcd";
                    m_rtl->trace_channel0(path);
                    std::vector<DmaCompletion> st;
                    try {
                        run_side(m_side[1], c, st);
                    } catch (const std::exception&) {
                    }
                    m_rtl->trace_channel0("");
                    out << "    waveform: " << path << "\n";
                }
            }
        }
        if (progress) std::fprintf(stderr, "\r%60s\r", "");
        out << "\n" << seeds.size() << " cases, " << descs << " descriptors (" << errors << " bad), " << bytes
            << " bytes moved per implementation; " << failures << " failed\n";
        std::snprintf(line, sizeof line, "cycles: systemc %" PRIu64 ", rtl %" PRIu64 " (%+.2f%%); worst case drift %.2f%%, tolerance max(%.1f%%, %" PRIu64 " cycles)\n",
                      systemc_total, rtl_total,
                      rtl_total ? (static_cast<double>(systemc_total) - static_cast<double>(rtl_total)) / static_cast<double>(rtl_total) * 100.0 : 0.0,
                      worst, m_o.tolerance_pct, m_o.tolerance_cycles);
        out << line;
        // A systematic error shows in the sum even when every case is within
        // its tolerance.
        const double total_drift = rtl_total ? std::fabs(static_cast<double>(systemc_total) - static_cast<double>(rtl_total)) /
                                                   static_cast<double>(rtl_total) * 100.0
                                             : 0.0;
        if (seeds.size() >= 100 && total_drift > m_o.total_tolerance_pct) {
            ++failures;
            std::snprintf(line, sizeof line, "FAIL: total cycles differ by %.2f%%, more than the run tolerance of %.1f%%\n",
                          total_drift, m_o.total_tolerance_pct);
            out << line;
        }
        const rtl::CoreStats s = m_rtl->stats();
        out << "rtl: " << s.clocked_cycles << " cycles clocked of " << s.elapsed_cycles << " with work, "
            << s.read_requests << " read requests, " << s.write_tlps << " write TLPs\n";
        out << "\nfunctional coverage\n";
        std::vector<std::string> missed;
        for (const auto& [g, names] : cov.groups) {
            for (const auto& nm : names) {
                const std::uint64_t h = cov.bins.at(g + ": " + nm);
                std::snprintf(line, sizeof line, "  %-18s %-28s %10" PRIu64 "\n", g.c_str(), nm.c_str(), h);
                out << line;
                if (h == 0) missed.push_back(g + ": " + nm);
            }
        }
        out << "bins never hit: ";
        if (missed.empty()) out << "none";
        for (std::size_t i = 0; i < missed.size(); ++i) out << (i ? ", " : "") << missed[i];
        out << "\n";
        m_missed = missed.size();
    }

public:
    std::size_t m_missed = 0;

private:
    Options m_o;
    hca::HcaParams m_hp;
    pcie::PcieParams m_pp;
    sim::Clock m_clock;
    Side m_side[2];
    std::unique_ptr<hca::SystemcDmaEngine> m_systemc;
    std::unique_ptr<hca::RtlDmaEngine> m_rtl;
    std::vector<std::uint8_t> m_initial;
    sim::Tick m_last_t0 = 0;
    std::vector<DmaCompletion> m_st[2];  // statuses of the last case, per side
};

const char* kUsage = R"(usage: hcasim-regress [OPTIONS]

Runs seeded constrained-random descriptor lists on the Verilog DMA engine
(verilated) and on the SystemC model, compares memory images, read data,
statuses and cycle counts, and prints functional coverage. Exit status 1 if
any case fails (or, with --require-coverage, if a bin is never hit).

Options)";

// More cases than this only exhausts memory (every case seed is kept).
constexpr std::uint64_t kMaxCases = 10000000;

// Keys the regression sets itself: it always builds both engines, one RTL
// channel, and writes waveforms only where --vcd says.
void refuse_fixed_keys(const std::vector<std::string>& sets) {
    for (const auto& a : sets) {
        const auto eq = a.find('=');
        std::string key = a.substr(0, eq);
        key.erase(0, key.find_first_not_of(" \t"));
        key.erase(key.find_last_not_of(" \t") + 1);
        if (key == "hca.dma.impl")
            throw std::invalid_argument("--set hca.dma.impl: hcasim-regress always runs both DMA engines, the RTL and the model");
        if (key == "hca.dma.rtl_channels")
            throw std::invalid_argument("--set hca.dma.rtl_channels: hcasim-regress drives one RTL engine instance");
        if (key == "hca.dma.vcd") throw std::invalid_argument("--set hca.dma.vcd: use --vcd FILE for a waveform of the run");
    }
}

}  // namespace

int sc_main(int argc, char** argv) {
    Options o;
    bool require_coverage = false;
    // Numbers stay text until checked: boost would wrap "-1" to 2^64 - 1.
    std::string iterations, seed, tolerance_pct, total_tolerance_pct, tolerance_cycles;
    std::vector<std::string> cases;
    po::options_description opts(kUsage);
    opts.add_options()("help,h", "this text")
        ("iterations,n", po::value(&iterations), ("number of cases, 1 to " + std::to_string(kMaxCases) + " (default 200)").c_str())
        ("seed", po::value(&seed), "seed of the run, 0 to 18446744073709551615: case seeds derive from it (default 1)")
        ("case", po::value(&cases), "replay only the case with this seed (repeatable; not with --iterations or --seed)")
        ("vcd", po::value(&o.vcd), "write a VCD of the RTL engine for the whole run")
        ("tolerance-pct", po::value(&tolerance_pct), "allowed cycle drift of the model per case, percent of the RTL's (default 25, docs/calibration.md)")
        ("total-tolerance-pct", po::value(&total_tolerance_pct),
         "allowed drift of the run's total cycles, percent, checked on runs of 100 cases or more (default 2)")
        ("tolerance-cycles", po::value(&tolerance_cycles), "allowed drift in cycles, whatever the case's length (default 2048)")
        ("quiet,q", po::bool_switch(&o.quiet), "print failing cases and the summary only")
        ("list", po::bool_switch(&o.list), "list each case's descriptors")
        ("ungated", po::bool_switch(&o.ungated), "clock the RTL every cycle instead of gating it while quiet")
        ("require-coverage", po::bool_switch(&require_coverage), "fail if a coverage bin is never hit")
        ("set,s", po::value(&o.sets), "override a parameter, e.g. --set pcie.mps=128 (repeatable; not hca.dma.*)");
    try {
        po::variables_map vm;
        const po::parsed_options parsed = po::command_line_parser(argc, argv).options(opts).run();
        po::store(parsed, vm);
        po::notify(vm);
        if (vm.count("help")) {
            std::cout << opts << "\n";
            return 0;
        }
        const std::vector<std::string> stray = po::collect_unrecognized(parsed.options, po::include_positional);
        if (!stray.empty())
            throw std::invalid_argument("unexpected argument '" + sim::printable(stray.front()) +
                                        "': hcasim-regress takes options only (--help lists them)");
        if (!cases.empty() && (vm.count("iterations") || vm.count("seed")))
            throw std::invalid_argument("--case replays the given cases only: --iterations and --seed do not apply");
        if (vm.count("iterations")) o.iterations = cli::parse_unsigned("--iterations", iterations, 1, kMaxCases);
        if (vm.count("seed")) o.seed = cli::parse_unsigned("--seed", seed, 0, UINT64_MAX);
        for (const auto& c : cases) o.cases.push_back(cli::parse_unsigned("--case", c, 0, UINT64_MAX));
        if (vm.count("tolerance-pct")) o.tolerance_pct = cli::parse_nonnegative("--tolerance-pct", tolerance_pct);
        if (vm.count("total-tolerance-pct"))
            o.total_tolerance_pct = cli::parse_nonnegative("--total-tolerance-pct", total_tolerance_pct);
        if (vm.count("tolerance-cycles"))
            o.tolerance_cycles = cli::parse_unsigned("--tolerance-cycles", tolerance_cycles, 0, UINT64_MAX);
        if (vm.count("vcd")) cli::check_output_file("--vcd", o.vcd);
        refuse_fixed_keys(o.sets);
        sim::Config cfg;
        for (const auto& s : o.sets) cfg.set_assignment(s);
        if (cfg.highest_node() >= 0)
            throw std::invalid_argument("--set node" + std::to_string(cfg.highest_node()) +
                                        ".*: hcasim-regress drives one adapter's DMA path, not nodes; set the key itself");
        Regression reg("regress", cfg, o);
        sim::start();
        std::cout << reg.out.str() << std::flush;
        if (reg.failures) return 1;
        if (require_coverage && reg.m_missed) return 1;
        return 0;
    } catch (const po::error& e) {
        std::cerr << "hcasim-regress: error: " << e.what() << "\n";
        return 2;
    } catch (const sim::ConfigError& e) {
        std::cerr << "hcasim-regress: error: " << e.what() << "\n";
        return 2;
    } catch (const std::invalid_argument& e) {
        std::cerr << "hcasim-regress: error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "hcasim-regress: error: " << e.what() << "\n";
        return 1;
    }
}

int main(int argc, char** argv) {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
    return sc_core::sc_elab_and_sim(argc, argv);
}
