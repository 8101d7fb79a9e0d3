// A dataflow engine over a schedule's compute actions: every rank runs its list in order,
// each action as soon as its rank is free and its inputs have arrived (as-soon-as-possible
// timing), for one or more back-to-back steps. It ignores SEND/RECV actions: messages are
// modelled by the policy's delay. Lowering drives it with unit costs; the simulator with
// real costs and the link model. A schedule whose orders form a cyclic wait gets stuck, and
// `stuck_report()` says who waits for what. It expects a validated schedule (on each chunk a
// micro-batch's F before its B): one slot carries the activation and then the gradient.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

// Policy:
//   Time cost(int rank, const Action* a, std::size_t n);   // n = 2 for an FB pair
//   Time grad_offset(int rank, const Action* a, std::size_t n); // FB pair: input grad ready
//                                                               // after (single: at its end)
//   Time delay(int src, int dst, const Action& producer);   // message time (0 if local)
//   Time step_gap(int rank);                                // between steps (optimizer)
//   void record(int rank, int step, std::size_t index, std::size_t n,
//               Time ready, Time start, Time end);        // each rank's actions in list order
template <class Time, class Policy>
class DataflowEngine {
 public:
  DataflowEngine(const Schedule& s, Policy& policy, int steps = 1)
      : s_(s), pol_(policy), steps_(steps) {}

  // True when every rank finished every step.
  bool run() {
    const std::size_t CM = static_cast<std::size_t>(s_.num_chunks()) * s_.M;
    edge_.assign(CM, Slot{});
    uniform_ = s_.uniform_routes();
    if (!s_.routes.empty()) route_ = s_.routes.front();
    const int P = s_.P;
    st_.assign(P, RankState{});
    // Every rank runs until it must wait for one input, and is woken only when that input
    // arrives. The ready ranks form a stack, so a woken rank runs next, while the data it
    // waited for is still in cache. A rank is on it at most once (it waits for nothing while
    // there); one more entry takes the branchless push.
    ready_.assign(static_cast<std::size_t>(P) + 1, 0);
    top_ = 0;
    for (int r = P - 1; r >= 0; --r) ready_[top_++] = r;
    while (top_ > 0) advance(ready_[--top_]);
    for (int r = 0; r < P; ++r)
      if (st_[r].step < steps_) return false;
    return true;
  }

  Time clock(int rank) const { return st_[rank].clock; }

  std::string stuck_report() const {
    std::string out;
    for (int r = 0; r < s_.P; ++r) {
      const RankState& st = st_[r];
      if (st.step >= steps_) continue;
      const Action& a = s_.ranks[r][st.pos];
      out += "  rank " + std::to_string(r) + " step " + std::to_string(st.pos) + " waits at " +
             to_string(a) + " for " + wait_reason(r, a) + "\n";
    }
    return out;
  }

 private:
  static constexpr std::size_t kNotWaiting = ~std::size_t{0};

  struct RankState {
    std::size_t pos = 0;
    std::size_t waiting = kNotWaiting;  // the edge slot it waits for
    int step = 0;
    Time clock{};
  };

  // One slot per edge between chunk c and c+1 of micro-batch mb (index c * M + mb): first the
  // activation going forward, then, once chunk c+1 has used it (its F precedes its B), the
  // gradient coming back. The stamp says which value of which step the slot holds.
  struct Slot {
    Time t{};
    std::uint32_t stamp = 0;
  };
  static std::uint32_t fstamp(int step) { return 2 * static_cast<std::uint32_t>(step) + 1; }
  static std::uint32_t bstamp(int step) { return 2 * static_cast<std::uint32_t>(step) + 2; }

  std::size_t idx(int chunk, std::uint32_t mb) const {
    return static_cast<std::size_t>(chunk) * s_.M + mb;
  }
  const Route& route(std::uint32_t mb) const { return uniform_ ? route_ : s_.routes[mb]; }

  std::string wait_reason(int r, const Action& a) const {
    const Route& rt = s_.routes[a.mb];
    if (a.op == Op::F && a.chunk > rt.first)
      return "the forward output of chunk " + std::to_string(a.chunk - 1) + " micro-batch " +
             std::to_string(a.mb) + " from rank " + std::to_string(s_.chunk_rank[a.chunk - 1]);
    if ((a.op == Op::B || a.op == Op::BW) && a.chunk < rt.last)
      return "the gradient of chunk " + std::to_string(a.chunk + 1) + " micro-batch " +
             std::to_string(a.mb) + " from rank " + std::to_string(s_.chunk_rank[a.chunk + 1]);
    (void)r;
    return "its own earlier action";
  }

