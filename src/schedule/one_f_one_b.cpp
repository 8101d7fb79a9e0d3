// 1F1B (PipeDream-Flush): P-1-r warm-up forwards on rank r, then one forward and one
// backward in turn, then the remaining backwards. At most min(P-r, M) micro-batches live.
#include <algorithm>

#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {

Schedule generate_1f1b(const ScheduleParams& p) {
  require_accepted(ScheduleId::one_f_one_b, p);
  Schedule s = make_schedule("1f1b", p.P, p.M, 1);
  set_looped_placement(s);
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
  return s;
}

}  // namespace bb
