// Which simulated node the calling host thread runs on. A host program is a
// SystemC thread started by the testbench; the API calls it makes (verbs,
// KVIPL) reach its node's driver through this binding.
#pragma once

#include <sys/types.h>

#include "host/driver/driver.hpp"

namespace hcasim::host {

// Binds the calling SystemC thread to a node's driver.
void bind_current_thread(Driver* driver);
// The driver of the calling thread's node, or nullptr outside a host program.
Driver* current_driver();
// Binds the calling SystemC thread to the address space of the program it
// serves: 0 (the default) for programs that run inside the simulator, a pid
// for a program `hcasim run` started. Buffers it registers are that
// process's memory.
void bind_current_address_space(pid_t pid);
pid_t current_address_space();

}  // namespace hcasim::host
