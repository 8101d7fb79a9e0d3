// `bubblebench advise` (docs/advise.md): the options, the costs (a results file's run or
// flags), the ranked table / JSON / CSV, and --verify (the top K run for real through the
// harness, under mpiexec/srun).
#include "cli/advise.hpp"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "advise/advise.hpp"
#include "cli/list.hpp"
#include "cli/mpi_start.hpp"
#include "cli/table.hpp"
#include "common/error.hpp"
#include "harness/output.hpp"
#include "harness/provenance.hpp"
#include "harness/runner.hpp"
#include "harness/sweep.hpp"
#include "results/hdf5_file.hpp"
#include "runtime/factory.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/placement.hpp"
#include "runtime/wait.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

using json = nlohmann::json;

struct AdviseOptions {
  std::string results, run_key;
  std::string schedules = "all";
  int P = 0;  // 0: the results run's P, else 4
  std::string M = "4:64:x2", v = "1,2,3,4", recompute = "both";
  int global_batch = 0, mb_size = 0;
  std::string t_f, t_b, t_w;  // seconds (or durations); lists: one per stage
  std::string act_bytes, input_bytes, param_bytes, memory_cap;
  std::string optimizer;  // sgd | adam; default: the run's, else sgd
  std::string latency, bandwidth;
  double fb_factor = 0;  // 0: the results file's (its runs with F&B pairs), else 1
  std::string sync = "barrier";
  int top = 5;
  std::string format = "table";
  int verify = 0, warmup = 1, iters = 5;
  double timeout = 600;
};

void add_options(CLI::App& app, AdviseOptions& o) {
  app.add_option("--results", o.results,
                 "Costs from a results file of `run` (HDF5): a run's F/B/W medians, activation "
                 "and parameter bytes, calibrated links")
      ->check(CLI::ExistingFile);
  app.add_option("--run", o.run_key,
                 "The run_key of the run to take (default: the split-backward run without "
                 "recompute with the largest M)");
  app.add_option("--schedule,-s", o.schedules, "Schedules to consider (comma-separated, or all)")
      ->capture_default_str();
  app.add_option("-P", o.P, "Pipeline ranks (default: the run's, else 4)");
  app.add_option("-M", o.M, "Micro-batches per step to consider (LIST)")->capture_default_str();
  app.add_option("--global-batch", o.global_batch,
                 "Samples per step: M x micro-batch size fixed (M must divide it)");
  app.add_option("--mb-size", o.mb_size,
                 "Samples of the micro-batch the costs and bytes belong to (default: the run's, "
                 "else 1)");
  app.add_option("-v", o.v, "Chunks per rank for schedules that take v (LIST)")
      ->capture_default_str();
  app.add_option("--recompute", o.recompute, "off, on or both")
      ->check(CLI::IsMember({"off", "on", "both"}))
      ->capture_default_str();
  app.add_option("--t-f", o.t_f, "F time of one stage, seconds (or 2ms...; or one per stage)");
  app.add_option("--t-b", o.t_b, "B (input-gradient) time of one stage");
  app.add_option("--t-w", o.t_w, "W (weight-gradient) time of one stage");
  app.add_option("--act-bytes", o.act_bytes,
                 "Bytes one micro-batch keeps on one stage from F to B (64K, 1M, 2G)");
  app.add_option("--input-bytes", o.input_bytes,
                 "Bytes of one chunk's input: the message, and what recompute keeps");
  app.add_option("--param-bytes", o.param_bytes, "Parameter bytes of one stage");
  app.add_option("--optimizer", o.optimizer, "sgd (params + grads: 2x param bytes) or adam (4x)")
      ->check(CLI::IsMember({"sgd", "adam"}));
  app.add_option("--memory-cap", o.memory_cap, "Bytes per rank (e.g. 16G); default: no cap");
  app.add_option("--latency", o.latency, "Seconds per message (default: the run's links)");
  app.add_option("--bandwidth", o.bandwidth, "Bytes per second (0: infinite)");
  app.add_option("--fb-factor", o.fb_factor,
                 "An overlapped F&B pair (DualPipe) costs this x (F + B + W) (default: the results "
                 "file's runs with pairs, else 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--sync", o.sync,
                 "barrier (rank by the single step) or none (by the steady-state period)")
      ->check(CLI::IsMember({"barrier", "none"}))
      ->capture_default_str();
  app.add_option("--top", o.top, "Rows of the ranked table")->capture_default_str();
  app.add_option("--format", o.format, "table, json or csv")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
  app.add_option("--verify", o.verify,
                 "Run the top K for real (under mpiexec -n P) and print predicted vs measured");
  app.add_option("--warmup", o.warmup, "--verify: untimed steps per run")->capture_default_str();
  app.add_option("--iters", o.iters, "--verify: timed steps per run")->capture_default_str();
  app.add_option("--timeout", o.timeout, "--verify: watchdog seconds")->capture_default_str();
}

// --- The costs -------------------------------------------------------------------------------

// What --verify needs to run a configuration like the source: the harness settings and the
// stage model (blocks of one stage: a chunk gets its fraction).
struct VerifyModel {
  harness::RunSettings settings;
  int hidden = 64;
  double stage_layers = 1;
  bool synthetic_stage_times = false;  // from flags: synthetic waits of the given times
};

