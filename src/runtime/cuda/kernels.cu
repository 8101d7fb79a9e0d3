// The CUDA backend's elementwise kernels. The arithmetic mirrors CpuBackend operation by
// operation with explicitly rounded intrinsics (__fmul_rn, __fadd_rn, ...), which nvcc never
// contracts into FMAs: fill, copy, axpy, SGD, Adam, the MSE gradient and seeded_uniform give
// bit-identical results to the CPU; gelu and its derivative differ only by the last bits of
// erff/expf. seeded_uniform calls the very constexpr function the CPU uses.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "runtime/backend.hpp"
#include "runtime/cuda/kernels.hpp"

namespace bb::cuda::kernels {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

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

__global__ void fill_kernel(float* x, float value, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) x[i] = value;
}

__global__ void axpy_kernel(float alpha, const float* x, float* y, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i]));
}

__global__ void gelu_kernel(const float* z, float* a, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const float v = z[i];
    a[i] = __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, erff(__fmul_rn(v, kInvSqrt2))));
  }
}

__global__ void gelu_backward_kernel(const float* z, const float* da, float* dz, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const float v = z[i];
    const float cdf = __fmul_rn(0.5f, __fadd_rn(1.0f, erff(__fmul_rn(v, kInvSqrt2))));
    const float pdf = __fmul_rn(kInvSqrt2Pi, expf(__fmul_rn(__fmul_rn(-0.5f, v), v)));
    dz[i] = __fmul_rn(da[i], __fadd_rn(cdf, __fmul_rn(v, pdf)));
  }
}

// Block-wide sum in double; every thread gets the result in thread 0 only.
__device__ double block_sum(double x) {
  __shared__ double shared[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = 0.0;
  if (warp == 0) {
    if (lane < static_cast<int>(blockDim.x) / 32) x = shared[lane];
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  }
  return x;
}

__global__ void mse_partial_kernel(const float* y, const float* t, float* dy, std::size_t n,
                                   float two_scale, double* partials) {
  double sum = 0.0;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const float d = __fsub_rn(y[i], t[i]);
    sum += static_cast<double>(d) * static_cast<double>(d);
    dy[i] = __fmul_rn(two_scale, d);
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void mse_finish_kernel(const double* partials, int count, float scale, float* loss_sum) {
  double sum = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x))
    sum += partials[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0)
    *loss_sum = __fadd_rn(*loss_sum, static_cast<float>(static_cast<double>(scale) * sum));
}

__global__ void sgd_kernel(float* p, const float* g, std::size_t n, float lr) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, g[i]));
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, std::size_t n, float lr,
                            float b1, float b2, float eps, float bc1, float bc2) {
  const float one_minus_b1 = __fsub_rn(1.0f, b1), one_minus_b2 = __fsub_rn(1.0f, b2);
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const float gi = g[i];
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(one_minus_b1, gi));
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(one_minus_b2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float m_hat = __fdiv_rn(mi, bc1);
    const float v_hat = __fdiv_rn(vi, bc2);
    p[i] = __fsub_rn(p[i], __fdiv_rn(__fmul_rn(lr, m_hat), __fadd_rn(__fsqrt_rn(v_hat), eps)));
  }
}

__global__ void seeded_uniform_kernel(float* x, std::size_t n, std::uint64_t key, float scale) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    x[i] = __fmul_rn(scale, bb::seeded_uniform_value(key, i));
}

__global__ void to_bf16_kernel(const float* src, int rows, int cols, int ld, __nv_bfloat16* dst) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const std::size_t r = i / static_cast<std::size_t>(cols),
                      c = i % static_cast<std::size_t>(cols);
    dst[i] = __float2bfloat16_rn(src[r * static_cast<std::size_t>(ld) + c]);
  }
}

// Dense operands (ld == cols, 16-byte aligned, a multiple of 4 elements): four floats in one
// load, four bf16 in one store, no index arithmetic.
__global__ void to_bf16_dense4_kernel(const float4* src, std::size_t n4, uint2* dst) {
  for (std::size_t i = first_index(); i < n4; i += grid_stride()) {
    const float4 v = src[i];
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 out;
    out.x = *reinterpret_cast<const unsigned int*>(&lo);
    out.y = *reinterpret_cast<const unsigned int*>(&hi);
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

__global__ void overlapping_copy_kernel(const float* src, float* dst, std::size_t n) {
  const bool forward = dst < src;
  for (std::size_t base = 0; base < n; base += blockDim.x) {
    const std::size_t j = base + threadIdx.x;
    const std::size_t i = forward ? j : n - 1 - j;
    float v = 0.0f;
    if (j < n) v = src[i];
    __syncthreads();
    if (j < n) dst[i] = v;
    __syncthreads();
  }
}

// Block-wide sum / max in float, broadcast to every thread. Uses `shared` (kThreads / 32).
__device__ float block_all_sum(float x, float* shared) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) total += shared[w];
  return total;
}

