// GEMM efficiency of the CUDA backend: the stage's six GEMM shapes (design §3) through
// bb::Backend::gemm against a bare cuBLAS call of the same shape on a stream of its own.
// A ratio near 1 means the backend adds nothing (row-major mapping, workspace, stream);
// TFLOP/s against the device's peak says how well the shapes suit the GPU. With bf16 the
// weight operand (W1/W2: B of the F and B GEMMs) is noted as a parameter, as in the stage, so
// the backend rounds it once and keeps the copy; activations are rounded on every call.
//
// Build (tools/gpu-check.sh does this when the binary is not prebuilt):
//   nvcc -std=c++20 --expt-relaxed-constexpr -O3 -arch=sm_90 -I src
//        tools/gemm_efficiency.cu src/runtime/cuda/cuda_backend.cpp
//        src/runtime/cuda/host_staging.cpp src/runtime/cuda/kernels.cu -lcublas -o gemm_efficiency
// Usage: gemm_efficiency [--hidden 1024,4096] [--mb-size 512,2048] [--iters 20]
//                        [--dtype fp32|bf16|both] [--device N] [--min-ratio R]
// Exit 0; 1 when --min-ratio is given and some ratio is below it; 2 on bad arguments or
// no device.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/cuda/check.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/kernels.hpp"

