#include "model/packet/sa_mad.hpp"

#include "model/packet/mad_fields.hpp"

#include <cstdio>
#include <cstring>
#include <type_traits>

namespace hcasim::packet::sa {

namespace {

// MAD header offsets (IBA 13.4.3), then those of the SA header. The RMPP
// header (24-35) and SM_Key (36-43) stay zero: a single record needs no
// RMPP, and only the SM itself presents an SM_Key.
constexpr std::size_t kBaseVersion = 0, kClass = 1, kVersion = 2, kMethod = 3, kStatus = 4, kTid = 8, kAttrId = 16;
constexpr std::size_t kAttrOffset = 44, kCompMask = 48;

// Each record's fields are listed once (mad_fields.hpp); offsets are
// those of the record's table, from the start of the record.
using mad::Reader;
using mad::Writer;

// IBA 15.2.5.16. Bytes 58-63 are reserved.
template <typename IO, typename R>
void fields(IO& io, R& r, std::add_const_t<PathRecord>*) {
    io.bits(0, 0, 64, r.service_id);
    io.gid(8, r.dgid);
    io.gid(24, r.sgid);
    io.bits(40, 0, 16, r.dlid);
    io.bits(42, 0, 16, r.slid);
    io.bits(44, 0, 1, r.raw_traffic);
    io.bits(44, 4, 20, r.flow_label);
    io.bits(47, 0, 8, r.hop_limit);
    io.bits(48, 0, 8, r.traffic_class);
    io.bits(49, 0, 1, r.reversible);
    io.bits(49, 1, 7, r.numb_path);
    io.bits(50, 0, 16, r.pkey);
    io.bits(52, 0, 12, r.qos_class);
    io.bits(53, 4, 4, r.sl);
    io.bits(54, 0, 2, r.mtu_selector);
    io.bits(54, 2, 6, r.mtu);
    io.bits(55, 0, 2, r.rate_selector);
    io.bits(55, 2, 6, r.rate);
    io.bits(56, 0, 2, r.packet_life_time_selector);
    io.bits(56, 2, 6, r.packet_life_time);
    io.bits(57, 0, 8, r.preference);
}

// IBA 15.2.5.17. The rest of byte 49 and bytes 50-55 are reserved.
template <typename IO, typename R>
void fields(IO& io, R& r, std::add_const_t<McMemberRecord>*) {
    io.gid(0, r.mgid);
    io.gid(16, r.port_gid);
    io.bits(32, 0, 32, r.qkey);
    io.bits(36, 0, 16, r.mlid);
    io.bits(38, 0, 2, r.mtu_selector);
    io.bits(38, 2, 6, r.mtu);
    io.bits(39, 0, 8, r.traffic_class);
    io.bits(40, 0, 16, r.pkey);
    io.bits(42, 0, 2, r.rate_selector);
    io.bits(42, 2, 6, r.rate);
    io.bits(43, 0, 2, r.packet_life_time_selector);
    io.bits(43, 2, 6, r.packet_life_time);
    io.bits(44, 0, 4, r.sl);
    io.bits(44, 4, 20, r.flow_label);
    io.bits(47, 0, 8, r.hop_limit);
    io.bits(48, 0, 4, r.scope);
    io.bits(48, 4, 4, r.join_state);
    io.bits(49, 0, 1, r.proxy_join);
}

std::size_t record_bytes(std::uint16_t attr) {
    return attr == kAttrPathRecord ? kPathRecordBytes : kMcMemberRecordBytes;
}

// PathRecord is only ever queried (its GetTable is not handled here);
// MCMemberRecord is also how a port joins (Set) and leaves (Delete) a group.
bool method_defined(std::uint16_t attr, std::uint8_t method) {
    if (method == kMethodGet || method == kMethodGetResp) return true;
    return attr == kAttrMcMemberRecord &&
           (method == kMethodSet || method == kMethodDelete || method == kMethodDeleteResp);
}

std::string hex(unsigned v, int digits) {
    char s[12];
    std::snprintf(s, sizeof s, "0x%0*x", digits, v);
    return s;
}

std::string too_wide(const char* field, std::uint64_t v, unsigned bits) {
    return std::string(field) + " " + std::to_string(v) + " does not fit its " + std::to_string(bits) + " bits";
}

// The fields narrower than their C++ types, common to both records.
template <typename R>
std::string check_common(const R& r) {
    if (r.flow_label >> 20) return too_wide("flow label", r.flow_label, 20);
    if (r.sl >> 4) return too_wide("SL", r.sl, 4);
    if (r.mtu_selector >> 2) return too_wide("MTU selector", r.mtu_selector, 2);
    if (r.mtu >> 6) return too_wide("MTU", r.mtu, 6);
    if (r.rate_selector >> 2) return too_wide("rate selector", r.rate_selector, 2);
    if (r.rate >> 6) return too_wide("rate", r.rate, 6);
    if (r.packet_life_time_selector >> 2)
        return too_wide("packet lifetime selector", r.packet_life_time_selector, 2);
    if (r.packet_life_time >> 6) return too_wide("packet lifetime", r.packet_life_time, 6);
    return "";
}

}  // namespace

std::uint16_t Mad::attr() const {
    return std::holds_alternative<PathRecord>(record) ? kAttrPathRecord : kAttrMcMemberRecord;
}

std::string check(const Mad& m) {
    if (!method_defined(m.attr(), m.method))
        return "method " + hex(m.method, 2) + " is not defined for " +
               (m.attr() == kAttrPathRecord ? "PathRecord" : "MCMemberRecord");
    if (const auto* p = std::get_if<PathRecord>(&m.record)) {
        if (auto why = check_common(*p); !why.empty()) return why;
        if (p->numb_path >> 7) return too_wide("NumbPath", p->numb_path, 7);
        if (p->qos_class >> 12) return too_wide("QoS class", p->qos_class, 12);
    }
    if (const auto* r = std::get_if<McMemberRecord>(&m.record)) {
        if (auto why = check_common(*r); !why.empty()) return why;
        if (r->scope >> 4) return too_wide("scope", r->scope, 4);
        if (r->join_state >> 4) return too_wide("join state", r->join_state, 4);
    }
    return "";
}

void encode(const Mad& m, std::uint8_t* mad) {
    std::memset(mad, 0, kMadBytes);
    mad[kBaseVersion] = 1;
    mad[kClass] = kMgmtClass;
    mad[kVersion] = kClassVersion;
    mad[kMethod] = m.method;
    Writer header(mad);
    header.bits(kStatus, 0, 16, m.status);
    header.bits(kTid, 0, 64, m.transaction_id);
    header.bits(kAttrId, 0, 16, m.attr());
    header.bits(kAttrOffset, 0, 16, record_bytes(m.attr()) / 8);
    header.bits(kCompMask, 0, 64, m.component_mask);
    Writer w(mad + kSaHeaderBytes);
    std::visit([&](const auto& r) { fields(w, r, static_cast<const std::decay_t<decltype(r)>*>(nullptr)); },
               m.record);
}

bool decode(const std::uint8_t* mad, std::size_t len, Mad& m, std::string* why) {
    auto fail = [&](const std::string& reason) {
        if (why) *why = reason;
        return false;
    };
    if (len < kMadBytes) return fail("an SA MAD is 256 bytes, not " + std::to_string(len));
    if (mad[kBaseVersion] != 1) return fail("base version " + std::to_string(mad[kBaseVersion]) + ", not 1");
    if (mad[kClass] != kMgmtClass) return fail("management class " + std::to_string(mad[kClass]) + ", not 3 (SA)");
    if (mad[kVersion] != kClassVersion) return fail("SA class version " + std::to_string(mad[kVersion]) + ", not 2");
    Reader header(mad);
    std::uint16_t attr = 0, offset = 0;
    header.bits(kAttrId, 0, 16, attr);
    if (attr != kAttrPathRecord && attr != kAttrMcMemberRecord)
        return fail("attribute " + hex(attr, 4) + " is neither PathRecord nor MCMemberRecord");
    const std::uint8_t method = mad[kMethod];
    if (method != kMethodGet && method != kMethodSet && method != kMethodGetResp && method != kMethodDelete &&
        method != kMethodDeleteResp)
        return fail("method " + hex(method, 2) + " is none of Get, Set, GetResp, Delete, DeleteResp");
    if (!method_defined(attr, method)) return fail("method " + hex(method, 2) + " is not defined for PathRecord");
    // Requesters may leave AttributeOffset 0 (Linux's SA client does): only
    // a table's responses need it to step from record to record.
    header.bits(kAttrOffset, 0, 16, offset);
    if (offset != 0 && offset != record_bytes(attr) / 8)
        return fail("AttributeOffset " + std::to_string(offset) + " does not span a " +
                    std::to_string(record_bytes(attr)) + "-byte record");
    m.method = method;
    header.bits(kStatus, 0, 16, m.status);
    header.bits(kTid, 0, 64, m.transaction_id);
    header.bits(kCompMask, 0, 64, m.component_mask);
    if (attr == kAttrPathRecord) m.record.emplace<PathRecord>();
    else m.record.emplace<McMemberRecord>();
    Reader r(mad + kSaHeaderBytes);
    std::visit([&](auto& rec) { fields(r, rec, static_cast<const std::decay_t<decltype(rec)>*>(nullptr)); },
               m.record);
    return true;
}

}  // namespace hcasim::packet::sa
