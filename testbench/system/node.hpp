// One simulated host: its memory, the bus to its adapter (PCIe or PCI), the adapter,
// the adapter's firmware and the host driver.
#pragma once

#include <memory>
#include <string>

#include "firmware/cm_agent.hpp"
#include "firmware/command_interface.hpp"
#include "host/driver/driver.hpp"
#include "model/hca/hca.hpp"
#include "model/pcie/host_memory.hpp"
#include "model/pcie/host_bus.hpp"

namespace hcasim::testbench {

class Node : public sc_core::sc_module {
public:
    // lid: the LID the subnet manager gave the adapter's port (lid2: its
    // second port's, with port.count=2).
    Node(const sc_core::sc_module_name& name, const sim::Config& cfg, int index, std::uint16_t lid,
         std::uint16_t lid2 = 0);

    int index() const { return m_index; }
    host::Driver& driver() { return *m_driver; }
    hca::Hca& hca() { return m_hca; }
    pcie::HostBus& pcie() { return *m_bus; }
    firmware::CommandInterface& firmware() { return m_fw; }
    firmware::CmAgent& cm() { return m_cm; }

private:
    int m_index;
    pcie::HostMemory m_memory;
    std::unique_ptr<pcie::HostBus> m_bus;  // host.bus picks PCIe or PCI
    hca::Hca m_hca;
    firmware::CommandInterface m_fw;
    firmware::CmAgent m_cm;
    std::unique_ptr<host::Driver> m_driver;
};

}  // namespace hcasim::testbench
