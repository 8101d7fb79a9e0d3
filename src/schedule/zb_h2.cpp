// ZB-H2 (Qi et al. 2024): rank r runs 2(P-r)-1 forwards before its first backward, so the
// first rank computes until the first gradient returns; at most 2P-1 micro-batches live.
// Bubble (P-1)(F+B-2W) (>= 0), zero in the steady state when F = B = W.
#include <algorithm>

#include "schedule/schedule_info.hpp"
#include "schedule/zb_greedy.hpp"

namespace bb {
namespace {

void build(Schedule& s, const ScheduleParams&) {
  const int P = s.P;
  s.ranks = zero_bubble_greedy(
                s.name.c_str(), P, s.M, [P](int r) { return 2 * (P - r) - 2; }, 2 * P - 1)
                .ranks;
}

void bubble(const ModelInput& in, ModelResult& r) {
  if (!form::zero_bubble_conditions(in, r, 2 * in.P - 1, "2P-1")) return;
  form::times(in, r, (in.P - 1) * in.t_f,
              std::max(0.0, (in.P - 1) * (in.t_f + in.t_b - 2 * in.t_w)));
}

void peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, std::min(2 * in.P - 1, in.M));
}

}  // namespace

constinit const ScheduleInfo zb_h2_schedule = {
    .name = "zb-h2",
    .splits_backward = true,
    .build = build,
    .form =
        form::zero_bubble_form("(P-1)*(F+B-2W), single step (P-1)*F",
                               "F = B = W and M >= 2P-1 (fewer micro-batches cannot fill the ramp)",
                               bubble, "min(2P-1, M)", peak),
};

}  // namespace bb
