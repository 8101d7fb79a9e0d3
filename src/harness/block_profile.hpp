// Per-block costs of a model measured on this rank, for the partitioner (model/partition.hpp,
// `run --partition auto`; docs/transformer.md, "Partitioner"). Each block is timed as a chunk
// of its own (F, B, W of one micro-batch, the fastest of a few after a warm-up); the model's
// ends are the difference between a one-block chunk that holds them and the same block alone.
#pragma once

#include <cstddef>

#include "model/partition.hpp"
#include "runtime/chunk_model.hpp"
#include "runtime/executor.hpp"

namespace bb {

// Seconds of one chunk's work items for one micro-batch (Backend::now around each, between
// synchronize() calls), each the least over `reps` micro-batches after `warmup` more, and the
// chunk's peak activation bytes of one micro-batch. `input`: the route's first chunk's input
// (make_input: token ids with an embedding) instead of seeded floats; `loss`: the route end's
// loss (its time apart, in `loss`) instead of a seeded output gradient.
struct ChunkTimes {
  double f = 0, loss = 0, b = 0, w = 0;
  std::size_t peak_activation_bytes = 0;
};
ChunkTimes time_chunk(ChunkModel& chunk, int reps, int warmup, bool input, bool loss);

// Costs of each of the `blocks` blocks of the model of `config` (block l: global layer l) and,
// with a vocabulary, of the embedding (`first`) and of the final LayerNorm, LM head and loss
// (`last`; the loss runs in the last chunk's F, as in the executor). Memory per block:
// parameters and gradients plus one micro-batch's peak activations. Throws ConfigError in
// synthetic mode (nothing to measure).
PartitionCosts profile_blocks(Backend& backend, const ExecutorConfig& config, int blocks, int reps,
                              int warmup = 1);

}  // namespace bb
