// V-Min (Qi, Wan, Amar and Lin, "Pipeline Parallelism with Controllable Memory", NeurIPS 2024,
// §4): the V-shape building block with the shortest lifespan, about a third of 1F1B's
// activations at about two thirds of its bubble; built and squeezed as schedule/v_blocks.hpp
// says (the order of sail-sg's generator). V placement: rank r holds chunks r and 2P-1-r; B and
// W split.
//
// The paper's figures (its Table 1, F = B = W): activations (P+4)//3 micro-batches where 1F1B
// holds P, bubble rate about 2P/(3M) where 1F1B's is about P/M. The simulator gives, at F = B =
// W and M >= 2P, a peak of exactly (P+4)//3 stage units on every rank but rank 0 when P mod 3 =
// 2 (half a unit less), and a bubble (both views) of (4P-5)*F/2, or (4P-7)*F/2 when 3 divides P,
// 0 at P = 1 (derived here; the matrix test checks them).
#include "schedule/schedule_info.hpp"
#include "schedule/v_blocks.hpp"

namespace bb {
namespace {

void build(Schedule& s, const ScheduleParams&) {
  build_v_block(s, VBlock::min);
}

// In chunk passes (F/2 each).
int bubble_passes(int P) {
  if (P == 1) return 0;
  return P % 3 == 0 ? 4 * P - 7 : 4 * P - 5;
}

void bubble(const ModelInput& in, ModelResult& r) {
  if (in.M < 2 * in.P) return form::refuse(r, "v-min's form needs M >= 2P");
  if (!form::equal_passes(in)) return form::refuse(r, "v-min's form needs F = B = W");
  const double bt = bubble_passes(in.P) * in.t_f / 2;
  form::times(in, r, bt, bt);
}

void peak(const ModelInput& in, ModelResult& r) {
  if (in.M < 2 * in.P) return;
  r.peak_activations.assign(in.P, (in.P + 4) / 3);
  if (in.P % 3 == 2) r.peak_activations[0] -= 0.5;
}

}  // namespace

constinit const ScheduleInfo v_min_schedule = {
    .name = "v-min",
    .placement = Placement::v,
    .fixed_v = 2,
    .splits_backward = true,
    .build = build,
    .form = {.formula = "(4P-5)*F/2, (4P-7)*F/2 when 3 divides P (P=1: 0); paper: bubble rate "
                        "~2P/(3M)",
             .conditions = "F = B = W and M >= 2P",
             .source = "Qi et al. 2024 (Controllable Memory), V-Min; exact form derived here",
             .bubble = bubble,
             .peak_formula = "(P+4)//3 on every rank, rank 0 1/2 less when P%3 = 2; M >= 2P "
                             "(paper: (P+4)//3)",
             .peak = peak},
};

}  // namespace bb
