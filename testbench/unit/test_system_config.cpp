// Configurations that pass every per-key range check but describe hardware
// that cannot work are refused when the system is built, naming the values.
#include <catch2/catch.hpp>

#include "model/sim/config.hpp"
#include "testbench/system/isolated.hpp"
#include "testbench/system/system.hpp"

using hcasim::sim::Config;
using hcasim::testbench::run_isolated;
using hcasim::testbench::System;

namespace {

// Builds a System in a child process; returns the error text, or "" if it built.
std::string build_error(const std::vector<std::pair<std::string, std::string>>& settings, int nodes = 2) {
    const auto r = run_isolated([&](std::ostream& os) {
        Config cfg;
        for (const auto& [k, v] : settings) cfg.set(k, v);
        try {
            System sys(cfg, nodes);
            os << "built";
        } catch (const hcasim::sim::ConfigError& e) {
            os << "config error: " << e.what();
        }
    });
    REQUIRE(r.ok);
    return r.output == "built" ? "" : r.output;
}

}  // namespace

TEST_CASE("a transmit buffer smaller than one packet of the port's MTU is refused naming both values") {
    const std::string e = build_error({{"hca.tx_buffer_bytes", "4096"}});
    CHECK(e.find("config error") == 0);
    CHECK(e.find("hca.tx_buffer_bytes=4096") != std::string::npos);
    CHECK(e.find("port.max_mtu=4096") != std::string::npos);
}

TEST_CASE("the same transmit buffer is accepted when the port's MTU is smaller") {
    CHECK(build_error({{"hca.tx_buffer_bytes", "4096"}, {"port.max_mtu", "2048"}}).empty());
}

TEST_CASE("three nodes back to back are refused and a switch is suggested") {
    const std::string e = build_error({}, 3);
    CHECK(e.find("fabric.topology=back_to_back") != std::string::npos);
    CHECK(e.find("fabric.topology=switch") != std::string::npos);
}

TEST_CASE("three nodes behind a switch build") { CHECK(build_error({{"fabric.topology", "switch"}}, 3).empty()); }
