#include "model/sim/block.hpp"

namespace hcasim::sim {

Block::Block(const sc_core::sc_module_name& name, Clock clock)
    : sc_core::sc_module(name), m_clock(std::move(clock)), m_path(this->name()), m_scheduler(ActionScheduler::current()) {}

}  // namespace hcasim::sim
