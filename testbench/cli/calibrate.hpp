// hcasim calibrate: the reference points of a preset (published
// measurements, testbench/configs/reference_points.json) run on the model
// and compared; hcasim presets: each preset with the facts and points behind it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "testbench/workloads/report.hpp"

namespace hcasim::testbench {

struct CalibrateOptions {
    std::string preset;     // empty: every preset of the model that has reference points
    bool check = false;     // status 1 when a point lies outside the tolerance
    Format format = Format::Text;
    std::string reference;  // the reference points file
    // A design point: an INI file of parameters (--config) and KEY=VALUE
    // assignments (--set) applied to every point's run, except a key the
    // point's own command sets (a condition of its measurement, such as the
    // link speed of the measured run).
    std::string config;
    std::vector<std::string> sets;
};

// Runs every point of the preset(s), each as its own hcasim process
// (`hcasim <command> --preset P --format json`), as many at once as the
// machine has CPUs, and prints name, published, measured, unit, ratio and
// source per point in the file's order; with sets, the design point and the
// points that kept a key of their own are said above the table. Returns the
// exit status: 1 when a point could not be measured or, with check, when one
// lies outside kCalibrationTolerance (err names them), else 0. Throws
// std::invalid_argument for a preset the reference file or the model lacks,
// sim::ConfigError for an assignment no preset run would accept.
int run_calibrate(const CalibrateOptions& o, std::ostream& out, std::ostream& err);

// Every preset: its description (the preset file's first comment line), the
// parameters its file sets, and the facts and reference points behind it;
// then the classes that have reference points but no preset yet. With
// markdown, the whole of docs/reference-points.md.
int print_presets(const std::string& reference, bool markdown, std::ostream& out);

}  // namespace hcasim::testbench
