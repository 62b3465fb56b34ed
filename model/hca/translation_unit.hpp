// Translation and protection: a memory key (lkey or rkey) names a registered
// region, or (rkeys only) a memory window bound to part of one; the unit
// checks the key, the protection domain, the bounds and the access rights,
// then maps the virtual range to bus addresses. MPT entries and page
// translations are cached on chip; a miss costs a DMA read of the entry from
// adapter context memory in the host. Binding and invalidating windows
// rewrite their MPT entries.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "model/hca/context_cache.hpp"
#include "model/hca/contexts.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/sim/block.hpp"

namespace hcasim::pcie {
class HostBus;
}

namespace hcasim::hca {

// The memory protection table and its decisions, apart from timing.
class ProtectionTable {
public:
    explicit ProtectionTable(std::uint32_t max_regions) : m_max(max_regions) {}

    // Registers [va, va+length), pinned at bus address bus. Returns the new
    // key, or 0 when the table is full.
    std::uint32_t add(std::uint32_t pdn, std::uint64_t va, std::uint64_t length, std::uint32_t access,
                      std::uint64_t bus);
    bool remove(std::uint32_t key);
    // Physical page registration: the region maps [0, length) onto pages.
    void set_pages(std::uint32_t key, const std::vector<std::uint64_t>& pages);
    bool modify(std::uint32_t key, std::uint32_t pdn, std::uint32_t access);
    // The entry key names (a region or a window), null if none.
    const MemoryRegion* find(std::uint32_t key) const;
    std::size_t size() const { return m_live; }

    // A local access: key must name a region.
    Protection check(std::uint32_t key, std::uint32_t pdn, std::uint64_t va, std::uint64_t len,
                     std::uint32_t access) const;

    // ---- Memory windows (IBA 10.6.7), entries of the same table.
    // A new window of kind (Window1 or Window2) in pdn, not bound. Returns
    // its key, or 0 when the table is full.
    std::uint32_t add_window(std::uint32_t pdn, MptKind kind);
    // Frees the window whose entry key's index names, bound or not.
    bool remove_window(std::uint32_t key);
    // The window the index of key names, whatever its current key; null if none.
    const MemoryRegion* window(std::uint32_t key) const;
    // A bind WQE of QP qpn (protection domain pdn): checked, then applied.
    WindowStatus bind(const BindSeg& b, std::uint32_t qpn, std::uint32_t pdn);
    // Invalidation of the type 2 window key names by QP qpn.
    WindowStatus invalidate(std::uint32_t key, std::uint32_t qpn, std::uint32_t pdn);
    // A remote access under rkey by a request on QP qpn: a region's or a
    // bound window's.
    Protection check_remote(std::uint32_t key, std::uint32_t qpn, std::uint32_t pdn, std::uint64_t va,
                            std::uint64_t len, std::uint32_t access) const;
    // The region an access under key translates through: key's own, or the
    // one the window key names is bound to.
    const MemoryRegion* translation_of(std::uint32_t key) const;

private:
    MemoryRegion* entry(std::uint32_t key);
    // Takes an index for a new entry; 0 when the table is full.
    std::uint32_t take_index();
    void release(std::uint32_t index);
    // A bound window lets go of its region.
    void unbind(MemoryRegion& w);

    std::uint32_t m_max;
    std::vector<MemoryRegion> m_regions;   // index = key >> 8
    std::vector<std::uint32_t> m_free;
    std::uint8_t m_generation = 0;
    // Page translation entries are handed out in registration order, so
    // where a region's entries sit in context memory is deterministic.
    std::uint64_t m_next_mtt = 0;
    std::size_t m_live = 0;
};

class TranslationUnit final : public sim::Block, public AddressTranslator {
public:
    // hca.control_program: this block's steps run on the adapter's one processor.
    void run_steps_on(sim::Timeline& processor) { m_pipe.share(&processor, "translate"); }
    TranslationUnit(const sc_core::sc_module_name& name, const HcaParams& p, ProtectionTable& table,
                    pcie::HostBus& bus);

    // Checks [va, va+len) under key and appends its bus spans to out.
    Translation translate(sim::Tick t, std::uint32_t key, std::uint32_t pdn, std::uint64_t va, std::uint64_t len,
                          std::uint32_t access, std::vector<DmaSpan>& out) override;
    Translation translate_remote(sim::Tick t, std::uint32_t rkey, std::uint32_t qpn, std::uint32_t pdn,
                                 std::uint64_t va, std::uint64_t len, std::uint32_t access,
                                 std::vector<DmaSpan>& out) override;
    // A bind reads the window's and the region's entries and writes the
    // window's back; an invalidation reads and writes the window's.
    WindowResult bind_window(sim::Tick t, const BindSeg& bind, std::uint32_t qpn, std::uint32_t pdn) override;
    WindowResult invalidate_window(sim::Tick t, std::uint32_t key, std::uint32_t qpn, std::uint32_t pdn) override;
    // Drops the cached MPT entry of key (firmware changed it).
    void invalidate(std::uint32_t key);

    ProtectionTable& table() { return m_table; }

private:
    Translation translate_key(sim::Tick t, std::uint32_t key, std::uint32_t qpn, std::uint32_t pdn, std::uint64_t va,
                              std::uint64_t len, std::uint32_t access, bool remote, std::vector<DmaSpan>& out);
    // One pipeline pass to look up an MPT entry, fetched on a miss.
    sim::Tick read_entry(sim::Tick t, std::uint32_t index);
    // One pipeline pass to rewrite an entry: the cached copy is updated and
    // written through to context memory (a posted write).
    sim::Tick write_entry(sim::Tick t, std::uint32_t index);

    ProtectionTable& m_table;
    pcie::HostBus& m_bus;
    ContextCache m_mpt;
    ContextCache m_mtt;
    sim::Timeline m_pipe;
    std::uint32_t m_cycles;
};

// Appends to out the part [offset, offset+len) of the buffer that spans
// describe, in order.
void slice_spans(const std::vector<DmaSpan>& spans, std::uint64_t offset, std::uint64_t len, std::vector<DmaSpan>& out);

}  // namespace hcasim::hca
