// What hcasim sweep runs: the cross product of the values of some
// configuration parameters, each combination (a point) one run of a workload
// command in a process of its own. Everything is checked before any point
// runs; errors are std::invalid_argument naming the bad value.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hcasim::cli {

struct SweepParameter {
    std::string key;                  // "pcie.lanes", or a workload option: "--qps"
    std::vector<std::string> values;  // in the order given
};

class SweepPlan {
public:
    // The workloads a sweep can run: those that print one result with --format json.
    static const std::vector<std::string>& workloads();
    // More points than this is surely a mistake.
    static constexpr std::size_t kMaxPoints = 1000000;

    // params: the --param texts ("pcie.lanes=4,8,16"), in order; workload:
    // the command line after "--" ("bw", "--sizes", "64:65536").
    SweepPlan(const std::vector<std::string>& params, std::vector<std::string> workload);

    const std::vector<SweepParameter>& parameters() const { return m_params; }
    const std::vector<std::string>& workload() const { return m_workload; }
    std::size_t points() const { return m_points; }

    // Point i's value of each parameter, in parameter order. The first
    // parameter varies slowest, as in nested loops written in --param order.
    std::vector<std::string> values_of(std::size_t point) const;
    // "point 3 of 9 (pcie.lanes=8, hca.wqe_fetch_batch=4)", 1-based.
    std::string describe(std::size_t point) const;
    // Point i's hcasim argument vector after the program name: the workload,
    // then --set KEY=VALUE per parameter, then --format json.
    std::vector<std::string> child_arguments(std::size_t point) const;

private:
    std::vector<SweepParameter> m_params;
    std::vector<std::string> m_workload;
    std::size_t m_points = 1;
};

}  // namespace hcasim::cli
