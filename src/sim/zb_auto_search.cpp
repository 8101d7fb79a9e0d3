// zb-auto's generator (schedule/zb_auto.hpp): each candidate order is simulated with the
// same per-stage costs (no communication cost, 3 back-to-back steps); the shortest single
// step wins, then the shortest steady-state period, then the lowest peak. Candidates whose
// peak exceeds the memory limit are dropped. ZB-H1 and ZB-H2 being candidates where they fit,
// zb-auto is never worse than the best of them under the same limit.
#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "schedule/schedule_info.hpp"
#include "schedule/zb_auto.hpp"
#include "sim/sim.hpp"

namespace bb {

Schedule generate_zb_auto(const ScheduleParams& p) {
  require_accepted(ScheduleId::zb_auto, p);
  const int L = zb_auto_memory_limit(p);
  const StageCosts c = zb_auto_costs(p);
  SimConfig cfg;
  cfg.t_f = c.f;
  cfg.t_b = c.b;
  cfg.t_w = c.w;
  cfg.steps = 3;
  std::optional<Schedule> best;
  std::tuple<double, double, double> best_score;
  for (Schedule& s : zb_auto_candidates(p)) {
    const std::vector<double> peaks = peak_activations(s);
    const double peak = *std::max_element(peaks.begin(), peaks.end());
    if (peak > L) continue;
    const SimResult r = simulate(s, cfg);
    const std::tuple score{r.single.span, r.steady.span, peak};
    if (best && !(score < best_score)) continue;
    best_score = score;
    s.name = "zb-auto";
    best = std::move(s);
  }
  return std::move(*best);  // the list scheduler's candidates always fit L
}

}  // namespace bb
