// SplitMix64: the small seeded generator the testbench draws deterministic
// data and random choices from, and the byte pattern it fills buffers with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hcasim::testbench {

struct SplitMix64 {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::uint8_t byte() { return static_cast<std::uint8_t>(next()); }
    std::uint64_t below(std::uint64_t n) { return next() % n; }
    std::uint64_t range(std::uint64_t lo, std::uint64_t hi) { return lo + below(hi - lo + 1); }
    bool chance(int pct) { return below(100) < static_cast<std::uint64_t>(pct); }
};

// Fills p with the generator's output for seed, 8 bytes per draw: byte i of
// the stream is the same whatever the buffer it lands in.
inline void fill_split_mix(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
    SplitMix64 r{seed};
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const std::uint64_t v = r.next();
        std::memcpy(p + i, &v, 8);
    }
    if (i < n) {
        const std::uint64_t v = r.next();
        std::memcpy(p + i, &v, n - i);
    }
}

}  // namespace hcasim::testbench
