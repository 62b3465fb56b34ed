// Multicast in the libibverbs personality: ibv_attach_mcast and
// ibv_detach_mcast. As in rdma-core they return the errno value (and set
// errno); the kernel's rules apply: only UD QPs, a multicast GID (ff...) and
// a multicast LID (0xC000-0xFFFE), else EINVAL; no room in the adapter's
// group table, ENOMEM; detaching a QP that is not attached, EINVAL.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>

#include "host/verbs/verbs_internal.hpp"

using namespace hcasim::verbs;

namespace {

int result(int err) {
    if (err) errno = err;
    return err;
}

hcasim::host::Driver::Gid gid_of(const ibv_gid& g) {
    hcasim::host::Driver::Gid out;
    std::memcpy(out.data(), g.raw, out.size());
    return out;
}

}  // namespace

extern "C" {

int ibv_attach_mcast(struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid) {
    if (!qp || !gid) return result(EINVAL);
    return result(drv(qp->context)->attach_mcast(*sim(qp)->dqp, gid_of(*gid), lid));
}

int ibv_detach_mcast(struct ibv_qp* qp, const union ibv_gid* gid, uint16_t lid) {
    if (!qp || !gid) return result(EINVAL);
    return result(drv(qp->context)->detach_mcast(*sim(qp)->dqp, gid_of(*gid), lid));
}

}  // extern "C"
