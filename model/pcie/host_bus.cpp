#include "model/pcie/host_bus.hpp"

#include "model/pcie/pci_bus.hpp"
#include "model/pcie/pcie_host_interface.hpp"

namespace hcasim::pcie {

void declare_host_bus_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    r.add_per_node({"host.bus", K::Choice, "", "pcie", 0, 0, {"pcie", "pci"},
           "the adapter's bus to the host: pcie (a PCIe link, pcie.*) or pci (a conventional parallel PCI bus, "
           "pci.*)",
           "ConnectX-3/4 are PCIe devices; late-1990s VI NICs (Giganet cLAN, Myrinet) sat on PCI"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 9, "host_bus", declare_host_bus_params};

std::unique_ptr<HostBus> make_host_bus(const sim::Config& cfg, HostMemory& memory) {
    if (cfg.get_choice("host.bus") == "pci") return std::make_unique<PciBus>("pci", PciParams::from(cfg), memory);
    return std::make_unique<PcieHostInterface>("pcie", PcieParams::from(cfg), memory);
}

}  // namespace hcasim::pcie
