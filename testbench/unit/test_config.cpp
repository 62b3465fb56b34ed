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

TEST_CASE("a node's own value of a per-node key reaches that node's configuration alone", "[config][unit]") {
    Config cfg;
    cfg.set("pcie.lanes", "16");
    cfg.set("node1.pcie.lanes", "4");
    cfg.set_assignment("node1.hca.qpc_cache_entries = 32");
    cfg.set("node3.host.cpu.post_send_ns", "90");
    CHECK(cfg.get_int("pcie.lanes") == 16);  // the class-wide value stays
    CHECK(cfg.highest_node() == 3);
    CHECK(cfg.any_node_sets("pcie.lanes"));
    CHECK_FALSE(cfg.any_node_sets("pcie.gen"));
    const Config n0 = cfg.for_node(0);
    const Config n1 = cfg.for_node(1);
    const Config n3 = cfg.for_node(3);
    CHECK(n0.get_int("pcie.lanes") == 16);
    CHECK(n0.get_int("hca.qpc_cache_entries") == cfg.get_int("hca.qpc_cache_entries"));
    CHECK(n1.get_int("pcie.lanes") == 4);
    CHECK(n1.get_int("hca.qpc_cache_entries") == 32);
    CHECK(n1.get_real("host.cpu.post_send_ns") == cfg.get_real("host.cpu.post_send_ns"));
    CHECK(n3.get_real("host.cpu.post_send_ns") == 90);
    CHECK(n3.get_int("pcie.lanes") == 16);
    // A node's configuration is whole: it names no node of its own.
    CHECK(n1.highest_node() == -1);
    // The last assignment wins, as for a class-wide key.
    cfg.set("node1.pcie.lanes", "2");
    CHECK(cfg.for_node(1).get_int("pcie.lanes") == 2);
    // Reports list the class-wide overrides, then each node's own values.
    const auto o = cfg.overrides();
    using KV = std::pair<std::string, std::string>;
    const std::vector<KV> tail(o.end() - 3, o.end());
    CHECK(tail == std::vector<KV>{{"node1.pcie.lanes", "2"}, {"node1.hca.qpc_cache_entries", "32"},
                                  {"node3.host.cpu.post_send_ns", "90"}});
}

TEST_CASE("an INI section nodeN.block sets that node's own values", "[config][unit]") {
    TempFile f("[pcie]\nlanes = 16\n[node0.pcie]\nlanes = 4\n[node1.hca]\ntx_engines = 2\n");
    Config cfg;
    cfg.load_file(f.path());
    CHECK(cfg.for_node(0).get_int("pcie.lanes") == 4);
    CHECK(cfg.for_node(1).get_int("pcie.lanes") == 16);
    CHECK(cfg.for_node(1).get_int("hca.tx_engines") == 2);
    CHECK(cfg.for_node(0).get_int("hca.tx_engines") == 1);
}

TEST_CASE("a node key that is malformed, not per node, out of range or unknown names itself", "[config][unit]") {
    Config cfg;
    // The value is checked against the key's own range, and the error names the node's key.
    const std::string bad = error_of([&] { cfg.set("node1.pcie.lanes", "3"); });
    CHECK(contains(bad, "node1.pcie.lanes"));
    CHECK(contains(bad, "1, 2, 4, 8, 16, 32"));
    // Fabric-wide keys and device limits take one value for every node.
    for (const char* key : {"node1.link.speed", "node0.fabric.nodes", "node1.hca.max_qp", "node1.port.max_mtu",
                            "node1.sim.seed", "node1.host.cpu.clock_read_ns", "node1.hca.dma.vcd"}) {
        const std::string e = error_of([&] { cfg.set(key, "1"); });
        INFO(key << ": " << e);
        CHECK(contains(e, key));
        CHECK(contains(e, "one value for every node"));
    }
    // A key that is no parameter, with or without a node.
    CHECK(contains(error_of([&] { cfg.set("node1.pcie.nosuch", "1"); }), "node1.pcie.nosuch"));
    CHECK(contains(error_of([&] { cfg.set("node1.pcie.nosuch", "1"); }), "is no parameter"));
    for (const char* key : {"node.pcie.lanes", "node01.pcie.lanes", "node1.", "node1", "nodeX.pcie.lanes",
                            "node-1.pcie.lanes"}) {
        const std::string e = error_of([&] { cfg.set(key, "4"); });
        INFO(key << ": " << e);
        CHECK(contains(e, "unknown configuration key"));
    }
    // More nodes than any fabric has.
    const std::string far = error_of([&] { cfg.set("node648.pcie.lanes", "4"); });
    CHECK(contains(far, "node648.pcie.lanes"));
    CHECK(contains(far, "648"));
    CHECK_NOTHROW(cfg.set("node647.pcie.lanes", "4"));
    // Nothing was set by the refused assignments.
    CHECK(cfg.highest_node() == 647);
    CHECK_FALSE(cfg.any_node_sets("link.speed"));
}

TEST_CASE("a node preset gives the node every per-node value of that preset, whatever the class-wide preset",
          "[config][unit][preset]") {
    const auto names = Config::preset_names();
    REQUIRE(names.size() >= 5);
    for (const auto& a : names)
        for (const auto& b : names) {
            INFO("--preset " << a << " --set node1.preset=" << b);
            Config cfg;
            cfg.load_preset(a);
            cfg.set("node1.preset", b);
            Config only_a;
            only_a.load_preset(a);
            Config only_b;
            only_b.load_preset(b);
            const Config n0 = cfg.for_node(0);
            const Config n1 = cfg.for_node(1);
            CHECK(cfg.node_preset(1) == b);
            CHECK(cfg.node_preset(0).empty());
            for (const auto& s : hcasim::sim::parameters().all()) {
                if (s.is_pattern()) continue;
                INFO(s.key);
                // Node 1 is an adapter of b, node 0 one of a; the fabric is a's.
                CHECK(n0.raw(s.key) == only_a.raw(s.key));
                CHECK(n1.raw(s.key) == (s.per_node ? only_b : only_a).raw(s.key));
            }
        }
}

