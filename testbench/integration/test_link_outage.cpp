// A link going down under an RC connection (fault.link_down): the adapters
// at both ends report the port's state change, and the connection either
// rides out the outage on retransmissions or, when the outage outlasts its
// retry budget, fails the request and flushes what follows.
#include <catch2/catch.hpp>

#include <cstring>

#include <nlohmann/json.hpp>

#include "testbench/integration/harness.hpp"

using namespace hcasim;
using namespace hcasim::test;

namespace {

constexpr sim::Tick kUs = sim::kPsPerUs;
constexpr sim::Tick kPostAt = 1000 * kUs;  // the writes are posted here, 10 us into the outage
constexpr sim::Tick kDownAt = kPostAt - 10 * kUs;
constexpr int kWrites = 8;
constexpr std::uint32_t kWriteBytes = 4096;
// Local ACK timeout 4.096 us x 2^10 = 4.19 ms; retry_cnt 7: about 33.6 ms
// before the request gives up.
constexpr std::uint8_t kTimeout = 10;

void sleep_until(Host& h, sim::Tick t) {
    if (h.now() < t) h.sleep(t - h.now());
}

// Records the next two async events (type and port) under key.0, key.1.
void record_port_events(Side& s, Record& rec, const std::string& key) {
    for (int i = 0; i < 2; ++i) {
        ibv_async_event ev{};
        const std::string k = key + "." + std::to_string(i);
        rec.num(k + ".rc", ibv_get_async_event(s.ctx, &ev));
        rec.num(k + ".type", static_cast<int>(ev.event_type));
        rec.num(k + ".port", ev.element.port_num);
        ibv_ack_async_event(&ev);
    }
}

int port_state(Side& s) {
    ibv_port_attr p{};
    if (ibv_query_port(s.ctx, 1, &p) != 0) return -1;
    return static_cast<int>(p.state);
}

// Node 0 writes kWrites patterned blocks to node 1 into an outage of the
// given length that started 10 us before they are posted.
RunResult run_outage(sim::Tick outage) {
    const std::string down = "node0.port@" + std::to_string(kDownAt / kUs) + "us+" + std::to_string(outage / kUs) + "us";
    const sim::Tick link_back = kDownAt + outage;
    return run_pair(
        {{"fault.link_down", down}},
        [link_back](Host& h, Record& rec) {
            Side s(h, {});
            ConnOptions c;
            c.timeout = kTimeout;
            s.connect("o", 1, c);
            fill_pattern(s.buf, kWrites * kWriteBytes, 77);
            sleep_until(h, kPostAt);
            for (int i = 0; i < kWrites; ++i)
                rec.num("post" + std::to_string(i),
                        s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(i * kWriteBytes, kWriteBytes)}, IBV_SEND_SIGNALED,
                                    static_cast<std::uint64_t>(i), s.remote_addr + i * kWriteBytes, s.remote_rkey));
            const auto w = s.poll(s.send_cq, kWrites, 1e6);
            rec.num("completions", w.size());
            rec.num("completed_at_us", static_cast<long long>(h.now() / kUs));
            for (std::size_t i = 0; i < w.size(); ++i) rec.wc("wc" + std::to_string(i), w[i]);
            rec.num("qp_state", static_cast<int>(qp_state(s.qps[0])));
            // A request posted to a QP in error is flushed.
            rec.num("late_post", s.post_send(s.qps[0], IBV_WR_RDMA_WRITE, {s.sge(0, 64)}, IBV_SEND_SIGNALED, 99,
                                             s.remote_addr, s.remote_rkey));
            if (qp_state(s.qps[0]) == IBV_QPS_ERR) {
                const auto late = s.poll(s.send_cq, 1, 1000);
                if (!late.empty()) rec.wc("late", late[0]);
            }
            sleep_until(h, link_back + 100 * kUs);
            record_port_events(s, rec, "req_event");
            rec.num("req_port_after", port_state(s));
            for (const auto& [k, v] : h.system().linux_port_counters(0)) rec.num("linux." + k, static_cast<long long>(v));
            h.barrier("done");
            s.close();
        },
        [link_back](Host& h, Record& rec) {
            Side s(h, {});
            ConnOptions c;
            c.timeout = kTimeout;
            s.connect("o", 0, c);
            sleep_until(h, kPostAt + 20 * kUs);
            rec.num("resp_port_during", port_state(s));
            sleep_until(h, link_back + 100 * kUs);
            rec.num("resp_port_after", port_state(s));
            record_port_events(s, rec, "resp_event");
            h.barrier("done");
            const std::vector<std::uint8_t> want = pattern(kWrites * kWriteBytes, 77);
            int blocks_intact = 0;
            for (int i = 0; i < kWrites; ++i)
                blocks_intact += std::equal(want.begin() + i * kWriteBytes, want.begin() + (i + 1) * kWriteBytes,
                                            s.buf + i * kWriteBytes);
            rec.num("blocks_intact", blocks_intact);
            s.close();
        });
}

