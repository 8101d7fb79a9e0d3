// GPipe / all-forward-all-backward (Huang et al. 2019): every forward, then every backward.
#include "common/error.hpp"
#include "schedule/generators.hpp"

namespace bb {

Schedule generate_gpipe(const ScheduleParams& p) {
  if (p.P < 1 || p.M < 1) throw ConfigError("gpipe: P and M must be >= 1");
  Schedule s = make_schedule("gpipe", p.P, p.M, 1);
  set_looped_placement(s);
  for (int r = 0; r < s.P; ++r) {
    for (int m = 0; m < s.M; ++m) s.ranks[r].push_back(make_action(Op::F, r, m));
    for (int m = 0; m < s.M; ++m) s.ranks[r].push_back(make_action(Op::BW, r, m));
  }
  return s;
}

}  // namespace bb
