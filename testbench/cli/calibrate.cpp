#include "testbench/cli/calibrate.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "model/sim/config.hpp"
#include "testbench/cli/cli_input.hpp"
#include "testbench/cli/reference_points.hpp"
#include "testbench/workloads/programs.hpp"

extern char** environ;

namespace hcasim::testbench {

namespace {

// What an INI file (a preset, or a design point's --config) says about
// itself: its first comment line, and the keys it assigns in the order it
// assigns them (the values are read back through sim::Config, which checks
// them).
struct PresetFile {
    std::string description;
    std::vector<std::string> keys;
};

std::string trimmed(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

PresetFile read_preset_file(const std::string& path) {
    PresetFile f;
    std::ifstream in(path);
    std::string section;
    for (std::string line; std::getline(in, line);) {
        const std::string t = trimmed(line);
        if (t.empty()) continue;
        if (t[0] == '#') {
            if (f.description.empty() && f.keys.empty() && section.empty()) f.description = trimmed(t.substr(1));
            continue;
        }
        if (t[0] == ';') continue;
        const std::string body = trimmed(t.substr(0, t.find('#')));
        if (body.empty()) continue;
        if (body.front() == '[' && body.back() == ']') {
            section = trimmed(body.substr(1, body.size() - 2));
            continue;
        }
        const auto eq = body.find('=');
        if (eq == std::string::npos) continue;
        const std::string name = trimmed(body.substr(0, eq));
        const std::string key = section.empty() ? name : section + "." + name;
        if (std::find(f.keys.begin(), f.keys.end(), key) == f.keys.end()) f.keys.push_back(key);
    }
    return f;
}

// ---------------------------------------------------------------------------
// Running one point: a child hcasim process.

struct ChildResult {
    int status = -1;  // waitpid status
    std::string out, err;
    std::string spawn_error;
};

std::string self_exe() {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw std::runtime_error(std::string("cannot find the hcasim binary: readlink /proc/self/exe: ") + std::strerror(errno));
    return std::string(buf, static_cast<std::size_t>(n));
}

// Runs exe with args, its standard output and error captured.
ChildResult run_child(const std::string& exe, const std::vector<std::string>& args) {
    ChildResult r;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
        r.spawn_error = std::string("pipe: ") + std::strerror(errno);
        return r;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
        r.spawn_error = std::string("pipe: ") + std::strerror(errno);
        ::close(out[0]);
        ::close(out[1]);
        return r;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    ::close(err[1]);
    if (rc != 0) {
        r.spawn_error = "cannot start " + exe + ": " + std::strerror(rc);
        ::close(out[0]);
        ::close(err[0]);
        return r;
    }
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    std::string* into[2] = {&r.out, &r.err};
    int open = 2;
    while (open > 0) {
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !fds[i].revents) continue;
            char buf[65536];
            const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
            if (n > 0) {
                into[i]->append(buf, static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            }
        }
    }
    for (auto& f : fds)
        if (f.fd >= 0) ::close(f.fd);
    while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
    }
    return r;
}

std::string describe_status(int st) {
    if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
    if (WIFSIGNALED(st)) return std::string("killed by signal ") + std::to_string(WTERMSIG(st));
    return "status " + std::to_string(st);
}

// The last non-empty line of text ("hcasim: error: ..."), for a short message.
std::string last_line(const std::string& text) {
    std::size_t end = text.find_last_not_of("\n ");
    if (end == std::string::npos) return "";
    const std::size_t begin = text.rfind('\n', end);
    return text.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

struct Job {
    const ReferencePoint* point = nullptr;
    std::string preset;
    std::vector<std::string> args;
    std::string shown;  // the command line as a person would type it
    std::vector<std::string> kept;  // design-point keys the point sets itself
};

// The keys a point's command assigns with --set: conditions of the
// measurement that a design point leaves as they are.
std::vector<std::string> keys_set_by(const std::vector<std::string>& args) {
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string key = cli::set_key_at(args, i);
        if (!key.empty()) keys.push_back(key);
    }
    return keys;
}

std::string key_of(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }

struct Outcome {
    bool ok = false;
    double measured = 0;
    double ratio = 0;
    bool within = false;
    std::string error;
};

Outcome measure(const std::string& exe, const Job& job) {
    Outcome o;
    const ChildResult r = run_child(exe, job.args);
    if (!r.spawn_error.empty()) {
        o.error = r.spawn_error;
        return o;
    }
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
        const std::string why = last_line(r.err);
        o.error = "`" + job.shown + "` failed (" + describe_status(r.status) + ")" + (why.empty() ? "" : ": " + why);
        return o;
    }
    const std::string first = r.out.substr(0, r.out.find('\n'));
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(first);
    } catch (const nlohmann::json::exception& e) {
        o.error = "`" + job.shown + "` printed no JSON: " + e.what();
        return o;
    }
    const std::string& column = job.point->column;
    const nlohmann::json* row = nullptr;
    if (j.contains("rows") && j["rows"].is_array()) {
        if (j["rows"].size() != 1) {
            o.error = "`" + job.shown + "` printed " + std::to_string(j["rows"].size()) +
                      " rows: a reference point's command runs one message size";
            return o;
        }
        row = &j["rows"][0];
    } else if (j.contains("total") && j["total"].is_object()) {
        row = &j["total"];
    }
    if (!row || !row->contains(column) || !(*row)[column].is_number()) {
        o.error = "column '" + column + "' is not in the output of `" + job.shown + "`";
        return o;
    }
    o.measured = (*row)[column].get<double>() * job.point->scale;
    o.ratio = o.measured / job.point->value;
    o.within = within_tolerance(*job.point, o.ratio);
    o.ok = true;
    return o;
}

