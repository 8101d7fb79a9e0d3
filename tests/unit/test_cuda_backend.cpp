// CUDA backend, host staging and NCCL transport (src/runtime/cuda/). Every test suite starts
// with "Cuda" (gpu-check.sh runs --gtest_filter='Cuda*'). Without a usable device each test
// that needs one is skipped with "skipped: no CUDA device (...)" — never passed silently.
// The NCCL test needs `mpiexec -n 2` and two GPUs; otherwise it skips saying so.
// Without CUDA in the build this file compiles to nothing.
#ifdef BB_HAVE_CUDA

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "runtime/backend.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/cuda/check.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/host_staging.hpp"
#include "runtime/cuda/kernels.hpp"
#include "runtime/cuda/nccl_transport.hpp"
#include "runtime/factory.hpp"
#include "runtime/reference.hpp"
#include "runtime/stage.hpp"
#include "runtime/transport.hpp"
#include "stage_config_util.hpp"

namespace bb {
namespace {

// GTEST_SKIP returns from the enclosing function, so this must be a macro.
#define BB_REQUIRE_CUDA()                                            \
  do {                                                               \
    if (::bb::cuda::device_count() == 0)                             \
      GTEST_SKIP() << "skipped: " << ::bb::cuda::no_device_reason(); \
  } while (0)

std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                 float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

Buffer upload(Backend& be, const std::vector<float>& v) {
  Buffer b = be.allocate(v.size());
  be.from_host(v.data(), b.data(), v.size());
  return b;
}

std::vector<float> download(Backend& be, const Buffer& b) {
  return be.download(b.data(), b.size());
}

// Index of the first element whose bits differ, or -1.
long first_bit_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]))
      return static_cast<long>(i);
  return -1;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

using test::stage_config;

// --- Without a device ------------------------------------------------------------------------

TEST(CudaDevice, CountAndReasonAgree) {
  const int n = cuda::device_count();
  const std::string reason = cuda::no_device_reason();
  EXPECT_GE(n, 0);
  EXPECT_EQ(n == 0, !reason.empty()) << reason;
  if (n == 0) {
    EXPECT_EQ(reason.rfind("no CUDA device (cudaGetDeviceCount", 0), 0u) << reason;
    // Construction fails with the same one-line reason, not a crash.
    try {
      cuda::make_cuda_backend(0);
      ADD_FAILURE() << "make_cuda_backend succeeded without a device";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(cuda::runtime_version_string().empty());
}

TEST(CudaCheck, MacrosThrowWithLocationCallAndMessage) {
  try {
    BB_CHECK_CUDA(cudaErrorInvalidValue);
    ADD_FAILURE() << "no throw";
  } catch (const cuda::CudaError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test_cuda_backend.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("invalid argument"), std::string::npos) << what;
  }
  try {
    BB_CHECK_CUBLAS(CUBLAS_STATUS_NOT_INITIALIZED);
    ADD_FAILURE() << "no throw";
  } catch (const cuda::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos)
        << e.what();
  }
#ifdef BB_HAVE_NCCL
  EXPECT_THROW(BB_CHECK_NCCL(ncclInvalidArgument), cuda::CudaError);
#endif
  EXPECT_NO_THROW(BB_CHECK_CUDA(cudaSuccess));
}

TEST(CudaNccl, NeedsTheCudaBackend) {
  CpuBackend cpu;
  if (!cuda::nccl_available()) {
    EXPECT_THROW(cuda::make_nccl_transport(MPI_COMM_WORLD, cpu), std::runtime_error);
    return;
  }
  // Rejected before any MPI or NCCL call, so this runs without MPI_Init and without a GPU.
  EXPECT_THROW(cuda::make_nccl_transport(MPI_COMM_WORLD, cpu), std::invalid_argument);
  EXPECT_NE(cuda::nccl_version_string(), "none");
}

TEST(CudaStaging, NeedsTheCudaBackend) {
  CpuBackend cpu;
  EXPECT_THROW(cuda::PinnedStaging staging(cpu), std::invalid_argument);
  EXPECT_EQ(cuda::as_cuda(cpu), nullptr);
}

