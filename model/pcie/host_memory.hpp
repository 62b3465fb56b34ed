// Host memory as the adapter sees it through the root complex. In-process
// mode: the simulated host's memory is this process's memory, so a bus
// address is the virtual address of the buffer a program registered. Every
// adapter access goes through here, after the translation and protection
// unit has allowed it.
#pragma once

#include <cstdint>
#include <cstring>

#include <systemc>

#include "model/sim/time.hpp"

namespace hcasim::pcie {

class HostMemory {
public:
    explicit HostMemory(double access_latency_ns) : m_latency(sim::ns_to_ps(access_latency_ns)) {}

    // Latency of a DMA read once the request has reached the root complex.
    sim::Tick access_latency() const { return m_latency; }

    void read(std::uint64_t addr, void* dst, std::size_t n) {
        std::memcpy(dst, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(addr)), n);
        m_bytes_read += n;
    }
    void write(std::uint64_t addr, const void* src, std::size_t n) {
        std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(addr)), src, n);
        m_bytes_written += n;
        m_written.notify(sc_core::SC_ZERO_TIME);
    }

    // Notified whenever the adapter writes host memory: the only way what a
    // polling host thread sees can change.
    const sc_core::sc_event& written() const { return m_written; }

    std::uint64_t bytes_read() const { return m_bytes_read; }
    std::uint64_t bytes_written() const { return m_bytes_written; }

private:
    sim::Tick m_latency;
    sc_core::sc_event m_written;
    std::uint64_t m_bytes_read = 0;
    std::uint64_t m_bytes_written = 0;
};

}  // namespace hcasim::pcie
