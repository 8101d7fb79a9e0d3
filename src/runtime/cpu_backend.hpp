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

  // The kernels of Backend both backends define (backend.hpp says what each computes).
#include "runtime/backend_kernels.inc"
  // The model's ends (CPU only for now).
  void embedding(const float* ids, const float* table, const float* positions, float* out,
                 int tokens, int seq, int cols) override;
  void embedding_backward(const float* ids, const float* dout, float* dtable, float* dpositions,
                          int tokens, int seq, int cols) override;
  void cross_entropy(const float* logits, const float* targets, float* dlogits, int rows, int cols,
                     float scale, float* loss_sum) override;

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
