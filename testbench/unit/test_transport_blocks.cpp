// The requester, responder, completer, doorbell unit and WQE fetch engine
// each on their own, with every neighbour stubbed through the narrow
// interfaces they are wired with (model/hca/transport_interfaces.hpp): what
// packets a block produces, what it reads, writes, completes and asks of its
// neighbours for a given input.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <sstream>

#include "model/hca/completer.hpp"
#include "model/hca/doorbell_unit.hpp"
#include "model/hca/requester.hpp"
#include "model/hca/responder.hpp"
#include "model/hca/wqe_fetch_engine.hpp"
#include "model/pcie/host_memory.hpp"
#include "model/pcie/pcie_host_interface.hpp"
#include "model/packet/opcode_table.hpp"
#include "model/sim/config.hpp"
#include "model/sim/simulation_start.hpp"
#include "testbench/system/isolated.hpp"

namespace hcasim::test {
namespace {

using namespace hca;

// Host memory as a flat byte array at bus address 0; reads and writes take
// a fixed time and are recorded.
struct StubDma : DmaEngine {
    std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(1 << 20);
    std::vector<std::pair<std::uint64_t, std::vector<std::uint8_t>>> writes;
    sim::Tick latency = 1000;
    sim::Block* owner = nullptr;
    int reads = 0;
    sim::Tick read(sim::Tick t, const DmaSpan* s, std::size_t n, std::uint8_t* dst) override {
        ++reads;
        for (std::size_t i = 0; i < n; ++i) {
            std::memcpy(dst, mem.data() + s[i].addr, s[i].len);
            dst += s[i].len;
        }
        return t + latency;
    }
    sim::Tick write(sim::Tick t, const DmaSpan* s, std::size_t n, const std::uint8_t* src) override {
        for (std::size_t i = 0; i < n; ++i) {
            std::memcpy(mem.data() + s[i].addr, src, s[i].len);
            writes.emplace_back(s[i].addr, std::vector<std::uint8_t>(src, src + s[i].len));
            src += s[i].len;
        }
        return t + latency;
    }
    sim::Tick write(sim::Tick t, const DmaSpan* s, std::size_t n, const packet::PacketPtr&,
                    const std::uint8_t* src) override {
        return write(t, s, n, src);
    }
    sim::Tick last_write_visible() const override { return 0; }
    sim::Tick execute(sim::Tick t, const DmaDescriptor*, std::size_t, std::vector<DmaCompletion>&) override {
        return t;
    }
    sim::Block& block() override { return *owner; }
};

// Keys are identity-mapped: va is the bus address. Key 0xbad is unknown.
struct StubTranslator : AddressTranslator {
    int calls = 0;
    Translation translate(sim::Tick t, std::uint32_t key, std::uint32_t, std::uint64_t va, std::uint64_t len,
                          std::uint32_t, std::vector<DmaSpan>& out) override {
        ++calls;
        if (key == 0xbad) return {Protection::BadKey, t};
        out.push_back({va, static_cast<std::uint32_t>(len)});
        return {Protection::Ok, t};
    }
    Translation translate_remote(sim::Tick t, std::uint32_t key, std::uint32_t, std::uint32_t pdn, std::uint64_t va,
                                 std::uint64_t len, std::uint32_t access, std::vector<DmaSpan>& out) override {
        return translate(t, key, pdn, va, len, access, out);
    }
    WindowResult bind_window(sim::Tick t, const BindSeg&, std::uint32_t, std::uint32_t) override {
        return {WindowStatus::NoWindow, t};
    }
    WindowResult invalidate_window(sim::Tick t, std::uint32_t, std::uint32_t, std::uint32_t) override {
        return {WindowStatus::NoWindow, t};
    }
};

struct StubTx : TransmitPath {
    struct Sent {
        packet::Parsed p;
        std::vector<std::uint8_t> payload;
    };
    std::vector<Sent> packets;
    std::vector<std::pair<std::uint8_t, std::uint32_t>> acks;  // syndrome, psn
    int kicks = 0;
    packet::PacketPool pool;
    void kick(QpContext&, sim::Tick) override { ++kicks; }
    packet::PacketPtr make_packet(const Route& r, packet::Headers& h, std::uint32_t n, std::uint8_t** payload) override {
        h.lrh.dlid = r.dlid;
        h.lrh.slid = 1;
        h.bth.dest_qp = r.dest_qpn;
        auto pkt = pool.make(packet::wire_bytes(h, n));
        *payload = pkt->bytes.data() + packet::write_headers(h, n, pkt->bytes.data());
        return pkt;
    }
    bool launch(QpContext&, packet::PacketPtr pkt, sim::Tick, OnWire) override {
        packet::seal(pkt->bytes.data(), pkt->bytes.size());
        Sent s;
        if (packet::parse(pkt->bytes.data(), pkt->bytes.size(), s.p) != packet::ParseError::None)
            throw std::runtime_error("unparsable packet, opcode " + std::to_string(pkt->bytes[8]));
        s.payload.assign(pkt->bytes.data() + s.p.payload_offset,
                         pkt->bytes.data() + s.p.payload_offset + s.p.payload_len);
        packets.push_back(std::move(s));
        return true;
    }
    void send_ack(QpContext&, sim::Tick, std::uint8_t syndrome, std::uint32_t psn) override {
        acks.emplace_back(syndrome, psn);
    }
};

struct StubCompleter : SendCompleter {
    int retires = 0, timers = 0;
    void retire(QpContext&, sim::Tick) override { ++retires; }
    void arm_ack_timer(QpContext&, sim::Tick) override { ++timers; }
};

struct StubSrqs : SharedReceiveQueues {
    SrqContext* srq(std::uint32_t) override { return nullptr; }
    sim::Tick take(QpContext&, SrqContext&, sim::Tick t, bool) override { return t; }
    void top_up(SrqContext&, sim::Tick) override {}
};

struct StubDescriptors : DescriptorQueues {
    int posted_count = 0, fetches = 0, arms = 0;
    void posted(QpContext&, bool, const ViDoorbellToken&, sim::Tick) override { ++posted_count; }
    void fetch(QpContext&, bool, sim::Tick, bool) override { ++fetches; }
    void arm(QpContext&, bool) override { ++arms; }
};

struct StubCqArming : CompletionArming {
    std::vector<std::uint32_t> armed;  // CQ numbers
    void arm(sim::Tick, std::uint32_t cqn, std::uint32_t, bool) override { armed.push_back(cqn); }
};

struct StubFetch : WorkQueueFetcher {
    int consumed = 0, blueflames = 0;
    void fetch_send(QpContext&, sim::Tick) override {}
    sim::Tick prefetch_recv(QpContext&, sim::Tick t, bool) override { return t; }
    void recv_consumed(QpContext&, sim::Tick) override { ++consumed; }
    sim::Tick blueflame(QpContext&, const std::vector<std::uint8_t>&, sim::Tick t) override {
        ++blueflames;
        return t;
    }
};

struct StubCompletions : CompletionWriter {
    std::vector<Cqe> cqes;
    bool post_cqe(sim::Tick, std::uint32_t, const Cqe& c) override {
        cqes.push_back(c);
        return true;
    }
    void complete_descriptor(QpContext&, bool, std::uint64_t, std::uint32_t, std::uint32_t, std::uint32_t,
                             std::optional<std::uint32_t>, sim::Tick) override {}
};

struct StubErrors : QpErrorHandler {
    std::vector<AsyncEventType> events;
    int errors = 0, sq_errors = 0, flushes = 0;
    void raise_async(sim::Tick, AsyncEvent e) override { events.push_back(e.type); }
    void enter_error(QpContext& qp, sim::Tick) override {
        ++errors;
        qp.qpc.state = QpState::Err;
    }
    void enter_send_queue_error(QpContext& qp, sim::Tick) override {
        ++sq_errors;
        qp.qpc.state = QpState::Sqe;
    }
    void flush(QpContext&, sim::Tick) override { ++flushes; }
    void flush_send(QpContext&, sim::Tick) override { ++flushes; }
    void fail_srq(std::uint32_t, sim::Tick) override { events.push_back(AsyncEventType::SrqError); }
};

struct StubRewinder : RequestRewinder {
    std::vector<std::uint32_t> psns;
    void rewind(QpContext&, std::uint32_t psn, sim::Tick) override { psns.push_back(psn); }
};

struct StubQps : QpTable {
    QpContext* only = nullptr;
    QpAccess context(std::uint32_t, sim::Tick t) override { return {only, t}; }
    bool hold_context(std::uint32_t) override { return false; }
    void release_context(std::uint32_t) override {}
    QpContext* working_state(std::uint32_t) override { return only; }
};

QpContext rts_qp(QpType type) {
    QpContext qp;
    qp.valid = true;
    qp.qpn = 0x40;
    qp.qpc.type = type;
    qp.qpc.state = QpState::Rts;
    qp.qpc.path_mtu = 1024;
    qp.qpc.dlid = 2;
    qp.qpc.dest_qpn = 0x50;
    qp.req.next_psn = 100;
    qp.resp.epsn = 500;
    qp.qpc.access = kRemoteWrite | kRemoteRead | kRemoteAtomic;
    qp.qpc.qkey = 0x1234;
    qp.qpc.max_rd_atomic = qp.qpc.max_dest_rd_atomic = 4;
    return qp;
}

SendWork send_wqe(WqeOpcode op, std::uint64_t addr, std::uint32_t len) {
    SendWork w;
    w.op = op;
    w.flags = kWqeSignaled;
    w.sges.push_back(DataSeg{addr, 7, len});
    w.length = len;
    w.raddr = 0x80000;
    w.rkey = 9;
    return w;
}

// Runs body in a child process (SystemC elaborates modules once per
// process); body writes failures to the stream.
void isolated(const std::function<void(std::ostream&)>& body) {
    const auto r = testbench::run_isolated(body);
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.output == "");
}

#define EXPECT(cond)                                                   \
    do {                                                               \
        if (!(cond)) os << __LINE__ << ": " << #cond << " failed\n"; \
    } while (0)

}  // namespace

