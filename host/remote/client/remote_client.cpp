// libhcasim_client.so: preloaded into every program `hcasim run` starts.
// It maps the channel the simulator created, carries out forwarded calls,
// and gives the program its node's simulated time: clock_gettime,
// gettimeofday, time and the TSC (rdtsc traps with PR_TSC_SIGSEGV and is
// emulated here) read simulated time, and sleeps sleep in simulated time.
//
// Between two calls a program runs while simulated time stands still. What
// that stretch costs is charged at its next call: each clock read costs
// HCASIM_CLOCK_READ_NS (the simulator sets it from host.cpu.clock_read_ns), so a
// loop that waits for the clock to move sees it move.
#include "host/remote/client/remote_client.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <linux/futex.h>
#include <signal.h>
#include <spawn.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <cstdarg>
#include <vector>
#include <ctime>

using namespace hcasim::remote;

namespace {

ChannelHeader* g_channel = nullptr;
std::uint64_t g_clock_read_ps = 0;

// This thread's slot and the simulated time its program part has used
// since its last call (charged at the next one).
thread_local Slot* t_slot = nullptr;
thread_local std::uint64_t t_debt_ps = 0;

long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t val) {
    return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op, val, nullptr, nullptr, 0);
}

pid_t my_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Simulated time as this thread sees it now, in ps; each read costs a
// clock read.
std::uint64_t read_clock_ps() {
    const std::uint64_t t = g_channel->now_ps.load(std::memory_order_acquire) + t_debt_ps;
    t_debt_ps += g_clock_read_ps;
    g_channel->clock_reads.fetch_add(1, std::memory_order_relaxed);
    return t;
}

std::uint64_t tsc_now() {
    const unsigned __int128 ps = read_clock_ps();
    return static_cast<std::uint64_t>(ps * g_channel->tsc_khz / 1000000000ull);
}

// The host's own monotonic clock (not the simulated one programs see).
std::uint64_t host_ns() {
    using Fn = int (*)(clockid_t, struct timespec*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "clock_gettime"));
    timespec ts{};
    real(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

// The TSC read of length bytes (2: rdtsc, 3: rdtscp) at the trapping
// instruction: the simulated TSC in edx:eax (and the node in ecx), then on.
void emulate_tsc_read(ucontext_t* uc, int length) {
    const std::uint64_t t = tsc_now();
    uc->uc_mcontext.gregs[REG_RAX] = static_cast<greg_t>(t & 0xffffffffu);
    uc->uc_mcontext.gregs[REG_RDX] = static_cast<greg_t>(t >> 32);
    if (length == 3) uc->uc_mcontext.gregs[REG_RCX] = static_cast<greg_t>(hcasim_client_node());
    uc->uc_mcontext.gregs[REG_RIP] += length;
}

// rdtsc (0f 31) and rdtscp (0f 01 f9) trap once PR_TSC_SIGSEGV is set: emulate them.
void on_segv(int sig, siginfo_t* info, void* uc_void) {
    auto* uc = static_cast<ucontext_t*>(uc_void);
    auto* ip = reinterpret_cast<const unsigned char*>(uc->uc_mcontext.gregs[REG_RIP]);
    int length = 0;
    if (ip[0] == 0x0f && ip[1] == 0x31) length = 2;
    else if (ip[0] == 0x0f && ip[1] == 0x01 && ip[2] == 0xf9) length = 3;
    if (length == 0 || !g_channel || info->si_code <= 0) {
        // A real fault, or one sent by kill(): die of it as the program
        // would have (a fault recurs when the instruction runs again).
        signal(sig, SIG_DFL);
        if (info->si_code <= 0) raise(sig);
        return;
    }
    emulate_tsc_read(uc, length);
}

// Where rdtsc does not trap, the simulator replaced the program's TSC reads by
// ud2 (channel.hpp, tsc_read_*): one of those is emulated as the read it was.
void on_sigill(int sig, siginfo_t* info, void* uc_void) {
    auto* uc = static_cast<ucontext_t*>(uc_void);
    const auto ip = static_cast<std::uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
    int length = 0;
    if (g_channel && info->si_code > 0) {
        const std::uint64_t* first = g_channel->tsc_read_addr;
        const std::uint64_t* last = first + std::min(g_channel->tsc_read_count, kMaxTscReads);
        const std::uint64_t* at = std::lower_bound(first, last, ip);
        if (at != last && *at == ip) length = g_channel->tsc_read_length[at - first];
    }
    if (length == 0) {
        // The program's own illegal instruction: it dies of it.
        signal(sig, SIG_DFL);
        if (info->si_code <= 0) raise(sig);
        return;
    }
    emulate_tsc_read(uc, length);
}

// The simulator asks where this thread is, having seen it run long without
// a call: a digest of its registers (not those the kernel fills in for the
// signal) and of the stack around its stack pointer, where unoptimised code
// keeps its loop variables.
void on_sample(int, siginfo_t*, void* uc_void) {
    const int saved_errno = errno;
    if (g_channel) {
        g_channel->sample_answering.fetch_add(1, std::memory_order_acq_rel);
        const greg_t* r = static_cast<ucontext_t*>(uc_void)->uc_mcontext.gregs;
        std::uint64_t h = 14695981039346656037ull;
        auto mix = [&h](const void* p, std::size_t n) {
            for (std::size_t i = 0; i < n; ++i) {
                h ^= static_cast<const unsigned char*>(p)[i];
                h *= 1099511628211ull;
            }
        };
        for (int i = 0; i < NGREG; ++i)
            if (i != REG_TRAPNO && i != REG_ERR && i != REG_OLDMASK && i != REG_CR2 && i != REG_CSGSFS)
                mix(&r[i], sizeof r[i]);
        // The red zone below it and a few frames' worth above.
        mix(reinterpret_cast<const unsigned char*>(r[REG_RSP]) - 128, 384);
        g_channel->sample_tid = static_cast<std::int32_t>(syscall(SYS_gettid));
        g_channel->sample_ip = static_cast<std::uint64_t>(r[REG_RIP]);
        g_channel->sample_digest = h;
        g_channel->sample_answer.store(g_channel->sample_request.load(std::memory_order_acquire),
                                       std::memory_order_release);
        futex(&g_channel->sample_answer, FUTEX_WAKE, 1);
        g_channel->sample_answering.fetch_sub(1, std::memory_order_acq_rel);
    }
    errno = saved_errno;
}

void release_slot(void*) {
    if (!t_slot) return;
    t_slot->state.store(kFree, std::memory_order_release);
    t_slot = nullptr;
    g_channel->doorbell.fetch_add(1);
    futex(&g_channel->doorbell, FUTEX_WAKE, INT_MAX);
}

pthread_key_t g_slot_key;
pid_t g_attached_pid = 0;

// The program is ending: the simulator releases what it left now, at this
// simulated time, not whenever the host gets round to noticing the exit.
__attribute__((destructor)) void detach() {
    if (!g_channel || getpid() != g_attached_pid) return;
    Call bye(Op::Exit);
    bye.run();
}

// The simulator's sample signal kills a process that has no handler for it:
// it is blocked from just before an exec until the new image has installed
// its handler (a blocked signal stays pending across exec).
void set_sample_signal_blocked(bool blocked) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sample_signal());
    sigprocmask(blocked ? SIG_BLOCK : SIG_UNBLOCK, &s, nullptr);
}

