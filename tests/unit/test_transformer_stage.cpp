// The transformer stage (runtime/transformer_stage.hpp): F/B/W against finite differences of
// a plain double-precision definition of the block, B+W = BW, the causal mask, recompute =
// stored, the activation accounting, chunks against the sequential reference; the CUDA
// kernels and stage against the CPU (skipped without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/cpu_backend.hpp"
#include "runtime/reference.hpp"
#include "runtime/transformer_stage.hpp"

#ifdef BB_HAVE_CUDA
#include "runtime/cuda/cuda_backend.hpp"
#endif

namespace bb {
namespace {

TransformerConfig small_config(bool causal, int num_layers = 2, int first_layer = 0) {
  return {.hidden = 8,
          .heads = 2,
          .seq = 4,
          .ffn = 12,
          .causal = causal,
          .rows = 2,
          .first_layer = first_layer,
          .num_layers = num_layers,
          .seed = 99,
          .synthetic = {}};  // named: GCC 12 warns on skipped members without initialisers
}

// --- The block written plainly, in double ----------------------------------------------------

using Vec = std::vector<double>;

void layer_norm(const Vec& x, const double* g, const double* b, int T, int h, Vec& y) {
  y.assign(x.size(), 0.0);
  for (int t = 0; t < T; ++t) {
    double mu = 0, var = 0;
    for (int j = 0; j < h; ++j) mu += x[t * h + j] / h;
    for (int j = 0; j < h; ++j) var += (x[t * h + j] - mu) * (x[t * h + j] - mu) / h;
    const double rs = 1.0 / std::sqrt(var + 1e-5);
    for (int j = 0; j < h; ++j) y[t * h + j] = (x[t * h + j] - mu) * rs * g[j] + b[j];
  }
}

// y (T×n) = x (T×k) · w (k×n) + bias
Vec affine(const Vec& x, const double* w, const double* bias, int T, int k, int n) {
  Vec y(static_cast<std::size_t>(T) * n);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < n; ++j) {
      double s = bias[j];
      for (int p = 0; p < k; ++p) s += x[t * k + p] * w[p * n + j];
      y[t * n + j] = s;
    }
  return y;
}

// The model's output for input x (b·S×h), parameters p (all blocks), in double.
Vec host_forward(const TransformerConfig& c, const Vec& p, Vec x) {
  const int h = c.hidden, f = c.ffn_width(), S = c.seq, H = c.heads, d = h / H;
  const int T = static_cast<int>(c.tokens());
  const auto tensors = transformer_param_tensors(h, f);
  const std::size_t per_layer = tensors.back().offset + tensors.back().count;
  for (int l = 0; l < c.num_layers; ++l) {
    auto at = [&](int t) { return &p[per_layer * l + tensors[t].offset]; };
    Vec u, v;
    layer_norm(x, at(0), at(1), T, h, u);
    const Vec qkv = affine(u, at(2), at(3), T, h, 3 * h);
    Vec ctx(static_cast<std::size_t>(T) * h, 0.0);
    for (int s = 0; s < c.rows; ++s)
      for (int hd = 0; hd < H; ++hd)
        for (int i = 0; i < S; ++i) {
          const int qi = (s * S + i) * 3 * h + hd * d;
          Vec w(S, 0.0);
          double mx = -1e300;
          const int last = c.causal ? i : S - 1;
          for (int j = 0; j <= last; ++j) {
            const int kj = (s * S + j) * 3 * h + h + hd * d;
            double dot = 0;
            for (int e = 0; e < d; ++e) dot += qkv[qi + e] * qkv[kj + e];
            w[j] = dot / std::sqrt(static_cast<double>(d));
            mx = std::max(mx, w[j]);
          }
          double sum = 0;
          for (int j = 0; j <= last; ++j) sum += (w[j] = std::exp(w[j] - mx));
          for (int j = 0; j <= last; ++j)
            for (int e = 0; e < d; ++e)
              ctx[(s * S + i) * h + hd * d + e] +=
                  w[j] / sum * qkv[(s * S + j) * 3 * h + 2 * h + hd * d + e];
        }
    Vec x1 = affine(ctx, at(4), at(5), T, h, h);
    for (std::size_t i = 0; i < x1.size(); ++i) x1[i] += x[i];
    layer_norm(x1, at(6), at(7), T, h, v);
    Vec a = affine(v, at(8), at(9), T, h, f);
    for (double& z : a) z = 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
    Vec y = affine(a, at(10), at(11), T, f, h);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += x1[i];
    x = y;
  }
  return x;
}

double host_loss(const TransformerConfig& c, const Vec& p, const Vec& x, const Vec& target, int M) {
  const Vec y = host_forward(c, p, x);
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += (y[i] - target[i]) * (y[i] - target[i]);
  return s / (static_cast<double>(M) * static_cast<double>(y.size()));
}

// One micro-batch through `stage`: F, loss, then B and W (split) or BW. Returns dx.
std::vector<float> one_microbatch(TransformerStage& stage, int mb, int M, bool split,
                                  std::vector<float>* y_out = nullptr) {
  Backend& be = stage.backend();
  const std::size_t n = stage.activation_count();
  const Dtype dt = stage.activation_dtype();
  Buffer x = be.allocate(n, dt), y = be.allocate(n, dt), dx = be.allocate(n, dt);
  stage.make_input(mb, x.ptr());
  stage.forward(mb, x.ptr(), y.ptr());
  if (y_out != nullptr) *y_out = be.download(y.ptr(), n);
  stage.loss(mb, M, y.ptr(), y.ptr());
  if (split) {
    stage.backward_input(mb, y.ptr(), dx.ptr());
    stage.backward_weight(mb);
  } else {
    stage.backward_full(mb, y.ptr(), dx.ptr());
  }
  return be.download(dx.ptr(), n);
}

void check_finite_differences(bool causal, bool split) {
  CpuBackend be;
  const int M = 2, mb = 1;
  const TransformerConfig cfg = small_config(causal);
  TransformerStage stage(be, cfg);
  const std::vector<float> dxf = one_microbatch(stage, mb, M, split);

  const std::size_t n = stage.activation_count();
  Buffer x = be.allocate(n), t = be.allocate(n);
  stage.make_input(mb, x.data());
  make_seeded_target(be, cfg.seed, mb, n, t.data());
  const auto pf = be.download(stage.params(), stage.param_count());
  const auto gf = be.download(stage.grads(), stage.param_count());
  const auto xf = be.download(x.data(), n), tf = be.download(t.data(), n);
  Vec params(pf.begin(), pf.end()), x0(xf.begin(), xf.end()), target(tf.begin(), tf.end());

  const double loss = host_loss(cfg, params, x0, target, M);
  EXPECT_NEAR(stage.loss_sum(), loss, 1e-5 * loss);

  const double eps = 1e-6;
  auto fd = [&](Vec& v, std::size_t i) {
    const double keep = v[i];
    v[i] = keep + eps;
    const double up = host_loss(cfg, params, x0, target, M);
    v[i] = keep - eps;
    const double down = host_loss(cfg, params, x0, target, M);
    v[i] = keep;
    return static_cast<float>((up - down) / (2 * eps));
  };
  std::vector<float> fd_x(n);
  for (std::size_t i = 0; i < n; ++i) fd_x[i] = fd(x0, i);
  EXPECT_LT(relative_error(fd_x, dxf), 1e-4) << "input gradient";
  // Every tensor of every block on its own, so that a small one cannot hide behind a big one.
  const auto tensors = transformer_param_tensors(cfg.hidden, cfg.ffn_width());
  for (int l = 0; l < cfg.num_layers; ++l)
    for (const ParamTensor& tensor : tensors) {
      const std::size_t off = stage.layer_param_count() * l + tensor.offset;
      std::vector<float> want(tensor.count), got(gf.begin() + off, gf.begin() + off + tensor.count);
      for (std::size_t i = 0; i < tensor.count; ++i) want[i] = fd(params, off + i);
      EXPECT_LT(relative_error(want, got), 1e-4) << "block " << l << " " << tensor.name;
    }
}

// --- The model's ends written plainly, in double ----------------------------------------------

// Cross-entropy of the whole model with both ends: embedding of `ids`, the blocks, final
// LayerNorm, LM head, mean over tokens, scaled by 1/M. p: the blocks' parameters, then the
// token table (V×h), positions (S×h), final LayerNorm gamma and beta, head weight (h×V).
double host_lm_loss(const TransformerConfig& c, const Vec& p, const std::vector<float>& ids,
                    const std::vector<float>& targets, int M) {
  const int h = c.hidden, V = c.vocab, S = c.seq, T = static_cast<int>(c.tokens());
  const auto tensors = transformer_param_tensors(h, c.ffn_width());
  const std::size_t blocks = (tensors.back().offset + tensors.back().count) * c.num_layers;
  const double* tok = &p[blocks];
  const double* pos = tok + static_cast<std::size_t>(V) * h;
  const double* gamma = pos + static_cast<std::size_t>(S) * h;
  const double* w = gamma + 2 * h;
  Vec x(static_cast<std::size_t>(T) * h);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < h; ++j)
      x[t * h + j] = tok[static_cast<int>(ids[t]) * h + j] + pos[(t % S) * h + j];
  Vec u;
  layer_norm(host_forward(c, p, x), gamma, gamma + h, T, h, u);
  const Vec zero(static_cast<std::size_t>(V), 0.0);
  const Vec logits = affine(u, w, zero.data(), T, h, V);
  double loss = 0;
  for (int t = 0; t < T; ++t) {
    double mx = -1e300, z = 0;
    for (int j = 0; j < V; ++j) mx = std::max(mx, logits[t * V + j]);
    for (int j = 0; j < V; ++j) z += std::exp(logits[t * V + j] - mx);
    loss += std::log(z) + mx - logits[t * V + static_cast<int>(targets[t])];
  }
  return loss / (static_cast<double>(M) * T);
}

