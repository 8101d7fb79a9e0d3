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

void* CpuBackend::raw_allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void CpuBackend::raw_free(void* p, std::size_t /*bytes*/) noexcept {
  std::free(p);
}

void CpuBackend::copy_to_host(const void* device_src, void* host_dst, std::size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, device_src, bytes);
}

void CpuBackend::copy_from_host(const void* host_src, void* device_dst, std::size_t bytes) {
  if (bytes > 0) std::memcpy(device_dst, host_src, bytes);
}

namespace {

// Host staging of host memory: each staged message is a memcpy into a pooled buffer of its
// own. Every CPU call is synchronous, so a send's copy is complete when stage_send() returns.
class CpuHostStaging final : public HostStaging {
 public:
  Ticket stage_send(ConstTensorPtr device_src, std::size_t count) override {
    Entry e = take(device_src.bytes(count));
    e.send = true;
    if (e.bytes > 0) std::memcpy(e.host.data(), device_src.get(), e.bytes);
    return add(std::move(e));
  }
  const void* send_ready(const Ticket& ticket) override { return find(ticket, true).host.data(); }
  void release(Ticket& ticket) override { give_back(ticket, true); }

  Ticket stage_recv(TensorPtr device_dst, std::size_t count) override {
    Entry e = take(device_dst.bytes(count));
    e.device = device_dst.get();
    return add(std::move(e));
  }
  void* recv_buffer(const Ticket& ticket) override { return find(ticket, false).host.data(); }
  void deliver(Ticket& ticket) override {
    const Entry& e = find(ticket, false);
    if (e.bytes > 0) std::memcpy(e.device, e.host.data(), e.bytes);
    give_back(ticket, false);
  }

  std::size_t held_bytes() const override { return held_; }
  std::size_t in_use_bytes() const override { return in_use_; }

 private:
  struct Entry {
    bool send = false;
    std::vector<std::byte> host;  // size(): the block's capacity in bytes
    std::size_t bytes = 0;
    void* device = nullptr;  // receive: where deliver() puts the data
  };

  // A free block of at least `bytes` bytes and at most a quarter more, else a new one.
  Entry take(std::size_t bytes) {
    Entry e;
    e.bytes = bytes;
    const std::size_t size = bytes == 0 ? 1 : bytes;
    const auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first - size <= size / 4) {
      e.host = std::move(it->second);
      free_.erase(it);
    } else {
      e.host.resize(size);
      held_ += e.host.size();
    }
    in_use_ += e.host.size();
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
    in_use_ -= e.host.size();
    const std::size_t size = e.host.size();
    free_.emplace(size, std::move(e.host));
    entries_.erase(ticket.id);
    ticket = Ticket{};
  }

  std::unordered_map<std::int64_t, Entry> entries_;
  std::multimap<std::size_t, std::vector<std::byte>> free_;  // by capacity in bytes
  std::size_t held_ = 0, in_use_ = 0;
  std::int64_t next_id_ = 0;
};

using math::load;
using math::store;

}  // namespace

std::unique_ptr<HostStaging> CpuBackend::make_host_staging() {
  return std::make_unique<CpuHostStaging>();
}

void CpuBackend::sgemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
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

const float* CpuBackend::widened(ConstTensorPtr x, int rows, int cols, int ld,
                                 std::vector<float>& ws) {
  const auto r = static_cast<std::size_t>(rows), n = static_cast<std::size_t>(cols);
  if (ws.size() < r * n) ws.resize(r * n);
  visit_dtype(x.dtype(), [&](auto t) {
    const auto* p = elements<decltype(t)>(x);
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < n; ++j)
        ws[i * n + j] = math::round_bf16(load(p, i * static_cast<std::size_t>(ld) + j));
  });
  return ws.data();
}

void CpuBackend::gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                      ConstTensorPtr a, int lda, ConstTensorPtr b, int ldb, float beta, TensorPtr c,
                      int ldc) {
  if (m <= 0 || n <= 0) return;
  const bool bf16_math =
      a.dtype() == Dtype::kBF16 || b.dtype() == Dtype::kBF16 || c.dtype() == Dtype::kBF16;
  if (!bf16_math) {
    sgemm(trans_a, trans_b, m, n, k, alpha, a.f32(), lda, b.f32(), ldb, beta, c.f32(), ldc);
    return;
  }
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const float* a32 = widened(a, a_rows, a_cols, lda, ws_a_);
  const float* b32 = widened(b, b_rows, b_cols, ldb, ws_b_);
  if (c.dtype() == Dtype::kF32) {
    sgemm(trans_a, trans_b, m, n, k, alpha, a32, a_cols, b32, b_cols, beta, c.f32(), ldc);
    return;
  }
  // bf16 C: computed in fp32, rounded once.
  const auto rows = static_cast<std::size_t>(m), cols = static_cast<std::size_t>(n);
  const auto ld = static_cast<std::size_t>(ldc);
  bf16* c16 = c.bf();
  if (ws_c_.size() < rows * cols) ws_c_.resize(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j)
      ws_c_[i * cols + j] = beta != 0.0f ? load(c16, i * ld + j) : 0.0f;
  sgemm(trans_a, trans_b, m, n, k, alpha, a32, a_cols, b32, b_cols, beta, ws_c_.data(), n);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) store(c16, i * ld + j, ws_c_[i * cols + j]);
}

