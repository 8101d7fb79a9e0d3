// One chunk of a transformer: `num_layers` pre-LN blocks (docs/transformer.md) on
// micro-batches of b sequences of S tokens, width h, H heads of d = h/H, MLP width f:
//
//   u  = LN1(x)                    qkv = u·Wqkv + bqkv            (T×3h, T = b·S tokens)
//   P  = softmax(Q·Kᵀ/√d [+ causal mask])   per sequence and head  (S×S)
//   c  = P·V                       x1  = x + c·Wo + bo
//   v  = LN2(x1)                   z   = v·W1 + b1,  a = gelu(z)  y = x1 + a·W2 + b2
//
// B computes every input gradient (through the MLP, both LayerNorms and attention, which
// has no weights) and keeps what W needs; W computes only the weight gradients (Wqkv, Wo,
// W1, W2, their biases, both LayerNorms' gamma and beta). The MSE loss at the route's end and
// everything else not model-specific is ChunkModel's (runtime/chunk_model.hpp).
//
// Activation accounting (bytes per micro-batch; T·h elements = one activation; every tensor
// in the run's dtype but the LayerNorms' mean and rstd, which are fp32):
//   after F:  per block  forward_layer_bytes()  (the block's input — X0 for block 0 —,
//             LN1's output, mean and rstd, QKV, P (b·H·S²), context, x1, LN2's output, mean
//             and rstd, Z and A); with recompute: X0 only.
//   after B:  additionally per block dY, dx1, dQKV, dLN1 and dLN2 (7·T·h); dZ overwrites Z.
// Workspace (per chunk): one T·h scratch and max(one block's forward, dP + dc + dA).
// Attention runs all sequences and heads of a micro-batch as one batched GEMM per product.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/chunk_model.hpp"

namespace bb {

struct TransformerConfig {
  int hidden = 0;  // h
  int heads = 1;   // H; must divide h
  int seq = 0;     // S, tokens per sequence
  int ffn = 0;     // f, the MLP's width; 0 means 4h
  bool causal = false;
  int rows = 0;         // b, sequences per micro-batch
  int first_layer = 0;  // global index of the first block
  int num_layers = 1;   // L
  std::uint64_t seed = 0;
  bool recompute = false;
  std::optional<SyntheticTimes> synthetic{};  // unset: real compute
  // Model ends (docs/transformer.md, "Model ends"); vocab 0: none (seeded float inputs, MSE).
  int vocab = 0;       // V: token ids in [0, V)
  bool embed = false;  // this chunk holds the model's first block: token + position embedding
  bool head = false;   // this chunk holds its last: final LayerNorm, LM head, cross-entropy
  Dtype dtype = Dtype::kF32;  // of activations, their gradients and messages

  int ffn_width() const { return ffn > 0 ? ffn : 4 * hidden; }
  std::size_t tokens() const {
    return static_cast<std::size_t>(rows) * static_cast<std::size_t>(seq);
  }
};

// One parameter tensor of a block: name, offset in the block's parameters, floats.
struct ParamTensor {
  std::string name;
  std::size_t offset = 0;
  std::size_t count = 0;
};

// The parameter tensors of one block, in storage order: ln1.gamma, ln1.beta, qkv.weight (h×3h),
// qkv.bias, out.weight (h×h), out.bias | ln2.gamma, ln2.beta, ffn1.weight (h×f), ffn1.bias,
// ffn2.weight (f×h), ffn2.bias. The attention part (before "|") is the first gradient tensor
// of --check, the MLP part the second.
std::vector<ParamTensor> transformer_param_tensors(int hidden, int ffn);

// Global layer `layer`'s parameters into p (transformer_param_tensors' layout): weights
// uniform in ±1/sqrt(fan_in), biases and betas in ±0.1, gammas in 1 ± 0.1.
void init_transformer_layer(Backend& backend, std::uint64_t seed, int layer, int hidden, int ffn,
                            float* p);

// Bytes one block keeps after F for one micro-batch (its input included; see above), and of a
// chunk's work area (a block's forward, or B's dP, dc and dA).
std::size_t transformer_block_forward_bytes(const TransformerConfig& config);
std::size_t transformer_workspace_bytes(const TransformerConfig& config);

// What a TransformerStage of `config` keeps per micro-batch and its workspace (ChunkModel's
// sizes()), and the bytes its loss keeps from F to W (the head's; 0 without one).
ChunkSizes transformer_sizes(const TransformerConfig& config);
std::size_t transformer_loss_bytes(const TransformerConfig& config);

// Floats of the parameters of the model's ends that a chunk of `config` holds: the token and
// position embeddings (V·h + S·h) with embed, the final LayerNorm and the LM head (2h + h·V)
// with head.
std::size_t transformer_end_param_count(const TransformerConfig& config);

class TransformerStage final : public ChunkModel {
 public:
  TransformerStage(Backend& backend, const TransformerConfig& config,
                   ActivationMeter* shared_meter = nullptr);
  TransformerStage(TransformerStage&&) noexcept = default;

