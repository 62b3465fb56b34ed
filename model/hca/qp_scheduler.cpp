#include "model/hca/qp_scheduler.hpp"

namespace hcasim::hca {

QpScheduler::QpScheduler(const sc_core::sc_module_name& name, const HcaParams& p)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_arbiter(&m_clock),
      m_cycles(p.scheduler_cycles) {
    m_n_decisions = &counter("decisions");
}

void QpScheduler::make_ready(QpContext& qp) {
    if (qp.tx.scheduled) return;
    qp.tx.scheduled = true;
    m_ring.push_back(&qp);
}

QpContext* QpScheduler::next() {
    if (m_ring.empty()) return nullptr;
    QpContext* qp = m_ring.front();
    m_ring.pop_front();
    qp->tx.scheduled = false;
    (*m_n_decisions)++;
    return qp;
}

void QpScheduler::remove(QpContext& qp) {
    for (auto it = m_ring.begin(); it != m_ring.end(); ++it) {
        if (*it == &qp) {
            m_ring.erase(it);
            break;
        }
    }
    qp.tx.scheduled = false;
}

}  // namespace hcasim::hca
