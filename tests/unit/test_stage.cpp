// Backend kernels, the stage model's math (finite differences), pipeline vs sequential
// reference, recompute, split backward, activation accounting, optimizers, seeding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/reference.hpp"
#include "runtime/stage.hpp"
#include "stage_config_util.hpp"

namespace bb {
namespace {

std::vector<float> download(Backend& be, const Buffer& b) {
  return be.download(b.data(), b.size());
}

using test::stage_config;

Buffer upload(Backend& be, const std::vector<float>& v) {
  Buffer b = be.allocate(v.size());
  be.from_host(v.data(), b.data(), v.size());
  return b;
}

// --- Backend -------------------------------------------------------------------------------

TEST(CpuBackend, GemmMatchesNaiveForAllTransposes) {
  CpuBackend be;
  const int m = 5, n = 7, k = 3;
  for (Trans ta : {kNoTrans, kTrans}) {
    for (Trans tb : {kNoTrans, kTrans}) {
      // op(A) m×k, op(B) k×n, stored transposed when asked.
      std::vector<float> a(m * k), b(k * n), c(m * n);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.125f * static_cast<float>(i % 5) + 0.1f;
      for (std::size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i);
      auto A = [&](int i, int p) { return ta ? a[p * m + i] : a[i * k + p]; };
      auto B = [&](int p, int j) { return tb ? b[j * k + p] : b[p * n + j]; };
      std::vector<double> want(m * n);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int p = 0; p < k; ++p) s += static_cast<double>(A(i, p)) * B(p, j);
          want[i * n + j] = 1.5 * s + 0.5 * c[i * n + j];
        }
      Buffer da = upload(be, a), db = upload(be, b), dc = upload(be, c);
      be.gemm(ta, tb, m, n, k, 1.5f, da.data(), ta ? m : k, db.data(), tb ? k : n, 0.5f, dc.data(),
              n);
      const std::vector<float> got = download(be, dc);
      for (int i = 0; i < m * n; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << ta << tb << i;
    }
  }
}

TEST(CpuBackend, SeededUniformIsCounterBasedAndInRange) {
  CpuBackend be;
  Buffer x = be.allocate(1000), y = be.allocate(1000), z = be.allocate(1000);
  be.seeded_uniform(x.data(), 1000, 7, 3, 2.0f);
  be.seeded_uniform(y.data(), 1000, 7, 3, 2.0f);
  be.seeded_uniform(z.data(), 1000, 7, 4, 2.0f);
  const auto hx = download(be, x), hy = download(be, y), hz = download(be, z);
  EXPECT_EQ(hx, hy);
  EXPECT_NE(hx, hz);
  double mean = 0;
  for (std::size_t i = 0; i < hx.size(); ++i) {
    EXPECT_GE(hx[i], -2.0f);
    EXPECT_LT(hx[i], 2.0f);
    // Any element on its own, without generating the ones before it.
    EXPECT_EQ(hx[i], 2.0f * seeded_uniform_value(seeded_key(7, 3), i));
    mean += hx[i];
  }
  EXPECT_NEAR(mean / 1000, 0.0, 0.15);
}

TEST(CpuBackend, BuffersAreCountedAndMovable) {
  CpuBackend be;
  EXPECT_EQ(be.allocated_bytes(), 0u);
  {
    Buffer a = be.allocate(100);
    EXPECT_EQ(a.bytes(), 400u);
    EXPECT_EQ(be.allocated_bytes(), 400u);
    Buffer b = std::move(a);
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(b.size(), 100u);
    Buffer c = be.allocate(50);
    c = std::move(b);  // frees c's old memory
    EXPECT_EQ(be.allocated_bytes(), 400u);
    EXPECT_EQ(be.peak_allocated_bytes(), 600u);
  }
  EXPECT_EQ(be.allocated_bytes(), 0u);
}

TEST(CpuBackend, LossAndClock) {
  CpuBackend be;
  Buffer y = upload(be, {1, 2, 3}), t = upload(be, {0, 2, 5}), dy = be.allocate(3);
  Buffer sum = upload(be, {10});
  be.mse_loss(y.data(), t.data(), dy.data(), 3, 0.5f, sum.data());
  EXPECT_FLOAT_EQ(download(be, sum)[0], 10 + 0.5f * 5);
  EXPECT_EQ(download(be, dy), (std::vector<float>{1, 0, -2}));
  const double t0 = be.now();
  be.sleep_for(0.01);
  const double t1 = be.now();
  be.spin_for(0.005);
  EXPECT_GE(t1 - t0, 0.01);
  EXPECT_GE(be.now() - t1, 0.005);
}

// --- Stage math: finite differences in double precision --------------------------------------

double gelu_d(double z) {
  return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
}

// Loss of one micro-batch through the blocks, in double: the definition, written plainly.
double host_loss(const std::vector<double>& params, const std::vector<double>& x0,
                 const std::vector<double>& target, int L, int b, int h, int M) {
  std::vector<double> x = x0, z(b * 4 * h);
  const std::size_t wn = 4 * static_cast<std::size_t>(h) * h;
  for (int l = 0; l < L; ++l) {
    const double* w1 = &params[2 * wn * l];
    const double* w2 = w1 + wn;
    for (int i = 0; i < b; ++i)
      for (int j = 0; j < 4 * h; ++j) {
        double s = 0;
        for (int p = 0; p < h; ++p) s += x[i * h + p] * w1[p * 4 * h + j];
        z[i * 4 * h + j] = gelu_d(s);
      }
    std::vector<double> y = x;
    for (int i = 0; i < b; ++i)
      for (int j = 0; j < h; ++j)
        for (int p = 0; p < 4 * h; ++p) y[i * h + j] += z[i * 4 * h + p] * w2[p * h + j];
    x = y;
  }
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += (x[i] - target[i]) * (x[i] - target[i]);
  return s / (static_cast<double>(M) * b * h);
}

TEST(StageMath, GradientsMatchFiniteDifferences) {
  CpuBackend be;
  const int h = 4, b = 3, L = 2, M = 2, mb = 1;
  StageConfig cfg = stage_config(h, b, 3, L, 42);
  Stage stage(be, cfg);
  const std::size_t act = b * h;
  Buffer x = be.allocate(act), y = be.allocate(act), dy = be.allocate(act), dx = be.allocate(act);
  Buffer t = be.allocate(act);
  stage.make_input(mb, x.data());
  make_target(be, cfg.seed, mb, b, h, t.data());
  stage.forward(mb, x.data(), y.data());
  stage.loss(mb, M, y.data(), dy.data());
  stage.backward_full(mb, dy.data(), dx.data());

  const auto pf = be.download(stage.params(), stage.param_count());
  const auto gf = be.download(stage.grads(), stage.param_count());
  const auto xf = download(be, x), tf = download(be, t), dxf = download(be, dx);
  std::vector<double> params(pf.begin(), pf.end()), x0(xf.begin(), xf.end()),
      target(tf.begin(), tf.end());

  const double loss = host_loss(params, x0, target, L, b, h, M);
  EXPECT_NEAR(stage.loss_sum(), loss, 1e-5 * loss);

  const double eps = 1e-6;
  std::vector<float> fd_params(params.size()), fd_x(x0.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double keep = params[i];
    params[i] = keep + eps;
    const double up = host_loss(params, x0, target, L, b, h, M);
    params[i] = keep - eps;
    const double down = host_loss(params, x0, target, L, b, h, M);
    params[i] = keep;
    fd_params[i] = static_cast<float>((up - down) / (2 * eps));
  }
  for (std::size_t i = 0; i < x0.size(); ++i) {
    const double keep = x0[i];
    x0[i] = keep + eps;
    const double up = host_loss(params, x0, target, L, b, h, M);
    x0[i] = keep - eps;
    const double down = host_loss(params, x0, target, L, b, h, M);
    x0[i] = keep;
    fd_x[i] = static_cast<float>((up - down) / (2 * eps));
  }
  EXPECT_LT(relative_error(fd_params, gf), 1e-4);
  EXPECT_LT(relative_error(fd_x, dxf), 1e-4);
  // Per block and per matrix too, so that a small W1 error cannot hide behind W2.
  const std::size_t wn = stage.w1_count();
  for (int l = 0; l < L; ++l)
    for (int which = 0; which < 2; ++which) {
      const std::size_t off = (2 * l + which) * wn;
      std::vector<float> fd(fd_params.begin() + off, fd_params.begin() + off + wn);
      std::vector<float> got(gf.begin() + off, gf.begin() + off + wn);
      EXPECT_LT(relative_error(fd, got), 1e-4) << "block " << l << " W" << which + 1;
    }
}

// --- Pipeline of chunks vs the sequential reference ----------------------------------------

enum class Order { kMicroBatchByMicroBatch, kAllForwardFirst };

struct PipelineRun {
  int hidden = 8, rows = 4, M = 4;
  std::uint64_t seed = 1234;
  std::vector<int> layers_per_chunk{2, 3, 1};
  bool recompute = false;
  bool split_backward = true;
  Order order = Order::kMicroBatchByMicroBatch;
  Dtype dtype = Dtype::kF32;  // of activations and messages

