#include "testbench/workloads/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "testbench/workloads/swarm.hpp"

namespace hcasim::testbench {

LatencyRow latency_stats(std::uint64_t bytes, std::vector<sim::Tick> samples) {
    LatencyRow r;
    r.bytes = bytes;
    r.iterations = samples.size();
    if (samples.empty()) return r;
    std::sort(samples.begin(), samples.end());
    auto us = [](double ps) { return ps / 1e6; };
    const std::size_t n = samples.size();
    auto rank = [&](double p) {
        std::size_t i = static_cast<std::size_t>(std::ceil(p * static_cast<double>(n)));
        return samples[std::min(n, std::max<std::size_t>(1, i)) - 1];
    };
    double sum = 0;
    for (auto s : samples) sum += static_cast<double>(s);
    const double mean = sum / static_cast<double>(n);
    double var = 0;
    for (auto s : samples) var += (static_cast<double>(s) - mean) * (static_cast<double>(s) - mean);
    r.t_min_us = us(static_cast<double>(samples.front()));
    r.t_max_us = us(static_cast<double>(samples.back()));
    r.t_typical_us = us(static_cast<double>(samples[n / 2]));
    r.t_avg_us = us(mean);
    r.t_stdev_us = us(std::sqrt(var / static_cast<double>(n)));
    r.t_99_us = us(static_cast<double>(rank(0.99)));
    r.t_999_us = us(static_cast<double>(rank(0.999)));
    return r;
}

Format parse_format(const std::string& s) {
    if (s == "text") return Format::Text;
    if (s == "csv") return Format::Csv;
    if (s == "json") return Format::Json;
    throw std::invalid_argument("unknown format '" + s + "': expected text, csv or json");
}

namespace {

std::string fixed(double v, int decimals) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    return b;
}

void header(std::ostream& os, const RunInfo& info) {
    const std::string rule(86, '-');
    os << rule << "\n";
    os << "                    " << info.title << " (hcasim, simulated time)\n";
    os << " API             : " << info.api << "\n";
    for (const auto& [k, v] : info.settings) os << " " << k << std::string(k.size() < 16 ? 16 - k.size() : 1, ' ') << ": " << v << "\n";
    os << rule << "\n";
}

nlohmann::json meta(const RunInfo& info) {
    nlohmann::json j;
    j["title"] = info.title;
    j["api"] = info.api;
    j["op"] = info.op;
    nlohmann::json s = nlohmann::json::object();
    for (const auto& [k, v] : info.settings) s[k] = v;
    j["settings"] = s;
    return j;
}

}  // namespace

void print_latency(std::ostream& os, Format f, const RunInfo& info, const std::vector<LatencyRow>& rows) {
    if (f == Format::Csv) {
        os << "bytes,iterations,t_min_us,t_max_us,t_typical_us,t_avg_us,t_stdev_us,t_99_us,t_999_us\n";
        for (const auto& r : rows)
            os << r.bytes << "," << r.iterations << "," << fixed(r.t_min_us, 3) << "," << fixed(r.t_max_us, 3) << ","
               << fixed(r.t_typical_us, 3) << "," << fixed(r.t_avg_us, 3) << "," << fixed(r.t_stdev_us, 3) << ","
               << fixed(r.t_99_us, 3) << "," << fixed(r.t_999_us, 3) << "\n";
        return;
    }
    if (f == Format::Json) {
        nlohmann::json j = meta(info);
        j["kind"] = "latency";
        j["rows"] = nlohmann::json::array();
        for (const auto& r : rows)
            j["rows"].push_back({{"bytes", r.bytes},
                                 {"iterations", r.iterations},
                                 {"t_min_us", r.t_min_us},
                                 {"t_max_us", r.t_max_us},
                                 {"t_typical_us", r.t_typical_us},
                                 {"t_avg_us", r.t_avg_us},
                                 {"t_stdev_us", r.t_stdev_us},
                                 {"t_99_us", r.t_99_us},
                                 {"t_999_us", r.t_999_us}});
        os << j.dump() << "\n";
        return;
    }
    header(os, info);
    char line[256];
    std::snprintf(line, sizeof line, " %-10s %-11s %-11s %-11s %-13s %-11s %-13s %-18s %s\n", "#bytes", "#iterations",
                  "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]",
                  "99% percentile[usec]", "99.9% percentile[usec]");
    os << line;
    for (const auto& r : rows) {
        std::snprintf(line, sizeof line, " %-10llu %-11llu %-11.2f %-11.2f %-15.2f %-11.2f %-13.2f %-20.2f %.2f\n",
                      static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.iterations),
                      r.t_min_us, r.t_max_us, r.t_typical_us, r.t_avg_us, r.t_stdev_us, r.t_99_us, r.t_999_us);
        os << line;
    }
    os << std::string(86, '-') << "\n";
}