TransformerConfig lm_config(int num_layers = 2) {
  TransformerConfig c = small_config(true, num_layers);
  c.vocab = 11;
  c.embed = c.head = true;
  return c;
}

// Both ends and the blocks in one chunk: the loss and every parameter tensor's gradient
// (the ends' included) against central differences of host_lm_loss.
void check_lm_finite_differences(bool split) {
  CpuBackend be;
  const int M = 2, mb = 1;
  const TransformerConfig cfg = lm_config();
  TransformerStage stage(be, cfg);
  one_microbatch(stage, mb, M, split);

  const std::size_t T = cfg.tokens();
  Buffer x = be.allocate(stage.activation_count()), t = be.allocate(T);
  stage.make_input(mb, x.ptr());
  make_seeded_tokens(be, cfg.seed, SeedKind::kTokenTargets, mb, T, cfg.vocab, token_ids(t.ptr()));
  std::vector<std::int32_t> id32(T), target32(T);
  be.copy_to_host(x.raw(), id32.data(), T * sizeof(std::int32_t));
  be.copy_to_host(t.raw(), target32.data(), T * sizeof(std::int32_t));
  const std::vector<float> ids(id32.begin(), id32.end()), targets(target32.begin(), target32.end());
  for (std::size_t i = 0; i < T; ++i) {
    ASSERT_GE(id32[i], 0);
    ASSERT_LT(id32[i], cfg.vocab);
  }
  const auto pf = be.download(stage.params(), stage.param_count());
  const auto gf = be.download(stage.grads(), stage.param_count());
  Vec params(pf.begin(), pf.end());
  const double loss = host_lm_loss(cfg, params, ids, targets, M);
  EXPECT_NEAR(stage.loss_sum(), loss, 1e-5 * loss);

  const double eps = 1e-6;
  auto check = [&](std::size_t off, std::size_t count, const std::string& what) {
    std::vector<float> want(count), got(gf.begin() + off, gf.begin() + off + count);
    for (std::size_t i = 0; i < count; ++i) {
      const double keep = params[off + i];
      params[off + i] = keep + eps;
      const double up = host_lm_loss(cfg, params, ids, targets, M);
      params[off + i] = keep - eps;
      const double down = host_lm_loss(cfg, params, ids, targets, M);
      params[off + i] = keep;
      want[i] = static_cast<float>((up - down) / (2 * eps));
    }
    EXPECT_LT(relative_error(want, got), 1e-4) << what;
  };
  for (int l = 0; l < cfg.num_layers; ++l)
    for (const ParamTensor& tensor : transformer_param_tensors(cfg.hidden, cfg.ffn_width()))
      check(stage.layer_param_count() * l + tensor.offset, tensor.count,
            "block " + std::to_string(l) + " " + tensor.name);
  const std::size_t h = 8, V = 11, S = 4;
  std::size_t off = stage.layer_param_count() * cfg.num_layers;
  check(off, V * h, "token table");
  check(off += V * h, S * h, "positions");
  check(off += S * h, h, "final LayerNorm gamma");
  check(off += h, h, "final LayerNorm beta");
  check(off += h, h * V, "LM head");
  EXPECT_EQ(off + h * V, stage.param_count());
}

