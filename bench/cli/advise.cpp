// `bubblebench advise` (docs/advise.md): the options, the costs (a results file's run or
// flags) and main; the ranked table / JSON / CSV are advise_print.cpp's, --verify (the top K
// run for real through the harness, under mpiexec/srun) advise_verify.cpp's.
#include "cli/advise.hpp"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "advise/advise.hpp"
#include "cli/advise_internal.hpp"
#include "cli/list.hpp"
#include "cli/mpi_start.hpp"
#include "cli/table.hpp"
#include "common/error.hpp"
#include "harness/output.hpp"
#include "harness/sweep.hpp"
#include "results/hdf5_file.hpp"
#include "runtime/factory.hpp"
#include "runtime/mpi_finalize.hpp"
#include "runtime/mpi_util.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"

namespace bb::advise_cli {

namespace {

using json = nlohmann::json;

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

double num_attr(const Attrs& a, const std::string& key) {
  const AttrValue* x = find_attr(a, key);
  if (x == nullptr) return std::nan("");
  if (const auto* i = std::get_if<std::int64_t>(x)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<std::uint64_t>(x)) return static_cast<double>(*u);
  if (const auto* d = std::get_if<double>(x)) return *d;
  return std::nan("");
}

std::string text_attr(const Attrs& a, const std::string& key, const std::string& fallback) {
  const AttrValue* x = find_attr(a, key);
  const auto* s = x != nullptr ? std::get_if<std::string>(x) : nullptr;
  return s != nullptr ? *s : fallback;
}

// A setting of the run as its enum (the file's text parsed at this edge); `fallback` when the
// run has no such attribute; ConfigError for a name bubblebench does not know.
template <class E>
E enum_attr(const Attrs& a, const std::string& key, E fallback) {
  const std::string t = text_attr(a, key, std::string(name_of(fallback)));
  if (const auto e = enum_of<E>(t)) return *e;
  throw ConfigError("--results: the run's " + key + " '" + t + "' is not one bubblebench knows");
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
      sum[stage] += median(durations[k][c], 0.0) / frac;
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
      profile[k].push_back(median(x, 0.0));
    }
  in.t_f = profile[0];
  in.t_b = profile[1];
  in.t_w = profile[2];
  fb_runs = static_cast<int>(fb_ratio.size());
  if (!fb_ratio.empty()) in.fb_factor = median(fb_ratio, 0.0);
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
  s.backend = enum_attr(a, "backend", BackendKind::kCpu);
  s.transport = enum_attr(a, "transport", default_transport(s.backend));
  s.compute = enum_attr(a, "compute", harness::Compute::kGemm);
  s.dtype = enum_attr(a, "dtype", Dtype::kF32);
  s.optimizer = enum_attr(a, "optimizer", OptimizerConfig::Kind::kSgd);
  s.stage = enum_attr(a, "stage", harness::StageModel::kMlp);
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
  in.act_bytes = static_cast<double>(chunk_forward_bytes(ec)) / frac;
  ec.recompute = true;
  in.input_bytes = static_cast<double>(chunk_forward_bytes(ec));
  // The memory model's sizes as the runtime allocates them (chunk_buffers): a micro-batch's
  // saved tensors and a chunk's work areas per stage, the mean over the run's chunks (the
  // model's ends make the first and last differ).
  ec.recompute = false;
  double saved = 0, work = 0;
  for (int c = 0; c < src.num_chunks(); ++c) {
    const ChunkBuffers b =
        chunk_buffers(ec, src.chunk_stage[static_cast<std::size_t>(c)], model_stages(src));
    saved += static_cast<double>(b.saved) / frac / src.num_chunks();
    work += static_cast<double>(b.scratch + b.loss + b.workspace) / frac / src.num_chunks();
  }
  in.saved_bytes = saved;
  in.workspace_bytes = work;
  // Parameters of a stage: each rank's bytes over its chunks' stage-equivalents.
  std::vector<double> per_stage;
  for (const RankRecord& rk : r.ranks) {
    double share = 0;
    for (int c = 0; c < src.num_chunks(); ++c)
      if (src.chunk_rank[static_cast<std::size_t>(c)] == static_cast<int>(rank_number(rk, "rank")))
        share += frac;
    if (share > 0) per_stage.push_back(rank_number(rk, "param_bytes") / share);
  }
  in.param_bytes = median(per_stage, 0.0);
  in.static_factor = query::static_factor(std::string(name_of(s.optimizer)));
  // Calibrated links: the median line of the run's pairs prices every pair.
  std::vector<double> alpha, beta;
  for (const LinkFit& f : r.links) {
    alpha.push_back(f.line.alpha);
    beta.push_back(f.line.beta);
  }
  in.latency = median(alpha, 0.0);
  in.bandwidth = median(beta, 0.0);
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

// The search's input: the results file's run, then every flag given over it.
advise::Input make_input(const AdviseOptions& o, VerifyModel& vm, bool print) {
  advise::Input in = query::advise_defaults();
  vm.synthetic_stage_times = o.results.empty();
  if (vm.synthetic_stage_times)
    vm.settings.compute = harness::Compute::kSynthetic;
  else
    from_results(o, in, vm, print);
  return query::advise_input(o, std::move(in));
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
    json j = query::advise_json(in, r);
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
}  // namespace bb::advise_cli

namespace bb {
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
    code = advise_cli::advise_run(argc, argv, mpi);
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
  return mpi ? mpi::finalize(code) : code;
}

}  // namespace bb
