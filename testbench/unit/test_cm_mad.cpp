// CM datagrams of the VI connection protocol and the VI descriptor formats.
#include <catch2/catch.hpp>

#include <cstring>

#include "host/kvipl/kvipl.h"
#include "model/hca/descriptor_engine.hpp"
#include "model/packet/cm_mad.hpp"

using namespace hcasim;

namespace {

packet::CmMessage sample() {
    packet::CmMessage m;
    m.attr = packet::CmAttr::Rep;
    m.transaction_id = 0x0102030405060708ull;
    m.local_comm_id = 11;
    m.remote_comm_id = 22;
    m.peer = true;
    m.reason = packet::CmReject::PeerNotReady;
    m.qpn = 0x48;
    m.remote_qpn = 0x49;
    m.start_psn = 0xabcdef;
    m.reliability = 4;
    m.max_transfer = 65536;
    m.qos = 3;
    m.rdma_write = true;
    m.rdma_read = false;
    m.local = {{0, 1}, {'c', 'l', 'i'}};
    m.remote = {{0, 2}, {'s', 'r', 'v', 0, 7}};
    return m;
}

}  // namespace

TEST_CASE("a cm message survives encode and decode field for field", "[unit][cm]") {
    const packet::CmMessage m = sample();
    std::uint8_t mad[packet::kMadBytes];
    packet::encode(m, mad);
    CHECK(mad[1] == packet::kMgmtClassCm);
    CHECK(mad[16] == 0x00);
    CHECK(mad[17] == 0x13);  // REP attribute ID, big-endian
    packet::CmMessage d;
    REQUIRE(packet::decode(mad, sizeof mad, d));
    CHECK(d.attr == m.attr);
    CHECK(d.transaction_id == m.transaction_id);
    CHECK(d.local_comm_id == 11);
    CHECK(d.remote_comm_id == 22);
    CHECK(d.peer);
    CHECK(d.reason == packet::CmReject::PeerNotReady);
    CHECK(d.qpn == 0x48);
    CHECK(d.remote_qpn == 0);  // only DREQ and DREP name the receiver's VI
    CHECK(d.start_psn == 0xabcdef);
    CHECK(d.reliability == 4);
    CHECK(d.max_transfer == 65536);
    CHECK(d.qos == 3);
    CHECK(d.rdma_write);
    CHECK_FALSE(d.rdma_read);
    CHECK(d.local == m.local);
    CHECK(d.remote == m.remote);
    packet::CmMessage dreq = m;
    dreq.attr = packet::CmAttr::Dreq;
    packet::encode(dreq, mad);
    REQUIRE(packet::decode(mad, sizeof mad, d));
    CHECK(d.attr == packet::CmAttr::Dreq);
    CHECK(d.qpn == 0x48);
    CHECK(d.remote_qpn == 0x49);
    CHECK(std::get<packet::ibcm::Dreq>(packet::to_ib(dreq).body).remote_qpn == 0x49);
}

TEST_CASE("malformed cm datagrams are refused", "[unit][cm]") {
    std::uint8_t mad[packet::kMadBytes];
    packet::encode(sample(), mad);
    packet::CmMessage d;
    CHECK_FALSE(packet::decode(mad, packet::kMadBytes - 1, d));  // truncated
    std::uint8_t bad[packet::kMadBytes];
    std::memcpy(bad, mad, sizeof bad);
    bad[1] = 0x01;  // not the CM class
    CHECK_FALSE(packet::decode(bad, sizeof bad, d));
    std::memcpy(bad, mad, sizeof bad);
    bad[17] = 0x20;  // unknown attribute
    CHECK_FALSE(packet::decode(bad, sizeof bad, d));
    std::memcpy(bad, mad, sizeof bad);
    bad[24 + 36 + 9] = 70;  // a host address longer than the private data holds (REP private data at 36)
    CHECK_FALSE(packet::decode(bad, sizeof bad, d));
    std::memcpy(bad, mad, sizeof bad);
    bad[24 + 36] = 0x80;  // a flag the protocol does not have
    CHECK_FALSE(packet::decode(bad, sizeof bad, d));
    std::memcpy(bad, mad, sizeof bad);
    bad[0] = 2;  // base version
    CHECK_FALSE(packet::decode(bad, sizeof bad, d));
}

