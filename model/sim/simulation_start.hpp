// Runs the SystemC simulation from the calling thread. Use these instead of
// sc_core::sc_start: SystemC 2.3.4 tells AddressSanitizer of every switch
// between coroutine stacks except the one a finishing thread makes, so when
// the last thread to run ends the simulation by returning, the sanitizer
// still takes that thread's stack for the caller's. SystemC frees that
// stack, and the leak check at exit then reads freed memory and dies
// ("Tracer caught signal 11") whenever part of it has been mapped again.
#pragma once

#include <systemc>

namespace hcasim::sim {

// sc_core::sc_start(), then the caller's stack is named to the sanitizer again.
void start();
// sc_core::sc_start(duration), the same.
void start(const sc_core::sc_time& duration);

}  // namespace hcasim::sim
