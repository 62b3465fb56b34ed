// The hcasim workloads on every QP type, with post lists, and the
// message-rate workload: they finish, their figures add up, and the same
// command gives the same bytes twice. UC and UD run once the verbs device
// has them; until then each run must be refused naming --qp-type.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Outcome {
    int exit_code = -1;
    std::string out;
    std::string err;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs hcasim with arguments (no shell quoting needed in this file); a hang
// ends after five minutes with status 124.
Outcome hcasim(const std::string& args) {
    char dir[] = "/tmp/hcasim_qpt_XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    const std::string out = std::string(dir) + "/out", err = std::string(dir) + "/err";
    const std::string cmd = std::string("timeout 300 '") + HCASIM_BINARY + "' " + args + " >'" + out + "' 2>'" + err +
                            "' </dev/null";
    const int status = std::system(cmd.c_str());
    Outcome o;
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.out = slurp(out);
    o.err = slurp(err);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return o;
}

// The cells of each CSV data row (the header dropped).
std::vector<std::vector<std::string>> csv(const std::string& text) {
    std::vector<std::vector<std::string>> rows;
    std::istringstream in(text);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
        std::vector<std::string> cells;
        std::istringstream l(line);
        for (std::string c; std::getline(l, c, ',');) cells.push_back(c);
        rows.push_back(cells);
    }
    return rows;
}

// The QP type runs, or the device does not have it yet and says so.
bool available(const Outcome& o, const std::string& qp_type) {
    if (o.exit_code == 0) return true;
    INFO("stderr: " << o.err);
    CHECK(o.exit_code == 2);
    CHECK(o.err.find("--qp-type " + qp_type + " is not available") != std::string::npos);
    return false;
}

// Everything up to the labelled wall-clock line, which varies by design.
std::string simulated_part(const std::string& text) {
    const auto at = text.find(" simulator speed (wall clock");
    return text.substr(0, at);
}

}  // namespace

TEST_CASE("msgrate reports every QP's messages and a total that adds them up and is the same twice", "[workload][msgrate]") {
    const std::string args = "msgrate -n 64 --qps 4 --post-list 8 --format csv";
    const Outcome a = hcasim(args);
    INFO("stderr: " << a.err);
    REQUIRE(a.exit_code == 0);
    const auto rows = csv(a.out);
    REQUIRE(rows.size() == 5);
    double best_qp = 0;
    for (int q = 0; q < 4; ++q) {
        REQUIRE(rows[static_cast<std::size_t>(q)].size() == 3);
        CHECK(rows[static_cast<std::size_t>(q)][0] == std::to_string(q));
        CHECK(rows[static_cast<std::size_t>(q)][1] == "64");
        const double rate = std::stod(rows[static_cast<std::size_t>(q)][2]);
        CHECK(rate > 0);
        best_qp = std::max(best_qp, rate);
    }
    CHECK(rows[4][0] == "total");
    CHECK(rows[4][1] == "256");
    // The QPs run side by side: together at least as fast as the fastest.
    CHECK(std::stod(rows[4][2]) >= best_qp);
    CHECK(hcasim(args).out == a.out);

    // Text: the same bytes but for the labelled wall-clock line at the end.
    const Outcome t1 = hcasim("msgrate -n 32 --qps 2");
    const Outcome t2 = hcasim("msgrate -n 32 --qps 2");
    REQUIRE(t1.exit_code == 0);
    CHECK(t1.out.find("Message Rate Test") != std::string::npos);
    CHECK(t1.out.find("packets per wall second") != std::string::npos);
    CHECK(simulated_part(t1.out) == simulated_part(t2.out));
    CHECK(simulated_part(t1.out).size() + 120 > t1.out.size());
}

