// The CUDA backend's kernels: indexing, reductions and launch around the arithmetic of
// runtime/device_math.hpp, which the CPU backend calls too (so the CPU tests exercise it).
// Element-wise kernels give bit-identical results to the CPU (the shared functions round
// explicitly, and nvcc never contracts __fmul_rn & co. into FMAs); functions calling
// expf/erff/exp may differ in the last bits; reductions sum in a tree instead of serially.
// Every kernel is templated on the activation type T (float or bf16) where it reads or
// writes activations; parameters, their gradients and statistics are fp32.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "runtime/cuda/kernels.hpp"
#include "runtime/device_math.hpp"

namespace bb::cuda::kernels {
namespace {

using math::load;
using math::store;

int grid_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::min<std::size_t>(blocks, kMaxBlocks));
}

__device__ inline std::size_t first_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t grid_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

// visit_dtype (dtype.hpp), then the launch's error.
template <class F>
cudaError_t with_type(Dtype dtype, F&& f) {
  visit_dtype(dtype, f);
  return cudaGetLastError();
}

// --- Element-wise ----------------------------------------------------------------------------

template <class T>
__global__ void fill_kernel(T* x, float value, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) store(x, i, value);
}

template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) store(dst, i, load(src, i));
}

__global__ void axpy_kernel(float alpha, const float* x, float* y, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    y[i] = math::add(y[i], math::mul(alpha, x[i]));
}

template <class T>
__global__ void gelu_kernel(const T* z, T* a, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    store(a, i, math::gelu(load(z, i)));
}

template <class T>
__global__ void gelu_backward_kernel(const T* z, const T* da, T* dz, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    store(dz, i, math::gelu_backward(load(z, i), load(da, i)));
}

// Block-wide sum in double; the result is in thread 0 only.
__device__ double block_sum(double x) {
  __shared__ double shared[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = 0.0;
  if (warp == 0) {
    if (lane < static_cast<int>(blockDim.x) / 32) x = shared[lane];
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  }
  return x;
}

template <class T>
__global__ void mse_partial_kernel(const T* y, const T* t, T* dy, std::size_t n, float two_scale,
                                   double* partials) {
  double sum = 0.0;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const float yi = load(y, i), ti = load(t, i);
    const float d = math::sub(yi, ti);
    sum += static_cast<double>(d) * static_cast<double>(d);
    store(dy, i, math::mse_grad(yi, ti, two_scale));
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// *loss_sum += scale·Σ partials[0, count), summed in a fixed order by one block.
__global__ void add_partials_kernel(const double* partials, int count, float scale,
                                    float* loss_sum) {
  double sum = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x))
    sum += partials[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0)
    *loss_sum = math::add(*loss_sum, static_cast<float>(static_cast<double>(scale) * sum));
}

__global__ void sgd_kernel(float* p, const float* g, std::size_t n, float lr) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) p[i] = math::sgd(p[i], g[i], lr);
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, std::size_t n,
                            math::AdamStep step) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    float pi = p[i], mi = m[i], vi = v[i];
    math::adam(step, g[i], pi, mi, vi);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

template <class T>
__global__ void seeded_uniform_kernel(T* x, std::size_t n, std::uint64_t key, float scale) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    store(x, i, math::mul(scale, bb::seeded_uniform_value(key, i)));
}

__global__ void seeded_tokens_kernel(std::int32_t* ids, std::size_t n, std::uint64_t key,
                                     std::int32_t vocab) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    ids[i] = bb::seeded_token_value(key, i, vocab);
}

__global__ void to_bf16_kernel(const float* src, int rows, int cols, int ld, bf16* dst) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const std::size_t r = i / static_cast<std::size_t>(cols),
                      c = i % static_cast<std::size_t>(cols);
    store(dst, i, src[r * static_cast<std::size_t>(ld) + c]);
  }
}

