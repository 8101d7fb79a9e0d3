// DualPipe (DeepSeek-V3 technical report §3.2.1; reference implementation
// github.com/deepseek-ai/DualPipe, dualpipe/dualpipe.py, DualPipe.step).
//
// Two copies of the model run in opposite directions: micro-batches [0, M/2) enter at rank 0
// and visit chunks 0..P-1 (chunk s = stage s on rank s); micro-batches [M/2, M) enter at rank
// P-1 and visit chunks P..2P-1 (chunk P+s = stage s on rank P-1-s). Every rank therefore
// holds two chunks. Following the reference, "phase 0" of rank r is the chunk in whose
// direction r is an early stage (r < P/2: chunk r; r >= P/2: chunk 2P-1-r) and "phase 1" is
// the other one. Each phase runs its M/2 micro-batches in order for F and in order for B.
//
// Per rank, with K = P/2 half-pipeline ranks, k = min(r, P-1-r) and N = M/2 micro-batches
// per phase, the reference runs eight steps:
//   1  nF0       2(K-k-1) x  F0
//   2  nF0F1     (k+1)    x  F0, F1
//   3  nB1W1F1   (K-k-1)  x  B1 (split), W1 (same micro-batch), F1
//   4  nF0B1F1B0 (N-2K+k+1) x FB(F0, BW1), FB(F1, BW0); for i == 0 on the middle ranks
//                            (k == K-1) the first pair is not overlapped: F0, BW1
//   5  nB1F1B0   (K-k-1)  x  BW1, FB(F1, BW0)
//   6  nB1B0     (k+1)    x  B1, B0: full backwards (BW) until the zero-bubble split is
//                            switched on at i == (k+1)/2: before B1 if k is odd, between B1
//                            and B0 if k is even; a split B pushes its W to a FIFO queue
//   7  nWB0      (K-k-1)  x  W (FIFO pop), B0 (split)
//   8  nW        (k+1)    x  W (FIFO pop)
// Per phase F and B each total N; steps 6-7 push exactly K weight passes and steps 7-8 pop K.
// FB pairs are encoded as an F action flagged kOverlapNext followed by the backward action.
//
// DualPipeV (dualpipev.cpp) runs the same eight steps with K = P, k = r, N = M, so the step
// builder is shared here as bb::detail::append_dualpipe_steps.
//
// Unit-time check (tests/unit/test_gen_dualpipe_zbv.cpp, F = B = W = 1, FB = 3 or 2): the
// single-step makespan minus the least-busy rank's work is (K-1)(FB + B + W - 3W), B being the
// input-gradient time (DeepSeek's (PP/2-1)(F&B + B - 3W) with B the full backward); peak live
// activations are P+1 stage-micro-batches on every rank (DualPipeV: 2P+1 chunk-micro-batches).
//
// Conditions (those the reference asserts): P even, M even, M >= 2P (i.e. M/2 >= P). P >= 2
// follows from "even" and a pipeline of at least one rank.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "schedule/dualpipe_steps.hpp"
#include "schedule/generators.hpp"
#include "schedule/parallel.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace detail {

namespace {

class DualPipeRankBuilder {
 public:
  DualPipeRankBuilder(std::vector<Action>& out, const DualPipePhase& p0, const DualPipePhase& p1)
      : out_(out), phase_{p0, p1} {}

  void forward(int ph, std::uint8_t flags = 0) {
    out_.push_back(make_action(Op::F, phase_[ph].chunk, next_mb(next_f_[ph], ph), flags));
  }
  // split == true: B now, its W queued (FIFO). Otherwise one BW action.
  void backward(int ph, bool split) {
    const int mb = next_mb(next_b_[ph], ph);
    if (split) {
      out_.push_back(make_action(Op::B, phase_[ph].chunk, mb));
      pending_w_.emplace_back(phase_[ph].chunk, mb);
    } else {
      out_.push_back(make_action(Op::BW, phase_[ph].chunk, mb));
    }
  }
  void weight() {
    // The step counts guarantee a queued weight pass at every pop.
    if (pending_w_.empty()) throw ScheduleError("dualpipe steps: W popped from an empty queue");
    const auto [chunk, mb] = pending_w_.front();
    pending_w_.pop_front();
    out_.push_back(make_action(Op::W, chunk, mb));
  }
  // Overlapped forward of phase `fph` and full backward of phase `bph`.
  void overlapped(int fph, int bph) {
    forward(fph, Action::kOverlapNext);
    backward(bph, /*split=*/false);
  }
  bool queue_empty() const { return pending_w_.empty(); }

