// --trace: the Perfetto / Chrome trace-event file every workload can write,
// and the golden traces of traces/ that any timing change shows up in.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "testbench/integration/harness.hpp"

using namespace hcasim::test;

namespace {

std::string temp_path(const std::string& name) {
    return "/tmp/hcasim_trace_" + std::to_string(getpid()) + "_" + name;
}

struct Scenario {
    std::string name, args;
};

std::vector<Scenario> scenarios() {
    std::vector<Scenario> v;
    std::ifstream in(std::string(HCASIM_SOURCE_DIR) + "/traces/scenarios.txt");
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const auto bar = line.find('|');
        if (bar == std::string::npos) continue;
        auto trim = [](std::string s) {
            s.erase(0, s.find_first_not_of(' '));
            s.erase(s.find_last_not_of(' ') + 1);
            return s;
        };
        v.push_back({trim(line.substr(0, bar)), trim(line.substr(bar + 1))});
    }
    return v;
}

nlohmann::json trace_of(const std::string& args, const std::string& name) {
    const std::string path = temp_path(name + ".json");
    const CommandResult r = run_hcasim(args + " --trace " + path);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(read_file(path));
    std::remove(path.c_str());
    return j;
}

}  // namespace

TEST_CASE("the golden traces still match the model", "[trace]") {
    const auto all = scenarios();
    REQUIRE(all.size() >= 4);
    for (const Scenario& s : all) {
        INFO("scenario " << s.name << ": if the change is intended, run testbench/scripts/update_golden_traces.sh");
        const std::string path = temp_path(s.name + ".log");
        const CommandResult r = run_hcasim(s.args + " --trace " + path);
        REQUIRE(r.exit_code == 0);
        const std::string got = read_file(path);
        std::remove(path.c_str());
        const std::string want = read_file(std::string(HCASIM_SOURCE_DIR) + "/traces/" + s.name + ".log");
        REQUIRE(!want.empty());
        if (got != want) {
            std::istringstream a(got), b(want);
            std::string la, lb;
            int line = 1;
            while (std::getline(a, la) && std::getline(b, lb) && la == lb) ++line;
            FAIL("first difference at line " << line << ":\n  now:    " << la << "\n  golden: " << lb);
        }
    }
}

TEST_CASE("the retransmission golden trace shows packets sent again", "[trace]") {
    const std::string log = read_file(std::string(HCASIM_SOURCE_DIR) + "/traces/retransmission.log");
    std::map<std::string, int> sent;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);)
        if (line.find("RDMA_WRITE") != std::string::npos) ++sent[line.substr(line.find("psn="))];
    int again = 0;
    for (const auto& [psn, n] : sent) again += n > 1;
    CHECK(again > 0);
}

TEST_CASE("a trace file is valid trace-event json: tracks, slices and a flow per work request", "[trace]") {
    const nlohmann::json j = trace_of("lat --op write --sizes 64 -n 4", "valid");
    REQUIRE(j.contains("traceEvents"));
    const auto& ev = j["traceEvents"];
    REQUIRE(ev.is_array());
    std::set<std::pair<int, int>> named;
    std::set<std::string> names;
    std::map<std::uint64_t, int> flows;  // id -> open
    int slices = 0, finished = 0;
    for (const auto& e : ev) {
        const std::string ph = e.at("ph");
        if (ph == "M") {
            if (e.at("name") == "thread_name") named.insert({e.at("pid").get<int>(), e.at("tid").get<int>()});
            continue;
        }
        const std::pair<int, int> track{e.at("pid").get<int>(), e.at("tid").get<int>()};
        CHECK(named.count(track) == 1);  // named before use
        CHECK(e.at("ts").get<double>() >= 0);
        if (ph == "X") {
            ++slices;
            CHECK(e.at("dur").get<double>() >= 0);
            names.insert(e.at("name").get<std::string>());
        } else if (ph == "s") {
            CHECK(flows[e.at("id").get<std::uint64_t>()]++ == 0);
        } else if (ph == "t") {
            CHECK(flows[e.at("id").get<std::uint64_t>()] == 1);
        } else if (ph == "f") {
            CHECK(flows[e.at("id").get<std::uint64_t>()]-- == 1);
            ++finished;
        } else {
            FAIL("unexpected phase " << ph);
        }
    }
    CHECK(slices > 20);
    CHECK(finished > 0);  // signaled work requests complete
    for (const char* n : {"post_send WQE", "BlueFlame", "RC_RDMA_WRITE_ONLY", "RC_ACKNOWLEDGE", "posted write",
                          "receive", "send CQE", "poll_cq"})
        CHECK(names.count(n) == 1);
}

