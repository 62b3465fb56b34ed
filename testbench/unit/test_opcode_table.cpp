// Unit tests for the IBA opcode attribute table: agreement with the header
// layout the packet builder and parser use, and internal consistency.
#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model/packet/ib_packet.hpp"
#include "model/packet/opcode_table.hpp"

using namespace hcasim::packet;

namespace {

int popcount(unsigned v) {
    int n = 0;
    for (; v; v &= v - 1) ++n;
    return n;
}

std::uint8_t qp_type_of_range(unsigned opcode) {
    switch (opcode >> 5) {
    case 0: return kQpRc;
    case 1: return kQpUc;
    case 2: return kQpRd;
    case 3: return kQpUd;
    case 5: return kQpXrc;
    default: return 0;  // CNP (0x80) and the reserved / vendor ranges
    }
}

}  // namespace

TEST_CASE("opcode table: every opcode the packet layer accepts has a matching entry", "[packet][unit]") {
    int supported = 0;
    for (unsigned o = 0; o < 256; ++o) {
        const OpcodeLayout l = opcode_layout(static_cast<std::uint8_t>(o));
        if (!l.valid) continue;
        ++supported;
        const OpcodeInfo& i = opcode_info(static_cast<std::uint8_t>(o));
        INFO("opcode 0x" << std::hex << o << " " << i.name);
        REQUIRE(i.valid);
        CHECK(i.has(kHdrDeth) == l.deth);
        CHECK(i.has(kHdrReth) == l.reth);
        CHECK(i.has(kHdrAeth) == l.aeth);
        CHECK(i.has(kHdrImmDt) == l.immdt);
        CHECK(i.payload == l.payload);
        CHECK(i.has(kHdrAtomicEth) == l.atomic_eth);
        CHECK(i.has(kHdrAtomicAckEth) == l.atomic_ack_eth);
        CHECK(i.has(kHdrXrceth) == l.xrceth);
        CHECK(i.has(kHdrIeth) == l.ieth);
        // Headers the packet layer cannot express are on no supported opcode.
        CHECK((i.headers & kHdrRdeth) == 0);
    }
    CHECK(supported == 60);  // RC 23, UC 12, UD 2, XRC 23
}

TEST_CASE("opcode table: built and parsed packets carry exactly the headers the table lists", "[packet][unit]") {
    for (unsigned o = 0; o < 256; ++o) {
        const auto op = static_cast<std::uint8_t>(o);
        if (!opcode_layout(op).valid) continue;
        const OpcodeInfo& info = opcode_info(op);
        INFO("opcode 0x" << std::hex << o << " " << info.name);

        // Offer every optional header; build() must put on the wire only the
        // ones the opcode carries.
        Headers h;
        h.lrh.dlid = 0x12;
        h.lrh.slid = 0x34;
        h.bth.opcode = op;
        h.bth.dest_qp = 0x77;
        h.bth.psn = 5;
        h.deth = Deth{0x11111111u, 0x2222};
        h.reth = Reth{0x1000, 0x33, 64};
        h.aeth = Aeth{kAethAck, 9};
        h.immdt = 0xabcdef01u;
        h.xrceth = 0x123456u;
        h.ieth = 0x12345678u;
        const std::size_t payload_len = info.payload ? 12 : 0;
        std::vector<std::uint8_t> payload(payload_len, 0x5a);
        std::vector<std::uint8_t> buf(wire_bytes(h, payload_len));
        REQUIRE(build(h, payload.data(), payload_len, buf.data()) == buf.size());

        Parsed p;
        REQUIRE(parse(buf.data(), buf.size(), p) == ParseError::None);
        CHECK(p.h.bth.opcode == op);
        CHECK(p.h.deth.has_value() == info.has(kHdrDeth));
        CHECK(p.h.reth.has_value() == info.has(kHdrReth));
        CHECK(p.h.aeth.has_value() == info.has(kHdrAeth));
        CHECK(p.h.immdt.has_value() == info.has(kHdrImmDt));
        CHECK(p.h.xrceth.has_value() == info.has(kHdrXrceth));
        if (p.h.xrceth) CHECK(*p.h.xrceth == 0x123456u);
        CHECK(p.h.ieth.has_value() == info.has(kHdrIeth));
        if (p.h.ieth) CHECK(*p.h.ieth == 0x12345678u);
        CHECK(p.payload_len == payload_len);
        CHECK(header_bytes(h) == kLrhBytes + kBthBytes + extension_header_bytes(info));
        CHECK(p.payload_offset == kLrhBytes + kBthBytes + extension_header_bytes(info));
    }
}

