// A management query in flight from this host's QP1 (an IPoIB ARP request,
// an SA query): its MAD, where it goes, when it is resent and given up, and
// who takes the answer. Shared by the driver's management clients.
#pragma once

#include <cstdint>
#include <functional>

#include "host/driver/driver.hpp"
#include "model/packet/ib_cm_mad.hpp"

namespace hcasim::host {

struct Driver::MgmtQuery {
    std::uint64_t tid = 0;
    std::uint16_t dlid = 0;
    std::uint8_t mad[packet::ibcm::kMadBytes]{};
    sim::Tick retrans = 0;   // between sends; 0: sent once
    sim::Tick deadline = 0;  // when the caller stops waiting
    bool done = false;
    bool armed = false;      // the deadline's timer is set
    // The answer (err 0) from slid, or the time-out (ETIMEDOUT).
    std::function<void(int err, std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len)> answer;
};

}  // namespace hcasim::host
