// KVIPL addendum 3.5: posting, descriptor status write-back, RDMA and
// invalid descriptors.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvip_rdma_write_with_immediate_and_rdma_read_move_bytes_and_write_back_status", "[kvipl][s3.5]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            dial(h, e, 1);
            const auto raddr = h.get_value<std::uint64_t>("srv/addr");
            const auto rmh = h.get_value<KVIP_MEM_HANDLE>("srv/mh");
            fill_pattern(e.data, 10000, 5);
            KVIP_DESCRIPTOR* w = e.rdma(0, KVIP_CONTROL_OP_RDMAWRITE | KVIP_CONTROL_IMMEDIATE, 0, 10000, raddr + 100, rmh);
            w->CS.ImmediateData = 0xabcdef01;
            KvipPostSend(e.vi, w, e.desc_mh);
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("write", e.wait_done(false, &got, h));
            rec.num("write_status", got ? got->CS.Status : 0);
            h.barrier("written");
            KVIP_DESCRIPTOR* rd = e.rdma(1, KVIP_CONTROL_OP_RDMAREAD | KVIP_CONTROL_QFENCE, 200000, 7000, raddr + 50000, rmh);
            KvipPostSend(e.vi, rd, e.desc_mh);
            rec.num("read", e.wait_done(false, &got, h));
            rec.num("read_status", got ? got->CS.Status : 0);
            rec.num("read_length", got ? got->CS.Length : 0);
            std::vector<std::uint8_t> want(7000);
            fill_pattern(want.data(), want.size(), 9);
            rec.bytes("read_data", e.data + 200000, want.data(), want.size());
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            fill_pattern(e.data + 50000, 7000, 9);
            e.publish(h, "srv");
            KvipPostRecv(e.vi, e.sendrecv(0, 900000, 16), e.desc_mh);
            serve(h, e);
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("recv", e.wait_done(true, &got, h));
            rec.num("recv_status", got ? got->CS.Status : 0);
            rec.num("recv_imm", got ? got->CS.ImmediateData : 0);
            rec.num("recv_length", got ? got->CS.Length : 0);
            std::vector<std::uint8_t> want(10000);
            fill_pattern(want.data(), want.size(), 5);
            rec.bytes("write_data", e.data + 100, want.data(), want.size());
            h.barrier("written");
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("write") == KVIP_SUCCESS);
    CHECK(r.unum("write_status") == (KVIP_STATUS_DONE | KVIP_STATUS_OP_RDMA_WRITE | KVIP_STATUS_IMMEDIATE));
    CHECK(r.num("recv") == KVIP_SUCCESS);
    CHECK(r.unum("recv_status") == (KVIP_STATUS_DONE | KVIP_STATUS_OP_REMOTE_RDMA_WRITE | KVIP_STATUS_IMMEDIATE));
    CHECK(r.unum("recv_imm") == 0xabcdef01u);
    CHECK(r.num("recv_length") == 10000);
    CHECK(r.num("write_data.mismatch") == -1);
    CHECK(r.num("read") == KVIP_SUCCESS);
    CHECK(r.unum("read_status") == (KVIP_STATUS_DONE | KVIP_STATUS_OP_RDMA_READ));
    CHECK(r.num("read_length") == 7000);
    CHECK(r.num("read_data.mismatch") == -1);
}

namespace {

// Posts one bad send descriptor on a connected VI; records its status (or
// the asynchronous error it raised).
RunResult bad_descriptor(const std::function<KVIP_DESCRIPTOR*(ViEnd&, Host&)>& make, bool expect_async = false) {
    return run_pair(
        {{"hca.vi_max_segments", "4"}, {"hca.vi_max_transfer", "65536"}},
        [make, expect_async](Host& h, Record& rec) {
            ViOptions o;
            o.max_transfer = 65536;
            ViEnd e(o);
            dial(h, e, 1);
            KVIP_DESCRIPTOR* d = make(e, h);
            rec.num("post", KvipPostSend(e.vi, d, e.desc_mh));
            if (expect_async) {
                rec.num("wait", KeWaitForSingleObject(&e.err_event, 5));
                KVIP_ERROR_DESCRIPTOR ed{};
                KVIP_ERROR_DESCRIPTOR* p = &ed;
                rec.num("err_done", KvipErrorNotificationDone(e.nic, &p));
                rec.num("code", ed.ErrorCode);
                rec.num("resource", ed.ResourceCode);
            } else {
                KVIP_DESCRIPTOR* got = nullptr;
                rec.num("done", e.wait_done(false, &got, h));
                rec.num("status", got ? got->CS.Status : 0);
            }
            h.barrier("end");
        },
        [](Host& h, Record&) {
            ViOptions o;
            o.max_transfer = 65536;
            ViEnd e(o);
            KvipPostRecv(e.vi, e.sendrecv(0, 0, 65536), e.desc_mh);
            serve(h, e);
            h.barrier("end");
        });
}

}  // namespace

