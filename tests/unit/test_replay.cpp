// The replay of lowered schedules with per-instance costs (sim/replay.hpp) and the bubble
// attribution (sim/attribution.hpp) on constructed records: records are made by replaying
// known costs (and known link delays), so each injected cause has a known place.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "runtime/debug_transport.hpp"
#include "schedule/edges.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule_cases.hpp"
#include "sim/attribution.hpp"
#include "sim/replay.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

// Every built-in schedule, lowered, at a few small shapes.
template <class F>
void for_each_lowered(F&& f) {
  const auto ms_of = [](int P) { return std::vector<int>{2 * P, 4 * P}; };
  test::for_each_accepted({2, 3, 4}, ms_of, {1, 2},
                          [&](const std::string& name, int P, int M, int v) {
                            f(test::case_name(name, P, M, v), lower(generate(name, {P, M, v})));
                          });
}

// Base seconds of a unit by its kind (stage units), times its chunk's fraction.
double base_cost(const Schedule& s, int r, std::size_t i) {
  const auto& acts = s.ranks[static_cast<std::size_t>(r)];
  const Action& a = acts[i];
  const double f = s.chunk_fraction(static_cast<int>(a.mb));
  const auto one = [](Op op) {
    return op == Op::F ? 1.0 : op == Op::B ? 1.25 : op == Op::W ? 0.75 : 2.0;
  };
  double t = one(a.op);
  if (unit_length(a, acts.size() - i) == 2) t += one(acts[i + 1].op);
  return t * f * 1e-3;
}

// base_cost times a factor drawn once per (rank, unit, step) from `count` uniform in
// [0.5, 1.5] (seeded): costs that vary at random from step to step.
std::function<double(int, std::size_t, int)> jittered_cost(const Schedule& s, unsigned seed,
                                                           std::size_t count) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(0.5, 1.5);
  std::vector<double> factor(count);
  for (double& x : factor) x = noise(rng);
  return [&s, factor](int r, std::size_t i, int k) {
    const std::size_t key =
        i * 7 + static_cast<std::size_t>(r) * 131 + static_cast<std::size_t>(k) * 977;
    return base_cost(s, r, i) * factor[key % factor.size()];
  };
}

// Records of `steps` timed steps behind a barrier: each step replayed on its own with the
// given costs and links; the measured span of a step is its replay's makespan plus `extra`.
struct Constructed {
  AttributionInput in;
  std::vector<double> replay_span;
};

Constructed construct(const Schedule& s, int steps,
                      const std::function<double(int, std::size_t, int)>& cost,
                      const MessageCost& link = {}, double extra = 0) {
  Constructed c;
  c.in.lowered = &s;
  c.in.records.assign(static_cast<std::size_t>(s.P), {});
  for (int k = 0; k < steps; ++k) {
    ReplayCosts rc;
    rc.compute = [&, k](int r, std::size_t i, int) { return cost(r, i, k); };
    rc.message = link;
    rc.message_bytes = 1024;
    const ReplayResult res = replay(s, rc, 1, true);
    for (auto& rr : c.in.records) rr.emplace_back();
    // Each rank's clock has its own origin: attribution must not assume a shared one.
    for (const ReplayEvent& e : res.events)
      c.in.records[static_cast<std::size_t>(e.rank)][static_cast<std::size_t>(k)].push_back(
          {static_cast<std::uint32_t>(e.index), 0.75 * e.rank + e.start, 0.75 * e.rank + e.end});
    c.replay_span.push_back(res.steps[0].span);
    c.in.span.push_back(res.steps[0].span + extra);
  }
  c.in.message_bytes = 1024;
  return c;
}

// Terms compared with known values: rounding of the records' clocks (origins differ per rank).
constexpr double kTol = 1e-9;

void expect_adds_up(const Attribution& a, const std::string& what) {
  for (const AttributionTerms& t : a.steps) EXPECT_NEAR(t.sum(), t.measured, 1e-12) << what;
}

