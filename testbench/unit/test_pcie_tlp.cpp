// Unit tests for the PCIe transaction-layer arithmetic (model/pcie/tlp.hpp):
// how DMA requests are cut into TLPs and what each TLP costs on the wire,
// plus the serialisation time the host interface charges for them (in an
// isolated child: the host interface is a SystemC module).
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "testbench/system/split_mix.hpp"
#include "model/pcie/host_memory.hpp"
#include "model/pcie/pcie_host_interface.hpp"
#include "model/pcie/tlp.hpp"
#include "model/sim/config.hpp"
#include "model/sim/time.hpp"
#include "testbench/system/isolated.hpp"

using hcasim::pcie::Chunk;
using hcasim::pcie::TlpCosts;

namespace {

using Rng = hcasim::testbench::SplitMix64;

// The chunks tile [addr, addr + len) in order, without gaps or overlap.
void require_tiles(const std::vector<Chunk>& chunks, std::uint64_t addr, std::uint64_t len) {
    std::uint64_t at = addr;
    for (const Chunk& c : chunks) {
        REQUIRE(c.addr == at);
        REQUIRE(c.len > 0);
        at += c.len;
    }
    REQUIRE(at == addr + len);
}

bool crosses(const Chunk& c, std::uint64_t boundary) {
    return c.addr / boundary != (c.addr + c.len - 1) / boundary;
}

const std::uint32_t kSizes[] = {128, 256, 512, 1024, 2048, 4096};

}  // namespace

TEST_CASE("split_read_requests never crosses a 4 KiB boundary and never exceeds the max read request size",
          "[pcie][unit]") {
    Rng rng{1};
    for (int i = 0; i < 2000; ++i) {
        const std::uint32_t mrrs = kSizes[rng.below(6)];
        const std::uint64_t addr = 0x100000000ull + rng.below(3 * 4096);
        const std::uint64_t len = 1 + rng.below(i % 10 == 0 ? 300000 : 9000);
        const auto chunks = hcasim::pcie::split_read_requests(addr, len, mrrs);
        INFO("addr 0x" << std::hex << addr << std::dec << " len " << len << " mrrs " << mrrs);
        require_tiles(chunks, addr, len);
        for (const Chunk& c : chunks) {
            REQUIRE(c.len <= mrrs);
            REQUIRE_FALSE(crosses(c, 4096));
        }
    }
}

TEST_CASE("split_read_requests uses as few requests as the 4 KiB and MRRS rules allow", "[pcie][unit]") {
    // Aligned: exactly len / mrrs requests.
    CHECK(hcasim::pcie::split_read_requests(0x10000, 4096, 512).size() == 8);
    CHECK(hcasim::pcie::split_read_requests(0x10000, 4096, 4096).size() == 1);
    CHECK(hcasim::pcie::split_read_requests(0x10000, 1 << 20, 4096).size() == 256);
    // 100 bytes straddling a page: two requests even with a large MRRS.
    const auto two = hcasim::pcie::split_read_requests(0x10000 - 40, 100, 4096);
    REQUIRE(two.size() == 2);
    CHECK(two[0].len == 40);
    CHECK(two[1].addr == 0x10000);
    CHECK(two[1].len == 60);
    // Unaligned start, MRRS 512: the first request runs to the page end
    // only if that is within MRRS.
    const auto r = hcasim::pcie::split_read_requests(0x10000 + 4000, 1000, 512);
    REQUIRE(r.size() == 3);
    CHECK(r[0].len == 96);
    CHECK(r[1].len == 512);
    CHECK(r[2].len == 392);
    CHECK(hcasim::pcie::split_read_requests(0x10000, 0, 512).empty());
}

TEST_CASE("split_completions keeps every completion within MPS and ends all but the last on the RCB",
          "[pcie][unit]") {
    Rng rng{2};
    for (int i = 0; i < 3000; ++i) {
        const std::uint32_t rcb = rng.below(2) ? 64 : 128;
        const std::uint32_t mps = kSizes[rng.below(6)];
        const std::uint32_t mrrs = kSizes[rng.below(6)];
        const std::uint64_t addr = 0x200000000ull + rng.below(8192);
        const std::uint64_t len = 1 + rng.below(20000);
        // Completions answer one read request at a time.
        for (const Chunk& req : hcasim::pcie::split_read_requests(addr, len, mrrs)) {
            const auto cpl = hcasim::pcie::split_completions(req.addr, req.len, rcb, mps);
            INFO("request 0x" << std::hex << req.addr << std::dec << "+" << req.len << " rcb " << rcb << " mps "
                              << mps);
            require_tiles(cpl, req.addr, req.len);
            for (std::size_t k = 0; k < cpl.size(); ++k) {
                REQUIRE(cpl[k].len <= mps);
                if (k + 1 < cpl.size()) REQUIRE((cpl[k].addr + cpl[k].len) % rcb == 0);
                REQUIRE_FALSE(crosses(cpl[k], 4096));
            }
        }
    }
}

