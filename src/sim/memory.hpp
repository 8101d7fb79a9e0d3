// The memory of every rank over one step (docs/memory.md): THE model of a rank's bytes that
// `run` (the record's peak_memory_bytes_model, the memory check before a sweep, the traces),
// `sim` (peak_memory_bytes, --timeline's counter tracks) and `advise` (its memory cap) use.
// Pure: the bytes come in as inputs (the runtime's layouts give them for `run`:
// harness/memory.hpp; advise's and sim's options otherwise).
//
// What a rank holds, as the runtime allocates it (runtime/executor.hpp, chunk_model.hpp):
//   weights      per chunk on the rank: parameters, gradients, optimizer state, derived copies
//                of the weights (CUDA's bf16 GEMM operands); DualPipe: a
//                receive buffer of the partner copy's gradients where that copy is on
//                another rank;
//   workspace    per chunk: its scratch and work areas (not per micro-batch);
//   runtime      per rank: the runtime's own (CUDA context, cuBLAS, the transport's buffers);
//   activations  per micro-batch between its F and its W (BW) on a chunk: the chunk's copy of
//                its input, its saved tensors (with recompute: only from B on, re-made by the
//                backward) and what the loss keeps (the route's last chunk); each chunk takes
//                them from pools of its own, which grow to the most micro-batches the chunk
//                ever holds at once and never shrink;
//   messages     activation-sized buffers of one pool per rank: a compute's output from its
//                start until the next chunk consumes it (on this rank: when that compute ends)
//                or, sent, until the send completes; a receive's buffer from its RECV until its
//                consumer ends; the route's first chunk's made input during its F; the loss
//                gradient from the last F until its backward ends.
// A send completes when it is posted if its message is at most `eager_bytes` (MPI's eager
// protocol), else once the compute consuming it on the receiver has ended (MPI moves a large
// message, and acknowledges it, only inside the receiver's MPI calls, which it makes between
// computes); with `hold_sends` the buffer stays until the rank's step ends (as PyTorch's
// schedules wait for their sends at the end of the step). On compute lists (not lowered) a
// message leaves when its producer ends and arrives after the link's time: its receive buffer
// is held from then until its consumer ends.
//
// The peak is the allocator's high-water: the static bytes plus every pool at its own
// high-water (what a caching allocator holds); sizes are what the allocator sets aside for each
// buffer (the caller rounds them as its allocator does). The samples are the bytes live (in use)
// by kind, whose highest sum is `live_peak` <= `peak`.
#pragma once

#include <array>
#include <vector>

#include "schedule/schedule.hpp"
#include "sim/sim.hpp"

namespace bb {

// Bytes of one chunk. The first four are held for the whole step; input, saved and kept per
// micro-batch between its F and its W.
struct ChunkMemory {
  double params = 0, grads = 0, optimizer = 0;
  double copies = 0;  // derived copies of the weights (CUDA: bf16 GEMM operands)
  double workspace = 0;
  double input = 0, saved = 0, kept = 0;
};

struct MemoryConfig {
  std::vector<ChunkMemory> chunks;  // one per chunk of the schedule, or one for every chunk
  double message = 0;               // one message buffer: an activation or its gradient
  double rank_bytes = 0;            // per rank: the runtime's own (CUDA context, ...)
  bool recompute = false;           // saved tensors only from B to W
  bool hold_sends = false;          // send buffers until the step's end (else until completion)
  double eager_bytes = 0;           // sends of at most this many bytes complete when posted
};

enum class MemoryKind { weights, activations, messages, workspace, runtime };
constexpr int kMemoryKinds = 5;
// "weights", "activations", "messages", "workspace", "runtime".
const char* memory_kind_name(MemoryKind k);

// Live bytes by kind from time t on (until the next sample).
struct MemorySample {
  double t = 0;
  std::array<double, kMemoryKinds> bytes{};
  double total() const;
};

struct RankMemory {
  double peak = 0;  // the allocator's high-water (see above)
  // peak's terms by kind (activations and messages: their pools' high-waters).
  std::array<double, kMemoryKinds> peak_bytes{};
  double live_peak = 0, live_peak_time = 0;  // the highest live sum, and when
  std::vector<MemorySample> samples;         // when asked for: each change of the live bytes
};

// Times of a step on the schedule's lists: EVENTS are the simulator's (simulate() with
// record_events, on the same lists), TIMING its configuration (the message times). Without
// events every compute unit lasts one time unit from the end of the rank's previous one and
// messages take no time (the order alone).
// A run's measured step instead: EVENTS its compute units, COMMS its SEND/RECV (index: the
// position in the lowered list; start: posted, end: completed), each as measured.
struct MemoryTiming {
  const std::vector<SimEvent>* events = nullptr;
  const SimConfig* sim = nullptr;
  const std::vector<SimEvent>* comms = nullptr;
};

// Every rank's memory over one step of S (compute or lowered lists). Throws ConfigError on a
// chunk list of the wrong size or negative bytes.
std::vector<RankMemory> rank_memory(const Schedule& s, const MemoryConfig& m,
                                    const MemoryTiming& timing = {}, bool samples = false);

// RANK's runtime bytes (measured: CUDA context, NCCL) added to its peak and samples.
void add_runtime_bytes(RankMemory& rank, double bytes);

// The same with a simulation of its own (SIM with record_events) for the times.
std::vector<RankMemory> simulate_memory(const Schedule& s, const MemoryConfig& m,
                                        const SimConfig& sim, bool samples = false);

// The memory model's inputs of `sim`: each chunk's share (P / the length of
// the routes through it) of --act-bytes as a micro-batch's saved tensors and of STATIC_BYTES
// (--static-bytes) as its weights, --msg-bytes per message. Without any of them a
// micro-batch-stage counts one byte (the track counts micro-batch-stages).
MemoryConfig sim_memory_config(const Schedule& s, const SimConfig& cfg, double static_bytes);

}  // namespace bb
