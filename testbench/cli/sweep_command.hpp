// hcasim sweep: runs a workload once per combination of parameter values,
// each run an hcasim process of its own (SystemC elaborates one design per
// process), spread over local processes and over the ranks of an MPI job
// (docs/sweeps-and-plots.md). It builds no simulated system itself.
#pragma once

namespace hcasim::cli {

// Whether argv[1] is "sweep".
bool is_sweep(int argc, char** argv);
// The whole command line, argv[1] included; returns the exit status.
int sweep_command(int argc, char** argv);

}  // namespace hcasim::cli
