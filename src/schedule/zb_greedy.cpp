#include "schedule/zb_greedy.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "schedule/edges.hpp"

namespace bb {

namespace {
// 32-bit words read as actions (make_action's layout): a vector of actions appends a range of
// them in one pass, each action written once.
struct WordsAsActions {
  using iterator_category = std::random_access_iterator_tag;
  using value_type = Action;
  using difference_type = std::ptrdiff_t;
  using pointer = const Action*;
  using reference = Action;
  const std::uint32_t* p;
  Action operator*() const { return std::bit_cast<Action>(*p); }
  Action operator[](difference_type i) const { return std::bit_cast<Action>(p[i]); }
  WordsAsActions& operator++() {
    ++p;
    return *this;
  }
  WordsAsActions operator++(int) { return {p++}; }
  WordsAsActions& operator--() {
    --p;
    return *this;
  }
  WordsAsActions operator--(int) { return {p--}; }
  WordsAsActions& operator+=(difference_type i) {
    p += i;
    return *this;
  }
  WordsAsActions& operator-=(difference_type i) {
    p -= i;
    return *this;
  }
  friend WordsAsActions operator+(WordsAsActions a, difference_type i) { return {a.p + i}; }
  friend WordsAsActions operator-(WordsAsActions a, difference_type i) { return {a.p - i}; }
  friend difference_type operator-(WordsAsActions a, WordsAsActions b) { return a.p - b.p; }
  friend auto operator<=>(WordsAsActions, WordsAsActions) = default;
};

ScheduleError stuck(const char* name) {
  return ScheduleError(std::string(name) +
                       ": the F/B order gets stuck (a warm-up that grows towards the last rank, "
                       "or a cap below it)");
}
}  // namespace

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
    if (heap.empty()) throw stuck(name);
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
//
// The state is the ranks' counts. Every action takes one unit, so a message sent at time t
// has arrived at t+1, the next time its consumer looks: at the start of time t, rank r's input
// for F m has arrived iff rank r-1's F count (at the start of t) is above m, and the gradient
// for B m iff rank r+1's B count is. (The list scheduler keeps arrival times; the former
// version of this function kept them in a ring of W > cap micro-batches per chunk and
// direction, and never overwrote an unread message: an F on rank r-1 sends m = f[r-1] <
// cap + w[r-1] <= cap + b[r-1] <= cap + b[r] <= cap + f[r], and a B on rank r+1 sends
// m = b[r+1] < f[r+1] <= f[r] <= cap + w[r] <= cap + b[r], so both are fewer than cap
// micro-batches ahead of their reader: the ring read exactly these counts.) So one time unit
// is a function `step` of the counts (F, B, W run so far on each rank) at its start.
//
// The jump. Within `step` the counts meet M only in `w == M`, `b < M` and `f < M`; every other
// test compares two counts (f - b <= warm-up, f - w < cap, a neighbour's count above one's
// own, w < b) or a count with kAlways (no input: true for every count). So if every count of x
// plus d is below M, step(x + d) = step(x) + d, and its actions are step(x)'s with
// micro-batch + d. Hence when the counts at time t0 + T are those at t0 plus d on every rank
// (F, B and W alike; the steady state: T = 3, d = 1, each rank one F, one B, one W), the next
// J periods repeat the last one with micro-batches moved by d, 2d, ..., Jd, as long as every
// count stays below M: F counts are the largest (w <= b <= f) and fall from rank to rank
// (f[r] <= f[r-1]), so J = (M - 1 - f[0]) / d. The jump appends each rank's actions of the
// last period J times, moved, and adds J·d to its counts; it is tried every `gap` units
// against periods up to kMaxPeriod (a probe costs a copy and a few compares of the counts, a
// unit a look at every rank).
Schedule zero_bubble_greedy(const char* name, int P, int M, const std::function<int(int)>& warmup,
                            int cap, ZeroBubbleGreedyStats* stats) {
  Schedule s = make_schedule(name, P, M, 1);
  set_looped_placement(s);
  struct Counts {
    int f = 0, b = 0, w = 0;
  };
  std::vector<Counts> n(P);
  std::vector<int> warm(P);
  for (int r = 0; r < P; ++r) {
    warm[r] = std::clamp(warmup(r), 0, M);
    s.ranks[r].reserve(3 * static_cast<std::size_t>(M));
  }
  constexpr int kAlways = std::numeric_limits<int>::max();  // a count every input is below
  int finished = 0;
  // One time unit. A rank's F/B order is 1F1B-like: warm-up forwards, then F and B in turn,
  // then the remaining Bs: it wants an F while it has forwards left and at most `warm` more
  // forwards than backwards, else a B. If that cannot run (input not there, or the F would
  // make `cap` micro-batches live), it runs its oldest pending W. False: no rank could act.
  const auto step = [&] {
    bool acted = false;
    int f_prev = kAlways;  // rank r-1's F count at the start of this unit (rank 0: no input)
    for (int r = 0; r < P; ++r) {
      Counts& k = n[r];
      const int f_in = f_prev;
      f_prev = k.f;
      if (k.w == M) continue;
      auto& out = s.ranks[r];
      if (k.b < M) {
        if (k.f < M && k.f - k.b <= warm[r]) {
          if (k.f - k.w < cap && f_in > k.f) {
            out.push_back(make_action(Op::F, r, k.f++));
            acted = true;
            continue;
          }
        } else if ((r + 1 < P ? n[r + 1].b : kAlways) > k.b) {
          out.push_back(make_action(Op::B, r, k.b++));
          acted = true;
          continue;
        }
      }
      if (k.w < k.b) {
        out.push_back(make_action(Op::W, r, k.w++));
        acted = true;
        if (k.w == M) ++finished;
      }
    }
    return acted;
  };
  // Appends each rank's actions since `len[r]` J more times, micro-batches moved by d each time:
  // the last period as words (mb: the low 16 bits), the J after it by doubling (each pass copies
  // all periods held so far, moved by as many: a loop the compiler vectorizes), then appended to
  // the list in one pass.
  std::vector<std::uint32_t> block;
  const auto jump = [&](const std::vector<std::size_t>& len, int J, int d) {
    for (int r = 0; r < P; ++r) {
      auto& out = s.ranks[r];
      const std::size_t L = out.size() - len[r], total = (static_cast<std::size_t>(J) + 1) * L;
      block.resize(total);
      for (std::size_t i = 0; i < L; ++i) block[i] = std::bit_cast<std::uint32_t>(out[len[r] + i]);
      for (std::size_t have = L; have < total;) {
        const std::size_t take = std::min(have, total - have);
        const auto delta = static_cast<std::uint32_t>(have / L) * static_cast<std::uint32_t>(d);
        const std::uint32_t* from = block.data();
        std::uint32_t* to = block.data() + have;
        for (std::size_t i = 0; i < take; ++i)
          to[i] = (from[i] & ~0xFFFFu) | ((from[i] + delta) & 0xFFFFu);
        have += take;
      }
      out.insert(out.end(), WordsAsActions{block.data() + L}, WordsAsActions{block.data() + total});
      n[r].f += J * d;
      n[r].b += J * d;
      n[r].w += J * d;
    }
  };
  constexpr int kMaxPeriod = 6;
  const long gap = std::max(8, P / 8);
  std::vector<Counts> snap;
  std::vector<std::size_t> len(P);
  long next_probe = gap;
  int probe = -1;  // units since the snapshot, or -1: none held
  bool jumped = false;
  for (long t = 0; finished < P; ++t) {
    if (!step()) throw stuck(name);  // (and would stay so: the counts no longer change)
    if (jumped) continue;
    if (probe < 0) {
      if (t + 1 < next_probe) continue;
      snap = n;
      for (int r = 0; r < P; ++r) len[r] = s.ranks[r].size();
      probe = 0;
      continue;
    }
    ++probe;
    const int d = n[0].f - snap[0].f;
    bool same = d > 0;
    for (int r = P - 1; same && r >= 0; --r)
      same = n[r].f - snap[r].f == d && n[r].b - snap[r].b == d && n[r].w - snap[r].w == d;
    if (same) {
      const int J = (M - 1 - n[0].f) / d;
      if (J > 0) {
        jump(len, J, d);
        if (stats) {
          stats->period = probe;
          stats->shift = d;
          stats->jumped_units = static_cast<long>(J) * probe;
          stats->start = t + 1 - probe;
        }
        t += static_cast<long>(J) * probe;
      }
      jumped = true;  // (afterwards f[0] + d >= M: no period can be jumped)
    } else if (probe == kMaxPeriod) {
      probe = -1;
      next_probe = t + 1 + gap;
    }
  }
  return s;
}

}  // namespace bb
