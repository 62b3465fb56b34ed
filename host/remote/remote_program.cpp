#include "host/remote/remote_program.hpp"
#include "host/remote/process_sync.hpp"
#include "host/remote/tsc_reads.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include "host/driver/host_cpu.hpp"
#include "host/driver/host_thread.hpp"

extern char** environ;

namespace hcasim::remote {

namespace {

std::string joined(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
    return s;
}

// The state letter of /proc/<pid>/stat-like text ("123 (name) S ...").
char stat_state(const std::string& text) {
    const auto close = text.rfind(')');
    return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

// A /proc file's text, read afresh each time. The synchronisation reads
// the same few files between most calls: their descriptors stay open (a
// read at offset 0 makes the text again), and one that fails (its thread
// ended, its number may be another's now) is opened again once.
std::string read_small(const std::string& path) {
    static std::unordered_map<std::string, int> open_files;
    char buf[4096];
    for (int attempt = 0; attempt < 2; ++attempt) {
        auto at = open_files.find(path);
        if (at == open_files.end()) {
            if (open_files.size() >= 4096) {
                for (auto& f : open_files) ::close(f.second);
                open_files.clear();
            }
            const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) return {};
            at = open_files.emplace(path, fd).first;
        }
        const ssize_t n = ::pread(at->second, buf, sizeof buf - 1, 0);
        if (n > 0) return std::string(buf, static_cast<std::size_t>(n));
        ::close(at->second);
        open_files.erase(at);
    }
    return {};
}

}  // namespace

RemoteProgram::RemoteProgram(const LaunchSpec& spec, host::Driver& driver)
    : m_spec(spec), m_driver(driver) {
    if (spec.argv.empty()) throw std::runtime_error("node" + std::to_string(spec.node) + ": empty command line");
    const int memfd = static_cast<int>(syscall(SYS_memfd_create, "hcasim-channel", MFD_CLOEXEC));
    if (memfd < 0 || ftruncate(memfd, static_cast<off_t>(kChannelBytes)) != 0)
        throw std::runtime_error(std::string("cannot create a channel: ") + std::strerror(errno));
    void* p = mmap(nullptr, kChannelBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (p == MAP_FAILED) {
        ::close(memfd);
        throw std::runtime_error(std::string("cannot map a channel: ") + std::strerror(errno));
    }
    m_channel = static_cast<ChannelHeader*>(p);
    m_channel->magic = kChannelMagic;
    m_channel->version = kChannelVersion;
    m_channel->node = static_cast<std::uint32_t>(spec.node);
    m_channel->simulator_pid = static_cast<std::int32_t>(getpid());
    m_channel->tsc_khz = spec.tsc_khz;
    m_channel->epoch_ns = spec.epoch_ns;
    m_channel->now_ps.store(sim::now_ps());
    if (spec.subnet) {
        m_channel->ip_network = spec.subnet->network;
        m_channel->ip_prefix_len = static_cast<std::uint32_t>(spec.subnet->prefix_len);
        for (const auto& h : spec.subnet->hosts) {
            if (m_channel->host_count == kMaxHosts) break;
            HostEntry& e = m_channel->hosts[m_channel->host_count++];
            e.ip = h.ip;
            std::snprintf(e.name, sizeof e.name, "%s", h.name.c_str());
        }
    }

    // Exec failures come back through a close-on-exec pipe.
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string kv = *e;
        if (kv.rfind("LD_LIBRARY_PATH=", 0) == 0 || kv.rfind("LD_PRELOAD=", 0) == 0) continue;
        env.push_back(kv);
    }
    const char* ld_path = std::getenv("LD_LIBRARY_PATH");
    const char* preload = std::getenv("LD_PRELOAD");
    env.push_back("LD_LIBRARY_PATH=" + spec.lib_dir + (ld_path && *ld_path ? ":" + std::string(ld_path) : ""));
    env.push_back("LD_PRELOAD=" + spec.lib_dir + "/libhcasim_client.so" + (preload && *preload ? ":" + std::string(preload) : ""));
    env.push_back("HCASIM_CLOCK_READ_PS=" + std::to_string(spec.clock_read_ps));
    std::vector<char*> argv, envp;
    for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
        // The child: only async-signal-safe calls from here to exec.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        const int fd = dup(memfd);  // without close-on-exec
        char fd_env[64];
        std::snprintf(fd_env, sizeof fd_env, "%s=%d", kChannelFdEnv, fd);
        for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
        envp.push_back(fd_env);
        envp.push_back(nullptr);
        const int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        if (spec.stdout_fd != 1) dup2(spec.stdout_fd, 1);
        if (spec.stderr_fd != 2) dup2(spec.stderr_fd, 2);
        environ = envp.data();
        // Until the program's client library has a handler for it (it
        // unblocks it then), the sample signal would kill the program.
        sigset_t sample;
        sigemptyset(&sample);
        sigaddset(&sample, sample_signal());
        sigprocmask(SIG_BLOCK, &sample, nullptr);
        execvp(argv[0], argv.data());
        const int err = errno;
        [[maybe_unused]] ssize_t w = ::write(status_pipe[1], &err, sizeof err);
        _exit(127);
    }
    ::close(status_pipe[1]);
    ::close(memfd);
    int err = 0;
    const ssize_t n = ::read(status_pipe[0], &err, sizeof err);
    ::close(status_pipe[0]);
    if (n == sizeof err) {
        waitpid(pid, nullptr, 0);
        munmap(m_channel, kChannelBytes);
        m_channel = nullptr;
        throw std::runtime_error("node" + std::to_string(spec.node) + ": cannot run '" + spec.argv[0] +
                                 "': " + std::strerror(err));
    }
    m_pid = pid;
    if (spec.group) spec.group->channels.push_back(m_channel);
    m_pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

RemoteProgram::~RemoteProgram() {
    if (m_pid > 0 && !m_exited) {
        ::kill(m_pid, SIGKILL);
        waitpid(m_pid, nullptr, 0);
    }
    m_rdma_cm.reset();
    m_verbs.reset();
    if (m_pidfd >= 0) ::close(m_pidfd);
    if (m_channel) munmap(m_channel, kChannelBytes);
}

std::string RemoteProgram::name() const { return "node" + std::to_string(m_spec.node) + " (" + joined(m_spec.argv) + ")"; }

void RemoteProgram::kill_now() {
    if (m_pid > 0 && !m_exited) ::kill(m_pid, SIGKILL);
}

void RemoteProgram::stop() {
    if (m_pid <= 0 || m_exited) return;
    m_stopped = true;
    ::kill(m_pid, SIGTERM);
}

bool RemoteProgram::reap() {
    if (m_exited || m_pid <= 0) return false;
    int st = 0;
    if (waitpid(m_pid, &st, WNOHANG) != m_pid) return false;
    m_exited = true;
    m_wait_status = st;
    m_exit.notify(sc_core::SC_ZERO_TIME);
    return true;
}

bool RemoteProgram::dispatch_calls() {
    bool any = false;
    for (std::uint32_t i = 0; i < kSlots; ++i) {
        if (m_dispatched[i] || m_channel->slots[i].state.load(std::memory_order_acquire) != kCall) continue;
        m_dispatched[i] = true;
        m_call[i].notify(sc_core::SC_ZERO_TIME);
        any = true;
    }
    return any;
}

bool RemoteProgram::spare_cpu(std::uint32_t slot) const {
    // Threads that wait for the simulator, besides this one, and the
    // simulator itself: a spinning caller must leave them a CPU.
    static const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    long waiting = 0;
    if (m_spec.group)
        for (const ChannelHeader* c : m_spec.group->channels)
            for (const Slot& s : c->slots)
                if (&s != &m_channel->slots[slot] && s.state.load(std::memory_order_relaxed) == kCall) ++waiting;
    return waiting + 2 <= cpus;
}

bool RemoteProgram::just_replied() const {
    for (std::uint32_t i = 0; i < kSlots; ++i)
        if (m_fresh[i] && m_channel->slots[i].state.load(std::memory_order_acquire) != kCall) return true;
    return false;
}

bool RemoteProgram::quiescent() const {
    m_unconfirmed = false;
    if (m_exited) return true;
    if (m_exiting) {
        // Said it is exiting: time waits until its end is collected.
        const std::string stat = read_small("/proc/" + std::to_string(m_pid) + "/stat");
        if (stat.empty() || stat_state(stat) == 'Z') m_dying = true;
        return false;
    }
    int in_call = 0;
    for (std::uint32_t i = 0; i < kSlots; ++i) {
        const std::uint32_t st = m_channel->slots[i].state.load(std::memory_order_acquire);
        if (st == kReply) return false;  // its thread is about to run
        // A call, handed to its slot thread or not yet, waits.
        if (st == kCall) ++in_call;
    }
    // No thread started since threads were last counted, and as many in
    // calls as there are: it waits, without asking /proc.
    const std::uint32_t started = m_channel->threads_started.load(std::memory_order_acquire);
    if (started == m_threads_started_seen && in_call == m_threads_known) return true;
    // Found waiting (confirmed), and nothing that could wake it has happened
    // since (a wall-clock time-out in the kernel is caught within 10 ms).
    const auto wall = std::chrono::steady_clock::now();
    if (m_spec.group && m_waiting_at == m_spec.group->activity && started == m_threads_started_seen &&
        wall - m_waiting_since < std::chrono::milliseconds(10))
        return true;
    // Its one thread was confirmed waiting, outside a call: the second look
    // alone tells whether it has been on a CPU since (the first would only
    // say it was blocked a moment before the others were looked at).
    if (m_confirmed_runs != kNoMark && in_call == 0 && m_threads_known == 1 && started == m_threads_started_seen) {
        m_runs_seen = m_confirmed_runs;
        m_unconfirmed = true;
        return true;
    }
    const bool waits = threads_wait(in_call, started, m_runs_seen);
    if (!waits) {
        m_confirmed_runs = kNoMark;
        if (m_spec.group) ++m_spec.group->activity;
        return false;
    }
    m_unconfirmed = true;
    return true;
}

void RemoteProgram::note_waiting() const {
    if (m_spec.group) {
        m_waiting_at = m_spec.group->activity;
        m_waiting_since = std::chrono::steady_clock::now();
    }
}

bool RemoteProgram::confirm_quiescent() const {
    if (!m_unconfirmed) return true;
    m_unconfirmed = false;
    int in_call = 0;
    for (std::uint32_t i = 0; i < kSlots; ++i) {
        const std::uint32_t st = m_channel->slots[i].state.load(std::memory_order_acquire);
        if (st == kReply) return false;
        if (st == kCall) ++in_call;
    }
    const std::uint32_t started = m_channel->threads_started.load(std::memory_order_acquire);
    std::uint64_t runs = 0;
    // Waiting at both looks and not run in between: it was waiting all along.
    if (!threads_wait(in_call, started, runs) || runs != m_runs_seen) {
        m_confirmed_runs = kNoMark;
        if (m_spec.group) ++m_spec.group->activity;
        return false;
    }
    m_confirmed_runs = m_single ? runs : kNoMark;
    note_waiting();
    return true;
}

namespace {
// The thread's time on a CPU so far, ns (/proc/.../schedstat, first field).
std::uint64_t cpu_time(const std::string& task_dir) {
    return std::strtoull(read_small(task_dir + "/schedstat").c_str(), nullptr, 10);
}

// The file and offset an address of process pid lies in (/proc/pid/maps),
// for the sync log.
std::string where_in(int pid, std::uint64_t addr) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    for (std::string line; std::getline(maps, line);) {
        unsigned long long lo = 0, hi = 0, off = 0;
        char perms[8] = {};
        int path_at = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &lo, &hi, perms, &off, &path_at) < 4) continue;
        if (addr < lo || addr >= hi) continue;
        char b[32];
        std::snprintf(b, sizeof b, "+0x%llx", static_cast<unsigned long long>(addr - lo + off));
        return (path_at > 0 ? line.substr(static_cast<std::size_t>(path_at)) : std::string("?")) + b;
    }
    return "?";
}