TEST_CASE("kvip_descriptor_with_more_segments_than_the_nic_allows_completes_with_format_error", "[kvipl][s3.5]") {
    const auto r = bad_descriptor([](ViEnd& e, Host&) {
        KVIP_DESCRIPTOR* d = e.sendrecv(0, 0, 8);
        d->CS.SegCount = 5;
        return d;
    });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("done") == KVIP_DESCRIPTOR_ERROR);
    CHECK((r.unum("status") & (KVIP_STATUS_DONE | KVIP_STATUS_FORMAT_ERROR)) == (KVIP_STATUS_DONE | KVIP_STATUS_FORMAT_ERROR));
}

TEST_CASE("kvip_descriptor_longer_than_max_transfer_size_completes_with_length_error", "[kvipl][s3.5]") {
    const auto r = bad_descriptor([](ViEnd& e, Host&) { return e.sendrecv(0, 0, 65537); });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("done") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("status") == (KVIP_STATUS_DONE | KVIP_STATUS_LENGTH_ERROR | KVIP_STATUS_OP_SEND));
}

TEST_CASE("kvip_descriptor_with_a_bad_data_handle_completes_with_protection_error", "[kvipl][s3.5]") {
    const auto r = bad_descriptor([](ViEnd& e, Host&) {
        KVIP_DESCRIPTOR* d = e.sendrecv(0, 0, 64);
        d->DS[0].Local.Handle = 0x12345;
        return d;
    });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("done") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("status") == (KVIP_STATUS_DONE | KVIP_STATUS_PROTECTION_ERROR | KVIP_STATUS_OP_SEND));
}

TEST_CASE("kvip_descriptor_with_data_under_another_ptag_completes_with_protection_error", "[kvipl][s3.5]") {
    const auto r = bad_descriptor([](ViEnd& e, Host&) {
        static std::uint8_t other[4096] __attribute__((aligned(4096)));
        KVIP_PROTECTION_HANDLE tag = nullptr;
        KvipCreatePtag(e.nic, &tag);
        KVIP_MEM_ATTRIBUTES ma{tag, KVIP_FALSE, KVIP_FALSE};
        KVIP_MEM_HANDLE mh = 0;
        KvipRegisterMem(e.nic, other, sizeof other, &ma, &mh);
        KVIP_DESCRIPTOR* d = e.sendrecv(0, 0, 64);
        d->DS[0].Local.Data.Address = other;
        d->DS[0].Local.Handle = mh;
        return d;
    });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("done") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("status") == (KVIP_STATUS_DONE | KVIP_STATUS_PROTECTION_ERROR | KVIP_STATUS_OP_SEND));
}

TEST_CASE("kvip_misaligned_descriptor_raises_a_post_descriptor_error", "[kvipl][s3.5][s3.8]") {
    const auto r = bad_descriptor(
        [](ViEnd& e, Host&) {
            auto* d = reinterpret_cast<KVIP_DESCRIPTOR*>(e.desc_area + 32);
            std::memset(d, 0, 64);
            d->CS.SegCount = 0;
            return d;
        },
        true);
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == KVIP_SUCCESS);
    CHECK(r.num("wait") == STATUS_SUCCESS);
    CHECK(r.num("err_done") == KVIP_SUCCESS);
    CHECK(r.num("code") == KVIP_ERROR_POST_DESC);
    CHECK(r.num("resource") == KVIP_RESOURCE_DESCRIPTOR);
}

