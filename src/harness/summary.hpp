// The typed record of one run (what google/benchmark's `Run` is to a benchmark): everything
// `run` reports about a configuration. The JSON record, the HDF5 run attributes and ranks
// table, and the table columns are all produced from it through the field table
// (harness/fields.hpp); to add a field, add a member here and one entry there.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/kinds.hpp"
#include "results/run_record.hpp"
#include "runtime/placement.hpp"
#include "sim/links.hpp"
#include "sim/memory.hpp"

namespace bb::harness {

// What one rank reports (medians over the timed steps where it varies per step).
struct RankResult {
  RankPlacement where;  // host, CPUs, GPU, MPS
  double busy_s = 0, wait_s = 0, comm_s = 0;
  double peak_activations = 0;           // runtime, micro-batch-stage units
  double peak_activations_schedule = 0;  // the schedule's (bb::peak_activations)
  double peak_activation_bytes = 0, param_bytes = 0, peak_device_bytes = 0;
  double peak_activation_bytes_model = 0;  // the simulator's prediction
  // The memory model's peak_memory_bytes (sim/memory.hpp on the simulated step, the runtime's
  // and the transport's measured bytes added), and its terms by MemoryKind.
  double peak_memory_bytes_model = 0;
  std::array<double, kMemoryKinds> memory_model_bytes{};
  // The study's metrics (harness/metrics.hpp, set_metrics): model FLOPs of a step, busy / T,
  // comm / (busy + comm), FLOPs / T; the memory the backend's runtime takes beside its
  // allocator (GPU: CUDA context and cuBLAS; CPU: 0) and the peak with it.
  double flops = 0, utilisation = 0, comm_share = 0, flops_per_s = 0;
  std::optional<double> mfu;  // flops_per_s / the run's peak_flops_per_s
  double runtime_bytes = 0, peak_memory_bytes = 0;
  // Beside the allocator: the transport's device bytes (NCCL) and pinned host bytes (the MPI
  // transport's staging of device memory); the device's used bytes at the highest sample.
  double comm_device_bytes = 0, pinned_host_bytes = 0, device_used_peak_bytes = 0;
};

struct RunSummary {
  // The configuration.
  std::string run_key, schedule;
  int P = 0, M = 0, v = 1;
  bool recompute = false;
  bool hold_sends = false;  // --hold-sends
  BackendKind backend = BackendKind::kCpu;
  TransportKind transport = TransportKind::kMpi;
  Compute compute = Compute::kGemm;
  Dtype dtype = Dtype::kF32;
  Sync sync = Sync::kBarrier;
  OptimizerConfig::Kind optimizer = OptimizerConfig::Kind::kSgd;
  int hidden = 0, layers = 0, mb_size = 0, warmup = 0, iters = 0;
  std::int64_t message_bytes = 0;       // one forward activation message, in dtype
  StageModel stage = StageModel::kMlp;  // the chunk model; the transformer's shape:
  int seq = 0, heads = 0, ffn = 0;
  bool causal = false;
  int vocab = 0;
  // The model as a whole: its blocks (--model-layers; 0: --layers per chunk), their split
  // over the stages along the route ("3,2,2,1") and its parameters (each stage once, ends
  // included).
  int model_layers = 0;
  std::string partition, partition_layout;  // blocks per stage: "3,2" and "Et*3|t*2,L"
  std::string model;  // the --model preset the shape was expanded from ("" none)
  std::int64_t model_params = 0;
  std::uint64_t seed = 0;
  double lr = 0;
  bool synthetic = false;
  double synthetic_t_f_s = 0, synthetic_t_b_s = 0, synthetic_t_w_s = 0;
  std::optional<double> synthetic_t_fb_s;
  // The measurement (harness/measure.hpp).
  std::vector<double> step_time_s;  // per timed step
  double makespan_s = 0;            // median of step_time_s
  std::optional<double> period_s;   // --sync none: median period between steps
  double bubble_fraction_measured = 0;
  std::string clock;  // shared | per-rank
  double overhead_us_per_action = 0;
  // Per-kind medians in stage units (absent when the schedule has no such action).
  std::optional<double> t_f_s, t_b_s, t_w_s, t_fb_s;
  // The models fed those medians.
  double bubble_fraction_sim = 0;
  std::optional<double> bubble_fraction_model;
  std::string model_reason;  // why the closed form does not apply ("" when it does)
  // Where the bubble came from (sim/attribution.hpp): the terms of the median step, fractions
  // of P·T that add up to its measured bubble fraction. Absent where there is no step to
  // attribute (--sync none with one timed step).
  struct Attribution {
    double schedule = 0, imbalance = 0, jitter = 0, communication = 0, residual = 0;
  };
  std::optional<Attribution> attribution;
  // The study's metrics (harness/metrics.hpp, set_metrics): Σ busy / (P·T) of the median step,
  // Σ comm / Σ (busy + comm) over the ranks, model FLOPs of a step (all ranks) and per second.
  double utilisation = 0, comm_share = 0, flops = 0, flops_per_s = 0;
  // Model-FLOPs utilisation: flops_per_s / (P · the dense peak of rank 0's device for the
  // run's dtype), and that peak named; absent on CPU and on devices the table does not know.
  std::string device_name;  // rank 0's Backend::device_name() ("" on CPU)
  // The versions the run used, captured when it ran (empty: not used, e.g. no CUDA on CPU).
  std::string cuda_version, cuda_driver_version, nccl_version;
  std::optional<double> mfu, peak_flops_per_s;
  std::string peak_name;
  // --check.
  CheckStatus check = CheckStatus::kSkipped;
  double check_max_rel_error = 0;
  std::string check_message;
  std::optional<double> loss_step0;  // --check: the pipeline's loss of its first step

  std::vector<RankResult> ranks;
  // The launch's link calibration (harness/calibration.hpp) of the pairs this run's schedule
  // uses, and its settings; empty with --no-calibrate or one rank. Nested tables, written
  // beside the field table: JSON "links", HDF5 the run's `links` group.
  std::vector<LinkFit> links;
  Attrs links_attrs;
};

// The attribution's five terms, in order, written once: the run record's field name (JSON:
// the part after "attribution_", in the "attribution" group), the table's column header and
// the field's one-line meaning (docs/run-record.md), and the term itself.
struct AttributionTerm {
  std::string_view field, header, meaning;
  double RunSummary::Attribution::*term;
  std::string_view key() const { return field.substr(field.find('_') + 1); }
};
inline constexpr std::array<AttributionTerm, 5> kAttributionTerms{{
    {"attribution_schedule", "sched",
     "attribution: the schedule's own bubble (a replay with one median time per action kind, "
     "free links), fraction of P·T of the median step",
     &RunSummary::Attribution::schedule},
    {"attribution_imbalance", "imbal",
     "attribution: what per-(rank, chunk, kind) median times add to the schedule term",
     &RunSummary::Attribution::imbalance},
    {"attribution_jitter", "jitter",
     "attribution: what every action's own time in the step adds to the imbalance replay",
     &RunSummary::Attribution::jitter},
    {"attribution_communication", "comm",
     "attribution: what the link costs add to the jitter replay",
     &RunSummary::Attribution::communication},
    {"attribution_residual", "resid",
     "attribution: measured minus the replay with links (runtime, progress, launch overhead); "
     "the five terms add up to the median step's measured bubble fraction",
     &RunSummary::Attribution::residual},
}};

}  // namespace bb::harness
