// One hierarchical logger: lines read "[time] top.node0.hca.wqe_fetch: ...".
// The level is a configuration parameter (sim.log_level); lines go to one sink
// (stderr unless a test redirects it), never through ad-hoc std::cout.
#pragma once

#include <cstdio>
#include <sstream>
#include <string>

namespace hcasim::sim {

enum class LogLevel { None = 0, Error = 1, Warn = 2, Info = 3, Debug = 4 };

class Log {
public:
    static LogLevel level() { return s_level; }
    static void set_level(LogLevel l) { s_level = l; }
    static void set_level(const std::string& name);
    static void set_sink(std::FILE* f) { s_sink = f; }
    static bool enabled(LogLevel l) { return l <= s_level; }
    static void write(LogLevel l, const std::string& path, const std::string& msg);

private:
    static LogLevel s_level;
    static std::FILE* s_sink;
};

}  // namespace hcasim::sim

// Streams into the log only when the level is enabled, so disabled logging
// costs one comparison on hot paths.
#define HCASIM_LOG(lvl, path, expr)                                                 \
    do {                                                                            \
        if (::hcasim::sim::Log::enabled(lvl)) {                                     \
            std::ostringstream hcasim_log_os_;                                      \
            hcasim_log_os_ << expr;                                                 \
            ::hcasim::sim::Log::write(lvl, path, hcasim_log_os_.str());             \
        }                                                                           \
    } while (0)
