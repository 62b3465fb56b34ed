// timed_waits: the kernel waits with a time-out a program makes (poll,
// select, epoll_wait) on a pipe nobody writes, then one that is ready, and
// the timed waits of condition variables and semaphores nobody signals, then
// a condition variable another thread signals before its deadline, for the
// tests to check that `hcasim run` ends each time-out in simulated time.
// Prints how long each took by CLOCK_MONOTONIC, in ms.
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
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

timespec in_ms(clockid_t clk, long ms) {
    timespec t{};
    clock_gettime(clk, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += ms % 1000 * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        ++t.tv_sec;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_signalled = PTHREAD_COND_INITIALIZER;
bool g_flag = false;

void* signal_later(void*) {
    usleep(40000);
    pthread_mutex_lock(&g_lock);
    g_flag = true;
    pthread_cond_signal(&g_signalled);
    pthread_mutex_unlock(&g_lock);
    return nullptr;
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

    // Nobody signals these: each ends at its deadline.
    pthread_cond_t realtime = PTHREAD_COND_INITIALIZER;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_t monotonic;
    pthread_cond_init(&monotonic, &attr);
    sem_t sem;
    sem_init(&sem, 0, 0);
    pthread_mutex_lock(&g_lock);
    timespec at = in_ms(CLOCK_REALTIME, 50);
    const int c1 = pthread_cond_timedwait(&realtime, &g_lock, &at);
    const double t5 = now_ms();
    at = in_ms(CLOCK_MONOTONIC, 30);
    const int c2 = pthread_cond_timedwait(&monotonic, &g_lock, &at);
    const double t6 = now_ms();
    pthread_mutex_unlock(&g_lock);
    at = in_ms(CLOCK_REALTIME, 20);
    const int s1 = sem_timedwait(&sem, &at) == 0 ? 0 : errno;
    const double t7 = now_ms();
    std::printf("cond_timedwait %s %.3f ms\ncond_timedwait monotonic %s %.3f ms\nsem_timedwait %s %.3f ms\n",
                c1 == ETIMEDOUT ? "ETIMEDOUT" : "other", t5 - t4, c2 == ETIMEDOUT ? "ETIMEDOUT" : "other",
                t6 - t5, s1 == ETIMEDOUT ? "ETIMEDOUT" : "other", t7 - t6);

    // Another thread signals at 40 ms, before the 500 ms deadline.
    pthread_t other;
    pthread_create(&other, nullptr, signal_later, nullptr);
    pthread_mutex_lock(&g_lock);
    at = in_ms(CLOCK_REALTIME, 500);
    int c3 = 0;
    while (!g_flag && c3 == 0) c3 = pthread_cond_timedwait(&g_signalled, &g_lock, &at);
    pthread_mutex_unlock(&g_lock);
    const double t8 = now_ms();
    pthread_join(other, nullptr);
    std::printf("cond_timedwait signalled %d %.3f ms\n", c3, t8 - t7);
    return 0;
}
