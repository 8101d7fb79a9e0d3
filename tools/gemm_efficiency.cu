// GEMM efficiency of the CUDA backend: the transformer presets' GEMM shapes (tokens × the QKV
// projection, the attention output, the MLP's up and down projections and the LM head, each as
// F: Y = X·W, B: dX = dY·Wᵀ and W: dW += Xᵀ·dY) through bb::Backend::gemm, against a bare cuBLAS
// call of the same shape on a stream of its own. A ratio near 1 means the backend adds nothing
// (row-major mapping, workspace, stream, conversions); TFLOP/s against the device's peak says
// how well the shapes suit the GPU.
//
// The operands are what a step has: fp32 runs have fp32 tensors; bf16 runs have bf16
// activations and activation gradients (X, dY, and C of F and B), fp32 master weights (W, noted
// as parameters: the backend rounds each to bf16 once and keeps the copy, as in a step) and
// fp32 weight gradients (C of W, accumulated). The bare call gets the same dtypes, with the
// weight already in bf16.
//
// Built by CMake with the CUDA plugin (target gemm_efficiency); tools/pack-gpu.sh carries it.
// Usage: gemm_efficiency [--model gpt2-small,gpt-1b] [--tokens 8192] [--dtype fp32|bf16|both]
//                        [--iters 20] [--device N] [--min-ratio-fp32 R] [--min-ratio-bf16 R]
// Exit 0; 1 when a ratio of a dtype is below its --min-ratio; 2 on bad arguments or no device.
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

