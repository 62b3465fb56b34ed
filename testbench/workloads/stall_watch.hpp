// A host program's wait for the fabric that can no longer end: a message
// lost on UD or UC, or an RC QP that has given up while its program waits
// for something else. perftest would hang there; the workloads give up once
// no port of the fabric has sent a packet for a silence of simulated time:
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
    // When check() next looks at the fabric: a sleeping wait need not wake before.
    sim::Tick next_look() const { return m_since + m_silence; }
    // Throws "WHAT: nothing arrived, and no port has sent a packet for
    // 100 ms of simulated time (what was lost)" once the fabric has been
    // silent that long. Cheap until the first look: it runs on every poll.
    void check(const char* what);

private:
    Host& m_host;
    // kSilence, plus the hosts' calls once the first look needs them (a
    // wait rarely lasts that long, and most waits are short).
    sim::Tick m_silence = kSilence;
    bool m_hosts_counted = false;
    sim::Tick m_since;
    std::uint64_t m_packets;
};

}  // namespace hcasim::testbench