  int num_layers() const {
    int n = 0;
    for (int l : layers_per_chunk) n += l;
    return n;
  }

  GradientSet run(Backend& be) const {
    std::vector<Stage> chunks;
    int first = 0;
    for (int l : layers_per_chunk) {
      StageConfig c = stage_config(hidden, rows, first, l, seed, recompute);
      c.dtype = dtype;
      chunks.emplace_back(be, c);
      first += l;
    }
    const int C = static_cast<int>(chunks.size());
    const std::size_t act = static_cast<std::size_t>(rows) * hidden;
    // acts[mb][c]: input of chunk c (c = C: the model's output); grads likewise.
    std::vector<std::vector<Buffer>> acts(M), grads(M);
    for (int mb = 0; mb < M; ++mb)
      for (int c = 0; c <= C; ++c) {
        acts[mb].push_back(be.allocate(act, dtype));
        grads[mb].push_back(be.allocate(act, dtype));
      }
    auto fwd = [&](int mb) {
      chunks[0].make_input(mb, acts[mb][0].ptr());
      for (int c = 0; c < C; ++c) chunks[c].forward(mb, acts[mb][c].ptr(), acts[mb][c + 1].ptr());
      chunks[C - 1].loss(mb, M, acts[mb][C].ptr(), grads[mb][C].ptr());
    };
    auto bwd = [&](int mb) {
      for (int c = C - 1; c >= 0; --c) {
        const TensorPtr dx = c == 0 ? TensorPtr() : grads[mb][c].ptr();
        if (split_backward)
          chunks[c].backward_input(mb, grads[mb][c + 1].ptr(), dx);
        else
          chunks[c].backward_full(mb, grads[mb][c + 1].ptr(), dx);
      }
    };
    auto wgt = [&](int mb) {
      if (split_backward)
        for (int c = 0; c < C; ++c) chunks[c].backward_weight(mb);
    };
    if (order == Order::kMicroBatchByMicroBatch) {
      for (int mb = 0; mb < M; ++mb) {
        fwd(mb);
        bwd(mb);
        wgt(mb);
      }
    } else {
      for (int mb = 0; mb < M; ++mb) fwd(mb);
      for (int mb = M - 1; mb >= 0; --mb) bwd(mb);
      for (int mb = 0; mb < M; ++mb) wgt(mb);
    }
    GradientSet got;
    got.loss = chunks[C - 1].loss_sum();
    for (const Stage& s : chunks) {
      EXPECT_EQ(s.in_flight(), 0);
      EXPECT_EQ(s.live_activation_bytes(), 0u);
      append_gradients(s, got);
    }
    return got;
  }

