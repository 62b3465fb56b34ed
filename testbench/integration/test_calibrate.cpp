// hcasim calibrate and hcasim presets: the reference points file
// (testbench/configs/reference_points.json) and the comparison of its
// published figures with the model.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/sim/config.hpp"
#include "testbench/cli/reference_points.hpp"
#include "testbench/integration/harness.hpp"
#include "testbench/integration/report_rows.hpp"

using namespace hcasim;
using namespace hcasim::testbench;
using hcasim::test::CommandResult;
using hcasim::test::as_rounded;
using hcasim::test::csv_fields;
using hcasim::test::run_hcasim;

namespace {

// A file under /tmp that is removed when the test ends.
class TempFile {
public:
    explicit TempFile(const std::string& contents) {
        char name[] = "/tmp/hcasim_calibrate_XXXXXX";
        const int fd = mkstemp(name);
        REQUIRE(fd >= 0);
        close(fd);
        m_path = name;
        std::ofstream(m_path) << contents;
    }
    ~TempFile() { std::remove(m_path.c_str()); }
    const std::string& path() const { return m_path; }

private:
    std::string m_path;
};

struct CsvRow {
    std::string name, preset, unit, within;
    double published = 0, measured = 0, ratio = 0;
};

// The rows of calibrate --format csv, checked against its header.
std::vector<CsvRow> parse_csv(const std::string& out) {
    std::istringstream in(out);
    std::string line;
    REQUIRE(std::getline(in, line));
    REQUIRE(line == "name,preset,published,measured,unit,ratio,within_tolerance,kind,source");
    std::vector<CsvRow> rows;
    while (std::getline(in, line)) {
        const auto f = csv_fields(line, ',');
        REQUIRE(f.size() == 9);
        CsvRow r;
        r.name = f[0];
        r.preset = f[1];
        r.published = std::stod(f[2]);
        r.measured = std::stod(f[3]);
        r.unit = f[4];
        r.ratio = std::stod(f[5]);
        r.within = f[6];
        rows.push_back(r);
    }
    return rows;
}

// A reference file of one cx3-fdr point: a short RDMA WRITE latency run.
std::string one_point_file(double published, const std::string& command = "lat --op write --sizes 2 -n 200") {
    char value[64];
    std::snprintf(value, sizeof value, "%.9g", published);
    return std::string(R"({"description": "test", "classes": [{"preset": "cx3-fdr", "device": "test device"}],
      "points": [{"name": "test.write_lat", "preset": "cx3-fdr", "metric": "RDMA WRITE latency, 2 B", "value": )") +
           value + R"(, "unit": "us", "kind": "measured", "source": "this test", "conditions": "none",
      "published_command": "none", "command": ")" +
           command + R"(", "column": "t_typical_us"}]})";
}

// t_typical of the one row of an hcasim lat --format csv run.
double typical_of(const std::string& lat_args) {
    const CommandResult lat = run_hcasim(lat_args + " --format csv");
    REQUIRE(lat.exit_code == 0);
    std::istringstream in(lat.out);
    std::string header, row;
    REQUIRE(std::getline(in, header));
    REQUIRE(std::getline(in, row));
    const auto f = csv_fields(row, ',');
    REQUIRE(f.size() == 9);
    return std::stod(f[4]);
}

std::string quoted(const std::string& path) { return "'" + path + "'"; }

}  // namespace

TEST_CASE("every reference point has a value, unit, source, conditions, an hcasim command and a column", "[calibrate]") {
    const ReferenceSet set = load_reference_points(default_reference_file());
    REQUIRE(!set.points.empty());
    for (const auto& p : set.points) {
        INFO(p.name);
        CHECK(p.value > 0);
        CHECK(!p.unit.empty());
        CHECK(!p.source.empty());
        CHECK(!p.conditions.empty());
        CHECK(!p.published_command.empty());
        CHECK(!p.command.empty());
        CHECK(!p.column.empty());
        CHECK((p.kind == "measured" || p.kind == "vendor claim"));
        CHECK(set.find_class(p.preset) != nullptr);
    }
    // The presets of the model have points.
    for (const char* preset : {"cx3-fdr", "cx4-edr", "cx5-edr", "vi-pci66", "vi-clan"}) {
        INFO(preset);
        CHECK(!set.points_of(preset).empty());
    }
    for (const auto& c : set.classes) {
        INFO(c.preset);
        CHECK(!c.device.empty());
        for (const auto& f : c.facts) CHECK(!f.source.empty());
    }
}

