// Simulated time and clock domains. Time is kept in whole picoseconds (the
// SystemC time resolution hcasim sets), and every block delay is a whole
// number of cycles of that block's clock.
#pragma once

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <limits>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>
#include <string>

#include <systemc>

namespace hcasim::sim {

using Tick = std::uint64_t;  // picoseconds

inline constexpr Tick kPsPerNs = 1000;
inline constexpr Tick kPsPerUs = 1000000;
inline constexpr Tick kPsPerMs = 1000000000;

inline Tick now_ps() { return sc_core::sc_time_stamp().value(); }
inline sc_core::sc_time to_sc(Tick t) { return sc_core::sc_time::from_value(t); }
inline double ps_to_us(Tick t) { return static_cast<double>(t) / 1e6; }
inline Tick ns_to_ps(double ns) { return static_cast<Tick>(std::llround(ns * 1000.0)); }

// "10us", "1.5ms", "200ns", "2s": a time with its unit, as configuration
// keys that schedule events take it. False when malformed.
inline bool parse_time_with_unit(const std::string& s, Tick& out) {
    std::size_t n = 0;
    double v = 0;
    try {
        v = std::stod(s, &n);
    } catch (...) {
        return false;
    }
    const std::string unit = s.substr(n);
    double ps_per = 0;
    if (unit == "ns") ps_per = 1e3;
    else if (unit == "us") ps_per = 1e6;
    else if (unit == "ms") ps_per = 1e9;
    else if (unit == "s") ps_per = 1e12;
    else return false;
    if (!(v >= 0) || v * ps_per > 1e18) return false;
    out = static_cast<Tick>(v * ps_per + 0.5);
    return true;
}

// A clock domain: a frequency and the edge arithmetic that keeps every delay
// of a block on its own clock edges. Edges are at k * period from time zero,
// rounded up to whole picoseconds; the period is kept in femtoseconds so the
// arithmetic is exact integer work on the hot path.
class Clock {
public:
    Clock() = default;
    Clock(std::string name, double period_ps)
        : m_name(std::move(name)), m_period_fs(static_cast<std::uint64_t>(std::llround(period_ps * 1000.0))) {
        if (m_period_fs == 0) m_period_fs = 1;
        m_inverse = std::numeric_limits<std::uint64_t>::max() / m_period_fs;
    }
    static Clock from_mhz(std::string name, double mhz) { return Clock(std::move(name), 1e6 / mhz); }

    const std::string& name() const { return m_name; }
    double period_ps() const { return static_cast<double>(m_period_fs) / 1000.0; }
    double mhz() const { return 1e9 / static_cast<double>(m_period_fs); }

    // Duration of n cycles.
    Tick cycles(std::uint64_t n) const { return (n * m_period_fs + 999) / 1000; }

    // First clock edge at or after t.
    Tick edge_at_or_after(Tick t) const { return edge(index_at_or_after(t)); }

    // t aligned up to an edge, plus n cycles: when an operation of n cycles that
    // becomes possible at t finishes.
    Tick after(Tick t, std::uint64_t n) const { return edge(index_at_or_after(t) + n); }

    // Edge k, and the index of the first edge at or after t: for callers
    // that step through many edges from one.
    Tick edge_at(std::uint64_t k) const { return edge(k); }
    std::uint64_t index_at(Tick t) const { return index_at_or_after(t); }

    // Edges after time zero at or before t: what a free-running counter of
    // this clock reads at t (an adapter's timestamp counter).
    std::uint64_t count_at(Tick t) const { return periods_in(static_cast<unsigned __int128>(t) * 1000); }

    // An operation of n cycles that becomes possible at t: its first edge
    // and its end, with one index computation for both.
    std::pair<Tick, Tick> span(Tick t, std::uint64_t n) const {
        const std::uint64_t k = index_at_or_after(t);
        return {edge(k), edge(k + n)};
    }

private:
    // Smallest k with edge(k) >= t; an edge's own time maps back to it even
    // though edges are rounded up to whole picoseconds.
    std::uint64_t index_at_or_after(Tick t) const {
        return t == 0 ? 0 : periods_in(static_cast<unsigned __int128>(t - 1) * 1000) + 1;
    }
    Tick edge(std::uint64_t k) const { return (k * m_period_fs + 999) / 1000; }

    // x / m_period_fs, exact. Below 2^64 (t under about 5 hours) by a
    // multiply with the period's precomputed inverse instead of a division
    // (the hot path of every timed block): the estimate is at most two below
    // the quotient, and the loop corrects it.
    std::uint64_t periods_in(unsigned __int128 wide) const {
        if (wide >> 64) return static_cast<std::uint64_t>(wide / m_period_fs);
        const auto x = static_cast<std::uint64_t>(wide);
        auto q = static_cast<std::uint64_t>((static_cast<unsigned __int128>(x) * m_inverse) >> 64);
        while (x - q * m_period_fs >= m_period_fs) ++q;
        return q;
    }

    std::string m_name;
    std::uint64_t m_period_fs = 1000000;
    std::uint64_t m_inverse = std::numeric_limits<std::uint64_t>::max() / 1000000;
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