TEST_CASE("requester on its own: a 5000-byte RC SEND becomes five packets with consecutive PSNs", "[unit][transport]") {
    isolated([](std::ostream& os) {
        const sim::Config cfg;
        const HcaParams p = HcaParams::from(cfg);
        StubTx tx;
        StubCompleter comp;
        StubFetch fetch;
        StubTranslator tr;
        StubDma dma;
        Requester req("requester", p, {tx, comp, fetch, tr, dma});
        req.set_max_datagram(4096);
        QpContext qp = rts_qp(QpType::Rc);
        for (int i = 0; i < 5000; ++i) dma.mem[0x1000 + i] = static_cast<std::uint8_t>(i * 7);
        qp.req.send_q.push_back(send_wqe(WqeOpcode::Send, 0x1000, 5000));
        while (req.produce(qp, 0)) {
        }
        EXPECT(tx.packets.size() == 5);
        const std::uint8_t want_ops[] = {0x00, 0x01, 0x01, 0x01, 0x02};
        std::vector<std::uint8_t> payload;
        for (std::size_t i = 0; i < tx.packets.size() && i < 5; ++i) {
            const auto& b = tx.packets[i].p.h.bth;
            EXPECT(b.opcode == want_ops[i]);
            EXPECT(b.psn == 100 + i);
            EXPECT(b.dest_qp == 0x50);
            EXPECT(b.ack_req == (i == 4));
            payload.insert(payload.end(), tx.packets[i].payload.begin(), tx.packets[i].payload.end());
        }
        EXPECT(payload.size() == 5000);
        EXPECT(std::equal(payload.begin(), payload.end(), dma.mem.begin() + 0x1000));
        EXPECT(comp.timers == 5);    // RC: the ACK timer runs
        EXPECT(comp.retires == 0);   // and only the ACK retires it
        EXPECT(qp.req.next_psn == 105);
    });
}

