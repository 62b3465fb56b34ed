// tsc_reads: reads the TSC with rdtsc and with rdtscp around a 10 ms sleep
// and prints how far each moved against CLOCK_MONOTONIC, for the tests to
// check that `hcasim run` gives a program the simulated TSC whether rdtsc
// traps or its TSC reads were replaced (--tsc). With the argument "ud2" it
// then executes an illegal instruction of its own, of which it must die.
#include <x86intrin.h>

#include <cstdio>
#include <cstring>
#include <ctime>

namespace {
long long now_ns() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
}  // namespace

int main(int argc, char** argv) {
    const long long ns0 = now_ns();
    const unsigned long long a0 = __rdtsc();
    unsigned aux = 0;
    const unsigned long long b0 = __rdtscp(&aux);
    const timespec ten_ms{0, 10000000};
    nanosleep(&ten_ms, nullptr);
    const unsigned long long a1 = __rdtsc();
    const unsigned long long b1 = __rdtscp(&aux);
    const long long ns1 = now_ns();
    std::printf("rdtsc %llu rdtscp %llu monotonic_ns %lld\n", a1 - a0, b1 - b0, ns1 - ns0);
    std::fflush(stdout);
    if (argc > 1 && std::strcmp(argv[1], "ud2") == 0) __builtin_trap();
    return 0;
}
