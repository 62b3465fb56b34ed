// Automatic path migration (IBA 17.2.8): moves a connected QP from its
// primary path to the alternate one that software loaded and armed, when
// the primary port's link goes down, when the requester runs out of retries
// on the primary path, or when the peer's packets say it migrated. Raises
// IBV_EVENT_PATH_MIG when it does and IBV_EVENT_PATH_MIG_ERR when the
// alternate path cannot be used either.
#pragma once

#include "model/hca/hca_params.hpp"
#include "model/hca/port.hpp"
#include "model/hca/qp_context.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class PathMigration : public sim::Block, public PathMigrator {
public:
    struct Wiring {
        const PortSet& ports;
        QpErrorHandler& events;
    };
    PathMigration(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);

    // Port port_num's link went down at t: the QP migrates if its primary
    // path leaves from there and it is armed.
    void port_down(QpContext& qp, unsigned port_num, sim::Tick t);
    bool fail_over(QpContext& qp, sim::Tick t) override;
    void peer_state(QpContext& qp, bool migreq, sim::Tick t) override;

private:
    // Migrates when the alternate path's port is up; otherwise reports
    // PATH_MIG_ERR and stays armed. True when it migrated.
    bool migrate(QpContext& qp, sim::Tick t);

    Wiring m_w;
};

}  // namespace hcasim::hca
