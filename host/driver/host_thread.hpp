// Which simulated node the calling host thread runs on. A host program is a
// SystemC thread started by the testbench; the API calls it makes (verbs,
// KVIPL) reach its node's driver through this binding.
#pragma once

#include <sys/types.h>

#include "host/driver/driver.hpp"

namespace hcasim::host {

// Binds the calling SystemC thread to a node's driver, as that node's host
// thread number index (0 for a node's first program; a trace gives each its
// own track).
void bind_current_thread(Driver* driver, int index = 0);
// The driver of the calling thread's node, or nullptr outside a host program.
Driver* current_driver();
// The calling thread's number on its node (0 outside a host program).
int current_thread_index();
// Binds the calling SystemC thread to the address space of the program it
// serves: 0 (the default) for programs that run inside the simulator, a pid
// for a program `hcasim run` started. Buffers it registers are that
// process's memory.
void bind_current_address_space(pid_t pid);
pid_t current_address_space();

}  // namespace hcasim::host