// CPU time of a running thread the kernel may not have accounted yet (up to a
// scheduler tick at 100 Hz): growth beyond it means the thread ran since.
constexpr std::uint64_t kLateAccountingNs = 10000000;

// Whether the thread blocks signal sig (/proc/.../status, SigBlk: a hex
// mask with bit sig - 1 for signal sig).
bool signal_blocked(const std::string& task_dir, int sig) {
    const std::string status = read_small(task_dir + "/status");
    const auto at = status.find("SigBlk:");
    if (at == std::string::npos) return false;
    const std::uint64_t mask = std::strtoull(status.c_str() + at + 7, nullptr, 16);
    return (mask >> (sig - 1)) & 1;
}

// How often the thread has been put on a CPU (/proc/.../schedstat, third field).
std::uint64_t times_run(const std::string& task_dir) {
    const std::string t = read_small(task_dir + "/schedstat");
    const auto a = t.find(' ');
    const auto b = a == std::string::npos ? a : t.find(' ', a + 1);
    return b == std::string::npos ? 0 : std::strtoull(t.c_str() + b + 1, nullptr, 10);
}
}  // namespace

bool RemoteProgram::calling(int tid) const {
    for (const Slot& s : m_channel->slots)
        if (s.tid == tid && s.state.load(std::memory_order_acquire) == kCall) return true;
    return false;
}

