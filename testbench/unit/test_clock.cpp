// Clock edge arithmetic: the quotients every timed block takes by the
// period's precomputed inverse are the exact ones.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "model/sim/time.hpp"

using hcasim::sim::Clock;
using hcasim::sim::Tick;

namespace {

using u128 = unsigned __int128;

std::uint64_t exact_index(Tick t, std::uint64_t fs) {
    return t == 0 ? 0 : static_cast<std::uint64_t>(static_cast<u128>(t - 1) * 1000 / fs) + 1;
}
std::uint64_t exact_count(Tick t, std::uint64_t fs) { return static_cast<std::uint64_t>(static_cast<u128>(t) * 1000 / fs); }
Tick exact_edge(std::uint64_t k, std::uint64_t fs) { return static_cast<Tick>((static_cast<u128>(k) * fs + 999) / 1000); }

}  // namespace

TEST_CASE("clock edges, edge indices and cycle counts are exact for any period and time", "[unit]") {
    std::mt19937_64 rng(20261129);
    // The presets' clocks (PCIe Gen3 and PCI, FDR and Myrinet symbols, adapter
    // cores at 133 to 800 MHz), the extremes and random periods.
    std::vector<std::uint64_t> periods = {1,       2,       3,        999,      1000,    1001,    586667,
                                          1015625, 1250000, 2000000,  5000000,  7518797, 15151515, 7999999,
                                          1u << 20, 999999999, 4000000000ull};
    for (int i = 0; i < 40; ++i) periods.push_back(1 + rng() % 20000000);
    const Tick near_limit = std::numeric_limits<std::uint64_t>::max() / 1000;
    for (const std::uint64_t fs : periods) {
        const Clock clk("c", static_cast<double>(fs) / 1000.0);
        std::vector<Tick> times = {0, 1, 2, 999, 1000, 1001, near_limit - 1, near_limit, near_limit + 1,
                                   near_limit * 50};
        for (int i = 0; i < 400; ++i) {
            const Tick t = rng() % (i < 200 ? 1000000000000ull : near_limit);
            times.push_back(t);
            const std::uint64_t k = exact_index(t, fs);
            // Each edge and its neighbours: where rounding bites.
            for (const std::uint64_t j : {k, k + 1}) {
                const Tick e = exact_edge(j, fs);
                times.insert(times.end(), {e - 1, e, e + 1});
            }
        }
        for (const Tick t : times) {
            INFO("period " << fs << " fs, t " << t << " ps");
            const std::uint64_t k = exact_index(t, fs);
            REQUIRE(clk.index_at(t) == k);
            REQUIRE(clk.count_at(t) == exact_count(t, fs));
            if (t < near_limit / 2) {  // edge(k) itself needs k * period below 2^64
                REQUIRE(clk.edge_at_or_after(t) == exact_edge(k, fs));
                REQUIRE(clk.after(t, 37) == exact_edge(k + 37, fs));
                const auto [start, end] = clk.span(t, 5);
                REQUIRE(start == exact_edge(k, fs));
                REQUIRE(end == exact_edge(k + 5, fs));
            }
        }
    }
}
