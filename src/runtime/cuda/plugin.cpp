// The C entry points of libbb_cuda.so, which runtime/cuda_plugin.cpp loads with dlopen
// (declared in runtime/cuda_plugin.hpp). No exception leaves them: each becomes a status and
// a one-line message.
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include "common/error.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/nccl_transport.hpp"
#include "runtime/cuda_plugin.hpp"

namespace {

void copy_out(const std::string& text, char* out, std::size_t len) {
  if (out != nullptr && len > 0) std::snprintf(out, len, "%s", text.c_str());
}

// Runs `body`; an exception becomes status 2 (ConfigError, std::invalid_argument) or 1.
template <class F>
int guarded(char* err, std::size_t err_len, F&& body) {
  try {
    body();
    return 0;
  } catch (const bb::ConfigError& e) {
    copy_out(e.what(), err, err_len);
    return 2;
  } catch (const std::invalid_argument& e) {
    copy_out(e.what(), err, err_len);
    return 2;
  } catch (const std::exception& e) {
    copy_out(e.what(), err, err_len);
    return 1;
  } catch (...) {
    copy_out("unknown error", err, err_len);
    return 1;
  }
}

}  // namespace

extern "C" {

int bb_cuda_plugin_abi(void) {
  return bb::cuda_plugin::kCudaPluginAbi;
}

int bb_cuda_make_backend(int local_rank, int bf16, bb::Backend** out, char* err,
                         std::size_t err_len) {
  return guarded(err, err_len, [&] {
    const int devices = bb::cuda::device_count();
    if (devices == 0) throw bb::ConfigError(bb::cuda::no_device_reason());
    if (local_rank < 0) throw bb::ConfigError("negative node-local rank");
    bb::cuda::CudaBackendOptions options;
    if (bf16 != 0) options.gemm_dtype = bb::cuda::GemmDtype::kBf16;
    *out = bb::cuda::make_cuda_backend(local_rank % devices, options).release();
  });
}

int bb_cuda_make_nccl_transport(MPI_Comm comm, bb::Backend* backend, double timeout_s,
                                bb::Transport** out, char* err, std::size_t err_len) {
  return guarded(err, err_len, [&] {
    bb::cuda::NcclTransportOptions options;
    options.timeout_s = timeout_s;
    *out = bb::cuda::make_nccl_transport(comm, *backend, options).release();
  });
}

int bb_cuda_device_of(bb::Backend* backend) {
  const bb::cuda::CudaBackend* cuda = backend != nullptr ? bb::cuda::as_cuda(*backend) : nullptr;
  return cuda != nullptr ? cuda->device() : -1;
}

std::size_t bb_cuda_runtime_bytes(bb::Backend* backend) {
  const bb::cuda::CudaBackend* cuda = backend != nullptr ? bb::cuda::as_cuda(*backend) : nullptr;
  return cuda != nullptr ? cuda->runtime_bytes() : 0;
}

void bb_cuda_device_name(bb::Backend* backend, char* name, std::size_t len) {
  const bb::cuda::CudaBackend* cuda = backend != nullptr ? bb::cuda::as_cuda(*backend) : nullptr;
  copy_out(cuda != nullptr ? cuda->device_name() : std::string(), name, len);
}

void bb_cuda_versions(char* runtime, char* driver, char* nccl, std::size_t len) {
  copy_out(bb::cuda::runtime_version_string(), runtime, len);
  copy_out(bb::cuda::driver_version_string(), driver, len);
  copy_out(bb::cuda::nccl_version_string(), nccl, len);
}

int bb_cuda_memory(bb::Backend* backend, int flags, bb_cuda_memory_info* out) {
  bb::cuda::CudaBackend* cuda = backend != nullptr ? bb::cuda::as_cuda(*backend) : nullptr;
  if (cuda == nullptr || out == nullptr) return 1;
  if ((flags & 2) != 0) cuda->release_cached_memory();
  if ((flags & 1) != 0) cuda->reset_peak_memory();
  const bb::cuda::DeviceMemoryStats s = cuda->memory_stats();
  *out = bb_cuda_memory_info{s.reserved_bytes,     s.peak_reserved_bytes,    s.device_free_bytes,
                             s.device_total_bytes, s.device_peak_used_bytes, s.context_bytes,
                             s.cublas_bytes};
  return 0;
}

}  // extern "C"