TEST_CASE("split_completions of an aligned 512 B request at MPS 256 gives two 256 B completions", "[pcie][unit]") {
    const auto c = hcasim::pcie::split_completions(0x10000, 512, 64, 256);
    REQUIRE(c.size() == 2);
    CHECK(c[0].len == 256);
    CHECK(c[1].len == 256);
    // Unaligned start: the first completion stops at an RCB boundary.
    const auto u = hcasim::pcie::split_completions(0x10010, 512, 64, 256);
    REQUIRE(u.size() == 3);
    CHECK(u[0].len == 240);
    CHECK(u[1].len == 256);
    CHECK(u[2].len == 16);
    const auto u128 = hcasim::pcie::split_completions(0x10010, 300, 128, 128);
    REQUIRE(u128.size() == 3);
    CHECK(u128[0].len == 112);
    CHECK(u128[1].len == 128);
    CHECK(u128[2].len == 60);
}

TEST_CASE("split_writes keeps every posted write within MPS and never crosses an MPS boundary", "[pcie][unit]") {
    Rng rng{3};
    for (int i = 0; i < 3000; ++i) {
        const std::uint32_t mps = kSizes[rng.below(6)];
        const std::uint64_t addr = 0x300000000ull + rng.below(3 * 4096);
        const std::uint64_t len = 1 + rng.below(i % 10 == 0 ? 200000 : 9000);
        const auto w = hcasim::pcie::split_writes(addr, len, mps);
        INFO("addr 0x" << std::hex << addr << std::dec << " len " << len << " mps " << mps);
        require_tiles(w, addr, len);
        for (const Chunk& c : w) {
            REQUIRE(c.len <= mps);
            REQUIRE_FALSE(crosses(c, mps));
            REQUIRE_FALSE(crosses(c, 4096));
        }
        // As few TLPs as the MPS-aligned grid allows.
        const std::uint64_t first_block = addr / mps;
        const std::uint64_t last_block = (addr + len - 1) / mps;
        REQUIRE(w.size() == last_block - first_block + 1);
    }
    CHECK(hcasim::pcie::split_writes(0x1000, 0, 256).empty());
}

TEST_CASE("TLP wire costs are 24 B per read request and 20 B plus payload per completion", "[pcie][unit]") {
    TlpCosts c;
    CHECK(c.read_request_wire() == 24);
    CHECK(c.completion_wire(0) == 20);
    CHECK(c.completion_wire(256) == 276);
    CHECK(c.write_wire(0) == 24);
    CHECK(c.write_wire(256) == 280);
    CHECK(c.write_wire(4096) == 4120);
    SECTION("ECRC adds 4 B to every TLP") {
        c.ecrc_bytes = 4;
        CHECK(c.read_request_wire() == 28);
        CHECK(c.completion_wire(256) == 280);
        CHECK(c.write_wire(256) == 284);
    }
}

TEST_CASE("a 4096 B write at MPS 256 is 16 TLPs and 4480 wire bytes", "[pcie][unit]") {
    const TlpCosts c;
    const auto w = hcasim::pcie::split_writes(0x7f0000010000ull, 4096, 256);
    REQUIRE(w.size() == 16);
    std::uint64_t wire = 0;
    for (const Chunk& k : w) wire += c.write_wire(k.len);
    CHECK(wire == 4480);
    // The same 4096 B read back at MRRS 512, RCB 64, MPS 256: 8 requests of
    // 24 B up and 16 completions of 276 B down.
    std::uint64_t up = 0, down = 0, completions = 0;
    for (const Chunk& r : hcasim::pcie::split_read_requests(0x7f0000010000ull, 4096, 512)) {
        up += c.read_request_wire();
        for (const Chunk& k : hcasim::pcie::split_completions(r.addr, r.len, 64, 256)) {
            down += c.completion_wire(k.len);
            ++completions;
        }
    }
    CHECK(up == 8 * 24);
    CHECK(completions == 16);
    CHECK(down == 16 * 276);
}

