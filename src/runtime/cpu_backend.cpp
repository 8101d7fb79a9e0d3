#include "runtime/cpu_backend.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

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

namespace {

// Host staging of host memory: each staged message is a memcpy into a pooled buffer of its
// own. Every CPU call is synchronous, so a send's copy is complete when stage_send() returns.
class CpuHostStaging final : public HostStaging {
 public:
  Ticket stage_send(const float* device_src, std::size_t count) override {
    Entry e = take(count);
    e.send = true;
    if (count > 0) std::memcpy(e.host.data(), device_src, count * sizeof(float));
    return add(std::move(e));
  }
  const float* send_ready(const Ticket& ticket) override { return find(ticket, true).host.data(); }
  void release(Ticket& ticket) override { give_back(ticket, true); }

  Ticket stage_recv(float* device_dst, std::size_t count) override {
    Entry e = take(count);
    e.device = device_dst;
    return add(std::move(e));
  }
  float* recv_buffer(const Ticket& ticket) override { return find(ticket, false).host.data(); }
  void deliver(Ticket& ticket) override {
    const Entry& e = find(ticket, false);
    if (e.count > 0) std::memcpy(e.device, e.host.data(), e.count * sizeof(float));
    give_back(ticket, false);
  }

  std::size_t held_bytes() const override { return held_; }
  std::size_t in_use_bytes() const override { return in_use_; }

 private:
  struct Entry {
    bool send = false;
    std::vector<float> host;  // size(): the block's capacity in floats
    std::size_t count = 0;
    float* device = nullptr;  // receive: where deliver() puts the data
  };

  static std::size_t bytes_of(const std::vector<float>& v) { return v.size() * sizeof(float); }

  // A free block of at least `count` floats and at most a quarter more, else a new one.
  Entry take(std::size_t count) {
    Entry e;
    e.count = count;
    const std::size_t size = count == 0 ? 1 : count;
    const auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first - size <= size / 4) {
      e.host = std::move(it->second);
      free_.erase(it);
    } else {
      e.host.resize(size);
      held_ += bytes_of(e.host);
    }
    in_use_ += bytes_of(e.host);
    return e;
  }
  Ticket add(Entry e) {
    const std::int64_t id = next_id_++;
    entries_.emplace(id, std::move(e));
    return Ticket{id};
  }
  Entry& find(const Ticket& ticket, bool send) {
    const auto it = entries_.find(ticket.id);
    if (it == entries_.end() || it->second.send != send)
      throw std::logic_error("HostStaging: unknown or wrong-kind ticket");
    return it->second;
  }
  void give_back(Ticket& ticket, bool send) {
    Entry& e = find(ticket, send);
    in_use_ -= bytes_of(e.host);
    const std::size_t size = e.host.size();
    free_.emplace(size, std::move(e.host));
    entries_.erase(ticket.id);
    ticket = Ticket{};
  }

  std::unordered_map<std::int64_t, Entry> entries_;
  std::multimap<std::size_t, std::vector<float>> free_;  // by capacity in floats
  std::size_t held_ = 0, in_use_ = 0;
  std::int64_t next_id_ = 0;
};

}  // namespace

std::unique_ptr<HostStaging> CpuBackend::make_host_staging() {
  return std::make_unique<CpuHostStaging>();
}

void CpuBackend::gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                      const float* a, int lda, const float* b, int ldb, float beta, float* c,
                      int ldc) {
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  const double flops = 2.0 * m * n * k;
  if (!poll_ || flops <= kSliceFlops) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Slices along the longer side of C, in multiples of 16 (whole micro-kernel tiles).
  const bool by_columns = n >= m;
  const int extent = by_columns ? n : m;
  const int slices = static_cast<int>(std::ceil(flops / kSliceFlops));
  const int width = std::max(16, (extent / slices + 15) / 16 * 16);
  for (int from = 0; from < extent; from += width) {
    const int w = std::min(width, extent - from);
    const auto off = static_cast<std::ptrdiff_t>(from);
    if (by_columns)
      cblas_sgemm(CblasRowMajor, ta, tb, m, w, k, alpha, a, lda, b + (trans_b ? off * ldb : off),
                  ldb, beta, c + off, ldc);
    else
      cblas_sgemm(CblasRowMajor, ta, tb, w, n, k, alpha, a + (trans_a ? off : off * lda), lda, b,
                  ldb, beta, c + off * ldc, ldc);
    if (from + w < extent) poll_();
  }
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

void CpuBackend::gemm_strided_batched(Trans trans_a, Trans trans_b, int m, int n, int k,
                                      float alpha, const float* a, int lda, std::int64_t stride_a,
                                      const float* b, int ldb, std::int64_t stride_b, float beta,
                                      float* c, int ldc, std::int64_t stride_c, int batch) {
  for (int i = 0; i < batch; ++i)
    gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
         c + i * stride_c, ldc);
}

void CpuBackend::softmax(const float* x, float* y, int rows, int cols, bool causal) {
  const auto n = static_cast<std::size_t>(cols);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * n;
    float* yr = y + static_cast<std::size_t>(r) * n;
    const std::size_t valid = causal ? static_cast<std::size_t>(r % cols) + 1 : n;
    float mx = xr[0];
    for (std::size_t j = 1; j < valid; ++j) mx = std::max(mx, xr[j]);
    float sum = 0.0f;
    for (std::size_t j = 0; j < valid; ++j) {
      yr[j] = std::exp(xr[j] - mx);
      sum += yr[j];
    }
    const float inv = 1.0f / sum;
    for (std::size_t j = 0; j < valid; ++j) yr[j] *= inv;
    for (std::size_t j = valid; j < n; ++j) yr[j] = 0.0f;
  }
}

