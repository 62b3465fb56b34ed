#include "model/packet/ib_cm_mad.hpp"

#include "model/packet/mad_fields.hpp"

#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

namespace hcasim::packet::ibcm {

namespace {

// MAD header offsets (IBA 13.4.3).
constexpr std::size_t kBaseVersion = 0, kClass = 1, kVersion = 2, kMethod = 3, kStatus = 4, kTid = 8, kAttrId = 16;

using mad::Reader;
using mad::Writer;

// A path of a REQ: 44 bytes from at (primary 52, alternate 96).
template <typename IO, typename P>
void path(IO& io, std::size_t at, P& p) {
    io.bits(at + 0, 0, 16, p.local_lid);
    io.bits(at + 2, 0, 16, p.remote_lid);
    io.gid(at + 4, p.local_gid);
    io.gid(at + 20, p.remote_gid);
    io.bits(at + 36, 0, 20, p.flow_label);
    io.bits(at + 39, 2, 6, p.packet_rate);
    io.bits(at + 40, 0, 8, p.traffic_class);
    io.bits(at + 41, 0, 8, p.hop_limit);
    io.bits(at + 42, 0, 4, p.sl);
    io.bits(at + 42, 4, 1, p.subnet_local);
    io.bits(at + 43, 0, 5, p.local_ack_timeout);
}

// Table 106.
template <typename IO, typename M>
void fields(IO& io, M& m, std::add_const_t<Req>*) {
    io.bits(0, 0, 32, m.local_comm_id);
    io.bits(8, 0, 64, m.service_id);
    io.bits(16, 0, 64, m.local_ca_guid);
    io.bits(28, 0, 32, m.local_qkey);
    io.bits(32, 0, 24, m.local_qpn);
    io.bits(35, 0, 8, m.responder_resources);
    io.bits(36, 0, 24, m.local_eecn);
    io.bits(39, 0, 8, m.initiator_depth);
    io.bits(40, 0, 24, m.remote_eecn);
    io.bits(43, 0, 5, m.remote_cm_response_timeout);
    io.bits(43, 5, 2, m.transport);
    io.bits(43, 7, 1, m.end_to_end_flow_control);
    io.bits(44, 0, 24, m.starting_psn);
    io.bits(47, 0, 5, m.local_cm_response_timeout);
    io.bits(47, 5, 3, m.retry_count);
    io.bits(48, 0, 16, m.pkey);
    io.bits(50, 0, 4, m.path_mtu);
    io.bits(50, 4, 1, m.rdc_exists);
    io.bits(50, 5, 3, m.rnr_retry_count);
    io.bits(51, 0, 4, m.max_cm_retries);
    io.bits(51, 4, 1, m.srq);
    io.bits(51, 5, 3, m.extended_transport);
    path(io, 52, m.primary);
    path(io, 96, m.alternate);
    io.area(140, kReqPrivateBytes, m.private_data);
}

// Table 107.
template <typename IO, typename M>
void fields(IO& io, M& m, std::add_const_t<Mra>*) {
    io.bits(0, 0, 32, m.local_comm_id);
    io.bits(4, 0, 32, m.remote_comm_id);
    io.bits(8, 0, 2, m.message_mraed);
    io.bits(9, 0, 5, m.service_timeout);
    io.area(10, kMraPrivateBytes, m.private_data);
}

// Table 108.
template <typename IO, typename M>
void fields(IO& io, M& m, std::add_const_t<Rej>*) {
    io.bits(0, 0, 32, m.local_comm_id);
    io.bits(4, 0, 32, m.remote_comm_id);
    io.bits(8, 0, 2, m.message_rejected);
    io.bits(10, 0, 16, m.reason);
    io.counted(9, 0, 7, 12, kAdditionalInfoBytes, m.additional_info);
    io.area(84, kRejPrivateBytes, m.private_data);
}

// Table 110.
template <typename IO, typename M>
void fields(IO& io, M& m, std::add_const_t<Rep>*) {
    io.bits(0, 0, 32, m.local_comm_id);
    io.bits(4, 0, 32, m.remote_comm_id);
    io.bits(8, 0, 32, m.local_qkey);
    io.bits(12, 0, 24, m.local_qpn);
    io.bits(16, 0, 24, m.local_eecn);
    io.bits(20, 0, 24, m.starting_psn);
    io.bits(24, 0, 8, m.responder_resources);
    io.bits(25, 0, 8, m.initiator_depth);
    io.bits(26, 0, 5, m.target_ack_delay);
    io.bits(26, 5, 2, m.failover_accepted);
    io.bits(26, 7, 1, m.end_to_end_flow_control);
    io.bits(27, 0, 3, m.rnr_retry_count);
    io.bits(27, 3, 1, m.srq);
    io.bits(28, 0, 64, m.local_ca_guid);
    io.area(36, kRepPrivateBytes, m.private_data);
}

// Table 111.
template <typename IO, typename M>
void fields(IO& io, M& m, std::add_const_t<Rtu>*) {
    io.bits(0, 0, 32, m.local_comm_id);
    io.bits(4, 0, 32, m.remote_comm_id);
    io.area(8, kRtuPrivateBytes, m.private_data);
}

// Table 112.
template <typename IO, typename M>
void fields(IO& io, M& m, std::add_const_t<Dreq>*) {
    io.bits(0, 0, 32, m.local_comm_id);
    io.bits(4, 0, 32, m.remote_comm_id);
    io.bits(8, 0, 24, m.remote_qpn);
    io.area(12, kDreqPrivateBytes, m.private_data);
}

// Table 113.
template <typename IO, typename M>
void fields(IO& io, M& m, std::add_const_t<Drep>*) {
    io.bits(0, 0, 32, m.local_comm_id);
    io.bits(4, 0, 32, m.remote_comm_id);
    io.area(8, kDrepPrivateBytes, m.private_data);
}

// Table 119.
template <typename IO, typename M>
void fields(IO& io, M& m, std::add_const_t<SidrReq>*) {
    io.bits(0, 0, 32, m.request_id);
    io.bits(4, 0, 16, m.pkey);
    io.bits(8, 0, 64, m.service_id);
    io.area(16, kSidrReqPrivateBytes, m.private_data);
}

// Table 120.
template <typename IO, typename M>
void fields(IO& io, M& m, std::add_const_t<SidrRep>*) {
    io.bits(0, 0, 32, m.request_id);
    io.bits(4, 0, 8, m.status);
    io.counted(5, 0, 8, 24, kAdditionalInfoBytes, m.additional_info);
    io.bits(8, 0, 24, m.qpn);
    io.bits(12, 0, 64, m.service_id);
    io.bits(20, 0, 32, m.qkey);
    io.area(96, kSidrRepPrivateBytes, m.private_data);
}

// A default message of the kind at index i of Body.
template <std::size_t... I>
Body body_at(std::size_t i, std::index_sequence<I...>) {
    Body b;
    ((i == I ? (void)b.emplace<I>() : void()), ...);
    return b;
}

std::size_t private_bytes(const Body& b) {
    constexpr std::size_t sizes[] = {kReqPrivateBytes,  kMraPrivateBytes,  kRejPrivateBytes,
                                     kRepPrivateBytes,  kRtuPrivateBytes,  kDreqPrivateBytes,
                                     kDrepPrivateBytes, kSidrReqPrivateBytes, kSidrRepPrivateBytes};
    return sizes[b.index()];
}

std::string too_wide(const char* field, std::uint64_t v, unsigned bits) {
    return std::string(field) + " " + std::to_string(v) + " does not fit its " + std::to_string(bits) + " bits";
}

}  // namespace

Attr Mad::attr() const { return static_cast<Attr>(static_cast<std::uint16_t>(Attr::Req) + body.index()); }

std::string check(const Mad& m) {
    const std::vector<std::uint8_t>* priv = nullptr;
    std::visit([&](const auto& b) { priv = &b.private_data; }, m.body);
    if (priv->size() > private_bytes(m.body))
        return std::to_string(priv->size()) + " bytes of private data: this message carries at most " +
               std::to_string(private_bytes(m.body));
    if (const auto* r = std::get_if<Rej>(&m.body); r && r->additional_info.size() > kAdditionalInfoBytes)
        return "REJ additional rejection information of " + std::to_string(r->additional_info.size()) +
               " bytes: at most 72";
    if (const auto* r = std::get_if<SidrRep>(&m.body); r && r->additional_info.size() > kAdditionalInfoBytes)
        return "SIDR_REP additional information of " + std::to_string(r->additional_info.size()) + " bytes: at most 72";
    // The fields narrower than their C++ types.
    if (const auto* r = std::get_if<Req>(&m.body)) {
        for (const Path* p : {&r->primary, &r->alternate}) {
            if (p->flow_label >> 20) return too_wide("flow label", p->flow_label, 20);
            if (p->packet_rate >> 6) return too_wide("packet rate", p->packet_rate, 6);
            if (p->sl >> 4) return too_wide("SL", p->sl, 4);
            if (p->local_ack_timeout >> 5) return too_wide("local ACK timeout", p->local_ack_timeout, 5);
        }
        if (r->local_qpn >> 24) return too_wide("local QPN", r->local_qpn, 24);
        if (r->starting_psn >> 24) return too_wide("starting PSN", r->starting_psn, 24);
        if (r->local_eecn >> 24 || r->remote_eecn >> 24) return too_wide("EECN", r->local_eecn | r->remote_eecn, 24);
        if (r->remote_cm_response_timeout >> 5 || r->local_cm_response_timeout >> 5)
            return too_wide("CM response timeout", r->remote_cm_response_timeout | r->local_cm_response_timeout, 5);
        if (r->retry_count >> 3 || r->rnr_retry_count >> 3)
            return too_wide("retry count", r->retry_count | r->rnr_retry_count, 3);
        if (r->path_mtu >> 4) return too_wide("path MTU", r->path_mtu, 4);
        if (r->max_cm_retries >> 4) return too_wide("max CM retries", r->max_cm_retries, 4);
        if (r->extended_transport >> 3) return too_wide("extended transport type", r->extended_transport, 3);
    }
    if (const auto* r = std::get_if<Rep>(&m.body)) {
        if ((r->local_qpn | r->local_eecn | r->starting_psn) >> 24)
            return too_wide("QPN, EECN or starting PSN", r->local_qpn | r->local_eecn | r->starting_psn, 24);
        if (r->target_ack_delay >> 5) return too_wide("target ACK delay", r->target_ack_delay, 5);
        if (r->failover_accepted >> 2) return too_wide("failover accepted", r->failover_accepted, 2);
        if (r->rnr_retry_count >> 3) return too_wide("RNR retry count", r->rnr_retry_count, 3);
    }
    if (const auto* r = std::get_if<Mra>(&m.body); r && r->service_timeout >> 5)
        return too_wide("service timeout", r->service_timeout, 5);
    if (const auto* r = std::get_if<Dreq>(&m.body); r && r->remote_qpn >> 24)
        return too_wide("remote QPN", r->remote_qpn, 24);
    if (const auto* r = std::get_if<SidrRep>(&m.body); r && r->qpn >> 24) return too_wide("QPN", r->qpn, 24);
    return "";
}

void encode(const Mad& m, std::uint8_t* mad) {
    std::memset(mad, 0, kMadBytes);
    mad[kBaseVersion] = 1;
    mad[kClass] = kMgmtClass;
    mad[kVersion] = kClassVersion;
    mad[kMethod] = kMethodSend;
    Writer header(mad);
    header.bits(kTid, 0, 64, m.transaction_id);
    header.bits(kAttrId, 0, 16, m.attr());
    Writer w(mad + kMadHeaderBytes);
    std::visit([&](const auto& b) { fields(w, b, static_cast<const std::decay_t<decltype(b)>*>(nullptr)); }, m.body);
}

bool decode(const std::uint8_t* mad, std::size_t len, Mad& m, std::string* why) {
    auto fail = [&](const std::string& reason) {
        if (why) *why = reason;
        return false;
    };
    if (len < kMadBytes) return fail("a CM MAD is 256 bytes, not " + std::to_string(len));
    if (mad[kBaseVersion] != 1) return fail("base version " + std::to_string(mad[kBaseVersion]) + ", not 1");
    if (mad[kClass] != kMgmtClass) return fail("management class " + std::to_string(mad[kClass]) + ", not 7 (CM)");
    if (mad[kVersion] != kClassVersion) return fail("CM class version " + std::to_string(mad[kVersion]) + ", not 2");
    if (mad[kMethod] != kMethodSend) return fail("method " + std::to_string(mad[kMethod]) + ", not Send");
    Reader header(mad);
    std::uint16_t status = 0, attr = 0;
    header.bits(kStatus, 0, 16, status);
    if (status != 0) return fail("MAD status " + std::to_string(status) + ", not 0");
    header.bits(kAttrId, 0, 16, attr);
    const int index = attr - static_cast<int>(Attr::Req);
    if (index < 0 || index >= static_cast<int>(std::variant_size_v<Body>)) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%04x", attr);
        return fail(std::string("attribute ") + hex + " is none of REQ .. SIDR_REP");
    }
    header.bits(kTid, 0, 64, m.transaction_id);
    Reader r(mad + kMadHeaderBytes);
    m.body = body_at(static_cast<std::size_t>(index), std::make_index_sequence<std::variant_size_v<Body>>{});
    std::visit([&](auto& b) { fields(r, b, static_cast<const std::decay_t<decltype(b)>*>(nullptr)); }, m.body);
    if (r.overlong()) return fail("additional information longer than its 72 bytes");
    return true;
}

}  // namespace hcasim::packet::ibcm
