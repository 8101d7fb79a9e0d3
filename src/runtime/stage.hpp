// One chunk (virtual stage) of the MLP model of design §3: `num_layers` blocks of width h
// on micro-batches of b rows. Block l:  Z = X·W1 (b×h · h×4h),  A = gelu(Z),  Y = A·W2 + X.
//
// Work items per micro-batch: forward (F), backward_input (B), backward_weight (W), or
// backward_full (BW = B then W). Every activation pointer is a device pointer to b×h floats
// owned by the caller; the stage copies what it keeps, so caller buffers may be reused
// (and input/output may alias) as soon as a call returns.
//
// Activation accounting (bytes, per micro-batch in flight; sizes in floats):
//   after F:  the chunk input X0 (b·h) and, unless recompute, every block's Z and A
//             (4·b·h each) and the inputs of blocks 1..L−1       = 9·L·b·h
//             with recompute: X0 only                            = b·h
//   after B:  additionally every block's output gradient dY (b·h); dZ overwrites Z.
//             With recompute, the re-run forward's tensors too.  = 10·L·b·h (both modes)
//   after W:  0 — the micro-batch's tensors return to the stage's pool.
// Workspace (dA, one b×4h, and one b×h scratch) is per stage, not per micro-batch, and is
// not counted as activations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/backend.hpp"

namespace bb {

// Streams of the counter-based generator. Parameters depend on (seed, layer) only; inputs
// and targets on (seed, micro-batch) only.
enum class SeedKind : std::uint64_t { kW1 = 1, kW2 = 2, kInput = 3, kTarget = 4 };

constexpr std::uint64_t seed_stream(SeedKind kind, std::uint64_t index) {
  return (static_cast<std::uint64_t>(kind) << 56) | index;
}

// W1 (h×4h) and W2 (4h×h) of global layer `layer`, uniform in ±1/sqrt(fan_in).
void init_layer_params(Backend& backend, std::uint64_t seed, int layer, int hidden, float* w1,
                       float* w2);
// Synthetic input and MSE target of micro-batch `mb` (rows×hidden), uniform in ±1.
void make_input(Backend& backend, std::uint64_t seed, int mb, int rows, int hidden, float* x);
void make_target(Backend& backend, std::uint64_t seed, int mb, int rows, int hidden, float* t);

// Live and peak bytes. A Stage keeps one of its own and also reports into an optional
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

struct StageConfig {
  int hidden = 0;       // h
  int rows = 0;         // b, rows of a micro-batch
  int first_layer = 0;  // global index of the first block
  int num_layers = 1;   // L
  std::uint64_t seed = 0;
  bool recompute = false;
  std::optional<SyntheticTimes> synthetic;  // unset: GEMM mode
};

struct OptimizerConfig {
  enum class Kind { kSgd, kAdam };
  Kind kind = Kind::kSgd;
  float lr = 1e-3f;
  float beta1 = 0.9f;  // Adam only
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

class Stage {
 public:
  // Builds the parameters from (seed, layer) and zero gradients.
  Stage(Backend& backend, const StageConfig& config, ActivationMeter* shared_meter = nullptr);
  Stage(Stage&&) noexcept = default;
  Stage& operator=(Stage&&) = delete;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  // --- Work items (throw std::logic_error when out of order for `mb`) -------------------
  void forward(int mb, const float* x, float* y);
  // dx may be null (first chunk): it is still computed, into scratch.
  void backward_input(int mb, const float* dy, float* dx);
  void backward_weight(int mb);
  void backward_full(int mb, const float* dy, float* dx);

  // First chunk: the seeded input of micro-batch mb. Last chunk: adds the MSE loss of y
  // against mb's seeded target, scaled by 1/num_microbatches, to loss_sum(), and writes
  // its gradient to dy (which may alias y).
  void make_input(int mb, float* x);
  void loss(int mb, int num_microbatches, const float* y, float* dy);
  double loss_sum();  // synchronises
  void reset_loss();

  // Pre-allocates per-micro-batch storage so that `forward_in_flight` micro-batches
  // between F and W, of which `backward_in_flight` between B and W, need no allocation.
  // The pool also grows on demand and never shrinks.
  void reserve(int forward_in_flight, int backward_in_flight);

  // --- Parameters, gradients, optimizer -------------------------------------------------
  // Contiguous device arrays of param_count() floats; block i's W1 (h×4h) then W2 (4h×h).
  // Null in synthetic mode (param_count() still gives the model's size).
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  std::size_t param_count() const { return param_count_; }
  std::size_t param_bytes() const { return param_count_ * sizeof(float); }
  const float* w1(int block) const;
  const float* w2(int block) const;
  const float* dw1(int block) const;
  const float* dw2(int block) const;
  std::size_t w1_count() const;  // h·4h, also W2's

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
  std::size_t workspace_bytes() const { return da_.bytes() + scratch_.bytes(); }

  const StageConfig& config() const { return config_; }
  Backend& backend() const { return *backend_; }

 private:
  struct Slot {
    int mb = -1;
    bool backward_done = false;
    std::size_t counted = 0;  // bytes reported to the meters
    Buffer input;             // X0
    Buffer saved;             // per-block Z, A, dY and the next block's input
  };

  std::size_t act() const;  // b·h
  std::size_t saved_count() const;
  float* x_of(Slot& s, int block) const;
  float* z_of(Slot& s, int block) const;
  float* a_of(Slot& s, int block) const;
  float* dy_of(Slot& s, int block) const;

  Slot& find(int mb, const char* action);
  Buffer take(std::vector<Buffer>& pool, std::size_t count);
  void count(Slot& s, std::size_t bytes);
  void wait(double seconds);
  Slot& start_backward(int mb);  // B's checks and accounting
  void compute_backward(Slot& s, const float* dy, float* dx);
  void retire(Slot& s);  // W done: release and recycle
  void run_forward(Slot& s, float* y);
  void run_forward_transient(const float* x0, float* y);
  void run_backward(Slot& s, const float* dy, float* dx);
  void run_weight(Slot& s);

  Backend* backend_;
  StageConfig config_;
  ActivationMeter meter_;
  ActivationMeter* shared_meter_;
  std::size_t param_count_ = 0;
  Buffer params_, grads_, adam_m_, adam_v_;
  Buffer da_, scratch_, loss_;
  std::int64_t steps_ = 0;
  std::int64_t adam_steps_ = 0;
  std::vector<Slot> in_flight_;
  std::vector<Buffer> free_inputs_, free_saved_;
};

}  // namespace bb
