#include "schedule/zb_greedy.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "schedule/edges.hpp"

namespace bb {

Schedule zero_bubble_greedy(const char* name, int P, int M, const std::function<int(int)>& warmup,
                            int cap) {
  Schedule s = make_schedule(name, P, M, 1);
  set_looped_placement(s);
  const Route route = s.routes.front();  // chunk r on rank r; every route 0..P-1
  constexpr long kNever = -1;
  // Arrival times (unit clock) of each message at its consumer chunk, per direction
  // (edges.hpp: 0 activations, 1 gradients).
  std::vector<long> arrive[2] = {std::vector<long>(static_cast<std::size_t>(P) * M, kNever),
                                 std::vector<long>(static_cast<std::size_t>(P) * M, kNever)};
  auto at = [M, &arrive](const MessageName& msg, std::uint32_t m) -> long& {
    return arrive[msg.dir][static_cast<std::size_t>(consumer_chunk(msg)) * M + m];
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
  auto arrived = [&](const MessageName& msg, std::uint32_t m, long t) {
    return at(msg, m) != kNever && at(msg, m) <= t;
  };
  int finished = 0;
  for (long t = 0; finished < P; ++t) {
    for (int r = 0; r < P; ++r) {
      RankState& k = st[r];
      if (k.busy_until > t || k.next_w == M) continue;
      auto& out = s.ranks[r];
      const Op want = k.next < k.order.size() ? k.order[k.next] : Op::W;
      bool ready = false;
      Action act{};
      if (want == Op::F || want == Op::B) {
        act = make_action(want, r, want == Op::F ? k.next_f : k.next_b);
        const MessageName in = message_in(act, route);
        ready =
            (want == Op::B || k.next_f - k.next_w < cap) && (in.none() || arrived(in, act.mb, t));
      }
      if (ready) {
        out.push_back(act);
        if (const MessageName sent = message_out(act, route); !sent.none())
          at(sent, act.mb) = t + 1;
        ++(want == Op::F ? k.next_f : k.next_b);
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
