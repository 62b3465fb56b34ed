#include "testbench/cli/sweep_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "testbench/cli/child_pool.hpp"
#include "testbench/cli/cli_input.hpp"
#include "testbench/cli/mpi_world.hpp"
#include "testbench/cli/progress_line.hpp"
#include "testbench/cli/sweep_plan.hpp"
#include "testbench/cli/sweep_table.hpp"

namespace po = boost::program_options;

namespace hcasim::cli {

namespace {

const char* kSweepUsage = R"(usage: hcasim sweep --param KEY=V1,V2,... [--param ...] [--jobs N] [--out FILE]
                    -- WORKLOAD [WORKLOAD OPTIONS]

Runs WORKLOAD (lat, bw, msgrate, mcast, swarm or calibrate, with its own
options) once per combination of the parameters' values, each run an hcasim
process of its own with --set KEY=VALUE per parameter and --format json. A KEY
without a dot is one of the workload's numeric options (inline, iters,
machines, mtu, post-list, qps, threads, tx-depth, vms, window) or preset,
given to each run as --KEY VALUE. The results are one
table: a row per (combination, result row), a column per parameter, then the
workload's columns; rows in combination order (the first --param varies
slowest), then in the workload's order. Under mpirun the combinations are
shared among the ranks (combination i on rank i mod N) and rank 0 writes the
table. Example:

  hcasim sweep --param pcie.lanes=4,8,16 --param hca.wqe_fetch_batch=1,4,8 \
               --out lanes.csv -- bw --sizes 64:65536
  hcasim sweep --param qps=64,256,512,1024 --out qps.csv \
               -- msgrate --post-list 1 --tx-depth 1 -n 100
  hcasim sweep --param vms=1,3,5,9,15 --param hca.qpc_cache_entries=64,256 \
               --out swarm.csv -- swarm
  hcasim sweep --param hca.qpc_cache_entries=64,68,72 --out cal.csv \
               -- calibrate --preset cx3-fdr

calibrate gives a row per reference point (published, measured, ratio,
within_tolerance) at each combination, run as calibrate --set does.

Options)";

std::string join_names(const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
    return s;
}

