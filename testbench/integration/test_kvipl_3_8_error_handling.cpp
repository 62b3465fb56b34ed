// KVIPL addendum 3.8: asynchronous errors reach KvipErrorNotificationDone and
// the error wait object; the erroneous VI goes to the error state while the
// others keep working.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

namespace {

// Takes the next error descriptor, waiting up to limit_ms for it.
void next_error(Host&, ViEnd& e, Record& rec, const std::string& key, KVIP_ULONG limit_ms = 10) {
    rec.num(key + ".wait", KeWaitForSingleObject(&e.err_event, limit_ms));
    KVIP_ERROR_DESCRIPTOR ed{};
    KVIP_ERROR_DESCRIPTOR* p = &ed;
    rec.num(key + ".done", KvipErrorNotificationDone(e.nic, &p));
    rec.num(key + ".code", ed.ErrorCode);
    rec.num(key + ".resource", ed.ResourceCode);
    rec.num(key + ".vi", ed.ViHandle == e.vi);
    KVIP_VI_STATE st{};
    KvipQueryVi(e.vi, &st, nullptr, nullptr, nullptr);
    rec.num(key + ".state", st);
}

}  // namespace

TEST_CASE("kvip_rdma_write_into_memory_without_rdma_write_is_a_protection_error_on_both_sides_only_for_that_vi",
          "[kvipl][s3.8]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e, other;
            dial(h, e, 1);
            dial(h, other, 1, "two");
            KvipPostRecv(other.vi, other.sendrecv(1, 0, 4096), other.desc_mh);
            const auto raddr = h.get_value<std::uint64_t>("srv/addr");
            const auto rmh = h.get_value<KVIP_MEM_HANDLE>("srv/mh");
            KvipPostSend(e.vi, e.rdma(0, KVIP_CONTROL_OP_RDMAWRITE, 0, 100, raddr, rmh), e.desc_mh);
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("write", e.wait_done(false, &got, h));
            rec.num("write_status", got ? got->CS.Status : 0);
            h.barrier("failed");
            // The other VI still works.
            fill_pattern(other.data, 300, 3);
            KvipPostSend(other.vi, other.sendrecv(0, 0, 300), other.desc_mh);
            rec.num("other_send", other.wait_done(false, &got, h));
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViOptions o;
            o.rdma_write = true;  // the VI allows it, the memory does not
            ViEnd e(o), other;
            KVIP_MEM_ATTRIBUTES ma{e.ptag, KVIP_FALSE, KVIP_TRUE};
            KvipSetMemAttributes(e.nic, e.data, e.data_mh, &ma);
            e.publish(h, "srv");
            serve(h, e);
            KvipPostRecv(other.vi, other.sendrecv(0, 0, 4096), other.desc_mh);
            serve(h, other, "two");
            next_error(h, e, rec, "target");
            h.barrier("failed");
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("other_recv", other.wait_done(true, &got, h));
            std::vector<std::uint8_t> want(300);
            fill_pattern(want.data(), want.size(), 3);
            rec.bytes("other_data", other.data, want.data(), want.size());
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("write") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("write_status") == (KVIP_STATUS_DONE | KVIP_STATUS_RDMA_PROT_ERROR | KVIP_STATUS_OP_RDMA_WRITE));
    CHECK(r.num("target.wait") == STATUS_SUCCESS);
    CHECK(r.num("target.done") == KVIP_SUCCESS);
    CHECK(r.num("target.code") == KVIP_ERROR_RDMAW_PROT);
    CHECK(r.num("target.resource") == KVIP_RESOURCE_VI);
    CHECK(r.num("target.vi") == 1);
    CHECK(r.num("target.state") == KVIP_STATE_ERROR);
    CHECK(r.num("other_send") == KVIP_SUCCESS);
    CHECK(r.num("other_recv") == KVIP_SUCCESS);
    CHECK(r.num("other_data.mismatch") == -1);
}

