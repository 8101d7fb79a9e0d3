// A dataflow engine over a schedule's compute actions: every rank runs its list in order,
// each action as soon as its rank is free and its inputs have arrived (as-soon-as-possible
// timing), for one or more back-to-back steps. It ignores SEND/RECV actions: messages are
// modelled by the policy's delay. Lowering drives it with unit costs; the simulator with
// real costs and the link model. A schedule whose orders form a cyclic wait gets stuck, and
// `stuck_report()` says who waits for what. It expects a validated schedule (on each chunk a
// micro-batch's F before its B): one slot carries the activation and then the gradient.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedule/edges.hpp"
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
//   void step_done(int rank, int step, Time end);  // optional: rank r ended step s at `end`
//   static constexpr bool kPositiveTimes;  // optional: every message time is > 0 (all costs
//                                          // > 0), so with split slots and one step a slot's
//                                          // time says whether it was written: no stamps
//
// kSplitSlots: activations and gradients get a slot array each (twice the memory), and both
// stay readable after the run: activation_time() and gradient_time(). Lowering needs them.
template <class Time, class Policy, bool kSplitSlots = false>
class DataflowEngine {
 public:
  // Stamps are 16 bits: 2 per step.
  static constexpr int kMaxSteps = 30000;

  // `order`: an order of the compute actions found before (ComputeOrder), replayed from the
  // first step instead of searching; run() then fails with order_rejected() if it is not an
  // order of this schedule's actions in which every input arrives before it is used.
  DataflowEngine(const Schedule& s, Policy& policy, int steps = 1,
                 const ComputeOrder* order = nullptr)
      : s_(s), pol_(policy), steps_(steps), given_(order) {}

  // Keep the order the search finds (see take_order()), also for a single step.
  void record_order() { record_ = true; }
  // After run(): the order found by the search, or empty.
  ComputeOrder take_order() { return std::move(order_); }
  bool order_rejected() const { return rejected_; }

  // True when every rank finished every step.
  bool run() {
    if (kStampless && (steps_ != 1 || given_))
      throw std::logic_error("dataflow engine: slots without stamps hold one step's messages");
    const std::size_t CM = static_cast<std::size_t>(s_.num_chunks()) * s_.M;
    // Lazily zeroed pages (calloc of a large block maps fresh zero pages): a slot's page is
    // touched first when a message is written into it, not by a separate clearing pass.
    const std::size_t n = kSplitSlots ? 2 * CM : CM;
    if constexpr (kStampless) {
      time_.reset(static_cast<Time*>(std::calloc(n + 1, sizeof(Time))));  // 0: not written
    } else {
      time_.reset(static_cast<Time*>(std::malloc(n * sizeof(Time) + 1)));
      stamp_.reset(static_cast<std::uint16_t*>(std::calloc(n + 1, sizeof(std::uint16_t))));
      if (!stamp_) throw std::bad_alloc();
    }
    if (!time_) throw std::bad_alloc();
    grad_base_ = kSplitSlots ? CM : 0;
    nchunks_ = static_cast<std::size_t>(s_.num_chunks());
    uniform_ = s_.uniform_routes();
    if (!s_.routes.empty()) route_ = s_.routes.front();
    const int P = s_.P;
    st_.assign(P, RankState{});
    for (int r = 0; r < P; ++r) {
      st_[r].begin = st_[r].p = s_.ranks[r].data();
      st_[r].end = st_[r].begin + s_.ranks[r].size();
    }
    if (steps_ > kMaxSteps) return false;
    // Every rank runs until it must wait for one input, and is woken only when that input
    // arrives. The ready ranks form a stack, so a woken rank runs next, while the data it
    // waited for is still in cache. A rank is on it at most once (it waits for nothing while
    // there); one more entry takes the branchless push.
    //
    // Later steps run the same actions on the same inputs, so the order the first step found
    // (each rank's run between two waits, as rank and length) is a valid order for them too:
    // they replay it, without waits, wakes or a stack.
    if (given_) return replay_given();
    replay_ = (steps_ > 1 || record_) && P <= 0xffff;
    limit_ = replay_ ? 1 : steps_;
    // About two compute actions per run (lowered lists: a third of the actions compute).
    if (replay_) order_.reserve(s_.size() / (s_.lowered ? 6 : 2) + static_cast<std::size_t>(P));
    ready_.assign(static_cast<std::size_t>(P) + 1, 0);
    top_ = 0;
    for (int r = P - 1; r >= 0; --r) ready_[top_++] = r;
    if (uniform_)
      while (top_ > 0) advance<true>(ready_[--top_]);
    else
      while (top_ > 0) advance<false>(ready_[--top_]);
    for (int r = 0; r < P; ++r)
      if (st_[r].step < limit_) return false;
    if (!replay_) return true;
    for (int step = 1; step < steps_; ++step) {
      if (step > 1)
        for (int r = 0; r < P; ++r) {
          RankState& st = st_[r];
          st.p = st.begin;
          st.step = step;
          st.clock += pol_.step_gap(r);
        }
      const bool ok = uniform_ ? replay<true, false>(step) : replay<false, false>(step);
      if (!ok)
        throw std::logic_error("dataflow engine: the replay of step 1's order missed an input");
      for (int r = 0; r < P; ++r) step_done(r, step, st_[r].clock);
    }
    for (int r = 0; r < P; ++r) st_[r].step = steps_;
    if (!record_) ComputeOrder().swap(order_);
    return true;
  }