// `run` passes the node-local rank: ranks beyond the node's device count share GPUs round-robin
// (e.g. two ranks on a one-GPU machine with --transport mpi), never "device out of range".
TEST(CudaFactory, LocalRankWrapsAroundTheDevices) {
  BB_REQUIRE_CUDA();
  const int n = cuda::device_count();
  for (int local_rank : {0, n - 1, n, 2 * n + 1}) {
    std::unique_ptr<Backend> be = make_backend(BackendKind::kCuda, local_rank);
    const cuda::CudaBackend* cb = cuda::as_cuda(*be);
    ASSERT_NE(cb, nullptr);
    EXPECT_EQ(cb->device(), local_rank % n) << "local rank " << local_rank;
  }
  EXPECT_THROW(make_backend(BackendKind::kCuda, -1), ConfigError);
}

// --- Kernels vs the CPU backend --------------------------------------------------------------

TEST(CudaBackend, ElementwiseKernelsMatchCpu) {
  BB_REQUIRE_CUDA();
  auto gpu = cuda::make_cuda_backend(0);
  CpuBackend cpu;
  ASSERT_EQ(gpu->name(), "cuda");
  // Larger than one grid (1024 blocks × 256 threads): the grid-stride loops wrap.
  const std::size_t n = 300'001;
  const auto x = random_vector(n, 1, -4.0f, 4.0f), y = random_vector(n, 2, -4.0f, 4.0f);
  const auto g = random_vector(n, 3);
  Backend* both[2] = {&cpu, gpu.get()};
  std::vector<float> out[2][8];
  for (int i = 0; i < 2; ++i) {
    Backend& be = *both[i];
    Buffer bx = upload(be, x), by = upload(be, y), bg = upload(be, g), tmp = be.allocate(n);
    be.fill(tmp.data(), 0.375f, n);
    out[i][0] = download(be, tmp);
    be.copy(bx.data(), tmp.data(), n);
    out[i][1] = download(be, tmp);
    be.axpy(-0.7f, bx.data(), by.data(), n);
    out[i][2] = download(be, by);
    be.gelu(bx.data(), tmp.data(), n);
    out[i][3] = download(be, tmp);
    be.gelu_backward(bx.data(), bg.data(), tmp.data(), n);
    out[i][4] = download(be, tmp);
    be.sgd_update(bx.data(), bg.data(), n, 0.01f);
    out[i][5] = download(be, bx);
    // In place, as the stage calls them: gelu(a aliases z), gelu' (dz aliases z).
    be.copy(bg.data(), tmp.data(), n);
    be.gelu(tmp.data(), tmp.data(), n);
    be.gelu_backward(tmp.data(), bg.data(), tmp.data(), n);
    out[i][6] = download(be, tmp);
  }
  EXPECT_EQ(first_bit_difference(out[0][0], out[1][0]), -1) << "fill";
  EXPECT_EQ(first_bit_difference(out[0][1], out[1][1]), -1) << "copy";
  EXPECT_EQ(first_bit_difference(out[0][2], out[1][2]), -1) << "axpy";
  EXPECT_LE(max_abs_difference(out[0][3], out[1][3]), 2e-6) << "gelu";
  EXPECT_LE(max_abs_difference(out[0][4], out[1][4]), 2e-6) << "gelu_backward";
  EXPECT_EQ(first_bit_difference(out[0][5], out[1][5]), -1) << "sgd";
  EXPECT_LE(max_abs_difference(out[0][6], out[1][6]), 2e-6) << "gelu in place";
}