  GradientSet reference(Backend& be) const {
    return run_reference(be, ReferenceConfig{.hidden = hidden,
                                             .rows = rows,
                                             .num_layers = num_layers(),
                                             .num_microbatches = M,
                                             .seed = seed,
                                             .dtype = dtype});
  }
};

// bf16 activations and messages: every order, recompute and the fused backward match the
// bf16 reference within --check's bf16 tolerance, and stay within bf16's precision of fp32.
TEST(Pipeline, Bf16MatchesTheBf16Reference) {
  CpuBackend be;
  for (const Order order : {Order::kMicroBatchByMicroBatch, Order::kAllForwardFirst})
    for (const bool recompute : {false, true})
      for (const bool split : {true, false}) {
        PipelineRun p;
        p.dtype = Dtype::kBF16;
        p.order = order;
        p.recompute = recompute;
        p.split_backward = split;
        const CompareResult r = compare(p.reference(be), p.run(be), check_tolerance(Dtype::kBF16));
        EXPECT_TRUE(r.pass) << r.message << (recompute ? " recompute" : "")
                            << (split ? " split" : " fused");
      }
  PipelineRun p;
  const GradientSet f32 = p.reference(be);
  p.dtype = Dtype::kBF16;
  const CompareResult close = compare(f32, p.run(be), 5e-2);
  EXPECT_TRUE(close.pass) << close.message;
  EXPECT_GT(close.max_rel_error, 1e-5) << "bf16 rounded nothing?";
}

TEST(Pipeline, ThreeChunksMatchReference) {
  CpuBackend be;
  PipelineRun p;
  const GradientSet ref = p.reference(be);
  ASSERT_EQ(ref.layers.size(), 6u);
  const GradientSet got = p.run(be);
  ASSERT_EQ(got.layers.size(), 6u);
  const CompareResult r = compare(ref, got, 1e-6);
  EXPECT_TRUE(r.pass) << r.message;
  EXPECT_GT(*ref.loss, 0.0);
}

TEST(Pipeline, AllForwardFirstOrderMatchesReference) {
  CpuBackend be;
  PipelineRun p;
  p.order = Order::kAllForwardFirst;
  p.layers_per_chunk = {1, 1, 2, 1};
  p.M = 5;
  const CompareResult r = compare(p.reference(be), p.run(be), 1e-6);
  EXPECT_TRUE(r.pass) << r.message;
}

TEST(Pipeline, RecomputeGivesSameGradients) {
  CpuBackend be;
  PipelineRun p;
  p.order = Order::kAllForwardFirst;
  const GradientSet plain = p.run(be);
  p.recompute = true;
  const GradientSet again = p.run(be);
  const CompareResult r = compare(plain, again, 1e-6);
  EXPECT_TRUE(r.pass) << r.message;
  EXPECT_TRUE(compare(p.reference(be), again, 1e-6).pass);
}

TEST(Pipeline, FullBackwardMatchesReference) {
  CpuBackend be;
  PipelineRun p;
  p.split_backward = false;
  const CompareResult r = compare(p.reference(be), p.run(be), 1e-6);
  EXPECT_TRUE(r.pass) << r.message;
}

TEST(Stage, SplitBackwardEqualsFull) {
  CpuBackend be;
  StageConfig cfg = stage_config(8, 4, 1, 3, 9);
  Stage split(be, cfg), full(be, cfg);
  const std::size_t act = 32;
  Buffer x = be.allocate(act), y = be.allocate(act), dy = be.allocate(act);
  Buffer dx1 = be.allocate(act), dx2 = be.allocate(act);
  for (int mb = 0; mb < 3; ++mb) {
    make_input(be, 5, mb, 4, 8, x.data());
    make_target(be, 6, mb, 4, 8, dy.data());  // any output gradient
    split.forward(mb, x.data(), y.data());
    full.forward(mb, x.data(), y.data());
    split.backward_input(mb, dy.data(), dx1.data());
    split.backward_weight(mb);
    full.backward_full(mb, dy.data(), dx2.data());
    EXPECT_EQ(download(be, dx1), download(be, dx2));
  }
  EXPECT_EQ(be.download(split.grads(), split.param_count()),
            be.download(full.grads(), full.param_count()));
}

TEST(Stage, InputAndOutputMayAlias) {
  CpuBackend be;
  StageConfig cfg = stage_config(8, 2, 0, 2, 3);
  Stage a(be, cfg), b(be, cfg);
  Buffer x = be.allocate(16), y = be.allocate(16), inout = be.allocate(16), dx = be.allocate(16);
  make_input(be, 1, 0, 2, 8, x.data());
  be.copy(x.data(), inout.data(), 16);
  a.forward(0, x.data(), y.data());
  b.forward(0, inout.data(), inout.data());
  EXPECT_EQ(download(be, y), download(be, inout));
  a.backward_full(0, y.data(), dx.data());
  b.backward_full(0, inout.data(), inout.data());
  EXPECT_EQ(download(be, dx), download(be, inout));
}

// --- Activation accounting -----------------------------------------------------------------

TEST(Stage, ActivationBytesFollowTheRule) {
  CpuBackend be;
  const int h = 8, b = 4, L = 3;
  const std::size_t u = static_cast<std::size_t>(b) * h * sizeof(float);  // one b×h tensor
  StageConfig cfg = stage_config(h, b, 0, L, 1);
  Stage s(be, cfg);
  Buffer x = be.allocate(b * h), y = be.allocate(b * h);
  make_input(be, 1, 0, b, h, x.data());
  EXPECT_EQ(s.live_activation_bytes(), 0u);
  s.forward(0, x.data(), y.data());
  EXPECT_EQ(s.live_activation_bytes(), 9 * L * u);
  s.forward(1, x.data(), y.data());
  EXPECT_EQ(s.live_activation_bytes(), 18 * L * u);
  s.backward_input(0, y.data(), x.data());
  EXPECT_EQ(s.live_activation_bytes(), 19 * L * u);
  s.backward_weight(0);
  EXPECT_EQ(s.live_activation_bytes(), 9 * L * u);
  s.backward_full(1, y.data(), x.data());
  EXPECT_EQ(s.live_activation_bytes(), 0u);
  EXPECT_EQ(s.peak_activation_bytes(), 19 * L * u);
  s.reset_peak_activation_bytes();
  EXPECT_EQ(s.peak_activation_bytes(), 0u);
  EXPECT_EQ(s.in_flight(), 0);
}

TEST(Stage, ActivationBytesWithRecompute) {
  CpuBackend be;
  const int h = 8, b = 4, L = 3;
  const std::size_t u = static_cast<std::size_t>(b) * h * sizeof(float);
  StageConfig cfg = stage_config(h, b, 0, L, 1, true);
  Stage s(be, cfg);
  Buffer x = be.allocate(b * h), y = be.allocate(b * h);
  make_input(be, 1, 0, b, h, x.data());
  s.forward(0, x.data(), y.data());
  s.forward(1, x.data(), y.data());
  EXPECT_EQ(s.live_activation_bytes(), 2 * u);
  s.backward_input(0, y.data(), x.data());
  EXPECT_EQ(s.live_activation_bytes(), u + 10 * L * u);
  s.backward_weight(0);
  EXPECT_EQ(s.live_activation_bytes(), u);
  s.backward_input(1, y.data(), x.data());
  s.backward_weight(1);
  EXPECT_EQ(s.live_activation_bytes(), 0u);
  EXPECT_EQ(s.peak_activation_bytes(), u + 10 * L * u);
}

TEST(Stage, SharedMeterGivesTheRankPeak) {
  CpuBackend be;
  const int h = 4, b = 2, L = 1;
  const std::size_t u = static_cast<std::size_t>(b) * h * sizeof(float);
  ActivationMeter rank;
  Stage c0(be, stage_config(h, b, 0, L, 1), &rank);
  Stage c1(be, stage_config(h, b, 1, L, 1), &rank);
  Buffer x = be.allocate(b * h), y = be.allocate(b * h);
  make_input(be, 1, 0, b, h, x.data());
  c0.forward(0, x.data(), y.data());
  c0.backward_full(0, y.data(), x.data());
  c1.forward(0, x.data(), y.data());
  EXPECT_EQ(rank.live(), 9 * u);
  c0.forward(1, x.data(), y.data());
  EXPECT_EQ(rank.live(), 18 * u);
  c1.backward_full(0, y.data(), x.data());
  c0.backward_full(1, y.data(), x.data());
  EXPECT_EQ(rank.live(), 0u);
  EXPECT_EQ(rank.peak(), 19 * u);  // c1's B on top of both forwards
  EXPECT_EQ(c0.peak_activation_bytes() + c1.peak_activation_bytes(), 20 * u);
}

TEST(Stage, PoolIsReusedAcrossSteps) {
  CpuBackend be;
  StageConfig cfg = stage_config(8, 4, 0, 2, 1);
  Stage s(be, cfg);
  Buffer x = be.allocate(32), y = be.allocate(32);
  make_input(be, 1, 0, 4, 8, x.data());
  s.reserve(3, 3);
  const std::size_t after_reserve = be.allocated_bytes();
  EXPECT_EQ(s.pool_bytes(), 3 * 32 * 4 + 3 * (10 * 2 - 1) * 32 * 4);
  for (int step = 0; step < 2; ++step) {
    for (int mb = 0; mb < 3; ++mb) s.forward(mb, x.data(), y.data());
    for (int mb = 0; mb < 3; ++mb) s.backward_input(mb, y.data(), x.data());
    for (int mb = 0; mb < 3; ++mb) s.backward_weight(mb);
    EXPECT_EQ(be.allocated_bytes(), after_reserve);
  }
  EXPECT_EQ(s.workspace_bytes(), (4 * 32 + 32) * 4u);
}

TEST(Stage, OutOfOrderWorkIsRejected) {
  CpuBackend be;
  Stage s(be, stage_config(4, 2, 0, 1, 1));
  Buffer x = be.allocate(8), y = be.allocate(8);
  be.fill(x.data(), 0.5f, 8);
  EXPECT_THROW(s.backward_input(0, x.data(), y.data()), std::logic_error);
  s.forward(0, x.data(), y.data());
  EXPECT_THROW(s.forward(0, x.data(), y.data()), std::logic_error);
  EXPECT_THROW(s.backward_weight(0), std::logic_error);
  s.backward_input(0, x.data(), y.data());
  EXPECT_THROW(s.backward_input(0, x.data(), y.data()), std::logic_error);
  s.backward_weight(0);
  EXPECT_THROW(s.backward_weight(0), std::logic_error);
}

// --- Optimizers ------------------------------------------------------------------------------

// Params and gradients after one micro-batch of forward/backward.
void one_microbatch(Backend& be, Stage& s) {
  const std::size_t act = static_cast<std::size_t>(s.config().rows) * s.config().hidden;
  Buffer x = be.allocate(act), y = be.allocate(act);
  s.make_input(0, x.data());
  s.forward(0, x.data(), y.data());
  s.loss(0, 1, y.data(), y.data());
  s.backward_full(0, y.data(), x.data());
}

TEST(Optimizer, SgdStep) {
  CpuBackend be;
  Stage s(be, stage_config(4, 3, 0, 2, 5));
  one_microbatch(be, s);
  const auto p0 = be.download(s.params(), s.param_count());
  const auto g = be.download(s.grads(), s.param_count());
  OptimizerConfig opt;
  opt.lr = 0.1f;
  s.optimizer_step(opt);
  const auto p1 = be.download(s.params(), s.param_count());
  double moved = 0;
  for (std::size_t i = 0; i < p0.size(); ++i) {
    EXPECT_FLOAT_EQ(p1[i], p0[i] - 0.1f * g[i]);
    moved += std::abs(p1[i] - p0[i]);
  }
  EXPECT_GT(moved, 0.0);
  EXPECT_EQ(s.steps(), 1);
  s.zero_grads();
  for (float v : be.download(s.grads(), s.param_count())) EXPECT_EQ(v, 0.0f);
}

TEST(Optimizer, AdamSteps) {
  CpuBackend be;
  Stage s(be, stage_config(4, 3, 0, 1, 5));
  one_microbatch(be, s);
  const auto p0 = be.download(s.params(), s.param_count());
  const auto g = be.download(s.grads(), s.param_count());
  OptimizerConfig opt{.kind = OptimizerConfig::Kind::kAdam,
                      .lr = 1e-2f,
                      .beta1 = 0.9f,
                      .beta2 = 0.99f,
                      .eps = 1e-8f};
  s.optimizer_step(opt);
  const auto p1 = be.download(s.params(), s.param_count());
  // First step: m̂ = g, v̂ = g², so every weight moves by lr·sign(g) (|g| ≫ eps).
  for (std::size_t i = 0; i < p0.size(); ++i)
    if (std::abs(g[i]) > 1e-5f) {
      EXPECT_NEAR(p1[i] - p0[i], g[i] > 0 ? -1e-2 : 1e-2, 1e-5) << i;
    }
  s.optimizer_step(opt);  // same gradients again
  const auto p2 = be.download(s.params(), s.param_count());
  for (std::size_t i = 0; i < p0.size(); ++i) {
    double m = 0, v = 0, p = p0[i];
    for (int t = 1; t <= 2; ++t) {
      m = 0.9 * m + 0.1 * g[i];
      v = 0.99 * v + 0.01 * static_cast<double>(g[i]) * g[i];
      p -= 1e-2 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.99, t))) + 1e-8);
    }
    EXPECT_NEAR(p2[i], p, 2e-6) << i;
  }
  EXPECT_EQ(s.steps(), 2);
}

