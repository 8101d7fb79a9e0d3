// V-Half (Qi, Wan, Amar and Lin, "Pipeline Parallelism with Controllable Memory", NeurIPS 2024,
// §4): the V-shape building block whose lifespan holds about half of 1F1B's activations, at
// about half of 1F1B's bubble; built and squeezed as schedule/v_blocks.hpp says (the order of
// sail-sg's generator). V placement: rank r holds chunks r and 2P-1-r; B and W split.
//
// The paper's figures (its Table 1, F = B = W): activations (P+2)//2 micro-batches where 1F1B
// holds P, bubble rate about P/(2M) where 1F1B's is about P/M. The simulator gives, at F = B = W
// and M >= 2P, a peak of exactly (P+2)//2 stage units on every rank and a bubble (both views:
// rank 0 spans the step) of (3P-4)*F/2 for odd P >= 3, (3P-7)*F/2 for even P >= 4, F/2 at
// P = 2 and 0 at P = 1, where 1F1B's is (P-1)*3F (derived here; the matrix test checks them).
#include "schedule/schedule_info.hpp"
#include "schedule/v_blocks.hpp"

namespace bb {
namespace {

void build(Schedule& s, const ScheduleParams&) {
  build_v_block(s, VBlock::half);
}

// In chunk passes (F/2 each).
int bubble_passes(int P) {
  if (P <= 2) return P - 1;
  return P % 2 == 1 ? 3 * P - 4 : 3 * P - 7;
}

void bubble(const ModelInput& in, ModelResult& r) {
  if (in.M < 2 * in.P) return form::refuse(r, "v-half's form needs M >= 2P");
  if (!form::equal_passes(in)) return form::refuse(r, "v-half's form needs F = B = W");
  const double bt = bubble_passes(in.P) * in.t_f / 2;
  form::times(in, r, bt, bt);
}

void peak(const ModelInput& in, ModelResult& r) {
  if (in.M >= 2 * in.P) r.peak_activations.assign(in.P, (in.P + 2) / 2);
}

}  // namespace

constinit const ScheduleInfo v_half_schedule = {
    .name = "v-half",
    .placement = Placement::v,
    .fixed_v = 2,
    .splits_backward = true,
    .build = build,
    .form = {.formula = "(3P-4)*F/2 for odd P >= 3, (3P-7)*F/2 for even P >= 4 (P=2: F/2); "
                        "paper: bubble rate ~P/(2M)",
             .conditions = "F = B = W and M >= 2P",
             .source = "Qi et al. 2024 (Controllable Memory), V-Half; exact form derived here",
             .bubble = bubble,
             .peak_formula = "(P+2)//2 on every rank, M >= 2P (paper: (P+2)//2)",
             .peak = peak},
};

}  // namespace bb