double num_attr(const Attrs& a, const std::string& key) {
  const AttrValue* x = find_attr(a, key);
  if (x == nullptr) return std::nan("");
  if (const auto* i = std::get_if<std::int64_t>(x)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(x)) return *d;
  return std::nan("");
}

std::string text_attr(const Attrs& a, const std::string& key, const std::string& fallback) {
  const AttrValue* x = find_attr(a, key);
  const auto* s = x != nullptr ? std::get_if<std::string>(x) : nullptr;
  return s != nullptr ? *s : fallback;
}

bool has_costs(const RunRecord& r) {
  for (const char* k : {"t_f_s", "t_b_s", "t_w_s"})
    if (!std::isfinite(num_attr(r.attrs, k))) return false;
  return true;
}

// The run whose costs advise takes: --run KEY, else the split-backward run (F, B and W
// measured) without recompute and without overlapped F&B pairs (whose F, B and W medians
// include the overlap) with the largest M, the first such in key order.
RunRecord pick_run(const std::string& path, const std::string& key) {
  if (!key.empty()) {
    RunRecord r = read_run(path, key);
    if (!has_costs(r))
      throw ConfigError("--run " + key +
                        ": the run has no F, B and W medians (take a run of a "
                        "schedule that splits the backward, e.g. zb-h1)");
    return r;
  }
  std::optional<RunRecord> best;
  for (const std::string& k : read_complete_keys(path)) {
    RunRecord r = read_run(path, k);
    if (!has_costs(r) || num_attr(r.attrs, "recompute") != 0 ||
        std::isfinite(num_attr(r.attrs, "t_fb_s")) ||
        text_attr(r.attrs, "schedule", "").rfind("csv:", 0) == 0)
      continue;
    if (!best || num_attr(r.attrs, "M") > num_attr(best->attrs, "M")) best = std::move(r);
  }
  if (!best)
    throw ConfigError(path +
                      ": no complete run of a built-in schedule with F, B and W medians "
                      "without recompute or F&B pairs (run one, e.g. --schedule zb-h1)");
  return std::move(*best);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()      ? 0.0
         : v.size() % 2 ? v[v.size() / 2]
                        : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// One run's medians of F, B and W (kinds 0, 1, 2) per model stage over its timed steps, in stage
// units: chunk c holds model stage chunk_stage[c] (copies averaged); NaN where a stage lacks
// the kind (a fused backward has no B or W).
using StageMedians = std::array<std::vector<double>, 3>;
StageMedians stage_medians(const RunRecord& r, const Schedule& src) {
  const double frac = src.chunk_fraction(0);
  const auto stages = static_cast<std::size_t>(std::llround(src.P / frac));
  const auto chunks = static_cast<std::size_t>(src.num_chunks());
  const char* kinds[] = {"F", "B", "W"};
  std::vector<std::vector<std::vector<double>>> durations(  // [kind][chunk]
      3, std::vector<std::vector<double>>(chunks));
  for (const EventRecord& e : r.events)
    for (std::size_t k = 0; k < 3; ++k)
      if (e.kind == kinds[k] && e.chunk < chunks)
        durations[k][e.chunk].push_back(e.t_end_s - e.t_start_s);
  StageMedians out;
  for (std::size_t k = 0; k < 3; ++k) {
    std::vector<double> sum(stages, 0.0);
    std::vector<int> copies(stages, 0);
    for (std::size_t c = 0; c < chunks; ++c) {
      const auto stage = static_cast<std::size_t>(src.chunk_stage[c]);
      if (stage >= stages || durations[k][c].empty()) continue;
      sum[stage] += median_of(durations[k][c]) / frac;
      copies[stage] += 1;
    }
    for (std::size_t st = 0; st < stages; ++st)
      out[k].push_back(copies[st] > 0 ? sum[st] / copies[st] : std::nan(""));
  }
  return out;
}

// Whether two runs ran the same model: the same stage (blocks, shape, micro-batch, dtype,
// backend and compute), as many model stages, and every chunk as many blocks. Their F, B and W of a
// model stage are then samples of one cost.
bool same_model(const Attrs& a, const Schedule& sa, const Attrs& b, const Schedule& sb) {
  // Uneven blocks per chunk (--partition) make stages of different costs: not pooled.
  const auto even = [](const Attrs& x) {
    const std::string p = text_attr(x, "partition", "");
    const std::string first = p.substr(0, p.find(','));
    for (std::size_t at = 0; at != std::string::npos && at < p.size();) {
      const std::size_t end = p.find(',', at);
      if (p.substr(at, end == std::string::npos ? end : end - at) != first) return false;
      at = end == std::string::npos ? end : end + 1;
    }
    return true;
  };
  if (!even(a) || !even(b)) return false;
  for (const char* k : {"backend", "compute", "dtype", "stage"})
    if (text_attr(a, k, "") != text_attr(b, k, "")) return false;
  for (const char* k : {"hidden", "mb_size", "seq", "heads", "ffn", "causal", "vocab"}) {
    const double x = num_attr(a, k), y = num_attr(b, k);
    if (x != y && !(std::isnan(x) && std::isnan(y))) return false;
  }
  const double fa = sa.chunk_fraction(0), fb = sb.chunk_fraction(0);
  const auto same = [](double x, double y) { return std::fabs(x - y) <= 1e-9 * std::fabs(x); };
  return same(num_attr(a, "layers") / fa, num_attr(b, "layers") / fb) && same(sa.P / fa, sb.P / fb);
}

// The costs of the model the reference run REF ran, pooled over every complete run of the file
// that ran the same model without recompute (itself included): per kind and model stage the
// median over those runs of each run's median (a run is one sample of the machine's speed,
// which drifts between runs). F comes from every run, B and W from the runs that split the
// backward. Also the median over the runs with overlapped F&B pairs of t_fb / (t_f + t_b + t_w)
// (a pair is an F and a whole backward).
// Without POOL, REF's alone. False, IN left as it is, unless every model stage has all three
// kinds.
bool pooled_profiles(const std::string& path, const RunRecord& ref, const Schedule& ref_src,
                     bool pool, advise::Input& in, int& runs, int& fb_runs) {
  const auto stages = static_cast<std::size_t>(std::llround(ref_src.P / ref_src.chunk_fraction(0)));
  std::array<std::vector<std::vector<double>>, 3> samples;  // [kind][stage] -> one per run
  for (auto& k : samples) k.assign(stages, {});
  std::vector<double> fb_ratio;
  runs = 0;
  for (const std::string& key : read_complete_keys(path)) {
    if (!pool && key != ref.key) continue;
    const RunRecord r = key == ref.key ? ref : read_run(path, key);
    const std::string name = text_attr(r.attrs, "schedule", "");
    if (num_attr(r.attrs, "recompute") != 0 || name.rfind("csv:", 0) == 0) continue;
    const Schedule src = generate(
        name, {static_cast<int>(num_attr(r.attrs, "P")), static_cast<int>(num_attr(r.attrs, "M")),
               static_cast<int>(num_attr(r.attrs, "v"))});
    if (!same_model(ref.attrs, ref_src, r.attrs, src)) continue;
    const StageMedians m = stage_medians(r, src);
    for (std::size_t k = 0; k < 3; ++k)
      for (std::size_t st = 0; st < stages && st < m[k].size(); ++st)
        if (std::isfinite(m[k][st])) samples[k][st].push_back(m[k][st]);
    runs += 1;
    const double fb = num_attr(r.attrs, "t_fb_s");
    const double sum =
        num_attr(r.attrs, "t_f_s") + num_attr(r.attrs, "t_b_s") + num_attr(r.attrs, "t_w_s");
    if (std::isfinite(fb) && std::isfinite(sum) && sum > 0) fb_ratio.push_back(fb / sum);
  }
  StageMedians profile;
  for (std::size_t k = 0; k < 3; ++k)
    for (const auto& x : samples[k]) {
      if (x.empty()) return false;
      profile[k].push_back(median_of(x));
    }
  in.t_f = profile[0];
  in.t_b = profile[1];
  in.t_w = profile[2];
  fb_runs = static_cast<int>(fb_ratio.size());
  if (!fb_ratio.empty()) in.fb_factor = median_of(fb_ratio);
  return true;
}

// The costs, bytes and links of the chosen run, and how to run like it.
void from_results(const AdviseOptions& o, advise::Input& in, VerifyModel& vm, bool print) {
  const RunRecord r = pick_run(o.results, o.run_key);
  const Attrs& a = r.attrs;
  const std::string name = text_attr(a, "schedule", "");
  const ScheduleParams sp{static_cast<int>(num_attr(a, "P")), static_cast<int>(num_attr(a, "M")),
                          static_cast<int>(num_attr(a, "v"))};
  const Schedule src = generate(name, sp);
  const double frac = src.chunk_fraction(0);
  in.P = sp.P;
  in.t_f = {num_attr(a, "t_f_s")};
  in.t_b = {num_attr(a, "t_b_s")};
  in.t_w = {num_attr(a, "t_w_s")};
  int runs = 0, fb_runs = 0;
  const bool per_chunk = pooled_profiles(o.results, r, src, o.run_key.empty(), in, runs, fb_runs);
  in.mb_size = static_cast<int>(num_attr(a, "mb_size"));
  harness::RunSettings& s = vm.settings;
  s.backend = text_attr(a, "backend", "cpu");
  s.transport = text_attr(a, "transport", default_transport(s.backend));
  s.compute = text_attr(a, "compute", "gemm");
  s.dtype = text_attr(a, "dtype", "fp32");
  s.optimizer = text_attr(a, "optimizer", "sgd");
  s.stage = text_attr(a, "stage", "mlp");
  s.seq = static_cast<int>(num_attr(a, "seq"));
  s.heads = static_cast<int>(num_attr(a, "heads"));
  s.ffn = static_cast<int>(num_attr(a, "ffn"));
  s.causal = num_attr(a, "causal") == 1;
  if (const double vocab = num_attr(a, "vocab"); std::isfinite(vocab))
    s.vocab = static_cast<int>(vocab);
  if (s.synthetic()) {
    s.t_f = num_attr(a, "synthetic_t_f_s");
    s.t_b = num_attr(a, "synthetic_t_b_s");
    s.t_w = num_attr(a, "synthetic_t_w_s");
  }
  vm.hidden = static_cast<int>(num_attr(a, "hidden"));
  const int layers = static_cast<int>(num_attr(a, "layers"));
  vm.stage_layers = layers / frac;
  if (!s.synthetic()) in.stage_blocks = vm.stage_layers;  // chunks of whole blocks only
  // A chunk's bytes (as summarize.cpp computes the model's): what it keeps after F, and with
  // recompute its input only; per stage the former over the chunk fraction.
  ExecutorConfig ec = harness::executor_config(s, vm.hidden, layers, in.mb_size);
  ec.recompute = false;
  in.act_bytes = 4.0 * static_cast<double>(chunk_forward_floats(ec)) / frac;
  ec.recompute = true;
  in.input_bytes = 4.0 * static_cast<double>(chunk_forward_floats(ec));
  // Parameters of a stage: each rank's bytes over its chunks' stage-equivalents.
  std::vector<double> per_stage;
  for (const RankRecord& rk : r.ranks) {
    double share = 0;
    for (int c = 0; c < src.num_chunks(); ++c)
      if (src.chunk_rank[static_cast<std::size_t>(c)] == static_cast<int>(rk.rank)) share += frac;
    if (share > 0) per_stage.push_back(static_cast<double>(rk.param_bytes) / share);
  }
  in.param_bytes = median_of(per_stage);
  in.static_factor = s.optimizer == "adam" ? 4 : 2;
  // Calibrated links: the median line of the run's pairs prices every pair.
  std::vector<double> alpha, beta;
  for (const LinkFit& f : r.links) {
    alpha.push_back(f.line.alpha);
    beta.push_back(f.line.beta);
  }
  in.latency = median_of(alpha);
  in.bandwidth = median_of(beta);
  if (print) {
    std::string text;
    for (const auto& [name, list] :
         {std::pair{"t_f", &in.t_f}, std::pair{"t_b", &in.t_b}, std::pair{"t_w", &in.t_w}}) {
      text += std::string(text.empty() ? "" : ", ") + name + " ";
      for (std::size_t i = 0; i < list->size(); ++i) text += (i ? "/" : "") + fmt((*list)[i] * 1e3);
    }
    std::cerr << "note: advise: costs of run " << r.key << " (" << text << " ms per stage"
              << (!per_chunk ? ", per-kind medians"
                  : runs > 1 ? ", per-chunk medians by model stage, median over the " +
                                   std::to_string(runs) + " runs of this model"
                             : ", per-chunk medians by model stage")
              << (fb_runs > 0 ? "; F&B pair = " + fmt(in.fb_factor, 3) +
                                    " x (F + B + W), median of " + std::to_string(fb_runs) + " runs"
                              : "")
              << "; " << r.links.size() << " calibrated links)\n";
  }
}

std::vector<double> seconds_list(const std::string& text, const char* flag) {
  if (text.find(',') == std::string::npos) return {parse_duration(text, flag, true)};
  return parse_number_list(text, flag);
}

// The search's input: the results file's run, then every flag given over it.
advise::Input make_input(const AdviseOptions& o, VerifyModel& vm, bool print) {
  advise::Input in;
  in.P = 4;
  in.mb_size = 1;
  vm.synthetic_stage_times = o.results.empty();
  if (vm.synthetic_stage_times) {
    vm.settings.compute = "synthetic";
    in.t_f = {1e-3};
    in.t_b = {1e-3};
    in.t_w = {1e-3};
  } else {
    from_results(o, in, vm, print);
  }
  if (o.P != 0) in.P = o.P;
  if (o.mb_size != 0) in.mb_size = o.mb_size;
  if (!o.t_f.empty()) in.t_f = seconds_list(o.t_f, "--t-f");
  if (!o.t_b.empty()) in.t_b = seconds_list(o.t_b, "--t-b");
  if (!o.t_w.empty()) in.t_w = seconds_list(o.t_w, "--t-w");
  const auto bytes = [](const std::string& text, const char* flag, double& to) {
    if (!text.empty()) to = static_cast<double>(parse_bytes(text, flag, true));
  };
  bytes(o.act_bytes, "--act-bytes", in.act_bytes);
  bytes(o.input_bytes, "--input-bytes", in.input_bytes);
  bytes(o.param_bytes, "--param-bytes", in.param_bytes);
  bytes(o.memory_cap, "--memory-cap", in.memory_cap);
  if (!o.optimizer.empty()) in.static_factor = o.optimizer == "adam" ? 4 : 2;
  if (!o.latency.empty()) in.latency = parse_duration(o.latency, "--latency", true);
  if (!o.bandwidth.empty()) in.bandwidth = parse_duration(o.bandwidth, "--bandwidth", false);
  if (o.fb_factor > 0) in.fb_factor = o.fb_factor;
  if (o.global_batch < 0) throw ConfigError("--global-batch must be >= 1");
  in.global_batch = o.global_batch;
  in.steady = o.sync == "none";
  in.schedules = sweep_names(o.schedules);
  in.Ms = parse_int_list(o.M, "-M");
  in.vs = parse_int_list(o.v, "-v");
  in.recompute.clear();
  if (o.recompute != "on") in.recompute.push_back(false);
  if (o.recompute != "off") in.recompute.push_back(true);
  if (o.top < 1) throw ConfigError("--top must be >= 1");
  if (o.verify < 0) throw ConfigError("--verify must be >= 0");
  return in;
}

// --- Output ----------------------------------------------------------------------------------

std::string config_text(const advise::Candidate& c) {
  return c.schedule + " M=" + std::to_string(c.M) + " v=" + std::to_string(c.v) +
         (c.recompute ? " rc" : "");
}

json candidate_json(const advise::Candidate& c, int rank) {
  json j;
  if (rank > 0) j["rank"] = rank;
  j["schedule"] = c.schedule;
  j["M"] = c.M;
  j["v"] = c.v;
  j["recompute"] = c.recompute;
  j["mb_size"] = c.mb_size;
  j["excluded"] = c.excluded;
  if (!c.reason.empty()) j["reason"] = c.reason;
  if (c.excluded == "refused") return j;
  j["step_time_s"] = c.step_time;
  j["makespan_s"] = c.makespan;
  j["period_s"] = c.period;
  j["throughput_samples_per_s"] = c.throughput;
  j["bubble_fraction"] = c.bubble_fraction;
  j["bubble_fraction_steady"] = c.bubble_fraction_steady;
  j["peak_bytes"] = c.peak_bytes;
  j["peak_rank"] = c.peak_rank;
  j["activation_bytes"] = c.activation_bytes;
  j["static_bytes"] = c.static_bytes;
  j["terms_s"] = {{"compute", c.t_compute},
                  {"recompute", c.t_recompute},
                  {"communication", c.t_communication},
                  {"bubble", c.t_bubble}};
  j["dominant"] = c.dominant;
  return j;
}

json input_json(const advise::Input& in) {
  return {{"P", in.P},
          {"t_f_s", in.t_f},
          {"t_b_s", in.t_b},
          {"t_w_s", in.t_w},
          {"fb_factor", in.fb_factor},
          {"stage_blocks", in.stage_blocks},
          {"mb_size", in.mb_size},
          {"global_batch", in.global_batch},
          {"act_bytes", in.act_bytes},
          {"input_bytes", in.input_bytes},
          {"param_bytes", in.param_bytes},
          {"static_factor", in.static_factor},
          {"memory_cap", in.memory_cap},
          {"latency_s", in.latency},
          {"bandwidth_bytes_per_s", in.bandwidth},
          {"view", in.steady ? "steady" : "single"}};
}

const char* kCsvCols[] = {"rank",
                          "schedule",
                          "M",
                          "v",
                          "recompute",
                          "mb_size",
                          "step_time_s",
                          "makespan_s",
                          "period_s",
                          "throughput_samples_per_s",
                          "bubble_fraction",
                          "bubble_fraction_steady",
                          "peak_bytes",
                          "peak_rank",
                          "dominant",
                          "excluded",
                          "reason"};

void print_csv(const advise::Result& r) {
  for (std::size_t i = 0; i < std::size(kCsvCols); ++i) std::cout << (i ? "," : "") << kCsvCols[i];
  std::cout << "\n";
  const auto row = [](const json& j) {
    std::string line;
    for (std::size_t i = 0; i < std::size(kCsvCols); ++i) {
      const char* col = kCsvCols[i];
      std::string cell;
      if (j.contains(col)) {
        const json& x = j[col];
        cell = x.is_string()    ? x.get<std::string>()
               : x.is_boolean() ? std::string(x.get<bool>() ? "1" : "0")
                                : fmt_exact(x.get<double>());
      }
      if (cell.find_first_of(",\"") != std::string::npos) {
        std::string q = "\"";
        for (char ch : cell) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        cell = q + "\"";
      }
      line += (i ? "," : "") + cell;
    }
    std::cout << line << "\n";
  };
  for (std::size_t i = 0; i < r.ranked.size(); ++i)
    row(candidate_json(r.ranked[i], static_cast<int>(i + 1)));
  for (const auto& c : r.excluded) row(candidate_json(c, 0));
}

json result_json(const advise::Input& in, const advise::Result& r) {
  json j;
  j["input"] = input_json(in);
  j["simulations"] = r.simulations;
  j["ranked"] = json::array();
  for (std::size_t i = 0; i < r.ranked.size(); ++i)
    j["ranked"].push_back(candidate_json(r.ranked[i], static_cast<int>(i + 1)));
  j["excluded"] = json::array();
  for (const auto& c : r.excluded) j["excluded"].push_back(candidate_json(c, 0));
  j["families"] = json::array();
  for (const auto& f : r.families)
    j["families"].push_back({{"schedule", f.schedule},
                             {"v", f.v},
                             {"recompute", f.recompute},
                             {"excluded", f.excluded},
                             {"reason", f.reason}});
  return j;
}

std::string mib(double bytes) {
  return fmt(bytes / (1024.0 * 1024.0));
}

void print_table(const advise::Input& in, const advise::Result& r, int top) {
  const std::vector<std::string> cols = {"#",         "schedule", "M",       "v",
                                         "recompute", "mb_size",  "step_ms", "samples_per_s",
                                         "bubble",    "peak_MiB", "dominant"};
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < r.ranked.size() && i < static_cast<std::size_t>(top); ++i) {
    const auto& c = r.ranked[i];
    rows.push_back({std::to_string(i + 1), c.schedule, std::to_string(c.M), std::to_string(c.v),
                    c.recompute ? "on" : "off", fmt(c.mb_size), fmt(c.step_time * 1e3),
                    fmt(c.throughput),
                    fmt(in.steady ? c.bubble_fraction_steady : c.bubble_fraction),
                    mib(c.peak_bytes), c.dominant});
  }
  bb::print_table(std::cout, cols, rows);
  std::size_t memory = 0, refused = 0;
  for (const auto& c : r.excluded) (c.excluded == "memory" ? memory : refused) += 1;
  std::cout << r.ranked.size() << " configurations ranked ("
            << (in.steady ? "steady state" : "single step") << "), " << memory
            << " over the memory cap, " << refused << " refused; " << r.simulations
            << " simulated\n";
  for (const auto& f : r.families)
    if (!f.excluded.empty())
      std::cout << "excluded: " << f.schedule << " v=" << f.v << (f.recompute ? " recompute" : "")
                << ": " << f.excluded << ": " << f.reason << "\n";
}

