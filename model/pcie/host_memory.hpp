// Host memory as the adapter sees it through the root complex: a simulated
// physical address space of its own. The driver pins every buffer the
// adapter may touch (registered regions, rings, doorbell records) with map(),
// which gives it fresh simulated physical pages from a deterministic
// allocator; the adapter only ever sees those bus addresses. So a run does not
// depend on where the simulator's own heap put the buffers: only the offset
// of a buffer within its page, which the program chose, carries over.
// Every adapter access goes through here, after the translation and
// protection unit has allowed it.
//
// A mapping may lie in another process's address space (a program that
// `hcasim run` started, whose registered buffers are its own memory): the
// adapter's reads and writes of it go through process_vm_readv/writev.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>
#include <sys/uio.h>

#include <systemc>

#include "model/sim/time.hpp"

namespace hcasim::pcie {

class HostMemory {
public:
    static constexpr std::uint64_t kPageBytes = 4096;
    // Bus addresses start above 4 GiB, as for a 64-bit DMA-capable device.
    static constexpr std::uint64_t kFirstBusPage = 0x100000;

    explicit HostMemory(double access_latency_ns) : m_latency(sim::ns_to_ps(access_latency_ns)) {}

    // Latency of a DMA read once the request has reached the root complex.
    sim::Tick access_latency() const { return m_latency; }

    // Pins [host, host+len) and returns the bus address of host. The pages
    // are new ones (a buffer mapped twice gets two mappings, as pinning it
    // twice would), contiguous in bus space, followed by one unmapped guard
    // page; the offset within the first page is kept.
    // space: 0 for the simulator's own memory, else the pid whose address
    // space host is in.
    std::uint64_t map(const void* host, std::uint64_t len, pid_t space = 0) {
        const auto h = reinterpret_cast<std::uintptr_t>(host);
        const std::uint64_t offset = h % kPageBytes;
        const std::uint64_t pages = (offset + (len ? len : 1) + kPageBytes - 1) / kPageBytes;
        const std::uint64_t bus = m_next_page * kPageBytes;
        m_next_page += pages + 1;
        Range r{pages * kPageBytes, reinterpret_cast<std::uint8_t*>(h - offset), space, nullptr, nullptr};
        if (space) {
            // Pages the process shares with the simulator: reached directly.
            for (const auto& [key, w] : m_shared) {
                if (key.first != space) continue;
                const auto* remote = static_cast<const std::uint8_t*>(w.remote);
                if (r.host >= remote && r.host + r.len <= remote + w.len) {
                    r.local = w.local.get() + (r.host - remote);
                    r.keep = w.local;
                    break;
                }
            }
        }
        m_ranges[bus] = std::move(r);
        return bus + offset;
    }

    // Process space's pages [remote, remote+len) are also at local in the
    // simulator's memory (the same pages, mapped twice): mappings made of
    // them from now on copy directly instead of through the kernel. Replaces
    // what the process shared before where the two overlap; local is freed
    // when no mapping uses it any more.
    void share(pid_t space, const void* remote, std::uint64_t len, std::shared_ptr<std::uint8_t> local) {
        const auto* r = static_cast<const std::uint8_t*>(remote);
        for (auto it = m_shared.begin(); it != m_shared.end();) {
            const auto* o = static_cast<const std::uint8_t*>(it->second.remote);
            if (it->first.first == space && o < r + len && r < o + it->second.len) it = m_shared.erase(it);
            else ++it;
        }
        m_shared[{space, reinterpret_cast<std::uintptr_t>(remote)}] = Shared{remote, len, std::move(local)};
    }
    // The process has ended: what it shared goes with its last mapping.
    void forget_shared(pid_t space) {
        for (auto it = m_shared.begin(); it != m_shared.end();) it = it->first.first == space ? m_shared.erase(it) : std::next(it);
    }
    // Releases the mapping that map() returned bus for.
    void unmap(std::uint64_t bus) { m_ranges.erase(bus - bus % kPageBytes); }

    // The host bytes behind [bus, bus+n): for firmware that moves data
    // within host memory itself.
    std::uint8_t* host_bytes(std::uint64_t bus, std::uint64_t n) {
        const auto& [base, range] = mapping(bus, n);
        if (range.space)
            throw std::logic_error("host memory: bus address 0x" + hex(bus) + " is in process " +
                                   std::to_string(range.space) + ", not the simulator's memory");
        return range.host + (bus - base);
    }

