#include "model/hca/posted_writes.hpp"

#include <algorithm>
#include <cstring>

#include "model/pcie/host_memory.hpp"

namespace hcasim::hca {

PostedWrites::Write PostedWrites::spare() {
    Write w;
    if (!m_spare.empty()) {
        w = std::move(m_spare.back());
        m_spare.pop_back();
        w.spans.clear();
        w.data.clear();
    }
    return w;
}

void PostedWrites::push(Write&& w, sim::Tick visible) {
    m_queue.push_back(std::move(w));
    m_last_visible = std::max(m_last_visible, visible);
}

void PostedWrites::land() {
    Write& w = m_queue.front();
    const std::uint8_t* p = w.bytes();
    for (const auto& s : w.spans) {
        m_memory.write(s.addr, p, s.len);
        p += s.len;
    }
    w.owner.reset();
    w.src = nullptr;
    if (m_spare.size() < 64) m_spare.push_back(std::move(w));
    m_queue.pop_front();
}

void PostedWrites::overlay(std::uint64_t addr, std::uint64_t len, std::uint8_t* dst) const {
    const std::uint64_t end = addr + len;
    for (const Write& w : m_queue) {
        std::size_t off = 0;
        for (const DmaSpan& s : w.spans) {
            const std::uint64_t lo = std::max(addr, s.addr);
            const std::uint64_t hi = std::min(end, s.addr + s.len);
            if (lo < hi) std::memcpy(dst + (lo - addr), w.bytes() + off + (lo - s.addr), hi - lo);
            off += s.len;
        }
    }
}

}  // namespace hcasim::hca