bool RemoteProgram::threads_wait(int in_call, std::uint32_t started, std::uint64_t& runs) const {
    runs = 0;
    const std::string proc = "/proc/" + std::to_string(m_pid);
    const std::string stat = read_small(proc + "/stat");
    // Ended: not waiting until its end is collected (reap), so that it is
    // collected before simulated time moves on.
    if (stat.empty() || stat_state(stat) == 'Z') {
        m_dying = true;
        return false;
    }
    // Field 20 is num_threads; the text after ')' starts with field 3.
    std::size_t pos = stat.rfind(')') + 1;
    for (int field = 3; field <= 20 && pos != std::string::npos; ++field) pos = stat.find(' ', pos + 1);
    long threads = 0;
    if (pos != std::string::npos) {
        const std::size_t begin = stat.rfind(' ', pos - 1);
        threads = std::strtol(stat.c_str() + begin + 1, nullptr, 10);
    }
    m_threads_known = static_cast<int>(threads);
    m_threads_started_seen = started;
    m_single = false;
    if (threads == in_call) return true;
    if (threads == 1) {
        // The one thread, outside a call.
        if (stat_state(stat) == 'R') return false;
        runs = times_run(proc + "/task/" + std::to_string(m_pid));
        m_single = true;
        return true;
    }
    // Some thread is outside a call: the program waits only if each such
    // thread is blocked in the kernel (a socket, a pipe, an eventfd).
    DIR* d = opendir((proc + "/task").c_str());
    if (!d) return true;
    bool all_wait = true;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        if (calling(std::atoi(e->d_name))) continue;
        const std::string task = proc + "/task/" + e->d_name;
        if (stat_state(read_small(task + "/stat")) == 'R') {
            all_wait = false;
            break;
        }
        runs += times_run(task);
    }
    closedir(d);
    return all_wait;
}