void print_bandwidth(std::ostream& os, Format f, const RunInfo& info, const std::vector<BandwidthRow>& rows) {
    if (f == Format::Csv) {
        os << "bytes,iterations,bw_peak_MBps,bw_avg_MBps,msg_rate_Mpps\n";
        for (const auto& r : rows)
            os << r.bytes << "," << r.iterations << "," << fixed(r.bw_peak_MBps, 2) << "," << fixed(r.bw_avg_MBps, 2)
               << "," << fixed(r.msg_rate_Mpps, 6) << "\n";
        return;
    }
    if (f == Format::Json) {
        nlohmann::json j = meta(info);
        j["kind"] = "bandwidth";
        j["rows"] = nlohmann::json::array();
        for (const auto& r : rows)
            j["rows"].push_back({{"bytes", r.bytes},
                                 {"iterations", r.iterations},
                                 {"bw_peak_MBps", r.bw_peak_MBps},
                                 {"bw_avg_MBps", r.bw_avg_MBps},
                                 {"msg_rate_Mpps", r.msg_rate_Mpps}});
        os << j.dump() << "\n";
        return;
    }
    header(os, info);
    char line[200];
    std::snprintf(line, sizeof line, " %-10s %-12s %-18s %-21s %s\n", "#bytes", "#iterations", "BW peak[MB/sec]",
                  "BW average[MB/sec]", "MsgRate[Mpps]");
    os << line;
    for (const auto& r : rows) {
        std::snprintf(line, sizeof line, " %-10llu %-12llu %-18.2f %-21.2f %.6f\n",
                      static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.iterations),
                      r.bw_peak_MBps, r.bw_avg_MBps, r.msg_rate_Mpps);
        os << line;
    }
    os << std::string(86, '-') << "\n";
}

void print_msgrate(std::ostream& os, Format f, const RunInfo& info, const MsgRateResult& r, double wall_seconds) {
    const double packets_per_wall_second = wall_seconds > 0 ? static_cast<double>(r.packets) / wall_seconds : 0;
    if (f == Format::Csv) {
        os << "qp,messages,msg_rate_Mpps\n";
        for (const auto& q : r.qps) os << q.qp << "," << q.messages << "," << fixed(q.msg_rate_Mpps, 6) << "\n";
        os << "total," << r.total.iterations << "," << fixed(r.total.msg_rate_Mpps, 6) << "\n";
        return;
    }
    if (f == Format::Json) {
        nlohmann::json j = meta(info);
        j["kind"] = "msgrate";
        j["bytes"] = r.total.bytes;
        j["qps"] = nlohmann::json::array();
        for (const auto& q : r.qps)
            j["qps"].push_back({{"qp", q.qp}, {"messages", q.messages}, {"msg_rate_Mpps", q.msg_rate_Mpps}});
        j["total"] = {{"messages", r.total.iterations},
                      {"msg_rate_Mpps", r.total.msg_rate_Mpps},
                      {"bw_avg_MBps", r.total.bw_avg_MBps}};
        j["packets"] = r.packets;
        // Wall-clock figures: the simulator's speed, not the simulated hardware's.
        j["wall_seconds"] = wall_seconds;
        j["packets_per_wall_second"] = packets_per_wall_second;
        os << j.dump() << "\n";
        return;
    }
    header(os, info);
    char line[200];
    std::snprintf(line, sizeof line, " %-10s %-12s %s\n", "#qp", "#messages", "MsgRate[Mpps]");
    os << line;
    for (const auto& q : r.qps) {
        std::snprintf(line, sizeof line, " %-10d %-12llu %.6f\n", q.qp, static_cast<unsigned long long>(q.messages),
                      q.msg_rate_Mpps);
        os << line;
    }
    std::snprintf(line, sizeof line, " %-10s %-12llu %.6f\n", "total", static_cast<unsigned long long>(r.total.iterations),
                  r.total.msg_rate_Mpps);
    os << line;
    std::snprintf(line, sizeof line, " BW average[MB/sec]: %.2f   packets on the wire (both directions): %llu\n",
                  r.total.bw_avg_MBps, static_cast<unsigned long long>(r.packets));
    os << line;
    os << std::string(86, '-') << "\n";
    std::snprintf(line, sizeof line, " simulator speed (wall clock, varies from run to run): %.0f packets per wall second\n",
                  packets_per_wall_second);
    os << line;
}

