#include "testbench/cli/sweep_plan.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/sim/config.hpp"
#include "testbench/cli/cli_input.hpp"

namespace hcasim::cli {

namespace {

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string quoted(const std::string& s) { return "'" + sim::printable(s) + "'"; }

// Workload options a sweep can vary besides the parameters (whose keys all
// contain a dot): whole numbers, each with its short form, and the preset.
struct SweptOption {
    const char* name;
    char short_name;
    long long min;
    bool preset = false;  // a preset's name or file, not a number
};
const std::vector<SweptOption>& swept_options() {
    static const std::vector<SweptOption> o{{"inline", 'I', 0},   {"iters", 'n', 1},    {"machines", 0, 2},
                                            {"mtu", 'm', 1},      {"post-list", 'l', 1}, {"preset", 'p', 0, true},
                                            {"qps", 'q', 1},      {"threads", 0, 1},    {"tx-depth", 't', 1},
                                            {"vms", 0, 1},        {"window", 0, 1}};
    return o;
}

const SweptOption* swept_option(const std::string& name) {
    for (const auto& o : swept_options())
        if (name == o.name) return &o;
    return nullptr;
}

std::string swept_option_names() {
    std::string s;
    for (const auto& o : swept_options()) s += (s.empty() ? "" : ", ") + std::string("--") + o.name;
    return s;
}

SweepParameter parse_parameter(const std::string& text) {
    const std::string shown = "--param " + quoted(text);
    const auto eq = text.find('=');
    std::string key = eq == std::string::npos ? "" : trim(text.substr(0, eq));
    if (key.rfind("--", 0) == 0) key = key.substr(2);
    if (key.empty())
        throw std::invalid_argument("invalid " + shown + ": expected KEY=V1,V2,... (such as pcie.lanes=4,8,16)");
    // A key without a dot names one of the workload's options.
    const bool option = key.find('.') == std::string::npos;
    const SweptOption* swept = option ? swept_option(key) : nullptr;
    if (option && !swept)
        throw std::invalid_argument("unknown parameter " + quoted(key) + " in " + shown +
                                    " (hcasim params lists the parameters; the workload options a sweep can vary are " +
                                    swept_option_names() + ")");
    int node = -1;
    const std::string own = option ? key : sim::Config::own_key(key, node);
    if (!option && !sim::parameters().find(own) && !(node >= 0 && own == "preset"))
        throw std::invalid_argument("unknown parameter " + quoted(key) + " in " + shown +
                                    " (hcasim params lists the parameters)");
    SweepParameter p;
    p.key = option ? "--" + key : key;
    const std::string list = text.substr(eq + 1);
    if (trim(list).empty()) throw std::invalid_argument(shown + " names no values: expected KEY=V1,V2,...");
    for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        const std::string value = trim(list.substr(at, comma - at));
        at = comma + 1;
        if (value.empty()) throw std::invalid_argument(shown + " has an empty value");
        if (std::find(p.values.begin(), p.values.end(), value) != p.values.end())
            throw std::invalid_argument(shown + " names the value " + quoted(value) + " twice");
        // Each value on its own: what only a combination makes wrong shows
        // when that point runs (an option's limits: when the workload reads it).
        if (swept && swept->preset) {
            try {
                sim::Config().load_preset(value);
            } catch (const sim::ConfigError& e) {
                throw std::invalid_argument(shown + ": " + e.what());
            }
        } else if (swept) {
            const bool whole = value.find_first_not_of("0123456789") == std::string::npos && value.size() <= 9;
            if (!whole || std::stoll(value) < swept->min)
                throw std::invalid_argument(shown + ": invalid value " + quoted(value) + " for --" + key +
                                            ": expected a whole number from " + std::to_string(swept->min));
        } else {
            try {
                sim::Config().set(key, value);
            } catch (const sim::ConfigError& e) {
                throw std::invalid_argument(shown + ": " + e.what());
            }
        }
        p.values.push_back(value);
    }
    return p;
}

bool is_option(const std::string& arg, const std::string& long_name, char short_name = 0) {
    const std::string l = "--" + long_name;
    if (arg == l || arg.rfind(l + "=", 0) == 0) return true;
    return short_name && arg.size() >= 2 && arg[0] == '-' && arg[1] == short_name;
}

void check_workload(const std::vector<std::string>& w, const std::vector<SweepParameter>& params) {
    const auto& known = SweepPlan::workloads();
    std::string names;
    for (std::size_t i = 0; i < known.size(); ++i)
        names += (i == 0 ? "" : i + 1 == known.size() ? " or " : ", ") + known[i];
    if (w.empty())
        throw std::invalid_argument("nothing after --: name the workload to sweep (" + names + ") and its options");
    if (std::find(known.begin(), known.end(), w[0]) == known.end())
        throw std::invalid_argument("sweep runs " + names + " (the commands that print one result with --format json), not " +
                                    quoted(w[0]));
    // calibrate's points run commands of their own: of the workload options
    // a sweep can vary, only the preset is calibrate's.
    if (w[0] == "calibrate")
        for (const auto& p : params)
            if (p.key.rfind("--", 0) == 0 && p.key != "--preset")
                throw std::invalid_argument("--param " + p.key.substr(2) +
                                            ": calibrate has no such option (each reference point runs its own "
                                            "command; a sweep of calibrate varies parameters and the preset)");
    for (std::size_t i = 1; i < w.size(); ++i) {
        if (is_option(w[i], "format", 'f'))
            throw std::invalid_argument("the workload's " + quoted(w[i]) +
                                        ": sweep runs the workload with --format json itself (--out FILE.csv or "
                                        "FILE.json picks the sweep's format)");
        if (is_option(w[i], "counters"))
            throw std::invalid_argument("sweep does not take --counters in the workload's options: its rows are the "
                                        "workload's result rows");
        if (is_option(w[i], "vcd"))
            throw std::invalid_argument("sweep does not take --vcd in the workload's options: every point would "
                                        "write the same waveform files");
        if (is_option(w[i], "trace"))
            throw std::invalid_argument("sweep does not take --trace in the workload's options: every point would "
                                        "write the same trace file");
        if (w[0] == "calibrate" && is_option(w[i], "check"))
            throw std::invalid_argument("sweep does not take calibrate's --check: its table has within_tolerance per "
                                        "point and design point, and a point out would stop the sweep");
        const std::string key = set_key_at(w, i);
        for (const auto& p : params) {
            if (!key.empty() && key == p.key)
                throw std::invalid_argument("the workload's --set " + quoted(key) + " sets a parameter the sweep varies (--param " +
                                            p.key + ")");
            if (p.key.rfind("--", 0) == 0) {
                const SweptOption* o = swept_option(p.key.substr(2));
                if (is_option(w[i], o->name, o->short_name))
                    throw std::invalid_argument("the workload's " + quoted(w[i]) + " is an option the sweep varies (--param " +
                                                p.key.substr(2) + ")");
            }
        }
    }
}

}  // namespace

