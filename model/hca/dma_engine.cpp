#include "model/hca/dma_engine.hpp"

namespace hcasim::hca {

const char* to_string(DmaStatus s) {
    switch (s) {
    case DmaStatus::Ok: return "ok";
    case DmaStatus::ZeroLength: return "zero_length";
    case DmaStatus::AddressWrap: return "address_wrap";
    case DmaStatus::TooLong: return "too_long";
    }
    return "unknown";
}

DmaStatus check_descriptor(std::uint64_t addr, std::uint32_t len) {
    if (len == 0) return DmaStatus::ZeroLength;
    if (len > kDmaMaxDescriptorBytes) return DmaStatus::TooLong;
    if (addr + (len - 1) < addr) return DmaStatus::AddressWrap;
    return DmaStatus::Ok;
}

}  // namespace hcasim::hca
