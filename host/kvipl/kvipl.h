/*
 * kvipl.h: the Kernel VI Provider Library (KVIPL) of hcasim.
 *
 * The VIPL 1.0 types KVIPL builds on (descriptor layout, attributes, return
 * codes) and the KVIPL types and calls of the KVIPL addendum, for kernel
 * consumers of the VI Architecture running on the simulated adapter. C and
 * C++ programs can include it.
 *
 * Two things the addendum leaves to the operating system are defined here
 * for the simulated kernel:
 *  - KVIP_WAIT_OBJECT is a KEVENT, a kernel event a simulated kernel thread
 *    waits on (KeWaitForSingleObject) and the provider signals (KeSetEvent).
 *  - KVIP_WCHAR is wchar_t: device names are wide strings, L"hcasim0".
 *
 * Where the addendum's text and its appendix header disagree, the header
 * wins: KvipOpenNic takes the wait object before the NIC handle pointer.
 * KvipSetViContext and KvipGetViContext, described in section 3.9 but
 * missing from the appendix, are declared too.
 */
#ifndef HCASIM_KVIPL_H
#define HCASIM_KVIPL_H

#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif

/* ---- VIPL 1.0 generic types ------------------------------------------- */
typedef unsigned char VIP_UCHAR;
typedef char VIP_CHAR;
typedef unsigned short VIP_USHORT;
typedef uint32_t VIP_ULONG; /* 32 bits, as ULONG on the platforms VIPL came from */
typedef uint32_t VIP_BOOLEAN;
typedef void *VIP_PVOID;
typedef uint64_t VIP_UINT64;
typedef uint32_t VIP_UINT32;
typedef uint16_t VIP_UINT16;
typedef uint8_t VIP_UINT8;

#define VIP_TRUE 1
#define VIP_FALSE 0
#define VIP_INFINITE 0xFFFFFFFFu

/* Opaque handles (pointers); a memory handle is a 32-bit value. */
typedef struct _VIP_NIC *VIP_NIC_HANDLE;
typedef struct _VIP_VI *VIP_VI_HANDLE;
typedef struct _VIP_CQ *VIP_CQ_HANDLE;
typedef struct _VIP_PTAG *VIP_PROTECTION_HANDLE;
typedef struct _VIP_QOS *VIP_QOS;
typedef VIP_UINT32 VIP_MEM_HANDLE;

/* Reliability levels (bit values). */
typedef VIP_USHORT VIP_RELIABILITY_LEVEL;
#define VIP_SERVICE_UNRELIABLE 1
#define VIP_SERVICE_RELIABLE_DELIVERY 2
#define VIP_SERVICE_RELIABLE_RECEPTION 4

/* A network address: HostAddressLen bytes of host address, then
 * DiscriminatorLen bytes of discriminator, in HostAddress[]. */
typedef struct {
    VIP_USHORT HostAddressLen;
    VIP_USHORT DiscriminatorLen;
    VIP_UCHAR HostAddress[1];
} VIP_NET_ADDRESS;

typedef struct {
    VIP_CHAR Name[64];
    VIP_ULONG HardwareVersion;
    VIP_ULONG ProviderVersion;
    VIP_USHORT NicAddressLen;
    const VIP_UCHAR *LocalNicAddress;
    VIP_BOOLEAN ThreadSafe;
    VIP_USHORT MaxDiscriminatorLen;
    VIP_ULONG MaxRegisterBytes;
    VIP_ULONG MaxRegisterRegions;
    VIP_ULONG MaxRegisterBlockBytes;
    VIP_ULONG MaxVI;
    VIP_ULONG MaxDescriptorsPerQueue;
    VIP_ULONG MaxSegmentsPerDesc;
    VIP_ULONG MaxCQ;
    VIP_ULONG MaxCQEntries;
    VIP_ULONG MaxTransferSize;
    VIP_ULONG NativeMTU;
    VIP_ULONG MaxPtags;
    VIP_RELIABILITY_LEVEL ReliabilityLevelSupport;
    VIP_BOOLEAN RDMAReadSupport;
} VIP_NIC_ATTRIBUTES;

