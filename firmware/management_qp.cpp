#include "firmware/management_qp.hpp"

#include <cstring>
#include <vector>

#include "model/packet/cm_mad.hpp"
#include "model/packet/ib_packet.hpp"

namespace hcasim::firmware {

using hca::Cqe;
using hca::DataSeg;

namespace {
constexpr std::uint32_t kSendStride = 128;  // control, datagram and one data segment: 80 bytes
constexpr std::uint32_t kRecvStride = 32;   // control and one data segment
constexpr std::uint32_t kRecvSlot = 512;    // GRH area and one MAD
constexpr std::uint32_t kCqLogSize = 8;
}  // namespace

// Context memory: one page-aligned block holding every ring, record and
// buffer, mapped once into the node's bus space.
struct ManagementQp::Memory {
    static constexpr std::size_t kSq = 0;
    static constexpr std::size_t kRq = kSq + kEntries * kSendStride;
    static constexpr std::size_t kCq = kRq + kEntries * kRecvStride;
    static constexpr std::size_t kRecord = kCq + (std::size_t{1} << kCqLogSize) * sizeof(Cqe);
    static constexpr std::size_t kCqRecord = kRecord + sizeof(hca::RqDoorbellRecord);
    static constexpr std::size_t kSendBuffers = (kCqRecord + sizeof(hca::CqDoorbellRecord) + 4095) & ~std::size_t{4095};
    static constexpr std::size_t kRecvBuffers = kSendBuffers + kEntries * packet::kMadBytes;
    static constexpr std::size_t kBytes = kRecvBuffers + kEntries * kRecvSlot;
    std::vector<std::uint8_t> storage = std::vector<std::uint8_t>(kBytes + 4096, 0);
    std::uint8_t* base = nullptr;
    std::uint64_t bus = 0;
    std::uint8_t* at(std::size_t off) { return base + off; }
    std::uint64_t bus_at(std::size_t off) const { return bus + off; }
};

ManagementQp::ManagementQp(hca::Hca& hca, hca::CqeListener& listener) : m_hca(hca), m_mem(std::make_unique<Memory>()) {
    Memory& m = *m_mem;
    const auto raw = reinterpret_cast<std::uintptr_t>(m.storage.data());
    m.base = m.storage.data() + ((4096 - raw % 4096) % 4096);
    m.bus = m_hca.pcie().memory().map(m.base, Memory::kBytes);

    hca::CqContext& cq = m_hca.install_cq(kCqn);
    cq.ring = m.bus_at(Memory::kCq);
    cq.log_size = kCqLogSize;
    cq.db_record = m.bus_at(Memory::kCqRecord);
    cq.listener = &listener;
    // Entries the adapter has not written yet carry the owner bit of the
    // pass before the first.
    auto* ring = reinterpret_cast<Cqe*>(m.at(Memory::kCq));
    for (std::uint32_t i = 0; i < (1u << kCqLogSize); ++i) ring[i].owner = 1;

    hca::Qpc qpc;
    qpc.type = hca::QpType::Ud;
    qpc.pdn = hca::kFirmwarePd;
    qpc.send_cqn = qpc.recv_cqn = kCqn;
    qpc.sq_base = m.bus_at(Memory::kSq);
    qpc.sq_log_size = 6;
    qpc.sq_log_stride = 7;
    qpc.rq_base = m.bus_at(Memory::kRq);
    qpc.rq_log_size = 6;
    qpc.rq_log_stride = 5;
    qpc.rq_db_record = m.bus_at(Memory::kRecord);
    qpc.qkey = packet::kGsiQkey;
    qpc.state = hca::QpState::Rts;
    m_hca.install_qp(kQpn, qpc);
    static_assert(kEntries == 64, "QP1's rings are 2^6 entries");
    for (std::uint32_t i = 0; i < kEntries; ++i) post_recv(i);
}

ManagementQp::~ManagementQp() = default;

void ManagementQp::post_recv(std::uint32_t slot) {
    Memory& m = *m_mem;
    hca::RecvWqeCtrl ctrl{};
    ctrl.wqe_index = m_rq_pi;
    ctrl.num_sge = 1;
    const DataSeg d{m.bus_at(Memory::kRecvBuffers + slot * kRecvSlot), hca::kReservedLkey, kRecvSlot};
    std::uint8_t* wqe = m.at(Memory::kRq + (m_rq_pi % kEntries) * kRecvStride);
    std::memcpy(wqe, &ctrl, sizeof ctrl);
    std::memcpy(wqe + sizeof ctrl, &d, sizeof d);
    ++m_rq_pi;
    reinterpret_cast<hca::RqDoorbellRecord*>(m.at(Memory::kRecord))->producer_index = m_rq_pi;
}

bool ManagementQp::send(const std::uint8_t* mad, std::uint16_t dlid, sim::Tick t) {
    hca::QpContext* qp = m_hca.qp(kQpn);
    if (!qp || static_cast<std::uint16_t>(m_sq_pi - m_sq_done) >= kEntries) return false;
    Memory& m = *m_mem;
    const std::uint32_t slot = m_sq_pi % kEntries;
    std::memcpy(m.at(Memory::kSendBuffers + slot * packet::kMadBytes), mad, packet::kMadBytes);
    hca::SendWqeCtrl ctrl{};
    ctrl.opcode = static_cast<std::uint8_t>(hca::WqeOpcode::Send);
    ctrl.flags = hca::kWqeSignaled;
    ctrl.num_sge = 1;
    ctrl.wqe_index = m_sq_pi;
    hca::DatagramSeg dg{};
    dg.dest_qpn = kQpn;
    dg.qkey = packet::kGsiQkey;
    dg.dlid = dlid;
    const DataSeg d{m.bus_at(Memory::kSendBuffers + slot * packet::kMadBytes), hca::kReservedLkey,
                    static_cast<std::uint32_t>(packet::kMadBytes)};
    std::uint8_t* wqe = m.at(Memory::kSq + slot * kSendStride);
    std::memcpy(wqe, &ctrl, sizeof ctrl);
    std::memcpy(wqe + sizeof ctrl, &dg, sizeof dg);
    std::memcpy(wqe + sizeof ctrl + sizeof dg, &d, sizeof d);
    ++m_sq_pi;
    // The firmware sits beside the doorbell unit: it moves the producer
    // index in the context itself and starts the transmit side.
    qp->fetch.sq_pi = m_sq_pi;
    m_hca.tx().kick(*qp, t);
    return true;
}

void ManagementQp::drain(const Receive& receive, sim::Tick t) {
    Memory& m = *m_mem;
    const auto* ring = reinterpret_cast<const Cqe*>(m.at(Memory::kCq));
    const std::uint32_t mask = (1u << kCqLogSize) - 1;
    for (;;) {
        const Cqe c = ring[m_cq_consumer & mask];
        if ((c.owner & 1) != ((m_cq_consumer >> kCqLogSize) & 1)) break;
        ++m_cq_consumer;
        if (c.flags & hca::kCqeIsSend) {
            m_sq_done = static_cast<std::uint16_t>(c.wqe_index + 1);
            continue;
        }
        // Receive WQEs complete in order: the slot is the WQE's ring index.
        const std::uint32_t slot = c.wqe_index % kEntries;
        if (c.status == static_cast<std::uint8_t>(hca::CqeStatus::Success) && c.byte_len >= packet::kGrhBytes)
            receive(c.slid, m.at(Memory::kRecvBuffers + slot * kRecvSlot + packet::kGrhBytes),
                    c.byte_len - static_cast<std::uint32_t>(packet::kGrhBytes), t);
        post_recv(slot);
    }
    reinterpret_cast<hca::CqDoorbellRecord*>(m.at(Memory::kCqRecord))->consumer_index = m_cq_consumer;
}

}  // namespace hcasim::firmware
