// The driver core of one simulated node, API-neutral: it owns protection
// domains, memory registrations, CQs and QPs (their rings in host memory and
// the software state beside them), writes WQEs, rings doorbells, polls CQEs
// and turns interrupts into events. API personalities (verbs, KVIPL) are thin
// translations onto it.
#pragma once

#include <array>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <systemc>

#include "firmware/cm_agent.hpp"
#include "firmware/command_interface.hpp"
#include "host/driver/host_cpu.hpp"
#include "model/hca/hca.hpp"

namespace hcasim::fabric {
class SubnetManager;
}

namespace hcasim::packet::sa {
struct Mad;
}

namespace hcasim::host {

struct Sge {
    std::uint64_t addr;
    std::uint32_t length;
    std::uint32_t lkey;
};

struct SendRequest {
    std::uint64_t wr_id = 0;
    hca::WqeOpcode op = hca::WqeOpcode::Send;
    bool signaled = false;
    bool solicited = false;
    bool inline_data = false;
    bool fence = false;
    std::uint32_t imm = 0;  // network byte order
    std::uint64_t raddr = 0;
    std::uint32_t rkey = 0;
    const Sge* sges = nullptr;
    std::uint32_t num_sge = 0;
    const hca::DatagramSeg* datagram = nullptr;  // UD: where it goes
    std::uint64_t swap_add = 0;                  // atomics
    std::uint64_t compare = 0;
    std::uint32_t xrc_srqn = 0;                  // XRC initiators: the target's SRQ
    std::uint32_t invalidate_rkey = 0;           // LocalInvalidate, SendInvalidate
    const hca::BindSeg* bind = nullptr;          // BindWindow
};

struct Completion {
    std::uint64_t wr_id = 0;
    hca::CqeStatus status = hca::CqeStatus::Success;
    hca::CqeOpcode opcode = hca::CqeOpcode::Send;
    std::uint32_t byte_len = 0;
    std::uint32_t imm = 0;
    bool has_imm = false;
    bool is_send = false;
    bool solicited = false;
    std::uint32_t qpn = 0;
    std::uint32_t src_qp = 0;
    std::uint16_t slid = 0;
    std::uint8_t sl = 0;
    bool grh = false;             // UD receive: a GRH is in the buffer's first 40 bytes
    bool with_invalidate = false; // SEND with invalidate received: imm is the rkey invalidated
    std::uint8_t vendor_err = 0;
    std::uint64_t timestamp = 0;  // adapter core clock cycles when the CQE was written (48 bits)
};

class EventChannel;

struct DriverCq {
    std::uint32_t cqn = 0;
    int requested = 0;               // entries the consumer asked for
    std::uint32_t log_size = 0;
    hca::Cqe* ring = nullptr;
    hca::CqDoorbellRecord* db = nullptr;
    std::uint32_t consumer = 0;      // free-running
    EventChannel* channel = nullptr;
    void* user_context = nullptr;    // the API object to report in events
    int qp_refs = 0;
    std::uint32_t events_delivered = 0;
    std::function<void()> on_interrupt;  // KVIPL: signal the CQ's wait object
    // The last empty poll: when it ended and which host thread made it.
    sim::Tick empty_poll_end = ~sim::Tick(0);
    const sc_core::sc_process_b* empty_poll_thread = nullptr;
};

// A shared receive queue: a ring of WQE slots linked into a list. The
// adapter follows the list from the slot after the last one it fetched; the
// driver writes new WQEs at its head and links slots freed by completions
// at its tail (mlx4's scheme), so one slot is always left as the sentinel
// the last posted WQE points to.
struct DriverSrq {
    std::uint32_t srqn = 0;
    std::uint32_t pdn = 0;
    std::uint32_t max_wr = 0;        // WQEs the consumer may have posted at once
    std::uint32_t max_sge = 0;
    std::uint32_t log_size = 0, log_stride = 0;
    std::uint8_t* ring = nullptr;
    hca::RqDoorbellRecord* db = nullptr;
    std::vector<std::uint64_t> wrid;  // by slot
    std::uint16_t head = 0;           // next slot to write
    std::uint16_t tail = 0;           // last free slot (the sentinel's end of the list)
    std::uint16_t posted = 0;         // WQEs posted (free-running), published in db
    std::uint32_t outstanding = 0;    // posted and not yet completed
    std::uint32_t xrcd = 0;           // XRC SRQs
    struct DriverCq* cq = nullptr;    // XRC SRQs: where their completions go
    int qp_refs = 0;
    void* user_context = nullptr;
    std::uint32_t async_events_reported = 0;
};

struct DriverQp {
    std::uint32_t qpn = 0;
    std::uint32_t pdn = 0;
    DriverCq* send_cq = nullptr;
    DriverCq* recv_cq = nullptr;
    hca::QpState state = hca::QpState::Reset;
    std::uint32_t max_send_wr = 0, max_recv_wr = 0, max_send_sge = 0, max_recv_sge = 0, max_inline = 0;
    bool sq_sig_all = false;
    std::uint32_t sq_log_size = 0, sq_log_stride = 0, rq_log_size = 0, rq_log_stride = 0;
    std::uint8_t* sq = nullptr;
    std::uint8_t* rq = nullptr;
    hca::RqDoorbellRecord* rq_db = nullptr;  // where the adapter learns of posted receives
    std::uint16_t sq_pi = 0, sq_tail = 0;  // posted / known completed (free-running)
    std::uint16_t rq_pi = 0, rq_tail = 0;
    std::vector<std::uint64_t> sq_wrid, rq_wrid;
    std::uint16_t sq_unrung = 0;           // WQEs written since the last doorbell
    firmware::QpAttributes attr;           // last attributes set, for query
    void* user_context = nullptr;
    bool vi = false;                       // a VI: descriptors, no rings
    hca::QpType type = hca::QpType::Rc;
    DriverSrq* srq = nullptr;              // receives come from it (no receive ring)
    std::uint32_t xrcd = 0;                // XRC targets: their domain
};

// A completion channel: interrupts of its CQs become events a thread waits on.
class EventChannel {
public:
    struct Event {
        DriverCq* cq;
        sim::Tick ready_at;
    };
    std::deque<Event> events;
    sc_core::sc_event arrived;
    int cq_refs = 0;
};

struct AsyncEventRecord {
    hca::AsyncEvent event;
    sim::Tick ready_at;
};

// An IPoIB path between two ports, as the SA's PathRecord gives it.
struct PathInfo {
    std::array<std::uint8_t, 16> sgid{}, dgid{};
    std::uint16_t slid = 0, dlid = 0;
    std::uint16_t pkey = 0xffff;
    std::uint8_t sl = 0;
    std::uint8_t mtu = 0;          // IBA encoding (1: 256 ... 5: 4096)
    std::uint8_t rate = 0;         // IBA encoding
    std::uint8_t packet_life = 0;  // 4.096 us x 2^value
};

class Driver;

// The IPoIB subnet of the simulated hosts (ib0 of each): its addresses and
// host names, what /etc/hosts and the subnet's routes give every host.
struct IpSubnet {
    struct Host {
        std::uint32_t ip;  // host byte order
        std::string name;
        Driver* driver;
    };
    std::uint32_t network = 0;
    int prefix_len = 24;
    std::vector<Host> hosts;
    bool contains(std::uint32_t ip) const {
        const std::uint32_t mask = prefix_len == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix_len);
        return (ip & mask) == (network & mask);
    }
    const Host* by_ip(std::uint32_t ip) const {
        for (const Host& h : hosts)
            if (h.ip == ip) return &h;
        return nullptr;
    }
    const Host* by_name(const std::string& name) const {
        for (const Host& h : hosts)
            if (h.name == name) return &h;
        return nullptr;
    }
};