void CpuBackend::gemm_batched(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                              ConstTensorPtr a, int lda, ConstTensorPtr b, int ldb, float beta,
                              TensorPtr c, int ldc, const GemmBatch& g) {
  require_batch_dtypes("CpuBackend::gemm_batched", a, b, c);
  for (int i = 0; i < g.outer; ++i)
    for (int j = 0; j < g.inner; ++j) {
      const auto at = [&](std::int64_t outer, std::int64_t inner) {
        return static_cast<std::size_t>(i * outer + j * inner);
      };
      gemm(trans_a, trans_b, m, n, k, alpha, a + at(g.outer_a, g.inner_a), lda,
           b + at(g.outer_b, g.inner_b), ldb, beta, c + at(g.outer_c, g.inner_c), ldc);
    }
}

void CpuBackend::fill(TensorPtr x, float value, std::size_t count) {
  visit_dtype(x.dtype(), [&](auto t) {
    auto* p = elements<decltype(t)>(x);
    for (std::size_t i = 0; i < count; ++i) store(p, i, value);
  });
}

void CpuBackend::copy(ConstTensorPtr src, TensorPtr dst, std::size_t count) {
  if (count == 0 || src.get() == dst.get()) return;
  if (src.dtype() == dst.dtype()) {
    std::memmove(dst.get(), src.get(), src.bytes(count));
    return;
  }
  visit_dtype(src.dtype(), [&](auto s) {
    visit_dtype(dst.dtype(), [&](auto d) {
      const auto* from = elements<decltype(s)>(src);
      auto* to = elements<decltype(d)>(dst);
      for (std::size_t i = 0; i < count; ++i) store(to, i, load(from, i));
    });
  });
}

void CpuBackend::axpy(float alpha, const float* x, float* y, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) y[i] = math::add(y[i], math::mul(alpha, x[i]));
}

void CpuBackend::gelu(ConstTensorPtr z, TensorPtr a, std::size_t count) {
  require_same_dtype("CpuBackend::gelu", z, a);
  visit_dtype(z.dtype(), [&](auto t) {
    using T = decltype(t);
    for (std::size_t i = 0; i < count; ++i)
      store(elements<T>(a), i, math::gelu(load(elements<T>(z), i)));
  });
}

void CpuBackend::gelu_backward(ConstTensorPtr z, ConstTensorPtr da, TensorPtr dz,
                               std::size_t count) {
  require_same_dtype("CpuBackend::gelu_backward", z, da, dz);
  visit_dtype(z.dtype(), [&](auto t) {
    using T = decltype(t);
    for (std::size_t i = 0; i < count; ++i)
      store(elements<T>(dz), i,
            math::gelu_backward(load(elements<T>(z), i), load(elements<T>(da), i)));
  });
}

void CpuBackend::mse_loss(ConstTensorPtr y, ConstTensorPtr target, TensorPtr dy, std::size_t count,
                          float scale, float* loss_sum) {
  require_same_dtype("CpuBackend::mse_loss", y, target, dy);
  double sum = 0.0;
  const float two_scale = 2.0f * scale;
  visit_dtype(y.dtype(), [&](auto t) {
    using T = decltype(t);
    for (std::size_t i = 0; i < count; ++i) {
      const float yi = load(elements<T>(y), i), ti = load(elements<T>(target), i);
      const float d = math::sub(yi, ti);
      sum += static_cast<double>(d) * d;
      store(elements<T>(dy), i, math::mse_grad(yi, ti, two_scale));
    }
  });
  *loss_sum += static_cast<float>(static_cast<double>(scale) * sum);
}

void CpuBackend::sgd_update(float* p, const float* g, std::size_t count, float lr) {
  for (std::size_t i = 0; i < count; ++i) p[i] = math::sgd(p[i], g[i], lr);
}

void CpuBackend::adam_update(float* p, const float* g, float* m, float* v, std::size_t count,
                             const AdamParams& params, std::int64_t step) {
  const double t = static_cast<double>(step);
  const math::AdamStep s{params.lr,
                         params.beta1,
                         params.beta2,
                         params.eps,
                         static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta1), t)),
                         static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta2), t))};
  for (std::size_t i = 0; i < count; ++i) math::adam(s, g[i], p[i], m[i], v[i]);
}

