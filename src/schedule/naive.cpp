// Naive pipeline: one micro-batch at a time through every stage, forward then backward.
#include "common/error.hpp"
#include "schedule/generators.hpp"

namespace bb {

Schedule generate_naive(const ScheduleParams& p) {
  if (p.P < 1 || p.M < 1) throw ConfigError("naive: P and M must be >= 1");
  Schedule s = make_schedule("naive", p.P, p.M, 1);
  set_looped_placement(s);
  for (int r = 0; r < s.P; ++r)
    for (int m = 0; m < s.M; ++m) {
      s.ranks[r].push_back(make_action(Op::F, r, m));
      s.ranks[r].push_back(make_action(Op::BW, r, m));
    }
  return s;
}

}  // namespace bb