// --- --verify ----------------------------------------------------------------------------------

struct Verified {
  const advise::Candidate* predicted;
  int predicted_rank;
  std::optional<harness::RunSummary> measured;  // rank 0; empty: not run (why says why)
  std::string why;
};

// Runs the top K on every rank (same order everywhere); rank 0 gets the summaries.
std::vector<Verified> verify_top(const AdviseOptions& o, const advise::Input& in,
                                 const advise::Result& r, const VerifyModel& vm, int world) {
  if (world != in.P)
    throw ConfigError("--verify runs P=" + std::to_string(in.P) +
                      " ranks: start it with mpiexec -n " + std::to_string(in.P) +
                      " (world size is " + std::to_string(world) + ")");
  harness::RunSettings base = vm.settings;
  base.transport = base.transport.empty() ? default_transport(base.backend) : base.transport;
  base.warmup = o.warmup;
  base.iters = o.iters;
  base.sync = in.steady ? "none" : "barrier";
  base.timeout = o.timeout;
  base.calibrate = false;
  base.check = false;
  MPI_Comm p2p = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
  MPI_Comm coll = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
  auto backend =
      make_backend(base.backend, base.backend == "cuda" ? harness::local_rank() : 0, base.dtype);
  auto transport = make_transport(base.transport, p2p, *backend);
  std::vector<Verified> out;
  for (std::size_t i = 0; i < r.ranked.size() && static_cast<int>(i) < o.verify; ++i) {
    const advise::Candidate& c = r.ranked[i];
    Verified v{&c, static_cast<int>(i + 1), std::nullopt, ""};
    const ScheduleParams p{in.P, c.M, c.v};
    Schedule s = generate(c.schedule, p);
    const double frac = s.chunk_fraction(0);
    harness::RunSettings settings = base;
    const double scale = c.mb_size / in.mb_size;
    int layers = 1;
    if (vm.synthetic_stage_times || settings.synthetic()) {
      if (vm.synthetic_stage_times) {
        if (in.t_f.size() != 1 || in.t_b.size() != 1 || in.t_w.size() != 1)
          throw ConfigError("--verify with per-stage cost lists: run takes one time per kind");
        settings.t_f = in.t_f[0];
        settings.t_b = in.t_b[0];
        settings.t_w = in.t_w[0];
      }
      settings.t_f *= scale;
      settings.t_b *= scale;
      settings.t_w *= scale;
    } else {
      const double chunk_layers = vm.stage_layers * frac;
      if (std::fabs(chunk_layers - std::round(chunk_layers)) > 1e-9 || chunk_layers < 1) {
        v.why = "a chunk would hold " + fmt(chunk_layers) + " blocks (the run's stage has " +
                fmt(vm.stage_layers) + ")";
        out.push_back(std::move(v));
        continue;
      }
      layers = static_cast<int>(std::lround(chunk_layers));
    }
    harness::ModelLists lists;
    lists.hidden = {vm.hidden};
    lists.layers = {layers};
    lists.mb_size = {static_cast<int>(c.mb_size)};
    lists.recompute = {c.recompute};
    std::vector<harness::NamedSchedule> named;
    named.push_back({c.schedule, std::move(s)});
    const auto configs = harness::make_configs(std::move(named), lists, settings, world);
    harness::RunContext ctx(settings, *backend, *transport, coll);
    harness::gather_placement(ctx,
                              this_placement(harness::host_name(), harness::device_of(*backend)));
    harness::SweepOutcome so =
        harness::run_sweep(ctx, configs, std::vector<int>(configs.size(), 0));
    if (!so.runs.empty()) v.measured = std::move(so.runs.front());
    out.push_back(std::move(v));
  }
  transport.reset();
  MPI_Comm_free(&p2p);
  MPI_Comm_free(&coll);
  return out;
}

