// The hcasim command: runs the default scenario, the perftest-style latency
// and bandwidth workloads, the simulator benchmark, and lists parameters.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "host/remote/tsc_reads.hpp"
#include "model/hca/hca_params.hpp"
#include "model/sim/tracer.hpp"
#include "testbench/cli/calibrate.hpp"
#include "testbench/cli/cli_input.hpp"
#include "testbench/cli/reference_points.hpp"
#include "testbench/cli/sweep_command.hpp"
#include "testbench/system/isolated.hpp"
#include "testbench/system/system.hpp"
#include "testbench/workloads/connect.hpp"
#include "testbench/workloads/kvipl_perftest.hpp"
#include "testbench/workloads/multicast.hpp"
#include "testbench/workloads/perftest.hpp"
#include "testbench/workloads/programs.hpp"
#include "testbench/workloads/swarm.hpp"

namespace po = boost::program_options;
using namespace hcasim;
using namespace hcasim::testbench;

namespace {

// The host bus of a configuration: its kind and what the report header
// says of it (the PCIe generation and width, or the PCI bus width and clock).
std::pair<std::string, std::string> host_bus(const sim::Config& cfg) {
    if (cfg.get_choice("host.bus") == "pci")
        return {"pci", cfg.raw("pci.width_bits") + "-bit " + cfg.raw("pci.clock_mhz") + " MHz"};
    return {"pcie", "gen" + cfg.raw("pcie.gen") + " x" + cfg.raw("pcie.lanes")};
}

// A report header value followed by the nodes whose own value differs:
// "gen3 x8 (node1: gen3 x16, node2: gen3 x4)".
std::string with_node_values(const std::string& value, const std::vector<std::pair<int, std::string>>& nodes) {
    std::string out = value;
    for (std::size_t i = 0; i < nodes.size(); ++i)
        out += (i == 0 ? " (" : ", ") + ("node" + std::to_string(nodes[i].first) + ": ") + nodes[i].second;
    return nodes.empty() ? out : out + ")";
}

// The report header's line for the host bus, with each node whose bus
// differs from the class-wide one named after it.
void add_host_bus_setting(RunInfo& info, const sim::Config& cfg) {
    const auto [kind, text] = host_bus(cfg);
    std::vector<std::pair<int, std::string>> nodes;
    for (int i = 0; i <= cfg.highest_node(); ++i) {
        const auto [k, t] = host_bus(cfg.for_node(i));
        if (k != kind || t != text) nodes.emplace_back(i, k == kind ? t : k + " " + t);
    }
    info.settings.emplace_back(kind, with_node_values(text, nodes));
}

// The report header's preset line, with each node of another preset
// (nodeN.preset) named after it.
void add_preset_setting(RunInfo& info, const std::string& preset, const sim::Config& cfg) {
    std::vector<std::pair<int, std::string>> nodes;
    for (int i = 0; i <= cfg.highest_node(); ++i)
        if (const std::string own = cfg.node_preset(i); !own.empty()) nodes.emplace_back(i, own);
    info.settings.emplace_back("preset", with_node_values(preset, nodes));
}

const char* kUsage = R"(usage: hcasim [COMMAND] [OPTIONS]

Commands:
  (none), run   default scenario: RDMA WRITE latency and bandwidth between two
                simulated ConnectX-3-class FDR 4x HCAs on PCIe Gen3 x8
  run --node CMD [--node CMD ...]
                unmodified RDMA programs (ibv_rc_pingpong, perftest, ...), one
                per simulated node, each a process of its own whose verbs calls
                run on its node's adapter model and whose clocks read simulated
                time; their output is printed behind their node's name
  lat           latency per message size (perftest ib_*_lat columns)
  bw            bandwidth and message rate per size (perftest ib_*_bw columns)
  msgrate       message rate of small messages over many QPs with post lists:
                per QP and in all (simulated Mpps), and the simulator's speed
  mcast         UD multicast: node 0 sends to a group every other node joined
                (fabric.nodes nodes; more than 2 need fabric.topology=switch);
                latency and bandwidth of each receiver
  swarm         small RDMA READs all to all, as the rc-swarm benchmark: --machines
                nodes behind a switch, --threads workers each, every worker
                with a QP to the same worker of every other machine per
                --vms emulated machine and --window READs in flight; READs
                per second per machine against its active QPs (the context
                caches' cliff)
  connect       rdma_cm connection set-up: --clients nodes each connect
                --connections times to node 0 (through the switch when more
                than one), send a message and disconnect; connections per
                simulated second and set-up latency percentiles
  bench         simulator speed: simulated packets per wall second, 1 and 1024 QPs,
                and 1 QP with 1% of packets dropped on every link;
                with --dma rtl: co-simulation speed of the RTL DMA engine (RTL
                cycles per wall second) and the wall-time ratio of the same
                bandwidth run with the RTL and with the SystemC DMA engine
  params        every configuration parameter: unit, default, range, source;
                (per node): a node may have its own value, --set nodeN.KEY=VALUE
  presets       the device presets: description, the parameters each sets, and
                the published facts and reference points behind it (--format md:
                docs/reference-points.md)
  calibrate     runs the reference points of a preset (published measurements,
                testbench/configs/reference_points.json) on the model, one
                process per point, and prints published, measured, unit, ratio
                and source; without --preset every preset of the model that has
                points; --check: exit status 1 when a point is more than 10%
                off; --config FILE, --set KEY=VALUE: a design point, every
                point run with it (but where the point's own measurement sets
                the key)
  sweep --param KEY=V1,V2,... [--param ...] [--jobs N] [--out FILE] -- WORKLOAD ...
                WORKLOAD (lat, bw, msgrate, mcast, swarm or calibrate and its
                options) once per combination of the parameters' values,
                --jobs processes at once, shared among the ranks under mpirun;
                one table, CSV or JSON by FILE's extension (hcasim sweep --help)
  plot --out FIGURE.png|FIGURE.svg FILE...
                lat, bw and sweep results against message size, or the
                model against published figures (calibrate --format csv),
                drawn with matplotlib (hcasim plot --help)

Options)";

// More iterations than this would only exhaust memory: every iteration
// keeps one sample (lat) or one completion time (bw).
constexpr int kMaxIterations = 100000000;

struct Cli {
    std::string command = "run";
    std::set<std::string> given;  // long names of the options on the command line
    std::string op = "write";
    std::string api = "verbs";
    std::string reliability = "rd";
    std::string qp_type = "rc";
    bool srq = false;
    // Numbers stay text until the command knows their limits.
    std::string sizes, iters, tx_depth, qps, mtu, inline_max, post_list, threads;
    std::string format = "text";
    std::string preset = "cx3-fdr";
    std::string config_file;
    std::vector<std::string> sets;
    bool counters = false;
    bool verify = false;
    bool dual_port = false;
    bool bidirectional = false;
    std::string vcd;
    std::string dma = "systemc";
    std::string cm = "exchange";
    std::string clients = "1", connections = "100";
    std::string machines = "6", vms = "1", window = "16", warmup = "20", duration = "100", seed = "1";
    std::vector<std::string> nodes;
    std::string timeout = "600";
    std::string serve;
    std::string tsc = "auto";
    std::string trace, trace_window, trace_blocks;
    bool check = false;
    std::string reference;

