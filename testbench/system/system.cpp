#include "testbench/system/system.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "host/driver/host_thread.hpp"
#include "model/sim/simulation_start.hpp"

namespace hcasim::testbench {

Node& Host::node() { return m_sys.node(m_index); }

void Host::put(const std::string& key, const std::vector<std::uint8_t>& value) {
    m_sys.m_oob.values[key] = value;
    m_sys.m_oob.changed.notify(sc_core::SC_ZERO_TIME);
}

std::vector<std::uint8_t> Host::get(const std::string& key) {
    for (;;) {
        auto it = m_sys.m_oob.values.find(key);
        if (it != m_sys.m_oob.values.end()) return it->second;
        sc_core::wait(m_sys.m_oob.changed);
    }
}

sim::Tick Host::read_clock() {
    const sim::Tick t = now();
    sleep(m_sys.m_clock_read);
    return t;
}

void Host::barrier(const std::string& name) {
    int& arrived = m_sys.m_oob.barriers[name];
    ++arrived;
    m_sys.m_oob.changed.notify(sc_core::SC_ZERO_TIME);
    while (m_sys.m_oob.barriers[name] < m_sys.m_programs) sc_core::wait(m_sys.m_oob.changed);
}

System::System(const sim::Config& cfg) : System(cfg, static_cast<int>(cfg.get_int("fabric.nodes"))) {}

System::System(const sim::Config& cfg, int nodes)
    : m_cfg(cfg), m_clock_read(sim::ns_to_ps(cfg.get_real("host.cpu.clock_read_ns"))) {
    sim::Log::set_level(cfg.get_choice("sim.log_level"));
    const std::string& topo = cfg.get_choice("fabric.topology");
    if (nodes < 1) throw sim::ConfigError("a system needs at least one node");
    if (topo == "back_to_back" && nodes > 2)
        throw sim::ConfigError("fabric.topology=back_to_back connects at most 2 nodes, not " + std::to_string(nodes) +
                               " (fabric.nodes=" + std::to_string(nodes) + "); use fabric.topology=switch");
    if (cfg.highest_node() >= nodes)
        throw sim::ConfigError("node" + std::to_string(cfg.highest_node()) + ".* sets a node the system does not have: " +
                               "it has " + std::to_string(nodes) + ", node0 to node" + std::to_string(nodes - 1) +
                               " (fabric.nodes)");
    m_sm = std::make_unique<fabric::SubnetManager>("subnet_manager", cfg);
    const int ports = static_cast<int>(cfg.get_int("port.count"));
    for (int i = 0; i < nodes; ++i) {
        // Port 1 of node i gets LID i + 1; a port 2 gets LID nodes + i + 1.
        const std::uint16_t lid = m_sm->assign_lid(i);
        const std::uint16_t lid2 = ports > 1 ? m_sm->assign_lid(nodes + i) : 0;
        try {
            m_nodes.push_back(
                std::make_unique<Node>(("node" + std::to_string(i)).c_str(), cfg.for_node(i), i, lid, lid2));
        } catch (const sim::ConfigError& e) {
            // Nodes built from values of their own: say which one cannot be.
            if (cfg.highest_node() < 0) throw;
            throw sim::ConfigError("node" + std::to_string(i) + ": " + e.what());
        }
        m_nodes.back()->driver().set_subnet_manager(m_sm.get());
        hca::Port& p1 = m_nodes.back()->hca().port(1);
        const auto gid = p1.gids().at(0);
        std::uint64_t guid = 0;
        for (int b = 8; b < 16; ++b) guid = guid << 8 | gid[static_cast<std::size_t>(b)];
        m_sm->record_port(guid, lid, p1.max_mtu());
    }
    // ib0 of every host: address N + 1 of the IPoIB subnet, host name nodeN.
    m_ipoib = host::parse_ip_subnet(cfg.get_text("ipoib.subnet"), nodes);
    for (int i = 0; i < nodes; ++i)
        m_ipoib.hosts.push_back({m_ipoib.network + static_cast<std::uint32_t>(i) + 1, "node" + std::to_string(i),
                                 &m_nodes[static_cast<std::size_t>(i)]->driver()});
    for (const auto& h : m_ipoib.hosts) h.driver->set_ip(&m_ipoib, h.ip, h.name);
    const double cable = cfg.get_real("link.cable_m");
    const double ns_per_m = cfg.get_real("link.ns_per_m");
    auto port_name = [](int node, unsigned num) {
        return "node" + std::to_string(node) + (num == 1 ? ".port" : ".port" + std::to_string(num));
    };
    if (topo == "back_to_back") {
        // Port n of one node to port n of the other.
        for (unsigned num = 1; nodes == 2 && num <= static_cast<unsigned>(ports); ++num) {
            auto link = std::make_unique<fabric::Link>(cable, ns_per_m);
            hca::Port& a = m_nodes[0]->hca().port(num);
            hca::Port& b = m_nodes[1]->hca().port(num);
            link->connect(&a, &b);
            a.attach(link.get());
            b.attach(link.get());
            m_ends.push_back({port_name(0, num), &a, &a, link.get()});
            m_ends.push_back({port_name(1, num), &b, &b, link.get()});
            m_links.push_back(std::move(link));
        }
    } else {
        // Every port on its own switch port: node i's port n on switch port
        // (n - 1) x nodes + i.
        const double rate = hca::link_rate(cfg).data_bytes_per_s();
        m_switch = std::make_unique<fabric::IbSwitch>("switch0", cfg, rate, nodes * ports);
        for (unsigned num = 1; num <= static_cast<unsigned>(ports); ++num) {
            std::vector<End> switch_ends;
            for (int i = 0; i < nodes; ++i) {
                const int sw_port = static_cast<int>(num - 1) * nodes + i;
                hca::Port& p = m_nodes[static_cast<std::size_t>(i)]->hca().port(num);
                auto link = std::make_unique<fabric::Link>(cable, ns_per_m);
                link->connect(&p, m_switch->port(sw_port));
                p.attach(link.get());
                m_switch->attach(sw_port, link.get());
                // The subnet manager's sweep finds the port on its switch port.
                m_sm->connect(p.lid(), *m_switch, sw_port);
                m_ends.push_back({port_name(i, num), &p, &p, link.get()});
                switch_ends.push_back({std::string(m_switch->name()) + ".port" + std::to_string(sw_port),
                                       m_switch->port(sw_port), nullptr, link.get()});
                m_links.push_back(std::move(link));
            }
            m_ends.insert(m_ends.end(), switch_ends.begin(), switch_ends.end());
        }
    }
    wire_faults();
    m_port_changes = fabric::scheduled_port_changes(m_cfg, nodes);
    std::stringstream all(m_cfg.get_text("fault.catastrophic"));
    for (std::string entry; std::getline(all, entry, ',');) {
        if (entry.empty()) continue;
        sim::Tick t = 0;
        int node = -1;
        if (!fabric::parse_node_at(entry, nodes, node, t))
            throw sim::ConfigError("invalid value '" + sim::printable(entry) +
                                   "' for fault.catastrophic: expected nodeN@TIME with N below " + std::to_string(nodes) +
                                   ", for example node0@100us");
        m_catastrophes.emplace_back(node, t);
    }
}

// What the subnet manager changes at c.at, and the events the ports raise.
void System::apply_port_change(const fabric::ScheduledPortChange& c) {
    const sim::Tick t = sim::now_ps();
    std::uint16_t sm_lid = 0;
    if (c.what == fabric::PortChange::SmLid) sm_lid = m_sm->hand_over();
    for (int i = 0; i < nodes(); ++i) {
        if (c.node >= 0 && c.node != i) continue;
        hca::Hca& h = m_nodes[static_cast<std::size_t>(i)]->hca();
        hca::Port& port = h.port();
        hca::AsyncEventType e = hca::AsyncEventType::ClientReregister;
        switch (c.what) {
        case fabric::PortChange::Lid:
            port.set_lid(m_sm->reassign_lid(port.lid()));
            e = hca::AsyncEventType::LidChange;
            break;
        case fabric::PortChange::PkeyTable:
            port.add_pkey(static_cast<std::uint16_t>(0x8000 | port.pkeys().size()));
            e = hca::AsyncEventType::PkeyChange;
            break;
        case fabric::PortChange::SmLid:
            port.set_sm_lid(sm_lid);
            e = hca::AsyncEventType::SmChange;
            break;
        case fabric::PortChange::ClientReregister: break;
        }
        h.raise_async(t, hca::AsyncEvent{e, 1});
    }
}

void System::schedule_subnet_and_device_events() {
    for (const auto& c : m_port_changes) m_sm->at(c.at, [this, c]() { apply_port_change(c); });
    for (const auto& [node, t] : m_catastrophes) {
        hca::Hca& h = m_nodes[static_cast<std::size_t>(node)]->hca();
        m_sm->at(t, [&h]() { h.fail_catastrophically(sim::now_ps()); });
    }
    m_port_changes.clear();
    m_catastrophes.clear();
}

// Fault injection: rates per transmitting element and link outages, each
// direction with its own generator seeded from sim.seed and its place.
void System::wire_faults() {
    const std::vector<End>& ends = m_ends;
    std::vector<std::string> names;
    for (const End& e : ends) names.push_back(e.name);
    fabric::check_fault_elements(m_cfg, names);
    const std::uint64_t seed = static_cast<std::uint64_t>(m_cfg.get_int("sim.seed"));
    for (std::size_t i = 0; i < ends.size(); ++i)
        ends[i].link->inject_faults(ends[i].endpoint, fabric::fault_rates(m_cfg, ends[i].name),
                                    seed * 0x9e3779b97f4a7c15ull + 0x1000 + i);
    for (const fabric::LinkOutage& o : fabric::link_outages(m_cfg)) {
        const auto e = std::find_if(ends.begin(), ends.end(), [&](const End& x) { return x.name == o.element; });
        fabric::Link* link = e->link;
        link->add_outage(o.start, o.duration);
        // The adapter ports at both ends of the link see it go down.
        for (const End& x : ends)
            if (x.link == link && x.port) m_outages.push_back({x.port, o.start, o.duration});
    }
}

System::~System() = default;

void System::run(const std::vector<Program>& programs, const std::vector<std::string>& names) {
    std::vector<std::string> errors(programs.size());
    std::vector<sim::Tick> failed_at(programs.size(), 0);
    std::vector<bool> finished(programs.size(), false);
    std::size_t first_failure = programs.size();
    auto describe = [&](std::size_t i) {
        const std::string node = "node" + std::to_string(i % m_nodes.size());
        const std::string name = i < names.size() && !names[i].empty() ? " (" + names[i] + ")" : "";
        return "host program " + std::to_string(i) + name + " on " + node;
    };
    m_programs = static_cast<int>(std::count_if(programs.begin(), programs.end(), [](const Program& p) { return bool(p); }));
    for (std::size_t i = 0; i < programs.size(); ++i) {
        if (!programs[i]) {
            finished[i] = true;
            continue;
        }
        const int node_index = static_cast<int>(i % m_nodes.size());
        ++m_running;
        sc_core::sc_spawn_options opts;
        opts.set_stack_size(8 << 20);
        sc_core::sc_spawn(
            [this, i, node_index, &programs, &errors, &failed_at, &finished, &first_failure]() {
                host::bind_current_thread(&m_nodes[static_cast<std::size_t>(node_index)]->driver(),
                                          static_cast<int>(i / m_nodes.size()));
                Host host(*this, node_index);
                bool failed = true;
                try {
                    programs[i](host);
                    failed = false;
                } catch (const sc_core::sc_unwind_exception&) {
                    throw;  // SystemC killing or resetting the thread: not a failure of the program
                } catch (const std::exception& e) {
                    errors[i] = e.what();
                } catch (...) {
                    errors[i] = "an exception that is not a std::exception";
                }
                if (failed) {
                    failed_at[i] = sim::now_ps();
                    if (sim::Log::enabled(sim::LogLevel::Info))
                        HCASIM_LOG(sim::LogLevel::Info, "system", "program " << i << " failed; hardware counters:\n" << counters());
                    // The other programs may wait for this one forever (a
                    // receive, a barrier, a spinning poll): end the run now.
                    if (first_failure == programs.size()) {
                        first_failure = i;
                        // The run's error says why it stopped; SystemC's own
                        // "stopped by user" note would only add noise.
                        sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
                        sc_core::sc_stop();
                    }
                }
                finished[i] = true;
                --m_running;
            },
            ("program" + std::to_string(i)).c_str(), &opts);
    }
    for (const PortOutage& o : m_outages) o.port->schedule_outage(o.start, o.duration);
    m_outages.clear();
    schedule_subnet_and_device_events();
    sim::start();
    if (first_failure < programs.size())
        throw std::runtime_error(describe(first_failure) + " failed at " +
                                 std::to_string(sim::ps_to_us(failed_at[first_failure])) + " us: " +
                                 errors[first_failure]);
    if (sim::Log::enabled(sim::LogLevel::Info) && std::any_of(finished.begin(), finished.end(), [](bool f) { return !f; }))
        HCASIM_LOG(sim::LogLevel::Info, "system", "hardware counters:\n" << counters());
    for (std::size_t i = 0; i < programs.size(); ++i) {
        if (!finished[i])
            throw std::runtime_error(describe(i) + " is blocked forever at " + std::to_string(sim::ps_to_us(sim::now_ps())) +
                                     " us (nothing left to wake it)");
    }
}

std::vector<std::pair<std::string, std::uint64_t>> System::counter_values() const {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    auto add_block = [&](const sim::Block* b) {
        for (const auto& [k, v] : b->counters()) out.emplace_back(b->path() + "." + k, v);
    };
    for (const auto& n : m_nodes) {
        for (const sim::Block* b : n->hca().blocks()) add_block(b);
        if (const hca::ControlProcessor* cp = n->hca().control_processor())
            out.emplace_back(std::string(n->hca().name()) + ".control_processor.busy_ns", cp->busy() / 1000);
        add_block(&n->pcie().block());
        add_block(&n->cm());
    }
    for (const sim::Block* b : fabric_blocks()) add_block(b);
    for (auto& kv : link_counters()) out.push_back(std::move(kv));
    for (int i = 0; i < nodes(); ++i) {
        for (auto& [k, v] : linux_port_counters(i)) out.emplace_back("node" + std::to_string(i) + ".ports.1." + k, v);
        // Each QP's counters that are not zero.
        for (const auto& [qpn, c] : m_nodes[static_cast<std::size_t>(i)]->hca().qp_counters())
            c.each([&](const char* name, std::uint64_t v) {
                if (v) out.emplace_back("node" + std::to_string(i) + ".qps." + std::to_string(qpn) + "." + name, v);
            });
        // A second port's own counters; the transport's are counted once,
        // under port 1.
        if (m_nodes[static_cast<std::size_t>(i)]->hca().port_count() < 2) continue;
        const std::string port2 = "node" + std::to_string(i) + ".hca.port2.";
        const std::string linux2 = "node" + std::to_string(i) + ".ports.2.counters.";
        out.emplace_back(linux2 + "port_xmit_data", counter(port2 + "tx_bytes") / 4);
        out.emplace_back(linux2 + "port_rcv_data", counter(port2 + "rx_bytes") / 4);
        out.emplace_back(linux2 + "port_xmit_packets", counter(port2 + "tx_packets"));
        out.emplace_back(linux2 + "port_rcv_packets", counter(port2 + "rx_packets"));
        out.emplace_back(linux2 + "port_xmit_discards", counter(port2 + "tx_dropped_link_down"));
    }
    return out;
}

std::string System::counters() const {
    std::ostringstream os;
    for (const auto& [k, v] : counter_values()) os << k << " = " << v << "\n";
    return os.str();
}

// The port counters (IBA PortCounters, as Linux names them in
// ports/N/counters) and the transport counters (as rdma_hw_stats names them
// in ports/N/hw_counters) of node n, from its blocks' counters.
std::vector<std::pair<std::string, std::uint64_t>> System::linux_port_counters(int n) const {
    const std::string hca = "node" + std::to_string(n) + ".hca.";
    auto c = [&](const char* block, const char* name) { return counter(hca + block + "." + name); };
    std::uint64_t rcv_errors = 0;
    for (const char* e : {"dropped_truncated", "dropped_bad_link_version", "dropped_bad_next_header",
                          "dropped_bad_length", "dropped_bad_vcrc", "dropped_bad_icrc",
                          "dropped_bad_transport_version", "dropped_bad_opcode", "dropped_bad_pad_count"})
        rcv_errors += c("rx_pipeline", e);
    return {
        // Data counters are in units of 4 octets, as the IBA defines them.
        {"counters.port_xmit_data", c("port", "tx_bytes") / 4},
        {"counters.port_rcv_data", c("port", "rx_bytes") / 4},
        {"counters.port_xmit_packets", c("port", "tx_packets")},
        {"counters.port_rcv_packets", c("port", "rx_packets")},
        {"counters.port_rcv_errors", rcv_errors},
        {"counters.port_xmit_discards", c("port", "tx_dropped_link_down")},
        {"counters.port_rcv_switch_relay_errors", c("rx_pipeline", "dropped_wrong_dlid")},
        {"hw_counters.local_ack_timeout_err", c("completer", "ack_timeouts")},
        {"hw_counters.packet_seq_err", c("completer", "sequence_naks_received")},
        {"hw_counters.implied_nak_seq_err", c("completer", "implied_naks")},
        {"hw_counters.rnr_nak_retry_err", c("completer", "rnr_naks_received")},
        {"hw_counters.req_remote_access_errors", c("completer", "access_naks_received")},
        {"hw_counters.req_remote_invalid_request", c("completer", "invalid_request_naks_received")},
        {"hw_counters.out_of_sequence", c("responder", "out_of_sequence") + c("responder", "lost_packet_gaps")},
        {"hw_counters.duplicate_request", c("responder", "duplicates") + c("responder", "duplicate_reads") +
                                              c("responder", "duplicate_atomics") + c("responder", "dropped_duplicates")},
        {"hw_counters.out_of_buffer", c("responder", "rnr_naks") + c("responder", "dropped_no_recv_wqe")},
        {"hw_counters.rx_write_requests", c("responder", "write_requests")},
        {"hw_counters.rx_read_requests", c("responder", "read_requests")},
        {"hw_counters.rx_atomic_requests", c("responder", "atomic_requests")},
        {"hw_counters.req_cqe_error", c("completion_engine", "req_cqe_errors")},
        {"hw_counters.req_cqe_flush_error", c("completion_engine", "req_cqe_flush_errors")},
        {"hw_counters.resp_cqe_error", c("completion_engine", "resp_cqe_errors")},
        {"hw_counters.resp_cqe_flush_error", c("completion_engine", "resp_cqe_flush_errors")},
    };
}

// What fault injection did on each link that has faults.
std::vector<std::pair<std::string, std::uint64_t>> System::link_counters() const {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (std::size_t i = 0; i < m_links.size(); ++i) {
        if (!m_links[i]->faulty()) continue;
        const fabric::Link::FaultCounts c = m_links[i]->fault_counts();
        const std::string p = "link" + std::to_string(i) + ".";
        out.emplace_back(p + "packets", m_links[i]->packets());
        out.emplace_back(p + "dropped", c.dropped);
        out.emplace_back(p + "corrupted", c.corrupted);
        out.emplace_back(p + "duplicated", c.duplicated);
        out.emplace_back(p + "lost_link_down", c.lost_link_down);
    }
    return out;
}

std::uint64_t System::packets_sent() const {
    // Read from the ports themselves: a workload asks at every wait.
    std::uint64_t n = 0;
    for (const auto& node : m_nodes)
        for (int p = 1; p <= node->hca().port_count(); ++p) {
            const auto& c = node->hca().port(static_cast<unsigned>(p)).counters();
            if (const auto it = c.find("tx_packets"); it != c.end()) n += it->second;
        }
    return n;
}

std::string System::losses() const {
    fabric::Link::FaultCounts f;
    for (const auto& l : m_links) {
        const fabric::Link::FaultCounts c = l->fault_counts();
        f.dropped += c.dropped;
        f.corrupted += c.corrupted;
        f.lost_link_down += c.lost_link_down;
    }
    std::vector<std::string> parts;
    auto packets = [](std::uint64_t n) { return std::to_string(n) + (n == 1 ? " packet" : " packets"); };
    if (f.dropped) parts.push_back("the links dropped " + packets(f.dropped));
    if (f.corrupted) parts.push_back("the links corrupted " + packets(f.corrupted));
    std::uint64_t down = f.lost_link_down;
    for (int i = 0; i < nodes(); ++i) {
        const std::string hca = "node" + std::to_string(i) + ".hca.";
        down += counter(hca + "port.tx_dropped_link_down") + counter(hca + "port2.tx_dropped_link_down");
    }
    if (down) parts.push_back(packets(down) + " met a link that was down");
    for (int i = 0; i < nodes(); ++i) {
        const std::uint64_t n = counter("node" + std::to_string(i) + ".hca.responder.dropped_no_recv_wqe");
        if (n)
            parts.push_back("node" + std::to_string(i) + " dropped " + std::to_string(n) +
                            (n == 1 ? " message that found" : " messages that found") + " no receive posted");
    }
    for (int i = 0; i < nodes(); ++i) {
        const std::string engine = "node" + std::to_string(i) + ".hca.completion_engine.";
        const std::uint64_t errors = counter(engine + "req_cqe_errors") + counter(engine + "resp_cqe_errors");
        if (errors)
            parts.push_back("node" + std::to_string(i) + " completed " + std::to_string(errors) +
                            (errors == 1 ? " work request" : " work requests") + " in error");
    }
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
    return out;
}

std::vector<const sim::Block*> System::fabric_blocks() const {
    std::vector<const sim::Block*> blocks;
    if (m_switch) blocks.push_back(m_switch.get());
    blocks.push_back(m_sm.get());
    return blocks;
}

std::uint64_t System::counter(const std::string& path) const {
    std::vector<const sim::Block*> blocks = fabric_blocks();
    for (const auto& n : m_nodes) {
        for (const sim::Block* b : n->hca().blocks()) blocks.push_back(b);
        blocks.push_back(&n->pcie().block());
        blocks.push_back(&n->cm());
    }
    for (const auto& [k, v] : link_counters())
        if (k == path) return v;
    for (const sim::Block* b : blocks) {
        if (path.rfind(b->path() + ".", 0) != 0) continue;
        auto it = b->counters().find(path.substr(b->path().size() + 1));
        if (it != b->counters().end()) return it->second;
    }
    return 0;
}

}  // namespace hcasim::testbench
