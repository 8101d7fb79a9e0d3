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
  bool input(const Action& a, int step, Time* t) const {
    const Route& rt = s_.routes[a.mb];
    if (a.op == Op::F && a.chunk > rt.first) {
      const std::size_t k = idx(a.chunk - 1, a.mb);
      if (fgen_[k] != stamp(step)) return false;
      if (favail_[k] > *t) *t = favail_[k];
    } else if ((a.op == Op::B || a.op == Op::BW) && a.chunk < rt.last) {
      const std::size_t k = idx(a.chunk + 1, a.mb);
      if (bgen_[k] != stamp(step)) return false;
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

  void output(int r, int step, const Action& a, Time f_end, Time grad_at) {
    const Route& rt = s_.routes[a.mb];
    if (a.op == Op::F && a.chunk < rt.last) {
      const int dst = s_.chunk_rank[a.chunk + 1];
      const std::size_t k = idx(a.chunk, a.mb);
      favail_[k] = f_end + (dst != r ? pol_.delay(r, dst, a) : Time{});
      fgen_[k] = stamp(step);
      if (dst != r) wake(dst);
    } else if ((a.op == Op::B || a.op == Op::BW) && a.chunk > rt.first) {
      const int dst = s_.chunk_rank[a.chunk - 1];
      const std::size_t k = idx(a.chunk, a.mb);
      bavail_[k] = grad_at + (dst != r ? pol_.delay(r, dst, a) : Time{});
      bgen_[k] = stamp(step);
      if (dst != r) wake(dst);
    }
  }

  void advance(int r) {
    RankState& st = st_[r];
    const auto& acts = s_.ranks[r];
    while (st.step < steps_) {
      if (st.pos >= acts.size()) {
        st.pos = 0;
        if (++st.step < steps_) st.clock += pol_.step_gap(r);
        continue;
      }
      const Action* a = &acts[st.pos];
      if (is_comm(a->op)) {
        ++st.pos;
        continue;
      }
      std::size_t n = 1;
      if (a->overlap_next() && st.pos + 1 < acts.size()) n = 2;
      Time start = st.clock;
      if (!input(a[0], st.step, &start)) return;
      if (n == 2 && !input(a[1], st.step, &start)) return;
      const Time end = start + pol_.cost(r, a, n);
      const Time grad_at = start + pol_.grad_offset(r, a, n);
      pol_.record(r, st.step, st.pos, n, st.clock, start, end);
      for (std::size_t k = 0; k < n; ++k) output(r, st.step, a[k], end, grad_at);
      st.clock = end;
      st.pos += n;
    }
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
