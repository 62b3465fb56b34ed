#include "testbench/workloads/programs.hpp"

#include <algorithm>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "host/remote/process_sync.hpp"
#include "host/remote/remote_program.hpp"
#include "host/remote/tsc_reads.hpp"

namespace hcasim::testbench {

std::vector<std::string> shell_split(const std::string& line) {
    std::vector<std::string> words;
    std::string w;
    bool in_word = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) words.push_back(w);
            w.clear();
            in_word = false;
        } else if (c == '\\') {
            if (++i >= line.size()) throw std::invalid_argument("the command line '" + line + "' ends with a backslash");
            w += line[i];
            in_word = true;
        } else if (c == '\'') {
            const auto end = line.find('\'', i + 1);
            if (end == std::string::npos) throw std::invalid_argument("unterminated ' in the command line '" + line + "'");
            w += line.substr(i + 1, end - i - 1);
            i = end;
            in_word = true;
        } else if (c == '"') {
            std::size_t j = i + 1;
            for (; j < line.size() && line[j] != '"'; ++j) {
                if (line[j] == '\\' && j + 1 < line.size() && std::strchr("\"\\$`", line[j + 1])) ++j;
                w += line[j];
            }
            if (j >= line.size()) throw std::invalid_argument("unterminated \" in the command line '" + line + "'");
            i = j;
            in_word = true;
        } else {
            w += c;
            in_word = true;
        }
    }
    if (in_word) words.push_back(w);
    return words;
}

std::string default_lib_dir() {
    if (const char* d = std::getenv("HCASIM_LIB_DIR")) return d;
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return "lib/hcasim";
    std::string path(exe, static_cast<std::size_t>(n));
    return path.substr(0, path.rfind('/')) + "/lib/hcasim";
}

namespace {

// The MHz perftest reads: the first "cpu MHz" of /proc/cpuinfo.
double cpuinfo_mhz() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("cpu MHz", 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon != std::string::npos) return std::strtod(line.c_str() + colon + 1, nullptr);
    }
    return 0;
}

std::string describe(int st) {
    if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
    if (WIFSIGNALED(st))
        return "killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
    return "status " + std::to_string(st);
}

// Copies each program's output to out, line by line, behind its node's name.
class OutputPump {
public:
    OutputPump(std::ostream& out, std::vector<std::pair<int, std::string>> fds) : m_out(out), m_fds(std::move(fds)) {
        m_partial.resize(m_fds.size());
        m_thread = std::thread([this]() { pump(); });
    }
    ~OutputPump() {
        if (m_thread.joinable()) m_thread.join();
        for (auto& f : m_fds) ::close(f.first);
    }
    void finish() {
        if (m_thread.joinable()) m_thread.join();
    }

private:
    void pump() {
        std::vector<bool> open(m_fds.size(), true);
        std::size_t left = m_fds.size();
        while (left) {
            std::vector<pollfd> p;
            std::vector<std::size_t> idx;
            for (std::size_t i = 0; i < m_fds.size(); ++i)
                if (open[i]) {
                    p.push_back({m_fds[i].first, POLLIN, 0});
                    idx.push_back(i);
                }
            if (::poll(p.data(), p.size(), -1) < 0) continue;
            for (std::size_t k = 0; k < p.size(); ++k) {
                if (!p[k].revents) continue;
                const std::size_t i = idx[k];
                char buf[4096];
                const ssize_t n = ::read(m_fds[i].first, buf, sizeof buf);
                if (n <= 0) {
                    open[i] = false;
                    --left;
                    if (!m_partial[i].empty()) emit(i, m_partial[i]);
                    continue;
                }
                m_partial[i].append(buf, static_cast<std::size_t>(n));
                std::size_t nl;
                while ((nl = m_partial[i].find('\n')) != std::string::npos) {
                    emit(i, m_partial[i].substr(0, nl));
                    m_partial[i].erase(0, nl + 1);
                }
            }
        }
    }
    void emit(std::size_t i, const std::string& line) {
        m_out << m_fds[i].second << ": " << line << "\n";
        m_out.flush();
    }

    std::ostream& m_out;
    std::vector<std::pair<int, std::string>> m_fds;
    std::vector<std::string> m_partial;
    std::thread m_thread;
};

}  // namespace