void CpuBackend::seeded_uniform(TensorPtr x, std::size_t count, std::uint64_t seed,
                                std::uint64_t stream, float scale) {
  const std::uint64_t key = seeded_key(seed, stream);
  visit_dtype(x.dtype(), [&](auto t) {
    auto* p = elements<decltype(t)>(x);
    for (std::size_t i = 0; i < count; ++i)
      store(p, i, math::mul(scale, seeded_uniform_value(key, i)));
  });
}

void CpuBackend::seeded_tokens(std::int32_t* ids, std::size_t count, std::uint64_t seed,
                               std::uint64_t stream, std::int32_t vocab) {
  const std::uint64_t key = seeded_key(seed, stream);
  for (std::size_t i = 0; i < count; ++i) ids[i] = seeded_token_value(key, i, vocab);
}

void CpuBackend::softmax(ConstTensorPtr x, TensorPtr y, int rows, int cols, bool causal) {
  require_same_dtype("CpuBackend::softmax", x, y);
  const auto n = static_cast<std::size_t>(cols);
  visit_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    for (int r = 0; r < rows; ++r) {
      const std::size_t o = static_cast<std::size_t>(r) * n;
      const std::size_t valid = causal ? static_cast<std::size_t>(r % cols) + 1 : n;
      float mx = load(elements<T>(x), o);
      for (std::size_t j = 1; j < valid; ++j) mx = std::max(mx, load(elements<T>(x), o + j));
      float sum = 0.0f;
      for (std::size_t j = 0; j < valid; ++j)
        sum += math::softmax_exp(load(elements<T>(x), o + j), mx);
      const float inv = 1.0f / sum;
      for (std::size_t j = 0; j < valid; ++j)
        store(elements<T>(y), o + j,
              math::mul(math::softmax_exp(load(elements<T>(x), o + j), mx), inv));
      for (std::size_t j = valid; j < n; ++j) store(elements<T>(y), o + j, 0.0f);
    }
  });
}

void CpuBackend::softmax_backward(ConstTensorPtr y, ConstTensorPtr dy, TensorPtr dx, int rows,
                                  int cols) {
  require_same_dtype("CpuBackend::softmax_backward", y, dy, dx);
  const auto n = static_cast<std::size_t>(cols);
  visit_dtype(y.dtype(), [&](auto t) {
    using T = decltype(t);
    for (int r = 0; r < rows; ++r) {
      const std::size_t o = static_cast<std::size_t>(r) * n;
      float dot = 0.0f;
      for (std::size_t j = 0; j < n; ++j)
        dot += math::mul(load(elements<T>(y), o + j), load(elements<T>(dy), o + j));
      for (std::size_t j = 0; j < n; ++j)
        store(
            elements<T>(dx), o + j,
            math::softmax_backward(load(elements<T>(y), o + j), load(elements<T>(dy), o + j), dot));
    }
  });
}

void CpuBackend::layernorm(ConstTensorPtr x, const float* gamma, const float* beta, TensorPtr y,
                           float* mean, float* rstd, int rows, int cols, float eps) {
  require_same_dtype("CpuBackend::layernorm", x, y);
  const auto n = static_cast<std::size_t>(cols);
  visit_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    for (int r = 0; r < rows; ++r) {
      const std::size_t o = static_cast<std::size_t>(r) * n;
      float sum = 0.0f;
      for (std::size_t j = 0; j < n; ++j) sum += load(elements<T>(x), o + j);
      const float mu = sum / static_cast<float>(cols);
      float var = 0.0f;
      for (std::size_t j = 0; j < n; ++j) {
        const float d = math::sub(load(elements<T>(x), o + j), mu);
        var = math::add(var, math::mul(d, d));
      }
      const float rs = math::layernorm_rstd(var, cols, eps);
      for (std::size_t j = 0; j < n; ++j)
        store(elements<T>(y), o + j,
              math::layernorm_out(load(elements<T>(x), o + j), mu, rs, gamma[j], beta[j]));
      mean[r] = mu;
      rstd[r] = rs;
    }
  });
}

void CpuBackend::layernorm_backward_input(ConstTensorPtr x, const float* gamma, const float* mean,
                                          const float* rstd, ConstTensorPtr dy, TensorPtr dx,
                                          int rows, int cols) {
  require_same_dtype("CpuBackend::layernorm_backward_input", x, dy, dx);
  const auto n = static_cast<std::size_t>(cols);
  visit_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    for (int r = 0; r < rows; ++r) {
      const std::size_t o = static_cast<std::size_t>(r) * n;
      const float mu = mean[r], rs = rstd[r];
      float sum_g = 0.0f, sum_gx = 0.0f;
      for (std::size_t j = 0; j < n; ++j) {
        const float g = math::layernorm_g(load(elements<T>(dy), o + j), gamma[j]);
        sum_g += g;
        sum_gx += math::layernorm_gx(g, load(elements<T>(x), o + j), mu, rs);
      }
      const float mean_g = sum_g / static_cast<float>(cols);
      const float mean_gx = sum_gx / static_cast<float>(cols);
      for (std::size_t j = 0; j < n; ++j)
        store(elements<T>(dx), o + j,
              math::add(load(elements<T>(dx), o + j),
                        math::layernorm_input_grad(load(elements<T>(x), o + j), mu, rs,
                                                   load(elements<T>(dy), o + j), gamma[j], mean_g,
                                                   mean_gx)));
    }
  });
}

