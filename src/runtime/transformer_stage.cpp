#include "runtime/transformer_stage.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace bb {
namespace {

// Indices into transformer_param_tensors().
enum Tensor : std::size_t {
  kLn1Gamma,
  kLn1Beta,
  kWqkv,
  kBqkv,
  kWo,
  kBo,
  kLn2Gamma,
  kLn2Beta,
  kW1,
  kB1,
  kW2,
  kB2,
  kNumTensors
};

constexpr float kLayerNormEps = 1e-5f;

ChunkShape transformer_shape(const TransformerConfig& c) {
  if (c.hidden <= 0 || c.rows <= 0 || c.seq <= 0 || c.num_layers <= 0 || c.first_layer < 0 ||
      c.heads <= 0 || c.ffn < 0)
    throw std::invalid_argument(
        "TransformerStage: hidden, heads, seq, rows and num_layers must be positive");
  if ((c.embed || c.head) && (c.vocab <= 0 || c.vocab >= (1 << 24)))
    throw std::invalid_argument("TransformerStage: the model's ends need a vocab of 1..2^24-1");
  if ((c.embed || c.head) && static_cast<std::size_t>(c.hidden) * dtype_size(c.dtype) < 4)
    throw std::invalid_argument(
        "TransformerStage: the model's ends need hidden >= 2 (token ids "
        "are kept in activation buffers)");
  if (c.hidden % c.heads != 0)
    throw std::invalid_argument("TransformerStage: heads (" + std::to_string(c.heads) +
                                ") must divide hidden (" + std::to_string(c.hidden) + ")");
  std::size_t per_layer = 0;
  for (const ParamTensor& t : transformer_param_tensors(c.hidden, c.ffn_width()))
    per_layer += t.count;
  ChunkShape s = chunk_shape(c, c.tokens() * static_cast<std::size_t>(c.hidden),
                             per_layer * static_cast<std::size_t>(c.num_layers));
  s.end_param_count = transformer_end_param_count(c);
  s.param_count += s.end_param_count;
  return s;
}

// The sizes of a block's math: T tokens, h hidden, f FFN width, S sequence, H heads of d
// columns, SS = S·S (one head's scores), alpha = 1/sqrt(d) (the attention scale), act = T·h.
struct LayerDims {
  int T, h, f, S, H, d;
  std::int64_t SS;
  float alpha;
  std::size_t act;
};

LayerDims layer_dims(const TransformerConfig& c) {
  const int h = c.hidden, d = h / c.heads;
  return {static_cast<int>(c.tokens()),
          h,
          c.ffn_width(),
          c.seq,
          c.heads,
          d,
          static_cast<std::int64_t>(c.seq) * c.seq,
          static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))),
          c.tokens() * static_cast<std::size_t>(h)};
}

// Indices of the ends' tensors in their seed streams (SeedKind::kModelEnds).
enum EndTensor : std::uint64_t { kTokenTable, kPositionTable, kLnfGamma, kLnfBeta, kHeadWeight };

}  // namespace

std::size_t transformer_end_param_count(const TransformerConfig& c) {
  const auto h = static_cast<std::size_t>(c.hidden), V = static_cast<std::size_t>(c.vocab);
  return (c.embed ? V * h + static_cast<std::size_t>(c.seq) * h : 0) + (c.head ? 2 * h + h * V : 0);
}

