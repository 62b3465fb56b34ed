// Internal invariants of the model. A broken one is a bug in hcasim, never a
// user error (those get the error the API documents). The sanitizer build
// (HCASIM_CHECK_INVARIANTS) checks them and throws naming the invariant, file
// and line; elsewhere they compile to nothing, so hot paths pay nothing.
#pragma once

#include <stdexcept>
#include <string>

namespace hcasim::sim {

[[noreturn]] inline void invariant_broken(const char* what, const char* file, int line) {
    throw std::logic_error(std::string("internal invariant broken: ") + what + " (" + file + ":" +
                           std::to_string(line) + ")");
}

}  // namespace hcasim::sim

#if defined(HCASIM_CHECK_INVARIANTS)
#define HCASIM_ASSERT(cond) \
    ((cond) ? static_cast<void>(0) : ::hcasim::sim::invariant_broken(#cond, __FILE__, __LINE__))
#else
// Not evaluated: sizeof only type-checks the expression.
#define HCASIM_ASSERT(cond) static_cast<void>(sizeof(cond))
#endif
