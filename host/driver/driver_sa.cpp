// The subnet administrator's side of the management datagrams hosts send
// it, and the driver's MCMemberRecord client.
//  - The SA runs on the master SM's node. It answers a PathRecord GET from
//    the ports the sweep recorded, at once, and an MCMemberRecord SET (join)
//    or DELETE (leave) after sm.mcmember_handling_us, the switches' multicast
//    forwarding tables programmed meanwhile. A group created without an MLID
//    gets the lowest free one; its creator, a full member, sets its Q_Key.
//  - The client joins a group for the port once, as the kernel's SA
//    multicast client does: later joins share the answer, the last leave
//    sends the DELETE, and a port event that may have cost the membership
//    (client reregistration, LID change, port down) loses every group.
#include <cerrno>
#include <utility>
#include <vector>

#include "host/driver/driver.hpp"
#include "host/driver/mgmt_query.hpp"
#include "model/fabric/subnet_manager.hpp"
#include "model/packet/sa_mad.hpp"

namespace hcasim::host {

namespace {

namespace sa = packet::sa;

// How long the client waits for the SA's answer to a SET or DELETE: the
// kernel's SA multicast client's query time-out.
constexpr sim::Tick kGroupQueryTimeout = 3000 * sim::kPsPerMs;

// The SA's answer to a join: 0 and the group's record in out, or the MAD
// status of its refusal.
std::uint16_t join_member(fabric::SubnetManager& sm, std::uint16_t slid, std::uint64_t mask,
                          const sa::McMemberRecord& r, sa::McMemberRecord& out) {
    namespace m = sa::mcmember_mask;
    if (!(mask & m::kMgid) || !(mask & m::kPortGid) || !(mask & m::kJoinState) || r.join_state == 0)
        return sa::kStatusInsufficientComponents;
    std::uint16_t mlid = sm.mlid_of(r.mgid);
    if (!mlid) {
        if (!(r.join_state & sa::kJoinFullMember)) return sa::kStatusReqInvalid;  // only a full member creates
        mlid = (mask & m::kMlid) && r.mlid ? r.mlid : sm.free_mlid();
        if (!mlid) return sa::kStatusNoResources;
    } else {
        if ((mask & m::kMlid) && r.mlid && r.mlid != mlid) return sa::kStatusReqInvalid;
        if ((mask & m::kQkey) && r.qkey != sm.qkey_of(r.mgid)) return sa::kStatusReqInvalid;
    }
    if (sm.join(r.mgid, mlid, slid, (mask & m::kQkey) ? r.qkey : 0).status != fabric::SubnetManager::JoinStatus::Joined)
        return sa::kStatusReqInvalid;
    out = r;
    out.mlid = mlid;
    out.qkey = sm.qkey_of(r.mgid);
    out.pkey = 0xffff;
    out.mtu_selector = static_cast<std::uint8_t>(sa::Selector::Exactly);
    out.mtu = sm.port_mtu(slid);
    out.rate_selector = static_cast<std::uint8_t>(sa::Selector::Exactly);
    out.packet_life_time_selector = static_cast<std::uint8_t>(sa::Selector::Exactly);
    out.packet_life_time = sm.packet_life_time();
    out.sl = 0;
    out.scope = r.mgid[1] & 0xf;
    return 0;
}

}  // namespace

void Driver::answer_sa(std::uint16_t slid, const sa::Mad& req) {
    if (const auto* want = std::get_if<sa::PathRecord>(&req.record)) {
        if (req.method != sa::kMethodGet) return;
        sa::Mad resp;
        resp.method = sa::kMethodGetResp;
        resp.transaction_id = req.transaction_id;
        sa::PathRecord r;
        fabric::SubnetManager::Path p{};
        if (m_sm->path(want->sgid, want->dgid, p)) {
            r.sgid = want->sgid;
            r.dgid = want->dgid;
            r.slid = p.slid;
            r.dlid = p.dlid;
            r.pkey = 0xffff;
            r.sl = p.sl;
            r.mtu_selector = static_cast<std::uint8_t>(sa::Selector::Exactly);
            r.mtu = p.mtu;
            r.rate_selector = static_cast<std::uint8_t>(sa::Selector::Exactly);
            r.packet_life_time_selector = static_cast<std::uint8_t>(sa::Selector::Exactly);
            r.packet_life_time = p.packet_life;
            r.reversible = true;
            r.numb_path = 1;
        } else {
            resp.status = sa::kStatusNoRecords;
        }
        resp.record = r;
        std::uint8_t out[sa::kMadBytes];
        sa::encode(resp, out);
        m_cm->send_mad(out, slid, sim::now_ps());
        return;
    }
    if (req.method != sa::kMethodSet && req.method != sa::kMethodDelete) return;
    auto held = std::make_shared<const sa::Mad>(req);
    m_hca.completion().at(sim::now_ps() + m_sm->mcmember_handling(), [this, slid, held]() {
        const sa::Mad& req = *held;
        const auto& r = std::get<sa::McMemberRecord>(req.record);
        sa::Mad resp;
        resp.transaction_id = req.transaction_id;
        resp.component_mask = req.component_mask;
        sa::McMemberRecord rec = r;
        if (req.method == sa::kMethodDelete) {
            resp.method = sa::kMethodDeleteResp;
            if (!(req.component_mask & sa::mcmember_mask::kMgid) || !m_sm->leave(r.mgid, slid))
                resp.status = sa::kStatusReqInvalid;
        } else {
            resp.method = sa::kMethodGetResp;
            resp.status = join_member(*m_sm, slid, req.component_mask, r, rec);
        }
        resp.record = rec;
        std::uint8_t out[sa::kMadBytes];
        sa::encode(resp, out);
        m_cm->send_mad(out, slid, sim::now_ps());
    });
}

bool Driver::port_group_held(const Gid& mgid) const {
    auto it = m_port_groups.find(mgid);
    return it != m_port_groups.end() && it->second.joined;
}

std::uint64_t Driver::join_group(const Gid& mgid, std::uint32_t qkey,
                                 std::function<void(int err, const McastGroup& g)> done, std::function<void()> lost) {
    const std::uint64_t token = ++m_next_group_token;
    m_group_tokens[token] = mgid;
    auto [it, fresh] = m_port_groups.try_emplace(mgid);
    PortGroup& pg = it->second;
    if (pg.joined) {
        // The port is a member already: the answer is the one it has.
        pg.holders[token] = {nullptr, std::move(lost)};
        after_interrupt([done = std::move(done), g = pg.group]() { done(0, g); });
        return token;
    }
    pg.holders[token] = {std::move(done), std::move(lost)};
    if (!fresh) return token;  // the SET in flight answers this one too

    auto q = std::make_shared<MgmtQuery>();
    q->tid = ++m_next_tid;
    q->dlid = m_hca.port().sm_lid();
    sa::Mad m;
    m.method = sa::kMethodSet;
    m.transaction_id = q->tid;
    sa::McMemberRecord r;
    r.mgid = mgid;
    r.port_gid = m_hca.port().gids().at(0);
    r.qkey = qkey;
    r.pkey = 0xffff;
    r.join_state = sa::kJoinFullMember;
    // The fields the kernel's rdma_cm names in its join.
    namespace mm = sa::mcmember_mask;
    m.component_mask = mm::kMgid | mm::kPortGid | mm::kQkey | mm::kPkey | mm::kSl | mm::kFlowLabel |
                       mm::kTrafficClass | mm::kJoinState;
    m.record = r;
    sa::encode(m, q->mad);
    q->deadline = sim::now_ps() + kGroupQueryTimeout;
    q->answer = [this, mgid](int err, std::uint16_t, const std::uint8_t* mad, std::uint32_t len) {
        McastGroup g;
        if (!err) {
            sa::Mad resp;
            if (!sa::decode(mad, len, resp) || resp.status != 0 ||
                !std::holds_alternative<sa::McMemberRecord>(resp.record)) {
                err = EINVAL;
            } else {
                const auto& rec = std::get<sa::McMemberRecord>(resp.record);
                g.mgid = rec.mgid;
                g.mlid = rec.mlid;
                g.qkey = rec.qkey;
                g.pkey = rec.pkey;
                g.sl = rec.sl;
                g.mtu = rec.mtu;
                g.rate = rec.rate;
                g.traffic_class = rec.traffic_class;
                g.hop_limit = rec.hop_limit;
                g.flow_label = rec.flow_label;
            }
        }
        auto it = m_port_groups.find(mgid);
        if (it == m_port_groups.end() || it->second.joined) {
            // Everyone left before the answer: the port leaves again.
            if (!err && it == m_port_groups.end()) send_group_leave(mgid);
            return;
        }
        std::vector<std::function<void(int, const McastGroup&)>> answers;
        for (auto& [token, h] : it->second.holders) {
            if (h.done) answers.push_back(std::move(h.done));
            h.done = nullptr;
            if (err) m_group_tokens.erase(token);
        }
        if (err) {
            m_port_groups.erase(it);
        } else {
            it->second.joined = true;
            it->second.group = g;
        }
        for (auto& a : answers) a(err, g);
    };
    send_query(q);
    return token;
}

void Driver::leave_group(std::uint64_t token) {
    auto t = m_group_tokens.find(token);
    if (t == m_group_tokens.end()) return;
    const Gid mgid = t->second;
    m_group_tokens.erase(t);
    auto it = m_port_groups.find(mgid);
    if (it == m_port_groups.end()) return;
    it->second.holders.erase(token);
    if (!it->second.holders.empty()) return;
    const bool joined = it->second.joined;
    m_port_groups.erase(it);
    // A QP attached with its own join still holds the membership; a SET in
    // flight leaves when its answer comes.
    auto own = m_mcast.find(mgid);
    if (joined && !(own != m_mcast.end() && own->second.own_join)) send_group_leave(mgid);
}

void Driver::send_group_leave(const Gid& mgid) {
    auto q = std::make_shared<MgmtQuery>();
    q->tid = ++m_next_tid;
    q->dlid = m_hca.port().sm_lid();
    sa::Mad m;
    m.method = sa::kMethodDelete;
    m.transaction_id = q->tid;
    sa::McMemberRecord r;
    r.mgid = mgid;
    r.port_gid = m_hca.port().gids().at(0);
    r.join_state = sa::kJoinFullMember;
    namespace mm = sa::mcmember_mask;
    m.component_mask = mm::kMgid | mm::kPortGid | mm::kJoinState;
    m.record = r;
    sa::encode(m, q->mad);
    q->deadline = sim::now_ps() + kGroupQueryTimeout;
    q->answer = [](int, std::uint16_t, const std::uint8_t*, std::uint32_t) {};  // nobody waits for a leave
    send_query(q);
}

void Driver::lose_groups() {
    std::vector<std::function<void()>> lost;
    for (auto it = m_port_groups.begin(); it != m_port_groups.end();) {
        if (!it->second.joined) {
            ++it;
            continue;
        }
        for (auto& [token, h] : it->second.holders) {
            if (h.lost) lost.push_back(std::move(h.lost));
            m_group_tokens.erase(token);
        }
        it = m_port_groups.erase(it);
    }
    for (auto& f : lost) f();
}

}  // namespace hcasim::host
