// Unit tests of memory windows in the memory protection table
// (model/hca/translation_unit.hpp): windows as entries of the table, the
// checks a bind and an invalidation make, and remote accesses through a
// window, which its own range and rights govern.
#include <catch2/catch.hpp>

#include <cstdint>

#include "model/hca/translation_unit.hpp"

using namespace hcasim::hca;

namespace {

constexpr std::uint64_t kVa = 0x7f1234560000ull;
constexpr std::uint64_t kLen = 64 * 1024;
constexpr std::uint32_t kPd = 3, kQp = 0x48, kOtherQp = 0x49;

std::uint32_t next_key(std::uint32_t k) { return (k & ~0xffu) | ((k + 1) & 0xffu); }

BindSeg bind_of(std::uint32_t window, std::uint32_t new_key, std::uint32_t region, std::uint64_t addr,
                std::uint64_t len, std::uint32_t access, std::uint8_t type) {
    BindSeg b{};
    b.window_key = window;
    b.new_key = new_key;
    b.region_key = region;
    b.addr = addr;
    b.length = len;
    b.access = access;
    b.type = type;
    return b;
}

struct Fixture {
    ProtectionTable t{64};
    std::uint32_t region = t.add(kPd, kVa, kLen, kLocalWrite | kMwBind, 0x100000000ull);
    std::uint32_t w1 = t.add_window(kPd, MptKind::Window1);
    std::uint32_t w2 = t.add_window(kPd, MptKind::Window2);
};

}  // namespace

TEST_CASE("a window is an unbound entry of the table whose key refuses every access until it is bound",
          "[protection][unit][mw]") {
    Fixture f;
    REQUIRE(f.w1 != 0);
    REQUIRE(f.w2 != 0);
    CHECK(f.t.size() == 3);
    CHECK((f.w1 >> 8) != (f.region >> 8));
    REQUIRE(f.t.window(f.w1) != nullptr);
    CHECK(f.t.window(f.w1)->kind == MptKind::Window1);
    CHECK_FALSE(f.t.window(f.w1)->bound);
    CHECK(f.t.window(f.region) == nullptr);
    CHECK(f.t.check_remote(f.w1, kQp, kPd, kVa, 8, kRemoteRead) == Protection::BadKey);
    CHECK(f.t.check_remote(f.w2, kQp, kPd, kVa, 8, kRemoteRead) == Protection::BadKey);
    // The region grants no remote rights of its own.
    CHECK(f.t.check_remote(f.region, kQp, kPd, kVa, 8, kRemoteRead) == Protection::AccessDenied);
}

TEST_CASE("a bound window governs remote access by its own range and rights and translates through its region",
          "[protection][unit][mw]") {
    Fixture f;
    const std::uint32_t k = next_key(f.w1);
    REQUIRE(f.t.bind(bind_of(f.w1, k, f.region, kVa + 4096, 8192, kRemoteRead | kRemoteWrite, kBindType1), kQp, kPd) ==
            WindowStatus::Ok);
    CHECK(f.t.check_remote(k, kQp, kPd, kVa + 4096, 8192, kRemoteWrite) == Protection::Ok);
    CHECK(f.t.check_remote(k, kOtherQp, kPd, kVa + 4096, 1, kRemoteRead) == Protection::Ok);  // type 1: any QP of the PD
    CHECK(f.t.check_remote(k, kQp, kPd, kVa + 4095, 2, kRemoteRead) == Protection::OutOfBounds);
    CHECK(f.t.check_remote(k, kQp, kPd, kVa + 4096 + 8191, 2, kRemoteRead) == Protection::OutOfBounds);
    CHECK(f.t.check_remote(k, kQp, kPd, kVa + 4096, 8, kRemoteAtomic) == Protection::AccessDenied);
    CHECK(f.t.check_remote(k, kQp, kPd + 1, kVa + 4096, 8, kRemoteRead) == Protection::PdMismatch);
    // The old key is stale.
    CHECK(f.t.check_remote(f.w1, kQp, kPd, kVa + 4096, 8, kRemoteRead) == Protection::BadKey);
    REQUIRE(f.t.translation_of(k) != nullptr);
    CHECK(f.t.translation_of(k)->key == f.region);
    CHECK(f.t.find(f.region)->windows == 1);
    // A window's key is no lkey.
    CHECK(f.t.check(k, kPd, kVa + 4096, 8, 0) == Protection::BadKey);
    CHECK(f.t.check(k, kPd, kVa + 4096, 8, kLocalWrite) == Protection::BadKey);
}

