// Sequential reference of one training step (design §3, `--check`): the whole model, layer
// after layer, one micro-batch at a time, with the same Backend, initialisation, inputs and
// targets as the pipeline. A pipeline's loss and weight gradients are compared against it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/chunk_model.hpp"
#include "runtime/stage.hpp"
#include "runtime/transformer_stage.hpp"

namespace bb {

// Host copies of global layer `layer`'s weight gradients, as two tensors: the MLP's W1 (h×4h)
// and W2 (4h×h), row-major; a transformer block's attention part and MLP part
// (transformer_param_tensors()).
struct LayerGrads {
  int layer = 0;
  std::vector<float> dw1;
  std::vector<float> dw2;
};

struct GradientSet {
  std::optional<double> loss;  // summed over micro-batches (each scaled by 1/M)
  std::vector<LayerGrads> layers;

  const LayerGrads* find(int layer) const;
};

struct ReferenceConfig {
  int hidden = 0;
  int rows = 0;        // b
  int num_layers = 0;  // the model: global layers [0, num_layers)
  int num_microbatches = 1;
  std::uint64_t seed = 0;
  Dtype dtype = Dtype::kF32;  // of activations and their gradients (the pipeline's)
};

// One step's loss and accumulated gradients. `keep_layers` selects the layers whose
// gradients are returned (empty: all); every layer is computed either way.
GradientSet run_reference(Backend& backend, const ReferenceConfig& config,
                          const std::vector<int>& keep_layers = {});

// The transformer's sequential reference: the whole model as one TransformerStage holding
// layers [0, num_layers) of `model` (whose first_layer and num_layers are ignored), F then BW
// of each micro-batch in order, the same seeded inputs, targets and loss as the pipeline. It
// checks what a pipeline adds (splitting, messages, B/W order, recompute, copies); the
// block's own math is checked against finite differences (tests/unit/test_transformer_stage).
GradientSet run_transformer_reference(Backend& backend, const TransformerConfig& model,
                                      int num_layers, int num_microbatches,
                                      const std::vector<int>& keep_layers = {});

// Appends a chunk's gradients (global layer indices) to `out`; does not touch out.loss.
void append_gradients(const ChunkModel& chunk, GradientSet& out);

struct CompareResult {
  bool pass = false;
  double max_rel_error = 0;  // over the loss and every tensor of `got`
  std::string worst;         // e.g. "layer 3 dW1", "loss"
  std::string message;       // one line: pass/fail, the worst error, or what is missing
};

// The largest norm-wise relative error a pipeline's gradients may have against the reference of
// its dtype (run --check): fp32 1e-5; bf16 1e-3. Both sides round the same activations the
// same way, so they differ only by the order of fp32 sums (weight gradients accumulate the
// micro-batches in schedule order) and the bf16 roundings such differences flip (one bf16 ulp,
// 2^-8 relative, in an element); a wrong gradient — one micro-batch's W missing is 1/M
// relative — lies well above either.
double check_tolerance(Dtype dtype);

// Norm-wise relative error ||a−b|| / max(||a||, tiny) of each tensor (and |Δloss|/|loss|
// when both have a loss). `got` may hold a subset of ref's layers; a layer missing from ref
// or of a different size fails.
CompareResult compare(const GradientSet& ref, const GradientSet& got, double tolerance = 1e-5);

double relative_error(const std::vector<float>& ref, const std::vector<float>& got);

}  // namespace bb
