// IPoIB addressing and the two management clients rdma_cm stands on:
//  - neighbour resolution: an IPoIB ARP request (RFC 4391) for an address
//    of the subnet, answered by the host that owns it with its QPN and GID;
//  - path resolution: a PathRecord GET to the subnet administrator, which
//    runs on the master SM's node, answered with a GetResp.
// Both travel as management datagrams between the adapters' QP1s (the CM
// agent's), through the same ports, links and switches as data, and are
// handled by the agent at each end (fw.cm_processing_us each). An ARP
// request goes straight to the owner's port instead of being broadcast on
// the IPoIB group: only the owner answers a broadcast ARP, so the answer
// takes the same path and time. Answers are cached for the run, as a
// neighbour entry stays usable.
#include <arpa/inet.h>

#include <cstring>
#include <sstream>

#include "host/driver/driver.hpp"
#include "host/driver/mgmt_query.hpp"
#include "model/fabric/subnet_manager.hpp"
#include "model/packet/ipoib_arp.hpp"
#include "model/packet/sa_mad.hpp"

namespace hcasim::host {

namespace {

void declare_ipoib_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    r.add({"ipoib.subnet", K::Text, "", "192.168.0.0/16", 0, 0, {},
           "IPoIB subnet of the hosts' ib0 interfaces: node N has address N + 1 in it and host name nodeN",
           "a private IPv4 range large enough for any fabric.nodes"});
    r.add({"ipoib.arp_retrans_ms", K::Real, "ms", "1000", 0.001, 1e6, {},
           "time between IPoIB ARP requests for an address that has not answered",
           "Linux neighbour default retrans_time_ms (1 s)"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kHost + 40, "host.ipoib", declare_ipoib_params};

// The QPN an IPoIB interface sends from and receives on (its UD QP).
constexpr std::uint32_t kIpoibQpn = 0x48;

}  // namespace

IpSubnet parse_ip_subnet(const std::string& text, int hosts) {
    IpSubnet s;
    const auto slash = text.find('/');
    in_addr a{};
    int len = -1;
    if (slash != std::string::npos && inet_pton(AF_INET, text.substr(0, slash).c_str(), &a) == 1) {
        const std::string l = text.substr(slash + 1);
        if (!l.empty() && l.size() <= 2 && l.find_first_not_of("0123456789") == std::string::npos) len = std::stoi(l);
    }
    if (len < 1 || len > 30)
        throw sim::ConfigError("invalid value '" + sim::printable(text) +
                               "' for ipoib.subnet: expected A.B.C.D/N with N from 1 to 30, for example 192.168.0.0/16");
    s.prefix_len = len;
    const std::uint32_t mask = ~std::uint32_t{0} << (32 - len);
    s.network = ntohl(a.s_addr) & mask;
    // Addresses 1 to hosts; the last of the subnet is its broadcast address.
    if (static_cast<std::uint64_t>(hosts) + 2 > (std::uint64_t{1} << (32 - len)))
        throw sim::ConfigError("ipoib.subnet " + text + " has no room for " + std::to_string(hosts) +
                               " hosts: use a shorter prefix");
    return s;
}

void Driver::set_ip(const IpSubnet* subnet, std::uint32_t ip, std::string hostname) {
    m_subnet = subnet;
    m_ip = ip;
    m_hostname = std::move(hostname);
    if (m_cm) {
        m_cm->on_other_class([this](std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len, sim::Tick t) {
            return management_datagram(slid, mad, len, t);
        });
    }
}

void Driver::send_query(std::shared_ptr<MgmtQuery> q) {
    m_queries[q->tid] = q;
    const sim::Tick now = sim::now_ps();
    m_cm->send_mad(q->mad, q->dlid, now);
    auto& timer = m_hca.completion();
    if (!q->armed) {
        q->armed = true;
        timer.at(q->deadline, [this, q]() {
            if (q->done) return;
            q->done = true;
            m_queries.erase(q->tid);
            q->answer(ETIMEDOUT, 0, nullptr, 0);
        });
    }
    if (q->retrans && now + q->retrans < q->deadline) {
        timer.at(now + q->retrans, [this, q]() {
            if (!q->done) send_query(q);
        });
    }
}

void Driver::resolve_neighbour(std::uint32_t ip, sim::Tick timeout,
                               std::function<void(int err, std::uint16_t lid, const Gid& gid)> done) {
    const Gid own = m_hca.port().gids().at(0);
    if (ip == m_ip || (ip >> 24) == 127) {
        after_interrupt([done, lid = m_hca.port().lid(), own]() { done(0, lid, own); });
        return;
    }
    auto cached = m_neighbours.find(ip);
    if (cached != m_neighbours.end()) {
        after_interrupt([done, entry = cached->second]() { done(0, entry.first, entry.second); });
        return;
    }
    const IpSubnet::Host* owner = m_subnet ? m_subnet->by_ip(ip) : nullptr;
    auto q = std::make_shared<MgmtQuery>();
    q->tid = ++m_next_tid;
    // Nobody owns the address: the request reaches every port and none
    // answers (sent to ourselves, which ignore it, to take the same time).
    q->dlid = owner ? owner->driver->hca().port().lid() : m_hca.port().lid();
    packet::ipoib::Arp arp;
    arp.op = packet::ipoib::kOpRequest;
    arp.sender_hw.qpn = kIpoibQpn;
    arp.sender_hw.gid = own;
    arp.sender_ip = m_ip;
    arp.target_ip = ip;
    packet::ipoib::encode_mad(arp, q->tid, q->mad);
    q->retrans = m_costs.arp_retrans;
    q->deadline = sim::now_ps() + timeout;
    q->answer = [this, ip, done](int err, std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len) {
        packet::ipoib::Arp reply;
        std::uint64_t tid = 0;
        if (!err && !packet::ipoib::decode_mad(mad, len, reply, tid)) err = EPROTO;
        if (err) {
            done(err, 0, Gid{});
            return;
        }
        m_neighbours[ip] = {slid, reply.sender_hw.gid};
        done(0, slid, reply.sender_hw.gid);
    };
    send_query(q);
}

void Driver::query_path(const Gid& dgid, sim::Tick timeout, std::function<void(int err, const PathInfo& path)> done) {
    auto q = std::make_shared<MgmtQuery>();
    q->tid = ++m_next_tid;
    q->dlid = m_hca.port().sm_lid();
    packet::sa::Mad m;
    m.method = packet::sa::kMethodGet;
    m.transaction_id = q->tid;
    packet::sa::PathRecord r;
    r.dgid = dgid;
    r.sgid = m_hca.port().gids().at(0);
    r.numb_path = 1;
    r.reversible = true;
    m.component_mask = packet::sa::path_mask::kDgid | packet::sa::path_mask::kSgid |
                       packet::sa::path_mask::kNumbPath | packet::sa::path_mask::kReversible;
    m.record = r;
    packet::sa::encode(m, q->mad);
    q->deadline = sim::now_ps() + timeout;
    q->answer = [done](int err, std::uint16_t, const std::uint8_t* mad, std::uint32_t len) {
        PathInfo p;
        if (err) {
            done(err, p);
            return;
        }
        packet::sa::Mad resp;
        if (!packet::sa::decode(mad, len, resp) || resp.status != 0 ||
            !std::holds_alternative<packet::sa::PathRecord>(resp.record)) {
            done(EHOSTUNREACH, p);
            return;
        }
        const auto& pr = std::get<packet::sa::PathRecord>(resp.record);
        p.sgid = pr.sgid;
        p.dgid = pr.dgid;
        p.slid = pr.slid;
        p.dlid = pr.dlid;
        p.pkey = pr.pkey;
        p.sl = pr.sl;
        p.mtu = pr.mtu;
        p.rate = pr.rate;
        p.packet_life = pr.packet_life_time;
        done(0, p);
    };
    send_query(q);
}

bool Driver::management_datagram(std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len, sim::Tick t) {
    if (len < 2) return false;
    const std::uint8_t cls = mad[1];
    if (cls != packet::ipoib::kNeighbourMgmtClass && cls != packet::sa::kMgmtClass) return false;
    // Handled once the agent has processed it.
    auto copy = std::make_shared<std::vector<std::uint8_t>>(mad, mad + len);
    m_hca.completion().at(t, [this, slid, copy, cls]() {
        const std::uint8_t* m = copy->data();
        const auto n = static_cast<std::uint32_t>(copy->size());
        const sim::Tick now = sim::now_ps();
        if (cls == packet::ipoib::kNeighbourMgmtClass) {
            packet::ipoib::Arp arp;
            std::uint64_t tid = 0;
            if (!packet::ipoib::decode_mad(m, n, arp, tid)) return;
            if (arp.op == packet::ipoib::kOpRequest) {
                if (arp.target_ip != m_ip || arp.sender_ip == m_ip) return;  // not ours to answer
                packet::ipoib::Arp reply;
                reply.op = packet::ipoib::kOpReply;
                reply.sender_hw.qpn = kIpoibQpn;
                reply.sender_hw.gid = m_hca.port().gids().at(0);
                reply.sender_ip = m_ip;
                reply.target_hw = arp.sender_hw;
                reply.target_ip = arp.sender_ip;
                std::uint8_t out[packet::ipoib::kMadBytes];
                packet::ipoib::encode_mad(reply, tid, out);
                m_cm->send_mad(out, slid, now);
                return;
            }
            auto it = m_queries.find(tid);
            if (it == m_queries.end() || it->second->done) return;
            auto q = it->second;
            q->done = true;
            m_queries.erase(it);
            q->answer(0, slid, m, n);
            return;
        }
        packet::sa::Mad sa;
        if (!packet::sa::decode(m, n, sa)) return;
        if (sa.method == packet::sa::kMethodGetResp || sa.method == packet::sa::kMethodDeleteResp) {
            auto it = m_queries.find(sa.transaction_id);
            if (it == m_queries.end() || it->second->done) return;
            auto q = it->second;
            q->done = true;
            m_queries.erase(it);
            q->answer(0, slid, m, n);
            return;
        }
        // The SA runs on the master SM's node.
        if (m_sm && m_sm->sm_lid() == m_hca.port().lid()) answer_sa(slid, sa);
    });
    return true;
}

}  // namespace hcasim::host
