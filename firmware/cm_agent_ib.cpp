// The CM agent's IB CM connections: the communication state machine of IBA
// 12.9 for connections whose QP the host drives (rdma_cm). The agent sends
// each message, waits for its answer as long as the REQ's time-out fields
// say (the peer's CM response time plus two packet lifetimes), resends up to
// the REQ's max CM retries, and keeps a disconnected connection in time wait
// for the path's local ACK time-out before its communication ID goes.
#include <cerrno>

#include "firmware/cm_agent.hpp"

namespace hcasim::firmware {

namespace ibcm = packet::ibcm;
using State = CmAgent::IbConnection::State;
using Type = IbCmEvent::Type;

sim::Tick cm_time(std::uint8_t value) {
    return static_cast<sim::Tick>(4096) * sim::kPsPerNs << (value & 31);
}

namespace {

// The packet lifetime a path's local ACK time-out was derived from (the
// ACK time-out is one more, as the SA's packet lifetime covers one way).
sim::Tick packet_life(const ibcm::Req& r) {
    return cm_time(r.primary.local_ack_timeout ? static_cast<std::uint8_t>(r.primary.local_ack_timeout - 1) : 0);
}

template <typename T>
std::uint32_t remote_of(const T& b) {
    if constexpr (std::is_same_v<T, ibcm::Req> || std::is_same_v<T, ibcm::SidrReq> ||
                  std::is_same_v<T, ibcm::SidrRep>)
        return 0;
    else
        return b.remote_comm_id;
}

}  // namespace

bool CmAgent::owns_ib(const ibcm::Mad& m) const {
    return std::visit(
        [this](const auto& b) -> bool {
            using T = std::decay_t<decltype(b)>;
            if constexpr (std::is_same_v<T, ibcm::Req> || std::is_same_v<T, ibcm::SidrReq>)
                return m_ib_listens.count(b.service_id) != 0;
            else if constexpr (std::is_same_v<T, ibcm::SidrRep>)
                return m_ib.count(b.request_id) != 0;
            else
                return m_ib.count(remote_of(b)) != 0;
        },
        m.body);
}

int CmAgent::ib_listen(std::uint64_t service_id, IbCmHandler handler) {
    if (service_id == packet::kViServiceId) return EADDRINUSE;
    return m_ib_listens.emplace(service_id, std::move(handler)).second ? 0 : EADDRINUSE;
}

void CmAgent::ib_cancel_listen(std::uint64_t service_id) { m_ib_listens.erase(service_id); }

void CmAgent::ib_report(std::uint32_t id, IbCmEvent e) {
    auto it = m_ib.find(id);
    if (it == m_ib.end() || !it->second.handler) return;
    e.id = id;
    e.remote_lid = it->second.remote_lid;
    IbCmHandler h = it->second.handler;  // the handler may end the connection
    h(e);
}

void CmAgent::ib_arm(std::uint32_t id, sim::Tick at_t) {
    const std::uint32_t generation = ++m_ib.at(id).generation;
    at(at_t, [this, id, generation, at_t]() {
        auto it = m_ib.find(id);
        if (it == m_ib.end() || it->second.generation != generation) return;
        IbConnection& c = it->second;
        if (c.retries_left > 0) {
            --c.retries_left;
            counter("ib_retries")++;
            send(c.last, c.remote_lid, at_t);
            ib_arm(id, at_t + c.wait);
            return;
        }
        switch (c.state) {
        case State::ReqSent:
        case State::RepSent: {
            // Gave up: the peer learns it from a REJ, the consumer from the event.
            if (c.state == State::RepSent) ib_reject(id, c, kRejTimeout, {}, at_t);
            counter("ib_unreachable")++;
            IbCmEvent e;
            e.type = Type::Unreachable;
            ib_report(id, e);
            m_ib.erase(id);
            return;
        }
        case State::DreqSent: {
            IbCmEvent e;
            e.type = Type::DisconnectDone;
            ib_timewait(id, at_t);
            ib_report(id, e);
            return;
        }
        case State::SidrSent: {
            IbCmEvent e;
            e.type = Type::SidrTimeout;
            ib_report(id, e);
            m_ib.erase(id);
            return;
        }
        case State::Timewait: {
            IbCmEvent e;
            e.type = Type::TimewaitExit;
            ib_report(id, e);
            m_ib.erase(id);
            return;
        }
        case State::ReqRcvd:
        case State::RepRcvd:
        case State::Established:
        case State::SidrRcvd: return;
        }
    });
}

void CmAgent::ib_reject(std::uint32_t id, const IbConnection& c, std::uint16_t reason,
                        std::vector<std::uint8_t> private_data, sim::Tick t) {
    ibcm::Rej rej;
    rej.local_comm_id = id;
    rej.remote_comm_id = c.remote_comm_id;
    // The message the connection was waiting on, or answering.
    rej.message_rejected =
        c.state == State::ReqSent || c.state == State::ReqRcvd ? ibcm::Answered::Req : ibcm::Answered::Rep;
    rej.reason = reason;
    rej.private_data = std::move(private_data);
    send(ibcm::Mad{next_tid(), std::move(rej)}, c.remote_lid, t);
}

void CmAgent::ib_send_and_wait(std::uint32_t id, ibcm::Mad m, sim::Tick t) {
    IbConnection& c = m_ib.at(id);
    c.last = std::move(m);
    send(c.last, c.remote_lid, t);
    ib_arm(id, t + c.wait);
}

void CmAgent::ib_timewait(std::uint32_t id, sim::Tick t) {
    IbConnection& c = m_ib.at(id);
    c.state = State::Timewait;
    c.retries_left = 0;
    ib_arm(id, t + cm_time(c.req.primary.local_ack_timeout));
}

std::uint32_t CmAgent::ib_send_req(ibcm::Req req, std::uint16_t dlid, IbCmHandler handler) {
    const std::uint32_t id = m_next_id++;
    req.local_comm_id = id;
    IbConnection& c = m_ib[id];
    c.state = State::ReqSent;
    c.remote_lid = dlid;
    c.service_id = req.service_id;
    c.wait = cm_time(req.remote_cm_response_timeout) + 2 * packet_life(req);
    c.retries_left = req.max_cm_retries;
    c.req = req;
    c.handler = std::move(handler);
    counter("ib_reqs_sent")++;
    ib_send_and_wait(id, ibcm::Mad{next_tid(), std::move(req)}, sim::now_ps());
    return id;
}

int CmAgent::ib_set_handler(std::uint32_t id, IbCmHandler handler) {
    auto it = m_ib.find(id);
    if (it == m_ib.end()) return EINVAL;
    it->second.handler = std::move(handler);
    return 0;
}

int CmAgent::ib_send_rep(std::uint32_t id, ibcm::Rep rep) {
    auto it = m_ib.find(id);
    if (it == m_ib.end() || it->second.state != State::ReqRcvd) return EINVAL;
    IbConnection& c = it->second;
    rep.local_comm_id = id;
    rep.remote_comm_id = c.remote_comm_id;
    c.state = State::RepSent;
    // The active side answers within its own CM response time.
    c.wait = cm_time(c.req.local_cm_response_timeout) + 2 * packet_life(c.req);
    c.retries_left = c.req.max_cm_retries;
    ib_send_and_wait(id, ibcm::Mad{next_tid(), std::move(rep)}, sim::now_ps());
    return 0;
}

int CmAgent::ib_send_rtu(std::uint32_t id, std::vector<std::uint8_t> private_data) {
    auto it = m_ib.find(id);
    if (it == m_ib.end() || it->second.state != State::RepRcvd) return EINVAL;
    IbConnection& c = it->second;
    c.state = State::Established;
    ibcm::Rtu rtu;
    rtu.local_comm_id = id;
    rtu.remote_comm_id = c.remote_comm_id;
    rtu.private_data = std::move(private_data);
    c.last = ibcm::Mad{next_tid(), std::move(rtu)};  // sent again if the REP comes again
    send(c.last, c.remote_lid, sim::now_ps());
    return 0;
}

int CmAgent::ib_send_rej(std::uint32_t id, std::uint16_t reason, std::vector<std::uint8_t> private_data) {
    auto it = m_ib.find(id);
    if (it == m_ib.end() || (it->second.state != State::ReqRcvd && it->second.state != State::RepRcvd)) return EINVAL;
    ib_reject(id, it->second, reason, std::move(private_data), sim::now_ps());
    m_ib.erase(it);
    return 0;
}

int CmAgent::ib_send_dreq(std::uint32_t id, std::vector<std::uint8_t> private_data) {
    auto it = m_ib.find(id);
    if (it == m_ib.end()) return EINVAL;
    IbConnection& c = it->second;
    if (c.state != State::Established && c.state != State::RepSent) return EINVAL;
    c.state = State::DreqSent;
    // The peer's CM response time: the REQ's remote one when we sent it.
    const bool active = c.req.local_comm_id == id;
    c.wait = cm_time(active ? c.req.remote_cm_response_timeout : c.req.local_cm_response_timeout) +
             2 * packet_life(c.req);
    c.retries_left = c.req.max_cm_retries;
    ibcm::Dreq dreq;
    dreq.local_comm_id = id;
    dreq.remote_comm_id = c.remote_comm_id;
    dreq.remote_qpn = active ? 0 : c.req.local_qpn;
    dreq.private_data = std::move(private_data);
    ib_send_and_wait(id, ibcm::Mad{next_tid(), std::move(dreq)}, sim::now_ps());
    return 0;
}

std::uint32_t CmAgent::ib_send_sidr_req(ibcm::SidrReq req, std::uint16_t dlid, sim::Tick wait, std::uint32_t retries,
                                        IbCmHandler handler) {
    const std::uint32_t id = m_next_id++;
    req.request_id = id;
    IbConnection& c = m_ib[id];
    c.state = State::SidrSent;
    c.remote_lid = dlid;
    c.service_id = req.service_id;
    c.wait = wait;
    c.retries_left = retries;
    c.handler = std::move(handler);
    ib_send_and_wait(id, ibcm::Mad{next_tid(), std::move(req)}, sim::now_ps());
    return id;
}

int CmAgent::ib_send_sidr_rep(std::uint32_t id, ibcm::SidrRep rep) {
    auto it = m_ib.find(id);
    if (it == m_ib.end() || it->second.state != State::SidrRcvd) return EINVAL;
    rep.request_id = it->second.remote_comm_id;
    rep.service_id = it->second.service_id;
    send(ibcm::Mad{next_tid(), std::move(rep)}, it->second.remote_lid, sim::now_ps());
    m_ib.erase(it);
    return 0;
}

void CmAgent::ib_destroy(std::uint32_t id) {
    auto it = m_ib.find(id);
    if (it == m_ib.end()) return;
    IbConnection& c = it->second;
    c.handler = nullptr;
    switch (c.state) {
    case State::ReqRcvd:
    case State::RepRcvd: ib_send_rej(id, kRejConsumer, {}); return;
    case State::ReqSent:
    case State::RepSent: {
        ib_reject(id, c, kRejTimeout, {}, sim::now_ps());
        m_ib.erase(it);
        return;
    }
    case State::Established: ib_send_dreq(id, {}); return;  // its time wait ends it
    case State::SidrRcvd: {
        ibcm::SidrRep rep;
        rep.status = ibcm::SidrStatus::Rejected;
        ib_send_sidr_rep(id, std::move(rep));
        return;
    }
    case State::SidrSent: m_ib.erase(it); return;
    case State::DreqSent:
    case State::Timewait: return;  // goes when its time wait is over
    }
}

void CmAgent::handle_ib(const ibcm::Mad& mad, std::uint16_t slid, sim::Tick t) {
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            if constexpr (std::is_same_v<T, ibcm::Req>) {
                // A REQ we hold already (the active side resent it): the REP
                // we sent may have been lost; anything else waits.
                for (auto& [id, c] : m_ib)
                    if (c.remote_lid == slid && c.remote_comm_id == b.local_comm_id && c.state != State::SidrRcvd &&
                        c.state != State::SidrSent) {
                        if (c.state == State::RepSent) send(c.last, slid, t);
                        return;
                    }
                auto l = m_ib_listens.find(b.service_id);
                if (l == m_ib_listens.end()) {
                    ibcm::Rej rej;
                    rej.remote_comm_id = b.local_comm_id;
                    rej.reason = kRejInvalidServiceId;
                    counter("ib_reqs_refused")++;
                    send(ibcm::Mad{next_tid(), rej}, slid, t);
                    return;
                }
                const std::uint32_t id = m_next_id++;
                IbConnection& c = m_ib[id];
                c.state = State::ReqRcvd;
                c.remote_comm_id = b.local_comm_id;
                c.remote_lid = slid;
                c.service_id = b.service_id;
                c.req = b;
                c.handler = l->second;
                counter("ib_reqs_received")++;
                IbCmEvent e;
                e.type = Type::ReqReceived;
                e.req = b;
                ib_report(id, e);
            } else if constexpr (std::is_same_v<T, ibcm::SidrReq>) {
                auto l = m_ib_listens.find(b.service_id);
                if (l == m_ib_listens.end()) {
                    ibcm::SidrRep rep;
                    rep.request_id = b.request_id;
                    rep.service_id = b.service_id;
                    rep.status = ibcm::SidrStatus::NoService;
                    send(ibcm::Mad{next_tid(), rep}, slid, t);
                    return;
                }
                for (auto& [id, c] : m_ib)
                    if (c.state == State::SidrRcvd && c.remote_lid == slid && c.remote_comm_id == b.request_id) return;
                const std::uint32_t id = m_next_id++;
                IbConnection& c = m_ib[id];
                c.state = State::SidrRcvd;
                c.remote_comm_id = b.request_id;
                c.remote_lid = slid;
                c.service_id = b.service_id;
                c.handler = l->second;
                IbCmEvent e;
                e.type = Type::SidrReqReceived;
                e.sidr_req = b;
                ib_report(id, e);
            } else if constexpr (std::is_same_v<T, ibcm::SidrRep>) {
                auto it = m_ib.find(b.request_id);
                if (it == m_ib.end() || it->second.state != State::SidrSent) return;
                IbCmEvent e;
                e.type = Type::SidrRepReceived;
                e.sidr_rep = b;
                ib_report(b.request_id, e);
                m_ib.erase(b.request_id);
            } else {
                const std::uint32_t id = b.remote_comm_id;
                auto it = m_ib.find(id);
                if constexpr (std::is_same_v<T, ibcm::Dreq>) {
                    // Answered whatever we know of it (IBA 12.9.7): the peer
                    // must be able to leave its own DREQ_SENT.
                    ibcm::Drep drep;
                    drep.local_comm_id = id;
                    drep.remote_comm_id = b.local_comm_id;
                    send(ibcm::Mad{next_tid(), drep}, slid, t);
                    if (it == m_ib.end() || it->second.remote_comm_id != b.local_comm_id) return;
                    IbConnection& c = it->second;
                    if (c.state == State::Timewait) return;
                    const bool ours_pending = c.state == State::DreqSent;
                    ib_timewait(id, t);
                    IbCmEvent e;
                    e.type = ours_pending ? Type::DisconnectDone : Type::DreqReceived;
                    e.private_data = b.private_data;
                    ib_report(id, e);
                    return;
                }
                if (it == m_ib.end()) return;
                IbConnection& c = it->second;
                if (c.remote_comm_id && c.remote_comm_id != b.local_comm_id && !std::is_same_v<T, ibcm::Rej>) return;
                if constexpr (std::is_same_v<T, ibcm::Rep>) {
                    if (c.state == State::Established && c.last.attr() == ibcm::Attr::Rtu) {
                        send(c.last, slid, t);  // our RTU was lost
                        return;
                    }
                    if (c.state != State::ReqSent) return;
                    c.state = State::RepRcvd;
                    c.remote_comm_id = b.local_comm_id;
                    ++c.generation;  // no more REQ resends
                    IbCmEvent e;
                    e.type = Type::RepReceived;
                    e.rep = b;
                    ib_report(id, e);
                } else if constexpr (std::is_same_v<T, ibcm::Rtu>) {
                    if (c.state != State::RepSent) return;
                    c.state = State::Established;
                    ++c.generation;
                    IbCmEvent e;
                    e.type = Type::Established;
                    e.private_data = b.private_data;
                    ib_report(id, e);
                } else if constexpr (std::is_same_v<T, ibcm::Mra>) {
                    if (c.state != State::ReqSent && c.state != State::RepSent) return;
                    // The peer needs longer: wait its service time-out, then resend.
                    c.wait = cm_time(b.service_timeout) + 2 * packet_life(c.req);
                    ib_arm(id, t + c.wait);
                } else if constexpr (std::is_same_v<T, ibcm::Rej>) {
                    if (c.state != State::ReqSent && c.state != State::RepSent && c.state != State::RepRcvd) return;
                    counter("ib_rejects_received")++;
                    IbCmEvent e;
                    e.type = Type::Rejected;
                    e.reason = b.reason;
                    e.private_data = b.private_data;
                    ib_report(id, e);
                    m_ib.erase(id);
                } else if constexpr (std::is_same_v<T, ibcm::Drep>) {
                    if (c.state != State::DreqSent) return;
                    ib_timewait(id, t);
                    IbCmEvent e;
                    e.type = Type::DisconnectDone;
                    e.private_data = b.private_data;
                    ib_report(id, e);
                }
            }
        },
        mad.body);
}

}  // namespace hcasim::firmware
