// fork_after_reg: registers a buffer, forks, and checks that parent and
// child each keep their own copy of the registered pages, as on a kernel
// that copies pinned pages for the child: the child finds the parent's
// bytes and writes its own, and the parent still finds its bytes after.
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

int main() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n < 1) return 2;
    ibv_context* ctx = ibv_open_device(list[0]);
    ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
    if (!pd) return 2;
    const size_t bytes = 65536;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 2;
    auto* buf = static_cast<unsigned char*>(p);
    std::memset(buf, 0xaa, bytes);
    ibv_mr* mr = ibv_reg_mr(pd, buf, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!mr) return 2;
    const pid_t child = fork();
    if (child == 0) {
        for (size_t i = 0; i < bytes; ++i)
            if (buf[i] != 0xaa) _exit(3);
        std::memset(buf, 0x55, bytes);
        _exit(0);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child) return 2;
    size_t changed = 0;
    for (size_t i = 0; i < bytes; ++i) changed += buf[i] != 0xaa;
    std::printf("child exit %d, parent bytes changed by the child %zu\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                changed);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && changed == 0 ? 0 : 1;
}
