// KVIPL addendum 3.7: querying and changing NIC, VI and memory attributes.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvip_query_nic_reports_the_configured_limits_and_the_nic_address", "[kvipl][s3.7]") {
    const auto r = run_programs({{"hca.vi_max_transfer", "262144"}, {"hca.vi_max_segments", "16"}}, {[](Host& h, Record& rec) {
        ViOptions o;
        o.max_transfer = 4096;
        ViEnd e(o);
        KVIP_NIC_ATTRIBUTES a{};
        rec.num("query", KvipQueryNic(e.nic, &a));
        rec.set("name", a.Name);
        rec.num("max_transfer", a.MaxTransferSize);
        rec.num("max_segments", a.MaxSegmentsPerDesc);
        rec.num("addr_len", a.NicAddressLen);
        rec.num("addr", a.LocalNicAddress[0] << 8 | a.LocalNicAddress[1]);
        rec.num("lid", h.node().hca().port().lid());
        rec.num("rel", a.ReliabilityLevelSupport);
        rec.num("rdma_read", a.RDMAReadSupport);
        rec.num("mtu", a.NativeMTU);
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("query") == KVIP_SUCCESS);
    CHECK(r.get("name") == "hcasim0");
    CHECK(r.num("max_transfer") == 262144);
    CHECK(r.num("max_segments") == 16);
    CHECK(r.num("addr_len") == 2);
    CHECK(r.num("addr") == r.num("lid"));
    CHECK(r.num("rel") == 7);
    CHECK(r.num("rdma_read") == 1);
    CHECK(r.num("mtu") == 4096);
}

TEST_CASE("kvip_set_vi_attributes_changes_all_or_nothing_and_only_on_idle_vis", "[kvipl][s3.7]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            KVIP_VI_ATTRIBUTES a = e.attributes();
            a.MaxTransferSize = 8192;
            a.QoS = reinterpret_cast<KVIP_QOS>(std::uintptr_t{99});  // invalid: nothing changes
            rec.num("set_bad", KvipSetViAttributes(e.vi, &a));
            KVIP_VI_ATTRIBUTES q{};
            KVIP_VI_STATE st{};
            KVIP_BOOLEAN se = 0, re = 0;
            KvipQueryVi(e.vi, &st, &q, &se, &re);
            rec.num("unchanged", q.MaxTransferSize);
            a.QoS = nullptr;
            a.MaxTransferSize = 1 << 20;
            rec.num("set_ok", KvipSetViAttributes(e.vi, &a));
            KvipPostRecv(e.vi, e.sendrecv(0, 0, 64), e.desc_mh);
            KvipQueryVi(e.vi, &st, &q, &se, &re);
            rec.num("idle", st);
            rec.num("sq_empty", se);
            rec.num("rq_empty", re);
            dial(h, e, 1);
            KvipQueryVi(e.vi, &st, &q, &se, &re);
            rec.num("connected", st);
            rec.num("set_connected", KvipSetViAttributes(e.vi, &a));
            h.barrier("end");
        },
        [](Host& h, Record&) {
            ViEnd e;
            serve(h, e);
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("set_bad") == KVIP_INVALID_QOS);
    CHECK(r.num("unchanged") == 1 << 20);
    CHECK(r.num("set_ok") == KVIP_SUCCESS);
    CHECK(r.num("idle") == KVIP_STATE_IDLE);
    CHECK(r.num("sq_empty") == KVIP_TRUE);
    CHECK(r.num("rq_empty") == KVIP_FALSE);
    CHECK(r.num("connected") == KVIP_STATE_CONNECTED);
    CHECK(r.num("set_connected") == KVIP_INVALID_STATE);
}

TEST_CASE("kvip_set_mem_attributes_is_seen_by_query_mem_and_bad_values_change_nothing", "[kvipl][s3.7]") {
    const auto r = run_programs({}, {[](Host&, Record& rec) {
        ViEnd e;
        KVIP_MEM_ATTRIBUTES m{};
        rec.num("query", KvipQueryMem(e.nic, e.data, e.data_mh, &m));
        rec.num("ptag_ok", m.Ptag == e.ptag);
        rec.num("rw", m.EnableRdmaWrite);
        KVIP_PROTECTION_HANDLE other = nullptr;
        KvipCreatePtag(e.nic, &other);
        KVIP_MEM_ATTRIBUTES bad{reinterpret_cast<KVIP_PROTECTION_HANDLE>(&m), KVIP_FALSE, KVIP_FALSE};
        rec.num("set_bad", KvipSetMemAttributes(e.nic, e.data, e.data_mh, &bad));
        KVIP_MEM_ATTRIBUTES set{other, KVIP_FALSE, KVIP_TRUE};
        rec.num("set", KvipSetMemAttributes(e.nic, e.data, e.data_mh, &set));
        KvipQueryMem(e.nic, e.data, e.data_mh, &m);
        rec.num("ptag_changed", m.Ptag == other);
        rec.num("rw_after", m.EnableRdmaWrite);
        rec.num("rr_after", m.EnableRdmaRead);
        rec.num("query_unknown", KvipQueryMem(e.nic, e.data, e.data_mh + 0x100, &m));
        KVIP_SMI_PORT_COUNTERS_INFO info{};
        rec.num("smi", KvipQuerySystemManagementInfo(e.nic, KVIP_SMI_PORT_COUNTERS, &info));
        rec.num("smi_bad", KvipQuerySystemManagementInfo(e.nic, 99, &info));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("query") == KVIP_SUCCESS);
    CHECK(r.num("ptag_ok") == 1);
    CHECK(r.num("rw") == KVIP_TRUE);
    CHECK(r.num("set_bad") == KVIP_INVALID_PTAG);
    CHECK(r.num("set") == KVIP_SUCCESS);
    CHECK(r.num("ptag_changed") == 1);
    CHECK(r.num("rw_after") == KVIP_FALSE);
    CHECK(r.num("rr_after") == KVIP_TRUE);
    CHECK(r.num("query_unknown") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("smi") == KVIP_SUCCESS);
    CHECK(r.num("smi_bad") == KVIP_INVALID_PARAMETER);
}
