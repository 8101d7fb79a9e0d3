#include "schedule/zb_greedy.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "schedule/edges.hpp"

namespace bb {

Schedule zero_bubble_list(const char* name, int P, int M, const ZeroBubbleOrder& ord,
                          const StageCosts& c) {
  Schedule s = make_schedule(name, P, M, 1);
  set_looped_placement(s);
  const Route route = s.routes.front();  // chunk r on rank r; every route 0..P-1
  constexpr double kNever = std::numeric_limits<double>::infinity();
  // Arrival times of each message at its consumer chunk, per direction (edges.hpp: 0
  // activations, 1 gradients); kNever until its producer has run.
  std::vector<double> arrive[2] = {std::vector<double>(static_cast<std::size_t>(P) * M, kNever),
                                   std::vector<double>(static_cast<std::size_t>(P) * M, kNever)};
  auto at = [M, &arrive](const MessageName& msg, std::uint32_t m) -> double& {
    return arrive[msg.dir][static_cast<std::size_t>(consumer_chunk(msg)) * M + m];
  };
  struct RankState {
    std::vector<Op> order;  // the F/B order, 1F1B-like
    std::size_t next = 0;
    int next_f = 0, next_b = 0, next_w = 0;
    double free = 0;  // when its last action ends
  };
  std::vector<RankState> st(P);
  for (int r = 0; r < P; ++r) {
    const int w = std::clamp(ord.warmup[r], 0, M);
    auto& order = st[r].order;
    order.assign(static_cast<std::size_t>(w), Op::F);
    for (int i = 0; i + w < M; ++i) {
      order.push_back(Op::F);
      order.push_back(Op::B);
    }
    order.insert(order.end(), static_cast<std::size_t>(w), Op::B);
    s.ranks[r].reserve(3 * static_cast<std::size_t>(M));
  }
  // Rank r's next action and when it starts, from the arrivals known now (every arrival up to
  // the earliest pending start is known: actions take time and start in time order).
  auto decide = [&](int r) -> std::pair<double, Action> {
    const RankState& k = st[r];
    const Op want = k.next < k.order.size() ? k.order[k.next] : Op::W;
    double ready = kNever;  // when the next F/B could start
    Action fb{};
    if (want != Op::W) {
      fb = make_action(want, r, want == Op::F ? k.next_f : k.next_b);
      const MessageName in = message_in(fb, route);
      if (want == Op::B || k.next_f - k.next_w < ord.cap)
        ready = std::max(k.free, in.none() ? 0.0 : at(in, fb.mb));
    }
    if (ready <= k.free) return {k.free, fb};
    if (k.next_w < k.next_b &&
        (ord.w == ZeroBubbleOrder::WPolicy::fill || ready == kNever || k.free + c.w[r] <= ready))
      return {k.free, make_action(Op::W, r, k.next_w)};
    return {ready, fb};
  };
  // Ranks by the start of their next action (then by rank); entries that no longer match
  // `key` are stale.
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  std::vector<double> key(P, kNever);
  const auto plan = [&](int r) {
    if (st[r].next_w == M) return;
    const double t = decide(r).first;
    if (t != key[r] && t != kNever) heap.emplace(t, r);
    key[r] = t;
  };
  for (int r = 0; r < P; ++r) plan(r);
  int finished = 0;
  while (finished < P) {
    if (heap.empty())
      throw ScheduleError(std::string(name) +
                          ": the F/B order gets stuck (a warm-up that grows "
                          "towards the last rank, or a cap below it)");
    const auto [t, r] = heap.top();
    heap.pop();
    if (t != key[r]) continue;
    const auto [start, act] = decide(r);
    if (start != t) {  // an arrival became known since: the decision moved
      key[r] = kNever;
      plan(r);
      continue;
    }
    RankState& k = st[r];
    s.ranks[r].push_back(act);
    k.free = t + (act.op == Op::F ? c.f[r] : act.op == Op::B ? c.b[r] : c.w[r]);
    if (act.op == Op::W) {
      if (++k.next_w == M) ++finished;
    } else {
      ++(act.op == Op::F ? k.next_f : k.next_b);
      ++k.next;
      if (const MessageName sent = message_out(act, route); !sent.none()) {
        at(sent, act.mb) = k.free;
        plan(consumer_rank(s, sent));
      }
    }
    key[r] = kNever;
    plan(r);
  }
  return s;
}

// The unit-time case of zero_bubble_list with `fill` (the same orders, test_zb_auto.cpp),
// kept as a fast path for ZB-H1 and ZB-H2 at large P and M.
Schedule zero_bubble_greedy(const char* name, int P, int M, const std::function<int(int)>& warmup,
                            int cap) {
  Schedule s = make_schedule(name, P, M, 1);
  set_looped_placement(s);
  const Route route = s.routes.front();  // chunk r on rank r; every route 0..P-1
  // Arrival times (unit clock, >= 1) of the messages at each consumer chunk, per direction
  // (edges.hpp: 0 activations, 1 gradients), in a ring of W micro-batches per (chunk,
  // direction), each entry tagged with its micro-batch (another tag: not sent yet). A message
  // is at most `cap` micro-batches ahead of the one its consumer waits for: an F on chunk c-1
  // needs fewer than cap live micro-batches there (F count - W count < cap), and W <= B there
  // <= B on chunk c <= F on chunk c; a B on chunk c likewise is at most cap ahead of chunk
  // c-1's B. So a ring of W > cap never overwrites a message before it is read (checked), and
  // stays small (ZB-H1 at P=512: 8 MiB where one entry per message took 32 MiB, a page fault
  // and a cache miss for each), chunk-major: each rank reads its rows in order.
  const std::size_t W = std::bit_ceil(static_cast<std::size_t>(std::clamp(cap, 1, M)) + 1);
  struct Arrival {
    std::int32_t mb = -1;
    std::int32_t t = 0;
  };
  std::vector<Arrival> arrive(2 * static_cast<std::size_t>(P) * W);
  auto at = [W, &arrive](const MessageName& msg, std::uint32_t m) -> Arrival& {
    return arrive[(static_cast<std::size_t>(consumer_chunk(msg)) * 2 + msg.dir) * W +
                  (m & (W - 1))];
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
    const Arrival& a = at(msg, m);
    return a.mb == static_cast<std::int32_t>(m) && a.t <= t;
  };
  // Whether the message in e (if any) has been read: its consumer is past it.
  const auto read = [&](const MessageName& msg, const Arrival& e) {
    if (e.mb < 0) return true;
    const RankState& k = st[consumer_rank(s, msg)];
    return e.mb < (msg.dir == 0 ? k.next_f : k.next_b);
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
        if (const MessageName sent = message_out(act, route); !sent.none()) {
          Arrival& e = at(sent, act.mb);
          if (!read(sent, e))
            throw std::logic_error(std::string(name) + ": a message more than " +
                                   std::to_string(W - 1) + " micro-batches ahead of its reader");
          e = {static_cast<std::int32_t>(act.mb), t + 1};
        }
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