TEST_CASE("a reference point without a source is refused, naming the point and the file", "[calibrate]") {
    std::string text = one_point_file(1.0);
    const auto at = text.find(R"("source": "this test", )");
    REQUIRE(at != std::string::npos);
    text.erase(at, std::string(R"("source": "this test", )").size());
    const TempFile f(text);
    try {
        load_reference_points(f.path());
        FAIL("accepted a point without a source");
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        CHECK(what.find("point test.write_lat") != std::string::npos);
        CHECK(what.find("missing \"source\"") != std::string::npos);
        CHECK(what.find(f.path()) != std::string::npos);
    }
}

TEST_CASE("a reference point whose command sets the preset itself is refused", "[calibrate]") {
    std::string text = one_point_file(1.0);
    const std::string cmd = "lat --op write --sizes 2 -n 200";
    text.replace(text.find(cmd), cmd.size(), cmd + " --preset cx4-edr");
    const TempFile f(text);
    CHECK_THROWS_WITH(load_reference_points(f.path()), Catch::Contains("must not give --preset"));
}

TEST_CASE("calibrate --format csv prints one row per cx3-fdr point with ratio = measured / published", "[calibrate]") {
    const CommandResult r = run_hcasim("calibrate --preset cx3-fdr --format csv");
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const auto rows = parse_csv(r.out);
    const ReferenceSet set = load_reference_points(default_reference_file());
    const auto points = set.points_of("cx3-fdr");
    REQUIRE(rows.size() == points.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        INFO(rows[i].name);
        CHECK(rows[i].name == points[i]->name);
        CHECK(rows[i].preset == "cx3-fdr");
        CHECK(rows[i].unit == points[i]->unit);
        CHECK(rows[i].published == Approx(points[i]->value));
        CHECK(rows[i].measured > 0);
        CHECK(rows[i].ratio == Approx(rows[i].measured / rows[i].published).epsilon(1e-5));
        CHECK(rows[i].within == (within_tolerance(*points[i], rows[i].ratio) ? "yes" : "no"));
    }
}

TEST_CASE("calibrate measures what the point's command measures", "[calibrate]") {
    // The measured figure is the model's own: the same command run directly
    // gives the same t_typical.
    const TempFile f(one_point_file(1.0));
    const CommandResult cal = run_hcasim("calibrate --reference " + quoted(f.path()) + " --format csv");
    REQUIRE(cal.exit_code == 0);
    const auto rows = parse_csv(cal.out);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].measured == Approx(typical_of("lat --op write --sizes 2 -n 200 --preset cx3-fdr")).epsilon(1e-3));
}

TEST_CASE("calibrate --check exits with status 1 naming a point outside 10% and with 0 when all are inside", "[calibrate]") {
    // The model's figure for the point, then reference files that put it
    // inside and outside the tolerance.
    const TempFile probe(one_point_file(1.0));
    const CommandResult first = run_hcasim("calibrate --reference " + quoted(probe.path()) + " --format csv");
    REQUIRE(first.exit_code == 0);
    const double measured = parse_csv(first.out).at(0).measured;
    REQUIRE(measured > 0);

    const TempFile exact(one_point_file(measured));
    const CommandResult in = run_hcasim("calibrate --check --reference " + quoted(exact.path()), true);
    INFO(in.out);
    CHECK(in.exit_code == 0);
    CHECK(in.out.find("1 of 1 points within") != std::string::npos);

    const TempFile near(one_point_file(measured * 1.08));
    CHECK(run_hcasim("calibrate --check --reference " + quoted(near.path())).exit_code == 0);

    const TempFile far(one_point_file(measured * 1.5));
    const CommandResult out = run_hcasim("calibrate --check --reference " + quoted(far.path()), true);
    INFO(out.out);
    CHECK(out.exit_code == 1);
    CHECK(out.out.find("1 of 1 points outside") != std::string::npos);
    CHECK(out.out.find("test.write_lat (ratio 0.666") != std::string::npos);

    // Without --check the same comparison only reports.
    CHECK(run_hcasim("calibrate --reference " + quoted(far.path())).exit_code == 0);
}

