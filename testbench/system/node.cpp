#include "testbench/system/node.hpp"

namespace hcasim::testbench {

Node::Node(const sc_core::sc_module_name& name, const sim::Config& cfg, int index, std::uint16_t lid,
           std::uint16_t lid2)
    : sc_core::sc_module(name),
      m_index(index),
      m_memory(cfg.get_real("host.memory_latency_ns")),
      m_bus(pcie::make_host_bus(cfg, m_memory)),
      m_hca("hca", cfg, *m_bus),
      m_fw(cfg, m_hca),
      m_cm("cm_agent", cfg, m_hca, m_fw) {
    m_hca.port(1).set_lid(lid);
    if (m_hca.port_count() > 1) m_hca.port(2).set_lid(lid2);
    host::DeviceInfo info;
    info.name = "hcasim0";
    info.node_guid = 0x0002c90300a0b000ull + static_cast<std::uint64_t>(index);
    info.lid = lid;
    // GIDs too: the default GID (link-local prefix fe80::/64) and one more
    // under the site-local subnet prefix fec0::/64, both with the port GUID.
    // Port 2's GUID is the node GUID plus 0x10000.
    auto gid = [&](std::uint64_t prefix, std::uint64_t port_guid) {
        hca::Port::Gid g{};
        for (int i = 0; i < 8; ++i) {
            g[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(prefix >> (56 - 8 * i));
            g[static_cast<std::size_t>(8 + i)] = static_cast<std::uint8_t>(port_guid >> (56 - 8 * i));
        }
        return g;
    };
    for (unsigned num = 1; num <= static_cast<unsigned>(m_hca.port_count()); ++num) {
        const std::uint64_t port_guid = info.node_guid + (std::uint64_t(num - 1) << 16);
        m_hca.port(num).set_gids({gid(0xfe80000000000000ull, port_guid), gid(0xfec0000000000000ull, port_guid)});
    }
    m_driver = std::make_unique<host::Driver>(info, m_hca, m_fw, host::HostCosts::from(cfg));
    m_driver->set_cm_agent(&m_cm);
    // The peer ended a VI's connection: the VI breaks and the host hears of it.
    m_cm.on_connection_lost([this](std::uint32_t qpn) {
        if (hca::QpContext* qp = m_hca.qp(qpn)) {
            const sim::Tick now = sim::now_ps();
            m_hca.raise_async(now, hca::AsyncEvent{hca::AsyncEventType::ViConnectionLost, qpn});
            m_hca.enter_error(*qp, now);
        }
    });
}

}  // namespace hcasim::testbench
