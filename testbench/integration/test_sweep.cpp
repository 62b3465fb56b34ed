// hcasim sweep and hcasim plot, run as commands: the table a sweep writes,
// that it is the same bytes however the points are spread (--jobs, MPI
// ranks), its errors, its progress line, and the figures plot draws.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testbench/integration/harness.hpp"

using namespace hcasim::test;

namespace {

// A fresh folder for a test's files, removed with everything in it.
struct TempDir {
    std::string path;
    TempDir() {
        char name[] = "/tmp/hcasim-sweep-XXXXXX";
        REQUIRE(mkdtemp(name) != nullptr);
        path = name;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string operator/(const std::string& name) const { return path + "/" + name; }
};


void write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

// A shell command's standard output and error together, and its exit status.
CommandResult run_shell(const std::string& cmd) { return run_command(cmd + " 2>&1"); }

bool have_program(const std::string& name) { return run_shell("command -v " + name + " >/dev/null").exit_code == 0; }

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> v;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) v.push_back(line);
    return v;
}

std::vector<std::string> fields_of(const std::string& line) {
    std::vector<std::string> v;
    std::istringstream in(line);
    for (std::string f; std::getline(in, f, ',');) v.push_back(f);
    return v;
}

// Two lane counts by two link speeds, bw at two sizes: 4 points of 2 rows.
const std::string kParams = "--param pcie.lanes=4,16 --param link.speed=qdr,fdr";
const std::string kWorkload = "bw --sizes 64,65536 -n 20";

std::string sweep(const std::string& options) { return "sweep " + kParams + " " + options + " -- " + kWorkload; }

}  // namespace

