#include "model/sim/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#ifndef HCASIM_PRESETS_DIR
#define HCASIM_PRESETS_DIR "testbench/configs"
#endif

namespace hcasim::sim {

namespace {

// Whole numbers exactly (4294967295, not 4.29497e+09), others as %g.
std::string format_number(double v) {
    char b[32];
    if (std::fabs(v) < 9.0e15 && v == std::floor(v))
        std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
    else
        std::snprintf(b, sizeof b, "%g", v);
    return b;
}

std::string allowed(const ParamSpec& s) {
    std::ostringstream os;
    switch (s.kind) {
    case ParamSpec::Kind::Bool:
        return "true or false";
    case ParamSpec::Kind::Text:
        return "any text";
    case ParamSpec::Kind::Choice: {
        for (std::size_t i = 0; i < s.choices.size(); ++i) os << (i ? ", " : "one of ") << s.choices[i];
        return os.str();
    }
    case ParamSpec::Kind::Int:
        if (!s.choices.empty()) {
            for (std::size_t i = 0; i < s.choices.size(); ++i) os << (i ? ", " : "one of ") << s.choices[i];
            return os.str();
        }
        os << "an integer from " << format_number(s.min) << " to " << format_number(s.max);
        break;
    case ParamSpec::Kind::Real:
        os << "a number from " << format_number(s.min) << " to " << format_number(s.max);
        break;
    }
    if (!s.unit.empty()) os << " (" << s.unit << ")";
    return os.str();
}

bool parse_int(const std::string& v, std::int64_t& out) {
    if (v.empty()) return false;
    errno = 0;
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (errno != 0 || end == v.c_str() || *end != '\0') return false;
    out = x;
    return true;
}

bool parse_real(const std::string& v, double& out) {
    if (v.empty()) return false;
    // Decimal notation only: strtod would also take hex ("0x10"), "inf" and
    // "nan".
    if (v.find_first_not_of("0123456789.eE+-") != std::string::npos) return false;
    errno = 0;
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (errno != 0 || end == v.c_str() || *end != '\0' || !std::isfinite(x)) return false;
    out = x;
    return true;
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    const auto e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

}  // namespace

std::string printable(const std::string& s) {
    std::string out;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c >= 0x7f) {
            char b[5];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        } else {
            out += ch;
        }
    }
    return out;
}

namespace {

struct DeclarationGroup {
    int rank;
    const char* name;
    ParamDeclarations::Declare declare;
};

// Constructed on first use: the blocks' static ParamDeclarations objects
// register here during static initialisation, in an order C++ leaves open.
std::vector<DeclarationGroup>& declaration_groups() {
    static std::vector<DeclarationGroup> groups;
    return groups;
}

bool& registry_built() {
    static bool built = false;
    return built;
}

void declare_sim_params(ParamRegistry& r) {
    r.add({"sim.seed", ParamSpec::Kind::Int, "", "1", 0, 4294967295.0, {},
           "seed of every pseudo-random choice in a run (the workloads' payload patterns)", "-"});
    r.add({"sim.log_level", ParamSpec::Kind::Choice, "", "warn", 0, 0, {"none", "error", "warn", "info", "debug"},
           "hierarchical log level", "-"});
}

const ParamDeclarations kSimParams{param_rank::kSim, "sim", declare_sim_params};

}  // namespace

ParamDeclarations::ParamDeclarations(int rank, const char* name, Declare declare) {
    if (registry_built()) {
        // parameters() has already been handed out without these keys.
        std::fprintf(stderr, "hcasim: parameters of '%s' declared after the parameter registry was built\n", name);
        std::abort();
    }
    declaration_groups().push_back({rank, name, declare});
}