TEST(Replay, ConstantCostsGiveTheSimulatorsTimes) {
  for_each_lowered([](const std::string& what, const Schedule& s) {
    SimConfig sc;
    sc.t_f = {1e-3};
    sc.t_b = {1.25e-3};
    sc.t_w = {0.75e-3};
    sc.latency = 0.1e-3;
    const SimResult sim = simulate(s, sc);
    ReplayCosts rc;
    rc.compute = [&](int r, std::size_t i, int) {
      const Action& a = s.ranks[static_cast<std::size_t>(r)][i];
      // The simulator charges a fused BW as B + W.
      return a.op == Op::BW && !a.overlap_next() ? 2.0e-3 * s.chunk_fraction(static_cast<int>(a.mb))
                                                 : base_cost(s, r, i);
    };
    rc.message = [](int, int, double) { return 0.1e-3; };
    const ReplayResult res = replay(s, rc, 3);
    EXPECT_NEAR(res.steps[0].span, sim.single.span, kTol) << what;
    EXPECT_NEAR(res.steps[0].busy, sim.busy_sum, kTol) << what;
    EXPECT_NEAR(res.steps[2].span, sim.steady.span, kTol) << what;
  });
}

TEST(Replay, RefusesAnUnloweredSchedule) {
  const Schedule s = generate("1f1b", {2, 4, 1});
  ReplayCosts rc;
  rc.compute = [](int, std::size_t, int) { return 1.0; };
  EXPECT_THROW(replay(s, rc), ScheduleError);
}

TEST(Attribution, UniformRecordGivesOnlyTheScheduleTerm) {
  for_each_lowered([](const std::string& what, const Schedule& s) {
    const Constructed c =
        construct(s, 3, [&](int r, std::size_t i, int) { return base_cost(s, r, i); });
    const Attribution a = attribute(c.in);
    ASSERT_EQ(a.steps.size(), 3u) << what;
    for (const AttributionTerms& t : a.steps) {
      EXPECT_NEAR(t.schedule, t.measured, kTol) << what;
      EXPECT_NEAR(t.imbalance, 0, kTol) << what;
      EXPECT_NEAR(t.jitter, 0, kTol) << what;
      EXPECT_NEAR(t.communication, 0, kTol) << what;
      EXPECT_NEAR(t.residual, 0, kTol) << what;
    }
  });
}

TEST(Attribution, SlowRankShowsUpEntirelyAsImbalance) {
  for (const char* name : {"1f1b", "zb-h1", "interleaved", "zb-v", "dualpipev"}) {
    const Schedule s = lower(generate(name, {4, 8, 2}));
    const auto uniform = [&](int r, std::size_t i, int) { return base_cost(s, r, i); };
    const auto slow = [&](int r, std::size_t i, int) {
      return base_cost(s, r, i) * (r == 2 ? 1.5 : 1);
    };
    const Constructed fast = construct(s, 3, uniform);
    const Constructed c = construct(s, 3, slow);
    const Attribution a = attribute(c.in);
    for (const AttributionTerms& t : a.steps) {
      // The median kind costs are the fast ranks' (3 of 4): (a) is the uniform record's own
      // schedule, in seconds of idle time.
      const double unit = s.P * t.span;
      const Attribution af = attribute(fast.in);
      EXPECT_NEAR(t.schedule * unit, af.steps[0].schedule * s.P * fast.in.span[0], kTol) << name;
      EXPECT_GT(t.imbalance, 0.05) << name;
      EXPECT_NEAR(t.jitter, 0, kTol) << name;
      EXPECT_NEAR(t.communication, 0, kTol) << name;
      EXPECT_NEAR(t.residual, 0, kTol) << name;
      EXPECT_NEAR(t.sum(), t.measured, 1e-12) << name;
    }
  }
}

TEST(Attribution, RandomDurationsAreJitter) {
  const Schedule s = lower(generate("1f1b", {4, 8, 1}));
  const auto cost = jittered_cost(s, 3, 4096);
  const Attribution a = attribute(construct(s, 3, cost).in);
  for (const AttributionTerms& t : a.steps) {
    EXPECT_GT(std::abs(t.jitter), 1e-3);
    EXPECT_NEAR(t.communication, 0, kTol);
    EXPECT_NEAR(t.residual, 0, kTol);
  }
  expect_adds_up(a, "1f1b");
}