void check_port_events(const RunResult& r) {
    for (const char* side : {"req_event", "resp_event"}) {
        const std::string k = side;
        CHECK(r.num(k + ".0.rc") == 0);
        CHECK(r.num(k + ".0.type") == IBV_EVENT_PORT_ERR);
        CHECK(r.num(k + ".0.port") == 1);
        CHECK(r.num(k + ".1.rc") == 0);
        CHECK(r.num(k + ".1.type") == IBV_EVENT_PORT_ACTIVE);
        CHECK(r.num(k + ".1.port") == 1);
    }
    CHECK(r.num("resp_port_during") == IBV_PORT_DOWN);
    CHECK(r.num("resp_port_after") == IBV_PORT_ACTIVE);
    CHECK(r.num("req_port_after") == IBV_PORT_ACTIVE);
}

}  // namespace

TEST_CASE("an rc connection rides out a link outage shorter than its retry budget and every byte arrives",
          "[integration][lossy][outage]") {
    const RunResult r = run_outage(6000 * kUs);  // 6 ms: two local ACK timeouts
    HCASIM_REQUIRE_RUN(r);
    for (int i = 0; i < kWrites; ++i) CHECK(r.num("post" + std::to_string(i)) == 0);
    REQUIRE(r.num("completions") == kWrites);
    for (int i = 0; i < kWrites; ++i) {
        CHECK(r.num("wc" + std::to_string(i) + ".status") == IBV_WC_SUCCESS);
        CHECK(r.unum("wc" + std::to_string(i) + ".wr_id") == static_cast<unsigned>(i));
    }
    // Not before the link came back (0.99 ms + 6 ms), and within one more timeout.
    CHECK(r.num("completed_at_us") >= 6990);
    CHECK(r.num("completed_at_us") < 6990 + 4200);
    CHECK(r.num("qp_state") == IBV_QPS_RTS);
    CHECK(r.num("blocks_intact") == kWrites);
    check_port_events(r);
    // What the port counters say: the timeouts, the packets lost at the
    // transmitter while the link was down, and no error completion.
    CHECK(r.num("linux.hw_counters.local_ack_timeout_err") >= 1);
    CHECK(r.num("linux.counters.port_xmit_discards") >= 1);
    CHECK(r.num("linux.hw_counters.req_cqe_error") == 0);
    CHECK(r.num("linux.hw_counters.req_cqe_flush_error") == 0);
}

TEST_CASE("a link outage longer than the retry budget fails the request with IBV_WC_RETRY_EXC_ERR and flushes the rest",
          "[integration][lossy][outage]") {
    const RunResult r = run_outage(100000 * kUs);  // 100 ms
    HCASIM_REQUIRE_RUN(r);
    REQUIRE(r.num("completions") == kWrites);
    CHECK(r.num("wc0.status") == IBV_WC_RETRY_EXC_ERR);
    CHECK(r.unum("wc0.wr_id") == 0);
    for (int i = 1; i < kWrites; ++i) {
        CHECK(r.num("wc" + std::to_string(i) + ".status") == IBV_WC_WR_FLUSH_ERR);
        CHECK(r.unum("wc" + std::to_string(i) + ".wr_id") == static_cast<unsigned>(i));
    }
    // retry_cnt 7: eight local ACK timeouts of 4.19 ms after the first send.
    CHECK(r.num("completed_at_us") >= 1000 + 8 * 4194);
    CHECK(r.num("completed_at_us") < 1000 + 9 * 4194);
    CHECK(r.num("qp_state") == IBV_QPS_ERR);
    CHECK(r.num("late_post") == 0);
    CHECK(r.num("late.status") == IBV_WC_WR_FLUSH_ERR);
    CHECK(r.unum("late.wr_id") == 99);
    CHECK(r.num("blocks_intact") == 0);
    check_port_events(r);
    // Eight timeouts: the first send and seven retries.
    CHECK(r.num("linux.hw_counters.local_ack_timeout_err") == 8);
    CHECK(r.num("linux.counters.port_xmit_discards") >= 8);
    CHECK(r.num("linux.hw_counters.req_cqe_error") == 1);
    CHECK(r.num("linux.hw_counters.req_cqe_flush_error") == kWrites - 1 + 1);
}

