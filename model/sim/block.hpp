// Base of every hardware block: a SystemC module with its own clock domain,
// timed actions and counters. Actions run from the simulation's one
// ActionScheduler only when due, so a block with no work costs no wall time
// and no idle clock is ever ticked.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <systemc>

#include "model/sim/action.hpp"
#include "model/sim/action_scheduler.hpp"
#include "model/sim/log.hpp"
#include "model/sim/time.hpp"

namespace hcasim::sim {

class Block : public sc_core::sc_module {
public:
    Block(const sc_core::sc_module_name& name, Clock clock);

    const Clock& clock() const { return m_clock; }
    const std::string& path() const { return m_path; }

    // Runs fn at simulated time t (>= now); actions due at the same time, of
    // this block or any other, run in the order they were scheduled, which
    // keeps runs deterministic.
    void at(Tick t, Action fn) { m_scheduler.at(t, std::move(fn)); }

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
    std::string m_path;
    ActionScheduler& m_scheduler;
    std::map<std::string, std::uint64_t> m_counters;
    std::vector<std::pair<const char*, std::uint64_t*>> m_fast_counters;
};

}  // namespace hcasim::sim
