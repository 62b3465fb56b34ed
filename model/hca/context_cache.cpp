#include "model/hca/context_cache.hpp"

#include <algorithm>

#include "model/pcie/host_bus.hpp"

namespace hcasim::hca {

ContextCache::Lookup ContextCache::access(std::uint64_t tag, bool dirty) {
    Lookup r;
    auto it = m_where.find(tag);
    if (it != m_where.end()) {
        Entry& e = *it->second;
        if (e.holds == 0) m_lru.splice(m_lru.begin(), m_lru, it->second);
        e.dirty |= dirty;
        ++m_hits;
        r.hit = true;
        r.ready = &e.ready;
        return r;
    }
    ++m_misses;
    if (m_capacity == 0) return r;
    if (m_lru.size() + m_held.size() >= m_capacity) {
        // Every entry is held: the context is used without a place on chip.
        if (m_lru.empty()) return r;
        const Entry& last = m_lru.back();
        r.evicted = true;
        r.victim = last.tag;
        r.victim_dirty = last.dirty;
        m_where.erase(last.tag);
        m_lru.pop_back();
    }
    m_lru.push_front({tag, dirty, 0});
    m_where[tag] = m_lru.begin();
    r.ready = &m_lru.front().ready;
    return r;
}

bool ContextCache::hold(std::uint64_t tag) {
    auto it = m_where.find(tag);
    if (it == m_where.end()) return false;
    if (it->second->holds++ == 0) m_held.splice(m_held.begin(), m_lru, it->second);
    return true;
}

void ContextCache::release(std::uint64_t tag) {
    auto it = m_where.find(tag);
    if (it == m_where.end() || it->second->holds == 0) return;
    // The work that held it was its latest use.
    if (--it->second->holds == 0) m_lru.splice(m_lru.begin(), m_held, it->second);
}

void ContextCache::invalidate(std::uint64_t tag) {
    auto it = m_where.find(tag);
    if (it == m_where.end()) return;
    (it->second->holds ? m_held : m_lru).erase(it->second);
    m_where.erase(it);
}

IcmCache::IcmCache(const sc_core::sc_module_name& name, double core_clock_mhz, Table table, std::uint32_t entries,
                   std::uint32_t hit_cycles, std::uint32_t fill_slots, pcie::HostBus& bus)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", core_clock_mhz)),
      m_table(table),
      m_cache(entries),
      m_hit(m_clock.cycles(hit_cycles)),
      m_fill_free(fill_slots, 0),
      m_bus(bus) {}

sim::Tick IcmCache::read(sim::Tick t, std::uint64_t index) {
    const ContextCache::Lookup l = m_cache.access(index, true);
    if (l.hit) {
        counter("hits")++;
        return std::max(t + m_hit, *l.ready);
    }
    counter("misses")++;
    auto slot = std::min_element(m_fill_free.begin(), m_fill_free.end());
    const sim::Tick start = std::max(t + m_hit, *slot);
    if (start > t + m_hit) counter("fill_slot_waits")++;
    if (l.evicted && l.victim_dirty) {
        // The changed victim goes back to host memory, a posted write
        // ahead of the read (PCIe ordering keeps the read behind it).
        counter("write_backs")++;
        m_bus.dma_write(start, m_table.base + l.victim * m_table.entry_bytes, m_table.entry_bytes);
    }
    const sim::Tick ready = m_bus.dma_read(start, m_table.base + index * m_table.entry_bytes, m_table.entry_bytes);
    *slot = ready;
    if (l.ready) *l.ready = ready;
    return ready;
}

void IcmCache::load(sim::Tick t, std::uint64_t index) {
    const ContextCache::Lookup l = m_cache.access(index, false);
    if (l.evicted && l.victim_dirty) {
        counter("write_backs")++;
        m_bus.dma_write(t, m_table.base + l.victim * m_table.entry_bytes, m_table.entry_bytes);
    }
    if (l.ready) *l.ready = std::max(*l.ready, t);
}

}  // namespace hcasim::hca
