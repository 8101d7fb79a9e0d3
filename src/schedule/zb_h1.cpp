// ZB-H1 (Qi et al. 2024): 1F1B's order of forwards and input-gradient backwards, with the
// weight-gradient passes deferred to fill the bubbles; at most P micro-batches live on any
// rank (1F1B's peak). Bubble (P-1)(F+B-W) in both views when F = B = W (the paper's setting,
// and the model's condition). With W > F it is longer (F=1 B=2 W=2, P=4: 6, not 3); with
// W < F and F != B only the steady state is known to match (docs/schedules.md).
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"
#include "schedule/zb_greedy.hpp"

namespace bb {

Schedule generate_zb_h1(const ScheduleParams& p) {
  require_accepted(ScheduleId::zb_h1, p);
  const int P = p.P;
  return zero_bubble_greedy(
      "zb-h1", P, p.M, [P](int r) { return P - r - 1; }, P);
}

}  // namespace bb
