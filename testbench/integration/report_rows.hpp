// Reading figures back from hcasim's text reports in tests.
#pragma once

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace hcasim::test {

// The report without its wall-clock figures, which differ run to run.
inline std::string without_wall_clock(const std::string& out) {
    std::istringstream in(out);
    std::string line, kept;
    while (std::getline(in, line))
        if (line.find("wall") == std::string::npos) kept += line + "\n";
    return kept;
}

// A column of the row for size in a `bw` text report: 2 the peak, 3 the
// average bandwidth, 4 the message rate; -1 when there is no such row.
inline double bw_column(const std::string& out, const std::string& size, int column) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream row(line);
        std::string bytes, iters;
        double v[3] = {-1, -1, -1};
        if (row >> bytes >> iters >> v[0] >> v[1] >> v[2] && bytes == size && column >= 2 && column <= 4)
            return v[column - 2];
    }
    return -1;
}

// A line's fields; a field in double quotes may hold the separator ("" is a
// quote), as hcasim's CSV writes a source or a command.
inline std::vector<std::string> csv_fields(const std::string& line, char sep) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
            out.back() += '"';
            ++i;
        } else if (c == '"') {
            quoted = !quoted;
        } else if (c == sep && !quoted) {
            out.emplace_back();
        } else {
            out.back() += c;
        }
    }
    return out;
}

// A figure a doc shows with its decimals is exact as the doc rounds it:
// within half a unit of its last decimal.
inline bool as_rounded(double shown, int decimals, double exact) {
    return std::fabs(shown - exact) <= 0.5 * std::pow(10.0, -decimals) * (1 + 1e-9);
}

}  // namespace hcasim::test
