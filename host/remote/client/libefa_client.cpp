// libefa.so.1 for programs `hcasim run` starts. perftest links the EFA
// direct-verbs library and uses it only on EFA devices; the simulated
// adapter is not one, so each call says so and the program stays on the
// standard verbs.
#include <infiniband/efadv.h>

#include <cerrno>

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT int efadv_query_device(ibv_context*, efadv_device_attr*, uint32_t) { return EOPNOTSUPP; }
EXPORT ibv_qp* efadv_create_qp_ex(ibv_context*, ibv_qp_init_attr_ex*, efadv_qp_init_attr*, uint32_t) {
    errno = EOPNOTSUPP;
    return nullptr;
}
EXPORT ibv_qp* efadv_create_driver_qp(ibv_pd*, ibv_qp_init_attr*, uint32_t) {
    errno = EOPNOTSUPP;
    return nullptr;
}