TEST(TransformerEnds, GradientsMatchFiniteDifferences) {
  check_lm_finite_differences(false);
}

TEST(TransformerEnds, SplitGradientsMatchFiniteDifferences) {
  check_lm_finite_differences(true);
}

TEST(TransformerEnds, CrossEntropyKernelIsExact) {
  CpuBackend be;
  // Two rows of 3 logits: loss = Σ scale·(logsumexp − target logit), d = scale·(p − onehot).
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f, 0.5f, -1.0f};
  const std::vector<std::int32_t> targets = {2, 0};
  Buffer x = be.allocate(6), t = be.allocate(2), loss = be.allocate(1);
  be.from_host(logits.data(), x.data(), 6);
  be.copy_from_host(targets.data(), t.raw(), 2 * sizeof(std::int32_t));
  be.fill(loss.data(), 0.0f, 1);
  be.cross_entropy(x.data(), token_ids(t.ptr()), x.data(), 2, 3, 0.5f, loss.data());
  double want = 0;
  std::vector<double> d(6);
  for (int r = 0; r < 2; ++r) {
    double z = 0;
    for (int j = 0; j < 3; ++j) z += std::exp(static_cast<double>(logits[r * 3 + j]));
    want += 0.5 * (std::log(z) - logits[r * 3 + static_cast<int>(targets[r])]);
    for (int j = 0; j < 3; ++j)
      d[r * 3 + j] = 0.5 * (std::exp(static_cast<double>(logits[r * 3 + j])) / z -
                            (j == static_cast<int>(targets[r]) ? 1.0 : 0.0));
  }
  EXPECT_NEAR(be.download(loss.data(), 1)[0], want, 1e-6);
  const auto got = be.download(x.data(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(got[i], d[i], 1e-6) << i;
}

TEST(TransformerEnds, RecomputeEqualsStoredAndAccountingReturnsToZero) {
  CpuBackend be;
  TransformerConfig rc = lm_config(3);
  rc.recompute = true;
  TransformerStage stored(be, lm_config(3)), recomputed(be, rc);
  for (int mb = 0; mb < 2; ++mb) {
    std::vector<float> y1, y2;
    one_microbatch(stored, mb, 2, true, &y1);
    one_microbatch(recomputed, mb, 2, true, &y2);
    EXPECT_EQ(y1, y2);
  }
  EXPECT_EQ(be.download(stored.grads(), stored.param_count()),
            be.download(recomputed.grads(), recomputed.param_count()));
  EXPECT_EQ(stored.loss_sum(), recomputed.loss_sum());
  EXPECT_EQ(stored.live_activation_bytes(), 0u);
  EXPECT_EQ(recomputed.live_activation_bytes(), 0u);
  // The head keeps its logits' gradient (T×V) from the loss to W: the peak holds it.
  const std::size_t T = rc.tokens(), V = 11;
  EXPECT_GE(stored.peak_activation_bytes(), T * V * sizeof(float));
}

TEST(TransformerEnds, RoutesMustStartAndEndAtTheEnds) {
  CpuBackend be;
  TransformerConfig middle = small_config(false, 1, 1);
  middle.vocab = 11;  // neither end
  TransformerStage st(be, middle);
  Buffer x = be.allocate(st.activation_count());
  EXPECT_THROW(st.make_input(0, x.data()), std::logic_error);
  st.forward(0, x.data(), x.data());
  EXPECT_THROW(st.loss(0, 1, x.data(), x.data()), std::logic_error);
  TransformerConfig bad = lm_config();
  bad.vocab = 0;
  EXPECT_THROW(TransformerStage(be, bad), std::invalid_argument);
}

TEST(TransformerMath, GradientsMatchFiniteDifferences) {
  check_finite_differences(false, false);
}

TEST(TransformerMath, CausalGradientsMatchFiniteDifferences) {
  check_finite_differences(true, true);
}

TEST(TransformerStage, SplitBackwardEqualsFull) {
  CpuBackend be;
  for (bool causal : {false, true}) {
    TransformerStage split(be, small_config(causal)), full(be, small_config(causal));
    for (int mb = 0; mb < 3; ++mb)
      EXPECT_EQ(one_microbatch(split, mb, 3, true), one_microbatch(full, mb, 3, false));
    EXPECT_EQ(be.download(split.grads(), split.param_count()),
              be.download(full.grads(), full.param_count()));
    EXPECT_EQ(split.loss_sum(), full.loss_sum());
  }
}

TEST(TransformerStage, RecomputeEqualsStored) {
  CpuBackend be;
  TransformerConfig rc = small_config(true, 3);
  rc.recompute = true;
  TransformerStage stored(be, small_config(true, 3)), recomputed(be, rc);
  for (int mb = 0; mb < 2; ++mb) {
    std::vector<float> y1, y2;
    EXPECT_EQ(one_microbatch(stored, mb, 2, true, &y1),
              one_microbatch(recomputed, mb, 2, true, &y2));
    EXPECT_EQ(y1, y2);
  }
  EXPECT_EQ(be.download(stored.grads(), stored.param_count()),
            be.download(recomputed.grads(), recomputed.param_count()));
}

// Token i of a sequence sees tokens 0..i only: changing the last token of sequence 1 changes
// no output of earlier tokens with the mask, and does without it.
TEST(TransformerStage, CausalMaskHidesLaterTokens) {
  CpuBackend be;
  for (bool causal : {true, false}) {
    const TransformerConfig cfg = small_config(causal);
    TransformerStage stage(be, cfg);
    const std::size_t n = stage.activation_count(), h = cfg.hidden, S = cfg.seq;
    Buffer x = be.allocate(n), y = be.allocate(n);
    stage.make_input(0, x.data());
    stage.forward(0, x.data(), y.data());
    stage.backward_full(0, y.data(), nullptr);
    const auto before = be.download(y.data(), n);
    std::vector<float> xh = be.download(x.data(), n);
    for (std::size_t j = 0; j < h; ++j) xh[(2 * S - 1) * h + j] += 0.5f;  // sequence 1, last token
    be.from_host(xh.data(), x.data(), n);
    stage.forward(1, x.data(), y.data());
    const auto after = be.download(y.data(), n);
    std::size_t changed_earlier = 0, changed_last = 0;
    for (std::size_t tok = 0; tok < 2 * S; ++tok)
      for (std::size_t j = 0; j < h; ++j) {
        const bool differs = before[tok * h + j] != after[tok * h + j];
        if (tok == 2 * S - 1)
          changed_last += differs;
        else if (tok >= S)
          changed_earlier += differs;
        else
          EXPECT_FALSE(differs) << "sequence 0 must not see sequence 1";
      }
    EXPECT_GT(changed_last, 0u);
    if (causal)
      EXPECT_EQ(changed_earlier, 0u);
    else
      EXPECT_GT(changed_earlier, 0u);
  }
}

TEST(TransformerStage, ActivationBytesFollowTheRule) {
  CpuBackend be;
  for (bool recompute : {false, true}) {
    TransformerConfig cfg = small_config(false, 2);
    cfg.recompute = recompute;
    TransformerStage s(be, cfg);
    const std::size_t n = s.activation_count(), T = cfg.tokens(), h = cfg.hidden;
    const std::size_t f = cfg.ffn_width(),
                      P = static_cast<std::size_t>(cfg.rows) * cfg.heads * cfg.seq * cfg.seq;
    // ln1, qkv, ctx, x1, ln2 and the next input (or X0): 8·T·h; Z and A; P; 2 means, 2 rstds.
    const std::size_t per_block = 8 * T * h + 2 * T * f + P + 4 * T;
    EXPECT_EQ(s.forward_layer_bytes(), per_block * sizeof(float));
    Buffer x = be.allocate(n), y = be.allocate(n);
    s.make_input(0, x.data());
    s.forward(0, x.data(), y.data());
    EXPECT_EQ(s.live_activation_bytes(), (recompute ? n : 2 * per_block) * sizeof(float));
    s.backward_input(0, y.data(), nullptr);
    EXPECT_EQ(s.live_activation_bytes(), 2 * (per_block + 7 * T * h) * sizeof(float));
    s.backward_weight(0);
    EXPECT_EQ(s.live_activation_bytes(), 0u);
  }
}

TEST(TransformerStage, RejectsBadShapes) {
  CpuBackend be;
  TransformerConfig c = small_config(false);
  c.heads = 3;
  EXPECT_THROW(TransformerStage(be, c), std::invalid_argument);
  c = small_config(false);
  c.seq = 0;
  EXPECT_THROW(TransformerStage(be, c), std::invalid_argument);
}

// Chunks of 2 and 1 blocks, micro-batches interleaved as a pipeline would (all F, then B
// newest first, W later), against the whole model in one piece, with activations and messages
// in `dtype`. skip_w: the first chunk's W of the last micro-batch never runs (a wrong gradient
// of relative size about 1/M, which --check must catch).
CompareResult chunks_against_reference(Dtype dtype, int vocab, bool recompute,
                                       bool skip_w = false) {
  CpuBackend be;
  const int M = 3;
  TransformerConfig c0 = small_config(true, 2, 0), c1 = small_config(true, 1, 2);
  c0.recompute = c1.recompute = recompute;
  c0.vocab = c1.vocab = vocab;  // the ends: embedding in c0, head in c1
  c0.embed = c1.head = vocab > 0;
  c0.dtype = c1.dtype = dtype;
  TransformerStage s0(be, c0), s1(be, c1);
  const std::size_t n = s0.activation_count();
  EXPECT_EQ(s0.activation_bytes(), n * dtype_size(dtype));
  std::vector<Buffer> mid, dmid;
  Buffer x = be.allocate(n, dtype), y = be.allocate(n, dtype);
  for (int mb = 0; mb < M; ++mb) {
    mid.push_back(be.allocate(n, dtype));
    dmid.push_back(be.allocate(n, dtype));
    s0.make_input(mb, x.ptr());
    s0.forward(mb, x.ptr(), mid.back().ptr());
    s1.forward(mb, mid.back().ptr(), y.ptr());
    s1.loss(mb, M, y.ptr(), y.ptr());
    s1.backward_input(mb, y.ptr(), dmid.back().ptr());
  }
  for (int mb = M - 1; mb >= 0; --mb) s0.backward_input(mb, dmid[mb].ptr(), nullptr);
  for (int mb = 0; mb < M; ++mb) {
    s1.backward_weight(mb);
    if (!skip_w || mb + 1 < M) s0.backward_weight(mb);
  }
  GradientSet got;
  got.loss = s1.loss_sum();
  append_gradients(s0, got);
  append_gradients(s1, got);
  const GradientSet ref = run_transformer_reference(be, c0, 3, M);
  EXPECT_EQ(ref.layers.size(), vocab > 0 ? 5u : 3u);
  EXPECT_EQ(got.layers.size(), ref.layers.size());
  EXPECT_GT(*ref.loss, 0.0);
  return compare(ref, got, check_tolerance(dtype));
}

TEST(TransformerStage, ChunksMatchTheSequentialReference) {
  for (const Dtype dtype : {Dtype::kF32, Dtype::kBF16})
    for (const int vocab : {0, 11})
      for (bool recompute : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " vocab " + std::to_string(vocab) +
                     (recompute ? " recompute" : ""));
        const CompareResult r = chunks_against_reference(dtype, vocab, recompute);
        EXPECT_TRUE(r.pass) << r.message;
      }
}

