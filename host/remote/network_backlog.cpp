#include "host/remote/network_backlog.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace hcasim::remote {

NetworkBacklog::NetworkBacklog() {
    DIR* d = opendir("/proc");
    if (!d) return;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        const std::string dir = std::string("/proc/") + e->d_name;
        char comm[32] = {};
        const int fd = ::open((dir + "/comm").c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        const ssize_t n = ::read(fd, comm, sizeof comm - 1);
        ::close(fd);
        if (n <= 0 || std::strncmp(comm, "ksoftirqd/", 10) != 0) continue;
        const int stat = ::open((dir + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
        if (stat >= 0) m_stat_fds.push_back(stat);
    }
    closedir(d);
}

NetworkBacklog::~NetworkBacklog() {
    for (int fd : m_stat_fds) ::close(fd);
}

bool NetworkBacklog::drained() {
    const auto now = std::chrono::steady_clock::now();
    if (!m_asked) {
        m_asked = true;
        m_first_ask = now;
    }
    if (m_stat_fds.empty()) return now - m_first_ask >= std::chrono::milliseconds(1);
    for (int fd : m_stat_fds) {
        char buf[256];
        const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
        if (n <= 0) continue;
        buf[n] = '\0';
        // "pid (ksoftirqd/N) S ...": the state follows the name.
        const char* close = std::strrchr(buf, ')');
        if (close && close[1] == ' ' && close[2] == 'R') return false;
    }
    return true;
}

}  // namespace hcasim::remote
