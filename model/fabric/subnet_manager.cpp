#include "model/fabric/subnet_manager.hpp"

#include <algorithm>

#include "model/packet/multicast.hpp"

namespace hcasim::fabric {

void declare_subnet_manager_params(sim::ParamRegistry& r) {
    r.add({"sm.join_latency_us", sim::ParamSpec::Kind::Real, "us", "50", 0, 1e6, {},
           "multicast join or leave: from the host's MCMemberRecord request to the subnet administrator's answer, "
           "the switch's multicast forwarding table programmed in between",
           "estimate: two MAD crossings of a single-switch subnet (a few us) plus OpenSM's handling of the "
           "request and the switch update (tens of us)"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 60, "fabric.subnet_manager",
                                     declare_subnet_manager_params};

SubnetManager::SubnetManager(const sc_core::sc_module_name& name, const sim::Config& cfg)
    : sim::Block(name, sim::Clock("sm", 1e6)),  // a software agent: 1 us ticks
      m_join_latency(static_cast<sim::Tick>(cfg.get_real("sm.join_latency_us") * sim::kPsPerUs)) {}

std::uint16_t SubnetManager::assign_lid(int index) {
    const auto lid = static_cast<std::uint16_t>(index + 1);
    m_lids.insert(lid);
    return lid;
}

void SubnetManager::connect(std::uint16_t lid, IbSwitch& sw, int port) {
    m_ports[lid] = Attachment{&sw, port};
    if (std::find(m_switches.begin(), m_switches.end(), &sw) == m_switches.end()) m_switches.push_back(&sw);
    sw.route(lid, port);
}

const char* SubnetManager::to_string(JoinStatus s) {
    switch (s) {
    case JoinStatus::Joined: return "joined";
    case JoinStatus::BadMgid: return "not a multicast GID";
    case JoinStatus::BadMlid: return "not a multicast LID";
    case JoinStatus::MlidMismatch: return "the group has another MLID";
    case JoinStatus::MlidInUse: return "the MLID belongs to another group";
    case JoinStatus::UnknownPort: return "no port has this LID";
    }
    return "?";
}

SubnetManager::JoinResult SubnetManager::join(const Gid& mgid, std::uint16_t mlid, std::uint16_t port_lid) {
    if (!packet::is_multicast_gid(mgid.data())) return {JoinStatus::BadMgid, 0};
    if (!packet::is_multicast_lid(mlid)) return {JoinStatus::BadMlid, 0};
    if (!m_lids.count(port_lid)) return {JoinStatus::UnknownPort, 0};
    auto it = m_groups.find(mgid);
    if (it == m_groups.end()) {
        if (m_mlids.count(mlid)) {
            counter("joins_refused")++;
            return {JoinStatus::MlidInUse, 0};
        }
        it = m_groups.emplace(mgid, Group{mlid, {}}).first;
        m_mlids[mlid] = mgid;
        counter("groups_created")++;
    } else if (it->second.mlid != mlid) {
        counter("joins_refused")++;
        return {JoinStatus::MlidMismatch, it->second.mlid};
    }
    counter("joins")++;
    if (it->second.members.insert(port_lid).second) program_switches(it->second);
    return {JoinStatus::Joined, mlid};
}

bool SubnetManager::leave(const Gid& mgid, std::uint16_t port_lid) {
    auto it = m_groups.find(mgid);
    if (it == m_groups.end() || !it->second.members.erase(port_lid)) return false;
    counter("leaves")++;
    program_switches(it->second);
    if (it->second.members.empty()) {
        m_mlids.erase(it->second.mlid);
        m_groups.erase(it);
        counter("groups_deleted")++;
    }
    return true;
}

std::uint16_t SubnetManager::mlid_of(const Gid& mgid) const {
    auto it = m_groups.find(mgid);
    return it == m_groups.end() ? 0 : it->second.mlid;
}

void SubnetManager::program_switches(const Group& g) {
    for (IbSwitch* sw : m_switches) {
        std::set<int> ports;
        for (const std::uint16_t lid : g.members) {
            auto p = m_ports.find(lid);
            if (p != m_ports.end() && p->second.sw == sw) ports.insert(p->second.port);
        }
        sw->set_multicast_ports(g.mlid, ports);
    }
}

}  // namespace hcasim::fabric