void print_multicast(std::ostream& os, Format f, const RunInfo& info, const std::vector<MulticastRow>& rows) {
    if (f == Format::Csv) {
        os << "bytes,receiver,iterations,t_min_us,t_max_us,t_typical_us,t_avg_us,t_stdev_us,t_99_us,t_999_us,sent,"
              "received,bw_avg_MBps,msg_rate_Mpps\n";
        for (const auto& r : rows) {
            const LatencyRow& l = r.latency;
            os << r.bytes << ",node" << r.receiver << "," << l.iterations << "," << fixed(l.t_min_us, 3) << ","
               << fixed(l.t_max_us, 3) << "," << fixed(l.t_typical_us, 3) << "," << fixed(l.t_avg_us, 3) << ","
               << fixed(l.t_stdev_us, 3) << "," << fixed(l.t_99_us, 3) << "," << fixed(l.t_999_us, 3) << "," << r.sent
               << "," << r.received << "," << fixed(r.bw_avg_MBps, 2) << "," << fixed(r.msg_rate_Mpps, 6) << "\n";
        }
        return;
    }
    if (f == Format::Json) {
        nlohmann::json j = meta(info);
        j["kind"] = "multicast";
        j["rows"] = nlohmann::json::array();
        for (const auto& r : rows) {
            const LatencyRow& l = r.latency;
            j["rows"].push_back({{"bytes", r.bytes},
                                 {"receiver", "node" + std::to_string(r.receiver)},
                                 {"iterations", l.iterations},
                                 {"t_min_us", l.t_min_us},
                                 {"t_max_us", l.t_max_us},
                                 {"t_typical_us", l.t_typical_us},
                                 {"t_avg_us", l.t_avg_us},
                                 {"t_stdev_us", l.t_stdev_us},
                                 {"t_99_us", l.t_99_us},
                                 {"t_999_us", l.t_999_us},
                                 {"sent", r.sent},
                                 {"received", r.received},
                                 {"bw_avg_MBps", r.bw_avg_MBps},
                                 {"msg_rate_Mpps", r.msg_rate_Mpps}});
        }
        os << j.dump() << "\n";
        return;
    }
    // Text: perftest's latency table, then its bandwidth table, each with a
    // receiver column; info.title is the test's name ("Multicast Send").
    RunInfo lat = info;
    lat.title = info.title + " Latency Test";
    header(os, lat);
    char line[256];
    std::snprintf(line, sizeof line, " %-10s %-10s %-11s %-11s %-11s %-13s %-11s %-13s %-18s %s\n", "#bytes", "#receiver",
                  "#iterations", "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]",
                  "99% percentile[usec]", "99.9% percentile[usec]");
    os << line;
    for (const auto& r : rows) {
        const LatencyRow& l = r.latency;
        std::snprintf(line, sizeof line, " %-10llu %-10s %-11llu %-11.2f %-11.2f %-15.2f %-11.2f %-13.2f %-20.2f %.2f\n",
                      static_cast<unsigned long long>(r.bytes), ("node" + std::to_string(r.receiver)).c_str(),
                      static_cast<unsigned long long>(l.iterations), l.t_min_us, l.t_max_us, l.t_typical_us, l.t_avg_us,
                      l.t_stdev_us, l.t_99_us, l.t_999_us);
        os << line;
    }
    os << std::string(86, '-') << "\n\n";
    RunInfo bw = info;
    bw.title = info.title + " BW Test";
    header(os, bw);
    std::snprintf(line, sizeof line, " %-10s %-10s %-10s %-10s %-21s %s\n", "#bytes", "#receiver", "#sent", "#received",
                  "BW average[MB/sec]", "MsgRate[Mpps]");
    os << line;
    for (const auto& r : rows) {
        std::snprintf(line, sizeof line, " %-10llu %-10s %-10llu %-10llu %-21.2f %.6f\n",
                      static_cast<unsigned long long>(r.bytes), ("node" + std::to_string(r.receiver)).c_str(),
                      static_cast<unsigned long long>(r.sent), static_cast<unsigned long long>(r.received),
                      r.bw_avg_MBps, r.msg_rate_Mpps);
        os << line;
    }
    os << std::string(86, '-') << "\n";
}

