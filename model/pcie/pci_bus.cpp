#include "model/pcie/pci_bus.hpp"

#include <algorithm>
#include <cmath>

#include "model/sim/tracer.hpp"

namespace hcasim::pcie {

using sim::ParamSpec;
using sim::Tick;

void declare_pci_params(sim::ParamRegistry& r) {
    using K = ParamSpec::Kind;
    r.add_per_node({"pci.clock_mhz", K::Real, "MHz", "66", 20, 66, {},
           "clock of the conventional PCI bus (host.bus=pci)",
           "PCI Local Bus Specification 2.1/2.2: 33 MHz, and 66 MHz since 2.1"});
    r.add_per_node({"pci.width_bits", K::Int, "bits", "64", 32, 64, {"32", "64"},
           "width of the PCI AD bus: bytes moved by one data phase times 8",
           "PCI Local Bus Specification 2.2: 32-bit bus with the 64-bit extension (REQ64#/ACK64#)"});
    r.add_per_node({"pci.arbitration_cycles", K::Int, "cycles", "2", 0, 64, {},
           "clocks every PCI transaction spends winning the bus: the idle turnaround clock after the previous "
           "transaction and GNT# to FRAME#",
           "PCI Local Bus Specification 2.2: central arbitration (REQ#/GNT#), a turnaround cycle between "
           "transactions; estimate for the clock count"});
    r.add_per_node({"pci.target_wait_cycles", K::Int, "cycles", "2", 0, 16, {},
           "clocks from the address phase to the first data phase of a write: the target's address decode "
           "(DEVSEL#) and TRDY#",
           "PCI Local Bus Specification 2.2: fast/medium/slow DEVSEL# decode, initial latency at most 16 clocks; "
           "estimate: medium decode"});
    r.add_per_node({"pci.max_burst_bytes", K::Int, "bytes", "512", 8, 4096, {},
           "largest burst of one PCI transaction: a longer transfer ends the burst there (latency timer "
           "expiry or the host bridge's disconnect) and arbitrates again",
           "PCI Local Bus Specification 2.2: burst transfers bounded by the master latency timer; estimate: "
           "64 data phases of 8 B"});
    r.add_per_node({"pci.bridge_latency_ns", K::Real, "ns", "150", 0, 100000, {},
           "host bridge latency per traversal: a DMA read to the memory controller, a DMA write into host "
           "memory, a host CPU write onto the PCI bus",
           "estimate for a late-1990s PCI host bridge"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 11, "pci", declare_pci_params};

PciParams PciParams::from(const sim::Config& c) {
    PciParams p;
    p.clock_mhz = c.get_real("pci.clock_mhz");
    p.width_bytes = static_cast<std::uint32_t>(c.get_int("pci.width_bits") / 8);
    p.arbitration_cycles = static_cast<std::uint32_t>(c.get_int("pci.arbitration_cycles"));
    p.target_wait_cycles = static_cast<std::uint32_t>(c.get_int("pci.target_wait_cycles"));
    p.max_burst_bytes = static_cast<std::uint32_t>(c.get_int("pci.max_burst_bytes"));
    p.bridge_latency_ns = c.get_real("pci.bridge_latency_ns");
    return p;
}

PciBus::PciBus(const sc_core::sc_module_name& name, const PciParams& p, HostMemory& memory)
    : sim::Block(name, sim::Clock::from_mhz("pci.clock", p.clock_mhz)),
      m_p(p),
      m_bus(&m_clock),
      m_bridge_latency(sim::ns_to_ps(p.bridge_latency_ns)),
      m_memory(memory) {
    m_n_transactions = &counter("transactions");
    m_n_read_bytes = &counter("dma_read_bytes");
    m_n_write_bytes = &counter("dma_write_bytes");
    m_n_wait_cycles = &counter("read_wait_cycles");
}

sim::Timeline::Slot PciBus::transact(Master m, Op op, Tick t, std::uint64_t addr, std::uint64_t len) {
    const std::uint64_t w = m_p.width_bytes;
    const std::uint64_t data_phases = (addr % w + len + w - 1) / w;
    std::uint64_t wait = m_p.target_wait_cycles;
    if (op == Op::Read) {
        // No split transactions: the bus stays with the adapter while the
        // host bridge fetches the first data from host memory (a bridge
        // that retries and completes it as a delayed transaction frees the
        // wires meanwhile; not modelled).
        const double fetch_ps = static_cast<double>(m_bridge_latency + m_memory.access_latency());
        const auto fetch = static_cast<std::uint64_t>(std::ceil(fetch_ps / m_clock.period_ps()));
        wait = std::max(wait, fetch);
        *m_n_wait_cycles += wait;
    }
    const std::uint64_t cycles = m_p.arbitration_cycles + 1 /* address phase */ + wait + data_phases;
    Tick& order = m_master_end[static_cast<int>(m)];
    const auto slot = m_bus.reserve(std::max(t, order), cycles);
    order = slot.end;
    ++*m_n_transactions;
    if (sim::tracer().on()) {
        const char* what = op == Op::Read ? "memory read" : (m == Master::Adapter ? "memory write" : "mmio write");
        sim::tracer().slice(path(), what, slot.start, slot.end, {{"bytes", len}}, sim::tracer().current_flow());
    }
    return slot;
}

Tick PciBus::bursts(Master m, Op op, Tick t, std::uint64_t addr, std::uint64_t len) {
    Tick end = t;
    const std::uint64_t limit = m_p.max_burst_bytes;
    while (len > 0) {
        // A burst stops at the next multiple of the burst limit.
        const std::uint64_t n = std::min(len, limit - addr % limit);
        end = transact(m, op, t, addr, n).end;
        addr += n;
        len -= n;
    }
    return end;
}

Tick PciBus::dma_read(Tick t, std::uint64_t addr, std::uint64_t len) {
    if (len == 0) return t;
    *m_n_read_bytes += len;
    return bursts(Master::Adapter, Op::Read, t, addr, len);
}

Tick PciBus::dma_write(Tick t, std::uint64_t addr, std::uint64_t len) {
    const Tick last = bursts(Master::Adapter, Op::Write, t, addr, len);
    m_adapter_posted_end = std::max(m_adapter_posted_end, last);
    *m_n_write_bytes += len;
    return last + m_bridge_latency;
}

Tick PciBus::mmio_write(Tick t, std::uint32_t len) {
    // The host bridge posts the CPU's write and becomes the bus master.
    const Tick end = transact(Master::Bridge, Op::Write, t + m_bridge_latency, 0, len).end;
    counter("mmio_writes")++;
    return end;
}

Tick PciBus::msix(Tick t) {
    const Tick end = transact(Master::Adapter, Op::Write, t, 0, 4).end;
    m_adapter_posted_end = std::max(m_adapter_posted_end, end);
    counter("msi")++;
    return end + m_bridge_latency;
}

}  // namespace hcasim::pcie
