#include "schedule/zb_greedy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "schedule/edges.hpp"

namespace bb {

Schedule zero_bubble_greedy(const char* name, int P, int M, const std::function<int(int)>& warmup,
                            int cap) {
  Schedule s = make_schedule(name, P, M, 1);
  set_looped_placement(s);
  const Route route = s.routes.front();  // chunk r on rank r; every route 0..P-1
  // Arrival times (unit clock, >= 1; 0: not sent yet) of each message at its consumer chunk,
  // micro-batch-major (at one time the ranks work on neighbouring micro-batches, so a sweep
  // over the ranks touches neighbouring entries) and per direction (edges.hpp: 0 activations,
  // 1 gradients). Zeroed lazily by calloc: a page is touched when its first message is sent.
  const std::size_t n = 2 * static_cast<std::size_t>(P) * static_cast<std::size_t>(M);
  const std::unique_ptr<std::int32_t[], void (*)(void*)> arrive(
      static_cast<std::int32_t*>(std::calloc(n, sizeof(std::int32_t))), &std::free);
  if (!arrive) throw std::bad_alloc();
  auto at = [P, &arrive](const MessageName& msg, std::uint32_t m) -> std::int32_t& {
    return arrive[(static_cast<std::size_t>(m) * P + consumer_chunk(msg)) * 2 + msg.dir];
  };
  // A rank's F/B order is 1F1B-like: w forwards, M-w (F, B) pairs, w backwards; where it
  // stands follows from the counts (position next_f + next_b), so no list of it is kept.
  struct RankState {
    int next_f = 0, next_b = 0, next_w = 0, warmup = 0;
  };
  const auto want_of = [M](const RankState& k) {
    if (k.next_b == M) return Op::W;  // (then next_f == M too)
    return k.next_f < M && k.next_f - k.next_b <= k.warmup ? Op::F : Op::B;
  };
  std::vector<RankState> st(P);
  for (int r = 0; r < P; ++r) {
    st[r].warmup = std::clamp(warmup(r), 0, M);
    s.ranks[r].reserve(3 * static_cast<std::size_t>(M));
  }
  auto arrived = [&](const MessageName& msg, std::uint32_t m, std::int32_t t) {
    const std::int32_t a = at(msg, m);
    return a != 0 && a <= t;
  };
  // Unit costs: a rank that acts at time t is free again at t + 1, so every rank that has work
  // left is looked at once per time.
  int finished = 0;
  for (std::int32_t t = 0; finished < P; ++t) {
    for (int r = 0; r < P; ++r) {
      RankState& k = st[r];
      if (k.next_w == M) continue;
      auto& out = s.ranks[r];
      const Op want = want_of(k);
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
      } else if (k.next_w < k.next_b) {
        out.push_back(make_action(Op::W, r, k.next_w));
        if (++k.next_w == M) ++finished;
      }
    }
  }
  return s;
}

}  // namespace bb
