// Unit tests for the translation and protection decisions
// (model/hca/translation_unit.hpp): the memory protection table's key, PD,
// bounds and access checks, the LRU context cache and slice_spans.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "model/hca/translation_unit.hpp"

using hcasim::hca::ContextCache;
using hcasim::hca::DmaSpan;
using hcasim::hca::Protection;
using hcasim::hca::ProtectionTable;

namespace {

constexpr std::uint32_t kAll = hcasim::hca::kLocalWrite | hcasim::hca::kRemoteWrite | hcasim::hca::kRemoteRead |
                               hcasim::hca::kRemoteAtomic;
constexpr std::uint64_t kVa = 0x7f1234560000ull;
constexpr std::uint64_t kBus = 0x100000000ull;  // where the region is pinned: no bearing on protection
constexpr std::uint64_t kLen = 3 * 4096 + 100;

}  // namespace

TEST_CASE("a registered region passes the protection check for its own key and PD", "[protection][unit]") {
    ProtectionTable t(16);
    const std::uint32_t key = t.add(7, kVa, kLen, kAll, kBus);
    REQUIRE(key != 0);
    CHECK(t.size() == 1);
    REQUIRE(t.find(key) != nullptr);
    CHECK(t.find(key)->va == kVa);
    CHECK(t.find(key)->length == kLen);
    CHECK(t.check(key, 7, kVa, kLen, kAll) == Protection::Ok);
    CHECK(t.check(key, 7, kVa + 100, 50, hcasim::hca::kRemoteRead) == Protection::Ok);
    CHECK(t.check(key, 7, kVa, 1, 0) == Protection::Ok);
    // The last byte of the region.
    CHECK(t.check(key, 7, kVa + kLen - 1, 1, 0) == Protection::Ok);
}

TEST_CASE("an unknown memory key is rejected as a bad key", "[protection][unit]") {
    ProtectionTable t(16);
    const std::uint32_t key = t.add(1, kVa, kLen, kAll, kBus);
    CHECK(t.check(0, 1, kVa, 1, 0) == Protection::BadKey);
    CHECK(t.check(key + 1, 1, kVa, 1, 0) == Protection::BadKey);   // right index, wrong variant
    CHECK(t.check(key ^ 0x100, 1, kVa, 1, 0) == Protection::BadKey);  // wrong index
    CHECK(t.check(0xffffff00u | (key & 0xff), 1, kVa, 1, 0) == Protection::BadKey);
    CHECK(t.find(key + 1) == nullptr);
}

TEST_CASE("a key stays invalid after its region is removed even when the slot is reused", "[protection][unit]") {
    ProtectionTable t(16);
    const std::uint32_t old_key = t.add(1, kVa, kLen, kAll, kBus);
    REQUIRE(t.remove(old_key));
    CHECK(t.size() == 0);
    CHECK(t.check(old_key, 1, kVa, 1, 0) == Protection::BadKey);
    CHECK_FALSE(t.remove(old_key));  // removing twice fails
    // The next registration reuses the slot with a new key generation.
    const std::uint32_t new_key = t.add(1, kVa, kLen, kAll, kBus);
    REQUIRE(new_key != 0);
    CHECK(new_key != old_key);
    CHECK((new_key >> 8) == (old_key >> 8));
    CHECK(t.check(old_key, 1, kVa, 1, 0) == Protection::BadKey);
    CHECK(t.check(new_key, 1, kVa, 1, 0) == Protection::Ok);
    CHECK_FALSE(t.remove(old_key));
    CHECK(t.find(new_key) != nullptr);
}

TEST_CASE("keys of live regions are distinct and the table refuses more than its capacity", "[protection][unit]") {
    ProtectionTable t(8);
    std::set<std::uint32_t> keys;
    for (int i = 0; i < 8; ++i) {
        const std::uint32_t k = t.add(1, kVa + static_cast<std::uint64_t>(i) * kLen, kLen, kAll, kBus);
        REQUIRE(k != 0);
        keys.insert(k);
    }
    CHECK(keys.size() == 8);
    CHECK(t.add(1, kVa, kLen, kAll, kBus) == 0);  // full
    REQUIRE(t.remove(*keys.begin()));
    CHECK(t.add(1, kVa, kLen, kAll, kBus) != 0);  // room again
}

