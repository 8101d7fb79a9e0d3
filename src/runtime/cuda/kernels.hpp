// Launchers of the CUDA backend's kernels (kernels.cu). Internal to src/runtime/cuda/: the
// signatures use cudaStream_t, so include this only where the CUDA headers are available.
// Each launcher enqueues on `stream` and returns the launch error (cudaGetLastError) without
// throwing; count == 0 enqueues nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace bb::cuda::kernels {

// Upper bound of blocks of the grid-stride kernels and of the MSE partial sums.
constexpr int kMaxBlocks = 1024;
constexpr int kThreads = 256;

cudaError_t fill(cudaStream_t s, float* x, float value, std::size_t n);
cudaError_t axpy(cudaStream_t s, float alpha, const float* x, float* y, std::size_t n);
cudaError_t gelu(cudaStream_t s, const float* z, float* a, std::size_t n);
cudaError_t gelu_backward(cudaStream_t s, const float* z, const float* da, float* dz,
                          std::size_t n);
// Two kernels: per-block partial sums of (y−t)² in double into `partials` (kMaxBlocks
// doubles), then one block adds scale·Σ to *loss_sum in a fixed order (deterministic).
cudaError_t mse_loss(cudaStream_t s, const float* y, const float* t, float* dy, std::size_t n,
                     float scale, float* loss_sum, double* partials);
cudaError_t sgd(cudaStream_t s, float* p, const float* g, std::size_t n, float lr);
// bc1, bc2: the bias corrections 1−β^t, computed on the host exactly as the CPU does.
cudaError_t adam(cudaStream_t s, float* p, const float* g, float* m, float* v, std::size_t n,
                 float lr, float beta1, float beta2, float eps, float bc1, float bc2);
cudaError_t seeded_uniform(cudaStream_t s, float* x, std::size_t n, std::uint64_t key, float scale);
// rows×cols fp32 (leading dimension ld) → dense bf16 rows×cols (leading dimension cols).
cudaError_t to_bf16(cudaStream_t s, const float* src, int rows, int cols, int ld, void* dst);
// Occupies the stream: one thread busy-waits `ticks` of clock64() (use_globaltimer false) or
// of %globaltimer nanoseconds (true). `relax` adds __nanosleep between polls (sleep_for).
cudaError_t spin(cudaStream_t s, long long ticks, bool use_globaltimer, bool relax);
// The transformer block's kernels (Backend's contracts). Row kernels run one block per row.
cudaError_t softmax(cudaStream_t s, const float* x, float* y, int rows, int cols, bool causal);
cudaError_t softmax_backward(cudaStream_t s, const float* y, const float* dy, float* dx, int rows,
                             int cols);
cudaError_t layernorm(cudaStream_t s, const float* x, const float* gamma, const float* beta,
                      float* y, float* mean, float* rstd, int rows, int cols, float eps);
cudaError_t layernorm_backward_input(cudaStream_t s, const float* x, const float* gamma,
                                     const float* mean, const float* rstd, const float* dy,
                                     float* dx, int rows, int cols);
// Column kernels: one thread per column, rows in order (deterministic).
cudaError_t layernorm_backward_params(cudaStream_t s, const float* x, const float* mean,
                                      const float* rstd, const float* dy, float* dgamma,
                                      float* dbeta, int rows, int cols);
cudaError_t add_bias(cudaStream_t s, float* y, const float* bias, int rows, int cols);
cudaError_t column_sums(cudaStream_t s, const float* x, float* out, int rows, int cols);
// Elementwise copy that is correct for any overlap (dst < src copies forward, else back) —
// one thread block, used only for overlapping ranges, which the stage never produces.
cudaError_t overlapping_copy(cudaStream_t s, const float* src, float* dst, std::size_t n);

}  // namespace bb::cuda::kernels