std::uint64_t RemoteProgram::cpu_ns() const {
    // The first field of each thread's schedstat: time on a CPU, in ns.
    const std::string proc = "/proc/" + std::to_string(m_pid) + "/task";
    std::uint64_t total = 0;
    DIR* d = opendir(proc.c_str());
    if (!d) return 0;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        total += cpu_time(proc + "/" + e->d_name);
    }
    closedir(d);
    return total;
}

std::uint64_t RemoteProgram::kernel_work() const {
    // Page faults (stat fields 10 and 12) and read/write system calls
    // (io: syscr, syscw): a loop that only reads memory makes none.
    const std::string proc = "/proc/" + std::to_string(m_pid);
    const std::string stat = read_small(proc + "/stat");
    std::uint64_t n = 0;
    std::size_t pos = stat.rfind(')');
    for (int field = 3; field <= 12 && pos != std::string::npos; ++field) {
        pos = stat.find(' ', pos + 1);
        if ((field == 10 || field == 12) && pos != std::string::npos) n += std::strtoull(stat.c_str() + pos + 1, nullptr, 10);
    }
    const std::string io = read_small(proc + "/io");
    for (const char* key : {"syscr: ", "syscw: "}) {
        const auto at = io.find(key);
        if (at != std::string::npos) n += std::strtoull(io.c_str() + at + 7, nullptr, 10);
    }
    return n;
}

