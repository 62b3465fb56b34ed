// The simulated kernel's event objects (KEVENT), on which KVIPL wait objects
// are built: host threads block on them in simulated time and the provider
// signals them from its interrupt handlers.
#include <systemc>

#include "host/driver/driver.hpp"
#include "host/kvipl/kvipl.h"
#include "host/driver/host_thread.hpp"
#include "model/sim/time.hpp"

using hcasim::host::Driver;

namespace {

Driver* dispatcher_of(KEVENT* e) {
    if (!e->Dispatcher) e->Dispatcher = hcasim::host::current_driver();
    return static_cast<Driver*>(e->Dispatcher);
}

}  // namespace

extern "C" {

void KeInitializeEvent(KEVENT* Event, EVENT_TYPE Type, VIP_BOOLEAN State) {
    if (!Event) return;
    Event->SignalState = State ? 1 : 0;
    Event->Type = Type;
    Event->Dispatcher = hcasim::host::current_driver();
}

long KeSetEvent(KEVENT* Event) {
    if (!Event) return 0;
    const long previous = Event->SignalState;
    Event->SignalState = 1;
    if (Driver* d = dispatcher_of(Event)) d->kernel_dispatch.notify(sc_core::SC_ZERO_TIME);
    return previous;
}

void KeClearEvent(KEVENT* Event) {
    if (Event) Event->SignalState = 0;
}

long KeResetEvent(KEVENT* Event) {
    if (!Event) return 0;
    const long previous = Event->SignalState;
    Event->SignalState = 0;
    return previous;
}

long KeReadStateEvent(KEVENT* Event) { return Event ? Event->SignalState : 0; }

long KeWaitForSingleObject(KEVENT* Event, VIP_ULONG TimeoutMs) {
    if (!Event) return STATUS_TIMEOUT;
    Driver* d = dispatcher_of(Event);
    const hcasim::sim::Tick start = hcasim::sim::now_ps();
    const bool forever = TimeoutMs == VIP_INFINITE;
    const hcasim::sim::Tick deadline = start + static_cast<hcasim::sim::Tick>(TimeoutMs) * 1000 * hcasim::sim::kPsPerUs;
    for (;;) {
        if (Event->SignalState) {
            if (Event->Type == SynchronizationEvent) Event->SignalState = 0;
            return STATUS_SUCCESS;
        }
        const hcasim::sim::Tick now = hcasim::sim::now_ps();
        if (!forever && now >= deadline) return STATUS_TIMEOUT;
        if (!d) {
            // Not a simulated host thread: nothing can wake it.
            return STATUS_TIMEOUT;
        }
        if (forever)
            sc_core::wait(d->kernel_dispatch);
        else
            sc_core::wait(hcasim::sim::to_sc(deadline - now), d->kernel_dispatch);
    }
}

}  // extern "C"
