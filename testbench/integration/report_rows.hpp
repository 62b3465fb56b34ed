// Reading figures back from hcasim's text reports in tests.
#pragma once

#include <sstream>
#include <string>

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

}  // namespace hcasim::test
