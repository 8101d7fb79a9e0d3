// One configuration of `run`, end to end on every rank (design §5.1, phase 2): an Executor on
// this rank; with --check, one extra untimed step whose gradients rank 0 compares with the
// sequential reference; then --warmup + --iters training steps (harness/step.hpp); the
// records (and with --out/--trace every compute and SEND/RECV event) go to rank 0, which
// summarizes them (harness/summarize.hpp) and writes the run to the results file and its
// trace on a thread, while the next run sets up and warms up (joined before its first timed
// step).
#pragma once

#include <mpi.h>

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "harness/settings.hpp"
#include "harness/summarize.hpp"
#include "harness/sweep.hpp"
#include "model/partition.hpp"
#include "results/hdf5_file.hpp"
#include "runtime/backend.hpp"
#include "runtime/executor.hpp"
#include "runtime/transport.hpp"
#include "sim/links.hpp"

namespace bb::harness {

// What every run shares: the settings, the backend and transport, and on rank 0 the outputs.
struct RunContext {
  RunContext(const RunSettings& settings, Backend& b, Transport& t, MPI_Comm c)
      : o(settings), backend(b), transport(t), comm(c) {}
  const RunSettings& o;
  Backend& backend;
  Transport& transport;
  MPI_Comm comm;                   // collectives (gathers, barriers)
  Placement where;                 // rank 0: hosts, devices, the clock verdict
  ResultsFile* results = nullptr;  // rank 0 with --out
  std::string trace_dir;           // rank 0 with --trace
  // Rank 0: the launch's link calibration (harness/calibration.hpp) and its settings.
  std::vector<LinkFit> links;
  Attrs links_attrs;
  // Activation buffers, one pool per tensor size (activation_count) and dtype; pool() empties
  // them all before each run (the allocator's peak of a run is its own).
  std::map<std::pair<std::size_t, Dtype>, std::unique_ptr<BufferPool>> pools;
  // --partition auto: the model's profile per (hidden, micro-batch size, recompute), measured
  // once per launch (harness/auto_partition.hpp; the ranks' medians on rank 0).
  std::map<std::tuple<int, int, bool>, std::shared_ptr<const PartitionCosts>> partition_profiles;
  // Rank 0: the last run's results-file entry and trace, written by a thread while the next
  // run builds its executor and warms up (no MPI, and the only HDF5 user at that time), and
  // what to do once they are written (print its progress line). finish_writing() waits for
  // both; run_config calls it before the first timed step, so a write never overlaps a timed
  // step. An IoError of the writer is rethrown there (exit 4).
  std::future<void> writing;
  std::function<void()> after_writing;

  void finish_writing();
  BufferPool& pool(std::size_t count, Dtype dtype);
};

// Gathers every rank's placement into ctx.where (rank 0) and decides the clock.
void gather_placement(RunContext& ctx, const RankPlacement& mine);

struct RunOutcome {
  bool check_failed = false;          // every rank
  std::optional<RunSummary> summary;  // rank 0
};

// Runs one configuration on every rank. On rank 0 it also starts writing the run to the
// results file and its trace (ctx.writing).
RunOutcome run_config(const RunConfig& c, RunContext& ctx);

// SIGUSR1 (SLURM's --signal=USR1@SECONDS before a time limit) on any rank stops the sweep
// before its next run: the ranks agree on it between runs (one allreduce each), rank 0 says
// so in one line, and the runs done stay complete in the results file (--resume continues).
// Every configuration in order (those with SKIP[i] set are complete in the results file
// already: a line each), with rank 0's progress line per run once it is written. Rank 0 calls
// FINISHED with each run's summary as soon as it has it (the table's row).
struct SweepOutcome {
  bool check_failed = false;     // every rank
  bool stopped = false;          // every rank: SIGUSR1 stopped it between runs
  std::vector<RunSummary> runs;  // rank 0
};
SweepOutcome run_sweep(RunContext& ctx, const std::vector<RunConfig>& configs,
                       const std::vector<int>& skip,
                       const std::function<void(const RunSummary&)>& finished = {});

}  // namespace bb::harness