TEST_CASE("calibrate --set runs every point at the design point and says it is not the preset", "[calibrate]") {
    const TempFile f(one_point_file(1.0));
    const std::string design = "--set hca.core_clock_mhz=200";
    const CommandResult cal = run_hcasim("calibrate --reference " + quoted(f.path()) + " --format csv " + design);
    REQUIRE(cal.exit_code == 0);
    const auto rows = parse_csv(cal.out);
    REQUIRE(rows.size() == 1);
    const double at_design = typical_of("lat --op write --sizes 2 -n 200 --preset cx3-fdr " + design);
    const double at_preset = typical_of("lat --op write --sizes 2 -n 200 --preset cx3-fdr");
    // A slower adapter clock must show: the design point is really run.
    REQUIRE(at_design > at_preset * 1.1);
    CHECK(rows[0].measured == Approx(at_design).epsilon(1e-3));

    const CommandResult text = run_hcasim("calibrate --reference " + quoted(f.path()) + " " + design);
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("Design point, not the preset: --set hca.core_clock_mhz=200") != std::string::npos);
}

TEST_CASE("calibrate --set leaves a key that a point's own measurement sets as the point sets it", "[calibrate]") {
    // The point was measured at QDR; a design point's link speed does not
    // change the conditions of that measurement.
    const std::string command = "lat --op write --sizes 4096 -n 200 --set link.speed=qdr";
    const TempFile f(one_point_file(1.0, command));
    const CommandResult cal =
        run_hcasim("calibrate --reference " + quoted(f.path()) + " --format csv --set link.speed=sdr");
    REQUIRE(cal.exit_code == 0);
    const auto rows = parse_csv(cal.out);
    REQUIRE(rows.size() == 1);
    const double qdr = typical_of(command + " --preset cx3-fdr");
    REQUIRE(typical_of("lat --op write --sizes 4096 -n 200 --set link.speed=sdr --preset cx3-fdr") > qdr * 1.5);
    CHECK(rows[0].measured == Approx(qdr).epsilon(1e-3));

    const CommandResult text = run_hcasim("calibrate --reference " + quoted(f.path()) + " --set link.speed=sdr");
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("link.speed stays as measured in test.write_lat") != std::string::npos);
}

TEST_CASE("calibrate --config runs the points at a design point read from a file, but for a point's own keys", "[calibrate]") {
    const std::string command = "lat --op write --sizes 4096 -n 200 --set link.speed=qdr";
    const TempFile point(one_point_file(1.0, command));
    const TempFile design("# a slower adapter on a slower link\n[hca]\ncore_clock_mhz = 100\n[link]\nspeed = sdr\n");
    const CommandResult cal =
        run_hcasim("calibrate --reference " + quoted(point.path()) + " --format csv --config " + quoted(design.path()));
    REQUIRE(cal.exit_code == 0);
    const auto rows = parse_csv(cal.out);
    REQUIRE(rows.size() == 1);
    // The file's clock applies; its link speed gives way to the point's QDR.
    const double expected = typical_of(command + " --preset cx3-fdr --config " + quoted(design.path()));
    REQUIRE(expected > typical_of(command + " --preset cx3-fdr") * 1.1);
    CHECK(rows[0].measured == Approx(expected).epsilon(1e-3));

    const CommandResult text =
        run_hcasim("calibrate --reference " + quoted(point.path()) + " --config " + quoted(design.path()));
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("Design point, not the preset: --config " + design.path()) != std::string::npos);
    CHECK(text.out.find("link.speed stays as measured in test.write_lat") != std::string::npos);
    CHECK(text.out.find("hca.core_clock_mhz stays") == std::string::npos);

    const TempFile bad("[hca]\ncore_clock_mhz = fast\n");
    const CommandResult refused =
        run_hcasim("calibrate --reference " + quoted(point.path()) + " --config " + quoted(bad.path()), true);
    CHECK(refused.exit_code == 2);
    CHECK(refused.out.find("core_clock_mhz") != std::string::npos);
}

TEST_CASE("calibrate --set with an unknown key or a bad value fails once, naming it, with status 2", "[calibrate]") {
    const TempFile f(one_point_file(1.0));
    const CommandResult key = run_hcasim("calibrate --reference " + quoted(f.path()) + " --set hca.no_such_key=1", true);
    CHECK(key.exit_code == 2);
    CHECK(key.out.find("hca.no_such_key") != std::string::npos);
    CHECK(key.out.find("point test.write_lat") == std::string::npos);
    const CommandResult value = run_hcasim("calibrate --reference " + quoted(f.path()) + " --set pcie.lanes=3", true);
    CHECK(value.exit_code == 2);
    CHECK(value.out.find("pcie.lanes") != std::string::npos);
}

TEST_CASE("calibrate of an unknown preset fails naming it", "[calibrate]") {
    const CommandResult r = run_hcasim("calibrate --preset cx9-ndr", true);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("unknown preset 'cx9-ndr'") != std::string::npos);
    CHECK(r.out.find("model presets: cx3-fdr, cx4-edr") != std::string::npos);
}


