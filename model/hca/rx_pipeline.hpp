// Receive pipeline: validates each packet the port delivers (ICRC/VCRC,
// lengths, LID, destination QP), and classifies it through the opcode
// attribute table: requests go to the responder, responses to the completer,
// management datagrams for QP1 to the firmware's agents. It paces the
// receive path by the PCIe upstream backlog.
#pragma once

#include <unordered_map>

#include <cstdint>
#include <functional>

#include "model/hca/hca_params.hpp"
#include "model/hca/multicast_table.hpp"
#include "model/hca/port.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/pcie/host_bus.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

class RxPipeline final : public sim::Block {
public:
    struct Wiring {
        QpTable& qps;
        PacketHandler& responder;
        PacketHandler& completer;
        pcie::HostBus& bus;
        const PortSet& ports;
        PathMigrator& migration;
    };

    RxPipeline(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w);

    // Port port_num delivers a whole packet at t; `buffered` when it came
    // over the link, so its receive-buffer space goes back to the sender as
    // flow-control credits once it has left the buffer.
    void receive(packet::PacketPtr pkt, sim::Tick t, unsigned port_num, bool buffered);
    // Packets to a multicast LID go to the adapter's group table.
    void set_multicast(MulticastReceiver* m) { m_multicast = m; }
    // hca.control_program: the packet passes run on the adapter's one
    // processor, between its other steps.
    void run_steps_on(sim::Timeline& processor) {
        m_passes.set_clock(&m_clock);
        m_passes.share(&processor, "receive");
        m_on_processor = true;
    }

private:
    // The packet's work on QP qp, its context on chip at t.
    void deliver(QpContext& qp, const packet::Parsed& p, const packet::PacketPtr& pkt, sim::Tick t);

    Wiring m_w;
    HcaParams m_p;
    // When each packet engine has passed its last packet; a packet goes to
    // engine destination QPN mod their number.
    std::vector<sim::Tick> m_engine_free;
    sim::Tick m_backlog_slack = 0;
    MulticastReceiver* m_multicast = nullptr;
    sim::Timeline m_passes;  // the passes on the processor (hca.control_program)
    bool m_on_processor = false;
    // Packets waiting for their QP's context to come on chip, by QP number,
    // and whether the context cache holds the context for them meanwhile.
    struct Waiting {
        std::uint32_t packets = 0;
        bool held = false;
        sim::Tick due = 0;        // when the last of them is handed on
        sim::Tick delivered = 0;  // the time the last handed on was delivered at
    };
    std::unordered_map<std::uint32_t, Waiting> m_waiting;
    // Hot counters, looked up once.
    std::uint64_t* m_n_packets = nullptr;
};

}  // namespace hcasim::hca