TEST(CudaBackend, MseLossMatchesCpu) {
  BB_REQUIRE_CUDA();
  auto gpu = cuda::make_cuda_backend(0);
  CpuBackend cpu;
  for (const std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{777'777}}) {
    const auto y = random_vector(n, 7), t = random_vector(n, 8);
    const float scale = 1.0f / static_cast<float>(3 * n);
    float loss[2];
    std::vector<float> dy[2], dy_alias[2];
    Backend* both[2] = {&cpu, gpu.get()};
    for (int i = 0; i < 2; ++i) {
      Backend& be = *both[i];
      Buffer by = upload(be, y), bt = upload(be, t), bdy = be.allocate(n),
             sum = upload(be, {0.25f});
      be.mse_loss(by.data(), bt.data(), bdy.data(), n, scale, sum.data());
      dy[i] = download(be, bdy);
      be.mse_loss(by.data(), bt.data(), by.data(), n, scale, sum.data());  // dy aliases y
      dy_alias[i] = download(be, by);
      loss[i] = download(be, sum)[0];
    }
    EXPECT_EQ(first_bit_difference(dy[0], dy[1]), -1) << n;
    EXPECT_EQ(first_bit_difference(dy_alias[0], dy_alias[1]), -1) << n;
    EXPECT_NEAR(loss[1], loss[0], 1e-6 * std::abs(loss[0])) << n;
  }
}

TEST(CudaBackend, AdamMatchesCpu) {
  BB_REQUIRE_CUDA();
  auto gpu = cuda::make_cuda_backend(0);
  CpuBackend cpu;
  const std::size_t n = 100'003;
  const auto p0 = random_vector(n, 11);
  const AdamParams params{0.01f, 0.9f, 0.999f, 1e-8f};
  std::vector<float> p[2], m[2], v[2];
  Backend* both[2] = {&cpu, gpu.get()};
  for (int i = 0; i < 2; ++i) {
    Backend& be = *both[i];
    Buffer bp = upload(be, p0), bm = be.allocate(n), bv = be.allocate(n);
    be.fill(bm.data(), 0.0f, n);
    be.fill(bv.data(), 0.0f, n);
    for (int step = 1; step <= 5; ++step) {
      Buffer bg = upload(be, random_vector(n, 100 + step));
      be.adam_update(bp.data(), bg.data(), bm.data(), bv.data(), n, params, step);
    }
    p[i] = download(be, bp);
    m[i] = download(be, bm);
    v[i] = download(be, bv);
  }
  // Written with correctly rounded intrinsics: the same bits as the CPU's loop.
  EXPECT_EQ(first_bit_difference(m[0], m[1]), -1);
  EXPECT_EQ(first_bit_difference(v[0], v[1]), -1);
  EXPECT_EQ(first_bit_difference(p[0], p[1]), -1);
  EXPECT_LT(relative_error(p[0], p[1]), 1e-7);
}

TEST(CudaBackend, SeededUniformIsBitIdenticalToCpu) {
  BB_REQUIRE_CUDA();
  auto gpu = cuda::make_cuda_backend(0);
  CpuBackend cpu;
  const std::size_t n = (std::size_t{1} << 20) + 7;
  for (const auto& [seed, stream, scale] :
       {std::tuple<std::uint64_t, std::uint64_t, float>{0, 0, 1.0f},
        {1234, seed_stream(SeedKind::kW1, 3), 0.0625f},
        {~0ull, seed_stream(SeedKind::kTarget, 99), 0.3f}}) {
    Buffer a = cpu.allocate(n), b = gpu->allocate(n);
    cpu.seeded_uniform(a.data(), n, seed, stream, scale);
    gpu->seeded_uniform(b.data(), n, seed, stream, scale);
    EXPECT_EQ(first_bit_difference(download(cpu, a), download(*gpu, b)), -1) << seed;
  }
}

TEST(CudaBackend, GemmAllTransposesMatchCpu) {
  BB_REQUIRE_CUDA();
  auto gpu = cuda::make_cuda_backend(0);
  CpuBackend cpu;
  // Odd sizes, padded leading dimensions, and the stage's shapes (b×h · h×4h etc.).
  struct Shape {
    int m, n, k, pad;
  };
  for (const Shape s : {Shape{37, 53, 29, 3}, Shape{1, 1, 1, 0}, Shape{64, 256, 64, 0},
                        Shape{256, 64, 32, 0}, Shape{64, 64, 256, 5}}) {
    for (Trans ta : {kNoTrans, kTrans})
      for (Trans tb : {kNoTrans, kTrans}) {
        const int a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
        const int b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
        const int lda = a_cols + s.pad, ldb = b_cols + s.pad, ldc = s.n + s.pad;
        const auto a = random_vector(static_cast<std::size_t>(a_rows) * lda, 21);
        const auto b = random_vector(static_cast<std::size_t>(b_rows) * ldb, 22);
        const auto c = random_vector(static_cast<std::size_t>(s.m) * ldc, 23);
        std::vector<float> got[2];
        Backend* both[2] = {&cpu, gpu.get()};
        for (int i = 0; i < 2; ++i) {
          Backend& be = *both[i];
          Buffer da = upload(be, a), db = upload(be, b), dc = upload(be, c);
          be.gemm(ta, tb, s.m, s.n, s.k, 1.25f, da.data(), lda, db.data(), ldb, -0.5f, dc.data(),
                  ldc);
          got[i] = download(be, dc);
        }
        EXPECT_LT(relative_error(got[0], got[1]), 1e-6)
            << s.m << "x" << s.n << "x" << s.k << " pad " << s.pad << " ta " << ta << " tb " << tb;
        // Padding columns of C are untouched.
        for (int r = 0; r < s.m; ++r)
          for (int j = s.n; j < ldc; ++j)
            ASSERT_EQ(got[1][static_cast<std::size_t>(r) * ldc + j],
                      c[static_cast<std::size_t>(r) * ldc + j]);
      }
  }
}

// Round to nearest even, as __float2bfloat16_rn does for finite values.
std::uint16_t host_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

// The dense vectorised path (ld == cols, aligned, n % 4 == 0) and the general one give the same
// correctly rounded bits, on rows×cols taken out of a wider matrix too.
TEST(CudaBackend, ToBf16RoundsLikeTheHostOnEveryPath) {
  BB_REQUIRE_CUDA();
  auto gpu = cuda::make_cuda_backend(0);
  cuda::CudaBackend& be = *cuda::as_cuda(*gpu);
  std::vector<float> src = random_vector(64 * 40 + 1, 51, -3.0f, 3.0f);
  src[5] = 1.00390625f;  // halfway between two bf16 values: ties to even
  src[6] = 1.01171875f;  // halfway, rounds up to even
  Buffer d = upload(be, src);
  std::uint16_t* out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), src.size() * 2), cudaSuccess);
  struct Case {
    const char* what;
    int offset, rows, cols, ld;
  };
  for (const Case& c :
       {Case{"dense, vectorised", 0, 64, 40, 40}, Case{"dense, odd count", 0, 7, 9, 9},
        Case{"unaligned", 1, 64, 40, 40}, Case{"strided", 0, 30, 33, 40}}) {
    ASSERT_EQ(cuda::kernels::to_bf16(be.stream(), d.data() + c.offset, c.rows, c.cols, c.ld, out),
              cudaSuccess);
    std::vector<std::uint16_t> got(static_cast<std::size_t>(c.rows) * c.cols);
    ASSERT_EQ(cudaStreamSynchronize(be.stream()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    std::size_t wrong = 0;
    for (int r = 0; r < c.rows; ++r)
      for (int k = 0; k < c.cols; ++k) {
        const float f =
            src[static_cast<std::size_t>(c.offset) + static_cast<std::size_t>(r) * c.ld + k];
        wrong += got[static_cast<std::size_t>(r) * c.cols + k] != host_bf16(f);
      }
    EXPECT_EQ(wrong, 0u) << c.what;
  }
  EXPECT_EQ(host_bf16(1.00390625f), 0x3F80);
  EXPECT_EQ(host_bf16(1.01171875f), 0x3F82);
  (void)cudaFree(out);
}

TEST(CudaBackend, Bf16GemmIsCloseToFp32) {
  BB_REQUIRE_CUDA();
  cuda::CudaBackendOptions options;
  options.gemm_dtype = cuda::GemmDtype::kBf16;
  auto gpu = cuda::make_cuda_backend(0, options);
  CpuBackend cpu;
  const int m = 64, n = 256, k = 64;
  for (Trans ta : {kNoTrans, kTrans})
    for (Trans tb : {kNoTrans, kTrans}) {
      const auto a = random_vector(static_cast<std::size_t>(m) * k, 31);
      const auto b = random_vector(static_cast<std::size_t>(k) * n, 32);
      std::vector<float> got[2];
      Backend* both[2] = {&cpu, gpu.get()};
      for (int i = 0; i < 2; ++i) {
        Backend& be = *both[i];
        Buffer da = upload(be, a), db = upload(be, b), dc = be.allocate(m * n);
        be.gemm(ta, tb, m, n, k, 1.0f, da.data(), ta ? m : k, db.data(), tb ? k : n, 0.0f,
                dc.data(), n);
        got[i] = download(be, dc);
      }
      const double err = relative_error(got[0], got[1]);
      EXPECT_LT(err, 1e-2) << ta << tb;  // bf16 has 8 significant bits
      EXPECT_GT(err, 1e-6) << "bf16 path not taken?";
    }
}

// Noted parameters keep a bf16 copy across GEMMs; every way of writing them (optimizer, copy,
// fill, from_host) and freeing their Buffer must make the next GEMM see the new values.
TEST(CudaBackend, Bf16ParameterCopyFollowsEveryWrite) {
  BB_REQUIRE_CUDA();
  cuda::CudaBackendOptions options;
  options.gemm_dtype = cuda::GemmDtype::kBf16;
  auto gpu = cuda::make_cuda_backend(0, options);
  Backend& be = *gpu;
  CpuBackend cpu;
  const int m = 32, n = 128, k = 64;
  const auto a = random_vector(static_cast<std::size_t>(m) * k, 41);
  const auto w0 = random_vector(static_cast<std::size_t>(k) * n, 42);
  const auto w1 = random_vector(static_cast<std::size_t>(k) * n, 43);
  // C = A·W on the CPU in fp32, and on the GPU with W as a (noted) parameter.
  auto expect = [&](const std::vector<float>& w) {
    Buffer ca = upload(cpu, a), cw = upload(cpu, w), cc = cpu.allocate(m * n);
    cpu.gemm(kNoTrans, kNoTrans, m, n, k, 1.0f, ca.data(), k, cw.data(), n, 0.0f, cc.data(), n);
    return download(cpu, cc);
  };
  Buffer da = upload(be, a), dc = be.allocate(m * n);
  auto gemm = [&](const float* w) {
    be.gemm(kNoTrans, kNoTrans, m, n, k, 1.0f, da.data(), k, w, n, 0.0f, dc.data(), n);
    return download(be, dc);
  };
  auto close = [](const std::vector<float>& want, const std::vector<float>& got) {
    return relative_error(want, got) < 1e-2;
  };
  std::vector<float> neg(w0.size());
  for (std::size_t i = 0; i < w0.size(); ++i) neg[i] = -w0[i];
  {
    Buffer dw = upload(be, w0);
    be.note_parameters(dw.data(), dw.size());
    EXPECT_TRUE(close(expect(w0), gemm(dw.data())));
    EXPECT_TRUE(close(expect(w0), gemm(dw.data())));       // from the kept copy
    be.sgd_update(dw.data(), dw.data(), dw.size(), 2.0f);  // w − 2w = −w
    EXPECT_TRUE(close(expect(neg), gemm(dw.data()))) << "stale after sgd_update";
    Buffer other = upload(be, w1);
    be.copy(other.data(), dw.data(), dw.size());
    EXPECT_TRUE(close(expect(w1), gemm(dw.data()))) << "stale after copy";
    be.from_host(w0.data(), dw.data(), w0.size());
    EXPECT_TRUE(close(expect(w0), gemm(dw.data()))) << "stale after from_host";
    be.fill(dw.data() + 7, 0.0f, 1);  // one element inside the operand
    std::vector<float> w0z = w0;
    w0z[7] = 0.0f;
    EXPECT_TRUE(close(expect(w0z), gemm(dw.data())));
    be.fill(dw.data(), 0.0f, dw.size());
    EXPECT_EQ(gemm(dw.data()), std::vector<float>(static_cast<std::size_t>(m) * n, 0.0f))
        << "stale after fill";
  }
  // The freed parameter block goes back to the cache; a plain buffer that reuses its address
  // must not be served the old copy.
  Buffer plain = upload(be, w1);
  EXPECT_TRUE(close(expect(w1), gemm(plain.data())));
  be.from_host(w0.data(), plain.data(), w0.size());
  EXPECT_TRUE(close(expect(w0), gemm(plain.data())));
}

// --- The stage on the GPU ------------------------------------------------------------------

struct StageResult {
  std::vector<float> y, dx, grads;
  double loss = 0;
};

StageResult run_stage(Backend& be, bool recompute) {
  const int h = 64, b = 16, M = 3;
  Stage stage(be, stage_config(h, b, 2, 3, 77, recompute));
  const std::size_t act = static_cast<std::size_t>(b) * h;
  Buffer x = be.allocate(act), y = be.allocate(act), dy = be.allocate(act), dx = be.allocate(act);
  StageResult r;
  for (int mb = 0; mb < M; ++mb) {
    stage.make_input(mb, x.data());
    stage.forward(mb, x.data(), y.data());
    r.y = download(be, y);
    stage.loss(mb, M, y.data(), dy.data());
    stage.backward_input(mb, dy.data(), dx.data());
    stage.backward_weight(mb);
  }
  r.dx = download(be, dx);
  r.grads = be.download(stage.grads(), stage.param_count());
  r.loss = stage.loss_sum();
  return r;
}

TEST(CudaStage, ForwardBackwardMatchesCpu) {
  BB_REQUIRE_CUDA();
  auto gpu = cuda::make_cuda_backend(0);
  CpuBackend cpu;
  for (const bool recompute : {false, true}) {
    const StageResult want = run_stage(cpu, recompute), got = run_stage(*gpu, recompute);
    EXPECT_LT(relative_error(want.y, got.y), 1e-5) << recompute;
    EXPECT_LT(relative_error(want.dx, got.dx), 1e-5) << recompute;
    EXPECT_LT(relative_error(want.grads, got.grads), 1e-5) << recompute;
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss) << recompute;
  }
}

