// The sending side of link-level flow control (IBA 7.9) on one data VL: how
// much of the link partner's receive buffer this sender's packets hold, and
// the credits on their way back. Space is counted in whole 64-byte blocks.
// A packet may start once the credits it needs are known to be back; the
// partner returns them in a flow-control packet as packets leave its buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "model/sim/time.hpp"

namespace hcasim::fabric {

// Flow control counts buffer space in whole blocks (IBA 7.9.2).
inline constexpr std::uint64_t kCreditBlockBytes = 64;
inline std::uint64_t credit_bytes(std::uint64_t bytes) {
    return (bytes + kCreditBlockBytes - 1) / kCreditBlockBytes * kCreditBlockBytes;
}
// A flow-control packet: 4 bytes and a 2-byte link CRC (IBA 7.9.4).
inline constexpr std::uint64_t kFlowControlPacketBytes = 6;
// Its serialisation on a link of `lanes` lanes whose symbol clock moves a
// byte per lane per cycle.
inline sim::Tick flow_control_packet_time(const sim::Clock& symbol_clock, std::uint64_t lanes) {
    return symbol_clock.cycles((kFlowControlPacketBytes + lanes - 1) / lanes);
}

// Amounts due at future times, in time order. They come nearly in order, so
// a sorted deque appended at its end is cheaper than a tree.
class DueByTime {
public:
    void add(sim::Tick t, std::uint64_t amount) {
        auto it = m_due.end();
        while (it != m_due.begin() && std::prev(it)->first > t) --it;
        m_due.insert(it, {t, amount});
    }
    // The total of the amounts due by t, which it forgets.
    std::uint64_t take_due(sim::Tick t) {
        std::uint64_t sum = 0;
        while (!m_due.empty() && m_due.front().first <= t) {
            sum += m_due.front().second;
            m_due.pop_front();
        }
        return sum;
    }
    auto begin() const { return m_due.begin(); }
    auto end() const { return m_due.end(); }

private:
    std::deque<std::pair<sim::Tick, std::uint64_t>> m_due;
};

class LinkCredits {
public:
    // limit: the partner's buffer in bytes; 0: no flow control.
    explicit LinkCredits(std::uint64_t limit = 0) : m_limit(limit) {}
    bool enabled() const { return m_limit != 0; }

    // The earliest time from t at which the partner has room for a packet
    // of bytes, given the credits known to come back; none when that takes
    // credits not yet on their way.
    std::optional<sim::Tick> time_for(std::uint64_t bytes, sim::Tick t) {
        // A duplicated packet is given back twice: never below nothing held.
        m_used -= std::min(m_used, m_returns.take_due(sim::now_ps()));
        const std::uint64_t need = credit_bytes(bytes);
        std::uint64_t used = m_used;
        if (used + need <= m_limit) return t;
        for (const auto& [when, back] : m_returns) {
            used -= std::min(used, back);
            if (used + need <= m_limit) return std::max(t, when);
        }
        return std::nullopt;
    }
    // A packet of bytes was booked on the wire (at a time time_for allowed).
    void take(std::uint64_t bytes) { m_used += credit_bytes(bytes); }
    // The partner's flow-control packet gives bytes back at t.
    void give_back(std::uint64_t bytes, sim::Tick t) { m_returns.add(t, credit_bytes(bytes)); }

private:
    std::uint64_t m_limit;
    std::uint64_t m_used = 0;
    DueByTime m_returns;  // by the time they arrive
};

}  // namespace hcasim::fabric