namespace {

using ForwardPart = TransformerStage::ForwardPart;
using BackwardPart = TransformerStage::BackwardPart;
using WorkPart = TransformerStage::WorkPart;
using HeadPart = TransformerStage::HeadPart;

std::size_t probs_count(const TransformerConfig& c) {
  return static_cast<std::size_t>(c.rows) * static_cast<std::size_t>(c.heads) *
         static_cast<std::size_t>(c.seq) * static_cast<std::size_t>(c.seq);
}

ForwardPart forward_part(const TransformerConfig& c) {
  const std::size_t T = c.tokens(), h = static_cast<std::size_t>(c.hidden);
  const auto f = static_cast<std::size_t>(c.ffn_width());
  TensorLayout l(c.dtype);
  ForwardPart p{};
  p.ln1 = l.act(T * h);
  p.mean1 = l.f32(T);
  p.rstd1 = l.f32(T);
  p.qkv = l.act(3 * T * h);
  p.probs = l.act(probs_count(c));
  p.ctx = l.act(T * h);
  p.x1 = l.act(T * h);
  p.ln2 = l.act(T * h);
  p.mean2 = l.f32(T);
  p.rstd2 = l.f32(T);
  p.z = l.act(T * f);
  p.a = l.act(T * f);
  p.out = l.act(T * h);  // the next block's input (unused in the last block: X0 counts instead)
  p.size = l.size();
  return p;
}

BackwardPart backward_part(const TransformerConfig& c) {
  const std::size_t T = c.tokens(), h = static_cast<std::size_t>(c.hidden);
  TensorLayout l(c.dtype);
  BackwardPart p{};
  p.dy = l.act(T * h);
  p.dx1 = l.act(T * h);
  p.dqkv = l.act(3 * T * h);
  p.dln1 = l.act(T * h);
  p.dln2 = l.act(T * h);
  p.size = l.size();
  return p;
}

WorkPart work_part(const TransformerConfig& c) {
  const std::size_t T = c.tokens(), h = static_cast<std::size_t>(c.hidden);
  TensorLayout l(c.dtype);
  WorkPart p{};
  p.dprobs = l.act(probs_count(c));
  p.dctx = l.act(T * h);
  p.da = l.act(T * static_cast<std::size_t>(c.ffn_width()));
  p.size = l.size();
  return p;
}

HeadPart head_part(const TransformerConfig& c) {
  const std::size_t T = c.tokens(), h = static_cast<std::size_t>(c.hidden);
  TensorLayout l(c.dtype);
  HeadPart p{};
  p.x = l.act(T * h);  // the head's input (the last block's output)
  p.ln = l.act(T * h);
  p.mean = l.f32(T);
  p.rstd = l.f32(T);
  p.dln = l.act(T * h);
  p.dlogits = l.act(T * static_cast<std::size_t>(c.vocab));
  p.size = l.size();
  return p;
}

}  // namespace

std::size_t transformer_block_forward_bytes(const TransformerConfig& c) {
  return forward_part(c).size;
}

std::size_t transformer_workspace_bytes(const TransformerConfig& c) {
  return std::max(forward_part(c).size, work_part(c).size);
}

std::vector<ParamTensor> transformer_param_tensors(int hidden, int ffn) {
  const auto h = static_cast<std::size_t>(hidden), f = static_cast<std::size_t>(ffn);
  const std::pair<const char*, std::size_t> sizes[kNumTensors] = {
      {"ln1.gamma", h},       {"ln1.beta", h},  {"qkv.weight", h * 3 * h}, {"qkv.bias", 3 * h},
      {"out.weight", h * h},  {"out.bias", h},  {"ln2.gamma", h},          {"ln2.beta", h},
      {"ffn1.weight", h * f}, {"ffn1.bias", f}, {"ffn2.weight", f * h},    {"ffn2.bias", h}};
  std::vector<ParamTensor> out;
  std::size_t offset = 0;
  for (const auto& [name, count] : sizes) {
    out.push_back({name, offset, count});
    offset += count;
  }
  return out;
}

void init_transformer_layer(Backend& backend, std::uint64_t seed, int layer, int hidden, int ffn,
                            float* p) {
  const std::vector<ParamTensor> tensors = transformer_param_tensors(hidden, ffn);
  const double h = hidden, f = ffn;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const std::uint64_t stream =
        seed_stream(SeedKind::kTransformer, static_cast<std::uint64_t>(layer) * 16 + t);
    double scale = 0.1;  // biases and betas; gammas 1 ± 0.1
    if (t == kWqkv || t == kWo || t == kW1) scale = 1.0 / std::sqrt(h);
    if (t == kW2) scale = 1.0 / std::sqrt(f);
    float* x = p + tensors[t].offset;
    backend.seeded_uniform(x, tensors[t].count, seed, stream, static_cast<float>(scale));
    if (t == kLn1Gamma || t == kLn2Gamma) {
      Buffer ones = backend.allocate(tensors[t].count);
      backend.fill(ones.data(), 1.0f, tensors[t].count);
      backend.axpy(1.0f, ones.data(), x, tensors[t].count);
    }
  }
}

