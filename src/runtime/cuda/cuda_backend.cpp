#include "runtime/cuda/cuda_backend.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <library_types.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/cuda/check.hpp"
#include "runtime/cuda/kernels.hpp"

namespace bb::cuda {

// --- Device discovery ------------------------------------------------------------------------

namespace {

std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n > 0 ? n : 0;
}

std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) +
           ", error " + std::to_string(static_cast<int>(e)) + ")";
  }
  if (n <= 0) return "no CUDA device (cudaGetDeviceCount: 0 devices)";
  return "";
}

std::string runtime_version_string() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess || v <= 0) {
    (void)cudaGetLastError();
    return "unknown";
  }
  return version_string(v);
}

std::string driver_version_string() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v <= 0) {
    (void)cudaGetLastError();
    return "none";
  }
  return version_string(v);
}

// --- Implementation state ------------------------------------------------------------------

namespace {

constexpr std::size_t kSmallLimit = std::size_t{1} << 20;  // 1 MiB
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeRound = std::size_t{2} << 20;  // 2 MiB
constexpr std::size_t kInitialEvents = 64;

std::size_t round_up(std::size_t x, std::size_t to) {
  return (x + to - 1) / to * to;
}

std::size_t block_size_for(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  return bytes <= kSmallLimit ? round_up(bytes, kSmallRound) : round_up(bytes, kLargeRound);
}

// One past the last element of a rows×cols matrix at p with leading dimension ld.
const float* footprint_end(const float* p, int rows, int cols, int ld) {
  return p + static_cast<std::size_t>(rows - 1) * ld + cols;
}

cublasOperation_t op(Trans t) {
  return t ? CUBLAS_OP_T : CUBLAS_OP_N;
}

}  // namespace

struct CudaBackend::Impl {
  int device = 0;
  CudaBackendOptions options;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;
  double* mse_partials = nullptr;
  void* bf16_a = nullptr;
  void* bf16_b = nullptr;
  std::size_t bf16_a_bytes = 0, bf16_b_bytes = 0;

  // Noted parameter ranges [first, second), and the bf16 copies of GEMM operands inside them
  // (kBf16 only): valid until something writes to the operand's footprint.
  struct Bf16Copy {
    const float* src = nullptr;
    int rows = 0, cols = 0, ld = 0;
    void* bf16 = nullptr;
    std::size_t bytes = 0;
    bool valid = false;
    const float* end() const { return footprint_end(src, rows, cols, ld); }
  };
  std::vector<std::pair<const float*, const float*>> param_ranges;
  std::vector<Bf16Copy> bf16_copies;

  // Caching allocator: blocks never split; a request takes the smallest cached block of at
  // least its rounded size and at most 25% more.
  std::multimap<std::size_t, void*> free_blocks;
  std::unordered_map<void*, std::size_t> used_blocks;
  DeviceMemoryStats stats;

  cudaEvent_t origin = nullptr;
  std::vector<cudaEvent_t> events;
  std::size_t marks_used = 0;

  double spin_rate = 0;  // ticks per second

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // Also cleans up after a constructor that threw half-way.
  ~Impl() {
    (void)cudaSetDevice(device);
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
    for (cudaEvent_t e : events) (void)cudaEventDestroy(e);
    if (origin != nullptr) (void)cudaEventDestroy(origin);
    if (cublas != nullptr) (void)cublasDestroy(cublas);
    for (const auto& [size, p] : free_blocks) device_free(p, size);
    // Blocks still in use belong to Buffers that outlive the backend (a contract violation):
    // free them anyway rather than leak device memory.
    for (const auto& [p, size] : used_blocks) device_free(p, size);
    device_free(cublas_workspace, options.cublas_workspace_bytes);
    device_free(mse_partials, kernels::kMaxBlocks * sizeof(double));
    device_free(bf16_a, bf16_a_bytes);
    device_free(bf16_b, bf16_b_bytes);
    for (const Bf16Copy& c : bf16_copies) device_free(c.bf16, c.bytes);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
    (void)cudaGetLastError();
  }

