#include "model/hca/translation_unit.hpp"

#include <algorithm>

#include "model/pcie/pcie_host_interface.hpp"

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
    }
    return "?";
}

std::uint32_t ProtectionTable::add(std::uint32_t pdn, std::uint64_t va, std::uint64_t length, std::uint32_t access,
                                   std::uint64_t bus) {
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
    // The low byte changes every registration so a stale key stays invalid.
    ++m_generation;
    const std::uint32_t key = (index << 8) | m_generation;
    const std::uint64_t first_page = va / kPageBytes;
    const std::uint64_t pages = length ? (va + length - 1) / kPageBytes - first_page + 1 : 1;
    m_regions[index] = MemoryRegion{true, key, pdn, va, length, access, bus, m_next_mtt, {}};
    m_next_mtt += pages;
    ++m_live;
    return key;
}

bool ProtectionTable::remove(std::uint32_t key) {
    const std::uint32_t index = key >> 8;
    if (index >= m_regions.size() || !m_regions[index].valid || m_regions[index].key != key) return false;
    m_regions[index].valid = false;
    m_free.push_back(index);
    --m_live;
    return true;
}

void ProtectionTable::set_pages(std::uint32_t key, const std::vector<std::uint64_t>& pages) {
    const std::uint32_t index = key >> 8;
    if (index < m_regions.size() && m_regions[index].valid && m_regions[index].key == key) m_regions[index].pages = pages;
}

bool ProtectionTable::modify(std::uint32_t key, std::uint32_t pdn, std::uint32_t access) {
    const std::uint32_t index = key >> 8;
    if (index >= m_regions.size() || !m_regions[index].valid || m_regions[index].key != key) return false;
    m_regions[index].pdn = pdn;
    m_regions[index].access = access;
    return true;
}

const MemoryRegion* ProtectionTable::find(std::uint32_t key) const {
    const std::uint32_t index = key >> 8;
    if (index >= m_regions.size() || !m_regions[index].valid || m_regions[index].key != key) return nullptr;
    return &m_regions[index];
}

Protection ProtectionTable::check(std::uint32_t key, std::uint32_t pdn, std::uint64_t va, std::uint64_t len,
                                  std::uint32_t access) const {
    const MemoryRegion* mr = find(key);
    if (!mr) return Protection::BadKey;
    if (mr->pdn != pdn) return Protection::PdMismatch;
    if (len > 0 && (va < mr->va || va - mr->va > mr->length || len > mr->length - (va - mr->va)))
        return Protection::OutOfBounds;
    if ((mr->access & access) != access) return Protection::AccessDenied;
    return Protection::Ok;
}

bool ContextCache::access(std::uint64_t tag) {
    auto it = m_where.find(tag);
    if (it != m_where.end()) {
        m_lru.splice(m_lru.begin(), m_lru, it->second);
        ++m_hits;
        return true;
    }
    ++m_misses;
    if (m_lru.size() >= m_capacity) {
        m_where.erase(m_lru.back());
        m_lru.pop_back();
    }
    m_lru.push_front(tag);
    m_where[tag] = m_lru.begin();
    return false;
}

void ContextCache::invalidate(std::uint64_t tag) {
    auto it = m_where.find(tag);
    if (it == m_where.end()) return;
    m_lru.erase(it->second);
    m_where.erase(it);
}

TranslationUnit::TranslationUnit(const sc_core::sc_module_name& name, const HcaParams& p, ProtectionTable& table,
                                 pcie::PcieHostInterface& pcie)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)),
      m_table(table),
      m_pcie(pcie),
      m_mpt(p.mpt_cache_entries),
      m_mtt(p.mtt_cache_entries),
      m_pipe(&m_clock),
      m_cycles(p.translation_cycles) {}

Translation TranslationUnit::translate(sim::Tick t, std::uint32_t key, std::uint32_t pdn, std::uint64_t va,
                                       std::uint64_t len, std::uint32_t access, std::vector<DmaSpan>& out) {
    Translation r;
    r.ready = m_pipe.reserve(t, m_cycles).end;
    if (key == kReservedLkey) {
        // Physical addressing: no MPT entry or page translation to look up.
        if (pdn != kFirmwarePd) {
            counter("protection_errors")++;
            r.status = Protection::BadKey;
            return r;
        }
        if (len) out.push_back({va, static_cast<std::uint32_t>(len)});
        return r;
    }
    // The MPT entry is needed even to reject the key.
    if (!m_mpt.access(key >> 8)) {
        counter("mpt_misses")++;
        r.ready = m_pcie.dma_read(r.ready, kIcmMptBase + (key >> 8) * kMptEntryBytes, kMptEntryBytes);
    }
    r.status = m_table.check(key, pdn, va, len, access);
    if (r.status != Protection::Ok) {
        counter("protection_errors")++;
        return r;
    }
    if (len == 0) return r;
    // One MTT lookup per page touched; misses of one request are fetched
    // with one DMA read of the consecutive entries. An entry is named by its
    // index in context memory: the region's first entry plus the page.
    const MemoryRegion* mr = m_table.find(key);
    const std::uint64_t first = mr->mtt_index + (va / kPageBytes - mr->va / kPageBytes);
    const std::uint64_t last = first + ((va + len - 1) / kPageBytes - va / kPageBytes);
    std::uint32_t missing = 0;
    for (std::uint64_t entry = first; entry <= last; ++entry)
        if (!m_mtt.access(entry)) ++missing;
    if (missing) {
        counter("mtt_misses") += missing;
        r.ready = m_pcie.dma_read(r.ready, kIcmMttBase + first * kMttEntryBytes, missing * kMttEntryBytes);
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