// ---------------------------------------------------------------------------
// Output.

// A figure as a person reads it: about four significant digits, no exponent.
std::string figure(double v) {
    char b[64];
    const double a = std::fabs(v);
    const int decimals = a >= 1000 ? 0 : a >= 100 ? 1 : a >= 10 ? 2 : 3;
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    return b;
}

// A figure for a script: six significant digits.
std::string exact(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

std::string ratio_text(double r) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", r);
    return b;
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string percent(double tolerance) { return std::to_string(static_cast<int>(std::lround(tolerance * 100))) + "%"; }

void print_text(std::ostream& out, const std::vector<std::string>& presets, const std::vector<std::string>& design,
                const std::vector<std::string>& design_keys, const std::vector<Job>& jobs,
                const std::vector<Outcome>& outcomes) {
    std::string names;
    for (const auto& p : presets) names += (names.empty() ? "" : ", ") + p;
    out << "Reference points of " << names
        << " against the model (published measurements; measured = simulated; ratio = measured / published)\n";
    if (!design.empty()) {
        // A design point is not the preset: say so before any figure.
        out << "Design point, not the preset" << (presets.size() == 1 ? "" : "s") << ":";
        for (const auto& d : design) out << " " << d;
        out << "\n";
        // A key a point's own command sets is a condition of its measurement:
        // those points keep it (one line per key).
        for (const auto& k : design_keys) {
            std::string keeping;
            for (const auto& j : jobs)
                if (std::find(j.kept.begin(), j.kept.end(), k) != j.kept.end())
                    keeping += (keeping.empty() ? "" : ", ") + j.point->name;
            if (!keeping.empty()) out << " " << k << " stays as measured in " << keeping << "\n";
        }
    }
    std::size_t w = 4;
    for (const auto& j : jobs) w = std::max(w, j.point->name.size());
    char line[512];
    const std::string tol = "+-" + percent(kCalibrationTolerance);
    std::snprintf(line, sizeof line, " %-*s %10s %10s %-5s %7s %-6s %s\n", static_cast<int>(w), "name", "published", "measured",
                  "unit", "ratio", tol.c_str(), "source");
    out << line;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const ReferencePoint& p = *jobs[i].point;
        const Outcome& o = outcomes[i];
        std::snprintf(line, sizeof line, " %-*s %10s %10s %-5s %7s %-6s ", static_cast<int>(w), p.name.c_str(),
                      ((p.upper_bound ? "<" : "") + figure(p.value)).c_str(), o.ok ? figure(o.measured).c_str() : "error", p.unit.c_str(),
                      o.ok ? ratio_text(o.ratio).c_str() : "-", o.ok ? (o.within ? "ok" : "OUT") : "-");
        out << line << p.source << "\n";
    }
    bool heading = false;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const ReferencePoint& p = *jobs[i].point;
        if (!outcomes[i].ok || outcomes[i].within) continue;
        if (!heading)
            out << (design.empty() ? "\nWhat the model lacks where a point is out (docs/calibration.md):\n"
                                 : "\nOut at this design point; what the preset lacks for each (docs/calibration.md):\n");
        heading = true;
        out << " " << p.name << ": " << (p.model_gap.empty() ? "not recorded" : p.model_gap) << "\n";
    }
}

