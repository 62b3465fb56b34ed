// What sits at either end of a link: an adapter port or a switch port. A
// transmitter hands a packet to the link with the times its first and last
// bits leave; the link calls the far endpoint when they arrive. Flow-control
// credits travel the other way: the receiver returns a packet's buffer space
// to its sender once the packet has left its receive buffer.
#pragma once

#include <cstdint>

#include "model/packet/packet.hpp"

namespace hcasim::fabric {

class Endpoint {
public:
    virtual ~Endpoint() = default;
    // The packet's first bit arrives at first_bit, its last at last_bit.
    virtual void arrive(packet::PacketPtr pkt, sim::Tick first_bit, sim::Tick last_bit) = 0;
    // The link partner's flow-control packet giving back bytes of receive
    // buffer arrives at t. An endpoint that does not wait for credits
    // ignores it.
    virtual void credits_returned(std::uint32_t bytes, sim::Tick t) {
        (void)bytes;
        (void)t;
    }
};

}  // namespace hcasim::fabric
