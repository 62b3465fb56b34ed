// The UC and UD data-integrity stress test: the RC one's workload
// (stress_workload.hpp) on unreliable QPs, 4 to 16 of them. UC: random
// chains of WRITE, WRITE_WITH_IMM, SEND and SEND_WITH_IMM of 0 B to 64 KiB
// (multi-packet at every path MTU). UD: SEND and SEND_WITH_IMM of 0 B up to
// the port's MTU into receive buffers that start with the GRH area, Q_Keys
// given or taken from the QP (bit 31). Each with and without a GRH on every
// packet. Every receive is posted before the peer sends for it, so on this
// lossless fabric nothing may be lost: every byte, every completion (UD:
// src_qp, slid, IBV_WC_GRH and the GRH itself) and every drop counter is
// checked. HCASIM_STRESS_SEEDS=N runs N seeds per case instead of the few
// below; HCASIM_STRESS_SEED=S replays seed S alone; HCASIM_STRESS_DUMP=1
// prints each plan.
#include <catch2/catch.hpp>

#include "testbench/integration/stress_workload.hpp"

using namespace hcasim::test;
using namespace hcasim::test::stress;

namespace {

Shape unreliable(ibv_qp_type type, bool global) {
    Shape shape;
    shape.qp_type = type;
    shape.global = global;
    shape.rnr_retry = 0;  // not used: UC and UD have no RNR
    shape.min_qps = 4;
    shape.max_qps = 16;
    shape.max_size = 64 * KiB;
    return shape;
}

}  // namespace

TEST_CASE("random uc traffic on 4 to 16 qps delivers every byte and every completion", "[stress][uc]") {
    run_seeds(unreliable(IBV_QPT_UC, false), 5001, 10);
}

TEST_CASE("random uc traffic with a grh on every packet delivers every byte and every completion", "[stress][uc]") {
    run_seeds(unreliable(IBV_QPT_UC, true), 6001, 10);
}

TEST_CASE("random ud datagrams on 4 to 16 qps deliver every byte and every completion with src_qp and slid",
          "[stress][ud]") {
    run_seeds(unreliable(IBV_QPT_UD, false), 7001, 10);
}

TEST_CASE("random ud datagrams with a grh deliver every byte, the grh and completions flagged IBV_WC_GRH",
          "[stress][ud]") {
    run_seeds(unreliable(IBV_QPT_UD, true), 8001, 10);
}

TEST_CASE("random uc and ud traffic through four transmit and two receive packet engines delivers every byte and "
          "every completion",
          "[stress][uc][ud][engines]") {
    for (ibv_qp_type type : {IBV_QPT_UC, IBV_QPT_UD}) {
        Shape shape = unreliable(type, false);
        shape.extra = {{"hca.tx_engines", "4"}, {"hca.rx_engines", "2"}};
        run_seeds(shape, type == IBV_QPT_UC ? 9101 : 9201, 4);
    }
}

TEST_CASE("random uc and ud traffic through a switch with link buffers of one packet delivers every byte and every "
          "completion, each send completing when its last packet has left",
          "[stress][flow_control]") {
    // Unacknowledged sends complete when their last packet leaves the
    // port, which with credits this scarce is after it waited for them.
    for (ibv_qp_type type : {IBV_QPT_UC, IBV_QPT_UD}) {
        Shape shape = unreliable(type, false);
        shape.extra = {{"port.vl_buffer_bytes", "4224"}, {"fabric.topology", "switch"}};
        run_seeds(shape, type == IBV_QPT_UC ? 9501 : 9601, 4);
    }
}

TEST_CASE("random uc and ud traffic through the rtl dma engine delivers every byte and every completion",
          "[stress][uc][ud][rtl]") {
    for (ibv_qp_type type : {IBV_QPT_UC, IBV_QPT_UD})
        for (bool global : {false, true}) {
            Shape shape = unreliable(type, global);
            shape.dma = "rtl";
            run_seeds(shape, 9001 + (type == IBV_QPT_UD ? 500 : 0) + (global ? 100 : 0), 3);
        }
}

