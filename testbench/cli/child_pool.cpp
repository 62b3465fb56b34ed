#include "testbench/cli/child_pool.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace hcasim::cli {

bool ChildOutcome::succeeded() const { return started && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

std::string ChildOutcome::how_it_ended() const {
    if (!started) return "could not start: " + err;
    if (WIFEXITED(wait_status)) return "exit status " + std::to_string(WEXITSTATUS(wait_status));
    if (WIFSIGNALED(wait_status)) {
        const int sig = WTERMSIG(wait_status);
        const char* name = strsignal(sig);
        return "killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : std::string());
    }
    return "wait status " + std::to_string(wait_status);
}

namespace {

using Clock = std::chrono::steady_clock;

struct Running {
    pid_t pid = -1;
    int out_fd = -1;  // -1 once at end of file
    int err_fd = -1;
    std::size_t index = 0;
    bool killed = false;
    Clock::time_point start;
    ChildOutcome outcome;
};

void close_pipe(int fds[2]) {
    for (int i = 0; i < 2; ++i)
        if (fds[i] >= 0) close(fds[i]);
}

// Starts one child with its standard output and error on pipes of its own.
// On failure, r.outcome says why and r.pid stays -1.
Running spawn(const std::string& program, const std::vector<std::string>& argv, std::size_t index) {
    Running r;
    r.index = index;
    r.start = Clock::now();
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    // Close-on-exec: no child keeps another child's pipe open.
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        r.outcome.err = std::string("pipe: ") + std::strerror(errno);
        close_pipe(out);
        close_pipe(err);
        return r;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    // A launcher may have the parent ignore or block signals the child
    // should die of.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = posix_spawn(&r.pid, program.c_str(), &actions, &attr, args.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    close(err[1]);
    if (rc != 0) {
        r.pid = -1;
        r.outcome.err = program + ": " + std::strerror(rc);
        close(out[0]);
        close(err[0]);
        return r;
    }
    r.outcome.started = true;
    r.out_fd = out[0];
    r.err_fd = err[0];
    return r;
}

// Reads what is there; closes the descriptor at end of file.
void drain(int& fd, std::string& into) {
    char buf[65536];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
        into.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
        close(fd);
        fd = -1;
    }
}

void reap(Running& r) {
    int status = 0;
    while (waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.outcome.wait_status = status;
    r.outcome.wall_seconds = std::chrono::duration<double>(Clock::now() - r.start).count();
}

}  // namespace

ChildPool::ChildPool(std::string program, int jobs) : m_program(std::move(program)), m_jobs(jobs < 1 ? 1 : jobs) {}

void ChildPool::run(const std::vector<std::vector<std::string>>& argvs, const Done& done, const Tick& tick) {
    std::vector<Running> running;
    std::size_t next = 0;
    bool stopping = false;
    Clock::time_point last_tick = Clock::now();
    while (!running.empty() || (!stopping && next < argvs.size())) {
        while (!stopping && static_cast<int>(running.size()) < m_jobs && next < argvs.size()) {
            Running r = spawn(m_program, argvs[next], next);
            ++next;
            if (r.pid >= 0) {
                running.push_back(std::move(r));
            } else if (!done(r.index, std::move(r.outcome))) {
                stopping = true;
            }
        }
        if (stopping)
            for (auto& r : running)
                if (!r.killed) r.killed = kill(r.pid, SIGTERM) == 0;
        if (running.empty()) continue;

        std::vector<pollfd> fds;
        for (const auto& r : running)
            for (int fd : {r.out_fd, r.err_fd})
                if (fd >= 0) fds.push_back(pollfd{fd, POLLIN, 0});
        if (!fds.empty() && poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR)
            throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
        std::size_t k = 0;
        for (auto& r : running) {
            if (r.out_fd >= 0 && fds[k++].revents) drain(r.out_fd, r.outcome.out);
            if (r.err_fd >= 0 && fds[k++].revents) drain(r.err_fd, r.outcome.err);
        }
        // A child whose pipes are both closed has ended (or is ending).
        for (std::size_t i = 0; i < running.size();) {
            Running& r = running[i];
            if (r.out_fd >= 0 || r.err_fd >= 0) {
                ++i;
                continue;
            }
            reap(r);
            Running ended = std::move(r);
            running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
            // Children killed because the run stopped are not reported.
            if (!stopping && !done(ended.index, std::move(ended.outcome))) stopping = true;
        }
        if (tick && Clock::now() - last_tick >= std::chrono::seconds(1)) {
            last_tick = Clock::now();
            tick();
        }
    }
}

}  // namespace hcasim::cli