// Dense operands (ld == cols, 16-byte aligned, a multiple of 4 elements): four floats in one
// load, four bf16 in one store.
__global__ void to_bf16_dense4_kernel(const float4* src, std::size_t n4, uint2* dst) {
  for (std::size_t i = first_index(); i < n4; i += grid_stride()) {
    const float4 v = src[i];
    uint2 out;
    out.x = math::bf16_bits(v.x) | (static_cast<unsigned>(math::bf16_bits(v.y)) << 16);
    out.y = math::bf16_bits(v.z) | (static_cast<unsigned>(math::bf16_bits(v.w)) << 16);
    dst[i] = out;
  }
}

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(long long ticks, bool use_globaltimer, bool relax) {
  if (use_globaltimer) {
    const unsigned long long start = global_ns();
    while (global_ns() - start < static_cast<unsigned long long>(ticks))
      if (relax) __nanosleep(200);
  } else {
    const long long start = clock64();
    while (clock64() - start < ticks)
      if (relax) __nanosleep(200);
  }
}

template <class T>
__global__ void overlapping_copy_kernel(const T* src, T* dst, std::size_t n) {
  const bool forward = dst < src;
  for (std::size_t base = 0; base < n; base += blockDim.x) {
    const std::size_t j = base + threadIdx.x;
    const std::size_t i = forward ? j : n - 1 - j;
    T v{};
    if (j < n) v = src[i];
    __syncthreads();
    if (j < n) dst[i] = v;
    __syncthreads();
  }
}

__global__ void batch_pointers_kernel(BatchPointers p, void** out) {
  const int count = p.outer * p.inner;
  for (int k = static_cast<int>(first_index()); k < count; k += static_cast<int>(grid_stride())) {
    const long long i = k / p.inner, j = k % p.inner;
    const auto at = [&](const void* base, long long outer, long long inner, std::size_t size) {
      return const_cast<char*>(static_cast<const char*>(base)) +
             static_cast<std::size_t>(i * outer + j * inner) * size;
    };
    out[k] = at(p.a, p.outer_a, p.inner_a, p.element_a);
    out[count + k] = at(p.b, p.outer_b, p.inner_b, p.element_b);
    out[2 * count + k] = at(p.c, p.outer_c, p.inner_c, p.element_c);
  }
}

// --- Row kernels: one block per row ------------------------------------------------------------

// Block-wide reduction of x with `op` (sum or max), broadcast to every thread: warp shuffles,
// then the warps' results in warp order. Uses `shared` (kThreads / 32 of T).
template <class T, class Op>
__device__ T block_all(T x, T* shared, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) x = op(x, __shfl_xor_sync(0xffffffffu, x, offset));
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  T total = shared[0];
  for (int w = 1; w < static_cast<int>(blockDim.x) / 32; ++w) total = op(total, shared[w]);
  return total;
}
struct Plus {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ float block_all_sum(float x, float* shared) {
  return block_all(x, shared, Plus{});
}
__device__ double block_all_sum_double(double x, double* shared) {
  return block_all(x, shared, Plus{});
}
__device__ float block_all_max(float x, float* shared) {
  return block_all(x, shared, Max{});
}

template <class T>
__global__ void softmax_kernel(const T* x, T* y, int cols, bool causal) {
  __shared__ float shared[kThreads / 32];
  const std::size_t o = static_cast<std::size_t>(blockIdx.x) * cols;
  const int valid = causal ? static_cast<int>(blockIdx.x % static_cast<unsigned>(cols)) + 1 : cols;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < valid; j += blockDim.x) mx = fmaxf(mx, load(x, o + j));
  mx = block_all_max(mx, shared);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < valid; j += blockDim.x)
    sum += math::softmax_exp(load(x, o + j), mx);
  sum = block_all_sum(sum, shared);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    store(y, o + j, j < valid ? math::mul(math::softmax_exp(load(x, o + j), mx), inv) : 0.0f);
}

template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, int cols) {
  __shared__ float shared[kThreads / 32];
  const std::size_t o = static_cast<std::size_t>(blockIdx.x) * cols;
  float dot = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    dot += math::mul(load(y, o + j), load(dy, o + j));
  dot = block_all_sum(dot, shared);
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    store(dx, o + j, math::softmax_backward(load(y, o + j), load(dy, o + j), dot));
}

template <class T>
__global__ void layernorm_kernel(const T* x, const float* gamma, const float* beta, T* y,
                                 float* mean, float* rstd, int cols, float eps) {
  __shared__ float shared[kThreads / 32];
  const std::size_t o = static_cast<std::size_t>(blockIdx.x) * cols;
  float sum = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += load(x, o + j);
  const float mu = block_all_sum(sum, shared) / static_cast<float>(cols);
  float var = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    const float d = math::sub(load(x, o + j), mu);
    var = math::add(var, math::mul(d, d));  // rounded as the CPU does (no FMA)
  }
  const float rs = math::layernorm_rstd(block_all_sum(var, shared), cols, eps);
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    store(y, o + j, math::layernorm_out(load(x, o + j), mu, rs, gamma[j], beta[j]));
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = rs;
  }
}

