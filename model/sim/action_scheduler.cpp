#include "model/sim/action_scheduler.hpp"

namespace hcasim::sim {

ActionScheduler& ActionScheduler::current() {
    // One design per process (SystemC's rule); a new simulation context gets
    // a new scheduler, the old one is left to the old context.
    static sc_core::sc_simcontext* context = nullptr;
    static ActionScheduler* scheduler = nullptr;
    if (!scheduler || context != sc_core::sc_get_curr_simcontext()) {
        context = sc_core::sc_get_curr_simcontext();
        scheduler = new ActionScheduler();
    }
    return *scheduler;
}

ActionScheduler::ActionScheduler() : m_wake("hcasim_action_due") {
    sc_core::sc_spawn_options opts;
    opts.spawn_method();
    opts.dont_initialize();
    opts.set_sensitivity(&m_wake);
    sc_core::sc_spawn([this]() { run_due(); }, "hcasim_actions", &opts);
}

void ActionScheduler::at(Tick t, Action fn) {
    const Tick now = now_ps();
    if (t < now) t = now;
    std::uint32_t slot;
    if (m_free_slots.empty()) {
        slot = static_cast<std::uint32_t>(m_slots.size());
        m_slots.push_back(std::move(fn));
    } else {
        slot = m_free_slots.back();
        m_free_slots.pop_back();
        m_slots[slot] = std::move(fn);
    }
    m_due.push(Due{t, m_seq++, slot});
    // Only the earliest pending action needs an event; later ones are found
    // when it runs.
    if (!m_running && t < m_armed_for) {
        m_armed_for = t;
        m_wake.cancel();
        if (t == now) m_wake.notify(sc_core::SC_ZERO_TIME);
        else m_wake.notify(to_sc(t - now));
    }
}

void ActionScheduler::run_due() {
    const Tick now = now_ps();
    m_armed_for = ~Tick(0);
    m_running = true;
    while (!m_due.empty() && m_due.top().t <= now) {
        // Move out before running: the action may schedule more, which can
        // grow m_slots.
        const std::uint32_t slot = m_due.top().slot;
        m_due.pop();
        Action fn = std::move(m_slots[slot]);
        m_free_slots.push_back(slot);
        fn();
    }
    m_running = false;
    if (!m_due.empty()) {
        m_armed_for = m_due.top().t;
        m_wake.notify(to_sc(m_armed_for - now));
    }
}

}  // namespace hcasim::sim
