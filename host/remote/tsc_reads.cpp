#include "host/remote/tsc_reads.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace hcasim::remote {

bool tsc_trap_works() {
    static const bool works = [] {
        const pid_t pid = fork();
        if (pid < 0) return true;  // cannot tell: assume the usual
        if (pid == 0) {
            // The trap is expected: the child dies of it quietly, whatever
            // handler the process had (a sanitizer's would report it).
            signal(SIGSEGV, SIG_DFL);
            prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
            unsigned lo = 0, hi = 0;
            asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
            _exit(0);  // it did not trap
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }();
    return works;
}

namespace {

struct Section {
    std::uint64_t vma, size, file_off;
};

// What objdump prints for a command, or nullopt-like false when it cannot run.
bool run_objdump(const std::string& args, std::string& out) {
    FILE* p = popen(("objdump " + args + " 2>/dev/null").c_str(), "r");
    if (!p) return false;
    char buf[65536];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    return pclose(p) == 0;
}

std::string quoted(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// The file offsets of the TSC reads in an ELF file's code, by length.
bool reads_in_file(const std::string& path, std::vector<std::pair<std::uint64_t, std::uint8_t>>& found) {
    static std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint8_t>>> cache;
    if (auto at = cache.find(path); at != cache.end()) {
        found = at->second;
        return true;
    }
    std::string headers, code;
    if (!run_objdump("-h -w " + quoted(path), headers)) return false;
    std::vector<Section> sections;
    std::istringstream h(headers);
    for (std::string line; std::getline(h, line);) {
        // Idx Name Size VMA LMA File-off Algn Flags
        unsigned idx = 0;
        char name[256] = {};
        unsigned long long size = 0, vma = 0, lma = 0, off = 0;
        if (std::sscanf(line.c_str(), " %u %255s %llx %llx %llx %llx", &idx, name, &size, &vma, &lma, &off) == 6)
            sections.push_back({vma, size, off});
    }
    if (!run_objdump("-d -w --no-show-raw-insn " + quoted(path), code)) return false;
    std::istringstream c(code);
    for (std::string line; std::getline(c, line);) {
        const auto tab = line.find(":\t");
        if (tab == std::string::npos) continue;
        const std::string insn = line.substr(tab + 2);
        std::uint8_t len = 0;
        if (insn.rfind("rdtscp", 0) == 0) len = 3;
        else if (insn.rfind("rdtsc", 0) == 0) len = 2;
        if (!len) continue;
        const std::uint64_t vaddr = std::strtoull(line.c_str(), nullptr, 16);
        for (const Section& s : sections)
            if (vaddr >= s.vma && vaddr < s.vma + s.size) {
                found.emplace_back(vaddr - s.vma + s.file_off, len);
                break;
            }
    }
    cache[path] = found;
    return true;
}

// The C runtime reads no TSC a program's timing depends on, and is large.
bool c_runtime(const std::string& path) {
    const std::string base = path.substr(path.rfind('/') + 1);
    for (const char* lib : {"libc.so", "libm.so", "ld-linux", "libstdc++.so", "libgcc_s.so", "libpthread.so", "libdl.so",
                            "librt.so"})
        if (base.rfind(lib, 0) == 0) return true;
    return false;
}

}  // namespace

std::vector<TscRead> find_tsc_reads(pid_t pid, const std::string& skip_dir, std::string& error) {
    std::vector<TscRead> reads;
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    for (std::string line; std::getline(maps, line);) {
        unsigned long long lo = 0, hi = 0, off = 0;
        char perms[8] = {};
        int path_at = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &lo, &hi, perms, &off, &path_at) < 4) continue;
        if (perms[2] != 'x' || path_at <= 0 || line[static_cast<std::size_t>(path_at)] != '/') continue;
        const std::string path = line.substr(static_cast<std::size_t>(path_at));
        if (c_runtime(path) || (!skip_dir.empty() && path.rfind(skip_dir + "/", 0) == 0)) continue;
        std::vector<std::pair<std::uint64_t, std::uint8_t>> in_file;
        if (!reads_in_file(path, in_file)) {
            error = "objdump could not disassemble " + path;
            return {};
        }
        for (const auto& [file_off, len] : in_file)
            if (file_off >= off && file_off + len <= off + (hi - lo)) reads.push_back({lo + file_off - off, len});
    }
    std::sort(reads.begin(), reads.end(), [](const TscRead& a, const TscRead& b) { return a.addr < b.addr; });
    return reads;
}

std::vector<TscRead> replace_tsc_reads(pid_t pid, const std::vector<TscRead>& reads) {
    std::vector<TscRead> done;
    const int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return done;
    static const std::uint8_t rdtsc[] = {0x0f, 0x31}, rdtscp[] = {0x0f, 0x01, 0xf9};
    static const std::uint8_t ud2[] = {0x0f, 0x0b, 0x90};  // the third byte only over rdtscp's
    for (const TscRead& r : reads) {
        std::uint8_t was[3] = {};
        const auto at = static_cast<off_t>(r.addr);
        if (::pread(fd, was, r.length, at) != r.length) continue;
        if (std::memcmp(was, r.length == 2 ? rdtsc : rdtscp, r.length) != 0) continue;
        if (::pwrite(fd, ud2, r.length, at) == r.length) done.push_back(r);
    }
    ::close(fd);
    return done;
}

}  // namespace hcasim::remote
