// Shared receive queue engine: owns the SRQ contexts, keeps a few receive
// WQEs of each SRQ on chip by following the SRQ's WQE list in host memory,
// and hands one to a QP when a message needs it. It raises the SRQ limit
// event when the WQEs left fall below the limit the consumer armed.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/hca/contexts.hpp"
#include "model/hca/dma_engine.hpp"
#include "model/hca/hca_params.hpp"
#include "model/hca/transport_interfaces.hpp"
#include "model/sim/block.hpp"

namespace hcasim::hca {

// Decodes one receive WQE (control segment and up to max_sge data
// segments); QP rings and SRQs share the format. A WQE with more segments
// than max_sge is malformed: false, and out says so.
bool parse_recv_wqe(const std::uint8_t* wqe, std::uint32_t max_sge, RecvWork& out);

class SrqEngine final : public sim::Block, public SharedReceiveQueues {
public:
    // hca.control_program: this block's steps run on the adapter's one processor.
    void run_steps_on(sim::Timeline& processor) { m_parser.share(&processor, "SRQ WQE parse"); }
    SrqEngine(const sc_core::sc_module_name& name, const HcaParams& p, DmaEngine& dma, QpErrorHandler& events);

    // The SRQ context table (firmware writes it).
    SrqContext& install(std::uint32_t srqn);
    void remove(std::uint32_t srqn);
    SrqContext* find(std::uint32_t srqn) {
        return srqn < m_srqs.size() && m_srqs[srqn] && m_srqs[srqn]->valid ? m_srqs[srqn].get() : nullptr;
    }
    SrqContext* srq(std::uint32_t srqn) override { return find(srqn); }
    std::size_t live() const { return m_live; }

    // Gives qp the next WQE of srq if it holds none. demand: a message is
    // waiting for it, so the engine reads the doorbell record and fetches at
    // once if it has none on chip. Returns when the engine is done deciding;
    // the WQE itself is usable from its ready_at.
    sim::Tick take(QpContext& qp, SrqContext& srq, sim::Tick t, bool demand) override;
    // Keeps srq's on-chip WQEs topped up; a WQE was used (or the QP became
    // ready to receive).
    void top_up(SrqContext& srq, sim::Tick t) override;
    // Arms the limit event (0 disarms). The WQEs posted are re-read first,
    // so a limit above what is already posted fires at once.
    void arm(SrqContext& srq, std::uint32_t limit, sim::Tick t);

private:
    sim::Tick fetch(SrqContext& srq, sim::Tick t, bool demand);
    sim::Tick read_record(SrqContext& srq, sim::Tick t);
    void check_limit(SrqContext& srq, sim::Tick t);

    HcaParams m_p;
    DmaEngine& m_dma;
    QpErrorHandler& m_events;
    sim::Timeline m_parser;
    std::vector<std::unique_ptr<SrqContext>> m_srqs;
    std::size_t m_live = 0;
    std::vector<std::uint8_t> m_buf;
};

}  // namespace hcasim::hca