// Node 0 READs kReadBytes from node 1; the link goes down for a few
// microseconds while the answer streams back, so a run of its middle packets
// is lost and the packets after the outage arrive first.
constexpr std::uint32_t kReadBytes = 1 << 20;
constexpr sim::Tick kReadOutageAt = kPostAt + 50 * kUs;
constexpr sim::Tick kReadOutage = 5 * kUs;

RunResult run_read_outage() {
    const std::string down =
        "node0.port@" + std::to_string(kReadOutageAt / kUs) + "us+" + std::to_string(kReadOutage / kUs) + "us";
    return run_pair(
        {{"fault.link_down", down}},
        [](Host& h, Record& rec) {
            Side s(h, {});  // its 1 MiB buffer holds the READ
            ConnOptions c;
            c.timeout = kTimeout;
            s.connect("r", 1, c);
            std::memset(s.buf, 0, kReadBytes);
            sleep_until(h, kPostAt);
            rec.num("post", s.post_send(s.qps[0], IBV_WR_RDMA_READ, {s.sge(0, kReadBytes)}, IBV_SEND_SIGNALED, 7,
                                        s.remote_addr, s.remote_rkey));
            const auto w = s.poll(s.send_cq, 1, 1e6);
            rec.num("completions", w.size());
            if (!w.empty()) rec.wc("wc", w[0]);
            rec.num("completed_at_us", static_cast<long long>(h.now() / kUs));
            rec.num("qp_state", static_cast<int>(qp_state(s.qps[0])));
            rec.num("intact", std::memcmp(s.buf, pattern(kReadBytes, 91).data(), kReadBytes) == 0);
            for (const auto& [k, v] : h.system().linux_port_counters(0)) rec.num("linux." + k, static_cast<long long>(v));
            h.barrier("done");
            s.close();
        },
        [](Host& h, Record&) {
            Side s(h, {});  // its 1 MiB buffer holds the READ
            fill_pattern(s.buf, kReadBytes, 91);
            ConnOptions c;
            c.timeout = kTimeout;
            s.connect("r", 0, c);
            h.barrier("done");
            s.close();
        });
}

TEST_CASE("a READ whose answer loses packets in the middle asks at once for the rest of it, not after the ACK timeout",
          "[integration][lossy][outage]") {
    const RunResult r = run_read_outage();
    HCASIM_REQUIRE_RUN(r);
    CHECK(r.num("post") == 0);
    REQUIRE(r.num("completions") == 1);
    CHECK(r.num("wc.status") == IBV_WC_SUCCESS);
    CHECK(r.unum("wc.wr_id") == 7);
    CHECK(r.unum("wc.byte_len") == kReadBytes);
    CHECK(r.num("intact") == 1);
    CHECK(r.num("qp_state") == IBV_QPS_RTS);
    // The first packet after the outage shows the gap: the READ is asked
    // again from the first missing packet, once, and no ACK timeout (4.19 ms)
    // is needed.
    CHECK(r.num("linux.hw_counters.implied_nak_seq_err") == 1);
    CHECK(r.num("linux.hw_counters.local_ack_timeout_err") == 0);
    CHECK(r.num("completed_at_us") < static_cast<long long>(kPostAt / kUs) + 4194);
    CHECK(r.num("linux.hw_counters.req_cqe_error") == 0);
}

