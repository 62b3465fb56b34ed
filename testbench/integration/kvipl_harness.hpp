// KVIPL test helpers: one VI endpoint per node (NIC, protection tag, a
// registered buffer with descriptors and data, a VI) and client/server
// connection between the two nodes, written against host/kvipl/kvipl.h.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "host/kvipl/kvipl.h"
#include "testbench/integration/harness.hpp"

namespace hcasim::test {

inline void need_kvip(KVIP_RETURN r, const std::string& what) {
    if (r != KVIP_SUCCESS) throw std::runtime_error(what + " returned " + std::to_string(static_cast<int>(r)));
}

// A net address: the node's LID (its NIC address) and a discriminator.
struct NetAddr {
    alignas(8) unsigned char bytes[sizeof(KVIP_NET_ADDRESS) + 64] = {};
    NetAddr(int node, const std::string& disc) {
        auto* a = get();
        a->HostAddressLen = 2;
        a->DiscriminatorLen = static_cast<KVIP_USHORT>(disc.size());
        const int lid = node + 1;
        a->HostAddress[0] = static_cast<KVIP_UCHAR>(lid >> 8);
        a->HostAddress[1] = static_cast<KVIP_UCHAR>(lid);
        std::memcpy(a->HostAddress + 2, disc.data(), disc.size());
    }
    KVIP_NET_ADDRESS* get() { return reinterpret_cast<KVIP_NET_ADDRESS*>(bytes); }
};

struct ViOptions {
    KVIP_RELIABILITY_LEVEL reliability = KVIP_SERVICE_RELIABLE_DELIVERY;
    KVIP_ULONG max_transfer = 1 << 20;
    std::uintptr_t qos = 0;
    bool rdma_write = true;
    bool rdma_read = true;
    bool send_cq = false, recv_cq = false;  // queues complete to one CQ
    bool wait_objects = false;              // queues without a CQ get wait objects
    std::size_t data_bytes = 1 << 20;
    std::size_t descriptors = 64;           // descriptor slots of 256 bytes
};

struct ViEnd {
    KVIP_NIC_HANDLE nic = nullptr;
    KVIP_PROTECTION_HANDLE ptag = nullptr;
    KVIP_CQ_HANDLE cq = nullptr;
    KVIP_VI_HANDLE vi = nullptr;
    KEVENT err_event{}, send_event{}, recv_event{}, cq_event{};
    std::uint8_t* desc_area = nullptr;  // 64-byte aligned slots of kSlot bytes
    std::uint8_t* data = nullptr;
    KVIP_MEM_HANDLE desc_mh = 0, data_mh = 0;
    ViOptions opt;
    static constexpr std::size_t kSlot = 256;

    explicit ViEnd(const ViOptions& o = {}) : opt(o) {
        KeInitializeEvent(&err_event, NotificationEvent, KVIP_FALSE);
        KeInitializeEvent(&send_event, NotificationEvent, KVIP_FALSE);
        KeInitializeEvent(&recv_event, NotificationEvent, KVIP_FALSE);
        KeInitializeEvent(&cq_event, NotificationEvent, KVIP_FALSE);
        need_kvip(KvipOpenNic(L"hcasim0", &err_event, &nic), "KvipOpenNic");
        need_kvip(KvipCreatePtag(nic, &ptag), "KvipCreatePtag");
        // aligned_alloc wants a whole number of alignments.
        desc_area = static_cast<std::uint8_t*>(std::aligned_alloc(4096, pages(o.descriptors * kSlot)));
        data = static_cast<std::uint8_t*>(std::aligned_alloc(4096, pages(o.data_bytes)));
        std::memset(desc_area, 0, o.descriptors * kSlot);
        std::memset(data, 0, o.data_bytes);
        KVIP_MEM_ATTRIBUTES ma{ptag, KVIP_FALSE, KVIP_FALSE};
        need_kvip(KvipRegisterMem(nic, desc_area, static_cast<KVIP_ULONG>(o.descriptors * kSlot), &ma, &desc_mh),
                  "KvipRegisterMem(descriptors)");
        ma.EnableRdmaWrite = o.rdma_write;
        ma.EnableRdmaRead = o.rdma_read;
        need_kvip(KvipRegisterMem(nic, data, static_cast<KVIP_ULONG>(o.data_bytes), &ma, &data_mh), "KvipRegisterMem(data)");
        if (o.send_cq || o.recv_cq) need_kvip(KvipCreateCQ(nic, 256, &cq_event, &cq), "KvipCreateCQ");
        KVIP_VI_ATTRIBUTES va = attributes();
        need_kvip(KvipCreateVi(nic, &va, o.send_cq ? cq : nullptr, o.recv_cq ? cq : nullptr,
                               (o.wait_objects && !o.send_cq) ? &send_event : nullptr,
                               (o.wait_objects && !o.recv_cq) ? &recv_event : nullptr, &vi),
                  "KvipCreateVi");
    }
    ~ViEnd() {
        if (nic) KvipCloseNic(nic);
        std::free(desc_area);
        std::free(data);
    }
    static std::size_t pages(std::size_t bytes) { return (bytes + 4095) / 4096 * 4096; }
    ViEnd(const ViEnd&) = delete;
    ViEnd& operator=(const ViEnd&) = delete;