void print_swarm(std::ostream& os, Format f, const RunInfo& info, const SwarmOptions& opt, const SwarmResult& r) {
    // Context misses per READ the machine issued (its adapter serves about
    // as many for its peers, and their misses count too).
    auto per_read = [](std::uint64_t misses, std::uint64_t reads) {
        return reads ? static_cast<double>(misses) / static_cast<double>(reads) : 0.0;
    };
    std::uint64_t qpc = 0, cqc = 0, all = 0;
    for (const auto& m : r.machines) {
        qpc += m.qpc_misses;
        cqc += m.cqc_misses;
        all += m.all_reads;
    }
    if (f == Format::Csv) {
        os << "machines,threads,vms,window,bytes,active_qps,duration_us,read_rate_Mops_per_machine,min_Mops,max_Mops,"
              "qpc_misses_per_read,cqc_misses_per_read\n";
        os << opt.machines << "," << opt.threads << "," << opt.vms << "," << opt.window << "," << opt.size << ","
           << opt.active_qps() << "," << fixed(opt.duration_us, 3) << "," << fixed(r.mean_mops, 4) << ","
           << fixed(r.min_mops, 4) << "," << fixed(r.max_mops, 4) << "," << fixed(per_read(qpc, all), 4) << ","
           << fixed(per_read(cqc, all), 4) << "\n";
        return;
    }
    if (f == Format::Json) {
        nlohmann::json j = meta(info);
        j["kind"] = "swarm";
        j["rows"] = nlohmann::json::array({{{"machines", opt.machines},
                                            {"threads", opt.threads},
                                            {"vms", opt.vms},
                                            {"window", opt.window},
                                            {"bytes", opt.size},
                                            {"active_qps", opt.active_qps()},
                                            {"duration_us", opt.duration_us},
                                            {"read_rate_Mops_per_machine", r.mean_mops},
                                            {"min_Mops", r.min_mops},
                                            {"max_Mops", r.max_mops},
                                            {"qpc_misses_per_read", per_read(qpc, all)},
                                            {"cqc_misses_per_read", per_read(cqc, all)}}});
        nlohmann::json ms = nlohmann::json::array();
        for (const auto& m : r.machines)
            ms.push_back({{"machine", "node" + std::to_string(m.machine)},
                          {"reads", m.reads},
                          {"Mops", m.mops},
                          {"qpc_misses", m.qpc_misses},
                          {"cqc_misses", m.cqc_misses},
                          {"reads_issued", m.all_reads}});
        j["machines"] = ms;
        j["wall_seconds"] = r.wall_seconds;
        os << j.dump() << "\n";
        return;
    }
    header(os, info);
    char line[256];
    std::snprintf(line, sizeof line, " %-9s %-14s %-16s %-22s %s\n", "#machine", "#READs", "#rate[Mops/s]",
                  "#QPC misses per READ", "#CQC misses per READ");
    os << line;
    for (const auto& m : r.machines) {
        std::snprintf(line, sizeof line, " %-9s %-14llu %-16.3f %-22.3f %.3f\n", ("node" + std::to_string(m.machine)).c_str(),
                      static_cast<unsigned long long>(m.reads), m.mops, per_read(m.qpc_misses, m.all_reads),
                      per_read(m.cqc_misses, m.all_reads));
        os << line;
    }
    os << std::string(86, '-') << "\n";
    std::snprintf(line, sizeof line,
                  " READs per machine: %.3f Mops/s (min %.3f, max %.3f) with %d active QPs per machine, over %.1f us\n"
                  " after %.1f us of warm-up; misses count the whole run, per READ the machine issued\n",
                  r.mean_mops, r.min_mops, r.max_mops, static_cast<int>(opt.active_qps()), opt.duration_us,
                  opt.warmup_us);
    os << line;
}

}  // namespace hcasim::testbench
