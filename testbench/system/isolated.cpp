#include "testbench/system/isolated.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>

namespace hcasim::testbench {

IsolatedResult run_isolated(const std::function<void(std::ostream&)>& fn) {
    IsolatedResult r;
    int out[2];
    if (pipe(out) != 0) {
        r.error = std::string("pipe: ") + std::strerror(errno);
        return r;
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
        r.error = std::string("fork: ") + std::strerror(errno);
        return r;
    }
    if (pid == 0) {
        close(out[0]);
        std::ostringstream os;
        int code = 0;
        try {
            fn(os);
        } catch (const std::exception& e) {
            os << "\n\x01" << e.what();
            code = 3;
        }
        const std::string s = os.str();
        std::size_t off = 0;
        while (off < s.size()) {
            const ssize_t n = write(out[1], s.data() + off, s.size() - off);
            if (n <= 0) break;
            off += static_cast<std::size_t>(n);
        }
        close(out[1]);
        std::fflush(nullptr);
        _exit(code);
    }
    close(out[1]);
    char buf[65536];
    for (;;) {
        const ssize_t n = read(out[0], buf, sizeof buf);
        if (n <= 0) break;
        r.output.append(buf, static_cast<std::size_t>(n));
    }
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const auto mark = r.output.find('\x01');
    if (mark != std::string::npos) {
        r.error = r.output.substr(mark + 1);
        r.output.resize(mark > 0 ? mark - 1 : 0);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        r.ok = true;
    } else if (r.error.empty()) {
        r.error = WIFSIGNALED(status) ? "child killed by signal " + std::to_string(WTERMSIG(status))
                                      : "child exited with " + std::to_string(WEXITSTATUS(status));
    }
    return r;
}

}  // namespace hcasim::testbench
