// libmlx5.so.1 for programs `hcasim run` starts. perftest links the mlx5
// direct-verbs library and uses it only on mlx5 devices; the simulated
// adapter is not one, so each call says so (EOPNOTSUPP) and the program
// stays on the standard verbs.
#include <infiniband/mlx5dv.h>

#include <cerrno>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {
template <typename T>
T* unsupported() {
    errno = EOPNOTSUPP;
    return nullptr;
}
}  // namespace

EXPORT bool mlx5dv_is_supported(ibv_device*) { return false; }
EXPORT ibv_context* mlx5dv_open_device(ibv_device*, mlx5dv_context_attr*) { return unsupported<ibv_context>(); }
EXPORT ibv_qp* mlx5dv_create_qp(ibv_context*, ibv_qp_init_attr_ex*, mlx5dv_qp_init_attr*) { return unsupported<ibv_qp>(); }
EXPORT mlx5dv_qp_ex* mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_ex*) { return unsupported<mlx5dv_qp_ex>(); }
EXPORT int mlx5dv_devx_general_cmd(ibv_context*, const void*, size_t, void*, size_t) { return EOPNOTSUPP; }
EXPORT mlx5dv_mkey* mlx5dv_create_mkey(mlx5dv_mkey_init_attr*) { return unsupported<mlx5dv_mkey>(); }
EXPORT int mlx5dv_destroy_mkey(mlx5dv_mkey*) { return EOPNOTSUPP; }
EXPORT int mlx5dv_crypto_login(ibv_context*, mlx5dv_crypto_login_attr*) { return EOPNOTSUPP; }
EXPORT mlx5dv_dek* mlx5dv_dek_create(ibv_context*, mlx5dv_dek_init_attr*) { return unsupported<mlx5dv_dek>(); }
EXPORT int mlx5dv_dek_destroy(mlx5dv_dek*) { return EOPNOTSUPP; }
EXPORT int mlx5dv_query_device(ibv_context*, mlx5dv_context*) { return EOPNOTSUPP; }
