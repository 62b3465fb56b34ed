// Which simulated node the calling host thread runs on. A host program is a
// SystemC thread started by the testbench; the verbs calls it makes reach
// its node's driver through this binding.
#pragma once

#include "host/driver/driver.hpp"

namespace hcasim::verbs {

// Binds the calling SystemC thread to a node's driver.
void bind_current_thread(host::Driver* driver);
// The driver of the calling thread's node, or nullptr outside a host program.
host::Driver* current_driver();

}  // namespace hcasim::verbs
