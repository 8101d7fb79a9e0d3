// Error checking for CUDA, cuBLAS and NCCL calls: each macro evaluates the call once and, on
// failure, throws bb::cuda::CudaError whose message names the file:line, the call's text and
// the library's error string, e.g.
//   src/runtime/cuda/cuda_backend.cpp:120: cudaMalloc(&p, bytes) failed: out of memory (2)
//
// Include only from translation units that see the CUDA headers (the .cu/.cpp files of
// src/runtime/cuda/); it pulls in cuda_runtime_api.h, cublas_v2.h and (under BB_HAVE_NCCL)
// nccl.h.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#ifdef BB_HAVE_NCCL
#include <nccl.h>
#endif

namespace bb::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// cuBLAS's own status names (cublasGetStatusString exists since 11.4).
inline const char* cublas_status_string(cublasStatus_t s) {
  return cublasGetStatusString(s);
}

[[noreturn]] inline void throw_error(const char* file, int line, const char* call,
                                     const std::string& what) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + call +
                  " failed: " + what);
}

inline void check_cuda(cudaError_t e, const char* file, int line, const char* call) {
  if (e == cudaSuccess) return;
  // Clear the (non-sticky) error so that later calls do not report it again.
  (void)cudaGetLastError();
  throw_error(file, line, call,
              std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + " = " +
                  std::to_string(static_cast<int>(e)) + ")");
}

inline void check_cublas(cublasStatus_t s, const char* file, int line, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw_error(
      file, line, call,
      std::string(cublas_status_string(s)) + " (" + std::to_string(static_cast<int>(s)) + ")");
}

#ifdef BB_HAVE_NCCL
inline void check_nccl(ncclResult_t r, const char* file, int line, const char* call) {
  if (r == ncclSuccess) return;
  std::string what = ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0')
    what += std::string(": ") + last;
  throw_error(file, line, call, what + " (" + std::to_string(static_cast<int>(r)) + ")");
}
#endif

}  // namespace bb::cuda

#define BB_CHECK_CUDA(call) ::bb::cuda::check_cuda((call), __FILE__, __LINE__, #call)
#define BB_CHECK_CUBLAS(call) ::bb::cuda::check_cublas((call), __FILE__, __LINE__, #call)
#ifdef BB_HAVE_NCCL
#define BB_CHECK_NCCL(call) ::bb::cuda::check_nccl((call), __FILE__, __LINE__, #call)
#endif