TEST(CudaStage, ReferenceMatchesCpu) {
  BB_REQUIRE_CUDA();
  auto gpu = cuda::make_cuda_backend(0);
  CpuBackend cpu;
  ReferenceConfig c;
  c.hidden = 32;
  c.rows = 8;
  c.num_layers = 4;
  c.num_microbatches = 4;
  c.seed = 5;
  const CompareResult r = compare(run_reference(cpu, c), run_reference(*gpu, c), 1e-5);
  EXPECT_TRUE(r.pass) << r.message;
}

// --- Allocator, timing, synthetic compute ----------------------------------------------------

TEST(CudaAllocator, NoDeviceMallocAfterWarmup) {
  BB_REQUIRE_CUDA();
  cuda::CudaBackend be(0);
  const int h = 32, b = 8, M = 4;
  Stage stage(be, stage_config(h, b, 0, 2, 1));
  const std::size_t act = static_cast<std::size_t>(b) * h;
  Buffer x = be.allocate(act), y = be.allocate(act);
  auto step = [&] {
    for (int mb = 0; mb < M; ++mb) {
      stage.make_input(mb, x.data());
      stage.forward(mb, x.data(), y.data());
    }
    for (int mb = M - 1; mb >= 0; --mb) {
      stage.loss(mb, M, y.data(), y.data());
      stage.backward_full(mb, y.data(), x.data());
    }
    stage.optimizer_step(OptimizerConfig{});
    std::vector<Buffer> scratch;  // transient buffers, freed each step
    for (int i = 0; i < 5; ++i) scratch.push_back(be.allocate(act * (i + 1)));
  };
  step();
  be.synchronize();
  const cuda::DeviceMemoryStats warm = be.memory_stats();
  const std::size_t allocated = be.allocated_bytes();
  for (int i = 0; i < 3; ++i) step();
  be.synchronize();
  const cuda::DeviceMemoryStats after = be.memory_stats();
  EXPECT_EQ(after.device_mallocs, warm.device_mallocs);
  EXPECT_GT(after.cache_hits, warm.cache_hits);
  EXPECT_EQ(be.allocated_bytes(), allocated);
  EXPECT_EQ(after.reserved_bytes, warm.reserved_bytes);
  EXPECT_GE(after.peak_reserved_bytes, after.reserved_bytes);
  EXPECT_GE(after.peak_in_use_bytes, be.peak_allocated_bytes());
  EXPECT_GT(after.device_total_bytes, 0u);
  EXPECT_GE(after.device_peak_used_bytes, after.device_total_bytes - after.device_free_bytes);
  // The Backend's own accounting counts requested bytes, the allocator rounded blocks.
  EXPECT_GE(after.in_use_bytes, be.allocated_bytes());

  const std::size_t reserved = after.reserved_bytes;
  be.release_cached_memory();
  EXPECT_EQ(be.memory_stats().cached_bytes, 0u);
  EXPECT_LE(be.memory_stats().reserved_bytes, reserved);
}

