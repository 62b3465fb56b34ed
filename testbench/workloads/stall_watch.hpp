// A host program's wait for the fabric that can no longer end: a message
// lost on UD or UC, or an RC QP that has given up while its program waits
// for something else. perftest would hang there; the workloads give up once
// no port of the fabric has sent a packet for silence() of simulated time:
// kSilence, which outlasts an RC requester's wait before it sends again,
// plus twice one call of every host CPU cost of the slowest node, so that
// hosts whose calls take longer than that (a design point with very slow
// posting or polling) are waited for. A long transfer keeps sending, so a
// wait that is merely long (a large message on a slow bus) is never cut short.
#pragma once

#include <cstdint>
#include <string>

#include "testbench/system/system.hpp"

namespace hcasim::testbench {

class StallWatch {
public:
    static constexpr sim::Tick kSilence = 100000 * sim::kPsPerUs;  // 100 ms

    explicit StallWatch(Host& h);
    sim::Tick silence() const { return m_silence; }
    // When check() next looks at the fabric: a sleeping wait need not wake before.
    sim::Tick next_look() const { return m_since + m_silence; }
    // Throws "WHAT: nothing arrived, and no port has sent a packet for
    // 100 ms of simulated time (what was lost)" once the fabric has been
    // silent that long.
    void check(const std::string& what);

private:
    Host& m_host;
    sim::Tick m_silence;
    sim::Tick m_since;
    std::uint64_t m_packets;
};

}  // namespace hcasim::testbench
