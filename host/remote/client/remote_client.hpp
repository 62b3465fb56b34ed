// What the drop-in libraries (libibverbs.so.1, librdmacm.so.1) use of the
// process's channel to the simulator, which libhcasim_client.so (preloaded
// into every program hcasim runs) owns.
#pragma once

#include <cstddef>
#include <cstdint>

#include "host/remote/call_codec.hpp"
#include "host/remote/channel.hpp"

extern "C" {
// The calling thread's slot (claimed on its first call), or null when the
// process was not started by `hcasim run`.
__attribute__((visibility("default"))) hcasim::remote::Slot* hcasim_client_slot();
// Carries out the call whose arguments are in slot->data[0, length): returns
// the length of the result now in slot->data.
__attribute__((visibility("default"))) std::size_t hcasim_client_call(hcasim::remote::Slot* slot,
                                                                      hcasim::remote::Op op, std::size_t length);
// The simulated node this process runs on (-1 outside `hcasim run`).
__attribute__((visibility("default"))) int hcasim_client_node();
}

namespace hcasim::remote {

// One forwarded call: arguments written with in(), results read with out().
class Call {
public:
    explicit Call(Op op) : m_op(op), m_slot(hcasim_client_slot()),
        m_in(m_slot ? m_slot->data : nullptr, m_slot ? kSlotBytes : 0), m_out(nullptr, 0) {}
    bool ok() const { return m_slot != nullptr; }
    Writer& in() { return m_in; }
    // Sends the call and waits for its result; false when there is no
    // simulator or the arguments did not fit.
    bool run() {
        if (!m_slot || m_in.overflow()) return false;
        const std::size_t n = hcasim_client_call(m_slot, m_op, m_in.length());
        m_out = Reader(m_slot->data, n);
        return true;
    }
    Reader& out() { return m_out; }

private:
    Op m_op;
    Slot* m_slot;
    Writer m_in;
    Reader m_out;
};

}  // namespace hcasim::remote