// A process the program started is not the program: it runs outside the
// simulation, with the host's TSC (the trap is inherited across fork and
// exec) and no channel.
void detach_child(int fd) {
    prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
    set_sample_signal_blocked(false);
    unsetenv(kChannelFdEnv);
    if (fd >= 0) close(fd);
}

__attribute__((constructor)) void attach() {
    const char* fd_text = std::getenv(kChannelFdEnv);
    if (!fd_text) {
        detach_child(-1);
        return;
    }
    const int fd = std::atoi(fd_text);
    void* p = mmap(nullptr, kChannelBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        std::fprintf(stderr, "hcasim: cannot map the simulator's channel (fd %d): %s\n", fd, std::strerror(errno));
        _exit(127);
    }
    auto* ch = static_cast<ChannelHeader*>(p);
    if (ch->magic != kChannelMagic || ch->version != kChannelVersion) {
        std::fprintf(stderr, "hcasim: the channel on fd %d is not an hcasim channel of version %u\n", fd, kChannelVersion);
        _exit(127);
    }
    if (getppid() != ch->simulator_pid) {
        munmap(p, kChannelBytes);
        detach_child(fd);
        return;
    }
    // The descriptor stays open across exec (a wrapper such as stdbuf or env
    // execs the real program, which attaches again), out of the way of the
    // descriptors the program numbers itself.
    if (fd < 900) {
        const int high = fcntl(fd, F_DUPFD, 900);
        if (high >= 0) {
            close(fd);
            char text[16];
            std::snprintf(text, sizeof text, "%d", high);
            setenv(kChannelFdEnv, text, 1);
        }
    }
    if (ch->attached.exchange(1) != 0) {
        // An image exec'd in the same process: the threads that held slots
        // are gone.
        for (Slot& s : ch->slots) s.state.store(kFree, std::memory_order_release);
    }
    g_channel = ch;
    g_attached_pid = getpid();
    if (const char* c = std::getenv("HCASIM_CLOCK_READ_PS")) g_clock_read_ps = std::strtoull(c, nullptr, 10);
    pthread_key_create(&g_slot_key, release_slot);
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, nullptr);
    // A table of the image that exec'd this one names none of this one's instructions.
    ch->tsc_read_count = 0;
    struct sigaction ill {};
    ill.sa_sigaction = on_sigill;
    ill.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGILL, &ill, nullptr);
    struct sigaction sample {};
    sample.sa_sigaction = on_sample;
    sample.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(sample_signal(), &sample, nullptr);
    // Blocked across the exec that started this image (for_exec), so that a
    // sample could not kill it before the handler was there.
    set_sample_signal_blocked(false);
    prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
    // Tell the simulator who this is.
    Call hello(Op::Hello);
    hello.in().put(static_cast<std::int32_t>(getpid()));
    hello.run();
}

}  // namespace

