// The adapter's PCIe host interface and the link to the root complex: MMIO
// posted writes (doorbells, BlueFlame) host -> adapter, DMA reads (non-posted
// requests up, completions down) and DMA writes (posted, up), MSI-X messages.
// Each direction of the link is one serialiser shared by every transfer, so
// DMA reads, payload writes, CQE writes and doorbells contend for it. Both
// directions keep the PCIe ordering rules (base spec 2.4.1, no relaxed or
// ID-based ordering): a posted write passes no posted write, and a read
// request or a completion passes no posted write issued before it.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "model/pcie/host_bus.hpp"
#include "model/pcie/host_memory.hpp"
#include "model/pcie/tlp.hpp"
#include "model/sim/block.hpp"
#include "model/sim/config.hpp"

namespace hcasim::pcie {

struct PcieParams {
    int gen = 3;
    int lanes = 8;
    std::uint32_t mps = 256;
    std::uint32_t mrrs = 512;
    std::uint32_t rcb = 64;
    std::uint32_t read_tags = 32;
    double core_clock_mhz = 250;
    std::uint32_t core_latency_cycles = 30;
    double root_complex_latency_ns = 185;
    std::uint32_t tlps_per_ack = 4;
    std::uint32_t tlps_per_fc_update = 4;
    TlpCosts costs;

    static PcieParams from(const sim::Config& c);
    // Bytes per second per lane after line encoding.
    double lane_bytes_per_s() const;
    double direction_bytes_per_s() const { return lane_bytes_per_s() * lanes; }
};

void declare_pcie_params(sim::ParamRegistry& r);

class PcieHostInterface : public sim::Block, public HostBus {
public:
    PcieHostInterface(const sc_core::sc_module_name& name, const PcieParams& p, HostMemory& memory);

    // HostBus (host_bus.hpp says what each call returns).
    sim::Block& block() override { return *this; }
    HostMemory& memory() override { return m_memory; }
    sim::Tick dma_read(sim::Tick t, std::uint64_t addr, std::uint64_t len) override;
    sim::Tick dma_write(sim::Tick t, std::uint64_t addr, std::uint64_t len) override;
    sim::Tick mmio_write(sim::Tick t, std::uint32_t len) override;
    sim::Tick msix(sim::Tick t) override;

    const PcieParams& params() const { return m_p; }
    // Forgets the ACK/UpdateFC DLLP accounting (TLPs counted towards the
    // next DLLP): for a testbench that runs independent cases on one link
    // and needs each to time as if it were the first.
    void forget_dllp_accounting() { m_tlps[0] = m_tlps[1] = 0; }
    // When the last posted write issued so far has left the adapter.
    sim::Tick posted_backlog_end() const override { return m_posted[kUp].last_end(); }
    double upstream_bytes_per_s() const override { return m_p.direction_bytes_per_s(); }
    std::uint32_t max_read_request() const override { return m_p.mrrs; }
    std::uint32_t max_write_request() const override { return m_p.mps; }
    sim::Tick read_slot(sim::Tick t) const override;
    const sim::Clock& link_clock() const { return m_link_clock; }
    sim::Tick upstream_busy() const { return m_line[kUp].busy_total(); }
    sim::Tick downstream_busy() const { return m_line[kDown].busy_total(); }

private:
    static constexpr int kUp = 0;    // adapter -> root complex
    static constexpr int kDown = 1;  // root complex -> adapter
    enum class Kind { Posted, NonPosted, Completion };

    // The posted writes of one direction that may still hold back a later
    // TLP: when each entered the transmit queue and when it has left the
    // link, in issue order (so their ends never decrease).
    class PostedOrder {
    public:
        sim::Tick last_end() const { return m_marks.empty() ? m_retired_end : m_marks.back().end; }
        // The earliest a TLP that enters the queue at t may start: after
        // every posted write that entered before it.
        sim::Tick floor_for(sim::Tick t) const;
        void add(sim::Tick enter, sim::Tick end);

    private:
        struct Mark {
            sim::Tick enter;
            sim::Tick end;
        };
        std::deque<Mark> m_marks;
        sim::Tick m_retired_end = 0;
    };

    // Where a burst of TLPs went on the link: its first TLP's start and end,
    // and its last TLP's end (m_tlp_end has every TLP's end).
    struct Burst {
        sim::Tick start;
        sim::Tick first_end;
        sim::Tick end;
    };
    Burst send_tlps(int dir, Kind kind, sim::Tick t, const std::uint32_t* wire, std::uint32_t count);
    void send_dllps(int dir, sim::Timeline::Slot during, std::uint32_t count);
    std::uint64_t wire_cycles(std::uint64_t bytes) const;

    PcieParams m_p;
    sim::Clock m_link_clock;   // one cycle moves one byte on each lane
    sim::Timeline m_line[2];   // kUp, kDown
    unsigned m_lane_shift = 0;  // log2 of the lanes
    sim::Tick m_core_latency;
    sim::Tick m_rc_latency;
    HostMemory& m_memory;
    std::deque<sim::Tick> m_tag_free;  // when each outstanding read tag returns
    // A burst being built, reused to spare allocations: each TLP's wire bytes,
    // the completions up to each request's last, and (from send_tlps) each
    // TLP's end on the link.
    std::vector<std::uint32_t> m_req_wire;
    std::vector<std::uint32_t> m_cpl_wire;
    std::vector<std::uint32_t> m_write_wire;
    std::vector<std::uint32_t> m_burst_cpl_end;
    std::vector<std::uint64_t> m_tlp_cycles;
    std::vector<sim::Tick> m_tlp_end;
    PostedOrder m_posted[2];
    std::uint32_t m_tlps[2] = {0, 0};  // TLPs sent up, down
    std::uint64_t* m_n_tlps[2] = {nullptr, nullptr};
    std::uint64_t* m_n_bytes[2] = {nullptr, nullptr};
    std::uint64_t* m_n_dllps[2] = {nullptr, nullptr};
    std::uint64_t* m_n_read_requests = nullptr;
    std::uint64_t* m_n_read_bytes = nullptr;
    std::uint64_t* m_n_write_bytes = nullptr;
};

}  // namespace hcasim::pcie
