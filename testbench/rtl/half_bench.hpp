// What the benches of the DMA engine's read and write halves share: their
// command line, the random descriptors they draw, and byte access to a
// verilated data port of W bytes (an integer up to 64 bits, or Verilator's
// wide words).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <type_traits>

#include "testbench/system/split_mix.hpp"

namespace hcasim::testbench::half_bench {

using Rng = SplitMix64;

inline constexpr std::uint64_t kBase = 0x7f0000001000ull;  // host address of the bench's memory[0]
inline constexpr std::size_t kMem = 1 << 20;                // bytes of host memory

struct Args {
    std::uint64_t seed = 1;
    int descriptors = 200;
};

// --seed S and --descriptors N (1..10000); false after a usage message.
inline bool parse_args(int argc, char** argv, const char* name, Args& a) {
    for (int i = 1; i < argc; ++i) {
        const std::string s = argv[i];
        if (s == "--seed" && i + 1 < argc) a.seed = std::strtoull(argv[++i], nullptr, 10);
        else if (s == "--descriptors" && i + 1 < argc) a.descriptors = std::atoi(argv[++i]);
        else {
            std::cerr << "usage: " << name << " [--seed S] [--descriptors N (1..10000)]\n";
            return false;
        }
    }
    if (a.descriptors < 1 || a.descriptors > 10000) {
        std::cerr << name << ": error: --descriptors " << a.descriptors << ": expected 1 to 10000\n";
        return false;
    }
    return true;
}

// A power of two from 128 to max_burst bytes (a max read request or payload size).
inline unsigned random_burst(Rng& rng, unsigned max_burst) {
    unsigned b = 128;
    while (b < max_burst && rng.below(2)) b *= 2;
    return b;
}

// A descriptor's length, from one of four size classes (up to 16 B, 600 B,
// 9000 B, 40000 B), and an offset in host memory that leaves a beat of w
// bytes untouched at each end.
inline std::uint32_t random_length(Rng& rng) {
    const unsigned size_class = static_cast<unsigned>(rng.below(4));
    const std::uint64_t most = size_class == 0 ? 16 : size_class == 1 ? 600 : size_class == 2 ? 9000 : 40000;
    return 1 + static_cast<std::uint32_t>(rng.below(most));
}
inline std::uint64_t random_offset(Rng& rng, std::uint32_t len, int w) {
    return static_cast<std::uint64_t>(w) + rng.below(kMem - len - 3 * static_cast<std::uint64_t>(w));
}

template <int W, class Port>
void put(Port& port, const std::uint8_t* b) {
    if constexpr (std::is_integral_v<Port>) {
        std::uint64_t v = 0;
        std::memcpy(&v, b, W);
        port = static_cast<Port>(v);
    } else {
        for (int w = 0; w < W / 4; ++w) {
            std::uint32_t x;
            std::memcpy(&x, b + 4 * w, 4);
            port[w] = x;
        }
    }
}
template <int W, class Port>
void get(const Port& port, std::uint8_t* b) {
    if constexpr (std::is_integral_v<Port>) {
        const std::uint64_t v = port;
        std::memcpy(b, &v, W);
    } else {
        for (int w = 0; w < W / 4; ++w) {
            const std::uint32_t x = port[w];
            std::memcpy(b + 4 * w, &x, 4);
        }
    }
}

// Drives the descriptor port: *d, or not valid (the fields left as they were).
template <class Top, class Desc>
void offer_descriptor(Top& top, const Desc* d) {
    top.s_desc_valid = d != nullptr;
    if (!d) return;
    top.s_desc_addr = d->addr;
    top.s_desc_len = d->len;
    top.s_desc_tag = d->tag;
    top.s_desc_slot = d->slot;
}

// Clocks a verilated module through n cycles of reset.
template <class Top>
void reset(Top& top, int n = 4) {
    top.rst = 1;
    for (int i = 0; i < n; ++i) {
        top.clk = 0;
        top.eval();
        top.clk = 1;
        top.eval();
    }
    top.rst = 0;
}

}  // namespace hcasim::testbench::half_bench
