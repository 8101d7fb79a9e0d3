// What one chunk (virtual stage) of a pipeline computes, for the executor: the work items F,
// B (input gradient), W (weight gradient) and BW of micro-batches, the seeded input and the
// loss at the ends of a route, parameters, gradients and the optimizer, and the accounting
// of activation memory. Two models implement it: the MLP stage of design §3 (runtime/stage.hpp)
// and the pre-LN transformer block (runtime/transformer_stage.hpp).
//
// ChunkModel holds everything the models share — the per-micro-batch slots and their order
// checks, the pool of saved-tensor buffers, recompute, synthetic waits, meters, the parameter
// and gradient arrays, loss and optimizer — and asks the model only for its math (run_*) and
// the sizes of what it keeps.
//
// Every activation pointer is a device pointer to activation_count() elements of the chunk's
// activation dtype (ChunkShape::dtype: the run's --dtype) owned by the caller; the chunk copies
// what it keeps, so caller buffers may be reused (and input/output may alias) as soon as a
// call returns. Parameters, gradients and optimizer state are fp32 whatever that dtype.
//
// Activation accounting (per micro-batch in flight): after F, the model's sizes().forward
// (with recompute: the chunk input only); after B, sizes().backward (both modes: the re-run
// forward's tensors are held until W); after W, 0. Workspaces are per chunk, not counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/backend.hpp"

namespace bb {

// Streams of the counter-based generator. Parameters depend on (seed, layer) only; inputs
// and targets on (seed, micro-batch) only.
enum class SeedKind : std::uint64_t {
  kW1 = 1,
  kW2 = 2,
  kInput = 3,
  kTarget = 4,
  kTransformer = 5,   // index: layer · 16 + tensor (transformer_stage.cpp)
  kTokens = 6,        // index: micro-batch (the model's input token ids)
  kTokenTargets = 7,  // index: micro-batch (the cross-entropy's target ids)
  kModelEnds = 8,     // index: tensor of the embedding and the LM head (transformer_stage.cpp)
};

constexpr std::uint64_t seed_stream(SeedKind kind, std::uint64_t index) {
  return (static_cast<std::uint64_t>(kind) << 56) | index;
}

// Synthetic input and MSE target of micro-batch `mb` (`count` elements), uniform in ±1.
void make_seeded_input(Backend& backend, std::uint64_t seed, int mb, std::size_t count,
                       TensorPtr x);
void make_seeded_target(Backend& backend, std::uint64_t seed, int mb, std::size_t count,
                        TensorPtr t);
// Token ids of micro-batch `mb` (`count` of them, int32, uniform in [0, vocab)) of the stream
// `kind` (kTokens: the input, kTokenTargets: the targets), made on the device.
void make_seeded_tokens(Backend& backend, std::uint64_t seed, SeedKind kind, int mb,
                        std::size_t count, int vocab, std::int32_t* ids);

// Tensors of mixed dtypes in one buffer (a micro-batch's saved area, a workspace): add() gives
// each its byte offset. fp32 layouts are dense, as the element counts add up; layouts of bf16
// activations start every tensor on 16 bytes (the tensor-core GEMMs' alignment), which keeps
// the fp32 statistics among them aligned too.
class TensorLayout {
 public:
  explicit TensorLayout(Dtype activation) : act_(activation) {}
  std::size_t add(std::size_t count, Dtype dtype) {
    const std::size_t at = size();
    bytes_ = at + count * dtype_size(dtype);
    return at;
  }
  std::size_t act(std::size_t count) { return add(count, act_); }         // activation-typed
  std::size_t f32(std::size_t count) { return add(count, Dtype::kF32); }  // statistics
  // The bytes so far, rounded up to the alignment: where a following layout may start.
  std::size_t size() const { return (bytes_ + align() - 1) / align() * align(); }
  Dtype activation() const { return act_; }