TEST_CASE("requester on its own: UC uses UC opcodes and no ACK timer, UD one packet with a DETH or a length error",
          "[unit][transport]") {
    isolated([](std::ostream& os) {
        const sim::Config cfg;
        const HcaParams p = HcaParams::from(cfg);
        StubTx tx;
        StubCompleter comp;
        StubFetch fetch;
        StubTranslator tr;
        StubDma dma;
        Requester req("requester", p, {tx, comp, fetch, tr, dma});
        req.set_max_datagram(2048);

        QpContext uc = rts_qp(QpType::Uc);
        uc.req.send_q.push_back(send_wqe(WqeOpcode::RdmaWriteImm, 0x1000, 1500));
        while (req.produce(uc, 0)) {
        }
        EXPECT(tx.packets.size() == 2);
        if (tx.packets.size() == 2) {
            EXPECT(tx.packets[0].p.h.bth.opcode == 0x26);  // UC RDMA WRITE FIRST
            EXPECT(tx.packets[0].p.h.reth.has_value());
            EXPECT(tx.packets[1].p.h.bth.opcode == 0x29);  // UC RDMA WRITE LAST with immediate
        }
        EXPECT(comp.timers == 0);
        EXPECT(comp.retires == 1);  // done when its last packet left
        EXPECT(uc.req.send_q.front().acked);

        tx.packets.clear();
        comp.retires = 0;
        QpContext ud = rts_qp(QpType::Ud);
        SendWork w = send_wqe(WqeOpcode::SendImm, 0x1000, 2000);
        w.ud.dlid = 7;
        w.ud.dest_qpn = 0x99;
        w.ud.qkey = 0x1234;
        ud.req.send_q.push_back(w);
        SendWork big = send_wqe(WqeOpcode::Send, 0x1000, 2049);
        ud.req.send_q.push_back(big);
        while (req.produce(ud, 0)) {
        }
        req.produce(ud, 0);
        EXPECT(tx.packets.size() == 1);
        if (!tx.packets.empty()) {
            const auto& h = tx.packets[0].p.h;
            EXPECT(h.bth.opcode == 0x65);  // UD SEND only with immediate
            EXPECT(h.lrh.dlid == 7);
            EXPECT(h.bth.dest_qp == 0x99);
            EXPECT(h.deth.has_value() && h.deth->qkey == 0x1234 && h.deth->src_qp == 0x40);
        }
        EXPECT(ud.req.send_q.size() == 2 && ud.req.send_q[1].error == CqeStatus::LocalLength);
    });
}

