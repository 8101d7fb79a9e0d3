// Link fits (src/sim/links.hpp): the α-β line recovers known parameters, the piecewise fit
// finds protocol regimes, the model's costs per pair, and the pairs each schedule uses.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "sim/links.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

using Pairs = std::vector<std::pair<int, int>>;

// Sizes 8 B doubling to `top`, times from `f`.
template <class F>
std::vector<LinkSample> sizes_to(double top, F&& f) {
  std::vector<LinkSample> out;
  for (double b = 8; b <= top; b *= 2) out.push_back({b, f(b)});
  return out;
}

TEST(LinkFit, ExactLineIsRecovered) {
  const double alpha = 2e-6, beta = 5e9;
  const LinkFit f = fit_link(0, 1, sizes_to(1 << 20, [&](double b) { return alpha + b / beta; }));
  EXPECT_NEAR(f.line.alpha, alpha, alpha * 1e-9);
  EXPECT_NEAR(f.line.beta, beta, beta * 1e-9);
  EXPECT_LT(f.line_error.max_rel, 1e-9);
  ASSERT_EQ(f.regimes.size(), 1u);  // one regime is within the target: no more
  EXPECT_EQ(f.regimes[0].lo_bytes, 8);
  EXPECT_EQ(f.regimes[0].hi_bytes, 1 << 20);
  EXPECT_NEAR(f.cost(3000), alpha + 3000 / beta, 1e-15);
}

TEST(LinkFit, NoisyLineIsRecoveredClosely) {
  const double alpha = 5e-6, beta = 2e9;
  int i = 0;
  const LinkFit f = fit_link(1, 0, sizes_to(1 << 22, [&](double b) {
                               const double noise = (i++ % 3 - 1) * 0.02;  // -2 %, 0, +2 %
                               return (alpha + b / beta) * (1 + noise);
                             }));
  EXPECT_NEAR(f.line.alpha, alpha, alpha * 0.03);
  EXPECT_NEAR(f.line.beta, beta, beta * 0.03);
  EXPECT_LT(f.line_error.max_rel, 0.05);
  EXPECT_GT(f.line_error.max_rel, 0.01);  // the noise shows in the error
  EXPECT_EQ(f.src, 1);
  EXPECT_EQ(f.dst, 0);
}

TEST(LinkFit, LatencyOnlyAndBandwidthOnlyStayNonNegative) {
  const LinkFit flat = fit_link(0, 1, sizes_to(4096, [](double) { return 3e-6; }));
  EXPECT_NEAR(flat.line.alpha, 3e-6, 1e-15);
  EXPECT_EQ(flat.line.beta, 0);  // infinite bandwidth
  EXPECT_EQ(flat.cost(1e9), flat.line.alpha);
  // Time falling with size has no α-β line: the best one with β = infinite.
  const LinkFit falling = fit_link(0, 1, sizes_to(4096, [](double b) { return 1e-3 / b; }));
  EXPECT_GE(falling.line.alpha, 0);
  EXPECT_GE(falling.line.beta, 0);
  const LinkFit pure = fit_link(0, 1, sizes_to(1 << 20, [](double b) { return b / 1e9; }));
  EXPECT_NEAR(pure.line.alpha, 0, 1e-15);
  EXPECT_NEAR(pure.line.beta, 1e9, 1e-3);
}

// Eager below 8 KiB, rendezvous above: another latency and bandwidth.
double two_protocols(double b) {
  return b <= 4096 ? 1e-6 + b / 2e9 : 20e-6 + b / 8e9;
}