template <class T>
__global__ void layernorm_backward_input_kernel(const T* x, const float* gamma, const float* mean,
                                                const float* rstd, const T* dy, T* dx, int cols) {
  __shared__ float shared[kThreads / 32];
  const std::size_t o = static_cast<std::size_t>(blockIdx.x) * cols;
  const float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    const float g = math::layernorm_g(load(dy, o + j), gamma[j]);
    sum_g += g;
    sum_gx += math::layernorm_gx(g, load(x, o + j), mu, rs);
  }
  const float mean_g = block_all_sum(sum_g, shared) / static_cast<float>(cols);
  const float mean_gx = block_all_sum(sum_gx, shared) / static_cast<float>(cols);
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    store(dx, o + j,
          math::add(load(dx, o + j),
                    math::layernorm_input_grad(load(x, o + j), mu, rs, load(dy, o + j), gamma[j],
                                               mean_g, mean_gx)));
}

template <class T>
__global__ void add_bias_kernel(T* y, const float* bias, std::size_t n, int cols) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    store(y, i, math::add(load(y, i), bias[i % static_cast<std::size_t>(cols)]));
}

// --- Column reductions -------------------------------------------------------------------------
// Blocks of 32 columns × 8 row lanes: a warp reads 32 adjacent columns of one row (coalesced),
// each lane sums its rows of the block's chunk, the 8 lanes are added in lane order, and the
// chunk's sums go to partials[chunk][column]. The finish kernel adds the chunks in order.

constexpr int kColTile = 32, kRowLanes = 8;

struct RowChunks {
  int count, rows_per_chunk;
};

RowChunks row_chunks(int rows) {
  constexpr int kMinRows = 128;  // rows per chunk at least (16 per lane)
  const int count = std::max(1, std::min(kMaxRowChunks, (rows + kMinRows - 1) / kMinRows));
  return {count, (rows + count - 1) / count};
}

// One or two column sums at once: sum 0 of term0(r, c), sum 1 of term1(r, c) when `two`.
template <class Terms>
__global__ void column_partials_kernel(Terms terms, int rows, int cols, int rows_per_chunk,
                                       bool two, float* partials) {
  __shared__ float s0[kRowLanes][kColTile], s1[kRowLanes][kColTile];
  const int c = static_cast<int>(blockIdx.x) * kColTile + static_cast<int>(threadIdx.x);
  const int lane = static_cast<int>(threadIdx.y), chunk = static_cast<int>(blockIdx.y);
  const int r0 = chunk * rows_per_chunk, r1 = min(rows, r0 + rows_per_chunk);
  float a = 0.0f, b = 0.0f;
  if (c < cols)
    for (int r = r0 + lane; r < r1; r += kRowLanes) {
      a += terms.first(r, c);
      if (two) b += terms.second(r, c);
    }
  s0[lane][threadIdx.x] = a;
  s1[lane][threadIdx.x] = b;
  __syncthreads();
  if (lane != 0 || c >= cols) return;
  for (int k = 1; k < kRowLanes; ++k) {
    a += s0[k][threadIdx.x];
    b += s1[k][threadIdx.x];
  }
  const std::size_t at = static_cast<std::size_t>(chunk) * cols + c;
  partials[at] = a;
  if (two) partials[static_cast<std::size_t>(gridDim.y) * cols + at] = b;
}

__global__ void column_finish_kernel(const float* partials, int chunks, int cols, float* out0,
                                     float* out1) {
  const int c = static_cast<int>(first_index());
  if (c >= cols) return;
  float a = 0.0f, b = 0.0f;
  for (int k = 0; k < chunks; ++k) {
    a += partials[static_cast<std::size_t>(k) * cols + c];
    if (out1 != nullptr) b += partials[static_cast<std::size_t>(chunks + k) * cols + c];
  }
  out0[c] += a;
  if (out1 != nullptr) out1[c] += b;
}