TEST_CASE("a reference points file that cannot be read or parsed is refused as bad input, exit 2", "[calibrate]") {
    // Exit 1 is calibrate --check's "a point is out"; a bad file must not look like it.
    const TempFile broken(R"({"schema": 1, "points": [)");
    for (const std::string& cmd : {std::string("calibrate --check"), std::string("presets")}) {
        INFO(cmd);
        CommandResult r = run_hcasim(cmd + " --reference /nonexistent/points.json", true);
        CHECK(r.exit_code == 2);
        CHECK(r.out.find("reference points file '/nonexistent/points.json': open: cannot read it") != std::string::npos);
        r = run_hcasim(cmd + " --reference " + quoted(broken.path()), true);
        CHECK(r.exit_code == 2);
        CHECK(r.out.find("reference points file '" + broken.path() + "'") != std::string::npos);
    }
}
TEST_CASE("calibrate of a preset with reference points that the model does not have yet says so and runs nothing", "[calibrate]") {
    // Every class of the reference file is a preset of the model by now: a
    // file of its own has a point of a class that is not.
    std::string text = one_point_file(1.0);
    for (std::string::size_type at; (at = text.find("\"cx3-fdr\"")) != std::string::npos;)
        text.replace(at, 9, "\"cx9-ndr\"");
    const TempFile f(text);
    const CommandResult r = run_hcasim("calibrate --reference " + quoted(f.path()) + " --preset cx9-ndr", true);
    INFO(r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("preset 'cx9-ndr' has ") != std::string::npos);
    CHECK(r.out.find("not a preset of the model yet") != std::string::npos);
    CHECK(r.out.find("Reference points of") == std::string::npos);
}

TEST_CASE("hcasim presets shows each preset with its description, its parameters and the points behind it", "[calibrate]") {
    const CommandResult r = run_hcasim("presets");
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("cx3-fdr: ConnectX-3-class FDR 4x HCA on PCIe Gen3 x8") != std::string::npos);
    CHECK(r.out.find("cx4-edr: ConnectX-4-class EDR 4x HCA on PCIe Gen3 x16.") != std::string::npos);
    CHECK(r.out.find("pcie.lanes=16") != std::string::npos);
    CHECK(r.out.find("cx4-edr.send_lat.rc.32B: 0.83 us") != std::string::npos);
    CHECK(r.out.find("cx5-edr: ") != std::string::npos);
    CHECK(r.out.find("vi-pci66: VI Architecture NIC of 1999-2002 on 64-bit/66 MHz PCI with a Myrinet-2000 link") !=
          std::string::npos);
    CHECK(r.out.find("link.speed=myrinet2000") != std::string::npos);
    CHECK(r.out.find("vi-clan: Late-1990s Giganet cLAN-class VI Architecture NIC") != std::string::npos);
    CHECK(r.out.find("vi-clan.send_lat.288B: 14.2 us") != std::string::npos);
    CHECK(r.out.find("host.bus=pci") != std::string::npos);
}

TEST_CASE("docs/reference-points.md is what hcasim presets --format md prints", "[calibrate]") {
    const std::string doc_path = sim::Config::presets_dir() + "/../../docs/reference-points.md";
    std::ifstream in(doc_path);
    REQUIRE(in);
    std::stringstream doc;
    doc << in.rdbuf();
    const CommandResult r = run_hcasim("presets --format md");
    REQUIRE(r.exit_code == 0);
    INFO("regenerate with: build/hcasim presets --format md > docs/reference-points.md");
    CHECK(r.out == doc.str());
}

TEST_CASE("calibrate prints under its table what the model lacks for each point out of tolerance", "[calibrate]") {
    auto with_gap = [](double published) {
        std::string text = one_point_file(published);
        const std::string column = R"("column": "t_typical_us")";
        text.replace(text.find(column), column.size(), column + R"(, "model_gap": "a mechanism this test names")");
        return text;
    };
    const TempFile out_of_tolerance(with_gap(0.2));  // the model's 2 B write is about 0.9 us
    const CommandResult out = run_hcasim("calibrate --reference " + quoted(out_of_tolerance.path()));
    INFO(out.out);
    REQUIRE(out.exit_code == 0);
    CHECK(out.out.find("OUT") != std::string::npos);
    CHECK(out.out.find("What the model lacks where a point is out") != std::string::npos);
    CHECK(out.out.find(" test.write_lat: a mechanism this test names") != std::string::npos);
    const CommandResult json = run_hcasim("calibrate --reference " + quoted(out_of_tolerance.path()) + " --format json");
    CHECK(json.out.find(R"("model_gap":"a mechanism this test names")") != std::string::npos);

    // Within tolerance, nothing is said.
    const CommandResult direct = run_hcasim("lat --op write --sizes 2 -n 200 --format csv");
    REQUIRE(direct.exit_code == 0);
    const std::string row = direct.out.substr(direct.out.find("\n2,") + 1);
    std::vector<std::string> fields;
    std::istringstream in(row);
    for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
    REQUIRE(fields.size() > 4);
    const TempFile within(with_gap(std::stod(fields[4])));  // t_typical
    const CommandResult ok = run_hcasim("calibrate --reference " + quoted(within.path()));
    INFO(ok.out);
    REQUIRE(ok.exit_code == 0);
    CHECK(ok.out.find("What the model lacks") == std::string::npos);
}