TEST_CASE("responder on its own: sends, sequence errors, duplicates, RNR and a fetch and add", "[unit][transport]") {
    isolated([](std::ostream& os) {
        const sim::Config cfg;
        const HcaParams p = HcaParams::from(cfg);
        StubTx tx;
        StubFetch fetch;
        StubTranslator tr;
        StubDma dma;
        StubCompletions cq;
        StubErrors err;
        StubSrqs srqs;
        StubQps qps;
        Responder resp("responder", p, {tx, fetch, tr, dma, cq, err, srqs, qps});
        packet::PacketPool pool;
        auto deliver = [&](QpContext& qp, std::uint8_t opcode, std::uint32_t psn, std::vector<std::uint8_t> data,
                           std::optional<packet::AtomicEth> atomic = std::nullopt) {
            packet::Headers h;
            h.bth.opcode = opcode;
            h.bth.psn = psn;
            h.bth.ack_req = true;
            h.atomic_eth = atomic;
            auto pkt = pool.make(packet::wire_bytes(h, data.size()));
            packet::build(h, data.data(), data.size(), pkt->bytes.data());
            packet::Parsed parsed;
            if (packet::parse(pkt->bytes.data(), pkt->bytes.size(), parsed) != packet::ParseError::None) {
                os << "unparsable test packet\n";
                return;
            }
            resp.handle(qp, parsed, pkt, pkt->bytes.data() + parsed.payload_offset, 0);
        };
        QpContext qp = rts_qp(QpType::Rc);
        RecvWork r;
        r.sges.push_back(DataSeg{0x2000, 7, 256});
        r.length = 256;
        qp.fetch.rq_cache.push_back(r);
        deliver(qp, 0x04, 500, std::vector<std::uint8_t>(100, 0x5a));  // SEND only
        EXPECT(dma.writes.size() == 1 && dma.writes[0].first == 0x2000 && dma.writes[0].second.size() == 100);
        EXPECT(cq.cqes.size() == 1 && cq.cqes[0].byte_len == 100 && cq.cqes[0].src_qp == 0x50);
        EXPECT(tx.acks.size() == 1 && tx.acks[0].second == 500 &&
               (tx.acks[0].first & packet::kAethKindMask) == packet::kAethAck);
        EXPECT(qp.resp.epsn == 501);

        deliver(qp, 0x04, 503, {1, 2, 3});  // a gap: one sequence NAK for 501
        deliver(qp, 0x04, 504, {1, 2, 3});  // and no second one
        EXPECT(tx.acks.size() == 2 && tx.acks[1].first == (packet::kAethNak | packet::kNakPsnSequenceError) &&
               tx.acks[1].second == 501);
        deliver(qp, 0x04, 499, {1});  // a duplicate is acknowledged again
        EXPECT(tx.acks.size() == 3 && (tx.acks[2].first & packet::kAethKindMask) == packet::kAethAck);
        deliver(qp, 0x04, 501, {1});  // no receive WQE: RNR NAK
        EXPECT(tx.acks.size() == 4 && (tx.acks[3].first & packet::kAethKindMask) == packet::kAethRnrNak);

        // Fetch & add: read-modify-write of host memory, the original value
        // in the ATOMIC ACKNOWLEDGE, produced as a response.
        QpContext at = rts_qp(QpType::Rc);
        const std::uint64_t v = 40;
        std::memcpy(dma.mem.data() + 0x3000, &v, 8);
        deliver(at, 0x14, 500, {}, packet::AtomicEth{0x3000, 9, 2, 0});
        std::uint64_t now_v = 0;
        std::memcpy(&now_v, dma.mem.data() + 0x3000, 8);
        EXPECT(now_v == 42);
        EXPECT(resp.has_work(at));
        resp.produce(at, 0);
        EXPECT(!tx.packets.empty() && tx.packets.back().p.h.bth.opcode == 0x12 &&
               tx.packets.back().p.h.atomic_ack == 40u);
        // The same request again: answered from the saved result, not added twice.
        deliver(at, 0x14, 500, {}, packet::AtomicEth{0x3000, 9, 2, 0});
        resp.produce(at, 0);
        std::memcpy(&now_v, dma.mem.data() + 0x3000, 8);
        EXPECT(now_v == 42);
        EXPECT(tx.packets.size() == 2 && tx.packets.back().p.h.atomic_ack == 40u);
        // Misaligned: NAK invalid request and the QP breaks.
        deliver(at, 0x14, 501, {}, packet::AtomicEth{0x3004, 9, 2, 0});
        EXPECT(tx.acks.back().first == (packet::kAethNak | packet::kNakInvalidRequest));
        EXPECT(err.errors == 1);

        // UC: no receive WQE drops the message, no NAK.
        const std::size_t acks = tx.acks.size();
        QpContext uc = rts_qp(QpType::Uc);
        deliver(uc, 0x24, 500, {1, 2});
        EXPECT(tx.acks.size() == acks);
        EXPECT(uc.resp.epsn == 501);
    });
}

