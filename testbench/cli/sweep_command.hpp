// hcasim sweep and hcasim plot: commands that build no simulated system
// themselves. sweep runs a workload once per combination of parameter
// values, each run an hcasim process of its own (SystemC elaborates one
// design per process), spread over local processes and over the ranks of an
// MPI job; plot draws results with matplotlib (docs/sweeps-and-plots.md).
#pragma once

namespace hcasim::cli {

// Whether argv[1] is "sweep" or "plot".
bool is_sweep_or_plot(int argc, char** argv);
// The whole command line, argv[1] included; each returns the exit status.
int sweep_command(int argc, char** argv);
int plot_command(int argc, char** argv);

}  // namespace hcasim::cli
