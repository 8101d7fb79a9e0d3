#include "harness/metrics.hpp"

#include <algorithm>
#include <cstdio>

namespace bb::harness {

PassFlops mlp_block_flops(int hidden, int rows) {
  const double h = hidden, x = 16.0 * rows * h * h;  // two GEMMs of rows·h·4h multiply-adds
  return {x, x, x};
}

PassFlops transformer_block_flops(const TransformerConfig& c) {
  const double T = static_cast<double>(c.tokens()), h = c.hidden, f = c.ffn_width(), S = c.seq;
  const double dense = 2.0 * T * (4.0 * h * h + 2.0 * h * f);
  const double attention_gemm = 2.0 * T * S * h;  // b·H·S·S·d multiply-adds, times 2
  return {dense + 2 * attention_gemm, dense + 4 * attention_gemm, dense};
}

PassFlops lm_head_flops(const TransformerConfig& c) {
  if (!c.head || c.vocab <= 0) return {};
  const double x = 2.0 * static_cast<double>(c.tokens()) * c.hidden * c.vocab;
  return {2 * x, 0, x};
}

PassFlops chunk_flops(const ExecutorConfig& config, int stage, int num_stages) {
  if (config.synthetic) return {};
  PassFlops block, ends;
  const double L = stage_layers(config, num_stages).at(static_cast<std::size_t>(stage));
  if (config.transformer) {
    const TransformerConfig tc = transformer_chunk_config(config, stage, num_stages);
    block = transformer_block_flops(tc);
    ends = lm_head_flops(tc);
  } else {
    block = mlp_block_flops(config.hidden, config.mb_size);
  }
  ends += PassFlops{block.f * L, block.b * L, block.w * L};
  return ends;
}

std::vector<double> step_flops(const Schedule& lowered, const ExecutorConfig& config) {
  const int num_stages = model_stages(lowered);
  std::vector<PassFlops> chunk;
  for (const int s : lowered.chunk_stage) chunk.push_back(chunk_flops(config, s, num_stages));
  std::vector<double> out;
  for (const auto& actions : lowered.ranks) {
    double sum = 0;
    for (const Action& a : actions) {
      const PassFlops& p = chunk.at(a.chunk);
      switch (a.op) {
        case Op::F:
          sum += p.f;
          break;
        case Op::B:
          sum += p.b;
          break;
        case Op::W:
          sum += p.w;
          break;
        case Op::BW:
          sum += p.b + p.w;
          break;
        default:
          break;
      }
    }
    out.push_back(sum);
  }
  return out;
}

std::optional<DensePeak> dense_peak(const std::string& device, Dtype dtype) {
  struct Row {
    const char* match;  // every word of it in the device's name
    const char* name;
    double bf16, fp32;  // TFLOP/s
  };
  struct Exact {
    const char* device;  // cudaGetDeviceProperties' name
    const Row* row;
  };
  // By words, first match wins: the NVL and PCIe form factors before the SXM defaults.
  static const Row kPeaks[] = {
      {"H200 NVL", "H200 NVL", 835.5, 60.0},   {"H200", "H200 SXM", 989.4, 66.9},
      {"H100 PCIe", "H100 PCIe", 756.5, 51.2}, {"H100 NVL", "H100 NVL", 835.5, 60.0},
      {"H100", "H100 SXM", 989.4, 66.9},       {"A100", "A100", 312.0, 19.5},
  };
  static const Exact kExact[] = {
      {"NVIDIA H200 NVL", &kPeaks[0]},       {"NVIDIA H200", &kPeaks[1]},
      {"NVIDIA H100 PCIe", &kPeaks[2]},      {"NVIDIA H100 NVL", &kPeaks[3]},
      {"NVIDIA H100 80GB HBM3", &kPeaks[4]}, {"NVIDIA A100-SXM4-80GB", &kPeaks[5]},
      {"NVIDIA A100-SXM4-40GB", &kPeaks[5]}, {"NVIDIA A100-PCIE-40GB", &kPeaks[5]},
      {"NVIDIA A100 80GB PCIe", &kPeaks[5]},
  };
  auto has_words = [&](const std::string& words) {
    std::size_t from = 0;
    while (from < words.size()) {
      const std::size_t end = std::min(words.find(' ', from), words.size());
      if (device.find(words.substr(from, end - from)) == std::string::npos) return false;
      from = end + 1;
    }
    return true;
  };
  const Row* found = nullptr;
  for (const Exact& e : kExact)
    if (device == e.device) found = e.row;
  for (const Row& r : kPeaks)
    if (found == nullptr && !device.empty() && has_words(r.match)) found = &r;
  if (found != nullptr) {
    const Row& r = *found;
    const bool bf16 = dtype == Dtype::kBF16;
    const double tflops = bf16 ? r.bf16 : r.fp32;
    char value[32];
    std::snprintf(value, sizeof value, "%.1f", tflops);
    return DensePeak{
        std::string(r.name) + " dense " + (bf16 ? "bf16 " : "fp32 ") + value + " TFLOP/s",
        tflops * 1e12};
  }
  return std::nullopt;
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}

void set_metrics(RunSummary& s) {
  const double T = s.period_s.value_or(s.makespan_s);
  double comm = 0, active = 0;
  s.flops = 0;
  for (RankResult& r : s.ranks) {
    r.utilisation = ratio(r.busy_s, T);
    r.comm_share = ratio(r.comm_s, r.busy_s + r.comm_s);
    r.flops_per_s = ratio(r.flops, T);
    r.peak_memory_bytes = r.peak_device_bytes + r.runtime_bytes + r.comm_device_bytes;
    comm += r.comm_s;
    active += r.busy_s + r.comm_s;
    s.flops += r.flops;
  }
  s.utilisation = 1 - s.bubble_fraction_measured;
  s.comm_share = ratio(comm, active);
  s.flops_per_s = ratio(s.flops, T);
  const auto peak = dense_peak(s.device_name, s.dtype);
  s.peak_name = peak ? peak->name : "";
  s.peak_flops_per_s.reset();
  s.mfu.reset();
  if (!peak) return;
  s.peak_flops_per_s = peak->flops_per_s;
  s.mfu = ratio(s.flops_per_s, s.P * peak->flops_per_s);
  for (RankResult& r : s.ranks) r.mfu = ratio(r.flops_per_s, peak->flops_per_s);
}

std::string metrics_markdown() {
  return "## Metrics\n"
         "\n"
         "The metrics of a pipeline study (issue 20; src/harness/metrics.hpp), per run and rank.\n"
         "T is the median step makespan `makespan_s` (`--sync none`: the median period\n"
         "`period_s`).\n"
         "\n"
         "- **Compute utilisation** `utilisation` = Σ busy / (P·T) of the median step, i.e.\n"
         "  1 − `bubble_fraction_measured`; per rank `rank_utilisation` = `busy_s` / T (medians).\n"
         "- **Communication share** `comm_share` = Σ `comm_s` / Σ (`busy_s` + `comm_s`) over the\n"
         "  ranks; per rank `rank_comm_share` = `comm_s` / (`busy_s` + `comm_s`). `comm_s` is the\n"
         "  host time the rank spends posting its SEND and RECV actions and completing its sends\n"
         "  at the step's end (runtime/executor.hpp, StepRecord::comm), not the time it waits for\n"
         "  an input (`wait_s`, which is bubble). A profiler's \"share of kernel time in\n"
         "  communication\" on GPU counts NCCL kernel time instead, which overlaps compute: the\n"
         "  two differ there.\n"
         "- **Peak allocated memory** `peak_memory_bytes` = `peak_device_bytes` (the peak of the\n"
         "  bytes the backend's allocator handed out: parameters, gradients, optimizer state,\n"
         "  activations, message buffers, workspaces; on CPU that is all of it) + `runtime_bytes`\n"
         "  (CUDA: what the context and cuBLAS, handle and workspace, take, measured as (total −\n"
         "  free) of cudaMemGetInfo once the context exists and again after cuBLAS is set up, "
         "when\n"
         "  the backend is made; on a GPU shared with other processes their memory counts too;\n"
         "  NCCL's buffers are not included; CPU: 0). With `--check`, rank 0's peak includes the\n"
         "  sequential reference.\n"
         "- **FLOP/s** `flops_per_s` = `flops` / T, `flops` being the model FLOPs of one step "
         "over\n"
         "  all ranks; per rank `rank_flops` and `rank_flops_per_s`. Model FLOPs count the GEMMs,\n"
         "  2 per multiply-add, once per pass (not the forward that recompute runs again, nor\n"
         "  LayerNorm, softmax, GELU, loss and optimizer). Per micro-batch and block: MLP\n"
         "  16·b·h² in each of F, B and W; transformer (t = b·S tokens, MLP width f)\n"
         "  F = 2t(4h² + 2hf) + 4tSh, B = 2t(4h² + 2hf) + 8tSh, W = 2t(4h² + 2hf); the LM head\n"
         "  adds 4thV to the last chunk's F (the logits and their input gradient, computed with\n"
         "  the loss) and 2thV to its W. Null with synthetic compute.\n"
         "- **MFU** `mfu` = `flops_per_s` / (P · `peak_flops_per_s`), per rank `rank_mfu`, "
         "against\n"
         "  the dense peak (no sparsity) of rank 0's device (`device_name`) for the run's dtype,\n"
         "  named in `peak_name`: H100 SXM and H200 989.4 (bf16) / 66.9 (fp32) TFLOP/s, H100\n"
         "  PCIe 756.5 / 51.2, H100 NVL 835.5 / 60.0, A100 312 / 19.5 (NVIDIA's datasheets; fp32\n"
         "  is the peak without tensor cores, as the CUDA backend's fp32 GEMMs do not use TF32).\n"
         "  Null on CPU and on other devices.\n"
         "\n"
         "The text table shows `util`, `comm_share`, `GFLOP/s` and `peak_MiB` (the largest\n"
         "rank's `peak_memory_bytes`).\n"
         "\n";
}

}  // namespace bb::harness