// The measured per-kind medians' sum (F + B + W of a stage, single actions) over the one the
// prediction used, minus 1: how far the costs moved between the results run (or the flags) and
// this run. NaN where the run has no single F or B.
double cost_drift(const advise::Input& in, const advise::Candidate& c,
                  const harness::RunSummary& m) {
  if (!m.t_f_s || !m.t_b_s) return std::nan("");
  const double assumed = advise::stage_work(in, c);
  const double got = *m.t_f_s + *m.t_b_s + m.t_w_s.value_or(0);
  return assumed > 0 ? got / assumed - 1 : std::nan("");
}

// The prediction with the run's own costs, seconds: its per-kind medians (one stage's F, B or
// the fused BW, W, and its F&B pairs over F + B + W), each rank's scaled by the rank's measured
// busy time over the one they give it (ranks run at different speeds). What remains is the
// simulator's error, not the costs'.
double predicted_at_measured(const advise::Input& in, const advise::Candidate& c,
                             const harness::RunSummary& m) {
  advise::Input x = in;
  const double f = m.t_f_s.value_or(0), b = m.t_b_s.value_or(0);
  x.t_f = {f};
  x.t_b = {c.recompute ? std::max(0.0, b - f) : b};  // the measured B holds the recompute
  x.t_w = {m.t_w_s.value_or(0)};
  const double sum = f + b + m.t_w_s.value_or(0);
  x.fb_factor = m.t_fb_s && sum > 0 ? *m.t_fb_s / sum : 1;
  x.mb_size = static_cast<int>(c.mb_size);
  x.global_batch = 0;
  x.memory_cap = 0;
  // Each rank at its own speed: its measured busy time over the one these medians give it.
  const advise::Candidate uniform = advise::evaluate(x, c.schedule, c.M, c.v, c.recompute);
  if (uniform.busy.size() != m.ranks.size()) return uniform.step_time;
  for (std::size_t r = 0; r < m.ranks.size(); ++r)
    x.rank_speed.push_back(uniform.busy[r] > 0 ? m.ranks[r].busy_s / uniform.busy[r] : 1.0);
  return advise::evaluate(x, c.schedule, c.M, c.v, c.recompute).step_time;
}

