// The simulated figures the docs quote from a command are what that command
// gives today. Each entry holds a piece of a doc's text with the figure in
// braces, the command, and where its output has the figure; the test finds
// the text in the doc (whitespace runs count as one space, so a line break
// may fall anywhere), runs the command and compares at the doc's rounding.
// A model change that moves a quoted figure fails here until the doc says
// the new one. Wall-clock figures and history ("before X it gave Y") are not
// listed: they are not today's output of a command.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testbench/integration/harness.hpp"
#include "testbench/integration/report_rows.hpp"

using hcasim::test::as_rounded;
using hcasim::test::CommandResult;
using hcasim::test::counter_in;
using hcasim::test::csv_fields;
using hcasim::test::run_hcasim;

namespace {

struct Figure {
    std::string text;     // the doc's words with the figure in braces
    std::string command;  // hcasim's arguments
    // Where the figure is in the output: a column of `--format csv`, or
    // "counter NAME" of `--counters`, or "perftest K" for field K of the
    // result row a program prints on node1 under `hcasim run`.
    std::string column;
    std::string row = "";  // csv: "COLUMN=VALUE[,COLUMN=VALUE]" picks the row; empty: the first
};

std::string collapsed(const std::string& s) {
    std::string out;
    bool space = false;
    for (const char c : s) {
        if (c == ' ' || c == '\n' || c == '\t') {
            space = true;
            continue;
        }
        if (space && !out.empty()) out += ' ';
        space = false;
        out += c;
    }
    return out;
}

std::string read_doc(const std::string& relative) {
    std::ifstream in(std::string(HCASIM_SOURCE_DIR) + "/" + relative);
    REQUIRE(in);
    std::stringstream s;
    s << in.rdbuf();
    return collapsed(s.str());
}

// Runs each command once however many figures it gives.
class Outputs {
public:
    const std::string& of(const std::string& args) {
        const auto hit = m_out.find(args);
        if (hit != m_out.end()) return hit->second;
        const CommandResult r = run_hcasim(args, true);
        INFO("hcasim " << args << "\n" << r.out);
        REQUIRE(r.exit_code == 0);
        return m_out.emplace(args, r.out).first->second;
    }

private:
    std::map<std::string, std::string> m_out;
};

double csv_value(const std::string& out, const std::string& column, const std::string& row) {
    std::istringstream in(out);
    std::string line;
    std::vector<std::string> header;
    while (std::getline(in, line)) {
        if (line.find(column) != std::string::npos && line.find(',') != std::string::npos) {
            header = csv_fields(line, ',');
            break;
        }
    }
    REQUIRE(!header.empty());
    auto index_of = [&](const std::string& name) {
        for (std::size_t i = 0; i < header.size(); ++i)
            if (header[i] == name) return static_cast<int>(i);
        return -1;
    };
    const int col = index_of(column);
    REQUIRE(col >= 0);
    std::vector<std::pair<int, std::string>> wanted;
    for (const std::string& cond : row.empty() ? std::vector<std::string>{} : csv_fields(row, ',')) {
        const auto eq = cond.find('=');
        REQUIRE(eq != std::string::npos);
        const int at = index_of(cond.substr(0, eq));
        REQUIRE(at >= 0);
        wanted.emplace_back(at, cond.substr(eq + 1));
    }
    while (std::getline(in, line)) {
        const auto cells = csv_fields(line, ',');
        if (cells.size() != header.size()) continue;
        bool match = true;
        for (const auto& [at, value] : wanted) match = match && cells[static_cast<std::size_t>(at)] == value;
        if (match) return std::stod(cells[static_cast<std::size_t>(col)]);
    }
    FAIL("no row " << row << " in the output");
    return 0;
}

// Field k (0 the size) of the first result row node1's program prints.
double perftest_value(const std::string& out, int k) {
    std::istringstream in(out);
    std::string line;
    bool header = false;
    while (std::getline(in, line)) {
        if (line.rfind("node1:", 0) != 0) continue;
        if (line.find("#bytes") != std::string::npos) {
            header = true;
            continue;
        }
        if (!header) continue;
        std::istringstream row(line.substr(6));
        std::vector<double> v;
        for (double x; row >> x;) v.push_back(x);
        if (static_cast<int>(v.size()) > k) return v[static_cast<std::size_t>(k)];
    }
    FAIL("no result row from node1's program");
    return 0;
}

void check_doc(const std::string& doc, const std::vector<Figure>& figures) {
    const std::string text = read_doc(doc);
    Outputs outputs;
    for (const Figure& f : figures) {
        const std::string marked = collapsed(f.text);
        const auto open = marked.find('{');
        const auto close = marked.find('}');
        REQUIRE(open != std::string::npos);
        REQUIRE(close > open);
        const std::string words =
            marked.substr(0, open) + marked.substr(open + 1, close - open - 1) + marked.substr(close + 1);
        INFO(doc << ": \"" << words << "\"");
        REQUIRE(text.find(words) != std::string::npos);

        std::string shown = marked.substr(open + 1, close - open - 1);
        shown.erase(std::remove(shown.begin(), shown.end(), ','), shown.end());  // 2,783
        const auto dot = shown.find('.');
        const int decimals = dot == std::string::npos ? 0 : static_cast<int>(shown.size() - dot - 1);
        const double value = std::stod(shown);

        const std::string column = f.column;
        double measured = 0;
        if (column.rfind("counter ", 0) == 0) {
            const long long c = counter_in(outputs.of(f.command + " --counters"), column.substr(8));
            REQUIRE(c >= 0);
            measured = static_cast<double>(c);
        } else if (column.rfind("perftest ", 0) == 0) {
            measured = perftest_value(outputs.of(f.command), std::stoi(column.substr(9)));
        } else {
            measured = csv_value(outputs.of(f.command + " --format csv"), column, f.row);
        }
        INFO("hcasim " << f.command << " gives " << measured);
        CHECK(as_rounded(value, decimals, measured));
    }
}

}  // namespace

