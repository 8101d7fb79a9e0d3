// The schedule advisor (src/advise): its ranking agrees with the simulator run directly, the
// memory cap excludes exactly the configurations over it, refusals and the recompute and
// global-batch models.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "advise/advise.hpp"
#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"
#include "sim/sim.hpp"

namespace {

using Key = std::tuple<std::string, int, int, bool>;

Key key_of(const bb::advise::Candidate& c) {
  return {c.schedule, c.M, c.v, c.recompute};
}

bb::advise::Input small_input() {
  bb::advise::Input in;
  in.P = 4;
  in.schedules = bb::sweep_names("all");
  in.Ms = {4, 8, 12, 16};
  in.vs = {1, 2};
  in.recompute = {false, true};
  in.t_f = {1e-3};
  in.t_b = {1.2e-3};
  in.t_w = {0.8e-3};
  in.act_bytes = 1 << 20;
  in.input_bytes = 1 << 16;
  in.param_bytes = 4 << 20;
  return in;
}

// The simulator on the generated schedule, costs as the advisor documents them.
bb::SimResult direct(const bb::advise::Input& in, const bb::advise::Candidate& c) {
  const bb::Schedule s = bb::generate(c.schedule, {in.P, c.M, c.v});
  bb::SimConfig cfg;
  cfg.t_f = in.t_f;
  cfg.t_b = {in.t_b[0] + (c.recompute ? in.t_f[0] : 0.0)};
  cfg.t_w = in.t_w;
  cfg.act_bytes = c.recompute ? in.input_bytes / s.chunk_fraction(0) : in.act_bytes;
  return bb::simulate(s, cfg);
}

TEST(Advise, BestAgreesWithTheSimulator) {
  const auto in = small_input();
  const auto r = bb::advise::search(in, 3);
  ASSERT_FALSE(r.ranked.empty());
  const auto& best = r.ranked.front();
  const bb::SimResult sim = direct(in, best);
  EXPECT_DOUBLE_EQ(best.makespan, sim.single.span);
  EXPECT_DOUBLE_EQ(best.period, sim.steady.span);
  EXPECT_DOUBLE_EQ(best.step_time, sim.single.span);
  // Nothing ranked below it is faster per sample, and every configuration is faster than or
  // as fast as the one after it.
  for (std::size_t i = 1; i < r.ranked.size(); ++i)
    EXPECT_LE(r.ranked[i - 1].step_time / r.ranked[i - 1].M,
              r.ranked[i].step_time / r.ranked[i].M + 1e-15);
  // Each ranked configuration's time is the simulator's.
  for (const auto& c : r.ranked)
    EXPECT_DOUBLE_EQ(c.makespan, direct(in, c).single.span) << c.schedule << " M=" << c.M;
}

TEST(Advise, MemoryCapExcludesExactlyThoseOverIt) {
  auto in = small_input();
  const auto all = bb::advise::search(in, 0);
  std::vector<double> peaks;
  for (const auto& c : all.ranked) peaks.push_back(c.peak_bytes);
  std::sort(peaks.begin(), peaks.end());
  in.memory_cap = peaks[peaks.size() / 2];
  std::set<Key> over;
  for (const auto& c : all.ranked)
    if (c.peak_bytes > in.memory_cap) over.insert(key_of(c));
  ASSERT_FALSE(over.empty());
  const auto capped = bb::advise::search(in, 0);
  std::set<Key> excluded;
  for (const auto& c : capped.excluded)
    if (c.excluded == "memory") excluded.insert(key_of(c));
  EXPECT_EQ(excluded, over);
  for (const auto& c : capped.ranked) EXPECT_LE(c.peak_bytes, in.memory_cap);
  EXPECT_EQ(capped.ranked.size() + over.size(), all.ranked.size());
}

// The memory model (sim/memory.hpp) with advise's inputs: per rank its micro-batches in flight
// (the simulator's peak units, each the stage's act_bytes: input and saved tensors), two
// message buffers during an F (the made or received input and the output; sends complete when
// posted), and static_factor x the parameters of its chunks.
TEST(Advise, PeakBytesAreTheMemoryModels) {
  auto in = small_input();
  in.static_factor = 4;  // Adam
  const auto c = bb::advise::evaluate(in, "1f1b", 8, 1, false);
  ASSERT_EQ(c.excluded, "");
  const bb::SimResult sim = direct(in, c);
  for (int r = 0; r < in.P; ++r) {
    const auto i = static_cast<std::size_t>(r);
    EXPECT_DOUBLE_EQ(c.activation_bytes[i],
                     sim.ranks[i].peak_activation_bytes + 2 * in.input_bytes);
    EXPECT_DOUBLE_EQ(c.static_bytes[i], 4 * in.param_bytes);
    EXPECT_DOUBLE_EQ(c.memory_bytes[i], c.activation_bytes[i] + c.static_bytes[i]);
  }
  EXPECT_DOUBLE_EQ(c.peak_bytes, c.memory_bytes[0]);
  // DualPipe holds two copies of its stages, each with a receive buffer of its partner's
  // gradients (on the other rank): 2 x (4 + 1) x the parameters.
  const auto d = bb::advise::evaluate(in, "dualpipe", 8, 2, false);
  ASSERT_EQ(d.excluded, "");
  EXPECT_DOUBLE_EQ(d.static_bytes[0], 10 * in.param_bytes);
}

TEST(Advise, RecomputeCostsForwardAndSavesActivations) {
  const auto in = small_input();
  const auto off = bb::advise::evaluate(in, "1f1b", 8, 1, false);
  const auto on = bb::advise::evaluate(in, "1f1b", 8, 1, true);
  EXPECT_GT(on.makespan, off.makespan);
  EXPECT_DOUBLE_EQ(on.t_recompute, 8 * in.t_f[0]);
  EXPECT_LT(on.activation_bytes[0], off.activation_bytes[0]);
  // Kept inputs (the simulator's peak units), one chunk's saved tensors while it recomputes,
  // and two message buffers.
  EXPECT_DOUBLE_EQ(on.activation_bytes[0], direct(in, on).ranks[0].peak_activation_bytes +
                                               (in.act_bytes - in.input_bytes) +
                                               2 * in.input_bytes);
}

TEST(Advise, RefusalsAreExcludedWithTheirReason) {
  auto in = small_input();
  const auto c = bb::advise::evaluate(in, "interleaved", 8, 1, false);
  EXPECT_EQ(c.excluded, "refused");
  EXPECT_NE(c.reason.find("interleaved"), std::string::npos);
  in.global_batch = 48;
  const auto g = bb::advise::evaluate(in, "1f1b", 32, 1, false);
  EXPECT_EQ(g.excluded, "refused");
  EXPECT_NE(g.reason.find("divide"), std::string::npos);
  in.schedules = {"no-such"};
  EXPECT_THROW(bb::advise::search(in), bb::ConfigError);
}

TEST(Advise, GlobalBatchScalesMicroBatchCostsAndThroughput) {
  auto in = small_input();
  in.mb_size = 4;
  in.global_batch = 64;
  const auto c8 = bb::advise::evaluate(in, "gpipe", 8, 1, false);    // micro-batches of 8
  const auto c16 = bb::advise::evaluate(in, "gpipe", 16, 1, false);  // of 4: the given costs
  EXPECT_DOUBLE_EQ(c8.mb_size, 8);
  EXPECT_DOUBLE_EQ(c16.mb_size, 4);
  // GPipe's makespan (M + P - 1)(F + B + W) with per-micro-batch costs scaled by mb / 4.
  const double stage = in.t_f[0] + in.t_b[0] + in.t_w[0];
  EXPECT_NEAR(c16.makespan, (16 + 3) * stage, 1e-12);
  EXPECT_NEAR(c8.makespan, (8 + 3) * stage * 2, 1e-12);
  EXPECT_DOUBLE_EQ(c8.throughput, 64 / c8.makespan);
}

TEST(Advise, PerStageCostsReachTheChunks) {
  auto in = small_input();
  in.t_f = {1e-3, 1e-3, 1e-3, 3e-3};  // a heavy last stage
  const auto c = bb::advise::evaluate(in, "gpipe", 8, 1, false);
  in.t_f = {1e-3};
  const auto u = bb::advise::evaluate(in, "gpipe", 8, 1, false);
  EXPECT_GT(c.makespan, u.makespan + 8 * 2e-3 - 1e-12);
}

TEST(Advise, AProfileOfAnyLengthCutsTheModelIntoEqualParts) {
  auto in = small_input();
  in.t_f = {1e-3, 3e-3};  // the first half of the model, then the second
  const auto c = bb::advise::evaluate(in, "interleaved", 8, 2, false);
  ASSERT_EQ(c.excluded, "");
  // 8 chunks of half a stage each: chunks 0..3 in the first half, 4..7 in the second.
  bb::SimConfig cfg;
  cfg.t_f = {0.5e-3, 0.5e-3, 0.5e-3, 0.5e-3, 1.5e-3, 1.5e-3, 1.5e-3, 1.5e-3};
  cfg.t_b.assign(8, in.t_b[0] / 2);
  cfg.t_w.assign(8, in.t_w[0] / 2);
  cfg.act_bytes = in.act_bytes;
  const bb::SimResult sim = bb::simulate(bb::generate("interleaved", {in.P, 8, 2}), cfg);
  EXPECT_DOUBLE_EQ(c.makespan, sim.single.span);
}

TEST(Advise, ResultDoesNotDependOnThreads) {
  const auto in = small_input();
  const auto a = bb::advise::search(in, 3, 1);
  const auto b = bb::advise::search(in, 3, 3);
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  for (std::size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_EQ(key_of(a.ranked[i]), key_of(b.ranked[i]));
    EXPECT_EQ(a.ranked[i].step_time, b.ranked[i].step_time);
  }
  for (std::size_t i = 0; i < a.families.size(); ++i)
    EXPECT_EQ(a.families[i].reason, b.families[i].reason);
}

TEST(Advise, FamiliesSayWhyTheyAreNotRanked) {
  auto in = small_input();
  in.memory_cap = 9.5 * (1 << 20);
  const auto r = bb::advise::search(in, 2);
  std::set<std::string> kinds;
  for (const auto& f : r.families) kinds.insert(f.excluded);
  EXPECT_TRUE(kinds.count("refused"));  // interleaved v=1
  for (const auto& f : r.families)
    if (f.schedule == "dualpipe") {
      EXPECT_EQ(f.excluded, "memory") << f.reason;
    }
  // A family with a top-2 configuration is not excluded.
  int ranked = 0;
  for (const auto& f : r.families) ranked += f.excluded.empty() ? 1 : 0;
  EXPECT_GE(ranked, 1);
  EXPECT_LE(ranked, 2);
}

// An overlapped F&B pair (an F and a whole backward) costs fb_factor x (F + B + W): DualPipe's
// prediction is the simulator's with that pair time; schedules without pairs do not change.
TEST(Advise, PairFactorPricesDualPipesOverlappedPairs) {
  bb::advise::Input in = small_input();
  in.P = 4;
  in.fb_factor = 1.3;
  const auto c = bb::advise::evaluate(in, "dualpipe", 8, 1, false);
  ASSERT_TRUE(c.excluded.empty()) << c.reason;
  bb::SimConfig cfg;
  cfg.t_f = in.t_f;
  cfg.t_b = in.t_b;
  cfg.t_w = in.t_w;
  cfg.t_fb = 1.3 * (in.t_f[0] + in.t_b[0] + in.t_w[0]);
  const bb::SimResult r = bb::simulate(bb::generate("dualpipe", {in.P, 8, 1}), cfg);
  EXPECT_DOUBLE_EQ(c.makespan, r.single.span);
  bb::advise::Input plain = in;
  plain.fb_factor = 1;
  EXPECT_GT(c.makespan, bb::advise::evaluate(plain, "dualpipe", 8, 1, false).makespan);
  EXPECT_DOUBLE_EQ(bb::advise::evaluate(in, "zb-h1", 8, 1, false).makespan,
                   bb::advise::evaluate(plain, "zb-h1", 8, 1, false).makespan);
  in.fb_factor = 0;
  EXPECT_THROW(bb::advise::search(in), bb::ConfigError);
}

// A fixed model (a results file's): configurations whose chunks would split a block are
// refused with the reason; the others are unchanged.
TEST(Advise, AFixedModelRefusesChunksOfFractionalBlocks) {
  bb::advise::Input in = small_input();
  in.schedules = {"interleaved", "zb-h1"};
  in.vs = {2, 3, 4};
  in.stage_blocks = 2;
  const bb::advise::Result r = bb::advise::search(in, 0, 1);
  bool refused_v3 = false, refused_v4 = false;
  for (const auto& c : r.excluded) {
    if (c.schedule != "interleaved") continue;
    EXPECT_NE(c.v, 2) << c.reason;
    if (c.v == 3) refused_v3 = c.reason.find("0.666") != std::string::npos;
    if (c.v == 4) refused_v4 = c.reason.find("0.5 blocks") != std::string::npos;
  }
  EXPECT_TRUE(refused_v3);
  EXPECT_TRUE(refused_v4);
  for (const auto& c : r.ranked) EXPECT_TRUE(c.schedule == "zb-h1" || c.v == 2) << c.v;
  bb::advise::Input free = in;
  free.stage_blocks = 0;
  const auto a = bb::advise::evaluate(in, "interleaved", 8, 2, false);
  const auto b = bb::advise::evaluate(free, "interleaved", 8, 2, false);
  EXPECT_TRUE(a.excluded.empty());
  EXPECT_DOUBLE_EQ(a.makespan, b.makespan);
}

// Per-rank speed factors scale every action of a rank's chunks: the simulator with those
// per-chunk costs; all factors 1 change nothing, and each rank's busy time scales by its own.
TEST(Advise, RankSpeedScalesEachRanksActions) {
  bb::advise::Input in = small_input();
  in.P = 2;
  for (const char* name : {"zb-h1", "interleaved", "dualpipe"}) {
    const auto base = bb::advise::evaluate(in, name, 8, 2, false);
    ASSERT_TRUE(base.excluded.empty()) << base.reason;
    bb::advise::Input same = in;
    same.rank_speed = {1.0, 1.0};
    EXPECT_DOUBLE_EQ(bb::advise::evaluate(same, name, 8, 2, false).makespan, base.makespan);
    bb::advise::Input slow = in;
    slow.rank_speed = {1.0, 1.5};
    const auto c = bb::advise::evaluate(slow, name, 8, 2, false);
    ASSERT_EQ(c.busy.size(), 2u);
    EXPECT_NEAR(c.busy[0], base.busy[0], 1e-12) << name;
    EXPECT_NEAR(c.busy[1], 1.5 * base.busy[1], 1e-12) << name;
    EXPECT_GT(c.makespan, base.makespan) << name;
  }
  in.rank_speed = {1.0};
  EXPECT_THROW(bb::advise::search(in), bb::ConfigError);
}

// The stage work the cost drift compares against: F (twice with recompute) + B + W of the mean
// stage, scaled to the configuration's micro-batch.
TEST(Advise, StageWorkIsTheMeanStagesWork) {
  bb::advise::Input in = small_input();
  in.t_f = {1e-3, 3e-3};
  in.t_b = {2e-3};
  in.t_w = {1e-3};
  in.mb_size = 4;
  bb::advise::Candidate c;
  c.mb_size = 8;
  EXPECT_DOUBLE_EQ(bb::advise::stage_work(in, c), 2 * (2e-3 + 2e-3 + 1e-3));
  c.recompute = true;
  EXPECT_DOUBLE_EQ(bb::advise::stage_work(in, c), 2 * (4e-3 + 2e-3 + 1e-3));
}

// --verify's ranking check: equal predictions are a tie that may come out in either order; a
// strict predicted order is contradicted only by a measured reversal beyond the tolerance.
TEST(AdviseRanking, TiesMayComeOutInEitherOrder) {
  // zb-h1 and zb-h2 predicted equal, measured 100.6 and 100.2 (the case issue 21 reported).
  const auto r = bb::advise::check_ranking({100.0, 100.0, 102.0}, {100.6, 100.2, 103.0}, 0.005);
  EXPECT_TRUE(r.preserved);
  EXPECT_EQ(r.predicted_rank, (std::vector<int>{1, 1, 3}));
  EXPECT_TRUE(r.contradictions.empty());
}

TEST(AdviseRanking, AReversedStrictOrderIsNotPreserved) {
  const auto r = bb::advise::check_ranking({100.0, 110.0, 120.0}, {100.0, 130.0, 125.0}, 0.005);
  EXPECT_FALSE(r.preserved);
  ASSERT_EQ(r.contradictions.size(), 1u);
  EXPECT_EQ(r.contradictions[0], (std::pair<std::size_t, std::size_t>{1, 2}));
  EXPECT_EQ(r.predicted_rank, (std::vector<int>{1, 2, 3}));
}

TEST(AdviseRanking, TheToleranceAppliesToPredictedAndMeasured) {
  // 1 % apart: a strict order at 0.5 %, a tie at 2 %.
  EXPECT_FALSE(bb::advise::check_ranking({100.0, 101.0}, {103.0, 101.0}, 0.005).preserved);
  EXPECT_TRUE(bb::advise::check_ranking({100.0, 101.0}, {103.0, 101.0}, 0.02).preserved);
  // A measured reversal within the tolerance does not contradict a strict prediction.
  EXPECT_TRUE(bb::advise::check_ranking({100.0, 110.0}, {100.4, 100.0}, 0.005).preserved);
  EXPECT_FALSE(bb::advise::check_ranking({100.0, 110.0}, {100.6, 100.0}, 0.005).preserved);
  // Input order does not matter: entries are matched by position.
  const auto r = bb::advise::check_ranking({120.0, 100.0, 110.0}, {125.0, 100.0, 130.0}, 0.005);
  EXPECT_FALSE(r.preserved);
  EXPECT_EQ(r.predicted_rank, (std::vector<int>{3, 1, 2}));
  EXPECT_THROW(bb::advise::check_ranking({1.0}, {}, 0.005), bb::ConfigError);
}

}  // namespace