TEST_CASE("a key used from another protection domain is a PD mismatch", "[protection][unit]") {
    ProtectionTable t(16);
    const std::uint32_t key = t.add(3, kVa, kLen, kAll, kBus);
    CHECK(t.check(key, 4, kVa, 1, 0) == Protection::PdMismatch);
    CHECK(t.check(key, 0, kVa, 1, 0) == Protection::PdMismatch);
    CHECK(t.check(key, 3, kVa, 1, 0) == Protection::Ok);
}

TEST_CASE("accesses outside the registered region are out of bounds at the start the end and on overflow",
          "[protection][unit]") {
    ProtectionTable t(16);
    const std::uint32_t key = t.add(1, kVa, kLen, kAll, kBus);
    SECTION("before the start") {
        CHECK(t.check(key, 1, kVa - 1, 1, 0) == Protection::OutOfBounds);
        CHECK(t.check(key, 1, kVa - 1, 10, 0) == Protection::OutOfBounds);  // straddles the start
        CHECK(t.check(key, 1, 0, 1, 0) == Protection::OutOfBounds);
    }
    SECTION("past the end") {
        CHECK(t.check(key, 1, kVa, kLen + 1, 0) == Protection::OutOfBounds);
        CHECK(t.check(key, 1, kVa + kLen, 1, 0) == Protection::OutOfBounds);  // first byte after
        CHECK(t.check(key, 1, kVa + kLen - 10, 11, 0) == Protection::OutOfBounds);
        CHECK(t.check(key, 1, kVa + kLen + 4096, 1, 0) == Protection::OutOfBounds);
        CHECK(t.check(key, 1, kVa + kLen - 10, 10, 0) == Protection::Ok);
    }
    SECTION("a length that would wrap the address space") {
        const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max();
        CHECK(t.check(key, 1, kVa + 10, huge, 0) == Protection::OutOfBounds);
        CHECK(t.check(key, 1, kVa + 10, huge - kVa, 0) == Protection::OutOfBounds);
        CHECK(t.check(key, 1, huge, 2, 0) == Protection::OutOfBounds);
        CHECK(t.check(key, 1, huge - 5, 10, 0) == Protection::OutOfBounds);
    }
    SECTION("a region at the top of the address space") {
        const std::uint64_t top = std::numeric_limits<std::uint64_t>::max() - 4095;
        const std::uint32_t k2 = t.add(1, top, 4096, kAll, kBus);
        CHECK(t.check(k2, 1, top, 4096, 0) == Protection::Ok);
        CHECK(t.check(k2, 1, top + 4000, 96, 0) == Protection::Ok);
        CHECK(t.check(k2, 1, top + 4000, 97, 0) == Protection::OutOfBounds);
        CHECK(t.check(k2, 1, top + 1, std::numeric_limits<std::uint64_t>::max(), 0) == Protection::OutOfBounds);
    }
}

TEST_CASE("each access right missing from a region is denied and the others are granted", "[protection][unit]") {
    using namespace hcasim::hca;
    for (std::uint32_t bit : {static_cast<std::uint32_t>(kLocalWrite), static_cast<std::uint32_t>(kRemoteWrite),
                              static_cast<std::uint32_t>(kRemoteRead), static_cast<std::uint32_t>(kRemoteAtomic)}) {
        INFO("access bit " << bit);
        ProtectionTable t(16);
        const std::uint32_t without = t.add(1, kVa, kLen, kAll & ~bit, kBus);
        const std::uint32_t with = t.add(1, kVa, kLen, bit, kBus);
        CHECK(t.check(without, 1, kVa, 64, bit) == Protection::AccessDenied);
        CHECK(t.check(without, 1, kVa, 64, kAll & ~bit) == Protection::Ok);
        CHECK(t.check(without, 1, kVa, 64, bit | (kAll & ~bit)) == Protection::AccessDenied);
        CHECK(t.check(with, 1, kVa, 64, bit) == Protection::Ok);
        // A local read needs no right at all.
        CHECK(t.check(with, 1, kVa, 64, 0) == Protection::Ok);
        CHECK(t.check(without, 1, kVa, 64, 0) == Protection::Ok);
    }
}