typedef struct {
    VIP_PROTECTION_HANDLE Ptag;
    VIP_BOOLEAN EnableRdmaWrite;
    VIP_BOOLEAN EnableRdmaRead;
} VIP_MEM_ATTRIBUTES;

typedef struct {
    VIP_RELIABILITY_LEVEL ReliabilityLevel;
    VIP_ULONG MaxTransferSize;
    VIP_QOS QoS; /* hcasim: a service level 0..15 cast to VIP_QOS; NULL is 0 */
    VIP_PROTECTION_HANDLE Ptag;
    VIP_BOOLEAN EnableRdmaWrite;
    VIP_BOOLEAN EnableRdmaRead;
} VIP_VI_ATTRIBUTES;

/* ---- Descriptor (in registered memory, 64-byte aligned) -------------- */
#define VIP_DESCRIPTOR_ALIGNMENT 64

typedef union {
    VIP_UINT64 AddressBits;
    VIP_PVOID Address;
} VIP_PVOID64;

typedef struct {
    VIP_PVOID64 Next;          /* next descriptor on the queue (set by the provider) */
    VIP_MEM_HANDLE NextHandle; /* memory handle of the next descriptor */
    VIP_USHORT SegCount;       /* address + data segments that follow */
    VIP_USHORT Control;        /* VIP_CONTROL_* */
    VIP_ULONG Reserved;
    VIP_UINT32 ImmediateData;
    VIP_ULONG Length; /* bytes transferred, written by the NIC */
    VIP_ULONG Status; /* VIP_STATUS_*, written by the NIC */
} VIP_CONTROL_SEGMENT;

typedef struct {
    VIP_PVOID64 Data; /* remote virtual address */
    VIP_MEM_HANDLE Handle;
    VIP_ULONG Reserved;
} VIP_ADDRESS_SEGMENT;

typedef struct {
    VIP_PVOID64 Data; /* local virtual address */
    VIP_MEM_HANDLE Handle;
    VIP_ULONG Length;
} VIP_DATA_SEGMENT;

typedef union {
    VIP_ADDRESS_SEGMENT Remote;
    VIP_DATA_SEGMENT Local;
} VIP_DESCRIPTOR_SEGMENT;

typedef struct {
    VIP_CONTROL_SEGMENT CS;
    VIP_DESCRIPTOR_SEGMENT DS[2]; /* SegCount segments follow; allocate more as needed */
} VIP_DESCRIPTOR;

/* Control field. */
#define VIP_CONTROL_OP_SENDRECV 0x0
#define VIP_CONTROL_OP_RDMAWRITE 0x1
#define VIP_CONTROL_OP_RDMAREAD 0x2
#define VIP_CONTROL_OP_RESERVED 0x3
#define VIP_CONTROL_OP_MASK 0x3
#define VIP_CONTROL_IMMEDIATE 0x4
#define VIP_CONTROL_QFENCE 0x8
#define VIP_CONTROL_RESERVED 0xfff0

/* Status field. */
#define VIP_STATUS_DONE 0x1
#define VIP_STATUS_FORMAT_ERROR 0x2
#define VIP_STATUS_PROTECTION_ERROR 0x4
#define VIP_STATUS_LENGTH_ERROR 0x8
#define VIP_STATUS_PARTIAL_ERROR 0x10
#define VIP_STATUS_DESC_FLUSHED_ERROR 0x20
#define VIP_STATUS_TRANSPORT_ERROR 0x40
#define VIP_STATUS_RDMA_PROT_ERROR 0x80
#define VIP_STATUS_REMOTE_DESC_ERROR 0x100
#define VIP_STATUS_ERROR_MASK 0x1fe
#define VIP_STATUS_OP_SEND 0x00000
#define VIP_STATUS_OP_RECEIVE 0x10000
#define VIP_STATUS_OP_RDMA_WRITE 0x20000
#define VIP_STATUS_OP_REMOTE_RDMA_WRITE 0x30000
#define VIP_STATUS_OP_RDMA_READ 0x40000
#define VIP_STATUS_OP_MASK 0x70000
#define VIP_STATUS_IMMEDIATE 0x80000
#define VIP_STATUS_RESERVED 0xfff0fe00

