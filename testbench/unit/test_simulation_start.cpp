// sim::start names the caller's stack to AddressSanitizer again after the
// simulation, however its last thread ended. Only a sanitizer build can ask
// the sanitizer which stack it takes for the current one.
#include <catch2/catch.hpp>

#if defined(__SANITIZE_ADDRESS__)

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <ostream>

#include <systemc>

#include "model/sim/simulation_start.hpp"
#include "testbench/system/isolated.hpp"

extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, std::size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, std::size_t* size_old);
}

namespace {

bool within(std::uintptr_t a, const void* bottom, std::size_t size) {
    const auto b = reinterpret_cast<std::uintptr_t>(bottom);
    return a >= b && a < b + size;
}

}  // namespace

TEST_CASE("after a simulation whose last thread ends by returning, the sanitizer knows the caller's own stack again",
          "[sim][unit][isolated]") {
    const auto r = hcasim::testbench::run_isolated([](std::ostream& os) {
        static std::uintptr_t in_thread = 0;
        sc_core::sc_spawn_options opts;
        opts.set_stack_size(8 << 20);
        sc_core::sc_spawn(
            [] {
                int local = 0;
                in_thread = reinterpret_cast<std::uintptr_t>(&local);
                sc_core::wait(sc_core::sc_time(1, sc_core::SC_NS));
            },
            "returns", &opts);
        hcasim::sim::start();
        // A switch to this thread's own stack hands back the stack the
        // sanitizer took for the current one until now.
        pthread_attr_t attr;
        pthread_getattr_np(pthread_self(), &attr);
        void* bottom = nullptr;
        std::size_t size = 0;
        pthread_attr_getstack(&attr, &bottom, &size);
        pthread_attr_destroy(&attr);
        const void* seen_bottom = nullptr;
        std::size_t seen_size = 0;
        __sanitizer_start_switch_fiber(nullptr, bottom, size);
        __sanitizer_finish_switch_fiber(nullptr, &seen_bottom, &seen_size);
        int here = 0;
        os << "caller's stack: " << within(reinterpret_cast<std::uintptr_t>(&here), seen_bottom, seen_size)
           << ", ended thread's stack: " << within(in_thread, seen_bottom, seen_size);
    });
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.output == "caller's stack: 1, ended thread's stack: 0");
}

#endif
