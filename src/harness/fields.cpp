#include "harness/fields.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/enum_names.hpp"
#include "harness/metrics.hpp"
#include "harness/table.hpp"
#include "results/hdf5_file.hpp"
#include "results/links_io.hpp"

namespace bb::harness {
namespace {

using json = nlohmann::json;

FieldValue i64(std::int64_t x) {
  return x;
}
FieldValue opt(const std::optional<double>& x) {
  return x ? FieldValue(*x) : FieldValue(Null{});
}
FieldValue text_or_null(const std::string& x) {
  return x.empty() ? FieldValue(Null{}) : FieldValue(x);
}
FieldValue text_or_omit(const std::string& x) {
  return x.empty() ? FieldValue(Omit{}) : FieldValue(x);
}
template <class E>
FieldValue text_of(E e) {  // an enum setting by its name
  return std::string(name_of(e));
}
FieldValue when_checked(const RunSummary& s, FieldValue v) {
  return s.check == CheckStatus::kSkipped ? FieldValue(Omit{}) : v;
}
FieldValue when_synthetic(const RunSummary& s, FieldValue v) {
  return s.synthetic ? v : FieldValue(Omit{});
}
FieldValue whole_bytes(double x) {
  return i64(std::llround(x));
}
FieldValue when_computed(const RunSummary& s, double x) {
  return s.synthetic ? FieldValue(Null{}) : FieldValue(x);
}
template <double RunSummary::Attribution::*term>
FieldValue attributed(const RunSummary& s) {
  return s.attribution ? FieldValue((*s.attribution).*term) : FieldValue(Null{});
}

constexpr unsigned kBoth = kJson | kAttr;
constexpr unsigned kRankBoth = kJsonArray | kRankColumn;

// A fraction of the run (no unit): a real in every sink and the loader's summary, and a
// column of the table shown always.
constexpr Field ratio_column(std::string_view name, std::string_view meaning,
                             FieldValue (*get)(const RunSummary&), std::string_view header,
                             int order, unsigned more_sinks = 0) {
  return {name,
          "",
          meaning,
          FieldType::kReal,
          kBoth | kSummary | more_sinks,
          get,
          nullptr,
          Column{header, order, Show::kAlways}};
}
// Term i of the bubble's attribution (kAttributionTerms; null where the run has none), in the
// JSON's group, columns 15.. of the table.
template <std::size_t i>
constexpr Field attribution_term() {
  constexpr AttributionTerm t = kAttributionTerms[i];
  return ratio_column(t.field, t.meaning, attributed<t.term>, t.header, 15 + static_cast<int>(i),
                      kJsonGroup);
}
template <double RunSummary::*x>
FieldValue real_of(const RunSummary& s) {
  return s.*x;
}

// A time given to synthetic compute (--t-f, --t-b, --t-w): an attribute of synthetic runs only.
template <double RunSummary::*given>
constexpr Field synthetic_time(std::string_view name, std::string_view meaning) {
  return {name,    "s",
          meaning, FieldType::kReal,
          kAttr,   [](const RunSummary& s) { return when_synthetic(s, s.*given); }};
}

// The table. Order: the loader shows the kSummary fields first, in this order; the text
// table orders its columns by Column::order.
const Field kFields[] = {
    {"run_key", "", "every setting that changes what a run measures (the HDF5 group name)",
     FieldType::kText, kBoth, [](const RunSummary& s) -> FieldValue { return s.run_key; }},
    {"schedule", "", "schedule name, or csv:FILE", FieldType::kText, kBoth | kSummary,
     [](const RunSummary& s) -> FieldValue { return s.schedule; }, nullptr,
     Column{"schedule", 0, Show::kAlways}},
    {"P", "ranks", "pipeline ranks (the MPI world size)", FieldType::kInt, kBoth | kSummary,
     [](const RunSummary& s) { return i64(s.P); }, nullptr, Column{"P", 1, Show::kAlways}},
    {"M", "micro-batches", "micro-batches per step", FieldType::kInt, kBoth | kSummary,
     [](const RunSummary& s) { return i64(s.M); }, nullptr, Column{"M", 2, Show::kAlways}},
    {"v", "chunks", "chunks per rank", FieldType::kInt, kBoth | kSummary,
     [](const RunSummary& s) { return i64(s.v); }, nullptr, Column{"v", 3, Show::kAlways}},
    {"backend", "", "cpu or cuda", FieldType::kText, kBoth | kSummary,
     [](const RunSummary& s) { return text_of(s.backend); }},
    {"transport", "", "mpi or nccl", FieldType::kText, kBoth | kSummary,
     [](const RunSummary& s) { return text_of(s.transport); }},
    {"compute", "", "gemm (the chunk model's math) or synthetic (timed waits)", FieldType::kText,
     kBoth | kSummary, [](const RunSummary& s) { return text_of(s.compute); }},
    {"stage", "", "chunk model: mlp or transformer (docs/transformer.md)", FieldType::kText,
     kBoth | kSummary, [](const RunSummary& s) { return text_of(s.stage); }},
    {"seq", "tokens", "transformer: tokens per sequence (0 for mlp)", FieldType::kInt,
     kBoth | kSummary, [](const RunSummary& s) { return i64(s.seq); }},
    {"heads", "", "transformer: attention heads (0 for mlp)", FieldType::kInt, kBoth | kSummary,
     [](const RunSummary& s) { return i64(s.heads); }},
    {"ffn", "", "transformer: MLP width (0: 4 x hidden)", FieldType::kInt, kBoth | kSummary,
     [](const RunSummary& s) { return i64(s.ffn); }},
    {"causal", "", "transformer: causal attention mask (HDF5: 0 or 1)", FieldType::kBool,
     kBoth | kSummary, [](const RunSummary& s) -> FieldValue { return s.causal; }},
    {"vocab", "", "transformer: vocabulary of the model's ends (0: none, MSE loss)",
     FieldType::kInt, kBoth | kSummary, [](const RunSummary& s) { return i64(s.vocab); }},
    {"model", "", "the --model preset the shape was expanded from (null: none)", FieldType::kText,
     kBoth | kSummary, [](const RunSummary& s) { return text_or_null(s.model); }},
    {"model_layers", "", "blocks of the whole model (--model-layers, or chunks x --layers)",
     FieldType::kInt, kBoth | kSummary, [](const RunSummary& s) { return i64(s.model_layers); }},
    {"partition", "", "blocks per chunk along the route, e.g. 3,2,2,1 (--partition, or even)",
     FieldType::kText, kBoth | kSummary,
     [](const RunSummary& s) { return text_or_null(s.partition); }},
    {"hold_sends", "",
     "--hold-sends: send buffers kept until the step's end (else each released when its send "
     "completes; HDF5: 0 or 1)",
     FieldType::kBool, kBoth, [](const RunSummary& s) -> FieldValue { return s.hold_sends; }},
    {"partition_layout", "",
     "the partition as a Megatron-LM pipeline layout string, e.g. Et*3|t*2,L (E the model's "
     "first end, t a block, L its last end, | between stages along the route)",
     FieldType::kText, kBoth | kSummary,
     [](const RunSummary& s) { return text_or_null(s.partition_layout); }},
    {"model_params", "", "parameters of the whole model (each stage once, the ends included)",
     FieldType::kInt, kBoth | kSummary, [](const RunSummary& s) { return i64(s.model_params); }},
    {"hidden", "", "hidden width h of the blocks", FieldType::kInt, kBoth | kSummary,
     [](const RunSummary& s) { return i64(s.hidden); }, nullptr,
     Column{"hidden", 4, Show::kIfVaried}},
    {"layers", "", "blocks per chunk (--layers; 0 with --model-layers: see partition)",
     FieldType::kInt, kBoth | kSummary, [](const RunSummary& s) { return i64(s.layers); }, nullptr,
     Column{"layers", 5, Show::kIfVaried}},
    {"mb_size", "rows", "rows of a micro-batch (MLP) or its sequences (transformer)",
     FieldType::kInt, kBoth | kSummary, [](const RunSummary& s) { return i64(s.mb_size); }, nullptr,
     Column{"mb_size", 6, Show::kIfVaried}},
    {"dtype", "",
     "fp32 or bf16: of activations, their gradients and messages (parameters, gradients and "
     "optimizer state are fp32)",
     FieldType::kText, kBoth | kSummary, [](const RunSummary& s) { return text_of(s.dtype); }},
    {"message_bytes", "bytes",
     "bytes of one forward activation message: mb_size x hidden (x seq) elements of dtype",
     FieldType::kInt, kBoth | kSummary, [](const RunSummary& s) { return i64(s.message_bytes); }},
    {"recompute", "", "activations recomputed in the backward (HDF5: 0 or 1)", FieldType::kBool,
     kBoth | kSummary, [](const RunSummary& s) -> FieldValue { return s.recompute; }, nullptr,
     Column{"recompute", 7, Show::kAlways}},
    {"sync", "", "barrier (ranks aligned per step) or none (steps back to back)", FieldType::kText,
     kBoth | kSummary, [](const RunSummary& s) { return text_of(s.sync); }},
    {"warmup", "steps", "untimed steps before the timed ones", FieldType::kInt, kBoth | kSummary,
     [](const RunSummary& s) { return i64(s.warmup); }},
    {"iters", "steps", "timed steps", FieldType::kInt, kBoth | kSummary,
     [](const RunSummary& s) { return i64(s.iters); }},
    {"status", "", "\"complete\" once the run is whole in the file (set by the results file)",
     FieldType::kText, kAttr | kSummary | kWriterOwned,
     [](const RunSummary&) -> FieldValue { return Omit{}; }},
    {"t_f_s", "s", "median F time of a stage (per-kind median over all ranks, stage units)",
     FieldType::kReal, kBoth | kSummary, [](const RunSummary& s) { return opt(s.t_f_s); }},
    {"t_b_s", "s", "median B time of a stage (the fused BW where the backward is not split)",
     FieldType::kReal, kBoth | kSummary, [](const RunSummary& s) { return opt(s.t_b_s); }},
    {"t_w_s", "s", "median W time of a stage", FieldType::kReal, kBoth | kSummary,
     [](const RunSummary& s) { return opt(s.t_w_s); }},
    {"makespan_s", "s", "median over the timed steps of the step's makespan T", FieldType::kReal,
     kBoth | kSummary, [](const RunSummary& s) -> FieldValue { return s.makespan_s; }, nullptr,
     Column{"makespan_ms", 8, Show::kBarrier, 1e3}},
    {"period_s", "s", "--sync none: median period between consecutive steps' ends",
     FieldType::kReal, kBoth | kSummary | kJsonOmitsNull,
     [](const RunSummary& s) { return opt(s.period_s); }, nullptr,
     Column{"period_ms", 8, Show::kSyncNone, 1e3}},
    ratio_column("bubble_fraction_measured",
                 "measured bubble fraction (P·T - Σ busy) / (P·T), median over the timed steps "
                 "(--sync none: of the period)",
                 real_of<&RunSummary::bubble_fraction_measured>, "measured", 9),
    {"bubble_fraction_model", "",
     "the closed form's bubble fraction fed the medians (null: no closed form, see model_reason)",
     FieldType::kReal, kBoth | kSummary,
     [](const RunSummary& s) { return opt(s.bubble_fraction_model); }, nullptr,
     Column{"model", 11, Show::kAlways}},
    ratio_column("bubble_fraction_sim",
                 "the simulator's bubble fraction of the lowered schedule fed the medians",
                 real_of<&RunSummary::bubble_fraction_sim>, "sim", 10),
    {"check", "", "--check: pass, fail or skipped", FieldType::kText, kBoth | kSummary,
     [](const RunSummary& s) { return text_of(s.check); }, nullptr,
     Column{"check", 30, Show::kAlways}},
    // Where the bubble came from (sim/attribution.hpp), a column group of the table.
    attribution_term<0>(),
    attribution_term<1>(),
    attribution_term<2>(),
    attribution_term<3>(),
    attribution_term<4>(),
    // The study's metrics (harness/metrics.hpp; docs/run-record.md, "Metrics").
    ratio_column("utilisation", "Σ busy / (P·T) of the median step: 1 - bubble_fraction_measured",
                 real_of<&RunSummary::utilisation>, "util", 21),
    ratio_column("comm_share", "communication share Σ comm_s / Σ (busy_s + comm_s) over the ranks",
                 real_of<&RunSummary::comm_share>, "comm_share", 22),
    {"flops", "FLOP",
     "model FLOPs of one step, all ranks (GEMMs, 2 per multiply-add; null: synthetic compute)",
     FieldType::kReal, kBoth | kSummary,
     [](const RunSummary& s) { return when_computed(s, s.flops); }},
    {"flops_per_s", "FLOP/s",
     "flops / T (T: makespan_s, or period_s with --sync none; null: synthetic compute)",
     FieldType::kReal, kBoth | kSummary,
     [](const RunSummary& s) { return when_computed(s, s.flops_per_s); }, nullptr,
     Column{"GFLOP/s", 23, Show::kAlways, 1e-9}},
    {"mfu", "",
     "model-FLOPs utilisation flops_per_s / (P · peak_flops_per_s) (null: no known peak, CPU)",
     FieldType::kReal, kBoth | kSummary, [](const RunSummary& s) { return opt(s.mfu); }, nullptr,
     Column{"MFU", 23, Show::kGpu}},
    {"peak_flops_per_s", "FLOP/s",
     "the dense peak MFU is measured against, of rank 0's device for the dtype (null: none)",
     FieldType::kReal, kBoth, [](const RunSummary& s) { return opt(s.peak_flops_per_s); }},
    {"peak_name", "", "that peak named (e.g. H100 SXM dense bf16 989.4 TFLOP/s; null: none)",
     FieldType::kText, kBoth, [](const RunSummary& s) { return text_or_null(s.peak_name); }},
    {"device_name", "", "rank 0's device as its driver names it (null: CPU)", FieldType::kText,
     kBoth, [](const RunSummary& s) { return text_or_null(s.device_name); }},
    {"t_fb_s", "s", "median time of an overlapped F&B pair", FieldType::kReal, kBoth,
     [](const RunSummary& s) { return opt(s.t_fb_s); }},
    {"clock", "", "shared (all ranks on one host clock) or per-rank", FieldType::kText, kBoth,
     [](const RunSummary& s) -> FieldValue { return s.clock; }},
    {"overhead_us_per_action", "us",
     "the executor's own bookkeeping per lowered action (median over the steps)", FieldType::kReal,
     kBoth, [](const RunSummary& s) -> FieldValue { return s.overhead_us_per_action; }},
    {"model_reason", "", "why the closed form does not apply (absent or \"\" when it does)",
     FieldType::kText, kBoth | kJsonOmitsNull,
     [](const RunSummary& s) { return text_or_null(s.model_reason); }},
    {"check_max_rel_error", "", "--check: largest relative gradient error", FieldType::kReal, kBoth,
     [](const RunSummary& s) { return when_checked(s, s.check_max_rel_error); }},
    {"check_message", "", "--check: what differed", FieldType::kText, kBoth,
     [](const RunSummary& s) { return when_checked(s, s.check_message); }},
    {"loss_step0", "", "--check: the pipeline's loss of its first step (before any update)",
     FieldType::kReal, kBoth,
     [](const RunSummary& s) { return when_checked(s, opt(s.loss_step0)); }},
    {"seed", "", "seed of parameters, inputs and targets (0 .. 2^64 - 1)", FieldType::kU64, kBoth,
     [](const RunSummary& s) -> FieldValue { return s.seed; }},
    {"optimizer", "", "sgd or adam", FieldType::kText, kAttr,
     [](const RunSummary& s) { return text_of(s.optimizer); }},
    {"lr", "", "learning rate", FieldType::kReal, kAttr,
     [](const RunSummary& s) -> FieldValue { return s.lr; }},
    synthetic_time<&RunSummary::synthetic_t_f_s>("synthetic_t_f_s",
                                                 "synthetic compute: the F time given"),
    synthetic_time<&RunSummary::synthetic_t_b_s>("synthetic_t_b_s",
                                                 "synthetic compute: the B time given"),
    synthetic_time<&RunSummary::synthetic_t_w_s>("synthetic_t_w_s",
                                                 "synthetic compute: the W time given"),
    {"synthetic_t_fb_s", "s", "synthetic compute: the F&B pair time given (NaN: the sum)",
     FieldType::kReal, kAttr,
     [](const RunSummary& s) { return when_synthetic(s, opt(s.synthetic_t_fb_s)); }},
    // What the run used (a CPU run has none of these; the build's capabilities are the file's
    // root attributes build_cuda, build_nccl).
    {"cuda_version", "", "--backend cuda: the CUDA runtime version the run used", FieldType::kText,
     kAttr, [](const RunSummary& s) { return text_or_omit(s.cuda_version); }},
    {"cuda_driver_version", "", "--backend cuda: the CUDA driver version the run used",
     FieldType::kText, kAttr,
     [](const RunSummary& s) { return text_or_omit(s.cuda_driver_version); }},
    {"nccl_version", "", "--transport nccl: the NCCL version the run used", FieldType::kText, kAttr,
     [](const RunSummary& s) { return text_or_omit(s.nccl_version); }},
    {"step_time_s", "s", "T of every timed step (HDF5: the step_time_s dataset)", FieldType::kReals,
     kJson | kDataset, [](const RunSummary& s) -> FieldValue { return s.step_time_s; }},
    // Per rank.
    {"rank", "", "the rank", FieldType::kU32, kRankColumn, nullptr,
     [](const RankResult&, std::size_t r) { return i64(static_cast<std::int64_t>(r)); }},
    {"host", "", "the rank's host name", FieldType::kText, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.where.host; }},
    {"device", "", "the rank's CUDA device (-1: CPU)", FieldType::kI32, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) { return i64(x.where.gpu); }},
    {"rank_device_name", "", "the rank's GPU as its driver names it (null: CPU)", FieldType::kText,
     kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) { return text_or_null(x.where.device_name); }},
    {"cpus", "", "the CPUs the rank may run on (its affinity, e.g. 0-3,8)", FieldType::kText,
     kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.where.cpus; }},
    {"mps", "", "CUDA MPS serves the rank's GPU (HDF5: 0 or 1)", FieldType::kBool, kRankBoth,
     nullptr, [](const RankResult& x, std::size_t) -> FieldValue { return x.where.mps; }},
    {"busy_s", "s", "compute time in a step (median over the steps)", FieldType::kReal, kRankBoth,
     nullptr, [](const RankResult& x, std::size_t) -> FieldValue { return x.busy_s; }},
    {"wait_s", "s", "time waiting for inputs in a step (median)", FieldType::kReal, kRankBoth,
     nullptr, [](const RankResult& x, std::size_t) -> FieldValue { return x.wait_s; }},
    {"comm_s", "s", "host time posting and completing messages in a step (median)",
     FieldType::kReal, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.comm_s; }},
    {"peak_activation_bytes", "bytes", "peak bytes of live activations", FieldType::kU64, kRankBoth,
     nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.peak_activation_bytes; },
     Column{"peak_act_MiB", 14, Show::kAlways, 1.0 / (1 << 20)}},
    {"peak_activations", "micro-batch-stages", "peak live activations, runtime", FieldType::kReal,
     kJsonArray, nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.peak_activations; },
     Column{"peak_act", 12, Show::kAlways}},
    {"peak_activations_schedule", "micro-batch-stages",
     "peak live activations of the schedule (bb::peak_activations)", FieldType::kReal, kJsonArray,
     nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.peak_activations_schedule; },
     Column{"peak_act_sched", 13, Show::kAlways}},
    {"param_bytes", "bytes", "bytes of the rank's parameters", FieldType::kU64, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.param_bytes; }},
    {"peak_device_bytes", "bytes",
     "peak bytes the backend's allocator held during the timed steps (CUDA: cudaMalloc'd blocks, "
     "cache, workspaces and bf16 weight copies; CPU: the Buffers allocated)",
     FieldType::kU64, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.peak_device_bytes; }},
    {"runtime_bytes", "bytes",
     "device memory the backend's runtime takes beside its allocator (CUDA: context, cuBLAS "
     "handle and workspace, measured with cudaMemGetInfo; CPU: 0)",
     FieldType::kU64, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) { return whole_bytes(x.runtime_bytes); }},
    {"comm_device_bytes", "bytes",
     "device memory the transport took (NCCL: buffers and connections, cudaMemGetInfo around its "
     "setup; else 0)",
     FieldType::kU64, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) { return whole_bytes(x.comm_device_bytes); }},
    {"pinned_host_bytes", "bytes",
     "pinned host memory of the MPI transport's staging of device buffers (0 on CPU)",
     FieldType::kU64, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) { return whole_bytes(x.pinned_host_bytes); }},
    {"device_used_peak_bytes", "bytes",
     "CUDA: the device's used memory (total - free, every process on it) at its highest sample; "
     "CPU: 0",
     FieldType::kU64, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) { return whole_bytes(x.device_used_peak_bytes); }},
    {"peak_memory_bytes", "bytes",
     "peak memory of the rank: peak_device_bytes + runtime_bytes + comm_device_bytes",
     FieldType::kU64, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) { return whole_bytes(x.peak_memory_bytes); },
     Column{"peak_MiB", 24, Show::kAlways, 1.0 / (1 << 20)}},
    {"peak_memory_bytes_model", "bytes",
     "the memory model's peak_memory_bytes (docs/memory.md): the rank's allocations on the "
     "simulated step, with runtime_bytes and comm_device_bytes",
     FieldType::kU64, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) { return whole_bytes(x.peak_memory_bytes_model); },
     Column{"pred_MiB", 25, Show::kAlways, 1.0 / (1 << 20)}},
    {"rank_utilisation", "", "busy_s / T (T: makespan_s, or period_s with --sync none)",
     FieldType::kReal, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.utilisation; }},
    {"rank_comm_share", "", "comm_s / (busy_s + comm_s)", FieldType::kReal, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.comm_share; }},
    {"rank_flops", "FLOP", "model FLOPs of the rank's actions in one step", FieldType::kReal,
     kRankBoth, nullptr, [](const RankResult& x, std::size_t) -> FieldValue { return x.flops; }},
    {"rank_flops_per_s", "FLOP/s", "rank_flops / T", FieldType::kReal, kRankBoth, nullptr,
     [](const RankResult& x, std::size_t) -> FieldValue { return x.flops_per_s; }},
    {"rank_mfu", "", "rank_flops_per_s / peak_flops_per_s (null: no known peak)", FieldType::kReal,
     kRankBoth, nullptr, [](const RankResult& x, std::size_t) { return opt(x.mfu); }},
    {"peak_activation_bytes_model", "bytes", "the simulator's peak_activation_bytes",
     FieldType::kU64, kRankColumn, nullptr,
     [](const RankResult& x,
        std::size_t) -> FieldValue { return std::round(x.peak_activation_bytes_model); }},
};

