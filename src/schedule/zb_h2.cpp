// ZB-H2 (Qi et al. 2024): rank r runs 2(P-r)-1 forwards before its first backward, so the
// first rank computes until the first gradient returns; at most 2P-1 micro-batches live.
// Bubble (P-1)(F+B-2W) (>= 0), zero in the steady state when F = B = W.
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"
#include "schedule/zb_greedy.hpp"

namespace bb {

Schedule generate_zb_h2(const ScheduleParams& p) {
  require_accepted(ScheduleId::zb_h2, p);
  const int P = p.P;
  return zero_bubble_greedy(
      "zb-h2", P, p.M, [P](int r) { return 2 * (P - r) - 2; }, 2 * P - 1);
}

}  // namespace bb
