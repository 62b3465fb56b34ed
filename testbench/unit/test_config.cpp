// Unit tests for the configuration parameters (model/sim/config.hpp) and for
// how the hcasim command reports a bad parameter: every error names the key
// and what it accepts, and nothing runs.
#include <catch2/catch.hpp>

#include "model/sim/assert.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "model/sim/config.hpp"

using hcasim::sim::Config;
using hcasim::sim::ConfigError;
using hcasim::sim::ParamSpec;

namespace {

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

// A file under /tmp that is removed when the test ends.
class TempFile {
public:
    explicit TempFile(const std::string& contents, const std::string& suffix = ".ini") {
        char name[] = "/tmp/hcasim_test_XXXXXX";
        const int fd = mkstemp(name);
        REQUIRE(fd >= 0);
        close(fd);
        std::remove(name);
        m_path = std::string(name) + suffix;
        std::ofstream(m_path) << contents;
    }
    ~TempFile() { std::remove(m_path.c_str()); }
    const std::string& path() const { return m_path; }

private:
    std::string m_path;
};

struct CommandResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

CommandResult run_hcasim(const std::string& args) {
    TempFile out("", ".out"), err("", ".err");
    const std::string cmd = std::string("'") + HCASIM_BINARY + "' " + args + " >'" + out.path() + "' 2>'" +
                            err.path() + "'";
    const int status = std::system(cmd.c_str());
    CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out.path());
    r.err = slurp(err.path());
    return r;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("every declared parameter has a unique key and a default its own checks accept", "[config][unit]") {
    const auto& all = hcasim::sim::parameters().all();
    REQUIRE(all.size() > 20);
    std::set<std::string> keys;
    Config cfg;
    for (const ParamSpec& s : all) {
        INFO(s.key);
        CHECK(keys.insert(s.key).second);
        CHECK(s.key.find('.') != std::string::npos);
        CHECK_FALSE(s.doc.empty());
        // A family is set through one of its keys.
        std::string key = s.key;
        if (s.is_pattern()) key.replace(key.find('*'), 1, "node0.port");
        CHECK(hcasim::sim::parameters().find(key) == &s);
        CHECK_NOTHROW(cfg.set(key, s.default_value));
        CHECK(cfg.raw(key) == s.default_value);
    }
    CHECK(cfg.overrides().empty());
}

TEST_CASE("every block's parameters are in the registry in the order of the layers", "[config][unit]") {
    const auto& all = hcasim::sim::parameters().all();
    auto position = [&](const std::string& key) {
        const auto it = std::find_if(all.begin(), all.end(), [&](const ParamSpec& s) { return s.key == key; });
        INFO(key);
        REQUIRE(it != all.end());
        return it - all.begin();
    };
    // One key of each block's declarations, in the order of their ranks: sim,
    // then the model (PCIe, adapter, port, link, switch), firmware (commands,
    // CM agent), host.
    const std::vector<std::string> keys = {
        "sim.seed",         "pcie.lanes",            "hca.core_clock_mhz",  "port.max_mtu",          "link.cable_m",
        "switch.clock_mhz", "fw.command_latency_us", "fw.cm_processing_us", "host.poll_fast_forward",
    };
    for (std::size_t i = 1; i < keys.size(); ++i) {
        INFO(keys[i - 1] << " before " << keys[i]);
        CHECK(position(keys[i - 1]) < position(keys[i]));
    }
    CHECK(all.front().key == "sim.seed");
}

TEST_CASE("setting an unknown key is an error that names the key", "[config][unit]") {
    Config cfg;
    const std::string e = error_of([&] { cfg.set("nosuch.key", "1"); });
    CHECK(contains(e, "nosuch.key"));
    CHECK(contains(e, "unknown"));
    CHECK(contains(error_of([&] { cfg.set_assignment("pcie.lane=8"); }), "pcie.lane"));
    CHECK(contains(error_of([&] { cfg.get_int("nosuch.other"); }), "nosuch.other"));
    // A misspelt key never changes a real one.
    CHECK(cfg.get_int("pcie.lanes") == 8);
}

TEST_CASE("a malformed integer names the key and the allowed values", "[config][unit]") {
    Config cfg;
    for (const char* bad : {"abc", "", "8.0", "8x", " ", "1e3", "--8"}) {
        INFO("value '" << bad << "'");
        const std::string e = error_of([&] { cfg.set("pcie.read_tags", bad); });
        CHECK(contains(e, "pcie.read_tags"));
        CHECK(contains(e, "1 to 256"));
    }
    CHECK(cfg.get_int("pcie.read_tags") == 32);
}

TEST_CASE("an out-of-range integer names the key and the range", "[config][unit]") {
    Config cfg;
    const std::string low = error_of([&] { cfg.set("pcie.read_tags", "0"); });
    CHECK(contains(low, "pcie.read_tags"));
    CHECK(contains(low, "an integer from 1 to 256"));
    const std::string high = error_of([&] { cfg.set("pcie.read_tags", "257"); });
    CHECK(contains(high, "pcie.read_tags"));
    CHECK(contains(high, "1 to 256"));
    CHECK(contains(error_of([&] { cfg.set("pcie.read_tags", "-5"); }), "pcie.read_tags"));
    CHECK(contains(error_of([&] { cfg.set("pcie.read_tags", "99999999999999999999999"); }), "pcie.read_tags"));
    // The bounds themselves are allowed.
    CHECK_NOTHROW(cfg.set("pcie.read_tags", "1"));
    CHECK_NOTHROW(cfg.set("pcie.read_tags", "256"));
    CHECK(cfg.get_int("pcie.read_tags") == 256);
}

TEST_CASE("an integer parameter with a list of values accepts only those values", "[config][unit]") {
    Config cfg;
    const std::string e = error_of([&] { cfg.set("pcie.lanes", "7"); });
    CHECK(contains(e, "pcie.lanes"));
    CHECK(contains(e, "one of 1, 2, 4, 8, 16, 32"));
    CHECK(contains(error_of([&] { cfg.set("pcie.lanes", "64"); }), "pcie.lanes"));
    CHECK(contains(error_of([&] { cfg.set("pcie.mps", "300"); }), "128, 256, 512"));
    for (const char* ok : {"1", "2", "4", "8", "16", "32"}) {
        CHECK_NOTHROW(cfg.set("pcie.lanes", ok));
        CHECK(cfg.get_int("pcie.lanes") == std::stoll(ok));
    }
    CHECK_NOTHROW(cfg.set("pcie.lanes", " 16 "));  // surrounding blanks are trimmed
    CHECK(cfg.get_int("pcie.lanes") == 16);
}

TEST_CASE("a choice parameter names the key and every choice when given another word", "[config][unit]") {
    Config cfg;
    const std::string e = error_of([&] { cfg.set("link.speed", "hdr"); });
    CHECK(contains(e, "link.speed"));
    CHECK(contains(e, "hdr"));
    CHECK(contains(e, "sdr, ddr, qdr, fdr10, fdr, edr"));
    CHECK(contains(error_of([&] { cfg.set("link.speed", "FDR"); }), "link.speed"));  // case matters
    CHECK_NOTHROW(cfg.set("link.speed", "qdr"));
    CHECK(cfg.get_choice("link.speed") == "qdr");
    CHECK(contains(error_of([&] { cfg.set("fabric.topology", "ring"); }), "back_to_back, switch"));
}

TEST_CASE("real and boolean parameters name the key and the allowed range when malformed", "[config][unit]") {
    Config cfg;
    const std::string low = error_of([&] { cfg.set("hca.core_clock_mhz", "10"); });
    CHECK(contains(low, "hca.core_clock_mhz"));
    CHECK(contains(low, "50 to 5000"));
    CHECK(contains(error_of([&] { cfg.set("hca.core_clock_mhz", "fast"); }), "hca.core_clock_mhz"));
    CHECK(contains(error_of([&] { cfg.set("hca.core_clock_mhz", "nan"); }), "hca.core_clock_mhz"));
    CHECK(contains(error_of([&] { cfg.set("hca.core_clock_mhz", "inf"); }), "hca.core_clock_mhz"));
    CHECK_NOTHROW(cfg.set("hca.core_clock_mhz", "812.5"));
    CHECK(cfg.get_real("hca.core_clock_mhz") == Approx(812.5));
    const std::string b = error_of([&] { cfg.set("hca.blueflame", "maybe"); });
    CHECK(contains(b, "hca.blueflame"));
    CHECK(contains(b, "true or false"));
    for (const char* yes : {"true", "1", "yes", "on"}) {
        cfg.set("hca.blueflame", "false");
        cfg.set("hca.blueflame", yes);
        CHECK(cfg.get_bool("hca.blueflame"));
    }
    for (const char* no : {"false", "0", "no", "off"}) {
        cfg.set("hca.blueflame", "true");
        cfg.set("hca.blueflame", no);
        CHECK_FALSE(cfg.get_bool("hca.blueflame"));
    }
}

TEST_CASE("reading a parameter as the wrong type is an error that names the key", "[config][unit]") {
    Config cfg;
    CHECK(contains(error_of([&] { cfg.get_bool("pcie.lanes"); }), "pcie.lanes"));
    CHECK(contains(error_of([&] { cfg.get_choice("pcie.lanes"); }), "pcie.lanes"));
    CHECK(contains(error_of([&] { cfg.get_int("link.speed"); }), "link.speed"));
    CHECK(contains(error_of([&] { cfg.get_real("link.speed"); }), "link.speed"));
    // An integer reads as a real.
    CHECK(cfg.get_real("pcie.lanes") == Approx(8));
}

TEST_CASE("set_assignment needs key=value and overrides lists the changed keys in order", "[config][unit]") {
    Config cfg;
    CHECK(contains(error_of([&] { cfg.set_assignment("pcie.lanes"); }), "key=value"));
    cfg.set_assignment("pcie.lanes=16");
    cfg.set_assignment("link.speed = edr");
    cfg.set_assignment("pcie.gen=3");  // the default: not an override
    const auto o = cfg.overrides();
    REQUIRE(o.size() == 2);
    std::set<std::string> keys{o[0].first, o[1].first};
    CHECK(keys == std::set<std::string>{"pcie.lanes", "link.speed"});
}

TEST_CASE("load_file applies an INI file and an unknown key in it names the file and the key", "[config][unit]") {
    SECTION("a good file") {
        TempFile f("# comment\n[pcie]\nlanes = 16\nmps = 512 # trailing comment\n\n[link]\nspeed = qdr\n");
        Config cfg;
        REQUIRE_NOTHROW(cfg.load_file(f.path()));
        CHECK(cfg.get_int("pcie.lanes") == 16);
        CHECK(cfg.get_int("pcie.mps") == 512);
        CHECK(cfg.get_choice("link.speed") == "qdr");
    }
    SECTION("an unknown key") {
        TempFile f("[pcie]\nlanes = 8\nbogus = 3\n");
        Config cfg;
        const std::string e = error_of([&] { cfg.load_file(f.path()); });
        CHECK(contains(e, f.path()));
        CHECK(contains(e, "pcie.bogus"));
    }
    SECTION("a value out of range") {
        TempFile f("[pcie]\nlanes = 7\n");
        Config cfg;
        const std::string e = error_of([&] { cfg.load_file(f.path()); });
        CHECK(contains(e, f.path()));
        CHECK(contains(e, "pcie.lanes"));
        CHECK(contains(e, "one of 1, 2, 4, 8, 16, 32"));
    }
    SECTION("a file that does not exist") {
        Config cfg;
        const std::string e = error_of([&] { cfg.load_file("/nonexistent/hcasim.ini"); });
        CHECK(contains(e, "/nonexistent/hcasim.ini"));
    }
}

TEST_CASE("load_file treats a line starting with a semicolon as a comment", "[config][unit]") {
    // config.hpp: "'#' and ';' start comments".
    TempFile f("; the device under test\n[pcie]\n; wider link\nlanes = 16\n");
    Config cfg;
    CHECK(error_of([&] { cfg.load_file(f.path()); }) == "");
    CHECK(cfg.get_int("pcie.lanes") == 16);
}

TEST_CASE("the presets load and an unknown preset lists the known ones", "[config][unit]") {
    const auto names = Config::preset_names();
    CHECK(std::find(names.begin(), names.end(), "cx3-fdr") != names.end());
    for (const auto& n : names) {
        Config cfg;
        INFO(n);
        CHECK_NOTHROW(cfg.load_preset(n));
    }
    Config cfg;
    const std::string e = error_of([&] { cfg.load_preset("nosuch-preset"); });
    CHECK(contains(e, "nosuch-preset"));
    CHECK(contains(e, "cx3-fdr"));
}

TEST_CASE("hcasim exits non-zero naming the key for an invalid value and runs nothing", "[config][cli]") {
    for (const char* cmd : {"", "lat", "bw", "run"}) {
        INFO("hcasim " << cmd);
        const CommandResult r = run_hcasim(std::string(cmd) + " --set pcie.lanes=7");
        CHECK(r.exit_code != 0);
        CHECK(contains(r.err, "pcie.lanes"));
        CHECK(contains(r.err, "1, 2, 4, 8, 16, 32"));
        CHECK(r.out.empty());  // no banner, no table
    }
}

TEST_CASE("hcasim exits non-zero naming the key for an unknown key and runs nothing", "[config][cli]") {
    for (const char* cmd : {"", "lat", "bw"}) {
        INFO("hcasim " << cmd);
        const CommandResult r = run_hcasim(std::string(cmd) + " --set nosuch.key=1");
        CHECK(r.exit_code != 0);
        CHECK(contains(r.err, "nosuch.key"));
        CHECK(r.out.empty());
    }
    TempFile f("[pcie]\nbogus = 1\n");
    const CommandResult r = run_hcasim("lat --sizes 2 --iters 5 -c '" + f.path() + "'");
    CHECK(r.exit_code != 0);
    CHECK(contains(r.err, f.path()));
    CHECK(contains(r.err, "pcie.bogus"));
    CHECK(r.out.empty());
}

TEST_CASE("HCASIM_ASSERT throws naming the invariant in the sanitizer build and is not evaluated elsewhere",
          "[sim][unit]") {
#if defined(HCASIM_CHECK_INVARIANTS)
    CHECK_NOTHROW(HCASIM_ASSERT(1 + 1 == 2));
    CHECK_THROWS_WITH(HCASIM_ASSERT(1 + 1 == 3), Catch::Contains("1 + 1 == 3"));
#else
    int evaluated = 0;
    HCASIM_ASSERT(++evaluated == 1);
    CHECK(evaluated == 0);
#endif
}

TEST_CASE("a parameter family takes any key of its shape, keeps its range and lists its assignments in the overrides",
          "[config][unit]") {
    Config cfg;
    CHECK(cfg.get_real("fault.node1.port.drop") == 0);
    CHECK_FALSE(cfg.has("fault.node1.port.drop"));
    cfg.set("fault.node1.port.drop", "0.25");
    CHECK(cfg.has("fault.node1.port.drop"));
    CHECK(cfg.get_real("fault.node1.port.drop") == 0.25);
    CHECK_THROWS_WITH(cfg.set("fault.node1.port.drop", "2"), Catch::Contains("fault.node1.port.drop"));
    CHECK_THROWS_WITH(cfg.set("fault..drop", "0.1"), Catch::Contains("fault..drop"));
    CHECK_THROWS_WITH(cfg.set("fault.*.drop", "0.1"), Catch::Contains("fault.*.drop"));
    const auto o = cfg.overrides();
    CHECK(std::find(o.begin(), o.end(), std::make_pair(std::string("fault.node1.port.drop"), std::string("0.25"))) !=
          o.end());
}

TEST_CASE("a list parameter collects one entry per assignment", "[config][unit]") {
    Config cfg;
    cfg.set("fault.link_down", "node0.port@1us+2us");
    cfg.set("fault.link_down", "node1.port@5us+1us");
    CHECK(cfg.get_text("fault.link_down") == "node0.port@1us+2us,node1.port@5us+1us");
}