TEST_CASE("a node preset shows what it changed and the fabric-wide keys it could not take", "[config][unit][preset]") {
    Config cfg;
    cfg.load_preset("cx3-fdr");
    cfg.set("host.cpu.post_send_ns", "90");  // set by neither preset: every node's
    cfg.set("node1.preset", "cx4-edr");
    const Config n1 = cfg.for_node(1);
    CHECK(n1.get_int("pcie.lanes") == 16);
    CHECK(n1.get_int("hca.qpc_cache_entries") == 256);
    CHECK(n1.get_int("hca.tx_packet_cycles") == 16);
    CHECK(n1.get_real("host.cpu.post_send_ns") == 90);
    CHECK(n1.get_choice("link.speed") == "fdr");
    CHECK(cfg.get_int("pcie.lanes") == 8);
    using KV = std::pair<std::string, std::string>;
    const auto o = cfg.overrides();
    auto has = [&](const KV& kv) { return std::find(o.begin(), o.end(), kv) != o.end(); };
    CHECK(has({"node1.preset", "cx4-edr; fabric-wide, so not taken: link.speed=edr"}));
    CHECK(has({"node1.pcie.lanes", "16"}));
    CHECK(has({"node1.hca.qpc_cache_entries", "256"}));
    // As the other nodes: not listed.
    for (const auto& [k, v] : o) CHECK(k != "node1.pcie.gen");
    // The last assignment wins: a node's own key after its preset, and a
    // later preset of the node, which replaces all the first one gave.
    cfg.set("node1.pcie.lanes", "4");
    CHECK(cfg.for_node(1).get_int("pcie.lanes") == 4);
    cfg.set("node1.hca.tx_engines", "2");
    cfg.set("node1.preset", "cx3-fdr");
    const Config again = cfg.for_node(1);
    CHECK(again.get_int("pcie.lanes") == 8);
    CHECK(again.get_int("hca.tx_engines") == 2);  // no preset sets it
    CHECK(again.get_int("hca.qpc_cache_entries") == 68);
    CHECK(again.get_int("hca.wqe_fetch_batch") == cfg.get_int("hca.wqe_fetch_batch"));
    CHECK_FALSE(again.get_bool("hca.blueflame_any_wqe"));
    const auto o2 = cfg.overrides();
    CHECK(std::find(o2.begin(), o2.end(), KV{"node1.preset", "cx3-fdr"}) != o2.end());
    CHECK(std::find(o2.begin(), o2.end(), KV{"node1.hca.tx_engines", "2"}) != o2.end());
    // The node is now as the others but for its own key.
    for (const auto& [k, v] : o2) CHECK((k.rfind("node1.", 0) != 0 || k == "node1.preset" || k == "node1.hca.tx_engines"));
}

TEST_CASE("a node preset comes from an INI section too, and a bad one names itself and changes nothing",
          "[config][unit][preset]") {
    TempFile ini("[node1]\npreset = cx4-edr\n");
    Config cfg;
    cfg.load_file(ini.path());
    CHECK(cfg.for_node(1).get_int("pcie.lanes") == 16);
    Config fresh;
    const std::string unknown = error_of([&] { fresh.set("node1.preset", "nosuch"); });
    CHECK(contains(unknown, "node1.preset"));
    CHECK(contains(unknown, "unknown preset 'nosuch'"));
    CHECK(contains(unknown, "cx4-edr"));
    CHECK(contains(error_of([&] { fresh.set("node648.preset", "cx4-edr"); }), "beyond any fabric"));
    // A preset file that sets another node's keys, or a bad value.
    TempFile other("[pcie]\nlanes = 4\n[node2.pcie]\nlanes = 4\n");
    const std::string e = error_of([&] { fresh.set("node1.preset", other.path()); });
    CHECK(contains(e, "node1.preset"));
    CHECK(contains(e, ":4:"));
    CHECK(contains(e, "node2.pcie.lanes"));
    TempFile bad("[pcie]\nlanes = 3\n");
    const std::string b = error_of([&] { fresh.set("node1.preset", bad.path()); });
    CHECK(contains(b, ":2:"));
    CHECK(contains(b, "pcie.lanes"));
    CHECK(fresh.highest_node() == -1);
    CHECK(fresh.overrides().empty());
}

TEST_CASE("every per-node key is one a node's blocks read, never a fabric or limit key", "[config][unit]") {
    for (const auto& s : hcasim::sim::parameters().all()) {
        INFO(s.key);
        const bool fabric = s.key.rfind("sim.", 0) == 0 || s.key.rfind("link.", 0) == 0 ||
                            s.key.rfind("fabric.", 0) == 0 || s.key.rfind("switch.", 0) == 0 ||
                            s.key.rfind("sm.", 0) == 0 || s.key.rfind("fault.", 0) == 0 ||
                            s.key.rfind("ipoib.", 0) == 0 || s.key.rfind("hca.max_", 0) == 0;
        if (fabric) CHECK_FALSE(s.per_node);
        if (s.key.rfind("pcie.", 0) == 0 || s.key.rfind("pci.", 0) == 0 || s.key.rfind("host.cpu.post", 0) == 0)
            CHECK(s.per_node);
    }
}