  void bind() const { BB_CHECK_CUDA(cudaSetDevice(device)); }

  // (total − free) of the device now; 0 when cudaMemGetInfo fails.
  std::size_t used_device_bytes() {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return total - free;
  }

  void sample_device_memory() {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    stats.device_free_bytes = free;
    stats.device_total_bytes = total;
    stats.device_peak_used_bytes = std::max(stats.device_peak_used_bytes, total - free);
  }

  // cudaMalloc with one retry after emptying the cache; nullptr when the device is full.
  void* device_malloc(std::size_t bytes) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation && !free_blocks.empty()) {
      (void)cudaGetLastError();
      release_cache();
      e = cudaMalloc(&p, bytes);
    }
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    BB_CHECK_CUDA(e);
    ++stats.device_mallocs;
    stats.reserved_bytes += bytes;
    stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, stats.reserved_bytes);
    sample_device_memory();
    return p;
  }

  void device_free(void* p, std::size_t bytes) noexcept {
    if (p == nullptr) return;
    (void)cudaFree(p);
    stats.reserved_bytes -= bytes;
  }

  void release_cache() {
    BB_CHECK_CUDA(cudaStreamSynchronize(stream));
    for (const auto& [size, p] : free_blocks) device_free(p, size);
    free_blocks.clear();
    stats.cached_bytes = 0;
  }

  void* allocate(std::size_t bytes) {
    const std::size_t size = block_size_for(bytes);
    void* p = nullptr;
    std::size_t got = size;
    auto it = free_blocks.lower_bound(size);
    if (it != free_blocks.end() && it->first - size <= size / 4) {
      got = it->first;
      p = it->second;
      free_blocks.erase(it);
      stats.cached_bytes -= got;
      ++stats.cache_hits;
    } else {
      p = device_malloc(size);
      if (p == nullptr) throw std::bad_alloc();
    }
    used_blocks.emplace(p, got);
    stats.in_use_bytes += got;
    stats.peak_in_use_bytes = std::max(stats.peak_in_use_bytes, stats.in_use_bytes);
    return p;
  }

  void release(void* p) noexcept {
    const auto it = used_blocks.find(p);
    if (it == used_blocks.end()) return;  // not ours: ignore rather than corrupt the cache
    const std::size_t size = it->second;
    if (!param_ranges.empty()) forget_parameters(p, size);
    used_blocks.erase(it);
    stats.in_use_bytes -= size;
    // Later users of the block are ordered after earlier ones on the compute stream.
    free_blocks.emplace(size, p);
    stats.cached_bytes += size;
  }

  // Something is about to write x[0, count): the bf16 copies it overlaps are stale.
  void wrote(const float* x, std::size_t count) {
    if (bf16_copies.empty() || count == 0) return;
    for (Bf16Copy& c : bf16_copies)
      if (x < c.end() && c.src < x + count) c.valid = false;
  }
  // C (m×n, leading dimension ldc) is about to be written.
  void wrote(const float* c, int m, int n, int ldc) {
    if (!bf16_copies.empty()) wrote(c, static_cast<std::size_t>(footprint_end(c, m, n, ldc) - c));
  }

  // The bf16 copy of the rows×cols operand at `src` (leading dimension ld), converted now if
  // stale; nullptr when the operand is not inside noted parameters.
  const void* parameter_bf16(const float* src, int rows, int cols, int ld) {
    const float* end = footprint_end(src, rows, cols, ld);
    const bool inside = std::any_of(param_ranges.begin(), param_ranges.end(), [&](const auto& r) {
      return r.first <= src && end <= r.second;
    });
    if (!inside) return nullptr;
    auto it = std::find_if(bf16_copies.begin(), bf16_copies.end(), [&](const Bf16Copy& c) {
      return c.src == src && c.rows == rows && c.cols == cols && c.ld == ld;
    });
    if (it == bf16_copies.end()) {
      Bf16Copy c;
      c.src = src;
      c.rows = rows;
      c.cols = cols;
      c.ld = ld;
      c.bytes = block_size_for(static_cast<std::size_t>(rows) * cols * 2);
      c.bf16 = device_malloc(c.bytes);
      if (c.bf16 == nullptr) throw std::bad_alloc();
      bf16_copies.push_back(c);
      it = bf16_copies.end() - 1;
    }
    if (!it->valid) {
      BB_CHECK_CUDA(kernels::to_bf16(stream, src, rows, cols, ld, it->bf16));
      it->valid = true;
    }
    return it->bf16;
  }

  // The block at p (`size` bytes) is freed: forget the parameters in it and their copies.
  // Their last readers are ordered before any later user of the memory on the compute stream;
  // cudaFree waits for the device.
  void forget_parameters(const void* p, std::size_t size) noexcept {
    const char* lo = static_cast<const char*>(p);
    const char* hi = lo + size;
    auto within = [&](const float* x) {
      const char* c = reinterpret_cast<const char*>(x);
      return lo <= c && c < hi;
    };
    std::erase_if(param_ranges, [&](const auto& r) { return within(r.first); });
    std::erase_if(bf16_copies, [&](const Bf16Copy& c) {
      if (!within(c.src)) return false;
      device_free(c.bf16, c.bytes);
      return true;
    });
  }

  // A GEMM operand in bf16: the kept copy of a noted parameter, else rounded now into the
  // workspace `ws` (of `have` bytes).
  const void* bf16_operand(const float* src, int rows, int cols, int ld, void*& ws,
                           std::size_t& have) {
    if (const void* kept = parameter_bf16(src, rows, cols, ld)) return kept;
    void* out = ensure_workspace(ws, have, static_cast<std::size_t>(rows) * cols * 2);
    BB_CHECK_CUDA(kernels::to_bf16(stream, src, rows, cols, ld, out));
    return out;
  }

  void* ensure_workspace(void*& ws, std::size_t& have, std::size_t need) {
    if (need <= have) return ws;
    BB_CHECK_CUDA(cudaStreamSynchronize(stream));  // the old workspace may still be in use
    device_free(ws, have);
    ws = nullptr;
    have = 0;
    const std::size_t size = block_size_for(need);
    ws = device_malloc(size);
    if (ws == nullptr) throw std::bad_alloc();
    have = size;
    return ws;
  }

  cudaEvent_t next_event() {
    if (marks_used == events.size()) {
      const std::size_t grow = std::max<std::size_t>(kInitialEvents, events.size());
      for (std::size_t i = 0; i < grow; ++i) {
        cudaEvent_t e = nullptr;
        BB_CHECK_CUDA(cudaEventCreate(&e));
        events.push_back(e);
      }
    }
    return events[marks_used++];
  }

  // Seconds that one spin of `ticks` takes, from events around it.
  double time_spin(long long ticks) {
    cudaEvent_t a = next_event(), b = next_event();
    marks_used -= 2;  // scratch use only
    BB_CHECK_CUDA(cudaEventRecord(a, stream));
    BB_CHECK_CUDA(kernels::spin(stream, ticks, false, false));
    BB_CHECK_CUDA(cudaEventRecord(b, stream));
    BB_CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BB_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    return static_cast<double>(ms) * 1e-3;
  }

  double calibrate() {
    if (options.spin_clock == SpinClock::kGlobalTimer) {
      spin_rate = 1e9;
      return spin_rate;
    }
    BB_CHECK_CUDA(cudaStreamSynchronize(stream));
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess || khz <= 0) {
      (void)cudaGetLastError();
      khz = 1'500'000;
    }
    double rate = static_cast<double>(khz) * 1e3;          // a guess, refined below
    (void)time_spin(static_cast<long long>(rate * 0.01));  // wakes the clocks up
    // Two refinements, then the median of three 10 ms measurements.
    for (int i = 0; i < 2; ++i) {
      const long long ticks = static_cast<long long>(rate * 0.005);
      rate = static_cast<double>(ticks) / time_spin(ticks);
    }
    std::array<double, 3> r{};
    for (double& x : r) {
      const long long ticks = static_cast<long long>(rate * 0.01);
      x = static_cast<double>(ticks) / time_spin(ticks);
    }
    std::sort(r.begin(), r.end());
    spin_rate = r[1];
    return spin_rate;
  }

  void spin(double seconds, bool relax) {
    if (seconds <= 0) return;
    if (spin_rate <= 0) calibrate();
    const long long ticks = std::llround(seconds * spin_rate);
    BB_CHECK_CUDA(
        kernels::spin(stream, ticks, options.spin_clock == SpinClock::kGlobalTimer, relax));
  }
};

