// `run --partition auto` (docs/transformer.md, "Partitioner"): in the same launch, every rank
// profiles each block of the model and its ends (runtime/block_profile.hpp), rank 0 takes the
// median of the ranks' figures and chooses the split for a schedule (model/partition.hpp), and
// every rank gets the blocks per chunk.
#pragma once

#include <mpi.h>

#include <vector>

#include "model/partition.hpp"
#include "runtime/backend.hpp"
#include "runtime/executor.hpp"
#include "schedule/schedule.hpp"

namespace bb::harness {

// Collective over COMM: every rank profiles `blocks` blocks of `config` (reps micro-batches
// each after one warm-up); rank 0 gets the ranks' medians. Elsewhere the result is empty.
PartitionCosts profile_median(Backend& backend, const ExecutorConfig& config, int blocks, int reps,
                              MPI_Comm comm, double timeout_s);

// Collective over COMM: the partition of COSTS (valid on rank 0) for schedule S, at least one
// block per chunk, with memory weight LAMBDA. Every rank gets `blocks`; the loads and the
// imbalance only rank 0.
Partition choose_partition(const PartitionCosts& costs, const Schedule& s, double lambda,
                           MPI_Comm comm, double timeout_s);

}  // namespace bb::harness
