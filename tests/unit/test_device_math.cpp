// The arithmetic both backends share (runtime/device_math.hpp), tested on the host: bf16
// rounding against its definition on every class of float, the element-wise functions against
// double-precision definitions, and the CPU backend's bf16 kernels against "round the inputs,
// compute in fp32, round the result once" — the GPU's kernels call the same functions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "runtime/cpu_backend.hpp"
#include "runtime/device_math.hpp"

namespace bb {
namespace {

// bf16 rounding by its definition: the nearest of the two bf16 neighbours, ties to the one with
// an even last bit, computed on the exact values in double.
float round_bf16_reference(float x) {
  if (std::isnan(x) || std::isinf(x)) return x;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const float lo = std::bit_cast<float>(u & 0xffff0000u);               // toward zero
  const float hi = std::bit_cast<float>((u & 0xffff0000u) + 0x10000u);  // away from zero
  // Past the largest bf16 the next value is 2^128 (it rounds to infinity).
  const double hi_value = std::isinf(hi) ? std::copysign(0x1p128, x) : hi;
  const double dl = std::abs(static_cast<double>(x) - lo), dh = std::abs(hi_value - x);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return ((u >> 16) & 1u) == 0 ? lo : hi;
}

TEST(DeviceMath, Bf16RoundsToNearestEven) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(bits(gen));
    if (std::isnan(x)) continue;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(math::round_bf16(x)),
              std::bit_cast<std::uint32_t>(round_bf16_reference(x)))
        << std::hexfloat << x;
  }
  // Ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the even 1; 1 + 3·2^-8 to
  // 1 + 2^-6.
  EXPECT_EQ(math::round_bf16(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(math::round_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(math::round_bf16(-1.0f - 0x1p-8f), -1.0f);
  // The largest floats round up to infinity; infinities, zeros and subnormals keep their class.
  EXPECT_EQ(math::round_bf16(std::numeric_limits<float>::max()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(math::round_bf16(-std::numeric_limits<float>::infinity()),
            -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(math::round_bf16(-0.0f)));
  EXPECT_EQ(math::round_bf16(0x1p-130f), 0x1p-130f);  // a bf16 subnormal is exact
  EXPECT_EQ(math::round_bf16(0x1p-140f), 0.0f);       // below half the smallest: zero
  // NaN stays NaN (quiet), of its sign.
  const float nan = math::round_bf16(-std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(nan));
  EXPECT_TRUE(std::signbit(nan));
  EXPECT_TRUE(
      std::isnan(math::bf16_value(bf16{math::bf16_bits(std::bit_cast<float>(0x7f800001u))})));
  // Rounding is idempotent, and load/store go through it.
  for (float x : {0.1f, -3.14159f, 1e-20f, 65504.0f}) {
    EXPECT_EQ(math::round_bf16(math::round_bf16(x)), math::round_bf16(x));
    bf16 b{};
    math::store(&b, 0, x);
    EXPECT_EQ(math::load(&b, 0), math::round_bf16(x));
  }
}

TEST(DeviceMath, ElementFunctionsMatchTheirDefinitions) {
  for (double v = -6; v <= 6; v += 0.01) {
    const auto f = static_cast<float>(v);
    const double x = f;
    const double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
    EXPECT_NEAR(math::gelu(f), x * cdf, 1e-6) << v;
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    EXPECT_NEAR(math::gelu_backward(f, 0.5f), 0.5 * (cdf + x * pdf), 1e-6) << v;
  }
  // LayerNorm of one row through the element functions: mean 0 and unit variance before gamma.
  const std::vector<float> row = {1.0f, -2.0f, 0.5f, 3.0f};
  float sum = 0, var = 0;
  for (float x : row) sum += x;
  const float mean = sum / 4;
  for (float x : row) var += (x - mean) * (x - mean);
  const float rstd = math::layernorm_rstd(var, 4, 0.0f);
  double m = 0, s = 0;
  for (float x : row) {
    const double y = math::layernorm_out(x, mean, rstd, 1.0f, 0.0f);
    m += y / 4;
    s += y * y / 4;
  }
  EXPECT_NEAR(m, 0.0, 1e-6);
  EXPECT_NEAR(s, 1.0, 1e-5);
  // Cross-entropy's gradient sums to zero over a row (softmax minus one-hot).
  const std::vector<float> logits = {0.3f, -1.0f, 2.0f};
  double z = 0;
  for (float x : logits) z += std::exp(static_cast<double>(x - 2.0f));
  double g = 0;
  for (int j = 0; j < 3; ++j) g += math::cross_entropy_grad(logits[j], 2.0f, 1.0 / z, 1.0f, j == 1);
  EXPECT_NEAR(g, 0.0, 1e-6);
  EXPECT_NEAR(math::cross_entropy_loss(z, 2.0f, -1.0f), std::log(z) + 3.0, 1e-12);
  // Adam's first step moves every parameter by lr·sign(g) (up to eps).
  math::AdamStep step{0.01f, 0.9f, 0.999f, 1e-8f, 1 - 0.9f, 1 - 0.999f};
  float p = 1, mm = 0, vv = 0;
  math::adam(step, -0.3f, p, mm, vv);
  EXPECT_NEAR(p, 1.01f, 1e-6);
  EXPECT_EQ(math::sgd(1.0f, 2.0f, 0.25f), 0.5f);
  EXPECT_EQ(seeded_token_value(seeded_key(1, 2), 3, 1), 0);
}

// The CPU backend's bf16 kernels are "load (exact), compute in fp32, store rounded once":
// equal to the fp32 kernel on the bf16 inputs, rounded.
TEST(DeviceMath, Bf16KernelsRoundOnceAfterFp32Math) {
  CpuBackend be;
  const std::size_t n = 257;
  std::vector<float> v(n);
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> d(-3, 3);
  for (float& x : v) x = math::round_bf16(d(gen));  // exactly representable in bf16
  Buffer a16 = be.allocate(n, Dtype::kBF16), b16 = be.allocate(n, Dtype::kBF16);
  Buffer a32 = be.allocate(n), b32 = be.allocate(n);
  be.upload(v, a16.ptr());
  be.upload(v, a32.ptr());
  EXPECT_EQ(be.download(a16.ptr(), n), v);  // bf16 values survive the round trip
  auto same_after_rounding = [&](const char* what) {
    const auto got = be.download(b16.ptr(), n), want = be.download(b32.ptr(), n);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], math::round_bf16(want[i])) << what << " " << i;
  };
  be.gelu(a16.ptr(), b16.ptr(), n);
  be.gelu(a32.ptr(), b32.ptr(), n);
  same_after_rounding("gelu");
  be.softmax(a16.ptr(), b16.ptr(), 1, static_cast<int>(n), false);
  be.softmax(a32.ptr(), b32.ptr(), 1, static_cast<int>(n), false);
  same_after_rounding("softmax");
  std::vector<float> gamma(n, 1.5f), beta(n, 0.25f), mean(1), rstd(1), mean32(1), rstd32(1);
  be.layernorm(a16.ptr(), gamma.data(), beta.data(), b16.ptr(), mean.data(), rstd.data(), 1,
               static_cast<int>(n), 1e-5f);
  be.layernorm(a32.ptr(), gamma.data(), beta.data(), b32.ptr(), mean32.data(), rstd32.data(), 1,
               static_cast<int>(n), 1e-5f);
  same_after_rounding("layernorm");
  EXPECT_EQ(mean, mean32);  // statistics stay fp32
  EXPECT_EQ(rstd, rstd32);
  // A converting copy rounds once; back to fp32 is exact.
  Buffer c32 = be.allocate(n);
  be.copy(a32.ptr(), b16.ptr(), n);
  be.copy(b16.ptr(), c32.ptr(), n);
  EXPECT_EQ(be.download(c32.ptr(), n), v);
}

// A bf16 GEMM multiplies the bf16-rounded operands exactly and accumulates in fp32: with
// operands of few significant bits the result is exact, whatever the operands' dtypes, and a
// bf16 C is that result rounded once.
TEST(DeviceMath, Bf16GemmIsTheProductOfRoundedOperands) {
  CpuBackend be;
  const int m = 3, n = 5, k = 7;
  std::vector<float> a(m * k), b(k * n);
  for (int i = 0; i < m * k; ++i) a[i] = 1.0f + 0x1p-7f * static_cast<float>(i % 5);  // bf16
  for (int i = 0; i < k * n; ++i) b[i] = 0.5f + 0x1p-8f * static_cast<float>(i % 3) + 0x1p-12f;
  std::vector<double> want(m * n, 0.0);  // with b rounded to bf16 (0x1p-12 drops out)
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p)
        want[i * n + j] += static_cast<double>(a[i * k + p]) * math::round_bf16(b[p * n + j]);
  Buffer a16 = be.allocate(m * k, Dtype::kBF16), b32 = be.allocate(k * n);
  Buffer c32 = be.allocate(m * n), c16 = be.allocate(m * n, Dtype::kBF16);
  be.upload(a, a16.ptr());
  be.upload(b, b32.ptr());
  be.gemm(kNoTrans, kNoTrans, m, n, k, 1.0f, a16.ptr(), k, b32.ptr(), n, 0.0f, c32.ptr(), n);
  be.gemm(kNoTrans, kNoTrans, m, n, k, 1.0f, a16.ptr(), k, b32.ptr(), n, 0.0f, c16.ptr(), n);
  const auto got32 = be.download(c32.ptr(), m * n), got16 = be.download(c16.ptr(), m * n);
  for (int i = 0; i < m * n; ++i) {
    EXPECT_EQ(got32[i], static_cast<float>(want[i])) << i;
    EXPECT_EQ(got16[i], math::round_bf16(static_cast<float>(want[i]))) << i;
  }
}

}  // namespace
}  // namespace bb
