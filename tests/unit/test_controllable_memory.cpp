// V-Half and V-Min against the paper (Qi et al., "Pipeline Parallelism with Controllable
// Memory", NeurIPS 2024, Table 1 with F = B = W): activations (P+2)//2 and (P+4)//3 micro-batches
// where 1F1B holds P, bubble rates about P/(2M) and 2P/(3M) where 1F1B's is about P/M.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "schedule/generators.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

double max_peak(const std::string& name, int P, int M) {
  const std::vector<double> p = peak_activations(generate(name, {P, M, 1}));
  return *std::max_element(p.begin(), p.end());
}

// Issue 31: at P = 8 and 16 with M = 3P, v-half's peak on any rank is at most ceil(P/2)+1 and
// v-min's at most ceil(P/3)+1, in 1F1B stage units; they are the paper's (P+2)//2 and
// (P+4)//3, against 1F1B's P.
TEST(ControllableMemory, PeaksAreAHalfAndAThirdOf1F1Bs) {
  for (int P : {8, 16}) {
    const int M = 3 * P;
    const std::string what = "P=" + std::to_string(P) + " M=" + std::to_string(M);
    EXPECT_EQ(max_peak("1f1b", P, M), P) << what;
    EXPECT_LE(max_peak("v-half", P, M), (P + 1) / 2 + 1) << what;
    EXPECT_LE(max_peak("v-min", P, M), (P + 2) / 3 + 1) << what;
    EXPECT_EQ(max_peak("v-half", P, M), (P + 2) / 2) << what;
    EXPECT_EQ(max_peak("v-min", P, M), (P + 4) / 3) << what;
  }
  // P=8: 5 and 4 of 1F1B's 8; P=16: 9 and 6 of 16.
  EXPECT_EQ(max_peak("v-half", 8, 24), 5);
  EXPECT_EQ(max_peak("v-min", 16, 48), 6);
}

// The paper's bubble rates, as fractions of 1F1B's at the same P and M: at most a half for
// V-Half and two thirds for V-Min (F = B = W, the steady-state view the paper uses: the largest
// rank span), closing in on them as P grows (V-Half (3P-7)/(6P-6) at even P, V-Min
// (4P-5)/(6P-6) at P mod 3 != 0: at P = 16, 0.456 and 0.656).
TEST(ControllableMemory, BubblesAboutAHalfAndTwoThirdsOf1F1Bs) {
  SimConfig cfg;
  cfg.t_f = cfg.t_b = cfg.t_w = {1};
  for (int P : {4, 8, 16})
    for (int M : {2 * P, 3 * P, 8 * P}) {
      const std::string what = "P=" + std::to_string(P) + " M=" + std::to_string(M);
      const double base = simulate(generate("1f1b", {P, M, 1}), cfg).steady.bubble_time;
      const double half = simulate(generate("v-half", {P, M, 1}), cfg).steady.bubble_time;
      const double min = simulate(generate("v-min", {P, M, 1}), cfg).steady.bubble_time;
      EXPECT_DOUBLE_EQ(base, (P - 1) * 3.0) << what;
      EXPECT_GT(half, 0) << what;
      EXPECT_LE(half, 0.5 * base) << what;
      EXPECT_GT(min, half) << what;
      EXPECT_LE(min, 2.0 / 3 * base) << what;
      if (P == 16) {
        EXPECT_GT(half, 0.45 * base) << what;
        EXPECT_GT(min, 0.65 * base) << what;
      }
    }
}

// The order comes from P and M alone: the costs do not change it (they are not orders_by_costs).
TEST(ControllableMemory, OrderIndependentOfCosts) {
  ScheduleParams a{6, 18, 1}, b = a;
  b.t_f = {3};
  b.t_w = {0.5};
  for (const char* n : {"v-half", "v-min"})
    EXPECT_TRUE(generate(n, a).ranks == generate(n, b).ranks) << n;
}

}  // namespace
}  // namespace bb