TEST_CASE("hcasim --counters prints the linux port counters in text and, with --format json, as a json line",
          "[integration][cli][counters]") {
    const std::string lossy = "bw --sizes 4096 -n 400 --set fault.drop=0.02 --counters";
    const auto text = run_hcasim(lossy);
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("node0.ports.1.counters.port_xmit_packets = ") != std::string::npos);
    CHECK(text.out.find("node1.ports.1.hw_counters.rx_write_requests = 400\n") != std::string::npos);
    CHECK(text.out.find("link0.dropped = ") != std::string::npos);
    const auto json = run_hcasim(lossy + " --format json");
    REQUIRE(json.exit_code == 0);
    const auto nl = json.out.find('\n');
    REQUIRE(nl != std::string::npos);
    nlohmann::json results, counters;
    REQUIRE_NOTHROW(results = nlohmann::json::parse(json.out.substr(0, nl)));
    REQUIRE_NOTHROW(counters = nlohmann::json::parse(json.out.substr(nl + 1)));
    CHECK(results.contains("rows"));
    const auto& c = counters.at("counters");
    CHECK(c.at("node1.ports.1.hw_counters.rx_write_requests").get<int>() == 400);
    CHECK(c.at("link0.dropped").get<long long>() > 0);
    // Every packet sent either arrived or was lost on the link.
    CHECK(c.at("node0.ports.1.counters.port_xmit_packets").get<long long>() +
              c.at("node1.ports.1.counters.port_xmit_packets").get<long long>() ==
          c.at("node0.ports.1.counters.port_rcv_packets").get<long long>() +
              c.at("node1.ports.1.counters.port_rcv_packets").get<long long>() + c.at("link0.dropped").get<long long>());
    // The JSON and the text carry the same values.
    CHECK(text.out.find("node0.ports.1.counters.port_xmit_data = " +
                        std::to_string(c.at("node0.ports.1.counters.port_xmit_data").get<long long>()) + "\n") !=
          std::string::npos);
}

TEST_CASE("hcasim --counters gives each qp its own counters, which add up to the port's", "[integration][cli][counters]") {
    const auto json = run_hcasim("bw --sizes 4096 -n 300 -q 3 --set fault.drop=0.02 --counters --format json");
    REQUIRE(json.exit_code == 0);
    const auto nl = json.out.find('\n');
    REQUIRE(nl != std::string::npos);
    nlohmann::json counters;
    REQUIRE_NOTHROW(counters = nlohmann::json::parse(json.out.substr(nl + 1)));
    const auto& c = counters.at("counters");
    // name -> per-QP values of that counter on node n
    auto per_qp = [&](int n, const std::string& name) {
        std::vector<long long> v;
        const std::string prefix = "node" + std::to_string(n) + ".qps.";
        for (auto it = c.begin(); it != c.end(); ++it) {
            const std::string& k = it.key();
            if (k.rfind(prefix, 0) == 0 && k.size() > name.size() && k.compare(k.size() - name.size() - 1, std::string::npos, "." + name) == 0)
                v.push_back(it.value().get<long long>());
        }
        return v;
    };
    auto sum = [](const std::vector<long long>& v) {
        long long s = 0;
        for (long long x : v) s += x;
        return s;
    };
    const auto writes = per_qp(1, "rx_write_requests");
    REQUIRE(writes.size() == 3);
    for (long long w : writes) CHECK(w == 300);
    CHECK(sum(writes) == c.at("node1.ports.1.hw_counters.rx_write_requests").get<long long>());
    for (const char* name : {"local_ack_timeout_err", "packet_seq_err", "implied_nak_seq_err"}) {
        INFO(name);
        CHECK(sum(per_qp(0, name)) == c.at(std::string("node0.ports.1.hw_counters.") + name).get<long long>());
    }
    CHECK(sum(per_qp(0, "local_ack_timeout_err")) + sum(per_qp(0, "packet_seq_err")) +
              sum(per_qp(0, "implied_nak_seq_err")) > 0);
    for (const char* name : {"out_of_sequence", "duplicate_request"}) {
        INFO(name);
        CHECK(sum(per_qp(1, name)) == c.at(std::string("node1.ports.1.hw_counters.") + name).get<long long>());
    }
    // The receiver's QPs sent nothing: no requester counters.
    CHECK(per_qp(1, "local_ack_timeout_err").empty());
}