json json_value(const FieldValue& v) {
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Omit> || std::is_same_v<T, Null>)
          return nullptr;
        else
          return x;
      },
      v);
}

// A value as an HDF5 attribute / ranks-table cell.
AttrValue attr_value(const Field& f, const FieldValue& v) {
  if (std::holds_alternative<Null>(v))
    return f.type == FieldType::kText ? AttrValue{std::string()} : AttrValue{std::nan("")};
  if (const auto* b = std::get_if<bool>(&v)) return std::int64_t{*b ? 1 : 0};
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return *u;
  if (const auto* d = std::get_if<double>(&v)) {
    const bool integer = f.type == FieldType::kInt || f.type == FieldType::kU32 ||
                         f.type == FieldType::kI32 || f.type == FieldType::kU64;
    if (integer && std::isfinite(*d)) return std::int64_t{std::llround(*d)};  // byte counts
    return *d;
  }
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return std::nan("");
}

double as_double(const AttrValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::nan("");
}

// The type of a field's ranks-table column in the files.
ColumnType column_type(FieldType t) {
  switch (t) {
    case FieldType::kU32:
      return ColumnType::kU32;
    case FieldType::kI32:
      return ColumnType::kI32;
    case FieldType::kU64:
      return ColumnType::kU64;
    case FieldType::kText:
      return ColumnType::kText;
    case FieldType::kReal:
    case FieldType::kReals:
      return ColumnType::kF64;
    default:  // kInt, kBool (0 or 1)
      return ColumnType::kI64;
  }
}

