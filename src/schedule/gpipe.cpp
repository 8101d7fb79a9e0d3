// GPipe / all-forward-all-backward (Huang et al. 2019): every forward, then every backward.
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

void build(Schedule& s, const ScheduleParams&) {
  for (int r = 0; r < s.P; ++r) {
    for (int m = 0; m < s.M; ++m) s.ranks[r].push_back(make_action(Op::F, r, m));
    for (int m = 0; m < s.M; ++m) s.ranks[r].push_back(make_action(Op::BW, r, m));
  }
}

void peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, in.M);
}

}  // namespace

constinit const ScheduleInfo gpipe_schedule = {
    .name = "gpipe",
    .build = build,
    .form = form::flush_form("Huang et al. 2019 (GPipe)", "M", peak),
};

}  // namespace bb
