#include "model/hca/descriptor_engine.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace hcasim::hca {

std::uint32_t vi_error_bits(CqeStatus s) {
    switch (s) {
    case CqeStatus::Success: return 0;
    case CqeStatus::LocalLength: return kViStatusLengthError;
    case CqeStatus::LocalQpOperation: return kViStatusFormatError;
    case CqeStatus::LocalProtection:
    case CqeStatus::LocalAccess: return kViStatusProtectionError;
    case CqeStatus::WrFlush: return kViStatusFlushed;
    case CqeStatus::MemoryManagement: return kViStatusFormatError;  // no VI operation gives it
    case CqeStatus::RemoteAccess: return kViStatusRdmaProtError;
    case CqeStatus::RemoteInvalidRequest:
    case CqeStatus::RemoteOperation: return kViStatusRemoteDescError;
    case CqeStatus::BadResponse:
    case CqeStatus::RetryExceeded:
    case CqeStatus::RnrRetryExceeded:
    case CqeStatus::RemoteAborted:
    case CqeStatus::GeneralError:
    case CqeStatus::FatalError: return kViStatusTransportError;
    }
    return kViStatusTransportError;
}

std::uint32_t vi_op_bits(WqeOpcode op) {
    switch (op) {
    case WqeOpcode::Send: return kViStatusOpSend;
    case WqeOpcode::SendImm: return kViStatusOpSend | kViStatusImmediate;
    case WqeOpcode::RdmaWrite: return kViStatusOpRdmaWrite;
    case WqeOpcode::RdmaWriteImm: return kViStatusOpRdmaWrite | kViStatusImmediate;
    case WqeOpcode::RdmaRead: return kViStatusOpRdmaRead;
    case WqeOpcode::AtomicCompareSwap:
    case WqeOpcode::AtomicFetchAdd:
    case WqeOpcode::BindWindow:
    case WqeOpcode::LocalInvalidate:
    case WqeOpcode::SendInvalidate: break;  // not VI operations
    }
    return kViStatusOpSend;
}

DescriptorEngine::DescriptorEngine(const sc_core::sc_module_name& name, const HcaParams& p, Wiring w)
    : sim::Block(name, sim::Clock::from_mhz("hca.core", p.core_clock_mhz)), m_w(w), m_p(p), m_parser(&m_clock) {}

void DescriptorEngine::posted(QpContext& qp, bool recv, const ViDoorbellToken& tok, sim::Tick t) {
    ViQueue& q = recv ? qp.desc.rq : qp.desc.sq;
    counter(recv ? "recv_doorbells" : "send_doorbells")++;
    q.posted.push_back(tok);
    ++q.outstanding;
    if (recv) ++qp.fetch.rq_pi; else ++qp.fetch.sq_pi;
    if (qp.qpc.state == QpState::Err) {
        // A VI in the error state completes what is posted to it as flushed.
        flush(qp, t);
        return;
    }
    if (q.outstanding > m_p.vi_max_descriptors) {
        counter("overruns")++;
        HCASIM_LOG(sim::LogLevel::Info, path(), "VI " << qp.qpn << (recv ? " receive" : " send") << " queue overrun: more than "
                                                      << m_p.vi_max_descriptors << " descriptors posted");
        m_w.errors.raise_async(t, AsyncEvent{AsyncEventType::ViOverrun, qp.qpn, tok.addr, 0, recv});
        m_w.errors.enter_error(qp, t);
        return;
    }
    fetch(qp, recv, t);
}

void DescriptorEngine::arm(QpContext& qp, bool recv) { (recv ? qp.desc.rq : qp.desc.sq).armed = true; }

void DescriptorEngine::post_descriptor_error(QpContext& qp, bool recv, std::uint64_t addr, sim::Tick t,
                                             const char* why) {
    counter("post_descriptor_errors")++;
    HCASIM_LOG(sim::LogLevel::Info, path(), "VI " << qp.qpn << " descriptor at 0x" << std::hex << addr << std::dec
                                                  << ": " << why);
    ViQueue& q = recv ? qp.desc.rq : qp.desc.sq;
    // The descriptor cannot be written back: it is dropped from the queue.
    q.posted.pop_front();
    if (q.outstanding) --q.outstanding;
    if (recv) ++qp.fetch.rq_fetched; else ++qp.fetch.sq_fetched;
    m_w.errors.raise_async(t, AsyncEvent{AsyncEventType::ViPostDescriptor, qp.qpn, addr, 0, recv});
    m_w.errors.enter_error(qp, t);
}

