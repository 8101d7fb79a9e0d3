// `bubblebench run` (design §5.1): every configuration of the sweep end to end, in one MPI
// launch. Phases:
//   1. MPI_Init, then every rank parses and validates the same arguments and builds (generate,
//      validate, lower) every configuration deterministically. Any error there, and any
//      failure to make the backend or transport, is agreed with two non-blocking allreduces;
//      one rank prints one line and every rank exits with the same code, before any
//      point-to-point traffic.
//   2. Per configuration: an Executor on this rank; with --check, one extra untimed step whose
//      gradients (before any optimizer update) rank 0 compares with the sequential
//      reference; then --warmup + --iters steps, each followed by the DualPipe gradient sum
//      and the optimizer; the records go to rank 0 (Igatherv), which computes the summary.
//   3. Rank 0 prints the table (or JSON). Exit 1 if a check failed.
// Exceptions inside a run abort the job (MPI_Abort) with the matching exit code; the
// watchdog's TimeoutError exits 3.
#include "cli/run.hpp"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/list.hpp"
#include "cli/table.hpp"
#include "common/error.hpp"
#include "model/closed_form.hpp"
#include "runtime/executor.hpp"
#include "runtime/factory.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/reference.hpp"
#include "runtime/wait.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"
#include "sim/sim.hpp"

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace bb {
namespace {

using json = nlohmann::json;

struct RunOptions {
  std::string schedules = "1f1b";
  std::string M = "8";
  std::string v = "1";
  int P = 0;  // 0: not given (P is the world size)
  std::string backend = "cpu";
  std::string transport;  // default: by backend
  std::string compute = "gemm";
  std::string t_f = "1ms", t_b = "2ms", t_w = "0", t_fb;
  int hidden = 64, layers = 1, mb_size = 8;
  std::string dtype = "fp32";
  int warmup = 1, iters = 5;
  std::string sync = "barrier";
  bool check = false;
  std::string recompute = "off";
  double timeout = 600;
  std::string format = "table";
  std::string optimizer = "sgd";
  double lr = 1e-3;
  std::uint64_t seed = 1234;
  std::string out, trace;
  bool resume = false;
  int drop_sends_rank = -1;     // testing the watchdog
  int perturb_grads_rank = -1;  // testing a failing --check
  bool debug_records = false;   // every timed action's record on stderr
};

// One configuration of the sweep.
struct RunConfig {
  std::string schedule;  // name or csv:FILE
  std::shared_ptr<const Schedule> lowered;
  bool recompute = false;
};

// An error of phase 1: exit code and one line.
struct SetupError {
  int code = 0;
  std::string line;
};

[[noreturn]] void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// --- Phase 1: arguments and configurations -------------------------------------------------

void add_options(CLI::App& app, RunOptions& o) {
  app.add_option("--schedule,-s", o.schedules,
                 "Schedule name(s), comma-separated: naive gpipe 1f1b interleaved zb-h1 zb-h2 "
                 "zb-v dualpipe dualpipev (or all), or csv:FILE")
      ->capture_default_str();
  app.add_option("-M", o.M, "Micro-batches per step (LIST: 4,8 or 4:64:x2 or 2:8:2)")
      ->capture_default_str();
  app.add_option("-v", o.v, "Chunks per rank for interleaved (LIST)")->capture_default_str();
  app.add_option("-P", o.P, "Pipeline ranks: must equal the MPI world size (optional)");
  app.add_option("--backend", o.backend, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--transport", o.transport, "mpi or nccl (default: mpi for cpu, nccl for cuda)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
  app.add_option("--compute", o.compute, "gemm (the MLP math) or synthetic (timed waits)")
      ->check(CLI::IsMember({"gemm", "synthetic"}))
      ->capture_default_str();
  app.add_option("--t-f", o.t_f, "Synthetic F time of one stage (2ms, 500us, or seconds)")
      ->capture_default_str();
  app.add_option("--t-b", o.t_b, "Synthetic B time of one stage")->capture_default_str();
  app.add_option("--t-w", o.t_w, "Synthetic W time of one stage (0: B is the whole backward)")
      ->capture_default_str();
  app.add_option("--t-fb", o.t_fb, "Synthetic overlapped F&B pair time (default: the sum)");
  app.add_option("--hidden", o.hidden, "Hidden width h")->capture_default_str();
  app.add_option("--layers", o.layers, "MLP blocks per chunk")->capture_default_str();
  app.add_option("--mb-size", o.mb_size, "Rows (tokens) of a micro-batch")->capture_default_str();
  app.add_option("--dtype", o.dtype, "fp32 or bf16")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed steps per configuration")->capture_default_str();
  app.add_option("--iters", o.iters, "Timed steps per configuration")->capture_default_str();
  app.add_option("--sync", o.sync, "barrier (ranks aligned per step) or none (back to back)")
      ->check(CLI::IsMember({"barrier", "none"}))
      ->capture_default_str();
  app.add_flag("--check", o.check,
               "Compare loss and gradients of one extra step with the sequential reference");
  app.add_flag("--recompute{on}", o.recompute,
               "Recompute activations in the backward: --recompute (on), --recompute=off|on|both")
      ->check(CLI::IsMember({"off", "on", "both"}));
  app.add_option("--timeout", o.timeout, "Watchdog: seconds any single wait may take")
      ->capture_default_str();
  app.add_option("--format", o.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "sgd or adam")
      ->check(CLI::IsMember({"sgd", "adam"}))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "Learning rate")->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of parameters, inputs and targets")->capture_default_str();
  app.add_option("--out", o.out, "HDF5 results file (not yet)");
  app.add_flag("--resume", o.resume, "Skip runs already in --out (not yet)");
  app.add_option("--trace", o.trace, "Chrome-trace directory (not yet)");
  app.add_flag("--debug-records", o.debug_records,
               "Diagnostics: print every timed action (host clock, ms) on stderr")
      ->group("");  // hidden
  app.add_option("--debug-perturb-grads", o.perturb_grads_rank,
                 "Testing: this rank perturbs the gradients it reports to --check")
      ->group("");  // hidden
  app.add_option("--debug-drop-sends", o.drop_sends_rank,
                 "Testing: this rank skips its sends (the watchdog must fire)")
      ->group("");  // hidden
}

std::vector<double> durations_of(const std::string& text, const char* what) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_duration(item, what, true));
  if (out.size() != 1) throw ConfigError(std::string(what) + " takes one duration");
  return out;
}

