#include "model/hca/multicast_table.hpp"

#include <algorithm>

#include "model/packet/multicast.hpp"
#include "model/packet/opcode_table.hpp"

namespace hcasim::hca {

void declare_multicast_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    r.add({"hca.max_mcast_grp", K::Int, "count", "8192", 1, 1 << 24, {},
           "multicast groups the adapter's group table holds (ibv_query_device max_mcast_grp)",
           "ConnectX-3 ibv_devinfo -v values"});
    r.add({"hca.max_mcast_qp_attach", K::Int, "count", "248", 1, 1 << 16, {},
           "QPs attached to one multicast group (max_mcast_qp_attach; max_total_mcast_qp_attach is the product "
           "with hca.max_mcast_grp)",
           "ConnectX-3 ibv_devinfo -v values (a 1 KiB group entry holds 248 QP numbers)"});
    r.add_per_node({"hca.mcast_lookup_cycles", K::Int, "cycles", "8", 0, 100000, {},
           "receive-side multicast steering: find the group of a packet's DGID in the group table",
           "estimate: a hash of the MGID and one on-chip table read, as hca.wqe_parse_cycles"});
    r.add_per_node({"hca.mcast_qp_cycles", K::Int, "cycles", "4", 0, 100000, {},
           "receive-side multicast steering: hand the packet to one more attached QP",
           "estimate: read one QP number of the group entry and start the responder on it"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 25, "hca.multicast", declare_multicast_params};

MulticastTable::MulticastTable(const sc_core::sc_module_name& name, const sim::Config& cfg, double core_clock_mhz,
                               Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", core_clock_mhz)),
      m_w(w),
      m_max_groups(static_cast<std::uint32_t>(cfg.get_int("hca.max_mcast_grp"))),
      m_max_qps_per_group(static_cast<std::uint32_t>(cfg.get_int("hca.max_mcast_qp_attach"))),
      m_lookup_cycles(static_cast<std::uint64_t>(cfg.get_int("hca.mcast_lookup_cycles"))),
      m_qp_cycles(static_cast<std::uint64_t>(cfg.get_int("hca.mcast_qp_cycles"))),
      m_steering(&m_clock) {}

MulticastTable::Attach MulticastTable::attach(const Gid& mgid, std::uint32_t qpn) {
    auto it = m_groups.find(mgid);
    if (it == m_groups.end()) {
        if (m_groups.size() >= m_max_groups) return Attach::TableFull;
        m_groups[mgid].push_back(qpn);
        return Attach::Attached;
    }
    std::vector<std::uint32_t>& qps = it->second;
    if (std::find(qps.begin(), qps.end(), qpn) != qps.end()) return Attach::AlreadyAttached;
    if (qps.size() >= m_max_qps_per_group) return Attach::GroupFull;
    qps.push_back(qpn);
    return Attach::Attached;
}

bool MulticastTable::detach(const Gid& mgid, std::uint32_t qpn) {
    auto it = m_groups.find(mgid);
    if (it == m_groups.end()) return false;
    std::vector<std::uint32_t>& qps = it->second;
    auto q = std::find(qps.begin(), qps.end(), qpn);
    if (q == qps.end()) return false;
    qps.erase(q);
    // The entry is free for another group once its last QP has gone.
    if (qps.empty()) m_groups.erase(it);
    return true;
}

const std::vector<std::uint32_t>* MulticastTable::members(const std::uint8_t* mgid) const {
    Gid key;
    std::copy(mgid, mgid + key.size(), key.begin());
    auto it = m_groups.find(key);
    return it == m_groups.end() ? nullptr : &it->second;
}

void MulticastTable::deliver(const packet::Parsed& p, const packet::PacketPtr& pkt, const std::uint8_t* payload,
                             sim::Tick t) {
    // A multicast packet names its group in a GRH and carries DestQP
    // 0xFFFFFF (IBA 9.6.1.2); only datagrams are multicast.
    if (!p.h.grh || !packet::is_multicast_gid(p.h.grh->dgid)) {
        counter("dropped_no_multicast_gid")++;
        return;
    }
    if (p.h.bth.dest_qp != packet::kMulticastQpn) {
        counter("dropped_bad_dest_qp")++;
        return;
    }
    const packet::OpcodeInfo& info = packet::opcode_info(p.h.bth.opcode);
    if (!(info.qp_types & packet::kQpUd)) {
        counter("dropped_not_datagram")++;
        return;
    }
    const std::vector<std::uint32_t>* qps = members(p.h.grh->dgid);
    sim::Tick at = m_steering.reserve(t, m_lookup_cycles).end;
    if (!qps) {
        // Not a group of this adapter's (a switch floods no port that did
        // not join, but a peer cabled back to back sends every group).
        counter("dropped_no_members")++;
        return;
    }
    counter("packets")++;
    for (const std::uint32_t qpn : *qps) {
        at = m_steering.reserve(at, m_qp_cycles).end;
        const QpAccess found = m_w.qps.context(qpn, at);
        QpContext* qp = found.qp;
        if (!qp) {
            counter("dropped_qp_gone")++;
            continue;
        }
        at = found.ready;
        counter("qp_copies")++;
        // The packet stays alive until the payload writes of every copy land.
        m_w.responder.handle(*qp, p, pkt, payload, at);
    }
}

}  // namespace hcasim::hca
