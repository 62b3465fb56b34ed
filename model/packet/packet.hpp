// A packet in flight: its wire bytes (LRH through VCRC) and the times the
// fabric stamps on it. Blocks pass packets by shared pointer so a switch or
// link never copies payload.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "model/sim/time.hpp"

namespace hcasim::packet {

// Packet buffers are filled completely by header writing, payload DMA and
// sealing, so they skip zero-initialisation.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
    template <typename U>
    struct rebind {
        using other = DefaultInitAllocator<U>;
    };
    DefaultInitAllocator() = default;
    template <typename U>
    DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
    template <typename U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};
using Bytes = std::vector<std::uint8_t, DefaultInitAllocator<std::uint8_t>>;

struct Packet {
    Bytes bytes;
    sim::Tick first_bit = 0;  // when its first bit left the last transmitter
    sim::Tick last_bit = 0;   // when its last bit left the last transmitter
    // Set by the transmitter right after sealing; a copy that a fault alters
    // is a new packet without it, so its receiver recomputes the CRCs.
    bool sealed_intact = false;
    // The work request it serves, for traces (sim::Tracer::flow_of; 0: none).
    std::uint64_t trace_flow = 0;
};

using PacketPtr = std::shared_ptr<Packet>;

// Recycles packet buffers: a packet's bytes keep their capacity for the next
// one, so steady traffic allocates no payload memory.
class PacketPool {
public:
    PacketPool() : m_state(std::make_shared<State>()) {}

    PacketPtr make(std::size_t bytes) {
        Packet* p;
        if (!m_state->free.empty()) {
            p = m_state->free.back().release();
            m_state->free.pop_back();
        } else {
            p = new Packet;
        }
        p->bytes.resize(bytes);
        p->sealed_intact = false;
        p->trace_flow = 0;
        return PacketPtr(p, [state = m_state](Packet* q) {
            if (state->free.size() < kKeep) state->free.emplace_back(q);
            else delete q;
        });
    }

private:
    static constexpr std::size_t kKeep = 256;
    struct State {
        std::vector<std::unique_ptr<Packet>> free;
    };
    std::shared_ptr<State> m_state;
};

}  // namespace hcasim::packet