TEST_CASE("completer on its own: ACKs retire in order, an RNR NAK rewinds, a NAK fails the WQE", "[unit][transport]") {
    isolated([](std::ostream& os) {
        const sim::Config cfg;
        const HcaParams p = HcaParams::from(cfg);
        StubQps qps;
        StubTx tx;
        StubDma dma;
        StubCompletions cq;
        StubErrors err;
        StubRewinder rew;
        Completer comp("completer", p, {qps, tx, dma, cq, err});
        comp.set_requester(rew);
        QpContext qp = rts_qp(QpType::Rc);
        qps.only = &qp;
        for (int i = 0; i < 3; ++i) {
            SendWork w = send_wqe(WqeOpcode::Send, 0x1000, 100);
            w.wqe_index = static_cast<std::uint16_t>(i);
            w.started = w.sent = w.fully_sent = true;
            w.first_psn = 100 + static_cast<std::uint32_t>(i);
            w.npsn = 1;
            qp.req.send_q.push_back(w);
        }
        packet::PacketPool pool;
        auto ack = [&](std::uint8_t syndrome, std::uint32_t psn) {
            packet::Headers h;
            h.bth.opcode = static_cast<std::uint8_t>(packet::Opcode::RcAcknowledge);
            h.bth.psn = psn;
            h.aeth = packet::Aeth{syndrome, 0};
            auto pkt = pool.make(packet::wire_bytes(h, 0));
            packet::build(h, nullptr, 0, pkt->bytes.data());
            packet::Parsed parsed;
            packet::parse(pkt->bytes.data(), pkt->bytes.size(), parsed);
            comp.handle(qp, parsed, pkt, nullptr, 0);
        };
        ack(packet::kAethAck | packet::kAethCreditsInvalid, 100);  // the first
        EXPECT(cq.cqes.size() == 1 && cq.cqes[0].wqe_index == 0 && cq.cqes[0].status == 0);
        ack(packet::kAethRnrNak | 1, 101);  // RNR NAK: back to 101
        EXPECT(rew.psns.size() == 1 && rew.psns[0] == 101);
        EXPECT(cq.cqes.size() == 1);
        ack(packet::kAethNak | packet::kNakRemoteAccessError, 102);  // 101 implied done, 102 failed
        EXPECT(cq.cqes.size() == 3);
        if (cq.cqes.size() == 3) {
            EXPECT(cq.cqes[1].wqe_index == 1 && cq.cqes[1].status == 0);
            EXPECT(cq.cqes[2].wqe_index == 2 && cq.cqes[2].status == static_cast<std::uint8_t>(CqeStatus::RemoteAccess));
        }
        EXPECT(err.errors == 1);
    });
}

