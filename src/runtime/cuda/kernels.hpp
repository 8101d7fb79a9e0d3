// Launchers of the CUDA backend's kernels (kernels.cu). Internal to src/runtime/cuda/: the
// signatures use cudaStream_t, so include this only where the CUDA headers are available.
// Each launcher enqueues on `stream` and returns the launch error (cudaGetLastError) without
// throwing; count == 0 enqueues nothing. TensorPtr arguments (activations) may be fp32 or
// bf16; the arithmetic is runtime/device_math.hpp's, the CPU backend's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "runtime/dtype.hpp"

namespace bb::cuda::kernels {

// Upper bound of blocks of the grid-stride kernels and of the MSE partial sums.
constexpr int kMaxBlocks = 1024;
constexpr int kThreads = 256;
// Column reductions (column_sums, layernorm_backward_params): rows are cut into at most this
// many chunks, each summed by its own blocks into partials (fp32, chunk × column), which a
// second kernel adds up in chunk order: deterministic, and parallel over rows too.
constexpr int kMaxRowChunks = 64;
// Floats of the partials a column reduction of `cols` columns needs (for two sums at once).
std::size_t column_partials_floats(int cols);

cudaError_t fill(cudaStream_t s, TensorPtr x, float value, std::size_t n);
// dst = src with conversion (different dtypes) or for overlapping ranges of one dtype.
cudaError_t convert(cudaStream_t s, ConstTensorPtr src, TensorPtr dst, std::size_t n);
// Elementwise copy that is correct for any overlap (dst < src copies forward, else back) —
// one thread block, used only for overlapping ranges, which the stage never produces.
cudaError_t overlapping_copy(cudaStream_t s, ConstTensorPtr src, TensorPtr dst, std::size_t n);
cudaError_t axpy(cudaStream_t s, float alpha, const float* x, float* y, std::size_t n);
cudaError_t gelu(cudaStream_t s, ConstTensorPtr z, TensorPtr a, std::size_t n);
cudaError_t gelu_backward(cudaStream_t s, ConstTensorPtr z, ConstTensorPtr da, TensorPtr dz,
                          std::size_t n);
// Two kernels: per-block partial sums of (y−t)² in double into `partials` (kMaxBlocks
// doubles), then one block adds scale·Σ to *loss_sum in a fixed order (deterministic).
cudaError_t mse_loss(cudaStream_t s, ConstTensorPtr y, ConstTensorPtr t, TensorPtr dy,
                     std::size_t n, float scale, float* loss_sum, double* partials);
cudaError_t sgd(cudaStream_t s, float* p, const float* g, std::size_t n, float lr);
// bc1, bc2: the bias corrections 1−β^t, computed on the host exactly as the CPU does.
cudaError_t adam(cudaStream_t s, float* p, const float* g, float* m, float* v, std::size_t n,
                 float lr, float beta1, float beta2, float eps, float bc1, float bc2);
cudaError_t seeded_uniform(cudaStream_t s, TensorPtr x, std::size_t n, std::uint64_t key,
                           float scale);
cudaError_t seeded_tokens(cudaStream_t s, std::int32_t* ids, std::size_t n, std::uint64_t key,
                          std::int32_t vocab);
// rows×cols fp32 (leading dimension ld) → dense bf16 rows×cols (leading dimension cols).
cudaError_t to_bf16(cudaStream_t s, const float* src, int rows, int cols, int ld, void* dst);
// Occupies the stream: one thread busy-waits `ticks` of clock64() (use_globaltimer false) or
// of %globaltimer nanoseconds (true). `relax` adds __nanosleep between polls (sleep_for).
cudaError_t spin(cudaStream_t s, long long ticks, bool use_globaltimer, bool relax);

// The pointer arrays of a two-level batched GEMM (GemmBatch): item i·inner + j of a, b and c
// gets base_x + (i·outer_x + j·inner_x)·element_x bytes. `out` holds 3·outer·inner pointers:
// all of a's, then b's, then c's.
struct BatchPointers {
  const void* a;
  const void* b;
  void* c;
  std::size_t element_a, element_b, element_c;  // bytes of one element
  int outer, inner;
  long long outer_a, outer_b, outer_c, inner_a, inner_b, inner_c;
};
cudaError_t batch_pointers(cudaStream_t s, const BatchPointers& p, void** out);

// The transformer block's kernels (Backend's contracts). Row kernels run one block per row.
cudaError_t softmax(cudaStream_t s, ConstTensorPtr x, TensorPtr y, int rows, int cols, bool causal);
cudaError_t softmax_backward(cudaStream_t s, ConstTensorPtr y, ConstTensorPtr dy, TensorPtr dx,
                             int rows, int cols);
cudaError_t layernorm(cudaStream_t s, ConstTensorPtr x, const float* gamma, const float* beta,
                      TensorPtr y, float* mean, float* rstd, int rows, int cols, float eps);
cudaError_t layernorm_backward_input(cudaStream_t s, ConstTensorPtr x, const float* gamma,
                                     const float* mean, const float* rstd, ConstTensorPtr dy,
                                     TensorPtr dx, int rows, int cols);
// Column reductions into `partials` (column_partials_floats(cols) floats), then out += sums.
cudaError_t layernorm_backward_params(cudaStream_t s, ConstTensorPtr x, const float* mean,
                                      const float* rstd, ConstTensorPtr dy, float* dgamma,
                                      float* dbeta, int rows, int cols, float* partials);
cudaError_t add_bias(cudaStream_t s, TensorPtr y, const float* bias, int rows, int cols);
cudaError_t column_sums(cudaStream_t s, ConstTensorPtr x, float* out, int rows, int cols,
                        float* partials);

// The model's ends. embedding_backward's token table gradient needs the ids sorted (stably)
// with their token index: `sorted_ids`/`sorted_tokens` (tokens ints each) and CUB's scratch
// (`sort_scratch`, embedding_sort_scratch_bytes(tokens) bytes) from the caller.
cudaError_t embedding(cudaStream_t s, const std::int32_t* ids, const float* table,
                      const float* positions, TensorPtr out, int tokens, int seq, int cols);
std::size_t embedding_sort_scratch_bytes(int tokens);
struct EmbeddingSort {
  std::int32_t* tokens_in;      // 0..tokens−1 (filled by the launcher)
  std::int32_t* sorted_ids;     // tokens
  std::int32_t* sorted_tokens;  // tokens
  void* scratch;
  std::size_t scratch_bytes;
};
cudaError_t embedding_backward(cudaStream_t s, const std::int32_t* ids, ConstTensorPtr dout,
                               float* dtable, float* dpositions, int tokens, int seq, int cols,
                               int vocab, const EmbeddingSort& sort);
// Per-row losses in double into `row_loss` (rows doubles), then one block adds scale·Σ to
// *loss_sum in row order.
cudaError_t cross_entropy(cudaStream_t s, ConstTensorPtr logits, const std::int32_t* targets,
                          TensorPtr dlogits, int rows, int cols, float scale, float* loss_sum,
                          double* row_loss);

}  // namespace bb::cuda::kernels