// --- Seeding -------------------------------------------------------------------------------

TEST(Seeding, ParamsDependOnSeedAndLayerOnly) {
  CpuBackend be;
  const int h = 8;
  Stage a(be, stage_config(h, 2, 0, 3, 77));
  Stage again(be, stage_config(h, 5, 0, 3, 77));
  Stage third(be, stage_config(h, 2, 2, 1, 77));
  Stage other(be, stage_config(h, 2, 0, 3, 78));
  EXPECT_EQ(be.download(a.params(), a.param_count()),
            be.download(again.params(), again.param_count()));
  EXPECT_EQ(be.download(a.w1(2), a.w1_count()), be.download(third.w1(0), third.w1_count()));
  EXPECT_EQ(be.download(a.w2(2), a.w1_count()), be.download(third.w2(0), third.w1_count()));
  EXPECT_NE(be.download(a.w1(0), a.w1_count()), be.download(a.w1(1), a.w1_count()));
  EXPECT_NE(be.download(a.params(), a.param_count()),
            be.download(other.params(), other.param_count()));
  // Scale: W1 within ±1/sqrt(h), W2 within ±1/sqrt(4h).
  for (float v : be.download(a.w1(0), a.w1_count())) EXPECT_LE(std::abs(v), 1 / std::sqrt(8.0f));
  for (float v : be.download(a.w2(0), a.w1_count())) EXPECT_LE(std::abs(v), 1 / std::sqrt(32.0f));
  EXPECT_EQ(a.param_bytes(), 3u * 2 * 4 * h * h * sizeof(float));

  Buffer x1 = be.allocate(16), x2 = be.allocate(16), x3 = be.allocate(16);
  a.make_input(4, x1.data());
  make_input(be, 77, 4, 2, 8, x2.data());
  make_input(be, 77, 5, 2, 8, x3.data());
  EXPECT_EQ(download(be, x1), download(be, x2));
  EXPECT_NE(download(be, x1), download(be, x3));
}

