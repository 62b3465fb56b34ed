#include "model/pcie/tlp.hpp"

namespace hcasim::pcie {

std::vector<Chunk> split_read_requests(std::uint64_t addr, std::uint64_t len, std::uint32_t mrrs) {
    std::vector<Chunk> out;
    for_each_read_request(addr, len, mrrs, [&](std::uint64_t a, std::uint32_t n) { out.push_back({a, n}); });
    return out;
}

std::vector<Chunk> split_completions(std::uint64_t addr, std::uint32_t len, std::uint32_t rcb,
                                     std::uint32_t max_payload) {
    std::vector<Chunk> out;
    for_each_completion(addr, len, rcb, max_payload, [&](std::uint64_t a, std::uint32_t n) { out.push_back({a, n}); });
    return out;
}

std::vector<Chunk> split_writes(std::uint64_t addr, std::uint64_t len, std::uint32_t mps) {
    std::vector<Chunk> out;
    for_each_write(addr, len, mps, [&](std::uint64_t a, std::uint32_t n) { out.push_back({a, n}); });
    return out;
}

}  // namespace hcasim::pcie
