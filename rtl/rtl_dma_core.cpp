// Verilator's headers first: included after SystemC they expect its names
// in the global namespace. They are not ours, so their warnings are off.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "Vhca_dma_engine_cosim.h"
#include "verilated.h"
#include "verilated_vcd_c.h"
#pragma GCC diagnostic pop

#include "rtl/rtl_dma_core.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <deque>
#include <stdexcept>

namespace hcasim::rtl {

namespace {

constexpr std::uint32_t kK = RtlDmaCore::kDataBytes;
constexpr std::uint64_t kAllLanes = kK >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << kK) - 1;
// Cycles without any handshake before the engine counts as hung.
constexpr std::uint64_t kWatchdogCycles = 1000000;

template <typename W>
void put_beat(W& wide, const std::uint8_t* bytes) {
    static_assert(sizeof(W) == kK, "the verilated data width is RtlDmaCore::kDataBytes");
    std::memcpy(&wide[0], bytes, kK);
}

template <typename W>
void get_beat(const W& wide, std::uint8_t* bytes) {
    static_assert(sizeof(W) == kK, "the verilated data width is RtlDmaCore::kDataBytes");
    std::memcpy(bytes, &wide[0], kK);
}

}  // namespace

struct RtlDmaCore::Impl {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<Vhca_dma_engine_cosim> top;
    std::unique_ptr<VerilatedVcdC> vcd;
    std::string vcd_path;
    bool gate = true;

    // A host read in flight: its bytes as host-aligned beats and when each
    // beat is on chip.
    struct Read {
        std::vector<std::uint8_t> beats;
        std::uint32_t n = 0;
        std::uint32_t next = 0;
        sim::Tick last_ready = 0;
        sim::Tick first_ready = 0;
        sim::Tick beat_ready(std::uint32_t k, const sim::Clock& c) const {
            const sim::Tick back = c.cycles(n - 1 - k);
            const sim::Tick t = last_ready > back ? last_ready - back : 0;
            return std::max(t, first_ready);
        }
    };
    std::deque<Read> reads;
    std::vector<Read> spare_reads;

    void dump(sim::Tick t) {
        if (vcd) vcd->dump(t);
    }
};

RtlDmaCore::RtlDmaCore(const sim::Clock& clock, std::uint32_t mrrs, std::uint32_t mps, std::string vcd_path,
                       bool gate_clock)
    : m_impl(std::make_unique<Impl>()), m_clock(clock) {
    Impl& m = *m_impl;
    m.gate = gate_clock;
    m.vcd_path = std::move(vcd_path);
    m.ctx = std::make_unique<VerilatedContext>();
    m.ctx->traceEverOn(!m.vcd_path.empty());
    m.top = std::make_unique<Vhca_dma_engine_cosim>(m.ctx.get(), "hca_dma_engine_cosim");
    auto* top = m.top.get();
    top->cfg_mrrs = static_cast<std::uint16_t>(mrrs);
    top->cfg_mps = static_cast<std::uint16_t>(mps);
    top->rst = 1;
    for (int i = 0; i < 2; ++i) {
        top->clk = 0;
        top->eval();
        top->clk = 1;
        top->eval();
    }
    // One clock out of reset: the skid buffers become ready.
    top->rst = 0;
    top->clk = 0;
    top->eval();
    top->clk = 1;
    top->eval();
    top->clk = 0;
    top->eval();
    if (!m.vcd_path.empty()) {
        m.vcd = std::make_unique<VerilatedVcdC>();
        top->trace(m.vcd.get(), 99);
        m.vcd->open(m.vcd_path.c_str());
        if (!m.vcd->isOpen()) throw std::runtime_error("cannot write VCD file '" + m.vcd_path + "'");
    }
}

RtlDmaCore::~RtlDmaCore() {
    if (m_impl->vcd) m_impl->vcd->close();
    m_impl->top->final();
}

