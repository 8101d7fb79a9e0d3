// zb-auto: a cost- and memory-aware zero-bubble order (docs/schedules.md), after the automatic
// scheduler of Qi et al. 2024 ("Zero Bubble Pipeline Parallelism", §3.1): warm-up forwards
// bounded by memory, W placed by the real costs. Here: its facts (costs, memory limit, what it
// refuses, a lower bound) and its candidate orders; generate_zb_auto (defined in
// src/sim/zb_auto_search.cpp) simulates the candidates and keeps the best.
#pragma once

#include <string>
#include <vector>

#include "schedule/generators.hpp"
#include "schedule/zb_greedy.hpp"

namespace bb {

// p's per-stage times, each list widened to P values (one value: every stage).
StageCosts zb_auto_costs(const ScheduleParams& p);
// p.mem_limit, or P when it is 0.
int zb_auto_memory_limit(const ScheduleParams& p);
// Why zb-auto refuses p's costs or memory limit (one line naming it), or empty.
std::string zb_auto_refusal(const ScheduleParams& p);
// A lower bound on one step's makespan with these costs and no communication cost, whatever
// the order and memory: the largest over stages s of
//   F_0+..+F_{s-1} + M(F_s+B_s+W_s)                 (s waits for its first input), and
//   F_0+..+F_{s-1} + M(F_s+B_s) + B_0+..+B_{s-1} + W_0  (the last B still has to reach stage 0).
double zb_auto_lower_bound(int P, int M, const StageCosts& c);

// Above this many compute actions (3PM) zb_auto_candidates gives only a few (each costs the
// search a simulation).
inline constexpr long long kFewCandidatesAbove = 1LL << 18;

// The orders zb-auto chooses from, each valid and deadlock-free: ZB-H1's and ZB-H2's where
// their peak (min(P, M), min(2P-1, M)) is within the limit L; and the list scheduler
// (zb_greedy.hpp) with p's costs, cap L and warm-ups a(P-1-r)+c (a in {0, 1, 2}, c in {0, 1,
// 2, 3, L/4, L/2, 3L/4, L-1}) and fractions {1/2, 3/4, 1, 5/4, 3/2, 2} of the forwards rank r
// can start before its first gradient can return, each clamped to [0, L-1] and made
// non-increasing in r, with W filling every gap or only those it fits in. p must be accepted.
std::vector<Schedule> zb_auto_candidates(const ScheduleParams& p);

// The best candidate under p's costs and memory limit (src/sim/zb_auto_search.cpp; zb-auto's
// ScheduleInfo builds with it).
Schedule generate_zb_auto(const ScheduleParams& p);

}  // namespace bb