TEST_CASE("docs/calibration.md quotes what its commands give today", "[docs]") {
    const char* kvipl_send = "lat --op send --sizes 2,4096,65536";
    const char* kvipl_send_vi = "lat --op send --sizes 2,4096,65536 --api kvipl";
    const char* cx4_rate = "msgrate --preset cx4-edr --op write --sizes 64 --qps 1 --threads 16 --post-list 16 -n 2000";
    check_doc(
        "docs/calibration.md",
        {
            // Design points of items 7, 11 and 12 (11 and 12 by their points' commands).
            {"doubles it to {21.87} M READs",
             "swarm --machines 6 --threads 8 --vms 1 --window 16 --sizes 40 --set hca.tx_engines=2 --set "
             "hca.rx_engines=2",
             "read_rate_Mops_per_machine"},
            {"either alone gives {11.42} or 11.09",
             "swarm --machines 6 --threads 8 --vms 1 --window 16 --sizes 40 --set hca.tx_engines=2",
             "read_rate_Mops_per_machine"},
            {"either alone gives 11.42 or {11.09}",
             "swarm --machines 6 --threads 8 --vms 1 --window 16 --sizes 40 --set hca.rx_engines=2",
             "read_rate_Mops_per_machine"},
            {"two units would give {3.65} Mpps (1.49)",
             "bw --op atomic_fadd --sizes 8 --mtu 2048 --set link.speed=qdr --set fabric.topology=switch -n 20000 "
             "--set hca.atomic_units=2",
             "msg_rate_Mpps"},
            {"host.memory_latency_ns=20` (a fifth of the preset's 100 ns) gives {2.14} Mpps",
             "bw --op atomic_fadd --sizes 8 --mtu 2048 --set link.speed=qdr --set fabric.topology=switch -n 20000 "
             "--set host.memory_latency_ns=20",
             "msg_rate_Mpps"},
            {"still carries {14.0} (`calibrate --preset cx3-fdr --set host.cpu.mmio_store_ns=0`)",
             "bw --op read --sizes 2 --mtu 2048 --set link.speed=qdr --set fabric.topology=switch -n 50000 "
             "--set host.cpu.mmio_store_ns=0",
             "msg_rate_Mpps"},
            // The swarm's sizes (item 9) and the packet engines' pass (item 7).
            {"with the bytes: 11.36, {10.33}, 9.72, 9.53 and 8.88 at 8, 136, 232, 264 and 392 B",
             "swarm --machines 6 --threads 8 --vms 1 --window 16 --sizes 136", "read_rate_Mops_per_machine"},
            {"with the bytes: 11.36, 10.33, {9.72}, 9.53 and 8.88 at 8, 136, 232, 264 and 392 B",
             "swarm --machines 6 --threads 8 --vms 1 --window 16 --sizes 232", "read_rate_Mops_per_machine"},
            {"with the bytes: 11.36, 10.33, 9.72, 9.53 and {8.88} at 8, 136, 232, 264 and 392 B",
             "swarm --machines 6 --threads 8 --vms 1 --window 16 --sizes 392", "read_rate_Mops_per_machine"},
            {"18, 19, 20 and 21 cycles give {12.2}, 11.6, 11.1 and 10.6",
             "swarm --machines 6 --threads 8 --vms 1 --window 16 --sizes 40 --set hca.tx_packet_cycles=18 --set "
             "hca.rx_packet_cycles=18",
             "read_rate_Mops_per_machine"},
            {"18, 19, 20 and 21 cycles give 12.2, 11.6, 11.1 and {10.6}",
             "swarm --machines 6 --threads 8 --vms 1 --window 16 --sizes 40 --set hca.tx_packet_cycles=21 --set "
             "hca.rx_packet_cycles=21",
             "read_rate_Mops_per_machine"},
            {"The `cx4-edr` preset gives {22.2}, 14.5, 2.39 and 1.46 at 140, 280, 560 and 1260 QPs",
             "swarm --preset cx4-edr --machines 11 --threads 14 --vms 1 --sizes 32", "read_rate_Mops_per_machine"},
            {"The `cx4-edr` preset gives 22.2, 14.5, 2.39 and {1.46} at 140, 280, 560 and 1260 QPs",
             "swarm --preset cx4-edr --machines 11 --threads 14 --vms 9 --sizes 32", "read_rate_Mops_per_machine"},
            {"it posts {3.98} Mpps over 64 and 128 QPs and 4.73 from 256 QPs on",
             "msgrate --op write --sizes 64 --post-list 1 --tx-depth 1 -n 100 --qps 128", "msg_rate_Mpps", "qp=total"},
            {"it posts 3.98 Mpps over 64 and 128 QPs and {4.73} from 256 QPs on",
             "msgrate --op write --sizes 64 --post-list 1 --tx-depth 1 -n 100 --qps 1024 --set "
             "hca.blueflame_any_wqe=true",
             "msg_rate_Mpps", "qp=total"},
            // What lifting one limit at a time gives (item 4).
            {"| (none) | {39.2} | one transmit packet engine", cx4_rate, "msg_rate_Mpps", "qp=total"},
            {"| `--set hca.tx_engines=4 --set hca.rx_engines=4` | {55.2} |",
             "msgrate --preset cx4-edr --op write --sizes 64 --qps 1 --threads 16 --post-list 16 -n 2000 --set "
             "hca.tx_engines=4 --set hca.rx_engines=4",
             "msg_rate_Mpps", "qp=total"},
            {"| the row above and `--set pcie.read_tags=64` | {89.5} |",
             "msgrate --preset cx4-edr --op write --sizes 64 --qps 1 --threads 16 --post-list 16 -n 2000 --set "
             "hca.tx_engines=4 --set hca.rx_engines=4 --set pcie.read_tags=64",
             "msg_rate_Mpps", "qp=total"},
            {"--set port.count=2 --dual-port --inline 64` | {99.0} |",
             "msgrate --preset cx4-edr --op write --sizes 64 --qps 1 --threads 16 --post-list 16 -n 2000 --set "
             "hca.tx_engines=8 --set hca.rx_engines=8 --set port.count=2 --dual-port --inline 64",
             "msg_rate_Mpps", "qp=total"},
            {"--set hca.wqe_parse_cycles=4` | {178.4} |",
             "msgrate --preset cx4-edr --op write --sizes 64 --qps 1 --threads 16 --post-list 16 -n 2000 --set "
             "hca.tx_engines=8 --set hca.rx_engines=8 --set port.count=2 --dual-port --inline 64 --set pcie.gen=4 "
             "--set hca.wqe_parse_cycles=4",
             "msg_rate_Mpps", "qp=total"},
            // Cache sizes against the swarm (item 8): the preset's row and the earlier estimate's.
            {"| 68 (the preset) | 11.4 | {8.07} | 2.95 |", "swarm --machines 11 --vms 1", "read_rate_Mops_per_machine"},
            {"| 68 (the preset) | 11.4 | 8.07 | {2.95} | 1.78 |", "swarm --vms 3", "read_rate_Mops_per_machine"},
            {"| 68 (the preset) | 11.4 | 8.07 | 2.95 | {1.78} | 1.35 |", "swarm --vms 5", "read_rate_Mops_per_machine"},
            {"| 68 (the preset) | 11.4 | 8.07 | 2.95 | 1.78 | {1.35} | 1.29 |", "swarm --vms 9",
             "read_rate_Mops_per_machine"},
            {"| 68 (the preset) | 11.4 | 8.07 | 2.95 | 1.78 | 1.35 | {1.29} |", "swarm --vms 15",
             "read_rate_Mops_per_machine"},
            {"| 68 (the preset) | {11.4} | 8.07 |", "swarm --vms 1", "read_rate_Mops_per_machine"},
            {"| 56 | 11.4 | {4.07} | 2.52 |",
             "swarm --machines 11 --vms 1 --set hca.qpc_cache_entries=56 --set hca.cqc_cache_entries=56",
             "read_rate_Mops_per_machine"},
            {"| 72 | 11.4 | {10.61} | 3.29 |",
             "swarm --machines 11 --vms 1 --set hca.qpc_cache_entries=72 --set hca.cqc_cache_entries=72",
             "read_rate_Mops_per_machine"},
            {"| 256 (the earlier estimate) | 11.4 | 11.4 | 11.4 | {11.3} | 4.72 | 2.51 |",
             "swarm --vms 5 --set hca.qpc_cache_entries=256 --set hca.cqc_cache_entries=256",
             "read_rate_Mops_per_machine"},
            {"| 256 (the earlier estimate) | 11.4 | 11.4 | 11.4 | 11.3 | {4.72} | 2.51 |",
             "swarm --vms 9 --set hca.qpc_cache_entries=256 --set hca.cqc_cache_entries=256",
             "read_rate_Mops_per_machine"},
            // The VI presets' design points.
            {"model still gives {114.8} MB/s",
             "bw --preset vi-clan --api kvipl --op send --sizes 65536 -n 300 --set pci.width_bits=32 --set "
             "pci.clock_mhz=33",
             "bw_avg_MBps"},
            {"from 5.79 to {10.51} µs",
             "lat --preset vi-clan --api kvipl --op send --sizes 288 -n 1000 --set pci.width_bits=32 --set "
             "pci.clock_mhz=33",
             "t_typical_us"},
            // KVIPL against verbs.
            {"| send latency, 2 B | {0.94} µs | 2.12 µs |", kvipl_send, "t_typical_us", "bytes=2"},
            {"| send latency, 2 B | 0.94 µs | {2.12} µs |", kvipl_send_vi, "t_typical_us", "bytes=2"},
            {"| send latency, 4 KiB | {3.70} µs | 3.81 µs |", kvipl_send, "t_typical_us", "bytes=4096"},
            {"| send latency, 4 KiB | 3.70 µs | {3.81} µs |", kvipl_send_vi, "t_typical_us", "bytes=4096"},
            {"| send latency, 64 KiB | {12.77} µs | 12.87 µs |", kvipl_send, "t_typical_us", "bytes=65536"},
            {"| send latency, 64 KiB | 12.77 µs | {12.87} µs |", kvipl_send_vi, "t_typical_us", "bytes=65536"},
            {"| RDMA write latency, 2 B | {0.90} µs | 1.94 µs |", "lat --op write --sizes 2", "t_typical_us"},
            {"| RDMA write latency, 2 B | 0.90 µs | {1.94} µs |", "lat --op write --sizes 2 --api kvipl",
             "t_typical_us"},
            {"| RDMA read round trip, 2 B | {1.58} µs | 2.10 µs |", "lat --op read --sizes 2", "t_typical_us"},
            {"| RDMA read round trip, 2 B | 1.58 µs | {2.10} µs |", "lat --op read --sizes 2 --api kvipl",
             "t_typical_us"},
            {"| RDMA write bandwidth, 1 MiB | {6458} MB/s | 6458 MB/s |", "bw --op write --sizes 1048576",
             "bw_avg_MBps"},
            {"| RDMA write bandwidth, 1 MiB | 6458 MB/s | {6458} MB/s |", "bw --op write --sizes 1048576 --api kvipl",
             "bw_avg_MBps"},
            {"| RDMA write message rate, 64 B | {4.6} Mpps | 4.5 Mpps |", "bw --op write --sizes 64 -n 2000",
             "msg_rate_Mpps"},
            {"| RDMA write message rate, 64 B | 4.6 Mpps | {4.5} Mpps |",
             "bw --op write --sizes 64 -n 2000 --api kvipl", "msg_rate_Mpps"},
            {"the verbs 4 KiB send takes {3.14} µs", "lat --op send --sizes 4096 --set hca.blueflame_any_wqe=true",
             "t_typical_us"},
            {"64-byte RDMA writes: {1.7} Mpps with 1 fetch in flight",
             "bw --op write --sizes 64 -n 2000 --api kvipl --set hca.vi_fetch_depth=1", "msg_rate_Mpps"},
            {"{6.9} and 11.8 with the hold off",
             "bw --op write --sizes 64 -n 2000 --api kvipl --set hca.vi_fetch_depth=4 --set host.cpu.mmio_store_ns=0",
             "msg_rate_Mpps"},
            {"6.9 and {11.8} with the hold off",
             "bw --op write --sizes 64 -n 2000 --api kvipl --set hca.vi_fetch_depth=8 --set host.cpu.mmio_store_ns=0",
             "msg_rate_Mpps"},
            {"run at {1290} MB/s unreliable", "bw --api kvipl --op write --sizes 4096 -n 300 -t 1 --reliability ud",
             "bw_avg_MBps"},
            {"(done when the last packet leaves the port), {1209} MB/s reliable delivery",
             "bw --api kvipl --op write --sizes 4096 -n 300 -t 1 --reliability rd", "bw_avg_MBps"},
            {"and {951} MB/s reliable reception", "bw --api kvipl --op write --sizes 4096 -n 300 -t 1 --reliability rr",
             "bw_avg_MBps"},
            // Connection set-up.
            {"| `hcasim connect --connections 100` | {2,783} | 263.7 µs |", "connect --connections 100",
             "connections_per_s"},
            {"| `hcasim connect --connections 100` | 2,783 | {263.7} µs | 263.7 µs | 35.8 µs |",
             "connect --connections 100", "setup_median_us"},
            {"| `hcasim connect --connections 100` | 2,783 | 263.7 µs | {263.7} µs | 35.8 µs |",
             "connect --connections 100", "setup_p99_us"},
            {"| `hcasim connect --connections 100` | 2,783 | 263.7 µs | 263.7 µs | {35.8} µs |",
             "connect --connections 100", "teardown_median_us"},
            {"| `hcasim connect --clients 32 --connections 10` (switch) | {5,738} | 5,682 µs |",
             "connect --clients 32 --connections 10", "connections_per_s"},
            {"| `hcasim connect --clients 32 --connections 10` (switch) | 5,738 | {5,682} µs | 5,682 µs | 36.2 µs |",
             "connect --clients 32 --connections 10", "setup_median_us"},
            {"| `hcasim connect --clients 32 --connections 10` (switch) | 5,738 | 5,682 µs | 5,682 µs | {36.2} µs |",
             "connect --clients 32 --connections 10", "teardown_median_us"},
            {"| `hcasim connect --connections 100 --preset cx4-edr` | {2,793} | 263.3 µs |",
             "connect --connections 100 --preset cx4-edr", "connections_per_s"},
            {"| `hcasim connect --connections 100 --preset cx4-edr` | 2,793 | {263.3} µs | 263.3 µs | 35.6 µs |",
             "connect --connections 100 --preset cx4-edr", "setup_median_us"},
            {"| `hcasim connect --connections 100 --preset cx4-edr` | 2,793 | 263.3 µs | 263.3 µs | {35.6} µs |",
             "connect --connections 100 --preset cx4-edr", "teardown_median_us"},
        });
}