namespace {

// A signalled RC SEND WQE of one data segment, as the driver writes it.
void write_send_wqe(StubDma& dma, std::uint64_t at, std::uint16_t index, std::uint64_t addr, std::uint32_t len) {
    SendWqeCtrl ctrl{};
    ctrl.opcode = static_cast<std::uint8_t>(WqeOpcode::Send);
    ctrl.flags = kWqeSignaled;
    ctrl.num_sge = 1;
    ctrl.wqe_index = index;
    const DataSeg d{addr, 7, len};
    std::memcpy(dma.mem.data() + at, &ctrl, sizeof ctrl);
    std::memcpy(dma.mem.data() + at + sizeof ctrl, &d, sizeof d);
}

}  // namespace

TEST_CASE("fetch engine on its own: one DMA read brings a batch of send WQEs and kicks the transmit path, and a QP "
          "in the error state is flushed instead",
          "[unit][fetch]") {
    isolated([](std::ostream& os) {
        const sim::Config cfg;
        const HcaParams p = HcaParams::from(cfg);
        StubQps qps;
        StubDma dma;
        StubDescriptors descriptors;
        StubSrqs srqs;
        StubErrors errors;
        StubTx tx;
        WqeFetchEngine fetch("wqe_fetch", p, {qps, dma, descriptors, srqs, errors, tx});
        QpContext qp = rts_qp(QpType::Rc);
        qp.qpc.sq_base = 0x10000;
        qp.qpc.sq_log_size = 4;
        qp.qpc.sq_log_stride = 6;
        qp.qpc.max_send_sge = 2;
        qps.only = &qp;
        for (std::uint16_t i = 0; i < 3; ++i) write_send_wqe(dma, 0x10000 + i * 64u, i, 0x2000 + i * 0x100u, 100u + i);
        qp.fetch.sq_pi = 3;
        fetch.fetch_send(qp, 0);
        EXPECT(qp.fetch.sq_fetch_busy);
        fetch.fetch_send(qp, 0);  // one fetch at a time
        hcasim::sim::start();
        EXPECT(dma.reads == 1);
        EXPECT(!qp.fetch.sq_fetch_busy);
        EXPECT(qp.fetch.sq_fetched == 3);
        EXPECT(qp.req.send_q.size() == 3);
        for (std::size_t i = 0; i < qp.req.send_q.size() && i < 3; ++i) {
            const SendWork& w = qp.req.send_q[i];
            EXPECT(w.wqe_index == i);
            EXPECT(w.op == WqeOpcode::Send);
            EXPECT(w.length == 100 + i);
            EXPECT(w.sges.size() == 1);
            EXPECT(!w.sges.empty() && w.sges[0].addr == 0x2000 + i * 0x100);
        }
        EXPECT(tx.kicks == 1);
        EXPECT(errors.flushes == 0);

        // Fetched for a QP that went to the error state meanwhile: flushed.
        write_send_wqe(dma, 0x10000 + 3 * 64u, 3, 0x3000, 64);
        qp.fetch.sq_pi = 4;
        fetch.fetch_send(qp, sim::now_ps());
        qp.qpc.state = QpState::Err;
        hcasim::sim::start();
        EXPECT(qp.fetch.sq_fetched == 4);
        EXPECT(errors.flushes == 1);
        EXPECT(tx.kicks == 1);
    });
}