sim::Tick RtlDmaCore::run(sim::Tick t, const CoreDescriptor* d, std::size_t n, HostPort& host,
                          std::vector<CoreStatus>& out) {
    Impl& m = *m_impl;
    Vhca_dma_engine_cosim* top = m.top.get();
    if (n == 0) return t;
    if (n > 256) throw std::invalid_argument("RTL DMA run of more than 256 descriptors (tags are 8 bits)");

    // Per tag: the descriptor and how far its packet-buffer side has got.
    std::array<int, 256> by_tag;
    by_tag.fill(-1);
    std::vector<std::uint64_t> buf_off(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        if (by_tag[d[i].tag] >= 0) throw std::invalid_argument("RTL DMA run with tag " + std::to_string(d[i].tag) + " twice");
        by_tag[d[i].tag] = static_cast<int>(i);
    }

    const sim::Tick start = m_clock.edge_at_or_after(std::max(t, m_free_at));
    // Edges by index: edge k is at m_clock.cycles(k), no division per cycle.
    auto index_of = [&](sim::Tick edge) {
        std::uint64_t k = static_cast<std::uint64_t>(std::llround(static_cast<double>(edge) / m_clock.period_ps()));
        while (m_clock.cycles(k) < edge) ++k;
        while (k > 0 && m_clock.cycles(k - 1) >= edge) --k;
        return k;
    };
    const std::uint64_t k_start = index_of(start);
    std::uint64_t k = k_start;
    std::uint64_t k_last = k_start;
    sim::Tick e = start;
    sim::Tick last_edge = start;
    std::size_t next_desc = 0;
    std::size_t reported = 0;
    std::uint64_t idle_cycles = 0;
    std::uint32_t max_inflight = 0;
    std::uint8_t beat[kK];
    // The write TLP being assembled from its beats.
    std::vector<std::uint8_t> tlp;
    std::uint64_t tlp_base = 0;
    std::uint32_t tlp_beat = 0;
    const sim::Tick half = m_clock.cycles(1) / 2;

    while (reported < n) {
        // Inputs for the edge at e, set while the clock is low.
        top->clk = 0;
        const bool desc_valid = next_desc < n;
        top->s_axis_desc_valid = desc_valid;
        if (desc_valid) {
            top->s_axis_desc_addr = d[next_desc].addr;
            top->s_axis_desc_len = d[next_desc].len;
            top->s_axis_desc_write = d[next_desc].write;
            top->s_axis_desc_tag = d[next_desc].tag;
        }
        Impl::Read* head = m.reads.empty() ? nullptr : &m.reads.front();
        const bool cpl_valid = head && head->beat_ready(head->next, m_clock) <= e;
        top->s_axis_rd_cpl_valid = cpl_valid;
        if (cpl_valid) put_beat(top->s_axis_rd_cpl_data, head->beats.data() + std::size_t(head->next) * kK);
        const int wr_i = top->wr_data_tag_valid ? by_tag[top->wr_data_tag] : -1;
        bool wr_valid = false;
        if (wr_i >= 0 && d[wr_i].write && buf_off[wr_i] < d[wr_i].len) {
            const std::uint64_t off = buf_off[wr_i];
            const std::uint64_t take = std::min<std::uint64_t>(kK, d[wr_i].len - off);
            std::memset(beat, 0, kK);
            std::memcpy(beat, d[wr_i].buffer + off, take);
            put_beat(top->s_axis_wr_data_data, beat);
            wr_valid = true;
        }
        top->s_axis_wr_data_valid = wr_valid;
        top->eval();

        const bool desc_fire = desc_valid && top->s_axis_desc_ready;
        const bool cpl_fire = cpl_valid && top->s_axis_rd_cpl_ready;
        const bool wr_data_fire = wr_valid && top->s_axis_wr_data_ready;

        // A quiet engine with no handshake due would not change at this
        // edge: stop its clock until the next completion beat is due.
        if (m.gate && top->quiet && !desc_fire && !cpl_fire && !wr_data_fire) {
            if (m.reads.empty())
                throw std::runtime_error("RTL DMA engine idle with " + std::to_string(n - reported) +
                                         " descriptor(s) unreported");
            const sim::Tick due = m_clock.edge_at_or_after(m.reads.front().beat_ready(m.reads.front().next, m_clock));
            k = std::max(index_of(due), k + 1);
            e = m_clock.cycles(k);
            continue;
        }

        m.dump(e - half);
        // Outputs the edge will take, sampled before it.
        const bool req_fire = top->m_axis_rd_req_valid;
        const std::uint64_t req_addr = top->m_axis_rd_req_addr;
        const std::uint32_t req_len = top->m_axis_rd_req_len;
        const bool rd_data_fire = top->m_axis_rd_data_valid;
        const bool wr_fire = top->m_axis_wr_valid;
        const bool status_fire = top->m_axis_status_valid;
        if (rd_data_fire) {
            const int i = by_tag[top->m_axis_rd_data_id];
            if (i < 0 || d[i].write) throw std::runtime_error("RTL DMA read data for unknown tag " + std::to_string(top->m_axis_rd_data_id));
            get_beat(top->m_axis_rd_data_data, beat);
            const std::uint64_t keep = top->m_axis_rd_data_keep;
            if (keep == kAllLanes && buf_off[i] + kK <= d[i].len) {
                std::memcpy(d[i].buffer + buf_off[i], beat, kK);
            } else for (std::uint32_t lane = 0; lane < kK; ++lane) {
                if (!(keep >> lane & 1)) continue;
                const std::uint64_t at = buf_off[i] + lane;
                if (at >= d[i].len) throw std::runtime_error("RTL DMA read data past the end of tag " + std::to_string(d[i].tag));
                d[i].buffer[at] = beat[lane];
            }
            buf_off[i] += kK;
        }
        if (wr_fire) {
            const std::uint64_t addr = top->m_axis_wr_addr;
            const std::uint32_t len = top->m_axis_wr_len;
            if (tlp_beat == 0) {
                tlp.assign(len, 0);
                tlp_base = addr & ~std::uint64_t(kK - 1);
            }
            get_beat(top->m_axis_wr_data, beat);
            const std::uint64_t keep = top->m_axis_wr_keep;
            const std::uint64_t beat_addr = tlp_base + std::uint64_t(tlp_beat) * kK;
            if (keep == kAllLanes && beat_addr >= addr && beat_addr + kK <= addr + len) {
                std::memcpy(tlp.data() + (beat_addr - addr), beat, kK);
            } else for (std::uint32_t lane = 0; lane < kK; ++lane) {
                if (!(keep >> lane & 1)) continue;
                const std::uint64_t a = tlp_base + std::uint64_t(tlp_beat) * kK + lane;
                if (a < addr || a >= addr + len) throw std::runtime_error("RTL DMA write byte outside its TLP");
                tlp[a - addr] = beat[lane];
            }
            ++tlp_beat;
        }
        const bool wr_last = wr_fire && top->m_axis_wr_last;
        const std::uint64_t wr_addr = top->m_axis_wr_addr;
        const std::uint32_t wr_len = top->m_axis_wr_len;
        const std::uint8_t st_tag = top->m_axis_status_tag;
        const std::uint8_t st_err = top->m_axis_status_error;

        top->clk = 1;
        top->eval();
        m.dump(e);
        ++m_stats.clocked_cycles;
        last_edge = e;
        k_last = k;
        max_inflight = std::max<std::uint32_t>(max_inflight, top->stat_rd_inflight);

        if (desc_fire) ++next_desc;
        if (cpl_fire && ++m.reads.front().next == m.reads.front().n) {
            m.spare_reads.push_back(std::move(m.reads.front()));
            m.reads.pop_front();
        }
        if (wr_data_fire) buf_off[wr_i] += kK;
        if (req_fire) {
            Impl::Read r;
            if (!m.spare_reads.empty()) {
                r = std::move(m.spare_reads.back());
                m.spare_reads.pop_back();
            }
            const std::uint32_t off = static_cast<std::uint32_t>(req_addr & (kK - 1));
            r.n = (off + req_len + kK - 1) / kK;
            r.next = 0;
            r.beats.assign(std::size_t(r.n) * kK, 0);
            r.last_ready = host.read_request(e, req_addr, req_len, r.beats.data() + off);
            // Beats arrive in request order, the first one edge after the request at the earliest.
            r.first_ready = m_clock.cycles(k + 1);
            if (!m.reads.empty()) r.first_ready = std::max(r.first_ready, m.reads.back().last_ready);
            r.last_ready = std::max(r.last_ready, r.first_ready);
            m.reads.push_back(std::move(r));
            ++m_stats.read_requests;
        }
        if (wr_last) {
            host.write_tlp(e, wr_addr, wr_len, tlp.data());
            tlp_beat = 0;
            ++m_stats.write_tlps;
        }
        if (status_fire) {
            out.push_back({st_tag, st_err, e});
            ++reported;
        }
        const bool progress = desc_fire || cpl_fire || wr_data_fire || req_fire || rd_data_fire || wr_fire || status_fire;
        idle_cycles = progress ? 0 : idle_cycles + 1;
        if (idle_cycles > kWatchdogCycles)
            throw std::runtime_error("RTL DMA engine made no progress for " + std::to_string(kWatchdogCycles) + " cycles");
        e = m_clock.cycles(++k);
    }
    if (!m.reads.empty()) throw std::runtime_error("RTL DMA engine reported every descriptor with host reads still in flight");
    // Leave the clock low for the next run.
    top->clk = 0;
    top->s_axis_desc_valid = 0;
    top->s_axis_rd_cpl_valid = 0;
    top->s_axis_wr_data_valid = 0;
    top->eval();
    if (m.vcd) m.vcd->flush();
    m_stats.elapsed_cycles += k_last - k_start + 1;
    m_stats.max_inflight = std::max(m_stats.max_inflight, max_inflight);
    m_last_max_inflight = max_inflight;
    m_free_at = m_clock.cycles(k_last + 1);
    return last_edge;
}

}  // namespace hcasim::rtl
