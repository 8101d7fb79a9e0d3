// What the zb-auto and exact-search tests share: the simulator's configuration for a set of
// stage costs, and one step's two views (makespan, largest stage span) as the simulator times it.
#pragma once

#include <algorithm>

#include "schedule/zb_greedy.hpp"
#include "sim/sim.hpp"

namespace bb::test {

inline SimConfig sim_config(const StageCosts& c) {
  SimConfig cfg;
  cfg.t_f = c.f;
  cfg.t_b = c.b;
  cfg.t_w = c.w;
  cfg.latency = c.comm;
  return cfg;
}

struct Views {
  double makespan, span;
};

inline Views views(const SimResult& r) {
  Views v{r.single.span, 0};
  for (const RankStats& k : r.ranks) v.span = std::max(v.span, k.last_end - k.first_start);
  return v;
}

}  // namespace bb::test
