// Interleaved zero bubble: the order of PyTorch's torch.distributed.pipelining
// ScheduleInterleavedZeroBubble (its ZB-1P for v chunks per rank; Qi et al., "Zero Bubble
// Pipeline Parallelism", ICLR 2024), read to learn and re-derived here. Looped placement (chunk
// c on rank c mod P), micro-batches in PyTorch's rounds as interleaved's: R = max(1, M/P) rounds
// of K = M/R, which must be whole. Forward number i (of v*M) runs local chunk (i/K) mod v on
// micro-batch (i/(vK))*K + i mod K; backward number j runs local chunk v-1-((j/K) mod v) on the
// same micro-batch sequence. Rank r runs
//   1  w = min((v-1)*K + P-1-r, v*M) forwards               warm-up (one per hop, not two)
//   2  for j = 0 .. v*M-w-1: forward w+j, B j, and W j-r once j >= r
//   3  for j = v*M-w .. v*M-1: B j, and W j-r once j >= r   cool-down
//   4  the remaining W, oldest first
// so every rank holds min((v-1)*K + P, v*M) chunk activations (the warm-up, r more
// forwards before the first W, and the forward of the step that runs it): rank r's shorter
// warm-up is made up by the r W it defers. The step PyTorch then runs (_add_bubbles_to_actions)
// only inserts idle slots; every rank's order stays this one. PyTorch accepts any P, v >= 1 and
// M in whole rounds; tests/unit/test_reference_orders.cpp compares every rank's order with
// PyTorch's own for P <= 8, M <= 4P, v <= 4.
#include <algorithm>
#include <string>
#include <vector>

#include "schedule/parallel.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

// Micro-batches per round, as PyTorch's microbatches_per_round.
int round_size(int P, int M) {
  return M / std::max(1, M / P);
}

std::string refuse(const ScheduleParams& p) {
  if (const int rounds = std::max(1, p.M / p.P); p.M % rounds != 0)
    return "interleaved-zb: M must split into max(1, M/P) equal rounds, as in PyTorch (got M=" +
           std::to_string(p.M) + ", P=" + std::to_string(p.P) + ")";
  return {};
}

// The (local chunk, micro-batch) of forward number i, or of backward number i with the chunks
// reversed.
struct Sequence {
  int v, K;
  int local(int i) const { return (i / K) % v; }
  int micro_batch(int i) const { return i / (v * K) * K + i % K; }
};

int warmup(int P, int r, int v, int K, int M) {
  return std::min((v - 1) * K + P - 1 - r, v * M);
}

void build(Schedule& s, const ScheduleParams&) {
  const int P = s.P, v = s.v, total = v * s.M;
  const Sequence seq{v, round_size(P, s.M)};
  build_rank_lists(s, 3 * static_cast<std::size_t>(total), [&](int r, std::vector<Action>& out) {
    const auto put = [&](Op op, int local, int i) {
      out.push_back(make_action(op, local * P + r, seq.micro_batch(i)));
    };
    const auto fwd = [&](int i) { put(Op::F, seq.local(i), i); };
    const auto bwd = [&](Op op, int j) { put(op, v - 1 - seq.local(j), j); };
    const int w = warmup(P, r, v, seq.K, s.M);
    for (int i = 0; i < w; ++i) fwd(i);
    for (int j = 0; j < total; ++j) {
      if (j < total - w) fwd(w + j);
      bwd(Op::B, j);
      if (j >= r) bwd(Op::W, j - r);
    }
    for (int j = std::max(0, total - r); j < total; ++j) bwd(Op::W, j);
  });
}

// None is published for this order. At F = B = W the simulator gives ZB-H1's (P-1)(F+B-W)
// cut by v, (P-1)*F/v in both views, for every M >= P in whole rounds (P <= 8, M <= 4P, v <= 4;
// the matrix test checks it); below P it grows ((P-1)/v + P-M)*F for P/2 <= M < P, more below).
void bubble(const ModelInput& in, ModelResult& r) {
  if (in.M < in.P || in.M % std::max(1, in.M / in.P) != 0)
    return form::refuse(r, "interleaved-zb's form needs M >= P in whole rounds");
  if (!form::equal_passes(in)) return form::refuse(r, "interleaved-zb's form needs F = B = W");
  const double bt = (in.P - 1) * in.t_f / in.v;
  form::times(in, r, bt, bt);
}

void peak(const ModelInput& in, ModelResult& r) {
  if (in.M % std::max(1, in.M / in.P) != 0) return;
  const int K = round_size(in.P, in.M);
  r.peak_activations.assign(
      in.P, std::min((in.v - 1) * K + in.P, in.v * in.M) / static_cast<double>(in.v));
}

}  // namespace

constinit const ScheduleInfo interleaved_zb_schedule = {
    .name = "interleaved-zb",
    .fixed_v = 0,
    .splits_backward = true,
    .accepts = "any v, M in max(1, M/P) equal rounds (as PyTorch)",
    .refuse = refuse,
    .build = build,
    .form = {.formula = "(P-1)*F/v (ZB-H1's (P-1)*(F+B-W), cut by v)",
             .conditions = "F = B = W and M >= P in whole rounds",
             .source = "Qi et al. 2024 (ZB-1P); order as PyTorch's ScheduleInterleavedZeroBubble; "
                       "form derived here",
             .bubble = bubble,
             .peak_formula = "min((v-1)*K + P, v*M)/v on every rank, K = M/max(1, M/P)",
             .peak = peak},
};

}  // namespace bb