extern "C" {

Slot* hcasim_client_slot() {
    if (t_slot) return t_slot;
    if (!g_channel) return nullptr;
    for (Slot& s : g_channel->slots) {
        std::uint32_t expected = kFree;
        if (s.state.compare_exchange_strong(expected, kIdle)) {
            s.tid = my_tid();
            t_slot = &s;
            pthread_setspecific(g_slot_key, &s);
            return t_slot;
        }
    }
    std::fprintf(stderr, "hcasim: more than %u threads of this program make calls\n", kSlots);
    abort();
}

std::size_t hcasim_client_call(Slot* slot, Op op, std::size_t length) {
    slot->op = static_cast<std::uint32_t>(op);
    slot->length = static_cast<std::uint32_t>(length);
    slot->charge_ps = t_debt_ps;
    slot->state.store(kCall, std::memory_order_seq_cst);
    g_channel->doorbell.fetch_add(1, std::memory_order_seq_cst);
    if (g_channel->simulator_sleeps.load(std::memory_order_seq_cst)) futex(&g_channel->doorbell, FUTEX_WAKE, INT_MAX);
    // Most results come within microseconds: look for it a while before
    // sleeping, which costs two thread switches a call.
    const std::uint64_t give_up = slot->spin_ns ? host_ns() + slot->spin_ns : 0;
    while (slot->state.load(std::memory_order_acquire) == kCall && host_ns() < give_up) __builtin_ia32_pause();
    while (slot->state.load(std::memory_order_acquire) == kCall) {
        slot->caller_sleeps.store(1, std::memory_order_seq_cst);
        if (slot->state.load(std::memory_order_seq_cst) == kCall) futex(&slot->state, FUTEX_WAIT, kCall);
        slot->caller_sleeps.store(0, std::memory_order_relaxed);
    }
    t_debt_ps = 0;
    const std::size_t n = slot->length;
    slot->state.store(kIdle, std::memory_order_release);
    return n;
}

int hcasim_client_node() { return g_channel ? static_cast<int>(g_channel->node) : -1; }

// ---- Simulated time ------------------------------------------------------

__attribute__((visibility("default"))) int clock_gettime(clockid_t clk, struct timespec* ts) {
    using Fn = int (*)(clockid_t, struct timespec*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "clock_gettime"));
    const bool simulated = clk == CLOCK_REALTIME || clk == CLOCK_MONOTONIC || clk == CLOCK_MONOTONIC_RAW ||
                           clk == CLOCK_REALTIME_COARSE || clk == CLOCK_MONOTONIC_COARSE || clk == CLOCK_BOOTTIME;
    if (!g_channel || !simulated) return real(clk, ts);
    std::uint64_t ns = read_clock_ps() / 1000;
    if (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE) ns += g_channel->epoch_ns;
    ts->tv_sec = static_cast<time_t>(ns / 1000000000ull);
    ts->tv_nsec = static_cast<long>(ns % 1000000000ull);
    return 0;
}

__attribute__((visibility("default"))) int gettimeofday(struct timeval* tv, void* tz) {
    using Fn = int (*)(struct timeval*, void*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "gettimeofday"));
    if (!g_channel) return real(tv, tz);
    const std::uint64_t ns = read_clock_ps() / 1000 + g_channel->epoch_ns;
    tv->tv_sec = static_cast<time_t>(ns / 1000000000ull);
    tv->tv_usec = static_cast<suseconds_t>(ns % 1000000000ull / 1000);
    return 0;
}

__attribute__((visibility("default"))) time_t time(time_t* t) {
    using Fn = time_t (*)(time_t*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "time"));
    if (!g_channel) return real(t);
    const auto s = static_cast<time_t>((read_clock_ps() / 1000 + g_channel->epoch_ns) / 1000000000ull);
    if (t) *t = s;
    return s;
}

// Sleeps take simulated time: the thread waits in the simulator.
static int simulated_sleep(std::uint64_t ns) {
    Call c(Op::Sleep);
    c.in().put(ns);
    c.run();
    return 0;
}

__attribute__((visibility("default"))) int nanosleep(const struct timespec* req, struct timespec* rem) {
    using Fn = int (*)(const struct timespec*, struct timespec*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "nanosleep"));
    if (!g_channel) return real(req, rem);
    if (!req || req->tv_nsec < 0 || req->tv_nsec >= 1000000000L || req->tv_sec < 0) {
        errno = EINVAL;
        return -1;
    }
    if (rem) rem->tv_sec = rem->tv_nsec = 0;
    return simulated_sleep(static_cast<std::uint64_t>(req->tv_sec) * 1000000000ull + static_cast<std::uint64_t>(req->tv_nsec));
}

__attribute__((visibility("default"))) int clock_nanosleep(clockid_t clk, int flags, const struct timespec* req, struct timespec* rem) {
    using Fn = int (*)(clockid_t, int, const struct timespec*, struct timespec*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "clock_nanosleep"));
    if (!g_channel || (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)) return real(clk, flags, req, rem);
    if (!req || req->tv_nsec < 0 || req->tv_nsec >= 1000000000L) return EINVAL;
    std::uint64_t ns = static_cast<std::uint64_t>(req->tv_sec) * 1000000000ull + static_cast<std::uint64_t>(req->tv_nsec);
    if (flags & TIMER_ABSTIME) {
        struct timespec now {};
        clock_gettime(clk, &now);
        const std::uint64_t n = static_cast<std::uint64_t>(now.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(now.tv_nsec);
        ns = ns > n ? ns - n : 0;
    }
    simulated_sleep(ns);
    return 0;
}

__attribute__((visibility("default"))) int usleep(useconds_t us) {
    using Fn = int (*)(useconds_t);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "usleep"));
    if (!g_channel) return real(us);
    return simulated_sleep(static_cast<std::uint64_t>(us) * 1000);
}

__attribute__((visibility("default"))) unsigned int sleep(unsigned int s) {
    using Fn = unsigned int (*)(unsigned int);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "sleep"));
    if (!g_channel) return real(s);
    simulated_sleep(static_cast<std::uint64_t>(s) * 1000000000ull);
    return 0;
}

// A new thread runs outside any call: the simulator must count it.
__attribute__((visibility("default"))) int pthread_create(pthread_t* t, const pthread_attr_t* attr,
                                                         void* (*start)(void*), void* arg) {
    using Fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
    if (g_channel) g_channel->threads_started.fetch_add(1, std::memory_order_acq_rel);
    return real(t, attr, start, arg);
}

}  // extern "C"

// ---- Starting other programs ------------------------------------------------
//
// The TSC trap is inherited across exec, and a new image's dynamic loader
// reads the TSC before any library of it can install a handler: whatever
// the program starts runs with the host's TSC. An image the program execs in
// its own place (a wrapper: stdbuf, env, sh -c 'exec ...') attaches again
// and traps again.