template <class T>
struct ColumnTerms {
  const T* x;
  int cols;
  __device__ float first(int r, int c) const {
    return load(x, static_cast<std::size_t>(r) * cols + c);
  }
  __device__ float second(int, int) const { return 0.0f; }
};

template <class T>
struct LayerNormParamTerms {
  const T* x;
  const T* dy;
  const float* mean;
  const float* rstd;
  int cols;
  __device__ float first(int r, int c) const {  // dgamma: dy·x̂
    const std::size_t i = static_cast<std::size_t>(r) * cols + c;
    return math::layernorm_dgamma(load(dy, i), load(x, i), mean[r], rstd[r]);
  }
  __device__ float second(int r, int c) const {  // dbeta: dy
    return load(dy, static_cast<std::size_t>(r) * cols + c);
  }
};

template <class Terms>
cudaError_t column_reduce(cudaStream_t s, Terms terms, int rows, int cols, float* partials,
                          float* out0, float* out1) {
  const RowChunks rc = row_chunks(rows);
  const dim3 block(kColTile, kRowLanes), grid((cols + kColTile - 1) / kColTile, rc.count);
  column_partials_kernel<<<grid, block, 0, s>>>(terms, rows, cols, rc.rows_per_chunk,
                                                out1 != nullptr, partials);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  column_finish_kernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, s>>>(partials, rc.count,
                                                                             cols, out0, out1);
  return cudaGetLastError();
}

// --- Model ends ----------------------------------------------------------------------------------

template <class T>
__global__ void embedding_kernel(const std::int32_t* ids, const float* table,
                                 const float* positions, T* out, int tokens, int seq, int cols) {
  const std::size_t n = static_cast<std::size_t>(tokens) * cols;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const std::size_t t = i / static_cast<std::size_t>(cols),
                      c = i % static_cast<std::size_t>(cols);
    const float e = table[static_cast<std::size_t>(ids[t]) * cols + c];
    const float p = positions[(t % static_cast<std::size_t>(seq)) * cols + c];
    store(out, i, math::add(e, p));
  }
}

// dpositions[p][c] += Σ over sequences in order of dout[seq·s + p][c].
template <class T>
__global__ void position_grad_kernel(const T* dout, float* dpositions, int tokens, int seq,
                                     int cols) {
  const std::size_t n = static_cast<std::size_t>(seq) * cols;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const std::size_t p = i / static_cast<std::size_t>(cols),
                      c = i % static_cast<std::size_t>(cols);
    float sum = 0.0f;
    for (std::size_t t = p; t < static_cast<std::size_t>(tokens);
         t += static_cast<std::size_t>(seq))
      sum += load(dout, t * cols + c);
    dpositions[i] += sum;
  }
}

__global__ void iota_kernel(std::int32_t* x, int n) {
  for (std::size_t i = first_index(); i < static_cast<std::size_t>(n); i += grid_stride())
    x[i] = static_cast<std::int32_t>(i);
}

// Block i handles the run of equal ids starting at sorted position i (blocks inside a run
// return at once): dtable[id] += dout of its tokens, added in token order (the sort is stable).
template <class T>
__global__ void token_grad_kernel(const std::int32_t* sorted_ids, const std::int32_t* sorted_tokens,
                                  const T* dout, float* dtable, int tokens, int cols) {
  const int i = static_cast<int>(blockIdx.x);
  const std::int32_t id = sorted_ids[i];
  if (i > 0 && sorted_ids[i - 1] == id) return;
  int end = i + 1;
  while (end < tokens && sorted_ids[end] == id) ++end;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float sum = 0.0f;
    for (int k = i; k < end; ++k)
      sum += load(dout, static_cast<std::size_t>(sorted_tokens[k]) * cols + c);
    dtable[static_cast<std::size_t>(id) * cols + c] += sum;
  }
}

template <class T>
__global__ void cross_entropy_kernel(const T* logits, const std::int32_t* targets, T* dlogits,
                                     int cols, float scale, double* row_loss) {
  __shared__ float shared[kThreads / 32];
  __shared__ double shared_d[kThreads / 32];
  const std::size_t o = static_cast<std::size_t>(blockIdx.x) * cols;
  const int target = targets[blockIdx.x];
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, load(logits, o + j));
  mx = block_all_max(mx, shared);
  double z = 0.0;
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    z += exp(static_cast<double>(load(logits, o + j) - mx));
  z = block_all_sum_double(z, shared_d);
  const float x_target = load(logits, o + static_cast<std::size_t>(target));
  __syncthreads();  // every thread has read the target logit before any overwrites it
  const double inv = 1.0 / z;
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    store(dlogits, o + j,
          math::cross_entropy_grad(load(logits, o + j), mx, inv, scale, j == target));
  if (threadIdx.x == 0) row_loss[blockIdx.x] = math::cross_entropy_loss(z, mx, x_target);
}

}  // namespace