TEST(Attribution, SlowLinkShowsUpAsCommunication) {
  for (const char* name : {"1f1b", "zb-h1", "interleaved", "zb-v", "dualpipe"}) {
    const Schedule s = lower(generate(name, {4, 8, 2}));
    const MessageCost link = [](int src, int dst, double) {
      return src == 1 && dst == 2 ? 0.5e-3 : 0.0;
    };
    Constructed c = construct(
        s, 2, [&](int r, std::size_t i, int) { return base_cost(s, r, i); }, link);
    c.in.link = link;
    const Attribution a = attribute(c.in);
    for (const AttributionTerms& t : a.steps) {
      EXPECT_GT(t.communication, 0.01) << name;
      EXPECT_NEAR(t.imbalance, 0, kTol) << name;
      EXPECT_NEAR(t.jitter, 0, kTol) << name;
      EXPECT_NEAR(t.residual, 0, kTol) << name;
    }
    expect_adds_up(a, name);
    // Without the link model the same delay is unexplained: residual.
    c.in.link = {};
    for (const AttributionTerms& t : attribute(c.in).steps) {
      EXPECT_NEAR(t.communication, 0, kTol) << name;
      EXPECT_GT(t.residual, 0.01) << name;
    }
  }
}

TEST(Attribution, OneDelayedMessageIsCommunicationOrResidual) {
  // A delay on one message only (the k-th on pair 0 -> 1): with a link model that knows it,
  // communication; without one, residual. Imbalance and jitter stay 0 either way.
  const Schedule s = lower(generate("1f1b", {2, 8, 1}));
  int calls = 0;
  const MessageCost once = [&calls](int src, int dst, double) {
    return src == 0 && dst == 1 && ++calls == 3 ? 2e-3 : 0.0;
  };
  Constructed c = construct(
      s, 1, [&](int r, std::size_t i, int) { return base_cost(s, r, i); }, once);
  for (bool known : {true, false}) {
    calls = 0;
    c.in.link = known ? once : MessageCost{};
    const AttributionTerms t = attribute(c.in).steps.at(0);
    EXPECT_NEAR(t.imbalance, 0, kTol);
    EXPECT_NEAR(t.jitter, 0, kTol);
    EXPECT_GT(known ? t.communication : t.residual, 0.02);
    EXPECT_NEAR(known ? t.residual : t.communication, 0, kTol);
  }
}

TEST(Attribution, TermsAlwaysAddUp) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.2, 3.0);
  for_each_lowered([&](const std::string& what, const Schedule& s) {
    std::vector<double> f(4096);
    for (double& x : f) x = u(rng);
    const auto cost = [&](int r, std::size_t i, int k) {
      return base_cost(s, r, i) *
             f[(i * 7 + static_cast<std::size_t>(r) * 131 + static_cast<std::size_t>(k) * 977) %
               f.size()];
    };
    const double lat = u(rng) * 1e-4, extra = u(rng) * 1e-3;
    const MessageCost link = [lat](int src, int dst, double bytes) {
      return lat * (1 + src) + bytes * 1e-9 * (1 + dst);
    };
    Constructed c = construct(s, 3, cost, link, extra);
    // The true link model: the residual is exactly the span added beyond the replay's.
    c.in.link = link;
    for (const AttributionTerms& t : attribute(c.in).steps)
      EXPECT_NEAR(t.residual, extra / t.span, kTol) << what;
    // A link model that is not quite the truth: terms still add up.
    c.in.link = [lat](int src, int dst, double bytes) {
      return 0.7 * lat * (1 + src) + bytes * 1e-9 * dst;
    };
    const Attribution a = attribute(c.in);
    ASSERT_EQ(a.steps.size(), 3u) << what;
    expect_adds_up(a, what);
    for (const AttributionTerms& t : a.steps) EXPECT_GT(t.measured, 0) << what;
    // The median step is one of the steps.
    bool found = false;
    for (const AttributionTerms& t : a.steps)
      found |= t.step == a.median.step && t.measured == a.median.measured;
    EXPECT_TRUE(found) << what;
  });
}

TEST(Attribution, EvenStepCountAveragesTheTwoMiddleSteps) {
  const Schedule s = lower(generate("1f1b", {2, 4, 1}));
  const auto cost = jittered_cost(s, 7, 1024);
  Constructed c = construct(s, 4, cost, MessageCost{}, 0.0);
  const Attribution a = attribute(c.in);
  ASSERT_EQ(a.steps.size(), 4u);
  std::vector<double> measured;
  for (const AttributionTerms& t : a.steps) measured.push_back(t.measured);
  std::sort(measured.begin(), measured.end());
  EXPECT_NEAR(a.median.measured, 0.5 * (measured[1] + measured[2]), 1e-12);
  EXPECT_NEAR(a.median.sum(), a.median.measured, 1e-9);
}