__device__ float block_all_max(float x, float* shared) {
  for (int offset = 16; offset > 0; offset /= 2)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  float best = shared[0];
  for (int w = 1; w < static_cast<int>(blockDim.x) / 32; ++w) best = fmaxf(best, shared[w]);
  return best;
}

__global__ void softmax_kernel(const float* x, float* y, int cols, bool causal) {
  __shared__ float shared[kThreads / 32];
  const std::size_t o = static_cast<std::size_t>(blockIdx.x) * cols;
  const int valid = causal ? static_cast<int>(blockIdx.x % static_cast<unsigned>(cols)) + 1 : cols;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < valid; j += blockDim.x) mx = fmaxf(mx, x[o + j]);
  mx = block_all_max(mx, shared);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < valid; j += blockDim.x) sum += expf(x[o + j] - mx);
  sum = block_all_sum(sum, shared);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    y[o + j] = j < valid ? expf(x[o + j] - mx) * inv : 0.0f;
}

__global__ void softmax_backward_kernel(const float* y, const float* dy, float* dx, int cols) {
  __shared__ float shared[kThreads / 32];
  const std::size_t o = static_cast<std::size_t>(blockIdx.x) * cols;
  float dot = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) dot += y[o + j] * dy[o + j];
  dot = block_all_sum(dot, shared);
  for (int j = threadIdx.x; j < cols; j += blockDim.x) dx[o + j] = y[o + j] * (dy[o + j] - dot);
}

__global__ void layernorm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                 float* mean, float* rstd, int cols, float eps) {
  __shared__ float shared[kThreads / 32];
  const std::size_t o = static_cast<std::size_t>(blockIdx.x) * cols;
  float sum = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += x[o + j];
  const float mu = block_all_sum(sum, shared) / static_cast<float>(cols);
  float var = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) var += (x[o + j] - mu) * (x[o + j] - mu);
  const float rs = rsqrtf(block_all_sum(var, shared) / static_cast<float>(cols) + eps);
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    y[o + j] = (x[o + j] - mu) * rs * gamma[j] + beta[j];
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = rs;
  }
}

__global__ void layernorm_backward_input_kernel(const float* x, const float* gamma,
                                                const float* mean, const float* rstd,
                                                const float* dy, float* dx, int cols) {
  __shared__ float shared[kThreads / 32];
  const std::size_t o = static_cast<std::size_t>(blockIdx.x) * cols;
  const float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    const float g = dy[o + j] * gamma[j];
    sum_g += g;
    sum_gx += g * (x[o + j] - mu) * rs;
  }
  const float mean_g = block_all_sum(sum_g, shared) / static_cast<float>(cols);
  const float mean_gx = block_all_sum(sum_gx, shared) / static_cast<float>(cols);
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    const float xhat = (x[o + j] - mu) * rs;
    dx[o + j] += rs * (dy[o + j] * gamma[j] - mean_g - xhat * mean_gx);
  }
}

__global__ void layernorm_backward_params_kernel(const float* x, const float* mean,
                                                 const float* rstd, const float* dy, float* dgamma,
                                                 float* dbeta, int rows, int cols) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= cols) return;
  float g = 0.0f, b = 0.0f;
  for (int r = 0; r < rows; ++r) {
    const std::size_t i = static_cast<std::size_t>(r) * cols + j;
    g += dy[i] * (x[i] - mean[r]) * rstd[r];
    b += dy[i];
  }
  dgamma[j] += g;
  dbeta[j] += b;
}

__global__ void add_bias_kernel(float* y, const float* bias, std::size_t n, int cols) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    y[i] += bias[i % static_cast<std::size_t>(cols)];
}

__global__ void column_sums_kernel(const float* x, float* out, int rows, int cols) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= cols) return;
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum += x[static_cast<std::size_t>(r) * cols + j];
  out[j] += sum;
}

int column_grid(int cols) {
  return (cols + kThreads - 1) / kThreads;
}

}  // namespace

cudaError_t softmax(cudaStream_t s, const float* x, float* y, int rows, int cols, bool causal) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  softmax_kernel<<<rows, kThreads, 0, s>>>(x, y, cols, causal);
  return cudaGetLastError();
}

cudaError_t softmax_backward(cudaStream_t s, const float* y, const float* dy, float* dx, int rows,
                             int cols) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  softmax_backward_kernel<<<rows, kThreads, 0, s>>>(y, dy, dx, cols);
  return cudaGetLastError();
}

