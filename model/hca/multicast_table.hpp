// The adapter's multicast group table and receive-side multicast steering
// (the MCG table of ConnectX-class adapters): which local UD QPs are attached
// to which multicast GID, written only by the firmware's attach and detach
// commands, and the unit that hands each multicast packet the receive
// pipeline accepts to every QP attached to its group. Each copy then takes
// the normal UD responder path (Q_Key, receive WQE, GRH area, CQE).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "model/hca/transport_interfaces.hpp"
#include "model/packet/packet.hpp"
#include "model/sim/block.hpp"
#include "model/sim/config.hpp"

namespace hcasim::hca {

void declare_multicast_params(sim::ParamRegistry& r);

// The receive pipeline's view: a packet whose DLID is a multicast LID, after
// its parse and checks; t is when the pipeline is done with it.
class MulticastReceiver {
public:
    virtual ~MulticastReceiver() = default;
    virtual void deliver(const packet::Parsed& p, const packet::PacketPtr& pkt, const std::uint8_t* payload,
                         sim::Tick t) = 0;
};

class MulticastTable final : public sim::Block, public MulticastReceiver {
public:
    // hca.control_program: this block's steps run on the adapter's one processor.
    void run_steps_on(sim::Timeline& processor) { m_steering.share(&processor, "multicast steering"); }
    using Gid = std::array<std::uint8_t, 16>;
    struct Wiring {
        QpTable& qps;
        PacketHandler& responder;
    };
    enum class Attach { Attached, AlreadyAttached, TableFull, GroupFull };

    MulticastTable(const sc_core::sc_module_name& name, const sim::Config& cfg, double core_clock_mhz, Wiring w);

    // Firmware commands. A QP attached twice stays attached once (it receives
    // one copy of each packet).
    Attach attach(const Gid& mgid, std::uint32_t qpn);
    // False when qpn is not attached to mgid.
    bool detach(const Gid& mgid, std::uint32_t qpn);

    // The QPs attached to the group, in the order they were attached; null
    // when none is.
    const std::vector<std::uint32_t>* members(const std::uint8_t* mgid) const;
    std::size_t groups() const { return m_groups.size(); }
    std::uint32_t max_groups() const { return m_max_groups; }
    std::uint32_t max_qps_per_group() const { return m_max_qps_per_group; }

    void deliver(const packet::Parsed& p, const packet::PacketPtr& pkt, const std::uint8_t* payload,
                 sim::Tick t) override;

private:
    Wiring m_w;
    std::uint32_t m_max_groups;
    std::uint32_t m_max_qps_per_group;
    std::uint64_t m_lookup_cycles;
    std::uint64_t m_qp_cycles;
    sim::Timeline m_steering;
    std::map<Gid, std::vector<std::uint32_t>> m_groups;
};

}  // namespace hcasim::hca