    KVIP_VI_ATTRIBUTES attributes() const {
        KVIP_VI_ATTRIBUTES va{};
        va.ReliabilityLevel = opt.reliability;
        va.MaxTransferSize = opt.max_transfer;
        va.QoS = reinterpret_cast<KVIP_QOS>(opt.qos);
        va.Ptag = ptag;
        va.EnableRdmaWrite = opt.rdma_write;
        va.EnableRdmaRead = opt.rdma_read && opt.reliability != KVIP_SERVICE_UNRELIABLE;
        return va;
    }

    KVIP_DESCRIPTOR* desc(std::size_t slot) {
        auto* d = reinterpret_cast<KVIP_DESCRIPTOR*>(desc_area + slot * kSlot);
        std::memset(d, 0, kSlot);
        return d;
    }
    // A send or receive descriptor over data[off, off+len).
    KVIP_DESCRIPTOR* sendrecv(std::size_t slot, std::size_t off, KVIP_ULONG len) {
        KVIP_DESCRIPTOR* d = desc(slot);
        d->CS.Control = KVIP_CONTROL_OP_SENDRECV;
        d->CS.SegCount = 1;
        d->CS.Length = len;
        d->DS[0].Local.Data.Address = data + off;
        d->DS[0].Local.Handle = data_mh;
        d->DS[0].Local.Length = len;
        return d;
    }
    // An RDMA descriptor: local data[off, off+len) and the remote address.
    KVIP_DESCRIPTOR* rdma(std::size_t slot, KVIP_USHORT op, std::size_t off, KVIP_ULONG len, std::uint64_t raddr,
                          KVIP_MEM_HANDLE rhandle) {
        KVIP_DESCRIPTOR* d = desc(slot);
        d->CS.Control = op;
        d->CS.SegCount = 2;
        d->CS.Length = len;
        d->DS[0].Remote.Data.AddressBits = raddr;
        d->DS[0].Remote.Handle = rhandle;
        d->DS[1].Local.Data.Address = data + off;
        d->DS[1].Local.Handle = data_mh;
        d->DS[1].Local.Length = len;
        return d;
    }

    // Polls a queue until its head descriptor is done (or a time limit).
    KVIP_RETURN wait_done(bool recv, KVIP_DESCRIPTOR** out, Host& h, double limit_us = 20000) {
        const sim::Tick end = h.now() + us(limit_us);
        for (;;) {
            const KVIP_RETURN r = recv ? KvipRecvDone(vi, out) : KvipSendDone(vi, out);
            if (r != KVIP_NOT_DONE || h.now() >= end) return r;
        }
    }

    // Publishes data address and handle for the peer.
    void publish(Host& h, const std::string& tag) {
        h.put_value(tag + "/addr", reinterpret_cast<std::uint64_t>(data));
        h.put_value(tag + "/mh", data_mh);
    }
};

// Client/server connection: node 1 serves discriminator "srv", node 0 connects.
// The server side posts its request, meets the client at a barrier and waits
// (up to wait_ms) until a client request has arrived.
inline KVIP_CONN_HANDLE await_request(Host& h, ViEnd& e, const std::string& disc = "srv", KVIP_ULONG wait_ms = 10000) {
    NetAddr local(h.index(), disc);
    KVIP_CONN_HANDLE conn = nullptr;
    KEVENT ev;
    KeInitializeEvent(&ev, NotificationEvent, KVIP_FALSE);
    need_kvip(KvipConnectServerRequest(e.nic, local.get(), 10000, &ev, &conn), "KvipConnectServerRequest");
    h.barrier(disc == "srv" ? "listening" : "listening/" + disc);
    KeWaitForSingleObject(&ev, wait_ms);
    return conn;
}

inline KVIP_RETURN serve(Host& h, ViEnd& e, const std::string& disc = "srv") {
    KVIP_CONN_HANDLE conn = await_request(h, e, disc);
    NetAddr remote(0, "");
    KVIP_VI_ATTRIBUTES ra{};
    const KVIP_RETURN r = KvipConnectServerDone(conn, remote.get(), &ra);
    if (r != KVIP_SUCCESS) return r;
    return KvipConnectAccept(conn, e.vi);
}

inline KVIP_RETURN dial(Host& h, ViEnd& e, int server, const std::string& disc = "srv") {
    NetAddr local(h.index(), "cli");
    NetAddr remote(server, disc);
    KEVENT ev;
    KeInitializeEvent(&ev, NotificationEvent, KVIP_FALSE);
    h.barrier(disc == "srv" || disc == "nobody" ? "listening" : "listening/" + disc);
    need_kvip(KvipConnectClientRequest(e.vi, local.get(), remote.get(), 10000, &ev), "KvipConnectClientRequest");
    KeWaitForSingleObject(&ev, 10000);
    KVIP_VI_ATTRIBUTES ra{};
    return KvipConnectClientDone(e.vi, &ra);
}

}  // namespace hcasim::test