typedef enum {
    VIP_RESOURCE_NIC,
    VIP_RESOURCE_VI,
    VIP_RESOURCE_CQ,
    VIP_RESOURCE_DESCRIPTOR,
} VIP_RESOURCE_CODE;

typedef enum {
    VIP_ERROR_POST_DESC,
    VIP_ERROR_CONN_LOST,
    VIP_ERROR_RECVQ_EMPTY,
    VIP_ERROR_VI_OVERRUN,
    VIP_ERROR_RDMAW_PROT,
    VIP_ERROR_RDMAW_DATA,
    VIP_ERROR_RDMAW_ABORT,
    VIP_ERROR_RDMAR_PROT,
    VIP_ERROR_COMP_PROT,
    VIP_ERROR_RDMA_TRANSPORT,
    VIP_ERROR_CATASTROPHIC,
} VIP_ERROR_CODE;

typedef struct {
    VIP_NIC_HANDLE NicHandle;
    VIP_VI_HANDLE ViHandle;
    VIP_CQ_HANDLE CQHandle;
    VIP_DESCRIPTOR *DescriptorPtr;
    VIP_ULONG OpCode; /* VIP_STATUS_OP_* of the operation, when a descriptor is involved */
    VIP_RESOURCE_CODE ResourceCode;
    VIP_ERROR_CODE ErrorCode;
} VIP_ERROR_DESCRIPTOR;

/* ---- The simulated kernel's event object ----------------------------- */
typedef enum { NotificationEvent, SynchronizationEvent } EVENT_TYPE;

typedef struct _KEVENT {
    volatile long SignalState; /* nonzero: signaled */
    EVENT_TYPE Type;           /* Notification: stays signaled; Synchronization: a satisfied wait clears it */
    void *Dispatcher;          /* the simulated kernel that wakes waiters (set by KeInitializeEvent) */
} KEVENT;

#define STATUS_SUCCESS 0x00000000L
#define STATUS_TIMEOUT 0x00000102L

void KeInitializeEvent(KEVENT *Event, EVENT_TYPE Type, VIP_BOOLEAN State);
/* Returns the previous signal state. */
long KeSetEvent(KEVENT *Event);
void KeClearEvent(KEVENT *Event);
long KeResetEvent(KEVENT *Event);
long KeReadStateEvent(KEVENT *Event);
/* Blocks the calling simulated kernel thread until Event is signaled or
 * TimeoutMs milliseconds of simulated time pass (VIP_INFINITE: no limit).
 * Returns STATUS_SUCCESS or STATUS_TIMEOUT. */
long KeWaitForSingleObject(KEVENT *Event, VIP_ULONG TimeoutMs);

/* ---- KVIPL types (the addendum's appendix A) -------------------------- */
typedef VIP_UCHAR KVIP_UCHAR;
typedef VIP_CHAR KVIP_CHAR;
typedef wchar_t KVIP_WCHAR;
typedef VIP_USHORT KVIP_USHORT;
typedef VIP_ULONG KVIP_ULONG;
typedef VIP_BOOLEAN KVIP_BOOLEAN;
typedef VIP_PVOID KVIP_PVOID;
typedef VIP_UINT64 KVIP_UINT64;
typedef VIP_UINT32 KVIP_UINT32;
typedef VIP_UINT16 KVIP_UINT16;
typedef VIP_UINT8 KVIP_UINT8;

#define KVIP_TRUE VIP_TRUE
#define KVIP_FALSE VIP_FALSE

typedef KEVENT KVIP_WAIT_OBJECT;

