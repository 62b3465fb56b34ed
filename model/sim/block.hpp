// Base of every hardware block: a SystemC module with its own clock domain, a
// queue of timed actions and counters. A block's single SC_METHOD runs only
// when one of its actions is due, so a block with no work costs no wall time
// and no idle clock is ever ticked.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <vector>

#include <systemc>

#include "model/sim/log.hpp"
#include "model/sim/time.hpp"

namespace hcasim::sim {

class Block : public sc_core::sc_module {
public:
    SC_HAS_PROCESS(Block);
    Block(const sc_core::sc_module_name& name, Clock clock);

    const Clock& clock() const { return m_clock; }
    const std::string& path() const { return m_path; }

    // Runs fn at simulated time t (>= now); actions due at the same time run in
    // the order they were scheduled, which keeps runs deterministic.
    void at(Tick t, std::function<void()> fn);

    // Counters in the spirit of rdma_hw_stats, reported per block.
    // Named by string literals on hot paths: found by address, no string work.
    std::uint64_t& counter(const char* name) {
        for (auto& e : m_fast_counters)
            if (e.first == name) return *e.second;
        std::uint64_t& c = m_counters[name];
        m_fast_counters.emplace_back(name, &c);
        return c;
    }
    std::uint64_t& counter(const std::string& name) { return m_counters[name]; }
    const std::map<std::string, std::uint64_t>& counters() const { return m_counters; }

protected:
    Clock m_clock;

private:
    struct Action {
        Tick t;
        std::uint64_t seq;
        std::function<void()> fn;
    };
    struct Later {
        bool operator()(const Action& a, const Action& b) const {
            return a.t != b.t ? a.t > b.t : a.seq > b.seq;
        }
    };

    void run_due();

    std::string m_path;
    std::priority_queue<Action, std::vector<Action>, Later> m_actions;
    std::uint64_t m_seq = 0;
    Tick m_armed_for = ~Tick(0);
    bool m_running = false;
    sc_core::sc_event m_wake;
    std::map<std::string, std::uint64_t> m_counters;
    std::vector<std::pair<const char*, std::uint64_t*>> m_fast_counters;
};

}  // namespace hcasim::sim
