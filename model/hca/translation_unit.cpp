#include "model/hca/translation_unit.hpp"

#include <algorithm>

#include "model/pcie/host_bus.hpp"

namespace hcasim::hca {

namespace {
constexpr std::uint64_t kPageBytes = 4096;
constexpr std::uint32_t kMptEntryBytes = 64;
constexpr std::uint32_t kMttEntryBytes = 8;
// Where adapter context memory sits in host memory: only its PCIe cost is
// modelled, the entries themselves are in the firmware's tables.
constexpr std::uint64_t kIcmMptBase = 0x7f0000000000ull;
constexpr std::uint64_t kIcmMttBase = 0x7f8000000000ull;
}  // namespace

const char* to_string(Protection p) {
    switch (p) {
    case Protection::Ok: return "ok";
    case Protection::BadKey: return "invalid key";
    case Protection::PdMismatch: return "protection domain mismatch";
    case Protection::OutOfBounds: return "outside the registered region";
    case Protection::AccessDenied: return "access not granted";
    case Protection::QpMismatch: return "memory window bound to another QP";
    }
    return "?";
}

const char* to_string(WindowStatus s) {
    switch (s) {
    case WindowStatus::Ok: return "ok";
    case WindowStatus::NoWindow: return "no such memory window";
    case WindowStatus::WrongType: return "wrong memory window type for the operation";
    case WindowStatus::AlreadyBound: return "type 2 window already bound";
    case WindowStatus::BadNewKey: return "new key does not name the window";
    case WindowStatus::NoRegion: return "no such memory region";
    case WindowStatus::NoBindRight: return "region registered without memory window bind access";
    case WindowStatus::PdMismatch: return "window, region and QP in different protection domains";
    case WindowStatus::OutOfBounds: return "range outside the region";
    case WindowStatus::RightsExceedRegion: return "remote write or atomic on a region without local write";
    case WindowStatus::NotBound: return "window not bound under this key";
    case WindowStatus::QpMismatch: return "window bound to another QP";
    }
    return "?";
}

std::uint32_t ProtectionTable::take_index() {
    if (m_live >= m_max) return 0;
    std::uint32_t index;
    if (!m_free.empty()) {
        index = m_free.back();
        m_free.pop_back();
    } else {
        // Index 0 is never used, so key 0 stays invalid.
        index = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(m_regions.size()));
        m_regions.resize(index + 1);
    }
    ++m_live;
    return index;
}

void ProtectionTable::release(std::uint32_t index) {
    m_regions[index].valid = false;
    m_free.push_back(index);
    --m_live;
}

std::uint32_t ProtectionTable::add(std::uint32_t pdn, std::uint64_t va, std::uint64_t length, std::uint32_t access,
                                   std::uint64_t bus) {
    const std::uint32_t index = take_index();
    if (!index) return 0;
    // The low byte changes every registration so a stale key stays invalid.
    ++m_generation;
    const std::uint32_t key = (index << 8) | m_generation;
    const std::uint64_t first_page = va / kPageBytes;
    const std::uint64_t pages = length ? (va + length - 1) / kPageBytes - first_page + 1 : 1;
    m_regions[index] = MemoryRegion{true, key, pdn, va, length, access, bus, m_next_mtt, {}};
    m_next_mtt += pages;
    return key;
}

bool ProtectionTable::remove(std::uint32_t key) {
    MemoryRegion* mr = entry(key);
    // A region stays while windows are bound to it.
    if (!mr || mr->is_window() || mr->windows > 0) return false;
    release(key >> 8);
    return true;
}

void ProtectionTable::set_pages(std::uint32_t key, const std::vector<std::uint64_t>& pages) {
    const std::uint32_t index = key >> 8;
    if (index < m_regions.size() && m_regions[index].valid && m_regions[index].key == key) m_regions[index].pages = pages;
}

bool ProtectionTable::modify(std::uint32_t key, std::uint32_t pdn, std::uint32_t access) {
    MemoryRegion* mr = entry(key);
    if (!mr || mr->is_window()) return false;
    mr->pdn = pdn;
    mr->access = access;
    return true;
}

const MemoryRegion* ProtectionTable::find(std::uint32_t key) const {
    const std::uint32_t index = key >> 8;
    if (index >= m_regions.size() || !m_regions[index].valid || m_regions[index].key != key) return nullptr;
    return &m_regions[index];
}