namespace {

// An exec: the new image starts with the host's TSC and the sample signal
// blocked; both are as before if the exec fails.
template <typename F>
auto for_exec(F run) {
    if (!g_channel) return run();
    prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
    set_sample_signal_blocked(true);
    auto r = run();
    const int saved = errno;
    set_sample_signal_blocked(false);
    prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
    errno = saved;
    return r;
}

template <typename Fn>
Fn next(const char* name) {
    return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// execl's arguments up to its terminating null pointer (and execle's envp after it).
std::vector<char*> variadic_args(const char* first, va_list ap, char*** envp) {
    std::vector<char*> args{const_cast<char*>(first)};
    while (char* a = va_arg(ap, char*)) args.push_back(a);
    args.push_back(nullptr);
    if (envp) *envp = va_arg(ap, char**);
    return args;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int execve(const char* path, char* const argv[], char* const envp[]) {
    static auto real = next<int (*)(const char*, char* const[], char* const[])>("execve");
    return for_exec([&] { return real(path, argv, envp); });
}
__attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) {
    static auto real = next<int (*)(const char*, char* const[])>("execv");
    return for_exec([&] { return real(path, argv); });
}
__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) {
    static auto real = next<int (*)(const char*, char* const[])>("execvp");
    return for_exec([&] { return real(file, argv); });
}
__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[], char* const envp[]) {
    static auto real = next<int (*)(const char*, char* const[], char* const[])>("execvpe");
    return for_exec([&] { return real(file, argv, envp); });
}
__attribute__((visibility("default"))) int fexecve(int fd, char* const argv[], char* const envp[]) {
    static auto real = next<int (*)(int, char* const[], char* const[])>("fexecve");
    return for_exec([&] { return real(fd, argv, envp); });
}
__attribute__((visibility("default"))) int execl(const char* path, const char* arg, ...) {
    va_list ap;
    va_start(ap, arg);
    std::vector<char*> args = variadic_args(arg, ap, nullptr);
    va_end(ap);
    return execv(path, args.data());
}
__attribute__((visibility("default"))) int execlp(const char* file, const char* arg, ...) {
    va_list ap;
    va_start(ap, arg);
    std::vector<char*> args = variadic_args(arg, ap, nullptr);
    va_end(ap);
    return execvp(file, args.data());
}
__attribute__((visibility("default"))) int execle(const char* path, const char* arg, ...) {
    va_list ap;
    va_start(ap, arg);
    char** envp = nullptr;
    std::vector<char*> args = variadic_args(arg, ap, &envp);
    va_end(ap);
    return execve(path, args.data(), envp);
}
__attribute__((visibility("default"))) int posix_spawn(pid_t* pid, const char* path,
                                                      const posix_spawn_file_actions_t* actions,
                                                      const posix_spawnattr_t* attr, char* const argv[],
                                                      char* const envp[]) {
    static auto real = next<int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*,
                                    char* const[], char* const[])>("posix_spawn");
    return for_exec([&] { return real(pid, path, actions, attr, argv, envp); });
}
__attribute__((visibility("default"))) int posix_spawnp(pid_t* pid, const char* file,
                                                       const posix_spawn_file_actions_t* actions,
                                                       const posix_spawnattr_t* attr, char* const argv[],
                                                       char* const envp[]) {
    static auto real = next<int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*,
                                    char* const[], char* const[])>("posix_spawnp");
    return for_exec([&] { return real(pid, file, actions, attr, argv, envp); });
}
__attribute__((visibility("default"))) int system(const char* command) {
    static auto real = next<int (*)(const char*)>("system");
    return for_exec([&] { return real(command); });
}
__attribute__((visibility("default"))) FILE* popen(const char* command, const char* type) {
    static auto real = next<FILE* (*)(const char*, const char*)>("popen");
    return for_exec([&] { return real(command, type); });
}

}  // extern "C"

// ---- Kernel waits with a time-out -------------------------------------------
//
// poll, ppoll, select and epoll_wait with a time-out wait in the kernel as
// they are, with no time-out of their own but one more descriptor: an
// eventfd the simulator makes readable once the time-out has passed in
// simulated time. Simulated time advances only while the program waits, so
// the time-out ends where the program's clock says it should, every run.

