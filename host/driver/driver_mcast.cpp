// Multicast in the driver core: attaching UD QPs to groups in the adapter's
// group table (a firmware command each) and the port's membership of the
// groups at the subnet administrator (an MCMemberRecord join when the first
// QP of the port attaches, a leave when the last one detaches).
#include <cerrno>

#include "host/driver/driver.hpp"
#include "model/fabric/subnet_manager.hpp"
#include "model/packet/multicast.hpp"

namespace hcasim::host {

namespace {

bool valid_group(const Driver::Gid& mgid, std::uint16_t mlid) {
    return packet::is_multicast_gid(mgid.data()) && packet::is_multicast_lid(mlid);
}

}  // namespace

int Driver::sa_join(const Gid& mgid, std::uint16_t mlid) {
    if (!m_sm) return ENODEV;  // no subnet manager answers
    if (m_sm->join_latency()) sc_core::wait(sim::to_sc(m_sm->join_latency()));
    const fabric::SubnetManager::JoinResult r = m_sm->join(mgid, mlid, m_hca.port().lid());
    if (r.status == fabric::SubnetManager::JoinStatus::Joined) return 0;
    HCASIM_LOG(sim::LogLevel::Info, m_hca.name(), "multicast join with MLID " << mlid << " refused by the SA: "
                                                   << fabric::SubnetManager::to_string(r.status));
    return EINVAL;
}

void Driver::sa_leave(const Gid& mgid) {
    if (!m_sm) return;
    if (m_sm->join_latency()) sc_core::wait(sim::to_sc(m_sm->join_latency()));
    m_sm->leave(mgid, m_hca.port().lid());
}

int Driver::attach_mcast(DriverQp& qp, const Gid& mgid, std::uint16_t mlid) {
    control_call();
    if (qp.vi || qp.type != hca::QpType::Ud || !valid_group(mgid, mlid)) return EINVAL;
    auto it = m_mcast.find(mgid);
    if (it != m_mcast.end()) {
        // The port is a member under the group's one MLID.
        if (it->second.mlid != mlid) return EINVAL;
        // Attached already: the QP still receives one copy of each packet.
        if (it->second.qps.count(qp.qpn)) return 0;
    }
    const bool joined_now = it == m_mcast.end();
    // A port that holds the group through join_group (rdma_cm) is a member
    // already; otherwise the first attach joins.
    const bool own_join = joined_now && !port_group_held(mgid);
    if (joined_now) {
        if (own_join) {
            if (const int err = sa_join(mgid, mlid)) return err;
        }
        it = m_mcast.emplace(mgid, McastMembership{mlid, {}, own_join}).first;
    }
    int err = 0;
    switch (m_fw.attach_mcast(mgid, qp.qpn)) {
    case firmware::CommandInterface::McastStatus::Ok:
        it->second.qps.insert(qp.qpn);
        return 0;
    case firmware::CommandInterface::McastStatus::TableFull:
    case firmware::CommandInterface::McastStatus::GroupFull: err = ENOMEM; break;
    case firmware::CommandInterface::McastStatus::NoUdQp:
    case firmware::CommandInterface::McastStatus::NotAttached: err = EINVAL; break;
    }
    // The adapter has no room: the port takes back the join it just made.
    if (joined_now) {
        if (own_join) sa_leave(mgid);
        m_mcast.erase(it);
    }
    return err;
}

int Driver::detach_mcast(DriverQp& qp, const Gid& mgid, std::uint16_t mlid) {
    control_call();
    if (qp.vi || qp.type != hca::QpType::Ud || !valid_group(mgid, mlid)) return EINVAL;
    auto it = m_mcast.find(mgid);
    if (it == m_mcast.end() || !it->second.qps.count(qp.qpn)) return EINVAL;
    m_fw.detach_mcast(mgid, qp.qpn);
    it->second.qps.erase(qp.qpn);
    if (it->second.qps.empty()) {
        if (it->second.own_join && !port_group_held(mgid)) sa_leave(mgid);
        m_mcast.erase(it);
    }
    return 0;
}

std::size_t Driver::mcast_attachments(std::uint32_t qpn) const {
    std::size_t n = 0;
    for (const auto& [gid, m] : m_mcast) n += m.qps.count(qpn);
    return n;
}

}  // namespace hcasim::host