namespace {

struct Shape {
  const char* what;
  bb::Trans ta, tb;
  int m, n, k;
  bool b_is_weight;  // B is W1 or W2: noted as parameters, as the stage does
};

// The stage's GEMMs for micro-batch rows b and width h (stage.cpp).
std::vector<Shape> stage_shapes(int b, int h) {
  return {
      {"F  Z=X*W1      ", bb::kNoTrans, bb::kNoTrans, b, 4 * h, h, true},
      {"F  Y+=A*W2     ", bb::kNoTrans, bb::kNoTrans, b, h, 4 * h, true},
      {"B  dA=dY*W2^T  ", bb::kNoTrans, bb::kTrans, b, 4 * h, h, true},
      {"B  dX+=dZ*W1^T ", bb::kNoTrans, bb::kTrans, b, h, 4 * h, true},
      {"W  dW2+=A^T*dY ", bb::kTrans, bb::kNoTrans, 4 * h, h, b, false},
      {"W  dW1+=X^T*dZ ", bb::kTrans, bb::kNoTrans, h, 4 * h, b, false},
  };
}

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

struct Bare {
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  Bare() {
    BB_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BB_CHECK_CUBLAS(cublasCreate(&handle));
    BB_CHECK_CUBLAS(cublasSetStream(handle, stream));
    BB_CHECK_CUBLAS(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
    BB_CHECK_CUDA(cudaEventCreate(&start));
    BB_CHECK_CUDA(cudaEventCreate(&stop));
  }
  ~Bare() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cublasDestroy(handle);
    cudaStreamDestroy(stream);
  }
};

cublasOperation_t op(bb::Trans t) {
  return t ? CUBLAS_OP_T : CUBLAS_OP_N;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> hidden{1024, 4096}, rows{512, 2048};
  int iters = 20, device = 0;
  std::string dtypes = "fp32";
  double min_ratio = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gemm_efficiency: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--hidden")
        hidden = int_list(value());
      else if (a == "--mb-size")
        rows = int_list(value());
      else if (a == "--iters")
        iters = std::stoi(value());
      else if (a == "--dtype")
        dtypes = value();
      else if (a == "--device")
        device = std::stoi(value());
      else if (a == "--min-ratio")
        min_ratio = std::stod(value());
      else {
        std::fprintf(stderr, "gemm_efficiency: unknown argument %s (see the source header)\n",
                     a.c_str());
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "gemm_efficiency: bad value for %s\n", a.c_str());
      return 2;
    }
  }
  if (dtypes != "fp32" && dtypes != "bf16" && dtypes != "both") {
    std::fprintf(stderr, "gemm_efficiency: --dtype fp32, bf16 or both\n");
    return 2;
  }
  if (bb::cuda::device_count() == 0) {
    std::fprintf(stderr, "gemm_efficiency: %s\n", bb::cuda::no_device_reason().c_str());
    return 2;
  }
  try {
    BB_CHECK_CUDA(cudaSetDevice(device));
    cudaDeviceProp prop{};
    BB_CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    std::printf("device %d: %s, CUDA runtime %s, driver %s; %d iterations per shape\n", device,
                prop.name, bb::cuda::runtime_version_string().c_str(),
                bb::cuda::driver_version_string().c_str(), iters);
    std::printf("%-5s %-6s %-6s %-16s %-18s %10s %10s %9s %9s %7s\n", "dtype", "b", "h", "gemm",
                "m x n x k", "backend_ms", "cublas_ms", "be_TFLOPs", "cb_TFLOPs", "ratio");
    double worst = 1e300, log_sum = 0;
    int count = 0;
    Bare bare;
    for (const char* name : {"fp32", "bf16"}) {
      const std::string dtype = name;
      if (dtypes != "both" && dtypes != dtype) continue;
      const bool bf16 = dtype == "bf16";
      bb::cuda::CudaBackendOptions options;
      options.gemm_dtype = bf16 ? bb::cuda::GemmDtype::kBf16 : bb::cuda::GemmDtype::kFp32;
      options.calibrate_spin_at_start = false;
      bb::cuda::CudaBackend be(device, options);
      for (const int b : rows)
        for (const int h : hidden) {
          for (const Shape& s : stage_shapes(b, h)) {
            const int a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
            const int b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
            const std::size_t a_count = static_cast<std::size_t>(a_rows) * a_cols;
            const std::size_t b_count = static_cast<std::size_t>(b_rows) * b_cols;
            const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
            bb::Buffer A = be.allocate(a_count), B = be.allocate(b_count), C = be.allocate(c_count);
            be.seeded_uniform(A.data(), a_count, 1, 1, 0.1f);
            be.seeded_uniform(B.data(), b_count, 1, 2, 0.1f);
            be.fill(C.data(), 0.0f, c_count);
            if (s.b_is_weight) be.note_parameters(B.data(), b_count);
            auto run_backend = [&] {
              be.gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, A.data(), a_cols, B.data(), b_cols, 1.0f,
                      C.data(), s.n);
            };
            // Bare cuBLAS: fp32 cublasSgemm, or bf16 operands already converted (so the ratio
            // shows what the backend's conversion costs: the activations' on every call, the
            // weights' once, as in a step where the optimizer writes them after the GEMMs).
            void* a16 = nullptr;
            void* b16 = nullptr;
            if (bf16) {
              BB_CHECK_CUDA(cudaMalloc(&a16, a_count * 2));
              BB_CHECK_CUDA(cudaMalloc(&b16, b_count * 2));
              BB_CHECK_CUDA(
                  bb::cuda::kernels::to_bf16(bare.stream, A.data(), a_rows, a_cols, a_cols, a16));
              BB_CHECK_CUDA(
                  bb::cuda::kernels::to_bf16(bare.stream, B.data(), b_rows, b_cols, b_cols, b16));
            }
            const float one = 1.0f;
            auto run_bare = [&] {
              if (!bf16)
                BB_CHECK_CUBLAS(cublasSgemm(bare.handle, op(s.tb), op(s.ta), s.n, s.m, s.k, &one,
                                            B.data(), b_cols, A.data(), a_cols, &one, C.data(),
                                            s.n));
              else
                BB_CHECK_CUBLAS(cublasGemmEx(bare.handle, op(s.tb), op(s.ta), s.n, s.m, s.k, &one,
                                             b16, CUDA_R_16BF, b_cols, a16, CUDA_R_16BF, a_cols,
                                             &one, C.data(), CUDA_R_32F, s.n, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT));
            };
            be.synchronize();
            // Warm-up, then time `iters` calls of each.
            for (int i = 0; i < 3; ++i) run_backend();
            be.begin_marks();
            const std::size_t m0 = be.mark();
            for (int i = 0; i < iters; ++i) run_backend();
            const std::size_t m1 = be.mark();
            be.synchronize();
            const double backend_s = (be.mark_seconds(m1) - be.mark_seconds(m0)) / iters;
            for (int i = 0; i < 3; ++i) run_bare();
            BB_CHECK_CUDA(cudaEventRecord(bare.start, bare.stream));
            for (int i = 0; i < iters; ++i) run_bare();
            BB_CHECK_CUDA(cudaEventRecord(bare.stop, bare.stream));
            BB_CHECK_CUDA(cudaEventSynchronize(bare.stop));
            float ms = 0;
            BB_CHECK_CUDA(cudaEventElapsedTime(&ms, bare.start, bare.stop));
            const double bare_s = ms * 1e-3 / iters;
            if (a16 != nullptr) BB_CHECK_CUDA(cudaFree(a16));
            if (b16 != nullptr) BB_CHECK_CUDA(cudaFree(b16));
            const double flops = 2.0 * s.m * s.n * s.k;
            const double ratio = bare_s / backend_s;  // > 1: the backend is faster
            worst = std::min(worst, ratio);
            log_sum += std::log(ratio);
            ++count;
            char dims[64];
            std::snprintf(dims, sizeof dims, "%dx%dx%d", s.m, s.n, s.k);
            std::printf("%-5s %-6d %-6d %-16s %-18s %10.4f %10.4f %9.2f %9.2f %7.3f\n",
                        dtype.c_str(), b, h, s.what, dims, backend_s * 1e3, bare_s * 1e3,
                        flops / backend_s * 1e-12, flops / bare_s * 1e-12, ratio);
          }
        }
    }
    if (count == 0) return 2;
    const double geomean = std::exp(log_sum / count);
    std::printf(
        "GEMM efficiency (cuBLAS time / backend time): min %.3f, geometric mean %.3f "
        "over %d shapes\n",
        worst, geomean, count);
    if (min_ratio > 0 && worst < min_ratio) {
      std::printf("FAIL: a ratio is below --min-ratio %.3f\n", min_ratio);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_efficiency: %s\n", e.what());
    return 1;
  }
  return 0;
}
