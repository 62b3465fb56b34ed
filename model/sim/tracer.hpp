// What the blocks do, slice by slice, for a trace file: a work request's WQE
// fetch, its packets, the TLPs of its DMA and its CQE, each on the track of
// the block that does it, linked by a flow per work request. Written as
// Chrome / Perfetto trace-event JSON (FILE.json, for ui.perfetto.dev and
// chrome://tracing) or as a compact line-oriented event log (FILE.log, the
// golden traces of traces/). One simulation per process, so one recorder.
#pragma once

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/sim/time.hpp"

namespace hcasim::sim {

class Tracer {
public:
    using Args = std::initializer_list<std::pair<const char*, std::uint64_t>>;

    // Starts recording to path (.json or .log) the slices that overlap
    // [start, end] on tracks whose name contains one of filter (all if
    // empty). Throws ConfigError naming what is wrong.
    void open(const std::string& path, Tick start, Tick end, std::vector<std::string> filter);
    // Ends the file; nothing is recorded after. Returns why the file holds
    // no slice when it holds none (the window or the filter left every
    // slice of the run out), else "".
    std::string close();
    bool on() const { return m_file != nullptr; }

    // A slice on track (a block's path and what it does: "node0.hca.port1.tx")
    // from start to end. flow: the work request it serves (0: none);
    // flow_end: it is the last slice of that flow (the completion).
    void slice(const std::string& track, const char* name, Tick start, Tick end, Args args = {},
               std::uint64_t flow = 0, bool flow_end = false);
    // The same for several flows at once (a WQE fetch of many WQEs).
    void slice(const std::string& track, const char* name, Tick start, Tick end, Args args,
               const std::vector<std::uint64_t>& flows);

    // The work request a node's adapter works on: node from a path
    // ("node3.hca..." -> 3), the QP and the WQE's index in its send queue.
    static std::uint64_t flow_of(const std::string& path, std::uint32_t qpn, std::uint16_t wqe_index);

    // The flow of what a block does now, set around work done for one work
    // request (the DMA of its payload, the packets it sends).
    std::uint64_t current_flow() const { return m_current; }
    class Scope {
    public:
        Scope(Tracer& t, std::uint64_t flow) : m_t(t), m_saved(t.m_current) { t.m_current = flow; }
        ~Scope() { m_t.m_current = m_saved; }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        Tracer& m_t;
        std::uint64_t m_saved;
    };

    ~Tracer();

private:
    std::FILE* m_file = nullptr;
    bool m_json = true;
    bool m_first = true;
    Tick m_start = 0, m_end = 0;
    std::vector<std::string> m_filter;
    std::uint64_t m_current = 0;
    // Tracks by name: (process, thread) ids, numbered as first seen.
    std::map<std::string, std::pair<int, int>> m_tracks;
    std::map<int, int> m_threads_of;  // process -> threads so far
    std::set<std::uint64_t> m_open_flows;
    std::map<std::string, bool> m_wanted;  // track -> passes the filter
    // What the run offered and what was written, to say why a file is empty.
    std::uint64_t m_written = 0;
    Tick m_first_seen = 0, m_last_seen = 0;  // slices on wanted tracks, in the window or not
    bool m_seen = false;
    void note_seen(Tick start, Tick end);
    std::string why_empty() const;
    bool wanted(const std::string& track);
    std::pair<int, int> track_ids(const std::string& track);
    void event(const std::string& text);
    void flow_event(std::uint64_t flow, bool end, int pid, int tid, Tick t);
};

// The process's recorder.
Tracer& tracer();

}  // namespace hcasim::sim