namespace {

thread_local int t_timer_fd = -1;

// Arms the simulated time-out; 0 if it cannot be (the wait then keeps its
// own, host, time-out).
std::uint64_t arm_timeout(std::uint64_t ns) {
    if (t_timer_fd < 0) t_timer_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (t_timer_fd < 0) return 0;
    Call c(Op::ArmTimer);
    c.in().put(static_cast<std::int32_t>(t_timer_fd));
    c.in().put(ns);
    if (!c.run()) return 0;
    return c.out().get<std::uint64_t>();
}

// After the wait: true if the time-out passed (and the eventfd is drained).
bool end_timeout(std::uint64_t id) {
    std::uint64_t v = 0;
    using ReadFn = ssize_t (*)(int, void*, size_t);
    static ReadFn real_read = reinterpret_cast<ReadFn>(dlsym(RTLD_NEXT, "read"));
    const bool fired = real_read(t_timer_fd, &v, sizeof v) == sizeof v;
    if (!fired) {
        Call c(Op::DisarmTimer);
        c.in().put(id);
        c.run();
    }
    return fired;
}

// poll's set, ready now or after a simulated time-out of ns (UINT64_MAX: none).
int poll_simulated(pollfd* fds, nfds_t n, std::uint64_t ns, const sigset_t* mask) {
    static auto real = next<int (*)(pollfd*, nfds_t, const timespec*, const sigset_t*)>("ppoll");
    const timespec zero{0, 0};
    const int now = real(fds, n, &zero, mask);
    if (now != 0 || ns == 0) return now;
    const std::uint64_t id = arm_timeout(ns);
    if (!id) {
        const timespec t{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
        return real(fds, n, &t, mask);
    }
    std::vector<pollfd> all(fds, fds + n);
    all.push_back(pollfd{t_timer_fd, POLLIN, 0});
    const int r = real(all.data(), n + 1, nullptr, mask);
    const int saved = errno;
    const bool fired = end_timeout(id);
    for (nfds_t i = 0; i < n; ++i) fds[i].revents = all[i].revents;
    errno = saved;
    if (r < 0) return r;
    (void)fired;
    return r - ((all[n].revents & POLLIN) ? 1 : 0);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int poll(pollfd* fds, nfds_t n, int timeout_ms) {
    static auto real = next<int (*)(pollfd*, nfds_t, int)>("poll");
    if (!g_channel || timeout_ms < 0) return real(fds, n, timeout_ms);
    return poll_simulated(fds, n, static_cast<std::uint64_t>(timeout_ms) * 1000000ull, nullptr);
}

__attribute__((visibility("default"))) int ppoll(pollfd* fds, nfds_t n, const timespec* timeout, const sigset_t* mask) {
    static auto real = next<int (*)(pollfd*, nfds_t, const timespec*, const sigset_t*)>("ppoll");
    if (!g_channel || !timeout) return real(fds, n, timeout, mask);
    return poll_simulated(fds, n,
                          static_cast<std::uint64_t>(timeout->tv_sec) * 1000000000ull +
                              static_cast<std::uint64_t>(timeout->tv_nsec),
                          mask);
}

__attribute__((visibility("default"))) int select(int nfds, fd_set* r, fd_set* w, fd_set* e, timeval* timeout) {
    static auto real = next<int (*)(int, fd_set*, fd_set*, fd_set*, timeval*)>("select");
    if (!g_channel || !timeout) return real(nfds, r, w, e, timeout);
    // As a poll of the same descriptors.
    std::vector<pollfd> fds;
    for (int fd = 0; fd < nfds; ++fd) {
        short events = 0;
        if (r && FD_ISSET(fd, r)) events |= POLLIN;
        if (w && FD_ISSET(fd, w)) events |= POLLOUT;
        if (e && FD_ISSET(fd, e)) events |= POLLPRI;
        if (events) fds.push_back(pollfd{fd, events, 0});
    }
    const std::uint64_t ns = static_cast<std::uint64_t>(timeout->tv_sec) * 1000000000ull +
                             static_cast<std::uint64_t>(timeout->tv_usec) * 1000ull;
    const int n = poll_simulated(fds.data(), fds.size(), ns, nullptr);
    if (n < 0) return n;
    if (r) FD_ZERO(r);
    if (w) FD_ZERO(w);
    if (e) FD_ZERO(e);
    int count = 0;
    for (const pollfd& p : fds) {
        if (r && (p.revents & (POLLIN | POLLHUP | POLLERR))) { FD_SET(p.fd, r); ++count; }
        if (w && (p.revents & (POLLOUT | POLLERR))) { FD_SET(p.fd, w); ++count; }
        if (e && (p.revents & POLLPRI)) { FD_SET(p.fd, e); ++count; }
    }
    if (n == 0) timeout->tv_sec = timeout->tv_usec = 0;
    return count;
}

__attribute__((visibility("default"))) int epoll_wait(int epfd, epoll_event* events, int max, int timeout_ms) {
    static auto real = next<int (*)(int, epoll_event*, int, int)>("epoll_wait");
    if (!g_channel || timeout_ms <= 0) return real(epfd, events, max, timeout_ms);
    const int now = real(epfd, events, max, 0);
    if (now != 0) return now;
    const std::uint64_t id = arm_timeout(static_cast<std::uint64_t>(timeout_ms) * 1000000ull);
    if (!id) return real(epfd, events, max, timeout_ms);
    // The epoll set itself is one descriptor of a poll with the eventfd.
    pollfd both[2] = {{epfd, POLLIN, 0}, {t_timer_fd, POLLIN, 0}};
    static auto real_ppoll = next<int (*)(pollfd*, nfds_t, const timespec*, const sigset_t*)>("ppoll");
    const int r = real_ppoll(both, 2, nullptr, nullptr);
    const int saved = errno;
    end_timeout(id);
    errno = saved;
    if (r < 0) return r;
    return (both[0].revents & POLLIN) ? real(epfd, events, max, 0) : 0;
}

// ---- Timed waits on condition variables and semaphores ----------------------
//
// pthread_cond_timedwait, pthread_cond_clockwait, sem_timedwait and
// sem_clockwait take a deadline on the program's (simulated) clock. Each
// waits without a time-out of its own, and the simulator arms a timer in
// simulated time that writes the eventfd of a waker thread of the client's;
// the waker then wakes every waiter whose deadline has passed: a condition
// variable by a broadcast (a spurious wake-up for its other waiters, which
// POSIX allows), a semaphore waiter by a signal, which ends sem_wait with
// EINTR.

namespace {

struct TimedWaiter {
    pthread_cond_t* cond = nullptr;  // null: a semaphore waiter
    pid_t tid = 0;
    std::uint64_t deadline_ps = 0;
    bool fired = false;
};

std::mutex g_waiters_lock;
std::vector<TimedWaiter*> g_waiters;
int g_waker_fd = -1;

int wake_signal() { return SIGRTMAX - 3; }

void* waker(void*) {
    static auto real_read = next<ssize_t (*)(int, void*, size_t)>("read");
    for (;;) {
        std::uint64_t v = 0;
        if (real_read(g_waker_fd, &v, sizeof v) != sizeof v && errno != EINTR) return nullptr;
        const std::uint64_t now = g_channel->now_ps.load(std::memory_order_acquire);
        const std::lock_guard<std::mutex> hold(g_waiters_lock);
        for (TimedWaiter* w : g_waiters) {
            if (w->fired || now < w->deadline_ps) continue;
            w->fired = true;
            if (w->cond) pthread_cond_broadcast(w->cond);
            else syscall(SYS_tgkill, getpid(), w->tid, wake_signal());
        }
    }
}

void on_wake(int) {}

// The waker thread and the wake signal's handler, once per process (a
// child of fork starts its own).
bool start_waker() {
    static std::mutex lock;
    static pid_t started_in = 0;
    const std::lock_guard<std::mutex> hold(lock);
    if (started_in == getpid()) return true;
    struct sigaction sa {};
    sa.sa_handler = on_wake;  // no SA_RESTART: sem_wait ends with EINTR
    sigemptyset(&sa.sa_mask);
    if (sigaction(wake_signal(), &sa, nullptr) != 0) return false;
    if (g_waker_fd >= 0) close(g_waker_fd);
    g_waker_fd = eventfd(0, EFD_CLOEXEC);
    if (g_waker_fd < 0) return false;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t t;
    const bool ok = pthread_create(&t, &attr, waker, nullptr) == 0;
    pthread_attr_destroy(&attr);
    if (ok) started_in = getpid();
    return ok;
}

std::uint64_t timespec_ns(const timespec& t) {
    return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(t.tv_nsec);
}

// A timed wait about to start: its deadline on clk, in nanoseconds from
// now on this thread's clock; 0 when it has passed. Costs a clock read.
std::uint64_t ns_until(clockid_t clk, const timespec* abstime) {
    timespec now{};
    clock_gettime(clk, &now);
    const std::uint64_t at = timespec_ns(*abstime), n = timespec_ns(now);
    return at > n ? at - n : 0;
}

bool simulated_clock(clockid_t clk) { return clk == CLOCK_REALTIME || clk == CLOCK_MONOTONIC; }

// Registers w (deadline ns from now) and arms its timer; false if it cannot
// be (the wait then keeps its own, host, time-out).
bool arm_waiter(TimedWaiter& w, std::uint64_t ns, std::uint64_t& id) {
    if (!start_waker()) return false;
    w.tid = my_tid();
    w.deadline_ps = g_channel->now_ps.load(std::memory_order_acquire) + t_debt_ps + ns * 1000;
    {
        const std::lock_guard<std::mutex> hold(g_waiters_lock);
        g_waiters.push_back(&w);
    }
    Call c(Op::ArmTimer);
    c.in().put(static_cast<std::int32_t>(g_waker_fd));
    c.in().put(ns);
    id = c.run() ? c.out().get<std::uint64_t>() : 0;
    if (!id) {
        const std::lock_guard<std::mutex> hold(g_waiters_lock);
        g_waiters.erase(std::find(g_waiters.begin(), g_waiters.end(), &w));
    }
    return id != 0;
}

// After the wait: true if the deadline passed.
bool disarm_waiter(TimedWaiter& w, std::uint64_t id) {
    bool fired = false;
    {
        const std::lock_guard<std::mutex> hold(g_waiters_lock);
        g_waiters.erase(std::find(g_waiters.begin(), g_waiters.end(), &w));
        fired = w.fired;
    }
    if (!fired) {
        Call c(Op::DisarmTimer);
        c.in().put(id);
        c.run();
    }
    return fired;
}

// glibc keeps a condition variable's clock in bit 1 of __wrefs
// (pthread_condattr_setclock: CLOCK_MONOTONIC).
clockid_t cond_clock(const pthread_cond_t* c) { return (c->__data.__wrefs & 2) ? CLOCK_MONOTONIC : CLOCK_REALTIME; }

int cond_wait_until(pthread_cond_t* c, pthread_mutex_t* m, clockid_t clk, const timespec* abstime) {
    static auto real_wait = reinterpret_cast<int (*)(pthread_cond_t*, pthread_mutex_t*)>(
        dlvsym(RTLD_NEXT, "pthread_cond_wait", "GLIBC_2.3.2"));
    static auto real_clockwait = next<int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const timespec*)>(
        "pthread_cond_clockwait");
    if (!abstime || abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L) return EINVAL;
    const std::uint64_t ns = ns_until(clk, abstime);
    if (ns == 0) return ETIMEDOUT;
    TimedWaiter w;
    w.cond = c;
    std::uint64_t id = 0;
    if (!arm_waiter(w, ns, id)) {
        // Host time: the deadline from now on the host's clock.
        timespec host{};
        static auto real_gettime = next<int (*)(clockid_t, timespec*)>("clock_gettime");
        real_gettime(CLOCK_MONOTONIC, &host);
        const std::uint64_t at = timespec_ns(host) + ns;
        const timespec t{static_cast<time_t>(at / 1000000000ull), static_cast<long>(at % 1000000000ull)};
        return real_clockwait(c, m, CLOCK_MONOTONIC, &t);
    }
    const int r = real_wait(c, m);
    return disarm_waiter(w, id) ? ETIMEDOUT : r;
}

int sem_wait_until(sem_t* s, clockid_t clk, const timespec* abstime) {
    static auto real_wait = next<int (*)(sem_t*)>("sem_wait");
    static auto real_clockwait = next<int (*)(sem_t*, clockid_t, const timespec*)>("sem_clockwait");
    if (sem_trywait(s) == 0) return 0;
    if (!abstime || abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L) {
        errno = EINVAL;
        return -1;
    }
    const std::uint64_t ns = ns_until(clk, abstime);
    if (ns == 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    TimedWaiter w;
    std::uint64_t id = 0;
    if (!arm_waiter(w, ns, id)) {
        timespec host{};
        static auto real_gettime = next<int (*)(clockid_t, timespec*)>("clock_gettime");
        real_gettime(CLOCK_MONOTONIC, &host);
        const std::uint64_t at = timespec_ns(host) + ns;
        const timespec t{static_cast<time_t>(at / 1000000000ull), static_cast<long>(at % 1000000000ull)};
        return real_clockwait(s, CLOCK_MONOTONIC, &t);
    }
    const int r = real_wait(s);
    const int saved = errno;
    const bool fired = disarm_waiter(w, id);
    if (r != 0 && fired) {
        errno = ETIMEDOUT;
        return -1;
    }
    errno = saved;
    return r;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m,
                                                                 const timespec* abstime) {
    static auto real = reinterpret_cast<int (*)(pthread_cond_t*, pthread_mutex_t*, const timespec*)>(
        dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2"));
    if (!g_channel) return real(c, m, abstime);
    return cond_wait_until(c, m, cond_clock(c), abstime);
}

__attribute__((visibility("default"))) int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m, clockid_t clk,
                                                                 const timespec* abstime) {
    static auto real = next<int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const timespec*)>(
        "pthread_cond_clockwait");
    if (!g_channel || !simulated_clock(clk)) return real(c, m, clk, abstime);
    return cond_wait_until(c, m, clk, abstime);
}

__attribute__((visibility("default"))) int sem_timedwait(sem_t* s, const timespec* abstime) {
    static auto real = next<int (*)(sem_t*, const timespec*)>("sem_timedwait");
    if (!g_channel) return real(s, abstime);
    return sem_wait_until(s, CLOCK_REALTIME, abstime);
}

__attribute__((visibility("default"))) int sem_clockwait(sem_t* s, clockid_t clk, const timespec* abstime) {
    static auto real = next<int (*)(sem_t*, clockid_t, const timespec*)>("sem_clockwait");
    if (!g_channel || !simulated_clock(clk)) return real(s, clk, abstime);
    return sem_wait_until(s, clk, abstime);
}

}  // extern "C"

// ---- Out-of-band sockets ----------------------------------------------------
//
// Programs exchange QP numbers, LIDs and keys over TCP. All of them run on
// this machine, so a connection to a simulated host (its IPoIB address or
// name) goes to the loopback address, where its program listens. Each node
// has ports of its own: a TCP socket bound to a port is bound to a port the
// host picks, and the simulator maps (node, port) to it, so two nodes may
// listen on one port and no run meets another's programs. A connect waits in
// simulated time until some program listens on the port, as if the servers
// had been started first.

namespace {

// The programs' TCP connections carry small messages both ways (perftest's
// and the utilities' exchanges): Nagle's algorithm would hold one back until
// the peer's delayed acknowledgement, a host-time timer of up to 40 ms, while
// both programs look blocked. Sent at once, a message reaches its reader
// before simulated time moves on.
void no_delay(int fd) {
    const int saved = errno;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    errno = saved;
}

std::uint32_t prefix_mask() {
    const std::uint32_t len = g_channel->ip_prefix_len;
    return len == 0 ? 0 : ~std::uint32_t{0} << (32 - len);
}

bool simulated_host(std::uint32_t ip) {
    return (ip & prefix_mask()) == (g_channel->ip_network & prefix_mask());
}

// The port each of the program's TCP sockets asked for, by descriptor.
std::mutex g_ports_lock;
std::map<int, std::uint16_t> g_asked_port;

bool stream_socket(int fd) {
    int type = 0;
    socklen_t tl = sizeof type;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM;
}

std::uint16_t* port_field(sockaddr* a) {
    if (a->sa_family == AF_INET) return &reinterpret_cast<sockaddr_in*>(a)->sin_port;
    if (a->sa_family == AF_INET6) return &reinterpret_cast<sockaddr_in6*>(a)->sin6_port;
    return nullptr;
}

}  // namespace

__attribute__((visibility("default"))) int bind(int fd, const sockaddr* addr, socklen_t len) {
    using Fn = int (*)(int, const sockaddr*, socklen_t);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "bind"));
    if (!g_channel || !addr || len > sizeof(sockaddr_storage) || !stream_socket(fd)) return real(fd, addr, len);
    sockaddr_storage ss{};
    std::memcpy(&ss, addr, len);
    std::uint16_t* port = port_field(reinterpret_cast<sockaddr*>(&ss));
    if (!port || *port == 0) return real(fd, addr, len);
    const std::uint16_t asked = ntohs(*port);
    *port = 0;
    const int r = real(fd, reinterpret_cast<sockaddr*>(&ss), len);
    if (r == 0) {
        std::lock_guard<std::mutex> g(g_ports_lock);
        g_asked_port[fd] = asked;
    }
    return r;
}