const ParamRegistry& parameters() {
    static const ParamRegistry registry = [] {
        auto groups = declaration_groups();
        std::sort(groups.begin(), groups.end(), [](const DeclarationGroup& a, const DeclarationGroup& b) {
            return a.rank != b.rank ? a.rank < b.rank : std::strcmp(a.name, b.name) < 0;
        });
        ParamRegistry r;
        for (const auto& g : groups) g.declare(r);
        registry_built() = true;
        return r;
    }();
    return registry;
}

bool ParamSpec::matches(const std::string& k) const {
    const std::size_t star = key.find('*');
    if (star == std::string::npos) return k == key;
    const std::size_t tail = key.size() - star - 1;
    return k.size() > key.size() - 1 && k.compare(0, star, key, 0, star) == 0 &&
           k.compare(k.size() - tail, tail, key, star + 1, tail) == 0;
}

void ParamRegistry::add_per_node(ParamSpec spec) {
    spec.per_node = true;
    add(std::move(spec));
}

void ParamRegistry::add(ParamSpec spec) {
    if (m_index.count(spec.key)) throw ConfigError("parameter declared twice: " + spec.key);
    m_index[spec.key] = m_specs.size();
    if (spec.is_pattern()) m_patterns.push_back(m_specs.size());
    m_specs.push_back(std::move(spec));
}

const ParamSpec* ParamRegistry::find(const std::string& key) const {
    auto it = m_index.find(key);
    if (it != m_index.end()) return m_specs[it->second].is_pattern() ? nullptr : &m_specs[it->second];
    for (const std::size_t i : m_patterns)
        if (m_specs[i].matches(key)) return &m_specs[i];
    return nullptr;
}

Config::Config() {
    for (const auto& s : parameters().all())
        if (!s.is_pattern()) m_values[s.key] = s.default_value;
}

const std::string& Config::value(const std::string& key, const ParamSpec& s) const {
    auto it = m_values.find(key);
    return it == m_values.end() ? s.default_value : it->second;
}

namespace {

[[noreturn]] void unknown_key(const std::string& key) {
    throw ConfigError("unknown configuration key '" + printable(key) + "' (hcasim params lists the keys)");
}

}  // namespace

const ParamSpec& Config::spec(const std::string& key) const {
    const ParamSpec* s = parameters().find(key);
    if (!s) unknown_key(key);
    return *s;
}

std::string Config::own_key(const std::string& key, int& node) {
    node = -1;
    if (key.compare(0, 4, "node") != 0) return key;
    std::size_t i = 4;
    while (i < key.size() && i < 12 && std::isdigit(static_cast<unsigned char>(key[i]))) ++i;
    // Decimal, without leading zeros, and a key after the dot.
    if (i == 4 || i >= key.size() || key[i] != '.' || i + 1 == key.size() || (key[4] == '0' && i > 5)) return key;
    node = std::stoi(key.substr(4, i - 4));
    return key.substr(i + 1);
}

void Config::set(const std::string& key_in, const std::string& value_in) {
    const std::string key = trim(key_in);
    const std::string value = trim(value_in);
    if (const ParamSpec* s = parameters().find(key)) {
        assign(*s, key, value, m_values.try_emplace(key, s->default_value).first->second);
        return;
    }
    int node = -1;
    const std::string own = own_key(key, node);
    if (node < 0) unknown_key(key);
    const auto beyond = [&] {
        return ConfigError("invalid key '" + printable(key) + "': node " + std::to_string(node) +
                           " is beyond any fabric (fabric.nodes is at most " + std::to_string(kMaxNode + 1) + ")");
    };
    if (own == "preset") {
        if (node > kMaxNode) throw beyond();
        try {
            apply_node_preset(node, value);
        } catch (const ConfigError& e) {
            throw ConfigError(key + ": " + e.what());
        }
        return;
    }
    const ParamSpec* s = parameters().find(own);
    if (!s) throw ConfigError("unknown configuration key '" + printable(key) + "': '" + printable(own) +
                              "' is no parameter (hcasim params lists the keys)");
    if (!s->per_node)
        throw ConfigError("invalid key '" + printable(key) + "': " + own +
                          " is one value for every node (hcasim params marks the keys a node can set for itself)");
    if (node > kMaxNode) throw beyond();
    assign(*s, key, value, m_node_values[node][own]);
    // Set by the node itself: a later preset of the node leaves it alone.
    const auto preset = m_node_presets.find(node);
    if (preset != m_node_presets.end()) preset->second.keys.erase(own);
}