 private:
  std::size_t align() const { return act_ == Dtype::kF32 ? 4 : 16; }

  Dtype act_;
  std::size_t bytes_ = 0;
};
// The tensor at byte `offset` of `base` (a buffer of activation dtype holding a TensorLayout).
inline TensorPtr tensor_at(TensorPtr base, std::size_t offset, Dtype dtype) {
  return {static_cast<unsigned char*>(base.get()) + offset, dtype};
}
inline TensorPtr act_at(TensorPtr base, std::size_t offset) {
  return tensor_at(base, offset, base.dtype());
}
inline float* f32_at(TensorPtr base, std::size_t offset) {
  return tensor_at(base, offset, Dtype::kF32).f32();
}

// Live and peak bytes. A chunk keeps one of its own and also reports into an optional
// shared one (e.g. per rank, so the rank's peak is exact rather than a sum of peaks).
class ActivationMeter {
 public:
  void add(std::size_t bytes) {
    live_ += bytes;
    if (live_ > peak_) peak_ = live_;
  }
  void release(std::size_t bytes) { live_ -= bytes; }
  std::size_t live() const { return live_; }
  std::size_t peak() const { return peak_; }
  void reset_peak() { peak_ = live_; }

 private:
  std::size_t live_ = 0;
  std::size_t peak_ = 0;
};

// Synthetic compute mode: each action only waits its time (and does the accounting).
struct SyntheticTimes {
  double forward = 0;   // F
  double backward = 0;  // B (BW waits backward + weight)
  double weight = 0;    // W
  bool spin = false;    // Backend::spin_for instead of sleep_for
};

struct OptimizerConfig {
  enum class Kind : std::uint8_t { kSgd, kAdam };
  Kind kind = Kind::kSgd;
  float lr = 1e-3f;
  float beta1 = 0.9f;  // Adam only
  float beta2 = 0.999f;
  float eps = 1e-8f;
};
constexpr EnumNames<OptimizerConfig::Kind, 2> enum_names(OptimizerConfig::Kind) {
  return {{"sgd", "adam"}};
}

// What the shared machinery needs to know of a model.
struct ChunkShape {
  std::size_t activation_count = 0;  // elements of the chunk's input, output and their gradients
  std::size_t param_count = 0;       // floats of all its parameters (fp32)
  int first_layer = 0;               // global index of its first block
  int num_layers = 1;                // blocks
  std::uint64_t seed = 0;
  bool recompute = false;
  std::optional<SyntheticTimes> synthetic;  // unset: real compute
  std::size_t end_param_count = 0;          // floats of param_count after the blocks (model ends)
  Dtype dtype = Dtype::kF32;                // of activations, their gradients and messages
};

// What a model keeps per micro-batch (bytes) and its own workspace: one micro-batch's saved
// buffer (its forward tensors and B's outputs for W), the bytes counted live after F (the
// chunk input included) and after B, and the bytes of the model's workspace.
struct ChunkSizes {
  std::size_t saved = 0, forward = 0, backward = 0, workspace_bytes = 0;
};

// The bytes a chunk's Buffers hold, each rounded to whole elements as allocated. For the whole
// run: its parameters, their gradients, Adam's two moments (from its first step), the scratch
// activation, the loss and the model's workspace; per micro-batch in flight: the copy of its
// input (F to W), its saved tensors (F to W; with recompute B to W) and what the loss keeps
// (the route's last chunk, F to W). All 0 in synthetic mode (the accounting only).
struct ChunkBuffers {
  std::size_t params = 0, grads = 0, adam = 0, scratch = 0, loss = 0, workspace = 0;
  std::size_t input = 0, saved = 0, kept = 0;
};
// ChunkModel's allocations for a model of SHAPE and SIZES whose loss keeps LOSS_BYTES.
ChunkBuffers chunk_buffers(const ChunkShape& shape, const ChunkSizes& sizes,
                           std::size_t loss_bytes);

// A model's shape: its sizes, and the fields every model's config has (first_layer,
// num_layers, seed, recompute, synthetic, dtype).
template <class Config>
ChunkShape chunk_shape(const Config& c, std::size_t activation_count, std::size_t param_count) {
  return {activation_count, param_count, c.first_layer, c.num_layers, c.seed, c.recompute,
          c.synthetic,      0,           c.dtype};
}

class ChunkModel {
 public:
  virtual ~ChunkModel() = default;
  ChunkModel(ChunkModel&&) noexcept = default;
  ChunkModel& operator=(ChunkModel&&) = delete;
  ChunkModel(const ChunkModel&) = delete;
  ChunkModel& operator=(const ChunkModel&) = delete;

