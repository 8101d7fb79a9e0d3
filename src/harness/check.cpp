#include "harness/check.hpp"

#include <vector>

#include "harness/step.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/reference.hpp"

namespace bb::harness {
namespace {

// Rank 0: the gathered per-rank gradient vectors ([layer, n1, n2, dw1 (n1)..., dw2 (n2)...]
// per layer; the sizes are exact in float) as one GradientSet.
GradientSet unpack_gradients(const std::vector<std::vector<float>>& grads) {
  GradientSet got;
  for (const auto& r : grads)
    for (std::size_t i = 0; i + 3 <= r.size();) {
      LayerGrads g;
      g.layer = static_cast<int>(r[i]);
      const auto n1 = static_cast<std::size_t>(r[i + 1]), n2 = static_cast<std::size_t>(r[i + 2]);
      const auto at = [&](std::size_t k) { return r.begin() + static_cast<std::ptrdiff_t>(k); };
      if (i + 3 + n1 + n2 > r.size()) break;
      g.dw1.assign(at(i + 3), at(i + 3 + n1));
      g.dw2.assign(at(i + 3 + n1), at(i + 3 + n1 + n2));
      got.layers.push_back(std::move(g));
      i += 3 + n1 + n2;
    }
  return got;
}

}  // namespace

CheckOutcome run_check(Executor& ex, Backend& backend, const RunConfig& c, const RunSettings& o,
                       MPI_Comm comm) {
  training_step(ex, nullptr, comm, {.barrier = true, .update = false, .timeout_s = o.timeout});
  GradientSet mine = ex.gradients();
  if (o.perturb_grads_rank == mpi::rank(comm))
    for (LayerGrads& g : mine.layers) g.dw1[0] += 1.0f;
  std::vector<float> packed;
  for (const LayerGrads& g : mine.layers) {
    packed.push_back(static_cast<float>(g.layer));
    packed.push_back(static_cast<float>(g.dw1.size()));
    packed.push_back(static_cast<float>(g.dw2.size()));
    packed.insert(packed.end(), g.dw1.begin(), g.dw1.end());
    packed.insert(packed.end(), g.dw2.begin(), g.dw2.end());
  }
  const auto grads = mpi::gather(packed, 0, comm, o.timeout);
  const auto losses = mpi::gather(std::vector<double>{ex.loss_sum()}, 0, comm, o.timeout);
  ex.zero_grads();
  ex.reset_loss();

  CheckOutcome out;
  int pass = 0;
  if (mpi::rank(comm) == 0) {
    GradientSet got = unpack_gradients(grads);
    double loss = 0;
    for (const auto& l : losses) loss += l.at(0);
    got.loss = loss;
    out.loss = loss;
    ReferenceConfig rc;
    rc.hidden = c.hidden;
    rc.rows = c.mb_size;
    rc.num_layers = ex.num_layers_total();
    rc.num_microbatches = c.lowered->M;
    rc.seed = o.seed;
    // The reference runs on this rank's backend in the run's dtype, so with --dtype bf16 it
    // stores and rounds the same activations to bf16 as the pipeline: what differs is the
    // order in which the fp32 accumulators sum the micro-batches' weight gradients, and bf16
    // roundings that this order flips (check_tolerance), while any error in the pipeline's
    // math or data movement shows at O(1/M) or more.
    const ExecutorConfig ec = executor_config(o, c.hidden, c.layers, c.mb_size);
    rc.dtype = ec.dtype;
    const GradientSet ref =
        ec.transformer ? run_transformer_reference(backend, transformer_chunk_config(ec, 0),
                                                   rc.num_layers, rc.num_microbatches)
                       : run_reference(backend, rc);
    CompareResult cmp = compare(ref, got, check_tolerance(ec.dtype));
    // The model's ends (embedding, head) arrive as two more gradient sets.
    const int expected = rc.num_layers + (ec.transformer && ec.transformer->vocab > 0 ? 2 : 0);
    if (cmp.pass && static_cast<int>(got.layers.size()) != expected) {
      cmp.pass = false;
      cmp.message = "gradients of " + std::to_string(got.layers.size()) +
                    " layers arrived, the model has " + std::to_string(expected);
    }
    pass = cmp.pass ? 1 : 0;
    out.max_rel_error = cmp.max_rel_error;
    out.message = cmp.message;
  }
  mpi::broadcast(pass, 0, comm, o.timeout);
  out.status = pass ? CheckStatus::kPass : CheckStatus::kFail;
  return out;
}

}  // namespace bb::harness
