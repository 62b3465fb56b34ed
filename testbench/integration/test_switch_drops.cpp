// What the switch discards: a packet to a LID it has no route for, counted
// and warned about as a routing problem, and a packet whose DLID a link
// error damaged on the way in, counted as the link error it is (its VCRC
// fails) and not reported as a missing route.
#include "testbench/integration/harness.hpp"

namespace hcasim::test {
namespace {

// Node 0 sends n empty UD datagrams to dlid (node 1's LID when 0) and
// records the switch's drop counters once they have left.
RunResult send_datagrams(const Overrides& faults, std::uint16_t dlid, int n) {
    Overrides cfg{{"fabric.topology", "switch"}};
    cfg.insert(cfg.end(), faults.begin(), faults.end());
    auto sender = [dlid, n](Host& h, Record& rec) {
        SideOptions o;
        o.qp_type = IBV_QPT_UD;
        o.max_send_wr = static_cast<std::uint32_t>(n);
        o.cq_depth = n;
        Side s(h, o);
        s.connect("ud", 1);
        if (dlid) {
            ibv_ah_attr av{};
            av.dlid = dlid;
            av.port_num = 1;
            need_rc(ibv_destroy_ah(s.ah), "ibv_destroy_ah");
            s.ah = ibv_create_ah(s.pd, &av);
            need(s.ah != nullptr, "ibv_create_ah");
        }
        for (int i = 0; i < n; ++i)
            need_rc(s.post_ud(s.qps[0], 0, IBV_WR_SEND, {}, IBV_SEND_SIGNALED, static_cast<std::uint64_t>(i)), "post_ud");
        s.poll_ok(s.send_cq, n, "sends");
        h.sleep(us(20));
        for (const char* c : {"dropped_unknown_dlid", "dropped_bad_vcrc", "packets_forwarded"})
            rec.num(c, h.system().counter(std::string("switch0.") + c));
        h.barrier("sent");
        s.close();
    };
    auto receiver = [](Host& h, Record&) {
        SideOptions o;
        o.qp_type = IBV_QPT_UD;
        Side s(h, o);
        s.connect("ud", 0);
        h.barrier("sent");
        s.close();
    };
    return run_pair(cfg, sender, receiver);
}

}  // namespace

TEST_CASE("a switch drops a packet to a lid it has no route for as unroutable", "[fabric][switch]") {
    const RunResult r = send_datagrams({}, 0x99, 3);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("dropped_unknown_dlid") == 3);
    CHECK(r.num("dropped_bad_vcrc") == 0);
}

TEST_CASE("a switch drops a packet whose dlid a link error damaged for its vcrc, not as unroutable",
          "[fabric][switch][lossy]") {
    // Every packet node 0 sends has one bit flipped on its way to the switch;
    // some of those bits are in the DLID, and most such DLIDs have no route.
    const int n = 400;
    const RunResult r = send_datagrams({{"fault.corrupt", "1"}}, 0, n);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("dropped_bad_vcrc") > 0);
    CHECK(r.num("dropped_unknown_dlid") == 0);
    CHECK(r.num("dropped_bad_vcrc") + r.num("packets_forwarded") >= n);
}

}  // namespace hcasim::test
