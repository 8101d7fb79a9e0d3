// DualPipeV, the "cut-in-half" DualPipe (reference: github.com/deepseek-ai/DualPipe,
// dualpipe/dualpipev.py, DualPipeV.step; also PyTorch's ScheduleDualPipeV).
//
// One model copy cut into 2P chunks with the V placement (rank r holds chunks r and
// 2P-1-r); every micro-batch visits all 2P chunks, so it enters and leaves at rank 0. Phase 0
// of rank r is chunk r, phase 1 is chunk 2P-1-r, each taking micro-batches 0..M-1 in order.
// The rank runs DualPipe's eight steps (see dualpipe.cpp) with K = P, k = r and N = M:
//   1 2(P-r-1) F0 | 2 (r+1) x F0 F1 | 3 (P-r-1) x B1 W1 F1 | 4 (M-2P+r+1) x FB(F0,BW1)
//   FB(F1,BW0), not overlapped at i == 0 on the last rank | 5 (P-r-1) x BW1 FB(F1,BW0) |
//   6 (r+1) x B1 B0 with the split switched on at i == (r+1)/2 | 7 (P-r-1) x W B0 |
//   8 (r+1) x W.
//
// Conditions: M >= 2P (the reference's assertion; M may be odd), P >= 2 (a single rank has
// no pipeline and the reference's neighbour bookkeeping assumes two distinct end ranks).
#include <string>
#include <vector>

#include "schedule/dualpipe_steps.hpp"
#include "schedule/parallel.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

std::string refuse(const ScheduleParams& p) {
  const auto n = [](int x) { return std::to_string(x); };
  if (p.P < 2 || p.P > 32767) return "dualpipev: P must be in [2, 32767] (got P=" + n(p.P) + ")";
  if (p.M < 2 * p.P) return "dualpipev: M must be >= 2P (got M=" + n(p.M) + ", P=" + n(p.P) + ")";
  return {};
}

void build(Schedule& s, const ScheduleParams&) {
  const int P = s.P;
  const int M = s.M;
  // F, B and W of M micro-batches on each of a rank's two chunks.
  build_rank_lists(s, 6 * static_cast<std::size_t>(M), [&](int r, std::vector<Action>& out) {
    detail::append_dualpipe_steps(out, P, r, M, detail::DualPipePhase{r, 0},
                                  detail::DualPipePhase{2 * P - 1 - r, 0});
  });
}

void bubble(const ModelInput& in, ModelResult& r) {
  form::dual(in, r, true);
}

void peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, in.P + 0.5);
}

}  // namespace

constinit const ScheduleInfo dualpipev_schedule = {
    .name = "dualpipev",
    .placement = Placement::v,
    .fixed_v = 2,
    .splits_backward = true,
    .accepts = "2 <= P <= 32767, M >= 2P",
    .refuse = refuse,
    .build = build,
    .form = form::dual_form("(P-1)*(FB+B+W-3W)/2", bubble, "2P+1 chunks = P+1/2 stages", peak),
};

}  // namespace bb
