// The executor: runs one rank's lowered action list (bb::lower) step after step, with the chunk
// stage model of design §3 on a Backend and the rank's messages on a Transport.
//
// Model and layers: chunk c holds the stage s = chunk_stage[c]. Without model_layers every
// stage holds `layers` blocks, global layers [s·layers, (s+1)·layers), and the model has
// (number of stages)·layers layers: route length·layers, i.e. P·v·L for looped placements,
// 2P·L for V placements and P·L for DualPipe. With model_layers N the model has N blocks,
// split over the stages by stage_layers (the same model for every schedule). DualPipe's two
// copies (chunk s and chunk P+s) hold the same layers and sum their weight gradients
// (sum_partner_gradients) before the optimizer.
//
// Actions:
//   RECV_F/RECV_B  post irecv() into a pooled buffer; the consuming compute waits for it.
//   F              input: the seeded micro-batch (first chunk of its route), a received
//                  activation, or the tensor the previous chunk left on this rank (V
//                  placements: local hand-off, no SEND/RECV). The last chunk of a route adds
//                  the MSE loss (scaled by 1/M) and keeps its gradient for its backward.
//   B, BW          input gradient from the loss, a receive, or the next chunk on this rank.
//   W              weight gradient of a micro-batch whose B ran.
//   FB             an F flagged overlap_next and the backward after it: both inputs are
//                  awaited first, then the two run one after the other (one record).
//   SEND_F/SEND_B  isend() of the tensor the producing compute left; the buffer returns to
//                  the pool once test() says the send is complete (hold_sends: at the end of
//                  the step).
// Synthetic compute: the stages only do the accounting and each action sleeps its time
// (Backend::sleep_for): F = t_f·f, B = t_b·f, W = t_w·f, BW = (t_b+t_w)·f and an FB pair
// t_fb·f when t_fb >= 0 (else the sum), where f = P / route length (the chunk's share).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/chunk_model.hpp"
#include "runtime/reference.hpp"
#include "runtime/stage.hpp"
#include "runtime/transformer_stage.hpp"
#include "runtime/transport.hpp"
#include "schedule/schedule.hpp"
#include "sim/memory.hpp"

namespace bb {

// Device buffers of one size (an activation of one micro-batch, `count` elements of `dtype`),
// reused across actions, steps and configurations of one run.
class BufferPool {
 public:
  BufferPool(Backend& backend, std::size_t count, Dtype dtype = Dtype::kF32)
      : backend_(&backend), count_(count), dtype_(dtype) {}
  int acquire();
  void release(int id) { free_.push_back(id); }
  TensorPtr data(int id) const { return buffers_[static_cast<std::size_t>(id)].ptr(); }
  std::size_t count() const { return count_; }
  Dtype dtype() const { return dtype_; }
  std::size_t allocated() const { return buffers_.size(); }
  std::size_t in_use() const { return buffers_.size() - free_.size(); }
  // Frees every buffer (none may be in use): a configuration's pool grows from nothing, so
  // that the allocator's peak is its own, not the largest of the launch so far.
  void clear();

