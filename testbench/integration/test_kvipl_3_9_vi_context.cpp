// KVIPL addendum 3.9: VI context.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvip_get_vi_context_fails_until_a_context_is_set_and_then_returns_it", "[kvipl][s3.9]") {
    const auto r = run_programs({}, {[](Host&, Record& rec) {
        ViEnd e;
        KVIP_PVOID ctx = nullptr;
        rec.num("get_unset", KvipGetViContext(e.vi, &ctx));
        rec.num("set_null_vi", KvipSetViContext(nullptr, &ctx));
        rec.num("get_null_vi", KvipGetViContext(nullptr, &ctx));
        int marker = 0;
        rec.num("set", KvipSetViContext(e.vi, &marker));
        rec.num("get", KvipGetViContext(e.vi, &ctx));
        rec.num("same", ctx == &marker);
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("get_unset") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("set_null_vi") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("get_null_vi") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("set") == KVIP_SUCCESS);
    CHECK(r.num("get") == KVIP_SUCCESS);
    CHECK(r.num("same") == 1);
}
