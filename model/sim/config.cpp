#include "model/sim/config.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <boost/program_options/parsers.hpp>
#include <boost/program_options/options_description.hpp>

#ifndef HCASIM_PRESETS_DIR
#define HCASIM_PRESETS_DIR "testbench/configs"
#endif

namespace hcasim::sim {

namespace {

std::string format_number(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
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

void ParamRegistry::add(ParamSpec spec) {
    if (m_index.count(spec.key)) throw ConfigError("parameter declared twice: " + spec.key);
    m_index[spec.key] = m_specs.size();
    m_specs.push_back(std::move(spec));
}

const ParamSpec* ParamRegistry::find(const std::string& key) const {
    auto it = m_index.find(key);
    return it == m_index.end() ? nullptr : &m_specs[it->second];
}

Config::Config() {
    for (const auto& s : parameters().all()) m_values[s.key] = s.default_value;
}

const ParamSpec& Config::spec(const std::string& key) const {
    const ParamSpec* s = parameters().find(key);
    if (!s) throw ConfigError("unknown configuration key '" + key + "' (hcasim params lists the keys)");
    return *s;
}

void Config::set(const std::string& key_in, const std::string& value_in) {
    const std::string key = trim(key_in);
    const std::string value = trim(value_in);
    const ParamSpec& s = spec(key);
    const std::string bad = "invalid value '" + value + "' for " + key + ": expected " + allowed(s);
    switch (s.kind) {
    case ParamSpec::Kind::Bool:
        if (value == "true" || value == "1" || value == "yes" || value == "on") {
            m_values[key] = "true";
        } else if (value == "false" || value == "0" || value == "no" || value == "off") {
            m_values[key] = "false";
        } else {
            throw ConfigError(bad);
        }
        return;
    case ParamSpec::Kind::Text:
        m_values[key] = value;
        return;
    case ParamSpec::Kind::Choice:
        if (std::find(s.choices.begin(), s.choices.end(), value) == s.choices.end()) throw ConfigError(bad);
        m_values[key] = value;
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
        m_values[key] = std::to_string(x);
        return;
    }
    case ParamSpec::Kind::Real: {
        double x = 0;
        if (!parse_real(value, x) || x < s.min || x > s.max) throw ConfigError(bad);
        m_values[key] = value;
        return;
    }
    }
}

void Config::set_assignment(const std::string& a) {
    const auto eq = a.find('=');
    if (eq == std::string::npos) throw ConfigError("expected key=value, got '" + a + "'");
    set(a.substr(0, eq), a.substr(eq + 1));
}

void Config::load_file(const std::string& path) {
    std::ifstream file(path);
    if (!file) throw ConfigError("cannot read configuration file '" + path + "'");
    // Boost's INI reader knows '#' comments only; ';' starts one too.
    std::stringstream in;
    for (std::string line; std::getline(file, line);) {
        const std::string t = trim(line);
        in << (t.empty() || t[0] == ';' ? std::string() : line) << "\n";
    }
    namespace po = boost::program_options;
    po::parsed_options parsed(nullptr);
    try {
        parsed = po::parse_config_file(in, po::options_description(), /*allow_unregistered=*/true);
    } catch (const po::error& e) {
        throw ConfigError(path + ": " + e.what());
    }
    for (const auto& opt : parsed.options) {
        if (opt.value.size() != 1) throw ConfigError(path + ": key '" + opt.string_key + "' needs one value");
        try {
            set(opt.string_key, opt.value.front());
        } catch (const ConfigError& e) {
            throw ConfigError(path + ": " + e.what());
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

void Config::load_preset(const std::string& name) {
    if (name.find('/') != std::string::npos || std::filesystem::exists(name)) {
        load_file(name);
        return;
    }
    const std::string path = presets_dir() + "/" + name + ".ini";
    if (!std::filesystem::exists(path)) {
        std::string list;
        for (const auto& n : preset_names()) list += (list.empty() ? "" : ", ") + n;
        throw ConfigError("unknown preset '" + name + "' (presets: " + list + ")");
    }
    load_file(path);
}

const std::string& Config::raw(const std::string& key) const {
    spec(key);
    return m_values.at(key);
}

std::int64_t Config::get_int(const std::string& key) const {
    const ParamSpec& s = spec(key);
    if (s.kind != ParamSpec::Kind::Int) throw ConfigError(key + " is not an integer parameter");
    std::int64_t x = 0;
    parse_int(m_values.at(key), x);
    return x;
}

double Config::get_real(const std::string& key) const {
    const ParamSpec& s = spec(key);
    double x = 0;
    if (s.kind == ParamSpec::Kind::Int) return static_cast<double>(get_int(key));
    if (s.kind != ParamSpec::Kind::Real) throw ConfigError(key + " is not a numeric parameter");
    parse_real(m_values.at(key), x);
    return x;
}

bool Config::get_bool(const std::string& key) const {
    const ParamSpec& s = spec(key);
    if (s.kind != ParamSpec::Kind::Bool) throw ConfigError(key + " is not a boolean parameter");
    return m_values.at(key) == "true";
}

const std::string& Config::get_choice(const std::string& key) const {
    const ParamSpec& s = spec(key);
    if (s.kind != ParamSpec::Kind::Choice) throw ConfigError(key + " is not a choice parameter");
    return m_values.at(key);
}

const std::string& Config::get_text(const std::string& key) const {
    const ParamSpec& s = spec(key);
    if (s.kind != ParamSpec::Kind::Text) throw ConfigError(key + " is not a text parameter");
    return m_values.at(key);
}

std::vector<std::pair<std::string, std::string>> Config::overrides() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& s : parameters().all()) {
        const auto& v = m_values.at(s.key);
        if (v != s.default_value) out.emplace_back(s.key, v);
    }
    return out;
}

}  // namespace hcasim::sim