void CpuBackend::layernorm_backward_params(ConstTensorPtr x, const float* mean, const float* rstd,
                                           ConstTensorPtr dy, float* dgamma, float* dbeta, int rows,
                                           int cols) {
  require_same_dtype("CpuBackend::layernorm_backward_params", x, dy);
  const auto n = static_cast<std::size_t>(cols);
  visit_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    for (int r = 0; r < rows; ++r) {
      const std::size_t o = static_cast<std::size_t>(r) * n;
      for (std::size_t j = 0; j < n; ++j) {
        const float d = load(elements<T>(dy), o + j);
        dgamma[j] += math::layernorm_dgamma(d, load(elements<T>(x), o + j), mean[r], rstd[r]);
        dbeta[j] += d;
      }
    }
  });
}

void CpuBackend::add_bias(TensorPtr y, const float* bias, int rows, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  visit_dtype(y.dtype(), [&](auto t) {
    auto* p = elements<decltype(t)>(y);
    for (int r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t i = static_cast<std::size_t>(r) * n + j;
        store(p, i, math::add(load(p, i), bias[j]));
      }
  });
}

void CpuBackend::column_sums(ConstTensorPtr x, float* out, int rows, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  visit_dtype(x.dtype(), [&](auto t) {
    const auto* p = elements<decltype(t)>(x);
    for (int r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < n; ++j) out[j] += load(p, static_cast<std::size_t>(r) * n + j);
  });
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

void CpuBackend::embedding(const std::int32_t* ids, const float* table, const float* positions,
                           TensorPtr out, int tokens, int seq, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  visit_dtype(out.dtype(), [&](auto t) {
    auto* o = elements<decltype(t)>(out);
    for (int k = 0; k < tokens; ++k) {
      const float* e = table + static_cast<std::size_t>(ids[k]) * n;
      const float* p = positions + static_cast<std::size_t>(k % seq) * n;
      for (std::size_t j = 0; j < n; ++j)
        store(o, static_cast<std::size_t>(k) * n + j, math::add(e[j], p[j]));
    }
  });
}

void CpuBackend::embedding_backward(const std::int32_t* ids, ConstTensorPtr dout, float* dtable,
                                    float* dpositions, int tokens, int seq, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  visit_dtype(dout.dtype(), [&](auto t) {
    const auto* d = elements<decltype(t)>(dout);
    for (int k = 0; k < tokens; ++k) {
      float* e = dtable + static_cast<std::size_t>(ids[k]) * n;
      float* p = dpositions + static_cast<std::size_t>(k % seq) * n;
      for (std::size_t j = 0; j < n; ++j) {
        const float v = load(d, static_cast<std::size_t>(k) * n + j);
        e[j] += v;
        p[j] += v;
      }
    }
  });
}

void CpuBackend::cross_entropy(ConstTensorPtr logits, const std::int32_t* targets,
                               TensorPtr dlogits, int rows, int cols, float scale,
                               float* loss_sum) {
  require_same_dtype("CpuBackend::cross_entropy", logits, dlogits);
  const auto n = static_cast<std::size_t>(cols);
  double sum = 0.0;
  visit_dtype(logits.dtype(), [&](auto t) {
    using T = decltype(t);
    for (int r = 0; r < rows; ++r) {
      const std::size_t o = static_cast<std::size_t>(r) * n;
      const auto target = static_cast<std::size_t>(targets[r]);
      float mx = load(elements<T>(logits), o);
      for (std::size_t j = 1; j < n; ++j) mx = std::max(mx, load(elements<T>(logits), o + j));
      double z = 0.0;
      for (std::size_t j = 0; j < n; ++j)
        z += std::exp(static_cast<double>(load(elements<T>(logits), o + j) - mx));
      sum += math::cross_entropy_loss(z, mx, load(elements<T>(logits), o + target));
      const double inv = 1.0 / z;
      for (std::size_t j = 0; j < n; ++j)
        store(elements<T>(dlogits), o + j,
              math::cross_entropy_grad(load(elements<T>(logits), o + j), mx, inv, scale,
                                       j == target));
    }
  });
  *loss_sum += static_cast<float>(static_cast<double>(scale) * sum);
}

}  // namespace bb
