// The connect workload: N clients each connect M times to one server with
// rdma_cm (RC, RDMA_PS_TCP), send one message on each connection and
// disconnect. Every connection resolves its address and route, creates its
// QP and goes through REQ/REP/RTU and DREQ/DREP on the simulated fabric.
#pragma once

#include <ostream>
#include <vector>

#include "testbench/system/system.hpp"

namespace hcasim::testbench {

struct ConnectOptions {
    int clients = 1;       // on nodes 1..clients; the server is node 0
    int connections = 100;  // per client, one after another
};

struct ConnectResult {
    int connections = 0;
    double seconds = 0;             // simulated: first rdma_resolve_addr to last disconnection
    double per_second = 0;          // connections established per simulated second
    std::vector<double> setup_us;   // rdma_resolve_addr to ESTABLISHED, each connection, sorted
    std::vector<double> teardown_us;  // rdma_disconnect to DISCONNECTED, sorted
    double wall_seconds = 0;
};

// The system needs clients + 1 nodes.
ConnectResult run_connect(System& sys, const ConnectOptions& o);
void print_connect(std::ostream& os, bool csv, const ConnectOptions& o, const ConnectResult& r);

}  // namespace hcasim::testbench
