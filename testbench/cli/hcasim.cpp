// The hcasim command: runs the default scenario, the perftest-style latency
// and bandwidth workloads, the simulator benchmark, and lists parameters.
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "testbench/system/isolated.hpp"
#include "testbench/system/system.hpp"
#include "testbench/workloads/kvipl_perftest.hpp"
#include "testbench/workloads/perftest.hpp"

namespace po = boost::program_options;
using namespace hcasim;
using namespace hcasim::testbench;

namespace {

const char* kUsage = R"(usage: hcasim [COMMAND] [OPTIONS]

Commands:
  (none), run   default scenario: RDMA WRITE latency and bandwidth between two
                simulated ConnectX-3-class FDR 4x HCAs on PCIe Gen3 x8
  lat           latency per message size (perftest ib_*_lat columns)
  bw            bandwidth and message rate per size (perftest ib_*_bw columns)
  bench         simulator speed: simulated packets per wall second, 1 and 1024 QPs;
                with --dma rtl: co-simulation speed of the RTL DMA engine (RTL
                cycles per wall second) and the wall-time ratio of the same
                bandwidth run with the RTL and with the SystemC DMA engine
  params        every configuration parameter: unit, default, range, source
  presets       the device presets

Options)";

struct Cli {
    std::string command = "run";
    std::string op = "write";
    std::string api = "verbs";
    std::string reliability = "rd";
    std::string sizes;
    int iters = 0;
    int tx_depth = 128;
    int qps = 1;
    int mtu = 4096;
    int inline_max = -1;
    std::string format = "text";
    std::string preset = "cx3-fdr";
    std::string config_file;
    std::vector<std::string> sets;
    bool counters = false;
    std::string vcd;
    std::string dma = "tlm";
};

sim::Config make_config(const Cli& c) {
    sim::Config cfg;
    cfg.load_preset(c.preset);
    if (!c.config_file.empty()) cfg.load_file(c.config_file);
    for (const auto& s : c.sets) cfg.set_assignment(s);
    if (!c.vcd.empty()) {
        if (cfg.get_choice("hca.dma.impl") != "rtl")
            throw sim::ConfigError("--vcd " + c.vcd + " records the RTL DMA engine: add --set hca.dma.impl=rtl");
        cfg.set("hca.dma.vcd", c.vcd);
    }
    return cfg;
}

RunInfo info_for(const Cli& c, const sim::Config& cfg, const std::string& title) {
    RunInfo info;
    info.title = title;
    info.op = c.op;
    info.settings.emplace_back("preset", c.preset);
    info.settings.emplace_back("api", c.api);
    if (c.api == "kvipl") info.settings.emplace_back("VI reliability", c.reliability);
    info.settings.emplace_back("link", cfg.raw("link.speed") + " " + cfg.raw("link.width") + "x");
    info.settings.emplace_back("pcie", "gen" + cfg.raw("pcie.gen") + " x" + cfg.raw("pcie.lanes"));
    info.settings.emplace_back("topology", cfg.raw("fabric.topology"));
    info.settings.emplace_back("path MTU", std::to_string(c.mtu));
    for (const auto& [k, v] : cfg.overrides()) info.settings.emplace_back(k, v);
    return info;
}

std::string title(const std::string& op, bool lat) {
    std::string t = op == "send" ? "Send" : op == "write" ? "RDMA Write" : "RDMA Read";
    return t + (lat ? " Latency Test" : " BW Test");
}

int vi_reliability(const Cli& c) {
    if (c.reliability == "ud") return 1;
    if (c.reliability == "rd") return 2;
    if (c.reliability == "rr") return 4;
    throw std::invalid_argument("unknown --reliability '" + c.reliability + "': expected ud, rd or rr");
}

bool api_is_kvipl(const Cli& c) {
    if (c.api == "verbs") {
        if (c.reliability != "rd") throw std::invalid_argument("--reliability applies to --api kvipl only");
        return false;
    }
    if (c.api != "kvipl") throw std::invalid_argument("unknown --api '" + c.api + "': expected verbs or kvipl");
    // VIs use the port's MTU and have no inline data: say so rather than ignore.
    if (c.mtu != 4096) throw std::invalid_argument("--mtu does not apply to --api kvipl (VIs use the port's MTU, port.max_mtu)");
    if (c.inline_max >= 0) throw std::invalid_argument("--inline does not apply to --api kvipl (VI descriptors carry no inline data)");
    return true;
}