TEST(CudaAllocator, OutOfMemoryIsBadAlloc) {
  BB_REQUIRE_CUDA();
  cuda::CudaBackend be(0);
  EXPECT_THROW(be.allocate(std::size_t{1} << 50), std::bad_alloc);  // 4 PiB
  Buffer ok = be.allocate(16);                                      // still usable
  be.fill(ok.data(), 1.0f, 16);
  EXPECT_EQ(download(be, ok), std::vector<float>(16, 1.0f));
}

TEST(CudaTiming, MarksAreMonotoneAndMeasureTheStream) {
  BB_REQUIRE_CUDA();
  cuda::CudaBackend be(0);
  be.begin_marks();
  const double host_origin = be.mark_origin();
  std::vector<std::size_t> ids{be.mark()};
  for (int i = 0; i < 5; ++i) {
    be.spin_for(0.002);
    ids.push_back(be.mark());
  }
  be.synchronize();
  const double host_end = be.now();
  double last = -1;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const double t = be.mark_seconds(ids[i]);
    EXPECT_GE(t, last) << i;
    if (i > 0) {
      EXPECT_NEAR(t - last, 0.002, 0.0004) << i;
    }
    last = t;
  }
  // Same time base as the host clock (the origin is taken with the stream idle).
  EXPECT_LE(last, host_end - host_origin + 1e-4);
  EXPECT_GE(last, 0.009);
  // A new origin forgets the old marks; an unfinished mark is an error, not a wrong value.
  be.begin_marks();
  be.spin_for(0.05);
  const std::size_t id = be.mark();
  EXPECT_THROW(be.mark_seconds(id), std::logic_error);
  EXPECT_THROW(be.mark_seconds(id + 1), std::out_of_range);
  be.synchronize();
  EXPECT_NEAR(be.mark_seconds(id), 0.05, 0.005);
}