  // --- Work items (throw std::logic_error when out of order for `mb`) -------------------
  void forward(int mb, ConstTensorPtr x, TensorPtr y);
  // dx may be null (first chunk): it is still computed, into scratch.
  void backward_input(int mb, ConstTensorPtr dy, TensorPtr dx);
  void backward_weight(int mb);
  void backward_full(int mb, ConstTensorPtr dy, TensorPtr dx);

  // First chunk: the seeded input of micro-batch mb. Last chunk: adds the MSE loss of y
  // against mb's seeded target, scaled by 1/num_microbatches, to loss_sum(), and writes
  // its gradient to dy (which may alias y).
  void make_input(int mb, TensorPtr x);
  void loss(int mb, int num_microbatches, ConstTensorPtr y, TensorPtr dy);
  double loss_sum();  // synchronises
  void reset_loss();

  // Pre-allocates per-micro-batch storage so that `forward_in_flight` micro-batches
  // between F and W, of which `backward_in_flight` between B and W, need no allocation.
  // The pool also grows on demand and never shrinks.
  void reserve(int forward_in_flight, int backward_in_flight);

  // --- Shape ----------------------------------------------------------------------------
  std::size_t activation_count() const { return shape_.activation_count; }
  Dtype activation_dtype() const { return shape_.dtype; }
  std::size_t activation_bytes() const {
    return shape_.activation_count * dtype_size(shape_.dtype);
  }
  int first_layer() const { return shape_.first_layer; }
  int num_layers() const { return shape_.num_layers; }
  bool synthetic() const { return shape_.synthetic.has_value(); }

  // --- Parameters, gradients, optimizer -------------------------------------------------
  // Contiguous device arrays of param_count() floats, block after block (layer_param_count()
  // each). Null in synthetic mode (param_count() still gives the model's size).
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  std::size_t param_count() const { return shape_.param_count; }
  std::size_t param_bytes() const { return shape_.param_count * sizeof(float); }
  std::size_t layer_param_count() const {
    return (shape_.param_count - shape_.end_param_count) /
           static_cast<std::size_t>(shape_.num_layers);
  }
  // Parameters that belong to no block (the model's ends), after the blocks' parameters:
  // compared (reference.hpp) as `layer` with the two tensors [offset, offset + split) and
  // [offset + split, offset + count).
  struct EndTensors {
    int layer = 0;
    std::size_t offset = 0, split = 0, count = 0;
  };
  virtual std::vector<EndTensors> end_tensors() const { return {}; }
  // A block's gradients are compared (reference.hpp) as two tensors: the first
  // gradient_split() floats and the rest.
  virtual std::size_t gradient_split() const = 0;

  void zero_grads();
  // Applies one SGD or Adam step with the accumulated gradients (Adam's state is created
  // at its first step; steps() counts them).
  void optimizer_step(const OptimizerConfig& config);
  std::int64_t steps() const { return steps_; }

