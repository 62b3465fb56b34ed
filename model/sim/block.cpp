#include "model/sim/block.hpp"

namespace hcasim::sim {

Block::Block(const sc_core::sc_module_name& name, Clock clock)
    : sc_core::sc_module(name), m_clock(std::move(clock)), m_path(this->name()) {
    SC_METHOD(run_due);
    sensitive << m_wake;
    dont_initialize();
}

void Block::at(Tick t, Action fn) {
    const Tick now = now_ps();
    if (t < now) t = now;
    m_actions.push(Timed{t, m_seq++, std::move(fn)});
    // Only the earliest pending action needs an event; later ones are found
    // when it runs.
    if (!m_running && t < m_armed_for) {
        m_armed_for = t;
        m_wake.cancel();
        if (t == now) m_wake.notify(sc_core::SC_ZERO_TIME);
        else m_wake.notify(to_sc(t - now));
    }
}

void Block::run_due() {
    const Tick now = now_ps();
    m_armed_for = ~Tick(0);
    m_running = true;
    while (!m_actions.empty() && m_actions.top().t <= now) {
        // Move out before running: the action may schedule more.
        Action fn = std::move(const_cast<Timed&>(m_actions.top()).fn);
        m_actions.pop();
        fn();
    }
    m_running = false;
    if (!m_actions.empty()) {
        m_armed_for = m_actions.top().t;
        m_wake.notify(to_sc(m_armed_for - now));
    }
}

}  // namespace hcasim::sim
