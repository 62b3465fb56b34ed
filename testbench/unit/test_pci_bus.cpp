// Unit tests for the conventional PCI bus (model/pcie/pci_bus.hpp): one
// shared bus for both directions, bursts bounded by the burst limit, and
// DMA reads that hold the bus until their data is in (no split
// transactions). Each case runs in an isolated child: the bus is a SystemC
// module.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <sstream>
#include <string>

#include "model/pcie/host_memory.hpp"
#include "model/pcie/pci_bus.hpp"
#include "model/sim/config.hpp"
#include "testbench/system/isolated.hpp"

using hcasim::pcie::HostMemory;
using hcasim::pcie::PciBus;
using hcasim::pcie::PciParams;

namespace {

constexpr double kMemoryLatencyNs = 100;

PciParams defaults() {
    hcasim::sim::Config cfg;
    return PciParams::from(cfg);
}

// Modules of a design that never starts: left alive until the child exits.
PciBus& make_bus(const char* name, const PciParams& p) {
    static HostMemory memory(kMemoryLatencyNs);
    return *new PciBus(name, p, memory);
}

std::istringstream run(const std::function<void(std::ostream&)>& fn) {
    const auto r = hcasim::testbench::run_isolated(fn);
    INFO(r.error);
    REQUIRE(r.ok);
    return std::istringstream(r.output);
}

}  // namespace

TEST_CASE("the PCI bus defaults are 64-bit at 66 MHz: 528 MB/s peak", "[pci][unit]") {
    const PciParams p = defaults();
    CHECK(p.clock_mhz == 66);
    CHECK(p.width_bytes == 8);
    CHECK(p.bytes_per_s() == Approx(528e6));
}

TEST_CASE("a DMA read and an MMIO write at the same time share the one PCI bus and serialise", "[pci][unit]") {
    auto in = run([](std::ostream& os) {
        const PciParams p = defaults();
        PciBus& alone = make_bus("alone", p);
        PciBus& shared = make_bus("shared", p);
        const auto mmio_alone = alone.mmio_write(0, 64);
        const auto read_end = shared.dma_read(0, 0x10000, 64);
        const auto mmio_shared = shared.mmio_write(0, 64);
        os << mmio_alone << " " << read_end << " " << mmio_shared << " " << alone.busy() << " " << shared.busy()
           << " " << alone.clock().period_ps();
    });
    double mmio_alone = 0, read_end = 0, mmio_shared = 0, busy_alone = 0, busy_shared = 0, period = 0;
    in >> mmio_alone >> read_end >> mmio_shared >> busy_alone >> busy_shared >> period;
    REQUIRE(in);
    // The MMIO write waits for the read that owns the bus, then takes its
    // own arbitration, address, target wait and 8 data phases.
    CHECK(mmio_shared > mmio_alone);
    CHECK(mmio_shared >= read_end + busy_alone - 2);
    // Nothing overlaps: the shared bus was busy for both transactions.
    CHECK(busy_shared >= busy_alone + (2 + 1 + 8) * period - 2);
}

TEST_CASE("a long DMA read holds the PCI bus from arbitration to its last data phase", "[pci][unit]") {
    auto in = run([](std::ostream& os) {
        const PciParams p = defaults();
        PciBus& bus = make_bus("read", p);
        // One full burst: 512 B at a burst boundary.
        const auto read_end = bus.dma_read(0, 0x20000, 512);
        const auto read_busy = bus.busy();
        // A host MMIO write that reaches the bus while the read waits for
        // host memory cannot use the idle wires: the read holds them.
        const auto mmio_end = bus.mmio_write(0, 8);
        os << read_end << " " << read_busy << " " << mmio_end << " " << bus.clock().period_ps() << " "
           << bus.counter("read_wait_cycles");
    });
    double read_end = 0, read_busy = 0, mmio_end = 0, period = 0, wait = 0;
    in >> read_end >> read_busy >> mmio_end >> period >> wait;
    REQUIRE(in);
    const PciParams p = defaults();
    // The read waits for the host bridge and host memory on the bus.
    const double fetch_ns = p.bridge_latency_ns + kMemoryLatencyNs;
    CHECK(wait * period >= fetch_ns * 1000 - 1);
    CHECK(wait * period < fetch_ns * 1000 + period);
    // Busy for arbitration, address, the wait and 64 data phases.
    const double cycles = p.arbitration_cycles + 1 + wait + 64;
    CHECK(read_busy == Approx(cycles * period).margin(2));
    CHECK(read_end == Approx(cycles * period).margin(2));
    // The MMIO write came after the read had its 250 ns wait under way,
    // and still starts only when the read is over.
    CHECK(p.bridge_latency_ns * 1000 < read_end);
    CHECK(mmio_end >= read_end + (p.arbitration_cycles + 1 + p.target_wait_cycles + 1) * period - 2);
}

TEST_CASE("a DMA transfer longer than the PCI burst limit re-arbitrates for each burst", "[pci][unit]") {
    auto in = run([](std::ostream& os) {
        PciParams p = defaults();
        PciBus& one = make_bus("one", p);
        PciBus& four = make_bus("four", p);
        one.dma_write(0, 0x40000, 512);
        four.dma_write(0, 0x40000, 2048);
        PciParams long_bursts = p;
        long_bursts.max_burst_bytes = 4096;
        PciBus& single = make_bus("single", long_bursts);
        single.dma_write(0, 0x40000, 2048);
        // A read pays the host memory wait again with each burst.
        PciBus& reads = make_bus("reads", p);
        reads.dma_read(0, 0x40000, 2048);
        os << one.busy() << " " << four.busy() << " " << single.busy() << " " << one.counter("transactions") << " "
           << four.counter("transactions") << " " << single.counter("transactions") << " "
           << reads.counter("transactions") << " " << reads.counter("read_wait_cycles") << " " << one.clock().period_ps();
    });
    double one = 0, four = 0, single = 0, period = 0;
    std::uint64_t n_one = 0, n_four = 0, n_single = 0, n_reads = 0, read_wait = 0;
    in >> one >> four >> single >> n_one >> n_four >> n_single >> n_reads >> read_wait >> period;
    REQUIRE(in);
    const PciParams p = defaults();
    CHECK(n_one == 1);
    CHECK(n_four == 4);
    CHECK(n_single == 1);
    CHECK(n_reads == 4);
    const double overhead = p.arbitration_cycles + 1 + p.target_wait_cycles;
    CHECK(one == Approx((overhead + 64) * period).margin(2));
    CHECK(four == Approx(4 * (overhead + 64) * period).margin(8));
    CHECK(single == Approx((overhead + 256) * period).margin(2));
    CHECK(read_wait == 4 * (read_wait / 4));
    CHECK(read_wait / 4 > p.target_wait_cycles);
}
