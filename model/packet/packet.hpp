// A packet in flight: its wire bytes (LRH through VCRC) and the times the
// fabric stamps on it. Blocks pass packets by shared pointer so a switch or
// link never copies payload.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/sim/time.hpp"

namespace hcasim::packet {

struct Packet {
    std::vector<std::uint8_t> bytes;
    sim::Tick first_bit = 0;  // when its first bit left the last transmitter
    sim::Tick last_bit = 0;   // when its last bit left the last transmitter
};

using PacketPtr = std::shared_ptr<Packet>;

}  // namespace hcasim::packet