// Where a field's value goes in the JSON record: its own key, or (kJsonGroup) a key of the
// object its name's prefix names.
json& json_slot(json& j, const Field& f) {
  const std::string name(f.name);
  const auto cut = name.find('_');
  if (!(f.sinks & kJsonGroup) || cut == std::string::npos) return j[name];
  return j[name.substr(0, cut)][name.substr(cut + 1)];
}

}  // namespace

std::span<const Field> fields() {
  return kFields;
}

json to_json(const RunSummary& s) {
  json j = json::object();
  for (const Field& f : kFields) {
    if (f.run != nullptr && (f.sinks & kJson)) {
      const FieldValue v = f.run(s);
      if (std::holds_alternative<Omit>(v)) continue;
      if (std::holds_alternative<Null>(v) && (f.sinks & kJsonOmitsNull)) continue;
      json_slot(j, f) = json_value(v);
    } else if (f.rank != nullptr && (f.sinks & kJsonArray)) {
      json a = json::array();
      for (std::size_t r = 0; r < s.ranks.size(); ++r)
        a.push_back(json_value(f.rank(s.ranks[r], r)));
      j[std::string(f.name)] = std::move(a);
    }
  }
  if (!s.links.empty()) j["links"] = links_to_json(s.links);  // a nested table (summary.hpp)
  return j;
}

