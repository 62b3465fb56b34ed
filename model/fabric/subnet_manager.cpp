#include "model/fabric/subnet_manager.hpp"

#include <algorithm>
#include <sstream>

#include "model/packet/multicast.hpp"

namespace hcasim::fabric {

void declare_subnet_manager_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    const char* src = "scheduled subnet management: none by default";
    auto list = [&](const char* key, const char* meaning) {
        sim::ParamSpec p{key, K::Text, "", "", 0, 0, {}, meaning, src};
        p.list = true;
        r.add(p);
    };
    list("sm.lid_change", "nodeN@TIME (ns, us, ms or s): the SM gives node N's port a new LID then, reprograms the "
                          "switch and the port reports IBV_EVENT_LID_CHANGE; repeatable");
    list("sm.pkey_change", "nodeN@TIME: the SM adds partition 0x8001 to node N's P_Key table and the port reports "
                           "IBV_EVENT_PKEY_CHANGE; repeatable");
    list("sm.handover", "TIME: another SM becomes master (the SM LID moves to the last node's port) and every port "
                        "reports IBV_EVENT_SM_CHANGE; repeatable");
    list("sm.client_reregister", "TIME: the SM sets ClientReregister on every port, which reports "
                                 "IBV_EVENT_CLIENT_REREGISTER; repeatable");
    r.add({"sm.join_latency_us", sim::ParamSpec::Kind::Real, "us", "50", 0, 1e6, {},
           "multicast join or leave: from the host's MCMemberRecord request to the subnet administrator's answer, "
           "the switch's multicast forwarding table programmed in between",
           "estimate: two MAD crossings of a single-switch subnet (a few us) plus OpenSM's handling of the "
           "request and the switch update (tens of us)"});
    r.add({"sm.mcmember_handling_us", sim::ParamSpec::Kind::Real, "us", "45", 0, 1e6, {},
           "the SA's handling of an MCMemberRecord SET (join) or DELETE (leave) sent as a MAD (rdma_cm's joins): "
           "from the request's arrival to its answer, the switches' multicast forwarding tables programmed in "
           "between; the MADs' own crossings are modelled",
           "estimate: sm.join_latency_us less the two MAD crossings of a single-switch subnet"});
    r.add({"sm.packet_life_time", sim::ParamSpec::Kind::Int, "log2(4.096 us)", "18", 0, 31, {},
           "packet lifetime the SA puts in PathRecords: rdma_cm sets the QP's local ACK time-out one above it and "
           "the CM waits two lifetimes beyond the peer's response time",
           "OpenSM's default subnet packet_life_time (0x12, about 1.07 s)"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 60, "fabric.subnet_manager",
                                     declare_subnet_manager_params};

std::vector<ScheduledPortChange> scheduled_port_changes(const sim::Config& cfg, int nodes) {
    std::vector<ScheduledPortChange> out;
    struct Key {
        const char* key;
        PortChange what;
        bool per_node;
    };
    for (const Key k : {Key{"sm.lid_change", PortChange::Lid, true}, Key{"sm.pkey_change", PortChange::PkeyTable, true},
                        Key{"sm.handover", PortChange::SmLid, false},
                        Key{"sm.client_reregister", PortChange::ClientReregister, false}}) {
        std::stringstream all(cfg.get_text(k.key));
        for (std::string entry; std::getline(all, entry, ',');) {
            if (entry.empty()) continue;
            ScheduledPortChange c{k.what, -1, 0};
            bool ok = false;
            if (k.per_node) {
                ok = parse_node_at(entry, nodes, c.node, c.at);
            } else {
                ok = sim::parse_time_with_unit(entry, c.at);
            }
            if (!ok)
                throw sim::ConfigError("invalid value '" + sim::printable(entry) + "' for " + k.key + ": expected " +
                                       (k.per_node ? "nodeN@TIME with N below " + std::to_string(nodes) +
                                                         ", for example node1@100us"
                                                   : std::string("TIME, for example 100us")));
            out.push_back(c);
        }
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.at < b.at; });
    return out;
}

bool parse_node_at(const std::string& entry, int nodes, int& node, sim::Tick& at) {
    const std::size_t sep = entry.find('@');
    if (sep == std::string::npos || entry.rfind("node", 0) != 0 || sep <= 4 ||
        entry.find_first_not_of("0123456789", 4) != sep || sep - 4 > 6)
        return false;
    node = std::stoi(entry.substr(4, sep - 4));
    return node < nodes && sim::parse_time_with_unit(entry.substr(sep + 1), at);
}

std::uint16_t SubnetManager::reassign_lid(std::uint16_t old_lid) {
    std::uint16_t lid = static_cast<std::uint16_t>(*m_lids.rbegin() + 1);
    m_lids.erase(old_lid);
    m_lids.insert(lid);
    const auto it = m_ports.find(old_lid);
    if (it != m_ports.end()) {
        const Attachment a = it->second;
        m_ports.erase(it);
        a.sw->unroute(old_lid);
        connect(lid, *a.sw, a.port);
    }
    for (auto& [guid, r] : m_port_records)
        if (r.lid == old_lid) r.lid = lid;
    counter("lid_changes")++;
    return lid;
}

std::uint16_t SubnetManager::hand_over() {
    // The standby SM on the highest-LID port becomes master.
    m_sm_lid = m_sm_lid == *m_lids.rbegin() ? *m_lids.begin() : *m_lids.rbegin();
    counter("handovers")++;
    return m_sm_lid;
}

SubnetManager::SubnetManager(const sc_core::sc_module_name& name, const sim::Config& cfg)
    : sim::Block(name, sim::Clock("sm", 1e6)),  // a software agent: 1 us ticks
      m_join_latency(static_cast<sim::Tick>(cfg.get_real("sm.join_latency_us") * sim::kPsPerUs)),
      m_mcmember_handling(static_cast<sim::Tick>(cfg.get_real("sm.mcmember_handling_us") * sim::kPsPerUs)),
      m_packet_life(static_cast<std::uint8_t>(cfg.get_int("sm.packet_life_time"))) {}

void SubnetManager::record_port(std::uint64_t port_guid, std::uint16_t lid, std::uint32_t mtu_bytes) {
    std::uint8_t mtu = 1;  // IBA encoding: 256 bytes
    for (std::uint32_t b = 256; b < mtu_bytes && mtu < 5; b <<= 1) ++mtu;
    m_port_records[port_guid] = PortRecord{lid, mtu};
}

bool SubnetManager::path(const Gid& sgid, const Gid& dgid, Path& out) const {
    auto guid = [](const Gid& g) {
        std::uint64_t v = 0;
        for (int i = 8; i < 16; ++i) v = v << 8 | g[static_cast<std::size_t>(i)];
        return v;
    };
    auto s = m_port_records.find(guid(sgid));
    auto d = m_port_records.find(guid(dgid));
    if (s == m_port_records.end() || d == m_port_records.end()) return false;
    out = Path{s->second.lid, d->second.lid, 0, std::min(s->second.mtu, d->second.mtu), m_packet_life};
    return true;
}

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

SubnetManager::JoinResult SubnetManager::join(const Gid& mgid, std::uint16_t mlid, std::uint16_t port_lid,
                                               std::uint32_t qkey) {
    if (!packet::is_multicast_gid(mgid.data())) return {JoinStatus::BadMgid, 0};
    if (!packet::is_multicast_lid(mlid)) return {JoinStatus::BadMlid, 0};
    if (!m_lids.count(port_lid)) return {JoinStatus::UnknownPort, 0};
    auto it = m_groups.find(mgid);
    if (it == m_groups.end()) {
        if (m_mlids.count(mlid)) {
            counter("joins_refused")++;
            return {JoinStatus::MlidInUse, 0};
        }
        it = m_groups.emplace(mgid, Group{mlid, {}, qkey}).first;
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

std::uint32_t SubnetManager::qkey_of(const Gid& mgid) const {
    auto it = m_groups.find(mgid);
    return it == m_groups.end() ? 0 : it->second.qkey;
}

bool SubnetManager::is_member(const Gid& mgid, std::uint16_t port_lid) const {
    auto it = m_groups.find(mgid);
    return it != m_groups.end() && it->second.members.count(port_lid);
}

std::uint16_t SubnetManager::free_mlid() const {
    for (std::uint32_t l = packet::kMulticastLidFirst; l <= packet::kMulticastLidLast; ++l) {
        if (!m_mlids.count(static_cast<std::uint16_t>(l))) return static_cast<std::uint16_t>(l);
    }
    return 0;
}

std::uint8_t SubnetManager::port_mtu(std::uint16_t lid) const {
    for (const auto& [guid, rec] : m_port_records) {
        if (rec.lid == lid) return rec.mtu;
    }
    return 0;
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
