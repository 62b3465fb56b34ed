// KVIPL data movement sweep: sizes from 1 byte to 1 MiB, several data
// segments at odd addresses, chains of descriptors posted back to back, on
// every reliability level; every byte compared.
#include "testbench/integration/kvipl_harness.hpp"

using namespace hcasim::test;

TEST_CASE("kvipl sends and rdma writes of every size and shape arrive byte for byte on every reliability level",
          "[kvipl][s3.5][data]") {
    const std::vector<std::uint32_t> sizes = {1, 63, 4096, 4097, 65539, 1 << 20};
    for (KVIP_RELIABILITY_LEVEL rel :
         {KVIP_SERVICE_UNRELIABLE, KVIP_SERVICE_RELIABLE_DELIVERY, KVIP_SERVICE_RELIABLE_RECEPTION}) {
        const auto r = run_pair(
            {},
            [rel, sizes](Host& h, Record& rec) {
                ViOptions o;
                o.reliability = rel;
                o.data_bytes = 4 << 20;
                ViEnd e(o);
                dial(h, e, 1);
                const auto raddr = h.get_value<std::uint64_t>("srv/addr");
                const auto rmh = h.get_value<KVIP_MEM_HANDLE>("srv/mh");
                fill_pattern(e.data, 3 << 20, 77);
                h.barrier("posted");
                // All sends back to back (the chain is followed through Next),
                // each gathered from three segments at odd offsets.
                for (std::size_t i = 0; i < sizes.size(); ++i) {
                    const std::uint32_t n = sizes[i];
                    KVIP_DESCRIPTOR* d = e.desc(i);
                    d->CS.Control = KVIP_CONTROL_OP_SENDRECV;
                    const std::uint32_t a = n / 3, b = n / 3, c = n - a - b;
                    const std::uint32_t lens[3] = {a, b, c};
                    std::size_t off = 3 + i * 7;
                    auto* seg = reinterpret_cast<KVIP_DATA_SEGMENT*>(&d->DS[0]);
                    for (int s = 0; s < 3; ++s) {
                        seg[s].Data.Address = e.data + off;
                        seg[s].Handle = e.data_mh;
                        seg[s].Length = lens[s];
                        off += lens[s];
                    }
                    d->CS.SegCount = 3;
                    // A pause: the adapter reads descriptor 2 before 3 is linked
                    // behind it and must read its Next field again.
                    if (i == 3) h.sleep(us(20));
                    KvipPostSend(e.vi, d, e.desc_mh);
                }
                int ok = 0;
                for (std::size_t i = 0; i < sizes.size(); ++i) {
                    KVIP_DESCRIPTOR* got = nullptr;
                    const KVIP_RETURN rc = e.wait_done(false, &got, h);
                    rec.num("send" + std::to_string(i) + ".status", got ? got->CS.Status : static_cast<KVIP_ULONG>(rc));
                    ok += rc == KVIP_SUCCESS && got == reinterpret_cast<KVIP_DESCRIPTOR*>(e.desc_area + i * ViEnd::kSlot) &&
                          got->CS.Length == sizes[i];
                }
                rec.num("sends_ok", ok);
                // RDMA writes of the same sizes to odd remote addresses.
                for (std::size_t i = 0; i < sizes.size(); ++i)
                    KvipPostSend(e.vi, e.rdma(16 + i, KVIP_CONTROL_OP_RDMAWRITE, 1 + i, sizes[i], raddr + (2 << 20) + 5 + i * 0x20000, rmh),
                                 e.desc_mh);
                ok = 0;
                for (std::size_t i = 0; i < sizes.size(); ++i) {
                    KVIP_DESCRIPTOR* got = nullptr;
                    ok += e.wait_done(false, &got, h) == KVIP_SUCCESS &&
                          got->CS.Status == (KVIP_STATUS_DONE | KVIP_STATUS_OP_RDMA_WRITE);
                }
                rec.num("writes_ok", ok);
                h.barrier("writes done");
                rec.num("rereads", static_cast<long long>(h.system().counter("node0.hca.descriptor_engine.next_rereads")));
                h.barrier("end");
            },
            [rel, sizes](Host& h, Record& rec) {
                ViOptions o;
                o.reliability = rel;
                o.data_bytes = 4 << 20;
                ViEnd e(o);
                e.publish(h, "srv");
                std::size_t off = 0;
                std::vector<std::size_t> at;
                for (std::size_t i = 0; i < sizes.size(); ++i) {
                    at.push_back(off);
                    // Room to spare, within MaxTransferSize.
                    KvipPostRecv(e.vi, e.sendrecv(i, off, std::min<std::uint32_t>(sizes[i] + 100, 1 << 20)), e.desc_mh);
                    off += sizes[i] + 4096;
                }
                serve(h, e);
                h.barrier("posted");
                std::vector<std::uint8_t> src(3 << 20);
                fill_pattern(src.data(), src.size(), 77);
                int ok = 0;
                for (std::size_t i = 0; i < sizes.size(); ++i) {
                    KVIP_DESCRIPTOR* got = nullptr;
                    const KVIP_RETURN rc = e.wait_done(true, &got, h);
                    rec.num("recv" + std::to_string(i) + ".status", got ? got->CS.Status : static_cast<KVIP_ULONG>(rc));
                    const bool done = rc == KVIP_SUCCESS && got->CS.Length == sizes[i];
                    ok += done && std::memcmp(e.data + at[i], src.data() + 3 + i * 7, sizes[i]) == 0;
                }
                rec.num("recvs_ok", ok);
                h.barrier("writes done");
                // Unreliable writes are done when they leave the sender: let them land.
                h.sleep(us(1000));
                int wok = 0;
                for (std::size_t i = 0; i < sizes.size(); ++i)
                    wok += std::memcmp(e.data + (2 << 20) + 5 + i * 0x20000, src.data() + 1 + i, sizes[i]) == 0;
                rec.num("written_ok", wok);
                h.barrier("end");
            });
        std::string statuses;
        for (int i = 0; i < 6; ++i)
            statuses += " send" + std::to_string(i) + "=" + r.get("send" + std::to_string(i) + ".status") + " recv" +
                        std::to_string(i) + "=" + r.get("recv" + std::to_string(i) + ".status");
        INFO("reliability " << rel << ": " << r.error << statuses);
        REQUIRE(r.ok);
        CHECK(r.num("sends_ok") == 6);
        CHECK(r.num("recvs_ok") == 6);
        CHECK(r.num("writes_ok") == 6);
        CHECK(r.num("written_ok") == 6);
        CHECK(r.num("rereads") > 0);  // some Next fields were linked after the adapter read them
    }
}
