// The core's exhaustive matrix: for every schedule, P in {2,3,4,6,8}, M in P..4P and v in
// {1,2,4} that it accepts, the validator accepts it, lowering dry-runs without deadlock, the
// simulator equals the closed form exactly wherever the form's conditions hold, and the
// peak live activations per rank equal the model's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/closed_form.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/validate.hpp"
#include "schedule_cases.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

struct Costs {
  double f, b, w;
  SimConfig config() const {
    SimConfig cfg;
    cfg.t_f = {f};
    cfg.t_b = {b};
    cfg.t_w = {w};
    return cfg;
  }
};

// Cost sets under which each schedule's closed form is stated to hold.
std::vector<Costs> costs_for(const std::string& name) {
  if (name == "naive" || name == "gpipe" || name == "1f1b" || name == "interleaved" ||
      name == "looped-bfs")
    return {{1, 2, 0}, {1, 1, 1}, {1.5, 2.5, 0.5}};
  return {{1, 1, 1}, {2, 2, 2}};
}

void expect_metrics_eq(const BubbleMetrics& sim, const BubbleMetrics& model,
                       const std::string& what) {
  auto eq = [](double a, double b) {
    return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(a));
  };
  EXPECT_TRUE(eq(sim.span, model.span))
      << what << ": span sim " << sim.span << " model " << model.span;
  EXPECT_TRUE(eq(sim.idle_total, model.idle_total))
      << what << ": idle_total sim " << sim.idle_total << " model " << model.idle_total;
  EXPECT_TRUE(eq(sim.bubble_fraction, model.bubble_fraction)) << what;
  EXPECT_TRUE(eq(sim.bubble_ratio, model.bubble_ratio)) << what;
  EXPECT_TRUE(eq(sim.bubble_time, model.bubble_time)) << what;
}

class Matrix : public ::testing::TestWithParam<std::string> {};

