// The one queue of timed actions every block of a simulation shares. Actions
// due at the same simulated time run in the order they were scheduled, across
// blocks as within one. With a queue per block, same-time actions of
// different blocks ran in the order SystemC's event queue released the
// blocks, which shifts with any unrelated timed wait (a host thread's poll
// time-out, say): a run would depend on how its host loops are simulated.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include <systemc>

#include "model/sim/action.hpp"
#include "model/sim/time.hpp"

namespace hcasim::sim {

class ActionScheduler {
public:
    // The scheduler of the current SystemC simulation, made on first use.
    static ActionScheduler& current();

    // Runs fn at simulated time t (now if t is earlier).
    void at(Tick t, Action fn);

private:
    ActionScheduler();
    void run_due();

    // The heap orders small keys; the actions stay put in slots, so a push
    // or pop moves 24 bytes, not a whole Action.
    struct Due {
        Tick t;
        std::uint64_t seq;
        std::uint32_t slot;
    };
    struct Later {
        bool operator()(const Due& a, const Due& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
    };

    std::priority_queue<Due, std::vector<Due>, Later> m_due;
    std::vector<Action> m_slots;
    std::vector<std::uint32_t> m_free_slots;
    std::uint64_t m_seq = 0;
    Tick m_armed_for = ~Tick(0);
    bool m_running = false;
    sc_core::sc_event m_wake;
};

}  // namespace hcasim::sim
