// What sits at either end of a link: an adapter port or a switch port. A
// transmitter hands a packet to the link with the times its first and last
// bits leave; the link calls the far endpoint when they arrive.
#pragma once

#include "model/packet/packet.hpp"

namespace hcasim::fabric {

class Endpoint {
public:
    virtual ~Endpoint() = default;
    // The packet's first bit arrives at first_bit, its last at last_bit.
    virtual void arrive(packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) = 0;
};

}  // namespace hcasim::fabric
