// CUDA implementation of bb::Backend (design §3, §7): cuBLAS GEMMs and small kernels on one
// compute stream, a caching device allocator, CUDA-event timing marks and a calibrated spin
// kernel for the synthetic compute mode.
//
// This header is plain C++ (g++ can include it): CUDA handles appear only as pointers to the
// driver's opaque structs (cudaStream_t is CUstream_st*). The definitions live in
// src/runtime/cuda/ and exist only when the build found CUDA (BB_HAVE_CUDA=1), so callers
// guard their use with #ifdef BB_HAVE_CUDA.
//
// Threading: a CudaBackend is used from one host thread (the executor's). Its constructor
// binds that thread to the device (cudaSetDevice); every call re-binds it, which is cheap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/backend.hpp"

struct CUstream_st;  // cudaStream_t
struct CUevent_st;   // cudaEvent_t

namespace bb::cuda {

// Number of usable CUDA devices; 0 on any error (no driver, the stub libcuda, no device,
// CUDA_VISIBLE_DEVICES empty...). Never throws.
int device_count();
// One line: "" when device_count() > 0, else why not, e.g.
// "no CUDA device (cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime
// version, error 35)".
std::string no_device_reason();
// "13.0" (runtime) and the driver's "13.0" or "none"; for the HDF5 root attributes.
std::string runtime_version_string();
std::string driver_version_string();

// Arithmetic of gemm() on fp32 operands. A GEMM with a bf16 operand (a bf16 run's
// activations) is always a bf16 GEMM: fp32 operands (parameters) are rounded to bf16, the
// products accumulated in fp32 (cublasGemmEx, CUBLAS_COMPUTE_32F), C written in its dtype.
// kBf16 makes gemm() of all-fp32 operands a bf16 GEMM too (batched GEMMs of fp32 operands stay
// fp32). fp32 GEMMs never use TF32 (CUBLAS_DEFAULT_MATH; NVIDIA_TF32_OVERRIDE cannot turn it
// on), so --check reaches 1e-5.
enum class GemmDtype { kFp32, kBf16 };

// Clock of the synthetic-compute spin kernel.
enum class SpinClock {
  kClock64,      // SM cycles (clock64), converted with a rate calibrated against CUDA events
  kGlobalTimer,  // the GPU's nanosecond %globaltimer: no calibration, immune to clock changes
};

struct CudaBackendOptions {
  GemmDtype gemm_dtype = GemmDtype::kFp32;
  SpinClock spin_clock = SpinClock::kClock64;
  // cuBLAS workspace, allocated once at construction (so no GEMM allocates).
  std::size_t cublas_workspace_bytes = std::size_t{32} << 20;
  // Calibrate the spin kernel in the constructor (about 50 ms); otherwise at the first
  // spin_for/sleep_for.
  bool calibrate_spin_at_start = true;
};

// Device memory as seen by the caching allocator and by the driver.
struct DeviceMemoryStats {
  std::size_t in_use_bytes = 0;  // blocks handed out (rounded sizes)
  std::size_t peak_in_use_bytes = 0;
  std::size_t reserved_bytes = 0;       // obtained with cudaMalloc: in use + cached + workspaces
  std::size_t peak_reserved_bytes = 0;  // the allocator's high-water mark
  std::size_t cached_bytes = 0;         // free blocks kept for reuse
  std::uint64_t device_mallocs = 0;     // cudaMalloc calls so far (workspaces included)
  std::uint64_t cache_hits = 0;         // allocations served from the cache
  std::size_t device_free_bytes = 0;    // cudaMemGetInfo, sampled by memory_stats()
  std::size_t device_total_bytes = 0;
  // Largest (total − free) seen by cudaMemGetInfo at any cudaMalloc or memory_stats() call:
  // the device's peak including the CUDA context, cuBLAS and NCCL (and other processes).
  std::size_t device_peak_used_bytes = 0;
  // Measured while the backend was made, as (total − free) from cudaMemGetInfo: once the CUDA
  // context exists (with the device to itself, the context alone; anything else on the device
  // counts too), and what the cuBLAS handle and its workspace added to that.
  std::size_t context_bytes = 0;
  std::size_t cublas_bytes = 0;
};

class CudaBackend final : public Backend {
 public:
  // Binds the calling thread to `device` (the caller passes the node-local rank modulo
  // device_count()), creates the compute stream, the cuBLAS handle and the workspaces.
  // Throws bb::cuda::CudaError (a std::runtime_error) when CUDA fails.
  explicit CudaBackend(int device, const CudaBackendOptions& options = {});
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  BackendKind kind() const override { return BackendKind::kCuda; }
  // context_bytes + cublas_bytes of memory_stats(); cudaGetDeviceProperties' name.
  std::size_t runtime_bytes() const;
  std::string device_name() const;

