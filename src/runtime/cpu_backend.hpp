// Backend on host memory: OpenBLAS for GEMM, plain loops for the elementwise kernels,
// steady_clock for time. Every call is synchronous.
#pragma once

#include <functional>

#include "runtime/backend.hpp"

namespace bb {

struct CpuBackendOptions {
  // OpenBLAS threads. The setting is process-wide; 1 by default because several ranks
  // usually share a few cores. 0 leaves OpenBLAS's own setting alone.
  int blas_threads = 1;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options = {});

  std::string_view name() const override { return "cpu"; }

  void to_host(const float* device_src, float* host_dst, std::size_t count) override;
  void from_host(const float* host_src, float* device_dst, std::size_t count) override;
  bool device_is_host() const override { return true; }
  // Plain host buffers, pooled; a staged message is one memcpy each way.
  std::unique_ptr<HostStaging> make_host_staging() override;

  // GEMMs of more than kSliceFlops are computed in slices of whole column (or row) blocks of C,
  // with one call of the poll between slices. Each element of C is still one dot product over
  // the whole k, but OpenBLAS may pick another kernel for a slice's shape: results equal one
  // call's up to rounding (within --check's tolerance), not bit for bit.
  void set_progress_poll(std::function<void()> poll) override { poll_ = std::move(poll); }
  static constexpr double kSliceFlops = 4e6;

  void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override;
  void fill(float* x, float value, std::size_t count) override;
  void copy(const float* src, float* dst, std::size_t count) override;
  void axpy(float alpha, const float* x, float* y, std::size_t count) override;
  void gelu(const float* z, float* a, std::size_t count) override;
  void gelu_backward(const float* z, const float* da, float* dz, std::size_t count) override;
  void mse_loss(const float* y, const float* target, float* dy, std::size_t count, float scale,
                float* loss_sum) override;
  void sgd_update(float* p, const float* g, std::size_t count, float lr) override;
  void adam_update(float* p, const float* g, float* m, float* v, std::size_t count,
                   const AdamParams& params, std::int64_t step) override;
  void seeded_uniform(float* x, std::size_t count, std::uint64_t seed, std::uint64_t stream,
                      float scale) override;
  void gemm_strided_batched(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                            const float* a, int lda, std::int64_t stride_a, const float* b, int ldb,
                            std::int64_t stride_b, float beta, float* c, int ldc,
                            std::int64_t stride_c, int batch) override;
  void softmax(const float* x, float* y, int rows, int cols, bool causal) override;
  void softmax_backward(const float* y, const float* dy, float* dx, int rows, int cols) override;
  void embedding(const float* ids, const float* table, const float* positions, float* out,
                 int tokens, int seq, int cols) override;
  void embedding_backward(const float* ids, const float* dout, float* dtable, float* dpositions,
                          int tokens, int seq, int cols) override;
  void cross_entropy(const float* logits, const float* targets, float* dlogits, int rows, int cols,
                     float scale, float* loss_sum) override;
  void layernorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                 float* rstd, int rows, int cols, float eps) override;
  void layernorm_backward_input(const float* x, const float* gamma, const float* mean,
                                const float* rstd, const float* dy, float* dx, int rows,
                                int cols) override;
  void layernorm_backward_params(const float* x, const float* mean, const float* rstd,
                                 const float* dy, float* dgamma, float* dbeta, int rows,
                                 int cols) override;
  void add_bias(float* y, const float* bias, int rows, int cols) override;
  void column_sums(const float* x, float* out, int rows, int cols) override;

  void synchronize() override {}
  double now() override;
  void sleep_for(double seconds) override;
  void spin_for(double seconds) override;

 protected:
  float* raw_allocate(std::size_t bytes) override;
  void raw_free(float* p, std::size_t bytes) noexcept override;

 private:
  std::function<void()> poll_;
};

}  // namespace bb
