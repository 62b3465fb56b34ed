// The calls a program's libraries forward to the simulator, and how their
// arguments and results are laid out in a slot: plain values appended one
// after the other (both sides are the same machine and compiler), objects
// named by the handle the simulator gave them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace hcasim::remote {

enum class Op : std::uint32_t {
    Hello = 1,       // first call of a process: its pid
    Exit,            // the process is exiting (its last call)
    Sleep,           // sleep/nanosleep in simulated time
    Listen,          // a TCP socket listens on a port (out-of-band exchanges)
    AwaitListener,   // a TCP connect waits until some program listens on the port
    GetDeviceList,
    OpenDevice,
    CloseDevice,
    QueryDevice,
    QueryDeviceEx,
    QueryPort,
    QueryGid,
    QueryPkey,
    AllocPd,
    DeallocPd,
    RegMr,
    DeregMr,
    CreateCompChannel,
    DestroyCompChannel,
    CreateCq,
    DestroyCq,
    ResizeCq,
    PollCq,
    ReqNotifyCq,
    GetCqEvent,
    AckCqEvents,
    ModifyQp,
    QueryQp,
    DestroyQp,
    PostSend,
    PostRecv,
    PostSrqRecv,
    ModifySrq,
    QuerySrq,
    DestroySrq,
    CreateAh,
    DestroyAh,
    GetAsyncEvent,
    AckAsyncEvent,
    AttachMcast,
    DetachMcast,
    Adopt,           // the program mirrors an object rdma_cm made (its handle, its own pointer, an fd)
    // rdma_cm (librdmacm.so.1)
    CmCreateChannel,
    CmDestroyChannel,
    CmCreateId,
    CmDestroyId,
    CmMigrateId,
    CmSetOption,
    CmBindAddr,
    CmResolveAddr,
    CmResolveRoute,
    CmListen,
    CmConnect,
    CmAccept,
    CmReject,
    CmNotify,
    CmDisconnect,
    CmEstablish,
    CmCreateQp,
    CmDestroyQp,
    CmGetEvent,
    CmAckEvent,
    CmJoinMulticast,
    CmLeaveMulticast,
    CmGetRequest,
    CmGetAddrinfo,
    CmCreateEp,
    CmDestroyEp,
    CmId,            // an id's state again (after the program touched its QP itself)
    // XRC (libibverbs.so.1's extended context ops, librdmacm.so.1's SRQs)
    OpenXrcd,
    CloseXrcd,
    CreateSrqEx,
    CreateQpEx,
    CmCreateSrq,
    CmDestroySrq,
    // A kernel wait with a time-out (poll, select, epoll_wait): the
    // simulator makes the program's eventfd readable when the time-out has
    // passed in simulated time.
    ArmTimer,
    DisarmTimer,
    Count
};

// What an Adopt call mirrors.
enum class AdoptKind : std::uint32_t { Context = 1, Pd, Channel, Cq, Qp, Srq };

// Appends values to a slot's data.
class Writer {
public:
    Writer(std::uint8_t* base, std::size_t cap) : m_base(base), m_cap(cap) {}
    template <typename T>
    void put(const T& v) { bytes(&v, sizeof v); }
    void bytes(const void* p, std::size_t n) {
        if (m_len + n > m_cap) {
            m_overflow = true;
            return;
        }
        if (n) std::memcpy(m_base + m_len, p, n);
        m_len += n;
    }
    std::size_t length() const { return m_len; }
    bool overflow() const { return m_overflow; }

private:
    std::uint8_t* m_base;
    std::size_t m_cap;
    std::size_t m_len = 0;
    bool m_overflow = false;
};

// Takes values back out; reading past the end gives zeroes and marks the
// reader bad, so a malformed call is refused, never read out of bounds.
class Reader {
public:
    Reader(const std::uint8_t* base, std::size_t len) : m_base(base), m_len(len) {}
    template <typename T>
    T get() {
        T v{};
        bytes(&v, sizeof v);
        return v;
    }
    void bytes(void* p, std::size_t n) {
        if (m_pos + n > m_len) {
            m_bad = true;
            std::memset(p, 0, n);
            return;
        }
        if (n) std::memcpy(p, m_base + m_pos, n);
        m_pos += n;
    }
    // n bytes in place (null when they are not all there).
    const std::uint8_t* view(std::size_t n) {
        if (m_pos + n > m_len) {
            m_bad = true;
            return nullptr;
        }
        const std::uint8_t* p = m_base + m_pos;
        m_pos += n;
        return p;
    }
    bool bad() const { return m_bad; }

private:
    const std::uint8_t* m_base;
    std::size_t m_len;
    std::size_t m_pos = 0;
    bool m_bad = false;
};

}  // namespace hcasim::remote
