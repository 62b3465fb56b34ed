// The progress line of a long command on standard error ("sweep: 3/9
// points, 0:12 elapsed, ETA 0:24"), rewritten in place with '\r'. It is
// drawn only when standard error is a terminal: in a log or a pipe it
// would be noise.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace hcasim::cli {

class ProgressLine {
public:
    // what: the command's name; unit: what is counted ("points").
    ProgressLine(std::string what, std::string unit, std::size_t total);
    ~ProgressLine();
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;

    bool shown() const { return m_shown; }
    // done of total finished: redraws the line.
    void update(std::size_t done);
    // Redraws with the same count (the elapsed time moves on).
    void refresh() { update(m_done); }
    // Clears the line, so other text on standard error starts on a clean one.
    void clear();
    // The last state stays on its own line.
    void finish();

private:
    std::string m_what, m_unit;
    std::size_t m_total;
    std::size_t m_done = 0;
    bool m_shown;
    bool m_drawn = false;
    bool m_finished = false;
    std::chrono::steady_clock::time_point m_start;
};

}  // namespace hcasim::cli
