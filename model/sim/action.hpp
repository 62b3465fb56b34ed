#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

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

}  // namespace hcasim::sim