// The bf16 tolerance still catches a wrong gradient: one micro-batch's W missing on a chunk
// (about 1/M of that chunk's gradients) fails by far, in both dtypes.
TEST(TransformerStage, CheckToleranceCatchesAMissingWeightGradient) {
  for (const Dtype dtype : {Dtype::kF32, Dtype::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const CompareResult r = chunks_against_reference(dtype, 11, false, /*skip_w=*/true);
    EXPECT_FALSE(r.pass) << r.message;
    EXPECT_GT(r.max_rel_error, 30 * check_tolerance(dtype)) << r.message;
  }
}

// bf16 storage computes the same model: its gradients are within bf16's precision of fp32's.
TEST(TransformerStage, Bf16GradientsAreCloseToFp32) {
  CpuBackend be;
  TransformerConfig c = small_config(true, 3, 0);
  c.vocab = 11;
  const GradientSet f32 = run_transformer_reference(be, c, 3, 2);
  c.dtype = Dtype::kBF16;
  const GradientSet b16 = run_transformer_reference(be, c, 3, 2);
  const CompareResult r = compare(f32, b16, 5e-2);
  EXPECT_TRUE(r.pass) << r.message;
  EXPECT_GT(r.max_rel_error, 1e-5) << "bf16 rounded nothing?";
}

// --- CUDA ----------------------------------------------------------------------------------

#ifdef BB_HAVE_CUDA
#define BB_REQUIRE_GPU()                                                     \
  do {                                                                       \
    if (cuda::device_count() == 0) GTEST_SKIP() << cuda::no_device_reason(); \
  } while (0)
#else
#define BB_REQUIRE_GPU() GTEST_SKIP() << "built without CUDA"
#endif

TEST(CudaTransformer, KernelsMatchCpu) {
  BB_REQUIRE_GPU();
#ifdef BB_HAVE_CUDA
  CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  const int rows = 24, cols = 6;  // 4 causal 6×6 blocks
  const std::size_t n = rows * cols;
  auto seeded = [&](Backend& be, std::uint64_t stream, std::size_t count, float scale) {
    Buffer b = be.allocate(count);
    be.seeded_uniform(b.data(), count, 5, stream, scale);
    return b;
  };
  auto both = [&](auto&& op) {
    return std::pair{op(static_cast<Backend&>(cpu)), op(static_cast<Backend&>(gpu))};
  };
  auto close = [&](const std::pair<std::vector<float>, std::vector<float>>& r, const char* what) {
    EXPECT_LT(relative_error(r.first, r.second), 1e-6) << what;
  };
  for (bool causal : {false, true})
    close(both([&](Backend& be) {
            Buffer x = seeded(be, 1, n, 3.0f), y = be.allocate(n);
            be.softmax(x.data(), y.data(), rows, cols, causal);
            Buffer dy = seeded(be, 2, n, 1.0f);
            be.softmax_backward(y.data(), dy.data(), dy.data(), rows, cols);
            auto a = be.download(y.data(), n), b = be.download(dy.data(), n);
            a.insert(a.end(), b.begin(), b.end());
            return a;
          }),
          causal ? "causal softmax" : "softmax");
  close(both([&](Backend& be) {
          Buffer x = seeded(be, 3, n, 2.0f), g = seeded(be, 4, cols, 1.0f),
                 b = seeded(be, 5, cols, 1.0f), y = be.allocate(n), mean = be.allocate(rows),
                 rstd = be.allocate(rows), dy = seeded(be, 6, n, 1.0f), dx = seeded(be, 7, n, 1.0f);
          Buffer dg = seeded(be, 8, cols, 1.0f), db = seeded(be, 9, cols, 1.0f);
          be.layernorm(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, cols,
                       1e-5f);
          be.layernorm_backward_input(x.data(), g.data(), mean.data(), rstd.data(), dy.data(),
                                      dx.data(), rows, cols);
          be.layernorm_backward_params(x.data(), mean.data(), rstd.data(), dy.data(), dg.data(),
                                       db.data(), rows, cols);
          be.add_bias(y.data(), b.data(), rows, cols);
          be.column_sums(y.data(), dg.data(), rows, cols);
          std::vector<float> out;
          for (const Buffer* t : {&y, &dx, &dg, &db}) {
            const auto h = be.download(t->data(), t->size());
            out.insert(out.end(), h.begin(), h.end());
          }
          return out;
        }),
        "layernorm, bias, column sums");
  close(both([&](Backend& be) {
          // Two heads of a 3×2 · 2×3 product inside wider rows (lda 5, ldb 7), strided.
          Buffer a = seeded(be, 10, 40, 1.0f), b = seeded(be, 11, 40, 1.0f), c = be.allocate(18);
          be.fill(c.data(), 1.0f, 18);
          be.gemm_strided_batched(kNoTrans, kTrans, 3, 3, 2, 0.5f, a.data(), 5, 2, b.data(), 7, 3,
                                  1.0f, c.data(), 3, 9, 2);
          return be.download(c.data(), 18);
        }),
        "strided batched GEMM");
#endif
}

// The whole stage on both devices: the blocks alone and with both of the model's ends, fp32
// (1e-5) and bf16 (the reductions' order may flip a bf16 rounding here and there: 2e-2).
TEST(CudaTransformer, StageMatchesCpu) {
  BB_REQUIRE_GPU();
#ifdef BB_HAVE_CUDA
  CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  for (const Dtype dtype : {Dtype::kF32, Dtype::kBF16})
    for (const int vocab : {0, 11})
      for (bool recompute : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " vocab " + std::to_string(vocab) +
                     (recompute ? " recompute" : ""));
        TransformerConfig cfg = small_config(true, 2, vocab > 0 ? 0 : 1);
        cfg.recompute = recompute;
        cfg.dtype = dtype;
        cfg.vocab = vocab;
        cfg.embed = cfg.head = vocab > 0;
        const double tol = dtype == Dtype::kF32 ? 1e-5 : 2e-2;
        TransformerStage a(cpu, cfg), b(gpu, cfg);
        std::vector<float> ya, yb;
        const auto dxa = one_microbatch(a, 0, 1, true, &ya);
        const auto dxb = one_microbatch(b, 0, 1, true, &yb);
        EXPECT_LT(relative_error(ya, yb), tol);
        if (vocab == 0) {  // token ids have no gradient
          EXPECT_LT(relative_error(dxa, dxb), tol);
        }
        EXPECT_LT(relative_error(cpu.download(a.grads(), a.param_count()),
                                 gpu.download(b.grads(), b.param_count())),
                  tol);
        EXPECT_NEAR(a.loss_sum(), b.loss_sum(), tol * a.loss_sum());
      }
#endif
}