Attrs to_attrs(const RunSummary& s) {
  Attrs out;
  for (const Field& f : kFields) {
    if (f.run == nullptr || !(f.sinks & kAttr)) continue;
    const FieldValue v = f.run(s);
    if (!std::holds_alternative<Omit>(v)) out.emplace_back(std::string(f.name), attr_value(f, v));
  }
  return out;
}

std::vector<RankRecord> to_rank_records(const RunSummary& s) {
  std::vector<RankRecord> out;
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    RankRecord rr;
    for (const Field& f : kFields)
      if (f.rank != nullptr && (f.sinks & kRankColumn))
        set_rank_column(rr, std::string(f.name), attr_value(f, f.rank(s.ranks[r], r)));
    out.push_back(std::move(rr));
  }
  return out;
}

RunRecord to_record(const RunSummary& s) {
  RunRecord run;
  run.key = s.run_key;
  run.attrs = to_attrs(s);
  run.step_time_s = s.step_time_s;
  run.ranks = to_rank_records(s);
  for (const Field& f : kFields)
    if (f.rank != nullptr && (f.sinks & kRankColumn))
      run.rank_docs.push_back(
          {std::string(f.name), std::string(f.unit), std::string(f.meaning), column_type(f.type)});
  run.links = s.links;
  run.links_attrs = s.links_attrs;
  return run;
}