TEST_CASE("docs/calibration.md's context cache figures are what their commands give today", "[docs]") {
    // Apart from the rest of the doc: many QPs, the longest runs under the sanitizers.
    const std::string hold_off =
        "msgrate --op write --sizes 64 --post-list 1 --tx-depth 1 -n 100 --set host.cpu.mmio_store_ns=0";
    check_doc(
        "docs/calibration.md",
        {
            // One posting thread with its store hold off, by the mlx4 rule.
            {"| `--qps 64` | 0 | {8.58} | 0 | 8.58 |", hold_off + " --qps 64", "msg_rate_Mpps", "qp=total"},
            {"| `--qps 128` | {29441} | 5.36 |", hold_off + " --qps 128", "counter node0.hca.qpc_cache.misses"},
            {"| `--qps 128` | 29441 | {5.36} |", hold_off + " --qps 128", "msg_rate_Mpps", "qp=total"},
            {"| `--qps 1024` | 381341 | {1.82} | 114090 | 6.53 |", hold_off + " --qps 1024", "msg_rate_Mpps",
             "qp=total"},
            {"| `--qps 1024` | 381341 | 1.82 | 114090 | {6.53} |",
             hold_off + " --qps 1024 --set hca.blueflame_any_wqe=true", "msg_rate_Mpps", "qp=total"},
            {"| `--qps 256 --set hca.qpc_cache_entries=256` | 0 | {13.06} |",
             hold_off + " --qps 256 --set hca.qpc_cache_entries=256", "msg_rate_Mpps", "qp=total"},
            // Eight posting threads.
            {"| 64 (`--qps 8`) | 0 | {20.50} | 0 | 20.59 |",
             "msgrate --threads 8 --qps 8 --post-list 1 --tx-depth 1 -n 50", "msg_rate_Mpps", "qp=total"},
            {"| 128 (`--qps 16`) | {17342} | 3.07 |", "msgrate --threads 8 --qps 16 --post-list 1 --tx-depth 1 -n 50",
             "counter node0.hca.qpc_cache.misses"},
            {"| 1024 (`--qps 128`) | 190985 | 1.82 | 78042 | {4.59} |",
             "msgrate --threads 8 --qps 128 --post-list 1 --tx-depth 1 -n 50 --set hca.blueflame_any_wqe=true",
             "msg_rate_Mpps", "qp=total"},
            // bench's 1024-QP stream, through bw with the same QPs, depth and messages.
            {"holds at most {33280} B in its 64 KiB receive buffer",
             "bw --op write --sizes 4096 --mtu 4096 --qps 1024 --tx-depth 16 -n 195",
             "counter node1.hca.port.rx_buffer_peak_bytes"},
            {"16 -n 195 --counters`: {199208} misses for 199680 packets",
             "bw --op write --sizes 4096 --mtu 4096 --qps 1024 --tx-depth 16 -n 195",
             "counter node1.hca.qpc_cache.misses"},
        });
}

