// The exact check of zb-auto (docs/schedules.md, "zb-auto"): a branch-and-bound search over
// every order of F, B and W on every rank, for small P and M, that finds the least makespan or
// the least largest stage span (the zero-bubble paper's cost) within a memory limit, each
// order timed with every action as early as it can be (as the simulator times it).
//
// Micro-batches are alike, so each rank may run its Fs, its Bs and its Ws in micro-batch
// order without losing anything (the k-th F of a rank can always take the k-th input to
// arrive; the same for B and W, and the memory held depends on the counts alone): a rank's
// order is an interleaving of F^M, B^M and W^M with at most as many Bs as Fs and Ws as Bs at
// any point. The search commits each rank's next action in turn (a rank waiting for an input
// not yet produced keeps its commitment while the others go on), so every combination of
// per-rank orders is met once; a branch is cut when a bound says it cannot beat the best so
// far: per rank, its busy-until time plus its work left, and the last micro-batch's F chain
// down and B chain back up from where each rank stands.
#pragma once

#include <cstdint>
#include <limits>

#include "schedule/schedule.hpp"
#include "schedule/zb_greedy.hpp"

namespace bb {

enum class ZbObjective : std::uint8_t { makespan, span };

struct ZbExactResult {
  // The least value found: the optimum when `complete`, else an upper bound. Equal to
  // `better_than` when nothing better exists (then `improved` is false and `schedule` empty).
  double best = std::numeric_limits<double>::infinity();
  // A lower bound on the optimum: `best` when complete, else the bound at the root (no order
  // does better than it).
  double bound = 0;
  bool complete = false;
  bool improved = false;
  Schedule schedule;  // an order reaching `best`, when improved
  long long nodes = 0;
  // (best - bound) / best: 0 when complete.
  double gap() const { return best > 0 ? (best - bound) / best : 0; }
};

// What to look for.
struct ZbExactQuery {
  double cap = 1;      // memory limit per rank: a micro-batch holds 1 from its F to its B, ...
  double w_share = 1;  // ... and this from its B to its W
  ZbObjective objective = ZbObjective::span;
  // Only orders strictly better than this (e.g. zb-auto's) are looked for.
  double better_than = std::numeric_limits<double>::infinity();
  // Only orders whose makespan is at most this (with objective span: the least span among
  // orders as fast as a given one).
  double makespan_at_most = std::numeric_limits<double>::infinity();
  long long max_nodes = 50'000'000;
};

// P ranks, M micro-batches, the per-stage costs and message time of `costs`.
ZbExactResult zb_exact(int P, int M, const StageCosts& costs, const ZbExactQuery& query);

}  // namespace bb
