// Naive pipeline: one micro-batch at a time through every stage, forward then backward.
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {

Schedule generate_naive(const ScheduleParams& p) {
  require_accepted(ScheduleId::naive, p);
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