  Time clock(int rank) const { return st_[rank].clock; }

  // With kSplitSlots, after run(): when message m of micro-batch mb reached its consumer (the
  // last step's value).
  Time message_time(const MessageName& m, std::uint32_t mb) const requires kSplitSlots {
    return time_[slot(m, mb)];
  }

  std::string stuck_report() const {
    std::string out;
    if (steps_ > kMaxSteps)
      return "  more than " + std::to_string(kMaxSteps) + " steps asked for\n";
    for (int r = 0; r < s_.P; ++r) {
      const RankState& st = st_[r];
      if (st.step >= limit_) continue;
      const Action& a = *st.p;
      out += "  rank " + std::to_string(r) + " step " + std::to_string(st.p - st.begin) +
             " waits at " + to_string(a) + " for " + wait_reason(a) + "\n";
    }
    return out;
  }

 private:
  static constexpr std::size_t kNotWaiting = ~std::size_t{0};

  void step_done(int r, int step, Time end) {
    if constexpr (requires { pol_.step_done(r, step, end); }) pol_.step_done(r, step, end);
  }

  static constexpr bool positive_times() {
    if constexpr (requires { Policy::kPositiveTimes; })
      return Policy::kPositiveTimes;
    else
      return false;
  }
  // Split slots of a policy whose messages all have times > 0 need no stamps (one step).
  static constexpr bool kStampless = kSplitSlots && positive_times();

  struct RankState {
    const Action* p = nullptr;  // next action
    const Action* begin = nullptr;
    const Action* end = nullptr;
    std::size_t waiting = kNotWaiting;  // the edge slot it waits for
    Time clock{};
    int step = 0;
  };

  // One slot per edge between chunk c and c+1 of micro-batch mb (see idx()): first the
  // activation going forward, then, once chunk c+1 has used it (its F precedes its B), the
  // gradient coming back (kSplitSlots: in a second array). The stamp says which value of which
  // step the slot holds.
  static std::uint16_t fstamp(int step) { return static_cast<std::uint16_t>(2 * step + 1); }
  static std::uint16_t bstamp(int step) { return static_cast<std::uint16_t>(2 * step + 2); }

  //
  // Layout: the unit-time pass (split slots, read rank by rank afterwards by the lowering) keeps
  // a chunk's micro-batches together; the simulator keeps a micro-batch's chunks together, the
  // order in which a wave through the ranks touches them (10-15 % faster at P=512).
  std::size_t idx(int chunk, std::uint32_t mb) const {
    if constexpr (kSplitSlots)
      return static_cast<std::size_t>(chunk) * s_.M + mb;
    else
      return static_cast<std::size_t>(mb) * nchunks_ + static_cast<std::size_t>(chunk);
  }
  // The slot of message m of micro-batch mb.
  std::size_t slot(const MessageName& m, std::uint32_t mb) const {
    return (m.dir == 0 ? 0 : grad_base_) + idx(static_cast<int>(m.chunk), mb);
  }
  template <bool kUniform>
  const Route& route(std::uint32_t mb) const {
    if constexpr (kUniform)
      return route_;
    else
      return s_.routes[mb];
  }

  std::string wait_reason(const Action& a) const {
    const MessageName in = message_in(a, s_.routes[a.mb]);
    if (in.none()) return "its own earlier action";
    const std::uint32_t from = producer_chunk(in);
    return std::string(in.dir == 0 ? "the forward output" : "the gradient") + " of chunk " +
           std::to_string(from) + " micro-batch " + std::to_string(a.mb) + " from rank " +
           std::to_string(s_.chunk_rank[from]);
  }

  // Raises *t to the input's arrival time; returns kNotWaiting, or the slot it waits for.
  template <bool kUniform>
  [[gnu::always_inline]] std::size_t input(const Action& a, std::uint16_t fs, Time* t) const {
    const MessageName in = message_in(a, route<kUniform>(a.mb));
    if (in.none()) return kNotWaiting;
    const std::size_t k = slot(in, a.mb);
    const auto want = static_cast<std::uint16_t>(fs + in.dir);
    if constexpr (kStampless) {
      if (!(time_[k] > Time{})) return k;
    } else {
      if (stamp_[k] != want) return k;
    }
    if (time_[k] > *t) *t = time_[k];
    return kNotWaiting;
  }