TEST_CASE("the PCIe host interface charges a 4096 B write 16 TLPs of serialisation time on the upstream link",
          "[pcie][unit][isolated]") {
    // Gen3: one link cycle moves one byte on each lane, at 8 GT/s x 128/130
    // / 8 = 0.985 GB/s per lane. Nothing else uses the upstream direction
    // here (the ACK and UpdateFC DLLPs for these TLPs go downstream).
    const auto r = hcasim::testbench::run_isolated([](std::ostream& os) {
        os.precision(17);
        for (int lanes : {8, 16}) {
            hcasim::sim::Config cfg;
            cfg.set("pcie.lanes", std::to_string(lanes));
            const auto p = hcasim::pcie::PcieParams::from(cfg);
            hcasim::pcie::HostMemory mem(90);
            // Modules of a design that never starts: left alive until the
            // child exits.
            auto* a = new hcasim::pcie::PcieHostInterface(("a" + std::to_string(lanes)).c_str(), p, mem);
            auto* b = new hcasim::pcie::PcieHostInterface(("b" + std::to_string(lanes)).c_str(), p, mem);
            // Timing only: no data moves through these calls.
            const auto t4096 = a->dma_write(0, 0x7f0000010000ull, 4096);
            const auto t256 = b->dma_write(0, 0x7f0000010000ull, 256);
            os << lanes << " " << a->upstream_busy() << " " << b->upstream_busy() << " " << t4096 << " " << t256
               << " " << a->link_clock().period_ps() << "\n";
        }
    });
    INFO(r.error);
    REQUIRE(r.ok);
    std::istringstream in(r.output);
    for (int k = 0; k < 2; ++k) {
        int lanes = 0;
        double busy4096 = 0, busy256 = 0, t4096 = 0, t256 = 0, period = 0;
        in >> lanes >> busy4096 >> busy256 >> t4096 >> t256 >> period;
        REQUIRE(in);
        INFO("Gen3 x" << lanes);
        CHECK(period == Approx(1e12 / (8e9 * 128.0 / 130.0 / 8.0)));
        // One TLP alone: ceil(280 / lanes) link cycles. Sixteen back to back:
        // at least their 4480 bytes over the lanes, at most a whole number
        // of cycles for each TLP.
        const double one = static_cast<double>((280 + lanes - 1) / lanes) * period;
        const double packed = static_cast<double>((4480 + lanes - 1) / lanes) * period;
        CHECK(busy256 == Approx(one).margin(2));
        CHECK(busy4096 >= packed - 2);
        CHECK(busy4096 <= 16 * one + 2);
        // The 15 extra TLPs are what the bigger write costs in time.
        CHECK(t4096 - t256 >= packed - one - 2);
        CHECK(t4096 - t256 <= 15 * one + 2);
    }
}

TEST_CASE("an edge of the PCIe Gen3 link clock is its own next edge so back-to-back TLPs leave no idle cycle",
          "[pcie][unit]") {
    // The Gen3 link clock has a period of 1015.625 ps; edges are rounded to
    // whole picoseconds. A reservation that starts where the previous one
    // ended must start on that same edge, not one cycle later.
    const hcasim::sim::Clock clk("pcie.link", 1e12 / (8e9 * 128.0 / 130.0 / 8.0));
    hcasim::sim::Tick t = 0;
    for (int tlp = 0; tlp < 16; ++tlp) {
        const hcasim::sim::Tick start = clk.edge_at_or_after(t);
        INFO("TLP " << tlp << " ready at " << t << " ps");
        CHECK(start == t);
        t = clk.after(start, 35);
    }
    CHECK(t == clk.cycles(16 * 35));
    // The same for the FDR 4x IB symbol clock (586.67 ps per byte per lane).
    const hcasim::sim::Clock ib("port.symbol", 1e12 / (14.0625e9 * 64.0 / 66.0 / 8.0));
    hcasim::sim::Tick u = 0;
    for (int pkt = 0; pkt < 16; ++pkt) {
        INFO("packet " << pkt << " ready at " << u << " ps");
        CHECK(ib.edge_at_or_after(u) == u);
        u = ib.after(u, 1031);
    }
}