// The port the program asked for, not the one the host gave.
__attribute__((visibility("default"))) int getsockname(int fd, sockaddr* addr, socklen_t* len) {
    using Fn = int (*)(int, sockaddr*, socklen_t*);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "getsockname"));
    const int r = real(fd, addr, len);
    if (r != 0 || !g_channel || !addr || !len) return r;
    std::lock_guard<std::mutex> g(g_ports_lock);
    const auto at = g_asked_port.find(fd);
    if (at == g_asked_port.end()) return r;
    if ((addr->sa_family == AF_INET && *len >= sizeof(sockaddr_in)) ||
        (addr->sa_family == AF_INET6 && *len >= sizeof(sockaddr_in6)))
        *port_field(addr) = htons(at->second);
    return r;
}

// Writes and sends are counted: what a program writes to another's socket
// passes through the host's network stack, which the simulator lets drain
// before it takes both to be waiting.
__attribute__((visibility("default"))) ssize_t write(int fd, const void* buf, size_t n) {
    static auto real = next<ssize_t (*)(int, const void*, size_t)>("write");
    if (g_channel) g_channel->writes.fetch_add(1, std::memory_order_release);
    return real(fd, buf, n);
}

__attribute__((visibility("default"))) ssize_t writev(int fd, const struct iovec* iov, int count) {
    static auto real = next<ssize_t (*)(int, const struct iovec*, int)>("writev");
    if (g_channel) g_channel->writes.fetch_add(1, std::memory_order_release);
    return real(fd, iov, count);
}