    void read(std::uint64_t addr, void* dst, std::size_t n) {
        if (n == 0) return;
        const auto& [base, range] = mapping(addr, n);
        if (range.local) std::memcpy(dst, range.local + (addr - base), n);
        else if (range.space) remote_copy(range.space, range.host + (addr - base), dst, n, false);
        else std::memcpy(dst, range.host + (addr - base), n);
        m_bytes_read += n;
    }
    void write(std::uint64_t addr, const void* src, std::size_t n) {
        if (n == 0) return;
        const auto& [base, range] = mapping(addr, n);
        m_bytes_written += n;
        if (range.space) {
            // No host thread of the simulator polls another process's
            // memory: only the notification matters.
            if (range.local) std::memcpy(range.local + (addr - base), src, n);
            else remote_copy(range.space, range.host + (addr - base), const_cast<void*>(src), n, true);
            ++m_remote_writes;
            m_written.notify(sc_core::SC_ZERO_TIME);
            return;
        }
        std::uint8_t* dst = range.host + (addr - base);
        std::memcpy(dst, src, n);
        const sim::Tick now = sim::now_ps();
        if (now != m_writes_now_at) {
            m_writes_now.clear();
            m_writes_now_at = now;
        }
        m_writes_now.emplace_back(dst, n);
        m_written.notify(sc_core::SC_ZERO_TIME);
    }

    // Notified whenever the adapter writes host memory: the only way what a
    // polling host thread sees can change.
    const sc_core::sc_event& written() const { return m_written; }

    // A host read at time T sees what the adapter wrote before T, not what
    // it writes at T: otherwise a read and a write at the same instant would
    // be ordered by how SystemC happens to schedule the two threads, and a
    // polling loop's result would depend on how it is simulated. Polls ask
    // these before believing what they read.
    bool wrote_now() const { return m_writes_now_at == sim::now_ps() && !m_writes_now.empty(); }
    bool wrote_now(const void* host, std::size_t n) const {
        if (!wrote_now()) return false;
        const auto* p = static_cast<const std::uint8_t*>(host);
        for (const auto& [dst, len] : m_writes_now)
            if (p < dst + len && dst < p + n) return true;
        return false;
    }

    std::uint64_t bytes_read() const { return m_bytes_read; }
    // Writes into other processes' memory so far: what a program spinning on
    // its buffer waits for.
    std::uint64_t remote_writes() const { return m_remote_writes; }
    std::uint64_t bytes_written() const { return m_bytes_written; }

private:
    struct Range {
        std::uint64_t len;   // whole pages
        std::uint8_t* host;  // host address of the first page
        pid_t space;         // 0: the simulator's memory; else that process's
        std::uint8_t* local;                 // another process's pages shared with the simulator: here
        std::shared_ptr<std::uint8_t> keep;  // what local lies in
    };
    struct Shared {
        const void* remote;
        std::uint64_t len;
        std::shared_ptr<std::uint8_t> local;
    };
    std::map<std::pair<pid_t, std::uintptr_t>, Shared> m_shared;
    const std::pair<const std::uint64_t, Range>& mapping(std::uint64_t bus, std::uint64_t n) const {
        auto it = m_ranges.upper_bound(bus);
        if (it == m_ranges.begin() || bus + n > std::prev(it)->first + std::prev(it)->second.len)
            throw std::logic_error("host memory: no mapping covers bus address 0x" + hex(bus) + " + " +
                                   std::to_string(n));
        return *std::prev(it);
    }
    // A process that has gone (or unmapped its buffer) reads as zeroes and
    // drops writes, as pinned pages nobody looks at any more would.
    static void remote_copy(pid_t pid, std::uint8_t* remote, void* local, std::size_t n, bool to_remote) {
        iovec l{local, n}, r{remote, n};
        const ssize_t done = to_remote ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (!to_remote && done != static_cast<ssize_t>(n))
            std::memset(static_cast<std::uint8_t*>(local) + (done > 0 ? done : 0), 0, n - static_cast<std::size_t>(done > 0 ? done : 0));
    }
    static std::string hex(std::uint64_t v) {
        char b[24];
        std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
        return b;
    }

    sim::Tick m_latency;
    std::map<std::uint64_t, Range> m_ranges;  // by bus address of the first page
    std::uint64_t m_next_page = kFirstBusPage;
    sc_core::sc_event m_written;
    std::vector<std::pair<const std::uint8_t*, std::size_t>> m_writes_now;  // host ranges written at m_writes_now_at
    sim::Tick m_writes_now_at = 0;
    std::uint64_t m_bytes_read = 0;
    std::uint64_t m_bytes_written = 0;
    std::uint64_t m_remote_writes = 0;
};

}  // namespace hcasim::pcie