TEST_CASE("a doorbell after a long DMA write burst reaches the adapter as fast as on an idle link",
          "[pcie][unit][isolated]") {
    // The ACK and UpdateFC DLLPs a 1 MiB upstream burst owes go downstream
    // while the burst is on the wire, in idle time: a doorbell written after
    // it is not charged for them.
    const auto r = hcasim::testbench::run_isolated([](std::ostream& os) {
        hcasim::sim::Config cfg;
        const auto p = hcasim::pcie::PcieParams::from(cfg);
        hcasim::pcie::HostMemory mem(90);
        auto* busy = new hcasim::pcie::PcieHostInterface("after_burst", p, mem);
        auto* idle = new hcasim::pcie::PcieHostInterface("idle", p, mem);
        const hcasim::sim::Tick burst_end = busy->dma_write(0, 0x100000000ull, 1u << 20);
        os << busy->mmio_write(burst_end, 8) - burst_end << " " << idle->mmio_write(burst_end, 8) - burst_end << " "
           << busy->counter("dllps_down") << "\n";
    });
    INFO(r.error);
    REQUIRE(r.ok);
    std::istringstream in(r.output);
    std::uint64_t after_burst = 0, on_idle = 0, dllps = 0;
    in >> after_burst >> on_idle >> dllps;
    REQUIRE(in);
    CHECK(dllps == 2048);  // 4096 TLPs: an ACK and an UpdateFC per 4
    CHECK(after_burst == on_idle);
}

TEST_CASE("doorbell and BlueFlame writes reach the adapter in the order the CPU wrote them",
          "[pcie][unit][isolated]") {
    // A read's completions occupy the downlink in a block; posted writes
    // issued around them must not reorder, whatever gaps the link has.
    const auto r = hcasim::testbench::run_isolated([](std::ostream& os) {
        hcasim::sim::Config cfg;
        const auto p = hcasim::pcie::PcieParams::from(cfg);
        hcasim::pcie::HostMemory mem(90);
        bool ordered = true;
        for (int k = 0; k < 200; ++k) {
            auto* link = new hcasim::pcie::PcieHostInterface(("l" + std::to_string(k)).c_str(), p, mem);
            // Two reads whose completion bursts (about 560 ns each) leave a
            // gap between them that sweeps through a few ns as k grows; a
            // two-chunk BlueFlame write enters the downlink during the first
            // burst, a doorbell 300 ns later, still during it. Only the gap
            // could let the short doorbell go before the BlueFlame chunks.
            link->dma_read(0, 0x100000000ull, 4096);
            link->dma_read(440000 + static_cast<hcasim::sim::Tick>(k) * 1000, 0x100010000ull, 4096);
            const hcasim::sim::Tick t = 300000;
            link->mmio_write(t, 64);
            const hcasim::sim::Tick blueflame = link->mmio_write(t, 64);
            const hcasim::sim::Tick doorbell = link->mmio_write(t + 300000, 8);
            if (doorbell < blueflame) ordered = false;
        }
        os << ordered << "\n";
    });
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.output == "1\n");
}

TEST_CASE("a burst of posted writes takes the link around a read request booked ahead of it",
          "[pcie][unit][isolated]") {
    // A 4 KiB DMA write (16 TLPs, about 570 ns on Gen3 x8) enters the
    // upstream queue before a read request that was booked first, for about
    // 420 ns. The link sends TLPs, not bursts: the writes use the time before
    // the request, let it through and go on, so they end at most the
    // request's wire time (24 B over 8 lanes: 3 cycles) and one TLP that did
    // not fit before it (280 B: 35 cycles) after the same write on an idle
    // link, not after waiting for a gap that holds all 16 (300 ns later).
    const auto r = hcasim::testbench::run_isolated([](std::ostream& os) {
        os.precision(17);
        hcasim::sim::Config cfg;
        const auto p = hcasim::pcie::PcieParams::from(cfg);
        hcasim::pcie::HostMemory mem(90);
        auto* shared = new hcasim::pcie::PcieHostInterface("shared", p, mem);
        auto* idle = new hcasim::pcie::PcieHostInterface("idle", p, mem);
        shared->dma_read(300000, 0x100000000ull, 64);
        const hcasim::sim::Tick around = shared->dma_write(0, 0x100010000ull, 4096);
        const hcasim::sim::Tick alone = idle->dma_write(0, 0x100010000ull, 4096);
        os << around - alone << " " << shared->link_clock().period_ps() << " "
           << shared->upstream_busy() - idle->upstream_busy() << "\n";
    });
    INFO(r.error);
    REQUIRE(r.ok);
    std::istringstream in(r.output);
    double later = 0, period = 0, extra_busy = 0;
    in >> later >> period >> extra_busy;
    REQUIRE(in);
    // The link was busy only for the request's own 3 cycles more.
    CHECK(extra_busy == Approx(3 * period).margin(2));
    CHECK(later >= 3 * period - 2);
    CHECK(later <= (3 + 35) * period + 2);
}