std::size_t column_partials_floats(int cols) {
  return 2 * static_cast<std::size_t>(kMaxRowChunks) * static_cast<std::size_t>(cols);
}

cudaError_t fill(cudaStream_t s, TensorPtr x, float value, std::size_t n) {
  if (n == 0) return cudaSuccess;
  return with_type(x.dtype(), [&](auto t) {
    fill_kernel<<<grid_for(n), kThreads, 0, s>>>(elements<decltype(t)>(x), value, n);
  });
}

cudaError_t convert(cudaStream_t s, ConstTensorPtr src, TensorPtr dst, std::size_t n) {
  if (n == 0) return cudaSuccess;
  return with_type(src.dtype(), [&](auto a) {
    with_type(dst.dtype(), [&](auto b) {
      convert_kernel<<<grid_for(n), kThreads, 0, s>>>(elements<decltype(a)>(src),
                                                      elements<decltype(b)>(dst), n);
    });
  });
}

cudaError_t overlapping_copy(cudaStream_t s, ConstTensorPtr src, TensorPtr dst, std::size_t n) {
  if (n == 0 || src.get() == dst.get()) return cudaSuccess;
  return with_type(src.dtype(), [&](auto t) {
    using T = decltype(t);
    overlapping_copy_kernel<<<1, kThreads, 0, s>>>(elements<T>(src), elements<T>(dst), n);
  });
}

cudaError_t axpy(cudaStream_t s, float alpha, const float* x, float* y, std::size_t n) {
  if (n == 0) return cudaSuccess;
  axpy_kernel<<<grid_for(n), kThreads, 0, s>>>(alpha, x, y, n);
  return cudaGetLastError();
}

cudaError_t gelu(cudaStream_t s, ConstTensorPtr z, TensorPtr a, std::size_t n) {
  if (n == 0) return cudaSuccess;
  return with_type(z.dtype(), [&](auto t) {
    using T = decltype(t);
    gelu_kernel<<<grid_for(n), kThreads, 0, s>>>(elements<T>(z), elements<T>(a), n);
  });
}

cudaError_t gelu_backward(cudaStream_t s, ConstTensorPtr z, ConstTensorPtr da, TensorPtr dz,
                          std::size_t n) {
  if (n == 0) return cudaSuccess;
  return with_type(z.dtype(), [&](auto t) {
    using T = decltype(t);
    gelu_backward_kernel<<<grid_for(n), kThreads, 0, s>>>(elements<T>(z), elements<T>(da),
                                                          elements<T>(dz), n);
  });
}

cudaError_t mse_loss(cudaStream_t s, ConstTensorPtr y, ConstTensorPtr t, TensorPtr dy,
                     std::size_t n, float scale, float* loss_sum, double* partials) {
  if (n == 0) return cudaSuccess;
  const int blocks = grid_for(n);
  const cudaError_t e = with_type(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    mse_partial_kernel<<<blocks, kThreads, 0, s>>>(elements<T>(y), elements<T>(t), elements<T>(dy),
                                                   n, 2.0f * scale, partials);
  });
  if (e != cudaSuccess) return e;
  add_partials_kernel<<<1, kThreads, 0, s>>>(partials, blocks, scale, loss_sum);
  return cudaGetLastError();
}

cudaError_t sgd(cudaStream_t s, float* p, const float* g, std::size_t n, float lr) {
  if (n == 0) return cudaSuccess;
  sgd_kernel<<<grid_for(n), kThreads, 0, s>>>(p, g, n, lr);
  return cudaGetLastError();
}

cudaError_t adam(cudaStream_t s, float* p, const float* g, float* m, float* v, std::size_t n,
                 float lr, float beta1, float beta2, float eps, float bc1, float bc2) {
  if (n == 0) return cudaSuccess;
  adam_kernel<<<grid_for(n), kThreads, 0, s>>>(p, g, m, v, n,
                                               math::AdamStep{lr, beta1, beta2, eps, bc1, bc2});
  return cudaGetLastError();
}

