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

std::size_t transformer_block_forward_floats(const TransformerConfig& c) {
  const std::size_t T = c.tokens(), h = static_cast<std::size_t>(c.hidden);
  const std::size_t probs = static_cast<std::size_t>(c.rows) * static_cast<std::size_t>(c.heads) *
                            static_cast<std::size_t>(c.seq) * static_cast<std::size_t>(c.seq);
  return 8 * T * h + 2 * T * static_cast<std::size_t>(c.ffn_width()) + probs + 4 * T;
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
      tensors_(transformer_param_tensors(config.hidden, config.ffn_width())) {
  const std::size_t T = config.tokens(), h = static_cast<std::size_t>(config.hidden);
  const std::size_t f = static_cast<std::size_t>(config.ffn_width());
  const std::size_t probs =
      static_cast<std::size_t>(config.rows) * static_cast<std::size_t>(config.heads) *
      static_cast<std::size_t>(config.seq) * static_cast<std::size_t>(config.seq);
  std::size_t o = 0;
  auto next = [&o](std::size_t n) {
    const std::size_t at = o;
    o += n;
    return at;
  };
  f_.ln1 = next(T * h);
  f_.mean1 = next(T);
  f_.rstd1 = next(T);
  f_.qkv = next(3 * T * h);
  f_.probs = next(probs);
  f_.ctx = next(T * h);
  f_.x1 = next(T * h);
  f_.ln2 = next(T * h);
  f_.mean2 = next(T);
  f_.rstd2 = next(T);
  f_.z = next(T * f);
  f_.a = next(T * f);
  f_.out = next(T * h);  // the next block's input (unused in the last block: X0 counts instead)
  f_.size = o;
  if (f_.size != transformer_block_forward_floats(config))
    throw std::logic_error("TransformerStage: layout and transformer_block_forward_floats differ");
  o = 0;
  b_.dy = next(T * h);
  b_.dx1 = next(T * h);
  b_.dqkv = next(3 * T * h);
  b_.dln1 = next(T * h);
  b_.dln2 = next(T * h);
  b_.size = o;
  o = 0;
  head_.x = next(T * h);  // the head's input (the last block's output)
  head_.ln = next(T * h);
  head_.mean = next(T);
  head_.rstd = next(T);
  head_.dln = next(T * h);
  head_.dlogits = next(T * static_cast<std::size_t>(config.vocab));
  head_.size = o;

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
  work_ = backend.allocate(std::max(f_.size, probs + T * h + T * f));
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
ChunkSizes TransformerStage::sizes() const {
  const auto L = static_cast<std::size_t>(config_.num_layers);
  const std::size_t emb = config_.embed ? activation_count() : 0;
  const std::size_t saved = (f_.size + b_.size) * L + 2 * emb;
  return {saved, f_.size * L + emb, saved + loss_count(), work_.bytes()};
}
std::size_t TransformerStage::loss_count() const {
  return config_.head ? head_.size : 0;
}

const float* TransformerStage::input_of(const float* x0, float* saved, int block) const {
  if (block == 0) return config_.embed ? embedded(saved) : x0;
  return area(saved, block - 1) + f_.out;
}
const float* TransformerStage::param(int block, std::size_t tensor) const {
  return params() + layer_param_count() * static_cast<std::size_t>(block) + tensors_[tensor].offset;
}
float* TransformerStage::grad(int block, std::size_t tensor) {
  return grads() + layer_param_count() * static_cast<std::size_t>(block) + tensors_[tensor].offset;
}

// --- Math ----------------------------------------------------------------------------------

void TransformerStage::forward_layer(int l, const float* x, float* fw, float* out) {
  Backend& be = backend();
  const auto [T, h, f, S, H, d, SS, alpha, act] = layer_dims(config_);
  float* ln1 = fw + f_.ln1;
  float* qkv = fw + f_.qkv;
  float* probs = fw + f_.probs;
  float* ctx = fw + f_.ctx;
  float* x1 = fw + f_.x1;
  float* ln2 = fw + f_.ln2;
  float* z = fw + f_.z;
  float* a = fw + f_.a;

  be.layernorm(x, param(l, kLn1Gamma), param(l, kLn1Beta), ln1, fw + f_.mean1, fw + f_.rstd1, T, h,
               kLayerNormEps);
  be.gemm(kNoTrans, kNoTrans, T, 3 * h, h, 1.0f, ln1, h, param(l, kWqkv), 3 * h, 0.0f, qkv, 3 * h);
  be.add_bias(qkv, param(l, kBqkv), T, 3 * h);
  // Per sequence, the heads as one batch: head i's Q, K, V are d columns at i·d of qkv's
  // three h-wide parts (leading dimension 3h); its scores a dense S×S block of probs.
  for (int s = 0; s < config_.rows; ++s) {
    const float* q = qkv + static_cast<std::size_t>(s) * S * 3 * h;
    float* p = probs + static_cast<std::size_t>(s) * H * SS;
    be.gemm_strided_batched(kNoTrans, kTrans, S, S, d, alpha, q, 3 * h, d, q + h, 3 * h, d, 0.0f, p,
                            S, SS, H);
  }
  be.softmax(probs, probs, config_.rows * H * S, S, config_.causal);
  for (int s = 0; s < config_.rows; ++s) {
    const float* q = qkv + static_cast<std::size_t>(s) * S * 3 * h;
    const float* p = probs + static_cast<std::size_t>(s) * H * SS;
    be.gemm_strided_batched(kNoTrans, kNoTrans, S, d, S, 1.0f, p, S, SS, q + 2 * h, 3 * h, d, 0.0f,
                            ctx + static_cast<std::size_t>(s) * S * h, h, d, H);
  }
  be.copy(x, x1, act);
  be.gemm(kNoTrans, kNoTrans, T, h, h, 1.0f, ctx, h, param(l, kWo), h, 1.0f, x1, h);
  be.add_bias(x1, param(l, kBo), T, h);

  be.layernorm(x1, param(l, kLn2Gamma), param(l, kLn2Beta), ln2, fw + f_.mean2, fw + f_.rstd2, T, h,
               kLayerNormEps);
  be.gemm(kNoTrans, kNoTrans, T, f, h, 1.0f, ln2, h, param(l, kW1), f, 0.0f, z, f);
  be.add_bias(z, param(l, kB1), T, f);
  be.gelu(z, a, static_cast<std::size_t>(T) * f);
  be.copy(x1, out, act);
  be.gemm(kNoTrans, kNoTrans, T, h, f, 1.0f, a, f, param(l, kW2), h, 1.0f, out, h);
  be.add_bias(out, param(l, kB2), T, h);
}

// bw's dY holds the block's output gradient; dx gets its input gradient.
void TransformerStage::backward_layer(int l, const float* x, float* fw, float* bw, float* dx) {
  Backend& be = backend();
  const auto [T, h, f, S, H, d, SS, alpha, act] = layer_dims(config_);
  const float* g = bw + b_.dy;
  float* dx1 = bw + b_.dx1;
  float* dqkv = bw + b_.dqkv;
  float* z = fw + f_.z;  // becomes dZ
  const float* qkv = fw + f_.qkv;
  const float* probs = fw + f_.probs;
  float* dprobs = work_.data();
  float* dctx = dprobs + static_cast<std::size_t>(config_.rows) * H * SS;
  float* da = dctx + act;

  // MLP and LN2.
  be.gemm(kNoTrans, kTrans, T, f, h, 1.0f, g, h, param(l, kW2), h, 0.0f, da, f);
  be.gelu_backward(z, da, z, static_cast<std::size_t>(T) * f);
  be.gemm(kNoTrans, kTrans, T, h, f, 1.0f, z, f, param(l, kW1), f, 0.0f, bw + b_.dln2, h);
  be.copy(g, dx1, act);
  be.layernorm_backward_input(fw + f_.x1, param(l, kLn2Gamma), fw + f_.mean2, fw + f_.rstd2,
                              bw + b_.dln2, dx1, T, h);
  // Output projection and attention.
  be.gemm(kNoTrans, kTrans, T, h, h, 1.0f, dx1, h, param(l, kWo), h, 0.0f, dctx, h);
  for (int s = 0; s < config_.rows; ++s) {
    const std::size_t tok = static_cast<std::size_t>(s) * S;
    const float* v = qkv + tok * 3 * h + 2 * h;
    const float* dc = dctx + tok * h;
    const float* p = probs + static_cast<std::size_t>(s) * H * SS;
    float* dp = dprobs + static_cast<std::size_t>(s) * H * SS;
    be.gemm_strided_batched(kNoTrans, kTrans, S, S, d, 1.0f, dc, h, d, v, 3 * h, d, 0.0f, dp, S, SS,
                            H);
    be.gemm_strided_batched(kTrans, kNoTrans, S, d, S, 1.0f, p, S, SS, dc, h, d, 0.0f,
                            dqkv + tok * 3 * h + 2 * h, 3 * h, d, H);
  }
  be.softmax_backward(probs, dprobs, dprobs, config_.rows * H * S, S);
  for (int s = 0; s < config_.rows; ++s) {
    const std::size_t tok = static_cast<std::size_t>(s) * S;
    const float* q = qkv + tok * 3 * h;
    const float* ds = dprobs + static_cast<std::size_t>(s) * H * SS;
    float* dq = dqkv + tok * 3 * h;
    be.gemm_strided_batched(kNoTrans, kNoTrans, S, d, S, alpha, ds, S, SS, q + h, 3 * h, d, 0.0f,
                            dq, 3 * h, d, H);
    be.gemm_strided_batched(kTrans, kNoTrans, S, d, S, alpha, ds, S, SS, q, 3 * h, d, 0.0f, dq + h,
                            3 * h, d, H);
  }
  // QKV projection and LN1.
  be.gemm(kNoTrans, kTrans, T, h, 3 * h, 1.0f, dqkv, 3 * h, param(l, kWqkv), 3 * h, 0.0f,
          bw + b_.dln1, h);
  be.copy(dx1, dx, act);
  be.layernorm_backward_input(x, param(l, kLn1Gamma), fw + f_.mean1, fw + f_.rstd1, bw + b_.dln1,
                              dx, T, h);
}

void TransformerStage::weight_layer(int l, const float* x, float* fw, float* bw) {
  Backend& be = backend();
  const int T = static_cast<int>(config_.tokens()), h = config_.hidden, f = config_.ffn_width();
  const float* g = bw + b_.dy;
  const float* dz = fw + f_.z;
  be.gemm(kTrans, kNoTrans, f, h, T, 1.0f, fw + f_.a, f, g, h, 1.0f, grad(l, kW2), h);
  be.column_sums(g, grad(l, kB2), T, h);
  be.gemm(kTrans, kNoTrans, h, f, T, 1.0f, fw + f_.ln2, h, dz, f, 1.0f, grad(l, kW1), f);
  be.column_sums(dz, grad(l, kB1), T, f);
  be.layernorm_backward_params(fw + f_.x1, fw + f_.mean2, fw + f_.rstd2, bw + b_.dln2,
                               grad(l, kLn2Gamma), grad(l, kLn2Beta), T, h);
  be.gemm(kTrans, kNoTrans, h, h, T, 1.0f, fw + f_.ctx, h, bw + b_.dx1, h, 1.0f, grad(l, kWo), h);
  be.column_sums(bw + b_.dx1, grad(l, kBo), T, h);
  be.gemm(kTrans, kNoTrans, h, 3 * h, T, 1.0f, fw + f_.ln1, h, bw + b_.dqkv, 3 * h, 1.0f,
          grad(l, kWqkv), 3 * h);
  be.column_sums(bw + b_.dqkv, grad(l, kBqkv), T, 3 * h);
  be.layernorm_backward_params(x, fw + f_.mean1, fw + f_.rstd1, bw + b_.dln1, grad(l, kLn1Gamma),
                               grad(l, kLn1Beta), T, h);
}

void TransformerStage::run_forward(const float* x0, float* saved, float* y) {
  const int L = config_.num_layers;
  if (config_.embed)
    backend().embedding(
        x0, params() + end_offset(false),
        params() + end_offset(false) + static_cast<std::size_t>(config_.vocab) * config_.hidden,
        embedded(saved), static_cast<int>(config_.tokens()), config_.seq, config_.hidden);
  for (int i = 0; i < L; ++i)
    forward_layer(i, input_of(x0, saved, i), area(saved, i),
                  i + 1 < L ? area(saved, i) + f_.out : y);
}

// Every block's tensors in the workspace; outputs alternate between scratch and y so that
// the last lands in y.
void TransformerStage::run_forward_transient(const float* x0, float* y) {
  const int L = config_.num_layers;
  const float* x = x0;
  if (config_.embed) {  // one more output in the alternation, before block 0's
    float* out = L % 2 == 0 ? y : scratch();
    backend().embedding(
        x0, params() + end_offset(false),
        params() + end_offset(false) + static_cast<std::size_t>(config_.vocab) * config_.hidden,
        out, static_cast<int>(config_.tokens()), config_.seq, config_.hidden);
    x = out;
  }
  for (int i = 0; i < L; ++i) {
    float* out = (L - 1 - i) % 2 == 0 ? y : scratch();
    forward_layer(i, x, work_.data(), out);
    x = out;
  }
}

void TransformerStage::run_backward(const float* x0, float* saved, const float* dy, float* dx) {
  const int L = config_.num_layers;
  backend().copy(dy, area(saved, L - 1) + f_.size + b_.dy, activation_count());
  for (int i = L - 1; i >= 0; --i) {
    float* fw = area(saved, i);
    // With embed, block 0's input gradient is the embedding's output gradient (W's); the
    // token ids have none.
    float* out =
        i > 0 ? area(saved, i - 1) + f_.size + b_.dy : (config_.embed ? embedded_grad(saved) : dx);
    backward_layer(i, input_of(x0, saved, i), fw, fw + f_.size, out);
  }
}

void TransformerStage::run_weight(const float* x0, float* saved) {
  for (int i = 0; i < config_.num_layers; ++i) {
    float* fw = area(saved, i);
    weight_layer(i, input_of(x0, saved, i), fw, fw + f_.size);
  }
  if (config_.embed) {
    float* g = grads() + end_offset(false);
    backend().embedding_backward(x0, embedded_grad(saved), g,
                                 g + static_cast<std::size_t>(config_.vocab) * config_.hidden,
                                 static_cast<int>(config_.tokens()), config_.seq, config_.hidden);
  }
}

// --- Model ends ------------------------------------------------------------------------------

void TransformerStage::run_make_input(int mb, float* x) {
  if (config_.vocab <= 0) return ChunkModel::run_make_input(mb, x);
  if (!config_.embed)
    throw std::logic_error("TransformerStage: a route starts at a chunk without the embedding");
  backend().fill(x, 0.0f, activation_count());  // the ids use the first T floats
  make_seeded_tokens(backend(), config_.seed, SeedKind::kTokens, mb, config_.tokens(),
                     config_.vocab, x);
}

// Final LayerNorm, LM head and cross-entropy (mean over the micro-batch's tokens, scaled by
// 1/num_microbatches) against seeded target ids; dy = the head's input gradient. The weight
// gradients wait for W (run_loss_weight).
void TransformerStage::run_loss(int mb, int num_microbatches, const float* y, float* dy,
                                float* kept, float* loss_sum) {
  if (config_.vocab <= 0) return ChunkModel::run_loss(mb, num_microbatches, y, dy, kept, loss_sum);
  if (!config_.head)
    throw std::logic_error("TransformerStage: a route ends at a chunk without the LM head");
  Backend& be = backend();
  const int T = static_cast<int>(config_.tokens()), h = config_.hidden, V = config_.vocab;
  const float* gamma = params() + end_offset(true);
  const float* w = gamma + 2 * static_cast<std::size_t>(h);
  float* x = kept + head_.x;
  float* logits = kept + head_.dlogits;  // becomes dlogits
  be.copy(y, x, activation_count());     // dy may alias y
  be.layernorm(x, gamma, gamma + h, kept + head_.ln, kept + head_.mean, kept + head_.rstd, T, h,
               kLayerNormEps);
  be.gemm(kNoTrans, kNoTrans, T, V, h, 1.0f, kept + head_.ln, h, w, V, 0.0f, logits, V);
  float* targets = scratch();  // T of its activation_count() floats
  make_seeded_tokens(be, config_.seed, SeedKind::kTokenTargets, mb, config_.tokens(), V, targets);
  const float scale =
      static_cast<float>(1.0 / (static_cast<double>(num_microbatches) * static_cast<double>(T)));
  be.cross_entropy(logits, targets, logits, T, V, scale, loss_sum);
  be.gemm(kNoTrans, kTrans, T, h, V, 1.0f, logits, V, w, V, 0.0f, kept + head_.dln, h);
  be.fill(dy, 0.0f, activation_count());
  be.layernorm_backward_input(x, gamma, kept + head_.mean, kept + head_.rstd, kept + head_.dln, dy,
                              T, h);
}

void TransformerStage::run_loss_weight(float* kept) {
  Backend& be = backend();
  const int T = static_cast<int>(config_.tokens()), h = config_.hidden, V = config_.vocab;
  float* g = grads() + end_offset(true);
  be.gemm(kTrans, kNoTrans, h, V, T, 1.0f, kept + head_.ln, h, kept + head_.dlogits, V, 1.0f,
          g + 2 * static_cast<std::size_t>(h), V);
  be.layernorm_backward_params(kept + head_.x, kept + head_.mean, kept + head_.rstd,
                               kept + head_.dln, g, g + h, T, h);
}

}  // namespace bb
