// The firmware's QP1, the general services interface (IBA 13.4): a UD QP
// like any other, whose rings, CQ and datagram buffers live in context
// memory the firmware owns. Management datagrams (the CM agent's) leave
// through the requester and arrive through the responder's UD path, with
// its Q_Key check, receive WQEs, GRH area and CQEs; the firmware learns of
// them from its CQ. Buffers are addressed physically through the reserved
// L_Key, which only the firmware's protection domain may use.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "model/hca/hca.hpp"

namespace hcasim::firmware {

class ManagementQp {
public:
    static constexpr std::uint32_t kQpn = 1;
    static constexpr std::uint32_t kCqn = 1;         // the driver numbers its CQs from 2
    static constexpr std::uint32_t kEntries = 64;    // send and receive WQEs
    // A datagram that arrived: its sender's LID, the MAD, its length.
    using Receive = std::function<void(std::uint16_t slid, const std::uint8_t* mad, std::uint32_t len, sim::Tick t)>;

    // Installs QP1, its CQ and its receive buffers in the adapter's context
    // tables; listener hears of every CQE written to the CQ.
    ManagementQp(hca::Hca& hca, hca::CqeListener& listener);
    ManagementQp(const ManagementQp&) = delete;
    ManagementQp& operator=(const ManagementQp&) = delete;
    ~ManagementQp();

    // Queues a MAD to dlid's QP1 and tells the adapter at t. False when the
    // send queue is full (the datagram is lost, as a full QP1 drops it).
    bool send(const std::uint8_t* mad, std::uint16_t dlid, sim::Tick t);
    // Takes the CQEs written so far: frees the send WQEs that completed,
    // hands each datagram received to receive and posts its buffer again.
    void drain(const Receive& receive, sim::Tick t);

private:
    struct Memory;
    void post_recv(std::uint32_t slot);

    hca::Hca& m_hca;
    std::unique_ptr<Memory> m_mem;
    std::uint16_t m_sq_pi = 0, m_sq_done = 0;
    std::uint16_t m_rq_pi = 0;
    std::uint32_t m_cq_consumer = 0;
};

}  // namespace hcasim::firmware