bool RemoteProgram::spinning() const {
    if (m_exited || m_exiting || m_spec.spin_cpu_ns == 0) return false;
    const std::uint64_t cpu = cpu_ns();
    const std::uint64_t reads = m_channel->clock_reads.load(std::memory_order_acquire);
    const std::uint64_t work = kernel_work();
    const std::uint64_t written = memory_writes();
    // A program that reads the clock computes, or waits for the clock to
    // move (its own clock reads move its time, so it ends on its own); one
    // that faults pages in or makes system calls is doing something else
    // than reading a word of memory again and again; one whose memory the
    // adapter wrote may have seen what it waited for.
    if (m_cpu_mark == kNoMark || reads != m_clock_reads_mark || work != m_kernel_work_mark ||
        written != m_memory_writes_mark) {
        m_cpu_mark = cpu;
        m_clock_reads_mark = reads;
        m_kernel_work_mark = work;
        m_memory_writes_mark = written;
        m_loops = false;
        return false;
    }
    if (cpu - m_cpu_mark < m_spec.spin_cpu_ns) return false;
    // How long it has run decides only when to look: what it does decides
    // whether it waits, so the verdict does not depend on the host's speed.
    const bool known = m_loops;
    if (!m_loops && !loops_without_progress()) {
        m_cpu_mark = cpu_ns();  // it computes: look again after as much CPU time again
        return false;
    }
    m_loops = true;
    if (std::FILE* log = sync_log())
        std::fprintf(log, "%.6f us node%d spins (%s; ip 0x%llx, %s; %zu samples)\n", sim::ps_to_us(sim::now_ps()), m_spec.node,
                     known ? "seen before" : "sampled", static_cast<unsigned long long>(m_last_spin_ip),
                     where_in(m_pid, m_last_spin_ip).c_str(), known ? std::size_t{1} : m_last_spin_samples);
    return true;
}

int RemoteProgram::sample(int tid, std::uint64_t& ip, std::uint64_t& digest) const {
    const std::uint32_t request = ++m_sample_request;
    m_channel->sample_request.store(request, std::memory_order_release);
    const std::string task_dir = "/proc/" + std::to_string(m_pid) + "/task/" + std::to_string(tid);
    const std::uint64_t runs_before = times_run(task_dir);
    const std::uint64_t cpu_before = cpu_time(task_dir);
    if (syscall(SYS_tgkill, m_pid, tid, sample_signal()) != 0) return -1;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    // Sleeping, not spinning: the thread may need this CPU to answer.
    for (;;) {
        const std::uint32_t answer = m_channel->sample_answer.load(std::memory_order_acquire);
        if (answer == request) break;
        if (std::chrono::steady_clock::now() > give_up) {
            // Silent because it blocks the signal: the CPU time rule alone
            // decides. But only a thread that has run since it was asked
            // can say so: put on a CPU again, or running on for longer than
            // the kernel's late accounting of what it ran before it was
            // asked can add. One put off its CPU inside its previous answer
            // (the signal blocked until that returns) has not: no verdict,
            // as for any thread that has not been on a CPU to answer.
            const bool ran = times_run(task_dir) > runs_before || cpu_time(task_dir) > cpu_before + kLateAccountingNs;
            const bool answering = m_channel->sample_answering.load(std::memory_order_acquire) != 0;
            return ran && !answering && signal_blocked(task_dir, sample_signal()) ? 0 : -2;
        }
        const timespec wait{0, 1000000};
        syscall(SYS_futex, &m_channel->sample_answer, FUTEX_WAIT, answer, &wait, nullptr, 0);
    }
    // Another thread answering is one that took a request it had timed out
    // on earlier: no verdict on this one.
    if (m_channel->sample_tid != tid) return -2;
    ip = m_channel->sample_ip;
    digest = m_channel->sample_digest;
    return 1;
}

