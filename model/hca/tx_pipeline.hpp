// Transmit pipeline: takes QPs from the scheduler in turn and asks, for
// each, the responder (READ responses go first: the peer's requester waits
// on them) and then the requester for one packet. It builds the routing
// headers from the QP's path, owns the transmit packet buffer (a packet's
// space returns when it has left the port) and books every packet through
// one of its packet engines onto the port, ACKs and NAKs included.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "model/hca/hca_params.hpp"
#include "model/hca/port.hpp"
#include "model/hca/qp_scheduler.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class TxPipeline final : public sim::Block, public TransmitPath {
public:
    // hca.control_program: this block's steps run on the adapter's one processor.
    void run_steps_on(sim::Timeline& processor) { for (sim::Timeline& e : m_engines) e.share(&processor, "transmit"); }
    struct Wiring {
        QpTable& qps;
        QpScheduler& scheduler;
        const PortSet& ports;
    };
    TxPipeline(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);
    // The producers it asks, in priority order (they need this pipeline to
    // be built first).
    void set_producers(PacketProducer& responses, PacketProducer& requests);

    void kick(QpContext& qp, sim::Tick t) override;
    packet::PacketPtr make_packet(const Route& route, packet::Headers& h, std::uint32_t payload_len,
                                  std::uint8_t** payload) override;
    bool launch(QpContext& qp, packet::PacketPtr pkt, sim::Tick data_ready, OnWire then = OnWire::Nothing) override;
    void send_ack(QpContext& qp, sim::Tick t, std::uint8_t syndrome, std::uint32_t psn) override;
    // A packet that waited in its port for flow-control credits is on the
    // wire until end; tag is what launch gave the port.
    void sent_after_wait(std::uint64_t tag, sim::Tick end);

private:
    // What a packet waiting in the port carries back: its QP, the transmit
    // buffer it holds and what its producer must hear.
    struct WaitTag {
        std::uint32_t qpn;
        std::uint32_t held;
        OnWire then;
    };
    static std::uint64_t wait_tag(std::uint32_t qpn, std::uint32_t held, OnWire then) {
        return (std::uint64_t{held} << 32) | (std::uint64_t{static_cast<std::uint8_t>(then)} << 24) | (qpn & 0xffffff);
    }
    static WaitTag wait_tag(std::uint64_t tag) {
        return {static_cast<std::uint32_t>(tag & 0xffffff), static_cast<std::uint32_t>(tag >> 32),
                static_cast<OnWire>((tag >> 24) & 0xff)};
    }
    void schedule_pump(sim::Tick t);
    void pump();
    bool has_work(const QpContext& qp) const;
    bool produce(QpContext& qp, sim::Tick now);

    Wiring m_w;
    HcaParams m_p;
    PacketProducer* m_responses = nullptr;
    PacketProducer* m_requests = nullptr;
    // The packet engines; a QP's packets all pass through the same one.
    std::vector<sim::Timeline> m_engines;
    sim::Timeline& engine_of(const QpContext& qp) { return m_engines[qp.qpn % m_engines.size()]; }
    std::uint32_t m_buffer_used = 0;
    std::uint32_t m_max_packet = 0;
    // Packet-buffer space returns when a packet has left the port.
    std::priority_queue<std::pair<sim::Tick, std::uint32_t>, std::vector<std::pair<sim::Tick, std::uint32_t>>,
                        std::greater<>>
        m_releases;
    sim::Tick m_pump_at = ~sim::Tick(0);
    packet::PacketPool m_pool;
    // Hot counters, looked up once.
    std::uint64_t* m_n_packets = nullptr;
    std::uint64_t* m_n_bytes = nullptr;
};


}  // namespace hcasim::hca