TransformerStage::TransformerStage(Backend& backend, const TransformerConfig& config,
                                   ActivationMeter* shared_meter)
    : ChunkModel(backend, transformer_shape(config), shared_meter),
      config_(config),
      tensors_(transformer_param_tensors(config.hidden, config.ffn_width())),
      f_(forward_part(config)),
      b_(backward_part(config)),
      w_(work_part(config)),
      head_(head_part(config)) {
  const auto h = static_cast<std::size_t>(config.hidden);
  if (config.synthetic) return;
  const std::size_t per_layer = layer_param_count();
  for (int i = 0; i < config.num_layers; ++i)
    init_transformer_layer(backend, config.seed, config.first_layer + i, config.hidden,
                           config.ffn_width(), params() + per_layer * static_cast<std::size_t>(i));
  // The ends: embeddings uniform in ±1, the final LayerNorm as the blocks' (gamma 1 ± 0.1,
  // beta ± 0.1), the head's weight in ±1/sqrt(h).
  const auto V = static_cast<std::size_t>(config.vocab), S = static_cast<std::size_t>(config.seq);
  auto init = [&](float* p, std::size_t count, EndTensor t, double scale, bool plus_one) {
    backend.seeded_uniform(p, count, config.seed, seed_stream(SeedKind::kModelEnds, t),
                           static_cast<float>(scale));
    if (!plus_one) return;
    Buffer ones = backend.allocate(count);
    backend.fill(ones.data(), 1.0f, count);
    backend.axpy(1.0f, ones.data(), p, count);
  };
  if (config.embed) {
    float* e = params() + end_offset(false);
    init(e, V * h, kTokenTable, 1.0, false);
    init(e + V * h, S * h, kPositionTable, 1.0, false);
  }
  if (config.head) {
    float* e = params() + end_offset(true);
    init(e, h, kLnfGamma, 0.1, true);
    init(e + h, h, kLnfBeta, 0.1, false);
    init(e + 2 * h, h * V, kHeadWeight, 1.0 / std::sqrt(static_cast<double>(h)), false);
  }
  work_ = allocate_bytes(transformer_workspace_bytes(config));
}

std::size_t TransformerStage::gradient_split() const {
  return tensors_[kLn2Gamma].offset;
}

std::size_t TransformerStage::end_offset(bool head) const {
  std::size_t o = layer_param_count() * static_cast<std::size_t>(config_.num_layers);
  if (head && config_.embed)
    o += (static_cast<std::size_t>(config_.vocab) + static_cast<std::size_t>(config_.seq)) *
         static_cast<std::size_t>(config_.hidden);
  return o;
}

std::vector<ChunkModel::EndTensors> TransformerStage::end_tensors() const {
  const auto h = static_cast<std::size_t>(config_.hidden),
             V = static_cast<std::size_t>(config_.vocab);
  std::vector<EndTensors> out;
  // The embedding as layer -1 (token table | positions), the head as the layer after the
  // last block (final LayerNorm | LM head weight).
  if (config_.embed)
    out.push_back({-1, end_offset(false), V * h, (V + static_cast<std::size_t>(config_.seq)) * h});
  if (config_.head)
    out.push_back(
        {config_.first_layer + config_.num_layers, end_offset(true), 2 * h, 2 * h + h * V});
  return out;
}

// With embed, the embedding's output (after F) and its gradient (after B) add one activation
// each; with head, the loss keeps head_ from F to W.
ChunkSizes transformer_sizes(const TransformerConfig& c) {
  const auto L = static_cast<std::size_t>(c.num_layers);
  const std::size_t f = forward_part(c).size, b = backward_part(c).size;
  const std::size_t emb =
      c.embed ? c.tokens() * static_cast<std::size_t>(c.hidden) * dtype_size(c.dtype) : 0;
  const std::size_t saved = (f + b) * L + 2 * emb;
  const std::size_t size = dtype_size(c.dtype);  // the work area is allocated in whole elements
  const std::size_t work = (transformer_workspace_bytes(c) + size - 1) / size * size;
  return {saved, f * L + emb, saved + transformer_loss_bytes(c), work};
}
std::size_t transformer_loss_bytes(const TransformerConfig& c) {
  return c.head ? head_part(c).size : 0;
}
ChunkSizes TransformerStage::sizes() const {
  return transformer_sizes(config_);
}
std::size_t TransformerStage::loss_bytes() const {
  return transformer_loss_bytes(config_);
}

