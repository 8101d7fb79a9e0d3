// The CPU backend's progress poll: long GEMMs are cut into slices with one poll between them,
// and the sliced result equals one unsliced call up to rounding (OpenBLAS may choose another
// kernel for a slice's shape).
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/cpu_backend.hpp"

namespace bb {
namespace {

struct Case {
  Trans ta, tb;
  int m, n, k;
};

std::vector<float> run_gemm(CpuBackend& be, const Case& g, float beta) {
  const int lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
  Buffer a = be.allocate(static_cast<std::size_t>(g.m) * g.k);
  Buffer b = be.allocate(static_cast<std::size_t>(g.k) * g.n);
  Buffer c = be.allocate(static_cast<std::size_t>(g.m) * g.n);
  be.seeded_uniform(a.data(), a.size(), 7, 1, 1.0f);
  be.seeded_uniform(b.data(), b.size(), 7, 2, 1.0f);
  be.seeded_uniform(c.data(), c.size(), 7, 3, 1.0f);
  be.gemm(g.ta, g.tb, g.m, g.n, g.k, 0.5f, a.data(), lda, b.data(), ldb, beta, c.data(), g.n);
  return be.download(c.data(), c.size());
}

TEST(CpuProgress, SlicedGemmMatchesOneCallAndPolls) {
  // Wide (sliced by columns), tall (by rows), odd sizes, every transpose.
  const Case cases[] = {{kNoTrans, kNoTrans, 32, 1024, 256},
                        {kTrans, kNoTrans, 256, 1024, 32},
                        {kNoTrans, kTrans, 1000, 37, 300},
                        {kTrans, kTrans, 77, 517, 129},
                        {kNoTrans, kNoTrans, 4, 4, 4}};
  for (const Case& g : cases) {
    for (const float beta : {0.0f, 1.0f}) {
      CpuBackend plain;
      const std::vector<float> want = run_gemm(plain, g, beta);
      CpuBackend sliced;
      int polls = 0;
      sliced.set_progress_poll([&] { ++polls; });
      const std::vector<float> got = run_gemm(sliced, g, beta);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::fabs(want[i])))
            << g.m << "x" << g.n << "x" << g.k << " beta " << beta << " at " << i;
      const double flops = 2.0 * g.m * g.n * g.k;
      if (flops > 2 * CpuBackend::kSliceFlops) {
        EXPECT_GT(polls, 0) << g.m << "x" << g.n << "x" << g.k;
      }
      if (flops <= CpuBackend::kSliceFlops) {
        EXPECT_EQ(polls, 0);
      }
      sliced.set_progress_poll({});
      polls = 0;
      run_gemm(sliced, g, beta);
      EXPECT_EQ(polls, 0) << "a removed poll is not called";
    }
  }
}

}  // namespace
}  // namespace bb