TEST(CudaTiming, SpinAndSleepAreCalibrated) {
  BB_REQUIRE_CUDA();
  for (const cuda::SpinClock clock : {cuda::SpinClock::kClock64, cuda::SpinClock::kGlobalTimer}) {
    cuda::CudaBackendOptions options;
    options.spin_clock = clock;
    cuda::CudaBackend be(0, options);
    EXPECT_GT(be.spin_ticks_per_second(), 1e8);
    for (const double seconds : {0.0005, 0.002, 0.01, 0.05}) {
      for (const bool sleep : {false, true}) {
        be.begin_marks();
        be.spin_for(0.001);  // keeps the stream busy, so no launch gap lands between the marks
        const std::size_t a = be.mark();
        const double host0 = be.now();
        if (sleep)
          be.sleep_for(seconds);
        else
          be.spin_for(seconds);
        const double enqueue = be.now() - host0;
        const std::size_t b = be.mark();
        be.synchronize();
        const double took = be.mark_seconds(b) - be.mark_seconds(a);
        EXPECT_NEAR(took, seconds, 0.1 * seconds)
            << (clock == cuda::SpinClock::kClock64 ? "clock64 " : "globaltimer ")
            << (sleep ? "sleep_for " : "spin_for ") << seconds;
        if (seconds >= 0.01) {
          EXPECT_LT(enqueue, seconds / 2) << "the host must not wait";
        }
      }
    }
  }
}