TEST_CASE("docs/architecture.md quotes what its commands give today", "[docs]") {
    const char* mixed = "lat --op write --sizes 2,4096,65536 --set node1.preset=cx4-edr";
    const char* cx3 = "lat --op write --sizes 2,4096,65536 --preset cx3-fdr";
    const char* cx4 = "lat --op write --sizes 2,4096,65536 --preset cx4-edr --set link.speed=fdr";
    const char* lossy = "bw --op read --sizes 1024,4096,65536 -n 3000 --set fault.drop=0.01";
    const char* corrupt = "bw --op read --sizes 1024,4096,65536 -n 3000 --mtu 1024 --set fault.corrupt=0.01";
    check_doc(
        "docs/architecture.md",
        {
            {"gives {0.870}, 3.087 and 12.155 µs at 2 B, 4 KiB and 64 KiB", mixed, "t_typical_us", "bytes=2"},
            {"gives 0.870, {3.087} and 12.155 µs", mixed, "t_typical_us", "bytes=4096"},
            {"gives 0.870, 3.087 and {12.155} µs", mixed, "t_typical_us", "bytes=65536"},
            {"own {0.900}, 3.670 and 12.732", cx3, "t_typical_us", "bytes=2"},
            {"own 0.900, {3.670} and 12.732", cx3, "t_typical_us", "bytes=4096"},
            {"own 0.900, 3.670 and {12.732}", cx3, "t_typical_us", "bytes=65536"},
            {"and {0.835}, 2.505 and 11.570", cx4, "t_typical_us", "bytes=2"},
            {"and 0.835, {2.505} and 11.570", cx4, "t_typical_us", "bytes=4096"},
            {"and 0.835, 2.505 and {11.570}", cx4, "t_typical_us", "bytes=65536"},
            // perftest through hcasim run against hcasim lat and bw (ports of their own).
            {"`ib_write_bw -s 65536`: {6412.62} MB/s against 6412.62",
             "run --node 'ib_write_bw -p 18711 -s 65536' --node 'ib_write_bw -p 18711 -s 65536 node0'", "perftest 3"},
            {"`ib_write_bw -s 65536`: 6412.62 MB/s against {6412.62}", "bw --sizes 65536 --mtu 2048 -n 5000",
             "bw_avg_MBps"},
            {"`ib_send_bw -s 65536`: {6412.34} against 6412.33",
             "run --node 'ib_send_bw -p 18712 -s 65536' --node 'ib_send_bw -p 18712 -s 65536 node0'", "perftest 3"},
            {"`ib_send_bw -s 65536`: 6412.34 against {6412.33}", "bw --op send --sizes 65536 --mtu 2048",
             "bw_avg_MBps"},
            {"`ib_send_lat -s 64`: {0.96} against 0.96 µs",
             "run --node 'ib_send_lat -p 18713 -s 64' --node 'ib_send_lat -p 18713 -s 64 node0'", "perftest 4"},
            {"`ib_send_lat -s 64`: 0.96 against {0.96} µs", "lat --op send --sizes 64 --mtu 2048", "t_typical_us"},
            {"`ib_write_lat -s 64`: {0.92} against 0.93",
             "run --node 'ib_write_lat -p 18714 -s 64' --node 'ib_write_lat -p 18714 -s 64 node0'", "perftest 4"},
            {"`ib_write_lat -s 64`: 0.92 against {0.93}", "lat --op write --sizes 64 --mtu 2048", "t_typical_us"},
            {"`ib_read_lat -s 64`: {1.60} against 1.60",
             "run --node 'ib_read_lat -p 18715 -s 64' --node 'ib_read_lat -p 18715 -s 64 node0'", "perftest 4"},
            {"`ib_read_lat -s 64`: 1.60 against {1.60}", "lat --op read --sizes 64 --mtu 2048", "t_typical_us"},
            {"`ib_atomic_lat`: {2.18} against 2.21",
             "run --node 'ib_atomic_lat -p 18716' --node 'ib_atomic_lat -p 18716 node0'", "perftest 4"},
            {"`ib_atomic_lat`: 2.18 against {2.21}", "lat --op atomic_fadd --mtu 2048", "t_typical_us"},
            {"`ib_atomic_bw`: {1.81} Mpps against 1.81",
             "run --node 'ib_atomic_bw -p 18717' --node 'ib_atomic_bw -p 18717 node0'", "perftest 4"},
            {"`ib_atomic_bw`: 1.81 Mpps against {1.81}", "bw --op atomic_fadd --mtu 2048", "msg_rate_Mpps"},
            {"`ib_read_bw -s 64`: {4.61} against 4.59",
             "run --node 'ib_read_bw -p 18718 -s 64' --node 'ib_read_bw -p 18718 -s 64 node0'", "perftest 4"},
            {"`ib_read_bw -s 64`: 4.61 against {4.59}", "bw --op read --sizes 64 --mtu 2048", "msg_rate_Mpps"},
            {"the host's posting and clock reads: {4.61} against 4.59",
             "run --set hca.atomic_units=0 --set hca.blueflame_any_wqe=true --node 'ib_atomic_bw -p 18719' --node "
             "'ib_atomic_bw -p 18719 node0'",
             "perftest 4"},
            {"the host's posting and clock reads: 4.61 against {4.59}",
             "bw --op atomic_fadd --mtu 2048 --set hca.atomic_units=0 --set hca.blueflame_any_wqe=true",
             "msg_rate_Mpps"},
            {"gives {5.07} Mpps instead of 4.59",
             "bw --op atomic_fadd --mtu 2048 --set hca.atomic_units=0 --set hca.blueflame_any_wqe=true --set "
             "host.cpu.clock_read_ns=0.25",
             "msg_rate_Mpps"},
            // Lossy READs.
            {"The same runs now meet {2} ACK timeouts", lossy, "counter node0.hca.completer.ack_timeouts"},
            {"with {95,318} READs executed again", lossy, "counter node1.hca.responder.duplicate_reads"},
            {"and give {43.0}, 167.9 and 4778 MB/s", lossy, "bw_avg_MBps", "bytes=1024"},
            {"and give 43.0, {167.9} and 4778 MB/s", lossy, "bw_avg_MBps", "bytes=4096"},
            {"and give 43.0, 167.9 and {4778} MB/s", lossy, "bw_avg_MBps", "bytes=65536"},
            {"with corruption, no timeout and {1372} and 2361 MB/s at 4 and 64 KiB", corrupt, "bw_avg_MBps",
             "bytes=4096"},
            {"with corruption, no timeout and 1372 and {2361} MB/s at 4 and 64 KiB", corrupt, "bw_avg_MBps",
             "bytes=65536"},
        });
}

