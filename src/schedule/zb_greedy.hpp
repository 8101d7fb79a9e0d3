// The list scheduler behind ZB-H1, ZB-H2 and zb-auto (Qi et al. 2024, "Zero Bubble Pipeline
// Parallelism", §3 and its appendix). It plays the step on a clock with each stage's F, B and
// W times and the message time; each rank, when free, runs the next F or B its order allows
// if that can start now (input arrived, memory below `cap`); otherwise its oldest pending W
// (`fill`), or only a W that ends before the next F/B's input arrives (`fit`); otherwise it
// waits. The order this produces is the schedule. Forwards and input-gradient backwards
// follow 1F1B's order (`strict`: rank r runs warmup[r] forwards, then one forward and one B
// in turn, then the remaining Bs) or whichever can start first within a bound on forwards
// ahead (`b_first`, `f_first`). ZB-H1: unit times, strict, warmup P-r-1, cap P; ZB-H2: unit
// times, strict, warmup 2(P-r)-2, cap 2P-1. A strict warm-up that does not grow towards the
// last rank and stays below `cap` cannot deadlock, nor can b_first / f_first (docs/schedules.md,
// zb-auto).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

// Times of one micro-batch on each stage (P values each, >= 0), and of one message between
// neighbouring stages.
struct StageCosts {
  std::vector<double> f, b, w;
  double comm = 0;
};

// How the list scheduler orders a rank's actions.
struct ZeroBubbleOrder {
  std::vector<int> warmup;  // per rank: forwards before its first B is due (clamped to [0, M])
  int cap = 1;              // memory limit per rank (>= 1), counted as below
  enum class WPolicy : std::uint8_t { fill, fit } w = WPolicy::fill;
  // F and B: `strict` keeps 1F1B's order, F^w (F B)^(M-w) B^w for warm-up w (ZB-H1, ZB-H2);
  // `b_first` / `f_first` run whichever of the next F and the next B can start (the B / the F
  // when both can), with at most warmup+1 forwards ahead of the rank's Bs until its first B
  // and ahead[r] after it.
  enum class FB : std::uint8_t { strict, b_first, f_first } fb = FB::strict;
  std::vector<int> ahead;  // per rank, >= 1 (b_first / f_first; empty: warmup + 1)
  // Memory: a micro-batch holds 1 from its F to its B and w_share from its B to its W (1: all
  // of it, as the simulator's peak counts; the zero-bubble paper's scheduler counts 1/2).
  double w_share = 1;
};

// One run of the list scheduler: the schedule and what its single step gives with the costs
// it was run with.
struct ZeroBubbleRun {
  Schedule schedule;
  double makespan = 0;  // every action as early as it can be (simulate's single view)
  double span = 0;      // the largest stage span: a rank's last end minus its first start
  // The cap held back a forward at least once (before the run stopped, if it did); if not,
  // any larger cap gives the same run.
  bool memory_bound = false;
  // Stopped early: its makespan or largest stage span would exceed the bound it was given
  // (the schedule is incomplete; makespan and span are then meaningless).
  bool stopped = false;
  // Actions played on the clock; the rest were appended by the steady-state jump.
  std::size_t played = 0;
};

// Throws ScheduleError if the order gets stuck (strict: a warm-up that grows towards the last
// rank, or a cap below it). With bounds, stops as soon as the run's makespan is sure to exceed
// `makespan_above` or its largest stage span `span_above` (a rank's idle time so far plus all
// its work).
ZeroBubbleRun zero_bubble_run(const char* name, int P, int M, const ZeroBubbleOrder& order,
                              const StageCosts& costs,
                              double makespan_above = std::numeric_limits<double>::infinity(),
                              double span_above = std::numeric_limits<double>::infinity());
// zero_bubble_run's schedule.
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