TEST_CASE("opcode table: entries are internally consistent", "[packet][unit]") {
    std::set<std::string> names;
    int valid = 0;
    for (unsigned o = 0; o < 256; ++o) {
        const OpcodeInfo& i = opcode_info(static_cast<std::uint8_t>(o));
        INFO("opcode 0x" << std::hex << o << " " << i.name);
        if (!i.valid) {
            CHECK(i.headers == 0);
            CHECK(i.qp_types == 0);
            CHECK(i.position == 0);
            CHECK_FALSE(i.request);
            CHECK_FALSE(i.response());
            CHECK(extension_header_bytes(i) == 0);
            continue;
        }
        ++valid;
        CHECK(names.insert(i.name).second);

        // The transport is given by the top three bits: RC 0x00-0x1F, UC
        // 0x20-0x3F, RD 0x40-0x5F, UD 0x60-0x7F, XRC 0xA0-0xBF.
        CHECK(i.qp_types == qp_type_of_range(o));
        const std::string prefix = std::string("IB_OPCODE_") + (i.qp_types == kQpRc    ? "RC_"
                                                               : i.qp_types == kQpUc  ? "UC_"
                                                               : i.qp_types == kQpRd  ? "RD_"
                                                               : i.qp_types == kQpUd  ? "UD_"
                                                                                      : "XRC_");
        CHECK(std::string(i.name).rfind(prefix, 0) == 0);

        // Exactly one position.
        CHECK(popcount(i.position) == 1);
        CHECK((i.position & ~(kPosFirst | kPosMiddle | kPosLast | kPosOnly)) == 0);
        // At most one operation class; only a plain ACK and RD RESYNC have none.
        CHECK(popcount(i.send + 2u * i.write + 4u * i.read + 8u * i.atomic) <= 1);
        if (!i.send && !i.write && !i.read && !i.atomic) {
            const std::string n = i.name;
            CHECK((n.find("_ACKNOWLEDGE") != std::string::npos || n.find("_RESYNC") != std::string::npos));
        }
        // Multi-packet operations are SEND, RDMA WRITE and READ responses;
        // everything else is a single packet.
        if (!i.starts_message() || !i.ends_message()) CHECK((i.send || i.write || (i.read && !i.request)));
        if (i.atomic || (i.read && i.request)) CHECK(i.only());

        // Requests and responses.
        CHECK(i.response() == !i.request);
        const bool reliable = (i.qp_types & (kQpRc | kQpRd | kQpXrc)) != 0;
        CHECK(i.ack_req == (i.request && reliable));
        if (!i.request) CHECK((i.has(kHdrAeth) || (i.read && i.middle())));
        if (i.has(kHdrAeth)) CHECK_FALSE(i.request);
        CHECK(i.has(kHdrAtomicAckEth) == (i.atomic && !i.request));
        CHECK(i.has(kHdrAtomicEth) == (i.atomic && i.request));
        // UC and UD have no responses; UD has only SEND only.
        if (i.qp_types & (kQpUc | kQpUd)) CHECK(i.request);
        if (i.qp_types == kQpUd) CHECK((i.send && i.only()));

        // Datagram and XRC headers.
        CHECK(i.has(kHdrRdeth) == (i.qp_types == kQpRd));
        CHECK(i.has(kHdrDeth) == ((i.qp_types == kQpUd) || (i.qp_types == kQpRd && i.request)));
        CHECK(i.has(kHdrXrceth) == (i.qp_types == kQpXrc && i.request));

        // RETH on the first packet of an RDMA WRITE and on a READ request.
        CHECK(i.has(kHdrReth) == ((i.write && i.starts_message()) || (i.read && i.request)));
        // Immediate data and invalidate only on the last packet of a SEND or
        // RDMA WRITE.
        if (i.has(kHdrImmDt) || i.has(kHdrIeth)) CHECK(((i.send || i.write) && i.ends_message()));
        CHECK_FALSE((i.has(kHdrImmDt) && i.has(kHdrIeth)));
        if (i.has(kHdrIeth)) CHECK(i.send);

        // Payload: SEND, RDMA WRITE and READ responses.
        CHECK(i.payload == (i.send || i.write || (i.read && !i.request)));

        // A receive WQE is taken by the first packet of a SEND and by an RDMA
        // WRITE with immediate data (on its last packet).
        CHECK(i.consumes_rwqe == ((i.send && i.starts_message()) || (i.write && i.has(kHdrImmDt))));
    }
    // RC 23, UC 12, RD 22, UD 2, XRC 23.
    CHECK(valid == 82);
}

TEST_CASE("opcode table: transports mirror the RC operations", "[packet][unit]") {
    // UC, RD and XRC opcodes have the position and operation of the RC
    // opcode with the same low five bits; a FIRST has matching MIDDLE and
    // LAST opcodes in its transport.
    for (unsigned o = 0; o < 256; ++o) {
        const OpcodeInfo& i = opcode_info(static_cast<std::uint8_t>(o));
        if (!i.valid) continue;
        INFO("opcode 0x" << std::hex << o << " " << i.name);
        const OpcodeInfo& rc = opcode_info(static_cast<std::uint8_t>(o & 0x1f));
        if (i.qp_types != kQpUd && o != 0x55) {  // RD RESYNC has no RC counterpart
            REQUIRE(rc.valid);
            CHECK(i.position == rc.position);
            CHECK(i.send == rc.send);
            CHECK(i.write == rc.write);
            CHECK(i.read == rc.read);
            CHECK(i.atomic == rc.atomic);
            CHECK(i.request == rc.request);
            CHECK(i.consumes_rwqe == rc.consumes_rwqe);
        }
        if (i.first()) {
            bool has_middle = false, has_last = false;
            for (unsigned q = o & 0xe0; q < (o & 0xe0) + 32; ++q) {
                const OpcodeInfo& j = opcode_info(static_cast<std::uint8_t>(q));
                if (!j.valid || j.send != i.send || j.write != i.write || j.read != i.read || j.request != i.request)
                    continue;
                has_middle |= j.middle();
                has_last |= j.last();
            }
            CHECK(has_middle);
            CHECK(has_last);
        }
    }
    CHECK(opcode_info(Opcode::RcAcknowledge).valid);
    CHECK(std::string(opcode_info(Opcode::RcSendFirst).name) == "IB_OPCODE_RC_SEND_FIRST");
    CHECK(std::string(opcode_info(0x15).name) == "INVALID");
}