bool DescriptorEngine::locate(QpContext& qp, ViQueue& q, bool recv, sim::Tick& t, std::uint64_t& addr,
                              std::uint32_t& handle) {
    const ViDoorbellToken tok = q.posted.front();
    if (tok.chain_start || q.last_addr == 0) {
        addr = tok.addr;
        handle = tok.handle;
    } else {
        // What the last descriptor said is known only once it is on chip.
        t = std::max(t, q.last_ready);
        if (q.next_addr == 0) {
            // The Next field was still empty when the last descriptor was
            // read (it was linked after): read it again.
            m_spans.clear();
            const Translation tr =
                m_w.translation.translate(t, q.last_handle, qp.qpc.pdn, q.last_addr, kViNextBytes, 0, m_spans);
            if (tr.status != Protection::Ok) {
                post_descriptor_error(qp, recv, tok.addr, tr.ready, "the descriptor it follows is no longer registered");
                return false;
            }
            std::uint8_t next[kViNextBytes];
            t = m_w.dma.read(tr.ready, m_spans.data(), m_spans.size(), next);
            std::memcpy(&q.next_addr, next, 8);
            std::memcpy(&q.next_handle, next + 8, 4);
            counter("next_rereads")++;
        }
        addr = q.next_addr;
        handle = q.next_handle;
        if (addr != tok.addr || handle != tok.handle) {
            post_descriptor_error(qp, recv, tok.addr, t, "Next/NextHandle of the previous descriptor changed after posting");
            return false;
        }
    }
    if (addr % kViDescAlign != 0) {
        post_descriptor_error(qp, recv, addr, t, "not aligned on 64 bytes");
        return false;
    }
    return true;
}