void print_csv(std::ostream& out, const std::vector<Job>& jobs, const std::vector<Outcome>& outcomes) {
    out << "name,preset,published,measured,unit,ratio,within_tolerance,kind,source\n";
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const ReferencePoint& p = *jobs[i].point;
        const Outcome& o = outcomes[i];
        out << csv_field(p.name) << "," << csv_field(p.preset) << "," << exact(p.value) << ","
            << (o.ok ? exact(o.measured) : "") << "," << csv_field(p.unit) << "," << (o.ok ? exact(o.ratio) : "") << ","
            << (o.ok ? (o.within ? "yes" : "no") : "error") << "," << csv_field(p.kind) << "," << csv_field(p.source) << "\n";
    }
}

void print_json(std::ostream& out, const std::string& config, const std::vector<std::string>& sets,
                const std::vector<Job>& jobs, const std::vector<Outcome>& outcomes) {
    nlohmann::json j;
    j["kind"] = "calibrate";
    j["tolerance"] = kCalibrationTolerance;
    if (!config.empty()) j["config"] = config;
    j["settings"] = sets;
    j["points"] = nlohmann::json::array();
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const ReferencePoint& p = *jobs[i].point;
        const Outcome& o = outcomes[i];
        nlohmann::json e{{"name", p.name},          {"preset", p.preset},   {"metric", p.metric},
                         {"published", p.value},     {"unit", p.unit},       {"kind", p.kind},
                         {"source", p.source},       {"conditions", p.conditions},
                         {"command", jobs[i].shown}, {"column", p.column}};
        if (!p.model_gap.empty()) e["model_gap"] = p.model_gap;
        if (!jobs[i].kept.empty()) e["kept_own"] = jobs[i].kept;
        if (o.ok) {
            e["measured"] = o.measured;
            e["ratio"] = o.ratio;
            e["within_tolerance"] = o.within;
        } else {
            e["error"] = o.error;
        }
        j["points"].push_back(e);
    }
    out << j.dump() << "\n";
}

std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? "none" : s;
}

bool in_model(const std::string& preset) {
    const auto names = sim::Config::preset_names();
    return std::find(names.begin(), names.end(), preset) != names.end();
}

}  // namespace

