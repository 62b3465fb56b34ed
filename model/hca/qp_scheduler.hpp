// QP scheduler: round robin among the QPs that have send work, so one busy QP
// cannot starve the others. O(1) per decision however many QPs exist.
#pragma once

#include <cstdint>
#include <deque>

#include "model/hca/qp_context.hpp"
#include "model/hca/hca_params.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class QpScheduler : public sim::Block {
public:
    // hca.control_program: this block's steps run on the adapter's one processor.
    void run_steps_on(sim::Timeline& processor) { m_arbiter.share(&processor, "schedule"); }
    QpScheduler(const sc_core::sc_module_name& name, const HcaParams& p);

    // Marks a QP as having work (no effect if it already is in the ring).
    void make_ready(QpContext& qp);
    // Takes the next QP in round-robin order, or nullptr.
    QpContext* next();
    // Forgets a QP that is being destroyed.
    void remove(QpContext& qp);
    bool empty() const { return m_ring.empty(); }
    // Cost of one arbitration decision starting at t.
    sim::Tick decide(sim::Tick t) { return m_arbiter.reserve(t, m_cycles).end; }

private:
    std::deque<QpContext*> m_ring;
    sim::Timeline m_arbiter;
    std::uint32_t m_cycles;
    // Hot counters, looked up once.
    std::uint64_t* m_n_decisions = nullptr;
};

}  // namespace hcasim::hca
