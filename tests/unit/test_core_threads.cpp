// The core's passes over large schedules (at least 2^20 actions) split their ranks over two
// threads: validation, building the lowered lists, the timed dry run, and the simulator's
// counts. Each must give exactly what one thread gives, including validation reports.
#include <gtest/gtest.h>

#include <string>

#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/parallel.hpp"
#include "schedule/validate.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

struct Outcome {
  Schedule lowered;
  SimResult sim;
};

Outcome run_with_threads(int threads, const std::string& name, const ScheduleParams& p) {
  set_core_threads(threads);
  Outcome out;
  Schedule s = generate(name, p);
  EXPECT_GE(s.size(), kParallelMinActions) << name << ": too small to use threads";
  out.lowered = lower(std::move(s));
  SimConfig cfg;
  cfg.t_f = {1};
  cfg.t_b = {1.5};
  cfg.t_w = {0.5};
  cfg.latency = 0.125;
  cfg.steps = 2;
  out.sim = simulate(out.lowered, cfg);
  set_core_threads(2);
  return out;
}

TEST(CoreThreads, LargeSchedulesLowerAndSimulateAsOnOneThread) {
  for (const auto& [name, p] : {std::pair<std::string, ScheduleParams>{"1f1b", {64, 8192, 1}},
                                {"interleaved", {16, 8192, 4}},
                                {"dualpipev", {32, 8192, 1}}}) {
    const Outcome one = run_with_threads(1, name, p);
    const Outcome two = run_with_threads(2, name, p);
    EXPECT_TRUE(one.lowered == two.lowered) << name;
    // The plain unit-time pass leaves its compute order (the periodic one, used where the
    // pipeline repeats itself, none): the same either way.
    ASSERT_EQ(!one.lowered.compute_order, !two.lowered.compute_order) << name;
    if (one.lowered.compute_order) {
      EXPECT_EQ(one.lowered.compute_order->size(), two.lowered.compute_order->size()) << name;
    }
    EXPECT_EQ(one.sim.single.span, two.sim.single.span) << name;
    EXPECT_EQ(one.sim.steady.span, two.sim.steady.span) << name;
    EXPECT_EQ(one.sim.busy_sum, two.sim.busy_sum) << name;
    EXPECT_EQ(one.sim.p2p_messages, two.sim.p2p_messages) << name;
    ASSERT_EQ(one.sim.ranks.size(), two.sim.ranks.size());
    for (std::size_t r = 0; r < one.sim.ranks.size(); ++r) {
      EXPECT_EQ(one.sim.ranks[r].peak_activations, two.sim.ranks[r].peak_activations) << name;
      EXPECT_EQ(one.sim.ranks[r].last_end, two.sim.ranks[r].last_end) << name;
    }
    const DryRunResult timed = timed_dry_run(two.lowered);
    EXPECT_TRUE(timed.ok) << name << timed.message;
  }
}

TEST(CoreThreads, ValidationReportsTheSameIssuesInRankOrder) {
  Schedule s = generate("1f1b", {64, 8192, 1});
  // Problems in both halves of the ranks: a duplicate on rank 3, a wrong rank on rank 60, and
  // a W missing on rank 40 (found by the completeness pass).
  s.ranks[3].push_back(make_action(Op::F, 3, 7));
  s.ranks[60].push_back(make_action(Op::F, 1, 0));
  s.ranks[40].back() = make_action(Op::B, 40, s.ranks[40].back().mb);
  set_core_threads(1);
  const ValidationReport one = validate(s, 4);
  set_core_threads(2);
  const ValidationReport two = validate(s, 4);
  EXPECT_FALSE(one.ok());
  EXPECT_EQ(one.total, two.total);
  EXPECT_EQ(one.describe(s), two.describe(s));
  ASSERT_FALSE(two.issues.empty());
  EXPECT_EQ(two.issues.front().rank, 3) << two.describe(s);
}

}  // namespace
}  // namespace bb