 private:
  Backend* backend_;
  std::size_t count_;
  Dtype dtype_;
  std::vector<Buffer> buffers_;
  std::vector<int> free_;
};

struct ExecutorConfig {
  int hidden = 16;
  int layers = 1;  // blocks per chunk (when model_layers is 0)
  // A fixed model (docs/transformer.md, "A fixed model"): model_layers blocks in total, split
  // over the model's stages (the route's chunks) as `partition` says (blocks per stage along the
  // route), or evenly when it is empty. 0: every chunk holds `layers` blocks.
  int model_layers = 0;
  std::vector<int> partition;
  int mb_size = 4;  // rows of a micro-batch
  std::uint64_t seed = 1234;
  // Activations, their gradients and the messages (--dtype); parameters, gradients and the
  // optimizer's state stay fp32.
  Dtype dtype = Dtype::kF32;
  bool recompute = false;
  bool synthetic = false;
  // Synthetic times of one stage for one micro-batch, seconds.
  double t_f = 0, t_b = 0, t_w = 0, t_fb = -1;
  // Set: the blocks are pre-LN transformer blocks (runtime/transformer_stage.hpp) on mb_size
  // sequences of transformer->seq tokens; only its heads, seq, ffn and causal are read.
  // Unset: MLP blocks on mb_size rows.
  std::optional<TransformerConfig> transformer;
  OptimizerConfig optimizer;
  double timeout_s = 600;  // watchdog of every wait
  // Send buffers back to the pool at the step's end (as PyTorch's schedules, which wait for
  // their sends last) instead of as soon as each send completes.
  bool hold_sends = false;
  bool drop_sends = false;  // testing only: skip SEND actions (the watchdog must fire)
  // Testing only (`run --debug-delay-rank/--debug-delay-us`): seconds added to every compute
  // of this rank, inside its record (a known slow rank for the attribution's tests).
  double debug_delay_s = 0;
};

// Elements of one activation message (the BufferPool's tensor size) under `config`, and its
// bytes (in config.dtype).
std::size_t activation_count(const ExecutorConfig& config);
std::size_t message_bytes(const ExecutorConfig& config);
// Model stages of a schedule: the route's chunks (DualPipe's two copies of a stage count once).
int model_stages(const Schedule& schedule);
// Blocks of each of `num_stages` stages along the route: `layers` each without model_layers;
// else `partition` (which must have num_stages entries >= 1 summing to model_layers) or the
// even split (the first model_layers mod num_stages stages get one block more). Throws
// ConfigError with one line when the model cannot be split so.
std::vector<int> stage_layers(const ExecutorConfig& config, int num_stages);
// The blocks of the model: model_layers, or num_stages·layers.
int model_layer_count(const ExecutorConfig& config, int num_stages);
// Floats of the whole model's parameters (each stage once, the ends included).
std::size_t model_param_count(const ExecutorConfig& config, int num_stages);
// `config` with `layers` set to the largest stage's blocks (what per-chunk estimates that assume
// equal chunks, such as chunk_forward_bytes, should see).
ExecutorConfig widest_chunk(ExecutorConfig config, int num_stages);
// The transformer chunk of stage `stage` (config.transformer set): its shape, and hidden,
// mb_size sequences, layers, seed, recompute and synthetic mode from `config`. With a vocab,
// stage 0 holds the embedding and stage num_stages − 1 the LM head (0: none of the model's).
// Its blocks: stage_layers(config, num_stages)[stage]; num_stages 0: `layers` blocks from
// stage·layers.
TransformerConfig transformer_chunk_config(const ExecutorConfig& config, int stage,
                                           int num_stages = 0);
// Bytes one micro-batch keeps in a chunk after its F (only the chunk input with recompute).
std::size_t chunk_forward_bytes(const ExecutorConfig& config);
// Floats of one chunk's parameters (as many again for its gradients).
std::size_t chunk_param_count(const ExecutorConfig& config);
// Bytes of one chunk's workspaces (not per micro-batch): its scratch activation and its model's
// own (the MLP's dA; the transformer's block-sized work area, or B's dP, dc and dA).
std::size_t chunk_workspace_bytes(const ExecutorConfig& config);
// What the chunk model of stage `stage` of `num_stages` allocates under `config` (its blocks
// from stage_layers; the ends where it holds them), without building it.
ChunkBuffers chunk_buffers(const ExecutorConfig& config, int stage, int num_stages);
// The memory model's inputs (sim/memory.hpp) for `schedule` run under `config`: each chunk's
// bytes as its Buffers allocate them (chunk_buffers; Adam's moments with the Adam optimizer),
// one message buffer (a BufferPool tensor), recompute and hold_sends. Sends complete when
// posted (eager_bytes: any size); the caller sets its transport's limit. BLOCK: the bytes the
// backend's allocator sets aside for a buffer (CUDA: cuda_block_bytes); null: its size.
MemoryConfig memory_config(const Schedule& schedule, const ExecutorConfig& config,
                           std::size_t (*block)(std::size_t) = nullptr);
// The model of chunk `stage` (its global layers from stage_layers) under `config`.
std::unique_ptr<ChunkModel> make_chunk(Backend& backend, const ExecutorConfig& config, int stage,
                                       ActivationMeter* meter, int num_stages = 0);

// What one compute action record describes. FB: an overlapped pair as one record.
enum class RecordKind : std::uint8_t { F, B, W, BW, FB };
const char* record_kind_name(RecordKind k);

struct ActionRecord {
  std::uint32_t index = 0;  // position in the lowered list (the F of an FB pair)
  std::uint32_t mb = 0;
  std::uint16_t chunk = 0;
  RecordKind kind = RecordKind::F;
  double fraction = 1;  // stage-equivalents of the action's chunk (P / route length)
  // Seconds from the step's origin, from compute-stream marks (Backend::mark): ready = the
  // executor reached the action, start/end = its compute. start - ready is the time the
  // compute stream waited for the inputs (on a GPU the wait happens on the device when the
  // transport consumes receives there: NCCL).
  double ready = 0, start = 0, end = 0;
  double wait = 0;  // host seconds spent polling for the inputs (host clock)
};

// One SEND/RECV of the lowered list, seconds from the step's origin. On the host clock: start
// when it was posted; end, for a RECV, when the wait of the compute consuming it ended (the
// data is there and the compute may start), for a SEND when test() first reported it complete
// (tests happen after every compute, during waits and at the end of the step). Where the
// transport times its operations on the device (NCCL, Transport::op_seconds): start and end
// of the operation on the device, the clock of the compute records.
struct CommRecord {
  std::uint32_t index = 0;  // position in the lowered list
  std::uint32_t mb = 0;
  std::uint16_t chunk = 0;
  Op op = Op::SEND_F;
  double start = 0, end = 0;
};

struct StepRecord {
  double origin = 0;  // Backend::mark_origin() of the step (host clock, seconds)
  std::vector<ActionRecord> actions;
  std::vector<CommRecord> comms;  // in the order of the lowered list
  double busy = 0;                // sum of compute (end - start)
  double wait = 0;                // sum of (start - ready): on the compute stream's clock
  double comm = 0;                // host time posting SEND/RECV and completing sends
  double comm_tail = 0;           // the part of comm after the last compute end (sends posted
                                  // after it, the end-of-step wait for sends to complete)
  double first_start = 0;         // first compute start
  double last_end = 0;            // last compute end
  std::size_t num_actions = 0;    // lowered actions executed (compute and communication)