TEST_P(Matrix, ValidLowersAndMatchesClosedForm) {
  const std::string name = GetParam();
  int configs = 0, compared = 0;
  for (int P : {2, 3, 4, 6, 8})
    for (int M = P; M <= 4 * P; ++M)
      for (int v : {1, 2, 4}) {
        if (!schedule_takes_v(name) && v != 1) continue;
        const std::string what = test::case_name(name, P, M, v);
        if (!test::accepts(name, P, M, v)) {
          try {
            generate(name, {P, M, v});
            ADD_FAILURE() << what << ": expected a ConfigError";
          } catch (const ConfigError& e) {
            const std::string msg = e.what();
            EXPECT_EQ(msg.find('\n'), std::string::npos) << what << ": one line: " << msg;
            EXPECT_EQ(msg.rfind(name + ":", 0), 0u) << what << ": names the schedule: " << msg;
          }
          continue;
        }
        Schedule s = generate(name, {P, M, v});
        ++configs;
        const ValidationReport rep = validate(s);
        ASSERT_TRUE(rep.ok()) << what << "\n" << rep.describe(s);
        const std::vector<double> peaks = peak_activations(s);
        if (name == "zb-auto") {  // its default memory limit: P, as 1F1B
          EXPECT_LE(*std::max_element(peaks.begin(), peaks.end()), P) << what;
        }
        Schedule low = lower(s);  // throws on deadlock or dry-run failure
        ASSERT_TRUE(validate(low).ok()) << what << " (lowered)\n" << validate(low).describe(low);
        ASSERT_TRUE(dry_run(low).ok) << what;
        {
          const DryRunResult timed = timed_dry_run(low);  // lower()'s own proof holds too
          ASSERT_TRUE(timed.ok) << what << "\n" << timed.message;
        }
        EXPECT_EQ(low.compute_size(), s.compute_size()) << what;
        for (const Costs& c : costs_for(name)) {
          const SimConfig cfg = c.config();
          const SimResult r = simulate(s, cfg);
          const SimResult rl = simulate(low, cfg);
          EXPECT_DOUBLE_EQ(r.single.span, rl.single.span) << what << ": lowering changed timing";
          // rl replayed the order lowering found; r searched for one.
          EXPECT_DOUBLE_EQ(r.steady.span, rl.steady.span) << what << ": replay changed timing";
          EXPECT_DOUBLE_EQ(r.busy_sum, rl.busy_sum) << what;
          ModelInput in{name, P, M, s.v, c.f, c.b, c.w, -1};
          const ModelResult m = closed_form(in);
          if (!m.applies) continue;
          ++compared;
          const std::string w2 = what + " F=" + std::to_string(c.f) + " B=" + std::to_string(c.b) +
                                 " W=" + std::to_string(c.w);
          expect_metrics_eq(r.single, m.single, w2 + " single step");
          expect_metrics_eq(r.steady, m.steady, w2 + " steady state");
          ASSERT_EQ(m.peak_activations.size(), peaks.size()) << w2;
          for (int rk = 0; rk < P; ++rk)
            EXPECT_DOUBLE_EQ(peaks[rk], m.peak_activations[rk]) << w2 << " rank " << rk << " peak";
        }
      }
  EXPECT_GT(configs, 0);
  // Every schedule has configurations where its closed form is checked, but zb-auto, whose
  // order is searched with the simulator for the given costs (test_zb_auto.cpp).
  if (name == "zb-auto") {
    EXPECT_EQ(compared, 0);
  } else {
    EXPECT_GT(compared, 0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, Matrix, ::testing::ValuesIn(schedule_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The schedules of issue 31 at every P 2..8 and M 1..4P (v 1..4 where they take v): accepted
// or refused in one line naming them, and where accepted valid, lowered without deadlock and
// dry-run, with the peaks of the model where it states them.
TEST(Matrix, NewSchedulesEveryPAndM) {
  int accepted = 0;
  for (const std::string name : {"looped-bfs", "interleaved-zb", "v-half", "v-min"})
    for (int P = 2; P <= 8; ++P)
      for (int M = 1; M <= 4 * P; ++M)
        for (int v = 1; v <= (schedule_takes_v(name) ? 4 : 1); ++v) {
          const std::string what = test::case_name(name, P, M, v);
          Schedule s;
          try {
            s = generate(name, {P, M, v});
          } catch (const ConfigError& e) {
            const std::string msg = e.what();
            EXPECT_FALSE(test::accepts(name, P, M, v)) << what << ": " << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << what << ": one line: " << msg;
            EXPECT_EQ(msg.rfind(name + ":", 0), 0u) << what << ": names the schedule: " << msg;
            continue;
          }
          ++accepted;
          EXPECT_TRUE(test::accepts(name, P, M, v)) << what;
          const ValidationReport rep = validate(s);
          ASSERT_TRUE(rep.ok()) << what << "\n" << rep.describe(s);
          const Schedule low = lower(s);
          ASSERT_TRUE(validate(low).ok()) << what << " (lowered)";
          ASSERT_TRUE(dry_run(low).ok) << what;
          ASSERT_TRUE(timed_dry_run(low).ok) << what;
          const ModelResult m = closed_form({name, P, M, s.v, 1, 1, 1, -1});
          if (m.peak_activations.empty()) continue;
          const std::vector<double> peaks = peak_activations(s);
          for (int rk = 0; rk < P; ++rk) EXPECT_EQ(peaks[rk], m.peak_activations[rk]) << what;
        }
  EXPECT_GT(accepted, 2 * 4 * 140);
}

TEST(Matrix, DoneWhenExample) {
  // bubblebench sim --schedule gpipe,1f1b -P 4 -M 8 --t-f 1 --t-b 2
  for (const char* name : {"gpipe", "1f1b"}) {
    SimConfig cfg;
    cfg.t_f = {1};
    cfg.t_b = {2};
    const SimResult r = simulate(generate(name, {4, 8, 1}), cfg);
    EXPECT_DOUBLE_EQ(r.single.span, 33);
    EXPECT_DOUBLE_EQ(r.single.idle_total, 36);
    EXPECT_NEAR(r.single.bubble_fraction, 0.2727, 5e-5);
  }
  for (int P : {2, 3, 4, 8}) {
    const SimResult r = simulate(generate("naive", {P, 8, 1}), SimConfig{});
    EXPECT_DOUBLE_EQ(r.single.bubble_fraction, 1.0 - 1.0 / P);
  }
}

// Fewer micro-batches than ranks: wherever a closed form says it applies, it equals the
// simulator (ZB-H1 at M < P once printed (P-1)(F+B-W), one W short of the truth).
TEST(Matrix, ClosedFormsBelowPMatchOrRefuse) {
  int compared = 0, refused = 0;
  for (const std::string& name : schedule_names())
    for (int P : {2, 3, 4, 6, 8})
      for (int M = 1; M < P; ++M)
        for (int v : {1, 2}) {
          if (!schedule_takes_v(name) && v != 1) continue;
          if (!test::accepts(name, P, M, v)) continue;
          const Schedule s = generate(name, {P, M, v});
          for (const Costs& c : costs_for(name)) {
            const ModelResult m = closed_form({name, P, M, s.v, c.f, c.b, c.w, -1});
            if (!m.applies) {
              ++refused;
              EXPECT_FALSE(m.reason.empty()) << name;
              continue;
            }
            ++compared;
            const SimResult r = simulate(s, c.config());
            const std::string what = name + " P=" + std::to_string(P) + " M=" + std::to_string(M) +
                                     " v=" + std::to_string(v) + " F=" + std::to_string(c.f) +
                                     " W=" + std::to_string(c.w);
            expect_metrics_eq(r.single, m.single, what + " single step");
            expect_metrics_eq(r.steady, m.steady, what + " steady state");
          }
        }
  EXPECT_GT(compared, 0);
  EXPECT_GT(refused, 0);
  EXPECT_FALSE(closed_form({"zb-h1", 4, 3, 1, 1, 1, 1, -1}).applies);
  EXPECT_TRUE(closed_form({"zb-h1", 4, 4, 1, 1, 1, 1, -1}).applies);
}

TEST(Matrix, ClosedFormsRefuseALinkTime) {
  ModelInput in{"1f1b", 4, 8, 1, 1, 2, 0, -1};
  EXPECT_TRUE(closed_form(in).applies);
  in.message_time = 0.5;
  const ModelResult m = closed_form(in);
  EXPECT_FALSE(m.applies);
  EXPECT_NE(m.reason.find("zero communication cost"), std::string::npos) << m.reason;
  EXPECT_EQ(m.peak_activations.size(), 4u);  // the order's peaks do not depend on time
}

TEST(Matrix, ZeroBubbleH2NeedsEnoughMicroBatches) {
  // Below 2P-1 micro-batches the steady state keeps (2P-1-M)*F of bubble: no closed form.
  EXPECT_FALSE(closed_form({"zb-h2", 4, 6, 1, 1, 1, 1, -1}).applies);
  EXPECT_TRUE(closed_form({"zb-h2", 4, 7, 1, 1, 1, 1, -1}).applies);
  SimConfig cfg;
  cfg.t_f = cfg.t_b = cfg.t_w = {1};
  EXPECT_DOUBLE_EQ(simulate(generate("zb-h2", {4, 6, 1}), cfg).steady.bubble_time, 1);
}

// Off multiples of P the form holds where the rounds are whole (P=4 M=6: one round of 6, as
// PyTorch), and refuses where they are not (P=4 M=9: 2 rounds of 4.5), as the generator does.
TEST(Matrix, InterleavedClosedFormNeedsWholeRounds) {
  const ModelResult ok = closed_form({"interleaved", 4, 6, 2, 1, 2, 0, -1});
  ASSERT_TRUE(ok.applies) << ok.reason;
  EXPECT_DOUBLE_EQ(ok.single.bubble_time, 3 * 3 / 2.0);
  EXPECT_DOUBLE_EQ(
      simulate(generate("interleaved", {4, 6, 2}), Costs{1, 2, 0}.config()).single.span,
      6 * 3 + 4.5);
  // M < P: each chunk after the first waits (P-M)(F+B+W)/v more.
  EXPECT_DOUBLE_EQ(closed_form({"interleaved", 4, 2, 2, 1, 2, 0, -1}).single.bubble_time, 7.5);
  const ModelResult m = closed_form({"interleaved", 4, 9, 2, 1, 2, 0, -1});
  EXPECT_FALSE(m.applies);
  EXPECT_NE(m.reason.find("equal rounds"), std::string::npos);
  EXPECT_THROW(generate("interleaved", {4, 9, 2}), ConfigError);
}

TEST(Matrix, ZeroBubbleFormsRefuseUnequalPasses) {
  for (const char* n : {"zb-h1", "zb-h2", "zb-v", "dualpipe", "dualpipev"}) {
    const ModelResult m = closed_form({n, 4, 16, 2, 1, 2, 1, -1});
    EXPECT_FALSE(m.applies) << n;
    EXPECT_FALSE(m.reason.empty()) << n;
  }
  const ModelResult m = closed_form({"dualpipe", 4, 16, 2, 1, 1, 1, 2});
  EXPECT_FALSE(m.applies) << "overlap gain";
}

TEST(Sim, LinkModelAddsLatencyPerHop) {
  // gpipe P=2 M=1: F0 -> msg -> F1, B1 -> msg -> B0: two messages on the critical path.
  SimConfig cfg;
  cfg.t_f = {1};
  cfg.t_b = {2};
  cfg.latency = 0.5;
  cfg.msg_bytes = 100;
  cfg.bandwidth = 200;  // +0.5 per message
  const SimResult r = simulate(generate("gpipe", {2, 1, 1}), cfg);
  EXPECT_DOUBLE_EQ(r.single.span, 1 + 1 + 2 + 2 + 2 * (0.5 + 0.5));
  EXPECT_EQ(r.p2p_messages, 2u);
}

// A chunk of v takes F/v, which has no binary form for v = 3, 5, 6, 7: summing those rounded
// shares drifts (interleaved P=8 M=8 v=3 took 31.00000000000002, peak 7.9999999999999964).
// The simulator runs in units of one chunk's share and converts once, so with integer costs
// every time and peak is the correctly rounded k/v, and the makespan the rounded closed form.
TEST(Sim, IntegerCostsGiveCorrectlyRoundedTimesForAnyV) {
  const auto on_grid = [](double x, int v) {  // x is the double nearest to some k/v
    return x == std::round(x * v) / v;
  };
  for (const Costs c : {Costs{1, 2, 0}, Costs{1, 1, 1}})
    for (int v : {3, 5, 6, 7})
      for (int P : {2, 3, 4, 6, 8})
        for (int M : {P, 2 * P}) {
          const std::string what = "interleaved P=" + std::to_string(P) +
                                   " M=" + std::to_string(M) + " v=" + std::to_string(v) +
                                   " F=" + std::to_string(c.f) + " W=" + std::to_string(c.w);
          SimConfig cfg = c.config();
          cfg.record_events = true;
          const Schedule s = generate("interleaved", {P, M, v});
          const SimResult r = simulate(s, cfg);
          const int sum = static_cast<int>(c.f + c.b + c.w);
          // (P-1)(F+B+W)/v + M(F+B+W), as one rational rounded once.
          const double span = static_cast<double>((M * v + P - 1) * sum) / v;
          EXPECT_EQ(r.single.span, span) << what;
          EXPECT_EQ(r.steady.span, span) << what;
          for (int rk = 0; rk < P; ++rk) {
            EXPECT_TRUE(on_grid(r.ranks[rk].peak_activations, v))
                << what << " rank " << rk << " peak " << r.ranks[rk].peak_activations;
            EXPECT_TRUE(on_grid(r.ranks[rk].busy, v)) << what << " rank " << rk;
          }
          for (const SimEvent& e : r.events)
            ASSERT_TRUE(on_grid(e.start, v) && on_grid(e.end, v))
                << what << " rank " << e.rank << " action " << e.index << ": " << e.start << ".."
                << e.end;
        }
  // The drift quoted above, gone.
  SimConfig cfg = Costs{1, 2, 0}.config();
  const SimResult r = simulate(generate("interleaved", {8, 8, 3}), cfg);
  EXPECT_EQ(r.single.span, 31.0);
  EXPECT_EQ(r.ranks[0].peak_activations, 8.0);
}

// Where a chunk's share is a power of two (v = 2, 4; V placements: 1/2) scaling is exact, so
// time in shares gives bit for bit what the same costs given per chunk give (each F·share,
// the engine's unit then being the caller's), also for costs with no binary form.
TEST(Sim, PowerOfTwoSharesMatchPerChunkCosts) {
  const struct {
    const char* name;
    int v;
  } cases[] = {{"interleaved", 2}, {"interleaved", 4}, {"zb-v", 1}, {"dualpipev", 1}};
  for (const auto& c : cases)
    for (int P : {3, 5}) {
      const Schedule s = generate(c.name, {P, 4 * P, c.v});
      SimConfig uniform = Costs{0.1, 0.3, 0.7}.config();
      uniform.latency = 0.01;
      uniform.optimizer_time = 0.05;
      uniform.record_events = true;
      SimConfig per_chunk = uniform;
      const double share = static_cast<double>(P) / s.routes[0].length();
      per_chunk.t_f.assign(static_cast<std::size_t>(s.num_chunks()), 0.1 * share);
      per_chunk.t_b.assign(static_cast<std::size_t>(s.num_chunks()), 0.3 * share);
      per_chunk.t_w.assign(static_cast<std::size_t>(s.num_chunks()), 0.7 * share);
      const SimResult a = simulate(s, uniform), b = simulate(s, per_chunk);
      const std::string what = std::string(c.name) + " P=" + std::to_string(P);
      EXPECT_EQ(a.single.span, b.single.span) << what;
      EXPECT_EQ(a.steady.span, b.steady.span) << what;
      EXPECT_EQ(a.busy_sum, b.busy_sum) << what;
      ASSERT_EQ(a.events.size(), b.events.size()) << what;
      for (std::size_t i = 0; i < a.events.size(); ++i)
        ASSERT_TRUE(a.events[i].start == b.events[i].start && a.events[i].end == b.events[i].end)
            << what << " event " << i;
    }
}

TEST(Sim, PerChunkCostsAndActivationBytes) {
  SimConfig cfg;
  cfg.t_f = {1, 3};  // stage 1 is three times slower
  cfg.t_b = {2, 6};
  cfg.act_bytes = 1000;
  const SimResult r = simulate(generate("gpipe", {2, 4, 1}), cfg);
  // Stage 1 bounds the pipeline: F 1 + 4*3, then backward 4*6, then stage 0's last B.
  EXPECT_DOUBLE_EQ(r.single.span, 1 + 4 * 3 + 4 * 6 + 2);
  EXPECT_DOUBLE_EQ(r.t_ideal, 4 * 9);  // the busiest rank's work
  EXPECT_DOUBLE_EQ(r.ranks[0].peak_activation_bytes, 4000);
}

TEST(Sim, SteadyStateNeedsTwoSteps) {
  SimConfig cfg;
  cfg.t_f = {1};
  cfg.t_b = {1};
  cfg.t_w = {1};
  cfg.steps = 2;
  const SimResult r = simulate(generate("zb-h2", {4, 16, 1}), cfg);
  EXPECT_DOUBLE_EQ(r.steady.span, 48);  // no bubble once steps overlap
  EXPECT_DOUBLE_EQ(r.single.span, 51);  // a single step pays the (P-1)F ramp
}

void expect_same_timing(const SimResult& got, const SimResult& want, const std::string& what) {
  EXPECT_DOUBLE_EQ(got.single.span, want.single.span) << what;
  EXPECT_DOUBLE_EQ(got.steady.span, want.steady.span) << what;
  EXPECT_DOUBLE_EQ(got.busy_sum, want.busy_sum) << what;
  ASSERT_EQ(got.ranks.size(), want.ranks.size()) << what;
  for (std::size_t r = 0; r < got.ranks.size(); ++r) {
    EXPECT_DOUBLE_EQ(got.ranks[r].first_start, want.ranks[r].first_start) << what << " rank " << r;
    EXPECT_DOUBLE_EQ(got.ranks[r].last_end, want.ranks[r].last_end) << what << " rank " << r;
  }
}

// simulate() replays the order a lowered schedule carries; an order that does not fit the
// lists (edited lists, or a broken order) must give the same result as a search, never a
// different one.
TEST(Sim, ComputeOrderThatDoesNotFitFallsBackToTheSearch) {
  SimConfig cfg;
  cfg.t_f = {1};
  cfg.t_b = {1.5};
  cfg.t_w = {0.5};
  cfg.steps = 3;
  cfg.latency = 0.25;
  const Schedule low = lower(generate("zb-h1", {4, 8, 1}));
  ASSERT_TRUE(low.compute_order);
  Schedule bare = low;
  bare.compute_order.reset();
  const SimResult want = simulate(bare, cfg);
  const auto same = [&](const Schedule& s, const std::string& what) {
    expect_same_timing(simulate(s, cfg), want, what);
  };
  same(low, "the order lowering found");
  Schedule s = low;
  s.compute_order = std::make_shared<const ComputeOrder>();
  same(s, "an empty order");
  ComputeOrder reversed = *low.compute_order;
  std::reverse(reversed.begin(), reversed.end());
  s.compute_order = std::make_shared<const ComputeOrder>(reversed);
  same(s, "the order reversed: inputs missing");
  ComputeOrder outside = *low.compute_order;
  outside.front().rank = 9;
  s.compute_order = std::make_shared<const ComputeOrder>(outside);
  same(s, "a rank outside the schedule");
  // Edited lists, with the old order kept: whether it still fits them (3F0,3F1,3B0: inputs
  // still arrive first) or not (3B0 and 3W0 fused into 3BW0: the last rank has one action
  // fewer than the order runs), the result is the search's.
  for (const bool fuse : {false, true}) {
    Schedule edited = generate("zb-h1", {4, 8, 1});
    auto& last = edited.ranks[3];  // 3F0,3B0,3F1,...,3W0,...
    if (fuse) {
      last.erase(std::find(last.begin(), last.end(), make_action(Op::W, 3, 0)));
      last[1] = make_action(Op::BW, 3, 0);
    } else {
      std::swap(last[1], last[2]);
    }
    ASSERT_TRUE(validate(edited).ok()) << validate(edited).describe(edited);
    edited = lower(std::move(edited));
    s = low;
    s.ranks = edited.ranks;
    bare = s;
    bare.compute_order.reset();
    expect_same_timing(simulate(s, cfg), simulate(bare, cfg), fuse ? "fused" : "swapped");
  }
}

TEST(Sim, RejectsBadCostLists) {
  SimConfig cfg;
  cfg.t_f = {1, 2, 3};  // neither 1 nor C=4 values
  EXPECT_THROW(simulate(generate("1f1b", {4, 8, 1}), cfg), ConfigError);
  cfg.t_f = {-1};
  EXPECT_THROW(simulate(generate("1f1b", {4, 8, 1}), cfg), ConfigError);
}

}  // namespace
}  // namespace bb