ExecutorConfig executor_config(const RunOptions& o) {
  ExecutorConfig c;
  c.hidden = o.hidden;
  c.layers = o.layers;
  c.mb_size = o.mb_size;
  c.seed = o.seed;
  c.synthetic = o.compute == "synthetic";
  c.t_f = durations_of(o.t_f, "--t-f")[0];
  c.t_b = durations_of(o.t_b, "--t-b")[0];
  c.t_w = durations_of(o.t_w, "--t-w")[0];
  c.t_fb = o.t_fb.empty() ? -1.0 : durations_of(o.t_fb, "--t-fb")[0];
  c.optimizer.kind =
      o.optimizer == "adam" ? OptimizerConfig::Kind::kAdam : OptimizerConfig::Kind::kSgd;
  c.optimizer.lr = static_cast<float>(o.lr);
  c.timeout_s = o.timeout;
  return c;
}

void validate_options(const RunOptions& o, int world) {
  if (!o.out.empty()) throw ConfigError("--out: HDF5 output is not built yet");
  if (o.resume) throw ConfigError("--resume: HDF5 output is not built yet");
  if (!o.trace.empty()) throw ConfigError("--trace: Chrome traces of runs are not built yet");
  if (o.P != 0 && o.P != world)
    throw ConfigError("-P " + std::to_string(o.P) + " does not match the MPI world size " +
                      std::to_string(world) + " (run takes P from mpiexec -n / srun -n)");
  if (o.hidden < 1 || o.hidden > 65536) throw ConfigError("--hidden must be 1..65536");
  if (o.layers < 1 || o.layers > 4096) throw ConfigError("--layers must be 1..4096");
  if (o.mb_size < 1 || o.mb_size > 1 << 20) throw ConfigError("--mb-size must be 1..1048576");
  if (o.warmup < 0 || o.warmup > 100000) throw ConfigError("--warmup must be 0..100000");
  if (o.iters < 1 || o.iters > 100000) throw ConfigError("--iters must be 1..100000");
  if (o.sync == "none" && o.iters < 2)
    throw ConfigError("--sync none measures the period between steps: needs --iters >= 2");
  if (!(o.timeout > 0)) throw ConfigError("--timeout must be > 0 seconds");
  if (!(o.lr >= 0) || !std::isfinite(o.lr)) throw ConfigError("--lr must be >= 0");
  if (o.check && o.compute == "synthetic")
    throw ConfigError("--check needs --compute gemm (synthetic compute has no gradients)");
  std::string why;
  if (!backend_supports_dtype(o.backend, o.dtype, &why)) throw ConfigError(why);
  if (o.check && o.dtype != "fp32")
    throw ConfigError("--check compares fp32 gradients (1e-5): use --dtype fp32");
  (void)executor_config(o);  // the durations parse
}

