// A small seeded generator for the model's random choices (fault
// injection). SplitMix64 with its draws turned into numbers by hand, so one
// seed gives the same sequence with every compiler and standard library.
#pragma once

#include <cstdint>

namespace hcasim::sim {

class Random {
public:
    explicit Random(std::uint64_t seed) : m_state(seed) {}

    std::uint64_t next() {
        std::uint64_t z = (m_state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, 1).
    double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
    // True with probability p (never draws when p is 0).
    bool chance(double p) { return p > 0 && uniform() < p; }
    // Uniform in [0, n), n > 0.
    std::uint64_t below(std::uint64_t n) { return next() % n; }

private:
    std::uint64_t m_state;
};

}  // namespace hcasim::sim
