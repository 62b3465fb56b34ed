// The firmware's multicast group commands (ConnectX's MCG table commands):
// one mailbox command each, as a real attach reads and writes the group's
// table entry in firmware.
#include "firmware/command_interface.hpp"

namespace hcasim::firmware {

CommandInterface::McastStatus CommandInterface::attach_mcast(const hca::MulticastTable::Gid& mgid, std::uint32_t qpn) {
    execute();
    const hca::QpContext* qp = m_hca.qp(qpn);
    if (!qp || qp->qpc.type != hca::QpType::Ud) return McastStatus::NoUdQp;
    switch (m_hca.multicast().attach(mgid, qpn)) {
    case hca::MulticastTable::Attach::Attached:
    case hca::MulticastTable::Attach::AlreadyAttached: return McastStatus::Ok;
    case hca::MulticastTable::Attach::TableFull: return McastStatus::TableFull;
    case hca::MulticastTable::Attach::GroupFull: return McastStatus::GroupFull;
    }
    return McastStatus::TableFull;
}

CommandInterface::McastStatus CommandInterface::detach_mcast(const hca::MulticastTable::Gid& mgid, std::uint32_t qpn) {
    execute();
    return m_hca.multicast().detach(mgid, qpn) ? McastStatus::Ok : McastStatus::NotAttached;
}

}  // namespace hcasim::firmware