TEST_CASE("bw with a post list sends every message of every QP and is the same twice", "[workload]") {
    for (const char* op : {"write", "send", "read"}) {
        const std::string args = std::string("bw --op ") + op + " --post-list 8 --qps 3 -n 20 --sizes 64,4096 --format csv";
        INFO("hcasim " << args);
        const Outcome a = hcasim(args);
        CHECK(a.err == "");
        REQUIRE(a.exit_code == 0);
        const auto rows = csv(a.out);
        REQUIRE(rows.size() == 2);
        CHECK(rows[0][0] == "64");
        CHECK(rows[0][1] == "60");  // -n is per QP; 20 is no multiple of 8: the last list is shorter
        CHECK(rows[1][1] == "60");
        CHECK(std::stod(rows[1][3]) > 0);
        CHECK(hcasim(args).out == a.out);
    }
    // The title says so, as perftest's does.
    const Outcome t = hcasim("bw --post-list 4 -n 8 --sizes 64");
    CHECK(t.out.find("RDMA Write Post List BW Test") != std::string::npos);
    CHECK(t.out.find(" post list       : 4\n") != std::string::npos);
}

TEST_CASE("lat and bw and msgrate on UC give the RC figures' kind and UC send latency is no more than RC's",
          "[workload][uc]") {
    const Outcome uc = hcasim("lat --qp-type uc --op send --sizes 2,64 -n 100 --format csv");
    if (!available(uc, "uc")) return;
    const Outcome rc = hcasim("lat --op send --sizes 2,64 -n 100 --format csv");
    REQUIRE(rc.exit_code == 0);
    const auto u = csv(uc.out), r = csv(rc.out);
    REQUIRE(u.size() == 2);
    REQUIRE(r.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
        INFO("size " << u[i][0]);
        // UC waits for no acknowledgement; nothing else differs.
        CHECK(std::stod(u[i][4]) <= std::stod(r[i][4]));
        CHECK(std::stod(u[i][4]) > 0);
    }
    CHECK(hcasim("lat --qp-type uc --op send --sizes 2,64 -n 100 --format csv").out == uc.out);
    for (const char* args : {"lat --qp-type uc --op write --sizes 2,4096 -n 50 --format csv",
                             "bw --qp-type uc --op write --sizes 64,65536 -n 100 --format csv",
                             "bw --qp-type uc --op send --qps 2 --post-list 4 --sizes 64 -n 100 --format csv",
                             "msgrate --qp-type uc -n 64 --qps 4 --format csv"}) {
        INFO("hcasim " << args);
        const Outcome a = hcasim(args);
        CHECK(a.err == "");
        REQUIRE(a.exit_code == 0);
        CHECK(!csv(a.out).empty());
        CHECK(hcasim(args).out == a.out);
    }
}

TEST_CASE("lat and bw and msgrate on UD send messages up to the MTU and give the same bytes twice", "[workload][ud]") {
    const Outcome lat = hcasim("lat --qp-type ud --sizes 2,4096 -n 50 --format csv");
    if (!available(lat, "ud")) return;
    const auto rows = csv(lat.out);
    REQUIRE(rows.size() == 2);
    CHECK(rows[1][0] == "4096");
    CHECK(std::stod(rows[0][4]) > 0);
    CHECK(hcasim("lat --qp-type ud --sizes 2,4096 -n 50 --format csv").out == lat.out);
    // The default sweep stops at the path MTU.
    const Outcome sweep = hcasim("lat --qp-type ud --mtu 1024 -n 4 --format csv");
    REQUIRE(sweep.exit_code == 0);
    CHECK(csv(sweep.out).back()[0] == "1024");
    for (const char* args : {"bw --qp-type ud --sizes 64,2048 -n 100 --format csv",
                             "msgrate --qp-type ud -n 64 --qps 4 --format csv"}) {
        INFO("hcasim " << args);
        const Outcome a = hcasim(args);
        CHECK(a.err == "");
        REQUIRE(a.exit_code == 0);
        CHECK(!csv(a.out).empty());
        CHECK(hcasim(args).out == a.out);
    }
}