const std::vector<std::string>& SweepPlan::workloads() {
    static const std::vector<std::string> w{"lat", "bw", "msgrate", "mcast", "swarm", "calibrate"};
    return w;
}

SweepPlan::SweepPlan(const std::vector<std::string>& params, std::vector<std::string> workload)
    : m_workload(std::move(workload)) {
    if (params.empty())
        throw std::invalid_argument("sweep needs at least one --param KEY=V1,V2,... (such as --param pcie.lanes=4,8,16)");
    for (const auto& text : params) {
        SweepParameter p = parse_parameter(text);
        for (const auto& q : m_params)
            if (q.key == p.key)
                throw std::invalid_argument("--param " + p.key + " is given twice: give all its values in one --param " +
                                            p.key + "=V1,V2,...");
        m_params.push_back(std::move(p));
    }
    for (const auto& p : m_params) {
        if (m_points > kMaxPoints / p.values.size())
            throw std::invalid_argument("the sweep has more than " + std::to_string(kMaxPoints) + " points");
        m_points *= p.values.size();
    }
    check_workload(m_workload, m_params);
}

std::vector<std::string> SweepPlan::values_of(std::size_t point) const {
    std::vector<std::string> v(m_params.size());
    for (std::size_t k = m_params.size(); k-- > 0;) {
        const std::size_t n = m_params[k].values.size();
        v[k] = m_params[k].values[point % n];
        point /= n;
    }
    return v;
}

std::string SweepPlan::describe(std::size_t point) const {
    const auto v = values_of(point);
    std::string s = "point " + std::to_string(point + 1) + " of " + std::to_string(m_points) + " (";
    for (std::size_t k = 0; k < m_params.size(); ++k) s += (k ? ", " : "") + m_params[k].key + "=" + v[k];
    return s + ")";
}

std::vector<std::string> SweepPlan::child_arguments(std::size_t point) const {
    std::vector<std::string> a = m_workload;
    const auto v = values_of(point);
    for (std::size_t k = 0; k < m_params.size(); ++k) {
        if (m_params[k].key.rfind("--", 0) == 0) {
            a.push_back(m_params[k].key);
            a.push_back(v[k]);
            continue;
        }
        a.push_back("--set");
        a.push_back(m_params[k].key + "=" + v[k]);
    }
    a.push_back("--format");
    a.push_back("json");
    return a;
}

}  // namespace hcasim::cli
