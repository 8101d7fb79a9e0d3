// One math, two devices: the element- and row-wise arithmetic of the backends' kernels,
// written once. CpuBackend (cpu_backend.cpp) and the CUDA kernels (cuda/kernels.cu) both
// call these functions, so the CPU tests exercise the GPU's arithmetic and the kernels add
// only indexing, reductions and launch.
//
// Rounding: the functions use the explicitly rounded operations below (mul, add, ...), which
// compile to __fmul_rn & co. on the device (nvcc never contracts those into FMAs) and to plain
// IEEE float operations on the host (x86-64 SSE: no excess precision, no contraction without
// -mfma). So every function here gives bit-identical results on both devices, except where it
// calls expf/erff/logf, whose last bits may differ between glibc and CUDA's libdevice.
//
// Reductions (row sums, maxima) are not here: each backend sums in its own order (the CPU
// serially, the GPU in a tree), which changes the last bits only.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/dtype.hpp"

#if defined(__CUDACC__)
#define BB_HD __host__ __device__ __forceinline__
#else
#define BB_HD inline
#endif

namespace bb {

// SplitMix64 finaliser. Counter-based random numbers: value `index` of stream `stream`
// under `seed` depends on nothing else, so any process can regenerate any tensor.
BB_HD constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

BB_HD constexpr std::uint64_t seeded_key(std::uint64_t seed, std::uint64_t stream) {
  return splitmix64(splitmix64(seed) ^ stream);
}

// Uniform in [-1, 1) with 24 random bits: exactly representable, so every backend that
// evaluates this function produces bit-identical tensors.
BB_HD constexpr float seeded_uniform_value(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t r = splitmix64(key + index * 0x9E3779B97F4A7C15ull);
  return static_cast<float>(r >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

// Token `index` of the stream `key`: uniform in [0, vocab).
BB_HD constexpr std::int32_t seeded_token_value(std::uint64_t key, std::uint64_t index,
                                                std::int32_t vocab) {
  return static_cast<std::int32_t>(splitmix64(key + index * 0x9E3779B97F4A7C15ull) %
                                   static_cast<std::uint64_t>(vocab));
}

namespace math {

// --- Explicitly rounded fp32 operations ------------------------------------------------------
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float mul(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ float add(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ float sub(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ __forceinline__ float div(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ __forceinline__ float sqrt_rn(float a) {
  return __fsqrt_rn(a);
}
__device__ __forceinline__ std::uint32_t float_bits(float x) {
  return __float_as_uint(x);
}
__device__ __forceinline__ float bits_float(std::uint32_t u) {
  return __uint_as_float(u);
}
#else
inline float mul(float a, float b) {
  return a * b;
}
inline float add(float a, float b) {
  return a + b;
}
inline float sub(float a, float b) {
  return a - b;
}
inline float div(float a, float b) {
  return a / b;
}
inline float sqrt_rn(float a) {
  return std::sqrt(a);
}
inline std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
#endif

// --- bf16 ----------------------------------------------------------------------------------
// Round to nearest, ties to even (as __float2bfloat16_rn); NaN stays a quiet NaN of its sign.
BB_HD std::uint16_t bf16_bits(float x) {
  const std::uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
BB_HD float bf16_value(bf16 x) {
  return bits_float(static_cast<std::uint32_t>(x.bits) << 16);
}
// x rounded to the nearest bf16, as a float.
BB_HD float round_bf16(float x) {
  return bits_float(static_cast<std::uint32_t>(bf16_bits(x)) << 16);
}

// Element i of a tensor of either dtype, as fp32; and a value stored rounded to its dtype.
BB_HD float load(const float* p, std::size_t i) {
  return p[i];
}
BB_HD float load(const bf16* p, std::size_t i) {
  return bf16_value(p[i]);
}
BB_HD void store(float* p, std::size_t i, float v) {
  p[i] = v;
}
BB_HD void store(bf16* p, std::size_t i, float v) {
  p[i] = bf16{bf16_bits(v)};
}

// --- Element-wise math ---------------------------------------------------------------------
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// GELU, exact (erf) form: 0.5·v·(1 + erf(v/√2)).
BB_HD float gelu(float v) {
  return mul(mul(0.5f, v), add(1.0f, erff(mul(v, kInvSqrt2))));
}
// da·gelu'(v) = da·(Φ(v) + v·φ(v)).
BB_HD float gelu_backward(float v, float da) {
  const float cdf = mul(0.5f, add(1.0f, erff(mul(v, kInvSqrt2))));
  const float pdf = mul(kInvSqrt2Pi, expf(mul(mul(-0.5f, v), v)));
  return mul(da, add(cdf, mul(v, pdf)));
}

BB_HD float sgd(float p, float g, float lr) {
  return sub(p, mul(lr, g));
}

// One Adam step of one element; bc1, bc2 are the bias corrections 1 − β^t (computed once per
// step on the host, in double, then rounded).
struct AdamStep {
  float lr, beta1, beta2, eps, bc1, bc2;
};
BB_HD void adam(const AdamStep& s, float g, float& p, float& m, float& v) {
  m = add(mul(s.beta1, m), mul(sub(1.0f, s.beta1), g));
  v = add(mul(s.beta2, v), mul(mul(sub(1.0f, s.beta2), g), g));
  const float m_hat = div(m, s.bc1);
  const float v_hat = div(v, s.bc2);
  p = sub(p, div(mul(s.lr, m_hat), add(sqrt_rn(v_hat), s.eps)));
}

// LayerNorm: y = (x − mean)·rstd·gamma + beta, from the row's mean and variance sum.
BB_HD float layernorm_rstd(float var_sum, int cols, float eps) {
  return div(1.0f, sqrt_rn(add(div(var_sum, static_cast<float>(cols)), eps)));
}
BB_HD float layernorm_out(float x, float mean, float rstd, float gamma, float beta) {
  return add(mul(mul(sub(x, mean), rstd), gamma), beta);
}
// Input gradient of one element (ADDED to the residual's gradient by the caller), from the row
// means of g = dy·gamma and of g·x̂.
BB_HD float layernorm_input_grad(float x, float mean, float rstd, float dy, float gamma,
                                 float mean_g, float mean_gx) {
  const float xhat = mul(sub(x, mean), rstd);
  return mul(rstd, sub(sub(mul(dy, gamma), mean_g), mul(xhat, mean_gx)));
}
// The two terms of one row's element to the row sums above: g and g·x̂.
BB_HD float layernorm_g(float dy, float gamma) {
  return mul(dy, gamma);
}
BB_HD float layernorm_gx(float g, float x, float mean, float rstd) {
  return mul(mul(g, sub(x, mean)), rstd);
}
// dgamma's term of one element: dy·x̂.
BB_HD float layernorm_dgamma(float dy, float x, float mean, float rstd) {
  return mul(mul(dy, sub(x, mean)), rstd);
}

// Softmax of one element, from the row's maximum and 1/Σexp; its input gradient from the row's
// Σ y·dy.
BB_HD float softmax_exp(float x, float max) {
  return expf(sub(x, max));
}
BB_HD float softmax_backward(float y, float dy, float dot) {
  return mul(y, sub(dy, dot));
}

// Cross-entropy's gradient of one logit: scale·(softmax − onehot); z = Σ exp(x − max) (double).
BB_HD float cross_entropy_grad(float x, float max, double inv_z, float scale, bool is_target) {
  const float p = static_cast<float>(exp(static_cast<double>(sub(x, max))) * inv_z);
  return is_target ? sub(mul(scale, p), scale) : mul(scale, p);
}
// One row's loss: log z + max − x[target] (double).
BB_HD double cross_entropy_loss(double z, float max, float x_target) {
  return log(z) + static_cast<double>(max) - static_cast<double>(x_target);
}

// MSE of one element: its squared error (double) and gradient 2·scale·(y − t).
BB_HD float mse_grad(float y, float t, float two_scale) {
  return mul(two_scale, sub(y, t));
}

}  // namespace math
}  // namespace bb