ConstTensorPtr TransformerStage::input_of(ConstTensorPtr x0, TensorPtr saved, int block) const {
  if (block == 0) return config_.embed ? ConstTensorPtr(embedded(saved)) : x0;
  return act_at(area(saved, block - 1), f_.out);
}
const float* TransformerStage::param(int block, std::size_t tensor) const {
  return params() + layer_param_count() * static_cast<std::size_t>(block) + tensors_[tensor].offset;
}
float* TransformerStage::grad(int block, std::size_t tensor) {
  return grads() + layer_param_count() * static_cast<std::size_t>(block) + tensors_[tensor].offset;
}

// --- Math ----------------------------------------------------------------------------------

namespace {

// The attention GEMMs' batch: every sequence (outer) and head (inner) of a micro-batch. A
// sequence's rows of Q, K, V (leading dimension 3h) and of the context (h) start S rows
// further on, a head's columns d further on; its scores P are a dense S×S block.
struct AttentionStrides {
  std::int64_t qkv_seq, qkv_head, ctx_seq, ctx_head, p_seq, p_head;
};

AttentionStrides attention_strides(const LayerDims& D) {
  return {static_cast<std::int64_t>(D.S) * 3 * D.h, D.d, static_cast<std::int64_t>(D.S) * D.h, D.d,
          static_cast<std::int64_t>(D.H) * D.SS,    D.SS};
}

// One batch over (sequence, head) of operands with the given (per-sequence, per-head) strides.
GemmBatch attention_batch(int rows, int heads, std::int64_t a_seq, std::int64_t a_head,
                          std::int64_t b_seq, std::int64_t b_head, std::int64_t c_seq,
                          std::int64_t c_head) {
  GemmBatch g;
  g.outer = rows;
  g.inner = heads;
  g.outer_a = a_seq;
  g.inner_a = a_head;
  g.outer_b = b_seq;
  g.inner_b = b_head;
  g.outer_c = c_seq;
  g.inner_c = c_head;
  return g;
}

}  // namespace

void TransformerStage::forward_layer(int l, ConstTensorPtr x, TensorPtr fw, TensorPtr out) {
  Backend& be = backend();
  const LayerDims D = layer_dims(config_);
  const auto [T, h, f, S, H, d, SS, alpha, act] = D;
  const AttentionStrides st = attention_strides(D);
  const int B = config_.rows;
  const TensorPtr ln1 = act_at(fw, f_.ln1), qkv = act_at(fw, f_.qkv), probs = act_at(fw, f_.probs);
  const TensorPtr ctx = act_at(fw, f_.ctx), x1 = act_at(fw, f_.x1), ln2 = act_at(fw, f_.ln2);
  const TensorPtr z = act_at(fw, f_.z), a = act_at(fw, f_.a);

  be.layernorm(x, param(l, kLn1Gamma), param(l, kLn1Beta), ln1, f32_at(fw, f_.mean1),
               f32_at(fw, f_.rstd1), T, h, kLayerNormEps);
  be.gemm(kNoTrans, kNoTrans, T, 3 * h, h, 1.0f, ln1, h, param(l, kWqkv), 3 * h, 0.0f, qkv, 3 * h);
  be.add_bias(qkv, param(l, kBqkv), T, 3 * h);
  // Head i's Q, K, V are d columns at i·d of qkv's three h-wide parts; its scores a dense
  // S×S block of probs.
  be.gemm_batched(
      kNoTrans, kTrans, S, S, d, alpha, qkv, 3 * h, qkv + h, 3 * h, 0.0f, probs, S,
      attention_batch(B, H, st.qkv_seq, st.qkv_head, st.qkv_seq, st.qkv_head, st.p_seq, st.p_head));
  be.softmax(probs, probs, B * H * S, S, config_.causal);
  be.gemm_batched(
      kNoTrans, kNoTrans, S, d, S, 1.0f, probs, S, qkv + 2 * h, 3 * h, 0.0f, ctx, h,
      attention_batch(B, H, st.p_seq, st.p_head, st.qkv_seq, st.qkv_head, st.ctx_seq, st.ctx_head));
  be.copy(x, x1, act);
  be.gemm(kNoTrans, kNoTrans, T, h, h, 1.0f, ctx, h, param(l, kWo), h, 1.0f, x1, h);
  be.add_bias(x1, param(l, kBo), T, h);

  be.layernorm(x1, param(l, kLn2Gamma), param(l, kLn2Beta), ln2, f32_at(fw, f_.mean2),
               f32_at(fw, f_.rstd2), T, h, kLayerNormEps);
  be.gemm(kNoTrans, kNoTrans, T, f, h, 1.0f, ln2, h, param(l, kW1), f, 0.0f, z, f);
  be.add_bias(z, param(l, kB1), T, f);
  be.gelu(z, a, static_cast<std::size_t>(T) * f);
  be.copy(x1, out, act);
  be.gemm(kNoTrans, kNoTrans, T, h, f, 1.0f, a, f, param(l, kW2), h, 1.0f, out, h);
  be.add_bias(out, param(l, kB2), T, h);
}

