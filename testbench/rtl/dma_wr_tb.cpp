// hcasim-rtl-wrtb: a bench of the DMA engine's write half (rtl/hca_dma_wr.v)
// on its own, verilated to C++ once per point of its parameter range (the
// build gives the data path width and the largest burst; see
// CMakeLists.txt). Random write descriptors under a max payload size the
// seed picks; a packet buffer that feeds each descriptor's payload and a
// host memory that takes the TLP beats, both throttling at random. Checks
// every TLP (as long as it may be, never across an MPS boundary, contiguous
// per descriptor), the address, length, keep and last of every beat, the
// tag the module asks its payload by, every done slot, and in the end every
// byte of host memory, written or not. Exit status 1 on a mismatch or a hang.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

constexpr int kBits = HCASIM_HALF_BITS;  // DATA_WIDTH
constexpr int kW = kBits / 8;            // data path bytes
constexpr unsigned kMaxBurst = HCASIM_HALF_MAX_BURST;
constexpr unsigned kSlots = 16;  // SLOT_WIDTH 4, the module's default

using namespace hcasim::testbench::half_bench;

struct Desc {
    std::uint64_t addr;
    std::uint32_t len;
    std::uint8_t tag;
    unsigned slot;
    std::vector<std::uint8_t> payload;
};

