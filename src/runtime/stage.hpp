// One chunk (virtual stage) of the MLP model of design §3: `num_layers` blocks of width h
// on micro-batches of b rows. Block l:  Z = X·W1 (b×h · h×4h),  A = gelu(Z),  Y = A·W2 + X.
//
// A ChunkModel (runtime/chunk_model.hpp: the work items F, B, W, BW, loss, optimizer and the
// shared bookkeeping); activations are b×h elements of the run's dtype.
//
// Activation accounting (bytes, per micro-batch in flight; sizes in elements, times the
// activation dtype's size):
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

#include "runtime/backend.hpp"
#include "runtime/chunk_model.hpp"

namespace bb {

// W1 (h×4h) and W2 (4h×h) of global layer `layer`, uniform in ±1/sqrt(fan_in).
void init_layer_params(Backend& backend, std::uint64_t seed, int layer, int hidden, float* w1,
                       float* w2);
// Synthetic input and MSE target of micro-batch `mb` (rows×hidden), uniform in ±1.
void make_input(Backend& backend, std::uint64_t seed, int mb, int rows, int hidden, TensorPtr x);
void make_target(Backend& backend, std::uint64_t seed, int mb, int rows, int hidden, TensorPtr t);

struct StageConfig {
  int hidden = 0;       // h
  int rows = 0;         // b, rows of a micro-batch
  int first_layer = 0;  // global index of the first block
  int num_layers = 1;   // L
  std::uint64_t seed = 0;
  bool recompute = false;
  std::optional<SyntheticTimes> synthetic;  // unset: GEMM mode
  Dtype dtype = Dtype::kF32;                // of activations, their gradients and messages
};

// What a Stage of `config` keeps per micro-batch and its workspace (ChunkModel's sizes()).
ChunkSizes mlp_sizes(const StageConfig& config);

class Stage final : public ChunkModel {
 public:
  // Builds the parameters from (seed, layer) and zero gradients.
  Stage(Backend& backend, const StageConfig& config, ActivationMeter* shared_meter = nullptr);
  Stage(Stage&&) noexcept = default;

  // Block i's W1 (h×4h) then W2 (4h×h) in params()/grads().
  const float* w1(int block) const;
  const float* w2(int block) const;
  const float* dw1(int block) const;
  const float* dw2(int block) const;
  std::size_t w1_count() const;  // h·4h, also W2's
  std::size_t gradient_split() const override { return w1_count(); }

  const StageConfig& config() const { return config_; }

 private:
  std::size_t act() const;  // b·h
  ChunkSizes sizes() const override;
  void run_forward(ConstTensorPtr x0, TensorPtr saved, TensorPtr y) override;
  void run_forward_transient(ConstTensorPtr x0, TensorPtr y) override;
  void run_backward(ConstTensorPtr x0, TensorPtr saved, ConstTensorPtr dy, TensorPtr dx) override;
  void run_weight(ConstTensorPtr x0, TensorPtr saved) override;

  ConstTensorPtr x_of(ConstTensorPtr x0, TensorPtr saved, int block) const;
  TensorPtr z_of(TensorPtr saved, int block) const;
  TensorPtr a_of(TensorPtr saved, int block) const;
  TensorPtr dy_of(TensorPtr saved, int block) const;

  StageConfig config_;
  Buffer da_;  // dA (b×4h), also Z/A of the transient forward
};

}  // namespace bb
