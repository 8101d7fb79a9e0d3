// zb-auto: the zero-bubble paper's automatic scheduler (Qi et al. 2024, "Zero Bubble Pipeline
// Parallelism", §3.1 and appendix; docs/schedules.md, "zb-auto"): per-rank orders for the given
// per-stage F, B, W times and message time, under a memory limit in micro-batches, chosen by
// the paper's cost (the largest stage span) and the single step's makespan. Here: its facts
// (costs, memory limit, what it refuses, lower bounds) and the candidate orders of one memory
// level; generate_zb_auto (defined in src/schedule/zb_auto_search.cpp) runs and compares them.
#pragma once

#include <string>
#include <vector>

#include "schedule/generators.hpp"
#include "schedule/zb_greedy.hpp"

namespace bb {

// p's per-stage times, each list widened to P values (one value: every stage), and its
// message time.
StageCosts zb_auto_costs(const ScheduleParams& p);
// p.mem_limit, or P when it is 0.
int zb_auto_memory_limit(const ScheduleParams& p);
// Why zb-auto refuses p's costs or memory settings (one line naming it), or empty.
std::string zb_auto_refusal(const ScheduleParams& p);
// A lower bound on one step's makespan with these costs, whatever the order and memory: the
// largest over stages s of
//   H_s + M(F_s+B_s+W_s)                          (s waits for its first input), and
//   H_s + M(F_s+B_s) + B_0+..+B_{s-1} + s·c + W_0  (the last B still has to reach stage 0),
// with H_s = F_0+..+F_{s-1} + s·c, c the message time.
double zb_auto_lower_bound(int P, int M, const StageCosts& c);

// The most memory a rank of s holds, a micro-batch counting 1 from its F to its B and mem_w
// from its B to its W (zb-auto's limit counts it so; with mem_w = 1 the simulator's peak).
double zb_auto_held_peak(const Schedule& s, double mem_w);

// The candidate orders at memory level `cap` (the list scheduler's cap; zb_greedy.hpp), after
// the paper's heuristic: rank r runs n_r forwards before its first B, n_r the number of
// forwards that fit before the first micro-batch's gradient can be back (rounded down, up, and
// up plus one; at most cap and M, non-increasing in r); then F and B as they can start (B
// first or F first) with at most n_r forwards ahead; W filling every gap or only those it fits
// in. Also 1F1B's strict order with warm-ups of ZB-H1's and ZB-H2's shapes (a(P-1-r)+c, a and
// c in {1, 2}). `few`: only b_first with n_r rounded up and `fit` (the large-schedule path).
// Duplicates removed.
std::vector<ZeroBubbleOrder> zb_auto_orders(const ScheduleParams& p, int cap, bool few);

// How far generate_zb_auto searches, by the compute actions 3PM: up to kSearchEveryLevelUpTo,
// every memory level 1..L in turn (each level's choice no worse than the one below: the result
// is non-increasing in the limit), with ZB-H1 and ZB-H2 as references from the level they fit;
// up to kCompareUpTo, only level L, with the references; above, only level L with one order
// (b_first, n_r rounded up, fit), no references (P=512, M=8192 within a tenth of a second).
inline constexpr long long kSearchEveryLevelUpTo = 1LL << 15;
inline constexpr long long kCompareUpTo = 1LL << 20;
// Up to this many compute actions, each level's choice is then improved by a local search:
// one rank's warm-up or bound on forwards ahead moved by one, at most kLocalSearchPasses times.
inline constexpr long long kLocalSearchUpTo = 1LL << 12;
inline constexpr int kLocalSearchPasses = 2;

// One zb-auto result at each memory level 1..L (for the tests: the chain generate_zb_auto
// walks; defined in src/schedule/zb_auto_search.cpp). Each entry: the schedule and its single-step
// makespan and largest stage span with p's costs.
struct ZbAutoLevel {
  Schedule schedule;
  double makespan = 0, span = 0;
};
std::vector<ZbAutoLevel> zb_auto_levels(const ScheduleParams& p);

// zb-auto's order for p's costs and memory limit (src/schedule/zb_auto_search.cpp; zb-auto's
// ScheduleInfo builds with it).
Schedule generate_zb_auto(const ScheduleParams& p);

}  // namespace bb