// "A.B.C.D/N" as an IpSubnet (no hosts yet) with room for `hosts` hosts; a
// ConfigError naming the value otherwise.
IpSubnet parse_ip_subnet(const std::string& text, int hosts);

struct DeviceInfo {
    std::string name;
    std::uint64_t node_guid = 0;
    std::uint16_t lid = 0;
};

class Driver : public hca::InterruptSink {
public:
    Driver(const DeviceInfo& info, hca::Hca& hca, firmware::CommandInterface& fw, const HostCosts& costs);
    ~Driver() override;

    const DeviceInfo& info() const { return m_info; }
    hca::Hca& hca() { return m_hca; }
    const HostCosts& costs() const { return m_costs; }
    void control_call() { spend_cpu(m_costs.control_call); }

    // Protection domains and memory.
    int alloc_pd(std::uint32_t& pdn);
    int dealloc_pd(std::uint32_t pdn);
    int reg_mr(std::uint32_t pdn, std::uint64_t addr, std::uint64_t length, std::uint32_t access, std::uint32_t& key);
    // EBUSY while memory windows are bound to the region.
    int dereg_mr(std::uint32_t key);
    // Memory windows (hca::MptKind::Window1 or Window2); key is the
    // window's first key. Binding is a send WQE (write_send_wqe).
    int alloc_mw(std::uint32_t pdn, hca::MptKind kind, std::uint32_t& key);
    // Frees the window key's index names, bound or not.
    int dealloc_mw(std::uint32_t key);