namespace {

// An HDF5 value of field F as its JSON (null where the attribute holds NaN or "").
json json_of_attr(const Field& f, const AttrValue& v) {
  if (f.type == FieldType::kBool) return as_double(v) != 0;
  if (const auto* t = std::get_if<std::string>(&v)) return t->empty() ? json(nullptr) : json(*t);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return *u;
  const double x = as_double(v);
  return std::isnan(x) ? json(nullptr) : json(x);
}

}  // namespace

json json_of_record(const RunRecord& r) {
  json j = json::object();
  for (const Field& f : kFields) {
    const std::string name(f.name);
    if (f.run != nullptr && (f.sinks & kJson) && (f.sinks & kAttr)) {
      const AttrValue* v = find_attr(r.attrs, name);
      if (v == nullptr) continue;
      const json x = json_of_attr(f, *v);
      if (x.is_null() && (f.sinks & kJsonOmitsNull)) continue;
      json_slot(j, f) = x;
    } else if (f.rank != nullptr && (f.sinks & kJsonArray) && (f.sinks & kRankColumn)) {
      json a = json::array();
      for (const RankRecord& rr : r.ranks) a.push_back(json_of_attr(f, rank_column(rr, name)));
      j[name] = std::move(a);
    }
  }
  j["step_time_s"] = r.step_time_s;
  if (!r.links.empty()) j["links"] = links_to_json(r.links);
  return j;
}