MemoryRegion* ProtectionTable::entry(std::uint32_t key) { return const_cast<MemoryRegion*>(find(key)); }

namespace {
// [va, va+len) inside the entry's range (an empty access is never outside).
bool inside(const MemoryRegion& e, std::uint64_t va, std::uint64_t len) {
    return len == 0 || (va >= e.va && va - e.va <= e.length && len <= e.length - (va - e.va));
}
}  // namespace

Protection ProtectionTable::check(std::uint32_t key, std::uint32_t pdn, std::uint64_t va, std::uint64_t len,
                                  std::uint32_t access) const {
    const MemoryRegion* mr = find(key);
    // A window's key is an rkey only.
    if (!mr || mr->is_window()) return Protection::BadKey;
    if (mr->pdn != pdn) return Protection::PdMismatch;
    if (!inside(*mr, va, len)) return Protection::OutOfBounds;
    if ((mr->access & access) != access) return Protection::AccessDenied;
    return Protection::Ok;
}

Protection ProtectionTable::check_remote(std::uint32_t key, std::uint32_t qpn, std::uint32_t pdn, std::uint64_t va,
                                         std::uint64_t len, std::uint32_t access) const {
    const MemoryRegion* e = find(key);
    if (!e) return Protection::BadKey;
    if (!e->is_window()) return check(key, pdn, va, len, access);
    // A window's own range and rights govern, not its region's.
    if (!e->bound) return Protection::BadKey;
    if (e->pdn != pdn) return Protection::PdMismatch;
    if (e->kind == MptKind::Window2 && e->bound_qpn != qpn) return Protection::QpMismatch;
    if (!inside(*e, va, len)) return Protection::OutOfBounds;
    if ((e->access & access) != access) return Protection::AccessDenied;
    return Protection::Ok;
}

const MemoryRegion* ProtectionTable::translation_of(std::uint32_t key) const {
    const MemoryRegion* e = find(key);
    return e && e->is_window() ? find(e->region) : e;
}

// ---- Memory windows

std::uint32_t ProtectionTable::add_window(std::uint32_t pdn, MptKind kind) {
    const std::uint32_t index = take_index();
    if (!index) return 0;
    ++m_generation;
    MemoryRegion w;
    w.valid = true;
    w.key = (index << 8) | m_generation;
    w.pdn = pdn;
    w.kind = kind;
    m_regions[index] = w;
    return w.key;
}

const MemoryRegion* ProtectionTable::window(std::uint32_t key) const {
    const std::uint32_t index = key >> 8;
    if (index >= m_regions.size() || !m_regions[index].valid || !m_regions[index].is_window()) return nullptr;
    return &m_regions[index];
}

void ProtectionTable::unbind(MemoryRegion& w) {
    if (!w.bound) return;
    if (MemoryRegion* mr = entry(w.region)) --mr->windows;
    w.bound = false;
    w.region = 0;
}

bool ProtectionTable::remove_window(std::uint32_t key) {
    auto* w = const_cast<MemoryRegion*>(window(key));
    if (!w) return false;
    unbind(*w);
    release(key >> 8);
    return true;
}

WindowStatus ProtectionTable::bind(const BindSeg& b, std::uint32_t qpn, std::uint32_t pdn) {
    auto* w = const_cast<MemoryRegion*>(window(b.window_key));
    if (!w) return WindowStatus::NoWindow;
    const MptKind kind = b.type == kBindType1 ? MptKind::Window1 : MptKind::Window2;
    // Type 1 windows are bound by the Bind MW verb, type 2 by a bind WR.
    if (w->kind != kind || (b.type != kBindType1 && b.type != kBindType2)) return WindowStatus::WrongType;
    if ((b.new_key >> 8) != (b.window_key >> 8)) return WindowStatus::BadNewKey;
    if (w->pdn != pdn) return WindowStatus::PdMismatch;
    if (kind == MptKind::Window2 && w->bound) return WindowStatus::AlreadyBound;
    MemoryRegion* mr = nullptr;
    // A type 1 bind to no region unbinds the window.
    const bool to_region = kind == MptKind::Window2 || b.region_key != 0;
    if (to_region) {
        mr = entry(b.region_key);
        if (!mr || mr->is_window()) return WindowStatus::NoRegion;
        if (mr->pdn != w->pdn) return WindowStatus::PdMismatch;
        if (!(mr->access & kMwBind)) return WindowStatus::NoBindRight;
        if (b.addr < mr->va || b.addr - mr->va > mr->length || b.length > mr->length - (b.addr - mr->va))
            return WindowStatus::OutOfBounds;
        // Remote write and atomic rights need local write on the region (IBA 10.6.7).
        if ((b.access & (kRemoteWrite | kRemoteAtomic)) && !(mr->access & kLocalWrite))
            return WindowStatus::RightsExceedRegion;
    }
    unbind(*w);
    w->key = b.new_key;
    w->bound = to_region;
    w->va = to_region ? b.addr : 0;
    w->length = to_region ? b.length : 0;
    w->access = to_region ? (b.access & kRemoteAccess) : 0;
    w->bound_qpn = kind == MptKind::Window2 ? qpn : 0;
    if (mr) {
        w->region = mr->key;
        ++mr->windows;
    }
    return WindowStatus::Ok;
}