namespace {
// Waits (wall time, a little) until thread task_dir has had some CPU time
// more; false if it does not get it.
bool ran_on(const std::string& task_dir) {
    const std::uint64_t from = cpu_time(task_dir);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    for (;;) {
        const timespec pause{0, 20000};
        nanosleep(&pause, nullptr);
        const std::string t = read_small(task_dir + "/schedstat");
        if (t.empty()) return false;  // it ended
        if (std::strtoull(t.c_str(), nullptr, 10) >= from + 20000) return true;
        if (std::chrono::steady_clock::now() > give_up) return false;
    }
}
}  // namespace

namespace {
}  // namespace

bool RemoteProgram::loops_without_progress() const {
    // Samples of a thread until two come from one instruction: the same
    // state there means a loop that changes nothing; another state, work.
    constexpr std::size_t kMaxSamples = 64;
    const std::string task = "/proc/" + std::to_string(m_pid) + "/task";
    // Its threads outside a call that run, and how often each thread outside
    // a call has been on a CPU.
    auto look = [&](std::vector<int>& running, std::uint64_t& runs) {
        running.clear();
        runs = 0;
        DIR* d = opendir(task.c_str());
        if (!d) return false;
        while (dirent* e = readdir(d)) {
            if (e->d_name[0] == '.') continue;
            const int tid = std::atoi(e->d_name);
            if (calling(tid)) continue;
            const std::string dir = task + "/" + e->d_name;
            if (stat_state(read_small(dir + "/stat")) == 'R') running.push_back(tid);
            else runs += times_run(dir);
        }
        closedir(d);
        return true;
    };
    std::vector<int> running;
    std::uint64_t runs_before = 0;
    if (!look(running, runs_before) || running.empty()) return false;
    for (const int tid : running) {
        struct Seen {
            std::uint64_t ip, digest;
        };
        std::vector<Seen> seen;  // its answers, in order
        bool decided = false;
        const std::string task_dir = task + "/" + std::to_string(tid);
        for (std::size_t k = 0; k < kMaxSamples && !decided; ++k) {
            // Between two looks it must have run on (a signal already
            // waiting is taken before the thread runs again, and would show
            // the same state, whatever the thread does).
            if (k > 0 && !ran_on(task_dir)) return false;
            std::uint64_t ip = 0, digest = 0;
            // Gone: it is changing. No answer (it blocks the signal): the
            // CPU time rule alone decides, as it must for the run to go on.
            const int answered = sample(tid, ip, digest);
            if (answered < 0) return false;  // gone, or not run: look again later
            if (answered == 0) {
                if (std::FILE* log = sync_log())
                    std::fprintf(log, "%.6f us node%d thread %d does not answer and blocks the signal\n",
                                 sim::ps_to_us(sim::now_ps()), m_spec.node, tid);
                return true;
            }
            // Back in a loop it was found spinning in before: one look will do.
            if (k == 0 && m_spin_loops.count({tid, ip})) {
                seen.push_back({ip, digest});
                decided = true;
                break;
            }
            // Another state at an instruction seen before: it computes. The
            // same state with the thread seen at another instruction in
            // between: it went round a loop and came back with nothing
            // changed, so it spins. Two answers in a row at one instruction
            // prove nothing: the second may have been taken before any of its
            // code ran (a thread put off its CPU right after answering),
            // whatever CPU time the kernel charged it meanwhile.
            bool elsewhere = false;
            for (std::size_t j = seen.size(); j-- > 0 && !decided;) {
                if (seen[j].ip != ip) {
                    elsewhere = true;
                    continue;
                }
                if (seen[j].digest != digest) return false;
                decided = elsewhere;
            }
            seen.push_back({ip, digest});
        }
        // Every answer the same: a loop of one instruction, or a thread that
        // never ran between its answers, which ran_on rules out that often.
        if (!decided && seen.size() == kMaxSamples &&
            std::all_of(seen.begin(), seen.end(),
                        [&](const Seen& s) { return s.ip == seen.front().ip && s.digest == seen.front().digest; }))
            decided = true;
        if (!decided) return false;  // a long loop: look again later
        m_spin_loops.insert({tid, seen.back().ip});
        m_last_spin_ip = seen.back().ip;
        m_last_spin_samples = seen.size();
    }
    // Its other threads still wait, and have not run meanwhile (one woken by
    // another thread of it through the kernel is not waiting any more).
    std::vector<int> running_after;
    std::uint64_t runs_after = 0;
    return look(running_after, runs_after) && running_after == running && runs_after == runs_before;
}

