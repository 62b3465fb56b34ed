// The embedded processor of an adapter whose steps are a control program
// (hca.control_program): a LANai-class VI NIC, where one RISC runs the
// doorbell, descriptor, translation, DMA-setup, packet and completion work
// and DMA controllers move the data. Every block's per-step cycles are
// booked on its one timeline, so the steps of different messages and of the
// two directions wait for each other, where a hardware pipeline runs them
// side by side.
#pragma once

#include <string>

#include "model/sim/time.hpp"
#include "model/sim/tracer.hpp"

namespace hcasim::hca {

class ControlProcessor {
public:
    // track: its trace track ("node0.hca.control_processor"), a slice per step.
    ControlProcessor(double core_clock_mhz, std::string track)
        : m_clock(sim::Clock::from_mhz("hca.core", core_clock_mhz)), m_program(&m_clock), m_track(std::move(track)) {
        m_program.on_serve([this](const char* step, const sim::Timeline::Slot& s) {
            if (sim::tracer().on()) sim::tracer().slice(m_track, step, s.start, s.end, {}, sim::tracer().current_flow());
        });
    }
    ControlProcessor(const ControlProcessor&) = delete;
    ControlProcessor& operator=(const ControlProcessor&) = delete;

    // The timeline the blocks' steps share.
    sim::Timeline& program() { return m_program; }
    // Simulated time the processor has been busy.
    sim::Tick busy() const { return m_program.busy_total(); }

private:
    sim::Clock m_clock;
    sim::Timeline m_program;
    std::string m_track;
};

}  // namespace hcasim::hca