  const TransformerConfig& config() const { return config_; }
  std::size_t gradient_split() const override;
  std::vector<EndTensors> end_tensors() const override;
  // Bytes one block keeps after F (its input included).
  std::size_t forward_layer_bytes() const { return f_.size; }

  // Byte offsets of one block's tensors: its forward part, then its backward part (in
  // TensorLayouts of the activation dtype), B's workspace, and the head's tensors.
  struct ForwardPart {
    std::size_t ln1, mean1, rstd1, qkv, probs, ctx, x1, ln2, mean2, rstd2, z, a, out, size;
  };
  struct BackwardPart {
    std::size_t dy, dx1, dqkv, dln1, dln2, size;
  };
  struct WorkPart {
    std::size_t dprobs, dctx, da, size;
  };
  struct HeadPart {
    std::size_t x, ln, mean, rstd, dln, dlogits, size;
  };

 private:
  ChunkSizes sizes() const override;
  void run_forward(ConstTensorPtr x0, TensorPtr saved, TensorPtr y) override;
  void run_forward_transient(ConstTensorPtr x0, TensorPtr y) override;
  void run_backward(ConstTensorPtr x0, TensorPtr saved, ConstTensorPtr dy, TensorPtr dx) override;
  void run_weight(ConstTensorPtr x0, TensorPtr saved) override;
  void run_make_input(int mb, TensorPtr x) override;
  std::size_t loss_bytes() const override;
  void run_loss(int mb, int num_microbatches, ConstTensorPtr y, TensorPtr dy, TensorPtr kept,
                float* loss_sum) override;
  void run_loss_weight(TensorPtr kept) override;

  // Ends: the embedding's output and its gradient after the blocks' areas of `saved`; the
  // head's tensors in the loss's `kept`.
  TensorPtr embedded(TensorPtr saved) const { return area(saved, config_.num_layers); }
  TensorPtr embedded_grad(TensorPtr saved) const { return embedded(saved) + activation_count(); }
  std::size_t end_offset(bool head) const;  // first parameter of the embedding or the head
  void embed(ConstTensorPtr ids, TensorPtr out);

  TensorPtr area(TensorPtr saved, int block) const {
    return act_at(saved, (f_.size + b_.size) * static_cast<std::size_t>(block));
  }
  ConstTensorPtr input_of(ConstTensorPtr x0, TensorPtr saved, int block) const;
  const float* param(int block, std::size_t tensor) const;
  float* grad(int block, std::size_t tensor);

  void forward_layer(int block, ConstTensorPtr x, TensorPtr f, TensorPtr out);
  void backward_layer(int block, ConstTensorPtr x, TensorPtr f, TensorPtr bw, TensorPtr dx);
  void weight_layer(int block, ConstTensorPtr x, TensorPtr f, TensorPtr bw);

  TransformerConfig config_;
  std::vector<ParamTensor> tensors_;
  ForwardPart f_{};
  BackwardPart b_{};
  WorkPart w_{};
  HeadPart head_{};
  Buffer work_;  // the transient forward's block, or B's dP, dc and dA
};

}  // namespace bb
