// The exact check (schedule/zb_exact.hpp) against zb-auto on small cases: the optimum it
// reports is what the simulator gives for the order it returns, within the memory limit;
// zb-auto never beats it, and is within a few per cent of it (the gaps are printed). Known
// optima: the ZB-H2 / ZB-H1 trade of a P=4 M=4 case no order escapes, and the memory count
// that lets the zero-bubble paper's ZB-2p reach zero bubble where a whole micro-batch
// counted until its W does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "schedule/generators.hpp"
#include "schedule/validate.hpp"
#include "schedule/zb_auto.hpp"
#include "schedule/zb_exact.hpp"
#include "sim/sim.hpp"
#include "zb_views.hpp"

namespace bb {
namespace {

SimConfig config(const StageCosts& c) {
  return test::sim_config(c);
}

double largest_span(const SimResult& r) {
  return test::views(r).span;
}

StageCosts uniform(int P, double f, double b, double w, double comm) {
  const auto n = static_cast<std::size_t>(P);
  return {std::vector<double>(n, f), std::vector<double>(n, b), std::vector<double>(n, w), comm};
}

TEST(ZbExact, ZbAutoNeverBeatsItAndIsNearItOnSmallCases) {
  std::mt19937_64 rng(7);
  const auto draw = [&](double a, double b) {
    return std::uniform_real_distribution<double>(a, b)(rng);
  };
  int optimal_span = 0, optimal_makespan = 0, cases = 0;
  double worst_span = 0, worst_makespan = 0;
  std::string worst_span_case, worst_makespan_case;
  for (int i = 0; i < 60; ++i) {
    const int P = std::uniform_int_distribution<int>(2, 3)(rng);
    const int M = std::uniform_int_distribution<int>(1, 5)(rng);
    ScheduleParams p{P, M, 1};
    p.t_f = {draw(0.5, 2)};
    p.t_b = {draw(0.5, 2)};
    p.t_w = {draw(0.5, 2)};
    p.t_comm = draw(0, 0.1);
    p.mem_limit = std::uniform_int_distribution<int>(1, 2 * P)(rng);
    p.mem_w = i % 4 == 3 ? 0.5 : 1.0;
    const std::string what = "P=" + std::to_string(P) + " M=" + std::to_string(M) +
                             " limit=" + std::to_string(p.mem_limit) +
                             " w=" + std::to_string(p.mem_w);
    const ZbAutoLevel got = zb_auto_levels(p).back();
    const StageCosts c = zb_auto_costs(p);
    for (const ZbObjective obj : {ZbObjective::span, ZbObjective::makespan}) {
      const double mine = obj == ZbObjective::span ? got.span : got.makespan;
      // Only orders better than zb-auto's are looked for: none, or the optimum.
      const ZbExactResult e = zb_exact(P, M, c,
                                       {.cap = 1.0 * p.mem_limit,
                                        .w_share = p.mem_w,
                                        .objective = obj,
                                        .better_than = mine * (1 + 1e-9)});
      ASSERT_TRUE(e.complete) << what;
      EXPECT_EQ(e.gap(), 0) << what;
      EXPECT_LE(e.best, mine * (1 + 1e-9)) << what;
      if (!e.improved) continue;
      ASSERT_TRUE(validate(e.schedule).ok()) << what;
      const SimResult r = simulate(e.schedule, config(c));
      EXPECT_NEAR(obj == ZbObjective::span ? largest_span(r) : r.single.span, e.best, 1e-9 * e.best)
          << what;
      double& worst = obj == ZbObjective::span ? worst_span : worst_makespan;
      if (mine / e.best - 1 > worst) {
        worst = mine / e.best - 1;
        (obj == ZbObjective::span ? worst_span_case : worst_makespan_case) = what;
      }
    }
    ++cases;
    const auto optimal = [&](ZbObjective obj, double mine) {
      const ZbExactQuery q{.cap = 1.0 * p.mem_limit,
                           .w_share = p.mem_w,
                           .objective = obj,
                           .better_than = mine * (1 - 1e-9)};
      return !zb_exact(P, M, c, q).improved;
    };
    optimal_span += optimal(ZbObjective::span, got.span);
    optimal_makespan += optimal(ZbObjective::makespan, got.makespan);
  }
  EXPECT_LE(worst_span, 0.05);
  EXPECT_LE(worst_makespan, 0.05);
  std::printf(
      "zb-auto against the exact search on %d small cases: largest stage span optimal "
      "in %d (worst gap %.2f %%, %s), makespan optimal in %d (worst gap %.2f %%, %s)\n",
      cases, optimal_span, 100 * worst_span, worst_span_case.c_str(), optimal_makespan,
      100 * worst_makespan, worst_makespan_case.c_str());
}

// P=4, M=4, F=1.6782, B=0.818772, W=1.40797, message time 0.0303648 (M <= P: every memory
// limit from 4 up allows every order). ZB-H2 has the least makespan, zb-auto the least
// largest span, and no order as fast as ZB-H2 has a span within ZB-H1's: no schedule is no
// worse than both ZB-H1 and ZB-H2 in both views (so a zb-auto non-increasing in its limit
// cannot be: docs/schedules.md).
TEST(ZbExact, AZbH1ZbH2TradeNoOrderEscapes) {
  const int P = 4, M = 4;
  ScheduleParams p{P, M, 1};
  p.t_f = {1.6782};
  p.t_b = {0.818772};
  p.t_w = {1.40797};
  p.t_comm = 0.0303648;
  p.mem_limit = 2 * P - 1;
  const StageCosts c = zb_auto_costs(p);
  const SimResult h1 = simulate(generate("zb-h1", p), config(c));
  const SimResult h2 = simulate(generate("zb-h2", p), config(c));
  const ZbExactResult fastest = zb_exact(P, M, c, {.cap = 7, .objective = ZbObjective::makespan});
  ASSERT_TRUE(fastest.complete);
  EXPECT_NEAR(fastest.best, h2.single.span, 1e-9);
  const ZbExactResult least = zb_exact(P, M, c, {.cap = 7, .objective = ZbObjective::span});
  ASSERT_TRUE(least.complete);
  EXPECT_NEAR(least.best, zb_auto_levels(p).back().span, 1e-9);
  ASSERT_LT(largest_span(h1), largest_span(h2));
  ASSERT_LT(h2.single.span, h1.single.span);
  const ZbExactResult as_fast = zb_exact(
      P, M, c, {.cap = 7, .objective = ZbObjective::span, .makespan_at_most = h2.single.span});
  ASSERT_TRUE(as_fast.complete);
  EXPECT_GT(as_fast.best, largest_span(h1) * (1 + 1e-6));
}

// P=2, M=6, F=B=2, W=1, no message time, a memory limit of 2P: counting a micro-batch until
// its W, the least largest span is 31 (one unit of bubble); counting half of it after its B
// (the zero-bubble paper's scheduler), 30 = M(F+B+W), no bubble.
TEST(ZbExact, TheMemoryCountDecidesWhetherTwoPReachesZeroBubble) {
  const StageCosts c = uniform(2, 2, 2, 1, 0);
  const ZbExactResult whole = zb_exact(2, 6, c, {.cap = 4, .w_share = 1});
  const ZbExactResult half = zb_exact(2, 6, c, {.cap = 4, .w_share = 0.5});
  ASSERT_TRUE(whole.complete && half.complete);
  EXPECT_DOUBLE_EQ(whole.best, 31);
  EXPECT_DOUBLE_EQ(half.best, 30);
  ScheduleParams p{2, 6, 1};
  p.t_f = {2};
  p.t_b = {2};
  p.t_w = {1};
  p.mem_limit = 4;
  EXPECT_DOUBLE_EQ(zb_auto_levels(p).back().span, 31);
  p.mem_w = 0.5;
  EXPECT_DOUBLE_EQ(zb_auto_levels(p).back().span, 30);
}

TEST(ZbExact, ABudgetTooSmallReportsItsGap) {
  const StageCosts c = uniform(3, 1, 2, 1, 0.1);
  const ZbExactResult e =
      zb_exact(3, 5, c, {.cap = 3, .objective = ZbObjective::makespan, .max_nodes = 50});
  EXPECT_FALSE(e.complete);
  EXPECT_LE(e.bound, e.best);
  EXPECT_GE(e.gap(), 0);
  const ZbExactResult full = zb_exact(3, 5, c, {.cap = 3, .objective = ZbObjective::makespan});
  ASSERT_TRUE(full.complete);
  EXPECT_LE(e.bound, full.best);
  EXPECT_GE(e.best, full.best);
}

}  // namespace
}  // namespace bb
