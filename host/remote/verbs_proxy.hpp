// The simulator's end of a program's libibverbs: carries out each call the
// program's drop-in libibverbs.so.1 forwards, through the same verbs
// personality and driver core that in-process programs call, in the calling
// slot's SystemC thread (bound to the node's driver and to the program's
// address space, so the adapter's DMA reaches the program's own buffers).
//
// The program names objects by the handles this gave it; a handle it was
// not given, or one of the wrong kind, is refused with EINVAL, never
// followed. When the program ends, what it left is released as the kernel
// driver releases a closed uverbs file.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <systemc>

#include "host/remote/call_codec.hpp"
#include "host/remote/channel.hpp"

namespace hcasim::remote {

class VerbsProxy {
public:
    // pidfd: the program's pidfd (for its eventfds); touch: called when an
    // event is counted into one of them (it may wake the program).
    VerbsProxy(int pidfd, std::function<void()> touch);
    ~VerbsProxy();
    VerbsProxy(const VerbsProxy&) = delete;
    VerbsProxy& operator=(const VerbsProxy&) = delete;

    // Whether op is one of the verbs calls.
    static bool handles(Op op);
    // Carries out one call: its arguments in in, its results into out.
    void execute(Op op, Reader& in, Writer& out);
    // Releases every object the program left (it ended), in the order the
    // kernel's uverbs cleanup uses: QPs, SRQs, AHs, CQs, MRs, PDs, XRC
    // domains, channels, contexts. Consumes simulated time (driver commands).
    // Closing a device does the same for the objects left on it first.
    void release_all();

    enum class Kind { Context, Pd, Mr, Channel, Cq, Qp, Srq, Ah, Xrcd };
    // An object rdma_cm made for the program (its id's device, PD, QP, CQs,
    // channels): the program may name it, and rdma_cm, not this, frees it.
    // Returns its handle.
    std::uint64_t adopt(const void* p, Kind kind);
    // rdma_cm freed it.
    void forget(const void* p);
    // An object rdma_cm made and left (it could not destroy it): the
    // program's now, released with the rest when it ends.
    void own(const void* p);
    template <typename T>
    T* find(std::uint64_t h, Kind kind) const;

private:
    struct Object {
        Kind kind;
        std::uint64_t order;       // creation order: release goes newest first
        std::uint64_t client = 0;  // the program's own object (its address), for events
        bool borrowed = false;     // rdma_cm's
    };
    struct ChannelFd;  // a completion channel's eventfd and its watcher

    std::uint64_t add(const void* p, Kind kind, std::uint64_t client = 0);
    void remove(const void* p);
    // The verbs call fn on the object named h, and the handle goes with it: 0 or an errno.
    template <typename T>
    int destroy(std::uint64_t h, Kind kind, int (*fn)(T*));
    int take_fd(int remote_fd);
    // The program moved pages [base, base+bytes) onto the memfd remote_fd:
    // the simulator maps it too and copies DMA data directly.
    void share_pages(int remote_fd, std::uint64_t base, std::uint64_t bytes);  // the program's fd as ours (pidfd_getfd), or -1
    void watch_channel(ChannelFd& c);
    void watch_async(ibv_context* ctx, int fd);
    void stop_watchers();
    // Destroys the objects the program made and still holds on ctx (all
    // contexts when null), the contexts themselves only when ctx is null.
    void release(const ibv_context* ctx);

    int m_pidfd;
    std::function<void()> m_touch;
    void count_into(int fd, std::uint64_t n);
    std::uint64_t m_next_order = 1;
    std::map<std::uint64_t, Object> m_objects;  // by handle (the simulator's object address)
    std::map<std::uint64_t, std::unique_ptr<ChannelFd>> m_channels;
    struct AsyncFd {
        int fd;
        std::uint64_t signalled = 0;
        bool stop = false;
        sc_core::sc_event stop_event;
    };
    std::map<std::uint64_t, std::unique_ptr<AsyncFd>> m_async;  // by context handle
    std::vector<ibv_async_event> m_unacked;                     // taken, not yet acknowledged
};

template <typename T>
T* VerbsProxy::find(std::uint64_t h, Kind kind) const {
    auto it = m_objects.find(h);
    if (it == m_objects.end() || it->second.kind != kind) return nullptr;
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(h));
}

}  // namespace hcasim::remote