void CpuBackend::softmax_backward(const float* y, const float* dy, float* dx, int rows, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  for (int r = 0; r < rows; ++r) {
    const std::size_t o = static_cast<std::size_t>(r) * n;
    float dot = 0.0f;
    for (std::size_t j = 0; j < n; ++j) dot += y[o + j] * dy[o + j];
    for (std::size_t j = 0; j < n; ++j) dx[o + j] = y[o + j] * (dy[o + j] - dot);
  }
}

void CpuBackend::layernorm(const float* x, const float* gamma, const float* beta, float* y,
                           float* mean, float* rstd, int rows, int cols, float eps) {
  const auto n = static_cast<std::size_t>(cols);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * n;
    float* yr = y + static_cast<std::size_t>(r) * n;
    float sum = 0.0f;
    for (std::size_t j = 0; j < n; ++j) sum += xr[j];
    const float mu = sum / static_cast<float>(cols);
    float var = 0.0f;
    for (std::size_t j = 0; j < n; ++j) var += (xr[j] - mu) * (xr[j] - mu);
    const float rs = 1.0f / std::sqrt(var / static_cast<float>(cols) + eps);
    for (std::size_t j = 0; j < n; ++j) yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

void CpuBackend::layernorm_backward_input(const float* x, const float* gamma, const float* mean,
                                          const float* rstd, const float* dy, float* dx, int rows,
                                          int cols) {
  const auto n = static_cast<std::size_t>(cols);
  for (int r = 0; r < rows; ++r) {
    const std::size_t o = static_cast<std::size_t>(r) * n;
    const float mu = mean[r], rs = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (std::size_t j = 0; j < n; ++j) {
      const float g = dy[o + j] * gamma[j];
      sum_g += g;
      sum_gx += g * (x[o + j] - mu) * rs;
    }
    const float mean_g = sum_g / static_cast<float>(cols);
    const float mean_gx = sum_gx / static_cast<float>(cols);
    for (std::size_t j = 0; j < n; ++j) {
      const float xhat = (x[o + j] - mu) * rs;
      dx[o + j] += rs * (dy[o + j] * gamma[j] - mean_g - xhat * mean_gx);
    }
  }
}

void CpuBackend::layernorm_backward_params(const float* x, const float* mean, const float* rstd,
                                           const float* dy, float* dgamma, float* dbeta, int rows,
                                           int cols) {
  const auto n = static_cast<std::size_t>(cols);
  for (int r = 0; r < rows; ++r) {
    const std::size_t o = static_cast<std::size_t>(r) * n;
    for (std::size_t j = 0; j < n; ++j) {
      dgamma[j] += dy[o + j] * (x[o + j] - mean[r]) * rstd[r];
      dbeta[j] += dy[o + j];
    }
  }
}

void CpuBackend::add_bias(float* y, const float* bias, int rows, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  for (int r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < n; ++j) y[static_cast<std::size_t>(r) * n + j] += bias[j];
}

void CpuBackend::column_sums(const float* x, float* out, int rows, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  for (int r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < n; ++j) out[j] += x[static_cast<std::size_t>(r) * n + j];
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

// --- Model ends --------------------------------------------------------------------------

void CpuBackend::embedding(const float* ids, const float* table, const float* positions, float* out,
                           int tokens, int seq, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  for (int t = 0; t < tokens; ++t) {
    const float* e = table + static_cast<std::size_t>(ids[t]) * n;
    const float* p = positions + static_cast<std::size_t>(t % seq) * n;
    float* o = out + static_cast<std::size_t>(t) * n;
    for (std::size_t j = 0; j < n; ++j) o[j] = e[j] + p[j];
  }
}

void CpuBackend::embedding_backward(const float* ids, const float* dout, float* dtable,
                                    float* dpositions, int tokens, int seq, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  for (int t = 0; t < tokens; ++t) {
    const float* d = dout + static_cast<std::size_t>(t) * n;
    float* e = dtable + static_cast<std::size_t>(ids[t]) * n;
    float* p = dpositions + static_cast<std::size_t>(t % seq) * n;
    for (std::size_t j = 0; j < n; ++j) {
      e[j] += d[j];
      p[j] += d[j];
    }
  }
}

void CpuBackend::cross_entropy(const float* logits, const float* targets, float* dlogits, int rows,
                               int cols, float scale, float* loss_sum) {
  const auto n = static_cast<std::size_t>(cols);
  double sum = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* x = logits + static_cast<std::size_t>(r) * n;
    float* d = dlogits + static_cast<std::size_t>(r) * n;
    const auto target = static_cast<std::size_t>(targets[r]);
    float mx = x[0];
    for (std::size_t j = 1; j < n; ++j) mx = std::max(mx, x[j]);
    double z = 0.0;
    for (std::size_t j = 0; j < n; ++j) z += std::exp(static_cast<double>(x[j] - mx));
    sum += std::log(z) + static_cast<double>(mx) - static_cast<double>(x[target]);
    const double inv = 1.0 / z;
    for (std::size_t j = 0; j < n; ++j)
      d[j] = scale * static_cast<float>(std::exp(static_cast<double>(x[j] - mx)) * inv);
    d[target] -= scale;
  }
  *loss_sum += static_cast<float>(static_cast<double>(scale) * sum);
}

}  // namespace bb
