/* kvipl.h is a C header: this translation unit is compiled as C99 with
 * warnings as errors to keep it so. */
#include "host/kvipl/kvipl.h"

KVIP_RETURN kvipl_header_check(KVIP_NIC_HANDLE nic, KVIP_VI_HANDLE vi, KVIP_DESCRIPTOR *d, KVIP_MEM_HANDLE mh);

KVIP_RETURN kvipl_header_check(KVIP_NIC_HANDLE nic, KVIP_VI_HANDLE vi, KVIP_DESCRIPTOR *d, KVIP_MEM_HANDLE mh) {
    KVIP_NIC_ATTRIBUTES attrs;
    KVIP_RETURN r = KvipQueryNic(nic, &attrs);
    if (r != KVIP_SUCCESS) return r;
    d->CS.Control = KVIP_CONTROL_OP_SENDRECV | KVIP_CONTROL_IMMEDIATE;
    d->CS.SegCount = 1;
    return KvipPostSend(vi, d, mh);
}