__attribute__((visibility("default"))) ssize_t send(int fd, const void* buf, size_t n, int flags) {
    static auto real = next<ssize_t (*)(int, const void*, size_t, int)>("send");
    if (g_channel) g_channel->writes.fetch_add(1, std::memory_order_release);
    return real(fd, buf, n, flags);
}

__attribute__((visibility("default"))) ssize_t sendto(int fd, const void* buf, size_t n, int flags,
                                                     const sockaddr* to, socklen_t to_len) {
    static auto real = next<ssize_t (*)(int, const void*, size_t, int, const sockaddr*, socklen_t)>("sendto");
    if (g_channel) g_channel->writes.fetch_add(1, std::memory_order_release);
    return real(fd, buf, n, flags, to, to_len);
}

__attribute__((visibility("default"))) ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
    static auto real = next<ssize_t (*)(int, const struct msghdr*, int)>("sendmsg");
    if (g_channel) g_channel->writes.fetch_add(1, std::memory_order_release);
    return real(fd, msg, flags);
}

__attribute__((visibility("default"))) int close(int fd) {
    using Fn = int (*)(int);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "close"));
    if (g_channel) {
        std::lock_guard<std::mutex> g(g_ports_lock);
        g_asked_port.erase(fd);
    }
    return real(fd);
}

