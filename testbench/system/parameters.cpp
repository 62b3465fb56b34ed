// The one list of every block's parameter declarations.
#include "firmware/cm_agent.hpp"
#include "firmware/command_interface.hpp"
#include "host/driver/host_cpu.hpp"
#include "model/fabric/ib_switch.hpp"
#include "model/fabric/link.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/port.hpp"
#include "model/pcie/pcie_host_interface.hpp"
#include "model/sim/config.hpp"

namespace hcasim::sim {

const ParamRegistry& parameters() {
    static const ParamRegistry registry = [] {
        ParamRegistry r;
        r.add({"sim.seed", ParamSpec::Kind::Int, "", "1", 0, 4294967295.0, {},
               "seed of every pseudo-random choice in a run (the workloads' payload patterns)", "-"});
        r.add({"sim.log_level", ParamSpec::Kind::Choice, "", "warn", 0, 0, {"none", "error", "warn", "info", "debug"},
               "hierarchical log level", "-"});
        pcie::declare_pcie_params(r);
        hca::declare_hca_params(r);
        hca::declare_port_params(r);
        fabric::declare_link_params(r);
        fabric::declare_switch_params(r);
        firmware::declare_firmware_params(r);
        firmware::declare_cm_params(r);
        host::declare_host_params(r);
        return r;
    }();
    return registry;
}

}  // namespace hcasim::sim