TEST_CASE("kvip_rdma_read_of_memory_without_rdma_read_raises_rdmar_prot_at_the_target", "[kvipl][s3.8]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViEnd e;
            dial(h, e, 1);
            const auto raddr = h.get_value<std::uint64_t>("srv/addr");
            const auto rmh = h.get_value<KVIP_MEM_HANDLE>("srv/mh");
            KvipPostSend(e.vi, e.rdma(0, KVIP_CONTROL_OP_RDMAREAD, 0, 100, raddr, rmh), e.desc_mh);
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("read", e.wait_done(false, &got, h));
            rec.num("read_status", got ? got->CS.Status : 0);
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            KVIP_MEM_ATTRIBUTES ma{e.ptag, KVIP_TRUE, KVIP_FALSE};
            KvipSetMemAttributes(e.nic, e.data, e.data_mh, &ma);
            e.publish(h, "srv");
            serve(h, e);
            next_error(h, e, rec, "target");
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("read") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("read_status") == (KVIP_STATUS_DONE | KVIP_STATUS_RDMA_PROT_ERROR | KVIP_STATUS_OP_RDMA_READ));
    CHECK(r.num("target.code") == KVIP_ERROR_RDMAR_PROT);
    CHECK(r.num("target.state") == KVIP_STATE_ERROR);
}

