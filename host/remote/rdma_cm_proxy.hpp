// The simulator's end of a program's librdmacm: carries out each rdma_cm
// call its drop-in librdmacm.so.1 forwards, through the same librdmacm
// personality (host/rdma_cm) that in-process programs call. The verbs
// objects rdma_cm makes for the program (the device, the default PD, QPs,
// CQs and their channels, SRQs) are adopted into its VerbsProxy so that the
// program can name them; each id's state goes back with every call and
// event so that the program's rdma_cm_id mirrors it.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <vector>

#include <systemc>

#include "host/remote/call_codec.hpp"
#include "host/remote/verbs_proxy.hpp"

namespace hcasim::remote {

class RdmaCmProxy {
public:
    RdmaCmProxy(VerbsProxy& verbs, int pidfd, std::function<void()> touch);
    ~RdmaCmProxy();
    RdmaCmProxy(const RdmaCmProxy&) = delete;
    RdmaCmProxy& operator=(const RdmaCmProxy&) = delete;

    static bool handles(Op op);
    void execute(Op op, Reader& in, Writer& out);
    // The program ended: its ids go (with their QPs), then its channels.
    void release_all();

private:
    struct Channel;  // an event channel, the program's eventfd and its watcher

    void put_id(Writer& out, rdma_cm_id* id);
    void put_event(Writer& out, const rdma_cm_event* e);
    rdma_cm_id* id_of(std::uint64_t h) const;
    // rdma_destroy_qp and rdma_destroy_srq, and the verbs objects they made
    // forgotten (those they could not destroy become the program's).
    void destroy_qp(rdma_cm_id* id);
    void destroy_srq(rdma_cm_id* id);
    // made: what the destroy was to free, taken before it; orphans: what it
    // could not (the id's list, emptied).
    void forget_destroyed(std::initializer_list<const void*> made, std::vector<const void*>& orphans);
    int take_fd(int remote_fd);

    VerbsProxy& m_verbs;
    int m_pidfd;
    std::function<void()> m_touch;
    std::map<std::uint64_t, std::unique_ptr<Channel>> m_channels;  // by handle
    std::map<std::uint64_t, rdma_cm_id*> m_ids;                     // by handle
    std::map<std::uint64_t, rdma_cm_event*> m_events;               // taken, not yet acknowledged
};

}  // namespace hcasim::remote
