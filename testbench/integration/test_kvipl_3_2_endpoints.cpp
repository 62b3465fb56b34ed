// KVIPL addendum 3.2: KvipCreateVi and KvipDestroyVi.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvip_create_vi_returns_the_documented_code_for_each_invalid_attribute", "[kvipl][s3.2]") {
    const auto r = run_programs({{"hca.vi_max_transfer", "65536"}}, {[](Host&, Record& rec) {
        ViOptions o;
        o.max_transfer = 4096;
        ViEnd e(o);
        auto make = [&](KVIP_VI_ATTRIBUTES a) {
            KVIP_VI_HANDLE vi = nullptr;
            const KVIP_RETURN rc = KvipCreateVi(e.nic, &a, nullptr, nullptr, nullptr, nullptr, &vi);
            if (rc == KVIP_SUCCESS) KvipDestroyVi(vi);
            return rc;
        };
        KVIP_VI_ATTRIBUTES a = e.attributes();
        a.MaxTransferSize = 4096;
        rec.num("ok", make(a));
        KVIP_VI_ATTRIBUTES x = a;
        x.ReliabilityLevel = 3;
        rec.num("reliability", make(x));
        x = a;
        x.MaxTransferSize = 0;
        rec.num("mtu_zero", make(x));
        x.MaxTransferSize = 65537;
        rec.num("mtu_big", make(x));
        x = a;
        x.QoS = reinterpret_cast<KVIP_QOS>(std::uintptr_t{16});
        rec.num("qos", make(x));
        x = a;
        x.Ptag = nullptr;
        rec.num("ptag", make(x));
        x = a;
        x.ReliabilityLevel = KVIP_SERVICE_UNRELIABLE;
        x.EnableRdmaRead = KVIP_TRUE;
        rec.num("rdmaread_unreliable", make(x));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("ok") == KVIP_SUCCESS);
    CHECK(r.num("reliability") == KVIP_INVALID_RELIABILITY_LEVEL);
    CHECK(r.num("mtu_zero") == KVIP_INVALID_MTU);
    CHECK(r.num("mtu_big") == KVIP_INVALID_MTU);
    CHECK(r.num("qos") == KVIP_INVALID_QOS);
    CHECK(r.num("ptag") == KVIP_INVALID_PTAG);
    CHECK(r.num("rdmaread_unreliable") == KVIP_INVALID_RDMA_READ);
}

TEST_CASE("kvip_create_vi_with_rdma_read_on_a_nic_without_it_fails_with_invalid_rdmaread", "[kvipl][s3.2]") {
    const auto r = run_programs({{"hca.vi_rdma_read", "false"}}, {[](Host&, Record& rec) {
        ViOptions o;
        o.rdma_read = false;
        ViEnd e(o);
        KVIP_VI_ATTRIBUTES a = e.attributes();
        a.EnableRdmaRead = KVIP_TRUE;
        KVIP_VI_HANDLE vi = nullptr;
        rec.num("create", KvipCreateVi(e.nic, &a, nullptr, nullptr, nullptr, nullptr, &vi));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("create") == KVIP_INVALID_RDMA_READ);
}

TEST_CASE("kvip_destroy_vi_with_posted_descriptors_fails_until_disconnect_flushes_them", "[kvipl][s3.2]") {
    const auto r = run_programs({}, {[](Host& h, Record& rec) {
        ViEnd e;
        KVIP_DESCRIPTOR* d = e.sendrecv(0, 0, 64);
        rec.num("post", KvipPostRecv(e.vi, d, e.desc_mh));
        rec.num("destroy_busy", KvipDestroyVi(e.vi));
        rec.num("disconnect", KvipDisconnect(e.vi));
        KVIP_DESCRIPTOR* got = nullptr;
        rec.num("recv_done", e.wait_done(true, &got, h));
        rec.num("status", got ? got->CS.Status : 0);
        rec.num("destroy", KvipDestroyVi(e.vi));
        e.vi = nullptr;
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == KVIP_SUCCESS);
    CHECK(r.num("destroy_busy") == KVIP_INVALID_STATE);
    CHECK(r.num("disconnect") == KVIP_SUCCESS);
    CHECK(r.num("recv_done") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("status") == (KVIP_STATUS_DONE | KVIP_STATUS_DESC_FLUSHED_ERROR | KVIP_STATUS_OP_RECEIVE));
    CHECK(r.num("destroy") == KVIP_SUCCESS);
}