int run_calibrate(const CalibrateOptions& o, std::ostream& out, std::ostream& err) {
    const ReferenceSet set = load_reference_points(o.reference);
    const std::vector<std::string> model = sim::Config::preset_names();
    std::vector<std::string> with_points;
    for (const auto& c : set.classes)
        if (!set.points_of(c.preset).empty()) with_points.push_back(c.preset);

    std::vector<std::string> presets;
    if (!o.preset.empty()) {
        const std::string shown = "'" + sim::printable(o.preset) + "'";
        const auto points = set.points_of(o.preset);
        if (!in_model(o.preset) && !points.empty())
            throw std::invalid_argument("preset " + shown + " has " + std::to_string(points.size()) + " reference point" +
                                        (points.size() == 1 ? "" : "s") + " but is not a preset of the model yet (model presets: " +
                                        joined(model) + "): nothing to run");
        if (!in_model(o.preset))
            throw std::invalid_argument("unknown preset " + shown + " (model presets: " + joined(model) +
                                        "; with reference points: " + joined(with_points) + ")");
        if (points.empty())
            throw std::invalid_argument("preset " + shown + " has no reference points in " + sim::printable(set.path) +
                                        " (with reference points: " + joined(with_points) + ")");
        presets.push_back(o.preset);
    } else {
        std::vector<std::string> waiting;
        for (const auto& p : with_points) (in_model(p) ? presets : waiting).push_back(p);
        if (!waiting.empty())
            err << "hcasim calibrate: " << joined(waiting)
                << ": reference points only, not presets of the model yet: not run\n";
        if (presets.empty()) throw std::invalid_argument("no preset of the model has reference points in " + sim::printable(set.path));
    }

    // A design point's file and assignments are checked once per preset here,
    // so a bad key or value is one clear error, not one failed run per point.
    for (const auto& preset : presets) {
        sim::Config cfg;
        cfg.load_preset(preset);
        if (!o.config.empty()) cfg.load_file(o.config);
        for (const auto& a : o.sets) cfg.set_assignment(a);
    }
    // The keys the design point assigns, each once, its file's first (each
    // point's own --set still goes after both).
    std::vector<std::string> design_keys;
    if (!o.config.empty()) design_keys = read_preset_file(o.config).keys;
    for (const auto& a : o.sets)
        if (std::find(design_keys.begin(), design_keys.end(), key_of(a)) == design_keys.end())
            design_keys.push_back(key_of(a));
    std::vector<std::string> design;  // as a person would type it
    if (!o.config.empty()) design.push_back("--config " + o.config);
    for (const auto& a : o.sets) design.push_back("--set " + a);

    std::vector<Job> jobs;
    for (const auto& preset : presets)
        for (const ReferencePoint* p : set.points_of(preset)) {
            Job j;
            j.point = p;
            j.preset = preset;
            j.args = shell_split(p->command);
            const std::vector<std::string> own = keys_set_by(j.args);
            for (const auto& k : design_keys)
                if (std::find(own.begin(), own.end(), k) != own.end()) j.kept.push_back(k);
            if (!o.config.empty()) {
                // The point's own --set comes after the file, so it wins.
                j.args.push_back("--config");
                j.args.push_back(o.config);
            }
            for (const auto& a : o.sets) {
                if (std::find(j.kept.begin(), j.kept.end(), key_of(a)) != j.kept.end()) continue;
                j.args.push_back("--set");
                j.args.push_back(a);
            }
            for (const char* a : {"--preset", preset.c_str(), "--format", "json"}) j.args.push_back(a);
            j.shown = "hcasim";
            for (const auto& a : j.args) j.shown += " " + a;
            jobs.push_back(std::move(j));
        }

    // As many points at once as the machine has CPUs; results keep the
    // file's order whatever order they finish in.
    const std::string exe = self_exe();
    std::vector<Outcome> outcomes(jobs.size());
    const bool progress = isatty(STDERR_FILENO) != 0;
    std::mutex progress_mutex;
    std::atomic<std::size_t> next{0}, done{0};
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t workers = std::min<std::size_t>(cpus, jobs.size());
    auto work = [&]() {
        for (std::size_t i; (i = next++) < jobs.size();) {
            outcomes[i] = measure(exe, jobs[i]);
            const std::size_t finished = ++done;
            if (progress) {
                std::lock_guard<std::mutex> lock(progress_mutex);
                err << "\rhcasim calibrate: " << finished << " of " << jobs.size() << " points measured" << std::flush;
            }
        }
    };
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < workers; ++t) threads.emplace_back(work);
    for (auto& t : threads) t.join();
    if (progress) err << "\r" << std::string(60, ' ') << "\r" << std::flush;

    if (o.format == Format::Csv) print_csv(out, jobs, outcomes);
    else if (o.format == Format::Json) print_json(out, o.config, o.sets, jobs, outcomes);
    else print_text(out, presets, design, design_keys, jobs, outcomes);
    out.flush();

    int status = 0;
    std::vector<std::string> outside;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (!outcomes[i].ok) {
            err << "hcasim: error: point " << jobs[i].point->name << ": " << outcomes[i].error << "\n";
            status = 1;
        } else if (!outcomes[i].within) {
            outside.push_back(jobs[i].point->name + " (ratio " + exact(outcomes[i].ratio) + ")");
        }
    }
    if (o.check) {
        const std::string tol = "+-" + percent(kCalibrationTolerance);
        if (!outside.empty()) {
            err << "hcasim calibrate --check: " << outside.size() << " of " << jobs.size() << " points outside " << tol
                << ": " << joined(outside) << "\n";
            status = 1;
        } else if (status == 0) {
            err << "hcasim calibrate --check: " << jobs.size() << " of " << jobs.size() << " points within " << tol << "\n";
        }
    }
    return status;
}