// The target answers an RDMA read of 64 KiB over many packets; the RDMA
// write posted right behind it, into memory the target does not let be
// written, fails there while the read's answer is still going out. The
// answer goes first, then the NAK: the read completes with every byte and
// the write with the protection error.
TEST_CASE("kvip_an_rdma_write_that_fails_behind_an_rdma_read_still_being_answered_leaves_the_read_its_data",
          "[kvipl][s3.8][errors]") {
    constexpr std::size_t kRead = 64 * 1024;
    const auto r = run_pair(
        {},
        [](Host& h, Record& rec) {
            ViOptions o;
            o.data_bytes = 2 * kRead;
            ViEnd e(o);
            dial(h, e, 1);
            const auto raddr = h.get_value<std::uint64_t>("srv/addr");
            const auto rmh = h.get_value<KVIP_MEM_HANDLE>("srv/mh");
            KvipPostSend(e.vi, e.rdma(0, KVIP_CONTROL_OP_RDMAREAD, 0, kRead, raddr, rmh), e.desc_mh);
            KvipPostSend(e.vi, e.rdma(1, KVIP_CONTROL_OP_RDMAWRITE, kRead, 100, raddr + kRead, rmh), e.desc_mh);
            KVIP_DESCRIPTOR* got = nullptr;
            rec.num("read", e.wait_done(false, &got, h));
            rec.num("read_status", got ? got->CS.Status : 0);
            std::vector<std::uint8_t> want(kRead);
            fill_pattern(want.data(), want.size(), 8);
            rec.bytes("read_data", e.data, want.data(), want.size());
            rec.num("write", e.wait_done(false, &got, h));
            rec.num("write_status", got ? got->CS.Status : 0);
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViOptions o;
            o.data_bytes = 2 * kRead;
            ViEnd e(o);
            fill_pattern(e.data, kRead, 8);
            KVIP_MEM_ATTRIBUTES ma{e.ptag, KVIP_FALSE, KVIP_TRUE};  // read, but not written
            KvipSetMemAttributes(e.nic, e.data, e.data_mh, &ma);
            e.publish(h, "srv");
            serve(h, e);
            next_error(h, e, rec, "target", 50);
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("read") == KVIP_SUCCESS);
    CHECK(r.unum("read_status") == (KVIP_STATUS_DONE | KVIP_STATUS_OP_RDMA_READ));
    CHECK(r.num("read_data.mismatch") == -1);
    CHECK(r.num("write") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("write_status") == (KVIP_STATUS_DONE | KVIP_STATUS_RDMA_PROT_ERROR | KVIP_STATUS_OP_RDMA_WRITE));
    CHECK(r.num("target.code") == KVIP_ERROR_RDMAW_PROT);
    CHECK(r.num("target.state") == KVIP_STATE_ERROR);
}

TEST_CASE("kvip_send_to_an_empty_receive_queue_breaks_a_reliable_vi_but_not_an_unreliable_one", "[kvipl][s3.8]") {
    for (KVIP_RELIABILITY_LEVEL rel : {KVIP_SERVICE_RELIABLE_DELIVERY, KVIP_SERVICE_UNRELIABLE}) {
        const auto r = run_pair(
            {},
            [rel](Host& h, Record& rec) {
                ViOptions o;
                o.reliability = rel;
                ViEnd e(o);
                dial(h, e, 1);
                KvipPostSend(e.vi, e.sendrecv(0, 0, 100), e.desc_mh);
                KVIP_DESCRIPTOR* got = nullptr;
                rec.num("send", e.wait_done(false, &got, h));
                rec.num("send_status", got ? got->CS.Status : 0);
                h.barrier("second");
                if (rel == KVIP_SERVICE_UNRELIABLE) {
                    fill_pattern(e.data, 100, 8);
                    KvipPostSend(e.vi, e.sendrecv(1, 0, 100), e.desc_mh);
                    e.wait_done(false, &got, h);
                }
                h.barrier("end");
            },
            [rel](Host& h, Record& rec) {
                ViOptions o;
                o.reliability = rel;
                ViEnd e(o);
                serve(h, e);
                next_error(h, e, rec, "target");
                KvipPostRecv(e.vi, e.sendrecv(0, 0, 4096), e.desc_mh);
                h.barrier("second");
                if (rel == KVIP_SERVICE_UNRELIABLE) {
                    KVIP_DESCRIPTOR* got = nullptr;
                    rec.num("second_recv", e.wait_done(true, &got, h));
                    std::vector<std::uint8_t> want(100);
                    fill_pattern(want.data(), want.size(), 8);
                    rec.bytes("second_data", e.data, want.data(), want.size());
                }
                h.barrier("end");
            });
        INFO("reliability " << rel);
        HCASIM_REQUIRE_RUN(r);
        CHECK(r.num("target.code") == KVIP_ERROR_RECVQ_EMPTY);
        if (rel == KVIP_SERVICE_UNRELIABLE) {
            CHECK(r.num("send") == KVIP_SUCCESS);
            CHECK(r.num("target.state") == KVIP_STATE_CONNECTED);
            CHECK(r.num("second_recv") == KVIP_SUCCESS);
            CHECK(r.num("second_data.mismatch") == -1);
        } else {
            CHECK(r.num("send") == KVIP_DESCRIPTOR_ERROR);
            CHECK(r.unum("send_status") == (KVIP_STATUS_DONE | KVIP_STATUS_REMOTE_DESC_ERROR | KVIP_STATUS_OP_SEND));
            CHECK(r.num("target.state") == KVIP_STATE_ERROR);
        }
    }
}

TEST_CASE("kvip_posting_more_descriptors_than_the_queue_holds_is_a_vi_overrun", "[kvipl][s3.8]") {
    const auto r = run_programs({{"hca.vi_max_descriptors", "4"}}, {[](Host& h, Record& rec) {
        ViEnd e;
        for (int i = 0; i < 5; ++i) KvipPostRecv(e.vi, e.sendrecv(static_cast<std::size_t>(i), 0, 64), e.desc_mh);
        next_error(h, e, rec, "overrun");
        KVIP_DESCRIPTOR* got = nullptr;
        rec.num("flushed", e.wait_done(true, &got, h));
        rec.num("flushed_status", got ? got->CS.Status : 0);
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("overrun.code") == KVIP_ERROR_VI_OVERRUN);
    CHECK(r.num("overrun.state") == KVIP_STATE_ERROR);
    CHECK(r.num("flushed") == KVIP_DESCRIPTOR_ERROR);
    CHECK((r.unum("flushed_status") & KVIP_STATUS_DESC_FLUSHED_ERROR) != 0);
}

TEST_CASE("kvip_deregistering_a_fetched_descriptor_gives_a_completion_protection_error", "[kvipl][s3.8]") {
    const auto r = run_pair(
        {},
        [](Host& h, Record&) {
            ViEnd e;
            dial(h, e, 1);
            h.barrier("deregistered");
            KvipPostSend(e.vi, e.sendrecv(0, 0, 100), e.desc_mh);
            KVIP_DESCRIPTOR* got = nullptr;
            e.wait_done(false, &got, h);
            h.barrier("end");
        },
        [](Host& h, Record& rec) {
            ViEnd e;
            KvipPostRecv(e.vi, e.sendrecv(0, 0, 4096), e.desc_mh);
            serve(h, e);
            h.sleep(us(50));  // the adapter has fetched the receive descriptor
            rec.num("dereg", KvipDeregisterMem(e.nic, e.desc_area, e.desc_mh));
            h.barrier("deregistered");
            next_error(h, e, rec, "target");
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("dereg") == KVIP_SUCCESS);
    CHECK(r.num("target.code") == KVIP_ERROR_COMP_PROT);
    CHECK(r.num("target.resource") == KVIP_RESOURCE_DESCRIPTOR);
    CHECK(r.num("target.state") == KVIP_STATE_ERROR);
}

TEST_CASE("kvip_catastrophic_adapter_failure_reaches_every_nic_handle", "[kvipl][s3.8]") {
    const auto r = run_programs({}, {[](Host& h, Record& rec) {
        ViEnd a, b;
        rec.num("rearm", KvipRearmErrorNotification(a.nic));
        h.node().hca().fail_catastrophically(h.now());
        for (ViEnd* e : {&a, &b}) {
            const std::string k = e == &a ? "a" : "b";
            rec.num(k + ".wait", KeWaitForSingleObject(&e->err_event, 1));
            KVIP_ERROR_DESCRIPTOR ed{};
            KVIP_ERROR_DESCRIPTOR* p = &ed;
            rec.num(k + ".done", KvipErrorNotificationDone(e->nic, &p));
            rec.num(k + ".code", ed.ErrorCode);
            rec.num(k + ".resource", ed.ResourceCode);
            rec.num(k + ".nic", ed.NicHandle == e->nic);
            KVIP_VI_STATE st{};
            KvipQueryVi(e->vi, &st, nullptr, nullptr, nullptr);
            rec.num(k + ".state", st);
        }
    }});
    HCASIM_REQUIRE_RUN(r);
    for (const std::string k : {"a", "b"}) {
        CHECK(r.num(k + ".wait") == STATUS_SUCCESS);
        CHECK(r.num(k + ".done") == KVIP_SUCCESS);
        CHECK(r.num(k + ".code") == KVIP_ERROR_CATASTROPHIC);
        CHECK(r.num(k + ".resource") == KVIP_RESOURCE_NIC);
        CHECK(r.num(k + ".nic") == 1);
        CHECK(r.num(k + ".state") == KVIP_STATE_ERROR);
    }
}

TEST_CASE("kvip_error_notification_done_checks_its_buffer_and_rearm_rearms_the_wait_object", "[kvipl][s3.8]") {
    const auto r = run_programs({{"hca.vi_max_descriptors", "1"}}, {[](Host& h, Record& rec) {
        ViEnd e;
        rec.num("null", KvipErrorNotificationDone(e.nic, nullptr));
        KVIP_ERROR_DESCRIPTOR* none = nullptr;
        rec.num("no_buffer", KvipErrorNotificationDone(e.nic, &none));
        KVIP_ERROR_DESCRIPTOR ed{};
        KVIP_ERROR_DESCRIPTOR* p = &ed;
        rec.num("empty", KvipErrorNotificationDone(e.nic, &p));
        rec.num("empty_null", p == nullptr);
        // First error: signaled. Cleared by the consumer, not rearmed: a second
        // error does not signal; after the rearm the third does.
        KvipPostRecv(e.vi, e.sendrecv(0, 0, 64), e.desc_mh);
        KvipPostRecv(e.vi, e.sendrecv(1, 0, 64), e.desc_mh);
        rec.num("first", KeWaitForSingleObject(&e.err_event, 1));
        KeClearEvent(&e.err_event);
        auto overrun_another_vi = [&](std::size_t slot) {
            KVIP_VI_ATTRIBUTES a = e.attributes();
            KVIP_VI_HANDLE v = nullptr;
            KvipCreateVi(e.nic, &a, nullptr, nullptr, nullptr, nullptr, &v);
            KvipPostRecv(v, e.sendrecv(slot, 0, 64), e.desc_mh);
            KvipPostRecv(v, e.sendrecv(slot + 1, 0, 64), e.desc_mh);
        };
        overrun_another_vi(2);
        h.sleep(us(100));
        rec.num("not_rearmed", KeReadStateEvent(&e.err_event));
        rec.num("rearm", KvipRearmErrorNotification(e.nic));
        overrun_another_vi(4);
        rec.num("third", KeWaitForSingleObject(&e.err_event, 1));
        int n = 0;
        for (p = &ed; KvipErrorNotificationDone(e.nic, &p) == KVIP_SUCCESS; p = &ed) ++n;
        rec.num("errors", n);
    }});
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("null") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("no_buffer") == KVIP_INVALID_PARAMETER);
    CHECK(r.num("empty") == KVIP_NOT_DONE);
    CHECK(r.num("empty_null") == 1);
    CHECK(r.num("first") == STATUS_SUCCESS);
    CHECK(r.num("not_rearmed") == 0);
    CHECK(r.num("rearm") == KVIP_SUCCESS);
    CHECK(r.num("third") == STATUS_SUCCESS);
    CHECK(r.num("errors") == 3);
}

// The link under a reliable VI goes down for 1 s, longer than the VI's
// retries last (local ACK timeout 67 ms, 7 retries: eight timeouts, 537 ms):
// the first RDMA write completes with a transport error and the rest are
// flushed, the VI is in the error state, and Connection Lost is reported
// (VI Architecture: the connection on a VI was lost). Once the link is back,
// KvipDisconnect takes the VI back to Idle, and the peer, told by it, loses
// its connection too. Nothing reached the peer's memory.
TEST_CASE("kvip_a_reliable_vi_whose_link_stays_down_past_its_retries_reports_the_connection_lost", "[kvipl][s3.8][outage]") {
    constexpr std::uint64_t kDownUs = 5000, kOutageUs = 1000000;
    constexpr int kWrites = 4;
    constexpr KVIP_ULONG kLen = 4096;
    const auto r = run_pair(
        {{"fault.link_down", "node0.port@" + std::to_string(kDownUs) + "us+" + std::to_string(kOutageUs) + "us"}},
        [&](Host& h, Record& rec) {
            ViEnd e;
            dial(h, e, 1);
            const auto raddr = h.get_value<std::uint64_t>("srv/addr");
            const auto rmh = h.get_value<KVIP_MEM_HANDLE>("srv/mh");
            fill_pattern(e.data, kWrites * kLen, 41);
            h.sleep(us(static_cast<double>(kDownUs + 10)) - h.now());
            const auto posted = h.now();
            for (int i = 0; i < kWrites; ++i)
                KvipPostSend(e.vi, e.rdma(static_cast<std::size_t>(i), KVIP_CONTROL_OP_RDMAWRITE, i * kLen, kLen, raddr + i * kLen, rmh),
                             e.desc_mh);
            for (int i = 0; i < kWrites; ++i) {
                KVIP_DESCRIPTOR* got = nullptr;
                const std::string k = "w" + std::to_string(i);
                rec.num(k + ".rc", e.wait_done(false, &got, h, 2e6));
                rec.num(k + ".status", got ? got->CS.Status : 0);
                if (i == 0) rec.num("failed_after_us", static_cast<double>(h.now() - posted) / 1e6);
            }
            next_error(h, e, rec, "lost");
            // Back up: disconnect, and the VI is idle again.
            h.sleep(us(static_cast<double>(kDownUs + kOutageUs + 1000)) - h.now());
            rec.num("disconnect", KvipDisconnect(e.vi));
            KVIP_VI_STATE st{};
            KvipQueryVi(e.vi, &st, nullptr, nullptr, nullptr);
            rec.num("idle", st);
            h.barrier("end");
        },
        [&](Host& h, Record& rec) {
            ViEnd e;
            fill_pattern(e.data, kWrites * kLen, 42);
            e.publish(h, "srv");
            serve(h, e);
            next_error(h, e, rec, "peer", 2000);
            rec.num("untouched", first_mismatch(e.data, pattern(kWrites * kLen, 42).data(), kWrites * kLen));
            h.barrier("end");
        });
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("w0.rc") == KVIP_DESCRIPTOR_ERROR);
    CHECK(r.unum("w0.status") == (KVIP_STATUS_DONE | KVIP_STATUS_TRANSPORT_ERROR | KVIP_STATUS_OP_RDMA_WRITE));
    for (int i = 1; i < kWrites; ++i) {
        CHECK(r.num("w" + std::to_string(i) + ".rc") == KVIP_DESCRIPTOR_ERROR);
        CHECK((r.unum("w" + std::to_string(i) + ".status") & ~KVIP_STATUS_OP_MASK) ==
              (KVIP_STATUS_DONE | KVIP_STATUS_DESC_FLUSHED_ERROR));
    }
    // Eight local ACK timeouts of 67.1 ms.
    CHECK(r.num("failed_after_us") >= 8 * 67108);
    CHECK(r.num("failed_after_us") < 9 * 67108);
    CHECK(r.num("lost.wait") == STATUS_SUCCESS);
    CHECK(r.num("lost.code") == KVIP_ERROR_CONN_LOST);
    CHECK(r.num("lost.resource") == KVIP_RESOURCE_VI);
    CHECK(r.num("lost.vi") == 1);
    CHECK(r.num("lost.state") == KVIP_STATE_ERROR);
    CHECK(r.num("disconnect") == KVIP_SUCCESS);
    CHECK(r.num("idle") == KVIP_STATE_IDLE);
    CHECK(r.num("peer.wait") == STATUS_SUCCESS);
    CHECK(r.num("peer.code") == KVIP_ERROR_CONN_LOST);
    CHECK(r.num("peer.state") == KVIP_STATE_ERROR);
    CHECK(r.num("untouched") == -1);
}
