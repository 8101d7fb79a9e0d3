// zb-auto (schedule/zb_auto.hpp): on the cost sets of issue 21 (F=1 B=2 W=1; F=1 B=1.5 W=0.5;
// F=1 B=1 W=2; a last stage 1.5x as slow) at several P and M, under the memory limits of ZB-H1
// (P), ZB-H2 (2P-1) and one between, its single step is no longer than the best of zb-h1 and zb-h2
// whose peak fits the same limit, its peak stays within the limit, it validates and dry-runs, and
// no step beats the lower bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/validate.hpp"
#include "schedule/zb_auto.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

struct CostSet {
  const char* name;
  double f, b, w;
  double last = 1;  // the last stage's times are multiplied by this
};

const CostSet kCostSets[] = {{"F=1 B=2 W=1", 1, 2, 1},
                             {"F=1 B=1.5 W=0.5", 1, 1.5, 0.5},
                             {"F=1 B=1 W=2", 1, 1, 2},
                             {"F=1 B=1 W=1, last stage x1.5", 1, 1, 1, 1.5},
                             {"F=1 B=2 W=1, last stage x1.5", 1, 2, 1, 1.5}};

ScheduleParams params(const CostSet& c, int P, int M, int limit) {
  ScheduleParams p{P, M, 1};
  const auto stages = [&](double x) {
    std::vector<double> v(static_cast<std::size_t>(P), x);
    v.back() *= c.last;
    return v;
  };
  p.t_f = stages(c.f);
  p.t_b = stages(c.b);
  p.t_w = stages(c.w);
  p.mem_limit = limit;
  return p;
}

SimConfig config(const ScheduleParams& p) {
  SimConfig cfg;
  cfg.t_f = p.t_f;
  cfg.t_b = p.t_b;
  cfg.t_w = p.t_w;
  return cfg;
}

double max_peak(const Schedule& s) {
  const auto peaks = peak_activations(s);
  return *std::max_element(peaks.begin(), peaks.end());
}

TEST(ZbAuto, NoWorseThanZbH1AndZbH2UnderTheSameMemoryLimit) {
  int compared = 0, better = 0;
  for (const CostSet& c : kCostSets)
    for (int P : {2, 3, 4, 6})
      for (int M : {P, 2 * P, 3 * P + 1, 4 * P})
        for (int limit : {P, P + (P - 1) / 2, 2 * P - 1}) {
          const ScheduleParams p = params(c, P, M, limit);
          const std::string what = std::string(c.name) + " P=" + std::to_string(P) +
                                   " M=" + std::to_string(M) + " limit=" + std::to_string(limit);
          const SimConfig cfg = config(p);
          const Schedule s = generate("zb-auto", p);
          ASSERT_TRUE(validate(s).ok()) << what << "\n" << validate(s).describe(s);
          ASSERT_TRUE(dry_run(lower(s)).ok) << what;
          EXPECT_LE(max_peak(s), limit) << what;
          const double got = simulate(s, cfg).single.span;
          double best = -1;
          for (const char* other : {"zb-h1", "zb-h2"}) {
            const Schedule o = generate(other, {P, M, 1});
            if (max_peak(o) > limit) continue;
            const double t = simulate(o, cfg).single.span;
            best = best < 0 ? t : std::min(best, t);
          }
          ASSERT_GT(best, 0) << what << ": zb-h1 fits P";
          ++compared;
          EXPECT_LE(got, best) << what;
          better += got < best;
          EXPECT_GE(got, zb_auto_lower_bound(P, M, zb_auto_costs(p))) << what;
        }
  EXPECT_EQ(compared, 5 * 4 * 4 * 3);
  // Between ZB-H1's and ZB-H2's peaks the cost-aware candidates use the memory ZB-H1 leaves.
  EXPECT_GT(better, 0);
  const ScheduleParams p = params(kCostSets[0], 4, 8, 6);
  EXPECT_DOUBLE_EQ(simulate(generate("zb-auto", p), config(p)).single.span, 36);  // zb-h1: 38
}

TEST(ZbAuto, DefaultsAndRefusals) {
  EXPECT_EQ(zb_auto_memory_limit({4, 8, 1}), 4);
  ScheduleParams p{4, 8, 1};
  p.mem_limit = 3;
  EXPECT_EQ(zb_auto_memory_limit(p), 3);
  const Schedule tight = generate("zb-auto", p);  // below 1F1B's peak still works
  EXPECT_LE(max_peak(tight), 3);
  EXPECT_TRUE(dry_run(lower(tight)).ok);
  p.mem_limit = 1;
  EXPECT_LE(max_peak(generate("zb-auto", p)), 1);
  for (const auto& [edit, needle] : std::vector<std::pair<void (*)(ScheduleParams&), std::string>>{
           {[](ScheduleParams& q) { q.mem_limit = -1; }, "memory limit"},
           {[](ScheduleParams& q) {
              q.t_f = {1, 2};
            },
            "one per stage"},
           {[](ScheduleParams& q) { q.t_b = {std::numeric_limits<double>::infinity()}; }, "finite"},
           {[](ScheduleParams& q) { q.t_w = {-1}; }, ">= 0"}}) {
    ScheduleParams q{4, 8, 1};
    edit(q);
    try {
      generate("zb-auto", q);
      ADD_FAILURE() << needle;
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("zb-auto:", 0), 0u) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  }
}

// The list scheduler with unit times and `fill` gives ZB-H1's and ZB-H2's orders exactly
// (zero_bubble_greedy is its unit-clock fast path).
TEST(ZbAuto, ListSchedulerWithUnitTimesIsZbH1AndZbH2) {
  for (int P = 1; P <= 8; ++P)
    for (int M = 1; M <= 4 * P; ++M)
      for (const bool h2 : {false, true}) {
        ZeroBubbleOrder ord;
        ord.cap = h2 ? 2 * P - 1 : P;
        for (int r = 0; r < P; ++r) ord.warmup.push_back(h2 ? 2 * (P - r) - 2 : P - r - 1);
        const std::vector<double> one(static_cast<std::size_t>(P), 1.0);
        Schedule s = zero_bubble_list(h2 ? "zb-h2" : "zb-h1", P, M, ord, {one, one, one});
        EXPECT_EQ(s, generate(h2 ? "zb-h2" : "zb-h1", {P, M, 1}))
            << (h2 ? "zb-h2" : "zb-h1") << " P=" << P << " M=" << M;
      }
}

TEST(ZbAuto, LowerBound) {
  // Uniform F=B=W=1: the last stage waits P-1 forwards, then works 3M.
  const std::vector<double> one(4, 1.0);
  EXPECT_DOUBLE_EQ(zb_auto_lower_bound(4, 8, {one, one, one}), 3 + 24);
  // M < P: the last B still has to travel back (3 + 2*2 + 3 + 1 = 11 > 3 + 6).
  EXPECT_DOUBLE_EQ(zb_auto_lower_bound(4, 2, {one, one, one}), 11);
}

}  // namespace
}  // namespace bb