 private:
  int next_mb(int& counter, int ph) { return phase_[ph].first_mb + counter++; }

  std::vector<Action>& out_;
  DualPipePhase phase_[2];
  int next_f_[2] = {0, 0};
  int next_b_[2] = {0, 0};
  std::deque<std::pair<int, int>> pending_w_;
};

}  // namespace

// Appends the eight DualPipe steps of one rank to `out`. K: ranks of one half-pipeline (P/2
// for DualPipe, P for DualPipeV); k: this rank's position in it; N: micro-batches per phase.
void append_dualpipe_steps(std::vector<Action>& out, int K, int k, int N,
                           const DualPipePhase& phase0, const DualPipePhase& phase1) {
  DualPipeRankBuilder b(out, phase0, phase1);
  const bool middle = k == K - 1;

  for (int i = 0; i < 2 * (K - k - 1); ++i) b.forward(0);  // step 1
  for (int i = 0; i < k + 1; ++i) {                        // step 2
    b.forward(0);
    b.forward(1);
  }
  for (int i = 0; i < K - k - 1; ++i) {  // step 3
    b.backward(1, /*split=*/true);
    b.weight();
    b.forward(1);
  }
  for (int i = 0; i < N - 2 * K + k + 1; ++i) {  // step 4
    if (i == 0 && middle) {
      b.forward(0);
      b.backward(1, /*split=*/false);
    } else {
      b.overlapped(0, 1);
    }
    b.overlapped(1, 0);
  }
  for (int i = 0; i < K - k - 1; ++i) {  // step 5
    b.backward(1, /*split=*/false);
    b.overlapped(1, 0);
  }
  bool split = false;  // step 6
  const int step6 = k + 1;
  for (int i = 0; i < step6; ++i) {
    if (i == step6 / 2 && k % 2 == 1) split = true;
    b.backward(1, split);
    if (i == step6 / 2 && k % 2 == 0) split = true;
    b.backward(0, split);
  }
  for (int i = 0; i < K - k - 1; ++i) {  // step 7
    b.weight();
    b.backward(0, /*split=*/true);
  }
  for (int i = 0; i < k + 1; ++i) b.weight();  // step 8
  if (!b.queue_empty()) throw ScheduleError("dualpipe steps: weight-gradient queue not drained");
}

}  // namespace detail

namespace {

std::string refuse(const ScheduleParams& p) {
  const auto n = [](int x) { return std::to_string(x); };
  if (p.P < 2 || p.P % 2 != 0) return "dualpipe: P must be even and >= 2 (got P=" + n(p.P) + ")";
  if (p.P > 32767) return "dualpipe: P must be <= 32767 (got P=" + n(p.P) + ")";
  if (p.M % 2 != 0 || p.M < 2 * p.P)
    return "dualpipe: M must be even and >= 2P (M/2 from each end; got M=" + n(p.M) +
           ", P=" + n(p.P) + ")";
  return {};
}

void build(Schedule& s, const ScheduleParams&) {
  const int P = s.P;
  const int M = s.M;
  const int K = P / 2;
  const int N = M / 2;
  // F, B and W of N micro-batches in each direction.
  build_rank_lists(s, 6 * static_cast<std::size_t>(N), [&](int r, std::vector<Action>& out) {
    const int k = std::min(r, P - 1 - r);
    // Direction 0: chunk r, micro-batches [0, N). Direction 1: chunk 2P-1-r, [N, M).
    const detail::DualPipePhase dir0{r, 0};
    const detail::DualPipePhase dir1{2 * P - 1 - r, N};
    const bool second_half = r >= K;
    detail::append_dualpipe_steps(out, K, k, N, second_half ? dir1 : dir0,
                                  second_half ? dir0 : dir1);
  });
}

void bubble(const ModelInput& in, ModelResult& r) {
  form::dual(in, r, false);
}

void peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, in.P + 1.0);
}

}  // namespace

constinit const ScheduleInfo dualpipe_schedule = {
    .name = "dualpipe",
    .placement = Placement::dualpipe,
    .fixed_v = 2,
    .splits_backward = true,
    .accepts = "P even, P <= 32767, M even and M >= 2P",
    .refuse = refuse,
    .build = build,
    .form = form::dual_form("(P/2-1)*(FB+B+W-3W)", bubble, "P+1", peak),
};

}  // namespace bb
