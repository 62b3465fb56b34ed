// Which seeds a seeded random stress test runs, the same for every one of
// them, so that a long regression can be pointed at any stretch of seeds and
// any failure replayed alone:
//
//   (nothing)                 the test's normal seeds: `normal` of them from `first`
//   HCASIM_STRESS_SEEDS=N     N seeds from `first` instead (long mode)
//   HCASIM_STRESS_SKIP=K      start K seeds further on: with N, seeds first+K ..
//                             first+K+N-1, fresh ones after an earlier long run
//   HCASIM_STRESS_SEED=S      seed S alone (a failure names its seed)
#pragma once

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace hcasim::test::stress {

// An environment variable's value; nullptr when it is unset or empty.
inline const char* env(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
}

// A count from the environment; a value that is not a whole number >= min
// is refused by name rather than read as 0.
inline long long env_count(const char* name, long long fallback, long long min) {
    const char* v = env(name);
    if (!v) return fallback;
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    if (*end != '\0' || n < min)
        throw std::invalid_argument(std::string(name) + "=" + v + ": expected a whole number of at least " +
                                    std::to_string(min));
    return n;
}

inline std::vector<std::uint64_t> seeds(std::uint64_t first, int normal) {
    if (const char* one = env("HCASIM_STRESS_SEED")) {
        char* end = nullptr;
        const std::uint64_t s = std::strtoull(one, &end, 0);
        if (*end != '\0') throw std::invalid_argument(std::string("HCASIM_STRESS_SEED=") + one + ": not a seed");
        return {s};
    }
    const long long n = env_count("HCASIM_STRESS_SEEDS", normal, 1);
    const long long skip = env_count("HCASIM_STRESS_SKIP", 0, 0);
    std::vector<std::uint64_t> out;
    for (long long i = 0; i < n; ++i) out.push_back(first + static_cast<std::uint64_t>(skip + i));
    return out;
}

// True when the seeds are not the test's normal ones: long runs print a line
// per seed.
inline bool long_mode() {
    return env("HCASIM_STRESS_SEEDS") || env("HCASIM_STRESS_SKIP") || env("HCASIM_STRESS_VERBOSE");
}

}  // namespace hcasim::test::stress