namespace {

// A cell of the table: a run field as it is; a rank field as its largest value over the ranks.
// EXACT: every digit (CSV), else 4 significant digits.
std::string table_cell(const Field& f, const RunSummary& s, bool exact) {
  FieldValue v;
  if (f.run != nullptr) {
    v = f.run(s);
  } else {
    double m = 0;
    for (std::size_t r = 0; r < s.ranks.size(); ++r)
      m = std::max(m, as_double(attr_value(f, f.rank(s.ranks[r], r))));
    v = m;
  }
  if (const auto* t = std::get_if<std::string>(&v)) return *t;
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "on" : "off";
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return std::to_string(*u);
  if (const auto* d = std::get_if<double>(&v))
    return exact ? fmt_exact(*d * f.column.scale) : fmt(*d * f.column.scale);
  return "n/a";
}

}  // namespace

std::vector<const Field*> table_columns(bool steady, bool model_varies, bool gpu) {
  std::vector<const Field*> cols;
  for (const Field& f : kFields) {
    if (f.column.header.empty()) continue;
    const Show show = f.column.show;
    // The stage model's columns come as a group: all of them when any varies.
    if (show == Show::kAlways || (show == Show::kIfVaried && model_varies) ||
        (show == Show::kBarrier && !steady) || (show == Show::kSyncNone && steady) ||
        (show == Show::kGpu && gpu))
      cols.push_back(&f);
  }
  std::stable_sort(cols.begin(), cols.end(), [](const Field* a, const Field* b) {
    return a->column.order < b->column.order;
  });
  return cols;
}

