// timed_waits: the kernel waits with a time-out a program makes (poll,
// select, epoll_wait) on a pipe nobody writes, then one that is ready, for
// the tests to check that `hcasim run` ends each time-out in simulated time.
// Prints how long each took by CLOCK_MONOTONIC, in ms.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

namespace {
double now_ms() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}
}  // namespace

int main() {
    int p[2];
    if (pipe(p) != 0) return 2;
    pollfd f{p[0], POLLIN, 0};
    const double t0 = now_ms();
    const int polled = poll(&f, 1, 250);
    const double t1 = now_ms();
    fd_set readable;
    FD_ZERO(&readable);
    FD_SET(p[0], &readable);
    timeval tv{0, 120000};
    const int selected = select(p[0] + 1, &readable, nullptr, nullptr, &tv);
    const double t2 = now_ms();
    const int ep = epoll_create1(0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
    epoll_event got{};
    const int waited = epoll_wait(ep, &got, 1, 75);
    const double t3 = now_ms();
    if (write(p[1], "x", 1) != 1) return 2;
    const int ready = poll(&f, 1, 1000);
    const double t4 = now_ms();
    std::printf("poll %d %.3f ms\nselect %d %.3f ms\nepoll_wait %d %.3f ms\nready poll %d %.3f ms\n", polled, t1 - t0,
                selected, t2 - t1, waited, t3 - t2, ready, t4 - t3);
    return 0;
}