namespace {

// The presets' widths (bench/cli/stage_options.cpp): hidden, MLP width, vocabulary.
struct Model {
  const char* name;
  int h, f, V;
};
constexpr Model kModels[] = {{"gpt2-small", 768, 3072, 50257}, {"gpt-1b", 2048, 8192, 50257}};

struct Shape {
  std::string what;
  bb::Trans ta, tb;
  int m, n, k;
  bool b_is_weight;  // B is a weight: noted as a parameter (F and B passes)
  bool c_is_grad;    // C is a weight gradient: fp32, accumulated (W pass)
};

// Y[T×N] = X[T×K]·W[K×N]; dX[T×K] = dY[T×N]·Wᵀ; dW[K×N] += Xᵀ·dY.
void add_layer(std::vector<Shape>& out, const char* layer, int T, int N, int K) {
  out.push_back({std::string("F ") + layer, bb::kNoTrans, bb::kNoTrans, T, N, K, true, false});
  out.push_back({std::string("B ") + layer, bb::kNoTrans, bb::kTrans, T, K, N, true, false});
  out.push_back({std::string("W ") + layer, bb::kTrans, bb::kNoTrans, K, N, T, false, true});
}

std::vector<Shape> model_shapes(const Model& m, int T) {
  std::vector<Shape> s;
  add_layer(s, "qkv", T, 3 * m.h, m.h);
  add_layer(s, "attn-out", T, m.h, m.h);
  add_layer(s, "mlp-up", T, m.f, m.h);
  add_layer(s, "mlp-down", T, m.h, m.f);
  add_layer(s, "lm-head", T, m.V, m.h);
  return s;
}

std::vector<std::string> text_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

struct Bare {
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  void* workspace = nullptr;
  Bare() {
    BB_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BB_CHECK_CUBLAS(cublasCreate(&handle));
    BB_CHECK_CUBLAS(cublasSetStream(handle, stream));
    // As the backend: no TF32, no reduced-precision reduction of bf16 outputs.
    BB_CHECK_CUBLAS(cublasSetMathMode(
        handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    // The backend's workspace size (CudaBackendOptions), so that both may pick the same kernels.
    const std::size_t bytes = std::size_t{32} << 20;
    BB_CHECK_CUDA(cudaMalloc(&workspace, bytes));
    BB_CHECK_CUBLAS(cublasSetWorkspace(handle, workspace, bytes));
    BB_CHECK_CUDA(cudaEventCreate(&start));
    BB_CHECK_CUDA(cudaEventCreate(&stop));
  }
  ~Bare() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cublasDestroy(handle);
    cudaFree(workspace);
    cudaStreamDestroy(stream);
  }
};

cublasOperation_t op(bb::Trans t) {
  return t ? CUBLAS_OP_T : CUBLAS_OP_N;
}

struct Totals {
  double worst = 1e300, log_sum = 0;
  int count = 0;
};

// One shape: `iters` calls through the backend and bare, after a warm-up; returns the ratio.
double measure(bb::cuda::CudaBackend& be, Bare& bare, const Shape& s, bool bf16, int iters) {
  const int a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
  const int b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
  const std::size_t a_count = static_cast<std::size_t>(a_rows) * a_cols;
  const std::size_t b_count = static_cast<std::size_t>(b_rows) * b_cols;
  const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
  const bb::Dtype act = bf16 ? bb::Dtype::kBF16 : bb::Dtype::kF32;
  // A: an activation (or its gradient); B: a weight (fp32) or an activation gradient; C: an
  // activation or a weight gradient (fp32).
  bb::Buffer A = be.allocate(a_count, act);
  bb::Buffer B = be.allocate(b_count, s.b_is_weight ? bb::Dtype::kF32 : act);
  bb::Buffer C = be.allocate(c_count, s.c_is_grad ? bb::Dtype::kF32 : act);
  be.seeded_uniform(A.ptr(), a_count, 1, 1, 0.1f);
  be.seeded_uniform(B.ptr(), b_count, 1, 2, 0.1f);
  be.fill(C.ptr(), 0.0f, c_count);
  if (s.b_is_weight) be.note_parameters(B.data(), b_count);
  const float beta = s.c_is_grad ? 1.0f : 0.0f;
  auto run_backend = [&] {
    be.gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, A.ptr(), a_cols, B.ptr(), b_cols, beta, C.ptr(), s.n);
  };
  // Bare: the same dtypes, a weight already in bf16.
  bb::Buffer b16;
  if (bf16 && s.b_is_weight) {
    b16 = be.allocate(b_count, bb::Dtype::kBF16);
    be.copy(B.ptr(), b16.ptr(), b_count);
  }
  const void* bare_b = b16.empty() ? B.raw() : b16.raw();
  const float one = 1.0f;
  auto run_bare = [&] {
    if (!bf16)
      BB_CHECK_CUBLAS(cublasSgemm(bare.handle, op(s.tb), op(s.ta), s.n, s.m, s.k, &one,
                                  static_cast<const float*>(bare_b), b_cols, A.data(), a_cols,
                                  &beta, C.data(), s.n));
    else
      BB_CHECK_CUBLAS(cublasGemmEx(bare.handle, op(s.tb), op(s.ta), s.n, s.m, s.k, &one, bare_b,
                                   CUDA_R_16BF, b_cols, A.raw(), CUDA_R_16BF, a_cols, &beta,
                                   C.raw(), s.c_is_grad ? CUDA_R_32F : CUDA_R_16BF, s.n,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  // Both timings start behind queued warm-up calls (begin_marks synchronises: warm up after it).
  be.synchronize();
  be.begin_marks();
  for (int i = 0; i < 3; ++i) run_backend();
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
  const double flops = 2.0 * s.m * s.n * s.k;
  const double ratio = bare_s / backend_s;  // > 1: the backend is faster
  char dims[64];
  std::snprintf(dims, sizeof dims, "%dx%dx%d", s.m, s.n, s.k);
  std::printf("%-5s %-16s %-20s %10.4f %10.4f %9.2f %9.2f %7.3f\n", bf16 ? "bf16" : "fp32",
              s.what.c_str(), dims, backend_s * 1e3, bare_s * 1e3, flops / backend_s * 1e-12,
              flops / bare_s * 1e-12, ratio);
  return ratio;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models{"gpt2-small", "gpt-1b"};
  int tokens = 8192, iters = 20, device = 0;
  std::string dtypes = "both";
  double min_ratio[2] = {0, 0};  // fp32, bf16
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
      if (a == "--model")
        models = text_list(value());
      else if (a == "--tokens")
        tokens = std::stoi(value());
      else if (a == "--iters")
        iters = std::stoi(value());
      else if (a == "--dtype")
        dtypes = value();
      else if (a == "--device")
        device = std::stoi(value());
      else if (a == "--min-ratio-fp32")
        min_ratio[0] = std::stod(value());
      else if (a == "--min-ratio-bf16")
        min_ratio[1] = std::stod(value());
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
  std::vector<const Model*> chosen;
  for (const std::string& name : models) {
    const Model* m = nullptr;
    for (const Model& k : kModels)
      if (name == k.name) m = &k;
    if (m == nullptr) {
      std::fprintf(stderr, "gemm_efficiency: --model %s: unknown (gpt2-small, gpt-1b)\n",
                   name.c_str());
      return 2;
    }
    chosen.push_back(m);
  }
  if (bb::cuda::device_count() == 0) {
    std::fprintf(stderr, "gemm_efficiency: %s\n", bb::cuda::no_device_reason().c_str());
    return 2;
  }
  try {
    BB_CHECK_CUDA(cudaSetDevice(device));
    cudaDeviceProp prop{};
    BB_CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    std::printf("device %d: %s, CUDA runtime %s, driver %s; %d tokens, %d iterations per shape\n",
                device, prop.name, bb::cuda::runtime_version_string().c_str(),
                bb::cuda::driver_version_string().c_str(), tokens, iters);
    std::printf("%-5s %-16s %-20s %10s %10s %9s %9s %7s\n", "dtype", "gemm", "m x n x k",
                "backend_ms", "cublas_ms", "be_TFLOPs", "cb_TFLOPs", "ratio");
    Totals totals[2];
    Bare bare;
    for (int d = 0; d < 2; ++d) {
      const bool bf16 = d == 1;
      if (dtypes != "both" && dtypes != (bf16 ? "bf16" : "fp32")) continue;
      bb::cuda::CudaBackendOptions options;
      options.calibrate_spin_at_start = false;
      bb::cuda::CudaBackend be(device, options);
      for (const Model* m : chosen) {
        std::printf("-- %s (h %d, f %d, V %d)\n", m->name, m->h, m->f, m->V);
        for (const Shape& s : model_shapes(*m, tokens)) {
          const double ratio = measure(be, bare, s, bf16, iters);
          totals[d].worst = std::min(totals[d].worst, ratio);
          totals[d].log_sum += std::log(ratio);
          ++totals[d].count;
        }
      }
    }
    int failed = 0;
    for (int d = 0; d < 2; ++d) {
      if (totals[d].count == 0) continue;
      const double geomean = std::exp(totals[d].log_sum / totals[d].count);
      std::printf(
          "GEMM efficiency %s (cuBLAS time / backend time): min %.3f, geometric mean %.3f over "
          "%d shapes%s\n",
          d == 1 ? "bf16" : "fp32", totals[d].worst, geomean, totals[d].count,
          min_ratio[d] > 0 && totals[d].worst < min_ratio[d] ? " BELOW the gate" : "");
      if (min_ratio[d] > 0 && totals[d].worst < min_ratio[d]) ++failed;
    }
    return failed > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_efficiency: %s\n", e.what());
    return 1;
  }
}