  // --- Accounting -----------------------------------------------------------------------
  std::size_t live_activation_bytes() const { return meter_.live(); }
  std::size_t peak_activation_bytes() const { return meter_.peak(); }
  void reset_peak_activation_bytes() { meter_.reset_peak(); }
  int in_flight() const { return static_cast<int>(in_flight_.size()); }
  // Device bytes of the per-micro-batch pool (in use or free) and of the workspace.
  std::size_t pool_bytes() const;
  std::size_t workspace_bytes() const {
    return synthetic() ? 0 : scratch_.bytes() + sizes().workspace_bytes;
  }

  Backend& backend() const { return *backend_; }

 protected:
  // Allocates parameters (uninitialised: the model fills them), zero gradients, scratch and
  // the loss, unless synthetic.
  ChunkModel(Backend& backend, const ChunkShape& shape, ActivationMeter* shared_meter);

  // --- The model's part ---------------------------------------------------------------
  virtual ChunkSizes sizes() const = 0;
  // Forward of micro-batch input x0 keeping what B and W need in `saved` (sizes().saved bytes,
  // of activation dtype); y gets the output.
  virtual void run_forward(ConstTensorPtr x0, TensorPtr saved, TensorPtr y) = 0;
  // Forward keeping nothing (recompute mode's F). May use scratch().
  virtual void run_forward_transient(ConstTensorPtr x0, TensorPtr y) = 0;
  // Input gradient dx (never null here) from the output gradient dy; keeps what W needs.
  virtual void run_backward(ConstTensorPtr x0, TensorPtr saved, ConstTensorPtr dy,
                            TensorPtr dx) = 0;
  // Weight gradients, accumulated into grads().
  virtual void run_weight(ConstTensorPtr x0, TensorPtr saved) = 0;
  // The route's first chunk's input of micro-batch mb (default: make_seeded_input).
  virtual void run_make_input(int mb, TensorPtr x);
  // The route's last chunk: adds micro-batch mb's loss (scaled by 1/num_microbatches) to
  // *loss_sum and writes its gradient to dy (may alias y). `kept` holds loss_bytes() bytes
  // kept for run_loss_weight (W). Default: MSE against make_seeded_target, nothing kept.
  virtual std::size_t loss_bytes() const { return 0; }
  virtual void run_loss(int mb, int num_microbatches, ConstTensorPtr y, TensorPtr dy,
                        TensorPtr kept, float* loss_sum);
  virtual void run_loss_weight(TensorPtr kept) { (void)kept; }

  TensorPtr scratch() { return scratch_.ptr(); }  // activation_count() elements
  // A buffer of activation dtype holding at least `bytes` bytes.
  Buffer allocate_bytes(std::size_t bytes) const {
    const std::size_t size = dtype_size(shape_.dtype);
    return backend_->allocate((bytes + size - 1) / size, shape_.dtype);
  }
  const ChunkShape& shape() const { return shape_; }

 private:
  struct Slot {
    int mb = -1;
    bool backward_done = false;
    std::size_t counted = 0;  // bytes reported to the meters
    Buffer input;             // X0
    Buffer saved;
    Buffer kept;  // the loss's tensors for W (loss_bytes() bytes)
  };

  Slot& find(int mb, const char* action);
  Buffer take(std::vector<Buffer>& pool, std::size_t bytes);
  void count(Slot& s, std::size_t bytes);
  void wait(double seconds);
  Slot& start_backward(int mb);  // B's checks and accounting
  void compute_backward(Slot& s, ConstTensorPtr dy, TensorPtr dx);
  void weight(Slot& s);  // W's math: the chunk's, then the loss's
  void retire(Slot& s);  // W done: release and recycle

  Backend* backend_;
  ChunkShape shape_;
  ActivationMeter meter_;
  ActivationMeter* shared_meter_;
  Buffer params_, grads_, adam_m_, adam_v_;
  Buffer scratch_, loss_;
  std::int64_t steps_ = 0;
  std::int64_t adam_steps_ = 0;
  std::vector<Slot> in_flight_;
  std::vector<Buffer> free_inputs_, free_saved_, free_kept_;
};

}  // namespace bb
