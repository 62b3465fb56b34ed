#include "testbench/cli/progress_line.hpp"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace hcasim::cli {

namespace {

// "0:07", "12:30", "2:05:00".
std::string clock_text(double seconds) {
    const long s = static_cast<long>(seconds + 0.5);
    char b[32];
    if (s >= 3600) std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else std::snprintf(b, sizeof b, "%ld:%02ld", s / 60, s % 60);
    return b;
}

}  // namespace

ProgressLine::ProgressLine(std::string what, std::string unit, std::size_t total)
    : m_what(std::move(what)), m_unit(std::move(unit)), m_total(total), m_shown(isatty(STDERR_FILENO) == 1),
      m_start(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::update(std::size_t done) {
    m_done = done;
    if (!m_shown || m_finished) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    std::string line = m_what + ": " + std::to_string(done) + "/" + std::to_string(m_total) + " " + m_unit + ", " +
                       clock_text(elapsed) + " elapsed";
    // The time per finished point so far, times the points still to run.
    if (done > 0 && done < m_total)
        line += ", ETA " + clock_text(elapsed / static_cast<double>(done) * static_cast<double>(m_total - done));
    // "\033[K" erases what a longer earlier line left on the right.
    std::fprintf(stderr, "\r%s\033[K", line.c_str());
    std::fflush(stderr);
    m_drawn = true;
}

void ProgressLine::clear() {
    if (!m_drawn || m_finished) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    m_drawn = false;
}

void ProgressLine::finish() {
    if (!m_shown || m_finished) return;
    update(m_done);
    std::fputs("\n", stderr);
    std::fflush(stderr);
    m_finished = true;
}

}  // namespace hcasim::cli