// --- Host staging (MPI transport with device buffers) ----------------------------------------

// The transport asks the backend: the CUDA backend's staging is the pinned one.
TEST(CudaStaging, TheBackendMakesPinnedStaging) {
  BB_REQUIRE_CUDA();
  cuda::CudaBackend be(0);
  EXPECT_FALSE(be.device_is_host());
  const std::unique_ptr<HostStaging> staging = be.make_host_staging();
  EXPECT_NE(dynamic_cast<cuda::PinnedStaging*>(staging.get()), nullptr);
}

TEST(CudaStaging, RoundTripThroughPinnedMemory) {
  BB_REQUIRE_CUDA();
  cuda::CudaBackend be(0);
  cuda::PinnedStaging staging(be);
  const std::size_t n = 100'000;
  const auto data = random_vector(n, 41);
  for (int round = 0; round < 3; ++round) {
    Buffer src = upload(be, data), dst = be.allocate(n);
    be.spin_for(0.002);                        // the producer is still running...
    be.axpy(1.0f, src.data(), src.data(), n);  // ...and doubles src last
    HostStaging::Ticket t = staging.stage_send(src.data(), n);
    const float* host = nullptr;
    while ((host = static_cast<const float*>(staging.send_ready(t))) == nullptr)
      std::this_thread::yield();
    for (std::size_t i = 0; i < n; i += 997) ASSERT_EQ(host[i], 2.0f * data[i]) << i;

    HostStaging::Ticket r = staging.stage_recv(dst.data(), n);
    std::memcpy(staging.recv_buffer(r), host, n * sizeof(float));  // "MPI" delivered it
    staging.release(t);
    staging.deliver(r);
    EXPECT_FALSE(r.valid());
    be.axpy(1.0f, dst.data(), dst.data(), n);  // compute after deliver sees the data
    const auto got = download(be, dst);
    for (std::size_t i = 0; i < n; i += 997) ASSERT_EQ(got[i], 4.0f * data[i]) << i;
  }
  EXPECT_GT(staging.held_bytes(), 0u);
  EXPECT_LE(staging.held_bytes(), 3 * n * sizeof(float) + 3 * 4096);  // buffers are reused
}