#ifdef BB_HAVE_CUDA
// Both backends run OP (on a backend, returning host values); their relative error is below TOL,
// and on the GPU two runs give the same bits (no atomics: deterministic reductions).
template <class Op>
void cpu_gpu_agree(const char* what, double tol, Op&& op) {
  CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  const std::vector<float> a = op(static_cast<Backend&>(cpu));
  const std::vector<float> b = op(static_cast<Backend&>(gpu));
  const std::vector<float> again = op(static_cast<Backend&>(gpu));
  EXPECT_LT(relative_error(a, b), tol) << what;
  EXPECT_EQ(b, again) << what << ": two GPU runs differ";
}
#endif

// The model's ends on the GPU: token ids bit-identical to the CPU's; the embedding, its
// backward with many repeated ids (the sorted, deterministic accumulation) and the
// cross-entropy against the CPU.
TEST(CudaTransformer, ModelEndsMatchCpu) {
  BB_REQUIRE_GPU();
#ifdef BB_HAVE_CUDA
  const int T = 300, V = 17, S = 20, h = 40;
  auto ids = [&](Backend& be, Buffer& buf, SeedKind kind) {
    buf = be.allocate(T);
    make_seeded_tokens(be, 3, kind, 1, T, V, token_ids(buf.ptr()));
  };
  cpu_gpu_agree("token ids", 0.0, [&](Backend& be) {
    Buffer b;
    ids(be, b, SeedKind::kTokens);
    std::vector<std::int32_t> host(T);
    be.copy_to_host(b.raw(), host.data(), T * sizeof(std::int32_t));
    return std::vector<float>(host.begin(), host.end());
  });
  for (const Dtype dt : {Dtype::kF32, Dtype::kBF16})
    cpu_gpu_agree("embedding and its backward", dt == Dtype::kF32 ? 1e-6 : 1e-2, [&](Backend& be) {
      Buffer id, table = be.allocate(V * h), pos = be.allocate(S * h), out = be.allocate(T * h, dt);
      Buffer dtable = be.allocate(V * h), dpos = be.allocate(S * h), dout = be.allocate(T * h, dt);
      ids(be, id, SeedKind::kTokens);
      be.seeded_uniform(table.ptr(), V * h, 1, 1, 1.0f);
      be.seeded_uniform(pos.ptr(), S * h, 1, 2, 1.0f);
      be.seeded_uniform(dout.ptr(), T * h, 1, 3, 1.0f);
      be.fill(dtable.ptr(), 0.5f, V * h);
      be.fill(dpos.ptr(), 0.0f, S * h);
      be.embedding(token_ids(id.ptr()), table.data(), pos.data(), out.ptr(), T, S, h);
      be.embedding_backward(token_ids(id.ptr()), dout.ptr(), dtable.data(), dpos.data(), T, S, h);
      std::vector<float> r = be.download(out.ptr(), T * h);
      for (const Buffer* b : {&dtable, &dpos}) {
        const auto x = be.download(b->ptr(), b->size());
        r.insert(r.end(), x.begin(), x.end());
      }
      return r;
    });
  for (const Dtype dt : {Dtype::kF32, Dtype::kBF16})
    cpu_gpu_agree("cross-entropy", dt == Dtype::kF32 ? 1e-6 : 1e-2, [&](Backend& be) {
      Buffer logits = be.allocate(T * V, dt), target, loss = be.allocate(1);
      ids(be, target, SeedKind::kTokenTargets);
      be.seeded_uniform(logits.ptr(), T * V, 1, 4, 4.0f);
      be.fill(loss.ptr(), 0.0f, 1);
      be.cross_entropy(logits.ptr(), token_ids(target.ptr()), logits.ptr(), T, V, 0.25f,
                       loss.data());
      std::vector<float> r = be.download(logits.ptr(), T * V);
      r.push_back(be.download(loss.ptr(), 1)[0]);
      return r;
    });
#endif
}