TEST_CASE("the context cache hits on recent entries and evicts the least recently used one", "[protection][unit]") {
    ContextCache c(2);
    CHECK_FALSE(c.access(1).hit);  // miss, fill
    CHECK_FALSE(c.access(2).hit);  // miss, fill
    CHECK(c.access(1).hit);        // hit: 1 is now most recent
    CHECK_FALSE(c.access(3).hit);  // miss: evicts 2, the least recently used
    CHECK(c.access(1).hit);
    CHECK(c.access(3).hit);
    CHECK_FALSE(c.access(2).hit);  // 2 was evicted; evicts 1 now
    CHECK_FALSE(c.access(1).hit);
    CHECK(c.hits() == 3);
    CHECK(c.misses() == 5);
}

TEST_CASE("an invalidated context cache entry misses on its next access", "[protection][unit]") {
    ContextCache c(4);
    for (std::uint64_t t = 10; t < 14; ++t) CHECK_FALSE(c.access(t).hit);
    for (std::uint64_t t = 10; t < 14; ++t) CHECK(c.access(t).hit);
    c.invalidate(12);
    c.invalidate(999);  // not cached: nothing happens
    CHECK_FALSE(c.access(12).hit);
    // The invalidation freed a slot: nothing else was evicted by the refill.
    CHECK(c.access(10).hit);
    CHECK(c.access(11).hit);
    CHECK(c.access(13).hit);
}

TEST_CASE("a one-entry context cache keeps only the last tag", "[protection][unit]") {
    ContextCache c(1);
    CHECK_FALSE(c.access(5).hit);
    CHECK(c.access(5).hit);
    CHECK_FALSE(c.access(6).hit);
    CHECK_FALSE(c.access(5).hit);
    CHECK(c.hits() == 1);
    CHECK(c.misses() == 3);
}

TEST_CASE("slice_spans returns the part of a scattered buffer between two offsets", "[protection][unit]") {
    const std::vector<DmaSpan> spans{{0x1000, 100}, {0x5000, 50}, {0x9000, 200}};
    auto slice = [&](std::uint64_t off, std::uint64_t len) {
        std::vector<DmaSpan> out;
        hcasim::hca::slice_spans(spans, off, len, out);
        return out;
    };
    SECTION("within one span") {
        const auto s = slice(10, 20);
        REQUIRE(s.size() == 1);
        CHECK(s[0].addr == 0x100a);
        CHECK(s[0].len == 20);
    }
    SECTION("across all three spans") {
        const auto s = slice(90, 70);
        REQUIRE(s.size() == 3);
        CHECK(s[0].addr == 0x105a);
        CHECK(s[0].len == 10);
        CHECK(s[1].addr == 0x5000);
        CHECK(s[1].len == 50);
        CHECK(s[2].addr == 0x9000);
        CHECK(s[2].len == 10);
    }
    SECTION("starting exactly on a span boundary") {
        const auto s = slice(100, 60);
        REQUIRE(s.size() == 2);
        CHECK(s[0].addr == 0x5000);
        CHECK(s[0].len == 50);
        CHECK(s[1].addr == 0x9000);
        CHECK(s[1].len == 10);
    }
    SECTION("the whole buffer and beyond its end") {
        const auto s = slice(0, 1000);
        REQUIRE(s.size() == 3);
        CHECK(s[0].len + s[1].len + s[2].len == 350);
        CHECK(slice(349, 10).size() == 1);
        CHECK(slice(349, 10)[0].addr == 0x9000 + 199);
        CHECK(slice(349, 10)[0].len == 1);
    }
    SECTION("nothing past the end or for zero bytes") {
        CHECK(slice(350, 10).empty());
        CHECK(slice(1000, 1).empty());
        CHECK(slice(20, 0).empty());
    }
    SECTION("appends to what out already holds") {
        std::vector<DmaSpan> out{{0x42, 1}};
        hcasim::hca::slice_spans(spans, 0, 5, out);
        REQUIRE(out.size() == 2);
        CHECK(out[0].addr == 0x42);
        CHECK(out[1].addr == 0x1000);
        CHECK(out[1].len == 5);
    }
}