typedef VIP_NIC_HANDLE KVIP_NIC_HANDLE;
typedef VIP_VI_HANDLE KVIP_VI_HANDLE;
typedef VIP_CQ_HANDLE KVIP_CQ_HANDLE;
typedef VIP_MEM_HANDLE KVIP_MEM_HANDLE;
typedef VIP_PROTECTION_HANDLE KVIP_PROTECTION_HANDLE;
typedef VIP_QOS KVIP_QOS;

typedef VIP_PVOID KVIP_CONN_HANDLE;
typedef VIP_PVOID KVIP_PHYS_ADDRESS;

#define KVIP_INFINITE VIP_INFINITE

typedef VIP_RELIABILITY_LEVEL KVIP_RELIABILITY_LEVEL;
#define KVIP_SERVICE_UNRELIABLE VIP_SERVICE_UNRELIABLE
#define KVIP_SERVICE_RELIABLE_DELIVERY VIP_SERVICE_RELIABLE_DELIVERY
#define KVIP_SERVICE_RELIABLE_RECEPTION VIP_SERVICE_RELIABLE_RECEPTION

typedef VIP_NET_ADDRESS KVIP_NET_ADDRESS;
typedef VIP_NIC_ATTRIBUTES KVIP_NIC_ATTRIBUTES;

typedef enum {
    KVIP_RESOURCE_NIC,
    KVIP_RESOURCE_VI,
    KVIP_RESOURCE_CQ,
    KVIP_RESOURCE_DESCRIPTOR,
} KVIP_RESOURCE_CODE;

typedef enum {
    KVIP_ERROR_POST_DESC,
    KVIP_ERROR_CONN_LOST,
    KVIP_ERROR_RECVQ_EMPTY,
    KVIP_ERROR_VI_OVERRUN,
    KVIP_ERROR_RDMAW_PROT,
    KVIP_ERROR_RDMAW_DATA,
    KVIP_ERROR_RDMAW_ABORT,
    KVIP_ERROR_RDMAR_PROT,
    KVIP_ERROR_COMP_PROT,
    KVIP_ERROR_RDMA_TRANSPORT,
    KVIP_ERROR_CATASTROPHIC,
} KVIP_ERROR_CODE;

typedef VIP_ERROR_DESCRIPTOR KVIP_ERROR_DESCRIPTOR;
typedef VIP_MEM_ATTRIBUTES KVIP_MEM_ATTRIBUTES;

typedef enum {
    KVIP_STATE_IDLE,
    KVIP_STATE_CONNECTED,
    KVIP_STATE_CONNECT_PENDING,
    KVIP_STATE_ERROR,
} KVIP_VI_STATE;

typedef VIP_VI_ATTRIBUTES KVIP_VI_ATTRIBUTES;

typedef enum {
    KVIP_SUCCESS,
    KVIP_NOT_DONE,
    KVIP_INVALID_PARAMETER,
    KVIP_ERROR_RESOURCE,
    KVIP_TIMEOUT,
    KVIP_REJECT,
    KVIP_INVALID_RELIABILITY_LEVEL,
    KVIP_INVALID_MTU,
    KVIP_INVALID_QOS,
    KVIP_INVALID_PTAG,
    KVIP_INVALID_RDMA_READ,
    KVIP_DESCRIPTOR_ERROR,
    KVIP_INVALID_STATE,
    KVIP_ERROR_NAMESERVICE,
    KVIP_NO_MATCH,
    KVIP_NOT_REACHABLE,
} KVIP_RETURN;
/* The addendum's text spells these two differently from its header. */
#define KVIP_INVALID_RDMAREAD KVIP_INVALID_RDMA_READ
#define KVIP_INVALID_PARAM KVIP_INVALID_PARAMETER