// Keep mask of byte lanes [lo, hi) of a beat.
std::uint64_t lanes(unsigned lo, unsigned hi) {
    const auto upto = [](unsigned n) { return n >= 64 ? ~0ull : (1ull << n) - 1; };
    return upto(hi) & ~upto(lo);
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    if (!parse_args(argc, argv, "hcasim-rtl-wrtb", args)) return 2;
    const std::uint64_t seed = args.seed;
    const int n = args.descriptors;
    Rng rng{seed};
    std::vector<std::uint8_t> mem(kMem);
    for (auto& b : mem) b = static_cast<std::uint8_t>(rng.next());
    std::vector<std::uint8_t> want = mem;  // host memory once every descriptor is written
    // A max payload size of this run: a power of two, 128 .. MAX_BURST.
    const unsigned mps = random_burst(rng, kMaxBurst);
    std::vector<Desc> descs;
    for (int i = 0; i < n; ++i) {
        const std::uint32_t len = random_length(rng);
        const std::uint64_t off = random_offset(rng, len, kW);
        Desc d{kBase + off, len, static_cast<std::uint8_t>(i), static_cast<unsigned>(i) % kSlots, {}};
        d.payload.resize(len);
        for (auto& b : d.payload) b = static_cast<std::uint8_t>(rng.next());
        std::memcpy(want.data() + off, d.payload.data(), len);
        descs.push_back(std::move(d));
    }

    auto top = std::make_unique<HCASIM_HALF_DUT>();
    top->cfg_mps = mps;
    reset(*top);

    int errors = 0;
    auto fail = [&](std::uint64_t cycle, const std::string& what) {
        if (errors++ < 10) std::cout << "wrtb: cycle " << cycle << ": " << what << "\n";
    };
    std::size_t next_desc = 0;  // the next descriptor to hand over
    std::size_t feed_desc = 0;  // the descriptor whose payload is fed
    std::uint64_t fed = 0;      // bytes of it fed so far
    std::size_t out_desc = 0;   // the descriptor the TLPs are for
    std::uint64_t out_off = 0;  // bytes of it in TLPs begun so far
    bool in_tlp = false;        // a TLP has begun and its last beat not gone
    std::uint64_t tlp_addr = 0;
    unsigned tlp_len = 0, tlp_beats = 0, tlp_beat = 0;
    std::size_t done = 0, tlps = 0;
    bool desc_valid = false, data_valid = false;
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
        top->eval();
        // The packet buffer answers the tag the module asks by, for a
        // descriptor it has taken and not been fed whole.
        const bool can_feed = top->data_tag_valid && feed_desc < next_desc;
        if (can_feed && top->data_tag != descs[feed_desc].tag)
            fail(cycle, "payload asked by tag " + std::to_string(top->data_tag) + ", descriptor " +
                            std::to_string(feed_desc) + " has tag " + std::to_string(descs[feed_desc].tag));
        if (!data_valid && can_feed && rng.below(3) != 0) data_valid = true;
        top->s_axis_data_valid = data_valid;
        if (data_valid) {
            const Desc& d = descs[feed_desc];
            // Bytes past the payload's end are junk the module must not write.
            for (int i = 0; i < kW; ++i) beat[i] = static_cast<std::uint8_t>(0xA5 ^ i);
            std::memcpy(beat, d.payload.data() + fed, std::min<std::uint64_t>(kW, d.len - fed));
            put<kW>(top->s_axis_data_data, beat);
        }
        top->m_axis_wr_ready = rng.below(4) != 0;
        top->eval();

        // What the clock edge takes.
        const bool desc_fire = top->s_desc_valid && top->s_desc_ready;
        const bool data_fire = top->s_axis_data_valid && top->s_axis_data_ready;
        const bool wr_fire = top->m_axis_wr_valid && top->m_axis_wr_ready;
        if (wr_fire) {
            const std::uint64_t addr = top->m_axis_wr_addr;
            const unsigned len = top->m_axis_wr_len;
            if (out_desc >= descs.size()) {
                fail(cycle, "a TLP after the last descriptor's");
            } else {
                const Desc& d = descs[out_desc];
                const std::string which = "descriptor " + std::to_string(out_desc);
                if (!in_tlp) {
                    // A TLP's first beat: as long as it may be, from where the last one ended.
                    const std::uint64_t rem = d.len - out_off;
                    const unsigned to_boundary = mps - static_cast<unsigned>(addr % mps);
                    if (addr != d.addr + out_off) fail(cycle, "TLP address not where the last one of " + which + " ended");
                    if (len != std::min<std::uint64_t>(rem, to_boundary))
                        fail(cycle, "TLP length " + std::to_string(len) + " of " + which + ": expected " +
                                        std::to_string(std::min<std::uint64_t>(rem, to_boundary)));
                    in_tlp = true;
                    tlp_addr = addr, tlp_len = len, tlp_beat = 0;
                    tlp_beats = static_cast<unsigned>((addr % kW + len + kW - 1) / kW);
                    out_off += len;
                    ++tlps;
                } else if (addr != tlp_addr || len != tlp_len) {
                    fail(cycle, "address or length changed within a TLP of " + which);
                }
                // Bytes of this beat that belong to the TLP, at host alignment.
                const std::uint64_t base = (tlp_addr & ~std::uint64_t(kW - 1)) + std::uint64_t(tlp_beat) * kW;
                const std::uint64_t lo = std::max(base, tlp_addr), hi = std::min(base + kW, tlp_addr + tlp_len);
                const std::uint64_t want_keep = lanes(static_cast<unsigned>(lo - base), static_cast<unsigned>(hi - base));
                if (std::uint64_t(top->m_axis_wr_keep) != want_keep) fail(cycle, "keep of a beat of " + which);
                const bool last = tlp_beat + 1 == tlp_beats;
                if (bool(top->m_axis_wr_last) != last) fail(cycle, "last of a beat of " + which);
                get<kW>(top->m_axis_wr_data, beat);
                for (unsigned lane = 0; lane < static_cast<unsigned>(kW); ++lane)
                    if ((std::uint64_t(top->m_axis_wr_keep) >> lane) & 1) mem[base + lane - kBase] = beat[lane];
                const bool desc_last = last && out_off == d.len;
                if (bool(top->done_valid) != desc_last)
                    fail(cycle, std::string(desc_last ? "no done with" : "done before") + " the last beat of " + which);
                if (top->done_valid && top->done_slot != d.slot) fail(cycle, "done slot of " + which);
                if (top->done_valid) ++done;
                ++tlp_beat;
                if (last) in_tlp = false;
                if (desc_last) ++out_desc, out_off = 0;
            }
            last_progress = cycle;
        } else if (top->done_valid) {
            fail(cycle, "done without a TLP beat");
        }

        top->clk = 1;
        top->eval();
        if (desc_fire) ++next_desc, desc_valid = false, last_progress = cycle;
        if (data_fire) {
            fed += kW;
            if (fed >= descs[feed_desc].len) ++feed_desc, fed = 0;
            data_valid = false;
            last_progress = cycle;
        }
    }
    if (errors == 0 && (feed_desc != descs.size() || in_tlp)) fail(cycle, "payload or a TLP left over at the end");
    if (errors == 0 && mem != want) {
        std::size_t at = 0;
        while (mem[at] == want[at]) ++at;
        fail(cycle, "host memory differs from what the descriptors wrote, first at byte " + std::to_string(at));
    }
    // Nothing left: the module says it can stop its clock.
    for (int i = 0; i < 4 && errors == 0; ++i) {
        top->clk = 0;
        top->s_desc_valid = 0;
        top->s_axis_data_valid = 0;
        top->eval();
        top->clk = 1;
        top->eval();
    }
    if (errors == 0 && !top->quiet) fail(cycle, "not quiet at the end");
    top->final();
    std::uint64_t bytes = 0;
    for (const auto& d : descs) bytes += d.len;
    std::cout << "wrtb (" << kBits << "-bit data path, MAX_BURST " << kMaxBurst << "): seed " << seed << ", mps " << mps
              << ", " << descs.size() << " descriptors, " << bytes << " bytes, " << tlps << " TLPs, " << cycle
              << " cycles: " << (errors ? "FAILED" : "ok") << "\n";
    return errors ? 1 : 0;
}