// Every combination of the lists; skipped combinations are reported by rank 0, one line each.
std::vector<RunConfig> expand(const RunOptions& o, int world, bool print) {
  auto names = parse_name_list(o.schedules, "--schedule");
  if (names.size() == 1 && names[0] == "all") names = schedule_names();
  const auto Ms = parse_int_list(o.M, "-M");
  const auto vs = parse_int_list(o.v, "-v");
  std::vector<bool> recompute_modes;
  if (o.recompute != "on") recompute_modes.push_back(false);
  if (o.recompute != "off") recompute_modes.push_back(true);
  const bool sweep = names.size() * Ms.size() * vs.size() > 1;

  std::vector<RunConfig> out;
  std::string last_error;
  std::vector<std::string> skipped;
  auto add = [&](const std::string& name, Schedule s) {
    validate_or_throw(s);
    auto lowered = std::make_shared<const Schedule>(s.lowered ? std::move(s) : lower(std::move(s)));
    for (bool rc : recompute_modes) out.push_back({name, lowered, rc});
  };
  for (const auto& name : names) {
    if (name.rfind("csv:", 0) == 0) {
      Schedule s = load_csv_file(name.substr(4));
      if (s.P != world)
        throw ConfigError(name + " has P=" + std::to_string(s.P) + " but the MPI world size is " +
                          std::to_string(world));
      add(name, std::move(s));
      continue;
    }
    bool known = false;
    for (const auto& n : schedule_names()) known = known || n == name;
    if (!known) generate(name, {});  // throws the one-line "unknown schedule" error
    for (int M : Ms)
      for (int v : schedule_takes_v(name) ? vs : std::vector<int>{0}) {
        const ScheduleParams p{world, M, v == 0 ? 1 : v};
        try {
          add(name, generate(name, p));
        } catch (const ConfigError& e) {
          last_error = e.what();
          skipped.push_back(e.what());
        }
      }
  }
  // Nothing to run: one line (the last reason). Otherwise one `skip:` line per rejection.
  if (out.empty()) throw ConfigError(last_error.empty() ? "no configuration to run" : last_error);
  if (sweep && print)
    for (const auto& why : skipped) std::cerr << "skip: " << why << "\n";
  return out;
}