TEST_CASE("doorbell unit on its own: a send doorbell kicks the transmit path once it has crossed PCIe, a stale one "
          "is dropped and a CQ arm reaches the completion engine",
          "[unit][doorbell]") {
    isolated([](std::ostream& os) {
        const sim::Config cfg;
        const HcaParams p = HcaParams::from(cfg);
        pcie::HostMemory memory(0);
        pcie::PcieHostInterface pcie("pcie", pcie::PcieParams::from(cfg), memory);
        StubQps qps;
        StubFetch fetch;
        StubDescriptors descriptors;
        StubCqArming cqs;
        StubErrors errors;
        StubTx tx;
        DoorbellUnit doorbells("doorbell_unit", p, {qps, pcie, fetch, descriptors, cqs, errors, tx});
        QpContext qp = rts_qp(QpType::Rc);
        qps.only = &qp;

        DoorbellWrite ring;
        ring.offset = kUarSendDoorbell;
        ring.number = qp.qpn;
        ring.index = 5;
        doorbells.mmio_write(0, ring);
        EXPECT(tx.kicks == 0);  // still on its way
        hcasim::sim::start();
        EXPECT(sim::now_ps() > 0);
        EXPECT(qp.fetch.sq_pi == 5);
        EXPECT(tx.kicks == 1);

        DoorbellWrite stale = ring;
        stale.index = 4;
        doorbells.mmio_write(sim::now_ps(), stale);
        hcasim::sim::start();
        EXPECT(qp.fetch.sq_pi == 5);
        EXPECT(tx.kicks == 1);
        EXPECT(doorbells.counter("stale_doorbells") == 1);

        qp.qpc.state = QpState::Err;
        ring.index = 6;
        doorbells.mmio_write(sim::now_ps(), ring);
        hcasim::sim::start();
        EXPECT(errors.flushes == 1);
        EXPECT(tx.kicks == 1);

        DoorbellWrite arm;
        arm.offset = kUarCqArm;
        arm.number = 9;
        doorbells.mmio_write(sim::now_ps(), arm);
        hcasim::sim::start();
        EXPECT(cqs.armed == std::vector<std::uint32_t>{9});
        EXPECT(fetch.blueflames == 0);
    });
}

}  // namespace hcasim::test
