// The adapter's DMA writes between issue and landing, shared by both DMA
// engine implementations. Posted writes land in issue order, so they form a
// queue: a write's bytes reach host memory when its last TLP does (land()
// runs then), and a DMA read issued meanwhile sees them, because a read may
// not pass posted writes issued before it (PCIe ordering).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/time.hpp"

namespace hcasim::pcie {
class HostMemory;
}

namespace hcasim::hca {

class PostedWrites {
public:
    struct Write {
        std::vector<DmaSpan> spans;
        std::vector<std::uint8_t> data;  // a copy of the bytes, or
        packet::PacketPtr owner;         // the packet that holds them
        const std::uint8_t* src = nullptr;
        const std::uint8_t* bytes() const { return owner ? src : data.data(); }
    };

    explicit PostedWrites(pcie::HostMemory& memory) : m_memory(memory) {}

    // A cleared write whose buffers are recycled from landed ones.
    Write spare();
    // Queues w, visible in host memory at visible; the owner calls land()
    // at that time.
    void push(Write&& w, sim::Tick visible);
    // The oldest write reaches host memory.
    void land();
    // Overwrites dst, the bytes of [addr, addr + len) as host memory holds
    // them, with what queued writes will put there.
    void overlay(std::uint64_t addr, std::uint64_t len, std::uint8_t* dst) const;
    // When the last write queued so far is in host memory.
    sim::Tick last_visible() const { return m_last_visible; }

private:
    pcie::HostMemory& m_memory;
    std::deque<Write> m_queue;
    std::vector<Write> m_spare;
    sim::Tick m_last_visible = 0;
};

}  // namespace hcasim::hca
