#include "model/sim/simulation_start.hpp"

#include <pthread.h>

#include <cstddef>

// Defined only when AddressSanitizer's runtime is linked in.
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, std::size_t size) __attribute__((weak));
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, std::size_t* size_old)
    __attribute__((weak));
}

namespace hcasim::sim {
namespace {

// A switch from the calling thread's own stack to itself: the sanitizer's
// idea of the current stack is set back to the thread's real one.
void name_own_stack_to_sanitizer() {
    if (__sanitizer_start_switch_fiber == nullptr || __sanitizer_finish_switch_fiber == nullptr) return;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
    void* bottom = nullptr;
    std::size_t size = 0;
    const bool known = pthread_attr_getstack(&attr, &bottom, &size) == 0;
    pthread_attr_destroy(&attr);
    if (!known) return;
    __sanitizer_start_switch_fiber(nullptr, bottom, size);
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
}

}  // namespace

void start() {
    sc_core::sc_start();
    name_own_stack_to_sanitizer();
}

void start(const sc_core::sc_time& duration) {
    sc_core::sc_start(duration);
    name_own_stack_to_sanitizer();
}

}  // namespace hcasim::sim
