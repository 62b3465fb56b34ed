// hcasim plot: checks the command line, then hands the drawing to
// testbench/scripts/hcasim_plot.py under Debian's Python, which has
// matplotlib (python3-matplotlib); the script checks the files it reads.
#include <limits.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "testbench/cli/cli_input.hpp"
#include "testbench/cli/sweep_command.hpp"

extern char** environ;

namespace po = boost::program_options;

namespace hcasim::cli {

namespace {

// Debian's interpreter, whatever python3 comes first in PATH: its matplotlib
// is the one setup.sh installs.
const char* kPython = "/usr/bin/python3";

const char* kPlotUsage = R"(usage: hcasim plot --out FIGURE.png|FIGURE.svg [--y COLUMN] [--title TEXT] FILE...

Draws results with matplotlib, as PNG or SVG by FIGURE's extension:
  - latency or bandwidth against message size (log2 axis) from hcasim lat, bw
    or mcast --format json or csv output files, a line per file (and per
    receiver), labelled by file name: several runs or presets on one figure;
  - a sweep table (hcasim sweep, .csv or .json): a line per combination of
    the parameters' values;
  - a calibration table: hcasim calibrate --format csv or json output, or
    any CSV with the columns name,published,measured (and optionally unit):
    how far the model is from each published figure.
FILE - reads standard input (CSV or JSON). Default y column: t_typical_us
when the results have it, else bw_avg_MBps.

Options)";

struct PlotArgs {
    std::vector<std::string> files;
    std::string out, y, title;
};

po::options_description plot_options(PlotArgs& a) {
    po::options_description opts(kPlotUsage);
    opts.add_options()("help,h", "this text")
        ("out,o", po::value(&a.out), "the figure to write: a name ending in .png or .svg")
        ("y", po::value(&a.y), "the column to draw against message size (t_avg_us, t_99_us, bw_peak_MBps, msg_rate_Mpps, ...)")
        ("title", po::value(&a.title), "the figure's title (default: from the results)");
    return opts;
}

bool is_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string directory_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Beside the binary in a build folder of the source tree, or in the source
// tree this hcasim was built from.
std::string plot_script() {
    const std::string name = "/testbench/scripts/hcasim_plot.py";
    std::vector<std::string> places;
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) places.push_back(directory_of(std::string(exe, static_cast<std::size_t>(n))) + "/.." + name);
    places.push_back(std::string(HCASIM_SOURCE_DIR) + name);
    for (const auto& p : places)
        if (is_file(p)) return p;
    std::string tried;
    for (const auto& p : places) tried += (tried.empty() ? "" : ", ") + p;
    throw std::runtime_error("plot cannot find its script hcasim_plot.py (looked at " + tried + ")");
}

}  // namespace

int plot_command(int argc, char** argv) {
    PlotArgs a;
    std::vector<std::string> args(argv + 2, argv + argc);
    try {
        po::options_description opts = plot_options(a);
        po::options_description hidden;
        hidden.add_options()("file", po::value(&a.files));
        po::options_description all;
        all.add(opts).add(hidden);
        po::positional_options_description pos;
        pos.add("file", -1);
        po::variables_map vm;
        po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
        po::notify(vm);
        if (vm.count("help")) {
            PlotArgs shown;
            std::cout << plot_options(shown) << "\n";
            return 0;
        }
        if (a.files.empty())
            throw std::invalid_argument("plot needs the result files to draw (hcasim plot --out fig.svg lat.json ...)");
        if (!vm.count("out")) throw std::invalid_argument("plot needs --out FIGURE.png or FIGURE.svg");
        const auto dot = a.out.rfind('.');
        const std::string ext = dot == std::string::npos ? "" : a.out.substr(dot);
        if (ext != ".png" && ext != ".svg")
            throw std::invalid_argument("--out '" + sim::printable(a.out) +
                                        "': the name must end in .png or .svg, the format of the figure");
        check_output_file("--out", a.out);
        if (vm.count("y") && a.y.empty()) throw std::invalid_argument("--y needs a column name");
    } catch (const std::exception& e) {  // po::error, std::invalid_argument
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    }
    try {
        if (access(kPython, X_OK) != 0)
            throw std::runtime_error(std::string("plot draws with ") + kPython +
                                     " and matplotlib, and there is no " + kPython +
                                     " (Debian: apt-get install python3-matplotlib)");
        std::vector<std::string> argv_py{kPython, plot_script(), "--out", a.out};
        if (!a.y.empty()) argv_py.insert(argv_py.end(), {"--y", a.y});
        if (!a.title.empty()) argv_py.insert(argv_py.end(), {"--title", a.title});
        argv_py.push_back("--");
        argv_py.insert(argv_py.end(), a.files.begin(), a.files.end());
        // The script reads standard input for "-" and prints straight to ours.
        std::vector<char*> cargs;
        for (auto& s : argv_py) cargs.push_back(s.data());
        cargs.push_back(nullptr);
        std::cout.flush();
        pid_t pid = -1;
        const int rc = posix_spawn(&pid, kPython, nullptr, nullptr, cargs.data(), environ);
        if (rc != 0) throw std::runtime_error(std::string("plot cannot start ") + kPython + ": " + std::strerror(rc));
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        std::cerr << "hcasim: error: plot: " << kPython << " was killed by signal " << WTERMSIG(status) << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace hcasim::cli