#define KVIP_CONTROL_OP_SENDRECV VIP_CONTROL_OP_SENDRECV
#define KVIP_CONTROL_OP_RDMAWRITE VIP_CONTROL_OP_RDMAWRITE
#define KVIP_CONTROL_OP_RDMAREAD VIP_CONTROL_OP_RDMAREAD
#define KVIP_CONTROL_OP_RESERVED VIP_CONTROL_OP_RESERVED
#define KVIP_CONTROL_OP_MASK VIP_CONTROL_OP_MASK
#define KVIP_CONTROL_IMMEDIATE VIP_CONTROL_IMMEDIATE
#define KVIP_CONTROL_QFENCE VIP_CONTROL_QFENCE
#define KVIP_CONTROL_RESERVED VIP_CONTROL_RESERVED

#define KVIP_STATUS_DONE VIP_STATUS_DONE
#define KVIP_STATUS_FORMAT_ERROR VIP_STATUS_FORMAT_ERROR
#define KVIP_STATUS_PROTECTION_ERROR VIP_STATUS_PROTECTION_ERROR
#define KVIP_STATUS_LENGTH_ERROR VIP_STATUS_LENGTH_ERROR
#define KVIP_STATUS_PARTIAL_ERROR VIP_STATUS_PARTIAL_ERROR
#define KVIP_STATUS_DESC_FLUSHED_ERROR VIP_STATUS_DESC_FLUSHED_ERROR
#define KVIP_STATUS_TRANSPORT_ERROR VIP_STATUS_TRANSPORT_ERROR
#define KVIP_STATUS_RDMA_PROT_ERROR VIP_STATUS_RDMA_PROT_ERROR
#define KVIP_STATUS_REMOTE_DESC_ERROR VIP_STATUS_REMOTE_DESC_ERROR
#define KVIP_STATUS_ERROR_MASK VIP_STATUS_ERROR_MASK
#define KVIP_STATUS_OP_SEND VIP_STATUS_OP_SEND
#define KVIP_STATUS_OP_RECEIVE VIP_STATUS_OP_RECEIVE
#define KVIP_STATUS_OP_RDMA_WRITE VIP_STATUS_OP_RDMA_WRITE
#define KVIP_STATUS_OP_REMOTE_RDMA_WRITE VIP_STATUS_OP_REMOTE_RDMA_WRITE
#define KVIP_STATUS_OP_RDMA_READ VIP_STATUS_OP_RDMA_READ
#define KVIP_STATUS_OP_MASK VIP_STATUS_OP_MASK
#define KVIP_STATUS_IMMEDIATE VIP_STATUS_IMMEDIATE
#define KVIP_STATUS_RESERVED VIP_STATUS_RESERVED

typedef VIP_PVOID64 KVIP_PVOID64;
typedef VIP_CONTROL_SEGMENT KVIP_CONTROL_SEGMENT;
typedef VIP_ADDRESS_SEGMENT KVIP_ADDRESS_SEGMENT;
typedef VIP_DATA_SEGMENT KVIP_DATA_SEGMENT;
typedef VIP_DESCRIPTOR_SEGMENT KVIP_DESCRIPTOR_SEGMENT;
typedef VIP_DESCRIPTOR KVIP_DESCRIPTOR;
#define KVIP_DESCRIPTOR_ALIGNMENT VIP_DESCRIPTOR_ALIGNMENT

/* KvipQuerySystemManagementInfo info types (provider specific). */
#define KVIP_SMI_PORT_COUNTERS 1 /* SysManInfo: KVIP_SMI_PORT_COUNTERS_INFO */
typedef struct {
    KVIP_UINT64 PacketsSent;
    KVIP_UINT64 BytesSent;
    KVIP_UINT64 PacketsReceived;
    KVIP_UINT64 BytesReceived;
    KVIP_UINT64 PacketsDropped;
} KVIP_SMI_PORT_COUNTERS_INFO;

/* ---- Calls ------------------------------------------------------------ */

/* Hardware connection */
KVIP_RETURN KvipOpenNic(IN const KVIP_WCHAR *DeviceName, IN KVIP_WAIT_OBJECT *ErrorNotificationWaitObject,
                        OUT KVIP_NIC_HANDLE *NicHandle);