// bw's dY holds the block's output gradient; dx gets its input gradient.
void TransformerStage::backward_layer(int l, ConstTensorPtr x, TensorPtr fw, TensorPtr bw,
                                      TensorPtr dx) {
  Backend& be = backend();
  const LayerDims D = layer_dims(config_);
  const auto [T, h, f, S, H, d, SS, alpha, act] = D;
  const AttentionStrides st = attention_strides(D);
  const int B = config_.rows;
  const TensorPtr g = act_at(bw, b_.dy), dx1 = act_at(bw, b_.dx1), dqkv = act_at(bw, b_.dqkv);
  const TensorPtr z = act_at(fw, f_.z);  // becomes dZ
  const TensorPtr qkv = act_at(fw, f_.qkv), probs = act_at(fw, f_.probs);
  const TensorPtr dprobs = act_at(work_.ptr(), w_.dprobs), dctx = act_at(work_.ptr(), w_.dctx);
  const TensorPtr da = act_at(work_.ptr(), w_.da);

  // MLP and LN2.
  be.gemm(kNoTrans, kTrans, T, f, h, 1.0f, g, h, param(l, kW2), h, 0.0f, da, f);
  be.gelu_backward(z, da, z, static_cast<std::size_t>(T) * f);
  be.gemm(kNoTrans, kTrans, T, h, f, 1.0f, z, f, param(l, kW1), f, 0.0f, act_at(bw, b_.dln2), h);
  be.copy(g, dx1, act);
  be.layernorm_backward_input(act_at(fw, f_.x1), param(l, kLn2Gamma), f32_at(fw, f_.mean2),
                              f32_at(fw, f_.rstd2), act_at(bw, b_.dln2), dx1, T, h);
  // Output projection and attention (dP = dc·Vᵀ, dV = Pᵀ·dc, then dQ = α·dS·K, dK = α·dSᵀ·Q).
  be.gemm(kNoTrans, kTrans, T, h, h, 1.0f, dx1, h, param(l, kWo), h, 0.0f, dctx, h);
  be.gemm_batched(
      kNoTrans, kTrans, S, S, d, 1.0f, dctx, h, qkv + 2 * h, 3 * h, 0.0f, dprobs, S,
      attention_batch(B, H, st.ctx_seq, st.ctx_head, st.qkv_seq, st.qkv_head, st.p_seq, st.p_head));
  be.gemm_batched(
      kTrans, kNoTrans, S, d, S, 1.0f, probs, S, dctx, h, 0.0f, dqkv + 2 * h, 3 * h,
      attention_batch(B, H, st.p_seq, st.p_head, st.ctx_seq, st.ctx_head, st.qkv_seq, st.qkv_head));
  be.softmax_backward(probs, dprobs, dprobs, B * H * S, S);
  be.gemm_batched(
      kNoTrans, kNoTrans, S, d, S, alpha, dprobs, S, qkv + h, 3 * h, 0.0f, dqkv, 3 * h,
      attention_batch(B, H, st.p_seq, st.p_head, st.qkv_seq, st.qkv_head, st.qkv_seq, st.qkv_head));
  be.gemm_batched(
      kTrans, kNoTrans, S, d, S, alpha, dprobs, S, qkv, 3 * h, 0.0f, dqkv + h, 3 * h,
      attention_batch(B, H, st.p_seq, st.p_head, st.qkv_seq, st.qkv_head, st.qkv_seq, st.qkv_head));
  // QKV projection and LN1.
  be.gemm(kNoTrans, kTrans, T, h, 3 * h, 1.0f, dqkv, 3 * h, param(l, kWqkv), 3 * h, 0.0f,
          act_at(bw, b_.dln1), h);
  be.copy(dx1, dx, act);
  be.layernorm_backward_input(x, param(l, kLn1Gamma), f32_at(fw, f_.mean1), f32_at(fw, f_.rstd1),
                              act_at(bw, b_.dln1), dx, T, h);
}

