// Looped BFS (Lamy-Poirier, "Breadth-First Pipeline Parallelism", 2023), in the order of
// PyTorch's torch.distributed.pipelining ScheduleLoopedBFS (read to learn, re-derived here):
// v chunks per rank, chunk c on rank c mod P (looped). Rank r runs every micro-batch's forward
// of its first chunk, then of its second, ..., then the backwards chunk by chunk from its last,
// each chunk's micro-batches in reverse order (M-1 first: the last forward is the first whose
// gradient comes back). Every forward runs before any backward: each rank holds all v*M
// chunk activations (M stage units) at its peak, as GPipe, with a bubble cut by v: each
// chunk's micro-batches flow as GPipe's do, and below P a chunk's round comes back to rank 0
// (P-M) chunk forwards late, interleaved's form (established with the simulator, both views;
// the matrix test checks it).
//
// PyTorch accepts any P, M and v >= 1 here (v = 1 is GPipe with its backwards reversed);
// tests/unit/test_reference_orders.cpp compares every rank's order with PyTorch's own.
#include "schedule/parallel.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

void build(Schedule& s, const ScheduleParams&) {
  build_rank_lists(s, 2 * static_cast<std::size_t>(s.M) * s.v,
                   [&](int r, std::vector<Action>& out) {
                     for (int cl = 0; cl < s.v; ++cl)
                       for (int m = 0; m < s.M; ++m)
                         out.push_back(make_action(Op::F, cl * s.P + r, m));
                     for (int cl = s.v - 1; cl >= 0; --cl)
                       for (int m = s.M - 1; m >= 0; --m)
                         out.push_back(make_action(Op::BW, cl * s.P + r, m));
                   });
}

void peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, static_cast<double>(in.M));
}

}  // namespace

constinit const ScheduleInfo looped_bfs_schedule = {
    .name = "looped-bfs",
    .fixed_v = 0,
    .accepts = "any P, M, v (v = 1: GPipe, backwards reversed)",
    .build = build,
    .form = {.formula = "((P-1) + max(0, P-M)*(v-1))*(F+B+W)/v",
             .conditions = "always (M >= P: fraction (P-1)/(v*M+P-1))",
             .source = "Lamy-Poirier 2023 (Breadth-First PP); order as PyTorch's "
                       "ScheduleLoopedBFS; form derived here",
             .bubble = form::looped_flush,
             .peak_formula = "M (every forward before any backward)",
             .peak = peak},
};

}  // namespace bb
