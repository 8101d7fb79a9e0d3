// Backend on host memory: OpenBLAS for GEMM, plain loops for the elementwise kernels,
// steady_clock for time. Every call is synchronous.
#pragma once

#include <functional>
#include <vector>

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
  BackendKind kind() const override { return BackendKind::kCpu; }

  bool device_is_host() const override { return true; }
  // Plain host buffers, pooled; a staged message is one memcpy each way.
  std::unique_ptr<HostStaging> make_host_staging() override;

  // GEMMs of more than kSliceFlops are computed in slices of whole column (or row) blocks of C,
  // with one call of the poll between slices. Each element of C is still one dot product over
  // the whole k, but OpenBLAS may pick another kernel for a slice's shape: results equal one
  // call's up to rounding (within --check's tolerance), not bit for bit.
  void set_progress_poll(std::function<void()> poll) override { poll_ = std::move(poll); }
  static constexpr double kSliceFlops = 4e6;

  // The kernels of Backend both backends define (backend.hpp says what each computes). A bf16
  // GEMM converts its operands (rounded to bf16) to fp32 and calls OpenBLAS's sgemm: the
  // products of bf16 values are exact in fp32, so this is the GPU's bf16 arithmetic up to the
  // order of the fp32 sums.
#include "runtime/backend_kernels.inc"

  void synchronize() override {}
  double now() override;
  void sleep_for(double seconds) override;
  void spin_for(double seconds) override;

 protected:
  void* raw_allocate(std::size_t bytes) override;
  void raw_free(void* p, std::size_t bytes) noexcept override;

 private:
  // C = alpha·op(A)·op(B) + beta·C in fp32, sliced with polls between slices (kSliceFlops).
  void sgemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
             int lda, const float* b, int ldb, float beta, float* c, int ldc);
  // A bf16 operand (or an fp32 one of a bf16 GEMM) as the fp32 values of its bf16 rounding,
  // dense (leading dimension cols), in the workspace `ws`.
  const float* widened(ConstTensorPtr x, int rows, int cols, int ld, std::vector<float>& ws);

  std::function<void()> poll_;
  std::vector<float> ws_a_, ws_b_, ws_c_;  // bf16 GEMMs' fp32 operands, grown as needed
};

}  // namespace bb