std::vector<std::string> table_headers(const std::vector<const Field*>& cols) {
  std::vector<std::string> h;
  for (const Field* f : cols) h.emplace_back(f->column.header);
  return h;
}

std::vector<std::string> table_row(const std::vector<const Field*>& cols, const RunSummary& s,
                                   bool exact) {
  std::vector<std::string> row;
  for (const Field* f : cols) row.push_back(table_cell(*f, s, exact));
  return row;
}

Table to_table(const std::vector<RunSummary>& runs) {
  const bool steady = !runs.empty() && runs.front().sync == Sync::kNone;
  bool model_varies = false;
  for (const Field& f : kFields)
    if (f.column.show == Show::kIfVaried)
      for (const RunSummary& s : runs)
        model_varies =
            model_varies || table_cell(f, s, false) != table_cell(f, runs.front(), false);
  const bool gpu = !runs.empty() && runs.front().backend == BackendKind::kCuda;
  const auto cols = table_columns(steady, model_varies, gpu);
  Table t{table_headers(cols), {}};
  for (const RunSummary& s : runs) t.rows.push_back(table_row(cols, s, false));
  return t;
}

namespace {

constexpr EnumNames<FieldType, 8> kTypeNames{
    {"int", "real", "text", "bool", "real[]", "uint32", "int32", "uint64"}};
static_assert(kTypeNames.ends_at(FieldType::kU64));

const char* type_name(FieldType t) {
  return kTypeNames.name(t).data();  // names are literals: NUL-terminated
}

std::string json_place(const Field& f) {
  if (f.sinks & kJsonArray) return "array over ranks";
  if (!(f.sinks & kJson)) return "";
  if (f.sinks & kJsonGroup) {
    const std::string_view name = f.name;
    std::string out = "`";  // appended, not "`" + ...: GCC 12 warns falsely (-Wrestrict)
    out += name.substr(0, name.find('_'));
    out += "` object's `";
    out += name.substr(name.find('_') + 1);
    out += '`';
    return out;
  }
  return (f.sinks & kJsonOmitsNull) ? "key (absent when null)" : "key";
}

std::string hdf5_place(const Field& f) {
  if (f.sinks & kRankColumn) return "ranks column";
  if (f.sinks & kDataset) return "dataset";
  if (f.sinks & kAttr) return "run attribute";
  return "";
}

}  // namespace

