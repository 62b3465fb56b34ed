// The subnet manager and its subnet administrator (IBA 14, 15), simulated as
// one deterministic agent beside the fabric, not on any adapter. Its sweep
// gives each adapter port a LID (node i gets LID i + 1) and programs the
// switch's linear forwarding table; its SA answers multicast joins and leaves
// (MCMemberRecord SET and DELETE), binds one MLID to each MGID and programs
// the switch's multicast forwarding table with the ports of the members.
//
// A join or leave is a management round trip: the host's request reaches the
// SA, the SA programs the switch and answers. The host waits
// sm.join_latency_us for it (host/driver, attach_mcast); the tables change
// when the answer arrives, so no multicast packet reaches a port before the
// host knows it joined.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <map>
#include <set>
#include <vector>

#include "model/fabric/ib_switch.hpp"
#include "model/sim/block.hpp"
#include "model/sim/config.hpp"

namespace hcasim::fabric {

void declare_subnet_manager_params(sim::ParamRegistry& r);

// What the subnet manager changes in a port's PortInfo or P_Key table while
// the fabric runs (IBA 14.2.5.6, 14.4.11), each of which the port reports
// with an unaffiliated event.
enum class PortChange {
    Lid,               // the port gets a new LID (LID_CHANGE)
    PkeyTable,         // a partition is added to the port's P_Key table (PKEY_CHANGE)
    SmLid,             // another SM takes over as master: a new SM LID (SM_CHANGE)
    ClientReregister,  // the SM asks the port's clients to register again (CLIENT_REREGISTER)
};
struct ScheduledPortChange {
    PortChange what;
    int node;  // the node whose port changes; -1: every port
    sim::Tick at;
};
// The sm.lid_change, sm.pkey_change (nodeN@TIME), sm.handover and
// sm.client_reregister (TIME) entries, in time order; a malformed entry or
// one naming no node of the nodes is a ConfigError naming it.
std::vector<ScheduledPortChange> scheduled_port_changes(const sim::Config& cfg, int nodes);
// One nodeN@TIME entry of a schedule key: false unless N names one of the
// nodes and TIME is a time with its unit.
bool parse_node_at(const std::string& entry, int nodes, int& node, sim::Tick& at);

class SubnetManager : public sim::Block {
public:
    using Gid = std::array<std::uint8_t, 16>;

    SubnetManager(const sc_core::sc_module_name& name, const sim::Config& cfg);

    // The sweep: the LID of the port of node index (node i: LID i + 1).
    std::uint16_t assign_lid(int index);
    // A later sweep moves the port at old_lid to the next free LID and
    // reprograms the switch; returns the new LID.
    std::uint16_t reassign_lid(std::uint16_t old_lid);
    // The master SM's LID, as ports report it; a handover moves it.
    std::uint16_t sm_lid() const { return m_sm_lid; }
    std::uint16_t hand_over();
    // The port with this LID is cabled to port `port` of sw: unicast
    // packets to the LID leave sw there, and multicast to its groups too.
    void connect(std::uint16_t lid, IbSwitch& sw, int port);

    // What the SA answers a join with.
    enum class JoinStatus {
        Joined,
        BadMgid,        // not a multicast GID
        BadMlid,        // not a multicast LID
        MlidMismatch,   // the group exists with another MLID
        MlidInUse,      // another group has this MLID
        UnknownPort,    // no port has this LID
    };
    struct JoinResult {
        JoinStatus status;
        std::uint16_t mlid;  // the group's MLID (when it exists)
    };
    // Adds port_lid to the members of mgid. The first join creates the group
    // with the MLID it names (as OpenSM honours a requested MLID); later
    // joins must name the same one. Joining twice is one membership.
    // The group's creator sets its Q_Key.
    JoinResult join(const Gid& mgid, std::uint16_t mlid, std::uint16_t port_lid, std::uint32_t qkey = 0);
    // Removes port_lid from the members; the group and its MLID go when the
    // last member leaves. False when port_lid was not a member.
    bool leave(const Gid& mgid, std::uint16_t port_lid);

    // What the sweep read from a port's NodeInfo and PortInfo: the SA's
    // PathRecords are built from it.
    void record_port(std::uint64_t port_guid, std::uint16_t lid, std::uint32_t mtu_bytes);
    struct Path {
        std::uint16_t slid, dlid;
        std::uint8_t sl;
        std::uint8_t mtu;          // IBA encoding: the smaller of the two ports'
        std::uint8_t packet_life;  // sm.packet_life_time
    };
    // The path between the ports whose GUIDs end the two GIDs; false when
    // either is unknown.
    bool path(const Gid& sgid, const Gid& dgid, Path& out) const;

    // The MLID bound to mgid, 0 when there is no such group.
    std::uint16_t mlid_of(const Gid& mgid) const;
    // The Q_Key its creator gave the group (0 when there is no such group).
    std::uint32_t qkey_of(const Gid& mgid) const;
    bool is_member(const Gid& mgid, std::uint16_t port_lid) const;
    // The lowest MLID no group has, for a group created without one as the
    // SA assigns them; 0 when every MLID is taken.
    std::uint16_t free_mlid() const;
    // The port's MTU (IBA encoding) as the sweep read it; 0 for no such LID.
    std::uint8_t port_mtu(std::uint16_t lid) const;
    std::uint8_t packet_life_time() const { return m_packet_life; }
    // How long the SA takes over an MCMemberRecord SET or DELETE before it
    // answers, the switches reprogrammed meanwhile.
    sim::Tick mcmember_handling() const { return m_mcmember_handling; }
    std::size_t groups() const { return m_groups.size(); }
    // The time a host waits for the SA's answer to a join or leave.
    sim::Tick join_latency() const { return m_join_latency; }

    static const char* to_string(JoinStatus s);

private:
    struct Group {
        std::uint16_t mlid = 0;
        std::set<std::uint16_t> members;  // port LIDs
        std::uint32_t qkey = 0;
    };
    struct Attachment {
        IbSwitch* sw;
        int port;
    };
    // Writes the group's entry into every switch's multicast forwarding table.
    void program_switches(const Group& g);

    sim::Tick m_join_latency;
    sim::Tick m_mcmember_handling;
    std::uint8_t m_packet_life;
    struct PortRecord {
        std::uint16_t lid;
        std::uint8_t mtu;
    };
    std::map<std::uint64_t, PortRecord> m_port_records;  // by port GUID
    std::set<std::uint16_t> m_lids;               // assigned by the sweep
    std::uint16_t m_sm_lid = 1;                   // the master SM runs on node 0's host
    std::map<std::uint16_t, Attachment> m_ports;  // port LID -> where it is cabled
    std::vector<IbSwitch*> m_switches;            // in the order the sweep found them
    std::map<Gid, Group> m_groups;
    std::map<std::uint16_t, Gid> m_mlids;  // MLID -> its group
};

}  // namespace hcasim::fabric
