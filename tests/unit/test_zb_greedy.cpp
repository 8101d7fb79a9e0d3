// zero_bubble_greedy (schedule/zb_greedy.hpp), the unit-clock fast path of ZB-H1 and ZB-H2,
// against the list scheduler zero_bubble_list with unit times and `fill` (an independent
// implementation: a heap of ranks by start time, arrival times kept per message): the same
// action lists for every P and M tried, for ZB-H1's and ZB-H2's orders and a few others, with
// its steady-state jump taken where the run is long enough (counted through its stats), and
// the same refusal where an order gets stuck.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "schedule/zb_greedy.hpp"

namespace bb {
namespace {

struct Order {
  const char* name;
  std::function<int(int P, int r)> warmup;
  std::function<int(int P)> cap;
  bool steady = true;  // reaches the steady state (one F, B and W per rank every 3 units)
};

const Order kOrders[] = {
    {"zb-h1", [](int P, int r) { return P - r - 1; }, [](int P) { return P; }},
    {"zb-h2", [](int P, int r) { return 2 * (P - r) - 2; }, [](int P) { return 2 * P - 1; }},
    // A smaller cap than the warm-up needs on the first ranks: they wait for Ws.
    {"half-cap", [](int P, int r) { return (P - r - 1) / 2; },
     [](int P) { return std::max(1, (P + 1) / 2); }},
    // No warm-up at all (each F waits for the previous B's gradient: no steady state to jump
    // over), and a cap between ZB-H1's and ZB-H2's.
    {"no-warmup", [](int, int) { return 0; }, [](int P) { return P + P / 2; }, false},
};

// Compares the two for one order; returns the greedy run's stats.
ZeroBubbleGreedyStats expect_same(const Order& o, int P, int M) {
  ZeroBubbleOrder ord;
  ord.cap = o.cap(P);
  for (int r = 0; r < P; ++r) ord.warmup.push_back(o.warmup(P, r));
  const std::vector<double> one(static_cast<std::size_t>(P), 1.0);
  const Schedule list = zero_bubble_list(o.name, P, M, ord, {one, one, one});
  ZeroBubbleGreedyStats stats;
  const Schedule greedy = zero_bubble_greedy(
      o.name, P, M, [&](int r) { return o.warmup(P, r); }, ord.cap, &stats);
  EXPECT_EQ(greedy, list) << o.name << " P=" << P << " M=" << M;
  if (stats.jumped_units > 0) {
    EXPECT_GT(stats.period, 0);
    EXPECT_GT(stats.shift, 0);
  }
  return stats;
}

TEST(ZbGreedy, SameListsAsTheListSchedulerAtSmallSizes) {
  int jumped = 0, runs = 0;
  for (const Order& o : kOrders)
    for (int P = 1; P <= 10; ++P)
      for (int M = 1; M <= 5 * P + 12; ++M) {
        jumped += expect_same(o, P, M).jumped_units > 0;
        ++runs;
      }
  // The jump is taken in most of these runs (not at M < P), and every one matched.
  EXPECT_GT(jumped, runs / 2) << jumped << " of " << runs;
}

TEST(ZbGreedy, JumpsOverMostOfTheSteadyStateAtLargeSizes) {
  struct Case {
    int P, M;
  };
  for (const Order& o : kOrders)
    for (const Case c : {Case{16, 300}, Case{37, 1001}, Case{64, 2048}, Case{100, 150}}) {
      const ZeroBubbleGreedyStats st = expect_same(o, c.P, c.M);
      if (!o.steady) continue;
      // The steady state is one F, one B and one W per rank every 3 units, and covers all but
      // a few P micro-batches: at least half of the 3M units of each rank are jumped.
      EXPECT_GE(st.jumped_units, 3L * c.M / 2 - 3L * c.P)
          << o.name << " P=" << c.P << " M=" << c.M << " period " << st.period << " shift "
          << st.shift << " from " << st.start;
    }
}

// Every cap from 1 to 2P+1 under ZB-H1's and ZB-H2's warm-ups cut below it and under half of
// ZB-H1's (not cut: some get stuck, refused by both): steady states of 3 to 6 time units
// per period (a rank idle in some of them).
TEST(ZbGreedy, SameListsAndRefusalsForEveryCap) {
  std::map<int, int> periods;  // jumps taken, by period
  int refused = 0;
  for (int P = 1; P <= 8; ++P)
    for (int cap = 1; cap <= 2 * P + 1; ++cap)
      for (const int kind : {0, 1, 2})
        for (const int M : {1, P, 3 * P + 1, 12 * P + 5}) {
          const auto warm = [&](int r) {
            return kind == 2 ? (P - r - 1) / 2
                             : std::min(cap - 1, kind == 1 ? 2 * (P - r) - 2 : P - r - 1);
          };
          ZeroBubbleOrder ord;
          ord.cap = cap;
          for (int r = 0; r < P; ++r) ord.warmup.push_back(warm(r));
          const std::vector<double> one(static_cast<std::size_t>(P), 1.0);
          const std::string what = "order " + std::to_string(kind) + " P=" + std::to_string(P) +
                                   " M=" + std::to_string(M) + " cap=" + std::to_string(cap);
          Schedule list;
          try {
            list = zero_bubble_list("x", P, M, ord, {one, one, one});
          } catch (const ScheduleError&) {
            EXPECT_THROW(zero_bubble_greedy("x", P, M, warm, cap), ScheduleError) << what;
            ++refused;
            continue;
          }
          ZeroBubbleGreedyStats st;
          EXPECT_EQ(zero_bubble_greedy("x", P, M, warm, cap, &st), list) << what;
          if (st.jumped_units > 0) ++periods[st.period];
        }
  EXPECT_GT(periods[3], 0);
  EXPECT_GT(periods[4], 0);
  EXPECT_GT(periods[5], 0);
  EXPECT_GT(refused, 0);
}

TEST(ZbGreedy, OneRankAndOneMicroBatch) {
  for (const Order& o : kOrders) {
    expect_same(o, 1, 1);
    expect_same(o, 1, 5000);
    expect_same(o, 40, 1);
  }
  ZeroBubbleGreedyStats st;
  zero_bubble_greedy(
      "zb-h1", 1, 5000, [](int) { return 0; }, 1, &st);
  EXPECT_EQ(st.period, 3);  // F, B, W
  EXPECT_EQ(st.shift, 1);
}

TEST(ZbGreedy, StuckOrdersAreRefusedLikeTheListScheduler) {
  // A warm-up that grows towards the last rank: rank 1 waits for a forward rank 0 never sends
  // before its first backward, which waits for rank 1.
  const std::vector<double> one(2, 1.0);
  ZeroBubbleOrder ord;
  ord.warmup = {0, 1};
  ord.cap = 4;
  EXPECT_THROW(zero_bubble_list("grow", 2, 8, ord, {one, one, one}), ScheduleError);
  EXPECT_THROW(zero_bubble_greedy(
                   "grow", 2, 8, [](int r) { return r; }, 4),
               ScheduleError);
}

}  // namespace
}  // namespace bb
