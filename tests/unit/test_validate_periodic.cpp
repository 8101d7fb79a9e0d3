// Validation on the segments (surely_valid, validate_periodic.cpp) with routes by chunk (DualPipe's
// two directions) and long patterns (interleaved's blocks): sure of every built-in schedule, and
// never sure of a schedule validate() rejects, whether broken in a pattern, in the flat lists, in
// the routes or in the placement.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "schedule/generators.hpp"
#include "schedule/periodic.hpp"
#include "schedule/validate.hpp"
#include "schedule_cases.hpp"

namespace bb {
namespace {

TEST(PeriodicValidation, SureOfEveryBuiltInSchedule) {
  const auto ms_of = [](int P) { return std::vector<int>{P, 2 * P + 1, 4 * P, 16 * P}; };
  std::size_t by_chunk = 0;
  test::for_each_accepted(
      {2, 3, 4, 8}, ms_of, {1, 2, 4}, [&](const std::string& name, int P, int M, int v) {
        const Schedule s = generate(name, {P, M, v});
        by_chunk += !s.uniform_routes();
        EXPECT_TRUE(surely_valid(to_periodic(s))) << test::case_name(name, P, M, v);
      });
  EXPECT_GT(by_chunk, 3u);  // DualPipe's cases among them
}

// Both validations of `s` (flat lists) reject it; the one on the segments is not sure.
void expect_rejected(const Schedule& s, const std::string& what) {
  EXPECT_FALSE(validate(s).ok()) << what;
  EXPECT_FALSE(surely_valid(to_periodic(s))) << what;
}

// Position of `op` on `chunk` for micro-batch `mb` in rank r's list.
std::size_t find(const Schedule& s, int r, Op op, int chunk, int mb) {
  const auto& l = s.ranks[r];
  const auto it = std::find_if(l.begin(), l.end(), [&](const Action& a) {
    return a.op == op && a.chunk == static_cast<std::uint32_t>(chunk) &&
           a.mb == static_cast<std::uint32_t>(mb);
  });
  EXPECT_NE(it, l.end());
  return static_cast<std::size_t>(it - l.begin());
}

// DualPipe broken by hand where its F/B pairs repeat (a micro-batch in the middle of each
// direction), on a chunk of each route.
TEST(PeriodicValidation, DualPipeBrokenByHand) {
  const int P = 8, M = 64;
  const Schedule good = generate("dualpipe", {P, M, 1});
  ASSERT_FALSE(good.uniform_routes());
  ASSERT_TRUE(validate(good).ok());
  ASSERT_TRUE(surely_valid(to_periodic(good)));
  const int r = 3;
  for (const int chunk : {r, 2 * P - 1 - r}) {  // rank r's chunk of each direction
    const int mb = chunk < P ? M / 4 : 3 * M / 4;
    const std::string at = "chunk " + std::to_string(chunk) + ": ";
    const auto on = [&](Op op, int m) {
      return std::any_of(good.ranks[r].begin(), good.ranks[r].end(), [&](const Action& a) {
        return a.op == op && a.chunk == static_cast<std::uint32_t>(chunk) &&
               a.mb == static_cast<std::uint32_t>(m);
      });
    };
    const Op backward = on(Op::B, mb) ? Op::B : Op::BW;
    {  // its backward before its forward
      Schedule s = good;
      auto& l = s.ranks[r];
      const std::size_t f = find(s, r, Op::F, chunk, mb), b = find(s, r, backward, chunk, mb);
      l[f].flags = 0;  // no longer a pair's forward
      const Action fw = l[f];
      l.erase(l.begin() + static_cast<std::ptrdiff_t>(f));
      l.insert(l.begin() + static_cast<std::ptrdiff_t>(b), fw);  // just after the backward
      expect_rejected(s, at + "backward before forward");
    }
    for (int m = mb; m < M; ++m)  // a W missing (the first one from mb on)
      if (on(Op::W, m)) {
        Schedule s = good;
        auto& l = s.ranks[r];
        l.erase(l.begin() + static_cast<std::ptrdiff_t>(find(s, r, Op::W, chunk, m)));
        expect_rejected(s, at + "W missing");
        break;
      }
    {  // an F twice
      Schedule s = good;
      auto& l = s.ranks[r];
      Action fw = l[find(s, r, Op::F, chunk, mb)];
      fw.flags = 0;
      l.push_back(fw);
      expect_rejected(s, at + "F twice");
    }
    {  // an F on another rank
      Schedule s = good;
      auto& l = s.ranks[r];
      const std::size_t f = find(s, r, Op::F, chunk, mb);
      Action fw = l[f];
      fw.flags = 0;
      l[f].flags = 0;
      l.erase(l.begin() + static_cast<std::ptrdiff_t>(f));
      s.ranks[r + 1].insert(s.ranks[r + 1].begin(), fw);
      expect_rejected(s, at + "F on the wrong rank");
    }
    {  // every action of a micro-batch of the other direction on this chunk
      Schedule s = good;
      const int other = chunk < P ? 3 * M / 4 : M / 4;
      for (Action& a : s.ranks[r])
        if (a.chunk == static_cast<std::uint32_t>(chunk) && a.mb == static_cast<std::uint32_t>(mb))
          a.mb = static_cast<std::uint32_t>(other);
      expect_rejected(s, at + "a micro-batch on the wrong route");
    }
  }
  {  // a micro-batch's route changed to the other direction's
    Schedule s = good;
    s.routes[M / 4] = s.routes[3 * M / 4];
    expect_rejected(s, "a route swapped");
  }
  {  // two routes that share chunks
    Schedule s = good;
    s.routes[M / 4] = Route{0, 2 * P - 1};
    expect_rejected(s, "routes sharing chunks");
  }
  {  // a route that visits half its chunks
    Schedule s = good;
    s.routes[M / 4] = Route{0, P / 2};
    expect_rejected(s, "a shorter route");
  }
  {  // a route leaving the chunk range
    Schedule s = good;
    s.routes[M - 1] = Route{P, 2 * P};
    expect_rejected(s, "a route out of range");
  }
  {  // two chunks swapped in the placement
    Schedule s = good;
    std::swap(s.chunk_rank[r], s.chunk_rank[r + 1]);
    expect_rejected(s, "chunks swapped in the placement");
  }
}

// One rank, two chunks, M = 40, segments (op, chunk, first micro-batch, step, reps) of one action
// each; micro-batch m's route is route(m).
template <class RouteOf>
PeriodicSchedule two_chunks(RouteOf route,
                            std::initializer_list<std::tuple<Op, int, int, int, int>> segs) {
  PeriodicSchedule p;
  p.shape = make_schedule("t", 1, 40, 2);
  set_looped_placement(p.shape);
  for (int m = 0; m < 40; ++m) p.shape.routes[m] = route(m);
  p.lists.ranks.resize(1);
  for (const auto& [op, chunk, mb, step, reps] : segs) {
    p.lists.ranks[0].push_back({static_cast<std::uint32_t>(p.lists.pool.size()), 1,
                                static_cast<std::uint32_t>(reps), step});
    p.lists.pool.push_back(make_action(op, chunk, mb));
  }
  return p;
}
// Micro-batches alternate between two routes (even: chunk 0, odd: chunk 1), so no route covers
// one run of micro-batches.
PeriodicSchedule alternating(std::initializer_list<std::tuple<Op, int, int, int, int>> segs) {
  return two_chunks([](int m) { return Route{m % 2, m % 2}; }, segs);
}

// F and BW of chunk 0 on micro-batches 0, step, 2·step, ... (20 of them) and of chunk 1 on
// first1, first1 + step, ... (reps1 of them), chunk 1's BW named `back1`.
PeriodicSchedule alternating_fb(int first1, int step, int reps1, int back1) {
  return alternating({{Op::F, 0, 0, step, 20},
                      {Op::F, 1, first1, step, reps1},
                      {Op::BW, 0, 0, step, 20},
                      {Op::BW, back1, first1, step, reps1}});
}

TEST(PeriodicValidation, RoutesOfAlternatingMicroBatches) {
  const PeriodicSchedule good = alternating_fb(1, 2, 20, 1);
  ASSERT_TRUE(validate(to_flat(good)).ok());
  EXPECT_TRUE(surely_valid(good));
  for (const auto& [first1, step, reps1, back1, what] :
       {// Chunk 0 on every micro-batch 0..19, chunk 1 on 20..39: half of them off their route.
        std::tuple<int, int, int, int, const char*>{20, 1, 20, 1, "runs of micro-batches"},
        // The last repetition of chunk 1 one step too far (micro-batch 41 out of range).
        {1, 2, 21, 1, "out of range"},
        // Chunk 1 one micro-batch short.
        {1, 2, 19, 1, "one short"},
        // Chunk 1's backwards on a chunk that does not exist.
        {1, 2, 20, 2, "chunk out of range"}}) {
    const PeriodicSchedule p = alternating_fb(first1, step, reps1, back1);
    EXPECT_FALSE(validate(to_flat(p)).ok()) << what;
    EXPECT_FALSE(surely_valid(p)) << what;
  }
}

// Micro-batch 0 visits chunk 1 only, the others chunks 0 and 1: two routes that share chunk 1,
// and chunk 1 of micro-batch 0 never computed; counting micro-batches per chunk by the last
// route to claim it would miss that.
TEST(PeriodicValidation, RoutesThatShareAChunk) {
  const auto route = [](int m) { return m == 0 ? Route{1, 1} : Route{0, 1}; };
  const PeriodicSchedule p = two_chunks(
      route,
      {{Op::F, 0, 1, 1, 39}, {Op::F, 1, 1, 1, 39}, {Op::BW, 1, 1, 1, 39}, {Op::BW, 0, 1, 1, 39}});
  EXPECT_FALSE(validate(to_flat(p)).ok());
  EXPECT_FALSE(surely_valid(p));
}

// A random rank's random segment of p, and its pattern.
std::tuple<Segment*, Action*> pick(PeriodicSchedule& p, std::mt19937& rng) {
  auto& segs = p.lists.ranks[rng() % p.lists.ranks.size()];
  Segment& g = segs[rng() % segs.size()];
  return {&g, &p.lists.pool[g.begin]};
}

// Broken at random in a pattern, a repetition count, a micro-batch step, a route or the placement:
// never sure where validate() rejects the flat lists.
TEST(PeriodicValidation, NeverSureOfBrokenRoutesByChunkOrLongPatterns) {
  std::mt19937 rng(23);
  std::size_t tried = 0, broken = 0, sure = 0;
  for (const auto& [name, P, M, v] : {std::tuple<std::string, int, int, int>{"dualpipe", 4, 32, 1},
                                      {"dualpipe", 8, 64, 1},
                                      {"dualpipev", 4, 32, 1},
                                      {"zb-v", 4, 32, 1},
                                      {"interleaved", 4, 32, 2},
                                      {"interleaved", 4, 64, 3}}) {
    const PeriodicSchedule good = to_periodic(generate(name, {P, M, v}));
    ASSERT_TRUE(surely_valid(good)) << name;
    for (int trial = 0; trial < 400; ++trial) {
      PeriodicSchedule bad = good;
      auto [g, pattern] = pick(bad, rng);
      switch (rng() % 8) {
        case 0:  // two actions of a pattern swapped
          if (g->length >= 2) std::swap(pattern[rng() % g->length], pattern[rng() % g->length]);
          break;
        case 1:  // a micro-batch moved a little (often onto a neighbour of a passed repetition)
          pattern[rng() % g->length].mb += static_cast<std::uint32_t>(rng() % 3) - 1u;
          break;
        case 2:  // a micro-batch moved anywhere
          pattern[rng() % g->length].mb = static_cast<std::uint32_t>(rng() % M);
          break;
        case 3:
          g->reps = rng() % 2 ? g->reps + 1 : std::max(1u, g->reps - 1);
          break;
        case 4:
          g->mb_step = g->mb_step == 0 ? 1 : rng() % 2 ? -g->mb_step : g->mb_step + 1;
          break;
        case 5:  // an action's kind or chunk changed
          if (rng() % 2)
            pattern[rng() % g->length].op = static_cast<Op>(rng() % 4);
          else
            pattern[rng() % g->length].chunk = static_cast<std::uint32_t>(
                rng() % static_cast<std::uint32_t>(bad.shape.num_chunks() + 1));  // or none
          break;
        case 6:  // a micro-batch's route changed to another micro-batch's
          bad.shape.routes[rng() % M] = bad.shape.routes[rng() % M];
          break;
        default:  // two chunks swapped in the placement
          std::swap(bad.shape.chunk_rank[rng() % bad.shape.chunk_rank.size()],
                    bad.shape.chunk_rank[rng() % bad.shape.chunk_rank.size()]);
      }
      const bool flat_ok = validate(to_flat(bad)).ok();
      const bool periodic_sure = surely_valid(bad);
      EXPECT_FALSE(periodic_sure && !flat_ok) << name << " trial " << trial;
      broken += !flat_ok;
      sure += periodic_sure;
      ++tried;
    }
  }
  EXPECT_GT(broken, tried / 2);  // the breakages break
  EXPECT_GT(sure, tried / 50);   // and some leave it valid (a route swapped for an equal one)
}

}  // namespace
}  // namespace bb