KVIP_RETURN KvipCloseNic(IN KVIP_NIC_HANDLE NicHandle);

/* Endpoint creation and destruction */
KVIP_RETURN KvipCreateVi(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_VI_ATTRIBUTES *ViAttribs, IN KVIP_CQ_HANDLE SendCQHandle,
                         IN KVIP_CQ_HANDLE RecvCQHandle, IN KVIP_WAIT_OBJECT *SendWaitObject,
                         IN KVIP_WAIT_OBJECT *RecvWaitObject, OUT KVIP_VI_HANDLE *ViHandle);
KVIP_RETURN KvipDestroyVi(IN KVIP_VI_HANDLE ViHandle);

/* Connection management */
KVIP_RETURN KvipConnectServerRequest(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_NET_ADDRESS *LocalAddr, IN KVIP_ULONG Timeout,
                                     IN KVIP_WAIT_OBJECT *WaitObject, OUT KVIP_CONN_HANDLE *ConnHandle);
KVIP_RETURN KvipConnectServerDone(IN KVIP_CONN_HANDLE ConnHandle, OUT KVIP_NET_ADDRESS *RemoteAddr,
                                  OUT KVIP_VI_ATTRIBUTES *RemoteViAttribs);
KVIP_RETURN KvipConnectClientRequest(IN KVIP_VI_HANDLE ViHandle, IN KVIP_NET_ADDRESS *LocalAddr,
                                     IN KVIP_NET_ADDRESS *RemoteAddr, IN KVIP_ULONG Timeout,
                                     IN KVIP_WAIT_OBJECT *WaitObject);
KVIP_RETURN KvipConnectClientDone(IN KVIP_VI_HANDLE ViHandle, OUT KVIP_VI_ATTRIBUTES *RemoteViAttribs);
KVIP_RETURN KvipConnectAccept(IN KVIP_CONN_HANDLE ConnHandle, IN KVIP_VI_HANDLE ViHandle);
KVIP_RETURN KvipConnectReject(IN KVIP_CONN_HANDLE ConnHandle);
KVIP_RETURN KvipDisconnect(IN KVIP_VI_HANDLE ViHandle);
KVIP_RETURN KvipConnectPeerRequest(IN KVIP_VI_HANDLE ViHandle, IN KVIP_NET_ADDRESS *LocalAddr,
                                   IN KVIP_NET_ADDRESS *RemoteAddr, IN KVIP_ULONG Timeout,
                                   IN KVIP_WAIT_OBJECT *WaitObject);
KVIP_RETURN KvipConnectPeerDone(IN KVIP_VI_HANDLE ViHandle, OUT KVIP_VI_ATTRIBUTES *RemoteViAttribs);

/* Memory protection and registration */
KVIP_RETURN KvipCreatePtag(IN KVIP_NIC_HANDLE NicHandle, OUT KVIP_PROTECTION_HANDLE *Ptag);
KVIP_RETURN KvipDestroyPtag(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_PROTECTION_HANDLE Ptag);
KVIP_RETURN KvipRegisterMem(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_PVOID VirtualAddress, IN KVIP_ULONG Length,
                            IN KVIP_MEM_ATTRIBUTES *MemAttribs, OUT KVIP_MEM_HANDLE *MemoryHandle);
KVIP_RETURN KvipDeregisterMem(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_PVOID VirtualAddress,
                              IN KVIP_MEM_HANDLE MemoryHandle);
KVIP_RETURN KvipRegisterPhysPages(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_PHYS_ADDRESS PhysAddress[],
                                  IN KVIP_ULONG NumPhysPages, IN KVIP_MEM_ATTRIBUTES *MemAttribs,
                                  OUT KVIP_MEM_HANDLE *MemoryHandle);
KVIP_RETURN KvipDeregisterPhysPages(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_MEM_HANDLE MemoryHandle);

