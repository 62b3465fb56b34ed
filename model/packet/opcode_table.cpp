// The IBA opcode attribute table (see opcode_table.hpp).
#include "model/packet/opcode_table.hpp"

#include <array>

namespace hcasim::packet {
namespace {

// Packed attribute bits for the entries below, unpacked by make_info().
enum : std::uint16_t {
    kP = 1u << 0,       // payload
    kREQ = 1u << 1,     // request
    kACK = 1u << 2,     // request that must be acknowledged
    kSEND = 1u << 3,
    kWRITE = 1u << 4,
    kREAD = 1u << 5,
    kATOMIC = 1u << 6,
    kRWR = 1u << 7,     // consumes a receive WQE
};

struct Entry {
    std::uint8_t opcode;
    struct {
        const char* name;
        std::uint16_t headers;
        std::uint8_t qp_types;
        std::uint8_t position;
        std::uint16_t attrs;
    } e;
};

// IBA vol. 1 table 38 (and the XRC annex). Opcode 0x15 of RC/XRC is
// reserved; UC has only SEND and RDMA WRITE; UD has only SEND only (with
// immediate). XRC requests carry the XRCETH, its responses do not; RD
// packets all carry the RDETH and RD requests a DETH.
// clang-format off
constexpr Entry kEntries[] = {
    // RC
    {0x00, {"IB_OPCODE_RC_SEND_FIRST", 0, kQpRc, kPosFirst, kP | kREQ | kACK | kSEND | kRWR}},
    {0x01, {"IB_OPCODE_RC_SEND_MIDDLE", 0, kQpRc, kPosMiddle, kP | kREQ | kACK | kSEND}},
    {0x02, {"IB_OPCODE_RC_SEND_LAST", 0, kQpRc, kPosLast, kP | kREQ | kACK | kSEND}},
    {0x03, {"IB_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE", kHdrImmDt, kQpRc, kPosLast, kP | kREQ | kACK | kSEND}},
    {0x04, {"IB_OPCODE_RC_SEND_ONLY", 0, kQpRc, kPosOnly, kP | kREQ | kACK | kSEND | kRWR}},
    {0x05, {"IB_OPCODE_RC_SEND_ONLY_WITH_IMMEDIATE", kHdrImmDt, kQpRc, kPosOnly, kP | kREQ | kACK | kSEND | kRWR}},
    {0x06, {"IB_OPCODE_RC_RDMA_WRITE_FIRST", kHdrReth, kQpRc, kPosFirst, kP | kREQ | kACK | kWRITE}},
    {0x07, {"IB_OPCODE_RC_RDMA_WRITE_MIDDLE", 0, kQpRc, kPosMiddle, kP | kREQ | kACK | kWRITE}},
    {0x08, {"IB_OPCODE_RC_RDMA_WRITE_LAST", 0, kQpRc, kPosLast, kP | kREQ | kACK | kWRITE}},
    {0x09, {"IB_OPCODE_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", kHdrImmDt, kQpRc, kPosLast, kP | kREQ | kACK | kWRITE | kRWR}},
    {0x0a, {"IB_OPCODE_RC_RDMA_WRITE_ONLY", kHdrReth, kQpRc, kPosOnly, kP | kREQ | kACK | kWRITE}},
    {0x0b, {"IB_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", kHdrReth | kHdrImmDt, kQpRc, kPosOnly, kP | kREQ | kACK | kWRITE | kRWR}},
    {0x0c, {"IB_OPCODE_RC_RDMA_READ_REQUEST", kHdrReth, kQpRc, kPosOnly, kREQ | kACK | kREAD}},
    {0x0d, {"IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST", kHdrAeth, kQpRc, kPosFirst, kP | kREAD}},
    {0x0e, {"IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE", 0, kQpRc, kPosMiddle, kP | kREAD}},
    {0x0f, {"IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST", kHdrAeth, kQpRc, kPosLast, kP | kREAD}},
    {0x10, {"IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY", kHdrAeth, kQpRc, kPosOnly, kP | kREAD}},
    {0x11, {"IB_OPCODE_RC_ACKNOWLEDGE", kHdrAeth, kQpRc, kPosOnly, 0}},
    {0x12, {"IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE", kHdrAeth | kHdrAtomicAckEth, kQpRc, kPosOnly, kATOMIC}},
    {0x13, {"IB_OPCODE_RC_COMPARE_SWAP", kHdrAtomicEth, kQpRc, kPosOnly, kREQ | kACK | kATOMIC}},
    {0x14, {"IB_OPCODE_RC_FETCH_ADD", kHdrAtomicEth, kQpRc, kPosOnly, kREQ | kACK | kATOMIC}},
    {0x16, {"IB_OPCODE_RC_SEND_LAST_WITH_INVALIDATE", kHdrIeth, kQpRc, kPosLast, kP | kREQ | kACK | kSEND}},
    {0x17, {"IB_OPCODE_RC_SEND_ONLY_WITH_INVALIDATE", kHdrIeth, kQpRc, kPosOnly, kP | kREQ | kACK | kSEND | kRWR}},
    // UC
    {0x20, {"IB_OPCODE_UC_SEND_FIRST", 0, kQpUc, kPosFirst, kP | kREQ | kSEND | kRWR}},
    {0x21, {"IB_OPCODE_UC_SEND_MIDDLE", 0, kQpUc, kPosMiddle, kP | kREQ | kSEND}},
    {0x22, {"IB_OPCODE_UC_SEND_LAST", 0, kQpUc, kPosLast, kP | kREQ | kSEND}},
    {0x23, {"IB_OPCODE_UC_SEND_LAST_WITH_IMMEDIATE", kHdrImmDt, kQpUc, kPosLast, kP | kREQ | kSEND}},
    {0x24, {"IB_OPCODE_UC_SEND_ONLY", 0, kQpUc, kPosOnly, kP | kREQ | kSEND | kRWR}},
    {0x25, {"IB_OPCODE_UC_SEND_ONLY_WITH_IMMEDIATE", kHdrImmDt, kQpUc, kPosOnly, kP | kREQ | kSEND | kRWR}},
    {0x26, {"IB_OPCODE_UC_RDMA_WRITE_FIRST", kHdrReth, kQpUc, kPosFirst, kP | kREQ | kWRITE}},
    {0x27, {"IB_OPCODE_UC_RDMA_WRITE_MIDDLE", 0, kQpUc, kPosMiddle, kP | kREQ | kWRITE}},
    {0x28, {"IB_OPCODE_UC_RDMA_WRITE_LAST", 0, kQpUc, kPosLast, kP | kREQ | kWRITE}},
    {0x29, {"IB_OPCODE_UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", kHdrImmDt, kQpUc, kPosLast, kP | kREQ | kWRITE | kRWR}},
    {0x2a, {"IB_OPCODE_UC_RDMA_WRITE_ONLY", kHdrReth, kQpUc, kPosOnly, kP | kREQ | kWRITE}},
    {0x2b, {"IB_OPCODE_UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", kHdrReth | kHdrImmDt, kQpUc, kPosOnly, kP | kREQ | kWRITE | kRWR}},
    // RD
    {0x40, {"IB_OPCODE_RD_SEND_FIRST", kHdrRdeth | kHdrDeth, kQpRd, kPosFirst, kP | kREQ | kACK | kSEND | kRWR}},
    {0x41, {"IB_OPCODE_RD_SEND_MIDDLE", kHdrRdeth | kHdrDeth, kQpRd, kPosMiddle, kP | kREQ | kACK | kSEND}},
    {0x42, {"IB_OPCODE_RD_SEND_LAST", kHdrRdeth | kHdrDeth, kQpRd, kPosLast, kP | kREQ | kACK | kSEND}},
    {0x43, {"IB_OPCODE_RD_SEND_LAST_WITH_IMMEDIATE", kHdrRdeth | kHdrDeth | kHdrImmDt, kQpRd, kPosLast, kP | kREQ | kACK | kSEND}},
    {0x44, {"IB_OPCODE_RD_SEND_ONLY", kHdrRdeth | kHdrDeth, kQpRd, kPosOnly, kP | kREQ | kACK | kSEND | kRWR}},
    {0x45, {"IB_OPCODE_RD_SEND_ONLY_WITH_IMMEDIATE", kHdrRdeth | kHdrDeth | kHdrImmDt, kQpRd, kPosOnly, kP | kREQ | kACK | kSEND | kRWR}},
    {0x46, {"IB_OPCODE_RD_RDMA_WRITE_FIRST", kHdrRdeth | kHdrDeth | kHdrReth, kQpRd, kPosFirst, kP | kREQ | kACK | kWRITE}},
    {0x47, {"IB_OPCODE_RD_RDMA_WRITE_MIDDLE", kHdrRdeth | kHdrDeth, kQpRd, kPosMiddle, kP | kREQ | kACK | kWRITE}},
    {0x48, {"IB_OPCODE_RD_RDMA_WRITE_LAST", kHdrRdeth | kHdrDeth, kQpRd, kPosLast, kP | kREQ | kACK | kWRITE}},
    {0x49, {"IB_OPCODE_RD_RDMA_WRITE_LAST_WITH_IMMEDIATE", kHdrRdeth | kHdrDeth | kHdrImmDt, kQpRd, kPosLast, kP | kREQ | kACK | kWRITE | kRWR}},
    {0x4a, {"IB_OPCODE_RD_RDMA_WRITE_ONLY", kHdrRdeth | kHdrDeth | kHdrReth, kQpRd, kPosOnly, kP | kREQ | kACK | kWRITE}},
    {0x4b, {"IB_OPCODE_RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE", kHdrRdeth | kHdrDeth | kHdrReth | kHdrImmDt, kQpRd, kPosOnly, kP | kREQ | kACK | kWRITE | kRWR}},
    {0x4c, {"IB_OPCODE_RD_RDMA_READ_REQUEST", kHdrRdeth | kHdrDeth | kHdrReth, kQpRd, kPosOnly, kREQ | kACK | kREAD}},
    {0x4d, {"IB_OPCODE_RD_RDMA_READ_RESPONSE_FIRST", kHdrRdeth | kHdrAeth, kQpRd, kPosFirst, kP | kREAD}},
    {0x4e, {"IB_OPCODE_RD_RDMA_READ_RESPONSE_MIDDLE", kHdrRdeth, kQpRd, kPosMiddle, kP | kREAD}},
    {0x4f, {"IB_OPCODE_RD_RDMA_READ_RESPONSE_LAST", kHdrRdeth | kHdrAeth, kQpRd, kPosLast, kP | kREAD}},
    {0x50, {"IB_OPCODE_RD_RDMA_READ_RESPONSE_ONLY", kHdrRdeth | kHdrAeth, kQpRd, kPosOnly, kP | kREAD}},
    {0x51, {"IB_OPCODE_RD_ACKNOWLEDGE", kHdrRdeth | kHdrAeth, kQpRd, kPosOnly, 0}},
    {0x52, {"IB_OPCODE_RD_ATOMIC_ACKNOWLEDGE", kHdrRdeth | kHdrAeth | kHdrAtomicAckEth, kQpRd, kPosOnly, kATOMIC}},
    {0x53, {"IB_OPCODE_RD_COMPARE_SWAP", kHdrRdeth | kHdrDeth | kHdrAtomicEth, kQpRd, kPosOnly, kREQ | kACK | kATOMIC}},
    {0x54, {"IB_OPCODE_RD_FETCH_ADD", kHdrRdeth | kHdrDeth | kHdrAtomicEth, kQpRd, kPosOnly, kREQ | kACK | kATOMIC}},
    {0x55, {"IB_OPCODE_RD_RESYNC", kHdrRdeth | kHdrDeth, kQpRd, kPosOnly, kREQ | kACK}},
    // UD
    {0x64, {"IB_OPCODE_UD_SEND_ONLY", kHdrDeth, kQpUd, kPosOnly, kP | kREQ | kSEND | kRWR}},
    {0x65, {"IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE", kHdrDeth | kHdrImmDt, kQpUd, kPosOnly, kP | kREQ | kSEND | kRWR}},
    // XRC
    {0xa0, {"IB_OPCODE_XRC_SEND_FIRST", kHdrXrceth, kQpXrc, kPosFirst, kP | kREQ | kACK | kSEND | kRWR}},
    {0xa1, {"IB_OPCODE_XRC_SEND_MIDDLE", kHdrXrceth, kQpXrc, kPosMiddle, kP | kREQ | kACK | kSEND}},
    {0xa2, {"IB_OPCODE_XRC_SEND_LAST", kHdrXrceth, kQpXrc, kPosLast, kP | kREQ | kACK | kSEND}},
    {0xa3, {"IB_OPCODE_XRC_SEND_LAST_WITH_IMMEDIATE", kHdrXrceth | kHdrImmDt, kQpXrc, kPosLast, kP | kREQ | kACK | kSEND}},
    {0xa4, {"IB_OPCODE_XRC_SEND_ONLY", kHdrXrceth, kQpXrc, kPosOnly, kP | kREQ | kACK | kSEND | kRWR}},
    {0xa5, {"IB_OPCODE_XRC_SEND_ONLY_WITH_IMMEDIATE", kHdrXrceth | kHdrImmDt, kQpXrc, kPosOnly, kP | kREQ | kACK | kSEND | kRWR}},
    {0xa6, {"IB_OPCODE_XRC_RDMA_WRITE_FIRST", kHdrXrceth | kHdrReth, kQpXrc, kPosFirst, kP | kREQ | kACK | kWRITE}},
    {0xa7, {"IB_OPCODE_XRC_RDMA_WRITE_MIDDLE", kHdrXrceth, kQpXrc, kPosMiddle, kP | kREQ | kACK | kWRITE}},
    {0xa8, {"IB_OPCODE_XRC_RDMA_WRITE_LAST", kHdrXrceth, kQpXrc, kPosLast, kP | kREQ | kACK | kWRITE}},
    {0xa9, {"IB_OPCODE_XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE", kHdrXrceth | kHdrImmDt, kQpXrc, kPosLast, kP | kREQ | kACK | kWRITE | kRWR}},
    {0xaa, {"IB_OPCODE_XRC_RDMA_WRITE_ONLY", kHdrXrceth | kHdrReth, kQpXrc, kPosOnly, kP | kREQ | kACK | kWRITE}},
    {0xab, {"IB_OPCODE_XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", kHdrXrceth | kHdrReth | kHdrImmDt, kQpXrc, kPosOnly, kP | kREQ | kACK | kWRITE | kRWR}},
    {0xac, {"IB_OPCODE_XRC_RDMA_READ_REQUEST", kHdrXrceth | kHdrReth, kQpXrc, kPosOnly, kREQ | kACK | kREAD}},
    {0xad, {"IB_OPCODE_XRC_RDMA_READ_RESPONSE_FIRST", kHdrAeth, kQpXrc, kPosFirst, kP | kREAD}},
    {0xae, {"IB_OPCODE_XRC_RDMA_READ_RESPONSE_MIDDLE", 0, kQpXrc, kPosMiddle, kP | kREAD}},
    {0xaf, {"IB_OPCODE_XRC_RDMA_READ_RESPONSE_LAST", kHdrAeth, kQpXrc, kPosLast, kP | kREAD}},
    {0xb0, {"IB_OPCODE_XRC_RDMA_READ_RESPONSE_ONLY", kHdrAeth, kQpXrc, kPosOnly, kP | kREAD}},
    {0xb1, {"IB_OPCODE_XRC_ACKNOWLEDGE", kHdrAeth, kQpXrc, kPosOnly, 0}},
    {0xb2, {"IB_OPCODE_XRC_ATOMIC_ACKNOWLEDGE", kHdrAeth | kHdrAtomicAckEth, kQpXrc, kPosOnly, kATOMIC}},
    {0xb3, {"IB_OPCODE_XRC_COMPARE_SWAP", kHdrXrceth | kHdrAtomicEth, kQpXrc, kPosOnly, kREQ | kACK | kATOMIC}},
    {0xb4, {"IB_OPCODE_XRC_FETCH_ADD", kHdrXrceth | kHdrAtomicEth, kQpXrc, kPosOnly, kREQ | kACK | kATOMIC}},
    {0xb6, {"IB_OPCODE_XRC_SEND_LAST_WITH_INVALIDATE", kHdrXrceth | kHdrIeth, kQpXrc, kPosLast, kP | kREQ | kACK | kSEND}},
    {0xb7, {"IB_OPCODE_XRC_SEND_ONLY_WITH_INVALIDATE", kHdrXrceth | kHdrIeth, kQpXrc, kPosOnly, kP | kREQ | kACK | kSEND | kRWR}},

};
// clang-format on

constexpr OpcodeInfo make_info(const Entry& x) {
    OpcodeInfo i;
    i.name = x.e.name;
    i.valid = true;
    i.headers = x.e.headers;
    i.qp_types = x.e.qp_types;
    i.position = x.e.position;
    i.payload = (x.e.attrs & kP) != 0;
    i.request = (x.e.attrs & kREQ) != 0;
    i.ack_req = (x.e.attrs & kACK) != 0;
    i.send = (x.e.attrs & kSEND) != 0;
    i.write = (x.e.attrs & kWRITE) != 0;
    i.read = (x.e.attrs & kREAD) != 0;
    i.atomic = (x.e.attrs & kATOMIC) != 0;
    i.consumes_rwqe = (x.e.attrs & kRWR) != 0;
    return i;
}

constexpr std::array<OpcodeInfo, 256> make_table() {
    std::array<OpcodeInfo, 256> t{};
    for (const auto& x : kEntries) t[x.opcode] = make_info(x);
    return t;
}

constexpr std::array<OpcodeInfo, 256> kTable = make_table();

// A few compile-time spot checks; the unit test checks the whole table.
static_assert(kTable[0x00].valid && kTable[0x00].first() && kTable[0x00].send && kTable[0x00].ack_req);
static_assert(!kTable[0x15].valid && !kTable[0x18].valid && !kTable[0x80].valid && !kTable[0xff].valid);
static_assert(kTable[0x0b].has(kHdrReth) && kTable[0x0b].has(kHdrImmDt) && kTable[0x0b].consumes_rwqe);
static_assert(kTable[0x64].qp_types == kQpUd && kTable[0x64].has(kHdrDeth) && !kTable[0x64].ack_req);

}  // namespace

const OpcodeInfo& opcode_info(std::uint8_t opcode) { return kTable[opcode]; }

std::size_t extension_header_bytes(const OpcodeInfo& info) {
    std::size_t n = 0;
    if (info.has(kHdrRdeth)) n += kRdethBytes;
    if (info.has(kHdrDeth)) n += kDethBytes;
    if (info.has(kHdrXrceth)) n += kXrcethBytes;
    if (info.has(kHdrReth)) n += kRethBytes;
    if (info.has(kHdrAtomicEth)) n += kAtomicEthBytes;
    if (info.has(kHdrAeth)) n += kAethBytes;
    if (info.has(kHdrAtomicAckEth)) n += kAtomicAckEthBytes;
    if (info.has(kHdrImmDt)) n += kImmDtBytes;
    if (info.has(kHdrIeth)) n += kIethBytes;
    return n;
}

}  // namespace hcasim::packet