TEST_CASE("vi messages are ib cm messages: a request names the vi service", "[unit][cm]") {
    packet::CmMessage m = sample();
    m.attr = packet::CmAttr::Req;
    m.local.discriminator.assign(packet::kCmMaxAddressBytes - 2, 'a');
    m.remote.discriminator.assign(packet::kCmMaxAddressBytes - 2, 'b');
    REQUIRE(packet::fits(m));
    const packet::ibcm::Mad ib = packet::to_ib(m);
    CHECK(packet::ibcm::check(ib).empty());  // the longest addresses fit the REQ's private data
    CHECK(std::get<packet::ibcm::Req>(ib.body).service_id == packet::kViServiceId);
    std::uint8_t mad[packet::kMadBytes];
    packet::ibcm::encode(ib, mad);
    packet::CmMessage d;
    REQUIRE(packet::decode(mad, sizeof mad, d));
    CHECK(d.qpn == m.qpn);
    CHECK(d.start_psn == m.start_psn);
    CHECK(d.local == m.local);
    CHECK(d.remote == m.remote);
    // A REQ to any other service is not the VI protocol's.
    packet::ibcm::Mad other = ib;
    std::get<packet::ibcm::Req>(other.body).service_id = 0x0000000001060000ull;
    packet::ibcm::encode(other, mad);
    CHECK_FALSE(packet::decode(mad, sizeof mad, d));
}

TEST_CASE("addresses longer than the cm fields do not fit", "[unit][cm]") {
    packet::CmMessage m = sample();
    CHECK(packet::fits(m));
    m.remote.discriminator.assign(63, 'x');
    CHECK_FALSE(packet::fits(m));
}

TEST_CASE("vi status bits follow the transport completion status", "[unit][vi]") {
    CHECK(hca::vi_error_bits(hca::CqeStatus::Success) == 0);
    CHECK(hca::vi_error_bits(hca::CqeStatus::LocalLength) == KVIP_STATUS_LENGTH_ERROR);
    CHECK(hca::vi_error_bits(hca::CqeStatus::LocalProtection) == KVIP_STATUS_PROTECTION_ERROR);
    CHECK(hca::vi_error_bits(hca::CqeStatus::WrFlush) == KVIP_STATUS_DESC_FLUSHED_ERROR);
    CHECK(hca::vi_error_bits(hca::CqeStatus::RemoteAccess) == KVIP_STATUS_RDMA_PROT_ERROR);
    CHECK(hca::vi_error_bits(hca::CqeStatus::RemoteInvalidRequest) == KVIP_STATUS_REMOTE_DESC_ERROR);
    CHECK(hca::vi_error_bits(hca::CqeStatus::RetryExceeded) == KVIP_STATUS_TRANSPORT_ERROR);
    CHECK(hca::vi_error_bits(hca::CqeStatus::LocalQpOperation) == KVIP_STATUS_FORMAT_ERROR);
    for (auto s : {hca::CqeStatus::LocalLength, hca::CqeStatus::RemoteAccess, hca::CqeStatus::GeneralError})
        CHECK((hca::vi_error_bits(s) & ~static_cast<std::uint32_t>(KVIP_STATUS_ERROR_MASK)) == 0);
    CHECK(hca::vi_op_bits(hca::WqeOpcode::RdmaWriteImm) == (KVIP_STATUS_OP_RDMA_WRITE | KVIP_STATUS_IMMEDIATE));
    CHECK(hca::vi_op_bits(hca::WqeOpcode::RdmaRead) == KVIP_STATUS_OP_RDMA_READ);
}

TEST_CASE("the kvipl descriptor is the layout the adapter reads", "[unit][vi]") {
    CHECK(sizeof(KVIP_CONTROL_SEGMENT) == 32);
    CHECK(sizeof(KVIP_DATA_SEGMENT) == 16);
    CHECK(sizeof(KVIP_ADDRESS_SEGMENT) == 16);
    CHECK(offsetof(KVIP_DESCRIPTOR, DS) == 32);
    CHECK(offsetof(KVIP_CONTROL_SEGMENT, Length) == 24);
    CHECK(offsetof(KVIP_CONTROL_SEGMENT, Status) == 28);
}