std::string fields_markdown() {
  std::string out =
      "<!-- Generated from src/harness/fields.cpp by tests/unit/test_harness.cpp: run\n"
      "     BB_REGENERATE=1 build/unit_tests --gtest_filter='HarnessFields.*' after editing the\n"
      "     field table. Do not edit by hand. -->\n"
      "# The run record\n\n"
      "Every run of `bubblebench run` is one `RunSummary` (src/harness/summary.hpp). One field\n"
      "table (src/harness/fields.cpp) turns it into the JSON record of `--format json`, the\n"
      "attributes and the `ranks` table of its group `/runs/<run_key>` in the `--out` results\n"
      "file (besides, the `step_time_s` and `events` datasets), the columns\n"
      "of the text table, this page, and `analysis/bbanalysis/run_fields.json`, from which\n"
      "the Python loader takes its field names. Adding a field is one entry in that table (and\n"
      "its member in `RunSummary` or `RankResult`).\n\n"
      "Null values are JSON `null`, NaN (reals) or `\"\"` (text) in HDF5. Booleans are 0 or 1\n"
      "in HDF5. Per-rank fields are a JSON array over the ranks and/or a column of the HDF5\n"
      "`ranks` table. Times are seconds unless the unit says otherwise.\n\n"
      "Beside the fields, a nested table: `links`, the launch's link calibration of the pairs\n"
      "the run uses (JSON: an array, one object per directed pair; HDF5: the group `links`\n"
      "of the run; docs/runtime.md, \"Link calibration\"), absent with `--no-calibrate`.\n\n"
      "## The HDF5 file: schema_version " +
      std::to_string(kSchemaVersion) +
      "\n\n"
      "The tables (`events`, `ranks`, and `links`' `samples`, `fits`, `regimes`) are 1-D\n"
      "compound datasets whose text columns (`kind`, `host`, `cpus`) are fixed-length strings\n"
      "(NUL-padded UTF-8, as wide as the longest value), so that the standard clients read\n"
      "them directly: `tables.open_file(f).root.runs[key].events.read()`,\n"
      "`pd.read_hdf(f, \"/runs/<key>/events\")` (text as `str`) and h5py (text as `bytes`:\n"
      "`.decode()`; `bbanalysis.load_events` does it). Every dataset says what it holds in\n"
      "attributes: `row` (what one row is), and per column `<column>_unit` and\n"
      "`<column>_meaning`; `events` has `time_origin` (seconds from\n"
      "rank 0's exit from the barrier that begins the step), `step_time_s` has `unit` and\n"
      "`meaning`. The root attributes `build_cuda`, `build_nccl` give the CUDA runtime and NCCL\n"
      "versions the build has (`none`: built without); the run attributes `cuda_version`,\n"
      "`cuda_driver_version` (`--backend cuda`) and `nccl_version` (`--transport nccl`) what\n"
      "the run used, absent where it used none.\n\n"
      "Why schema_version 2: schema_version 1 stored those text columns as variable-length\n"
      "strings (which PyTables and pandas refuse), and `cuda_version`, `cuda_driver_version`,\n"
      "`nccl_version` as root attributes whatever the runs used. A reader built for version 1\n"
      "cannot convert the new string columns (HDF5 has no conversion from fixed- to\n"
      "variable-length strings), so the version says so. Both versions are read by\n"
      "bubblebench's reader (`h5dump_runs`, `sim --links`) and by `analysis/bbanalysis`;\n"
      "`run --resume` continues only files of its own version.\n\n" +
      metrics_markdown() +
      "## Fields\n\n"
      "| field | unit | type | JSON | HDF5 | column | meaning |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const Field& f : kFields) {
    std::string meaning;  // a '|' would end the cell
    for (const char ch : f.meaning) meaning += ch == '|' ? std::string("\\|") : std::string(1, ch);
    out += std::string("| `") + std::string(f.name) + "` | " + std::string(f.unit) + " | " +
           type_name(f.type) + " | " + json_place(f) + " | " +
           ((f.sinks & kWriterOwned) ? "run attribute (the writer's)" : hdf5_place(f)) + " | " +
           (f.column.header.empty() ? std::string()
                                    : std::string("`") + std::string(f.column.header) + "`") +
           " | " + meaning + " |\n";
  }
  return out;
}

std::string fields_json() {
  json j;
  j["generated_from"] = "src/harness/fields.cpp (see docs/run-record.md)";
  j["schema_version"] = kSchemaVersion;
  json run = json::array(), summary = json::array(), floats = json::array(), ranks = json::array();
  for (const Field& f : kFields) {
    const std::string name(f.name);
    if (f.sinks & kAttr) run.push_back(name);
    if ((f.sinks & kAttr) && (f.sinks & kSummary)) {
      summary.push_back(name);
      if (f.type == FieldType::kReal) floats.push_back(name);
    }
    if (f.sinks & kRankColumn) ranks.push_back(name);
  }
  j["run_attrs"] = run;
  j["summary_attrs"] = summary;
  j["float_attrs"] = floats;
  j["rank_fields"] = ranks;
  return j.dump(2) + "\n";
}

}  // namespace bb::harness
