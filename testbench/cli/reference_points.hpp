// Published measurements of real adapters and the hcasim command that
// measures the same thing on the model (testbench/configs/reference_points.json,
// described in docs/reference-points.md). `hcasim calibrate` runs them,
// `hcasim presets` shows them under the preset they ground.
#pragma once

#include <string>
#include <vector>

namespace hcasim::testbench {

// One published figure.
struct ReferencePoint {
    std::string name;     // "cx4-edr.send_lat.rc.32B", unique in the file
    std::string preset;   // the device class it belongs to: a preset name
    std::string metric;   // what was measured, in words
    double value = 0;     // the published figure, in unit
    bool has_range = false;
    double range_lo = 0, range_hi = 0;  // when the source gives a range
    // "upper" when the source gives a bound ("sub-600 ns"): the model is
    // within tolerance when it is below value x (1 + tolerance).
    bool upper_bound = false;
    std::string unit;     // "us", "MB/s" (2^20 bytes, as perftest), "Gb/s", "Mpps"
    std::string kind;     // "measured" or "vendor claim"
    std::string source;   // full citation or URL, as found
    std::string conditions;         // host, PCIe, firmware, cabling: what the source says
    std::string published_command;  // the perftest (or other) command line, as far as given
    // The hcasim arguments that measure it, without --preset and --format
    // (calibrate adds --preset <preset> --format json): "lat --op write --sizes 2".
    // The command runs one message size.
    std::string command;
    // The figure in the command's JSON output: a field of its one row
    // ("rows"), or of "total" for msgrate: t_typical_us, bw_avg_MBps, msg_rate_Mpps.
    std::string column;
    double scale = 1;     // measured = column x scale (unit conversion)
    std::string note;
    // What the model lacks to reach the figure, or why physical parameters
    // cannot: `calibrate` prints it when the point is out of tolerance.
    std::string model_gap;
};

struct ReferenceFact {
    std::string fact;
    std::string source;
};

// A metric of a class for which no published figure was found.
struct ReferenceGap {
    std::string metric;
    std::string note;
};

// A device class: a preset of the model, or one it does not have yet.
struct ReferenceClass {
    std::string preset;
    std::string device;   // one line
    std::vector<ReferenceFact> facts;
    std::vector<ReferenceGap> gaps;
};

// A source read but not recorded as a point, and why.
struct ConsultedSource {
    std::string source;
    std::string why_not_a_point;
};

struct ReferenceSet {
    std::string path;
    std::string description;
    std::vector<ReferenceClass> classes;
    std::vector<ReferencePoint> points;
    std::vector<ConsultedSource> consulted;

    const ReferenceClass* find_class(const std::string& preset) const;
    std::vector<const ReferencePoint*> points_of(const std::string& preset) const;
};

// Reads and checks a reference file: every point has a unique name, a class,
// a positive value, a unit, a source, conditions, a command of lat, bw or
// msgrate without --preset or --format, and a column; every class a preset
// name and a device. Throws std::runtime_error naming the file and the
// offending entry.
ReferenceSet load_reference_points(const std::string& path);

// reference_points.json in the presets folder (sim::Config::presets_dir()).
std::string default_reference_file();

// The relative tolerance of `hcasim calibrate --check`.
inline constexpr double kCalibrationTolerance = 0.10;

// Whether a measured/published ratio counts as agreement for the point.
bool within_tolerance(const ReferencePoint& p, double ratio);

}  // namespace hcasim::testbench