TEST_CASE("docs/timing-parameters.md quotes what its commands give today", "[docs]") {
    const char* mcast = "mcast --sizes 2,4096";
    const char* mcast_switch = "mcast --sizes 2,4096 --set fabric.topology=switch --set fabric.nodes=16";
    check_doc(
        "docs/timing-parameters.md",
        {
            {"`hcasim swarm` then gives {11.1}, 8.07, 2.95, 1.78, 1.35 and 1.29",
             "swarm --machines 6 --threads 8 --vms 1 --window 16 --sizes 40", "read_rate_Mops_per_machine"},
            {"`hcasim swarm` then gives 11.1, {8.07}, 2.95", "swarm --machines 11 --vms 1",
             "read_rate_Mops_per_machine"},
            {"`hcasim swarm` then gives 11.1, 8.07, 2.95, 1.78, 1.35 and {1.29}", "swarm --vms 15",
             "read_rate_Mops_per_machine"},
            {"56 entries fall too early ({4.07} at 80 QPs, 2.52 at 120)",
             "swarm --machines 11 --vms 1 --set hca.qpc_cache_entries=56 --set hca.cqc_cache_entries=56",
             "read_rate_Mops_per_machine"},
            {"64 a little early (6.25 and {2.75})",
             "swarm --vms 3 --set hca.qpc_cache_entries=64 --set hca.cqc_cache_entries=64",
             "read_rate_Mops_per_machine"},
            {"256 not before 256 QPs ({11.3} at 200)",
             "swarm --vms 5 --set hca.qpc_cache_entries=256 --set hca.cqc_cache_entries=256",
             "read_rate_Mops_per_machine"},
            {"16 of them give 5-18 % more ({3.09} at 120 QPs, 1.59 at 360)",
             "swarm --vms 3 --set hca.context_fill_slots=16", "read_rate_Mops_per_machine"},
            {"16 of them give 5-18 % more (3.09 at 120 QPs, {1.59} at 360)",
             "swarm --vms 9 --set hca.context_fill_slots=16", "read_rate_Mops_per_machine"},
            {"4 give 16-20 % less ({2.38}, 1.13)", "swarm --vms 3 --set hca.context_fill_slots=4",
             "read_rate_Mops_per_machine"},
            {"`hcasim msgrate --threads 8 --qps 4` measures ({20.71} and 39.5 Mpps)", "msgrate --threads 8 --qps 4",
             "msg_rate_Mpps", "qp=total"},
            {"`hcasim msgrate --threads 8 --qps 4` measures (20.71 and {39.5} Mpps)",
             "msgrate --threads 8 --qps 4 --preset cx4-edr", "msg_rate_Mpps", "qp=total"},
            {"hca.rx_engines=3`: {47.8} Mpps; two engines give 41.1)",
             "msgrate --threads 8 --qps 4 --set hca.tx_engines=3 --set hca.rx_engines=3", "msg_rate_Mpps", "qp=total"},
            {"hca.rx_engines=3`: 47.8 Mpps; two engines give {41.1})",
             "msgrate --threads 8 --qps 4 --set hca.tx_engines=2 --set hca.rx_engines=2", "msg_rate_Mpps", "qp=total"},
            {"(KVIPL send latency at 4 B: {6.74} and 4.94 µs)", "lat --preset vi-pci66 --api kvipl --op send --sizes 4",
             "t_typical_us"},
            {"(KVIPL send latency at 4 B: 6.74 and {4.94} µs)",
             "lat --preset vi-pci66 --api kvipl --op send --sizes 4 --set hca.core_clock_mhz=200", "t_typical_us"},
            {"measures a typical {0.97} µs (2 B) and 3.74 µs (4096 B)", mcast, "t_typical_us", "bytes=2"},
            {"measures a typical 0.97 µs (2 B) and {3.74} µs (4096 B)", mcast, "t_typical_us", "bytes=4096"},
            {"{1.14} and 3.92 µs through the switch to each of 15 receivers", mcast_switch, "t_typical_us",
             "bytes=2,receiver=node15"},
            {"1.14 and {3.92} µs through the switch to each of 15 receivers", mcast_switch, "t_typical_us",
             "bytes=4096,receiver=node15"},
            {"against {0.95} and 3.74 µs back to back for `hcasim lat --qp-type ud`", "lat --qp-type ud --sizes 2,4096",
             "t_typical_us", "bytes=2"},
            {"against 0.95 and {3.74} µs back to back for `hcasim lat --qp-type ud`", "lat --qp-type ud --sizes 2,4096",
             "t_typical_us", "bytes=4096"},
            {"each receiver gets {5997} MB/s (MB = 2^20 B) at 4096 B", mcast, "bw_avg_MBps", "bytes=4096"},
        });
}