ProgramsResult run_programs(System& sys, const ProgramsOptions& o, std::ostream& out) {
    if (o.commands.empty()) throw std::invalid_argument("no --node command to run");
    std::vector<bool> service(o.commands.size(), false);
    for (const int n : o.services) {
        if (n < 0 || n >= static_cast<int>(o.commands.size()))
            throw std::invalid_argument("--serve " + std::to_string(n) + ": there is no --node " + std::to_string(n) +
                                        " (nodes 0 to " + std::to_string(o.commands.size() - 1) + ")");
        service[static_cast<std::size_t>(n)] = true;
    }
    if (std::find(service.begin(), service.end(), false) == service.end())
        throw std::invalid_argument("--serve: every program is a service, so nothing would end the run");
    if (static_cast<int>(o.commands.size()) > sys.nodes())
        throw std::invalid_argument(std::to_string(o.commands.size()) + " programs need as many nodes; fabric.nodes is " +
                                    std::to_string(sys.nodes()));
    const std::string lib_dir = o.lib_dir.empty() ? default_lib_dir() : o.lib_dir;
    if (::access((lib_dir + "/libibverbs.so.1").c_str(), R_OK) != 0 ||
        ::access((lib_dir + "/libhcasim_client.so").c_str(), R_OK) != 0)
        throw std::runtime_error("the drop-in libraries are not in " + lib_dir +
                                 " (build them, or point HCASIM_LIB_DIR at them)");
    double mhz = sys.config().get_real("host.tsc_mhz");
    if (mhz == 0) mhz = cpuinfo_mhz();
    if (mhz <= 0) throw std::runtime_error("cannot read cpu MHz from /proc/cpuinfo: set host.tsc_mhz");
    const double clock_read_ns = sys.config().get_real("host.cpu.clock_read_ns");

    remote::ProgramGroup group;
    group.connect_wait = static_cast<sim::Tick>(sys.config().get_real("host.oob_connect_wait_ms") * sim::kPsPerMs);
    std::vector<std::unique_ptr<remote::RemoteProgram>> programs;
    std::vector<std::pair<int, std::string>> pipes;
    for (std::size_t i = 0; i < o.commands.size(); ++i) {
        remote::LaunchSpec spec;
        spec.argv = shell_split(o.commands[i]);
        if (spec.argv.empty()) throw std::invalid_argument("--node " + std::to_string(i) + " is an empty command line");
        spec.node = static_cast<int>(i);
        spec.lib_dir = lib_dir;
        spec.tsc_khz = static_cast<std::uint64_t>(mhz * 1000.0 + 0.5);
        spec.replace_tsc_reads = o.tsc == "replace" || (o.tsc == "auto" && !remote::tsc_trap_works());
        spec.epoch_ns = 1767225600ull * 1000000000ull;  // 2026-01-01 00:00:00 UTC: the same every run
        spec.clock_read_ps = sim::ns_to_ps(clock_read_ns);
        spec.spin_cpu_ns = static_cast<std::uint64_t>(sys.config().get_real("host.spin_cpu_us") * 1000.0);
        spec.group = &group;
        spec.subnet = &sys.ip_subnet();
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
        spec.stdout_fd = fds[1];
        spec.stderr_fd = fds[1];
        try {
            programs.push_back(std::make_unique<remote::RemoteProgram>(spec, sys.node(static_cast<int>(i)).driver()));
        } catch (...) {
            ::close(fds[0]);
            ::close(fds[1]);
            throw;
        }
        ::close(fds[1]);
        pipes.emplace_back(fds[0], "node" + std::to_string(i));
    }
    OutputPump pump(out, pipes);

    std::vector<remote::RemoteProgram*> raw;
    for (auto& p : programs) raw.push_back(p.get());
    remote::ProcessSync sync(raw, &group, o.timeout_s, service);
    ProgramsResult r;
    std::vector<System::Program> progs(o.commands.size());
    for (std::size_t i = 0; i < progs.size(); ++i) {
        progs[i] = [&, i](Host&) {
            if (i == 0) sc_core::sc_spawn([&]() { sync.run(); }, "process_sync");
            programs[i]->serve();
            // A service stopped by --serve ended when it was stopped, with the
            // last of the others: how long it takes to die of the signal is
            // the host's, and the hardware meanwhile runs on to its timers.
            if (!programs[i]->stopped()) r.simulated_us = std::max(r.simulated_us, sim::ps_to_us(sim::now_ps()));
        };
    }
    sys.run(progs);
    pump.finish();
    r.problems = sync.problems();
    for (auto& p : programs) {
        ProgramOutcome oc;
        oc.name = p->name();
        oc.wait_status = p->wait_status();
        oc.summary = describe(oc.wait_status);
        if (p->stopped() && WIFSIGNALED(oc.wait_status) &&
            (WTERMSIG(oc.wait_status) == SIGTERM || WTERMSIG(oc.wait_status) == SIGKILL)) {
            // A service stopped because its clients were done.
            oc.summary = "stopped once the others had ended (--serve)";
            r.programs.push_back(oc);
            continue;
        }
        int code = 0;
        if (WIFEXITED(oc.wait_status)) code = WEXITSTATUS(oc.wait_status);
        else if (WIFSIGNALED(oc.wait_status)) code = 128 + WTERMSIG(oc.wait_status);
        r.exit_status = std::max(r.exit_status, code);
        r.programs.push_back(oc);
    }
    if (!r.problems.empty()) r.exit_status = std::max(r.exit_status, 1);
    return r;
}

}  // namespace hcasim::testbench
