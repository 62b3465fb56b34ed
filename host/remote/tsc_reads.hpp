// Where rdtsc cannot be made to trap (PR_SET_TSC has no effect under some
// hypervisors), a program's TSC reads are found in its code and each is
// replaced by ud2, which does trap: the program's client library emulates
// the read at the simulated time, as it does a trapped rdtsc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hcasim::remote {

// Whether rdtsc traps on this host once PR_TSC_SIGSEGV is set (asked once,
// of a child process).
bool tsc_trap_works();

struct TscRead {
    std::uint64_t addr;  // in the program's address space
    std::uint8_t length; // 2: rdtsc, 3: rdtscp
};

// The rdtsc and rdtscp instructions in the code process pid has mapped from
// files (its program and libraries; not the C runtime's, nor those under
// skip_dir), found by objdump. Sorted by address. Sets error and returns
// nothing when objdump cannot be run.
std::vector<TscRead> find_tsc_reads(pid_t pid, const std::string& skip_dir, std::string& error);

// Writes ud2 over each of them in process pid (through /proc/pid/mem, as its
// parent may), each only if its bytes are still the instruction's; returns
// those replaced.
std::vector<TscRead> replace_tsc_reads(pid_t pid, const std::vector<TscRead>& reads);

}  // namespace hcasim::remote