    bool has(const std::string& option) const { return given.count(option) != 0; }
};

// The options each command uses. Any other option given to a command is
// refused by name: nothing on the command line is silently ignored.
const std::map<std::string, std::set<std::string>>& options_of() {
    static const std::set<std::string> config{"preset", "config", "set", "trace", "trace-window", "trace-blocks"};
    static const std::set<std::string> workload{"api",     "reliability", "sizes",  "iters",  "mtu",
                                                "inline",  "format",      "counters", "vcd",  "preset",
                                                "config",  "set",         "trace",  "trace-window", "trace-blocks"};
    auto with = [](std::set<std::string> s, std::initializer_list<const char*> more) {
        for (const char* m : more) s.insert(m);
        return s;
    };
    static const std::map<std::string, std::set<std::string>> m{
        {"run", with(workload, {"tx-depth", "qps", "node", "timeout", "serve", "tsc"})},
        {"lat", with(workload, {"op", "qp-type", "srq", "post-list", "verify", "cm"})},
        {"bw", with(workload, {"op", "tx-depth", "qps", "qp-type", "srq", "post-list", "verify", "cm", "dual-port",
                               "bidirectional"})},
        {"msgrate", with(config, {"op", "sizes", "iters", "tx-depth", "qps", "threads", "dual-port", "qp-type", "srq", "post-list", "verify", "mtu",
                                  "inline", "format", "counters", "vcd"})},
        {"mcast", with(config, {"sizes", "iters", "tx-depth", "inline", "format", "counters"})},
        {"bench", {"preset", "config", "set", "dma", "sizes", "iters"}},
        {"connect", with(config, {"clients", "connections", "format", "counters"})},
        {"swarm", with(config, {"machines", "threads", "vms", "window", "sizes", "warmup", "duration", "seed", "format", "counters"})},
        {"params", {"format"}},
        {"presets", {"format", "reference"}},
        {"calibrate", {"preset", "check", "format", "reference", "config", "set"}},
    };
    return m;
}

std::string option_name(const std::string& long_name) { return long_name == "iters" ? "-n/--iters" : "--" + long_name; }

void check_options_used(const Cli& c) {
    const auto& used = options_of().at(c.command);
    for (const auto& o : c.given) {
        if (used.count(o)) continue;
        if (c.command == "run" && o == "op")
            throw std::invalid_argument("run does not use --op: the default scenario is RDMA WRITE (use lat or bw --op " +
                                        sim::printable(c.op) + ")");
        std::string list;
        for (const auto& u : used) list += (list.empty() ? "" : ", ") + option_name(u);
        throw std::invalid_argument(c.command + " does not use " + option_name(o) +
                                    (list.empty() ? " (it takes no options)" : " (its options: " + list + ")"));
    }
}

// Whether the RTL DMA engine runs in some node: class-wide, or in a node of
// its own (nodeN.hca.dma.impl).
bool some_node_uses_rtl(const sim::Config& cfg) {
    if (cfg.get_choice("hca.dma.impl") == "rtl") return true;
    for (int i = 0; i <= cfg.highest_node(); ++i)
        if (cfg.for_node(i).get_choice("hca.dma.impl") == "rtl") return true;
    return false;
}

sim::Config make_config(const Cli& c) {
    sim::Config cfg;
    cfg.load_preset(c.preset);
    if (c.has("config")) cfg.load_file(c.config_file);
    for (const auto& s : c.sets) cfg.set_assignment(s);
    if (c.has("vcd")) {
        cli::check_output_file("--vcd", c.vcd);
        if (!some_node_uses_rtl(cfg))
            throw sim::ConfigError("--vcd " + sim::printable(c.vcd) +
                                   " records the RTL DMA engine: add --set hca.dma.impl=rtl");
        cfg.set("hca.dma.vcd", c.vcd);
    }
    const std::string& vcd = cfg.get_text("hca.dma.vcd");
    if (!vcd.empty()) {
        if (!some_node_uses_rtl(cfg))
            throw sim::ConfigError("hca.dma.vcd records the RTL DMA engine: it needs hca.dma.impl=rtl");
        cli::check_output_file("hca.dma.vcd", vcd);
    }
    return cfg;
}

Format output_format(const Cli& c) {
    if (c.format == "text") return Format::Text;
    if (c.format == "csv") return Format::Csv;
    if (c.format == "json") return Format::Json;
    throw std::invalid_argument("unknown --format '" + sim::printable(c.format) + "': expected text, csv or json");
}

int vi_reliability(const Cli& c) {
    if (c.reliability == "ud") return 1;
    if (c.reliability == "rd") return 2;
    if (c.reliability == "rr") return 4;
    throw std::invalid_argument("unknown --reliability '" + sim::printable(c.reliability) + "': expected ud, rd or rr");
}

// perftest's test names: "Send Latency Test", "RDMA Write Post List BW Test",
// "Atomic FETCH_AND_ADD Latency Test".
enum class Kind { Latency, Bandwidth, MsgRate };

std::string title(Op op, Kind kind, int post_list) {
    std::string t = op == Op::Send         ? "Send"
                    : op == Op::Write      ? "RDMA Write"
                    : op == Op::Read       ? "RDMA Read"
                    : op == Op::AtomicCas ? "Atomic CMP_AND_SWAP"
                                           : "Atomic FETCH_AND_ADD";
    if (kind == Kind::Latency) return t + " Latency Test";
    if (kind == Kind::MsgRate) return t + " Message Rate Test";
    return t + (post_list > 1 ? " Post List BW Test" : " BW Test");
}

// A latency or bandwidth run, every option checked against the command's
// rules and the device's limits before anything is built.
struct Workload {
    bool latency = true;
    bool msgrate = false;
    bool kvipl = false;
    sim::Config cfg;
    Format format = Format::Text;
    LatencyOptions lat;
    BandwidthOptions bw;
    RunInfo info;
    bool counters = false;
};

Workload plan_workload(const Cli& c, Kind kind, const std::string& default_sizes) {
    const bool latency = kind == Kind::Latency;
    Workload w;
    w.latency = latency;
    w.msgrate = kind == Kind::MsgRate;
    w.cfg = make_config(c);
    const hca::HcaParams device = hca::HcaParams::from(w.cfg);
    w.format = output_format(c);
    w.counters = c.counters;
    const QpType qp_type = parse_qp_type(c.qp_type);
    // UD has SEND only: there it is the default operation.
    const Op op = parse_op(qp_type == QpType::Ud && !c.has("op") ? "send" : c.op);
    if (c.api != "verbs" && c.api != "kvipl")
        throw std::invalid_argument("unknown --api '" + sim::printable(c.api) + "': expected verbs or kvipl");
    w.kvipl = c.api == "kvipl";
    if (!w.kvipl && c.has("reliability")) throw std::invalid_argument("--reliability applies to --api kvipl only");
    // QP types, shared receive queues, post lists and atomics are verbs'.
    for (const char* o : {"qp-type", "srq", "post-list"})
        if (w.kvipl && c.has(o))
            throw std::invalid_argument(std::string("--") + o + " applies to --api verbs only (KVIPL runs one VI)");
    if (w.kvipl && is_atomic(op))
        throw std::invalid_argument(std::string("--op ") + op_name(op) +
                                    " is not available with --api kvipl (VIs have no atomic operations)");
    const std::string refusal = qp_type_refusal(qp_type, op);
    if (!refusal.empty()) throw std::invalid_argument(refusal);
    // perftest: "Post list is supported in BW tests only".
    const int post_list =
        c.has("post-list")
            ? cli::parse_int("--post-list", c.post_list, 1, latency ? 1 : 65536,
                             latency ? "lat posts one work request at a time; post lists are for bw and msgrate"
                                     : "work requests per ibv_post_send, at most --tx-depth")
            : (w.msgrate ? 16 : 1);
    if (c.verify && w.kvipl) throw std::invalid_argument("--verify applies to --api verbs only");
    if (c.cm != "exchange" && c.cm != "rdma_cm")
        throw cli::bad_value("--cm", c.cm, "exchange (QP data out of band) or rdma_cm (perftest's -R)");
    const bool rdma_cm = c.cm == "rdma_cm";
    if (rdma_cm && w.kvipl)
        throw std::invalid_argument("--cm rdma_cm applies to --api verbs only (KVIPL connects through its own calls)");
    if (rdma_cm && qp_type != QpType::Rc && qp_type != QpType::Ud)
        throw std::invalid_argument(std::string("--cm rdma_cm connects RC (RDMA_PS_TCP) and UD (RDMA_PS_UDP, by SIDR) "
                                                "QPs: not --qp-type ") +
                                    sim::printable(c.qp_type));
    if (c.verify && is_atomic(op))
        throw std::invalid_argument(std::string("--verify does not apply to --op ") + op_name(op) +
                                    " (an atomic moves no payload to check)");
    if (is_atomic(op) && c.has("inline"))
        throw std::invalid_argument(std::string("--inline does not apply to --op ") + op_name(op) +
                                    " (an atomic request carries its operands in the work request)");
    const int reliability = vi_reliability(c);
    // VIs use the port's MTU and have no inline data: say so rather than ignore.
    if (w.kvipl && c.has("mtu"))
        throw std::invalid_argument("--mtu does not apply to --api kvipl (VIs use the port's MTU, port.max_mtu)");
    if (w.kvipl && c.has("inline"))
        throw std::invalid_argument("--inline does not apply to --api kvipl (VI descriptors carry no inline data)");
    if (op == Op::Read && c.has("inline"))
        throw std::invalid_argument("--inline does not apply to --op read (an RDMA READ request carries no data)");
    // Atomics work on 8 bytes, as ib_atomic_lat and ib_atomic_bw.
    std::vector<std::uint32_t> sizes = parse_sizes(c.has("sizes") ? c.sizes : is_atomic(op) ? "8" : default_sizes);
    if (w.msgrate && sizes.size() != 1)
        throw std::invalid_argument("msgrate runs one message size: --sizes '" + sim::printable(c.sizes) + "' names " +
                                    std::to_string(sizes.size()));
    if (w.kvipl && !c.has("sizes")) {
        // The default sweep stops at the NIC's largest VI transfer.
        sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](std::uint32_t s) { return s > device.vi_max_transfer; }),
                    sizes.end());
        if (sizes.empty()) sizes.push_back(device.vi_max_transfer);
    }
    const int iters = c.has("iters") ? cli::parse_int("-n/--iters", c.iters, 1, kMaxIterations) : 1000;
    // perftest's default MTU is the port's.
    const int port_mtu = static_cast<int>(w.cfg.get_int("port.max_mtu"));
    int mtu = port_mtu;
    if (c.has("mtu")) {
        if (c.mtu != "256" && c.mtu != "512" && c.mtu != "1024" && c.mtu != "2048" && c.mtu != "4096")
            throw cli::bad_value("--mtu", c.mtu, "one of 256, 512, 1024, 2048, 4096 (bytes)");
        mtu = std::stoi(c.mtu);
        if (mtu > port_mtu)
            throw std::invalid_argument("--mtu " + c.mtu + " is more than the device allows: port.max_mtu = " +
                                        std::to_string(port_mtu) + " bytes");
    }
    // A UD message is one packet: the default sweep stops at the path MTU.
    if (qp_type == QpType::Ud && !c.has("sizes")) {
        sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](std::uint32_t s) { return s > static_cast<std::uint32_t>(mtu); }),
                    sizes.end());
        if (sizes.empty()) sizes.push_back(static_cast<std::uint32_t>(mtu));
    }
    const std::string inline_note = "bytes, the device's hca.max_inline";
    const auto inline_max = c.has("inline")
                                ? static_cast<std::uint32_t>(cli::parse_unsigned("--inline", c.inline_max, 0, device.max_inline, inline_note))
                                : 0u;
    w.info.api = c.api;
    w.info.op = op_name(op);
    w.info.title = title(op, kind, post_list);
    add_preset_setting(w.info, c.preset, w.cfg);
    if (w.kvipl) w.info.settings.emplace_back("VI reliability", c.reliability);
    w.info.settings.emplace_back("link", w.cfg.raw("link.speed") + " " + w.cfg.raw("link.width") + "x");
    add_host_bus_setting(w.info, w.cfg);
    w.info.settings.emplace_back("topology", w.cfg.raw("fabric.topology"));
    w.info.settings.emplace_back("path MTU", std::to_string(mtu));
    // Shown when not perftest's defaults (RC, no SRQ), and always by msgrate.
    if (qp_type != QpType::Rc || w.msgrate) w.info.settings.emplace_back("connection type", qp_type_name(qp_type));
    if (c.srq) w.info.settings.emplace_back("SRQ", "on");
    if (rdma_cm) w.info.settings.emplace_back("connection manager", "rdma_cm");
    for (const auto& [k, v] : w.cfg.overrides()) w.info.settings.emplace_back(k, v);
    if (latency) {
        LatencyOptions& o = w.lat;
        o.op = op;
        o.sizes = sizes;
        o.iterations = iters;
        o.mtu = mtu;
        o.vi_reliability = reliability;
        o.qp_type = qp_type;
        o.srq = c.srq;
        o.verify = c.verify;
        o.rdma_cm = rdma_cm;
        // The default is perftest's 220 B, or less if the device inlines less.
        o.inline_max = c.has("inline") ? inline_max : std::min(o.inline_max, device.max_inline);
        if (w.kvipl) check_latency_kvipl_options(o, w.cfg);
        else check_latency_options(o, w.cfg);
        return w;
    }
    BandwidthOptions& o = w.bw;
    o.op = op;
    o.sizes = sizes;
    o.mtu = mtu;
    o.inline_max = inline_max;
    o.vi_reliability = reliability;
    o.qp_type = qp_type;
    o.srq = c.srq;
    o.post_list = post_list;
    o.verify = c.verify;
    o.rdma_cm = rdma_cm;
    o.dual_port = c.dual_port;
    o.bidirectional = c.bidirectional;
    if (w.kvipl) {
        if (c.has("qps") && c.qps != "1") throw std::invalid_argument("--api kvipl runs one VI: --qps must be 1");
        o.qps = 1;
        o.tx_depth = c.has("tx-depth") ? cli::parse_int("--tx-depth", c.tx_depth, 1,
                                                        static_cast<int>(std::min<std::uint32_t>(device.vi_max_descriptors, 65536)),
                                                        "descriptors, the NIC's hca.vi_max_descriptors with --api kvipl")
                                       : 128;
    } else {
        o.qps = c.has("qps") ? cli::parse_int("--qps", c.qps, 1, static_cast<int>(std::min<std::uint32_t>(device.max_qp, 1 << 24)),
                                              "the device's hca.max_qp")
                             : (w.msgrate ? std::min(16, static_cast<int>(device.max_qp)) : 1);
        o.tx_depth = c.has("tx-depth") ? cli::parse_int("--tx-depth", c.tx_depth, 1,
                                                        static_cast<int>(std::min<std::uint32_t>(device.max_qp_wr, 65536)),
                                                        "work requests, the device's hca.max_qp_wr")
                                       : 128;
    }
    if (c.has("threads"))
        o.threads = cli::parse_int("--threads", c.threads, 1, 64, "posting threads per node");
    // -n is per QP, as perftest's; the workload takes the messages in all.
    const std::int64_t messages = static_cast<std::int64_t>(iters) * o.qps;
    const std::int64_t pairs = static_cast<std::int64_t>(o.threads) * (o.bidirectional ? 2 : 1);
    if (messages * pairs > kMaxIterations)
        throw std::invalid_argument("-n/--iters " + std::to_string(iters) + " x --qps " + std::to_string(o.qps) +
                                    (o.threads > 1 ? " x --threads " + std::to_string(o.threads) : std::string()) +
                                    (o.bidirectional ? " x 2 (--bidirectional)" : "") + " is " +
                                    std::to_string(messages * pairs) + " messages per size, more than " +
                                    std::to_string(kMaxIterations));
    o.iterations = static_cast<int>(messages);
    if (w.kvipl) check_bandwidth_kvipl_options(o, w.cfg);
    else check_bandwidth_options(o, w.cfg);
    if (o.threads > 1) w.info.settings.emplace_back("threads", std::to_string(o.threads) + " per node, each with its own QPs");
    w.info.settings.emplace_back("QPs", std::to_string(o.qps) + (o.threads > 1 ? " per thread" : ""));
    w.info.settings.emplace_back("TX depth", std::to_string(o.tx_depth));
    if (o.dual_port) w.info.settings.emplace_back("dual-port", "ON (QPs take ports 1 and 2 in turn)");
    if (o.bidirectional)
        w.info.settings.emplace_back("bidirectional", std::string("ON (both nodes send, each with ") +
                                                          (w.kvipl ? "a VI" : "QPs") + " of its own; figures are the sum)");
    if (o.post_list > 1 || w.msgrate) w.info.settings.emplace_back("post list", std::to_string(o.post_list));
    if (w.msgrate) {
        w.info.settings.emplace_back("message size", std::to_string(o.sizes.front()) + " bytes");
        w.info.settings.emplace_back("iterations", std::to_string(iters) + " per QP");
    }
    return w;
}