// --- Synthetic mode ------------------------------------------------------------------------

TEST(Synthetic, ActionsWaitTheirTimeAndCount) {
  CpuBackend be;
  const int h = 8, b = 4, L = 2;
  const std::size_t u = static_cast<std::size_t>(b) * h * sizeof(float);
  StageConfig cfg = stage_config(h, b, 0, L, 1);
  cfg.synthetic = SyntheticTimes{.forward = 0.02, .backward = 0.03, .weight = 0.01, .spin = false};
  Stage s(be, cfg);
  EXPECT_EQ(s.params(), nullptr);
  EXPECT_EQ(s.param_bytes(), 2u * L * 4 * h * h * sizeof(float));
  double t = be.now();
  s.forward(0, nullptr, nullptr);
  EXPECT_GE(be.now() - t, 0.02);
  EXPECT_EQ(s.live_activation_bytes(), 9 * L * u);
  t = be.now();
  s.backward_input(0, nullptr, nullptr);
  EXPECT_GE(be.now() - t, 0.03);
  EXPECT_EQ(s.live_activation_bytes(), 10 * L * u);
  t = be.now();
  s.backward_weight(0);
  EXPECT_GE(be.now() - t, 0.01);
  EXPECT_EQ(s.live_activation_bytes(), 0u);
  s.forward(1, nullptr, nullptr);
  t = be.now();
  s.backward_full(1, nullptr, nullptr);
  EXPECT_GE(be.now() - t, 0.04);
  EXPECT_EQ(s.live_activation_bytes(), 0u);
  EXPECT_EQ(s.peak_activation_bytes(), 10 * L * u);
  EXPECT_EQ(be.allocated_bytes(), 0u);
}