void TransformerStage::weight_layer(int l, ConstTensorPtr x, TensorPtr fw, TensorPtr bw) {
  Backend& be = backend();
  const int T = static_cast<int>(config_.tokens()), h = config_.hidden, f = config_.ffn_width();
  const TensorPtr g = act_at(bw, b_.dy), dz = act_at(fw, f_.z);
  const TensorPtr dx1 = act_at(bw, b_.dx1), dqkv = act_at(bw, b_.dqkv);
  be.gemm(kTrans, kNoTrans, f, h, T, 1.0f, act_at(fw, f_.a), f, g, h, 1.0f, grad(l, kW2), h);
  be.column_sums(g, grad(l, kB2), T, h);
  be.gemm(kTrans, kNoTrans, h, f, T, 1.0f, act_at(fw, f_.ln2), h, dz, f, 1.0f, grad(l, kW1), f);
  be.column_sums(dz, grad(l, kB1), T, f);
  be.layernorm_backward_params(act_at(fw, f_.x1), f32_at(fw, f_.mean2), f32_at(fw, f_.rstd2),
                               act_at(bw, b_.dln2), grad(l, kLn2Gamma), grad(l, kLn2Beta), T, h);
  be.gemm(kTrans, kNoTrans, h, h, T, 1.0f, act_at(fw, f_.ctx), h, dx1, h, 1.0f, grad(l, kWo), h);
  be.column_sums(dx1, grad(l, kBo), T, h);
  be.gemm(kTrans, kNoTrans, h, 3 * h, T, 1.0f, act_at(fw, f_.ln1), h, dqkv, 3 * h, 1.0f,
          grad(l, kWqkv), 3 * h);
  be.column_sums(dqkv, grad(l, kBqkv), T, 3 * h);
  be.layernorm_backward_params(x, f32_at(fw, f_.mean1), f32_at(fw, f_.rstd1), act_at(bw, b_.dln1),
                               grad(l, kLn1Gamma), grad(l, kLn1Beta), T, h);
}

void TransformerStage::embed(ConstTensorPtr ids, TensorPtr out) {
  const float* table = params() + end_offset(false);
  backend().embedding(token_ids(ids), table,
                      table + static_cast<std::size_t>(config_.vocab) * config_.hidden, out,
                      static_cast<int>(config_.tokens()), config_.seq, config_.hidden);
}

void TransformerStage::run_forward(ConstTensorPtr x0, TensorPtr saved, TensorPtr y) {
  const int L = config_.num_layers;
  if (config_.embed) embed(x0, embedded(saved));
  for (int i = 0; i < L; ++i)
    forward_layer(i, input_of(x0, saved, i), area(saved, i),
                  i + 1 < L ? act_at(area(saved, i), f_.out) : y);
}

// Every block's tensors in the workspace; outputs alternate between scratch and y so that
// the last lands in y.
void TransformerStage::run_forward_transient(ConstTensorPtr x0, TensorPtr y) {
  const int L = config_.num_layers;
  ConstTensorPtr x = x0;
  if (config_.embed) {  // one more output in the alternation, before block 0's
    const TensorPtr out = L % 2 == 0 ? y : scratch();
    embed(x0, out);
    x = out;
  }
  for (int i = 0; i < L; ++i) {
    const TensorPtr out = (L - 1 - i) % 2 == 0 ? y : scratch();
    forward_layer(i, x, work_.ptr(), out);
    x = out;
  }
}

void TransformerStage::run_backward(ConstTensorPtr x0, TensorPtr saved, ConstTensorPtr dy,
                                    TensorPtr dx) {
  const int L = config_.num_layers;
  backend().copy(dy, act_at(area(saved, L - 1), f_.size + b_.dy), activation_count());
  for (int i = L - 1; i >= 0; --i) {
    const TensorPtr fw = area(saved, i);
    // With embed, block 0's input gradient is the embedding's output gradient (W's); the
    // token ids have none.
    const TensorPtr out = i > 0 ? act_at(area(saved, i - 1), f_.size + b_.dy)
                                : (config_.embed ? embedded_grad(saved) : dx);
    backward_layer(i, input_of(x0, saved, i), fw, act_at(fw, f_.size), out);
  }
}