    // Completion queues.
    int create_cq(int entries, EventChannel* channel, DriverCq*& out);
    int resize_cq(DriverCq& cq, int entries);
    int destroy_cq(DriverCq* cq);
    int poll_cq(DriverCq& cq, int max, Completion* out);
    // Takes the CQEs the ring holds now, at no CPU cost.
    int read_cqes(DriverCq& cq, int max, Completion* out);
    int req_notify_cq(DriverCq& cq, bool solicited_only);

    // Queue pairs.
    struct QpCaps {
        std::uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
    };
    int create_qp(std::uint32_t pdn, DriverCq* send_cq, DriverCq* recv_cq, const QpCaps& caps, bool sq_sig_all,
                  DriverQp*& out, hca::QpType type = hca::QpType::Rc, DriverSrq* srq = nullptr);
    int modify_qp(DriverQp& qp, const firmware::QpAttributes& a, std::uint32_t fw_mask);
    int destroy_qp(DriverQp* qp);
    // Refreshes qp.state from the adapter.
    void query_qp_state(DriverQp& qp);
    // Writes one WQE into the send ring (no doorbell yet); EINVAL/ENOMEM.
    int write_send_wqe(DriverQp& qp, const SendRequest& r);
    // The calling host thread's track in a trace ("node0.host"; a node's
    // further program threads "node0.host1", ...).
    std::string host_track() const;
    int write_recv_wqe(DriverQp& qp, std::uint64_t wr_id, const Sge* sges, std::uint32_t n);
    // Tells the adapter about the WQEs written since the last doorbell.
    void ring_send_doorbell(DriverQp& qp);
    // Takes back the WQEs written since the last doorbell: the adapter never
    // learns of them and their slots are free again.
    void discard_send_wqes(DriverQp& qp);
    // Publishes the receives written so far in the QP's doorbell record
    // (a store to host memory, no MMIO).
    void ring_recv_doorbell(DriverQp& qp);

    // Shared receive queues. max_wr and max_sge are updated to what was
    // allocated.
    int create_srq(std::uint32_t pdn, std::uint32_t& max_wr, std::uint32_t& max_sge, DriverSrq*& out,
                   std::uint32_t xrcd = 0, DriverCq* cq = nullptr);
    int destroy_srq(DriverSrq* srq);
    // Arms the SRQ limit event (0 disarms); EINVAL above max_wr.
    int arm_srq(DriverSrq& srq, std::uint32_t limit);
    std::uint32_t query_srq_limit(DriverSrq& srq);
    // Grows the SRQ to hold max_wr WQEs (EINVAL below those outstanding).
    int resize_srq(DriverSrq& srq, std::uint32_t max_wr);
    int write_srq_wqe(DriverSrq& srq, std::uint64_t wr_id, const Sge* sges, std::uint32_t n);
    void ring_srq_doorbell(DriverSrq& srq);
    DriverSrq* find_srq(std::uint32_t srqn);

