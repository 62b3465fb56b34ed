// The system builder: simulated hosts, their adapters and the fabric between
// them, and the host programs that run on them as SystemC threads. One System
// per process (SystemC elaborates once); run_isolated() gives tests a fresh
// process for each.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/fabric/ib_switch.hpp"
#include "model/fabric/link.hpp"
#include "model/fabric/subnet_manager.hpp"
#include "model/sim/config.hpp"
#include "testbench/system/node.hpp"

namespace hcasim::testbench {

class System;

// What a host program sees besides the verbs API: its node, simulated time,
// and an out-of-band channel to the other programs (the role a TCP socket
// plays for perftest: QP numbers, LIDs, addresses and rkeys).
class Host {
public:
    Host(System& sys, int index) : m_sys(sys), m_index(index) {}
    int index() const { return m_index; }
    Node& node();
    System& system() { return m_sys; }
    sim::Tick now() const { return sim::now_ps(); }
    void sleep(sim::Tick d) { if (d) sc_core::wait(sim::to_sc(d)); }
    // Reads the clock as a program does (perftest's get_cycles, a
    // clock_gettime): the time, then host.cpu.clock_read_ns of CPU time.
    sim::Tick read_clock();

    // Publishes bytes under key; get() blocks (in simulated time) until a
    // program has published it. Costs no simulated time.
    void put(const std::string& key, const std::vector<std::uint8_t>& value);
    std::vector<std::uint8_t> get(const std::string& key);
    template <typename T>
    void put_value(const std::string& key, const T& v) {
        const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
        put(key, std::vector<std::uint8_t>(p, p + sizeof v));
    }
    template <typename T>
    T get_value(const std::string& key) {
        T v{};
        const auto bytes = get(key);
        std::memcpy(&v, bytes.data(), std::min(bytes.size(), sizeof v));
        return v;
    }
    // Waits until every program of the run has reached the barrier with
    // this name (nodes without a program take no part).
    void barrier(const std::string& name);

private:
    System& m_sys;
    int m_index;
};

class System {
public:
    using Program = std::function<void(Host&)>;

    // fabric.nodes nodes, or as many as given (tests); node i's port gets
    // LID i + 1 from the subnet manager.
    explicit System(const sim::Config& cfg);
    System(const sim::Config& cfg, int nodes);
    ~System();

    // The class-wide configuration (with every node's own values, nodeN.*).
    const sim::Config& config() const { return m_cfg; }
    // What node i was built from: the class-wide values with its own.
    sim::Config node_config(int i) const { return m_cfg.for_node(i); }
    int nodes() const { return static_cast<int>(m_nodes.size()); }
    Node& node(int i) { return *m_nodes[static_cast<std::size_t>(i)]; }
    fabric::SubnetManager& subnet_manager() { return *m_sm; }
    // The hosts' IPoIB addresses and names.
    const host::IpSubnet& ip_subnet() const { return m_ipoib; }
    // Null in fabric.topology=back_to_back.
    fabric::IbSwitch* fabric_switch() { return m_switch.get(); }

    // Runs one program per node (index i on node i) until all return, then
    // lets the hardware drain. Throws if a program is left blocked forever
    // or throws itself: the first program that throws ends the run at once
    // (the others may be waiting for it forever), and the exception names
    // its node, the program (names[i] when given) and what it threw.
    void run(const std::vector<Program>& programs, const std::vector<std::string>& names = {});

    // Hardware counters of every block, "node0.hca.tx_pipeline.packets = 12",
    // then of each faulty link, then each node's port counters under the
    // names Linux gives them in sysfs ("node0.ports.1.counters.port_xmit_data",
    // "node0.ports.1.hw_counters.local_ack_timeout_err"), then each QP's
    // that are not zero ("node1.qps.65.duplicate_request").
    std::vector<std::pair<std::string, std::uint64_t>> counter_values() const;
    // counter_values() as "name = value" lines.
    std::string counters() const;
    std::uint64_t counter(const std::string& path) const;
    // Node n's port counters under their Linux names (without the prefix).
    std::vector<std::pair<std::string, std::uint64_t>> linux_port_counters(int n) const;
    // Packets the adapters' ports have sent so far, those a link lost or a
    // port dropped with its link down included: whether the fabric is still
    // carrying anything (StallWatch).
    std::uint64_t packets_sent() const;
    // What may have lost a message so far, for an error message: "the links
    // dropped 8 packets; node0 completed 1 work request in error", or empty.
    std::string losses() const;

private:
    friend class Host;
    // The switch (if any) and the subnet manager: their counters.
    std::vector<const sim::Block*> fabric_blocks() const;
    void wire_faults();
    void apply_port_change(const fabric::ScheduledPortChange& c);
    std::vector<std::pair<std::string, std::uint64_t>> link_counters() const;
    struct Oob {
        std::map<std::string, std::vector<std::uint8_t>> values;
        std::map<std::string, int> barriers;
        sc_core::sc_event changed;
    };

    sim::Config m_cfg;
    std::unique_ptr<fabric::SubnetManager> m_sm;
    host::IpSubnet m_ipoib;
    std::vector<std::unique_ptr<Node>> m_nodes;
    std::vector<std::unique_ptr<fabric::Link>> m_links;
    std::unique_ptr<fabric::IbSwitch> m_switch;
    // Each end of each link, named as fault keys name it ("node1.port",
    // "node1.port2", "switch0.port3"); the order seeds the fault generators.
    struct End {
        std::string name;
        const fabric::Endpoint* endpoint;
        hca::Port* port;  // null: a switch port
        fabric::Link* link;
    };
    std::vector<End> m_ends;
    Oob m_oob;
    // fault.link_down at the adapter ports, scheduled when the first run starts.
    struct PortOutage {
        hca::Port* port;
        sim::Tick start, duration;
    };
    std::vector<PortOutage> m_outages;
    // sm.* port changes and fault.catastrophic, scheduled with the outages.
    std::vector<fabric::ScheduledPortChange> m_port_changes;
    std::vector<std::pair<int, sim::Tick>> m_catastrophes;  // node, when
    void schedule_subnet_and_device_events();
    int m_running = 0;
    int m_programs = 0;  // programs of the current run (barrier participants)
    sim::Tick m_clock_read = 0;  // host.cpu.clock_read_ns
};

}  // namespace hcasim::testbench