// --- CudaBackend -------------------------------------------------------------------------------

CudaBackend::CudaBackend(int device, const CudaBackendOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  const int n = device_count();
  if (n == 0) throw CudaError("CudaBackend: " + no_device_reason());
  if (device < 0 || device >= n)
    throw std::invalid_argument("CudaBackend: device " + std::to_string(device) +
                                " out of range (" + std::to_string(n) + " devices)");
  s.device = device;
  s.options = options;
  // On a throw, ~Impl releases whatever was created so far.
  s.bind();
  BB_CHECK_CUDA(cudaFree(nullptr));  // the context exists from here on
  s.stats.context_bytes = s.used_device_bytes();
  BB_CHECK_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  BB_CHECK_CUBLAS(cublasCreate(&s.cublas));
  BB_CHECK_CUBLAS(cublasSetStream(s.cublas, s.stream));
  // No TF32 for fp32 GEMMs: the default math mode keeps full fp32 (--check needs 1e-5).
  BB_CHECK_CUBLAS(cublasSetMathMode(s.cublas, CUBLAS_DEFAULT_MATH));
  BB_CHECK_CUBLAS(cublasSetPointerMode(s.cublas, CUBLAS_POINTER_MODE_HOST));
  if (options.cublas_workspace_bytes > 0) {
    s.cublas_workspace = s.device_malloc(options.cublas_workspace_bytes);
    if (s.cublas_workspace == nullptr) throw std::bad_alloc();
    BB_CHECK_CUBLAS(
        cublasSetWorkspace(s.cublas, s.cublas_workspace, options.cublas_workspace_bytes));
  }
  {
    const std::size_t used = s.used_device_bytes();
    s.stats.cublas_bytes = used > s.stats.context_bytes ? used - s.stats.context_bytes : 0;
  }
  s.mse_partials = static_cast<double*>(s.device_malloc(kernels::kMaxBlocks * sizeof(double)));
  if (s.mse_partials == nullptr) throw std::bad_alloc();
  BB_CHECK_CUDA(cudaEventCreate(&s.origin));
  for (std::size_t i = 0; i < kInitialEvents; ++i) {
    cudaEvent_t e = nullptr;
    BB_CHECK_CUDA(cudaEventCreate(&e));
    s.events.push_back(e);
  }
  if (options.calibrate_spin_at_start) s.calibrate();
  Backend::begin_marks();
  BB_CHECK_CUDA(cudaEventRecord(s.origin, s.stream));
}

