#include "model/fabric/link.hpp"

#include <cstring>
#include <set>
#include <sstream>

namespace hcasim::fabric {

void declare_link_params(sim::ParamRegistry& r) {
    using K = sim::ParamSpec::Kind;
    r.add({"link.cable_m", K::Real, "m", "1", 0, 10000, {}, "cable length of every link",
           "short copper cable between back-to-back hosts or host and switch"});
    r.add({"link.ns_per_m", K::Real, "ns/m", "5", 1, 10, {}, "signal propagation delay per metre",
           "about 5 ns per metre (calibration-facts: cable propagation)"});
    const char* src = "fault injection: 0 is a lossless fabric";
    r.add({"fault.drop", K::Real, "probability", "0", 0, 1, {},
           "each packet on each link direction is lost with this probability", src});
    r.add({"fault.corrupt", K::Real, "probability", "0", 0, 1, {},
           "each packet on each link direction has one bit flipped (the receiver's CRC check drops it)", src});
    r.add({"fault.duplicate", K::Real, "probability", "0", 0, 1, {},
           "each packet on each link direction is delivered twice", src});
    r.add({"fault.*.drop", K::Real, "probability", "0", 0, 1, {},
           "fault.drop for the packets one element sends (node1.port, switch0.port3)", src});
    r.add({"fault.*.corrupt", K::Real, "probability", "0", 0, 1, {},
           "fault.corrupt for the packets one element sends", src});
    r.add({"fault.*.duplicate", K::Real, "probability", "0", 0, 1, {},
           "fault.duplicate for the packets one element sends", src});
    sim::ParamSpec down{"fault.link_down", K::Text, "", "", 0, 0, {},
                        "ELEMENT@START+DURATION (times with ns, us, ms or s): the link at ELEMENT loses every packet "
                        "both ways meanwhile and its adapter ports report the port down; repeatable",
                        src};
    down.list = true;
    r.add(down);
}

const sim::ParamDeclarations kParams{sim::param_rank::kModel + 40, "fabric.link", declare_link_params};

FaultRates fault_rates(const sim::Config& cfg, const std::string& element) {
    auto rate = [&](const char* what) {
        const std::string own = "fault." + element + "." + what;
        return cfg.get_real(cfg.has(own) ? own : std::string("fault.") + what);
    };
    return FaultRates{rate("drop"), rate("corrupt"), rate("duplicate")};
}

std::vector<LinkOutage> link_outages(const sim::Config& cfg) {
    std::vector<LinkOutage> out;
    std::stringstream all(cfg.get_text("fault.link_down"));
    for (std::string entry; std::getline(all, entry, ',');) {
        if (entry.empty()) continue;
        const std::size_t at = entry.find('@');
        const std::size_t plus = entry.find('+', at == std::string::npos ? 0 : at);
        LinkOutage o;
        if (at == std::string::npos || plus == std::string::npos || at == 0 ||
            !sim::parse_time_with_unit(entry.substr(at + 1, plus - at - 1), o.start) ||
            !sim::parse_time_with_unit(entry.substr(plus + 1), o.duration))
            throw sim::ConfigError("invalid value '" + sim::printable(entry) +
                                   "' for fault.link_down: expected ELEMENT@START+DURATION, for example "
                                   "node1.port@10us+5us");
        o.element = entry.substr(0, at);
        out.push_back(o);
    }
    return out;
}

void check_fault_elements(const sim::Config& cfg, const std::vector<std::string>& elements) {
    const std::set<std::string> known(elements.begin(), elements.end());
    auto list = [&]() {
        std::string s;
        for (const auto& e : elements) s += (s.empty() ? "" : ", ") + e;
        return s;
    };
    for (const auto& [key, value] : cfg.values()) {
        if (key.rfind("fault.", 0) != 0) continue;
        for (const char* what : {".drop", ".corrupt", ".duplicate"}) {
            const std::size_t n = std::strlen(what);
            if (key.size() <= 6 + n || key.compare(key.size() - n, n, what) != 0) continue;
            const std::string element = key.substr(6, key.size() - 6 - n);
            if (!known.count(element))
                throw sim::ConfigError("unknown element '" + sim::printable(element) + "' in " + sim::printable(key) +
                                       ": expected one of " + list());
        }
    }
    for (const auto& o : link_outages(cfg))
        if (!known.count(o.element))
            throw sim::ConfigError("unknown element '" + sim::printable(o.element) +
                                   "' in fault.link_down: expected one of " + list());
}

void Link::inject_faults(const Endpoint* from, const FaultRates& rates, std::uint64_t seed) {
    if (!rates.any()) return;
    Direction& d = m_dir[from == m_a ? 0 : 1];
    d.rates = rates;
    d.random = std::make_unique<sim::Random>(seed);
    m_faulty = true;
}

void Link::add_outage(sim::Tick start, sim::Tick duration) {
    m_down.emplace_back(start, start + duration);
    m_faulty = true;
}

bool Link::up_at(sim::Tick t) const {
    for (const auto& [start, end] : m_down)
        if (t >= start && t < end) return false;
    return true;
}

void Link::faulty_send(Direction& d, Endpoint* from, Endpoint* to, packet::PacketPtr pkt, sim::Tick first_bit,
                       sim::Tick last_bit) {
    // A lost packet's credits come back to its sender when it would have
    // arrived: the receiver's next flow-control packet is computed from the
    // sender's count of blocks sent, so nothing stays lost (IBA 7.9.4).
    const auto bytes = static_cast<std::uint32_t>(pkt->bytes.size());
    if (!up_at(first_bit - m_delay) || !up_at(last_bit)) {
        ++d.counts.lost_link_down;
        from->credits_returned(bytes, last_bit);
        return;
    }
    if (d.random) {
        sim::Random& r = *d.random;
        if (r.chance(d.rates.drop)) {
            ++d.counts.dropped;
            from->credits_returned(bytes, last_bit);
            return;
        }
        if (r.chance(d.rates.corrupt) && !pkt->bytes.empty()) {
            packet::PacketPtr copy = m_copies.make(pkt->bytes.size());
            std::memcpy(copy->bytes.data(), pkt->bytes.data(), pkt->bytes.size());
            const std::uint64_t bit = r.below(copy->bytes.size() * 8);
            copy->bytes[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
            pkt = std::move(copy);
            ++d.counts.corrupted;
        }
        if (r.chance(d.rates.duplicate)) {
            ++d.counts.duplicated;
            to->arrive(pkt, first_bit, last_bit);
        }
    }
    to->arrive(std::move(pkt), first_bit, last_bit);
}

Link::FaultCounts Link::fault_counts() const {
    FaultCounts c;
    for (const Direction& d : m_dir) {
        c.dropped += d.counts.dropped;
        c.corrupted += d.counts.corrupted;
        c.duplicated += d.counts.duplicated;
        c.lost_link_down += d.counts.lost_link_down;
    }
    return c;
}

}  // namespace hcasim::fabric
