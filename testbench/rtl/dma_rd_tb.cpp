// hcasim-rtl-rdtb: a bench of the DMA engine's read half (rtl/hca_dma_rd.v)
// on its own, verilated to C++ once per point of its parameter range (the
// build gives the data path width, the reads in flight and the largest
// burst; see CMakeLists.txt). Random read descriptors; a host memory that
// answers the read requests in order with host-address-aligned beats, and
// a packet buffer, both throttling at random. Checks every request (never
// longer than, nor across, the max read request size; contiguous per
// descriptor), every byte, keep, last and id of the packed output, every
// done slot, and the reads in flight. Exit status 1 on a mismatch or a hang.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "testbench/system/split_mix.hpp"

// Verilator's headers are not ours: their warnings are off.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include HCASIM_RDTB_HEADER
#include "verilated.h"
#pragma GCC diagnostic pop

namespace {

constexpr int kBits = HCASIM_RDTB_BITS;       // DATA_WIDTH
constexpr int kW = kBits / 8;                 // data path bytes
constexpr unsigned kReads = HCASIM_RDTB_READS;  // OUTSTANDING_READS
constexpr unsigned kMaxBurst = HCASIM_RDTB_MAX_BURST;
constexpr unsigned kSlots = 16;               // SLOT_WIDTH 4, the module's default
constexpr std::uint64_t kBase = 0x7f0000001000ull;  // host address of mem[0]
constexpr std::size_t kMem = 1 << 20;

using Rng = hcasim::testbench::SplitMix64;

// A data port as bytes: an integer up to 64 bits, or Verilator's wide words.
template <class Port>
void put(Port& port, const std::uint8_t* b) {
    if constexpr (std::is_integral_v<Port>) {
        std::uint64_t v = 0;
        std::memcpy(&v, b, kW);
        port = static_cast<Port>(v);
    } else {
        for (int w = 0; w < kW / 4; ++w) {
            std::uint32_t x;
            std::memcpy(&x, b + 4 * w, 4);
            port[w] = x;
        }
    }
}
template <class Port>
void get(const Port& port, std::uint8_t* b) {
    if constexpr (std::is_integral_v<Port>) {
        const std::uint64_t v = port;
        std::memcpy(b, &v, kW);
    } else {
        for (int w = 0; w < kW / 4; ++w) {
            const std::uint32_t x = port[w];
            std::memcpy(b + 4 * w, &x, 4);
        }
    }
}

struct Desc {
    std::uint64_t addr;
    std::uint32_t len;
    std::uint8_t tag;
    unsigned slot;
};

struct Request {
    std::uint64_t first;  // host address of its first beat
    unsigned beats, next = 0;
};

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t seed = 1;
    int n = 200;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--descriptors" && i + 1 < argc) n = std::atoi(argv[++i]);
        else {
            std::cerr << "usage: hcasim-rtl-rdtb [--seed S] [--descriptors N (1..10000)]\n";
            return 2;
        }
    }
    if (n < 1 || n > 10000) {
        std::cerr << "hcasim-rtl-rdtb: error: --descriptors " << n << ": expected 1 to 10000\n";
        return 2;
    }
    Rng rng{seed};
    std::vector<std::uint8_t> mem(kMem);
    for (auto& b : mem) b = static_cast<std::uint8_t>(rng.next());
    // A max read request size of this run: a power of two, 128 .. MAX_BURST.
    unsigned mrrs = 128;
    while (mrrs < kMaxBurst && rng.below(2)) mrrs *= 2;
    std::vector<Desc> descs;
    for (int i = 0; i < n; ++i) {
        const unsigned size_class = static_cast<unsigned>(rng.below(4));
        const std::uint32_t len = size_class == 0   ? 1 + static_cast<std::uint32_t>(rng.below(16))
                                  : size_class == 1 ? 1 + static_cast<std::uint32_t>(rng.below(600))
                                  : size_class == 2 ? 1 + static_cast<std::uint32_t>(rng.below(9000))
                                                    : 1 + static_cast<std::uint32_t>(rng.below(40000));
        const std::uint64_t off = kW + rng.below(static_cast<std::uint32_t>(kMem - len - 3 * kW));
        descs.push_back({kBase + off, len, static_cast<std::uint8_t>(i), static_cast<unsigned>(i) % kSlots});
    }

    auto top = std::make_unique<HCASIM_RDTB_DUT>();
    top->cfg_mrrs = mrrs;
    top->rst = 1;
    for (int i = 0; i < 4; ++i) {
        top->clk = 0;
        top->eval();
        top->clk = 1;
        top->eval();
    }
    top->rst = 0;

    int errors = 0;
    auto fail = [&](std::uint64_t cycle, const std::string& what) {
        if (errors++ < 10) std::cout << "rdtb: cycle " << cycle << ": " << what << "\n";
    };
    std::size_t next_desc = 0;            // the next descriptor to hand over
    std::size_t req_desc = 0;             // the descriptor the requests are for
    std::uint64_t req_off = 0;            // bytes of it requested so far
    std::size_t out_desc = 0;             // the descriptor the output is for
    std::uint64_t out_off = 0;            // bytes of it output so far
    std::size_t done = 0;                 // done slots reported
    std::deque<Request> reads;            // requested, completions not all sent
    unsigned max_inflight = 0;
    bool desc_valid = false, cpl_valid = false;
    std::uint64_t cycle = 0, last_progress = 0;
    std::uint8_t beat[kW];
    while (done < descs.size() && errors == 0) {
        ++cycle;
        if (cycle - last_progress > 200000) {
            fail(cycle, "no progress for 200000 cycles");
            break;
        }
        // Inputs for this cycle: a valid stays up until it is taken.
        top->clk = 0;
        if (!desc_valid && next_desc < descs.size() && rng.below(3) != 0) desc_valid = true;
        top->s_desc_valid = desc_valid;
        if (desc_valid) {
            const Desc& d = descs[next_desc];
            top->s_desc_addr = d.addr;
            top->s_desc_len = d.len;
            top->s_desc_tag = d.tag;
            top->s_desc_slot = d.slot;
        }
        top->m_axis_req_ready = rng.below(4) != 0;
        if (!cpl_valid && !reads.empty() && rng.below(3) != 0) cpl_valid = true;
        top->s_axis_cpl_valid = cpl_valid;
        if (cpl_valid) {
            const Request& r = reads.front();
            std::memcpy(beat, mem.data() + (r.first - kBase) + std::uint64_t(r.next) * kW, kW);
            put(top->s_axis_cpl_data, beat);
        }
        top->m_axis_data_ready = rng.below(4) != 0;
        top->eval();

        // What the clock edge takes.
        const bool desc_fire = top->s_desc_valid && top->s_desc_ready;
        const bool req_fire = top->m_axis_req_valid && top->m_axis_req_ready;
        const bool cpl_fire = top->s_axis_cpl_valid && top->s_axis_cpl_ready;
        const bool data_fire = top->m_axis_data_valid && top->m_axis_data_ready;
        if (req_fire) {
            const std::uint64_t addr = top->m_axis_req_addr;
            const unsigned len = top->m_axis_req_len;
            if (req_desc >= descs.size()) {
                fail(cycle, "a read request after the last descriptor's");
            } else {
                const Desc& d = descs[req_desc];
                if (addr != d.addr + req_off) fail(cycle, "request address not where the last one ended");
                if (len == 0 || len > mrrs) fail(cycle, "request length " + std::to_string(len));
                if (addr / mrrs != (addr + len - 1) / mrrs) fail(cycle, "request crosses a max-read-request boundary");
                if (req_off + len > d.len) fail(cycle, "request beyond its descriptor");
                req_off += len;
                if (req_off == d.len) ++req_desc, req_off = 0;
                const std::uint64_t first = addr & ~std::uint64_t(kW - 1);
                reads.push_back({first, static_cast<unsigned>((addr - first + len + kW - 1) / kW)});
            }
            last_progress = cycle;
        }
        if (data_fire) {
            if (out_desc >= descs.size()) {
                fail(cycle, "output after the last descriptor's");
            } else {
                const Desc& d = descs[out_desc];
                const unsigned count = static_cast<unsigned>(std::min<std::uint64_t>(kW, d.len - out_off));
                const std::uint64_t keep = top->m_axis_data_keep;
                const std::uint64_t want_keep = count == 64 ? ~0ull : (1ull << count) - 1;
                if (keep != want_keep) fail(cycle, "keep of descriptor " + std::to_string(out_desc));
                if (top->m_axis_data_id != d.tag) fail(cycle, "id of descriptor " + std::to_string(out_desc));
                if (bool(top->m_axis_data_last) != (out_off + count == d.len))
                    fail(cycle, "last of descriptor " + std::to_string(out_desc));
                get(top->m_axis_data_data, beat);
                if (std::memcmp(beat, mem.data() + (d.addr - kBase) + out_off, count) != 0)
                    fail(cycle, "bytes of descriptor " + std::to_string(out_desc) + " at " + std::to_string(out_off));
                out_off += count;
                if (top->done_valid) {
                    if (top->done_slot != d.slot) fail(cycle, "done slot of descriptor " + std::to_string(out_desc));
                    ++done;
                }
                if (out_off == d.len) {
                    if (!top->done_valid) fail(cycle, "no done with the last beat of descriptor " + std::to_string(out_desc));
                    ++out_desc, out_off = 0;
                }
            }
            last_progress = cycle;
        } else if (top->done_valid) {
            fail(cycle, "done without an output beat");
        }
        max_inflight = std::max<unsigned>(max_inflight, top->stat_inflight);
        if (top->stat_inflight > kReads) fail(cycle, "more reads in flight than OUTSTANDING_READS");

        top->clk = 1;
        top->eval();
        if (desc_fire) ++next_desc, desc_valid = false, last_progress = cycle;
        if (cpl_fire) {
            if (++reads.front().next == reads.front().beats) reads.pop_front();
            cpl_valid = false;
            last_progress = cycle;
        }
    }
    if (errors == 0 && (!reads.empty() || req_desc != descs.size()))
        fail(cycle, "requests or completions left over at the end");
    // Nothing left: the module says it can stop its clock.
    for (int i = 0; i < 4 && errors == 0; ++i) {
        top->clk = 0;
        top->s_desc_valid = 0;
        top->s_axis_cpl_valid = 0;
        top->eval();
        top->clk = 1;
        top->eval();
    }
    if (errors == 0 && !top->quiet) fail(cycle, "not quiet at the end");
    top->final();
    std::uint64_t bytes = 0;
    for (const auto& d : descs) bytes += d.len;
    std::cout << "rdtb (" << kBits << "-bit data path, " << kReads << " reads, MAX_BURST " << kMaxBurst
              << "): seed " << seed << ", mrrs " << mrrs << ", " << descs.size() << " descriptors, " << bytes
              << " bytes, " << cycle << " cycles, " << max_inflight << " reads in flight at most: "
              << (errors ? "FAILED" : "ok") << "\n";
    return errors ? 1 : 0;
}