int local_rank() {
  for (const char* var : {"MPI_LOCALRANKID", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  MPI_Comm node;
  BB_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const int r = mpi::rank(node);
  MPI_Comm_free(&node);
  return r;
}

// --- Phase 2: one configuration -------------------------------------------------------------

// Per-rank record of a configuration, packed as doubles for the gather:
//   [steps, then per step: origin, first_start, last_end, busy, wait, comm, actions]
//   [peak_units, peak_bytes, param_bytes, peak_device_bytes]
//   [per kind F, B, W, BW, FB: count, then the durations in stage units (seconds / fraction)]
constexpr int kStepFields = 7;
constexpr int kKinds = 5;

// origin: the step's origin on the rank's host clock (seconds); other times are relative to it.
struct StepSummary {
  double origin, first_start, last_end, busy, wait, comm, actions;
};

struct RankSummary {
  std::vector<StepSummary> steps;
  double peak_units = 0, peak_bytes = 0, param_bytes = 0, peak_device_bytes = 0;
  std::vector<double> durations[kKinds];
};

std::vector<double> pack(const RankSummary& s) {
  std::vector<double> out;
  out.push_back(static_cast<double>(s.steps.size()));
  for (const StepSummary& st : s.steps)
    out.insert(out.end(),
               {st.origin, st.first_start, st.last_end, st.busy, st.wait, st.comm, st.actions});
  out.insert(out.end(), {s.peak_units, s.peak_bytes, s.param_bytes, s.peak_device_bytes});
  for (const auto& d : s.durations) {
    out.push_back(static_cast<double>(d.size()));
    out.insert(out.end(), d.begin(), d.end());
  }
  return out;
}

RankSummary unpack(const std::vector<double>& in) {
  RankSummary s;
  std::size_t i = 0;
  const auto n = static_cast<std::size_t>(in.at(i++));
  for (std::size_t k = 0; k < n; ++k, i += kStepFields)
    s.steps.push_back({in.at(i), in.at(i + 1), in.at(i + 2), in.at(i + 3), in.at(i + 4),
                       in.at(i + 5), in.at(i + 6)});
  s.peak_units = in.at(i++);
  s.peak_bytes = in.at(i++);
  s.param_bytes = in.at(i++);
  s.peak_device_bytes = in.at(i++);
  for (auto& d : s.durations) {
    const auto m = static_cast<std::size_t>(in.at(i++));
    d.assign(in.begin() + static_cast<std::ptrdiff_t>(i),
             in.begin() + static_cast<std::ptrdiff_t>(i + m));
    i += m;
  }
  return s;
}

struct CheckOutcome {
  std::string status = "skipped";  // pass | fail | skipped
  double max_rel_error = 0;
  std::string message;
};

// The extra step of --check: gradients before any optimizer update, gathered to rank 0.
CheckOutcome run_check(Executor& ex, Backend& backend, const Schedule& s, const RunOptions& o,
                       MPI_Comm comm) {
  mpi::barrier(comm, o.timeout);
  ex.run_step(nullptr);
  ex.sum_partner_gradients();
  GradientSet mine = ex.gradients();
  if (o.perturb_grads_rank == mpi::rank(comm))
    for (LayerGrads& g : mine.layers) g.dw1[0] += 1.0f;
  std::vector<float> packed;
  for (const LayerGrads& g : mine.layers) {
    packed.push_back(static_cast<float>(g.layer));
    packed.insert(packed.end(), g.dw1.begin(), g.dw1.end());
    packed.insert(packed.end(), g.dw2.begin(), g.dw2.end());
  }
  const auto grads = mpi::gather(packed, 0, comm, o.timeout);
  const auto losses = mpi::gather(std::vector<double>{ex.loss_sum()}, 0, comm, o.timeout);
  ex.zero_grads();
  ex.reset_loss();

  CheckOutcome out;
  int pass = 0;
  if (mpi::rank(comm) == 0) {
    GradientSet got;
    double loss = 0;
    for (const auto& l : losses) loss += l.at(0);
    got.loss = loss;
    const std::size_t w =
        4 * static_cast<std::size_t>(o.hidden) * static_cast<std::size_t>(o.hidden);
    for (const auto& r : grads)
      for (std::size_t i = 0; i + 2 * w + 1 <= r.size(); i += 2 * w + 1) {
        LayerGrads g;
        g.layer = static_cast<int>(r[i]);
        g.dw1.assign(r.begin() + static_cast<std::ptrdiff_t>(i + 1),
                     r.begin() + static_cast<std::ptrdiff_t>(i + 1 + w));
        g.dw2.assign(r.begin() + static_cast<std::ptrdiff_t>(i + 1 + w),
                     r.begin() + static_cast<std::ptrdiff_t>(i + 1 + 2 * w));
        got.layers.push_back(std::move(g));
      }
    ReferenceConfig rc;
    rc.hidden = o.hidden;
    rc.rows = o.mb_size;
    rc.num_layers = ex.num_layers_total();
    rc.num_microbatches = s.M;
    rc.seed = o.seed;
    const GradientSet ref = run_reference(backend, rc);
    CompareResult cmp = compare(ref, got, 1e-5);
    if (cmp.pass && static_cast<int>(got.layers.size()) != rc.num_layers) {
      cmp.pass = false;
      cmp.message = "gradients of " + std::to_string(got.layers.size()) +
                    " layers arrived, the model has " + std::to_string(rc.num_layers);
    }
    pass = cmp.pass ? 1 : 0;
    out.max_rel_error = cmp.max_rel_error;
    out.message = cmp.message;
  }
  mpi::broadcast(pass, 0, comm, o.timeout);
  out.status = pass ? "pass" : "fail";
  return out;
}

std::string label(const RunConfig& c) {
  const Schedule& s = *c.lowered;
  return c.schedule + " P=" + std::to_string(s.P) + " M=" + std::to_string(s.M) +
         " v=" + std::to_string(s.v) + (c.recompute ? " recompute" : "");
}

// Runs one configuration on every rank; returns its JSON summary on rank 0 (null elsewhere).
json run_config(const RunConfig& c, const RunOptions& o, Backend& backend, Transport& transport,
                BufferPool& pool, MPI_Comm comm, bool shared_clock, bool* check_failed) {
  const Schedule& s = *c.lowered;
  ExecutorConfig ec = executor_config(o);
  ec.recompute = c.recompute;
  ec.drop_sends = o.drop_sends_rank == transport.rank();
  backend.reset_peak_allocated();  // peak_device_bytes: this configuration's
  Executor ex(s, backend, transport, pool, ec);

  CheckOutcome check;
  if (o.check) {
    check = run_check(ex, backend, s, o, comm);
    if (check.status == "fail") *check_failed = true;
  }

  RankSummary mine;
  StepRecord rec;
  const bool barrier = o.sync == "barrier";
  for (int step = 0; step < o.warmup + o.iters; ++step) {
    if (barrier || step == 0) mpi::barrier(comm, o.timeout);
    if (step == o.warmup) ex.reset_peaks();
    ex.run_step(&rec);
    ex.sum_partner_gradients();
    ex.optimizer_step();
    ex.zero_grads();
    ex.reset_loss();
    if (step < o.warmup) continue;
    if (o.debug_records)
      for (const ActionRecord& a : rec.actions)
        std::fprintf(
            stderr,
            "record rank %d step %d %s chunk %d mb %u ready %.4f start %.4f end %.4f wait %.4f\n",
            transport.rank(), step, record_kind_name(a.kind), a.chunk, a.mb,
            (rec.origin + a.ready) * 1e3, (rec.origin + a.start) * 1e3, (rec.origin + a.end) * 1e3,
            a.wait * 1e3);
    mine.steps.push_back({rec.origin, rec.first_start, rec.last_end, rec.busy, rec.wait, rec.comm,
                          static_cast<double>(rec.num_actions)});
    for (const ActionRecord& a : rec.actions)
      mine.durations[static_cast<int>(a.kind)].push_back((a.end - a.start) / a.fraction);
  }
  mine.peak_units = ex.peak_activation_units();
  mine.peak_bytes = static_cast<double>(ex.peak_activation_bytes());
  mine.param_bytes = static_cast<double>(ex.param_bytes());
  mine.peak_device_bytes = static_cast<double>(backend.peak_allocated_bytes());
  const auto all = mpi::gather(pack(mine), 0, comm, o.timeout);
  if (transport.rank() != 0) return nullptr;

  // --- Rank 0: the summary -------------------------------------------------------------
  const int P = s.P;
  std::vector<RankSummary> ranks;
  for (const auto& r : all) ranks.push_back(unpack(r));
  const std::size_t n = ranks[0].steps.size();
  // Per step: the makespan T from the first compute start to the last compute end over all
  // ranks. With one host clock for all ranks (one machine), on that clock: the barrier's exit
  // skew does not count. Otherwise each rank's times count from its own barrier exit.
  // With --sync none the step ends on the common time line give the period.
  std::vector<double> step_time, fraction, overhead, ends;
  for (std::size_t k = 0; k < n; ++k) {
    double first = 1e300, last = -1e300, busy = 0, over = 0, actions = 0, end = -1e300;
    for (const RankSummary& r : ranks) {
      const StepSummary& st = r.steps[k];
      const double shift =
          shared_clock ? st.origin - ranks[0].steps[0].origin : st.origin - r.steps[0].origin;
      first = std::min(first, shared_clock ? shift + st.first_start : 0.0);
      last = std::max(last, shared_clock ? shift + st.last_end : st.last_end);
      end = std::max(end, shift + st.last_end);
      busy += st.busy;
      over += st.last_end - st.busy - st.wait - st.comm;
      actions += st.actions;
    }
    const double T = last - first;
    step_time.push_back(T);
    ends.push_back(end);
    fraction.push_back(T > 0 ? (P * T - busy) / (P * T) : 0);
    overhead.push_back(actions > 0 ? over / actions : 0);
  }
  std::vector<double> period, fraction_steady;
  for (std::size_t k = 1; k < n; ++k) {
    const double p = ends[k] - ends[k - 1];
    double busy = 0;
    for (const RankSummary& r : ranks) busy += r.steps[k].busy;
    period.push_back(p);
    fraction_steady.push_back(p > 0 ? (P * p - busy) / (P * p) : 0);
  }

  std::vector<double> kind_median(kKinds);
  for (int k = 0; k < kKinds; ++k) {
    std::vector<double> d;
    for (const RankSummary& r : ranks)
      d.insert(d.end(), r.durations[k].begin(), r.durations[k].end());
    kind_median[static_cast<std::size_t>(k)] = median(d);
  }
  const auto has = [&](RecordKind k) { return !std::isnan(kind_median[static_cast<int>(k)]); };
  const auto med = [&](RecordKind k) { return kind_median[static_cast<int>(k)]; };
  // Stage-unit times for the simulator and the closed form: B and W where the backward is
  // split somewhere in the schedule, else the fused BW as B with W = 0.
  const double t_f = has(RecordKind::F) ? med(RecordKind::F) : 0;
  double t_b = 0, t_w = 0;
  if (has(RecordKind::B)) {
    t_b = med(RecordKind::B);
    t_w = has(RecordKind::W) ? med(RecordKind::W) : 0;
  } else if (has(RecordKind::BW)) {
    t_b = med(RecordKind::BW);
  }
  const double t_fb = has(RecordKind::FB) ? med(RecordKind::FB) : -1;

  SimConfig sc;
  sc.t_f = {t_f};
  sc.t_b = {t_b};
  sc.t_w = {t_w};
  sc.t_fb = t_fb;
  const SimResult sim = simulate(s, sc);
  ModelInput mi;
  mi.schedule = c.schedule;
  mi.P = P;
  mi.M = s.M;
  mi.v = s.v;
  mi.t_f = t_f;
  mi.t_b = t_b;
  mi.t_w = t_w;
  mi.t_fb = t_fb;
  const ModelResult model = closed_form(mi);

  json j;
  j["schedule"] = c.schedule;
  j["P"] = P;
  j["M"] = s.M;
  j["v"] = s.v;
  j["recompute"] = c.recompute;
  j["backend"] = o.backend;
  j["transport"] = std::string(transport.name());
  j["compute"] = o.compute;
  j["hidden"] = o.hidden;
  j["layers"] = o.layers;
  j["mb_size"] = o.mb_size;
  j["dtype"] = o.dtype;
  j["warmup"] = o.warmup;
  j["iters"] = o.iters;
  j["sync"] = o.sync;
  j["step_time_s"] = step_time;
  j["makespan_s"] = median(step_time);
  j["bubble_fraction_measured"] = barrier ? median(fraction) : median(fraction_steady);
  if (!barrier) j["period_s"] = median(period);
  j["bubble_fraction_sim"] = barrier ? sim.single.bubble_fraction : sim.steady.bubble_fraction;
  if (model.applies)
    j["bubble_fraction_model"] =
        barrier ? model.single.bubble_fraction : model.steady.bubble_fraction;
  else
    j["bubble_fraction_model"] = nullptr;
  if (!model.applies) j["model_reason"] = model.reason;
  auto time_or_null = [](bool present, double x) { return present ? json(x) : json(nullptr); };
  j["t_f_s"] = time_or_null(has(RecordKind::F), t_f);
  j["t_b_s"] = time_or_null(has(RecordKind::B) || has(RecordKind::BW), t_b);
  j["t_w_s"] = time_or_null(has(RecordKind::B), t_w);
  j["t_fb_s"] = time_or_null(has(RecordKind::FB), t_fb);
  std::vector<double> busy, wait, comm_s, units, bytes, params, device;
  for (const RankSummary& r : ranks) {
    std::vector<double> b, w, cm;
    for (const StepSummary& st : r.steps) {
      b.push_back(st.busy);
      w.push_back(st.wait);
      cm.push_back(st.comm);
    }
    busy.push_back(median(b));
    wait.push_back(median(w));
    comm_s.push_back(median(cm));
    units.push_back(r.peak_units);
    bytes.push_back(r.peak_bytes);
    params.push_back(r.param_bytes);
    device.push_back(r.peak_device_bytes);
  }
  j["busy_s"] = busy;
  j["wait_s"] = wait;
  j["comm_s"] = comm_s;
  j["peak_activation_bytes"] = bytes;
  j["peak_activations"] = units;
  j["peak_activations_schedule"] = peak_activations(s);
  j["param_bytes"] = params;
  j["peak_device_bytes"] = device;
  j["clock"] = shared_clock ? "shared" : "per-rank";
  j["overhead_us_per_action"] = median(overhead) * 1e6;
  j["check"] = check.status;
  if (check.status != "skipped") {
    j["check_max_rel_error"] = check.max_rel_error;
    j["check_message"] = check.message;
  }
  return j;
}

// --- Output ----------------------------------------------------------------------------------

std::string num(const json& x, double scale = 1, int prec = 4) {
  return x.is_number() ? fmt(x.get<double>() * scale, prec) : "n/a";
}

void print_summary(const json& rows, bool steady) {
  const std::vector<std::string> cols = {"schedule",
                                         "P",
                                         "M",
                                         "v",
                                         "recompute",
                                         steady ? "period_ms" : "makespan_ms",
                                         "measured",
                                         "sim",
                                         "model",
                                         "peak_act",
                                         "peak_act_sched",
                                         "peak_act_MiB",
                                         "check"};
  std::vector<std::vector<std::string>> table;
  for (const json& j : rows) {
    double pu = 0, ps = 0, pb = 0;
    for (const auto& x : j["peak_activations"]) pu = std::max(pu, x.get<double>());
    for (const auto& x : j["peak_activations_schedule"]) ps = std::max(ps, x.get<double>());
    for (const auto& x : j["peak_activation_bytes"]) pb = std::max(pb, x.get<double>());
    table.push_back({j["schedule"].get<std::string>(), std::to_string(j["P"].get<int>()),
                     std::to_string(j["M"].get<int>()), std::to_string(j["v"].get<int>()),
                     j["recompute"].get<bool>() ? "on" : "off",
                     num(steady ? j["period_s"] : j["makespan_s"], 1e3),
                     num(j["bubble_fraction_measured"]), num(j["bubble_fraction_sim"]),
                     num(j["bubble_fraction_model"]), fmt(pu), fmt(ps), fmt(pb / (1 << 20)),
                     j["check"].get<std::string>()});
  }
  print_table(std::cout, cols, table);
  std::cout << "measured/sim/model: bubble fraction "
            << (steady ? "(steady state, period)" : "(single step, makespan)")
            << "; peak_act: peak live activations per rank (max over ranks) in micro-batch-stage "
               "units, runtime vs schedule\n";
  for (const json& j : rows)
    if (j["check"] == "fail")
      std::cout << "check failed: " << j["schedule"].get<std::string>() << " M=" << j["M"]
                << " v=" << j["v"] << ": " << j["check_message"].get<std::string>() << "\n";
}

int run_all(int argc, char** argv) {
  const int world = mpi::size(MPI_COMM_WORLD);
  const int me = world_rank();
  RunOptions o;
  CLI::App app{"bubblebench run: every schedule end to end over MPI (start under mpiexec -n P)",
               "bubblebench run"};
  add_options(app, o);

  SetupError err;
  std::vector<RunConfig> configs;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transport> transport;
  MPI_Comm p2p = MPI_COMM_NULL, coll = MPI_COMM_NULL;
  bool help = false;
  try {
    try {
      app.parse(argc - 1, argv + 1);
    } catch (const CLI::CallForHelp&) {
      help = true;
    } catch (const CLI::ParseError& e) {
      throw ConfigError(e.what() + std::string(" (see --help)"));
    }
    if (help) {
      if (me == 0) std::cout << app.help();
      return kExitOk;
    }
    validate_options(o, world);
    configs = expand(o, world, me == 0);
  } catch (const ConfigError& e) {
    err = {kExitConfig, std::string("bubblebench: error: ") + e.what()};
  } catch (const ScheduleError& e) {
    err = {kExitCheckFailed, std::string("bubblebench: invalid schedule: ") + e.what()};
  } catch (const IoError& e) {
    err = {kExitIo, std::string("bubblebench: I/O error: ") + e.what()};
  }
  // Agreement after each phase: the worst exit code wins and the lowest rank that has it
  // prints its line. Phases that make collective objects (the NCCL transport) only start
  // when every rank got through the previous one.
  auto agree = [&]() {
    const int code = mpi::allreduce_max(err.code, MPI_COMM_WORLD, o.timeout);
    if (code != 0) {
      const int printer =
          mpi::allreduce_min(err.code == code ? me : world, MPI_COMM_WORLD, o.timeout);
      if (printer == me) std::cerr << err.line << "\n";
    }
    return code;
  };
  auto attempt = [&](auto&& phase) {
    try {
      phase();
    } catch (const ConfigError& e) {
      err = {kExitConfig, std::string("bubblebench: error: ") + e.what()};
    } catch (const std::exception& e) {
      err = {kExitConfig,
             std::string("bubblebench: error: rank ") + std::to_string(me) + ": " + e.what()};
    }
  };
  if (const int code = agree(); code != 0) return code;
  // The communicators and the backend, then the transport (collective, no point-to-point).
  attempt([&] {
    p2p = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
    coll = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
    backend = make_backend(o.backend, o.backend == "cuda" ? local_rank() : 0, o.dtype);
  });
  if (const int code = agree(); code != 0) return code;
  attempt([&] {
    transport = make_transport(o.transport.empty() ? default_transport(o.backend) : o.transport,
                               p2p, *backend);
  });
  if (const int code = agree(); code != 0) {
    transport.reset();
    return code;
  }

  // One host clock for all ranks when they share one machine (steady_clock is system-wide).
  bool shared_clock = true;
  for (const std::string& h : mpi::gather(mpi::processor_name(), 0, coll, o.timeout))
    shared_clock = shared_clock && h == mpi::processor_name();
  BufferPool pool(*backend,
                  static_cast<std::size_t>(o.hidden) * static_cast<std::size_t>(o.mb_size));
  json rows = json::array();
  bool check_failed = false;
  for (const RunConfig& c : configs) {
    json j = run_config(c, o, *backend, *transport, pool, coll, shared_clock, &check_failed);
    if (me == 0) {
      rows.push_back(std::move(j));
      if (configs.size() > 1)
        std::cerr << "done: " << label(c) << " (" << rows.size() << "/" << configs.size() << ")\n";
    }
  }
  mpi::barrier(coll, o.timeout);
  if (me == 0) {
    if (o.format == "json")
      std::cout << rows.dump(2) << "\n";
    else
      print_summary(rows, o.sync == "none");
    std::cout.flush();
  }
  transport.reset();
  MPI_Comm_free(&p2p);
  MPI_Comm_free(&coll);
  return check_failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

int run_main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::cerr << "bubblebench: error: MPI_Init failed\n";
    return kExitConfig;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#if defined(__linux__)
  // Sleeps of ~µs (the waits' backoff, synthetic compute) otherwise overshoot by the default
  // 50 µs timer slack.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  int code = kExitOk;
  const int me = world_rank();
  try {
    code = run_all(argc, argv);
  } catch (const TimeoutError& e) {
    std::cerr << e.what() << "\n";
    abort_job(kExitTimeout);
  } catch (const ConfigError& e) {
    std::cerr << "bubblebench: rank " << me << ": error: " << e.what() << "\n";
    abort_job(kExitConfig);
  } catch (const ScheduleError& e) {
    std::cerr << "bubblebench: rank " << me << ": invalid schedule: " << e.what() << "\n";
    abort_job(kExitCheckFailed);
  } catch (const IoError& e) {
    std::cerr << "bubblebench: rank " << me << ": I/O error: " << e.what() << "\n";
    abort_job(kExitIo);
  } catch (const std::exception& e) {
    std::cerr << "bubblebench: rank " << me << ": error: " << e.what() << "\n";
    abort_job(kExitCheckFailed);
  }
  MPI_Finalize();
  return code;
}

}  // namespace bb