    // XRC domains: inode != 0 names a domain shared by everything that
    // opens the same file (create: make it if there is none; else ENOENT).
    int open_xrcd(std::uint64_t inode, bool create, std::uint32_t& xrcd);
    // EBUSY while SRQs or target QPs use it and this is its last opener.
    int close_xrcd(std::uint32_t xrcd);
    int create_xrc_target(std::uint32_t xrcd, DriverQp*& out);

    // VIs (KVIPL): QPs in descriptor mode. Either CQ may be null.
    struct ViConfig {
        std::uint32_t pdn = 0;
        hca::ViReliability reliability = hca::ViReliability::ReliableDelivery;
        std::uint32_t max_transfer = 0;
        std::uint32_t access = 0;  // remote rights (hca::Access)
        std::uint8_t sl = 0;
    };
    int create_vi(const ViConfig& c, DriverCq* send_cq, DriverCq* recv_cq, DriverQp*& out);
    int modify_vi(DriverQp& qp, const ViConfig& c);
    int destroy_vi(DriverQp* qp);
    // Flushes every posted descriptor and returns the VI to idle.
    void reset_vi(DriverQp& qp);
    // Rings the doorbell of one posted descriptor.
    void post_vi_descriptor(DriverQp& qp, bool recv, std::uint64_t addr, std::uint32_t handle, bool chain_start);
    void arm_vi_queue(DriverQp& qp, bool recv);
    int reg_pages(std::uint32_t pdn, const std::vector<std::uint64_t>& pages, std::uint32_t access, std::uint32_t& key);
    int modify_mr(std::uint32_t key, std::uint32_t pdn, std::uint32_t access);
    const hca::MemoryRegion* find_mr(std::uint32_t key) { return m_hca.mpt().find(key); }
    void set_cm_agent(firmware::CmAgent* cm) { m_cm = cm; }
    // One firmware mailbox command's time (connection management requests).
    void firmware_mailbox() {
        control_call();
        m_fw.mailbox();
    }
    firmware::CmAgent* cm() { return m_cm; }
    // The KVIPL provider's objects of this host, owned here so they live as
    // long as the host does.
    std::shared_ptr<void> kvipl_provider;
    // KVIPL's interrupt handlers: VI queue wait objects and asynchronous errors.
    std::function<void(std::uint32_t qpn, bool recv)> on_vi_queue;
    std::function<void(const hca::AsyncEvent&)> on_vi_async;
    // The simulated kernel's dispatcher: notified whenever a kernel event
    // object of this host is signaled, so waiting threads re-check theirs.
    sc_core::sc_event kernel_dispatch;
    // Runs fn in the interrupt handler, host.interrupt_ns after now.
    void after_interrupt(std::function<void()> fn);

    // Multicast (host/driver/driver_mcast.cpp). The subnet manager whose SA
    // the port's joins and leaves go to.
    void set_subnet_manager(fabric::SubnetManager* sm) { m_sm = sm; }
    using Gid = std::array<std::uint8_t, 16>;
    // Attaches a UD QP to the multicast group mgid whose MLID is mlid; when
    // no QP of this port is attached to the group yet, the port first joins
    // it at the SA (a management round trip). 0 or an errno.
    int attach_mcast(DriverQp& qp, const Gid& mgid, std::uint16_t mlid);
    // Detaches it; the port leaves the group when its last QP has gone.
    int detach_mcast(DriverQp& qp, const Gid& mgid, std::uint16_t mlid);
    // Groups qpn is attached to (a QP attached to any cannot be destroyed).
    std::size_t mcast_attachments(std::uint32_t qpn) const;

