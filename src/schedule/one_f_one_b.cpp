// 1F1B (PipeDream-Flush): P-1-r warm-up forwards on rank r, then one forward and one
// backward in turn, then the remaining backwards. At most min(P-r, M) micro-batches live.
#include <algorithm>

#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

void build(Schedule& s, const ScheduleParams&) {
  for (int r = 0; r < s.P; ++r) {
    auto& out = s.ranks[r];
    out.reserve(2 * static_cast<std::size_t>(s.M));
    const int warmup = std::min(s.P - r - 1, s.M);
    for (int m = 0; m < warmup; ++m) out.push_back(make_action(Op::F, r, m));
    for (int i = 0; i + warmup < s.M; ++i) {
      out.push_back(make_action(Op::F, r, warmup + i));
      out.push_back(make_action(Op::BW, r, i));
    }
    for (int m = std::max(0, s.M - warmup); m < s.M; ++m) out.push_back(make_action(Op::BW, r, m));
  }
}

void peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations = form::per_rank(
      in.P,
      [](int rk, const ModelInput& i) { return static_cast<double>(std::min(i.P - rk, i.M)); }, in);
}

}  // namespace

constinit const ScheduleInfo one_f_one_b_schedule = {
    .name = "1f1b",
    .build = build,
    .form = form::flush_form("Narayanan et al. 2019 (PipeDream-Flush)", "min(P-s, M)", peak),
};

}  // namespace bb