WindowStatus ProtectionTable::invalidate(std::uint32_t key, std::uint32_t qpn, std::uint32_t pdn) {
    auto* w = const_cast<MemoryRegion*>(window(key));
    // Regions here are registered by firmware, never fast-registered: only
    // windows are invalidated by work requests, and only those of type 2.
    if (!w) return WindowStatus::NoWindow;
    if (w->kind != MptKind::Window2) return WindowStatus::WrongType;
    if (!w->bound || w->key != key) return WindowStatus::NotBound;
    if (w->pdn != pdn) return WindowStatus::PdMismatch;
    if (w->bound_qpn != qpn) return WindowStatus::QpMismatch;
    unbind(*w);
    return WindowStatus::Ok;
}

TranslationUnit::TranslationUnit(const sc_core::sc_module_name& name, const HcaParams& p, ProtectionTable& table,
                                 pcie::HostBus& bus)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)),
      m_table(table),
      m_bus(bus),
      m_mpt(p.mpt_cache_entries),
      m_mtt(p.mtt_cache_entries),
      m_pipe(&m_clock),
      m_cycles(p.translation_cycles) {}

Translation TranslationUnit::translate(sim::Tick t, std::uint32_t key, std::uint32_t pdn, std::uint64_t va,
                                       std::uint64_t len, std::uint32_t access, std::vector<DmaSpan>& out) {
    if (key == kReservedLkey) {
        // Physical addressing: no MPT entry or page translation to look up.
        Translation r;
        r.ready = m_pipe.reserve(t, m_cycles).end;
        if (pdn != kFirmwarePd) {
            counter("protection_errors")++;
            r.status = Protection::BadKey;
            return r;
        }
        if (len) out.push_back({va, static_cast<std::uint32_t>(len)});
        return r;
    }
    return translate_key(t, key, 0, pdn, va, len, access, false, out);
}

Translation TranslationUnit::translate_remote(sim::Tick t, std::uint32_t rkey, std::uint32_t qpn, std::uint32_t pdn,
                                              std::uint64_t va, std::uint64_t len, std::uint32_t access,
                                              std::vector<DmaSpan>& out) {
    return translate_key(t, rkey, qpn, pdn, va, len, access, true, out);
}

sim::Tick TranslationUnit::read_entry(sim::Tick t, std::uint32_t index) {
    sim::Tick ready = m_pipe.reserve(t, m_cycles).end;
    if (!m_mpt.access(index).hit) {
        counter("mpt_misses")++;
        ready = m_bus.dma_read(ready, kIcmMptBase + index * kMptEntryBytes, kMptEntryBytes);
    }
    return ready;
}

sim::Tick TranslationUnit::write_entry(sim::Tick t, std::uint32_t index) {
    const sim::Tick ready = m_pipe.reserve(t, m_cycles).end;
    m_mpt.access(index);
    counter("mpt_writes")++;
    m_bus.dma_write(ready, kIcmMptBase + index * kMptEntryBytes, kMptEntryBytes);
    return ready;
}