    // IPoIB and the management clients rdma_cm stands on
    // (host/driver/driver_ipoib.cpp). Both answers come in simulated time,
    // from the network: done(0, ...) or done(errno) runs in the simulation
    // kernel, not in a host thread.
    void set_ip(const IpSubnet* subnet, std::uint32_t ip, std::string hostname);
    const IpSubnet* subnet() const { return m_subnet; }
    std::uint32_t ip() const { return m_ip; }
    const std::string& hostname() const { return m_hostname; }
    // ARP for ip on ib0: the LID and GID of the port that owns it.
    // ETIMEDOUT when nobody answers within timeout.
    void resolve_neighbour(std::uint32_t ip, sim::Tick timeout,
                           std::function<void(int err, std::uint16_t lid, const Gid& gid)> done);
    // A PathRecord query to the SA for the path from this port to dgid.
    // ETIMEDOUT when the SA does not answer within timeout, EHOSTUNREACH
    // when it has no such path.
    void query_path(const Gid& dgid, sim::Tick timeout, std::function<void(int err, const PathInfo& path)> done);
    // Multicast groups joined with MCMemberRecord SETs sent to the SA as
    // MADs (rdma_cm's joins; host/driver/driver_sa.cpp). The port joins a
    // group once: later joins share the SA's answer, and the port leaves with
    // a DELETE when the last holder has left. done runs in the simulation
    // kernel with 0 and the group, ETIMEDOUT when the SA does not answer, or
    // EINVAL when it refuses. lost runs when the port loses the membership
    // (a client reregistration, a LID change, the port going down), as the
    // kernel's SA multicast client reports ENETRESET. Returns the holder's
    // token for leave_group.
    struct McastGroup {
        Gid mgid{};
        std::uint16_t mlid = 0;
        std::uint32_t qkey = 0;
        std::uint16_t pkey = 0;
        std::uint8_t sl = 0, mtu = 0, rate = 0, traffic_class = 0, hop_limit = 0;
        std::uint32_t flow_label = 0;
    };
    std::uint64_t join_group(const Gid& mgid, std::uint32_t qkey, std::function<void(int err, const McastGroup& g)> done,
                             std::function<void()> lost);
    // Idempotent: a token whose group was lost, or left, is ignored.
    void leave_group(std::uint64_t token);
    // The rdma_cm of this host (host/rdma_cm), owned here so it lives as
    // long as the host does.
    std::shared_ptr<void> rdma_cm_state;

    // Events.
    int get_cq_event(EventChannel& ch, DriverCq*& cq);
    bool get_async_event(hca::AsyncEvent& e);
    // The asynchronous events get_async_event has not taken yet (each ready
    // at its time), and the event notified as one arrives.
    const std::deque<AsyncEventRecord>& pending_async() const { return m_async; }
    const sc_core::sc_event& async_arrived() const { return m_async_arrived; }
    DriverQp* find_qp(std::uint32_t qpn);
    DriverCq* find_cq(std::uint32_t cqn);

    // hca::InterruptSink
    void completion_event(std::uint32_t cqn) override;
    void async_event(const hca::AsyncEvent& e) override;
    void vi_queue_event(std::uint32_t qpn, bool recv_queue) override;

private:
    // The thread's MMIO store to the adapter's UAR page: it goes out now,
    // and the thread goes on host.cpu.mmio_store_ns later, once it has left
    // the core.
    void store_to_adapter(hca::DoorbellWrite&& w);