// --counters: every counter after the results, as name = value lines, or
// with --format json as one more JSON line, {"counters": {name: value}}.
void print_counters(std::ostream& os, Format format, const System& sys) {
    if (format != Format::Json) {
        os << sys.counters();
        return;
    }
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : sys.counter_values()) j[k] = v;
    os << nlohmann::json{{"counters", j}}.dump() << "\n";
}

void run_workload(const Workload& w, std::ostream& os) {
    System sys(w.cfg);
    if (w.msgrate) {
        const MsgRateResult r = run_msgrate(sys, w.bw);
        print_msgrate(os, w.format, w.info, r, r.total.wall_seconds);
    } else if (w.latency)
        print_latency(os, w.format, w.info, w.kvipl ? run_latency_kvipl(sys, w.lat) : run_latency(sys, w.lat));
    else
        print_bandwidth(os, w.format, w.info, w.kvipl ? run_bandwidth_kvipl(sys, w.bw) : run_bandwidth(sys, w.bw));
    if (w.counters) print_counters(os, w.format, sys);
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

// FILE of --trace with suffix before its extension.
std::string trace_path(const Cli& c, const std::string& suffix) {
    std::string path = c.trace;
    const auto dot = path.rfind('.');
    const auto slash = path.rfind('/');
    if (!suffix.empty()) path.insert(dot == std::string::npos || (slash != std::string::npos && dot < slash) ? path.size() : dot, suffix);
    return path;
}

// --trace FILE [--trace-window START:END] [--trace-blocks a,b]: starts the
// recorder, on FILE with suffix before its extension (the default scenario's
// two simulations: FILE's stem + .lat and .bw).
void open_trace(const Cli& c, const std::string& suffix = "") {
    sim::Tick start = 0, end = ~sim::Tick(0);
    if (c.has("trace-window")) {
        const std::string& w = c.trace_window;
        const auto colon = w.find(':');
        if (colon == std::string::npos)
            throw std::invalid_argument("invalid --trace-window " + sim::printable(w) + ": expected START:END in microseconds");
        auto bound = [&](const std::string& text, sim::Tick dflt) {
            if (text.empty()) return dflt;
            char* stop = nullptr;
            const double v = std::strtod(text.c_str(), &stop);
            if (*stop != '\0' || !(v >= 0) || v > 1e12)
                throw std::invalid_argument("invalid --trace-window " + sim::printable(w) + ": " + sim::printable(text) +
                                            " is not a time in microseconds");
            return static_cast<sim::Tick>(v * sim::kPsPerUs);
        };
        start = bound(w.substr(0, colon), 0);
        end = bound(w.substr(colon + 1), ~sim::Tick(0));
    }
    std::vector<std::string> blocks;
    if (c.has("trace-blocks")) {
        std::stringstream in(c.trace_blocks);
        for (std::string b; std::getline(in, b, ',');) {
            if (b.empty()) throw std::invalid_argument("invalid --trace-blocks " + sim::printable(c.trace_blocks) + ": an empty name");
            blocks.push_back(b);
        }
    }
    sim::tracer().open(trace_path(c, suffix), start, end, blocks);
}

// Ends the trace file; one that holds no slice is worth a warning, not
// silence (a window or filter that misses the whole run).
void close_trace(const Cli& c, const std::string& suffix = "") {
    const std::string why = sim::tracer().close();
    if (!why.empty()) std::cerr << "hcasim: warning: --trace " << sim::printable(trace_path(c, suffix)) << " holds no slice: " << why << "\n";
}

// run --node: the programs, then how each ended.
int cmd_programs(const Cli& c) {
    for (const char* o : {"api", "reliability", "sizes", "iters", "mtu", "inline", "format", "counters", "vcd",
                          "tx-depth", "qps"})
        if (c.has(o))
            throw std::invalid_argument("run --node does not use " + option_name(o) +
                                        ": the programs take their own options");
    sim::Config cfg = make_config(c);
    ProgramsOptions o;
    o.commands = c.nodes;
    o.timeout_s = static_cast<double>(cli::parse_int("--timeout", c.timeout, 1, 86400, "wall seconds"));
    if (c.tsc != "auto" && c.tsc != "trap" && c.tsc != "replace")
        throw std::invalid_argument("--tsc " + sim::printable(c.tsc) + ": expected auto, trap or replace");
    o.tsc = c.tsc;
    if (c.tsc == "trap" && !remote::tsc_trap_works())
        std::cerr << "hcasim: warning: --tsc trap: rdtsc does not trap on this host (PR_SET_TSC has no effect here), so "
                     "programs read the host's TSC; --tsc replace makes them read the simulated one\n";
    if (c.has("serve"))
        for (std::size_t at = 0; at <= c.serve.size();) {
            const std::size_t comma = std::min(c.serve.find(',', at), c.serve.size());
            o.services.push_back(cli::parse_int("--serve", c.serve.substr(at, comma - at), 0, 1 << 20, "node index"));
            at = comma + 1;
        }
    for (const auto& cmd : o.commands) shell_split(cmd);  // a malformed line stops here
    const int nodes = static_cast<int>(cfg.get_int("fabric.nodes"));
    if (nodes < static_cast<int>(o.commands.size())) {
        cfg.set("fabric.nodes", std::to_string(o.commands.size()));
        if (cfg.get_choice("fabric.topology") == "back_to_back") cfg.set("fabric.topology", "switch");
    }
    System sys(cfg);
    const ProgramsResult r = run_programs(sys, o, std::cout);
    std::cout << "hcasim: simulated time " << r.simulated_us << " us\n";
    for (const auto& p : r.programs) std::cout << "hcasim: " << p.name << ": " << p.summary << "\n";
    std::cout.flush();
    for (const auto& p : r.problems) std::cerr << "hcasim: error: " << p << "\n";
    return r.exit_status;
}

int cmd_run(Cli c) {
    if (c.has("node")) return cmd_programs(c);
    if (c.has("timeout")) throw std::invalid_argument("--timeout is for run --node");
    if (c.has("serve")) throw std::invalid_argument("--serve is for run --node");
    if (c.has("tsc")) throw std::invalid_argument("--tsc is for run --node");
    // Both halves are checked before the banner: a bad option stops here.
    c.op = "write";
    const Workload lat = plan_workload(c, Kind::Latency, "2:65536");
    const Workload bw = plan_workload(c, Kind::Bandwidth, "2:1048576");
    std::cout << "hcasim default scenario: two nodes, ConnectX-3-class FDR 4x HCAs on PCIe Gen3 x8, back to back\n"
                 "(every figure below is simulated time from the hardware model)\n\n";
    // Two simulations, two processes: with --trace, a file each.
    int rc = in_child([&](std::ostream& os) {
        if (c.has("trace")) open_trace(c, ".lat");
        run_workload(lat, os);
        close_trace(c, ".lat");
    });
    if (rc) return rc;
    std::cout << "\n";
    return in_child([&](std::ostream& os) {
        if (c.has("trace")) open_trace(c, ".bw");
        run_workload(bw, os);
        close_trace(c, ".bw");
    });
}

// mcast: node 0 multicasts to every other node of fabric.nodes; lat/bw
// between two nodes run on node 0 and node 1 and leave the others idle.
int cmd_mcast(const Cli& c) {
    const sim::Config cfg = make_config(c);
    const hca::HcaParams device = hca::HcaParams::from(cfg);
    const Format format = output_format(c);
    const int nodes = static_cast<int>(cfg.get_int("fabric.nodes"));
    const int port_mtu = static_cast<int>(cfg.get_int("port.max_mtu"));
    MulticastOptions o;
    // A UD message is one packet: the default sweep stops at the port's MTU.
    o.sizes = parse_sizes(c.has("sizes") ? c.sizes : "2:" + std::to_string(port_mtu));
    o.iterations = c.has("iters") ? cli::parse_int("-n/--iters", c.iters, 1, kMaxIterations) : 1000;
    o.tx_depth = c.has("tx-depth") ? cli::parse_int("--tx-depth", c.tx_depth, 1,
                                                    static_cast<int>(std::min<std::uint32_t>(device.max_qp_wr, 65536)),
                                                    "work requests, the device's hca.max_qp_wr")
                                   : 128;
    o.inline_max = c.has("inline") ? static_cast<std::uint32_t>(cli::parse_unsigned(
                                         "--inline", c.inline_max, 0, device.max_inline, "bytes, the device's hca.max_inline"))
                                   : std::min(o.inline_max, device.max_inline);
    o.mtu = port_mtu;
    check_multicast_options(o, cfg);
    RunInfo info;
    info.api = "verbs";
    info.op = "send";
    info.title = "Multicast Send";
    add_preset_setting(info, c.preset, cfg);
    info.settings.emplace_back("link", cfg.raw("link.speed") + " " + cfg.raw("link.width") + "x");
    add_host_bus_setting(info, cfg);
    info.settings.emplace_back("topology", cfg.raw("fabric.topology"));
    info.settings.emplace_back("nodes", std::to_string(nodes) + ": node0 sends, " +
                                            (nodes > 2 ? "node1 to node" + std::to_string(nodes - 1) + " receive"
                                                       : std::string("node1 receives")));
    char mlid[16];
    std::snprintf(mlid, sizeof mlid, "0x%04x", kWorkloadMlid);
    info.settings.emplace_back("multicast group", workload_mgid_text() + ", MLID " + mlid);
    info.settings.emplace_back("port MTU", std::to_string(port_mtu));
    info.settings.emplace_back("TX depth", std::to_string(o.tx_depth));
    for (const auto& [k, v] : cfg.overrides()) info.settings.emplace_back(k, v);
    System sys(cfg);
    const std::vector<MulticastRow> rows = run_multicast(sys, o);
    print_multicast(std::cout, format, info, rows);
    if (c.counters) print_counters(std::cout, format, sys);
    return 0;
}

// connect: clients on nodes 1..N connect to node 0 with rdma_cm.
int cmd_connect(const Cli& c) {
    sim::Config cfg = make_config(c);
    const Format format = output_format(c);
    ConnectOptions o;
    o.clients = cli::parse_int("--clients", c.clients, 1, 647, "client nodes, up to fabric.nodes' 648 less the server");
    o.connections = cli::parse_int("--connections", c.connections, 1, 1000000, "connections per client");
    cfg.set("fabric.nodes", std::to_string(o.clients + 1));
    if (o.clients > 1 && cfg.get_choice("fabric.topology") == "back_to_back") cfg.set("fabric.topology", "switch");
    System sys(cfg);
    const ConnectResult r = run_connect(sys, o);
    print_connect(std::cout, format == Format::Csv, o, r);
    if (c.counters) print_counters(std::cout, format, sys);
    return 0;
}

// swarm: READs all to all among --machines nodes behind a switch.
int cmd_swarm(const Cli& c) {
    sim::Config cfg = make_config(c);
    const Format format = output_format(c);
    SwarmOptions o;
    o.machines = cli::parse_int("--machines", c.machines, 2, 648, "nodes one switch connects");
    o.threads = c.has("threads") ? cli::parse_int("--threads", c.threads, 1, 64, "worker threads per machine") : 8;
    o.vms = cli::parse_int("--vms", c.vms, 1, 64, "emulated machines per machine");
    o.window = cli::parse_int("--window", c.window, 1, 64, "READs in flight per worker");
    if (c.has("sizes")) {
        const auto sizes = parse_sizes(c.sizes);
        if (sizes.size() != 1)
            throw std::invalid_argument("swarm runs one READ size: --sizes '" + sim::printable(c.sizes) + "' names " +
                                        std::to_string(sizes.size()));
        o.size = sizes.front();
    }
    o.seed = cli::parse_unsigned("--seed", c.seed, 1, std::uint64_t{1} << 63);
    o.warmup_us = cli::parse_nonnegative("--warmup", c.warmup);
    o.duration_us = cli::parse_nonnegative("--duration", c.duration);
    if (o.warmup_us > 1e6) throw cli::bad_value("--warmup", c.warmup, "0 to 1e6 simulated microseconds");
    if (o.duration_us <= 0 || o.duration_us > 1e6)
        throw cli::bad_value("--duration", c.duration, "above 0 and at most 1e6 simulated microseconds");
    cfg.set("fabric.nodes", std::to_string(o.machines));
    if (cfg.get_choice("fabric.topology") == "back_to_back") cfg.set("fabric.topology", "switch");
    check_swarm_options(o, cfg);
    RunInfo info;
    info.op = "read";
    info.title = "RDMA READ swarm";
    add_preset_setting(info, c.preset, cfg);
    info.settings.emplace_back("link", cfg.raw("link.speed") + " " + cfg.raw("link.width") + "x");
    add_host_bus_setting(info, cfg);
    info.settings.emplace_back("machines", std::to_string(o.machines) + " behind one switch");
    info.settings.emplace_back("workers", std::to_string(o.threads) + " per machine, " + std::to_string(o.window) +
                                              " READs of " + std::to_string(o.size) + " B in flight each");
    info.settings.emplace_back("QPs", std::to_string(o.active_qps()) + " active per machine (" +
                                          std::to_string(o.vms) + " emulated machine(s) each), a CQ each");
    if (o.seed != 1) info.settings.emplace_back("seed", std::to_string(o.seed));
    for (const auto& [k, v] : cfg.overrides())
        if (k != "fabric.nodes" && k != "fabric.topology") info.settings.emplace_back(k, v);
    System sys(cfg);
    const SwarmResult r = run_swarm(sys, o);
    print_swarm(std::cout, format, info, o, r);
    if (c.counters) print_counters(std::cout, format, sys);
    return 0;
}

// bench: one message size, the number of messages of each run.
struct BenchPlan {
    std::uint32_t size = 0;
    int messages = 0;
};

BenchPlan plan_bench(const Cli& c, std::uint32_t default_size, int default_messages) {
    if (c.dma != "systemc" && c.dma != "tlm" && c.dma != "rtl")
        throw std::invalid_argument("unknown --dma '" + sim::printable(c.dma) + "': expected systemc or rtl");
    const sim::Config cfg = make_config(c);
    // --dma rtl runs both engines itself; a waveform would cover one run only.
    if (c.dma == "rtl" && (cfg.raw("hca.dma.impl") != sim::parameters().find("hca.dma.impl")->default_value ||
                           cfg.any_node_sets("hca.dma.impl")))
        throw std::invalid_argument("bench --dma rtl runs both DMA engines: do not set hca.dma.impl");
    if (!cfg.get_text("hca.dma.vcd").empty()) throw std::invalid_argument("bench writes no waveforms: do not set hca.dma.vcd");
    BenchPlan b;
    b.size = default_size;
    if (c.has("sizes")) {
        const auto sizes = parse_sizes(c.sizes);
        if (sizes.size() != 1)
            throw std::invalid_argument("bench runs one message size: --sizes '" + sim::printable(c.sizes) +
                                        "' names " + std::to_string(sizes.size()));
        b.size = sizes.front();
    }
    b.messages = c.has("iters") ? cli::parse_int("-n/--iters", c.iters, 1, kMaxIterations) : default_messages;
    return b;
}

// The same bandwidth run with the SystemC and with the RTL DMA engine, each
// in its own process: the wall-time ratio, and the RTL's cycles per wall
// second (clocked cycles of every engine instance over the RTL run's wall time).
int cmd_bench_rtl(const Cli& c) {
    const BenchPlan plan = plan_bench(c, 65536, 20000);
    nlohmann::json runs = nlohmann::json::array();
    for (const char* impl : {"systemc", "rtl"}) {
        const IsolatedResult r = run_isolated([&](std::ostream& os) {
            sim::Config cfg = make_config(c);
            cfg.set("hca.dma.impl", impl);
            BandwidthOptions o;
            o.op = Op::Write;
            o.sizes = {plan.size};
            o.qps = 1;
            o.tx_depth = 128;
            o.iterations = plan.messages;
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
    const double systemc = runs[0]["wall_seconds"].get<double>();
    const double rtl = runs[1]["wall_seconds"].get<double>();
    nlohmann::json out;
    out["bench"] = "rtl_dma_cosim_rc_write_bw";
    out["rtl_cycles_per_wall_second"] = static_cast<double>(runs[1]["rtl_clocked_cycles"].get<std::uint64_t>()) / rtl;
    out["wall_ratio_rtl_vs_systemc"] = rtl / systemc;
    // The CPU-time ratio does not depend on what else the machine runs.
    out["cpu_ratio_rtl_vs_systemc"] = runs[1]["cpu_seconds"].get<double>() / runs[0]["cpu_seconds"].get<double>();
    out["runs"] = runs;
    std::cout << out.dump() << "\n";
    return 0;
}

int cmd_bench(const Cli& c) {
    if (c.dma == "rtl") return cmd_bench_rtl(c);
    const BenchPlan plan = plan_bench(c, 4096, 200000);
    nlohmann::json results = nlohmann::json::array();
    // 1 QP, 1024 QPs, and 1 QP with 1% of the packets lost on every link.
    struct BenchRun {
        int qps;
        bool lossy;
    };
    for (const BenchRun run : {BenchRun{1, false}, BenchRun{1024, false}, BenchRun{1, true}}) {
        const int qps = run.qps;
        const IsolatedResult r = run_isolated([&](std::ostream& os) {
            sim::Config cfg = make_config(c);
            if (run.lossy) cfg.set("fault.drop", "0.01");
            BandwidthOptions o;
            o.op = Op::Write;
            o.sizes = {plan.size};
            o.qps = qps;
            o.tx_depth = qps == 1 ? 128 : 16;
            o.cq_mod = qps == 1 ? 32 : 16;
            o.iterations = plan.messages;
            o.mtu = 4096;
            System sys(cfg);
            // CPU time besides wall time: it does not count what else the
            // machine runs meanwhile.
            timespec c0{}, c1{};
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
            const auto rows = run_bandwidth(sys, o);
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
            const double cpu = static_cast<double>(c1.tv_sec - c0.tv_sec) + 1e-9 * static_cast<double>(c1.tv_nsec - c0.tv_nsec);
            const std::uint64_t packets =
                sys.counter("node0.hca.port.tx_packets") + sys.counter("node1.hca.port.tx_packets");
            const std::uint64_t data_packets = sys.counter("node0.hca.requester.request_packets");
            nlohmann::json j;
            j["qps"] = qps;
            if (run.lossy) {
                j["fault.drop"] = 0.01;
                const std::uint64_t per_message = std::max<std::uint64_t>(1, (o.sizes.front() + o.mtu - 1) / o.mtu);
                j["retransmitted_packets"] = data_packets - per_message * static_cast<std::uint64_t>(o.iterations);
            }
            j["message_bytes"] = o.sizes.front();
            j["messages"] = o.iterations;
            j["packets"] = packets;
            j["data_packets"] = data_packets;
            j["wall_seconds"] = rows[0].wall_seconds;
            j["packets_per_wall_second"] = static_cast<double>(packets) / rows[0].wall_seconds;
            j["wall_us_per_packet"] = rows[0].wall_seconds * 1e6 / static_cast<double>(packets);
            j["cpu_seconds"] = cpu;
            j["packets_per_cpu_second"] = static_cast<double>(packets) / cpu;
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
    out["lossy_packets_per_wall_second"] = results[2]["packets_per_wall_second"];
    out["lossy_vs_lossless_rate"] =
        results[2]["packets_per_wall_second"].get<double>() / results[0]["packets_per_wall_second"].get<double>();
    // The same ratio in CPU time (the run's setup included): steadier on a
    // busy machine.
    out["lossy_vs_lossless_cpu_rate"] =
        results[2]["packets_per_cpu_second"].get<double>() / results[0]["packets_per_cpu_second"].get<double>();
    out["runs"] = results;
    std::cout << out.dump() << "\n";
    return 0;
}

int cmd_params(const Cli& c) {
    if (c.format != "text" && c.format != "md")
        throw std::invalid_argument("unknown --format '" + sim::printable(c.format) + "' for params: expected text or md");
    const auto& all = sim::parameters().all();
    if (c.format == "md") {
        std::cout << "| key | unit | default | allowed | per node | meaning | source of the default |\n"
                     "|---|---|---|---|---|---|---|\n";
    }
    for (const auto& s : all) {
        std::string allowed;
        if (s.kind == sim::ParamSpec::Kind::Bool) allowed = "true, false";
        else if (s.kind == sim::ParamSpec::Kind::Text) allowed = "text";
        else if (!s.choices.empty()) {
            for (const auto& ch : s.choices) allowed += (allowed.empty() ? "" : ", ") + ch;
        } else {
            // Whole numbers exactly (4294967295, not 4.29497e+09).
            auto num = [](double v) {
                char b[32];
                if (std::fabs(v) < 9.0e15 && v == std::floor(v)) std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
                else std::snprintf(b, sizeof b, "%g", v);
                return std::string(b);
            };
            allowed = num(s.min) + " .. " + num(s.max);
        }
        if (c.format == "md")
            std::cout << "| `" << s.key << "` | " << s.unit << " | " << s.default_value << " | " << allowed << " | "
                      << (s.per_node ? "yes" : "") << " | " << s.doc << " | " << s.source << " |\n";
        else
            std::cout << s.key << " = " << s.default_value << (s.unit.empty() ? "" : " " + s.unit) << "  [" << allowed
                      << "]  " << (s.per_node ? "(per node) " : "") << s.doc << "\n";
    }
    return 0;
}

}  // namespace

// SystemC prints a banner when its kernel starts unless told not to; the
// command's output is for people and scripts, so it is switched off first.
int main(int argc, char** argv) {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
    // sweep and plot build no system: their runs are processes of their own.
    if (cli::is_sweep_or_plot(argc, argv))
        return std::string(argv[1]) == "sweep" ? cli::sweep_command(argc, argv) : cli::plot_command(argc, argv);
    return sc_core::sc_elab_and_sim(argc, argv);
}

// A command whose options are checked; --trace is open when it takes one.
int run_command(const Cli& c) {
    if (c.command == "run") return cmd_run(c);
    if (c.command == "lat" || c.command == "bw" || c.command == "msgrate") {
        const Kind kind = c.command == "lat" ? Kind::Latency : c.command == "bw" ? Kind::Bandwidth : Kind::MsgRate;
        const Workload w = plan_workload(c, kind, kind == Kind::MsgRate ? "64" : "2:8388608");
        run_workload(w, std::cout);
        return 0;
    }
    if (c.command == "mcast") return cmd_mcast(c);
    if (c.command == "bench") return cmd_bench(c);
    if (c.command == "connect") return cmd_connect(c);
    if (c.command == "swarm") return cmd_swarm(c);
    if (c.command == "params") return cmd_params(c);
    const std::string reference = c.has("reference") ? c.reference : default_reference_file();
    if (c.command == "calibrate")
        return run_calibrate(
            {c.has("preset") ? c.preset : "", c.check, output_format(c), reference, c.has("config") ? c.config_file : "", c.sets},
            std::cout, std::cerr);
    if (c.format != "text" && c.format != "md")
        throw std::invalid_argument("unknown --format '" + sim::printable(c.format) + "' for presets: expected text or md");
    return print_presets(reference, c.format == "md", std::cout);
}

int sc_main(int argc, char** argv) {
    Cli c;
    // The limits --help advertises are the default device's.
    const hca::HcaParams device = hca::HcaParams::from(sim::Config());
    const std::string max_qp_wr = std::to_string(device.max_qp_wr);
    const std::string vi_descriptors = std::to_string(device.vi_max_descriptors);
    po::options_description opts(kUsage);
    opts.add_options()("help,h", "this text")
        ("op", po::value(&c.op),
         "lat/bw/msgrate: send, write, read, atomic_cas or atomic_fadd (default write, with --qp-type ud send); "
         "atomics: 8-byte messages, --qp-type rc only")
        ("qp-type", po::value(&c.qp_type),
         "lat/bw/msgrate: rc, uc, ud or xrc (default rc); uc: send and write, ud: send only, messages up to the "
         "path MTU; xrc: every operation, each side's receives on one XRC SRQ")
        ("srq", po::bool_switch(&c.srq), "lat/bw/msgrate: every QP receives from one shared receive queue")
        ("post-list,l", po::value(&c.post_list),
         "bw/msgrate: work requests per ibv_post_send, linked, 1 to --tx-depth (bw default 1, msgrate 16); lat: 1 only")
        ("api", po::value(&c.api), "run/lat/bw: the host API the workload uses, verbs or kvipl (default verbs)")
        ("reliability", po::value(&c.reliability), "--api kvipl: VI reliability level ud, rd or rr (default rd)")
        ("sizes", po::value(&c.sizes),
         "message sizes in bytes, decimal: LO:HI (every power of two from LO to HI, both powers of two), N, "
         "or N,M,... (default 2:8388608, with --api kvipl up to hca.vi_max_transfer, with --qp-type ud up to the "
         "path MTU, mcast up to port.max_mtu; atomics: 8; bench and msgrate: one size, msgrate default 64)")
        ("iters,n", po::value(&c.iters),
         ("iterations per size, 1 to " + std::to_string(kMaxIterations) +
          " (default 1000); bw and msgrate: per QP, as perftest's -n; bench: messages per run").c_str())
        ("tx-depth,t", po::value(&c.tx_depth),
         ("bw/msgrate/mcast: work requests in flight per QP, 1 to hca.max_qp_wr (" + max_qp_wr +
          "); --api kvipl: 1 to hca.vi_max_descriptors (" + vi_descriptors + ") (default 128)").c_str())
        ("qps,q", po::value(&c.qps),
         ("bw/msgrate: number of QPs, 1 to hca.max_qp (" + std::to_string(device.max_qp) +
          "); QPs x TX depth x 2 + 16 must fit a CQ, hca.max_cqe (" + std::to_string(device.max_cqe) +
          ") (default 1, msgrate 16)").c_str())
        ("threads", po::value(&c.threads),
         "swarm: worker threads per machine, 1 to 64 (default 8); msgrate: posting threads per node, 1 to 64, each a client (node 0) and server (node 1) pair with --qps QPs, "
         "CQs and buffers of its own and -n messages per QP, as that many perftest processes on as many cores; the "
         "rate is over all of them (default 1)")
        ("mtu,m", po::value(&c.mtu), "path MTU in bytes: 256, 512, 1024, 2048 or 4096, at most port.max_mtu (default port.max_mtu)")
        ("inline,I", po::value(&c.inline_max),
         ("largest message sent inline, 0 to hca.max_inline (" + std::to_string(device.max_inline) +
          ") (lat and mcast default 220, bw and msgrate default 0)").c_str())
        ("format,f", po::value(&c.format), "text, csv or json (params and presets: text or md)")
        ("preset,p", po::value(&c.preset), "device preset name or file (default cx3-fdr)")
        ("config,c", po::value(&c.config_file), "INI file of parameter overrides")
        ("set,s", po::value(&c.sets), "override one parameter: --set pcie.lanes=16 (repeatable)")
        ("counters", po::bool_switch(&c.counters), "print the hardware counters after the run")
        ("clients", po::value(&c.clients), "connect: client nodes, 1 to 647 (default 1)")
        ("connections", po::value(&c.connections), "connect: connections each client makes (default 100)")
        ("machines", po::value(&c.machines), "swarm: machines (nodes behind one switch), 2 to 648 (default 6)")
        ("vms", po::value(&c.vms),
         "swarm: machines each machine emulates, 1 to 64: each worker has a QP to every other machine's worker of "
         "its index per emulated machine (default 1)")
        ("window", po::value(&c.window), "swarm: READs in flight per worker thread, 1 to 64 (default 16)")
        ("warmup", po::value(&c.warmup), "swarm: simulated microseconds before the measured window (default 20)")
        ("duration", po::value(&c.duration), "swarm: simulated microseconds measured (default 100)")
        ("seed", po::value(&c.seed),
         "swarm: seed of the workers' random QP and offset choices and of the buffers' bytes, 1 to 2^63 (default 1)")
        ("cm", po::value(&c.cm),
         "lat/bw: how the QPs are connected: exchange (QP data out of band, the default) or rdma_cm (IPoIB address, "
         "SA path and IB CM messages, as perftest's -R)")
        ("dual-port,O", po::bool_switch(&c.dual_port),
         "bw/msgrate, RC and UC: the QPs take the adapters' two ports in turn, each cabled to the peer's port of the "
         "same number, as perftest's -O; needs --set port.count=2")
        ("bidirectional,b", po::bool_switch(&c.bidirectional),
         "bw: both nodes send at once, each to the other, as perftest's -b; the figures are both directions' sum")
        ("verify", po::bool_switch(&c.verify),
         "lat/bw/msgrate: check every received byte against the sender's pattern; the run fails naming the first bad offset")
        ("vcd", po::value(&c.vcd), "with --set hca.dma.impl=rtl: write VCD waveforms of the RTL DMA engine "
                                    "(FILE's stem + .<engine>.ch<k>.vcd per engine instance)")
        ("node", po::value(&c.nodes),
         "run: a program to run on the next simulated node, as a shell-like command line (repeatable; node 0 first)")
        ("timeout", po::value(&c.timeout), "run --node: wall seconds before programs still running are killed (default 600)")
        ("tsc", po::value(&c.tsc),
         "run --node: how a program's rdtsc reads simulated time: trap (PR_SET_TSC makes rdtsc fault), replace (the "
         "TSC reads in its code, found by objdump, become ud2, which faults), auto (default: trap where rdtsc traps on "
         "this host, else replace)")
        ("serve", po::value(&c.serve),
         "run --node: nodes (comma-separated indices) whose programs serve the others and never end by themselves "
         "(ibv_asyncwatch, a looping server): once every other program has ended they are stopped (SIGTERM), "
         "which counts as a clean end")
        ("dma", po::value(&c.dma), "bench: systemc (default) or rtl (RTL co-simulation speed and wall ratio)")
        ("trace", po::value(&c.trace),
         "every workload but bench: write what the hardware does to FILE.json (Chrome / Perfetto trace events: a "
         "track per block per node and the host threads, a slice per WQE fetch, packet, TLP burst and CQE, flow "
         "arrows per work request; opens in ui.perfetto.dev and chrome://tracing) or FILE.log (one line per slice)")
        ("trace-window", po::value(&c.trace_window),
         "with --trace: only slices overlapping START:END, simulated microseconds (either may be empty)")
        ("trace-blocks", po::value(&c.trace_blocks),
         "with --trace: only tracks whose name contains one of these comma-separated words (port, pcie, host, "
         "node1, wqe_fetch, completion, ...)")
        ("check", po::bool_switch(&c.check),
         "calibrate: exit with status 1 when a point's measured value is more than 10% from the published one, naming it")
        ("reference", po::value(&c.reference),
         "calibrate/presets: reference points file (default: reference_points.json beside the presets)");
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
        if (!options_of().count(c.command)) {
            std::cerr << "hcasim: error: unknown command '" << sim::printable(c.command)
                      << "' (run, lat, bw, msgrate, mcast, swarm, connect, bench, params, presets, calibrate, sweep, plot)\n";
            return 2;
        }
        for (const auto& [name, value] : vm)
            if (name != "command" && !value.defaulted()) c.given.insert(name);
        check_options_used(c);
        // The default scenario opens and closes a trace per simulation; every
        // other command that takes --trace simulates in this process.
        const bool trace_here = c.has("trace") && !(c.command == "run" && !c.has("node"));
        if (trace_here) open_trace(c);
        else if (!c.has("trace") && (c.has("trace-window") || c.has("trace-blocks")))
            throw std::invalid_argument("--trace-window and --trace-blocks need --trace FILE");
        const int rc = run_command(c);
        if (trace_here) close_trace(c);
        return rc;
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
