// The adapter's path to host memory and the host CPU, as the adapter's
// blocks use it: DMA reads and writes of host memory, MMIO writes from the
// host CPU, interrupt messages. A PCIe link (PcieHostInterface) and a
// conventional parallel PCI bus (PciBus) implement it.
#pragma once

#include <cstdint>
#include <memory>

#include "model/pcie/host_memory.hpp"
#include "model/sim/block.hpp"
#include "model/sim/config.hpp"
#include "model/sim/time.hpp"

namespace hcasim::pcie {

class HostBus {
public:
    virtual ~HostBus() = default;

    // The block that models the bus, for counters and reports.
    virtual sim::Block& block() = 0;

    virtual HostMemory& memory() = 0;
    // DMA read of len bytes at addr issued at t: returns when the last
    // byte is in the adapter.
    virtual sim::Tick dma_read(sim::Tick t, std::uint64_t addr, std::uint64_t len) = 0;
    // Posted DMA write issued at t: returns when the data is in host memory.
    virtual sim::Tick dma_write(sim::Tick t, std::uint64_t addr, std::uint64_t len) = 0;
    // Host CPU MMIO write of len bytes issued at t: returns arrival at the
    // adapter's registers.
    virtual sim::Tick mmio_write(sim::Tick t, std::uint32_t len) = 0;
    // Interrupt message (MSI-X, MSI) issued by the adapter at t: returns
    // when the host's interrupt controller has it.
    virtual sim::Tick msix(sim::Tick t) = 0;
    // When the last posted write the adapter issued so far has left it.
    virtual sim::Tick posted_backlog_end() const = 0;
    // Peak data rate from the adapter towards host memory (bytes per
    // second): how fast the adapter can drain received data.
    virtual double upstream_bytes_per_s() const = 0;
    // The most one request moves: a read request (PCIe max read request
    // size) and a posted write (max payload size); a PCI burst.
    virtual std::uint32_t max_read_request() const = 0;
    virtual std::uint32_t max_write_request() const = 0;
    // The earliest a DMA read issued at t can send its first request: at
    // t, or when a PCIe read tag returns if all are in use.
    virtual sim::Tick read_slot(sim::Tick t) const = 0;
};

// The bus host.bus names, with its parameters from cfg: a PCIe link named
// "pcie" or a PCI bus named "pci".
std::unique_ptr<HostBus> make_host_bus(const sim::Config& cfg, HostMemory& memory);

}  // namespace hcasim::pcie
