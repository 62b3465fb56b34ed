#include "testbench/cli/reference_points.hpp"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/sim/config.hpp"
#include "testbench/workloads/programs.hpp"

namespace hcasim::testbench {

namespace {

using nlohmann::json;

class Reader {
public:
    explicit Reader(std::string path) : m_path(std::move(path)) {}

    [[noreturn]] void fail(const std::string& where, const std::string& what) const {
        throw std::invalid_argument("reference points file '" + sim::printable(m_path) + "': " + where + ": " + what);
    }

    std::string text(const json& j, const char* key, const std::string& where, bool required = true) const {
        if (!j.contains(key)) {
            if (required) fail(where, std::string("missing \"") + key + "\"");
            return "";
        }
        if (!j.at(key).is_string()) fail(where, std::string("\"") + key + "\" is not a string");
        const std::string s = j.at(key).get<std::string>();
        if (required && s.empty()) fail(where, std::string("\"") + key + "\" is empty");
        return s;
    }

    double number(const json& j, const char* key, const std::string& where) const {
        if (!j.contains(key)) fail(where, std::string("missing \"") + key + "\"");
        if (!j.at(key).is_number()) fail(where, std::string("\"") + key + "\" is not a number");
        const double v = j.at(key).get<double>();
        if (!std::isfinite(v) || v <= 0) fail(where, std::string("\"") + key + "\" must be a number above 0");
        return v;
    }

    const json& array(const json& j, const char* key, const std::string& where) const {
        if (!j.contains(key) || !j.at(key).is_array()) fail(where, std::string("missing array \"") + key + "\"");
        return j.at(key);
    }

private:
    std::string m_path;
};

// The commands a point may use, and the options calibrate adds itself.
void check_command(const Reader& r, const std::string& where, const std::string& command) {
    std::vector<std::string> words;
    try {
        words = shell_split(command);
    } catch (const std::invalid_argument& e) {
        r.fail(where, std::string("\"command\": ") + e.what());
    }
    if (words.empty() || (words[0] != "lat" && words[0] != "bw" && words[0] != "msgrate" && words[0] != "swarm"))
        r.fail(where, "\"command\" must start with lat, bw, msgrate or swarm");
    for (const auto& w : words)
        for (const char* own : {"--preset", "-p", "--format", "-f"})
            if (w == own || w.rfind(std::string(own) + "=", 0) == 0)
                r.fail(where, std::string("\"command\" must not give ") + own + ": calibrate adds --preset and --format json");
}

}  // namespace

const ReferenceClass* ReferenceSet::find_class(const std::string& preset) const {
    for (const auto& c : classes)
        if (c.preset == preset) return &c;
    return nullptr;
}

std::vector<const ReferencePoint*> ReferenceSet::points_of(const std::string& preset) const {
    std::vector<const ReferencePoint*> out;
    for (const auto& p : points)
        if (p.preset == preset) out.push_back(&p);
    return out;
}

ReferenceSet load_reference_points(const std::string& path) {
    const Reader r(path);
    std::ifstream in(path);
    if (!in) r.fail("open", "cannot read it");
    std::stringstream bytes;
    bytes << in.rdbuf();
    json doc;
    try {
        doc = json::parse(bytes.str());
    } catch (const json::exception& e) {
        r.fail("parse", e.what());
    }
    if (!doc.is_object()) r.fail("top level", "not a JSON object");
    ReferenceSet set;
    set.path = path;
    set.description = r.text(doc, "description", "top level");

    std::set<std::string> presets;
    for (const auto& c : r.array(doc, "classes", "top level")) {
        const std::string where = "class " + std::to_string(set.classes.size());
        ReferenceClass k;
        k.preset = r.text(c, "preset", where);
        k.device = r.text(c, "device", "class " + k.preset);
        if (!presets.insert(k.preset).second) r.fail("class " + k.preset, "listed twice");
        if (c.contains("facts"))
            for (const auto& f : r.array(c, "facts", "class " + k.preset))
                k.facts.push_back({r.text(f, "fact", "class " + k.preset + " fact"),
                                   r.text(f, "source", "class " + k.preset + " fact")});
        if (c.contains("gaps"))
            for (const auto& g : r.array(c, "gaps", "class " + k.preset))
                k.gaps.push_back({r.text(g, "metric", "class " + k.preset + " gap"),
                                  r.text(g, "note", "class " + k.preset + " gap")});
        set.classes.push_back(std::move(k));
    }

    std::set<std::string> names;
    for (const auto& j : r.array(doc, "points", "top level")) {
        ReferencePoint p;
        p.name = r.text(j, "name", "point " + std::to_string(set.points.size()));
        const std::string where = "point " + p.name;
        if (!names.insert(p.name).second) r.fail(where, "name listed twice");
        p.preset = r.text(j, "preset", where);
        if (!presets.count(p.preset)) r.fail(where, "preset '" + p.preset + "' is not one of the \"classes\"");
        p.metric = r.text(j, "metric", where);
        p.value = r.number(j, "value", where);
        if (j.contains("range")) {
            const json& range = j.at("range");
            if (!range.is_array() || range.size() != 2 || !range[0].is_number() || !range[1].is_number())
                r.fail(where, "\"range\" must be [low, high]");
            p.has_range = true;
            p.range_lo = range[0].get<double>();
            p.range_hi = range[1].get<double>();
            if (!(p.range_lo <= p.value && p.value <= p.range_hi))
                r.fail(where, "\"value\" lies outside its \"range\"");
        }
        if (j.contains("bound")) {
            if (r.text(j, "bound", where) != "upper") r.fail(where, "\"bound\" must be \"upper\"");
            p.upper_bound = true;
        }
        p.unit = r.text(j, "unit", where);
        p.kind = r.text(j, "kind", where);
        if (p.kind != "measured" && p.kind != "vendor claim")
            r.fail(where, "\"kind\" must be \"measured\" or \"vendor claim\"");
        p.source = r.text(j, "source", where);
        p.conditions = r.text(j, "conditions", where);
        p.published_command = r.text(j, "published_command", where);
        p.command = r.text(j, "command", where);
        check_command(r, where, p.command);
        p.column = r.text(j, "column", where);
        if (j.contains("scale")) p.scale = r.number(j, "scale", where);
        p.note = r.text(j, "note", where, false);
        p.model_gap = r.text(j, "model_gap", where, false);
        set.points.push_back(std::move(p));
    }

    if (doc.contains("consulted"))
        for (const auto& c : r.array(doc, "consulted", "top level"))
            set.consulted.push_back({r.text(c, "source", "consulted source"), r.text(c, "why_not_a_point", "consulted source")});
    return set;
}

bool within_tolerance(const ReferencePoint& p, double ratio) {
    // A hair of slack: a ratio printed as 1.1 counts as 1.1.
    constexpr double slack = 1e-12;
    if (p.upper_bound) return ratio <= 1.0 + kCalibrationTolerance + slack;
    return std::fabs(ratio - 1.0) <= kCalibrationTolerance + slack;
}

std::string default_reference_file() { return sim::Config::presets_dir() + "/reference_points.json"; }

}  // namespace hcasim::testbench