/* Data transfer and completion */
KVIP_RETURN KvipPostSend(IN KVIP_VI_HANDLE ViHandle, IN KVIP_DESCRIPTOR *DescriptorPtr, IN KVIP_MEM_HANDLE MemoryHandle);
KVIP_RETURN KvipSendDone(IN KVIP_VI_HANDLE ViHandle, OUT KVIP_DESCRIPTOR **DescriptorPtr);
KVIP_RETURN KvipRearmSend(IN KVIP_VI_HANDLE ViHandle);
KVIP_RETURN KvipPostRecv(IN KVIP_VI_HANDLE ViHandle, IN KVIP_DESCRIPTOR *DescriptorPtr, IN KVIP_MEM_HANDLE MemoryHandle);
KVIP_RETURN KvipRecvDone(IN KVIP_VI_HANDLE ViHandle, OUT KVIP_DESCRIPTOR **DescriptorPtr);
KVIP_RETURN KvipRearmRecv(IN KVIP_VI_HANDLE ViHandle);
KVIP_RETURN KvipCQDone(IN KVIP_CQ_HANDLE CQHandle, OUT KVIP_VI_HANDLE *ViHandle, OUT KVIP_BOOLEAN *RecvQueue);
KVIP_RETURN KvipRearmCQ(IN KVIP_CQ_HANDLE CQHandle);

/* Completion queue management */
KVIP_RETURN KvipCreateCQ(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_ULONG EntryCount, IN KVIP_WAIT_OBJECT *CQWaitObject,
                         OUT KVIP_CQ_HANDLE *CQHandle);
KVIP_RETURN KvipDestroyCQ(IN KVIP_CQ_HANDLE CQHandle);
KVIP_RETURN KvipResizeCQ(IN KVIP_CQ_HANDLE CQHandle, IN KVIP_ULONG EntryCount);

/* Querying information */
KVIP_RETURN KvipQueryNic(IN KVIP_NIC_HANDLE NicHandle, OUT KVIP_NIC_ATTRIBUTES *NicAttribs);
KVIP_RETURN KvipSetViAttributes(IN KVIP_VI_HANDLE ViHandle, IN KVIP_VI_ATTRIBUTES *ViAttribs);
KVIP_RETURN KvipQueryVi(IN KVIP_VI_HANDLE ViHandle, OUT KVIP_VI_STATE *State, OUT KVIP_VI_ATTRIBUTES *ViAttribs,
                        OUT KVIP_BOOLEAN *ViSendQEmpty, OUT KVIP_BOOLEAN *ViRecvQEmpty);
KVIP_RETURN KvipSetMemAttributes(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_PVOID Address, IN KVIP_MEM_HANDLE MemHandle,
                                 IN KVIP_MEM_ATTRIBUTES *MemAttribs);
KVIP_RETURN KvipQueryMem(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_PVOID Address, IN KVIP_MEM_HANDLE MemHandle,
                         OUT KVIP_MEM_ATTRIBUTES *MemAttribs);
KVIP_RETURN KvipQuerySystemManagementInfo(IN KVIP_NIC_HANDLE NicHandle, IN KVIP_ULONG InfoType,
                                          IN OUT KVIP_PVOID SysManInfo);

/* Error handling */
KVIP_RETURN KvipErrorNotificationDone(IN KVIP_NIC_HANDLE NicHandle, OUT KVIP_ERROR_DESCRIPTOR **ErrorDescriptor);
KVIP_RETURN KvipRearmErrorNotification(IN KVIP_NIC_HANDLE NicHandle);

/* VI context */
KVIP_RETURN KvipSetViContext(IN KVIP_VI_HANDLE ViHandle, IN KVIP_PVOID ViContext);
KVIP_RETURN KvipGetViContext(IN KVIP_VI_HANDLE ViHandle, OUT KVIP_PVOID *ViContext);

#ifdef __cplusplus
}
#endif

#endif /* HCASIM_KVIPL_H */