// An argument as a shell would need it written.
std::string shell_word(const std::string& a) {
    if (!a.empty() && a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=,+-@%") ==
                          std::string::npos)
        return a;
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string indented(const std::string& text) {
    std::string s, line;
    std::istringstream in(text);
    while (std::getline(in, line)) s += "  " + line + "\n";
    return s;
}

struct SweepArgs {
    std::vector<std::string> params;
    std::vector<std::string> workload;
    std::string jobs, out;
    bool has_jobs = false, has_out = false, help = false;
};

po::options_description sweep_options(SweepArgs& a) {
    po::options_description opts(kSweepUsage);
    opts.add_options()("help,h", "this text")
        ("param", po::value(&a.params),
         "KEY=V1,V2,...: a configuration parameter (hcasim params), or a workload option without its dashes "
         "(inline, iters, mtu, post-list, qps, threads, tx-depth, preset), and its values, comma-separated (repeatable, one "
         "--param per key)")
        ("jobs,j", po::value(&a.jobs),
         "points run at once on this machine (each MPI rank), 1 to 4096 (default: the number of online CPUs)")
        ("out,o", po::value(&a.out),
         "FILE.csv or FILE.json: where the table goes, in the format its name ends with (default: CSV on standard "
         "output); nothing is written if a point fails");
    return opts;
}

SweepArgs parse_sweep_args(int argc, char** argv) {
    SweepArgs a;
    std::vector<std::string> mine;
    int at = 2;
    for (; at < argc && std::strcmp(argv[at], "--") != 0; ++at) mine.push_back(argv[at]);
    const bool has_workload = at < argc;
    for (++at; at < argc; ++at) a.workload.push_back(argv[at]);
    po::options_description opts = sweep_options(a);
    std::vector<std::string> stray;
    po::options_description hidden;
    hidden.add_options()("stray", po::value(&stray));
    po::options_description all;
    all.add(opts).add(hidden);
    po::positional_options_description pos;
    pos.add("stray", -1);
    po::variables_map vm;
    po::store(po::command_line_parser(mine).options(all).positional(pos).run(), vm);
    po::notify(vm);
    a.help = vm.count("help") != 0;
    if (a.help) return a;
    if (!stray.empty())
        throw std::invalid_argument("'" + sim::printable(stray.front()) +
                                    "' before --: sweep takes its own options first, then -- and the workload "
                                    "(hcasim sweep --param KEY=V1,V2 -- bw --sizes 64)");
    if (!has_workload)
        throw std::invalid_argument("sweep needs -- and the workload after its own options (hcasim sweep --param "
                                    "KEY=V1,V2 -- " +
                                    join_names(SweepPlan::workloads()) + " ...)");
    a.has_jobs = vm.count("jobs") != 0;
    a.has_out = vm.count("out") != 0;
    return a;
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What one rank ran: per point, its output or the error that names it.
nlohmann::ordered_json run_my_points(const SweepPlan& plan, const MpiWorld& world, int jobs) {
    std::vector<std::size_t> mine;
    for (std::size_t i = static_cast<std::size_t>(world.rank()); i < plan.points(); i += static_cast<std::size_t>(world.size()))
        mine.push_back(i);
    std::vector<std::vector<std::string>> argvs;
    for (std::size_t i : mine) {
        std::vector<std::string> argv{"hcasim"};
        for (auto& a : plan.child_arguments(i)) argv.push_back(std::move(a));
        argvs.push_back(std::move(argv));
    }
    // Only rank 0 draws; under mpirun its share is what it can count.
    ProgressLine progress(world.size() > 1 ? "sweep (rank 0 of " + std::to_string(world.size()) + ")" : "sweep",
                          "points", mine.size());
    const bool draw = world.rank() == 0 && progress.shown();
    std::size_t done = 0;
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    if (draw) progress.update(0);
    ChildPool pool("/proc/self/exe", jobs);
    pool.run(
        argvs,
        [&](std::size_t k, ChildOutcome outcome) {
            const std::size_t point = mine[k];
            ++done;
            if (outcome.succeeded()) {
                if (!outcome.err.empty()) {
                    if (draw) progress.clear();
                    std::cerr << "hcasim: sweep " << plan.describe(point) << ":\n" << indented(outcome.err) << std::flush;
                }
                results.push_back({{"point", point}, {"ok", true}, {"output", outcome.out}});
                if (draw) progress.update(done);
                return true;
            }
            std::string command = "hcasim";
            for (const auto& a : plan.child_arguments(point)) command += " " + shell_word(a);
            results.push_back({{"point", point},
                               {"ok", false},
                               {"error", "sweep " + plan.describe(point) + " failed (" + outcome.how_it_ended() +
                                             "): " + command + "\n" + indented(outcome.err)}});
            if (draw) progress.clear();
            return false;
        },
        [&] {
            if (draw) progress.refresh();
        });
    if (draw) {
        const bool all_ok = std::all_of(results.begin(), results.end(), [](const auto& r) { return r["ok"].template get<bool>(); });
        if (all_ok) progress.finish();
        else progress.clear();
    }
    return results;
}

// Rank 0: every rank's results into the table, written where --out says.
int write_results(const SweepPlan& plan, const std::vector<std::string>& texts, const SweepArgs& a) {
    std::map<std::size_t, nlohmann::ordered_json> by_point;
    for (const auto& t : texts)
        for (auto& r : nlohmann::ordered_json::parse(t)) {
            const auto point = r["point"].get<std::size_t>();
            by_point[point] = std::move(r);
        }
    bool failed = false;
    for (const auto& [point, r] : by_point)
        if (!r["ok"].get<bool>()) {
            std::cerr << "hcasim: error: " << r["error"].get<std::string>() << std::flush;
            failed = true;
        }
    if (failed) return 1;
    if (by_point.size() != plan.points())
        throw std::logic_error("sweep has results of " + std::to_string(by_point.size()) + " of " +
                               std::to_string(plan.points()) + " points");
    SweepTable table(plan);
    for (const auto& [point, r] : by_point) table.add_point(point, r["output"].get<std::string>());
    std::ostringstream text;
    if (a.has_out && ends_with(a.out, ".json")) table.write_json(text);
    else table.write_csv(text);
    if (!a.has_out) {
        std::cout << text.str() << std::flush;
        return std::cout ? 0 : 1;
    }
    std::ofstream f(a.out, std::ios::binary | std::ios::trunc);
    f << text.str();
    f.close();
    if (!f) {
        std::cerr << "hcasim: error: cannot write --out '" << sim::printable(a.out) << "': " << std::strerror(errno) << "\n";
        return 1;
    }
    return 0;
}

}  // namespace

bool is_sweep_or_plot(int argc, char** argv) {
    return argc > 1 && (std::strcmp(argv[1], "sweep") == 0 || std::strcmp(argv[1], "plot") == 0);
}

int sweep_command(int argc, char** argv) {
    // Every rank finds the same mistakes in the same command line: one says so.
    const bool speaker = MpiWorld::launcher_rank() == 0;
    SweepArgs a;
    int jobs = 1;
    std::unique_ptr<SweepPlan> plan;
    try {
        a = parse_sweep_args(argc, argv);
        if (a.help) {
            SweepArgs shown;
            if (speaker) std::cout << sweep_options(shown) << "\n";
            return 0;
        }
        plan = std::make_unique<SweepPlan>(a.params, a.workload);
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = a.has_jobs ? parse_int("--jobs", a.jobs, 1, 4096, "processes at once") : static_cast<int>(std::max(1L, cpus));
        if (a.has_out) {
            if (!ends_with(a.out, ".csv") && !ends_with(a.out, ".json"))
                throw std::invalid_argument("--out '" + sim::printable(a.out) +
                                            "': the name must end in .csv or .json, the format of the table");
            check_output_file("--out", a.out);
        }
    } catch (const std::exception& e) {  // po::error, std::invalid_argument
        if (speaker) std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    }

    std::unique_ptr<MpiWorld> world;
    try {
        world = std::make_unique<MpiWorld>(argc, argv);
    } catch (const std::exception& e) {
        if (speaker) std::cerr << "hcasim: error: " << e.what() << "\n";
        return 1;
    }
    std::string mine;
    try {
        mine = run_my_points(*plan, *world, jobs).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    } catch (const std::exception& e) {
        std::cerr << "hcasim: error: sweep (rank " << world->rank() << "): " << e.what() << "\n";
        if (world->size() > 1) world->abort(1);  // the others wait in the gather
        return 1;
    }
    const std::vector<std::string> all = world->gather_to_root(mine);
    int status = 0;
    if (world->rank() == 0) {
        try {
            status = write_results(*plan, all, a);
        } catch (const std::exception& e) {
            std::cerr << "hcasim: error: " << e.what() << "\n";
            status = 1;
        }
    }
    status = world->broadcast_from_root(status);
    std::cout.flush();
    return world->finish(status);
}

}  // namespace hcasim::cli