  // Without a branch (whether the rank waits for exactly this is unpredictable): the rank is
  // written above the top of the stack, and the top moves up only if it was waiting for it.
  [[gnu::always_inline]] void wake(int r, std::size_t what) {
    RankState& st = st_[r];
    const bool hit = st.waiting == what;
    st.waiting = hit ? kNotWaiting : st.waiting;
    ready_[top_] = r;
    top_ += hit;
  }

  // Writes a message produced on rank r at time t into slot k for rank dst.
  [[gnu::always_inline]] void put(std::size_t k, std::uint16_t stamp, int r, int dst,
                                  const Action& a, Time t) {
    if constexpr (!kStampless) stamp_[k] = stamp;
    if (dst == r) {
      time_[k] = t;
    } else {
      time_[k] = t + pol_.delay(r, dst, a);
      wake(dst, k);
    }
  }

  template <bool kUniform>
  [[gnu::always_inline]] void output(int r, std::uint16_t fs, const Action& a, Time f_end,
                                     Time grad_at) {
    const MessageName out = message_out(a, route<kUniform>(a.mb));
    if (out.none()) return;
    put(slot(out, a.mb), static_cast<std::uint16_t>(fs + out.dir), r, consumer_rank(s_, out), a,
        out.dir == 0 ? f_end : grad_at);
  }

  template <bool kUniform>
  void advance(int r) {
    RankState& st = st_[r];
    // Work on locals; write the state back when the rank blocks or finishes.
    const Action* p = st.p;
    const Action* const end = st.end;
    int step = st.step;
    std::uint16_t fs = fstamp(step);
    Time clock = st.clock;
    std::size_t waiting = kNotWaiting;
    std::uint32_t units = 0;  // compute actions (FB pairs) run, for the replay
    while (step < limit_) {
      if (p == end) {
        step_done(r, step, clock);
        p = st.begin;
        if (++step < steps_) clock += pol_.step_gap(r);
        fs = fstamp(step);
        continue;
      }
      if (is_comm(p->op)) [[unlikely]] {
        ++p;
        continue;
      }
      Time start = clock;
      if (unit_length(p, end) == 1) [[likely]] {
        waiting = input<kUniform>(*p, fs, &start);
        if (waiting != kNotWaiting) break;
        const Time stop = start + pol_.cost(r, p, 1);
        pol_.record(r, step, static_cast<std::size_t>(p - st.begin), 1, clock, start, stop);
        clock = stop;
        output<kUniform>(r, fs, *p, stop, stop);
        ++p;
        ++units;
        continue;
      }
      // An FB pair: both inputs, one cost; the gradient leaves at grad_offset.
      waiting = input<kUniform>(p[0], fs, &start);
      if (waiting == kNotWaiting) waiting = input<kUniform>(p[1], fs, &start);
      if (waiting != kNotWaiting) break;
      const Time stop = start + pol_.cost(r, p, 2);
      const Time grad_at = start + pol_.grad_offset(r, p, 2);
      pol_.record(r, step, static_cast<std::size_t>(p - st.begin), 2, clock, start, stop);
      clock = stop;
      output<kUniform>(r, fs, p[0], stop, grad_at);
      output<kUniform>(r, fs, p[1], stop, grad_at);
      p += 2;
      ++units;
    }
    st.p = p;
    st.step = step;
    st.clock = clock;
    st.waiting = waiting;
    if (replay_)
      for (; units > 0; units -= std::min<std::uint32_t>(units, 0xffff))
        order_.push_back({static_cast<std::uint16_t>(r),
                          static_cast<std::uint16_t>(std::min<std::uint32_t>(units, 0xffff))});
  }

  // Every step in the given order; false (and order_rejected()) if it is not a valid one.
  bool replay_given() {
    const int P = s_.P;
    limit_ = steps_;
    order_ = *given_;
    for (int step = 0; step < steps_; ++step) {
      if (step > 0)
        for (int r = 0; r < P; ++r) {
          RankState& st = st_[r];
          st.p = st.begin;
          st.clock += pol_.step_gap(r);
        }
      // The first step proves the order (stamps compared); later ones follow it.
      const bool ok = step == 0
                          ? (uniform_ ? replay<true, true>(step) : replay<false, true>(step))
                          : (uniform_ ? replay<true, false>(step) : replay<false, false>(step));
      bool complete = ok;
      for (int r = 0; r < P && complete; ++r) {
        const RankState& st = st_[r];
        const Action* p = st.p;
        while (p != st.end && is_comm(p->op)) ++p;
        complete = p == st.end;
      }
      if (!complete) {
        rejected_ = true;
        for (int r = 0; r < P; ++r) st_[r].step = 0;
        return false;
      }
      for (int r = 0; r < P; ++r) step_done(r, step, st_[r].clock);
    }
    for (int r = 0; r < P; ++r) st_[r].step = steps_;
    return true;
  }

