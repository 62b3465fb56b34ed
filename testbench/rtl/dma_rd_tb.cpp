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

#include "testbench/rtl/half_bench.hpp"

// Verilator's headers are not ours: their warnings are off.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include HCASIM_HALF_HEADER
#include "verilated.h"
#pragma GCC diagnostic pop

namespace {

constexpr int kBits = HCASIM_HALF_BITS;       // DATA_WIDTH
constexpr int kW = kBits / 8;                 // data path bytes
constexpr unsigned kReads = HCASIM_HALF_READS;  // OUTSTANDING_READS
constexpr unsigned kMaxBurst = HCASIM_HALF_MAX_BURST;
constexpr unsigned kSlots = 16;               // SLOT_WIDTH 4, the module's default

using namespace hcasim::testbench::half_bench;

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
    Args args;
    if (!parse_args(argc, argv, "hcasim-rtl-rdtb", args)) return 2;
    const std::uint64_t seed = args.seed;
    const int n = args.descriptors;
    Rng rng{seed};
    std::vector<std::uint8_t> mem(kMem);
    for (auto& b : mem) b = static_cast<std::uint8_t>(rng.next());
    // A max read request size of this run: a power of two, 128 .. MAX_BURST.
    const unsigned mrrs = random_burst(rng, kMaxBurst);
    std::vector<Desc> descs;
    for (int i = 0; i < n; ++i) {
        const std::uint32_t len = random_length(rng);
        const std::uint64_t off = random_offset(rng, len, kW);
        descs.push_back({kBase + off, len, static_cast<std::uint8_t>(i), static_cast<unsigned>(i) % kSlots});
    }

    auto top = std::make_unique<HCASIM_HALF_DUT>();
    top->cfg_mrrs = mrrs;
    reset(*top);

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
        offer_descriptor(*top, desc_valid ? &descs[next_desc] : nullptr);
        top->m_axis_req_ready = rng.below(4) != 0;
        if (!cpl_valid && !reads.empty() && rng.below(3) != 0) cpl_valid = true;
        top->s_axis_cpl_valid = cpl_valid;
        if (cpl_valid) {
            const Request& r = reads.front();
            std::memcpy(beat, mem.data() + (r.first - kBase) + std::uint64_t(r.next) * kW, kW);
            put<kW>(top->s_axis_cpl_data, beat);
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
                get<kW>(top->m_axis_data_data, beat);
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