void TransformerStage::run_weight(ConstTensorPtr x0, TensorPtr saved) {
  for (int i = 0; i < config_.num_layers; ++i) {
    const TensorPtr fw = area(saved, i);
    weight_layer(i, input_of(x0, saved, i), fw, act_at(fw, f_.size));
  }
  if (config_.embed) {
    float* g = grads() + end_offset(false);
    backend().embedding_backward(token_ids(x0), embedded_grad(saved), g,
                                 g + static_cast<std::size_t>(config_.vocab) * config_.hidden,
                                 static_cast<int>(config_.tokens()), config_.seq, config_.hidden);
  }
}

// --- Model ends ------------------------------------------------------------------------------

void TransformerStage::run_make_input(int mb, TensorPtr x) {
  if (config_.vocab <= 0) return ChunkModel::run_make_input(mb, x);
  if (!config_.embed)
    throw std::logic_error("TransformerStage: a route starts at a chunk without the embedding");
  backend().fill(x, 0.0f, activation_count());  // the ids use the first T·4 bytes
  make_seeded_tokens(backend(), config_.seed, SeedKind::kTokens, mb, config_.tokens(),
                     config_.vocab, token_ids(x));
}

// Final LayerNorm, LM head and cross-entropy (mean over the micro-batch's tokens, scaled by
// 1/num_microbatches) against seeded target ids; dy = the head's input gradient. The weight
// gradients wait for W (run_loss_weight).
void TransformerStage::run_loss(int mb, int num_microbatches, ConstTensorPtr y, TensorPtr dy,
                                TensorPtr kept, float* loss_sum) {
  if (config_.vocab <= 0) return ChunkModel::run_loss(mb, num_microbatches, y, dy, kept, loss_sum);
  if (!config_.head)
    throw std::logic_error("TransformerStage: a route ends at a chunk without the LM head");
  Backend& be = backend();
  const int T = static_cast<int>(config_.tokens()), h = config_.hidden, V = config_.vocab;
  const float* gamma = params() + end_offset(true);
  const float* w = gamma + 2 * static_cast<std::size_t>(h);
  const TensorPtr x = act_at(kept, head_.x), ln = act_at(kept, head_.ln);
  const TensorPtr logits = act_at(kept, head_.dlogits);  // becomes dlogits
  float* mean = f32_at(kept, head_.mean);
  float* rstd = f32_at(kept, head_.rstd);
  be.copy(y, x, activation_count());  // dy may alias y
  be.layernorm(x, gamma, gamma + h, ln, mean, rstd, T, h, kLayerNormEps);
  be.gemm(kNoTrans, kNoTrans, T, V, h, 1.0f, ln, h, w, V, 0.0f, logits, V);
  std::int32_t* targets = token_ids(scratch());  // T ids in its activation's bytes
  make_seeded_tokens(be, config_.seed, SeedKind::kTokenTargets, mb, config_.tokens(), V, targets);
  const float scale =
      static_cast<float>(1.0 / (static_cast<double>(num_microbatches) * static_cast<double>(T)));
  be.cross_entropy(logits, targets, logits, T, V, scale, loss_sum);
  be.gemm(kNoTrans, kTrans, T, h, V, 1.0f, logits, V, w, V, 0.0f, act_at(kept, head_.dln), h);
  be.fill(dy, 0.0f, activation_count());
  be.layernorm_backward_input(x, gamma, mean, rstd, act_at(kept, head_.dln), dy, T, h);
}

void TransformerStage::run_loss_weight(TensorPtr kept) {
  Backend& be = backend();
  const int T = static_cast<int>(config_.tokens()), h = config_.hidden, V = config_.vocab;
  float* g = grads() + end_offset(true);
  be.gemm(kTrans, kNoTrans, h, V, T, 1.0f, act_at(kept, head_.ln), h, act_at(kept, head_.dlogits),
          V, 1.0f, g + 2 * static_cast<std::size_t>(h), V);
  be.layernorm_backward_params(act_at(kept, head_.x), f32_at(kept, head_.mean),
                               f32_at(kept, head_.rstd), act_at(kept, head_.dln), g, g + h, T, h);
}

}  // namespace bb
