// Strict reading of command-line values, shared by hcasim and
// hcasim-regress: a number is plain decimal (no sign, blank, leading zero,
// hex or octal, trailing junk, overflow), and every error names the option
// and what it accepts, so no input is silently reinterpreted or ignored.
// Errors are std::invalid_argument: both commands exit with status 2.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/sim/config.hpp"

namespace hcasim::cli {

// "invalid value 'x' for --qps: expected ..."
inline std::invalid_argument bad_value(const std::string& option, const std::string& text, const std::string& expected) {
    return std::invalid_argument("invalid value '" + sim::printable(text) + "' for " + option + ": expected " + expected);
}

// An integer from min to max written in decimal digits only; note says
// where the bounds come from ("the device's hca.max_qp").
inline std::uint64_t parse_unsigned(const std::string& option, const std::string& text, std::uint64_t min,
                                    std::uint64_t max, const std::string& note = "") {
    const std::string expected =
        "an integer from " + std::to_string(min) + " to " + std::to_string(max) + (note.empty() ? "" : " (" + note + ")");
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (text.size() > 1 && text[0] == '0')) throw bad_value(option, text, expected);
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (errno == ERANGE || v < min || v > max) throw bad_value(option, text, expected);
    return v;
}

inline int parse_int(const std::string& option, const std::string& text, int min, int max, const std::string& note = "") {
    return static_cast<int>(
        parse_unsigned(option, text, static_cast<std::uint64_t>(min), static_cast<std::uint64_t>(max), note));
}

// A finite number of at least 0 in decimal notation ("2", "0.5", "1e-3").
inline double parse_nonnegative(const std::string& option, const std::string& text) {
    const std::string expected = "a decimal number of at least 0";
    if (text.empty() || text.find_first_not_of("0123456789.eE+-") != std::string::npos ||
        text.find_first_not_of("0123456789.") == 0)
        throw bad_value(option, text, expected);
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (errno == ERANGE || *end != '\0' || !std::isfinite(v) || v < 0) throw bad_value(option, text, expected);
    return v;
}

// A file the command will create: a name, not a directory, in a directory
// that exists.
inline void check_output_file(const std::string& option, const std::string& path) {
    if (path.empty()) throw std::invalid_argument(option + " needs a file name");
    const std::string shown = "'" + sim::printable(path) + "'";
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        throw std::invalid_argument(option + " " + shown + " is a directory: give a file name, such as " +
                                    sim::printable(path) + (path.back() == '/' ? "" : "/") + "waves.vcd");
    const auto slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0) return;
    const std::string dir = path.substr(0, slash);
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw std::invalid_argument(option + " " + shown + ": directory '" + sim::printable(dir) + "' does not exist");
}

// The KEY of a --set KEY=VALUE at args[i] ("--set", "--set=", "-s", "-sK=V"),
// blanks around it dropped, or "" when args[i] is no --set.
inline std::string set_key_at(const std::vector<std::string>& args, std::size_t i) {
    const std::string& a = args[i];
    std::string assignment;
    if ((a == "--set" || a == "-s") && i + 1 < args.size()) assignment = args[i + 1];
    else if (a.rfind("--set=", 0) == 0) assignment = a.substr(6);
    else if (a.size() > 2 && a.rfind("-s", 0) == 0) assignment = a.substr(2);
    else return "";
    const std::string key = assignment.substr(0, assignment.find('='));
    const auto b = key.find_first_not_of(" \t");
    return b == std::string::npos ? "" : key.substr(b, key.find_last_not_of(" \t") - b + 1);
}

}  // namespace hcasim::cli
