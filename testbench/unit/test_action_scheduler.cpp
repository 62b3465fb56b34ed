// The timed-action scheduler every block shares, and the rule that a host
// read does not see an adapter write of its own instant.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include <systemc>

#include "model/pcie/host_memory.hpp"
#include "model/sim/block.hpp"
#include "model/sim/simulation_start.hpp"
#include "testbench/system/isolated.hpp"

using hcasim::sim::Tick;

namespace {

struct TestBlock : hcasim::sim::Block {
    explicit TestBlock(const char* name) : Block(name, hcasim::sim::Clock("test", 1000)) {}
};

}  // namespace

TEST_CASE("actions of different blocks due at the same time run in the order they were scheduled, "
          "whatever else waits on the simulation's clock",
          "[sim][unit][isolated]") {
    // The same actions, once with no other process and once with a thread
    // whose timed waits land on the same instants: the order must not move.
    for (const bool disturbed : {false, true}) {
        INFO("with an unrelated timed thread: " << disturbed);
        const auto r = hcasim::testbench::run_isolated([disturbed](std::ostream& os) {
            auto* a = new TestBlock("a");
            auto* b = new TestBlock("b");
            auto* c = new TestBlock("c");
            std::string* order = new std::string;
            // Scheduled as c, a, b, a, c at 5 ns, then b at 5 ns from inside
            // an action (a chain) and a at 3 ns, which runs first.
            c->at(5000, [order] { *order += "c1 "; });
            a->at(5000, [order, b] {
                *order += "a1 ";
                b->at(5000, [order] { *order += "b3 "; });
            });
            b->at(5000, [order] { *order += "b1 "; });
            a->at(5000, [order] { *order += "a2 "; });
            c->at(5000, [order] { *order += "c2 "; });
            a->at(3000, [order] { *order += "a0 "; });
            if (disturbed) {
                sc_core::sc_spawn([] {
                    for (int i = 0; i < 10; ++i) sc_core::wait(sc_core::sc_time(1000, sc_core::SC_PS));
                });
            }
            hcasim::sim::start();
            os << *order;
        });
        INFO(r.error);
        REQUIRE(r.ok);
        CHECK(r.output == "a0 c1 a1 b1 a2 c2 b3 ");
    }
}

TEST_CASE("a host read does not see an adapter write made at its own instant, and sees it an instant later",
          "[sim][unit][isolated]") {
    const auto r = hcasim::testbench::run_isolated([](std::ostream& os) {
        auto* mem = new hcasim::pcie::HostMemory(90);
        auto* block = new TestBlock("adapter");
        static std::uint8_t buf[64];
        static std::uint8_t other[64];
        const std::uint64_t bus = mem->map(buf, sizeof buf);
        mem->map(other, sizeof other);
        block->at(2000, [mem, bus] {
            const std::uint8_t v = 7;
            mem->write(bus + 10, &v, 1);
        });
        sc_core::sc_spawn([mem, &os] {
            sc_core::wait(sc_core::sc_time(2000, sc_core::SC_PS));
            os << (buf[10] == 7) << mem->wrote_now() << mem->wrote_now(buf + 10, 1) << mem->wrote_now(buf + 11, 4)
               << mem->wrote_now(other, sizeof other) << " ";
            sc_core::wait(sc_core::sc_time(1, sc_core::SC_PS));
            os << mem->wrote_now() << mem->wrote_now(buf + 10, 1);
        });
        hcasim::sim::start();
    });
    INFO(r.error);
    REQUIRE(r.ok);
    // At 2 ns the byte is in memory but marked as written now (so a poll
    // does not believe it yet); 1 ps later it is plain memory.
    CHECK(r.output == "11100 00");
}