int cmd_lat(const Cli& c, std::ostream& os) {
    const sim::Config cfg = make_config(c);
    LatencyOptions o;
    o.op = parse_op(c.op);
    o.sizes = parse_sizes(c.sizes.empty() ? "2:8388608" : c.sizes);
    o.iterations = c.iters > 0 ? c.iters : 1000;
    o.mtu = c.mtu;
    if (c.inline_max >= 0) o.inline_max = static_cast<std::uint32_t>(c.inline_max);
    if (o.inline_max > static_cast<std::uint32_t>(cfg.get_int("hca.max_inline")))
        o.inline_max = static_cast<std::uint32_t>(cfg.get_int("hca.max_inline"));
    const Format f = parse_format(c.format);
    o.vi_reliability = vi_reliability(c);
    const bool kvipl = api_is_kvipl(c);
    System sys(cfg);
    const auto rows = kvipl ? run_latency_kvipl(sys, o) : run_latency(sys, o);
    print_latency(os, f, info_for(c, cfg, title(c.op, true)), rows);
    if (c.counters) os << sys.counters();
    return 0;
}

int cmd_bw(const Cli& c, std::ostream& os) {
    const sim::Config cfg = make_config(c);
    BandwidthOptions o;
    o.op = parse_op(c.op);
    o.sizes = parse_sizes(c.sizes.empty() ? "2:8388608" : c.sizes);
    o.iterations = c.iters > 0 ? c.iters : 1000;
    o.tx_depth = c.tx_depth;
    o.qps = c.qps;
    o.mtu = c.mtu;
    if (c.inline_max >= 0) o.inline_max = static_cast<std::uint32_t>(c.inline_max);
    if (o.tx_depth < 1 || o.tx_depth > 16384) throw std::invalid_argument("invalid --tx-depth: expected 1 to 16384");
    if (o.qps < 1 || o.qps > 65536) throw std::invalid_argument("invalid --qps: expected 1 to 65536");
    const Format f = parse_format(c.format);
    o.vi_reliability = vi_reliability(c);
    const bool kvipl = api_is_kvipl(c);
    System sys(cfg);
    const auto rows = kvipl ? run_bandwidth_kvipl(sys, o) : run_bandwidth(sys, o);
    RunInfo info = info_for(c, cfg, title(c.op, false));
    info.settings.emplace_back("QPs", std::to_string(o.qps));
    info.settings.emplace_back("TX depth", std::to_string(o.tx_depth));
    print_bandwidth(os, f, info, rows);
    if (c.counters) os << sys.counters();
    return 0;
}

// Each part of a multi-part command runs in its own process: SystemC builds
// one design per process.
int in_child(const std::function<void(std::ostream&)>& fn) {
    const IsolatedResult r = run_isolated(fn);
    std::cout << r.output << std::flush;
    if (!r.ok) {
        std::cerr << "hcasim: error: " << r.error << "\n";
        return 1;
    }
    return 0;
}

int cmd_run(Cli c) {
    make_config(c);  // a bad parameter stops here, before anything runs
    std::cout << "hcasim default scenario: two nodes, ConnectX-3-class FDR 4x HCAs on PCIe Gen3 x8, back to back\n"
                 "(every figure below is simulated time from the hardware model)\n\n";
    Cli lat = c;
    lat.op = "write";
    if (lat.sizes.empty()) lat.sizes = "2:65536";
    if (lat.iters == 0) lat.iters = 1000;
    int rc = in_child([&](std::ostream& os) { cmd_lat(lat, os); });
    if (rc) return rc;
    std::cout << "\n";
    Cli bw = c;
    bw.op = "write";
    if (bw.sizes.empty()) bw.sizes = "2:1048576";
    if (bw.iters == 0) bw.iters = 1000;
    return in_child([&](std::ostream& os) { cmd_bw(bw, os); });
}

