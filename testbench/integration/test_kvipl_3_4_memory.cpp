// KVIPL addendum 3.4: protection tags, memory registration, physical pages.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvip_memory_registration_returns_the_documented_codes", "[kvipl][s3.4]") {
    const auto r = run_programs({}, {[](Host&, Record& rec) {
        ViEnd e;
        static std::uint8_t buf[3 * 4096] __attribute__((aligned(4096)));
        KVIP_PROTECTION_HANDLE tag = nullptr;
        rec.num("ptag", KvipCreatePtag(e.nic, &tag));
        KVIP_MEM_ATTRIBUTES ma{tag, KVIP_TRUE, KVIP_TRUE};
        KVIP_MEM_HANDLE mh = 7;
        rec.num("len0", KvipRegisterMem(e.nic, buf, 0, &ma, &mh));
        rec.num("len0_handle", mh);
        KVIP_MEM_ATTRIBUTES bad{reinterpret_cast<KVIP_PROTECTION_HANDLE>(buf), KVIP_FALSE, KVIP_FALSE};
        rec.num("bad_ptag", KvipRegisterMem(e.nic, buf, 100, &bad, &mh));
        rec.num("reg", KvipRegisterMem(e.nic, buf + 100, 5000, &ma, &mh));
        rec.num("destroy_busy", KvipDestroyPtag(e.nic, tag));
        rec.num("dereg_wrong_addr", KvipDeregisterMem(e.nic, buf, mh));
        rec.num("dereg_wrong_handle", KvipDeregisterMem(e.nic, buf + 100, mh + 0x100));
        rec.num("dereg", KvipDeregisterMem(e.nic, buf + 100, mh));
        rec.num("destroy", KvipDestroyPtag(e.nic, tag));
        KVIP_PHYS_ADDRESS pages[2] = {buf, buf + 100};
        rec.num("phys_zero", KvipRegisterPhysPages(e.nic, pages, 0, &ma, &mh));
        KVIP_MEM_ATTRIBUTES ma2{e.ptag, KVIP_FALSE, KVIP_FALSE};
        rec.num("phys_misaligned", KvipRegisterPhysPages(e.nic, pages, 2, &ma2, &mh));
        pages[1] = buf + 8192;
        rec.num("phys", KvipRegisterPhysPages(e.nic, pages, 2, &ma2, &mh));
        rec.num("phys_dereg_as_mem", KvipDeregisterMem(e.nic, nullptr, mh));
        rec.num("phys_dereg", KvipDeregisterPhysPages(e.nic, mh));
        rec.num("phys_dereg_again", KvipDeregisterPhysPages(e.nic, mh));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("ptag") == KVIP_SUCCESS);
    CHECK(r.num("len0") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("len0_handle") == 0);
    CHECK(r.num("bad_ptag") == KVIP_INVALID_PTAG);
    CHECK(r.num("reg") == KVIP_SUCCESS);
    CHECK(r.num("destroy_busy") == KVIP_ERROR_RESOURCE);
    CHECK(r.num("dereg_wrong_addr") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("dereg_wrong_handle") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("dereg") == KVIP_SUCCESS);
    CHECK(r.num("destroy") == KVIP_SUCCESS);
    CHECK(r.num("phys_zero") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("phys_misaligned") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("phys") == KVIP_SUCCESS);
    CHECK(r.num("phys_dereg_as_mem") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("phys_dereg") == KVIP_SUCCESS);
    CHECK(r.num("phys_dereg_again") == KVIP_INVALID_PARAMETER);
}

TEST_CASE("kvip_register_mem_with_rdma_read_on_a_nic_without_it_fails_with_invalid_rdmaread", "[kvipl][s3.4]") {
    const auto r = run_programs({{"hca.vi_rdma_read", "false"}}, {[](Host&, Record& rec) {
        ViOptions o;
        o.rdma_read = false;
        ViEnd e(o);
        static std::uint8_t buf[4096] __attribute__((aligned(4096)));
        KVIP_MEM_ATTRIBUTES ma{e.ptag, KVIP_FALSE, KVIP_TRUE};
        KVIP_MEM_HANDLE mh = 0;
        rec.num("reg", KvipRegisterMem(e.nic, buf, sizeof buf, &ma, &mh));
        KVIP_PHYS_ADDRESS pages[1] = {buf};
        rec.num("phys", KvipRegisterPhysPages(e.nic, pages, 1, &ma, &mh));
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("reg") == KVIP_INVALID_RDMA_READ);
    CHECK(r.num("phys") == KVIP_INVALID_RDMA_READ);
}

TEST_CASE("kvip_physical_pages_take_descriptor_addresses_as_offsets_into_the_contiguous_buffer", "[kvipl][s3.4]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            dial(h, e, 1);
            fill_pattern(e.data, 9000, 44);
            KvipPostSend(e.vi, e.sendrecv(0, 0, 9000), e.desc_mh);
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("send", e.wait_done(false, &got, h));
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            // Six pages; the region is pages 4, 1 and 3 in that order.
            auto* pool = static_cast<std::uint8_t*>(std::aligned_alloc(4096, 6 * 4096));
            std::memset(pool, 0, 6 * 4096);
            KVIP_PHYS_ADDRESS pages[3] = {pool + 4 * 4096, pool + 1 * 4096, pool + 3 * 4096};
            KVIP_MEM_ATTRIBUTES ma{e.ptag, KVIP_FALSE, KVIP_FALSE};
            KVIP_MEM_HANDLE mh = 0;
            rec.num("reg", KvipRegisterPhysPages(e.nic, pages, 3, &ma, &mh));
            KVIP_DESCRIPTOR* d = e.desc(0);
            d->CS.SegCount = 1;
            d->DS[0].Local.Data.AddressBits = 0x300;  // offset 0x300 of the first page
            d->DS[0].Local.Handle = mh;
            d->DS[0].Local.Length = 9000;
            KvipPostRecv(e.vi, d, e.desc_mh);
            serve(h, e);
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("recv", e.wait_done(true, &got, h));
            rec.num("length", got ? got->CS.Length : 0);
            std::vector<std::uint8_t> want(9000), placed(9000);
            fill_pattern(want.data(), want.size(), 44);
            const std::size_t first = 4096 - 0x300;
            std::memcpy(placed.data(), pool + 4 * 4096 + 0x300, first);
            std::memcpy(placed.data() + first, pool + 1 * 4096, 4096);
            std::memcpy(placed.data() + first + 4096, pool + 3 * 4096, 9000 - first - 4096);
            rec.bytes("data", placed.data(), want.data(), want.size());
            // Nothing outside the three pages was touched.
            bool clean = true;
            for (int pg : {0, 2, 5})
                for (int i = 0; i < 4096; ++i) clean = clean && pool[pg * 4096 + i] == 0;
            for (int i = 0; i < 0x300; ++i) clean = clean && pool[4 * 4096 + i] == 0;
            rec.num("clean", clean);
            h.barrier("end");
            KvipDeregisterPhysPages(e.nic, mh);
            std::free(pool);
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("reg") == KVIP_SUCCESS);
    CHECK(r.num("send") == KVIP_SUCCESS);
    CHECK(r.num("recv") == KVIP_SUCCESS);
    CHECK(r.num("length") == 9000);
    CHECK(r.num("data.mismatch") == -1);
    CHECK(r.num("clean") == 1);
}