// The H2D copy of a receive waits for the readers of its destination enqueued before the
// receive was posted (they see the old data), not for compute enqueued after it.
TEST(CudaStaging, DeliverWaitsForEarlierReaders) {
  BB_REQUIRE_CUDA();
  cuda::CudaBackend be(0);
  cuda::PinnedStaging staging(be);
  const std::size_t n = 100'000;
  const auto old_data = random_vector(n, 43), new_data = random_vector(n, 44);
  Buffer dst = upload(be, old_data), seen = be.allocate(n);
  be.spin_for(0.005);                   // a reader that is late...
  be.copy(dst.data(), seen.data(), n);  // ...reads dst before the receive is posted
  HostStaging::Ticket r = staging.stage_recv(dst.data(), n);
  std::memcpy(staging.recv_buffer(r), new_data.data(), n * sizeof(float));
  staging.deliver(r);
  const auto got_seen = download(be, seen), got_dst = download(be, dst);
  for (std::size_t i = 0; i < n; i += 997) {
    ASSERT_EQ(got_seen[i], old_data[i]) << i;
    ASSERT_EQ(got_dst[i], new_data[i]) << i;
  }
}

// --- NCCL transport (mpiexec -n 2, two GPUs) -------------------------------------------------

#ifdef BB_HAVE_NCCL
// Initialises MPI once for this process if nobody else has, finalising it at exit.
bool ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return true;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    return false;
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  return true;
}

bool wait_for(Transport& t, Request& r) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!t.test(r)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

TEST(CudaNccl, PingPongBetweenTwoRanks) {
  BB_REQUIRE_CUDA();
  const char* launched = std::getenv("PMI_RANK");
  if (launched == nullptr) launched = std::getenv("OMPI_COMM_WORLD_RANK");
  if (launched == nullptr)
    GTEST_SKIP() << "skipped: needs mpiexec -n 2 (and two GPUs): not started by mpiexec";
  ASSERT_TRUE(ensure_mpi());
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) GTEST_SKIP() << "skipped: needs exactly 2 ranks, have " << size;
  if (cuda::device_count() < 2)
    GTEST_SKIP() << "skipped: needs 2 GPUs (NCCL cannot share one), have " << cuda::device_count();
  for (const auto wait : {cuda::NcclTransportOptions::RecvWait::kDevice,
                          cuda::NcclTransportOptions::RecvWait::kHost}) {
    cuda::CudaBackend be(rank % cuda::device_count());
    cuda::NcclTransportOptions options;
    options.recv_wait = wait;
    auto t = cuda::make_nccl_transport(MPI_COMM_WORLD, be, options);
    EXPECT_EQ(t->name(), "nccl");
    EXPECT_EQ(t->rank(), rank);
    EXPECT_EQ(t->size(), 2);
    const int peer = 1 - rank;
    const std::size_t n = 1 << 20;
    Buffer out = be.allocate(n), in = be.allocate(n), in2 = be.allocate(n);
    for (int round = 0; round < 4; ++round) {
      // The producer is still running when the send is posted.
      be.spin_for(0.001);
      be.seeded_uniform(out.data(), n, 9, static_cast<std::uint64_t>(rank * 100 + round), 1.0f);
      Request s, r;
      if (rank == 0) {
        s = t->isend(out.data(), n, peer, round);
        r = t->irecv(in.data(), n, peer, round);
      } else {
        r = t->irecv(in.data(), n, peer, round);
        s = t->isend(out.data(), n, peer, round);
      }
      ASSERT_TRUE(wait_for(*t, r));
      be.axpy(1.0f, in.data(), in.data(), n);  // compute after test() sees the data
      ASSERT_TRUE(wait_for(*t, s));
      std::vector<float> want(n);
      CpuBackend cpu;
      cpu.seeded_uniform(want.data(), n, 9, static_cast<std::uint64_t>(peer * 100 + round), 2.0f);
      EXPECT_EQ(first_bit_difference(want, download(be, in)), -1) << round;
    }
    // A group: both directions posted together, complete after group_end().
    t->group_begin();
    Request gs = t->isend(out.data(), n, peer, 1), gr = t->irecv(in2.data(), n, peer, 1);
    EXPECT_FALSE(t->test(gs));
    t->group_end();
    ASSERT_TRUE(wait_for(*t, gr));
    ASSERT_TRUE(wait_for(*t, gs));
    Request none;
    EXPECT_TRUE(t->test(none));
    be.synchronize();
  }
}
#endif  // BB_HAVE_NCCL

}  // namespace
}  // namespace bb

#endif  // BB_HAVE_CUDA
