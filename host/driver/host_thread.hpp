// Which simulated node the calling host thread runs on. A host program is a
// SystemC thread started by the testbench; the API calls it makes (verbs,
// KVIPL) reach its node's driver through this binding.
#pragma once

#include "host/driver/driver.hpp"

namespace hcasim::host {

// Binds the calling SystemC thread to a node's driver.
void bind_current_thread(Driver* driver);
// The driver of the calling thread's node, or nullptr outside a host program.
Driver* current_driver();

}  // namespace hcasim::host
