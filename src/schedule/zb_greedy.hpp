// The list scheduler behind ZB-H1, ZB-H2 and zb-auto (Qi et al. 2024, "Zero Bubble Pipeline
// Parallelism", §3). Forwards and input-gradient backwards keep a 1F1B-like order: rank r
// runs `warmup[r]` forwards, then one forward and one B in turn, then the remaining Bs.
// Weight-gradient passes fill the gaps: it plays the step on a clock with each stage's F, B
// and W times (no communication cost), and whenever the next F/B of the order cannot start
// (its input has not arrived, or `cap` micro-batches are live: forward done, W not yet), the
// rank runs its oldest pending W (`fill`), or only a W that ends before that input arrives
// (`fit`). The order this produces is the schedule. ZB-H1: unit times, warmup P-r-1, cap P;
// ZB-H2: unit times, warmup 2(P-r)-2, cap 2P-1. A warm-up that does not grow towards the last
// rank and stays below `cap` cannot deadlock (docs/schedules.md, zb-auto).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

// Times of one micro-batch on each stage (P values each, >= 0).
struct StageCosts {
  std::vector<double> f, b, w;
};

struct ZeroBubbleOrder {
  std::vector<int> warmup;  // per rank, clamped to [0, M]
  int cap = 1;              // live micro-batches per rank (>= 1)
  enum class WPolicy : std::uint8_t { fill, fit } w = WPolicy::fill;
};

// Throws ScheduleError if the order gets stuck (a warm-up that grows towards the last rank).
Schedule zero_bubble_list(const char* name, int P, int M, const ZeroBubbleOrder& order,
                          const StageCosts& costs);

// What zero_bubble_greedy's steady-state jump did (zeros: no jump): from time `start` the
// counts repeated every `period` time units, moved by `shift` micro-batches, and
// `jumped_units` time units were appended without being played.
struct ZeroBubbleGreedyStats {
  int period = 0, shift = 0;
  long start = 0, jumped_units = 0;
};

// Unit times and `fill` (ZB-H1, ZB-H2): the same orders as zero_bubble_list with those
// settings, on a unit clock over the ranks' counts, jumping over the steady state (the fast
// path at P=512, M=8192).
Schedule zero_bubble_greedy(const char* name, int P, int M, const std::function<int(int)>& warmup,
                            int cap, ZeroBubbleGreedyStats* stats = nullptr);

}  // namespace bb
