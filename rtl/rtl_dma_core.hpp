// One instance of the Verilog DMA engine (rtl/hca_dma_engine.v), verilated
// to C++ and clocked cycle by cycle from here. run() feeds it descriptors,
// answers its host-memory interface through a HostPort (bytes from host
// memory, completion times from the PCIe model), feeds write payload from
// and takes read data into the caller's buffers, and returns once every
// descriptor has reported its status. The clock runs only inside run(), and
// skips the cycles in which the engine says it is quiet (nothing can change
// until an input arrives) and no input is due: a gated clock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/sim/time.hpp"

namespace hcasim::rtl {

// The host side of the engine's memory interface.
class HostPort {
public:
    virtual ~HostPort() = default;
    // A read request for len bytes at addr leaves the engine at t: copy the
    // bytes into data and return when the last of them is on chip.
    virtual sim::Tick read_request(sim::Tick t, std::uint64_t addr, std::uint32_t len, std::uint8_t* data) = 0;
    // A posted write TLP's last beat leaves the engine at t: return when its
    // bytes are visible in host memory (the caller applies them then).
    virtual sim::Tick write_tlp(sim::Tick t, std::uint64_t addr, std::uint32_t len, const std::uint8_t* data) = 0;
};

struct CoreDescriptor {
    std::uint64_t addr = 0;
    std::uint32_t len = 0;
    bool write = false;              // packet buffer -> host
    std::uint8_t tag = 0;            // unique among one run's descriptors
    std::uint8_t* buffer = nullptr;  // write source or read destination
};

struct CoreStatus {
    std::uint8_t tag;
    std::uint8_t error;  // hca::DmaStatus code
    sim::Tick time;      // clock edge at which the status left the engine
};

struct CoreStats {
    std::uint64_t clocked_cycles = 0;  // edges the model was evaluated at
    std::uint64_t elapsed_cycles = 0;  // clocked plus gated-off cycles while it had work
    std::uint64_t read_requests = 0;
    std::uint64_t write_tlps = 0;
    std::uint32_t max_inflight = 0;    // most host reads in flight seen
};

class RtlDmaCore {
public:
    // Verilog parameters of the verilated engine.
    static constexpr std::uint32_t kDataBytes = 64;
    static constexpr std::uint32_t kOutstandingReads = 32;
    static constexpr std::uint32_t kSlots = 16;

    // clock: the engine's clock; mrrs, mps: bytes (powers of two, 128..4096);
    // vcd_path: waveform file, empty for none; gate_clock false clocks every
    // cycle (for checking that gating changes nothing).
    RtlDmaCore(const sim::Clock& clock, std::uint32_t mrrs, std::uint32_t mps, std::string vcd_path,
               bool gate_clock = true);
    ~RtlDmaCore();
    RtlDmaCore(const RtlDmaCore&) = delete;
    RtlDmaCore& operator=(const RtlDmaCore&) = delete;

    // Runs n descriptors issued at t (the engine starts at its first edge at
    // or after t and after its previous run); appends one status each to out
    // in the order the engine reports them. Returns the edge of the last
    // status. Throws std::runtime_error if the engine stops making progress.
    sim::Tick run(sim::Tick t, const CoreDescriptor* d, std::size_t n, HostPort& host, std::vector<CoreStatus>& out);

    // First time a new run may start.
    sim::Tick free_at() const { return m_free_at; }
    const CoreStats& stats() const { return m_stats; }
    // Inflight depth reached in the last run.
    std::uint32_t last_max_inflight() const { return m_last_max_inflight; }

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
    sim::Clock m_clock;
    sim::Tick m_free_at = 0;
    CoreStats m_stats;
    std::uint32_t m_last_max_inflight = 0;
};

}  // namespace hcasim::rtl
