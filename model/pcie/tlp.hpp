// PCIe transaction-layer arithmetic: how a DMA request is cut into TLPs and
// what each TLP costs on the wire (PCIe base spec 2.2, 2.3.1.1; overheads
// from pcie-bench's model). Pure functions, so the splitting rules are unit
// tested apart from any timing.
#pragma once

#include <cstdint>
#include <vector>

namespace hcasim::pcie {

struct Chunk {
    std::uint64_t addr;
    std::uint32_t len;
};

struct TlpCosts {
    std::uint32_t request_header_bytes = 16;     // 4DW header: 64-bit address
    std::uint32_t completion_header_bytes = 12;  // 3DW completion header
    std::uint32_t framing_bytes = 8;             // STP/sequence/LCRC (Gen3) or STP/seq/LCRC/END (Gen1/2)
    std::uint32_t ecrc_bytes = 0;                // 4 when ECRC is enabled
    std::uint32_t dllp_bytes = 8;                // one ACK or UpdateFC DLLP

    std::uint32_t read_request_wire() const { return request_header_bytes + framing_bytes + ecrc_bytes; }
    std::uint32_t write_wire(std::uint32_t payload) const {
        return request_header_bytes + framing_bytes + ecrc_bytes + payload;
    }
    std::uint32_t completion_wire(std::uint32_t payload) const {
        return completion_header_bytes + framing_bytes + ecrc_bytes + payload;
    }
};

inline constexpr std::uint64_t kPcie4KiB = 4096;

// Memory read requests: at most mrrs bytes each, never crossing a 4 KiB
// boundary (a request may not, PCIe 2.2.7).
std::vector<Chunk> split_read_requests(std::uint64_t addr, std::uint64_t len, std::uint32_t mrrs);

// Completions for one read request: each at most max_payload bytes, and every
// completion but the last ends on a read-completion-boundary-aligned address
// (PCIe 2.3.1.1).
std::vector<Chunk> split_completions(std::uint64_t addr, std::uint32_t len, std::uint32_t rcb,
                                     std::uint32_t max_payload);

// Posted memory writes: at most mps bytes each, cut at mps-aligned addresses
// so no TLP crosses a 4 KiB boundary.
std::vector<Chunk> split_writes(std::uint64_t addr, std::uint64_t len, std::uint32_t mps);

// Counting versions for the hot path (no allocation).
template <typename F>
void for_each_read_request(std::uint64_t addr, std::uint64_t len, std::uint32_t mrrs, F&& f) {
    while (len > 0) {
        const std::uint64_t to_boundary = kPcie4KiB - (addr & (kPcie4KiB - 1));
        std::uint64_t n = len < mrrs ? len : mrrs;
        if (n > to_boundary) n = to_boundary;
        f(addr, static_cast<std::uint32_t>(n));
        addr += n;
        len -= n;
    }
}

template <typename F>
void for_each_completion(std::uint64_t addr, std::uint32_t len, std::uint32_t rcb, std::uint32_t max_payload,
                         F&& f) {
    const std::uint64_t end = addr + len;
    while (addr < end) {
        std::uint64_t stop = addr + max_payload;
        if (stop < end) {
            stop &= ~static_cast<std::uint64_t>(rcb - 1);
            if (stop <= addr) stop = (addr | (rcb - 1)) + 1;
        } else {
            stop = end;
        }
        f(addr, static_cast<std::uint32_t>(stop - addr));
        addr = stop;
    }
}

template <typename F>
void for_each_write(std::uint64_t addr, std::uint64_t len, std::uint32_t mps, F&& f) {
    while (len > 0) {
        const std::uint64_t to_boundary = mps - (addr & (mps - 1));
        const std::uint64_t n = len < to_boundary ? len : to_boundary;
        f(addr, static_cast<std::uint32_t>(n));
        addr += n;
        len -= n;
    }
}

}  // namespace hcasim::pcie
