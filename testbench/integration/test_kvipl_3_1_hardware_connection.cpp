// KVIPL addendum 3.1: KvipOpenNic and KvipCloseNic.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvip_open_nic_gives_a_new_handle_each_time_and_rejects_unknown_devices", "[kvipl][s3.1]") {
    const auto r = run_programs({}, {[](Host&, Record& rec) {
        KVIP_NIC_HANDLE a = nullptr, b = nullptr, c = nullptr;
        KEVENT ev;
        KeInitializeEvent(&ev, NotificationEvent, KVIP_FALSE);
        rec.num("open_a", KvipOpenNic(L"hcasim0", &ev, &a));
        rec.num("open_b", KvipOpenNic(L"hcasim0", nullptr, &b));
        rec.num("distinct", a != b && a && b);
        rec.num("open_bad", KvipOpenNic(L"nosuchnic", &ev, &c));
        rec.num("bad_null", c == nullptr);
        rec.num("close_a", KvipCloseNic(a));
        rec.num("close_b", KvipCloseNic(b));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("open_a") == KVIP_SUCCESS);
    CHECK(r.num("open_b") == KVIP_SUCCESS);
    CHECK(r.num("distinct") == 1);
    CHECK(r.num("open_bad") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("bad_null") == 1);
    CHECK(r.num("close_a") == KVIP_SUCCESS);
    CHECK(r.num("close_b") == KVIP_SUCCESS);
}
