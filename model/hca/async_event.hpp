// Asynchronous events the adapter reports to the host through its event
// queue interrupt: affiliated (a QP or CQ) and unaffiliated.
#pragma once

#include <cstdint>

namespace hcasim::hca {

// The Vi* ones are the VI Architecture's asynchronous errors (KVIPL).
enum class AsyncEventType {
    QpFatal,
    QpRequestError,
    QpAccessError,
    CqError,
    SrqLimitReached,   // a shared receive queue fell below its armed limit
    QpLastWqeReached,  // a QP on an SRQ in the error state will take no more WQEs
    CommEstablished,   // a connected QP in RTR received its first request
    SqDrained,         // a QP in SQD has no send work in progress left
    PathMigrated,      // a connected QP now uses its alternate path as its primary one
    PathMigrationError,  // a connected QP could not migrate to its alternate path
    SrqError,          // a shared receive queue can give out no more WQEs
    PortActive,
    PortError,
    LidChange,         // the SM gave the port a new LID
    PkeyChange,        // the SM changed the port's P_Key table
    SmChange,          // another SM became master
    ClientReregister,  // the SM asks the port's clients to register again
    ViPostDescriptor,
    ViConnectionLost,
    ViRecvQueueEmpty,
    ViOverrun,
    ViRdmaWriteProtection,
    ViRdmaReadProtection,
    ViCompletionProtection,
    ViRdmaTransport,
    Catastrophic,
};

struct AsyncEvent {
    AsyncEventType type;
    std::uint32_t number;        // QPN, CQN or SRQ number
    std::uint64_t desc_addr = 0; // VI errors about a descriptor: its address
    std::uint32_t vi_op = 0;     // and its kViStatusOp* operation
    bool recv_queue = false;
};

}  // namespace hcasim::hca
