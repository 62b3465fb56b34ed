// The call channel between a program running as its own process and the
// simulator: one shared-memory region per process (a memfd the simulator
// creates and the process inherits), laid out identically on both sides.
//
// Each thread of the program that makes a call claims a slot. A call is the
// slot's arguments, then state kCall and a bump of the doorbell the
// simulator waits on (futex); the program's thread then waits (futex) on the
// slot's state until the simulator sets kReply. The program owns a slot
// while it is kIdle or kReply; the simulator owns it while it is kCall.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <csignal>

namespace hcasim::remote {

constexpr std::uint32_t kChannelMagic = 0x68636173;  // "hcas"
constexpr std::uint32_t kChannelVersion = 8;         // the calls (call_codec.hpp Op) and this layout
constexpr std::uint32_t kSlots = 16;                 // threads of one program that make calls
constexpr std::size_t kSlotBytes = 256 * 1024;       // arguments or results of one call
constexpr std::uint32_t kMaxTscReads = 4096;         // TSC reads replaced by ud2 in one program (tsc_reads.hpp)

// The signal by which the simulator asks a running thread where it is
// (ChannelHeader::sample_*). Not one glibc keeps for itself.
inline int sample_signal() { return SIGRTMAX - 2; }

// The environment a program is started with.
constexpr const char* kChannelFdEnv = "HCASIM_CHANNEL_FD";

enum SlotState : std::uint32_t {
    kFree = 0,   // no thread has claimed it
    kIdle = 1,   // claimed; its thread is running the program
    kCall = 2,   // a call is waiting for, or being carried out by, the simulator
    kReply = 3,  // the call's result is in; its thread has not taken it yet
};

// The simulated hosts' IPoIB addresses and names (what /etc/hosts would
// give every node): out-of-band sockets to them reach the right program.
constexpr std::uint32_t kMaxHosts = 1024;
struct HostEntry {
    std::uint32_t ip;  // host byte order
    char name[28];
};

struct alignas(64) Slot {
    std::atomic<std::uint32_t> state;
    // Its thread sleeps (FUTEX_WAIT) for the result: the simulator must wake
    // it. A thread that looks for the result by spinning needs no wake-up.
    std::atomic<std::uint32_t> caller_sleeps;
    // How long (host ns) its thread may spin for its next call's result
    // before sleeping: the simulator allows it only when a CPU is free for
    // it, else spinning threads would take the CPU the simulator needs.
    std::uint32_t spin_ns;
    std::int32_t tid;        // the claiming thread (gettid)
    std::uint32_t op;        // remote::Op of the call
    std::uint32_t length;    // bytes of data in use
    std::uint64_t charge_ps; // simulated time the thread used since its previous call returned
    std::uint8_t data[kSlotBytes];
};

struct alignas(64) ChannelHeader {
    std::uint32_t magic;
    std::uint32_t version;
    std::uint32_t node;            // simulated node the program runs on
    std::int32_t simulator_pid;    // the program is its child: a process of another parent is not the program
    // The program has attached once: a later attach is an image it exec'd
    // (a wrapper such as stdbuf or env), whose threads are all new.
    std::atomic<std::uint32_t> attached;
    // Bumped by every call and every exit of a slot's thread; the simulator
    // waits on it with FUTEX_WAIT.
    std::atomic<std::uint32_t> doorbell;
    // The simulator sleeps on the doorbell (FUTEX_WAIT): a call must wake it.
    std::atomic<std::uint32_t> simulator_sleeps;
    // Bumped before the program starts a thread (pthread_create), so the
    // simulator knows to count its threads again.
    std::atomic<std::uint32_t> threads_started;
    // The node's simulated time (ps). Only the simulator writes it, and
    // only while no thread of the program is running outside a call.
    std::atomic<std::uint64_t> now_ps;
    // Clock reads so far (a program that reads the clock is not spinning on memory).
    std::atomic<std::uint64_t> clock_reads;
    // Writes and sends so far: data written to another program's socket may
    // still be on its way through the host's network stack.
    std::atomic<std::uint64_t> writes;
    // A running thread's state on the simulator's request (sample_signal):
    // its instruction pointer and a digest of its registers and the stack
    // around its stack pointer. The same state twice at one instruction: it
    // goes round a loop that changes nothing (it spins). sample_answer is
    // set to sample_request once the rest is written.
    std::atomic<std::uint32_t> sample_request;
    std::atomic<std::uint32_t> sample_answer;
    std::int32_t sample_tid;
    // Answers under way: a thread inside its answer has the signal blocked
    // until it returns, which says nothing of what the program blocks.
    std::atomic<std::uint32_t> sample_answering;
    std::uint64_t sample_ip;
    std::uint64_t sample_digest;
    std::uint64_t tsc_khz;         // the simulated TSC's rate
    // Where rdtsc does not trap on this host: the addresses of the TSC reads
    // the simulator replaced by ud2 in the program's code when it attached,
    // ascending, with each instruction's length (2: rdtsc, 3: rdtscp).
    std::uint32_t tsc_read_count;
    std::uint64_t tsc_read_addr[kMaxTscReads];
    std::uint8_t tsc_read_length[kMaxTscReads];
    std::uint64_t epoch_ns;        // CLOCK_REALTIME at simulated time 0
    std::uint32_t ip_network;      // the IPoIB subnet (host byte order) and its prefix length
    std::uint32_t ip_prefix_len;
    std::uint32_t host_count;
    HostEntry hosts[kMaxHosts];
    Slot slots[kSlots];
};

constexpr std::size_t kChannelBytes = sizeof(ChannelHeader);

}  // namespace hcasim::remote