__attribute__((visibility("default"))) int listen(int fd, int backlog) {
    using Fn = int (*)(int, int);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "listen"));
    const int r = real(fd, backlog);
    if (r != 0 || !g_channel) return r;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    using NameFn = int (*)(int, sockaddr*, socklen_t*);
    static NameFn real_name = reinterpret_cast<NameFn>(dlsym(RTLD_NEXT, "getsockname"));
    if (real_name(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return r;
    const std::uint16_t* port = port_field(reinterpret_cast<sockaddr*>(&ss));
    if (!port) return r;
    const std::uint16_t given = ntohs(*port);
    std::uint16_t asked = given;
    {
        std::lock_guard<std::mutex> g(g_ports_lock);
        const auto at = g_asked_port.find(fd);
        if (at != g_asked_port.end()) asked = at->second;
    }
    const int saved = errno;
    Call c(Op::Listen);
    c.in().put(asked);
    c.in().put(given);
    c.run();
    errno = saved;
    return r;
}

__attribute__((visibility("default"))) int connect(int fd, const sockaddr* addr, socklen_t len) {
    using Fn = int (*)(int, const sockaddr*, socklen_t);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "connect"));
    if (!g_channel || !addr || !stream_socket(fd)) return real(fd, addr, len);
    sockaddr_storage target{};
    std::int32_t node = -1;  // loopback: the program's own node, or whichever listens
    if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
        sockaddr_in v4{};
        std::memcpy(&v4, addr, sizeof v4);
        const std::uint32_t ip = ntohl(v4.sin_addr.s_addr);
        const bool loopback = (ip >> 24) == 127;
        if (!loopback && !simulated_host(ip)) return real(fd, addr, len);
        if (!loopback) {
            node = static_cast<std::int32_t>((ip & ~prefix_mask()) - 1);
            v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        }
        std::memcpy(&target, &v4, sizeof v4);
        len = sizeof v4;
    } else if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
        sockaddr_in6 v6{};
        std::memcpy(&v6, addr, sizeof v6);
        const bool mapped_loopback = IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr) && v6.sin6_addr.s6_addr[12] == 127;
        if (!IN6_IS_ADDR_LOOPBACK(&v6.sin6_addr) && !mapped_loopback) return real(fd, addr, len);
        std::memcpy(&target, &v6, sizeof v6);
        len = sizeof v6;
    } else {
        return real(fd, addr, len);
    }
    std::uint16_t* port = port_field(reinterpret_cast<sockaddr*>(&target));
    Call c(Op::AwaitListener);
    c.in().put(ntohs(*port));
    c.in().put(node);
    if (c.run()) {
        const int st = c.out().get<std::int32_t>();
        const std::uint16_t given = c.out().get<std::uint16_t>();
        if (st) {
            errno = st;
            return -1;
        }
        *port = htons(given);
    }
    no_delay(fd);
    return real(fd, reinterpret_cast<sockaddr*>(&target), len);
}

__attribute__((visibility("default"))) int accept(int fd, sockaddr* addr, socklen_t* len) {
    static auto real = next<int (*)(int, sockaddr*, socklen_t*)>("accept");
    const int r = real(fd, addr, len);
    if (r >= 0 && g_channel) no_delay(r);
    return r;
}

__attribute__((visibility("default"))) int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
    static auto real = next<int (*)(int, sockaddr*, socklen_t*, int)>("accept4");
    const int r = real(fd, addr, len, flags);
    if (r >= 0 && g_channel) no_delay(r);
    return r;
}

// Host names of the simulated hosts resolve to their IPoIB addresses.
__attribute__((visibility("default"))) int getaddrinfo(const char* node, const char* service, const addrinfo* hints,
                                                      addrinfo** res) {
    using Fn = int (*)(const char*, const char*, const addrinfo*, addrinfo**);
    static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "getaddrinfo"));
    if (g_channel && node) {
        for (std::uint32_t i = 0; i < g_channel->host_count; ++i) {
            if (std::strcmp(node, g_channel->hosts[i].name) != 0) continue;
            char text[INET_ADDRSTRLEN];
            const in_addr a{htonl(g_channel->hosts[i].ip)};
            inet_ntop(AF_INET, &a, text, sizeof text);
            addrinfo h{};
            if (hints) h = *hints;
            if (h.ai_family == AF_UNSPEC) h.ai_family = AF_INET;
            h.ai_flags |= AI_NUMERICHOST;
            h.ai_flags &= ~AI_CANONNAME;
            return real(text, service, &h, res);
        }
    }
    return real(node, service, hints, res);
}

}  // extern "C"