CudaBackend::~CudaBackend() = default;

std::size_t CudaBackend::runtime_bytes() const {
  return impl_->stats.context_bytes + impl_->stats.cublas_bytes;
}

std::string CudaBackend::device_name() const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, impl_->device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return prop.name;
}

float* CudaBackend::raw_allocate(std::size_t bytes) {
  impl_->bind();
  return static_cast<float*>(impl_->allocate(bytes));
}

void CudaBackend::raw_free(float* p, std::size_t /*bytes*/) noexcept {
  impl_->release(p);
}

void CudaBackend::to_host(const float* device_src, float* host_dst, std::size_t count) {
  if (count == 0) return;
  impl_->bind();
  BB_CHECK_CUDA(cudaMemcpyAsync(host_dst, device_src, count * sizeof(float), cudaMemcpyDeviceToHost,
                                impl_->stream));
  BB_CHECK_CUDA(cudaStreamSynchronize(impl_->stream));
}

void CudaBackend::note_parameters(const float* p, std::size_t count) {
  if (count == 0) return;
  impl_->param_ranges.emplace_back(p, p + count);
}

void CudaBackend::from_host(const float* host_src, float* device_dst, std::size_t count) {
  if (count == 0) return;
  impl_->bind();
  impl_->wrote(device_dst, count);
  BB_CHECK_CUDA(cudaMemcpyAsync(device_dst, host_src, count * sizeof(float), cudaMemcpyHostToDevice,
                                impl_->stream));
  BB_CHECK_CUDA(cudaStreamSynchronize(impl_->stream));
}

// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands and m, n.
void CudaBackend::gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                       const float* a, int lda, const float* b, int ldb, float beta, float* c,
                       int ldc) {
  if (m <= 0 || n <= 0) return;
  Impl& s = *impl_;
  s.bind();
  s.wrote(c, m, n, ldc);
  if (s.options.gemm_dtype == GemmDtype::kFp32 || k <= 0) {
    BB_CHECK_CUBLAS(cublasSgemm(s.cublas, op(trans_b), op(trans_a), n, m, k, &alpha, b, ldb, a, lda,
                                &beta, c, ldc));
    return;
  }
  // bf16 operands (dense copies, leading dimension = stored columns), fp32 accumulate/output.
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const void* a16 = s.bf16_operand(a, a_rows, a_cols, lda, s.bf16_a, s.bf16_a_bytes);
  const void* b16 = s.bf16_operand(b, b_rows, b_cols, ldb, s.bf16_b, s.bf16_b_bytes);
  BB_CHECK_CUBLAS(cublasGemmEx(s.cublas, op(trans_b), op(trans_a), n, m, k, &alpha, b16,
                               CUDA_R_16BF, b_cols, a16, CUDA_R_16BF, a_cols, &beta, c, CUDA_R_32F,
                               ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Always fp32 (cublasSgemmStridedBatched), also with GemmDtype::kBf16: the attention GEMMs'
// operands are activations, which would have to be rounded on every call.
void CudaBackend::gemm_strided_batched(Trans trans_a, Trans trans_b, int m, int n, int k,
                                       float alpha, const float* a, int lda, std::int64_t stride_a,
                                       const float* b, int ldb, std::int64_t stride_b, float beta,
                                       float* c, int ldc, std::int64_t stride_c, int batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  Impl& s = *impl_;
  s.bind();
  if (!s.bf16_copies.empty())
    s.wrote(c, static_cast<std::size_t>(footprint_end(c + (batch - 1) * stride_c, m, n, ldc) - c));
  BB_CHECK_CUBLAS(cublasSgemmStridedBatched(s.cublas, op(trans_b), op(trans_a), n, m, k, &alpha, b,
                                            ldb, stride_b, a, lda, stride_a, &beta, c, ldc,
                                            stride_c, batch));
}

void CudaBackend::softmax(const float* x, float* y, int rows, int cols, bool causal) {
  impl_->bind();
  impl_->wrote(y, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(kernels::softmax(impl_->stream, x, y, rows, cols, causal));
}

void CudaBackend::softmax_backward(const float* y, const float* dy, float* dx, int rows, int cols) {
  impl_->bind();
  impl_->wrote(dx, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(kernels::softmax_backward(impl_->stream, y, dy, dx, rows, cols));
}

void CudaBackend::layernorm(const float* x, const float* gamma, const float* beta, float* y,
                            float* mean, float* rstd, int rows, int cols, float eps) {
  impl_->bind();
  impl_->wrote(y, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  impl_->wrote(mean, static_cast<std::size_t>(rows));
  impl_->wrote(rstd, static_cast<std::size_t>(rows));
  BB_CHECK_CUDA(kernels::layernorm(impl_->stream, x, gamma, beta, y, mean, rstd, rows, cols, eps));
}

void CudaBackend::layernorm_backward_input(const float* x, const float* gamma, const float* mean,
                                           const float* rstd, const float* dy, float* dx, int rows,
                                           int cols) {
  impl_->bind();
  impl_->wrote(dx, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(
      kernels::layernorm_backward_input(impl_->stream, x, gamma, mean, rstd, dy, dx, rows, cols));
}

void CudaBackend::layernorm_backward_params(const float* x, const float* mean, const float* rstd,
                                            const float* dy, float* dgamma, float* dbeta, int rows,
                                            int cols) {
  impl_->bind();
  impl_->wrote(dgamma, static_cast<std::size_t>(cols));
  impl_->wrote(dbeta, static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(kernels::layernorm_backward_params(impl_->stream, x, mean, rstd, dy, dgamma, dbeta,
                                                   rows, cols));
}

void CudaBackend::add_bias(float* y, const float* bias, int rows, int cols) {
  impl_->bind();
  impl_->wrote(y, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(kernels::add_bias(impl_->stream, y, bias, rows, cols));
}

void CudaBackend::column_sums(const float* x, float* out, int rows, int cols) {
  impl_->bind();
  impl_->wrote(out, static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(kernels::column_sums(impl_->stream, x, out, rows, cols));
}

void CudaBackend::fill(float* x, float value, std::size_t count) {
  impl_->bind();
  impl_->wrote(x, count);
  BB_CHECK_CUDA(kernels::fill(impl_->stream, x, value, count));
}

void CudaBackend::copy(const float* src, float* dst, std::size_t count) {
  if (count == 0 || src == dst) return;
  impl_->bind();
  impl_->wrote(dst, count);
  const bool overlap = src < dst + count && dst < src + count;
  if (overlap) {
    BB_CHECK_CUDA(kernels::overlapping_copy(impl_->stream, src, dst, count));
    return;
  }
  BB_CHECK_CUDA(
      cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, impl_->stream));
}

void CudaBackend::axpy(float alpha, const float* x, float* y, std::size_t count) {
  impl_->bind();
  impl_->wrote(y, count);
  BB_CHECK_CUDA(kernels::axpy(impl_->stream, alpha, x, y, count));
}

void CudaBackend::gelu(const float* z, float* a, std::size_t count) {
  impl_->bind();
  impl_->wrote(a, count);
  BB_CHECK_CUDA(kernels::gelu(impl_->stream, z, a, count));
}

void CudaBackend::gelu_backward(const float* z, const float* da, float* dz, std::size_t count) {
  impl_->bind();
  impl_->wrote(dz, count);
  BB_CHECK_CUDA(kernels::gelu_backward(impl_->stream, z, da, dz, count));
}

void CudaBackend::mse_loss(const float* y, const float* target, float* dy, std::size_t count,
                           float scale, float* loss_sum) {
  impl_->bind();
  impl_->wrote(dy, count);
  BB_CHECK_CUDA(
      kernels::mse_loss(impl_->stream, y, target, dy, count, scale, loss_sum, impl_->mse_partials));
}

void CudaBackend::sgd_update(float* p, const float* g, std::size_t count, float lr) {
  impl_->bind();
  impl_->wrote(p, count);
  BB_CHECK_CUDA(kernels::sgd(impl_->stream, p, g, count, lr));
}

void CudaBackend::adam_update(float* p, const float* g, float* m, float* v, std::size_t count,
                              const AdamParams& params, std::int64_t step) {
  impl_->bind();
  impl_->wrote(p, count);
  // Bias corrections exactly as CpuBackend computes them.
  const double t = static_cast<double>(step);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta2), t));
  BB_CHECK_CUDA(kernels::adam(impl_->stream, p, g, m, v, count, params.lr, params.beta1,
                              params.beta2, params.eps, bc1, bc2));
}

void CudaBackend::seeded_uniform(float* x, std::size_t count, std::uint64_t seed,
                                 std::uint64_t stream, float scale) {
  impl_->bind();
  impl_->wrote(x, count);
  BB_CHECK_CUDA(kernels::seeded_uniform(impl_->stream, x, count, seeded_key(seed, stream), scale));
}

void CudaBackend::synchronize() {
  impl_->bind();
  BB_CHECK_CUDA(cudaStreamSynchronize(impl_->stream));
}

bool CudaBackend::queue_done() {
  impl_->bind();
  const cudaError_t e = cudaStreamQuery(impl_->stream);
  if (e == cudaErrorNotReady) return false;
  BB_CHECK_CUDA(e);
  return true;
}

double CudaBackend::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void CudaBackend::sleep_for(double seconds) {
  impl_->bind();
  impl_->spin(seconds, true);
}

void CudaBackend::spin_for(double seconds) {
  impl_->bind();
  impl_->spin(seconds, false);
}

void CudaBackend::begin_marks() {
  Impl& s = *impl_;
  s.bind();
  BB_CHECK_CUDA(cudaStreamSynchronize(s.stream));
  Backend::begin_marks();  // host origin, now that the stream is idle
  BB_CHECK_CUDA(cudaEventRecord(s.origin, s.stream));
  s.marks_used = 0;
}

std::size_t CudaBackend::mark() {
  Impl& s = *impl_;
  s.bind();
  const cudaEvent_t e = s.next_event();
  BB_CHECK_CUDA(cudaEventRecord(e, s.stream));
  return s.marks_used - 1;
}

double CudaBackend::mark_seconds(std::size_t id) {
  Impl& s = *impl_;
  if (id >= s.marks_used)
    throw std::out_of_range("CudaBackend::mark_seconds: no mark " + std::to_string(id));
  float ms = 0;
  const cudaError_t e = cudaEventElapsedTime(&ms, s.origin, s.events[id]);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    throw std::logic_error("CudaBackend::mark_seconds: mark " + std::to_string(id) +
                           " has not completed (call synchronize() first)");
  }
  BB_CHECK_CUDA(e);
  return static_cast<double>(ms) * 1e-3;
}

int CudaBackend::device() const {
  return impl_->device;
}
CUstream_st* CudaBackend::stream() const {
  return impl_->stream;
}
const CudaBackendOptions& CudaBackend::options() const {
  return impl_->options;
}
GemmDtype CudaBackend::gemm_dtype() const {
  return impl_->options.gemm_dtype;
}
void CudaBackend::set_gemm_dtype(GemmDtype dtype) {
  impl_->options.gemm_dtype = dtype;
}

DeviceMemoryStats CudaBackend::memory_stats() {
  impl_->bind();
  impl_->sample_device_memory();
  return impl_->stats;
}

void CudaBackend::reset_peak_memory() {
  DeviceMemoryStats& st = impl_->stats;
  st.peak_in_use_bytes = st.in_use_bytes;
  st.peak_reserved_bytes = st.reserved_bytes;
  impl_->sample_device_memory();
  st.device_peak_used_bytes = st.device_total_bytes - st.device_free_bytes;
}

void CudaBackend::release_cached_memory() {
  impl_->bind();
  impl_->release_cache();
}

double CudaBackend::calibrate_spin() {
  impl_->bind();
  return impl_->calibrate();
}

double CudaBackend::spin_ticks_per_second() const {
  return impl_->spin_rate;
}

CudaBackend* as_cuda(Backend& backend) {
  return dynamic_cast<CudaBackend*>(&backend);
}

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(device, options);
}

}  // namespace bb::cuda