TEST_CASE("kvip_descriptor_with_reserved_control_bits_or_rdma_without_address_segment_is_a_format_error",
          "[kvipl][s3.5]") {
    const auto reserved = bad_descriptor([](ViEnd& e, Host&) {
        KVIP_DESCRIPTOR* d = e.sendrecv(0, 0, 8);
        d->CS.Control |= 0x100;
        return d;
    });
    HCASIM_REQUIRE_RUN(reserved);
    CHECK(reserved.num("done") == KVIP_DESCRIPTOR_ERROR);
    CHECK((reserved.unum("status") & KVIP_STATUS_FORMAT_ERROR) != 0);
    const auto no_address = bad_descriptor([](ViEnd& e, Host&) {
        KVIP_DESCRIPTOR* d = e.desc(0);
        d->CS.Control = KVIP_CONTROL_OP_RDMAWRITE;
        d->CS.SegCount = 0;
        return d;
    });
    HCASIM_REQUIRE_RUN(no_address);
    CHECK(no_address.num("done") == KVIP_DESCRIPTOR_ERROR);
    CHECK((no_address.unum("status") & KVIP_STATUS_FORMAT_ERROR) != 0);
}

TEST_CASE("kvip_rdma_read_on_an_unreliable_vi_is_a_format_error", "[kvipl][s3.5]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViOptions o;
            o.reliability = KVIP_SERVICE_UNRELIABLE;
            ViEnd e(o);
            dial(h, e, 1);
            KvipPostSend(e.vi, e.rdma(0, KVIP_CONTROL_OP_RDMAREAD, 0, 64, 0x1000, 1), e.desc_mh);
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("done", e.wait_done(false, &got, h));
            rec.num("status", got ? got->CS.Status : 0);
            h.barrier("end");
        },
        [](Host& h, Record&) {
            ViOptions o;
            o.reliability = KVIP_SERVICE_UNRELIABLE;
            ViEnd e(o);
            serve(h, e);
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("done") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("status") == (KVIP_STATUS_DONE | KVIP_STATUS_FORMAT_ERROR | KVIP_STATUS_OP_RDMA_READ));
}

TEST_CASE("kvip_descriptor_posted_with_the_wrong_memory_handle_or_a_rewritten_next_is_a_post_descriptor_error",
          "[kvipl][s3.5][s3.8]") {
    for (const std::string how : {"handle", "next"}) {
        const auto r = run_pair(
            {},
            [](Host& h, Record&) {
                ViEnd e;
                dial(h, e, 1);
                h.barrier("end");
            },
            [how](Host& h, Record& rec) {
                ViEnd e;
                // Posted while idle: the adapter reads them once connected.
                KVIP_DESCRIPTOR* d0 = e.sendrecv(0, 0, 64);
                KVIP_DESCRIPTOR* d1 = e.sendrecv(1, 64, 64);
                if (how == "handle") {
                    KvipPostRecv(e.vi, d0, e.data_mh);  // the data region's handle, not the descriptors'
                } else {
                    KvipPostRecv(e.vi, d0, e.desc_mh);
                    KvipPostRecv(e.vi, d1, e.desc_mh);
                    d0->CS.Next.Address = e.desc_area + 5 * ViEnd::kSlot;  // changed after posting
                }
                serve(h, e);
                KEVENT& ev = e.err_event;
                rec.num("wait", KeWaitForSingleObject(&ev, 5));
                KVIP_ERROR_DESCRIPTOR ed{};
                KVIP_ERROR_DESCRIPTOR* p = &ed;
                rec.num("err_done", KvipErrorNotificationDone(e.nic, &p));
                rec.num("code", ed.ErrorCode);
                rec.num("desc", reinterpret_cast<std::uintptr_t>(ed.DescriptorPtr) ==
                                    reinterpret_cast<std::uintptr_t>(how == "handle" ? d0 : d1));
                KVIP_VI_STATE st{};
                KvipQueryVi(e.vi, &st, nullptr, nullptr, nullptr);
                rec.num("state", st);
                h.barrier("end");
            });
        INFO(how);
        HCASIM_REQUIRE_RUN(r);
        CHECK(r.num("wait") == STATUS_SUCCESS);
        CHECK(r.num("err_done") == KVIP_SUCCESS);
        CHECK(r.num("code") == KVIP_ERROR_POST_DESC);
        CHECK(r.num("desc") == 1);
        CHECK(r.num("state") == KVIP_STATE_ERROR);
    }
}
