#include "testbench/cli/mpi_world.hpp"

#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#ifdef HCASIM_WITH_MPI
#include <mpi.h>
#endif

namespace hcasim::cli {

namespace {

// A launcher variable as a number; fallback when unset or not a number.
int env_number(const char* open_mpi_name, const char* pmi_name, int fallback) {
    for (const char* name : {open_mpi_name, pmi_name}) {
        const char* v = std::getenv(name);
        if (!v || !*v) continue;
        char* end = nullptr;
        const long n = std::strtol(v, &end, 10);
        if (*end == '\0' && n >= 0 && n <= INT_MAX) return static_cast<int>(n);
    }
    return fallback;
}

#ifdef HCASIM_WITH_MPI
void check(int rc, const char* call) {
    if (rc != MPI_SUCCESS) throw std::runtime_error(std::string(call) + " failed (MPI error " + std::to_string(rc) + ")");
}

// Until every rank has come here. Open MPI's blocking collectives spin on
// the CPU: a rank that ran out of points would take a core from the points
// still running on its machine, so this one sleeps between looks.
void wait_for_every_rank() {
    MPI_Request request;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    for (int done = 0;;) {
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) return;
        const timespec pause{0, 10 * 1000 * 1000};
        nanosleep(&pause, nullptr);
    }
}
#endif

}  // namespace

int MpiWorld::launcher_rank() { return env_number("OMPI_COMM_WORLD_RANK", "PMI_RANK", 0); }

int MpiWorld::launcher_size() { return env_number("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", 1); }

bool MpiWorld::built_with_mpi() {
#ifdef HCASIM_WITH_MPI
    return true;
#else
    return false;
#endif
}

MpiWorld::MpiWorld([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv) {
    const bool launched = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
    if (!launched) return;
#ifdef HCASIM_WITH_MPI
    check(MPI_Init(&argc, &argv), "MPI_Init");
    m_initialised = true;
    check(MPI_Comm_rank(MPI_COMM_WORLD, &m_rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &m_size), "MPI_Comm_size");
#else
    // Each rank would run every point and write the same file.
    if (launcher_size() > 1)
        throw std::runtime_error("this hcasim was built without MPI (CMake found none), so it cannot share a sweep "
                                 "among mpirun's " +
                                 std::to_string(launcher_size()) +
                                 " ranks: install libopenmpi-dev and rebuild, or run the sweep without mpirun");
#endif
}

MpiWorld::~MpiWorld() {
#ifdef HCASIM_WITH_MPI
    if (m_initialised) MPI_Finalize();
#endif
}

std::vector<std::string> MpiWorld::gather_to_root(const std::string& mine) const {
    if (!m_initialised) return {mine};
#ifdef HCASIM_WITH_MPI
    if (mine.size() > static_cast<std::size_t>(INT_MAX))
        throw std::runtime_error("rank " + std::to_string(m_rank) + "'s results are more than MPI can send at once");
    wait_for_every_rank();
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(m_rank == 0 ? static_cast<std::size_t>(m_size) : 0);
    check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
    std::vector<int> offsets(lengths.size());
    long long total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
        offsets[r] = static_cast<int>(total);
        total += lengths[r];
        if (total > INT_MAX) throw std::runtime_error("the ranks' results are more than MPI can gather at once");
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    check(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                      MPI_COMM_WORLD),
          "MPI_Gatherv");
    std::vector<std::string> texts;
    for (std::size_t r = 0; r < lengths.size(); ++r)
        texts.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
    return texts;
#else
    return {mine};
#endif
}

int MpiWorld::broadcast_from_root(int value) const {
#ifdef HCASIM_WITH_MPI
    if (m_initialised) {
        wait_for_every_rank();
        check(MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    }
#endif
    return value;
}

int MpiWorld::finish(int status) {
#ifdef HCASIM_WITH_MPI
    if (m_initialised) {
        MPI_Finalize();
        m_initialised = false;
        std::fflush(nullptr);
        _exit(status);
    }
#endif
    return status;
}

void MpiWorld::abort(int status) const {
#ifdef HCASIM_WITH_MPI
    if (m_initialised) MPI_Abort(MPI_COMM_WORLD, status);
#endif
    std::exit(status);
}

}  // namespace hcasim::cli
