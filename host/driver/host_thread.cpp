#include "host/driver/host_thread.hpp"

#include <map>

namespace hcasim::host {

namespace {
// A program thread's node and its number there.
struct Binding {
    Driver* driver = nullptr;
    int index = 0;
};
std::map<const sc_core::sc_object*, Binding>& bindings() {
    static std::map<const sc_core::sc_object*, Binding> m;
    return m;
}
const Binding* current_binding() {
    auto h = sc_core::sc_get_current_process_handle();
    if (!h.valid()) return nullptr;
    auto it = bindings().find(h.get_process_object());
    return it == bindings().end() ? nullptr : &it->second;
}
std::map<const sc_core::sc_object*, pid_t>& spaces() {
    static std::map<const sc_core::sc_object*, pid_t> m;
    return m;
}
}  // namespace

void bind_current_address_space(pid_t pid) {
    spaces()[sc_core::sc_get_current_process_handle().get_process_object()] = pid;
}

pid_t current_address_space() {
    auto h = sc_core::sc_get_current_process_handle();
    if (!h.valid()) return 0;
    auto it = spaces().find(h.get_process_object());
    return it == spaces().end() ? 0 : it->second;
}

void bind_current_thread(Driver* driver, int index) {
    bindings()[sc_core::sc_get_current_process_handle().get_process_object()] = {driver, index};
}

int current_thread_index() {
    const Binding* b = current_binding();
    return b ? b->index : 0;
}

Driver* current_driver() {
    const Binding* b = current_binding();
    return b ? b->driver : nullptr;
}

}  // namespace hcasim::host
