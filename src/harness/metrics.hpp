// The study's metrics of a run (issue 20 item 5; docs/run-record.md, "Metrics"): model FLOPs
// per pass of a block and per step of a rank, compute utilisation, communication share and
// FLOP/s. Pure arithmetic on a run's configuration and its measured medians.
//
// FLOPs are model FLOPs of the GEMMs, 2 per multiply-add (the convention of model-FLOPs
// utilisation): LayerNorm, softmax, GELU, the loss and the optimizer are not counted, nor the
// forward that recompute runs again.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/summary.hpp"
#include "runtime/executor.hpp"
#include "schedule/schedule.hpp"

namespace bb::harness {

// FLOPs of one micro-batch through one block (or one model end) in each pass.
struct PassFlops {
  double f = 0, b = 0, w = 0;
  PassFlops& operator+=(const PassFlops& o) {
    f += o.f;
    b += o.b;
    w += o.w;
    return *this;
  }
};

// One MLP block on `rows` rows (runtime/stage.hpp: X·W1, A·W2): 16·rows·h² in each pass.
PassFlops mlp_block_flops(int hidden, int rows);
// One pre-LN transformer block (runtime/transformer_stage.hpp) on T = rows·S tokens, h, f:
//   F = 2T(4h² + 2hf) + 4TSh   (QKV, output, MLP; scores and context: 2TSh each)
//   B = 2T(4h² + 2hf) + 8TSh   (input gradients of the same GEMMs; four attention GEMMs)
//   W = 2T(4h² + 2hf)          (weight gradients only)
// The causal mask does not change it: the scores are computed whole, then masked.
PassFlops transformer_block_flops(const TransformerConfig& c);
// The LM head of a chunk with `head` (0 otherwise): the logits (2ThV) and their input
// gradient (2ThV) run in the loss, after the last chunk's F; the head's weight gradient
// (2ThV) in W. The embedding is a gather: no FLOPs.
PassFlops lm_head_flops(const TransformerConfig& c);
// Everything chunk model `stage` of `num_stages` does per micro-batch, with the stage's own
// blocks (stage_layers: --layers, or its share of --model-layers); 0 in synthetic mode.
PassFlops chunk_flops(const ExecutorConfig& config, int stage, int num_stages);

// Model FLOPs of one step on each rank of the lowered schedule: the sum over its compute
// actions (F: f, B: b, W: w, BW: b + w) of its chunk's chunk_flops.
std::vector<double> step_flops(const Schedule& lowered, const ExecutorConfig& config);

// a / b, or 0 where b is not positive.
double ratio(double a, double b);

// The dense peak of DEVICE (a CUDA device name, as cudaGetDeviceProperties gives it) for GEMMs
// of DTYPE: bf16 on tensor cores, fp32 without TF32 (the CUDA backend's fp32 GEMMs), from
// NVIDIA's datasheets (without sparsity), TFLOP/s:
//   H100 SXM, H200 SXM: bf16 989.4, fp32 66.9;  H100 PCIe: 756.5, 51.2;
//   H100 NVL, H200 NVL: 835.5, 60.0;  A100 (SXM4, PCIe): 312, 19.5.
// Keyed by the driver's exact names first ("NVIDIA H100 80GB HBM3", "NVIDIA H200 NVL", ...),
// then by words, the form factors NVL and PCIe before the SXM default (an unknown H200 NVL name
// must not take the SXM peak). nullopt for any other device or "".
struct DensePeak {
  std::string name;  // "H100 SXM dense bf16 989.4 TFLOP/s"
  double flops_per_s = 0;
};
std::optional<DensePeak> dense_peak(const std::string& device, Dtype dtype);

// Fills the metrics of S from its measured fields (busy_s, comm_s, flops, peak_device_bytes,
// runtime_bytes of each rank; makespan_s, or period_s with --sync none, as T;
// bubble_fraction_measured):
//   run   utilisation  = 1 − bubble_fraction_measured = Σ busy / (P·T) of the median step
//         comm_share   = Σ comm_s / Σ (busy_s + comm_s) over the ranks
//         flops        = Σ flops of the ranks;  flops_per_s = flops / T
//   rank  utilisation  = busy_s / T;  comm_share = comm_s / (busy_s + comm_s)
//         flops_per_s  = flops / T;   peak_memory_bytes = peak_device_bytes + runtime_bytes
// With a dense_peak of S.device_name and S.dtype: peak_name, peak_flops_per_s, and
//         mfu = flops_per_s / (P · peak) per run, flops_per_s / peak per rank.
// A ratio with a zero denominator is 0.
void set_metrics(RunSummary& s);

// The "Metrics" section of docs/run-record.md (fields_markdown adds it).
std::string metrics_markdown();

}  // namespace bb::harness
