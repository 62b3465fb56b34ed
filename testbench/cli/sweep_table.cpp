#include "testbench/cli/sweep_table.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "model/sim/config.hpp"

namespace hcasim::cli {

namespace {

using ordered_json = nlohmann::ordered_json;

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string csv_value(const ordered_json& v) {
    if (v.is_null()) return "";
    if (v.is_string()) return csv_field(v.get<std::string>());
    return csv_field(v.dump());
}

// What the start of a child's output looks like, for an error message.
std::string excerpt(const std::string& s) {
    std::string e = s.substr(0, 200);
    for (char& c : e)
        if (c == '\n' || c == '\r') c = ' ';
    return e.empty() ? "nothing" : "'" + sim::printable(e) + (s.size() > 200 ? "...'" : "'");
}

}  // namespace

const std::vector<std::string>& SweepTable::known_columns(const std::string& kind) {
    static const std::map<std::string, std::vector<std::string>> columns{
        {"latency",
         {"bytes", "iterations", "t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "t_99_us", "t_999_us"}},
        {"bandwidth", {"bytes", "iterations", "bw_peak_MBps", "bw_avg_MBps", "msg_rate_Mpps"}},
        {"msgrate", {"qp", "messages", "msg_rate_Mpps"}},
        {"swarm",
         {"machines", "threads", "vms", "window", "bytes", "active_qps", "duration_us", "read_rate_Mops_per_machine",
          "min_Mops", "max_Mops", "qpc_misses_per_read", "cqc_misses_per_read"}},
        {"multicast",
         {"bytes", "receiver", "iterations", "t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "t_99_us",
          "t_999_us", "sent", "received", "bw_avg_MBps", "msg_rate_Mpps"}},
        {"calibrate", {"name", "preset", "published", "measured", "unit", "ratio", "within_tolerance"}},
    };
    static const std::vector<std::string> none;
    const auto it = columns.find(kind);
    return it == columns.end() ? none : it->second;
}

SweepTable::SweepTable(const SweepPlan& plan) : m_plan(plan) {
    for (const auto& p : plan.parameters()) m_columns.push_back(p.key);
}

void SweepTable::add_point(std::size_t point, const std::string& json_output) {
    if (point != m_next_point)
        throw std::logic_error("sweep results out of order: point " + std::to_string(point) + " after " +
                               std::to_string(m_next_point));
    ++m_next_point;
    const std::string where = "sweep " + m_plan.describe(point);
    // The result is the first line; nothing else is asked for.
    const std::string first = json_output.substr(0, json_output.find('\n'));
    ordered_json j;
    try {
        j = ordered_json::parse(first);
    } catch (const ordered_json::exception&) {
        throw std::runtime_error(where + " printed no JSON result, but " + excerpt(json_output));
    }
    if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string())
        throw std::runtime_error(where + " printed JSON without a result kind: " + excerpt(first));
    const std::string kind = j["kind"].get<std::string>();
    if (known_columns(kind).empty())
        throw std::runtime_error(where + " printed a result of kind '" + sim::printable(kind) +
                                 "', which sweep does not know");
    if (m_kind.empty()) m_kind = kind;
    if (kind != m_kind)
        throw std::runtime_error(where + " printed a " + kind + " result after " + m_kind + " results");

    std::vector<ordered_json> results;
    if (kind == "msgrate") {
        // As the workload's CSV: a row per QP, then the total. The
        // simulator's speed (wall_seconds, packets_per_wall_second) is not a
        // result: it changes from run to run.
        for (const auto& q : j.value("qps", ordered_json::array())) results.push_back(q);
        const ordered_json total = j.value("total", ordered_json::object());
        results.push_back({{"qp", "total"},
                           {"messages", total.value("messages", ordered_json())},
                           {"msg_rate_Mpps", total.value("msg_rate_Mpps", ordered_json())}});
    } else if (kind == "calibrate") {
        // A row per reference point, with the comparison's columns only: the
        // point's source, conditions and command are the reference file's.
        if (!j.contains("points") || !j["points"].is_array())
            throw std::runtime_error(where + " printed a calibrate result without points");
        for (const auto& point : j["points"]) {
            if (!point.is_object()) throw std::runtime_error(where + " printed a reference point that is not an object");
            ordered_json r = ordered_json::object();
            for (const auto& c : known_columns(kind))
                if (point.contains(c)) r[c] = point[c];
            if (point.contains("error")) r["error"] = point["error"];
            results.push_back(r);
        }
    } else {
        if (!j.contains("rows") || !j["rows"].is_array())
            throw std::runtime_error(where + " printed a " + kind + " result without rows");
        for (const auto& r : j["rows"]) results.push_back(r);
    }

    const auto& known = known_columns(kind);
    const auto values = m_plan.values_of(point);
    for (const auto& r : results) {
        if (!r.is_object()) throw std::runtime_error(where + " printed a result row that is not an object");
        ordered_json row = ordered_json::object();
        for (std::size_t k = 0; k < values.size(); ++k) row[m_plan.parameters()[k].key] = values[k];
        // The workload's columns in its CSV's order; any it added since go
        // after them, in the (sorted) order of its JSON.
        for (const auto& c : known)
            if (r.contains(c)) row[c] = r[c];
        for (const auto& [c, v] : r.items())
            if (!row.contains(c)) row[c] = v;
        for (const auto& [c, v] : row.items())
            if (std::find(m_columns.begin(), m_columns.end(), c) == m_columns.end()) m_columns.push_back(c);
        m_rows.push_back(std::move(row));
    }
}

void SweepTable::write_csv(std::ostream& os) const {
    for (std::size_t c = 0; c < m_columns.size(); ++c) os << (c ? "," : "") << csv_field(m_columns[c]);
    os << "\n";
    for (const auto& row : m_rows) {
        for (std::size_t c = 0; c < m_columns.size(); ++c) {
            const auto it = row.find(m_columns[c]);
            os << (c ? "," : "") << (it == row.end() ? std::string() : csv_value(*it));
        }
        os << "\n";
    }
}

void SweepTable::write_json(std::ostream& os) const {
    ordered_json parameters = ordered_json::array();
    for (const auto& p : m_plan.parameters()) parameters.push_back({{"key", p.key}, {"values", p.values}});
    os << "{\"workload\":" << ordered_json(m_plan.workload()).dump() << ",\"parameters\":" << parameters.dump()
       << ",\"kind\":" << ordered_json(m_kind).dump() << ",\"columns\":" << ordered_json(m_columns).dump()
       << ",\"rows\":[";
    for (std::size_t i = 0; i < m_rows.size(); ++i) os << (i ? ",\n" : "\n") << m_rows[i].dump();
    os << "\n]}\n";
}

}  // namespace hcasim::cli
