// The ranks of an MPI job, for hcasim sweep under mpirun. A process that
// mpirun did not start (or an hcasim built without MPI) is a world of one
// rank and never calls into MPI, so plain hcasim does not touch it.
#pragma once

#include <string>
#include <vector>

namespace hcasim::cli {

class MpiWorld {
public:
    // Calls MPI_Init when the launcher's environment says this process is
    // one rank of several (Open MPI's OMPI_COMM_WORLD_SIZE, or PMI_SIZE).
    // Throws std::runtime_error if it is, but hcasim was built without MPI.
    MpiWorld(int& argc, char**& argv);
    ~MpiWorld();
    MpiWorld(const MpiWorld&) = delete;
    MpiWorld& operator=(const MpiWorld&) = delete;

    int rank() const { return m_rank; }
    int size() const { return m_size; }

    // Every rank's text, in rank order, on rank 0; an empty list on the others.
    std::vector<std::string> gather_to_root(const std::string& mine) const;
    // Rank 0's value, on every rank.
    int broadcast_from_root(int value) const;
    // Returns status, except in a process that called MPI_Init: that one
    // calls MPI_Finalize and ends with _exit(status), its output flushed.
    // Open MPI leaves allocations of components it has already unloaded,
    // which the sanitizer build's exit-time leak check would report as
    // unattributable leaks of every rank.
    int finish(int status);
    // Ends every rank at once, for an error after which the ranks could not
    // meet again (one stuck in a gather would wait for ever).
    [[noreturn]] void abort(int status) const;

    // This process's rank as the launcher's environment gives it, before
    // (or without) MPI_Init: 0 when not started by a launcher.
    static int launcher_rank();
    // The number of ranks the launcher started, 1 when none.
    static int launcher_size();
    // Whether this hcasim was linked with MPI.
    static bool built_with_mpi();

private:
    int m_rank = 0;
    int m_size = 1;
    bool m_initialised = false;
};

}  // namespace hcasim::cli