cudaError_t seeded_uniform(cudaStream_t s, TensorPtr x, std::size_t n, std::uint64_t key,
                           float scale) {
  if (n == 0) return cudaSuccess;
  return with_type(x.dtype(), [&](auto t) {
    seeded_uniform_kernel<<<grid_for(n), kThreads, 0, s>>>(elements<decltype(t)>(x), n, key, scale);
  });
}

cudaError_t seeded_tokens(cudaStream_t s, std::int32_t* ids, std::size_t n, std::uint64_t key,
                          std::int32_t vocab) {
  if (n == 0) return cudaSuccess;
  seeded_tokens_kernel<<<grid_for(n), kThreads, 0, s>>>(ids, n, key, vocab);
  return cudaGetLastError();
}

cudaError_t to_bf16(cudaStream_t s, const float* src, int rows, int cols, int ld, void* dst) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (n == 0) return cudaSuccess;
  const bool aligned = reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(dst) % 8 == 0;
  if (ld == cols && n % 4 == 0 && aligned) {
    to_bf16_dense4_kernel<<<grid_for(n / 4), kThreads, 0, s>>>(reinterpret_cast<const float4*>(src),
                                                               n / 4, static_cast<uint2*>(dst));
    return cudaGetLastError();
  }
  to_bf16_kernel<<<grid_for(n), kThreads, 0, s>>>(src, rows, cols, ld, static_cast<bf16*>(dst));
  return cudaGetLastError();
}

cudaError_t spin(cudaStream_t s, long long ticks, bool use_globaltimer, bool relax) {
  if (ticks <= 0) return cudaSuccess;
  spin_kernel<<<1, 1, 0, s>>>(ticks, use_globaltimer, relax);
  return cudaGetLastError();
}

cudaError_t batch_pointers(cudaStream_t s, const BatchPointers& p, void** out) {
  const std::size_t count = static_cast<std::size_t>(p.outer) * static_cast<std::size_t>(p.inner);
  if (count == 0) return cudaSuccess;
  batch_pointers_kernel<<<grid_for(count), kThreads, 0, s>>>(p, out);
  return cudaGetLastError();
}

cudaError_t softmax(cudaStream_t s, ConstTensorPtr x, TensorPtr y, int rows, int cols,
                    bool causal) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return with_type(x.dtype(), [&](auto t) {
    using T = decltype(t);
    softmax_kernel<<<rows, kThreads, 0, s>>>(elements<T>(x), elements<T>(y), cols, causal);
  });
}

cudaError_t softmax_backward(cudaStream_t s, ConstTensorPtr y, ConstTensorPtr dy, TensorPtr dx,
                             int rows, int cols) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return with_type(y.dtype(), [&](auto t) {
    using T = decltype(t);
    softmax_backward_kernel<<<rows, kThreads, 0, s>>>(elements<T>(y), elements<T>(dy),
                                                      elements<T>(dx), cols);
  });
}

cudaError_t layernorm(cudaStream_t s, ConstTensorPtr x, const float* gamma, const float* beta,
                      TensorPtr y, float* mean, float* rstd, int rows, int cols, float eps) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return with_type(x.dtype(), [&](auto t) {
    using T = decltype(t);
    layernorm_kernel<<<rows, kThreads, 0, s>>>(elements<T>(x), gamma, beta, elements<T>(y), mean,
                                               rstd, cols, eps);
  });
}

cudaError_t layernorm_backward_input(cudaStream_t s, ConstTensorPtr x, const float* gamma,
                                     const float* mean, const float* rstd, ConstTensorPtr dy,
                                     TensorPtr dx, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return with_type(x.dtype(), [&](auto t) {
    using T = decltype(t);
    layernorm_backward_input_kernel<<<rows, kThreads, 0, s>>>(
        elements<T>(x), gamma, mean, rstd, elements<T>(dy), elements<T>(dx), cols);
  });
}