std::uint64_t RemoteProgram::memory_writes() const { return m_driver.hca().pcie().memory().remote_writes(); }

void RemoteProgram::serve() {
    ProgramGroup* group = m_spec.group;
    ChannelHeader* channel = m_channel;
    auto touch = [group, channel]() {
        if (group) group->touch(sim::now_ps());
        else channel->now_ps.store(sim::now_ps(), std::memory_order_release);
    };
    m_verbs = std::make_unique<VerbsProxy>(m_pidfd, touch);
    m_rdma_cm = std::make_unique<RdmaCmProxy>(*m_verbs, m_pidfd, touch);
    sc_core::sc_spawn_options opts;
    opts.set_stack_size(1 << 20);
    for (std::uint32_t i = 0; i < kSlots; ++i)
        m_slot_thread[i] = sc_core::sc_spawn([this, i]() { serve_slot(i); },
                                             ("remote_node" + std::to_string(m_spec.node) + "_slot" + std::to_string(i)).c_str(),
                                             &opts);
    if (!m_exited && !m_exiting) sc_core::wait(m_exit);
    // A thread killed inside a call leaves its slot thread waiting: stop them all.
    for (auto& h : m_slot_thread)
        if (h.valid() && !h.terminated()) h.kill();
    m_rdma_cm->release_all();
    m_verbs->release_all();
    m_driver.hca().pcie().memory().forget_shared(m_pid);
}

void RemoteProgram::replace_tsc_reads() {
    m_channel->tsc_read_count = 0;
    if (!m_spec.replace_tsc_reads) return;
    std::string error;
    std::vector<TscRead> reads = find_tsc_reads(m_pid, m_spec.lib_dir, error);
    if (reads.size() > kMaxTscReads) {
        error = std::to_string(reads.size()) + " TSC reads are more than the " + std::to_string(kMaxTscReads) +
                " it can follow";
        reads.resize(kMaxTscReads);
    }
    if (!error.empty())
        std::fprintf(stderr, "hcasim: warning: %s: %s may read the host's TSC, not the simulated one\n", error.c_str(),
                     name().c_str());
    reads = hcasim::remote::replace_tsc_reads(m_pid, reads);
    for (std::size_t k = 0; k < reads.size(); ++k) {
        m_channel->tsc_read_addr[k] = reads[k].addr;
        m_channel->tsc_read_length[k] = reads[k].length;
    }
    m_channel->tsc_read_count = static_cast<std::uint32_t>(reads.size());
    if (std::FILE* log = sync_log())
        std::fprintf(log, "%s: %zu TSC reads replaced by ud2\n", name().c_str(), reads.size());
}