  // Runs one step in a recorded order; false if an input was missing (kCheck) or a run goes
  // past a rank's end (possible only with a given order).
  //
  // kCheck: compare (and write) stamps. A step replayed after one that was checked, or after
  // the search that found the order, needs neither: the same order holds for every step.
  template <bool kUniform, bool kCheck>
  bool replay(int step) {
    // Everything the loop touches in locals: the stores to slot times cannot then make the
    // compiler reload the engine's members.
    const std::uint16_t fs = fstamp(step);
    Time* const time = time_.get();
    std::uint16_t* const stamp = stamp_.get();
    const int* const chunk_rank = s_.chunk_rank.data();
    const Route* const routes = s_.routes.data();
    const Route uniform_route = route_;
    const std::size_t M = static_cast<std::size_t>(s_.M), C = nchunks_, grad = grad_base_;
    const int P = s_.P;
    bool missed = false;
    const auto slot = [&](const MessageName& m, std::uint32_t mb) {  // slot(), from locals
      const auto chunk = static_cast<std::size_t>(m.chunk);
      if constexpr (kSplitSlots)
        return (m.dir == 0 ? 0 : grad) + chunk * M + mb;
      else
        return static_cast<std::size_t>(mb) * C + chunk;
    };
    const auto arrive = [&](const Action& a, Time* start) {
      const MessageName in = message_in(a, kUniform ? uniform_route : routes[a.mb]);
      if (in.none()) return;
      const std::size_t k = slot(in, a.mb);
      if constexpr (kCheck) missed |= stamp[k] != static_cast<std::uint16_t>(fs + in.dir);
      if (time[k] > *start) *start = time[k];
    };
    const auto leave = [&](int r, const Action& a, Time f_end, Time grad_at) {
      const MessageName out = message_out(a, kUniform ? uniform_route : routes[a.mb]);
      if (out.none()) return;
      const std::size_t k = slot(out, a.mb);
      const int dst = chunk_rank[consumer_chunk(out)];
      const Time t = out.dir == 0 ? f_end : grad_at;
      if constexpr (kCheck) stamp[k] = static_cast<std::uint16_t>(fs + out.dir);
      time[k] = dst == r ? t : t + pol_.delay(r, dst, a);
    };
    for (const Run& run : order_) {
      const int r = run.rank;
      if (r >= P) return false;
      RankState& st = st_[r];
      const Action* p = st.p;
      const Action* const begin = st.begin;
      const Action* const end = st.end;
      Time clock = st.clock;
      for (std::uint32_t u = run.units; u > 0; --u) {
        while (p != end && is_comm(p->op)) ++p;
        if (p == end) return false;
        Time start = clock;
        if (unit_length(p, end) == 1) [[likely]] {
          arrive(*p, &start);
          const Time stop = start + pol_.cost(r, p, 1);
          pol_.record(r, step, static_cast<std::size_t>(p - begin), 1, clock, start, stop);
          clock = stop;
          leave(r, *p, stop, stop);
          ++p;
          continue;
        }
        arrive(p[0], &start);
        arrive(p[1], &start);
        const Time stop = start + pol_.cost(r, p, 2);
        const Time grad_at = start + pol_.grad_offset(r, p, 2);
        pol_.record(r, step, static_cast<std::size_t>(p - begin), 2, clock, start, stop);
        clock = stop;
        leave(r, p[0], stop, grad_at);
        leave(r, p[1], stop, grad_at);
        p += 2;
      }
      st.p = p;
      st.clock = clock;
    }
    return !missed;
  }

  struct Free {
    void operator()(void* p) const { std::free(p); }
  };

  const Schedule& s_;
  Policy& pol_;
  int steps_;
  bool uniform_ = true;        // every micro-batch takes the same route
  std::size_t grad_base_ = 0;  // where gradient slots start (kSplitSlots) or 0 (shared)
  std::size_t nchunks_ = 0;
  Route route_;
  std::unique_ptr<Time[], Free> time_;
  std::unique_ptr<std::uint16_t[], Free> stamp_;
  std::vector<RankState> st_;
  std::vector<int> ready_;
  std::size_t top_ = 0;
  using Run = ComputeRun;
  bool replay_ = false;
  int limit_ = 1;  // steps found by search (1 when later ones replay)
  const ComputeOrder* given_ = nullptr;
  bool record_ = false;
  bool rejected_ = false;
  ComputeOrder order_;  // the first step's order, for the replay of later steps
};

}  // namespace bb