cudaError_t layernorm_backward_params(cudaStream_t s, ConstTensorPtr x, const float* mean,
                                      const float* rstd, ConstTensorPtr dy, float* dgamma,
                                      float* dbeta, int rows, int cols, float* partials) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  cudaError_t e = cudaSuccess;
  with_type(x.dtype(), [&](auto t) {
    using T = decltype(t);
    e = column_reduce(s, LayerNormParamTerms<T>{elements<T>(x), elements<T>(dy), mean, rstd, cols},
                      rows, cols, partials, dgamma, dbeta);
  });
  return e;
}

cudaError_t add_bias(cudaStream_t s, TensorPtr y, const float* bias, int rows, int cols) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return with_type(y.dtype(), [&](auto t) {
    add_bias_kernel<<<grid_for(n), kThreads, 0, s>>>(elements<decltype(t)>(y), bias, n, cols);
  });
}

cudaError_t column_sums(cudaStream_t s, ConstTensorPtr x, float* out, int rows, int cols,
                        float* partials) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  cudaError_t e = cudaSuccess;
  with_type(x.dtype(), [&](auto t) {
    using T = decltype(t);
    e = column_reduce(s, ColumnTerms<T>{elements<T>(x), cols}, rows, cols, partials, out, nullptr);
  });
  return e;
}

cudaError_t embedding(cudaStream_t s, const std::int32_t* ids, const float* table,
                      const float* positions, TensorPtr out, int tokens, int seq, int cols) {
  const std::size_t n = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(cols);
  if (n == 0) return cudaSuccess;
  return with_type(out.dtype(), [&](auto t) {
    embedding_kernel<<<grid_for(n), kThreads, 0, s>>>(
        ids, table, positions, elements<decltype(t)>(out), tokens, seq, cols);
  });
}

std::size_t embedding_sort_scratch_bytes(int tokens) {
  std::size_t bytes = 0;
  (void)cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                        static_cast<std::int32_t*>(nullptr),
                                        static_cast<const std::int32_t*>(nullptr),
                                        static_cast<std::int32_t*>(nullptr), tokens);
  return bytes;
}

cudaError_t embedding_backward(cudaStream_t s, const std::int32_t* ids, ConstTensorPtr dout,
                               float* dtable, float* dpositions, int tokens, int seq, int cols,
                               int vocab, const EmbeddingSort& sort) {
  if (tokens <= 0 || cols <= 0) return cudaSuccess;
  const cudaError_t e = with_type(dout.dtype(), [&](auto t) {
    using T = decltype(t);
    position_grad_kernel<<<grid_for(static_cast<std::size_t>(seq) * cols), kThreads, 0, s>>>(
        elements<T>(dout), dpositions, tokens, seq, cols);
  });
  if (e != cudaSuccess) return e;
  iota_kernel<<<grid_for(static_cast<std::size_t>(tokens)), kThreads, 0, s>>>(sort.tokens_in,
                                                                              tokens);
  if (const cudaError_t e2 = cudaGetLastError(); e2 != cudaSuccess) return e2;
  int end_bit = 1;
  while (end_bit < 31 && (1 << end_bit) < vocab) ++end_bit;
  std::size_t bytes = sort.scratch_bytes;
  if (const cudaError_t e3 =
          cub::DeviceRadixSort::SortPairs(sort.scratch, bytes, ids, sort.sorted_ids, sort.tokens_in,
                                          sort.sorted_tokens, tokens, 0, end_bit, s);
      e3 != cudaSuccess)
    return e3;
  return with_type(dout.dtype(), [&](auto t) {
    using T = decltype(t);
    token_grad_kernel<<<tokens, kThreads, 0, s>>>(sort.sorted_ids, sort.sorted_tokens,
                                                  elements<T>(dout), dtable, tokens, cols);
  });
}

cudaError_t cross_entropy(cudaStream_t s, ConstTensorPtr logits, const std::int32_t* targets,
                          TensorPtr dlogits, int rows, int cols, float scale, float* loss_sum,
                          double* row_loss) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const cudaError_t e = with_type(logits.dtype(), [&](auto t) {
    using T = decltype(t);
    cross_entropy_kernel<<<rows, kThreads, 0, s>>>(elements<T>(logits), targets,
                                                   elements<T>(dlogits), cols, scale, row_loss);
  });
  if (e != cudaSuccess) return e;
  add_partials_kernel<<<1, kThreads, 0, s>>>(row_loss, rows, scale, loss_sum);
  return cudaGetLastError();
}

}  // namespace bb::cuda::kernels