TEST_CASE("a type 2 window serves only the qp it is bound to", "[protection][unit][mw]") {
    Fixture f;
    const std::uint32_t k = next_key(f.w2);
    REQUIRE(f.t.bind(bind_of(f.w2, k, f.region, kVa, 4096, kRemoteRead, kBindType2), kQp, kPd) == WindowStatus::Ok);
    CHECK(f.t.check_remote(k, kQp, kPd, kVa, 4096, kRemoteRead) == Protection::Ok);
    CHECK(f.t.check_remote(k, kOtherQp, kPd, kVa, 4096, kRemoteRead) == Protection::QpMismatch);
}

TEST_CASE("each bind the table refuses gives its reason and leaves the window as it was", "[protection][unit][mw]") {
    Fixture f;
    ProtectionTable& t = f.t;
    const std::uint32_t no_bind = t.add(kPd, kVa, kLen, kLocalWrite, 0);
    const std::uint32_t read_only = t.add(kPd, kVa, kLen, kRemoteRead | kMwBind, 0);
    const std::uint32_t other_pd_region = t.add(kPd + 1, kVa, kLen, kLocalWrite | kMwBind, 0);
    const std::uint32_t other_pd_window = t.add_window(kPd + 1, MptKind::Window2);
    const std::uint32_t k1 = next_key(f.w1), k2 = next_key(f.w2);
    auto b1 = [&](std::uint32_t region, std::uint64_t addr, std::uint64_t len, std::uint32_t access) {
        return t.bind(bind_of(f.w1, k1, region, addr, len, access, kBindType1), kQp, kPd);
    };
    CHECK(t.bind(bind_of(f.region, k1, f.region, kVa, 8, kRemoteRead, kBindType1), kQp, kPd) == WindowStatus::NoWindow);
    CHECK(t.bind(bind_of(f.w2, k2, f.region, kVa, 8, kRemoteRead, kBindType1), kQp, kPd) == WindowStatus::WrongType);
    CHECK(t.bind(bind_of(f.w1, k1, f.region, kVa, 8, kRemoteRead, kBindType2), kQp, kPd) == WindowStatus::WrongType);
    CHECK(t.bind(bind_of(f.w2, f.w1, f.region, kVa, 8, kRemoteRead, kBindType2), kQp, kPd) == WindowStatus::BadNewKey);
    CHECK(t.bind(bind_of(f.w2, k2, f.region, kVa, 8, kRemoteRead, kBindType2), kQp, kPd + 1) == WindowStatus::PdMismatch);
    CHECK(t.bind(bind_of(other_pd_window, next_key(other_pd_window), f.region, kVa, 8, kRemoteRead, kBindType2), kQp,
                 kPd) == WindowStatus::PdMismatch);
    CHECK(b1(other_pd_region, kVa, 8, kRemoteRead) == WindowStatus::PdMismatch);
    CHECK(b1(f.region ^ 0x100, kVa, 8, kRemoteRead) == WindowStatus::NoRegion);
    CHECK(b1(f.w2, kVa, 8, kRemoteRead) == WindowStatus::NoRegion);  // a window is no region
    CHECK(b1(no_bind, kVa, 8, kRemoteRead) == WindowStatus::NoBindRight);
    CHECK(b1(f.region, kVa - 1, 8, kRemoteRead) == WindowStatus::OutOfBounds);
    CHECK(b1(f.region, kVa + kLen - 4, 8, kRemoteRead) == WindowStatus::OutOfBounds);
    CHECK(b1(f.region, kVa + kLen + 1, 0, kRemoteRead) == WindowStatus::OutOfBounds);
    CHECK(b1(read_only, kVa, 8, kRemoteWrite) == WindowStatus::RightsExceedRegion);
    CHECK(b1(read_only, kVa, 8, kRemoteAtomic) == WindowStatus::RightsExceedRegion);
    CHECK(b1(read_only, kVa, 8, kRemoteRead) == WindowStatus::Ok);  // rights the region itself lacks are fine
    // Nothing refused changed a window.
    CHECK_FALSE(t.window(f.w2)->bound);
    CHECK(t.window(f.w2)->key == f.w2);
    // A type 2 window is bound once until it is invalidated.
    REQUIRE(t.bind(bind_of(f.w2, k2, f.region, kVa, 8, kRemoteRead, kBindType2), kQp, kPd) == WindowStatus::Ok);
    CHECK(t.bind(bind_of(f.w2, next_key(k2), f.region, kVa, 8, kRemoteRead, kBindType2), kQp, kPd) ==
          WindowStatus::AlreadyBound);
    CHECK(t.check_remote(k2, kQp, kPd, kVa, 8, kRemoteRead) == Protection::Ok);
}

