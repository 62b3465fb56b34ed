// The random plans of the KVIPL stress tests: chains of sends, RDMA writes
// and RDMA reads (with and without immediate data, some fenced) of random
// sizes, gathered from and scattered to random segments at odd offsets, and
// the checks of what a descriptor that completes them must hold.
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "host/kvipl/kvipl.h"
#include "testbench/integration/harness.hpp"
#include "testbench/system/split_mix.hpp"

namespace hcasim::test {

enum class ViOp { Send, Write, Read };

struct Segment {
    std::size_t off;  // in the node's data area of the VI
    std::uint32_t len;
};

struct ViMsg {
    ViOp op = ViOp::Send;
    bool imm = false;
    bool fence = false;
    std::uint32_t imm_data = 0;
    std::uint32_t len = 0;
    std::vector<Segment> local;  // on the sender: gathered (send, write) or scattered (read)
    std::size_t remote = 0;      // on the receiver: write destination or read source
    std::vector<Segment> recv;   // the receive descriptor it consumes (send, write with immediate)
    bool consumes_receive() const { return op == ViOp::Send || (op == ViOp::Write && imm); }
};

struct ViStream {
    std::vector<ViMsg> msgs;
    std::size_t sender_bytes = 0, receiver_bytes = 0;
    int receives = 0;
};

constexpr std::size_t kMaxLocalSegments = 8;
constexpr std::size_t kMaxRecvSegments = 4;

inline std::uint32_t draw_len(testbench::SplitMix64& r) {
    const std::uint64_t c = r.below(100);
    if (c < 5) return 0;
    if (c < 35) return static_cast<std::uint32_t>(r.range(1, 256));
    if (c < 65) return static_cast<std::uint32_t>(r.range(257, 8192));
    if (c < 93) return static_cast<std::uint32_t>(r.range(8193, 65536));
    return static_cast<std::uint32_t>(r.range(65537, 262144));
}

// len bytes cut into up to max_segs segments at odd places from cursor on.
inline std::vector<Segment> draw_segments(testbench::SplitMix64& r, std::uint32_t len, std::size_t max_segs, std::size_t& cursor,
                                   std::uint32_t slack) {
    std::vector<Segment> segs;
    if (len == 0 && slack == 0) return segs;
    const std::size_t n = len == 0 ? 1 : std::min<std::size_t>(r.range(1, max_segs), len);
    std::uint32_t left = len;
    for (std::size_t i = 0; i < n; ++i) {
        cursor += r.below(48);  // an odd gap: segments start anywhere
        std::uint32_t l = i + 1 == n ? left : static_cast<std::uint32_t>(r.range(1, left - (n - 1 - i)));
        left -= l;
        if (i + 1 == n) l += slack;
        segs.push_back({cursor, l});
        cursor += l;
    }
    return segs;
}

// One VI's chain from one node to the other.
inline ViStream draw_stream(testbench::SplitMix64& r, bool reads) {
    ViStream v;
    const std::size_t n = r.range(4, 30);
    std::size_t s_cur = r.below(64), r_cur = r.below(64);
    bool after_read = false;
    for (std::size_t i = 0; i < n; ++i) {
        ViMsg m;
        const std::uint64_t c = r.below(100);
        m.op = c < 45 ? ViOp::Send : (c < 75 || !reads) ? ViOp::Write : ViOp::Read;
        m.len = draw_len(r);
        if (m.op != ViOp::Send && m.len == 0) m.len = 1;
        m.imm = m.op != ViOp::Read && r.chance(30);
        m.imm_data = static_cast<std::uint32_t>(r.next());
        // A fence waits for the reads before it.
        m.fence = after_read && r.chance(30);
        m.local = draw_segments(r, m.len, kMaxLocalSegments, s_cur, 0);
        if (m.op != ViOp::Send) {
            r_cur += r.below(48);
            m.remote = r_cur;
            r_cur += m.len;
        }
        if (m.consumes_receive()) {
            // Room to spare in some: the length is what arrived.
            const auto slack = static_cast<std::uint32_t>(r.chance(30) ? r.range(1, 100) : 0);
            m.recv = draw_segments(r, m.op == ViOp::Send ? m.len : 0, kMaxRecvSegments, r_cur, slack);
            ++v.receives;
        }
        after_read = after_read || m.op == ViOp::Read;
        v.msgs.push_back(m);
    }
    v.sender_bytes = s_cur + 64;
    v.receiver_bytes = r_cur + 64;
    return v;
}

// On an unreliable VI over lossy links a lost message leaves its receive
// descriptor to the next message that arrives whole, so each receive gets
// room for the longest message that may still take it: the longest
// consuming one from its own on. The new segments follow the receiver's
// area; what the stream drew for them before stays unused.
inline void widen_receives(testbench::SplitMix64& r, ViStream& v) {
    std::size_t cursor = v.receiver_bytes;
    std::uint32_t longest = 0;
    for (auto m = v.msgs.rbegin(); m != v.msgs.rend(); ++m) {
        if (!m->consumes_receive()) continue;
        longest = std::max(longest, m->op == ViOp::Send ? m->len : 0u);
        m->recv = draw_segments(r, longest, kMaxRecvSegments, cursor, static_cast<std::uint32_t>(r.below(64)));
    }
    v.receiver_bytes = cursor + 64;
}

inline KVIP_ULONG status_of(const ViMsg& m) {
    const KVIP_ULONG op = m.op == ViOp::Send    ? KVIP_STATUS_OP_SEND
                          : m.op == ViOp::Write ? KVIP_STATUS_OP_RDMA_WRITE
                                                : KVIP_STATUS_OP_RDMA_READ;
    return KVIP_STATUS_DONE | op | (m.imm ? KVIP_STATUS_IMMEDIATE : 0);
}

inline std::string where(int from, std::size_t vi, std::size_t j, const ViMsg& m) {
    std::ostringstream os;
    os << "VI " << vi << " descriptor " << j << " from node " << from << " ("
       << (m.op == ViOp::Send ? "send" : m.op == ViOp::Write ? "RDMA write" : "RDMA read") << (m.imm ? " with immediate" : "")
       << (m.fence ? ", fenced" : "") << ", " << m.len << " B, " << m.local.size() << " segments)";
    return os.str();
}

// The bytes of segs in order from data.
inline std::vector<std::uint8_t> gather(const std::uint8_t* data, const std::vector<Segment>& segs, std::uint32_t len) {
    std::vector<std::uint8_t> out;
    out.reserve(len);
    for (const auto& s : segs) out.insert(out.end(), data + s.off, data + s.off + s.len);
    out.resize(len);
    return out;
}

}  // namespace hcasim::test
