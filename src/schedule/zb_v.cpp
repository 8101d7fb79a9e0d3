// ZB-V: the V-shape zero-bubble schedule (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR 2024, §6 and its ZB-V figure). The construction follows the hand-written order used by
// PyTorch's torch.distributed.pipelining ScheduleZBVZeroBubble (read to learn, re-derived
// here): V placement, rank r holds chunk c0 = r (down leg) and c1 = 2P-1-r (up leg), and
// every micro-batch visits all 2P chunks. Backward is split into B and W.
//
// With N = max(M, 2P-1) micro-batch slots, rank r runs
//   1  2(P-r)-1 x F0                        down-leg warm-up
//   2  r x (F1, F0)                         the first micro-batches turn at rank P-1
//   3  (P-r) x (F1, B1, W1)                 first up-leg backwards, W immediately
//   4  until F1 has run N times:            steady state, one F, B and W per chunk
//        F0 (while slots remain), B0, W0, F1, B1, W1
//   5  r x (B0, B1)                         cool-down: W deferred
//   6  (P-r) x (B0, W0 of the oldest deferred chunk-0 micro-batch)
//   7  the remaining W1, then the remaining W0, each in micro-batch order
// F and B take micro-batches in order per chunk. When M < 2P-1 the slots >= M are phantom
// micro-batches: their actions are dropped, which keeps every remaining dependency satisfied
// (all dependencies are within one micro-batch), at the price of a longer ramp.
//
// Properties (checked by tests/unit/test_gen_dualpipe_zbv.cpp with a unit-time ASAP simulation,
// F = B = W = 1 per chunk action), for M >= 2P-1:
// - rank r starts at time r (the forward ramp) and then never idles: single-step makespan
//   6M + (P-1) chunk units, i.e. bubble_time = (P-1) chunk forwards = (P-1)F/2 in stage units;
//   the steady-state bubble (per-rank span minus work) is 0;
// - live activations (F done minus W done) peak at 2P chunk-micro-batches on every rank, i.e.
//   P stage-micro-batches, the same as 1F1B's first stage.
// With fewer micro-batches the peak is lower (at most 2M) and the makespan longer; the same
// 6M + (P-1) was observed from M >= floor(3P/2) up.
//
// Conditions: P >= 1, M >= 1. The zero-bubble steady phase needs M >= 2P-1.
#include <algorithm>
#include <string>
#include <vector>

#include "schedule/parallel.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

class ZbvRankBuilder {
 public:
  ZbvRankBuilder(std::vector<Action>& out, int M, int c0, int c1)
      : out_(out), M_(M), chunk_{c0, c1} {}

  // Each call consumes the next micro-batch slot of that kind and leg.
  void f(int leg) { emit(Op::F, leg, f_[leg]++); }
  void b(int leg) { emit(Op::B, leg, b_[leg]++); }
  void w(int leg) { emit(Op::W, leg, w_[leg]++); }
  int f_count(int leg) const { return f_[leg]; }
  int b_count(int leg) const { return b_[leg]; }
  int w_count(int leg) const { return w_[leg]; }

 private:
  void emit(Op op, int leg, int mb) {
    if (mb < M_) out_.push_back(make_action(op, chunk_[leg], mb));
  }

  std::vector<Action>& out_;
  int M_;
  int chunk_[2];
  int f_[2] = {0, 0};
  int b_[2] = {0, 0};
  int w_[2] = {0, 0};
};

std::string refuse(const ScheduleParams& p) {
  if (p.P > 32767) return "zb-v: P must be in [1, 32767] (got P=" + std::to_string(p.P) + ")";
  return {};
}

void build(Schedule& s, const ScheduleParams&) {
  const int P = s.P;
  const int M = s.M;
  const int slots = std::max(M, 2 * P - 1);
  // F, B and W of M micro-batches on each of a rank's two chunks.
  build_rank_lists(s, 6 * static_cast<std::size_t>(M), [&](int r, std::vector<Action>& out) {
    ZbvRankBuilder a(out, M, r, 2 * P - 1 - r);
    for (int i = 0; i < 2 * (P - r) - 1; ++i) a.f(0);  // 1
    for (int i = 0; i < r; ++i) {                      // 2
      a.f(1);
      a.f(0);
    }
    for (int i = 0; i < P - r; ++i) {  // 3
      a.f(1);
      a.b(1);
      a.w(1);
    }
    while (a.f_count(1) < slots) {  // 4
      if (a.f_count(0) < slots) a.f(0);
      a.b(0);
      a.w(0);
      a.f(1);
      a.b(1);
      a.w(1);
    }
    for (int i = 0; i < r; ++i) {  // 5
      a.b(0);
      a.b(1);
    }
    for (int i = 0; i < P - r; ++i) {  // 6
      a.b(0);
      a.w(0);
    }
    while (a.w_count(1) < a.b_count(1)) a.w(1);  // 7
    while (a.w_count(0) < a.b_count(0)) a.w(0);
  });
}

void bubble(const ModelInput& in, ModelResult& r) {
  if (in.M < 2 * in.P - 1) return form::refuse(r, "zb-v's closed form needs M >= 2P-1");
  if (!form::equal_passes(in)) return form::refuse(r, "zb-v's closed form needs F = B = W");
  form::times(in, r, (in.P - 1) * in.t_f / 2, 0.0);
}

void peak(const ModelInput& in, ModelResult& r) {
  // Known only once the ramp fills (M >= 2P-1): otherwise none.
  if (in.M >= 2 * in.P - 1) r.peak_activations.assign(in.P, static_cast<double>(in.P));
}

}  // namespace

constinit const ScheduleInfo zb_v_schedule = {
    .name = "zb-v",
    .placement = Placement::v,
    .fixed_v = 2,
    .splits_backward = true,
    .accepts = "P <= 32767, any M",
    .refuse = refuse,
    .build = build,
    .form = {.formula = "0 in the steady state; (P-1)*F/2 for a single step (the ramp)",
             .conditions = "F = B = W and M >= 2P-1",
             .source = "Qi et al. 2024 (ZB-V); ramp derived here",
             .bubble = bubble,
             .peak_formula = "P (as 1F1B), when M >= 2P-1",
             .peak = peak},
};

}  // namespace bb
