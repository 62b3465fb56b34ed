// hcasim lat and bw --verify: every received byte checked against the
// sender's pattern, on lossless and lossy fabrics and every QP type that
// moves payload; and what a bad byte makes it say.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "testbench/integration/harness.hpp"
#include "testbench/workloads/perftest.hpp"

using namespace hcasim;
using namespace hcasim::test;

TEST_CASE("verify_bytes names the first bad offset and both bytes", "[cli][verify]") {
    std::vector<std::uint8_t> want(4096), got(4096);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = got[i] = static_cast<std::uint8_t>(i * 13 + 5);
    CHECK_NOTHROW(testbench::verify_bytes(got.data(), want.data(), got.size(), 4096, "SEND"));
    got[1234] ^= 0x40;
    got[3000] ^= 0x01;
    try {
        testbench::verify_bytes(got.data(), want.data(), got.size(), 4096, "RDMA WRITE");
        FAIL("no error for a changed byte");
    } catch (const std::runtime_error& e) {
        const std::string m = e.what();
        CHECK(m.find("RDMA WRITE of 4096 bytes") != std::string::npos);
        CHECK(m.find("byte at offset 1234 ") != std::string::npos);
        char want_hex[8], got_hex[8];
        std::snprintf(got_hex, sizeof got_hex, "0x%x", got[1234]);
        std::snprintf(want_hex, sizeof want_hex, "0x%x", want[1234]);
        CHECK(m.find(std::string("is ") + got_hex) != std::string::npos);
        CHECK(m.find(std::string("has ") + want_hex) != std::string::npos);
    }
}

TEST_CASE("lat and bw --verify pass and report the same figures as without it", "[cli][verify]") {
    for (const std::string w : {"lat --sizes 2:8192 -n 40", "lat --op send --sizes 2,300,4096 -n 40",
                                "lat --op read --sizes 8,5000 -n 20", "lat --qp-type ud --op send --sizes 64,2048 -n 20",
                                "bw --sizes 64:262144 -n 60", "bw --op send --sizes 64,8192 -n 60 -q 3",
                                "bw --op read --sizes 64,70000 -n 40 -q 2", "bw --qp-type ud --sizes 64,4096 -n 60",
                                "bw --srq --op send --sizes 64,4096 -n 60 -q 4", "bw --qp-type xrc --sizes 64,4096 -n 60"}) {
        INFO(w);
        const auto plain = run_hcasim(w + " -f csv");
        const auto checked = run_hcasim(w + " -f csv --verify");
        REQUIRE(plain.exit_code == 0);
        CHECK(checked.exit_code == 0);
        CHECK(checked.out == plain.out);
    }
}

TEST_CASE("bw --verify over lossy links: rc retransmits, uc and ud lose whole messages and count them, no byte is wrong",
          "[cli][verify][lossy]") {
    const auto rc = run_hcasim("bw --verify --sizes 4096,65536 -n 300 --set fault.drop=0.01 --set fault.corrupt=0.01 --counters");
    CHECK(rc.exit_code == 0);
    CHECK(counter_in(rc.out, "node0.ports.1.hw_counters.packet_seq_err") > 0);
    // UC: a lost packet abandons its message, which the responder counts;
    // the next message resynchronises and lands whole.
    const auto uc = run_hcasim("bw --verify --qp-type uc --sizes 65536 -n 300 --set fault.drop=0.01 --set fault.corrupt=0.01 --counters");
    CHECK(uc.exit_code == 0);
    CHECK(counter_in(uc.out, "node1.hca.responder.lost_packet_gaps") > 0);
    CHECK(counter_in(uc.out, "node1.ports.1.hw_counters.out_of_sequence") ==
          counter_in(uc.out, "node1.hca.responder.lost_packet_gaps"));
    // UD: what the links lose or corrupt never reaches a receive.
    const auto ud = run_hcasim("bw --verify --qp-type ud --op send --sizes 4096 -n 300 --set fault.drop=0.02 --set fault.corrupt=0.02 --counters");
    CHECK(ud.exit_code == 0);
    CHECK(counter_in(ud.out, "link0.dropped") > 0);
    CHECK(counter_in(ud.out, "node1.ports.1.counters.port_rcv_errors") == counter_in(ud.out, "link0.corrupted"));
    CHECK(counter_in(ud.out, "link0.corrupted") > 0);
}

TEST_CASE("hcasim refuses --verify where there is nothing to check", "[cli][verify]") {
    const auto kvipl = run_hcasim("lat --api kvipl --verify", true);
    CHECK(kvipl.exit_code != 0);
    CHECK(kvipl.out.find("--verify applies to --api verbs only") != std::string::npos);
    const auto atomic = run_hcasim("bw --op atomic_fadd --verify", true);
    CHECK(atomic.exit_code != 0);
    CHECK(atomic.out.find("--verify does not apply to --op atomic_fadd") != std::string::npos);
    const auto mcast = run_hcasim("mcast --verify", true);
    CHECK(mcast.exit_code != 0);
    CHECK(mcast.out.find("--verify") != std::string::npos);
    const auto atomic_rate = run_hcasim("msgrate --op atomic_cas --sizes 8 --verify", true);
    CHECK(atomic_rate.exit_code != 0);
    CHECK(atomic_rate.out.find("--verify does not apply to --op atomic_cas") != std::string::npos);
}