// Column reductions at a real size (a bias's gradient over 5000 tokens, LayerNorm's
// parameter gradients), and the two-level batched GEMM of attention (sequences × heads whose
// strides do not collapse into one), fp32 and bf16.
TEST(CudaTransformer, ReductionsAndBatchedGemmMatchCpu) {
  BB_REQUIRE_GPU();
#ifdef BB_HAVE_CUDA
  const int rows = 5000, cols = 300;
  for (const Dtype dt : {Dtype::kF32, Dtype::kBF16}) {
    const double tol = dt == Dtype::kF32 ? 1e-5 : 1e-2;
    cpu_gpu_agree("column sums and LayerNorm parameters", tol, [&](Backend& be) {
      Buffer x = be.allocate(rows * cols, dt), dy = be.allocate(rows * cols, dt);
      Buffer mean = be.allocate(rows), rstd = be.allocate(rows), out = be.allocate(cols);
      Buffer dg = be.allocate(cols), db = be.allocate(cols);
      be.seeded_uniform(x.ptr(), rows * cols, 2, 1, 1.0f);
      be.seeded_uniform(dy.ptr(), rows * cols, 2, 2, 1.0f);
      be.seeded_uniform(mean.ptr(), rows, 2, 3, 0.1f);
      be.fill(rstd.ptr(), 1.5f, rows);
      for (Buffer* b : {&out, &dg, &db}) be.fill(b->ptr(), 0.25f, cols);
      be.column_sums(x.ptr(), out.data(), rows, cols);
      be.layernorm_backward_params(x.ptr(), mean.data(), rstd.data(), dy.ptr(), dg.data(),
                                   db.data(), rows, cols);
      std::vector<float> r;
      for (const Buffer* b : {&out, &dg, &db}) {
        const auto v = be.download(b->ptr(), cols);
        r.insert(r.end(), v.begin(), v.end());
      }
      return r;
    });
    // Q·Kᵀ of B sequences × H heads: S rows, head width d, rows of width 3h (h = H·d) as in
    // qkv. The first shape's strides and the K view's offset are 16-byte aligned in both dtypes
    // (cuBLAS's pointer-array call); the other two are not (one strided call per sequence).
    struct Shape {
      int S, d, B, H;
    };
    for (const Shape sh : {Shape{4, 8, 3, 2}, Shape{4, 3, 3, 2}, Shape{16, 12, 2, 3}})
      cpu_gpu_agree("two-level batched GEMM", tol, [&](Backend& be) {
        const int S = sh.S, d = sh.d, B = sh.B, H = sh.H, h = H * d;
        Buffer qkv = be.allocate(B * S * 3 * h, dt), p = be.allocate(B * H * S * S, dt);
        be.seeded_uniform(qkv.ptr(), B * S * 3 * h, 2, 5, 1.0f);
        be.fill(p.ptr(), 0.0f, B * H * S * S);
        GemmBatch g;
        g.outer = B;
        g.inner = H;
        g.outer_a = g.outer_b = S * 3 * h;
        g.inner_a = g.inner_b = d;
        g.outer_c = H * S * S;
        g.inner_c = S * S;
        be.gemm_batched(kNoTrans, kTrans, S, S, d, 0.5f, qkv.ptr(), 3 * h, qkv.ptr() + h, 3 * h,
                        0.0f, p.ptr(), S, g);
        return be.download(p.ptr(), B * H * S * S);
      });
  }
#endif
}

