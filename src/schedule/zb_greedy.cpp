#include "schedule/zb_greedy.hpp"

#include <algorithm>
#include <vector>

namespace bb {

Schedule zero_bubble_greedy(const char* name, int P, int M, const std::function<int(int)>& warmup,
                            int cap) {
  Schedule s = make_schedule(name, P, M, 1);
  set_looped_placement(s);
  constexpr long kNever = -1;
  // Arrival times (unit clock) of forward outputs and gradients at the consuming stage.
  std::vector<long> f_arrive(static_cast<std::size_t>(P) * M, kNever);
  std::vector<long> b_arrive(static_cast<std::size_t>(P) * M, kNever);
  auto at = [M](std::vector<long>& v, int r, int m) -> long& {
    return v[static_cast<std::size_t>(r) * M + m];
  };
  struct RankState {
    std::vector<Op> order;  // the F/B order, 1F1B-like
    std::size_t next = 0;
    int next_f = 0, next_b = 0, next_w = 0;
    long busy_until = 0;
  };
  std::vector<RankState> st(P);
  for (int r = 0; r < P; ++r) {
    const int w = std::clamp(warmup(r), 0, M);
    auto& order = st[r].order;
    order.assign(static_cast<std::size_t>(w), Op::F);
    for (int i = 0; i + w < M; ++i) {
      order.push_back(Op::F);
      order.push_back(Op::B);
    }
    order.insert(order.end(), static_cast<std::size_t>(w), Op::B);
    s.ranks[r].reserve(3 * static_cast<std::size_t>(M));
  }
  auto arrived = [&](std::vector<long>& v, int r, int m, long t) {
    return at(v, r, m) != kNever && at(v, r, m) <= t;
  };
  int finished = 0;
  for (long t = 0; finished < P; ++t) {
    for (int r = 0; r < P; ++r) {
      RankState& k = st[r];
      if (k.busy_until > t || k.next_w == M) continue;
      auto& out = s.ranks[r];
      const Op want = k.next < k.order.size() ? k.order[k.next] : Op::W;
      bool ready = false;
      if (want == Op::F)
        ready = k.next_f - k.next_w < cap && (r == 0 || arrived(f_arrive, r, k.next_f, t));
      else if (want == Op::B)
        ready = r == P - 1 || arrived(b_arrive, r, k.next_b, t);
      if (ready && want == Op::F) {
        out.push_back(make_action(Op::F, r, k.next_f));
        if (r < P - 1) at(f_arrive, r + 1, k.next_f) = t + 1;
        ++k.next_f;
        ++k.next;
      } else if (ready && want == Op::B) {
        out.push_back(make_action(Op::B, r, k.next_b));
        if (r > 0) at(b_arrive, r - 1, k.next_b) = t + 1;
        ++k.next_b;
        ++k.next;
      } else if (k.next_w < k.next_b) {
        out.push_back(make_action(Op::W, r, k.next_w));
        if (++k.next_w == M) ++finished;
      } else {
        continue;
      }
      k.busy_until = t + 1;
    }
  }
  return s;
}

}  // namespace bb