cudaError_t layernorm(cudaStream_t s, const float* x, const float* gamma, const float* beta,
                      float* y, float* mean, float* rstd, int rows, int cols, float eps) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  layernorm_kernel<<<rows, kThreads, 0, s>>>(x, gamma, beta, y, mean, rstd, cols, eps);
  return cudaGetLastError();
}

cudaError_t layernorm_backward_input(cudaStream_t s, const float* x, const float* gamma,
                                     const float* mean, const float* rstd, const float* dy,
                                     float* dx, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  layernorm_backward_input_kernel<<<rows, kThreads, 0, s>>>(x, gamma, mean, rstd, dy, dx, cols);
  return cudaGetLastError();
}

cudaError_t layernorm_backward_params(cudaStream_t s, const float* x, const float* mean,
                                      const float* rstd, const float* dy, float* dgamma,
                                      float* dbeta, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  layernorm_backward_params_kernel<<<column_grid(cols), kThreads, 0, s>>>(x, mean, rstd, dy, dgamma,
                                                                          dbeta, rows, cols);
  return cudaGetLastError();
}

cudaError_t add_bias(cudaStream_t s, float* y, const float* bias, int rows, int cols) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  add_bias_kernel<<<grid_for(n), kThreads, 0, s>>>(y, bias, n, cols);
  return cudaGetLastError();
}

cudaError_t column_sums(cudaStream_t s, const float* x, float* out, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  column_sums_kernel<<<column_grid(cols), kThreads, 0, s>>>(x, out, rows, cols);
  return cudaGetLastError();
}

cudaError_t fill(cudaStream_t s, float* x, float value, std::size_t n) {
  if (n == 0) return cudaSuccess;
  fill_kernel<<<grid_for(n), kThreads, 0, s>>>(x, value, n);
  return cudaGetLastError();
}

cudaError_t axpy(cudaStream_t s, float alpha, const float* x, float* y, std::size_t n) {
  if (n == 0) return cudaSuccess;
  axpy_kernel<<<grid_for(n), kThreads, 0, s>>>(alpha, x, y, n);
  return cudaGetLastError();
}

cudaError_t gelu(cudaStream_t s, const float* z, float* a, std::size_t n) {
  if (n == 0) return cudaSuccess;
  gelu_kernel<<<grid_for(n), kThreads, 0, s>>>(z, a, n);
  return cudaGetLastError();
}

cudaError_t gelu_backward(cudaStream_t s, const float* z, const float* da, float* dz,
                          std::size_t n) {
  if (n == 0) return cudaSuccess;
  gelu_backward_kernel<<<grid_for(n), kThreads, 0, s>>>(z, da, dz, n);
  return cudaGetLastError();
}

cudaError_t mse_loss(cudaStream_t s, const float* y, const float* t, float* dy, std::size_t n,
                     float scale, float* loss_sum, double* partials) {
  if (n == 0) return cudaSuccess;
  const int blocks = grid_for(n);
  mse_partial_kernel<<<blocks, kThreads, 0, s>>>(y, t, dy, n, 2.0f * scale, partials);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  mse_finish_kernel<<<1, kThreads, 0, s>>>(partials, blocks, scale, loss_sum);
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
  adam_kernel<<<grid_for(n), kThreads, 0, s>>>(p, g, m, v, n, lr, beta1, beta2, eps, bc1, bc2);
  return cudaGetLastError();
}

cudaError_t seeded_uniform(cudaStream_t s, float* x, std::size_t n, std::uint64_t key,
                           float scale) {
  if (n == 0) return cudaSuccess;
  seeded_uniform_kernel<<<grid_for(n), kThreads, 0, s>>>(x, n, key, scale);
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
  to_bf16_kernel<<<grid_for(n), kThreads, 0, s>>>(src, rows, cols, ld,
                                                  static_cast<__nv_bfloat16*>(dst));
  return cudaGetLastError();
}

cudaError_t spin(cudaStream_t s, long long ticks, bool use_globaltimer, bool relax) {
  if (ticks <= 0) return cudaSuccess;
  spin_kernel<<<1, 1, 0, s>>>(ticks, use_globaltimer, relax);
  return cudaGetLastError();
}

cudaError_t overlapping_copy(cudaStream_t s, const float* src, float* dst, std::size_t n) {
  if (n == 0 || src == dst) return cudaSuccess;
  overlapping_copy_kernel<<<1, kThreads, 0, s>>>(src, dst, n);
  return cudaGetLastError();
}

}  // namespace bb::cuda::kernels
