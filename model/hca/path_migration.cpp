#include "model/hca/path_migration.hpp"

namespace hcasim::hca {

PathMigration::PathMigration(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_w(w) {}

namespace {
bool migrating_state(const QpContext& qp) {
    const QpState s = qp.qpc.state;
    return qp.service().connected && (s == QpState::Rtr || s == QpState::Rts || s == QpState::Sqd);
}
}  // namespace

void PathMigration::port_down(QpContext& qp, unsigned port_num, sim::Tick t) {
    if (qp.qpc.port != port_num || qp.qpc.mig != PathMigState::Armed || !migrating_state(qp)) return;
    migrate(qp, t);
}

bool PathMigration::fail_over(QpContext& qp, sim::Tick t) {
    if (qp.qpc.mig != PathMigState::Armed || !migrating_state(qp)) return false;
    if (!migrate(qp, t)) return false;
    // A fresh retry budget on the new path.
    qp.req.retries_left = qp.qpc.retry_cnt;
    return true;
}

void PathMigration::peer_state(QpContext& qp, bool migreq, sim::Tick t) {
    if (qp.qpc.mig == PathMigState::Rearm && !migreq) {
        // The peer is rearmed too: both ends have an alternate path.
        qp.qpc.mig = PathMigState::Armed;
        counter("armed")++;
    } else if (qp.qpc.mig == PathMigState::Armed && migreq && migrating_state(qp)) {
        migrate(qp, t);
    }
}

bool PathMigration::migrate(QpContext& qp, sim::Tick t) {
    if (!m_w.ports.valid(qp.qpc.alt.port) || !m_w.ports(qp.qpc.alt.port).link_up()) {
        counter("migration_errors")++;
        HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << ": alternate port " << int(qp.qpc.alt.port)
                                                      << " is down, cannot migrate");
        m_w.events.raise_async(t, AsyncEvent{AsyncEventType::PathMigrationError, qp.qpn});
        return false;
    }
    HCASIM_LOG(sim::LogLevel::Info, path(), "QP " << qp.qpn << " migrates to port " << int(qp.qpc.alt.port)
                                                  << ", DLID " << qp.qpc.alt.dlid);
    load_alternate_path(qp.qpc);
    counter("migrations")++;
    m_w.events.raise_async(t, AsyncEvent{AsyncEventType::PathMigrated, qp.qpn});
    return true;
}

}  // namespace hcasim::hca
