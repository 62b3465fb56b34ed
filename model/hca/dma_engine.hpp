// The adapter's DMA engine as the other blocks see it: moves bytes between
// host memory and on-chip buffers through the PCIe host interface. Reads
// gather a list of spans into a buffer; writes scatter a buffer over spans
// and land in host memory when their last TLP does, in issue order (PCIe
// posted-write ordering), so a CQE written after payload is never visible
// before it.
//
// Two implementations: the SystemC model (SystemcDmaEngine, hca.dma.impl=systemc)
// and the Verilog engine in rtl/ clocked under Verilator (RtlDmaEngine,
// hca.dma.impl=rtl). Callers ask from inside a timed action and get the
// answer at once, so both compute the timing of a request when it is made.
#pragma once

#include <cstdint>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

// Status of one descriptor; the codes are the RTL's m_axis_status_error.
enum class DmaStatus : std::uint8_t { Ok = 0, ZeroLength = 1, AddressWrap = 2, TooLong = 3 };
const char* to_string(DmaStatus s);

// Longest descriptor both implementations accept (the RTL's MAX_LEN).
inline constexpr std::uint32_t kDmaMaxDescriptorBytes = 1u << 24;

// One scatter/gather descriptor as the verification regression issues it.
struct DmaDescriptor {
    std::uint64_t addr = 0;          // host address
    std::uint32_t len = 0;           // bytes
    bool to_host = false;            // write: packet buffer -> host memory
    std::uint8_t tag = 0;            // returned with the status
    std::uint8_t* buffer = nullptr;  // packet-buffer side: write source or read destination
};

struct DmaCompletion {
    std::uint8_t tag;
    DmaStatus status;
    sim::Tick time;  // when the status is reported
};

// The checks every implementation applies to a descriptor before moving data.
DmaStatus check_descriptor(std::uint64_t addr, std::uint32_t len);

class DmaEngine {
public:
    virtual ~DmaEngine() = default;

    // Reads the spans into dst (bytes copied in span order); returns when the
    // last byte is on chip.
    virtual sim::Tick read(sim::Tick t, const DmaSpan* spans, std::size_t n, std::uint8_t* dst) = 0;
    sim::Tick read(sim::Tick t, std::uint64_t addr, std::uint32_t len, void* dst) {
        const DmaSpan s{addr, len};
        return read(t, &s, 1, static_cast<std::uint8_t*>(dst));
    }
    // Writes src over the spans; the bytes appear in host memory at the
    // returned time.
    virtual sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const std::uint8_t* src) = 0;
    sim::Tick write(sim::Tick t, std::uint64_t addr, const void* src, std::uint32_t len) {
        const DmaSpan s{addr, len};
        return write(t, &s, 1, static_cast<const std::uint8_t*>(src));
    }
    // As above for payload that lives in a packet: the packet is kept until
    // the write lands instead of copying its bytes.
    virtual sim::Tick write(sim::Tick t, const DmaSpan* spans, std::size_t n, const packet::PacketPtr& owner,
                            const std::uint8_t* src) = 0;

    // When the last write issued so far is in host memory.
    virtual sim::Tick last_write_visible() const = 0;

    // Runs a list of descriptors of either direction issued together at t,
    // with per-descriptor status reported in descriptor order into out.
    // Returns when every effect is complete: reads on chip, writes visible.
    virtual sim::Tick execute(sim::Tick t, const DmaDescriptor* d, std::size_t n, std::vector<DmaCompletion>& out) = 0;

    // The block behind the interface (counters, reports).
    virtual sim::Block& block() = 0;

    // hca.control_program: the engine's per-request setup runs on the
    // adapter's one processor (the data still moves by DMA). An engine whose
    // setup is its own logic (the Verilog one) keeps it.
    virtual void run_steps_on(sim::Timeline& processor) { (void)processor; }
};

}  // namespace hcasim::hca