// ---------------------------------------------------------------------------
// hcasim presets.

namespace {

std::string settings_of(const std::string& preset, const PresetFile& f, bool markdown) {
    sim::Config cfg;
    cfg.load_preset(preset);
    std::string s;
    for (const auto& k : f.keys) {
        const std::string kv = k + "=" + cfg.raw(k);
        s += (s.empty() ? "" : markdown ? ", " : " ") + (markdown ? "`" + kv + "`" : kv);
    }
    return s.empty() ? (markdown ? "no parameters (the built-in defaults)" : "(the built-in defaults)") : s;
}

std::string scale_text(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.10g", v);
    return b;
}

std::string published(const ReferencePoint& p) {
    std::string s = (p.upper_bound ? "below " : "") + exact(p.value) + " " + p.unit;
    if (p.has_range) s += " (" + exact(p.range_lo) + "-" + exact(p.range_hi) + ")";
    return s;
}

void print_text_presets(const ReferenceSet& set, std::ostream& out) {
    const auto model = sim::Config::preset_names();
    std::vector<std::string> order = model;
    for (const auto& c : set.classes)
        if (std::find(order.begin(), order.end(), c.preset) == order.end()) order.push_back(c.preset);
    bool first = true;
    for (const auto& name : order) {
        const bool modelled = std::find(model.begin(), model.end(), name) != model.end();
        const ReferenceClass* k = set.find_class(name);
        if (!first) out << "\n";
        first = false;
        if (modelled) {
            const PresetFile f = read_preset_file(sim::Config::presets_dir() + "/" + name + ".ini");
            out << name << ": " << (f.description.empty() ? (k ? k->device : "") : f.description) << "\n";
            out << "  sets: " << settings_of(name, f, false) << "\n";
        } else {
            out << name << ": " << k->device << "\n";
            out << "  not a preset of the model yet: reference points only\n";
        }
        if (k && !k->facts.empty()) {
            out << "  facts:\n";
            for (const auto& f : k->facts) out << "    - " << f.fact << " [" << f.source << "]\n";
        }
        const auto points = set.points_of(name);
        if (points.empty()) {
            out << "  reference points: none\n";
            continue;
        }
        out << "  reference points" << (modelled ? " (hcasim calibrate --preset " + name + ")" : "") << ":\n";
        for (const ReferencePoint* p : points)
            out << "    - " << p->name << ": " << published(*p) << ", " << p->metric << (p->kind == "measured" ? "" : " [" + p->kind + "]")
                << " [" << p->source << "]\n";
    }
}

void print_markdown(const ReferenceSet& set, std::ostream& out) {
    const auto model = sim::Config::preset_names();
    out << "# Reference points\n\n"
        << "<!-- Generated by `build/hcasim presets --format md > docs/reference-points.md` from\n"
        << "     testbench/configs/reference_points.json and the presets; a test checks that they agree. -->\n\n"
        << set.description << "\n\n"
        << "`hcasim calibrate --preset NAME` runs each point of a preset as `hcasim COMMAND --preset NAME --format json`, "
        << "one process per point, reads the named column of its one result row (of `total` for `msgrate`), multiplies "
        << "it by the point's scale where units differ, and prints published, measured, unit, ratio (measured / "
        << "published) and source; `--check` makes it exit with status 1 when a ratio lies outside 1 ± "
        << percent(kCalibrationTolerance) << ". `--reference FILE` reads another file of the same form. "
        << "docs/calibration.md has today's results and what the model lacks where they differ.\n\n"
        << "A point's `kind` is `measured` (a benchmark run reported by its source) or `vendor claim` (a figure "
        << "from a product brief or press release, conditions unstated). The column `published` gives the figure "
        << "compared; where the source gives a range it follows in brackets. A figure the source gives as a bound "
        << "(\"sub-600 ns\") is marked `below`: the model agrees with it when the ratio is at most 1 + "
        << percent(kCalibrationTolerance) << ".\n";
    std::vector<std::string> order = model;
    for (const auto& c : set.classes)
        if (std::find(order.begin(), order.end(), c.preset) == order.end()) order.push_back(c.preset);
    for (const auto& name : order) {
        const bool modelled = std::find(model.begin(), model.end(), name) != model.end();
        const ReferenceClass* k = set.find_class(name);
        out << "\n## " << name << ": " << (k ? k->device : read_preset_file(sim::Config::presets_dir() + "/" + name + ".ini").description)
            << "\n\n";
        if (modelled) {
            const PresetFile f = read_preset_file(sim::Config::presets_dir() + "/" + name + ".ini");
            out << "Preset file `testbench/configs/" << name << ".ini`";
            if (!f.description.empty()) out << " (\"" << f.description << "\")";
            out << " sets " << settings_of(name, f, true) << ".\n";
        } else {
            out << "Not a preset of the model yet: the points wait for `testbench/configs/" << name
                << ".ini`; `hcasim calibrate --preset " << name << "` says so and runs nothing.\n";
        }
        if (k && !k->facts.empty()) {
            out << "\nFacts behind the preset:\n\n";
            for (const auto& f : k->facts) out << "- " << f.fact << ". Source: " << f.source << ".\n";
        }
        const auto points = set.points_of(name);
        if (!points.empty()) {
            out << "\n| point | metric | published | kind | hcasim command (add `--preset " << name << " --format json`) | column |\n"
                << "|---|---|---|---|---|---|\n";
            for (const ReferencePoint* p : points)
                out << "| `" << p->name << "` | " << p->metric << " | " << published(*p) << " | " << p->kind << " | `hcasim "
                    << p->command << "` | `" << p->column << "`" << (p->scale != 1 ? " x " + scale_text(p->scale) : "") << " |\n";
            for (const ReferencePoint* p : points) {
                out << "\n### " << p->name << "\n\n"
                    << "- Published: " << published(*p) << ", " << p->kind << ".\n"
                    << "- Conditions: " << p->conditions << ".\n"
                    << "- Published command: " << p->published_command << ".\n";
                if (!p->note.empty()) out << "- Note: " << p->note << ".\n";
                out << "- Source: " << p->source << ".\n";
            }
        }
        if (k && !k->gaps.empty()) {
            out << "\nNo published figure found:\n\n";
            for (const auto& g : k->gaps) out << "- " << g.metric << ": " << g.note << ".\n";
        }
    }
    if (!set.consulted.empty()) {
        out << "\n## Sources read but not recorded as points\n\n";
        for (const auto& c : set.consulted) out << "- " << c.source << ": " << c.why_not_a_point << ".\n";
    }
}

}  // namespace

int print_presets(const std::string& reference, bool markdown, std::ostream& out) {
    const ReferenceSet set = load_reference_points(reference);
    if (markdown) print_markdown(set, out);
    else print_text_presets(set, out);
    return 0;
}

}  // namespace hcasim::testbench
