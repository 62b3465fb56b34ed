#include "testbench/workloads/kvipl_perftest.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "host/kvipl/kvipl.h"
#include "model/hca/hca_params.hpp"
#include "testbench/workloads/stall_watch.hpp"

namespace hcasim::testbench {

namespace {

const char* return_name(KVIP_RETURN r) {
    switch (r) {
    case KVIP_SUCCESS: return "KVIP_SUCCESS";
    case KVIP_NOT_DONE: return "KVIP_NOT_DONE";
    case KVIP_INVALID_PARAMETER: return "KVIP_INVALID_PARAMETER";
    case KVIP_ERROR_RESOURCE: return "KVIP_ERROR_RESOURCE";
    case KVIP_TIMEOUT: return "KVIP_TIMEOUT";
    case KVIP_REJECT: return "KVIP_REJECT";
    case KVIP_INVALID_RELIABILITY_LEVEL: return "KVIP_INVALID_RELIABILITY_LEVEL";
    case KVIP_INVALID_MTU: return "KVIP_INVALID_MTU";
    case KVIP_INVALID_QOS: return "KVIP_INVALID_QOS";
    case KVIP_INVALID_PTAG: return "KVIP_INVALID_PTAG";
    case KVIP_INVALID_RDMA_READ: return "KVIP_INVALID_RDMA_READ";
    case KVIP_DESCRIPTOR_ERROR: return "KVIP_DESCRIPTOR_ERROR";
    case KVIP_INVALID_STATE: return "KVIP_INVALID_STATE";
    case KVIP_ERROR_NAMESERVICE: return "KVIP_ERROR_NAMESERVICE";
    case KVIP_NO_MATCH: return "KVIP_NO_MATCH";
    case KVIP_NOT_REACHABLE: return "KVIP_NOT_REACHABLE";
    }
    return "an unknown KVIP code";
}

void need(KVIP_RETURN r, const char* what) {
    if (r == KVIP_SUCCESS) return;
    std::string message = std::string(what) + " returned " + return_name(r);
    // The connection managers talk through the adapters: one slowed down far
    // enough answers after the peer has given up.
    if (r == KVIP_NOT_REACHABLE)
        message += " (the peer's connection manager did not answer within fw.cm_response_timeout_us, "
                   "fw.cm_max_retries times)";
    throw std::runtime_error(message);
}

constexpr std::size_t kSlot = 128;  // one descriptor: control, address and one data segment fit in 64 B

struct Buffer {
    std::uint8_t* p;
    explicit Buffer(std::size_t n) : p(static_cast<std::uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {
        std::memset(p, 0, (n + 4095) / 4096 * 4096);
    }
    ~Buffer() { std::free(p); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
};

// One side of a KVIPL run: NIC, tag, registered descriptors and data, a VI
// with completion queues per work queue, connected to the other node.
struct KvipEndpoint {
    KVIP_NIC_HANDLE nic = nullptr;
    KVIP_PROTECTION_HANDLE ptag = nullptr;
    KVIP_VI_HANDLE vi = nullptr;
    Buffer descs;
    Buffer data;
    KVIP_MEM_HANDLE desc_mh = 0, data_mh = 0;
    std::size_t slots;
    std::uint64_t remote_addr = 0;
    KVIP_MEM_HANDLE remote_mh = 0;

    KvipEndpoint(std::size_t data_bytes, std::size_t slots_, int reliability)
        : descs(slots_ * kSlot), data(data_bytes), slots(slots_) {
        need(KvipOpenNic(L"hcasim0", nullptr, &nic), "KvipOpenNic");
        need(KvipCreatePtag(nic, &ptag), "KvipCreatePtag");
        KVIP_NIC_ATTRIBUTES na{};
        need(KvipQueryNic(nic, &na), "KvipQueryNic");
        KVIP_MEM_ATTRIBUTES ma{ptag, KVIP_FALSE, KVIP_FALSE};
        need(KvipRegisterMem(nic, descs.p, static_cast<KVIP_ULONG>(slots * kSlot), &ma, &desc_mh), "KvipRegisterMem");
        // Open to RDMA reads only where the NIC has them: registering memory
        // for reads on a NIC without them is refused.
        ma.EnableRdmaWrite = KVIP_TRUE;
        ma.EnableRdmaRead = na.RDMAReadSupport;
        need(KvipRegisterMem(nic, data.p, static_cast<KVIP_ULONG>(data_bytes), &ma, &data_mh), "KvipRegisterMem");
        KVIP_VI_ATTRIBUTES va{};
        va.ReliabilityLevel = static_cast<KVIP_RELIABILITY_LEVEL>(reliability);
        va.MaxTransferSize = na.MaxTransferSize;
        va.Ptag = ptag;
        va.EnableRdmaWrite = KVIP_TRUE;
        va.EnableRdmaRead = reliability == KVIP_SERVICE_UNRELIABLE ? KVIP_FALSE : na.RDMAReadSupport;
        need(KvipCreateVi(nic, &va, nullptr, nullptr, nullptr, nullptr, &vi), "KvipCreateVi");
    }
    ~KvipEndpoint() {
        if (nic) KvipCloseNic(nic);
    }

    static void address(KVIP_NET_ADDRESS* a, int node, char disc) {
        a->HostAddressLen = 2;
        a->DiscriminatorLen = 1;
        a->HostAddress[0] = static_cast<KVIP_UCHAR>((node + 1) >> 8);
        a->HostAddress[1] = static_cast<KVIP_UCHAR>(node + 1);
        a->HostAddress[2] = static_cast<KVIP_UCHAR>(disc);
    }

    // Node 1 listens; `pair` tells apart the VIs two programs of a node connect.
    void connect(Host& h, const std::string& tag, int pair = 0) {
        const char server = static_cast<char>('s' + pair), client = static_cast<char>('c' + pair);
        // Every program of a run takes part in a barrier: the pairs share one.
        const std::string listening = tag.substr(0, tag.find('.')) + "/listening";
        alignas(8) unsigned char lbuf[sizeof(KVIP_NET_ADDRESS) + 8], rbuf[sizeof(KVIP_NET_ADDRESS) + 8];
        auto* local = reinterpret_cast<KVIP_NET_ADDRESS*>(lbuf);
        auto* remote = reinterpret_cast<KVIP_NET_ADDRESS*>(rbuf);
        KEVENT ev;
        KeInitializeEvent(&ev, NotificationEvent, KVIP_FALSE);
        KVIP_VI_ATTRIBUTES ra{};
        if (h.index() == 1) {
            address(local, 1, server);
            KVIP_CONN_HANDLE conn = nullptr;
            need(KvipConnectServerRequest(nic, local, 10000, &ev, &conn), "KvipConnectServerRequest");
            h.barrier(listening);
            KeWaitForSingleObject(&ev, 10000);
            need(KvipConnectServerDone(conn, remote, &ra), "KvipConnectServerDone");
            need(KvipConnectAccept(conn, vi), "KvipConnectAccept");
        } else {
            address(local, 0, client);
            address(remote, 1, server);
            h.barrier(listening);
            need(KvipConnectClientRequest(vi, local, remote, 10000, &ev), "KvipConnectClientRequest");
            KeWaitForSingleObject(&ev, 10000);
            need(KvipConnectClientDone(vi, &ra), "KvipConnectClientDone");
        }
        h.put_value(tag + "/addr" + std::to_string(h.index()), reinterpret_cast<std::uint64_t>(data.p));
        h.put_value(tag + "/mh" + std::to_string(h.index()), data_mh);
        remote_addr = h.get_value<std::uint64_t>(tag + "/addr" + std::to_string(1 - h.index()));
        remote_mh = h.get_value<KVIP_MEM_HANDLE>(tag + "/mh" + std::to_string(1 - h.index()));
    }

    KVIP_DESCRIPTOR* desc(std::size_t slot, KVIP_USHORT op, std::uint8_t* local, KVIP_ULONG len, std::uint64_t raddr) {
        auto* d = reinterpret_cast<KVIP_DESCRIPTOR*>(descs.p + slot * kSlot);
        std::memset(d, 0, kSlot);
        d->CS.Control = op;
        const bool rdma = op != KVIP_CONTROL_OP_SENDRECV;
        d->CS.SegCount = rdma ? 2 : 1;
        KVIP_DATA_SEGMENT* ds = &d->DS[rdma ? 1 : 0].Local;
        if (rdma) {
            d->DS[0].Remote.Data.AddressBits = raddr;
            d->DS[0].Remote.Handle = remote_mh;
        }
        ds->Data.Address = local;
        ds->Handle = data_mh;
        ds->Length = len;
        return d;
    }
};

// Polls a work queue until a descriptor completes, which must succeed;
// gives up when the fabric falls silent first (StallWatch).
void reap(Host& h, KVIP_VI_HANDLE vi, bool recv, const char* what) {
    StallWatch watch(h);
    KVIP_DESCRIPTOR* d = nullptr;
    for (;;) {
        const KVIP_RETURN r = recv ? KvipRecvDone(vi, &d) : KvipSendDone(vi, &d);
        if (r == KVIP_SUCCESS) return;
        if (r != KVIP_NOT_DONE)
        {
            char status[16];
            std::snprintf(status, sizeof status, "0x%x", d ? static_cast<unsigned>(d->CS.Status) : 0u);
            throw std::runtime_error(std::string(what) + ": descriptor status " + status +
                                     (d && (d->CS.Status & KVIP_STATUS_REMOTE_DESC_ERROR)
                                          ? " (the receiver had no receive descriptor posted)"
                                          : ""));
        }
        watch.check(what);
    }
}

}  // namespace

namespace {

void check_options(int reliability, Op op) {
    if (reliability != KVIP_SERVICE_UNRELIABLE && reliability != KVIP_SERVICE_RELIABLE_DELIVERY &&
        reliability != KVIP_SERVICE_RELIABLE_RECEPTION)
        throw std::invalid_argument("invalid VI reliability level " + std::to_string(reliability));
    // Unreliable VIs lose what finds no receive descriptor and cannot read.
    if (reliability == KVIP_SERVICE_UNRELIABLE && op != Op::Write)
        throw std::invalid_argument("--reliability ud runs only --op write (no RDMA read, no flow control for sends)");
}

std::string more_than_allowed(const std::string& what, const std::string& key, std::uint64_t limit,
                              const std::string& unit = "") {
    return what + " is more than the NIC allows: " + key + " = " + std::to_string(limit) +
           (unit.empty() ? "" : " " + unit);
}

// What both KVIPL workloads ask of the NIC, against the attributes it
// reports in KvipQueryNic (the same parameters), so a run the NIC would fail
// halfway is refused before anything is built.
void check_nic(const std::vector<std::uint32_t>& sizes, int iterations, Op op, int reliability, const sim::Config& cfg) {
    check_options(reliability, op);
    if (sizes.empty()) throw std::invalid_argument("no message sizes (--sizes)");
    if (iterations < 1) throw std::invalid_argument("invalid -n/--iters " + std::to_string(iterations) + ": expected at least 1");
    const hca::HcaParams p = hca::HcaParams::from(cfg);
    const std::uint32_t max_size = *std::max_element(sizes.begin(), sizes.end());
    if (max_size > p.vi_max_transfer)
        throw std::invalid_argument(more_than_allowed("--sizes " + std::to_string(max_size) + " (--api kvipl)",
                                                      "hca.vi_max_transfer", p.vi_max_transfer, "bytes"));
    // Each node registers two halves of (largest size + 4 KiB).
    const std::uint64_t registered = 2 * (static_cast<std::uint64_t>(max_size) + 4096);
    const std::uint64_t max_register = std::min<std::uint64_t>(p.max_mr_size, 0xffffffffu);
    if (registered > max_register)
        throw std::invalid_argument("--sizes " + std::to_string(max_size) + " needs " + std::to_string(registered) +
                                    " bytes of registered memory (--api kvipl), more than the NIC registers: " +
                                    std::to_string(max_register) + " bytes");
    // Descriptors and data are two memory regions.
    if (p.max_mr < 2) throw std::invalid_argument(more_than_allowed("2 registered memory regions", "hca.max_mr", p.max_mr));
    if (op == Op::Read && !p.vi_rdma_read)
        throw std::invalid_argument("--op read needs VI RDMA reads, which the NIC does not support: hca.vi_rdma_read = false");
    // An RDMA descriptor has an address segment and a data segment.
    if (op != Op::Send && p.vi_max_segments < 2)
        throw std::invalid_argument(more_than_allowed("--op " + std::string(op_name(op)) + " needs 2 segments per descriptor, which",
                                                      "hca.vi_max_segments", p.vi_max_segments));
}

}  // namespace

void check_latency_kvipl_options(const LatencyOptions& opt, const sim::Config& cfg) {
    check_nic(opt.sizes, opt.iterations, opt.op, opt.vi_reliability, cfg);
}

void check_bandwidth_kvipl_options(const BandwidthOptions& opt, const sim::Config& cfg) {
    if (opt.qps != 1) throw std::invalid_argument("--api kvipl runs one VI: --qps must be 1");
    check_nic(opt.sizes, opt.iterations, opt.op, opt.vi_reliability, cfg);
    if (opt.tx_depth < 1) throw std::invalid_argument("invalid --tx-depth " + std::to_string(opt.tx_depth) + ": expected at least 1");
    const hca::HcaParams p = hca::HcaParams::from(cfg);
    if (static_cast<std::uint64_t>(opt.tx_depth) > p.vi_max_descriptors)
        throw std::invalid_argument(more_than_allowed("--tx-depth " + std::to_string(opt.tx_depth) + " (--api kvipl)",
                                                      "hca.vi_max_descriptors", p.vi_max_descriptors, "per work queue"));
}

std::vector<LatencyRow> run_latency_kvipl(System& sys, const LatencyOptions& opt) {
    check_latency_kvipl_options(opt, sys.config());
    const std::uint32_t max_size = *std::max_element(opt.sizes.begin(), opt.sizes.end());
    std::vector<LatencyRow> rows;
    auto program = [&](Host& h) {
        const bool client = h.index() == 0;
        const std::size_t half = max_size + 4096;
        KvipEndpoint ep(2 * half, 8, opt.vi_reliability);
        fill_pattern(h, ep.data.p, max_size);
        std::uint8_t* out = ep.data.p;
        std::uint8_t* in = ep.data.p + half;
        // Slot 0: the receive, slot 1: the send.
        if (opt.op == Op::Send) need(KvipPostRecv(ep.vi, ep.desc(0, KVIP_CONTROL_OP_SENDRECV, in, max_size, 0), ep.desc_mh), "KvipPostRecv");
        ep.connect(h, "klat");
        const std::uint64_t peer_in = ep.remote_addr + half;
        for (std::uint32_t size : opt.sizes) {
            h.barrier("size" + std::to_string(size));
            std::vector<sim::Tick> samples;
            for (int it = 0; it < opt.iterations; ++it) {
                const std::uint8_t tag = static_cast<std::uint8_t>(it % 255 + 1);
                if (opt.op == Op::Read) {
                    if (!client) break;
                    const sim::Tick t0 = h.now();
                    need(KvipPostSend(ep.vi, ep.desc(1, KVIP_CONTROL_OP_RDMAREAD, in, size, ep.remote_addr), ep.desc_mh),
                         "KvipPostSend");
                    reap(h, ep.vi, false, "RDMA read");
                    samples.push_back(h.now() - t0);
                    continue;
                }
                const sim::Tick t0 = h.now();
                auto wait_ping = [&]() {
                    if (opt.op == Op::Write) {
                        spin_until(h, in + size - 1, tag);
                    } else {
                        reap(h, ep.vi, true, "receive");
                        need(KvipPostRecv(ep.vi, ep.desc(0, KVIP_CONTROL_OP_SENDRECV, in, max_size, 0), ep.desc_mh),
                             "KvipPostRecv");
                    }
                };
                if (!client) wait_ping();
                out[size - 1] = tag;
                const KVIP_USHORT op = opt.op == Op::Write ? KVIP_CONTROL_OP_RDMAWRITE : KVIP_CONTROL_OP_SENDRECV;
                need(KvipPostSend(ep.vi, ep.desc(1, op, out, size, peer_in), ep.desc_mh), "KvipPostSend");
                if (client) {
                    wait_ping();
                    samples.push_back((h.now() - t0) / 2);
                }
                reap(h, ep.vi, false, "send");
            }
            h.barrier("done" + std::to_string(size));
            if (client) rows.push_back(latency_stats(size, std::move(samples)));
        }
        h.barrier("klat/end");
    };
    sys.run({program, program}, {"KVIPL latency client", "KVIPL latency server"});
    return rows;
}

std::vector<BandwidthRow> run_bandwidth_kvipl(System& sys, const BandwidthOptions& opt) {
    check_bandwidth_kvipl_options(opt, sys.config());
    const std::uint32_t max_size = *std::max_element(opt.sizes.begin(), opt.sizes.end());
    const int depth = opt.tx_depth;
    // --bidirectional: a second VI whose client is on node 1.
    const int pairs = opt.bidirectional ? 2 : 1;
    std::vector<std::vector<ClientRun>> runs(static_cast<std::size_t>(pairs));
    auto program = [&](Host& h, int pair) {
        const bool client = h.index() == (pair == 1 ? 1 : 0);
        const std::string tag = pair == 0 ? "kbw" : "kbw.back";
        const std::size_t half = max_size + 4096;
        // The VI Architecture has no flow control for sends: a message that
        // finds no receive descriptor breaks the connection. The receiver
        // keeps as many receives posted as a queue holds (perftest's rx depth).
        const int rwin = std::min(opt.iterations,
                                  static_cast<int>(h.node().hca().params().vi_max_descriptors));
        KvipEndpoint ep(2 * half, static_cast<std::size_t>(std::max(depth, rwin)), opt.vi_reliability);
        fill_pattern(h, ep.data.p, 2 * half);
        ep.connect(h, tag, pair);
        const KVIP_USHORT op = opt.op == Op::Send    ? KVIP_CONTROL_OP_SENDRECV
                               : opt.op == Op::Write ? KVIP_CONTROL_OP_RDMAWRITE
                                                     : KVIP_CONTROL_OP_RDMAREAD;
        for (std::uint32_t size : opt.sizes) {
            const int iters = opt.iterations;
            int posted = 0, done = 0;
            if (opt.op == Op::Send && !client)
                for (; posted < rwin; ++posted)
                    need(KvipPostRecv(ep.vi, ep.desc(static_cast<std::size_t>(posted % rwin), KVIP_CONTROL_OP_SENDRECV,
                                                     ep.data.p + half, max_size, 0),
                                      ep.desc_mh),
                         "KvipPostRecv");
            h.barrier("kbw" + std::to_string(size));
            if (client) {
                const sim::Tick t0 = h.now();
                const auto wall0 = std::chrono::steady_clock::now();
                std::vector<sim::Tick> message_done;
                while (done < iters) {
                    while (posted < iters && posted - done < depth) {
                        need(KvipPostSend(ep.vi, ep.desc(static_cast<std::size_t>(posted % depth), op,
                                                         opt.op == Op::Read ? ep.data.p + half : ep.data.p, size,
                                                         ep.remote_addr + (opt.op == Op::Read ? 0 : half)),
                                          ep.desc_mh),
                             "KvipPostSend");
                        ++posted;
                    }
                    reap(h, ep.vi, false, "bandwidth send");
                    message_done.push_back(h.now());
                    ++done;
                }
                runs[static_cast<std::size_t>(pair)].push_back(
                    {t0, h.now(), std::move(message_done),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count()});
            } else if (opt.op == Op::Send) {
                for (int received = 0; received < iters; ++received) {
                    reap(h, ep.vi, true, "bandwidth receive");
                    if (posted < iters) {
                        need(KvipPostRecv(ep.vi, ep.desc(static_cast<std::size_t>(posted % rwin), KVIP_CONTROL_OP_SENDRECV,
                                                         ep.data.p + half, max_size, 0),
                                          ep.desc_mh),
                             "KvipPostRecv");
                        ++posted;
                    }
                }
            }
            h.barrier("kbwdone" + std::to_string(size));
        }
        h.barrier("kbw/end");
    };
    // Program i runs on node i mod 2.
    std::vector<System::Program> programs{[&](Host& h) { program(h, 0); }, [&](Host& h) { program(h, 0); }};
    std::vector<std::string> names{"KVIPL bandwidth client", "KVIPL bandwidth server"};
    if (pairs == 2) {
        programs.insert(programs.end(), {[&](Host& h) { program(h, 1); }, [&](Host& h) { program(h, 1); }});
        names.insert(names.end(), {"KVIPL bandwidth server 1", "KVIPL bandwidth client 1"});
    }
    sys.run(programs, names);
    return combined_rows(opt.sizes, opt.iterations, runs, depth);
}

}  // namespace hcasim::testbench