TEST(LinkFit, ProtocolSwitchIsFoundAsTwoRegimes) {
  const LinkFit f = fit_link(0, 1, sizes_to(1 << 20, two_protocols));
  EXPECT_GT(f.line_error.max_rel, 0.3);  // one line cannot hold both
  ASSERT_EQ(f.regimes.size(), 2u);
  EXPECT_EQ(f.regimes[0].lo_bytes, 8);
  EXPECT_EQ(f.regimes[0].hi_bytes, 4096);
  EXPECT_EQ(f.regimes[1].lo_bytes, 8192);
  EXPECT_EQ(f.regimes[1].hi_bytes, 1 << 20);
  EXPECT_NEAR(f.regimes[0].line.alpha, 1e-6, 1e-12);
  EXPECT_NEAR(f.regimes[0].line.beta, 2e9, 1);
  EXPECT_NEAR(f.regimes[1].line.alpha, 20e-6, 1e-12);
  EXPECT_NEAR(f.regimes[1].line.beta, 8e9, 1);
  EXPECT_LT(f.regimes_error.max_rel, 1e-9);
  EXPECT_LT(f.regimes_error.median_rel, 1e-9);
  // Between 4096 and 8192 the boundary is their geometric mean.
  const double mid = std::sqrt(4096.0 * 8192.0);
  EXPECT_DOUBLE_EQ(f.cost(mid - 1), f.regimes[0].line.at(mid - 1));
  EXPECT_DOUBLE_EQ(f.cost(mid + 1), f.regimes[1].line.at(mid + 1));
  EXPECT_DOUBLE_EQ(f.cost(2), f.regimes[0].line.at(2));              // below: the first
  EXPECT_DOUBLE_EQ(f.cost(1 << 24), f.regimes[1].line.at(1 << 24));  // above: the last
}

TEST(LinkFit, ThreeRegimesAndTheLimit) {
  // (Outliers that no segmentation can help tie on the largest error: then the most regimes,
  // the smallest sum of squares.)
  const auto three = [](double b) {
    return b <= 256 ? 1e-6 + b / 1e9 : b <= 16384 ? 4e-6 + b / 3e9 : 30e-6 + b / 10e9;
  };
  const LinkFit f = fit_link(0, 1, sizes_to(1 << 22, three));
  ASSERT_EQ(f.regimes.size(), 3u);
  EXPECT_EQ(f.regimes[1].lo_bytes, 512);
  EXPECT_EQ(f.regimes[2].lo_bytes, 32768);
  EXPECT_LT(f.regimes_error.max_rel, 1e-9);
  // At most two regimes: the best two-way split, honestly worse.
  FitOptions two;
  two.max_regimes = 2;
  const LinkFit g = fit_link(0, 1, sizes_to(1 << 22, three), two);
  EXPECT_EQ(g.regimes.size(), 2u);
  EXPECT_GT(g.regimes_error.max_rel, 1e-3);
  EXPECT_LE(g.regimes_error.max_rel, g.line_error.max_rel);
  // One regime: the line.
  FitOptions one;
  one.max_regimes = 1;
  const LinkFit h = fit_link(0, 1, sizes_to(1 << 22, three), one);
  ASSERT_EQ(h.regimes.size(), 1u);
  EXPECT_EQ(h.regimes_error.max_rel, h.line_error.max_rel);
}

// Every regime of F holds at least `n` measured sizes.
void expect_regime_sizes_at_least(const LinkFit& f, int n) {
  for (const LinkRegime& r : f.regimes) {
    int count = 0;
    for (const LinkSample& x : f.samples) count += x.bytes >= r.lo_bytes && x.bytes <= r.hi_bytes;
    EXPECT_GE(count, n) << r.lo_bytes << ".." << r.hi_bytes;
  }
}

TEST(LinkFit, RegimesKeepTheMinimumSizeCount) {
  // With min_points 1 a spike at one size gets a regime of its own (a flat line through it)...
  const auto spiky = [](double b) { return b == 128 ? 10e-6 : 1e-6 + b / 2e9; };
  FitOptions single;
  single.min_points = 1;
  const LinkFit d = fit_link(0, 1, sizes_to(1 << 16, spiky), single);
  ASSERT_EQ(d.regimes.size(), 3u);
  EXPECT_EQ(d.regimes[1].lo_bytes, 128);
  EXPECT_EQ(d.regimes[1].hi_bytes, 128);
  EXPECT_NEAR(d.cost(128), 10e-6, 1e-15);
  EXPECT_LT(d.regimes_error.max_rel, 1e-9);
  EXPECT_GT(d.line_error.max_rel, 0.5);
  // ...but not when a regime needs 3 sizes: then it stays an error.
  FitOptions three;
  three.min_points = 3;
  const LinkFit f = fit_link(0, 1, sizes_to(1 << 16, spiky), three);
  expect_regime_sizes_at_least(f, 3);
  EXPECT_GT(f.regimes_error.max_rel, 0.1);
  // By default a regime holds two sizes at least: the spike is not interpolated away.
  EXPECT_EQ(FitOptions{}.min_points, 2);
  const LinkFit g = fit_link(0, 1, sizes_to(1 << 16, spiky));
  expect_regime_sizes_at_least(g, 2);
  EXPECT_GT(g.regimes_error.max_rel, 0.1);
  // Fewer sizes than a regime needs: the line.
  const LinkFit two = fit_link(0, 1, {{8, 1e-6}, {16, 2e-6}}, three);
  ASSERT_EQ(two.regimes.size(), 1u);
  EXPECT_NEAR(two.cost(24), 3e-6, 1e-15);
}