TEST_CASE("rebinding a type 1 window moves it and a bind to no region unbinds it", "[protection][unit][mw]") {
    Fixture f;
    const std::uint32_t k1 = next_key(f.w1), k2 = next_key(k1), k3 = next_key(k2);
    REQUIRE(f.t.bind(bind_of(f.w1, k1, f.region, kVa, 4096, kRemoteRead, kBindType1), kQp, kPd) == WindowStatus::Ok);
    REQUIRE(f.t.bind(bind_of(k1, k2, f.region, kVa + 8192, 4096, kRemoteWrite, kBindType1), kQp, kPd) == WindowStatus::Ok);
    CHECK(f.t.check_remote(k1, kQp, kPd, kVa, 8, kRemoteRead) == Protection::BadKey);
    CHECK(f.t.check_remote(k2, kQp, kPd, kVa, 8, kRemoteWrite) == Protection::OutOfBounds);
    CHECK(f.t.check_remote(k2, kQp, kPd, kVa + 8192, 8, kRemoteWrite) == Protection::Ok);
    CHECK(f.t.find(f.region)->windows == 1);
    REQUIRE(f.t.bind(bind_of(k2, k3, 0, 0, 0, 0, kBindType1), kQp, kPd) == WindowStatus::Ok);
    CHECK_FALSE(f.t.window(k3)->bound);
    CHECK(f.t.window(k3)->key == k3);
    CHECK(f.t.check_remote(k2, kQp, kPd, kVa + 8192, 8, kRemoteWrite) == Protection::BadKey);
    CHECK(f.t.check_remote(k3, kQp, kPd, kVa + 8192, 8, kRemoteWrite) == Protection::BadKey);
    CHECK(f.t.find(f.region)->windows == 0);
}

TEST_CASE("invalidation frees a type 2 window and refuses type 1 unbound stale and foreign qp keys",
          "[protection][unit][mw]") {
    Fixture f;
    const std::uint32_t k2 = next_key(f.w2);
    CHECK(f.t.invalidate(f.region, kQp, kPd) == WindowStatus::NoWindow);
    CHECK(f.t.invalidate(f.w1, kQp, kPd) == WindowStatus::WrongType);
    CHECK(f.t.invalidate(f.w2, kQp, kPd) == WindowStatus::NotBound);
    REQUIRE(f.t.bind(bind_of(f.w2, k2, f.region, kVa, 64, kRemoteRead, kBindType2), kQp, kPd) == WindowStatus::Ok);
    CHECK(f.t.invalidate(f.w2, kQp, kPd) == WindowStatus::NotBound);  // the key before the bind
    CHECK(f.t.invalidate(k2, kOtherQp, kPd) == WindowStatus::QpMismatch);
    CHECK(f.t.invalidate(k2, kQp, kPd + 1) == WindowStatus::PdMismatch);
    CHECK(f.t.check_remote(k2, kQp, kPd, kVa, 64, kRemoteRead) == Protection::Ok);
    REQUIRE(f.t.invalidate(k2, kQp, kPd) == WindowStatus::Ok);
    CHECK(f.t.check_remote(k2, kQp, kPd, kVa, 64, kRemoteRead) == Protection::BadKey);
    CHECK(f.t.invalidate(k2, kQp, kPd) == WindowStatus::NotBound);
    CHECK(f.t.find(f.region)->windows == 0);
    // Bound again, under a new key.
    CHECK(f.t.bind(bind_of(k2, next_key(k2), f.region, kVa, 64, kRemoteRead, kBindType2), kOtherQp, kPd) ==
          WindowStatus::Ok);
}

TEST_CASE("a region stays while windows are bound to it and goes once they are unbound or freed",
          "[protection][unit][mw]") {
    Fixture f;
    const std::uint32_t k1 = next_key(f.w1), k2 = next_key(f.w2);
    REQUIRE(f.t.bind(bind_of(f.w1, k1, f.region, kVa, 64, kRemoteRead, kBindType1), kQp, kPd) == WindowStatus::Ok);
    REQUIRE(f.t.bind(bind_of(f.w2, k2, f.region, kVa, 64, kRemoteRead, kBindType2), kQp, kPd) == WindowStatus::Ok);
    CHECK(f.t.find(f.region)->windows == 2);
    CHECK_FALSE(f.t.remove(f.region));
    CHECK_FALSE(f.t.remove(k1));  // a window is not removed as a region
    CHECK(f.t.remove_window(k1));  // bound: freed all the same
    CHECK(f.t.check_remote(k1, kQp, kPd, kVa, 8, kRemoteRead) == Protection::BadKey);
    CHECK_FALSE(f.t.remove(f.region));
    REQUIRE(f.t.invalidate(k2, kQp, kPd) == WindowStatus::Ok);
    CHECK(f.t.remove(f.region));
    CHECK(f.t.remove_window(f.w2));
    CHECK_FALSE(f.t.remove_window(f.w2));
    CHECK(f.t.size() == 0);
    // The slots are reused under new keys.
    const std::uint32_t again = f.t.add_window(kPd, MptKind::Window1);
    CHECK(again != 0);
    CHECK(f.t.check_remote(k1, kQp, kPd, kVa, 8, kRemoteRead) == Protection::BadKey);
}