TEST_CASE("README.md and docs/sweeps-and-plots.md quote what their commands give today", "[docs]") {
    check_doc(
        "README.md",
        {
            {"64 KiB writes give {11538} MB/s against 6454 one way", "bw --bidirectional --sizes 65536", "bw_avg_MBps"},
            {"64 KiB writes give 11538 MB/s against {6454} one way", "bw --sizes 65536", "bw_avg_MBps"},
            {"(`--set pcie.lanes=16` gives {12902})", "bw --bidirectional --sizes 65536 --set pcie.lanes=16",
             "bw_avg_MBps"},
        });
    check_doc("docs/sweeps-and-plots.md",
              {
                  {"gives {8661} MB/s with room for one 4 KiB packet",
                   "bw --preset cx4-edr --sizes 4096 -n 400 --set port.vl_buffer_bytes=4224", "bw_avg_MBps"},
                  {"and {11539}-11546 MB/s from two packets' worth (8320 B) on",
                   "bw --preset cx4-edr --sizes 4096 -n 400 --set port.vl_buffer_bytes=8320", "bw_avg_MBps"},
                  {"and 11539-{11546} MB/s from two packets' worth (8320 B) on",
                   "bw --preset cx4-edr --sizes 4096 -n 400 --set port.vl_buffer_bytes=65536", "bw_avg_MBps"},
              });
}
