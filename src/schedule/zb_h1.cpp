// ZB-H1 (Qi et al. 2024): 1F1B's order of forwards and input-gradient backwards, with the
// weight-gradient passes deferred to fill the bubbles; at most P micro-batches live on any
// rank (1F1B's peak). Bubble (P-1)(F+B-W) in both views when F = B = W (the paper's setting,
// and the model's condition). With W > F it is longer (F=1 B=2 W=2, P=4: 6, not 3); with
// W < F and F != B only the steady state is known to match (docs/schedules.md).
#include <algorithm>

#include "schedule/schedule_info.hpp"
#include "schedule/zb_greedy.hpp"

namespace bb {
namespace {

void build(Schedule& s, const ScheduleParams&) {
  const int P = s.P;
  s.ranks = zero_bubble_greedy(
                s.name.c_str(), P, s.M, [P](int r) { return P - r - 1; }, P)
                .ranks;
}

void bubble(const ModelInput& in, ModelResult& r) {
  // Below P micro-batches no W is left to fill the last ranks' drain: the bubble is larger.
  if (!form::zero_bubble_conditions(in, r, in.P, "P")) return;
  const double bt = (in.P - 1) * (in.t_f + in.t_b - in.t_w);
  form::times(in, r, bt, bt);
}

void peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, std::min(in.P, in.M));
}

}  // namespace

constinit const ScheduleInfo zb_h1_schedule = {
    .name = "zb-h1",
    .splits_backward = true,
    .build = build,
    .form = form::zero_bubble_form(
        "(P-1)*(F+B-W)", "F = B = W (the schedule's order is built for equal passes) and M >= P",
        bubble, "min(P, M) (1F1B's peak)", peak),
};

}  // namespace bb