// --- compare() -----------------------------------------------------------------------------

TEST(Reference, CompareCatchesDifferences) {
  CpuBackend be;
  ReferenceConfig cfg{.hidden = 4, .rows = 2, .num_layers = 3, .num_microbatches = 2, .seed = 3};
  const GradientSet ref = run_reference(be, cfg);
  const GradientSet subset = run_reference(be, cfg, {1});
  ASSERT_EQ(subset.layers.size(), 1u);
  EXPECT_EQ(subset.layers[0].layer, 1);
  CompareResult ok = compare(ref, subset);
  EXPECT_TRUE(ok.pass) << ok.message;
  EXPECT_EQ(ok.max_rel_error, 0.0);

  GradientSet bad = subset;
  bad.layers[0].dw2[3] += 1.0f;
  CompareResult r = compare(ref, bad);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.worst, "layer 1 dW2");

  bad = subset;
  *bad.loss *= 1.001;
  r = compare(ref, bad);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.worst, "loss");

  bad = subset;
  bad.layers[0].layer = 7;
  EXPECT_FALSE(compare(ref, bad).pass);
  bad = subset;
  bad.layers[0].dw1.pop_back();
  EXPECT_FALSE(compare(ref, bad).pass);
  EXPECT_FALSE(compare(ref, GradientSet{}).pass);
}

}  // namespace
}  // namespace bb
