#include "host/driver/host_thread.hpp"

#include <map>

namespace hcasim::host {

namespace {
std::map<const sc_core::sc_object*, Driver*>& bindings() {
    static std::map<const sc_core::sc_object*, Driver*> m;
    return m;
}
std::map<const sc_core::sc_object*, int>& indices() {
    static std::map<const sc_core::sc_object*, int> m;
    return m;
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
    const sc_core::sc_object* self = sc_core::sc_get_current_process_handle().get_process_object();
    bindings()[self] = driver;
    indices()[self] = index;
}

int current_thread_index() {
    auto h = sc_core::sc_get_current_process_handle();
    if (!h.valid()) return 0;
    auto it = indices().find(h.get_process_object());
    return it == indices().end() ? 0 : it->second;
}

Driver* current_driver() {
    auto h = sc_core::sc_get_current_process_handle();
    if (!h.valid()) return nullptr;
    auto it = bindings().find(h.get_process_object());
    return it == bindings().end() ? nullptr : it->second;
}

}  // namespace hcasim::host