void DescriptorEngine::fetch(QpContext& qp, bool recv, sim::Tick t, bool demand) {
    ViQueue& q = recv ? qp.desc.rq : qp.desc.sq;
    demand = demand && recv && qp.fetch.rq_cache.empty();
    while ((q.fetching < m_p.vi_fetch_depth || demand) && !q.posted.empty()) {
        demand = false;
        // An Idle VI keeps its descriptors until it is connected.
        if (recv ? (qp.qpc.state != QpState::Rtr && qp.qpc.state != QpState::Rts) : qp.qpc.state != QpState::Rts) return;
        if (recv ? qp.fetch.rq_cache.size() >= m_p.rq_prefetch_depth
                 : qp.req.send_q.size() - qp.req.tx_index >= m_p.wqe_fetch_batch)
            return;
        std::uint64_t addr = 0;
        std::uint32_t handle = 0;
        // The doorbell gave the address: the fetch starts now; following the
        // chain only confirms it (locate may wait for the last descriptor).
        sim::Tick check = t;
        if (!locate(qp, q, recv, check, addr, handle)) return;  // reported; the VI is in error now
        const sim::Tick ready = (q.posted.front().chain_start || q.fetching == 0) ? check : t;

        // The control segment and the first two segments come in one 64-byte
        // read when the region holds them; further segments in a second one.
        Fetched f;
        f.addr = addr;
        f.handle = handle;
        m_spans.clear();
        Translation tr = m_w.translation.translate(ready, handle, qp.qpc.pdn, addr, kViDescAlign, kLocalWrite, m_spans);
        std::uint32_t first = kViDescAlign;
        if (tr.status == Protection::OutOfBounds) {
            m_spans.clear();
            first = sizeof(ViCtrlSeg);
            tr = m_w.translation.translate(ready, handle, qp.qpc.pdn, addr, first, kLocalWrite, m_spans);
        }
        if (tr.status != Protection::Ok) {
            post_descriptor_error(qp, recv, addr, tr.ready,
                                  tr.status == Protection::PdMismatch ? "protection tag of its memory differs from the VI's"
                                                                      : "memory handle does not cover it");
            return;
        }
        std::uint8_t head[kViDescAlign];
        sim::Tick done = m_w.dma.read(tr.ready, m_spans.data(), m_spans.size(), head);
        std::memcpy(&f.ctrl, head, sizeof f.ctrl);
        if (f.ctrl.seg_count > m_p.vi_max_segments) {
            f.error |= kViStatusFormatError;
        } else {
            const std::uint32_t need = static_cast<std::uint32_t>(sizeof(ViCtrlSeg)) + 16u * f.ctrl.seg_count;
            std::vector<std::uint8_t> body(need);
            std::memcpy(body.data(), head, std::min(first, need));
            if (need > first) {
                m_spans.clear();
                tr = m_w.translation.translate(done, handle, qp.qpc.pdn, addr + first, need - first, kLocalWrite, m_spans);
                if (tr.status != Protection::Ok) {
                    post_descriptor_error(qp, recv, addr, tr.ready, "its segments run past its memory region");
                    return;
                }
                done = m_w.dma.read(tr.ready, m_spans.data(), m_spans.size(), body.data() + first);
            }
            f.segs.resize(f.ctrl.seg_count);
            if (f.ctrl.seg_count) std::memcpy(f.segs.data(), body.data() + sizeof(ViCtrlSeg), 16u * f.ctrl.seg_count);
        }
        // Decode and check what the transport cannot.
        const std::uint16_t op = f.ctrl.control & kViCtrlOpMask;
        if ((f.ctrl.control & kViCtrlReserved) || op == kViCtrlOpReserved) f.error |= kViStatusFormatError;
        const bool rdma = op == kViCtrlOpRdmaWrite || op == kViCtrlOpRdmaRead;
        if (recv && op != kViCtrlOpSendRecv) f.error |= kViStatusFormatError;
        if (!recv && rdma && f.ctrl.seg_count < 1) f.error |= kViStatusFormatError;
        if (!recv && op == kViCtrlOpRdmaRead && (!m_p.vi_rdma_read || qp.qpc.vi == ViReliability::Unreliable))
            f.error |= kViStatusFormatError;
        if (!(f.error & kViStatusFormatError)) {
            std::uint64_t total = 0;
            for (std::size_t i = rdma ? 1 : 0; i < f.segs.size(); ++i) total += f.segs[i].length;
            if (total > qp.qpc.vi_max_transfer) f.error |= kViStatusLengthError;
        }
        // Descriptors reach the transport in queue order.
        const sim::Tick parsed = std::max(m_parser.reserve(done, m_p.desc_parse_cycles).end, q.last_ready);

        q.posted.pop_front();
        if (recv) ++qp.fetch.rq_fetched; else ++qp.fetch.sq_fetched;
        q.next_addr = f.ctrl.next;
        q.next_handle = f.ctrl.next_handle;
        q.last_addr = addr;
        q.last_handle = handle;
        q.last_ready = parsed;
        ++q.fetching;
        counter(recv ? "recv_descriptors" : "send_descriptors")++;
        if (f.error) counter("format_errors")++;
        if (recv && !f.error) {
            // A receive descriptor is usable from the time it is parsed: an
            // arriving message waits for it rather than finding none.
            RecvWork w = recv_work(f);
            w.ready_at = parsed;
            qp.fetch.rq_cache.push_back(std::move(w));
            f.segs.clear();
            f.addr = 0;
        }
        const std::uint32_t qpn = qp.qpn;
        at(parsed, [this, qpn, recv, parsed, f = std::make_unique<Fetched>(std::move(f))]() mutable {
            deliver(qpn, recv, *f, parsed);
        });
        return;
    }
}

