// GPipe / all-forward-all-backward (Huang et al. 2019): every forward, then every backward.
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {

Schedule generate_gpipe(const ScheduleParams& p) {
  require_accepted(ScheduleId::gpipe, p);
  Schedule s = make_schedule("gpipe", p.P, p.M, 1);
  set_looped_placement(s);
  for (int r = 0; r < s.P; ++r) {
    for (int m = 0; m < s.M; ++m) s.ranks[r].push_back(make_action(Op::F, r, m));
    for (int m = 0; m < s.M; ++m) s.ranks[r].push_back(make_action(Op::BW, r, m));
  }
  return s;
}

}  // namespace bb