Translation TranslationUnit::translate_key(sim::Tick t, std::uint32_t key, std::uint32_t qpn, std::uint32_t pdn,
                                           std::uint64_t va, std::uint64_t len, std::uint32_t access, bool remote,
                                           std::vector<DmaSpan>& out) {
    Translation r;
    // The MPT entry is needed even to reject the key. A window's entry
    // holds the translation base of its region, so one entry serves.
    r.ready = read_entry(t, key >> 8);
    r.status = remote ? m_table.check_remote(key, qpn, pdn, va, len, access) : m_table.check(key, pdn, va, len, access);
    if (r.status != Protection::Ok) {
        counter("protection_errors")++;
        return r;
    }
    if (len == 0) return r;
    // One MTT lookup per page touched; misses of one request are fetched
    // with one DMA read of the consecutive entries. An entry is named by its
    // index in context memory: the region's first entry plus the page.
    const MemoryRegion* mr = m_table.translation_of(key);
    const std::uint64_t first = mr->mtt_index + (va / kPageBytes - mr->va / kPageBytes);
    const std::uint64_t last = first + ((va + len - 1) / kPageBytes - va / kPageBytes);
    std::uint32_t missing = 0;
    for (std::uint64_t entry = first; entry <= last; ++entry)
        if (!m_mtt.access(entry).hit) ++missing;
    if (missing) {
        counter("mtt_misses") += missing;
        r.ready = m_bus.dma_read(r.ready, kIcmMttBase + first * kMttEntryBytes, missing * kMttEntryBytes);
    }
    if (!mr->pages.empty()) {
        // Offsets into the virtually contiguous buffer map page by page.
        std::uint64_t a = va, n = len;
        while (n > 0) {
            const std::uint64_t in_page = a % kPageBytes;
            const std::uint32_t part = static_cast<std::uint32_t>(std::min<std::uint64_t>(n, kPageBytes - in_page));
            const std::uint64_t bus = mr->pages[a / kPageBytes] + in_page;
            if (!out.empty() && out.back().addr + out.back().len == bus && out.back().len + part <= 0x80000000ull)
                out.back().len += part;
            else
                out.push_back({bus, part});
            a += part;
            n -= part;
        }
        return r;
    }
    // An ordinary region is pinned contiguously in bus space.
    const std::uint64_t bus = mr->bus + (va - mr->va);
    if (!out.empty() && out.back().addr + out.back().len == bus && out.back().len + len <= 0xffffffffull) {
        out.back().len += static_cast<std::uint32_t>(len);
    } else {
        std::uint64_t a = bus, n = len;
        while (n > 0) {
            const std::uint32_t part = n > 0x80000000ull ? 0x80000000u : static_cast<std::uint32_t>(n);
            out.push_back({a, part});
            a += part;
            n -= part;
        }
    }
    return r;
}

WindowResult TranslationUnit::bind_window(sim::Tick t, const BindSeg& bind, std::uint32_t qpn, std::uint32_t pdn) {
    WindowResult r;
    r.ready = read_entry(t, bind.window_key >> 8);
    if (bind.region_key) r.ready = read_entry(r.ready, bind.region_key >> 8);
    r.status = m_table.bind(bind, qpn, pdn);
    if (r.status != WindowStatus::Ok) {
        counter("window_errors")++;
        return r;
    }
    counter("window_binds")++;
    r.ready = write_entry(r.ready, bind.window_key >> 8);
    return r;
}

WindowResult TranslationUnit::invalidate_window(sim::Tick t, std::uint32_t key, std::uint32_t qpn, std::uint32_t pdn) {
    WindowResult r;
    r.ready = read_entry(t, key >> 8);
    r.status = m_table.invalidate(key, qpn, pdn);
    if (r.status != WindowStatus::Ok) {
        counter("window_errors")++;
        return r;
    }
    counter("window_invalidations")++;
    r.ready = write_entry(r.ready, key >> 8);
    return r;
}

void TranslationUnit::invalidate(std::uint32_t key) { m_mpt.invalidate(key >> 8); }

void slice_spans(const std::vector<DmaSpan>& spans, std::uint64_t offset, std::uint64_t len,
                 std::vector<DmaSpan>& out) {
    for (const auto& s : spans) {
        if (len == 0) break;
        if (offset >= s.len) {
            offset -= s.len;
            continue;
        }
        const std::uint64_t take = std::min<std::uint64_t>(s.len - offset, len);
        out.push_back({s.addr + offset, static_cast<std::uint32_t>(take)});
        len -= take;
        offset = 0;
    }
}

}  // namespace hcasim::hca
