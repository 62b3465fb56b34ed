// The results of a sweep as one table: a row per (point, result row), a
// column per swept parameter, then the workload's own columns in the order
// of its CSV. Rows go by point index, then by the order the workload
// printed them, so the same sweep gives the same bytes however its points
// were spread over processes and ranks.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testbench/cli/sweep_plan.hpp"

namespace hcasim::cli {

class SweepTable {
public:
    explicit SweepTable(const SweepPlan& plan);

    // Adds point's rows from what its hcasim --format json printed; points
    // must come in index order. Throws std::runtime_error naming the point if
    // the output is not a result the sweep knows.
    void add_point(std::size_t point, const std::string& json_output);

    const std::vector<std::string>& columns() const { return m_columns; }
    std::size_t rows() const { return m_rows.size(); }

    // RFC 4180 CSV: a header line, then one line per row. Numbers are written
    // as the workload's JSON has them (full precision).
    void write_csv(std::ostream& os) const;
    // {"workload": [...], "parameters": [{"key", "values"}], "kind",
    //  "columns": [...], "rows": [{column: value}, ...]}, a row per line.
    void write_json(std::ostream& os) const;

    // The columns of a workload's result rows, in its CSV's order
    // (testbench/workloads/report.cpp), for each result kind its JSON names.
    static const std::vector<std::string>& known_columns(const std::string& kind);

private:
    const SweepPlan& m_plan;
    std::string m_kind;
    std::vector<std::string> m_columns;          // parameters, then the workload's
    std::vector<nlohmann::ordered_json> m_rows;  // each an object of columns
    std::size_t m_next_point = 0;
};

}  // namespace hcasim::cli
