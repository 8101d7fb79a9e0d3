// The settings of a `run` sweep that every configuration shares, already parsed and checked
// (the command line's syntax stays in bench/cli/run.cpp): choices are enums, named once
// (common/enum_names.hpp: name_of, enum_of), text only at the edges.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/kinds.hpp"
#include "model/partition.hpp"
#include "runtime/executor.hpp"

namespace bb::harness {

struct RunSettings {
  BackendKind backend = BackendKind::kCpu;
  TransportKind transport = TransportKind::kMpi;  // resolved (the backend's default when not given)
  Compute compute = Compute::kGemm;
  double t_f = 1e-3, t_b = 2e-3, t_w = 0, t_fb = -1;  // synthetic stage times, seconds
  Dtype dtype = Dtype::kF32;
  int warmup = 1, iters = 5;
  Sync sync = Sync::kBarrier;
  bool check = false;
  double timeout = 600;
  OptimizerConfig::Kind optimizer = OptimizerConfig::Kind::kSgd;
  double lr = 1e-3;
  std::uint64_t seed = 1234;
  std::string out, trace;       // --out FILE, --trace DIR (used by rank 0; known to every rank)
  int drop_sends_rank = -1;     // testing the watchdog
  int perturb_grads_rank = -1;  // testing a failing --check
  bool debug_records = false;   // every timed action's record on stderr
  // The chunk model with its shape (docs/transformer.md).
  StageModel stage = StageModel::kMlp;
  int seq = 0, heads = 0, ffn = 0;
  bool causal = false;
  int vocab = 0;  // transformer: model ends (0: none)
  // A fixed model: blocks in total (0: --layers per chunk) and their split over the stages
  // (empty: even); see ExecutorConfig.
  int model_layers = 0;
  std::vector<int> partition;
  // --partition auto (harness/auto_partition.hpp): the blocks are profiled in this launch and
  // each run's split chosen for its schedule, weighing memory by partition_lambda seconds per
  // GiB. partition_costs: the profile (rank 0) of the run whose settings hold its split.
  bool partition_auto = false;
  double partition_lambda = 0;
  std::shared_ptr<const PartitionCosts> partition_costs;
  std::string model;      // the --model preset these settings were expanded from ("" if none)
  bool calibrate = true;  // links of the sweep's pairs before its first run
  // --hold-sends: send buffers kept until the step's end (as PyTorch's schedules), not released
  // when each message completes (ExecutorConfig::hold_sends).
  bool hold_sends = false;
  // Testing the attribution (hidden options): a slow rank (seconds added to each of its
  // computes) and a slow link (seconds added to every message from src to dst).
  int debug_delay_rank = -1;
  double debug_delay_s = 0;
  int debug_link_src = -1, debug_link_dst = -1;
  double debug_link_delay_s = 0;

  bool synthetic() const { return compute == Compute::kSynthetic; }
  bool barrier() const { return sync == Sync::kBarrier; }
};

// The executor's configuration of one stage model (hidden, layers, mb_size) under SETTINGS.
ExecutorConfig executor_config(const RunSettings& settings, int hidden, int layers, int mb_size);

}  // namespace bb::harness