// The shape measured on the project's machine (MPICH ch4:ucx, shared memory, bound ranks):
// flat to 256 B, a slope to 4 KiB, the shared-memory bandwidth to 256 KiB, then a lower one
// past the caches (two sizes). Exact α-β per regime: found with regimes of two sizes or more,
// each regime's α and β recovered.
TEST(LinkFit, MeasuredShapeIsFoundWithinTheTarget) {
  const AlphaBeta flat{0.9e-6, 0}, eager{1.2e-6, 2e9}, shm{2.0e-6, 8.5e9}, dram{0, 3.3e9};
  const auto shape = [&](double b) {
    return b <= 256 ? flat.at(b) : b <= 4096 ? eager.at(b) : b <= 262144 ? shm.at(b) : dram.at(b);
  };
  const LinkFit f = fit_link(0, 1, sizes_to(1 << 20, shape));
  EXPECT_GT(f.line_error.max_rel, 0.3);
  EXPECT_LT(f.regimes_error.max_rel, 1e-9);
  expect_regime_sizes_at_least(f, 2);
  ASSERT_EQ(f.regimes.size(), 4u);
  const double lo[] = {8, 512, 8192, 524288};
  const AlphaBeta want[] = {flat, eager, shm, dram};
  for (std::size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(f.regimes[r].lo_bytes, lo[r]) << r;
    EXPECT_NEAR(f.regimes[r].line.alpha, want[r].alpha, 1e-12) << r;
    EXPECT_NEAR(f.regimes[r].line.beta, want[r].beta, want[r].beta * 1e-6) << r;
  }
}

TEST(LinkFit, BadSamplesAreRefused) {
  EXPECT_THROW(fit_link(0, 1, {}), ConfigError);
  EXPECT_THROW(fit_link(0, 1, {{8, 0}}), ConfigError);
  EXPECT_THROW(fit_link(0, 1, {{8, 1e-6}, {8, 2e-6}}), ConfigError);
  EXPECT_THROW(fit_link(0, 1, {{8, std::nan("")}}), ConfigError);
  // Unsorted input is sorted.
  const LinkFit f = fit_link(0, 1, {{64, 3e-6}, {8, 1e-6}, {16, 1.5e-6}});
  EXPECT_EQ(f.samples.front().bytes, 8);
}

TEST(LinkModel, CostsPerDirectedPair) {
  const LinkModel none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.cost(0, 1, 1e6), 0);
  const LinkFit ab = fit_link(0, 1, sizes_to(1 << 16, [](double b) { return 1e-6 + b / 1e9; }));
  const LinkFit ba = fit_link(1, 0, sizes_to(1 << 16, [](double b) { return 3e-6 + b / 1e9; }));
  const LinkModel m({ab, ba});
  EXPECT_TRUE(m.covers(0, 1));
  EXPECT_TRUE(m.covers(1, 0));
  EXPECT_FALSE(m.covers(1, 2));
  EXPECT_NEAR(m.cost(0, 1, 1000), 2e-6, 1e-15);
  EXPECT_NEAR(m.cost(1, 0, 1000), 4e-6, 1e-15);
  EXPECT_EQ(m.cost(1, 2, 1000), 0);  // no fit: free
  EXPECT_THROW(LinkModel({ab, ab}), ConfigError);
}

