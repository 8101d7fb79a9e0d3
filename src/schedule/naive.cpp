// Naive pipeline: one micro-batch at a time through every stage, forward then backward.
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

void build(Schedule& s, const ScheduleParams&) {
  for (int r = 0; r < s.P; ++r)
    for (int m = 0; m < s.M; ++m) {
      s.ranks[r].push_back(make_action(Op::F, r, m));
      s.ranks[r].push_back(make_action(Op::BW, r, m));
    }
}

void bubble(const ModelInput& in, ModelResult& r) {
  const double bt = (in.P - 1) * in.M * form::pass_sum(in);
  form::times(in, r, bt, bt);
}

void peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, 1.0);
}

}  // namespace

constinit const ScheduleInfo naive_schedule = {
    .name = "naive",
    .build = build,
    .form = {.formula = "(P-1)*M*(F+B+W)",
             .conditions = "always",
             .source = "micro-batches one at a time: each stage works 1/P of the time",
             .bubble = bubble,
             .peak_formula = "1",
             .peak = peak},
};

}  // namespace bb