SendWork DescriptorEngine::send_work(const Fetched& f) {
    SendWork w;
    w.desc_addr = f.addr;
    w.desc_handle = f.handle;
    const std::uint16_t op = f.ctrl.control & kViCtrlOpMask;
    const bool imm = (f.ctrl.control & kViCtrlImmediate) != 0;
    w.flags = static_cast<std::uint8_t>(kWqeSignaled | ((f.ctrl.control & kViCtrlQfence) ? static_cast<unsigned>(kWqeFence) : 0u));
    // The wire carries immediate data big-endian, as the verbs path keeps it.
    w.imm = htonl(f.ctrl.imm_data);
    std::size_t first_data = 0;
    if (op == kViCtrlOpRdmaWrite || op == kViCtrlOpRdmaRead) {
        if (!f.segs.empty()) {
            w.raddr = f.segs[0].addr;
            w.rkey = f.segs[0].handle;
        }
        first_data = 1;
        w.op = op == kViCtrlOpRdmaRead ? WqeOpcode::RdmaRead : (imm ? WqeOpcode::RdmaWriteImm : WqeOpcode::RdmaWrite);
    } else {
        w.op = imm ? WqeOpcode::SendImm : WqeOpcode::Send;
    }
    std::uint64_t total = 0;
    for (std::size_t i = first_data; i < f.segs.size(); ++i) {
        w.sges.push_back(DataSeg{f.segs[i].addr, f.segs[i].handle, f.segs[i].length});
        total += f.segs[i].length;
    }
    w.length = static_cast<std::uint32_t>(std::min<std::uint64_t>(total, 0x80000000ull));
    return w;
}

RecvWork DescriptorEngine::recv_work(const Fetched& f) {
    RecvWork w;
    w.desc_addr = f.addr;
    w.desc_handle = f.handle;
    std::uint64_t total = 0;
    for (const ViSeg& s : f.segs) {
        w.sges.push_back(DataSeg{s.addr, s.handle, s.length});
        total += s.length;
    }
    w.length = static_cast<std::uint32_t>(std::min<std::uint64_t>(total, 0xffffffffull));
    return w;
}

void DescriptorEngine::deliver(std::uint32_t qpn, bool recv, Fetched& f, sim::Tick t) {
    const QpAccess found = m_w.qps.context(qpn, t);
    QpContext* qp = found.qp;
    if (!qp) return;
    t = found.ready;
    ViQueue& q = recv ? qp->desc.rq : qp->desc.sq;
    const bool held = f.addr != 0;  // not yet handed to the receive cache
    if (q.fetching == 0) {
        // The VI was reset while this fetch was in flight: it belongs to the
        // old connection and completes flushed.
        if (held)
            complete(*qp, recv, f.addr, f.handle, kViStatusDone | kViStatusFlushed | (recv ? kViStatusOpReceive : 0), 0,
                     std::nullopt, t);
        return;
    }
    --q.fetching;
    if (qp->qpc.state == QpState::Err) {
        if (held)
            complete(*qp, recv, f.addr, f.handle, kViStatusDone | kViStatusFlushed | (recv ? kViStatusOpReceive : 0), 0,
                     std::nullopt, t);
        m_w.errors.flush(*qp, t);
        return;
    }
    if (recv) {
        if (held && f.error) {
            complete(*qp, true, f.addr, f.handle, kViStatusDone | f.error | kViStatusOpReceive, 0, std::nullopt, t);
            if (qp->qpc.vi != ViReliability::Unreliable) {
                m_w.errors.enter_error(*qp, t);
                return;
            }
        }
    } else {
        SendWork w = send_work(f);
        if (f.error) {
            w.error = CqeStatus::LocalQpOperation;
            w.vi_error = f.error;
        }
        qp->req.send_q.push_back(std::move(w));
        m_w.tx.kick(*qp, t);
    }
    fetch(*qp, recv, t);
}

