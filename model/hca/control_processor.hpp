// The embedded processor of an adapter whose steps are a control program
// (hca.control_program): a LANai-class VI NIC, where one RISC runs the
// doorbell, descriptor, translation, DMA-setup, packet and completion work
// and DMA controllers move the data. Every block's per-step cycles are
// booked on its one timeline, so the steps of different messages and of the
// two directions wait for each other, where a hardware pipeline runs them
// side by side.
#pragma once

#include "model/sim/time.hpp"

namespace hcasim::hca {

class ControlProcessor {
public:
    explicit ControlProcessor(double core_clock_mhz)
        : m_clock(sim::Clock::from_mhz("hca.core", core_clock_mhz)), m_program(&m_clock) {}
    ControlProcessor(const ControlProcessor&) = delete;
    ControlProcessor& operator=(const ControlProcessor&) = delete;

    // The timeline the blocks' steps share.
    sim::Timeline& program() { return m_program; }
    // Simulated time the processor has been busy.
    sim::Tick busy() const { return m_program.busy_total(); }

private:
    sim::Clock m_clock;
    sim::Timeline m_program;
};

}  // namespace hcasim::hca