// Long mode (hidden: run it by its tag): every configuration above with 40
// to 100 messages per stream, HCASIM_STRESS_SEEDS seeds each (25 if unset).
TEST_CASE("random uc and ud traffic on 4 to 16 qps delivers every byte and every completion (long mode)",
          "[.][stress-long]") {
    for (const char* dma : {"systemc", "rtl"})
        for (ibv_qp_type type : {IBV_QPT_UC, IBV_QPT_UD})
            for (bool global : {false, true}) {
                Shape shape = unreliable(type, global);
                shape.dma = dma;
                shape.min_msgs = 40;
                shape.max_msgs = 100;
                run_seeds(shape,
                          200000 + (dma[0] == 'r' ? 40000 : 0) + (type == IBV_QPT_UD ? 20000 : 0) + (global ? 10000 : 0),
                          25);
            }
}

// The same plan run twice: identical completions at identical times (a hash
// of every polled completion and when it was polled), counters and end time.
TEST_CASE("the same uc and ud random plans run twice give identical records", "[stress][determinism][uc][ud]") {
    for (ibv_qp_type type : {IBV_QPT_UC, IBV_QPT_UD}) {
        Shape shape = unreliable(type, true);
        shape.max_qps = 6;
        const Outcome a = run_twice_alike(make_plan(type == IBV_QPT_UC ? 5101 : 7101, shape));
        CHECK(a.run.num("polled.n0") > 0);
        CHECK(a.run.num("polled.n1") > 0);
    }
}

TEST_CASE("random uc and ud traffic posted with the ibv_wr_* calls and polled with ibv_start_poll delivers every byte "
          "and every completion",
          "[stress][uc][ud][verbs-ex]") {
    // UD datagrams name their address handle, QPN and Q_Key by
    // ibv_wr_set_ud_addr; completions are read field by field.
    for (ibv_qp_type type : {IBV_QPT_UC, IBV_QPT_UD}) {
        Shape shape = unreliable(type, type == IBV_QPT_UD);
        shape.extended_verbs = true;
        run_seeds(shape, type == IBV_QPT_UC ? 9901 : 9951, 3);
    }
}

TEST_CASE("random uc and ud traffic between two nodes with buses, adapters and host costs of their own delivers "
          "every byte and every completion",
          "[stress][uc][ud][node]") {
    // A slow receiver holds its link partner back (link-level flow control)
    // instead of dropping: nothing may be lost here either.
    for (ibv_qp_type type : {IBV_QPT_UC, IBV_QPT_UD}) {
        Shape shape = unreliable(type, type == IBV_QPT_UD);
        shape.unlike_nodes = true;
        run_seeds(shape, type == IBV_QPT_UC ? 11301 : 11401, 8);  // 11306, 11307 and 11404 put a node on PCI
    }
}

// Found by the case above: with a QP context cache of two entries, every
// entry can be held by other QPs' work, and a packet's context is then read
// without a place on chip, again for the next packet of its QP. A later read
// can end before an earlier one, and the RX pipeline handed the later packet
// on first: UC took a gap and a duplicate, UD filled receives in the wrong
// order (seeds 5004 and 7013 of these cases, on a lossless fabric). Packets
// waiting for their QP's context now go on in the order they came.
TEST_CASE("random uc and ud traffic through a qp context cache of two entries keeps every qp's messages in order",
          "[stress][uc][ud][context_cache]") {
    for (ibv_qp_type type : {IBV_QPT_UC, IBV_QPT_UD}) {
        Shape shape = unreliable(type, false);
        shape.extra = {{"hca.qpc_cache_entries", "2"}, {"hca.cqc_cache_entries", "1"}};
        run_seeds(shape, type == IBV_QPT_UC ? 5001 : 7010, 8);
    }
}
