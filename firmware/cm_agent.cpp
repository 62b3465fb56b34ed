#include "firmware/cm_agent.hpp"

#include "model/hca/hca.hpp"

namespace hcasim::firmware {

using packet::CmAttr;
using packet::CmMessage;
using packet::CmReject;

void declare_cm_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    r.add_per_node({"fw.cm_processing_us", K::Real, "us", "2", 0, 1e6, {},
           "firmware time to handle one connection management datagram",
           "estimate: a few thousand instructions of an embedded core per CM message"});
    r.add_per_node({"fw.cm_response_timeout_us", K::Real, "us", "100", 1, 1e7, {},
           "time a CM request or reply waits for an answer before it is sent again",
           "estimate: the IBA CM's remote response timeout set for a single subnet"});
    r.add_per_node({"fw.cm_max_retries", K::Int, "count", "4", 1, 15, {},
           "unanswered CM (re)sends after which the peer counts as unreachable", "IBA CM max retries (15 at most)"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kFirmware + 20, "firmware.cm", declare_cm_params};

CmResult match(const ViEndpoint& local, const ViEndpoint& remote) {
    if (local.reliability != remote.reliability) return CmResult::InvalidReliability;
    if (local.max_transfer != remote.max_transfer) return CmResult::InvalidMtu;
    if (local.qos != remote.qos) return CmResult::InvalidQos;
    return CmResult::Success;
}

CmAgent::CmAgent(const sc_core::sc_module_name& name, const sim::Config& cfg, hca::Hca& hca, CommandInterface& fw)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", cfg.get_real("hca.core_clock_mhz"))),
      m_hca(hca),
      m_fw(fw),
      m_processing(static_cast<sim::Tick>(cfg.get_real("fw.cm_processing_us") * sim::kPsPerUs)),
      m_response_timeout(static_cast<sim::Tick>(cfg.get_real("fw.cm_response_timeout_us") * sim::kPsPerUs)),
      m_max_retries(static_cast<std::uint32_t>(cfg.get_int("fw.cm_max_retries"))),
      m_cpu(&m_clock),
      m_qp1(hca, *this) {}

void CmAgent::cqe_written(std::uint32_t, sim::Tick visible) {
    // The firmware looks at its CQ on the clock edge after the CQE landed.
    const sim::Tick t = m_clock.edge_at_or_after(visible + m_clock.cycles(1));
    at(t, [this, t]() {
        m_qp1.drain([this](std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len,
                           sim::Tick at_t) { receive(slid, mad, len, at_t); },
                    t);
    });
}

std::uint32_t CmAgent::next_psn() {
    // Deterministic, different per connection.
    m_psn_seed = m_psn_seed * 1103515245u + 12345u;
    return (m_psn_seed >> 8) & hca::kPsnMask;
}

CmMessage CmAgent::describe(const ViEndpoint& v) const {
    CmMessage m;
    m.qpn = v.qpn;
    m.reliability = v.reliability;
    m.max_transfer = v.max_transfer;
    m.qos = v.qos;
    m.rdma_write = v.rdma_write;
    m.rdma_read = v.rdma_read;
    return m;
}

void CmAgent::send(const CmMessage& m, std::uint16_t dlid, sim::Tick t) { send(packet::to_ib(m), dlid, t); }

void CmAgent::send(const packet::ibcm::Mad& m, std::uint16_t dlid, sim::Tick t) {
    std::uint8_t mad[packet::kMadBytes];
    packet::ibcm::encode(m, mad);
    send_mad(mad, dlid, t);
}

void CmAgent::send_mad(const std::uint8_t* mad, std::uint16_t dlid, sim::Tick t) {
    // Through QP1 like any UD send, on the firmware's own clock edge. A full
    // send queue loses the datagram; the sender's resends cover it.
    if (!m_qp1.send(mad, dlid, m_clock.edge_at_or_after(t))) {
        counter("dropped_send_queue_full")++;
        return;
    }
    counter("sent")++;
}

void CmAgent::receive(std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len, sim::Tick t) {
    // Datagrams enter the agent one per cycle; each is then handled after
    // fw.cm_processing_us (handling of different datagrams may overlap).
    const sim::Tick done = m_cpu.reserve(t, 1).end + m_processing;
    if (len >= 2 && mad[1] != packet::kMgmtClassCm) {
        if (!m_other_class || !m_other_class(slid, mad, len, done)) counter("dropped_malformed")++;
        return;
    }
    auto ib = std::make_shared<packet::ibcm::Mad>();
    if (!packet::ibcm::decode(mad, len, *ib)) {
        counter("dropped_malformed")++;
        return;
    }
    counter("received")++;
    if (owns_ib(*ib)) {
        at(done, [this, ib, slid, done]() { handle_ib(*ib, slid, done); });
        return;
    }
    auto m = std::make_shared<CmMessage>();
    if (!packet::from_ib(*ib, *m)) {
        // Neither a connection of ours nor the VI protocol's: a REQ or
        // SIDR_REQ for a service nobody listens on is refused.
        at(done, [this, ib, slid, done]() { handle_ib(*ib, slid, done); });
        return;
    }
    at(done, [this, m, slid, done]() { handle(*m, slid, done); });
}

std::uint32_t CmAgent::listen(const packet::CmNetAddress& local, sim::Tick timeout, Notify done) {
    const std::uint32_t id = m_next_id++;
    Listen& l = m_listens[id];
    l.local = local;
    l.comm_id = id;
    l.done = std::move(done);
    if (timeout) {
        l.deadline = sim::now_ps() + timeout;
        at(l.deadline, [this, id]() {
            auto it = m_listens.find(id);
            if (it == m_listens.end() || it->second.result != CmResult::Pending || it->second.requested) return;
            it->second.result = CmResult::Timeout;
            if (it->second.done) it->second.done();
        });
    }
    return id;
}

CmResult CmAgent::listen_result(std::uint32_t id, packet::CmNetAddress* remote, ViEndpoint* remote_vi) const {
    auto it = m_listens.find(id);
    if (it == m_listens.end()) return CmResult::InvalidState;
    const Listen& l = it->second;
    if (l.requested) {
        if (remote) *remote = l.remote;
        if (remote_vi) *remote_vi = l.remote_vi;
        return CmResult::Success;
    }
    return l.result;
}

CmResult CmAgent::accept(std::uint32_t id, const ViEndpoint& local) {
    auto it = m_listens.find(id);
    if (it == m_listens.end()) return CmResult::InvalidState;
    Listen& l = it->second;
    if (!l.requested) return l.result == CmResult::Timeout ? CmResult::Timeout : CmResult::InvalidState;
    if (l.accept_result == CmResult::Timeout) return CmResult::Timeout;
    const CmResult m = match(local, l.remote_vi);
    if (m != CmResult::Success) return m;  // nothing is sent: the caller may change its VI and try again
    if (!m_hca.port().link_up()) return CmResult::NotReachable;
    const std::uint32_t psn = next_psn();
    connect_vi(local.qpn, l.remote_lid, l.remote_vi.qpn, l.remote_psn, psn);
    l.accepting = true;
    CmMessage rep = describe(local);
    rep.attr = CmAttr::Rep;
    rep.local_comm_id = l.comm_id;
    rep.remote_comm_id = l.remote_comm_id;
    rep.start_psn = psn;
    rep.local = l.local;
    rep.remote = l.remote;
    // Wait for the client's RTU, sending the REP again while it is missing.
    for (std::uint32_t tries = 0; tries < m_max_retries && l.accept_result == CmResult::Pending; ++tries) {
        send(rep, l.remote_lid, sim::now_ps());
        sc_core::wait(sim::to_sc(m_response_timeout), l.answered);
    }
    CmResult r = l.accept_result == CmResult::Pending ? CmResult::NotReachable : l.accept_result;
    if (r == CmResult::Success) {
        m_links[local.qpn] = Link{l.remote_lid, l.remote_vi.qpn};
    } else {
        // Undo: the VI goes back to idle.
        QpAttributes a;
        a.state = hca::QpState::Err;
        m_fw.apply_modify_qp(local.qpn, a, kAttrState);
        a.state = hca::QpState::Reset;
        m_fw.apply_modify_qp(local.qpn, a, kAttrState);
        a.state = hca::QpState::Init;
        m_fw.apply_modify_qp(local.qpn, a, kAttrState);
    }
    return r;
}

CmResult CmAgent::reject(std::uint32_t id) {
    auto it = m_listens.find(id);
    if (it == m_listens.end() || !it->second.requested) return CmResult::InvalidState;
    if (!m_hca.port().link_up()) return CmResult::NotReachable;
    CmMessage rej;
    rej.attr = CmAttr::Rej;
    rej.reason = CmReject::Consumer;
    rej.local_comm_id = it->second.comm_id;
    rej.remote_comm_id = it->second.remote_comm_id;
    send(rej, it->second.remote_lid, sim::now_ps());
    it->second.result = CmResult::Reject;
    it->second.requested = false;
    return CmResult::Success;
}

void CmAgent::forget(std::uint32_t id) { m_listens.erase(id); }

void CmAgent::connect(const ViEndpoint& local, const packet::CmNetAddress& local_addr,
                      const packet::CmNetAddress& remote_addr, sim::Tick timeout, bool peer, Notify done) {
    Connect& c = m_connects[local.qpn];
    const std::uint32_t generation = c.generation + 1;
    c = Connect{};
    c.generation = generation;
    c.local = local;
    c.local_addr = local_addr;
    c.remote_addr = remote_addr;
    c.peer = peer;
    c.comm_id = m_next_id++;
    c.psn = next_psn();
    c.retries_left = m_max_retries;
    c.done = std::move(done);
    const sim::Tick now = sim::now_ps();
    if (remote_addr.host.size() == 2)
        c.remote_lid = static_cast<std::uint16_t>(remote_addr.host[0] << 8 | remote_addr.host[1]);
    if (timeout) {
        c.deadline = now + timeout;
        const std::uint32_t qpn = local.qpn;
        at(c.deadline, [this, qpn, generation]() {
            auto it = m_connects.find(qpn);
            if (it == m_connects.end() || it->second.generation != generation) return;
            if (it->second.result == CmResult::Pending) finish(it->second, CmResult::Timeout);
        });
    }
    send_request(c, now);
}

void CmAgent::send_request(Connect& c, sim::Tick t) {
    CmMessage req = describe(c.local);
    req.attr = CmAttr::Req;
    req.peer = c.peer;
    req.local_comm_id = c.comm_id;
    req.start_psn = c.psn;
    req.local = c.local_addr;
    req.remote = c.remote_addr;
    c.heard = false;
    send(req, c.remote_lid, t);
    arm_retry(c.local.qpn, c.generation, t + m_response_timeout);
}

void CmAgent::arm_retry(std::uint32_t qpn, std::uint32_t generation, sim::Tick t) {
    at(t, [this, qpn, generation, t]() {
        auto it = m_connects.find(qpn);
        if (it == m_connects.end() || it->second.generation != generation) return;
        Connect& c = it->second;
        if (c.result != CmResult::Pending) return;
        if (c.heard) {
            c.retries_left = m_max_retries;  // the peer is there, not ready yet
        } else if (--c.retries_left == 0) {
            finish(c, CmResult::NotReachable);
            return;
        }
        counter("retries")++;
        send_request(c, t);
    });
}

void CmAgent::finish(Connect& c, CmResult r) {
    c.result = r;
    if (c.done) c.done();
}

CmResult CmAgent::connect_result(std::uint32_t qpn, ViEndpoint* remote_vi) const {
    auto it = m_connects.find(qpn);
    if (it == m_connects.end()) return CmResult::InvalidState;
    if (it->second.result == CmResult::Success && remote_vi) *remote_vi = it->second.remote_vi;
    return it->second.result;
}

void CmAgent::cancel(std::uint32_t qpn) { m_connects.erase(qpn); }

void CmAgent::disconnect(std::uint32_t qpn) {
    m_connects.erase(qpn);
    auto it = m_links.find(qpn);
    if (it == m_links.end()) return;
    CmMessage dreq;
    dreq.attr = CmAttr::Dreq;
    dreq.qpn = qpn;
    dreq.remote_qpn = it->second.remote_qpn;
    send(dreq, it->second.lid, sim::now_ps());
    m_links.erase(it);
}

void CmAgent::connect_vi(std::uint32_t qpn, std::uint16_t lid, std::uint32_t remote_qpn, std::uint32_t rq_psn,
                         std::uint32_t sq_psn) {
    QpAttributes a;
    a.state = hca::QpState::Rts;
    a.path_mtu = m_hca.port().max_mtu();
    a.dlid = lid;
    a.dest_qpn = remote_qpn;
    a.rq_psn = rq_psn;
    a.sq_psn = sq_psn;
    a.max_rd_atomic = 16;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 1;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    const hca::QpContext* qp = m_hca.qp(qpn);
    a.sl = qp ? qp->qpc.sl : 0;
    m_fw.apply_modify_qp(qpn, a,
                         kAttrState | kAttrPathMtu | kAttrAv | kAttrDestQpn | kAttrRqPsn | kAttrSqPsn | kAttrMaxRdAtomic |
                             kAttrMaxDestRdAtomic | kAttrMinRnrTimer | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry);
}

void CmAgent::handle(const CmMessage& m, std::uint16_t slid, sim::Tick t) {
    switch (m.attr) {
    case CmAttr::Req: {
        if (m.peer) {
            // A peer request matches ours when each names the other's discriminator.
            for (auto& [qpn, c] : m_connects) {
                if (!c.peer || c.remote_lid != slid || c.remote_addr.discriminator != m.local.discriminator ||
                    c.local_addr.discriminator != m.remote.discriminator)
                    continue;
                ViEndpoint remote{m.qpn, m.reliability, m.max_transfer, m.qos, m.rdma_write, m.rdma_read};
                if (c.result == CmResult::Pending) {
                    const CmResult r = match(c.local, remote);
                    c.remote_vi = remote;
                    if (r == CmResult::Success) {
                        connect_vi(qpn, slid, m.qpn, m.start_psn, c.psn);
                        m_links[qpn] = Link{slid, m.qpn};
                    }
                    finish(c, r);
                }
                CmMessage rep = describe(c.local);
                rep.attr = CmAttr::Rep;
                rep.peer = true;
                rep.local_comm_id = c.comm_id;
                rep.remote_comm_id = m.local_comm_id;
                rep.start_psn = c.psn;
                rep.local = c.local_addr;
                rep.remote = c.remote_addr;
                send(rep, slid, t);
                return;
            }
            CmMessage rej;
            rej.attr = CmAttr::Rej;
            rej.reason = CmReject::PeerNotReady;
            rej.remote_comm_id = m.local_comm_id;
            rej.peer = true;
            send(rej, slid, t);
            return;
        }
        // A request waits for the server's consumer to accept it: the MRA
        // tells the client it arrived, so it waits instead of resending.
        auto acknowledge = [&](const Listen& l) {
            CmMessage mra;
            mra.attr = CmAttr::Mra;
            mra.local_comm_id = l.comm_id;
            mra.remote_comm_id = m.local_comm_id;
            send(mra, slid, t);
        };
        // A retransmitted request we already hold: acknowledge it again.
        for (auto& [id, l] : m_listens)
            if (l.requested && l.remote_lid == slid && l.remote_comm_id == m.local_comm_id) {
                if (!l.accepting) acknowledge(l);
                return;
            }
        for (auto& [id, l] : m_listens) {
            if (l.requested || l.result != CmResult::Pending || l.local.discriminator != m.remote.discriminator) continue;
            l.requested = true;
            l.remote = m.local;
            l.remote_vi = ViEndpoint{m.qpn, m.reliability, m.max_transfer, m.qos, m.rdma_write, m.rdma_read};
            l.remote_lid = slid;
            l.remote_comm_id = m.local_comm_id;
            l.remote_psn = m.start_psn;
            counter("requests_matched")++;
            acknowledge(l);
            if (l.done) l.done();
            return;
        }
        counter("requests_unmatched")++;
        CmMessage rej;
        rej.attr = CmAttr::Rej;
        rej.reason = CmReject::NoMatch;
        rej.remote_comm_id = m.local_comm_id;
        send(rej, slid, t);
        return;
    }
    case CmAttr::Rep: {
        for (auto& [qpn, c] : m_connects) {
            if (c.comm_id != m.remote_comm_id) continue;
            c.heard = true;
            if (c.result != CmResult::Pending && c.result != CmResult::Success) {
                // Too late: this side gave up.
                CmMessage rej;
                rej.attr = CmAttr::Rej;
                rej.reason = CmReject::Timeout;
                rej.local_comm_id = c.comm_id;
                rej.remote_comm_id = m.local_comm_id;
                send(rej, slid, t);
                return;
            }
            if (c.result == CmResult::Pending) {
                ViEndpoint remote{m.qpn, m.reliability, m.max_transfer, m.qos, m.rdma_write, m.rdma_read};
                c.remote_vi = remote;
                const CmResult r = c.peer ? match(c.local, remote) : CmResult::Success;
                if (r == CmResult::Success) {
                    connect_vi(qpn, slid, m.qpn, m.start_psn, c.psn);
                    m_links[qpn] = Link{slid, m.qpn};
                }
                finish(c, r);
            }
            if (!c.peer) {
                CmMessage rtu;
                rtu.attr = CmAttr::Rtu;
                rtu.local_comm_id = c.comm_id;
                rtu.remote_comm_id = m.local_comm_id;
                send(rtu, slid, t);
            }
            return;
        }
        return;
    }
    case CmAttr::Rtu:
    case CmAttr::Rej: {
        if (m.attr == CmAttr::Rej && m.reason != CmReject::Timeout) {
            // An answer to one of our requests.
            for (auto& [qpn, c] : m_connects) {
                if (c.comm_id != m.remote_comm_id) continue;
                c.heard = true;
                if (c.result != CmResult::Pending || m.reason == CmReject::PeerNotReady) return;
                finish(c, m.reason == CmReject::NoMatch ? CmResult::NoMatch : CmResult::Reject);
                return;
            }
            return;
        }
        for (auto& [id, l] : m_listens) {
            if (!l.accepting || l.comm_id != m.remote_comm_id || l.accept_result != CmResult::Pending) continue;
            l.accept_result = m.attr == CmAttr::Rtu ? CmResult::Success : CmResult::Timeout;
            l.answered.notify();
            return;
        }
        return;
    }
    case CmAttr::Dreq: {
        auto it = m_links.find(m.remote_qpn);
        CmMessage drep;
        drep.attr = CmAttr::Drep;
        drep.qpn = m.remote_qpn;
        drep.remote_qpn = m.qpn;
        send(drep, slid, t);
        if (it == m_links.end() || it->second.remote_qpn != m.qpn) return;
        m_links.erase(it);
        counter("disconnects_received")++;
        if (m_lost) m_lost(m.remote_qpn);
        return;
    }
    case CmAttr::Mra: {
        // The server holds our request: keep waiting (until the time-out).
        for (auto& [qpn, c] : m_connects)
            if (c.comm_id == m.remote_comm_id) c.heard = true;
        counter("mras_received")++;
        return;
    }
    case CmAttr::Drep: return;
    case CmAttr::SidrReq:
    case CmAttr::SidrRep: return;  // not in the VI protocol: decode() refuses them
    }
}

}  // namespace hcasim::firmware