void RemoteProgram::serve_slot(std::uint32_t i) {
    host::bind_current_thread(&m_driver);
    host::bind_current_address_space(m_pid);
    std::vector<std::uint8_t> reply(kSlotBytes);
    for (;;) {
        sc_core::wait(m_call[i]);
        Slot& s = m_channel->slots[i];
        // What the program's thread did since its last call, first.
        host::spend_cpu(s.charge_ps);
        Reader in(s.data, std::min<std::size_t>(s.length, kSlotBytes));
        Writer out(reply.data(), reply.size());
        const auto op = static_cast<Op>(s.op);
        if (op == Op::Hello) {
            // The program announced itself (again, if an image it exec'd).
            replace_tsc_reads();
        } else if (op == Op::Exit) {
            m_exiting = true;
        } else if (op == Op::Sleep) {
            const auto ns = in.get<std::uint64_t>();
            if (ns) sc_core::wait(sim::to_sc(ns * 1000));
        } else if (op == Op::ArmTimer) {
            const auto remote_fd = in.get<std::int32_t>();
            const auto ns = in.get<std::uint64_t>();
            const int fd = in.bad() ? -1 : static_cast<int>(syscall(SYS_pidfd_getfd, m_pidfd, remote_fd, 0));
            const std::uint64_t id = fd < 0 ? 0 : m_next_timer++;
            if (fd >= 0) {
                auto timer = std::make_shared<int>(fd);
                m_timers[id] = timer;
                ProgramGroup* group = m_spec.group;
                ChannelHeader* channel = m_channel;
                sc_core::sc_spawn([this, id, timer, ns, group, channel]() {
                    sc_core::wait(sim::to_sc(ns * 1000));
                    if (*timer < 0) return;
                    // The time first: the write may wake the program at once,
                    // and it reads its clock as it wakes.
                    if (group) group->touch(sim::now_ps());
                    else channel->now_ps.store(sim::now_ps(), std::memory_order_release);
                    const std::uint64_t one = 1;
                    if (::write(*timer, &one, sizeof one) < 0) {}
                    ::close(*timer);
                    *timer = -1;
                    m_timers.erase(id);
                });
            }
            out.put(id);
        } else if (op == Op::DisarmTimer) {
            const auto id = in.get<std::uint64_t>();
            const auto at = m_timers.find(id);
            if (at != m_timers.end()) {
                if (*at->second >= 0) ::close(*at->second);
                *at->second = -1;
                m_timers.erase(at);
            }
        } else if (op == Op::Listen) {
            const auto port = in.get<std::uint16_t>();
            const auto real = in.get<std::uint16_t>();
            if (m_spec.group && !in.bad()) {
                m_spec.group->listeners[{m_spec.node, port}] = real;
                m_spec.group->ports_changed.notify(sc_core::SC_ZERO_TIME);
            }
        } else if (op == Op::AwaitListener) {
            // To a node (its address), or to loopback (-1): the program's
            // own node if it listens there, else the first that does, so
            // that a client given "localhost" finds its server.
            const auto port = in.get<std::uint16_t>();
            const auto node = in.get<std::int32_t>();
            std::uint16_t real = 0;
            if (m_spec.group && !in.bad()) {
                ProgramGroup& t = *m_spec.group;
                auto find = [&]() -> bool {
                    auto at = t.listeners.find({node < 0 ? m_spec.node : node, port});
                    if (at == t.listeners.end() && node < 0)
                        for (auto it = t.listeners.begin(); it != t.listeners.end(); ++it)
                            if (it->first.second == port) {
                                at = it;
                                break;
                            }
                    if (at == t.listeners.end()) return false;
                    real = at->second;
                    return true;
                };
                const sim::Tick until = sim::now_ps() + t.connect_wait;
                while (!find() && sim::now_ps() < until)
                    sc_core::wait(sim::to_sc(until - sim::now_ps()), t.ports_changed);
            }
            out.put(static_cast<std::int32_t>(real ? 0 : ECONNREFUSED));
            out.put(real);
        } else if (VerbsProxy::handles(op)) {
            m_verbs->execute(op, in, out);
        } else if (RdmaCmProxy::handles(op)) {
            m_rdma_cm->execute(op, in, out);
        }
        std::memcpy(s.data, reply.data(), out.length());
        s.length = static_cast<std::uint32_t>(out.length());
        // Its thread goes on at this instant.
        if (m_spec.group) m_spec.group->touch(sim::now_ps());
        else m_channel->now_ps.store(sim::now_ps(), std::memory_order_release);
        m_dispatched[i] = false;
        m_fresh[i] = true;
        s.spin_ns = spare_cpu(i) ? kCallSpinNs : 0;
        s.state.store(kReply, std::memory_order_seq_cst);
        if (s.caller_sleeps.load(std::memory_order_seq_cst))
            syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&s.state), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
        if (op == Op::Exit) m_exit.notify(sc_core::SC_ZERO_TIME);
        m_cpu_mark = kNoMark;  // it runs again from here
    }
}

}  // namespace hcasim::remote