  // Host time between the step's origin and its last compute end that is neither compute,
  // waiting for inputs nor communication: the executor's own bookkeeping. Every term lies in
  // [origin, last_end] and they do not overlap, so with host-clock marks (CPU) it is >= 0.
  double bookkeeping() const { return last_end - busy - wait - (comm - comm_tail); }
};

class Executor {
 public:
  // `lowered` must outlive the executor. `rank` is transport.rank().
  Executor(const Schedule& lowered, Backend& backend, Transport& transport, BufferPool& pool,
           const ExecutorConfig& config);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs every action of one step and waits for its sends. Records timings when `record` is
  // not null (Backend::begin_marks() is called at the start: the step's origin).
  void run_step(StepRecord* record);
  // DualPipe: adds the partner copy's weight gradients (the same stage on another chunk,
  // local or on another rank through the transport), so both copies hold the sum.
  void sum_partner_gradients();
  void optimizer_step();
  void zero_grads();
  void reset_loss();

  // This rank's loss sum (last chunks of routes) and gradients of the layers whose primary
  // copy (lowest chunk holding the stage) is on this rank. GEMM mode only.
  double loss_sum();
  GradientSet gradients() const;

  int rank() const { return rank_; }
  int num_layers_total() const { return model_layer_count(config_, num_stages_); }
  const std::vector<int>& local_chunks() const { return local_chunks_; }
  // Peak live activations on this rank since construction or reset_peaks(): bytes from the
  // stages' shared ActivationMeter, and micro-batch-stage units (the micro-batches the
  // stages hold, each counted as its chunk's fraction of a stage).
  std::size_t peak_activation_bytes() const { return meter_.peak(); }
  double peak_activation_units() const { return peak_units_; }
  void reset_peaks();
  std::size_t param_bytes() const;

