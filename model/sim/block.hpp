// Base of every hardware block: a SystemC module with its own clock domain, a
// queue of timed actions and counters. A block's single SC_METHOD runs only
// when one of its actions is due, so a block with no work costs no wall time
// and no idle clock is ever ticked.
#pragma once

#include <cstdint>
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>
#include <map>
#include <queue>
#include <string>
#include <vector>

#include <systemc>

#include "model/sim/log.hpp"
#include "model/sim/time.hpp"

namespace hcasim::sim {

// A move-only callable stored inline: timed actions are scheduled for every
// packet, and this keeps them off the heap.
class Action {
public:
    Action() = default;
    template <typename F>
    Action(F&& f) {  // NOLINT: implicit from any small callable
        using Fn = std::decay_t<F>;
        static_assert(sizeof(Fn) <= kCapacity, "timed action captures too much: capture less or by pointer");
        static_assert(alignof(Fn) <= alignof(std::max_align_t), "over-aligned action");
        new (m_storage) Fn(std::forward<F>(f));
        m_ops = &ops_for<Fn>;
    }
    Action(Action&& o) noexcept : m_ops(o.m_ops) {
        if (m_ops) m_ops->move(m_storage, o.m_storage);
        o.reset();
    }
    Action& operator=(Action&& o) noexcept {
        if (this != &o) {
            reset();
            m_ops = o.m_ops;
            if (m_ops) m_ops->move(m_storage, o.m_storage);
            o.reset();
        }
        return *this;
    }
    Action(const Action&) = delete;
    Action& operator=(const Action&) = delete;
    ~Action() { reset(); }

    void operator()() { m_ops->call(m_storage); }

private:
    static constexpr std::size_t kCapacity = 96;
    struct Ops {
        void (*call)(void*);
        void (*move)(void* to, void* from);
        void (*destroy)(void*);
    };
    template <typename Fn>
    static constexpr Ops ops_for = {
        [](void* p) { (*static_cast<Fn*>(p))(); },
        [](void* to, void* from) { new (to) Fn(std::move(*static_cast<Fn*>(from))); },
        [](void* p) { static_cast<Fn*>(p)->~Fn(); },
    };
    void reset() {
        if (m_ops) m_ops->destroy(m_storage);
        m_ops = nullptr;
    }

    alignas(std::max_align_t) unsigned char m_storage[kCapacity];
    const Ops* m_ops = nullptr;
};

class Block : public sc_core::sc_module {
public:
    SC_HAS_PROCESS(Block);
    Block(const sc_core::sc_module_name& name, Clock clock);

    const Clock& clock() const { return m_clock; }
    const std::string& path() const { return m_path; }

    // Runs fn at simulated time t (>= now); actions due at the same time run in
    // the order they were scheduled, which keeps runs deterministic.
    void at(Tick t, Action fn);

    // Counters in the spirit of rdma_hw_stats, reported per block.
    // Named by string literals on hot paths: found by address, no string work.
    std::uint64_t& counter(const char* name) {
        for (auto& e : m_fast_counters)
            if (e.first == name) return *e.second;
        std::uint64_t& c = m_counters[name];
        m_fast_counters.emplace_back(name, &c);
        return c;
    }
    std::uint64_t& counter(const std::string& name) { return m_counters[name]; }
    const std::map<std::string, std::uint64_t>& counters() const { return m_counters; }

protected:
    Clock m_clock;

private:
    struct Timed {
        Tick t;
        std::uint64_t seq;
        Action fn;
    };
    struct Later {
        bool operator()(const Timed& a, const Timed& b) const {
            return a.t != b.t ? a.t > b.t : a.seq > b.seq;
        }
    };

    void run_due();

    std::string m_path;
    std::priority_queue<Timed, std::vector<Timed>, Later> m_actions;
    std::uint64_t m_seq = 0;
    Tick m_armed_for = ~Tick(0);
    bool m_running = false;
    sc_core::sc_event m_wake;
    std::map<std::string, std::uint64_t> m_counters;
    std::vector<std::pair<const char*, std::uint64_t*>> m_fast_counters;
};

}  // namespace hcasim::sim