    // From now on another timeline serves this one's requests: the work of
    // several stages runs on one resource (an adapter whose steps are a
    // control program on one processor). busy_total() still counts this
    // stage's own share; step names it to the serving timeline's watcher.
    void share(Timeline* serving, const char* step = "step") {
        m_serving = serving;
        m_step = step;
    }
    // Told of every slot this timeline serves for a stage that shares it
    // (the shared processor's trace track).
    void on_serve(std::function<void(const char* step, const Slot&)> watcher) { m_watcher = std::move(watcher); }

    // Occupies the resource for n cycles, starting no earlier than t.
    Slot reserve(Tick t, std::uint64_t n) {
        if (m_serving) {
            const Slot s = m_serving->reserve(t, n);
            m_busy_total += s.end - s.start;
            if (m_serving->m_watcher) m_serving->m_watcher(m_step, s);
            return s;
        }
        forget_past();
        return book(t, n);
    }

    // Occupies the resource for count pieces of work in order, piece i for
    // n[i] cycles no earlier than the end of piece i - 1 (piece 0 no earlier
    // than t), each in the earliest gap that holds it: what reserve() piece
    // by piece gives, with the pieces that follow each other in one gap
    // booked at once. Each piece's end goes to ends (if given); returns the
    // first piece's start and the last one's end.
    Slot reserve_in_order(Tick t, const std::uint64_t* n, std::size_t count, Tick* ends) {
        Slot all{t, t};
        if (!m_serving) forget_past();
        std::size_t i = 0;
        while (i < count) {
            if (m_serving) {
                const Slot s = reserve(t, n[i]);
                all.start = i == 0 ? s.start : all.start;
                all.end = t = s.end;
                if (ends) ends[i] = s.end;
                ++i;
                continue;
            }
            // The idle time from t's edge to the next booking, in cycles.
            const std::uint64_t k0 = m_clock->index_at(t);
            const Tick start = m_clock->edge_at(k0);
            std::uint64_t room = std::numeric_limits<std::uint64_t>::max();
            if (m_head < m_busy.size() && start < m_busy.back().end) {
                const auto it = std::upper_bound(m_busy.begin() + static_cast<std::ptrdiff_t>(m_head), m_busy.end(),
                                                 start, [](Tick v, const Slot& s) { return v < s.end; });
                room = it->start > start ? m_clock->count_at(it->start) - k0 : 0;
            }
            std::uint64_t run = 0;
            std::size_t j = i;
            while (j < count && n[j] <= room - run) run += n[j++];
            Slot s;
            if (j == i) {
                // The next piece does not fit here: it goes where it does.
                s = book(t, n[i]);
                if (ends) ends[i] = s.end;
                j = i + 1;
            } else {
                s = run ? book(start, run) : Slot{start, start};
                if (ends) {
                    std::uint64_t upto = k0;
                    for (std::size_t k = i; k < j; ++k) ends[k] = m_clock->edge_at(upto += n[k]);
                }
            }
            if (i == 0) all.start = s.start;
            all.end = t = s.end;
            i = j;
        }
        return all;
    }

    Tick busy_total() const { return m_busy_total; }

private:
    // Nothing can be reserved before the present: forget the past.
    void forget_past() {
        const Tick now = now_ps();
        while (m_head < m_busy.size() && m_busy[m_head].end <= now) ++m_head;
        if (m_head > 64 && m_head * 2 > m_busy.size()) {
            m_busy.erase(m_busy.begin(), m_busy.begin() + static_cast<std::ptrdiff_t>(m_head));
            m_head = 0;
        }
    }

    Slot book(Tick t, std::uint64_t n) {
        auto [start, end] = m_clock->span(t, n);
        if (m_head == m_busy.size() || start >= m_busy.back().end) {
            // The common case: after everything already booked.
            if (m_head < m_busy.size() && m_busy.back().end == start) m_busy.back().end = end;
            else m_busy.push_back(Slot{start, end});
            m_busy_total += end - start;
            return {start, end};
        }
        // Intervals are disjoint and sorted, so also sorted by end: find the
        // first one that ends after we could start.
        auto it = std::upper_bound(m_busy.begin() + static_cast<std::ptrdiff_t>(m_head), m_busy.end(), start,
                                   [](Tick v, const Slot& s) { return v < s.end; });
        while (it != m_busy.end() && it->start < end) {
            std::tie(start, end) = m_clock->span(it->end, n);
            ++it;
        }
        // Insert before it, merging with touching neighbours.
        const bool join_prev = it != m_busy.begin() + static_cast<std::ptrdiff_t>(m_head) && (it - 1)->end == start;
        const bool join_next = it != m_busy.end() && it->start == end;
        if (join_prev && join_next) {
            (it - 1)->end = it->end;
            m_busy.erase(it);
        } else if (join_prev) {
            (it - 1)->end = end;
        } else if (join_next) {
            it->start = start;
        } else {
            m_busy.insert(it, Slot{start, end});
        }
        m_busy_total += end - start;
        return {start, end};
    }

    const Clock* m_clock;
    Timeline* m_serving = nullptr;
    const char* m_step = "step";
    std::function<void(const char*, const Slot&)> m_watcher;
    std::vector<Slot> m_busy;  // disjoint, in time order, live from m_head
    std::size_t m_head = 0;
    Tick m_busy_total = 0;
};

}  // namespace hcasim::sim