  // Raises *t to the input's arrival time; returns kNotWaiting, or the slot it waits for.
  std::size_t input(Slot* edge, const Action& a, int step, Time* t) const {
    const Route& rt = route(a.mb);
    if (a.op == Op::F) {
      if (a.chunk == rt.first) return kNotWaiting;
      const Slot& sl = edge[idx(a.chunk - 1, a.mb)];
      if (sl.stamp != fstamp(step)) return idx(a.chunk - 1, a.mb);
      if (sl.t > *t) *t = sl.t;
    } else if (a.op != Op::W) {  // B or BW
      if (a.chunk == rt.last) return kNotWaiting;
      const Slot& sl = edge[idx(a.chunk, a.mb)];
      if (sl.stamp != bstamp(step)) return idx(a.chunk, a.mb);
      if (sl.t > *t) *t = sl.t;
    }
    return kNotWaiting;
  }

  // Without a branch (whether the rank waits for exactly this is unpredictable): the rank is
  // written above the top of the stack, and the top moves up only if it was waiting for it.
  void wake(int r, std::size_t what) {
    RankState& st = st_[r];
    const bool hit = st.waiting == what;
    st.waiting = hit ? kNotWaiting : st.waiting;
    ready_[top_] = r;
    top_ += hit;
  }

  // Writes a message produced on rank r at time t into slot k for rank dst.
  void put(Slot* edge, std::size_t k, std::uint32_t stamp, int r, int dst, const Action& a,
           Time t) {
    edge[k].stamp = stamp;
    if (dst == r) {
      edge[k].t = t;
    } else {
      edge[k].t = t + pol_.delay(r, dst, a);
      wake(dst, k);
    }
  }

  void output(Slot* edge, int r, int step, const Action& a, Time f_end, Time grad_at) {
    const Route& rt = route(a.mb);
    if (a.op == Op::F) {
      if (a.chunk != rt.last)
        put(edge, idx(a.chunk, a.mb), fstamp(step), r, s_.chunk_rank[a.chunk + 1], a, f_end);
    } else if (a.op != Op::W) {  // B or BW
      if (a.chunk != rt.first)
        put(edge, idx(a.chunk - 1, a.mb), bstamp(step), r, s_.chunk_rank[a.chunk - 1], a, grad_at);
    }
  }

  void advance(int r) {
    RankState& st = st_[r];
    Slot* const edge = edge_.data();
    const Action* const acts = s_.ranks[r].data();
    const std::size_t size = s_.ranks[r].size();
    // Work on locals; write the state back when the rank blocks or finishes.
    std::size_t pos = st.pos;
    int step = st.step;
    Time clock = st.clock;
    std::size_t waiting = kNotWaiting;
    while (step < steps_) {
      if (pos >= size) {
        pos = 0;
        if (++step < steps_) clock += pol_.step_gap(r);
        continue;
      }
      const Action* a = acts + pos;
      if (is_comm(a->op)) {
        ++pos;
        continue;
      }
      Time start = clock;
      if (!a->overlap_next() || pos + 1 == size) [[likely]] {
        waiting = input(edge, *a, step, &start);
        if (waiting != kNotWaiting) break;
        const Time end = start + pol_.cost(r, a, 1);
        pol_.record(r, step, pos, 1, clock, start, end);
        clock = end;
        ++pos;
        output(edge, r, step, *a, end, end);
        continue;
      }
      // An FB pair: both inputs, one cost; the gradient leaves at grad_offset.
      waiting = input(edge, a[0], step, &start);
      if (waiting == kNotWaiting) waiting = input(edge, a[1], step, &start);
      if (waiting != kNotWaiting) break;
      const Time end = start + pol_.cost(r, a, 2);
      const Time grad_at = start + pol_.grad_offset(r, a, 2);
      pol_.record(r, step, pos, 2, clock, start, end);
      clock = end;
      pos += 2;
      output(edge, r, step, a[0], end, grad_at);
      output(edge, r, step, a[1], end, grad_at);
    }
    st.pos = pos;
    st.step = step;
    st.clock = clock;
    st.waiting = waiting;
  }

  const Schedule& s_;
  Policy& pol_;
  int steps_;
  bool uniform_ = true;  // every micro-batch takes the same route
  Route route_;
  std::vector<Slot> edge_;
  std::vector<RankState> st_;
  std::vector<int> ready_;
  std::size_t top_ = 0;
};

}  // namespace bb