TEST_CASE("a 2x2 sweep of bw writes a row per point and size with a column per parameter", "[sweep]") {
    TempDir dir;
    const CommandResult r = run_hcasim(sweep("--out " + dir / "bw.csv"), true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const auto lines = lines_of(read_file(dir / "bw.csv"));
    REQUIRE(lines.size() == 1 + 4 * 2);
    // The parameters, then the workload's own CSV columns.
    const CommandResult csv = run_hcasim(kWorkload + " --format csv");
    REQUIRE(csv.exit_code == 0);
    CHECK(lines[0] == "pcie.lanes,link.speed," + lines_of(csv.out).at(0));
    // Points in --param order, the first parameter varying slowest.
    const std::vector<std::string> points{"4,qdr,", "4,fdr,", "16,qdr,", "16,fdr,"};
    for (std::size_t i = 0; i < 8; ++i) {
        INFO("row " << i << ": " << lines[1 + i]);
        CHECK(lines[1 + i].rfind(points[i / 2] + (i % 2 ? "65536," : "64,"), 0) == 0);
        CHECK(fields_of(lines[1 + i]).size() == 7);
    }
    // 64 KiB writes are bounded by PCIe at 4 lanes and by the link at 16.
    auto bw_avg = [&](std::size_t row) { return std::stod(fields_of(lines[1 + row]).at(5)); };
    CHECK(bw_avg(3) < bw_avg(7) * 0.75);  // x4 against x16, FDR
    CHECK(bw_avg(5) < bw_avg(7) * 0.9);   // QDR against FDR, x16
    // A row holds what that point's own run prints.
    const CommandResult one = run_hcasim(kWorkload + " --set pcie.lanes=16 --set link.speed=fdr --format json");
    REQUIRE(one.exit_code == 0);
    const auto j = nlohmann::json::parse(one.out);
    CHECK(fields_of(lines[8]).at(5) == j["rows"][1]["bw_avg_MBps"].dump());
}

TEST_CASE("a sweep writes the same bytes every time, with one or two points at once", "[sweep]") {
    TempDir dir;
    for (const char* run : {"a", "b"})
        REQUIRE(run_hcasim(sweep("--jobs 2 --out " + dir / (std::string(run) + ".csv"))).exit_code == 0);
    REQUIRE(run_hcasim(sweep("--jobs 1 --out " + dir / "one.csv")).exit_code == 0);
    const std::string a = read_file(dir / "a.csv");
    CHECK(a.size() > 100);
    CHECK(read_file(dir / "b.csv") == a);
    CHECK(read_file(dir / "one.csv") == a);
    // Without --out the same CSV goes to standard output.
    const CommandResult out = run_hcasim(sweep("--jobs 2"));
    REQUIRE(out.exit_code == 0);
    CHECK(out.out == a);
}

TEST_CASE("a sweep's JSON table holds the same rows as its CSV, keyed by column", "[sweep]") {
    TempDir dir;
    REQUIRE(run_hcasim(sweep("--out " + dir / "t.csv")).exit_code == 0);
    REQUIRE(run_hcasim(sweep("--out " + dir / "t.json")).exit_code == 0);
    const auto csv = lines_of(read_file(dir / "t.csv"));
    const auto j = nlohmann::json::parse(read_file(dir / "t.json"));
    CHECK(j["kind"] == "bandwidth");
    CHECK(j["workload"] == nlohmann::json({"bw", "--sizes", "64,65536", "-n", "20"}));
    CHECK(j["parameters"][0]["key"] == "pcie.lanes");
    CHECK(j["parameters"][1]["values"] == nlohmann::json({"qdr", "fdr"}));
    const auto columns = fields_of(csv[0]);
    REQUIRE(j["columns"].get<std::vector<std::string>>() == columns);
    REQUIRE(j["rows"].size() == csv.size() - 1);
    for (std::size_t i = 0; i < j["rows"].size(); ++i) {
        const auto fields = fields_of(csv[1 + i]);
        for (std::size_t c = 0; c < columns.size(); ++c) {
            const auto& v = j["rows"][i][columns[c]];
            CHECK((v.is_string() ? v.get<std::string>() : v.dump()) == fields[c]);
        }
    }
}

TEST_CASE("a msgrate sweep has a row per QP and the total, and no wall-clock figures", "[sweep]") {
    TempDir dir;
    const CommandResult r =
        run_hcasim("sweep --param hca.wqe_fetch_batch=1,8 --out " + dir / "m.json" + " -- msgrate --qps 2 -n 32", true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const std::string text = read_file(dir / "m.json");
    CHECK(text.find("wall") == std::string::npos);
    const auto j = nlohmann::json::parse(text);
    CHECK(j["columns"] == nlohmann::json({"hca.wqe_fetch_batch", "qp", "messages", "msg_rate_Mpps"}));
    REQUIRE(j["rows"].size() == 6);
    CHECK(j["rows"][2]["qp"] == "total");
    CHECK(j["rows"][5]["hca.wqe_fetch_batch"] == "8");
}

TEST_CASE("a sweep varies a workload option: the QP count of msgrate, drawn as rate against QPs", "[sweep][plot]") {
    TempDir dir;
    const CommandResult r = run_hcasim("sweep --param qps=16,32 --param hca.qpc_cache_entries=16,256 --out " +
                                           dir / "q.csv" + " -- msgrate --post-list 1 --tx-depth 1 -n 20",
                                       true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const auto lines = lines_of(read_file(dir / "q.csv"));
    REQUIRE(!lines.empty());
    CHECK(lines[0] == "--qps,hca.qpc_cache_entries,qp,messages,msg_rate_Mpps");
    // Each point ran with its own QP count: a row per QP and the total.
    std::map<std::string, int> qp_rows;
    std::map<std::string, double> total;
    for (std::size_t i = 1; i < lines.size(); ++i) {
        const auto f = fields_of(lines[i]);
        REQUIRE(f.size() == 5);
        const std::string point = f[0] + "/" + f[1];
        if (f[2] == "total") total[point] = std::stod(f[4]);
        else ++qp_rows[point];
    }
    CHECK(qp_rows == std::map<std::string, int>{{"16/16", 16}, {"16/256", 16}, {"32/16", 32}, {"32/256", 32}});
    // 32 QPs over 16 cached contexts miss; 16 fit.
    CHECK(total["32/16"] < total["32/256"]);
    CHECK(total["16/16"] == Approx(total["16/256"]));
    if (run_shell("/usr/bin/python3 -c 'import matplotlib'").exit_code == 0) {
        const CommandResult plot = run_hcasim("plot --out " + dir / "q.svg" + " " + dir / "q.csv", true);
        INFO(plot.out);
        REQUIRE(plot.exit_code == 0);
        const std::string svg = read_file(dir / "q.svg");
        CHECK(svg.find("hca.qpc_cache_entries=16") != std::string::npos);  // a line per cache size
    }
}

TEST_CASE("a sweep varies the preset: each point runs as hcasim with that --preset", "[sweep][preset]") {
    TempDir dir;
    const std::string lat = "lat --op write --sizes 4096 -n 50";
    const CommandResult r =
        run_hcasim("sweep --jobs 2 --param preset=cx3-fdr,cx4-edr,vi-pci66 --out " + dir / "p.csv" + " -- " + lat, true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const auto lines = lines_of(read_file(dir / "p.csv"));
    REQUIRE(lines.size() == 4);
    CHECK(lines[0].rfind("--preset,bytes,iterations,", 0) == 0);
    // Each row is what the preset gives when run on its own.
    const std::vector<std::string> presets{"cx3-fdr", "cx4-edr", "vi-pci66"};
    for (std::size_t i = 0; i < presets.size(); ++i) {
        const auto row = fields_of(lines[i + 1]);
        REQUIRE(row.size() > 5);
        CHECK(row[0] == presets[i]);
        const CommandResult alone = run_hcasim(lat + " --format csv --preset " + presets[i]);
        REQUIRE(alone.exit_code == 0);
        const auto own = fields_of(lines_of(alone.out).back());
        REQUIRE(own.size() > 4);
        CHECK(std::stod(row[5]) == Approx(std::stod(own[4])).margin(0.001));  // t_typical, csv to 3 places
    }
}

TEST_CASE("a swarm sweep varies the emulated machines and is drawn as read rate against active qps", "[sweep][plot][swarm]") {
    TempDir dir;
    const CommandResult r =
        run_hcasim("sweep --param vms=1,2 --param hca.qpc_cache_entries=4,64 --out " + dir / "s.csv" +
                       " -- swarm --machines 3 --threads 2 --window 4 --warmup 5 --duration 20",
                   true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const auto lines = lines_of(read_file(dir / "s.csv"));
    REQUIRE(lines.size() == 5);
    CHECK(lines[0] ==
          "--vms,hca.qpc_cache_entries,machines,threads,vms,window,bytes,active_qps,duration_us,"
          "read_rate_Mops_per_machine,min_Mops,max_Mops,qpc_misses_per_read,cqc_misses_per_read");
    std::map<std::string, std::vector<std::string>> row;
    for (std::size_t i = 1; i < lines.size(); ++i) {
        const auto f = fields_of(lines[i]);
        REQUIRE(f.size() == 14);
        row[f[0] + "/" + f[1]] = f;
    }
    // 2 workers x 2 other machines x vms.
    CHECK(row["1/64"][7] == "4");
    CHECK(row["2/64"][7] == "8");
    // 8 QPs over 4 cached contexts miss; 4 fit.
    CHECK(std::stod(row["2/4"][12]) > 0);
    CHECK(std::stod(row["2/64"][12]) == 0);
    CHECK(std::stod(row["1/4"][12]) == 0);
    if (run_shell("/usr/bin/python3 -c 'import matplotlib'").exit_code == 0) {
        const CommandResult plot = run_hcasim("plot --out " + dir / "s.svg" + " " + dir / "s.csv", true);
        INFO(plot.out);
        REQUIRE(plot.exit_code == 0);
        const std::string svg = read_file(dir / "s.svg");
        CHECK(svg.find("active_qps") != std::string::npos);                 // the x axis
        CHECK(svg.find("hca.qpc_cache_entries=4") != std::string::npos);    // a line per cache size
        CHECK(svg.find("--vms=") == std::string::npos);                     // not a line per QP count
    }
}

TEST_CASE("a calibrate sweep has a row per reference point and combination, as calibrate --set gives it", "[sweep][calibrate][plot]") {
    TempDir dir;
    // One published point: a short RDMA WRITE latency run on cx3-fdr.
    write_file(dir / "points.json", R"({"description": "test", "classes": [{"preset": "cx3-fdr", "device": "test"}],
      "points": [{"name": "test.write_lat", "preset": "cx3-fdr", "metric": "RDMA WRITE latency, 2 B", "value": 1.0,
      "unit": "us", "kind": "measured", "source": "this test", "conditions": "none", "published_command": "none",
      "command": "lat --op write --sizes 2 -n 200", "column": "t_typical_us"}]})");
    const std::string reference = "calibrate --reference " + dir / "points.json";
    const CommandResult r =
        run_hcasim("sweep --param hca.core_clock_mhz=200,400 --out " + dir / "cal.csv" + " -- " + reference, true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const auto lines = lines_of(read_file(dir / "cal.csv"));
    REQUIRE(lines.size() == 3);
    CHECK(lines[0] == "hca.core_clock_mhz,name,preset,published,measured,unit,ratio,within_tolerance");
    std::vector<double> measured;
    for (const std::string clock : {"200", "400"}) {
        const auto row = fields_of(lines[clock == "200" ? 1 : 2]);
        REQUIRE(row.size() == 8);
        CHECK(row[0] == clock);
        CHECK(row[1] == "test.write_lat");
        const CommandResult one = run_hcasim(reference + " --set hca.core_clock_mhz=" + clock + " --format json");
        REQUIRE(one.exit_code == 0);
        const auto j = nlohmann::json::parse(one.out);
        CHECK(row[4] == j["points"][0]["measured"].dump());
        measured.push_back(std::stod(row[4]));
    }
    // The adapter's clock shows in the latency: the rows are really two design points.
    CHECK(measured[0] > measured[1]);

    // Drawn, each bar says its design point.
    if (run_shell("/usr/bin/python3 -c 'import matplotlib'").exit_code != 0) return;
    const CommandResult plot = run_hcasim("plot --out " + dir / "cal.svg" + " " + dir / "cal.csv", true);
    INFO(plot.out);
    REQUIRE(plot.exit_code == 0);
    const std::string svg = read_file(dir / "cal.svg");
    CHECK(svg.find("hca.core_clock_mhz=200: test.write_lat") != std::string::npos);
    CHECK(svg.find("hca.core_clock_mhz=400: test.write_lat") != std::string::npos);
}

TEST_CASE("sweep refuses a bad parameter, value or command line by name before any point runs", "[sweep]") {
    struct Case {
        std::string args, says;
    };
    const std::vector<Case> cases{
        {"--param pcie.lane=4,8 -- bw", "unknown parameter 'pcie.lane'"},
        {"--param pcie.lanes=4,5 -- bw", "invalid value '5' for pcie.lanes"},
        {"--param link.speed=fdr,hdr -- bw", "invalid value 'hdr' for link.speed"},
        {"--param pcie.lanes -- bw", "invalid --param 'pcie.lanes': expected KEY=V1,V2"},
        {"--param pcie.lanes= -- bw", "--param 'pcie.lanes=' names no values"},
        {"--param pcie.lanes=4,,8 -- bw", "has an empty value"},
        {"--param pcie.lanes=4,4 -- bw", "names the value '4' twice"},
        {"--param pcie.lanes=4 --param pcie.lanes=8 -- bw", "--param pcie.lanes is given twice"},
        {"--param pcie.lanes=4,8 -- connect", "not 'connect'"},
        {"--param pcie.lanes=4,8 --", "nothing after --"},
        {"--param pcie.lanes=4,8 bw", "'bw' before --"},
        {"--param pcie.lanes=4,8", "sweep needs -- and the workload"},
        {"-- bw", "at least one --param"},
        {"--param pcie.lanes=4 --jobs 0 -- bw", "invalid value '0' for --jobs"},
        {"--param pcie.lanes=4 --out t.txt -- bw", "must end in .csv or .json"},
        {"--param pcie.lanes=4 -- bw --format csv", "--format json itself"},
        {"--param pcie.lanes=4 -- bw --set pcie.lanes=8", "sets a parameter the sweep varies"},
        {"--param pcie.lanes=4 -- lat --trace t.json", "every point would write the same trace file"},
        {"--param pcie.lanes=4 -- lat --vcd w.vcd", "every point would write the same waveform files"},
        {"--param pcie.lanes=4 -- calibrate --check", "sweep does not take calibrate's --check"},
        {"--param qps=4,8 -- calibrate", "--param qps: calibrate has no such option"},
        {"--param pcie.lanes=4 --bogus -- bw", "unrecognised option '--bogus'"},
        {"--param qpz=4 -- msgrate", "unknown parameter 'qpz'"},
        {"--param qps=4,x -- msgrate", "invalid value 'x' for --qps"},
        {"--param inline=0,-1 -- msgrate", "invalid value '-1' for --inline"},
        {"--param qps=4,8 -- msgrate -q 2", "is an option the sweep varies (--param qps)"},
        {"--param iters=4,8 -- msgrate -n 2", "is an option the sweep varies (--param iters)"},
        {"--param preset=cx3-fdr,nosuch -- lat", "unknown preset 'nosuch'"},
        {"--param preset=cx3-fdr,cx4-edr -- lat --preset cx5-edr", "is an option the sweep varies (--param preset)"},
        {"--param preset=cx3-fdr,cx4-edr -- lat -p cx5-edr", "is an option the sweep varies (--param preset)"},
    };
    for (const auto& c : cases) {
        const CommandResult r = run_hcasim("sweep " + c.args, true);
        INFO("hcasim sweep " << c.args << "\n" << r.out);
        CHECK(r.exit_code == 2);
        CHECK(r.out.find(c.says) != std::string::npos);
        CHECK(r.out.find("sweep point") == std::string::npos);  // nothing ran
    }
}

TEST_CASE("a point that fails stops the sweep with its parameters and its error, and writes nothing", "[sweep]") {
    TempDir dir;
    // Each value is valid; a 1024-byte port cannot run --mtu 2048.
    const CommandResult r = run_hcasim(
        "sweep --param port.max_mtu=4096,1024 --jobs 1 --out " + dir / "t.csv" + " -- bw --sizes 64 -n 5 --mtu 2048", true);
    INFO(r.out);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("sweep point 2 of 2 (port.max_mtu=1024) failed (exit status 2)") != std::string::npos);
    CHECK(r.out.find("--set port.max_mtu=1024 --format json") != std::string::npos);
    CHECK(r.out.find("--mtu 2048 is more than the device allows") != std::string::npos);
    CHECK(!exists(dir / "t.csv"));
}

TEST_CASE("a sweep shows its progress on a terminal and stays quiet elsewhere", "[sweep]") {
    TempDir dir;
    const CommandResult quiet = run_hcasim(sweep("--out " + dir / "q.csv"), true);
    REQUIRE(quiet.exit_code == 0);
    CHECK(quiet.out.empty());
    if (!have_program("script")) {
        WARN("script (util-linux) is not installed: the progress line on a terminal is not checked");
        return;
    }
    // script gives the command a terminal.
    const CommandResult tty = run_shell("script -qec \"'" + std::string(HCASIM_BINARY) + "' " + sweep("--out " + dir / "t.csv") +
                                        "\" /dev/null");
    INFO(tty.out);
    REQUIRE(tty.exit_code == 0);
    CHECK(tty.out.find("\rsweep: 0/4 points, 0:00 elapsed") != std::string::npos);
    CHECK(tty.out.find("\rsweep: 4/4 points") != std::string::npos);
    CHECK(read_file(dir / "t.csv") == read_file(dir / "q.csv"));
}

TEST_CASE("under mpirun a sweep shares its points among the ranks and rank 0 writes the same table", "[sweep][mpi]") {
    if (!have_program("mpirun")) {
        WARN("mpirun is not installed (Debian: openmpi-bin): the MPI sweep is not checked");
        return;
    }
    TempDir dir;
    REQUIRE(run_hcasim(sweep("--out " + dir / "local.csv")).exit_code == 0);
    REQUIRE(run_hcasim(sweep("--out " + dir / "local.json")).exit_code == 0);
    const std::string mpirun = "mpirun --allow-run-as-root --oversubscribe -np ";
    const std::string hcasim = " '" + std::string(HCASIM_BINARY) + "' ";
    // 2 ranks of 2 points each; 3 ranks, one with a single point.
    const CommandResult two = run_shell(mpirun + "2" + hcasim + sweep("--jobs 1 --out " + dir / "mpi.csv"));
    INFO(two.out);
    if (two.exit_code != 0 && two.out.find("built without MPI") != std::string::npos) {
        WARN("this hcasim was built without MPI (libopenmpi-dev): the MPI sweep is not checked");
        return;
    }
    REQUIRE(two.exit_code == 0);
    CHECK(read_file(dir / "mpi.csv") == read_file(dir / "local.csv"));
    const CommandResult three = run_shell(mpirun + "3" + hcasim + sweep("--jobs 1 --out " + dir / "mpi.json"));
    INFO(three.out);
    REQUIRE(three.exit_code == 0);
    CHECK(read_file(dir / "mpi.json") == read_file(dir / "local.json"));
    // A failing point on rank 1 is reported by rank 0, once.
    const CommandResult bad = run_shell(mpirun + "2" + hcasim +
                                        "sweep --param port.max_mtu=4096,1024 --out " + dir / "bad.csv" +
                                        " -- bw --sizes 64 -n 5 --mtu 2048");
    INFO(bad.out);
    CHECK(bad.exit_code != 0);
    const auto at = bad.out.find("point 2 of 2 (port.max_mtu=1024) failed");
    CHECK(at != std::string::npos);
    CHECK(bad.out.find("point 2 of 2", at + 1) == std::string::npos);
    CHECK(!exists(dir / "bad.csv"));
}

TEST_CASE("hcasim plot draws results, sweeps and calibration tables as PNG and SVG", "[plot]") {
    TempDir dir;
    if (run_shell("/usr/bin/python3 -c 'import matplotlib'").exit_code != 0) {
        const CommandResult r = run_hcasim("plot --out " + dir / "f.png" + " " + dir / "x.csv", true);
        CHECK(r.exit_code != 0);
        CHECK(r.out.find("python3-matplotlib") != std::string::npos);
        WARN("/usr/bin/python3 has no matplotlib (Debian: python3-matplotlib): no figure is drawn");
        return;
    }
    // Two presets' latency on one figure, and a bandwidth sweep.
    for (const char* preset : {"cx3-fdr", "cx4-edr"})
        REQUIRE(run_hcasim(std::string("lat --sizes 2,64,4096 -n 20 --format json --preset ") + preset + " > " +
                           dir / (std::string(preset) + ".json"))
                    .exit_code == 0);
    REQUIRE(run_hcasim(sweep("--out " + dir / "sweep.csv")).exit_code == 0);
    write_file(dir / "calibration.csv",
               "name,published,measured,unit\n"
               "RDMA WRITE latency 2 B,0.87,0.89,us\n"
               "RDMA WRITE bandwidth 64 KiB,6000,6417.9,MB/s\n");

    const CommandResult lat =
        run_hcasim("plot --out " + dir / "lat.svg" + " " + dir / "cx3-fdr.json" + " " + dir / "cx4-edr.json", true);
    INFO(lat.out);
    REQUIRE(lat.exit_code == 0);
    const std::string svg = read_file(dir / "lat.svg");
    CHECK(svg.find("<svg") != std::string::npos);
    CHECK(svg.find("cx4-edr") != std::string::npos);  // the legend names each file

    const CommandResult bw = run_hcasim("plot --out " + dir / "sweep.png" + " " + dir / "sweep.csv", true);
    INFO(bw.out);
    REQUIRE(bw.exit_code == 0);
    CHECK(read_file(dir / "sweep.png").rfind("\x89PNG\r\n\x1a\n", 0) == 0);

    const CommandResult cal = run_hcasim("plot --out " + dir / "cal.svg" + " " + dir / "calibration.csv", true);
    INFO(cal.out);
    REQUIRE(cal.exit_code == 0);
    CHECK(read_file(dir / "cal.svg").find("<svg") != std::string::npos);
    // What hcasim calibrate prints, as it prints it.
    REQUIRE(run_hcasim("calibrate --preset cx4-edr --format json > " + dir / "calibrate.json").exit_code == 0);
    const CommandResult model = run_hcasim("plot --out " + dir / "model.png" + " " + dir / "calibrate.json", true);
    INFO(model.out);
    REQUIRE(model.exit_code == 0);
    CHECK(read_file(dir / "model.png").rfind("\x89PNG\r\n\x1a\n", 0) == 0);

    // Bad input: a clear error, no figure.
    write_file(dir / "empty.csv", "bytes,iterations,t_typical_us\n");
    write_file(dir / "notes.txt", "bytes\n2\n");
    struct Case {
        std::string args, says;
    };
    const std::vector<Case> bad{
        {dir / "missing.csv", "missing.csv: no such file"},
        {dir / "notes.txt", "unknown format '.txt'"},
        {dir / "empty.csv", "empty.csv: no rows"},
        {dir / "cx3-fdr.json --y t_9999_us", "no column t_9999_us"},
        {dir / "calibration.csv " + dir / "sweep.csv", "is a calibration table and"},
    };
    for (const auto& c : bad) {
        const CommandResult r = run_hcasim("plot --out " + dir / "bad.png" + " " + c.args, true);
        INFO("hcasim plot " << c.args << "\n" << r.out);
        CHECK(r.exit_code == 2);
        CHECK(r.out.find(c.says) != std::string::npos);
        CHECK(!exists(dir / "bad.png"));
    }
    const CommandResult no_ext = run_hcasim("plot --out " + dir / "f.pdf " + dir / "sweep.csv", true);
    CHECK(no_ext.exit_code == 2);
    CHECK(no_ext.out.find("must end in .png or .svg") != std::string::npos);
}