  // With GemmDtype::kBf16, a GEMM operand inside noted parameters is rounded to bf16 once and
  // kept (bf16 bytes: half the operand's fp32 bytes, in memory_stats' reserved bytes), until a
  // kernel or copy of this backend writes to it or its Buffer is freed. Other operands are
  // rounded on every call.
  void note_parameters(const float* p, std::size_t count) override;
  bool device_is_host() const override { return false; }
  // Pinned host buffers and copies on two streams of their own (host_staging.hpp).
  std::unique_ptr<HostStaging> make_host_staging() override;

  // The kernels of Backend both backends define (backend.hpp says what each computes). A
  // two-level GemmBatch (attention: sequences × heads) is one cublasGemmBatchedEx call on
  // pointer arrays a small kernel writes; a one-level one is one strided-batched call.
  // Workspaces (column-reduction partials, pointer arrays, sort scratch, bf16 operands) grow
  // on first use (the warm-up) and never synchronise: a replaced block is freed at the next
  // synchronize().
#include "runtime/backend_kernels.inc"

  void synchronize() override;
  bool queue_done() override;
  double now() override;  // host steady_clock, like the CPU backend
  // Both enqueue the spin kernel on the compute stream and return at once; sleep_for naps
  // (__nanosleep) between clock polls, which saves power but not time.
  void sleep_for(double seconds) override;
  void spin_for(double seconds) override;

  // CUDA events on the compute stream. begin_marks() synchronises the compute stream, takes
  // the host origin (mark_origin()) and records the origin event, so mark_seconds() (event
  // time since the origin event) and host times since mark_origin() share one time base.
  // mark_seconds() throws when the mark has not completed (call synchronize() first).
  void begin_marks() override;
  std::size_t mark() override;
  double mark_seconds(std::size_t id) override;
  // Seconds from the origin event to `event` (a completed CUDA event recorded on any stream
  // of this device, as cudaEvent_t): how the NCCL transport times its operations on the same
  // clock as the marks. Throws when the event has not completed.
  double seconds_since_origin(CUevent_st* event);

  // --- CUDA specifics -----------------------------------------------------------------
  int device() const;
  CUstream_st* stream() const;  // the compute stream, as cudaStream_t
  const CudaBackendOptions& options() const;
  GemmDtype gemm_dtype() const;
  void set_gemm_dtype(GemmDtype dtype);

  DeviceMemoryStats memory_stats();  // samples cudaMemGetInfo
  void reset_peak_memory();          // peaks := current values
  // Returns cached blocks to the driver (synchronises the device).
  void release_cached_memory();

  // Re-measures the spin kernel's clock rate against CUDA events (synchronises); returns
  // clock64 ticks per second. spin_ticks_per_second() is the rate in use (0 before the
  // first calibration; 1e9 with SpinClock::kGlobalTimer).
  double calibrate_spin();
  double spin_ticks_per_second() const;

  struct Impl;

 protected:
  void* raw_allocate(std::size_t bytes) override;
  void raw_free(void* p, std::size_t bytes) noexcept override;

 private:
  std::unique_ptr<Impl> impl_;
};

// The CudaBackend behind `backend`, or null when it is another backend.
CudaBackend* as_cuda(Backend& backend);

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaBackendOptions& options = {});

}  // namespace bb::cuda
