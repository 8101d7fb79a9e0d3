#include "runtime/cpu_backend.hpp"

#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

namespace bb {
namespace {

constexpr std::size_t kAlignment = 64;

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

CpuBackend::CpuBackend(const CpuBackendOptions& options) {
  if (options.blas_threads > 0) openblas_set_num_threads(options.blas_threads);
}

float* CpuBackend::raw_allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<float*>(p);
}

void CpuBackend::raw_free(float* p, std::size_t /*bytes*/) noexcept {
  std::free(p);
}

void CpuBackend::to_host(const float* device_src, float* host_dst, std::size_t count) {
  if (count > 0) std::memcpy(host_dst, device_src, count * sizeof(float));
}

void CpuBackend::from_host(const float* host_src, float* device_dst, std::size_t count) {
  if (count > 0) std::memcpy(device_dst, host_src, count * sizeof(float));
}

void CpuBackend::gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                      const float* a, int lda, const float* b, int ldb, float beta, float* c,
                      int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void CpuBackend::fill(float* x, float value, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) x[i] = value;
}

void CpuBackend::copy(const float* src, float* dst, std::size_t count) {
  if (count > 0 && src != dst) std::memmove(dst, src, count * sizeof(float));
}

void CpuBackend::axpy(float alpha, const float* x, float* y, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) y[i] += alpha * x[i];
}

void CpuBackend::gelu(const float* z, float* a, std::size_t count) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (std::size_t i = 0; i < count; ++i) {
    const float v = z[i];
    a[i] = 0.5f * v * (1.0f + std::erf(v * kInvSqrt2));
  }
}

void CpuBackend::gelu_backward(const float* z, const float* da, float* dz, std::size_t count) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  constexpr float kInvSqrt2Pi = 0.39894228040143268f;
  for (std::size_t i = 0; i < count; ++i) {
    const float v = z[i];
    const float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    dz[i] = da[i] * (cdf + v * pdf);
  }
}

void CpuBackend::mse_loss(const float* y, const float* target, float* dy, std::size_t count,
                          float scale, float* loss_sum) {
  double sum = 0.0;
  const float two_scale = 2.0f * scale;
  for (std::size_t i = 0; i < count; ++i) {
    const float d = y[i] - target[i];
    sum += static_cast<double>(d) * d;
    dy[i] = two_scale * d;
  }
  *loss_sum += static_cast<float>(static_cast<double>(scale) * sum);
}

void CpuBackend::sgd_update(float* p, const float* g, std::size_t count, float lr) {
  for (std::size_t i = 0; i < count; ++i) p[i] -= lr * g[i];
}

void CpuBackend::adam_update(float* p, const float* g, float* m, float* v, std::size_t count,
                             const AdamParams& params, std::int64_t step) {
  const double t = static_cast<double>(step);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta2), t));
  const float b1 = params.beta1, b2 = params.beta2;
  for (std::size_t i = 0; i < count; ++i) {
    const float gi = g[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float m_hat = m[i] / bc1;
    const float v_hat = v[i] / bc2;
    p[i] -= params.lr * m_hat / (std::sqrt(v_hat) + params.eps);
  }
}

void CpuBackend::seeded_uniform(float* x, std::size_t count, std::uint64_t seed,
                                std::uint64_t stream, float scale) {
  const std::uint64_t key = seeded_key(seed, stream);
  for (std::size_t i = 0; i < count; ++i) x[i] = scale * seeded_uniform_value(key, i);
}

double CpuBackend::now() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

void CpuBackend::sleep_for(double seconds) {
  if (seconds <= 0) return;
  std::this_thread::sleep_until(deadline_after(seconds));
}

void CpuBackend::spin_for(double seconds) {
  if (seconds <= 0) return;
  const auto deadline = deadline_after(seconds);
  while (Clock::now() < deadline) {
  }
}

}  // namespace bb
