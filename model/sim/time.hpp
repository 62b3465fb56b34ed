// Simulated time and clock domains. Time is kept in whole picoseconds (the
// SystemC time resolution hcasim sets), and every block delay is a whole
// number of cycles of that block's clock.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <string>

#include <systemc>

namespace hcasim::sim {

using Tick = std::uint64_t;  // picoseconds

inline constexpr Tick kPsPerNs = 1000;
inline constexpr Tick kPsPerUs = 1000000;

inline Tick now_ps() { return sc_core::sc_time_stamp().value(); }
inline sc_core::sc_time to_sc(Tick t) { return sc_core::sc_time::from_value(t); }
inline double ps_to_us(Tick t) { return static_cast<double>(t) / 1e6; }
inline Tick ns_to_ps(double ns) { return static_cast<Tick>(std::llround(ns * 1000.0)); }

// A clock domain: a frequency and the edge arithmetic that keeps every delay
// of a block on its own clock edges. Edges are at k * period from time zero.
class Clock {
public:
    Clock() = default;
    Clock(std::string name, double period_ps) : m_name(std::move(name)), m_period_ps(period_ps) {}
    static Clock from_mhz(std::string name, double mhz) { return Clock(std::move(name), 1e6 / mhz); }

    const std::string& name() const { return m_name; }
    double period_ps() const { return m_period_ps; }
    double mhz() const { return 1e6 / m_period_ps; }

    // Duration of n cycles.
    Tick cycles(std::uint64_t n) const { return static_cast<Tick>(std::llround(static_cast<double>(n) * m_period_ps)); }

    // First clock edge at or after t.
    Tick edge_at_or_after(Tick t) const {
        const double k = std::ceil(static_cast<double>(t) / m_period_ps - 1e-9);
        return static_cast<Tick>(std::llround(k * m_period_ps));
    }

    // t aligned up to an edge, plus n cycles: when an operation of n cycles that
    // becomes possible at t finishes.
    Tick after(Tick t, std::uint64_t n) const {
        const double k = std::ceil(static_cast<double>(t) / m_period_ps - 1e-9) + static_cast<double>(n);
        return static_cast<Tick>(std::llround(k * m_period_ps));
    }

private:
    std::string m_name;
    double m_period_ps = 1000.0;
};

// A shared resource that serves one request at a time (a serialiser, a
// pipeline stage, one direction of a bus). A request reserved for a later
// time does not block one that is ready earlier: the resource fills the
// earliest idle gap that fits, as a link sends whatever is ready. Callers
// that need order (posted writes, one QP's packets) pass a floor. Queueing
// delay is what emerges when requests arrive faster than it serves them.
class Timeline {
public:
    struct Slot {
        Tick start;
        Tick end;
    };

    explicit Timeline(const Clock* clock = nullptr) : m_clock(clock) {}
    void set_clock(const Clock* clock) { m_clock = clock; }

    // Occupies the resource for n cycles, starting no earlier than t.
    Slot reserve(Tick t, std::uint64_t n) {
        // Nothing can be reserved before the present: forget the past.
        const Tick now = now_ps();
        while (!m_busy.empty() && m_busy.front().end <= now) m_busy.pop_front();
        Tick start = m_clock->edge_at_or_after(t);
        Tick end = m_clock->after(start, n);
        std::size_t i = 0;
        // Skip busy intervals that end before we could start.
        while (i < m_busy.size() && m_busy[i].end <= start) ++i;
        while (i < m_busy.size() && m_busy[i].start < end) {
            start = m_clock->edge_at_or_after(m_busy[i].end);
            end = m_clock->after(start, n);
            ++i;
        }
        // Insert at i, merging with touching neighbours.
        const bool join_prev = i > 0 && m_busy[i - 1].end == start;
        const bool join_next = i < m_busy.size() && m_busy[i].start == end;
        if (join_prev && join_next) {
            m_busy[i - 1].end = m_busy[i].end;
            m_busy.erase(m_busy.begin() + static_cast<std::ptrdiff_t>(i));
        } else if (join_prev) {
            m_busy[i - 1].end = end;
        } else if (join_next) {
            m_busy[i].start = start;
        } else {
            m_busy.insert(m_busy.begin() + static_cast<std::ptrdiff_t>(i), Slot{start, end});
        }
        if (end > m_busy_until) m_busy_until = end;
        m_busy_total += end - start;
        return {start, end};
    }

    Tick busy_until() const { return m_busy_until; }
    Tick busy_total() const { return m_busy_total; }

private:
    const Clock* m_clock;
    std::deque<Slot> m_busy;  // disjoint, in time order
    Tick m_busy_until = 0;
    Tick m_busy_total = 0;
};

}  // namespace hcasim::sim