    DeviceInfo m_info;
    hca::Hca& m_hca;
    firmware::CommandInterface& m_fw;
    firmware::CmAgent* m_cm = nullptr;
    fabric::SubnetManager* m_sm = nullptr;
    const IpSubnet* m_subnet = nullptr;
    std::uint32_t m_ip = 0;
    std::string m_hostname;
    // Management queries in flight (ARP, SA), by transaction ID.
    struct MgmtQuery;
    std::map<std::uint64_t, std::shared_ptr<MgmtQuery>> m_queries;
    std::uint64_t m_next_tid = 0;
    std::map<std::uint32_t, std::pair<std::uint16_t, Gid>> m_neighbours;  // ARP cache: ip -> LID, GID
    void send_query(std::shared_ptr<MgmtQuery> q);
    bool management_datagram(std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len, sim::Tick t);
    // The multicast groups this port is a member of and the QPs attached.
    struct McastMembership {
        std::uint16_t mlid = 0;
        std::set<std::uint32_t> qps;
        bool own_join = false;  // the attach joined at the SA (no join_group held it)
    };
    std::map<Gid, McastMembership> m_mcast;
    // Groups joined with SA MADs and who holds them.
    struct GroupHolder {
        std::function<void(int err, const McastGroup& g)> done;
        std::function<void()> lost;
    };
    struct PortGroup {
        bool joined = false;  // the SA has answered the SET
        McastGroup group;
        std::map<std::uint64_t, GroupHolder> holders;  // by token
    };
    std::map<Gid, PortGroup> m_port_groups;
    std::map<std::uint64_t, Gid> m_group_tokens;
    std::uint64_t m_next_group_token = 0;
    bool port_group_held(const Gid& mgid) const;
    void send_group_leave(const Gid& mgid);
    // Every group of the port lost at once (its holders told).
    void lose_groups();
    // The SA of the master SM's node: answers a PathRecord GET at once and an
    // MCMemberRecord SET or DELETE after the SM's handling time.
    void answer_sa(std::uint16_t slid, const packet::sa::Mad& m);
    // The SA round trips of a join and a leave; 0 or an errno.
    int sa_join(const Gid& mgid, std::uint16_t mlid);
    void sa_leave(const Gid& mgid);
    HostCosts m_costs;
    pcie::HostMemory& m_memory;
    std::map<std::uint32_t, int> m_pds;  // pdn -> objects using it
    std::map<std::uint32_t, std::unique_ptr<DriverCq>> m_cqs;
    std::map<std::uint32_t, std::unique_ptr<DriverQp>> m_qps;
    std::map<std::uint32_t, std::unique_ptr<DriverSrq>> m_srqs;
    // Chains slots [first, end) each to the next (the ring's last to slot 0).
    static void link_srq_slots(DriverSrq& srq, std::uint32_t first, std::uint32_t end);
    // A completion gave slot back: it joins the free list; returns its wr_id.
    static std::uint64_t release_srq_slot(DriverSrq& srq, std::uint16_t slot);
    std::uint32_t m_next_srqn = 1;
    struct XrcDomain {
        std::uint64_t inode;  // 0: private to its opener
        int opens;
        int refs;             // SRQs and target QPs in it
    };
    std::map<std::uint32_t, XrcDomain> m_xrcds;
    std::uint32_t m_next_xrcd = 1;
    std::uint32_t m_next_pdn = 1;
    std::uint32_t m_next_cqn = 2;  // CQ 1 is the firmware's (its QP1)
    std::uint32_t m_next_qpn = 0x48;
    std::deque<AsyncEventRecord> m_async;
    sc_core::sc_event m_async_arrived;
    std::vector<std::uint8_t> m_bf;  // BlueFlame staging

    // Memory the adapter reads and writes that the driver owns (rings,
    // doorbell records): page aligned, zeroed and pinned in the node's bus
    // address space. free_pinned(nullptr) does nothing.
    void* alloc_pinned(std::size_t bytes);
    void free_pinned(void* p);
    std::uint64_t bus_of(const void* p) const { return m_pinned.at(p); }
    std::map<const void*, std::uint64_t> m_pinned;  // host address -> bus address
    struct Registration {
        std::uint32_t pdn;
        std::vector<std::uint64_t> mappings;  // bus addresses to unmap at deregistration
    };
    std::map<std::uint32_t, Registration> m_regions;  // by key
    std::map<std::uint32_t, std::uint32_t> m_windows;  // window index (key >> 8) -> pdn
};


}  // namespace hcasim::host
