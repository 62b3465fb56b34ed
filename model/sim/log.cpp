#include "model/sim/log.hpp"

#include <systemc>

namespace hcasim::sim {

LogLevel Log::s_level = LogLevel::Warn;
std::FILE* Log::s_sink = stderr;

void Log::set_level(const std::string& name) {
    if (name == "none") s_level = LogLevel::None;
    else if (name == "error") s_level = LogLevel::Error;
    else if (name == "warn") s_level = LogLevel::Warn;
    else if (name == "info") s_level = LogLevel::Info;
    else s_level = LogLevel::Debug;
}

void Log::write(LogLevel l, const std::string& path, const std::string& msg) {
    static const char* names[] = {"", "error", "warn", "info", "debug"};
    const double ns = static_cast<double>(sc_core::sc_time_stamp().value()) / 1000.0;
    std::fprintf(s_sink, "[%12.3f ns] %s: %s%s%s\n", ns, path.c_str(), l <= LogLevel::Warn ? names[static_cast<int>(l)] : "",
                 l <= LogLevel::Warn ? ": " : "", msg.c_str());
}

}  // namespace hcasim::sim