TEST(Attribution, BackToBackStepsUseThePeriod) {
  const Schedule s = lower(generate("1f1b", {4, 8, 1}));
  const auto cost = [&](int r, std::size_t i, int) {
    return base_cost(s, r, i) * (r == 1 ? 1.3 : 1.0);
  };
  ReplayCosts rc;
  rc.compute = cost;
  const int n = 4;
  const ReplayResult res = replay(s, rc, n, true);
  AttributionInput in;
  in.lowered = &s;
  in.back_to_back = true;
  in.records.assign(4, std::vector<std::vector<MeasuredUnit>>(n));
  for (const ReplayEvent& e : res.events)
    in.records[static_cast<std::size_t>(e.rank)][static_cast<std::size_t>(e.step)].push_back(
        {static_cast<std::uint32_t>(e.index), e.start - 5.0 * e.rank, e.end - 5.0 * e.rank});
  for (const ReplayStep& st : res.steps) in.span.push_back(st.span);
  const Attribution a = attribute(in);
  ASSERT_EQ(a.steps.size(), 3u);  // steps 1..3: the first has no period
  for (const AttributionTerms& t : a.steps) {
    EXPECT_GE(t.step, 1u);
    EXPECT_GT(t.imbalance, 0.01);
    EXPECT_NEAR(t.jitter, 0, kTol);
    EXPECT_NEAR(t.residual, 0, kTol);
    EXPECT_NEAR(t.sum(), t.measured, 1e-12);
  }
}

TEST(Attribution, RefusesRecordsThatDoNotFit) {
  const Schedule s = lower(generate("1f1b", {2, 4, 1}));
  Constructed c = construct(s, 1, [&](int r, std::size_t i, int) { return base_cost(s, r, i); });
  AttributionInput bad = c.in;
  bad.records[0][0].pop_back();
  EXPECT_THROW(attribute(bad), ConfigError);
  bad = c.in;
  bad.records[1][0][0].index = bad.records[1][0][1].index;  // twice
  EXPECT_THROW(attribute(bad), ConfigError);
  bad = c.in;
  bad.span[0] = 0;
  EXPECT_THROW(attribute(bad), ConfigError);
  bad = c.in;
  bad.records.pop_back();
  EXPECT_THROW(attribute(bad), ConfigError);
}

// Records the sends it is given; every operation completes at the first test().
class RecordingTransport final : public Transport {
 public:
  std::string_view name() const override { return "recording"; }
  int rank() const override { return 0; }
  int size() const override { return 3; }
  Request isend(ConstTensorPtr, std::size_t, int peer, int tag) override {
    sends.push_back({peer, tag});
    return Request{next++};
  }
  Request irecv(TensorPtr, std::size_t, int, int) override { return Request{next++}; }
  bool test(Request& r) override {
    r = Request{};
    return true;
  }
  std::vector<std::pair<int, int>> sends;  // (peer, tag) in posting order
  std::int64_t next = 0;
};

TEST(DelayedLinkTransport, HoldsSendsOnOneLinkInOrder) {
  RecordingTransport inner;
  DelayedLinkTransport t(inner, 2, 0.05);
  float buf[1] = {0};
  Request a = t.isend(buf, 1, 2, 10), b = t.isend(buf, 1, 1, 11), c = t.isend(buf, 1, 2, 12);
  Request r = t.irecv(buf, 1, 2, 13);
  // The send to rank 1 and the receive pass through; the sends to rank 2 are held.
  ASSERT_EQ(inner.sends.size(), 1u);
  EXPECT_EQ(inner.sends[0], std::make_pair(1, 11));
  EXPECT_TRUE(t.test(b));
  EXPECT_TRUE(t.test(r));
  EXPECT_FALSE(t.test(a));
  EXPECT_FALSE(t.test(c));
  EXPECT_EQ(inner.sends.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_TRUE(t.test(c));  // any test() posts every due send, in isend() order
  ASSERT_EQ(inner.sends.size(), 3u);
  EXPECT_EQ(inner.sends[1], std::make_pair(2, 10));
  EXPECT_EQ(inner.sends[2], std::make_pair(2, 12));
  EXPECT_TRUE(t.test(a));
  EXPECT_TRUE(t.test(a));  // a completed request stays complete
}

}  // namespace
}  // namespace bb
