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
#include "runtime/device_blocks.hpp"

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

constexpr std::size_t kInitialEvents = 64;

std::size_t block_size_for(std::size_t bytes) {
  return cuda_block_bytes(bytes);  // runtime/device_blocks.hpp
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
  // Workspaces (ensure_workspace): bf16 copies of fp32 GEMM operands, column-reduction
  // partials, batched GEMMs' pointer arrays, the cross-entropy's row losses, the embedding
  // gradient's sort. Blocks replaced while the stream may still read them wait in `retired`
  // until the next synchronize().
  struct Workspace {
    void* p = nullptr;
    std::size_t bytes = 0;
  };
  Workspace bf16_a, bf16_b, partials, batch_ptrs, row_loss, sort_ints, sort_scratch;
  std::vector<Workspace> retired;

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
    for (Workspace* w :
         {&bf16_a, &bf16_b, &partials, &batch_ptrs, &row_loss, &sort_ints, &sort_scratch})
      device_free(w->p, w->bytes);
    free_retired();
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

  // Blocks replaced earlier; the stream must be idle (after a synchronisation).
  void free_retired() noexcept {
    for (const Workspace& w : retired) device_free(w.p, w.bytes);
    retired.clear();
  }

  void release_cache() {
    BB_CHECK_CUDA(cudaStreamSynchronize(stream));
    free_retired();
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
  void wrote(TensorPtr x, std::size_t count) {  // noted parameters are fp32
    if (x.dtype() == Dtype::kF32) wrote(static_cast<const float*>(x.get()), count);
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
  // the copies' memory waits in `retired` for the next synchronize() (no cudaFree, which
  // would synchronise the device, inside a step).
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
      retired.push_back({c.bf16, c.bytes});
      return true;
    });
  }

  // A GEMM operand in bf16 with its leading dimension: a bf16 tensor as it is; a noted fp32
  // parameter's kept copy; any other fp32 operand rounded now into the workspace `ws`.
  std::pair<const void*, int> bf16_operand(ConstTensorPtr src, int rows, int cols, int ld,
                                           Workspace& ws) {
    if (src.dtype() == Dtype::kBF16) return {src.get(), ld};
    const float* f = static_cast<const float*>(src.get());
    if (const void* kept = parameter_bf16(f, rows, cols, ld)) return {kept, cols};
    void* out = ensure_workspace(ws, static_cast<std::size_t>(rows) * cols * 2);
    BB_CHECK_CUDA(kernels::to_bf16(stream, f, rows, cols, ld, out));
    return {out, cols};
  }

  // `ws` with at least `need` bytes. A smaller block is replaced without synchronising: the
  // stream may still read it, so it is freed at the next synchronize().
  void* ensure_workspace(Workspace& ws, std::size_t need) {
    if (need <= ws.bytes) return ws.p;
    if (ws.p != nullptr) retired.push_back(ws);
    ws = {};
    const std::size_t size = block_size_for(need);
    ws.p = device_malloc(size);
    if (ws.p == nullptr) throw std::bad_alloc();
    ws.bytes = size;
    return ws.p;
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
  // No TF32 for fp32 GEMMs: the default math mode keeps full fp32 (--check needs 1e-5). And no
  // reduced-precision reduction: a bf16 C is the fp32 sum rounded once, as on the CPU (split-K
  // partial sums are not reduced in bf16).
  BB_CHECK_CUBLAS(cublasSetMathMode(
      s.cublas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
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

void* CudaBackend::raw_allocate(std::size_t bytes) {
  impl_->bind();
  return impl_->allocate(bytes);
}

void CudaBackend::raw_free(void* p, std::size_t /*bytes*/) noexcept {
  impl_->release(p);
}

void CudaBackend::copy_to_host(const void* device_src, void* host_dst, std::size_t bytes) {
  if (bytes == 0) return;
  impl_->bind();
  BB_CHECK_CUDA(
      cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, impl_->stream));
  BB_CHECK_CUDA(cudaStreamSynchronize(impl_->stream));
}

void CudaBackend::note_parameters(const float* p, std::size_t count) {
  if (count == 0) return;
  impl_->param_ranges.emplace_back(p, p + count);
}

void CudaBackend::copy_from_host(const void* host_src, void* device_dst, std::size_t bytes) {
  if (bytes == 0) return;
  impl_->bind();
  impl_->wrote(static_cast<const float*>(device_dst), bytes / sizeof(float));
  BB_CHECK_CUDA(
      cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, impl_->stream));
  BB_CHECK_CUDA(cudaStreamSynchronize(impl_->stream));
}

namespace {

cudaDataType_t cuda_type(Dtype d) {
  return d == Dtype::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

// One past the last element of C (m×n, leading dimension ldc) of the last item of a batch.
std::size_t batch_c_extent(int m, int n, int ldc, const GemmBatch& g) {
  const std::int64_t last = (g.outer - 1) * g.outer_c + (g.inner - 1) * g.inner_c;
  return static_cast<std::size_t>(last) + static_cast<std::size_t>(m - 1) * ldc + n;
}

}  // namespace

// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands and m, n.
void CudaBackend::gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                       ConstTensorPtr a, int lda, ConstTensorPtr b, int ldb, float beta,
                       TensorPtr c, int ldc) {
  if (m <= 0 || n <= 0) return;
  Impl& s = *impl_;
  s.bind();
  s.wrote(c, static_cast<std::size_t>(m - 1) * ldc + n);
  const bool bf16 = a.dtype() == Dtype::kBF16 || b.dtype() == Dtype::kBF16 ||
                    c.dtype() == Dtype::kBF16 || s.options.gemm_dtype == GemmDtype::kBf16;
  const bool all_fp32 =
      a.dtype() == Dtype::kF32 && b.dtype() == Dtype::kF32 && c.dtype() == Dtype::kF32;
  if (all_fp32 && (!bf16 || k <= 0)) {
    BB_CHECK_CUBLAS(cublasSgemm(s.cublas, op(trans_b), op(trans_a), n, m, k, &alpha, b.f32(), ldb,
                                a.f32(), lda, &beta, c.f32(), ldc));
    return;
  }
  // bf16 operands, fp32 accumulation, C in its own dtype.
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const auto [a16, a_ld] = s.bf16_operand(a, a_rows, a_cols, lda, s.bf16_a);
  const auto [b16, b_ld] = s.bf16_operand(b, b_rows, b_cols, ldb, s.bf16_b);
  BB_CHECK_CUBLAS(cublasGemmEx(s.cublas, op(trans_b), op(trans_a), n, m, k, &alpha, b16,
                               CUDA_R_16BF, b_ld, a16, CUDA_R_16BF, a_ld, &beta, c.get(),
                               cuda_type(c.dtype()), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Operands of one dtype each (no conversion: activations): bf16 operands make a bf16 GEMM,
// fp32 ones an fp32 GEMM (also with GemmDtype::kBf16). One strided-batched call when the two
// batch levels collapse into one stride, else one pointer-array call.
void CudaBackend::gemm_batched(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                               ConstTensorPtr a, int lda, ConstTensorPtr b, int ldb, float beta,
                               TensorPtr c, int ldc, const GemmBatch& g) {
  if (m <= 0 || n <= 0 || g.count() <= 0) return;
  require_batch_dtypes("CudaBackend::gemm_batched", a, b, c);
  Impl& s = *impl_;
  s.bind();
  s.wrote(c, batch_c_extent(m, n, ldc, g));
  const bool bf16 = a.dtype() == Dtype::kBF16;
  const cudaDataType_t ab = cuda_type(a.dtype()), ct = cuda_type(c.dtype());
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // no TF32 for fp32
  // One strided-batched call of `count` items from the given bases.
  auto strided = [&](ConstTensorPtr a0, ConstTensorPtr b0, TensorPtr c0, std::int64_t sa,
                     std::int64_t sb, std::int64_t sc, int count) {
    if (!bf16 && c.dtype() == Dtype::kF32) {
      BB_CHECK_CUBLAS(cublasSgemmStridedBatched(s.cublas, op(trans_b), op(trans_a), n, m, k, &alpha,
                                                b0.f32(), ldb, sb, a0.f32(), lda, sa, &beta,
                                                c0.f32(), ldc, sc, count));
      return;
    }
    BB_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        s.cublas, op(trans_b), op(trans_a), n, m, k, &alpha, b0.get(), ab, ldb, sb, a0.get(), ab,
        lda, sa, &beta, c0.get(), ct, ldc, sc, count, compute, CUBLAS_GEMM_DEFAULT));
  };
  // One level: only one of the two, or the outer stride is `inner` inner strides.
  const bool one_level = g.outer == 1 || g.inner == 1 ||
                         (g.outer_a == g.inner * g.inner_a && g.outer_b == g.inner * g.inner_b &&
                          g.outer_c == g.inner * g.inner_c);
  if (one_level) {
    const bool by_outer = g.inner == 1;
    strided(a, b, c, by_outer ? g.outer_a : g.inner_a, by_outer ? g.outer_b : g.inner_b,
            by_outer ? g.outer_c : g.inner_c, g.count());
    return;
  }
  // cuBLAS cannot see the addresses inside pointer arrays and wants them 16-byte aligned for its
  // fast kernels: when some item would not be, one strided-batched call per outer item instead.
  auto aligned = [](ConstTensorPtr p, std::int64_t outer, std::int64_t inner) {
    const std::size_t e = dtype_size(p.dtype());
    return reinterpret_cast<std::uintptr_t>(p.get()) % 16 == 0 &&
           static_cast<std::size_t>(outer) * e % 16 == 0 &&
           static_cast<std::size_t>(inner) * e % 16 == 0;
  };
  if (!aligned(a, g.outer_a, g.inner_a) || !aligned(b, g.outer_b, g.inner_b) ||
      !aligned(c, g.outer_c, g.inner_c)) {
    for (int i = 0; i < g.outer; ++i) {
      const auto at = [i](std::int64_t outer) { return static_cast<std::size_t>(i * outer); };
      strided(a + at(g.outer_a), b + at(g.outer_b), c + at(g.outer_c), g.inner_a, g.inner_b,
              g.inner_c, g.inner);
    }
    return;
  }
  const int count = g.count();
  void* arrays =
      s.ensure_workspace(s.batch_ptrs, 3 * static_cast<std::size_t>(count) * sizeof(void*));
  kernels::BatchPointers bp{a.get(),
                            b.get(),
                            c.get(),
                            dtype_size(a.dtype()),
                            dtype_size(b.dtype()),
                            dtype_size(c.dtype()),
                            g.outer,
                            g.inner,
                            g.outer_a,
                            g.outer_b,
                            g.outer_c,
                            g.inner_a,
                            g.inner_b,
                            g.inner_c};
  void** ptrs = static_cast<void**>(arrays);
  BB_CHECK_CUDA(kernels::batch_pointers(s.stream, bp, ptrs));
  BB_CHECK_CUBLAS(cublasGemmBatchedEx(s.cublas, op(trans_b), op(trans_a), n, m, k, &alpha,
                                      ptrs + count, ab, ldb, ptrs, ab, lda, &beta, ptrs + 2 * count,
                                      ct, ldc, count, compute, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::softmax(ConstTensorPtr x, TensorPtr y, int rows, int cols, bool causal) {
  require_same_dtype("CudaBackend::softmax", x, y);
  impl_->bind();
  impl_->wrote(y, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(kernels::softmax(impl_->stream, x, y, rows, cols, causal));
}

void CudaBackend::softmax_backward(ConstTensorPtr y, ConstTensorPtr dy, TensorPtr dx, int rows,
                                   int cols) {
  require_same_dtype("CudaBackend::softmax_backward", y, dy, dx);
  impl_->bind();
  impl_->wrote(dx, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(kernels::softmax_backward(impl_->stream, y, dy, dx, rows, cols));
}

void CudaBackend::layernorm(ConstTensorPtr x, const float* gamma, const float* beta, TensorPtr y,
                            float* mean, float* rstd, int rows, int cols, float eps) {
  require_same_dtype("CudaBackend::layernorm", x, y);
  impl_->bind();
  impl_->wrote(y, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  impl_->wrote(mean, static_cast<std::size_t>(rows));
  impl_->wrote(rstd, static_cast<std::size_t>(rows));
  BB_CHECK_CUDA(kernels::layernorm(impl_->stream, x, gamma, beta, y, mean, rstd, rows, cols, eps));
}

void CudaBackend::layernorm_backward_input(ConstTensorPtr x, const float* gamma, const float* mean,
                                           const float* rstd, ConstTensorPtr dy, TensorPtr dx,
                                           int rows, int cols) {
  require_same_dtype("CudaBackend::layernorm_backward_input", x, dy, dx);
  impl_->bind();
  impl_->wrote(dx, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(
      kernels::layernorm_backward_input(impl_->stream, x, gamma, mean, rstd, dy, dx, rows, cols));
}

void CudaBackend::layernorm_backward_params(ConstTensorPtr x, const float* mean, const float* rstd,
                                            ConstTensorPtr dy, float* dgamma, float* dbeta,
                                            int rows, int cols) {
  require_same_dtype("CudaBackend::layernorm_backward_params", x, dy);
  Impl& s = *impl_;
  s.bind();
  s.wrote(dgamma, static_cast<std::size_t>(cols));
  s.wrote(dbeta, static_cast<std::size_t>(cols));
  auto* partials = static_cast<float*>(
      s.ensure_workspace(s.partials, kernels::column_partials_floats(cols) * sizeof(float)));
  BB_CHECK_CUDA(kernels::layernorm_backward_params(s.stream, x, mean, rstd, dy, dgamma, dbeta, rows,
                                                   cols, partials));
}

void CudaBackend::add_bias(TensorPtr y, const float* bias, int rows, int cols) {
  impl_->bind();
  impl_->wrote(y, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(kernels::add_bias(impl_->stream, y, bias, rows, cols));
}

void CudaBackend::column_sums(ConstTensorPtr x, float* out, int rows, int cols) {
  Impl& s = *impl_;
  s.bind();
  s.wrote(out, static_cast<std::size_t>(cols));
  auto* partials = static_cast<float*>(
      s.ensure_workspace(s.partials, kernels::column_partials_floats(cols) * sizeof(float)));
  BB_CHECK_CUDA(kernels::column_sums(s.stream, x, out, rows, cols, partials));
}

void CudaBackend::fill(TensorPtr x, float value, std::size_t count) {
  impl_->bind();
  impl_->wrote(x, count);
  BB_CHECK_CUDA(kernels::fill(impl_->stream, x, value, count));
}

void CudaBackend::copy(ConstTensorPtr src, TensorPtr dst, std::size_t count) {
  if (count == 0 || src.get() == dst.get()) return;
  impl_->bind();
  impl_->wrote(dst, count);
  if (src.dtype() != dst.dtype()) {
    BB_CHECK_CUDA(kernels::convert(impl_->stream, src, dst, count));
    return;
  }
  const auto* from = static_cast<const unsigned char*>(src.get());
  const auto* to = static_cast<const unsigned char*>(dst.get());
  const std::size_t bytes = src.bytes(count);
  if (from < to + bytes && to < from + bytes) {
    BB_CHECK_CUDA(kernels::overlapping_copy(impl_->stream, src, dst, count));
    return;
  }
  BB_CHECK_CUDA(
      cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, impl_->stream));
}

void CudaBackend::axpy(float alpha, const float* x, float* y, std::size_t count) {
  impl_->bind();
  impl_->wrote(y, count);
  BB_CHECK_CUDA(kernels::axpy(impl_->stream, alpha, x, y, count));
}

void CudaBackend::gelu(ConstTensorPtr z, TensorPtr a, std::size_t count) {
  require_same_dtype("CudaBackend::gelu", z, a);
  impl_->bind();
  impl_->wrote(a, count);
  BB_CHECK_CUDA(kernels::gelu(impl_->stream, z, a, count));
}

void CudaBackend::gelu_backward(ConstTensorPtr z, ConstTensorPtr da, TensorPtr dz,
                                std::size_t count) {
  require_same_dtype("CudaBackend::gelu_backward", z, da, dz);
  impl_->bind();
  impl_->wrote(dz, count);
  BB_CHECK_CUDA(kernels::gelu_backward(impl_->stream, z, da, dz, count));
}

void CudaBackend::mse_loss(ConstTensorPtr y, ConstTensorPtr target, TensorPtr dy, std::size_t count,
                           float scale, float* loss_sum) {
  require_same_dtype("CudaBackend::mse_loss", y, target, dy);
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

void CudaBackend::seeded_uniform(TensorPtr x, std::size_t count, std::uint64_t seed,
                                 std::uint64_t stream, float scale) {
  impl_->bind();
  impl_->wrote(x, count);
  BB_CHECK_CUDA(kernels::seeded_uniform(impl_->stream, x, count, seeded_key(seed, stream), scale));
}

void CudaBackend::seeded_tokens(std::int32_t* ids, std::size_t count, std::uint64_t seed,
                                std::uint64_t stream, std::int32_t vocab) {
  impl_->bind();
  BB_CHECK_CUDA(kernels::seeded_tokens(impl_->stream, ids, count, seeded_key(seed, stream), vocab));
}

// --- Model ends ------------------------------------------------------------------------------

void CudaBackend::embedding(const std::int32_t* ids, const float* table, const float* positions,
                            TensorPtr out, int tokens, int seq, int cols) {
  impl_->bind();
  impl_->wrote(out, static_cast<std::size_t>(tokens) * static_cast<std::size_t>(cols));
  BB_CHECK_CUDA(kernels::embedding(impl_->stream, ids, table, positions, out, tokens, seq, cols));
}

void CudaBackend::embedding_backward(const std::int32_t* ids, ConstTensorPtr dout, float* dtable,
                                     float* dpositions, int tokens, int seq, int cols) {
  Impl& s = *impl_;
  s.bind();
  // The table's rows are not known here (vocab): the ids' range bounds the sort's bits, so
  // take the widest ids can be (kernels sort on every bit below 2^24).
  constexpr int kVocabBound = 1 << 24;
  const std::size_t ints = 3 * static_cast<std::size_t>(tokens) * sizeof(std::int32_t);
  auto* base = static_cast<std::int32_t*>(s.ensure_workspace(s.sort_ints, ints));
  const std::size_t scratch = kernels::embedding_sort_scratch_bytes(tokens);
  void* sort_scratch = s.ensure_workspace(s.sort_scratch, scratch);
  const kernels::EmbeddingSort sort{base, base + tokens, base + 2 * tokens, sort_scratch,
                                    s.sort_scratch.bytes};
  BB_CHECK_CUDA(kernels::embedding_backward(s.stream, ids, dout, dtable, dpositions, tokens, seq,
                                            cols, kVocabBound, sort));
}

void CudaBackend::cross_entropy(ConstTensorPtr logits, const std::int32_t* targets,
                                TensorPtr dlogits, int rows, int cols, float scale,
                                float* loss_sum) {
  require_same_dtype("CudaBackend::cross_entropy", logits, dlogits);
  Impl& s = *impl_;
  s.bind();
  s.wrote(dlogits, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  auto* row_loss = static_cast<double*>(
      s.ensure_workspace(s.row_loss, static_cast<std::size_t>(rows) * sizeof(double)));
  BB_CHECK_CUDA(kernels::cross_entropy(s.stream, logits, targets, dlogits, rows, cols, scale,
                                       loss_sum, row_loss));
}

void CudaBackend::synchronize() {
  impl_->bind();
  BB_CHECK_CUDA(cudaStreamSynchronize(impl_->stream));
  impl_->free_retired();
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

double CudaBackend::seconds_since_origin(CUevent_st* event) {
  float ms = 0;
  const cudaError_t e = cudaEventElapsedTime(&ms, impl_->origin, event);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    throw std::logic_error("CudaBackend::seconds_since_origin: the event has not completed");
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
