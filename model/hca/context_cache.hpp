// Adapter context memory (ICM) and its on-chip caches. QP, CQ and memory-key
// contexts live in host memory the driver hands the adapter; the adapter
// keeps the most recently used entries of each table on chip. A miss reads
// the entry over the host bus, in simulated time and in the same queues as
// payload; evicting an entry the adapter has changed writes it back first.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "model/sim/block.hpp"

namespace hcasim::pcie {
class HostBus;
}

namespace hcasim::hca {

// A least-recently-used set of entry tags, for timing only: the entries
// themselves are the firmware's tables.
class ContextCache {
public:
    explicit ContextCache(std::uint32_t entries) : m_capacity(entries) {}

    struct Lookup {
        bool hit = false;
        bool evicted = false;       // a miss that pushed the LRU entry out
        std::uint64_t victim = 0;
        bool victim_dirty = false;  // the adapter changed it since it came on chip
        sim::Tick* ready = nullptr; // when the entry's fill is on chip
    };
    // Looks tag up and makes it the most recent; a miss takes a slot for it
    // (evicting the least recent entry not held when full; when every entry
    // is held the tag is read but not kept). dirty marks it changed.
    Lookup access(std::uint64_t tag, bool dirty = false);
    void invalidate(std::uint64_t tag);
    // A held entry stays on chip until released (a block working on it);
    // holding a tag not on chip does nothing and returns false.
    bool hold(std::uint64_t tag);
    void release(std::uint64_t tag);
    std::uint64_t hits() const { return m_hits; }
    std::uint64_t misses() const { return m_misses; }

private:
    struct Entry {
        std::uint64_t tag;
        bool dirty;
        sim::Tick ready;
        std::uint32_t holds = 0;
    };
    std::uint32_t m_capacity;
    std::list<Entry> m_lru;   // entries not held, most recent first: the victim is the last
    std::list<Entry> m_held;  // held entries, out of the victims' way
    std::unordered_map<std::uint64_t, std::list<Entry>::iterator> m_where;
    std::uint64_t m_hits = 0;
    std::uint64_t m_misses = 0;
};

// One context table in ICM and its on-chip cache: the block every read of
// such a context goes through.
class IcmCache final : public sim::Block {
public:
    struct Table {
        std::uint64_t base;         // bus address of entry 0 in host memory
        std::uint32_t entry_bytes;  // one context as the adapter stores it
    };
    IcmCache(const sc_core::sc_module_name& name, double core_clock_mhz, Table table, std::uint32_t entries,
             std::uint32_t hit_cycles, std::uint32_t fill_slots, pcie::HostBus& bus);

    // A block that needs entry index at t gets it on chip at the returned
    // time: t plus the hit cycles, or after the fill a miss starts (a
    // block asking while a fill is under way waits for that fill). The
    // adapter's own uses change the entry (indices, sequence numbers), so
    // an entry read this way is written back when evicted.
    sim::Tick read(sim::Tick t, std::uint64_t index);
    // Firmware wrote the entry (create, modify) at t: it is on chip, and in
    // host memory too.
    void load(sim::Tick t, std::uint64_t index);
    // Firmware destroyed it: dropped without a write-back.
    void invalidate(std::uint64_t index) { m_cache.invalidate(index); }
    // A block keeps entry index on chip while it works on it (see ContextCache).
    bool hold(std::uint64_t index) { return m_cache.hold(index); }
    void release(std::uint64_t index) { m_cache.release(index); }

private:
    Table m_table;
    ContextCache m_cache;
    sim::Tick m_hit;
    // When each miss-handling slot is free again: a miss waits for one, so
    // only this many fills are under way at once.
    std::vector<sim::Tick> m_fill_free;
    pcie::HostBus& m_bus;
};

}  // namespace hcasim::hca