Pairs sorted(Pairs p) {
  std::sort(p.begin(), p.end());
  return p;
}

TEST(PipelinePairs, EverySchedule) {
  const Pairs chain = neighbour_pairs(4);
  EXPECT_EQ(chain, sorted({{0, 1}, {1, 0}, {1, 2}, {2, 1}, {2, 3}, {3, 2}}));
  EXPECT_EQ(all_pairs(3).size(), 6u);
  for (const std::string& name : schedule_names()) {
    const Schedule s = generate(name, {4, 8, 2});
    const Pairs got = pipeline_pairs(s);
    // Looped placements with v > 1 (the schedules that take v) wrap from the last rank back
    // to the first.
    Pairs want = chain;
    if (schedule_takes_v(name))
      want = sorted({{0, 1}, {1, 0}, {1, 2}, {2, 1}, {2, 3}, {3, 2}, {3, 0}, {0, 3}});
    EXPECT_EQ(got, want) << name;
    EXPECT_EQ(pipeline_pairs(lower(s)), got) << name << " lowered";
  }
  EXPECT_TRUE(pipeline_pairs(generate("1f1b", {1, 4, 1})).empty());
  // Only what the messages use: two ranks send one way only in a forward-only list.
  Schedule fwd = generate("gpipe", {2, 2, 1});
  for (auto& r : fwd.ranks) std::erase_if(r, [](const Action& a) { return a.op != Op::F; });
  EXPECT_EQ(pipeline_pairs(fwd), (Pairs{{0, 1}}));
}

// The simulator's message delay per pair: the fit where the model covers the pair, the
// uniform latency elsewhere.
TEST(SimLinks, FittedCostPerPair) {
  const Schedule s = lower(generate("gpipe", {2, 1, 1}));
  SimConfig c;
  c.t_f = {1};
  c.t_b = {2};
  c.latency = 1;
  EXPECT_EQ(simulate(s, c).single.span, 8);  // 1 + 1 + 1 + 2 + 1 + 2
  const auto flat = [](double t) { return std::vector<LinkSample>{{8, t}, {16, t}, {32, t}}; };
  c.links = std::make_shared<const LinkModel>(std::vector<LinkFit>{fit_link(0, 1, flat(0.5))});
  EXPECT_EQ(simulate(s, c).single.span, 7.5);  // 0->1 fitted, 1->0 the latency
  c.links = std::make_shared<const LinkModel>(
      std::vector<LinkFit>{fit_link(0, 1, flat(0.5)), fit_link(1, 0, flat(0.25))});
  EXPECT_EQ(simulate(s, c).single.span, 6.75);
  // A pair's wake-up adds to each of its messages (the receiver waits for them here).
  std::vector<LinkFit> woken{fit_link(0, 1, flat(0.5)), fit_link(1, 0, flat(0.25))};
  woken[0].wake_s = 0.125;
  EXPECT_EQ(LinkModel(woken).cost(0, 1, 8), 0.625);
  c.links = std::make_shared<const LinkModel>(woken);
  EXPECT_EQ(simulate(s, c).single.span, 6.875);
  c.links = std::make_shared<const LinkModel>(
      std::vector<LinkFit>{fit_link(0, 1, flat(0.5)), fit_link(1, 0, flat(0.25))});
  // The size matters: a bandwidth term at msg_bytes.
  c.links = std::make_shared<const LinkModel>(
      std::vector<LinkFit>{fit_link(0, 1, {{8, 8 / 16.0}, {16, 16 / 16.0}, {32, 32 / 16.0}}),
                           fit_link(1, 0, flat(0.25))});
  c.msg_bytes = 64;
  EXPECT_DOUBLE_EQ(simulate(s, c).single.span, 6 + 4 + 0.25);
  // The periodic engine is not used with links, and the result is the plain engine's.
  const Schedule big = lower(generate("1f1b", {2, 64, 1}));
  c.engine = SimConfig::Engine::periodic;
  const SimResult p = simulate(big, c);
  EXPECT_EQ(p.jumped_units, 0u);
  c.engine = SimConfig::Engine::plain;
  EXPECT_EQ(simulate(big, c).single.span, p.single.span);
}

}  // namespace
}  // namespace bb