// The same bandwidth run with the SystemC and with the RTL DMA engine, each
// in its own process: the wall-time ratio, and the RTL's cycles per wall
// second (clocked cycles of every engine instance over the RTL run's wall time).
int cmd_bench_rtl(const Cli& c) {
    make_config(c);
    nlohmann::json runs = nlohmann::json::array();
    for (const char* impl : {"tlm", "rtl"}) {
        const IsolatedResult r = run_isolated([&](std::ostream& os) {
            sim::Config cfg = make_config(c);
            cfg.set("hca.dma.impl", impl);
            BandwidthOptions o;
            o.op = Op::Write;
            o.sizes = {static_cast<std::uint32_t>(c.sizes.empty() ? 65536 : parse_sizes(c.sizes).front())};
            o.qps = 1;
            o.tx_depth = 128;
            o.iterations = c.iters > 0 ? c.iters : 20000;
            o.mtu = 4096;
            System sys(cfg);
            timespec c0{}, c1{};
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
            const auto rows = run_bandwidth(sys, o);
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
            nlohmann::json j;
            j["dma"] = impl;
            j["cpu_seconds"] = static_cast<double>(c1.tv_sec - c0.tv_sec) + 1e-9 * static_cast<double>(c1.tv_nsec - c0.tv_nsec);
            j["message_bytes"] = o.sizes.front();
            j["messages"] = o.iterations;
            j["wall_seconds"] = rows[0].wall_seconds;
            j["sim_bw_avg_MBps"] = rows[0].bw_avg_MBps;
            if (std::string(impl) == "rtl") {
                std::uint64_t clocked = 0, elapsed = 0;
                for (const char* n : {"node0", "node1"}) {
                    clocked += sys.counter(std::string(n) + ".hca.dma_engine.rtl_clocked_cycles");
                    elapsed += sys.counter(std::string(n) + ".hca.dma_engine.rtl_elapsed_cycles");
                }
                j["rtl_clocked_cycles"] = clocked;
                j["rtl_cycles_with_work"] = elapsed;
            }
            os << j.dump();
        });
        if (!r.ok) {
            std::cerr << "hcasim: error: " << r.error << "\n";
            return 1;
        }
        runs.push_back(nlohmann::json::parse(r.output));
    }
    const double tlm = runs[0]["wall_seconds"].get<double>();
    const double rtl = runs[1]["wall_seconds"].get<double>();
    nlohmann::json out;
    out["bench"] = "rtl_dma_cosim_rc_write_bw";
    out["rtl_cycles_per_wall_second"] = static_cast<double>(runs[1]["rtl_clocked_cycles"].get<std::uint64_t>()) / rtl;
    out["wall_ratio_rtl_vs_tlm"] = rtl / tlm;
    // The CPU-time ratio does not depend on what else the machine runs.
    out["cpu_ratio_rtl_vs_tlm"] = runs[1]["cpu_seconds"].get<double>() / runs[0]["cpu_seconds"].get<double>();
    out["runs"] = runs;
    std::cout << out.dump() << "\n";
    return 0;
}

int cmd_bench(const Cli& c) {
    if (c.dma == "rtl") return cmd_bench_rtl(c);
    if (c.dma != "tlm") throw std::invalid_argument("invalid --dma '" + c.dma + "': expected tlm or rtl");
    make_config(c);
    nlohmann::json results = nlohmann::json::array();
    for (int qps : {1, 1024}) {
        const IsolatedResult r = run_isolated([&](std::ostream& os) {
            sim::Config cfg = make_config(c);
            BandwidthOptions o;
            o.op = Op::Write;
            o.sizes = {static_cast<std::uint32_t>(c.sizes.empty() ? 4096 : parse_sizes(c.sizes).front())};
            o.qps = qps;
            o.tx_depth = qps == 1 ? 128 : 16;
            o.cq_mod = qps == 1 ? 32 : 16;
            o.iterations = c.iters > 0 ? c.iters : 200000;
            o.mtu = 4096;
            System sys(cfg);
            const auto rows = run_bandwidth(sys, o);
            const std::uint64_t packets =
                sys.counter("node0.hca.port.tx_packets") + sys.counter("node1.hca.port.tx_packets");
            const std::uint64_t data_packets = sys.counter("node0.hca.tx_transport.request_packets");
            nlohmann::json j;
            j["qps"] = qps;
            j["message_bytes"] = o.sizes.front();
            j["messages"] = o.iterations;
            j["packets"] = packets;
            j["data_packets"] = data_packets;
            j["wall_seconds"] = rows[0].wall_seconds;
            j["packets_per_wall_second"] = static_cast<double>(packets) / rows[0].wall_seconds;
            j["wall_us_per_packet"] = rows[0].wall_seconds * 1e6 / static_cast<double>(packets);
            j["sim_bw_avg_MBps"] = rows[0].bw_avg_MBps;
            os << j.dump();
        });
        if (!r.ok) {
            std::cerr << "hcasim: error: " << r.error << "\n";
            return 1;
        }
        results.push_back(nlohmann::json::parse(r.output));
    }
    nlohmann::json out;
    out["bench"] = "rc_write_stream_mtu4096";
    out["packets_per_wall_second"] = results[0]["packets_per_wall_second"];
    out["wall_us_per_packet"] = results[0]["wall_us_per_packet"];
    out["wall_per_packet_ratio_1024qp_vs_1qp"] =
        results[1]["wall_us_per_packet"].get<double>() / results[0]["wall_us_per_packet"].get<double>();
    out["runs"] = results;
    std::cout << out.dump() << "\n";
    return 0;
}

