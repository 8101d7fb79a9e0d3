// `run --partition auto` (docs/transformer.md, "Partitioner"): in the same launch, every rank
// profiles each block of the model and its ends (harness/block_profile.hpp), rank 0 takes the
// median of the ranks' figures and chooses the split for a schedule (model/partition.hpp), and
// every rank gets the blocks per chunk.
#pragma once

#include <mpi.h>

#include <vector>

#include "harness/runner.hpp"
#include "harness/sweep.hpp"
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

// run_config's part of `--partition auto`, collective over ctx.comm: profiles the model (once per
// hidden width, micro-batch size and recompute, kept in ctx), chooses the split for c's
// schedule, prints on rank 0 "partition: 5,3 (predicted imbalance 4.1 %; simulated step …, even
// 4,4: …)" and returns ctx.o with `partition` and (rank 0) `partition_costs` set.
RunSettings with_auto_partition(RunContext& ctx, const RunConfig& c);

}  // namespace bb::harness