TEST_CASE("every reference point the model does not reach within tolerance says what the model lacks", "[calibrate]") {
    const CommandResult r = run_hcasim("calibrate --format csv");
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    const ReferenceSet set = load_reference_points(default_reference_file());
    const auto rows = parse_csv(r.out);
    REQUIRE(rows.size() == set.points.size());
    for (const auto& row : rows) {
        if (row.within == "yes") continue;
        INFO(row.name << " is out of tolerance (ratio " << row.ratio << ") without a model_gap");
        const auto p = std::find_if(set.points.begin(), set.points.end(),
                                    [&](const ReferencePoint& x) { return x.name == row.name; });
        REQUIRE(p != set.points.end());
        CHECK(!p->model_gap.empty());
    }
}

// docs/calibration.md carries the table of every reference point against the
// model; a change that moves a figure must move the table with it.
TEST_CASE("the tables of docs/calibration.md carry what calibrate measures today", "[calibrate]") {
    const CommandResult r = run_hcasim("calibrate --format csv");
    REQUIRE(r.exit_code == 0);
    const auto rows = parse_csv(r.out);
    std::vector<std::string> presets;
    for (const auto& row : rows)
        if (std::find(presets.begin(), presets.end(), row.preset) == presets.end()) presets.push_back(row.preset);

    std::ifstream in(std::string(HCASIM_SOURCE_DIR) + "/docs/calibration.md");
    REQUIRE(in);
    // The first number of a cell ("52.5 Gb/s (52-53)", "below 1 µs") and its decimals.
    auto number_of = [](const std::string& cell, double& value, int& decimals) {
        const auto begin = cell.find_first_of("0123456789");
        if (begin == std::string::npos) return false;
        const auto end = cell.find_first_not_of("0123456789.", begin);
        const std::string digits = cell.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
        const auto dot = digits.find('.');
        decimals = dot == std::string::npos ? 0 : static_cast<int>(digits.size() - dot - 1);
        value = std::stod(digits);
        return true;
    };

    std::vector<std::string> in_doc;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("| `", 0) != 0) continue;
        const auto end = line.find('`', 3);
        REQUIRE(end != std::string::npos);
        const std::string name = line.substr(3, end - 3);
        const bool names_a_point = std::any_of(presets.begin(), presets.end(), [&](const std::string& p) {
            return name.rfind(p + ".", 0) == 0;
        });
        if (!names_a_point) continue;  // another table's first column (a command)
        INFO("docs/calibration.md: " << line);
        const auto row = std::find_if(rows.begin(), rows.end(), [&](const CsvRow& x) { return x.name == name; });
        REQUIRE(row != rows.end());  // a point the reference file does not have
        in_doc.push_back(name);
        const auto cells = csv_fields(line.substr(1), '|');  // point, what, published, hcasim, ratio, +-10 %, ""
        REQUIRE(cells.size() >= 6);
        double value = 0;
        int decimals = 0;
        REQUIRE(number_of(cells[2], value, decimals));
        CHECK(as_rounded(value, decimals, row->published));
        REQUIRE(number_of(cells[3], value, decimals));
        INFO("calibrate measures " << row->measured << ", ratio " << row->ratio);
        CHECK(as_rounded(value, decimals, row->measured));
        REQUIRE(number_of(cells[4], value, decimals));
        CHECK(as_rounded(value, decimals, row->ratio));
        const bool ok = cells[5].find("ok") != std::string::npos;
        CHECK(ok == (row->within == "yes"));
    }
    for (const auto& row : rows) {
        INFO(row.name << " is in docs/calibration.md's tables once");
        CHECK(std::count(in_doc.begin(), in_doc.end(), row.name) == 1);
    }
}