// The model's ends at GPT-2's vocabulary (V = 50257): the embedding's backward over 16384
// tokens (many ids repeated, the sorted accumulation across a real table), the cross-entropy of
// 256 rows of 50257 logits (block reductions over a row longer than any block) and the head's
// input gradient, a bf16 GEMM whose inner dimension is the vocabulary.
TEST(CudaTransformer, ModelEndsAtVocabularySize) {
  BB_REQUIRE_GPU();
#ifdef BB_HAVE_CUDA
  const int V = 50257;
  for (const Dtype dt : {Dtype::kF32, Dtype::kBF16}) {
    const double tol = dt == Dtype::kF32 ? 1e-5 : 1e-2;
    cpu_gpu_agree("embedding backward, T = 16384, V = 50257", tol, [&](Backend& be) {
      const int T = 16384, S = 1024, h = 8;
      Buffer id = be.allocate(T), dout = be.allocate(T * h, dt);
      Buffer dtable = be.allocate(static_cast<std::size_t>(V) * h), dpos = be.allocate(S * h);
      make_seeded_tokens(be, 3, SeedKind::kTokens, 1, T, V, token_ids(id.ptr()));
      be.seeded_uniform(dout.ptr(), T * h, 1, 3, 1.0f);
      be.fill(dtable.ptr(), 0.0f, static_cast<std::size_t>(V) * h);
      be.fill(dpos.ptr(), 0.0f, S * h);
      be.embedding_backward(token_ids(id.ptr()), dout.ptr(), dtable.data(), dpos.data(), T, S, h);
      std::vector<float> r = be.download(dtable.ptr(), static_cast<std::size_t>(V) * h);
      const auto p = be.download(dpos.ptr(), S * h);
      r.insert(r.end(), p.begin(), p.end());
      return r;
    });
    cpu_gpu_agree("cross-entropy, 256 rows of 50257", tol, [&](Backend& be) {
      const int T = 256;
      const std::size_t n = static_cast<std::size_t>(T) * V;
      Buffer logits = be.allocate(n, dt), target = be.allocate(T), loss = be.allocate(1);
      make_seeded_tokens(be, 3, SeedKind::kTokenTargets, 1, T, V, token_ids(target.ptr()));
      be.seeded_uniform(logits.ptr(), n, 1, 4, 4.0f);
      be.fill(loss.ptr(), 0.0f, 1);
      be.cross_entropy(logits.ptr(), token_ids(target.ptr()), logits.ptr(), T, V, 1.0f / T,
                       loss.data());
      std::vector<float> r = be.download(logits.ptr(), n);
      r.push_back(be.download(loss.ptr(), 1)[0]);
      return r;
    });
    cpu_gpu_agree("head input gradient, k = 50257", tol, [&](Backend& be) {
      const int T = 64, h = 64;
      const std::size_t n = static_cast<std::size_t>(T) * V, w = static_cast<std::size_t>(V) * h;
      Buffer dlogits = be.allocate(n, dt), table = be.allocate(w, dt), dx = be.allocate(T * h, dt);
      be.seeded_uniform(dlogits.ptr(), n, 1, 5, 1.0f);
      be.seeded_uniform(table.ptr(), w, 1, 6, 0.1f);
      be.gemm(kNoTrans, kNoTrans, T, h, V, 1.0f, dlogits.ptr(), V, table.ptr(), h, 0.0f, dx.ptr(),
              h);
      return be.download(dx.ptr(), T * h);
    });
  }
#endif
}

}  // namespace
}  // namespace bb