sim::Tick DescriptorEngine::complete(QpContext& qp, bool recv, std::uint64_t desc_addr, std::uint32_t desc_handle,
                                     std::uint32_t status, std::uint32_t length, std::optional<std::uint32_t> imm,
                                     sim::Tick t) {
    ViQueue& q = recv ? qp.desc.rq : qp.desc.sq;
    if (q.outstanding) --q.outstanding;
    // Received immediate data goes back with Length and Status in one write;
    // otherwise only Length and Status are written.
    const std::uint64_t at_addr = desc_addr + (imm ? kViWritebackOffset : kViWritebackOffset + 4);
    const std::uint32_t bytes = imm ? kViWritebackBytes : kViWritebackBytes - 4;
    m_spans.clear();
    const Translation tr = m_w.translation.translate(t, desc_handle, qp.qpc.pdn, at_addr, bytes, kLocalWrite, m_spans);
    if (tr.status != Protection::Ok) {
        // The descriptor's memory went away while the adapter held it.
        counter("completion_protection_errors")++;
        HCASIM_LOG(sim::LogLevel::Info, path(), "VI " << qp.qpn << " cannot write back descriptor 0x" << std::hex
                                                      << desc_addr << std::dec << ": " << to_string(tr.status));
        m_w.errors.raise_async(tr.ready, AsyncEvent{AsyncEventType::ViCompletionProtection, qp.qpn, desc_addr,
                                               status & 0x70000u, recv});
        m_w.errors.enter_error(qp, tr.ready);
        return tr.ready;
    }
    std::uint32_t wb[3];
    std::uint32_t* p = wb;
    if (imm) *p++ = ntohl(*imm);
    *p++ = length;
    *p++ = status;
    const sim::Tick visible =
        m_w.dma.write(tr.ready, m_spans.data(), m_spans.size(), reinterpret_cast<const std::uint8_t*>(wb));
    counter("writebacks")++;
    if (status & 0x1feu) counter("error_completions")++;
    const std::uint32_t cqn = recv ? qp.qpc.recv_cqn : qp.qpc.send_cqn;
    if (cqn) {
        // Issued after the write-back, so posted-write ordering makes it
        // visible after the descriptor's status.
        Cqe c{};
        c.qpn = qp.qpn;
        c.byte_len = length;
        c.opcode = static_cast<std::uint8_t>(recv ? CqeOpcode::Recv : CqeOpcode::Send);
        c.status = static_cast<std::uint8_t>((status & 0x1feu) ? CqeStatus::GeneralError : CqeStatus::Success);
        c.flags = recv ? 0 : kCqeIsSend;
        m_w.completions.post_cqe(tr.ready, cqn, c);
    } else if (q.armed) {
        q.armed = false;
        m_w.interrupts.raise_vi_queue(visible, qp.qpn, recv);
    }
    return visible;
}

void DescriptorEngine::flush(QpContext& qp, sim::Tick t) {
    const auto flushed = kViStatusDone | kViStatusFlushed;
    // Fetched work first (it is older), then what was only announced.
    std::deque<SendWork> sends;
    sends.swap(qp.req.send_q);
    for (const SendWork& w : sends) complete(qp, false, w.desc_addr, w.desc_handle, flushed | vi_op_bits(w.op), 0, std::nullopt, t);
    std::deque<ViDoorbellToken> tokens;
    tokens.swap(qp.desc.sq.posted);
    for (const ViDoorbellToken& tok : tokens) complete(qp, false, tok.addr, tok.handle, flushed, 0, std::nullopt, t);
    qp.fetch.sq_fetched = qp.fetch.sq_pi;
    std::deque<RecvWork> recvs;
    recvs.swap(qp.fetch.rq_cache);
    for (const RecvWork& r : recvs) complete(qp, true, r.desc_addr, r.desc_handle, flushed | kViStatusOpReceive, 0, std::nullopt, t);
    tokens.clear();
    tokens.swap(qp.desc.rq.posted);
    for (const ViDoorbellToken& tok : tokens)
        complete(qp, true, tok.addr, tok.handle, flushed | kViStatusOpReceive, 0, std::nullopt, t);
    qp.fetch.rq_fetched = qp.fetch.rq_pi;
    for (ViQueue* q : {&qp.desc.sq, &qp.desc.rq}) {
        q->next_addr = 0;
        q->last_addr = 0;
    }
    qp.req.tx_index = 0;
    qp.req.tx_offset = 0;
    qp.req.outstanding_reads = 0;
}

}  // namespace hcasim::hca
