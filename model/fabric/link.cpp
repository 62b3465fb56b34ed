#include "model/fabric/link.hpp"

namespace hcasim::fabric {

void declare_link_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    r.add({"link.cable_m", K::Real, "m", "1", 0, 10000, {}, "cable length of every link",
           "short copper cable between back-to-back hosts or host and switch"});
    r.add({"link.ns_per_m", K::Real, "ns/m", "5", 1, 10, {}, "signal propagation delay per metre",
           "about 5 ns per metre (calibration-facts: cable propagation)"});
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 40, "fabric.link", declare_link_params};

}  // namespace hcasim::fabric
