// The study's metrics (harness/metrics.hpp): FLOP counts against hand counts of every GEMM, and
// utilisation, communication share, FLOP/s and peak memory on constructed records.
#include <gtest/gtest.h>

#include "harness/metrics.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"

namespace bb::harness {
namespace {

// 2·m·n·k: one GEMM's FLOPs.
double gemm(double m, double n, double k) {
  return 2 * m * n * k;
}

TEST(Metrics, MlpBlockFlopsByHand) {
  // b = 2 rows, h = 4: Z = X·W1 (2×4 · 4×16), Y = A·W2 (2×16 · 16×4).
  const PassFlops p = mlp_block_flops(4, 2);
  EXPECT_EQ(p.f, gemm(2, 16, 4) + gemm(2, 4, 16));
  EXPECT_EQ(p.b, gemm(2, 16, 4) /* dA = dY·W2ᵀ */ + gemm(2, 4, 16) /* dX = dZ·W1ᵀ */);
  EXPECT_EQ(p.w, gemm(16, 4, 2) /* dW2 = Aᵀ·dY */ + gemm(4, 16, 2) /* dW1 = Xᵀ·dZ */);
  EXPECT_EQ(p.f, 512);
}

TransformerConfig small() {
  TransformerConfig c;
  c.hidden = 4;
  c.heads = 2;  // d = 2
  c.seq = 3;
  c.ffn = 8;
  c.rows = 2;  // T = 6 tokens
  return c;
}

TEST(Metrics, TransformerBlockFlopsByHand) {
  const TransformerConfig c = small();
  const double T = 6, h = 4, f = 8, S = 3, d = 2, bH = 2 * 2;  // b·H attention problems
  const double qkv = gemm(T, 3 * h, h), out = gemm(T, h, h), w1 = gemm(T, f, h), w2 = gemm(T, h, f);
  const double scores = bH * gemm(S, S, d), context = bH * gemm(S, d, S);
  const PassFlops p = transformer_block_flops(c);
  EXPECT_EQ(p.f, qkv + scores + context + out + w1 + w2);
  // B: dA, dLN2, dctx, dP = dc·Vᵀ, dV = Pᵀ·dc, dQ = dS·K, dK = dSᵀ·Q, dLN1 = dQKV·Wqkvᵀ.
  EXPECT_EQ(p.b, w2 + w1 + out + bH * gemm(S, S, d) + bH * gemm(S, d, S) + bH * gemm(S, d, S) +
                     bH * gemm(S, d, S) + qkv);
  // W: dW2, dW1, dWo, dWqkv.
  EXPECT_EQ(p.w, gemm(f, h, T) + gemm(h, f, T) + gemm(h, h, T) + gemm(h, 3 * h, T));
  EXPECT_GT(p.b, p.w);  // attention has input gradients but no weights
  TransformerConfig causal = c;
  causal.causal = true;  // the scores are computed whole, then masked
  EXPECT_EQ(transformer_block_flops(causal).f, p.f);
}

TEST(Metrics, LmHeadFlopsOnlyWithTheHead) {
  TransformerConfig c = small();
  c.vocab = 10;
  EXPECT_EQ(lm_head_flops(c).f, 0);
  c.head = true;
  const PassFlops p = lm_head_flops(c);
  EXPECT_EQ(p.f, gemm(6, 10, 4) /* logits */ + gemm(6, 4, 10) /* their input gradient */);
  EXPECT_EQ(p.b, 0);
  EXPECT_EQ(p.w, gemm(4, 10, 6));
}

TEST(Metrics, StepFlopsSumEveryActionOfARank) {
  ExecutorConfig ec;
  ec.hidden = 4;
  ec.layers = 3;
  ec.mb_size = 2;
  const Schedule s = lower(generate("1f1b", {2, 4, 1}));
  const PassFlops block = mlp_block_flops(4, 2);
  const double per_mb = 3 * (block.f + block.b + block.w);
  EXPECT_EQ(step_flops(s, ec), (std::vector<double>{4 * per_mb, 4 * per_mb}));
  // A fixed model of 5 blocks split 3,2: the ranks' FLOPs follow their blocks.
  ExecutorConfig fixed = ec;
  fixed.model_layers = 5;
  fixed.partition = {3, 2};
  const double one = block.f + block.b + block.w;
  EXPECT_EQ(step_flops(s, fixed), (std::vector<double>{4 * 3 * one, 4 * 2 * one}));
  // Split backward (ZB-H1: B and W apart) counts the same.
  EXPECT_EQ(step_flops(lower(generate("zb-h1", {2, 4, 1})), ec), step_flops(s, ec));

  // Transformer with ends: the last stage adds the LM head, the first nothing (a gather).
  TransformerConfig t = small();
  t.vocab = 10;
  ec.mb_size = t.rows;
  ec.transformer = t;
  const std::vector<double> got = step_flops(s, ec);
  const PassFlops tb = transformer_block_flops(t);
  const double blocks = 4 * 3 * (tb.f + tb.b + tb.w);
  EXPECT_EQ(got.at(0), blocks);
  EXPECT_EQ(got.at(1), blocks + 4 * 3 * gemm(6, 10, 4));

  ec.synthetic = true;
  EXPECT_EQ(step_flops(s, ec), (std::vector<double>{0, 0}));
}

RunSummary record() {
  RunSummary s;
  s.P = 2;
  s.makespan_s = 0.5;
  s.bubble_fraction_measured = 0.25;
  for (int r = 0; r < 2; ++r) {
    RankResult x;
    x.busy_s = 0.25 + 0.125 * r;
    x.comm_s = 0.0625 * (r + 1);
    x.flops = 1e9 * (r + 1);
    x.peak_device_bytes = 1000;
    x.runtime_bytes = 24 * r;
    s.ranks.push_back(x);
  }
  return s;
}

TEST(Metrics, UtilisationCommShareFlopsAndMemoryOfARecord) {
  RunSummary s = record();
  set_metrics(s);
  EXPECT_DOUBLE_EQ(s.utilisation, 0.75);
  EXPECT_DOUBLE_EQ(s.ranks[0].utilisation, 0.5);
  EXPECT_DOUBLE_EQ(s.ranks[1].utilisation, 0.75);
  EXPECT_DOUBLE_EQ(s.ranks[0].comm_share, 0.0625 / 0.3125);
  EXPECT_DOUBLE_EQ(s.ranks[1].comm_share, 0.125 / 0.5);
  EXPECT_DOUBLE_EQ(s.comm_share, 0.1875 / 0.8125);
  EXPECT_DOUBLE_EQ(s.flops, 3e9);
  EXPECT_DOUBLE_EQ(s.flops_per_s, 6e9);
  EXPECT_DOUBLE_EQ(s.ranks[1].flops_per_s, 4e9);
  EXPECT_EQ(s.ranks[0].peak_memory_bytes, 1000);
  EXPECT_EQ(s.ranks[1].peak_memory_bytes, 1024);

  // --sync none: T is the period.
  s.period_s = 0.25;
  set_metrics(s);
  EXPECT_DOUBLE_EQ(s.ranks[0].utilisation, 1.0);
  EXPECT_DOUBLE_EQ(s.flops_per_s, 12e9);

  // Nothing measured: ratios are 0, not NaN.
  RunSummary empty;
  empty.ranks.resize(1);
  set_metrics(empty);
  EXPECT_EQ(empty.comm_share, 0);
  EXPECT_EQ(empty.ranks[0].utilisation, 0);
  EXPECT_EQ(empty.flops_per_s, 0);
}

TEST(Metrics, MfuAgainstANamedDensePeak) {
  EXPECT_FALSE(dense_peak("", Dtype::kF32));
  EXPECT_FALSE(dense_peak("NVIDIA GeForce RTX 4090", Dtype::kBF16));
  const auto h100 = dense_peak("NVIDIA H100 80GB HBM3", Dtype::kBF16);
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->name, "H100 SXM dense bf16 989.4 TFLOP/s");
  EXPECT_DOUBLE_EQ(h100->flops_per_s, 989.4e12);
  EXPECT_EQ(dense_peak("NVIDIA H100 PCIe", Dtype::kF32)->name, "H100 PCIe dense fp32 51.2 TFLOP/s");
  EXPECT_EQ(dense_peak("NVIDIA H200", Dtype::kBF16)->flops_per_s, 989.4e12);
  EXPECT_EQ(dense_peak("NVIDIA H200", Dtype::kBF16)->name, "H200 SXM dense bf16 989.4 TFLOP/s");
  // NVL parts have lower dense peaks: their exact names, and unknown NVL names, never take the
  // SXM row.
  EXPECT_EQ(dense_peak("NVIDIA H200 NVL", Dtype::kBF16)->name, "H200 NVL dense bf16 835.5 TFLOP/s");
  EXPECT_EQ(dense_peak("NVIDIA H100 NVL", Dtype::kF32)->name, "H100 NVL dense fp32 60.0 TFLOP/s");
  EXPECT_EQ(dense_peak("NVIDIA H200 NVL 141GB", Dtype::kBF16)->flops_per_s, 835.5e12);
  EXPECT_EQ(dense_peak("NVIDIA A100-SXM4-80GB", Dtype::kF32)->name, "A100 dense fp32 19.5 TFLOP/s");
  EXPECT_EQ(dense_peak("NVIDIA A100 80GB PCIe", Dtype::kBF16)->flops_per_s, 312e12);

  RunSummary s = record();
  s.dtype = Dtype::kBF16;
  set_metrics(s);  // CPU: no device, no MFU
  EXPECT_FALSE(s.mfu);
  EXPECT_EQ(s.peak_name, "");
  s.device_name = "NVIDIA H100 80GB HBM3";
  set_metrics(s);
  ASSERT_TRUE(s.mfu);
  EXPECT_DOUBLE_EQ(*s.mfu, 6e9 / (2 * 989.4e12));
  EXPECT_DOUBLE_EQ(*s.ranks[1].mfu, 4e9 / 989.4e12);
  EXPECT_EQ(s.peak_name, "H100 SXM dense bf16 989.4 TFLOP/s");
}

}  // namespace
}  // namespace bb::harness