void Config::apply_node_preset(int node, const std::string& name) {
    Config preset;  // the preset alone, over the defaults
    std::vector<std::string> keys;
    read_ini(preset_path(name), [&](const std::string& key, const std::string& value) {
        int other = -1;
        own_key(key, other);
        if (other >= 0)
            throw ConfigError("a node's preset describes that node alone: it cannot set " + printable(key));
        preset.set(key, value);
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    });
    auto& own = m_node_values[node];
    // What an earlier preset of this node gave it goes first.
    const auto earlier = m_node_presets.find(node);
    if (earlier != m_node_presets.end())
        for (const auto& k : earlier->second.keys) own.erase(k);
    NodePreset np;
    np.name = name;
    // The keys that make the class-wide adapter what it is are this node's
    // preset's too, at its value or the default.
    std::set<std::string> take(m_preset_keys);
    take.insert(keys.begin(), keys.end());
    for (const auto& k : take) {
        const ParamSpec& s = *parameters().find(k);
        if (!s.per_node) continue;
        own[k] = preset.value(k, s);
        np.keys.insert(k);
    }
    for (const auto& k : keys) {
        const ParamSpec& s = *parameters().find(k);
        if (!s.per_node) np.fabric_wide.emplace_back(k, preset.value(k, s));
    }
    m_node_presets[node] = std::move(np);
}

std::string Config::node_preset(int node) const {
    const auto np = m_node_presets.find(node);
    return np == m_node_presets.end() ? "" : np->second.name;
}

void Config::assign(const ParamSpec& s, const std::string& key, const std::string& value, std::string& slot) {
    const std::string bad = "invalid value '" + printable(value) + "' for " + key + ": expected " + allowed(s);
    // The C-string parsers below would stop at a NUL and accept what precedes it.
    if (value.find('\0') != std::string::npos)
        throw ConfigError("invalid value '" + printable(value) + "' for " + key + ": it contains a NUL byte");
    switch (s.kind) {
    case ParamSpec::Kind::Bool:
        if (value == "true" || value == "1" || value == "yes" || value == "on") {
            slot = "true";
        } else if (value == "false" || value == "0" || value == "no" || value == "off") {
            slot = "false";
        } else {
            throw ConfigError(bad);
        }
        return;
    case ParamSpec::Kind::Text:
        slot = s.list && !slot.empty() && slot != s.default_value ? slot + "," + value : value;
        return;
    case ParamSpec::Kind::Choice:
        if (std::find(s.choices.begin(), s.choices.end(), value) == s.choices.end()) throw ConfigError(bad);
        slot = value;
        return;
    case ParamSpec::Kind::Int: {
        std::int64_t x = 0;
        if (!parse_int(value, x)) throw ConfigError(bad);
        if (!s.choices.empty()) {
            if (std::find(s.choices.begin(), s.choices.end(), std::to_string(x)) == s.choices.end())
                throw ConfigError(bad);
        } else if (static_cast<double>(x) < s.min || static_cast<double>(x) > s.max) {
            throw ConfigError(bad);
        }
        slot = std::to_string(x);
        return;
    }
    case ParamSpec::Kind::Real: {
        double x = 0;
        if (!parse_real(value, x) || x < s.min || x > s.max) throw ConfigError(bad);
        slot = value;
        return;
    }
    }
}

bool Config::any_node_sets(const std::string& key) const {
    for (const auto& [node, own] : m_node_values)
        if (own.count(key)) return true;
    return false;
}

