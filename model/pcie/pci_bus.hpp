// A conventional (parallel) PCI bus between the host bridge and the adapter,
// as late-1990s VI NICs used (PCI Local Bus Specification 2.1/2.2): one set
// of shared wires for both directions, so the host's MMIO writes and the
// adapter's DMA reads and writes take turns. A transaction wins the bus by
// arbitration, drives one address phase, waits for the target, then moves
// one bus width of data per clock in a burst. A burst ends at the burst
// limit and the master arbitrates again. PCI has no split transactions: a
// DMA read holds the bus while the host bridge fetches the data from host
// memory.
#pragma once

#include <cstdint>

#include "model/pcie/host_bus.hpp"
#include "model/sim/block.hpp"
#include "model/sim/config.hpp"

namespace hcasim::pcie {

struct PciParams {
    double clock_mhz = 66;
    std::uint32_t width_bytes = 8;
    std::uint32_t arbitration_cycles = 2;
    std::uint32_t target_wait_cycles = 2;
    std::uint32_t max_burst_bytes = 512;
    double bridge_latency_ns = 150;

    static PciParams from(const sim::Config& c);
    double bytes_per_s() const { return clock_mhz * 1e6 * width_bytes; }
};

void declare_pci_params(sim::ParamRegistry& r);

class PciBus final : public sim::Block, public HostBus {
public:
    PciBus(const sc_core::sc_module_name& name, const PciParams& p, HostMemory& memory);

    sim::Block& block() override { return *this; }
    HostMemory& memory() override { return m_memory; }
    sim::Tick dma_read(sim::Tick t, std::uint64_t addr, std::uint64_t len) override;
    sim::Tick dma_write(sim::Tick t, std::uint64_t addr, std::uint64_t len) override;
    sim::Tick mmio_write(sim::Tick t, std::uint32_t len) override;
    // Conventional PCI has no MSI-X: the adapter signals with an MSI, a
    // one-data-phase memory write of its own on the bus.
    sim::Tick msix(sim::Tick t) override;
    sim::Tick posted_backlog_end() const override { return m_adapter_posted_end; }
    double upstream_bytes_per_s() const override { return m_p.bytes_per_s(); }
    std::uint32_t max_read_request() const override { return m_p.max_burst_bytes; }
    std::uint32_t max_write_request() const override { return m_p.max_burst_bytes; }
    // No split transactions: a read holds the bus, nothing to wait for.
    sim::Tick read_slot(sim::Tick t) const override { return t; }

    const PciParams& params() const { return m_p; }
    // Clocks the bus was owned by a transaction (arbitration to last data phase).
    sim::Tick busy() const { return m_bus.busy_total(); }

private:
    enum class Master { Adapter, Bridge };
    enum class Op { Read, Write };
    // One transaction: arbitration, address phase, target wait, data
    // phases for len bytes at addr. Returns its slot on the bus.
    sim::Timeline::Slot transact(Master m, Op op, sim::Tick t, std::uint64_t addr, std::uint64_t len);
    // Splits [addr, addr+len) at the burst limit and runs each burst as a
    // transaction of m, in order. Returns the end of the last one.
    sim::Tick bursts(Master m, Op op, sim::Tick t, std::uint64_t addr, std::uint64_t len);

    PciParams m_p;
    sim::Timeline m_bus;  // the one shared set of AD/control wires
    sim::Tick m_bridge_latency;
    HostMemory& m_memory;
    // Each master runs its transactions one at a time in issue order, so a
    // CQE write never passes the payload written ahead of it, and a read
    // pushes the adapter's earlier writes ahead of it.
    sim::Tick m_master_end[2] = {0, 0};
    sim::Tick m_adapter_posted_end = 0;
    std::uint64_t* m_n_transactions = nullptr;
    std::uint64_t* m_n_read_bytes = nullptr;
    std::uint64_t* m_n_write_bytes = nullptr;
    std::uint64_t* m_n_wait_cycles = nullptr;
};

}  // namespace hcasim::pcie