 private:
  struct Tensor {
    int buffer = -1;
    Request request;  // pending receive into `buffer`
    int comm = -1;    // its RECV's CommRecord while recording
  };
  struct PendingSend {
    int buffer;
    Request request;
    Action action;
    int peer;
    int comm;  // its CommRecord while recording, else -1
  };
  // A compute record of the step being recorded, with its marks (read after the step).
  struct PendingRecord {
    ActionRecord rec;
    std::size_t ready_mark, start_mark, end_mark;
  };
  void finish_record(StepRecord& rec, std::vector<PendingRecord>& pending, double origin,
                     double comm_at_last_end);

  std::size_t key(int dir, int chunk, int mb) const {
    return (static_cast<std::size_t>(chunk) * static_cast<std::size_t>(lowered_.M) +
            static_cast<std::size_t>(mb)) *
               2 +
           static_cast<std::size_t>(dir);
  }
  ChunkModel& stage(int chunk) { return *stages_[static_cast<std::size_t>(chunk)]; }
  double fraction(int chunk) const { return fractions_[static_cast<std::size_t>(chunk)]; }

  void post_recv(const Action& a);
  void post_send(const Action& a);
  void await_input(Tensor& t, const Action& consumer, int dir);
  void progress_sends();
  // One progress poll of everything in flight: the sends, and the receives posted and not yet
  // consumed (a rendezvous transfer moves only while its receiver polls).
  void progress_all();
  // progress_all() when anything is in flight (also the backend's poll inside long kernels).
  void poll_in_flight();
  void finish_sends();
  [[noreturn]] void missing(const Action& a, const char* what) const;
  void sample_units();

  // Computes (no waiting): returns with outputs stored in the tables.
  void compute_forward(const Action& a);
  void compute_backward(const Action& a);
  void sleep_synthetic(double seconds);
  double synthetic_time(const Action* a, std::size_t n) const;

  const Schedule& lowered_;
  Backend& backend_;
  Transport& transport_;
  BufferPool& pool_;
  ExecutorConfig config_;
  int rank_ = 0;
  int num_stages_ = 0;
  std::vector<int> local_chunks_;
  std::vector<double> fractions_;                    // per chunk
  std::vector<std::unique_ptr<ChunkModel>> stages_;  // per chunk, null when not local
  ActivationMeter meter_;
  double peak_units_ = 0;
  std::vector<Tensor> inputs_;  // key(dir, chunk, mb): 0 forward input, 1 output gradient
  std::vector<int> outputs_;    // key(dir, chunk, mb): tensors waiting for their SEND
  std::vector<PendingSend> sends_;
  std::vector<int> held_;  // hold_sends: buffers of completed sends, released at the step's end
  std::vector<std::size_t> recvs_;    // keys of posted receives not seen complete yet
  std::vector<int> partner_;          // per chunk: the other chunk of the same stage, or -1
  std::vector<Buffer> partner_recv_;  // per chunk: receives the remote partner's gradients
  double comm_time_ = 0;
  // While run_step records: the step's CommRecords, its origin, and the record of the
  // SEND/RECV being posted.
  std::vector<CommRecord>* comm_records_ = nullptr;
  std::vector<std::int64_t> comm_tokens_;  // per CommRecord: the transport's timing token
  double comm_origin_ = 0;
  int current_comm_ = -1;
};

}  // namespace bb