int cmd_params(const Cli& c) {
    const auto& all = sim::parameters().all();
    if (c.format == "md") {
        std::cout << "| key | unit | default | allowed | meaning | source of the default |\n|---|---|---|---|---|---|\n";
    }
    for (const auto& s : all) {
        std::string allowed;
        if (s.kind == sim::ParamSpec::Kind::Bool) allowed = "true, false";
        else if (s.kind == sim::ParamSpec::Kind::Text) allowed = "text";
        else if (!s.choices.empty()) {
            for (const auto& ch : s.choices) allowed += (allowed.empty() ? "" : ", ") + ch;
        } else {
            auto num = [](double v) {
                char b[32];
                if (v == static_cast<double>(static_cast<long long>(v))) std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
                else std::snprintf(b, sizeof b, "%g", v);
                return std::string(b);
            };
            allowed = num(s.min) + " .. " + num(s.max);
        }
        if (c.format == "md")
            std::cout << "| `" << s.key << "` | " << s.unit << " | " << s.default_value << " | " << allowed << " | "
                      << s.doc << " | " << s.source << " |\n";
        else
            std::cout << s.key << " = " << s.default_value << (s.unit.empty() ? "" : " " + s.unit) << "  [" << allowed
                      << "]  " << s.doc << "\n";
    }
    return 0;
}

}  // namespace

// SystemC prints a banner when its kernel starts unless told not to; the
// command's output is for people and scripts, so it is switched off first.
int main(int argc, char** argv) {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
    return sc_core::sc_elab_and_sim(argc, argv);
}

int sc_main(int argc, char** argv) {
    Cli c;
    po::options_description opts(kUsage);
    opts.add_options()("help,h", "this text")
        ("op", po::value(&c.op), "lat/bw: send, write or read (default write)")
        ("api", po::value(&c.api), "lat/bw: the host API the workload uses, verbs or kvipl (default verbs)")
        ("reliability", po::value(&c.reliability), "--api kvipl: VI reliability level ud, rd or rr (default rd)")
        ("sizes", po::value(&c.sizes), "message sizes: LO:HI (powers of two), N, or N,M,... (default 2:8388608)")
        ("iters,n", po::value(&c.iters), "iterations per size (default 1000)")
        ("tx-depth,t", po::value(&c.tx_depth), "bw: outstanding work requests per QP (default 128)")
        ("qps,q", po::value(&c.qps), "bw: number of QPs (default 1)")
        ("mtu,m", po::value(&c.mtu), "path MTU in bytes (default 4096)")
        ("inline,I", po::value(&c.inline_max), "largest message sent inline (lat default 220, bw default 0)")
        ("format,f", po::value(&c.format), "text, csv or json (params: text or md)")
        ("preset,p", po::value(&c.preset), "device preset name or file (default cx3-fdr)")
        ("config,c", po::value(&c.config_file), "INI file of parameter overrides")
        ("set,s", po::value(&c.sets), "override one parameter: --set pcie.lanes=16 (repeatable)")
        ("counters", po::bool_switch(&c.counters), "print the hardware counters after the run")
        ("vcd", po::value(&c.vcd), "with --set hca.dma.impl=rtl: write VCD waveforms of the RTL DMA engine "
                                    "(FILE's stem + .<engine>.ch<k>.vcd per engine instance)")
        ("dma", po::value(&c.dma), "bench: tlm (default) or rtl (RTL co-simulation speed and wall ratio)");
    po::options_description hidden;
    hidden.add_options()("command", po::value(&c.command));
    po::options_description all;
    all.add(opts).add(hidden);
    po::positional_options_description pos;
    pos.add("command", 1);
    try {
        po::variables_map vm;
        po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
        po::notify(vm);
        if (vm.count("help")) {
            std::cout << opts << "\n";
            return 0;
        }
        if (c.command == "run") return cmd_run(c);
        if (c.command == "lat") return cmd_lat(c, std::cout);
        if (c.command == "bw") return cmd_bw(c, std::cout);
        if (c.command == "bench") return cmd_bench(c);
        if (c.command == "params") return cmd_params(c);
        if (c.command == "presets") {
            for (const auto& p : sim::Config::preset_names()) std::cout << p << "\n";
            return 0;
        }
        std::cerr << "hcasim: error: unknown command '" << c.command << "' (run, lat, bw, bench, params, presets)\n";
        return 2;
    } catch (const po::error& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    } catch (const sim::ConfigError& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    } catch (const std::invalid_argument& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 1;
    }
}