TEST_CASE("a trace window and a block filter keep only what they name", "[trace]") {
    const nlohmann::json all = trace_of("bw --sizes 4096 -n 32", "all");
    const nlohmann::json some = trace_of("bw --sizes 4096 -n 32 --trace-window 90:95 --trace-blocks port,pcie", "some");
    std::map<std::pair<int, int>, std::string> track;
    int kept = 0;
    for (const auto& e : some["traceEvents"]) {
        if (e["ph"] == "M" && e["name"] == "thread_name")
            track[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
        if (e["ph"] != "X") continue;
        ++kept;
        const double ts = e["ts"], dur = e["dur"];
        CHECK(ts + dur >= 90.0);
        CHECK(ts <= 95.0);
        const std::string t = track[{e["pid"].get<int>(), e["tid"].get<int>()}];
        CHECK((t.find("port") != std::string::npos || t.find("pcie") != std::string::npos));
    }
    int total = 0;
    for (const auto& e : all["traceEvents"]) total += e["ph"] == "X";
    CHECK(kept > 0);
    CHECK(kept < total / 4);
}

TEST_CASE("a trace that holds no slice says why, and the run's figures still print", "[trace]") {
    const std::string path = temp_path("empty.json");
    const CommandResult plain = run_hcasim("lat --sizes 64 -n 20");
    REQUIRE(plain.exit_code == 0);
    // A window before the first slice: the warning names the window and
    // where the run's slices lie, so the window can be moved onto them.
    CommandResult r = run_hcasim("lat --sizes 64 -n 20 --trace " + path + " --trace-window 0:20", true);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find(plain.out) != std::string::npos);
    CHECK(r.out.find("warning: --trace " + path + " holds no slice: no slice overlaps --trace-window 0:20") !=
          std::string::npos);
    CHECK(r.out.find("the run's slices span ") != std::string::npos);
    CHECK(nlohmann::json::parse(read_file(path))["traceEvents"].empty());
    // A filter no track matches: the warning names some of the tracks.
    r = run_hcasim("lat --sizes 64 -n 20 --trace " + path + " --trace-blocks nosuchblock", true);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("no track's name contains a word of --trace-blocks") != std::string::npos);
    CHECK(r.out.find("node0.hca.") != std::string::npos);
    // The default scenario warns for each of its two files.
    const std::string stem = temp_path("empty_run");
    r = run_hcasim("run --sizes 64 -n 4 --trace " + stem + ".log --trace-window 0:1", true);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("--trace " + stem + ".lat.log holds no slice") != std::string::npos);
    CHECK(r.out.find("--trace " + stem + ".bw.log holds no slice") != std::string::npos);
    // A window with slices in it says nothing.
    r = run_hcasim("lat --sizes 64 -n 20 --trace " + path + " --trace-window 80:", true);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("warning") == std::string::npos);
    for (const std::string& f : {path, stem + ".lat.log", stem + ".bw.log"}) std::remove(f.c_str());
}

TEST_CASE("a traced run prints the same figures and the same trace every time", "[trace]") {
    const std::string a = temp_path("a.json"), b = temp_path("b.json");
    const CommandResult plain = run_hcasim("lat --op send --sizes 64,4096 -n 20");
    const CommandResult ra = run_hcasim("lat --op send --sizes 64,4096 -n 20 --trace " + a);
    const CommandResult rb = run_hcasim("lat --op send --sizes 64,4096 -n 20 --trace " + b);
    REQUIRE(plain.exit_code == 0);
    REQUIRE(ra.exit_code == 0);
    CHECK(ra.out == plain.out);
    CHECK(rb.out == plain.out);
    const std::string ta = read_file(a), tb = read_file(b);
    CHECK(!ta.empty());
    CHECK(ta == tb);
    std::remove(a.c_str());
    std::remove(b.c_str());
}

TEST_CASE("the default scenario writes a trace per simulation", "[trace]") {
    const std::string stem = temp_path("default");
    const CommandResult r = run_hcasim("run --sizes 64 -n 4 --trace " + stem + ".json");
    REQUIRE(r.exit_code == 0);
    for (const char* part : {".lat.json", ".bw.json"}) {
        const std::string text = read_file(stem + part);
        INFO(part);
        CHECK(nlohmann::json::parse(text)["traceEvents"].size() > 10);
        std::remove((stem + part).c_str());
    }
}

TEST_CASE("each host program thread of a node has a track of its own", "[trace][msgrate]") {
    const std::string path = temp_path("threads.json");
    const CommandResult r = run_hcasim("msgrate --threads 3 --qps 1 -n 16 --trace " + path);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(read_file(path));
    std::remove(path.c_str());
    // Which track each thread's posts landed on.
    std::map<int, std::string> names;
    std::map<int, int> posts;
    for (const auto& e : j["traceEvents"]) {
        if (e.value("pid", -1) != 0) continue;
        if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name")
            names[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
        if (e.value("ph", "") == "X" && e.value("name", "") == "post_send WQE") ++posts[e["tid"].get<int>()];
    }
    std::set<std::string> posting;
    for (const auto& [tid, n] : posts) {
        CHECK(n == 16);
        posting.insert(names[tid]);
    }
    CHECK(posting == std::set<std::string>{"node0.host", "node0.host1", "node0.host2"});
}

TEST_CASE("bad trace options are refused by name", "[trace]") {
    auto err = [](const std::string& args) { return run_hcasim(args, true); };
    CommandResult r = err("lat --sizes 64 -n 2 --trace /tmp/x.txt");
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("invalid --trace /tmp/x.txt") != std::string::npos);
    r = err("lat --sizes 64 -n 2 --trace /nonexistent/dir/t.json");
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("cannot write --trace /nonexistent/dir/t.json") != std::string::npos);
    r = err("lat --sizes 64 -n 2 --trace /tmp/hcasim_t.json --trace-window 5");
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("invalid --trace-window 5") != std::string::npos);
    r = err("lat --sizes 64 -n 2 --trace /tmp/hcasim_t.json --trace-window 9:x");
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("x is not a time") != std::string::npos);
    r = err("lat --sizes 64 -n 2 --trace /tmp/hcasim_t.json --trace-window 9:3");
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("ends before it starts") != std::string::npos);
    r = err("lat --sizes 64 -n 2 --trace-window 1:2");
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("need --trace FILE") != std::string::npos);
    r = err("lat --sizes 64 -n 2 --trace /tmp/hcasim_t.json --trace-blocks port,,pcie");
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("invalid --trace-blocks") != std::string::npos);
    r = err("bench --trace /tmp/hcasim_t.json");
    CHECK(r.exit_code == 2);
    std::remove("/tmp/hcasim_t.json");
}