Config Config::for_node(int node) const {
    Config c = *this;
    c.m_node_values.clear();
    c.m_node_presets.clear();
    const auto own = m_node_values.find(node);
    if (own != m_node_values.end())
        for (const auto& [k, v] : own->second) c.m_values[k] = v;
    return c;
}

void Config::set_assignment(const std::string& a) {
    const auto eq = a.find('=');
    if (eq == std::string::npos) throw ConfigError("expected key=value, got '" + printable(a) + "'");
    set(a.substr(0, eq), a.substr(eq + 1));
}

namespace {

// The bytes of a configuration file. stat() first: a directory, FIFO or
// device is refused without being opened (opening a FIFO blocks, reading
// /dev/zero never ends); then at most kMaxFileBytes + 1 bytes are read, so a
// file that grows meanwhile is refused too.
std::string read_config_file(const std::string& path) {
    const std::string quoted = "'" + printable(path) + "'";
    if (path.empty()) throw ConfigError("configuration file name is empty");
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw ConfigError("cannot read configuration file " + quoted + ": " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw ConfigError("configuration file " + quoted + " is a directory");
    if (!S_ISREG(st.st_mode)) throw ConfigError("configuration file " + quoted + " is not a regular file");
    const std::string too_big = "configuration file " + quoted + " is larger than " +
                                std::to_string(Config::kMaxFileBytes) + " bytes";
    if (static_cast<std::uint64_t>(st.st_size) > Config::kMaxFileBytes) throw ConfigError(too_big);
    // O_NONBLOCK: should the path have become a FIFO since stat(), open()
    // returns at once and fstat() refuses it.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw ConfigError("cannot read configuration file " + quoted + ": " + std::strerror(errno));
    std::string bytes;
    std::string error;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        error = "configuration file " + quoted + " is not a regular file";
    } else {
        char buf[65536];
        for (;;) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                error = "cannot read configuration file " + quoted + ": " + std::strerror(errno);
                break;
            }
            if (n == 0) break;
            bytes.append(buf, static_cast<std::size_t>(n));
            if (bytes.size() > Config::kMaxFileBytes) {
                error = too_big;
                break;
            }
        }
    }
    ::close(fd);
    if (!error.empty()) throw ConfigError(error);
    return bytes;
}

}  // namespace

void Config::load_file(const std::string& path) {
    read_ini(path, [this](const std::string& key, const std::string& value) { set(key, value); });
}

void Config::read_ini(const std::string& path,
                      const std::function<void(const std::string&, const std::string&)>& assign) {
    std::string text = read_config_file(path);
    // Editors on Windows start UTF-8 files with a byte order mark.
    if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
    const std::string where = printable(path);
    std::istringstream in(text);
    std::string section;
    int number = 0;
    for (std::string line; std::getline(in, line);) {
        ++number;
        const std::string at = where + ":" + std::to_string(number) + ": ";
        std::string t = line;
        const auto hash = t.find('#');
        if (hash != std::string::npos) t.resize(hash);
        t = trim(t);
        if (t.empty() || t[0] == ';') continue;
        if (t.front() == '[') {
            if (t.back() != ']' || trim(t.substr(1, t.size() - 2)).empty())
                throw ConfigError(at + "invalid line '" + printable(line) + "': expected [section] or name = value");
            section = trim(t.substr(1, t.size() - 2));
            continue;
        }
        const auto eq = t.find('=');
        if (eq == std::string::npos || trim(t.substr(0, eq)).empty())
            throw ConfigError(at + "invalid line '" + printable(line) + "': expected [section] or name = value");
        const std::string name = trim(t.substr(0, eq));
        try {
            assign(section.empty() ? name : section + "." + name, t.substr(eq + 1));
        } catch (const ConfigError& e) {
            throw ConfigError(at + e.what());
        }
    }
}