// How far a run's step times spread: their median absolute deviation over their median.
double relative_spread(const std::vector<double>& steps) {
  const double mid = median_of(steps);
  std::vector<double> dev;
  for (double x : steps) dev.push_back(std::fabs(x - mid));
  return mid > 0 ? median_of(dev) / mid : 0;
}

// The tie tolerance of the ranking check: 0.5 %, or the largest measured spread if wider.
constexpr double kTieTolerance = 0.005;

void print_verified(const advise::Input& in, const std::vector<Verified>& vs, bool as_json) {
  const bool steady = in.steady;
  const auto measured_s = [&](const Verified& v) {
    return steady ? v.measured->period_s.value_or(0) : v.measured->makespan_s;
  };
  // The ranking check over the configurations that ran, by time per sample as the search ranks.
  std::vector<const Verified*> ran;
  std::vector<double> pred_per_sample, meas_per_sample;
  double tolerance = kTieTolerance;
  for (const auto& v : vs)
    if (v.measured) {
      const double samples = v.predicted->M * v.predicted->mb_size;
      ran.push_back(&v);
      pred_per_sample.push_back(v.predicted->step_time / samples);
      meas_per_sample.push_back(measured_s(v) / samples);
      tolerance = std::max(tolerance, relative_spread(v.measured->step_time_s));
    }
  const advise::RankingCheck rc =
      advise::check_ranking(pred_per_sample, meas_per_sample, tolerance);
  const auto index_of = [&](const Verified& v) {
    return static_cast<std::size_t>(std::find(ran.begin(), ran.end(), &v) - ran.begin());
  };
  // Measured rank: 1 + the configurations that ran measured faster.
  const auto measured_rank = [&](std::size_t i) {
    return 1 + static_cast<int>(std::count_if(meas_per_sample.begin(), meas_per_sample.end(),
                                              [&](double m) { return m < meas_per_sample[i]; }));
  };
  json j = json::array();
  std::vector<std::vector<std::string>> rows;
  double worst = 0;
  for (const auto& v : vs) {
    const auto& c = *v.predicted;
    const double pred = c.step_time;
    if (!v.measured) {
      rows.push_back({std::to_string(v.predicted_rank), config_text(c), fmt(pred * 1e3), "n/a",
                      "n/a", "n/a", "", "", "", "", "", "", "", "", "", "not run: " + v.why});
      j.push_back({{"predicted_rank", v.predicted_rank},
                   {"config", config_text(c)},
                   {"predicted_s", pred},
                   {"not_run", v.why}});
      continue;
    }
    const harness::RunSummary& m = *v.measured;
    const double meas = measured_s(v);
    const double err = pred > 0 ? (meas - pred) / pred : 0;
    worst = std::max(worst, std::fabs(err));
    const std::size_t i = index_of(v);
    const int mr = measured_rank(i);
    const auto a = m.attribution.value_or(harness::RunSummary::Attribution{});
    const double drift = cost_drift(in, c, m);
    const double at_costs = predicted_at_measured(in, c, m);
    const double sim_err = at_costs > 0 ? (meas - at_costs) / at_costs : 0;
    rows.push_back({std::to_string(v.predicted_rank), config_text(c), fmt(pred * 1e3),
                    fmt(meas * 1e3), fmt(100 * err, 3) + "%", std::to_string(mr),
                    fmt(steady ? c.bubble_fraction_steady : c.bubble_fraction, 3),
                    fmt(m.bubble_fraction_measured, 3), fmt(a.schedule, 3), fmt(a.imbalance, 3),
                    fmt(a.jitter, 3), fmt(a.communication, 3), fmt(a.residual, 3),
                    std::isfinite(drift) ? fmt(100 * drift, 3) + "%" : "n/a", fmt(at_costs * 1e3),
                    fmt(100 * sim_err, 3) + "%"});
    j.push_back(
        {{"predicted_rank", v.predicted_rank},
         {"predicted_tie_rank", rc.predicted_rank[i]},
         {"measured_rank", mr},
         {"config", config_text(c)},
         {"predicted_s", pred},
         {"measured_s", meas},
         {"rel_error", err},
         {"measured_spread", relative_spread(m.step_time_s)},
         {"bubble_fraction_predicted", steady ? c.bubble_fraction_steady : c.bubble_fraction},
         {"bubble_fraction_measured", m.bubble_fraction_measured},
         {"cost_drift", std::isfinite(drift) ? json(drift) : json(nullptr)},
         {"predicted_at_measured_costs_s", at_costs},
         {"rel_error_at_measured_costs", sim_err},
         {"attribution",
          {{"schedule", a.schedule},
           {"imbalance", a.imbalance},
           {"jitter", a.jitter},
           {"communication", a.communication},
           {"residual", a.residual}}},
         {"run_key", m.run_key}});
  }
  json contradictions = json::array();
  std::string contradicted;
  for (const auto& [a, b] : rc.contradictions) {
    contradictions.push_back({config_text(*ran[a]->predicted), config_text(*ran[b]->predicted)});
    contradicted += std::string(contradicted.empty() ? "" : "; ") +
                    config_text(*ran[a]->predicted) + " measured slower than " +
                    config_text(*ran[b]->predicted);
  }
  if (as_json) {
    std::cout << json{{"verify", j},
                      {"ranking_preserved", rc.preserved},
                      {"tie_tolerance", tolerance},
                      {"contradictions", contradictions},
                      {"max_abs_rel_error", worst}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << "\nverify: predicted vs measured ("
            << (steady ? "steady-state period" : "step makespan")
            << ", ms; bubble and attribution as fractions of P x T; cost_drift: the run's F+B+W "
               "medians against the costs predicted with; at_costs_ms: the prediction with the "
               "run's own per-kind medians and per-rank speeds, sim_error: measured against it)\n";
  bb::print_table(
      std::cout,
      {"#", "config", "pred_ms", "meas_ms", "error", "meas_#", "bubble_pred", "bubble_meas",
       "sched", "imbal", "jitter", "comm", "resid", "cost_drift", "at_costs_ms", "sim_error"},
      rows);
  std::cout << "ranking " << (rc.preserved ? "preserved" : "NOT preserved") << "; largest |error| "
            << fmt(100 * worst, 3) << "%\n"
            << "ranking rule: time per sample; predictions within " << fmt(100 * tolerance, 3)
            << "% of each other tie (0.5 %, or the largest measured spread of step times if "
               "wider), and the ranking holds unless a configuration predicted faster beyond "
               "that measures slower beyond it"
            << (contradicted.empty() ? "" : ": " + contradicted) << "\n";
}

// --- main --------------------------------------------------------------------------------------

int advise_run(int argc, char** argv, bool mpi) {
  const int me = mpi ? mpi::rank(MPI_COMM_WORLD) : 0;
  const int world = mpi ? mpi::size(MPI_COMM_WORLD) : 1;
  AdviseOptions o;
  CLI::App app{
      "bubblebench advise: rank schedule configurations by simulated time under a "
      "memory cap (docs/advise.md)",
      "bubblebench advise"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_options(app, o);
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::CallForHelp&) {
    if (me == 0) std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(e.what() + std::string(" (see --help)"));
  }
  VerifyModel vm;
  const advise::Input in = make_input(o, vm, me == 0);
  // Under MPI every rank searches the same (deterministic) ranking: one thread each.
  const advise::Result r = advise::search(in, o.top, mpi ? 1 : 0);
  std::vector<Verified> verified;
  if (o.verify > 0) {
    // A failure while running (one rank's) would leave the others waiting: the job ends here.
    try {
      verified = verify_top(o, in, r, vm, world);
    } catch (const ConfigError& e) {
      if (world == 1) throw;
      harness::say("bubblebench: rank " + std::to_string(me) + ": error: " + e.what());
      abort_job(kExitConfig);
    } catch (const std::exception& e) {
      if (world == 1) throw;
      harness::say("bubblebench: rank " + std::to_string(me) + ": error: " + e.what());
      abort_job(kExitCheckFailed);
    }
  }
  if (me != 0) return kExitOk;
  if (o.format == "json") {
    json j = result_json(in, r);
    if (o.verify > 0) {
      std::ostringstream os;
      std::streambuf* old = std::cout.rdbuf(os.rdbuf());
      print_verified(in, verified, true);
      std::cout.rdbuf(old);
      j["verify"] = json::parse(os.str());
    }
    std::cout << j.dump(2) << "\n";
  } else if (o.format == "csv") {
    print_csv(r);
  } else {
    print_table(in, r, o.top);
    if (o.verify > 0) print_verified(in, verified, false);
  }
  return kExitOk;
}

}  // namespace

int advise_main(int argc, char** argv) {
  // --verify runs configurations over MPI: MPI starts first, so only rank 0 prints.
  bool mpi = false;
  for (int i = 2; i < argc; ++i)
    if (std::strncmp(argv[i], "--verify", 8) == 0) mpi = true;
  if (mpi)
    if (const int code = start_mpi(&argc, &argv); code != kExitOk) return code;
  const int me = mpi ? mpi::rank(MPI_COMM_WORLD) : 0;
  const auto fail = [&](const char* kind, const std::exception& e, int code) {
    if (me == 0) harness::say(std::string("bubblebench: ") + kind + e.what());
    return code;
  };
  int code = kExitOk;
  try {
    code = advise_run(argc, argv, mpi);
  } catch (const ConfigError& e) {
    code = fail("error: ", e, kExitConfig);
  } catch (const ScheduleError& e) {
    code = fail("invalid schedule: ", e, kExitCheckFailed);
  } catch (const IoError& e) {
    code = fail("I/O error: ", e, kExitIo);
  } catch (const TimeoutError& e) {
    harness::say(e.what());
    if (mpi) abort_job(kExitTimeout);
    return kExitTimeout;
  } catch (const std::exception& e) {
    code = fail("internal error: ", e, kExitCheckFailed);
  }
  if (mpi) MPI_Finalize();
  return code;
}

}  // namespace bb
