#include "model/sim/tracer.hpp"

#include <cinttypes>
#include <cstdlib>

#include "model/sim/config.hpp"

namespace hcasim::sim {

namespace {

// Picoseconds as trace-event microseconds, exactly.
std::string us(Tick ps) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRIu64 ".%06" PRIu64, ps / 1000000, ps % 1000000);
    return buf;
}

// Microseconds for a message: "86.52", not "86.520000".
std::string us_text(Tick ps) {
    std::string s = us(ps);
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s;
}

// The node a track belongs to: "node12.hca.port1.tx" -> 12; the fabric
// (switches) is process 1000.
int process_of(const std::string& track) {
    if (track.compare(0, 4, "node") != 0) return 1000;
    return std::atoi(track.c_str() + 4);
}

std::string escaped(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) >= 0x20) out += c;
    }
    return out;
}

}  // namespace

Tracer& tracer() {
    static Tracer t;
    return t;
}

Tracer::~Tracer() { close(); }

void Tracer::open(const std::string& path, Tick start, Tick end, std::vector<std::string> filter) {
    close();
    const auto dot = path.rfind('.');
    const std::string ext = dot == std::string::npos ? "" : path.substr(dot);
    if (ext != ".json" && ext != ".log")
        throw ConfigError("invalid --trace " + printable(path) +
                          ": expected FILE.json (Perfetto / Chrome trace events) or FILE.log (event log)");
    if (end < start) throw ConfigError("invalid --trace-window: it ends before it starts");
    m_file = std::fopen(path.c_str(), "w");
    if (!m_file) throw ConfigError("cannot write --trace " + printable(path));
    m_json = ext == ".json";
    m_first = true;
    m_start = start;
    m_end = end;
    m_filter = std::move(filter);
    m_tracks.clear();
    m_threads_of.clear();
    m_open_flows.clear();
    m_wanted.clear();
    m_written = 0;
    m_first_seen = m_last_seen = 0;
    m_seen = false;
    if (m_json)
        std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", m_file);
    else
        std::fputs("# hcasim event log: start_ps end_ps track event fields\n", m_file);
}

std::string Tracer::close() {
    if (!m_file) return "";
    if (m_json) std::fputs("\n]}\n", m_file);
    std::fclose(m_file);
    m_file = nullptr;
    return m_written ? "" : why_empty();
}

// Times of the slices on wanted tracks, inside the window or not.
void Tracer::note_seen(Tick start, Tick end) {
    if (!m_seen || start < m_first_seen) m_first_seen = start;
    if (!m_seen || end > m_last_seen) m_last_seen = end;
    m_seen = true;
}

std::string Tracer::why_empty() const {
    if (m_wanted.empty() && !m_seen) return "the run recorded no slice";
    if (!m_seen) {
        // Name a few of the tracks there were, so a filter can be fixed.
        std::string names;
        int shown = 0;
        for (const auto& [track, yes] : m_wanted) {
            (void)yes;
            if (shown++ == 4) {
                names += ", ...";
                break;
            }
            names += (names.empty() ? "" : ", ") + printable(track);
        }
        return "no track's name contains a word of --trace-blocks (the run's tracks include " + names + ")";
    }
    return "no slice overlaps --trace-window " + us_text(m_start) + ":" + (m_end == ~Tick(0) ? "" : us_text(m_end)) +
           " (microseconds): the run's slices span " + us_text(m_first_seen) + " to " + us_text(m_last_seen);
}

std::uint64_t Tracer::flow_of(const std::string& path, std::uint32_t qpn, std::uint16_t wqe_index) {
    return (static_cast<std::uint64_t>(process_of(path) + 1) << 40) | (static_cast<std::uint64_t>(qpn & 0xffffff) << 16) |
           wqe_index;
}

bool Tracer::wanted(const std::string& track) {
    if (m_filter.empty()) return true;
    auto at = m_wanted.find(track);
    if (at != m_wanted.end()) return at->second;
    bool yes = false;
    for (const auto& f : m_filter)
        if (track.find(f) != std::string::npos) yes = true;
    m_wanted.emplace(track, yes);
    return yes;
}

void Tracer::event(const std::string& text) {
    if (!m_first) std::fputs(",\n", m_file);
    m_first = false;
    std::fputs(text.c_str(), m_file);
}

std::pair<int, int> Tracer::track_ids(const std::string& track) {
    auto at = m_tracks.find(track);
    if (at != m_tracks.end()) return at->second;
    const int pid = process_of(track);
    const bool new_process = m_threads_of.find(pid) == m_threads_of.end();
    const int tid = ++m_threads_of[pid];
    m_tracks.emplace(track, std::make_pair(pid, tid));
    if (m_json) {
        if (new_process) {
            const std::string name = pid == 1000 ? "fabric" : "node" + std::to_string(pid);
            event("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(pid) + ",\"args\":{\"name\":\"" +
                  name + "\"}}");
        }
        event("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
              ",\"args\":{\"name\":\"" + escaped(track) + "\"}}");
        event("{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + std::to_string(pid) + ",\"tid\":" +
              std::to_string(tid) + ",\"args\":{\"sort_index\":" + std::to_string(tid) + "}}");
    }
    return {pid, tid};
}

void Tracer::flow_event(std::uint64_t flow, bool end, int pid, int tid, Tick t) {
    // A flow starts at its first slice, steps through the others and ends at
    // the completion; an id used again after its end starts a new flow.
    const bool started = m_open_flows.count(flow) != 0;
    const char* ph = !started ? "s" : end ? "f" : "t";
    if (!started && end) return;  // a completion whose start is outside the window
    if (!started) m_open_flows.insert(flow);
    if (end) m_open_flows.erase(flow);
    event(std::string("{\"ph\":\"") + ph + "\",\"name\":\"work request\",\"cat\":\"flow\",\"id\":" +
          std::to_string(flow) + ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":" +
          us(t) + ",\"bp\":\"e\"}");
}

void Tracer::slice(const std::string& track, const char* name, Tick start, Tick end, Args args, std::uint64_t flow,
                   bool flow_end) {
    if (!m_file || !wanted(track)) return;
    note_seen(start, end);
    if (end < m_start || start > m_end) return;
    ++m_written;
    if (!m_json) {
        std::string line = std::to_string(start) + " " + std::to_string(end) + " " + track + " " + name;
        for (const auto& [k, v] : args) line += std::string(" ") + k + "=" + std::to_string(v);
        line += "\n";
        std::fputs(line.c_str(), m_file);
        return;
    }
    const auto [pid, tid] = track_ids(track);
    std::string e = std::string("{\"ph\":\"X\",\"name\":\"") + name + "\",\"pid\":" + std::to_string(pid) +
                    ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + us(start) + ",\"dur\":" + us(end - start);
    if (args.size() != 0) {
        e += ",\"args\":{";
        bool first = true;
        for (const auto& [k, v] : args) {
            e += std::string(first ? "" : ",") + "\"" + k + "\":" + std::to_string(v);
            first = false;
        }
        e += "}";
    }
    e += "}";
    event(e);
    if (flow) flow_event(flow, flow_end, pid, tid, start);
}

void Tracer::slice(const std::string& track, const char* name, Tick start, Tick end, Args args,
                   const std::vector<std::uint64_t>& flows) {
    if (!m_file || !wanted(track)) return;
    if (end < m_start || start > m_end) {
        note_seen(start, end);
        return;
    }
    slice(track, name, start, end, args);
    if (!m_json) return;
    const auto [pid, tid] = track_ids(track);
    for (std::uint64_t f : flows) flow_event(f, false, pid, tid, start);
}

}  // namespace hcasim::sim