std::string Config::presets_dir() {
    if (const char* env = std::getenv("HCASIM_PRESETS")) return env;
    return HCASIM_PRESETS_DIR;
}

std::vector<std::string> Config::preset_names() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(presets_dir(), ec))
        if (e.path().extension() == ".ini") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::string Config::preset_path(const std::string& name) {
    if (name.find('/') != std::string::npos || std::filesystem::exists(name)) return name;
    const std::string path = presets_dir() + "/" + name + ".ini";
    if (!std::filesystem::exists(path)) {
        std::string list;
        for (const auto& n : preset_names()) list += (list.empty() ? "" : ", ") + n;
        throw ConfigError("unknown preset '" + printable(name) + "' (presets: " + list + ")");
    }
    return path;
}

void Config::load_preset(const std::string& name) {
    read_ini(preset_path(name), [this](const std::string& key, const std::string& value) {
        set(key, value);
        int node = -1;
        own_key(key, node);
        if (node < 0) m_preset_keys.insert(key);
    });
}

const std::string& Config::raw(const std::string& key) const {
    return value(key, spec(key));
}

std::int64_t Config::get_int(const std::string& key) const {
    const ParamSpec& s = spec(key);
    if (s.kind != ParamSpec::Kind::Int) throw ConfigError(key + " is not an integer parameter");
    std::int64_t x = 0;
    parse_int(value(key, s), x);
    return x;
}

double Config::get_real(const std::string& key) const {
    const ParamSpec& s = spec(key);
    double x = 0;
    if (s.kind == ParamSpec::Kind::Int) return static_cast<double>(get_int(key));
    if (s.kind != ParamSpec::Kind::Real) throw ConfigError(key + " is not a numeric parameter");
    parse_real(value(key, s), x);
    return x;
}

bool Config::get_bool(const std::string& key) const {
    const ParamSpec& s = spec(key);
    if (s.kind != ParamSpec::Kind::Bool) throw ConfigError(key + " is not a boolean parameter");
    return value(key, s) == "true";
}

const std::string& Config::get_choice(const std::string& key) const {
    const ParamSpec& s = spec(key);
    if (s.kind != ParamSpec::Kind::Choice) throw ConfigError(key + " is not a choice parameter");
    return value(key, s);
}

const std::string& Config::get_text(const std::string& key) const {
    const ParamSpec& s = spec(key);
    if (s.kind != ParamSpec::Kind::Text) throw ConfigError(key + " is not a text parameter");
    return value(key, s);
}

std::vector<std::pair<std::string, std::string>> Config::overrides() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& s : parameters().all()) {
        if (s.is_pattern()) {
            for (const auto& [k, v] : m_values)
                if (s.matches(k) && v != s.default_value) out.emplace_back(k, v);
            continue;
        }
        const auto& v = m_values.at(s.key);
        if (v != s.default_value) out.emplace_back(s.key, v);
    }
    for (const auto& [node, own] : m_node_values) {
        const std::string prefix = "node" + std::to_string(node) + ".";
        const auto np = m_node_presets.find(node);
        if (np != m_node_presets.end()) {
            std::string not_taken;
            for (const auto& [k, v] : np->second.fabric_wide)
                if (v != value(k, *parameters().find(k))) not_taken += (not_taken.empty() ? "" : ", ") + k + "=" + v;
            out.emplace_back(prefix + "preset",
                             np->second.name + (not_taken.empty() ? "" : "; fabric-wide, so not taken: " + not_taken));
        }
        for (const auto& s : parameters().all()) {
            const auto v = own.find(s.key);
            if (v == own.end()) continue;
            // What the node's preset gave it shows where the node differs.
            if (np != m_node_presets.end() && np->second.keys.count(s.key) && v->second == value(s.key, s)) continue;
            out.emplace_back(prefix + s.key, v->second);
        }
    }
    return out;
}

}  // namespace hcasim::sim
