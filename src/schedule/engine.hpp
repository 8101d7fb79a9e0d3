// A dataflow engine over a schedule's compute actions: every rank runs its list in order,
// each action as soon as its rank is free and its inputs have arrived (as-soon-as-possible
// timing), for one or more back-to-back steps. It ignores SEND/RECV actions: messages are
// modelled by the policy's delay. Lowering drives it with unit costs; the simulator with
// real costs and the link model. A schedule whose orders form a cyclic wait gets stuck, and
// `stuck_report()` says who waits for what.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

// Policy:
//   Time cost(int rank, const Action* a, std::size_t n);   // n = 2 for an FB pair
//   Time grad_offset(int rank, const Action* a, std::size_t n); // input grad ready after
//   Time delay(int src, int dst, const Action& producer);   // message time (0 if local)
//   Time step_gap(int rank);                                // between steps (optimizer)
//   void record(int rank, int step, std::size_t index, std::size_t n,
//               Time ready, Time start, Time end);
template <class Time, class Policy>
class DataflowEngine {
 public:
  DataflowEngine(const Schedule& s, Policy& policy, int steps = 1)
      : s_(s), pol_(policy), steps_(steps) {}

  // True when every rank finished every step.
  bool run() {
    const std::size_t CM = static_cast<std::size_t>(s_.num_chunks()) * s_.M;
    favail_.assign(CM, Time{});
    bavail_.assign(CM, Time{});
    fgen_.assign(CM, 0);
    bgen_.assign(CM, 0);
    const int P = s_.P;
    st_.assign(P, RankState{});
    queued_.assign(P, 1);
    queue_.clear();
    for (int r = 0; r < P; ++r) queue_.push_back(r);
    std::size_t head = 0;
    while (head < queue_.size()) {
      const int r = queue_[head++];
      queued_[r] = 0;
      advance(r);
      if (head > 4096 && head * 2 > queue_.size()) {
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head));
        head = 0;
      }
    }
    for (int r = 0; r < P; ++r)
      if (st_[r].step < steps_) return false;
    return true;
  }

  Time clock(int rank) const { return st_[rank].clock; }

  // Arrival times of every (chunk, micro-batch)'s forward output and input gradient at the
  // rank that consumes it (index chunk * M + mb), handed over after run().
  void take_arrivals(std::vector<Time>* forward, std::vector<Time>* gradient) {
    *forward = std::move(favail_);
    *gradient = std::move(bavail_);
  }

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
  struct RankState {
    std::size_t pos = 0;
    int step = 0;
    Time clock{};
  };

  std::size_t idx(int chunk, std::uint32_t mb) const {
    return static_cast<std::size_t>(chunk) * s_.M + mb;
  }
  std::uint8_t stamp(int step) const { return static_cast<std::uint8_t>(step % 255 + 1); }

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

  // Input arrival time of one action, or false if it has not arrived.
  bool input(const Action& a, std::uint8_t gen, Time* t) const {
    const Route& rt = s_.routes[a.mb];
    if (a.op == Op::F && a.chunk > rt.first) {
      const std::size_t k = idx(a.chunk - 1, a.mb);
      if (fgen_[k] != gen) return false;
      if (favail_[k] > *t) *t = favail_[k];
    } else if ((a.op == Op::B || a.op == Op::BW) && a.chunk < rt.last) {
      const std::size_t k = idx(a.chunk + 1, a.mb);
      if (bgen_[k] != gen) return false;
      if (bavail_[k] > *t) *t = bavail_[k];
    }
    return true;
  }

  void wake(int r) {
    if (!queued_[r]) {
      queued_[r] = 1;
      queue_.push_back(r);
    }
  }

  void output(int r, std::uint8_t gen, const Action& a, Time f_end, Time grad_at) {
    const Route& rt = s_.routes[a.mb];
    if (a.op == Op::F && a.chunk < rt.last) {
      const int dst = s_.chunk_rank[a.chunk + 1];
      const std::size_t k = idx(a.chunk, a.mb);
      favail_[k] = f_end + (dst != r ? pol_.delay(r, dst, a) : Time{});
      fgen_[k] = gen;
      if (dst != r) wake(dst);
    } else if ((a.op == Op::B || a.op == Op::BW) && a.chunk > rt.first) {
      const int dst = s_.chunk_rank[a.chunk - 1];
      const std::size_t k = idx(a.chunk, a.mb);
      bavail_[k] = grad_at + (dst != r ? pol_.delay(r, dst, a) : Time{});
      bgen_[k] = gen;
      if (dst != r) wake(dst);
    }
  }

  void advance(int r) {
    RankState& st = st_[r];
    const Action* acts = s_.ranks[r].data();
    const std::size_t size = s_.ranks[r].size();
    // Work on locals; write the state back when the rank blocks or finishes.
    std::size_t pos = st.pos;
    int step = st.step;
    Time clock = st.clock;
    std::uint8_t gen = stamp(step);
    while (step < steps_) {
      if (pos >= size) {
        pos = 0;
        if (++step < steps_) clock += pol_.step_gap(r);
        gen = stamp(step);
        continue;
      }
      const Action* a = acts + pos;
      if (is_comm(a->op)) {
        ++pos;
        continue;
      }
      const std::size_t n = a->overlap_next() && pos + 1 < size ? 2 : 1;
      Time start = clock;
      if (!input(a[0], gen, &start) || (n == 2 && !input(a[1], gen, &start))) break;
      const Time end = start + pol_.cost(r, a, n);
      const Time grad_at = start + pol_.grad_offset(r, a, n);
      pol_.record(r, step, pos, n, clock, start, end);
      for (std::size_t k = 0; k < n; ++k) output(r, gen, a[k], end, grad_at);
      clock = end;
      pos += n;
    }
    st.pos = pos;
    st.step = step;
    st.clock = clock;
  }

  const Schedule& s_;
  Policy& pol_;
  int steps_;
  std::vector<Time> favail_, bavail_;
  std::vector<std::uint8_t> fgen_, bgen_;
  std::vector<RankState> st_;
  std::vector<std::uint8_t> queued_;
  std::vector<int> queue_;
};

}  // namespace bb
