// Google Benchmark front end: one benchmark per schedule x M x v, each iteration one training
// step of the real pipeline (executor, backend, transport), under mpiexec:
//
//   mpiexec -n 2 build/gbench_pipeline --benchmark_format=json --bb_schedules=gpipe,1f1b
//       --bb_M=4,8 --bb_v=1,2 --bb_compute=synthetic --bb_t=1ms
//
// MPI is initialised before Google Benchmark. Iteration and repetition counts are fixed
// (--bb_iters, --bb_reps) so that all ranks stay in step; an iteration is the training step
// of `run` (harness/step.hpp) and its manual time the step's makespan over all ranks, measured
// as `run` measures it (harness/measure.hpp: rank 0 gathers every rank's own times). Only rank 0
// reports: the others get a null reporter and their --benchmark_out* flags are dropped. Counters:
// measured and closed-form bubble fraction, peak activation bytes (max over ranks) and achieved
// FLOP/s.
#include <benchmark/benchmark.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/list.hpp"
#include "common/error.hpp"
#include "gbench_report.hpp"
#include "harness/measure.hpp"
#include "harness/output.hpp"
#include "harness/provenance.hpp"
#include "harness/step.hpp"
#include "harness/wire.hpp"
#include "model/closed_form.hpp"
#include "runtime/executor.hpp"
#include "runtime/factory.hpp"
#include "runtime/mpi_finalize.hpp"
#include "runtime/mpi_util.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

struct Options {
  std::string schedules = "gpipe,1f1b,zb-h1", M = "4,8", v = "1,2";
  std::string backend = "cpu", transport, compute = "synthetic", t = "1ms";
  int hidden = 64, layers = 1, mb_size = 8, iters = 5, reps = 1;
  double timeout = 300;
};

// A whole positive integer (no sign, no trailing text), else ConfigError naming the flag.
int parse_positive_int(const std::string& text, const std::string& flag) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 1)
    throw ConfigError(flag + ": '" + text + "' is not a positive integer");
  return value;
}

// A whole positive finite number, else ConfigError naming the flag.
double parse_positive_number(const std::string& text, const std::string& flag) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || value <= 0)
    throw ConfigError(flag + ": '" + text + "' is not a positive number");
  return value;
}

// Takes `--bb_name=value` flags out of argv; returns false on an unknown --bb_ flag.
bool take_flags(int* argc, char** argv, Options& o, std::string* bad) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    auto val = [&](const char* name, auto* dst) {
      const std::string p = std::string("--bb_") + name + "=";
      if (a.rfind(p, 0) != 0) return false;
      const std::string v = a.substr(p.size());
      if constexpr (std::is_same_v<std::remove_pointer_t<decltype(dst)>, int>)
        *dst = parse_positive_int(v, p.substr(0, p.size() - 1));
      else if constexpr (std::is_same_v<std::remove_pointer_t<decltype(dst)>, double>)
        *dst = parse_positive_number(v, p.substr(0, p.size() - 1));
      else
        *dst = v;
      return true;
    };
    if (a.rfind("--bb_", 0) == 0) {
      if (!(val("schedules", &o.schedules) || val("M", &o.M) || val("v", &o.v) ||
            val("backend", &o.backend) || val("transport", &o.transport) ||
            val("compute", &o.compute) || val("t", &o.t) || val("hidden", &o.hidden) ||
            val("layers", &o.layers) || val("mb_size", &o.mb_size) || val("iters", &o.iters) ||
            val("reps", &o.reps) || val("timeout", &o.timeout))) {
        *bad = a;
        return false;
      }
      continue;
    }
    argv[out++] = argv[i];
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

// Other ranks: reports nothing, and lists nothing either (--benchmark_list_tests writes to the
// display reporter's stream).
class NullReporter : public benchmark::BenchmarkReporter {
 public:
  NullReporter() {
    SetOutputStream(&null_);
    SetErrorStream(&null_);
  }
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}

 private:
  std::ostream null_{nullptr};
};

// Rank 0: Google Benchmark's own reporter (console, json or csv), with names that say what is
// measured only and finite counters only (gbench_report.hpp). The fixed --bb_iters/--bb_reps
// would add `iterations:N` and `repeats:N` to every name (the library's rule for Iterations()
// and Repetitions()); they are settings, in the context instead, so that runs with other
// settings pair up in compare.py.
class NamingReporter : public gbench::FiniteReporter {
 public:
  using FiniteReporter::FiniteReporter;

 protected:
  void edit(Run& run) const override {
    run.run_name.iterations.clear();
    run.run_name.repetitions.clear();
    FiniteReporter::edit(run);
  }
};

void print_help() {
  benchmark::PrintDefaultHelp();
  std::cout << R"(
Pipeline flags (each --bb_NAME=VALUE; lists as in `bubblebench run`):
  --bb_schedules=LIST  schedules, comma-separated, or `all` (default gpipe,1f1b,zb-h1)
  --bb_M=LIST          micro-batches per step (default 4,8)
  --bb_v=LIST          chunks per rank, for schedules that take v (default 1,2)
  --bb_backend=NAME    cpu or cuda (default cpu)
  --bb_transport=NAME  mpi or nccl (default: the backend's)
  --bb_compute=KIND    synthetic (sleep t per action) or real (GEMMs) (default synthetic)
  --bb_t=DURATION      synthetic time of F, B and W, with a unit: 1ms, 500us (default 1ms)
  --bb_hidden=N        hidden size (default 64)
  --bb_layers=N        layers per chunk (default 1)
  --bb_mb_size=N       micro-batch size (default 8)
  --bb_iters=N         training steps per benchmark, fixed on every rank (default 5)
  --bb_reps=N          repetitions of each benchmark (default 1)
  --bb_timeout=SEC     give up on a step after SEC seconds (default 300)
Names are schedule/P:p/M:m/v:v/hidden:h/layers:l/mb_size:b/manual_time; the settings
(iters, reps, compute, t, backend, transport) are in the context. Run under mpiexec.
)";
}

struct World {
  Options opt;
  MPI_Comm p2p = MPI_COMM_NULL, coll = MPI_COMM_NULL;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<BufferPool> pool;
  int rank = 0, size = 1;
  harness::ClockMode clock = harness::ClockMode::kShared;  // rank 0: from every rank's host
  bool synthetic = true;  // --bb_compute synthetic (else real: the MLP's GEMMs)
};

World* g_world = nullptr;

void run_benchmark(benchmark::State& state, const std::string& name, const Schedule& lowered) {
  World& w = *g_world;
  ExecutorConfig ec;
  ec.hidden = w.opt.hidden;
  ec.layers = w.opt.layers;
  ec.mb_size = w.opt.mb_size;
  ec.synthetic = w.synthetic;
  ec.t_f = ec.t_b = ec.t_w = parse_duration(w.opt.t, "--bb_t", true);
  ec.timeout_s = w.opt.timeout;
  Executor ex(lowered, *w.backend, *w.transport, *w.pool, ec);
  StepRecord rec;
  auto step = [&](StepRecord* r) {
    harness::training_step(ex, r, w.coll,
                           {.barrier = true, .update = true, .timeout_s = w.opt.timeout});
  };
  step(nullptr);  // warm-up: buffers, first-touch
  ex.reset_peaks();
  std::vector<double> fractions;
  for (auto _ : state) {
    step(&rec);
    const auto all =
        mpi::gather(harness::pack_step(harness::step_summary(rec)), 0, w.coll, w.opt.timeout);
    double T = rec.last_end - rec.first_start;
    if (w.rank == 0) {
      std::vector<harness::StepSummary> ranks;
      for (const auto& r : all) ranks.push_back(harness::unpack_step(r));
      const harness::StepBubble b = harness::measure_step(ranks, w.clock);
      T = b.span_s;
      fractions.push_back(b.bubble_fraction);
    }
    state.SetIterationTime(T);
  }
  const auto peaks =
      mpi::gather(std::vector<double>{static_cast<double>(ex.peak_activation_bytes())}, 0, w.coll,
                  w.opt.timeout);
  if (w.rank != 0) return;
  double peak = 0;
  for (const auto& p : peaks) peak = std::max(peak, p[0]);
  double mean_fraction = 0;
  for (double f : fractions) mean_fraction += f / static_cast<double>(fractions.size());
  ModelInput mi;
  mi.schedule = name;
  mi.P = lowered.P;
  mi.M = lowered.M;
  mi.v = lowered.v;
  mi.t_f = mi.t_b = mi.t_w = ec.t_f;
  const ModelResult model = closed_form(mi);
  // GEMM FLOPs of one step: F, B and W each run two b x h x 4h GEMMs per block (design §3),
  // 16·b·h² per block and pass, for every (chunk, micro-batch) pair of every route.
  double pairs = 0;
  for (const Route& r : lowered.routes) pairs += r.length();
  const double flops = ec.synthetic ? 0.0
                                    : 3.0 * 16.0 * ec.mb_size * static_cast<double>(ec.hidden) *
                                          ec.hidden * ec.layers * pairs;
  state.counters["bubble_fraction_measured"] = mean_fraction;
  if (model.applies) state.counters["bubble_fraction_model"] = model.single.bubble_fraction;
  state.counters["peak_activation_bytes"] = peak;
  // FLOPs per step; the library divides by the (manual) time of the iterations. None with
  // synthetic compute, which runs no GEMM.
  if (!ec.synthetic)
    state.counters["flops_per_s"] =
        benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(model.applies ? "" : "no closed form");
}

}  // namespace

// The settings in the context, and one benchmark per configuration, named by what it measures.
void register_benchmarks(
    const World& w,
    const std::vector<std::pair<std::string, std::shared_ptr<const Schedule>>>& configs,
    bool list_only) {
  benchmark::AddCustomContext("world_size", std::to_string(w.size));
  benchmark::AddCustomContext("backend", w.opt.backend);
  benchmark::AddCustomContext("transport", std::string(w.transport->name()));
  benchmark::AddCustomContext("compute", w.opt.compute);
  benchmark::AddCustomContext("t", w.opt.t);
  benchmark::AddCustomContext("iterations", std::to_string(w.opt.iters));
  benchmark::AddCustomContext("repetitions", std::to_string(w.opt.reps));
  for (const auto& [name, lowered] : configs) {
    // What is measured, and only that: the schedule, P, M, the v it runs with and the sizes.
    const std::string full =
        name + "/P:" + std::to_string(lowered->P) + "/M:" + std::to_string(lowered->M) +
        "/v:" + std::to_string(lowered->v) + "/hidden:" + std::to_string(w.opt.hidden) +
        "/layers:" + std::to_string(w.opt.layers) + "/mb_size:" + std::to_string(w.opt.mb_size);
    auto* b = benchmark::RegisterBenchmark(full.c_str(),
                                           [name = name, lowered = lowered](benchmark::State& s) {
                                             run_benchmark(s, name, *lowered);
                                           });
    b->UseManualTime()->Unit(benchmark::kMillisecond);
    if (!list_only) b->Iterations(w.opt.iters);
    if (w.opt.reps > 1 && !list_only) b->Repetitions(w.opt.reps);
  }
}

}  // namespace bb

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  bb::World world;
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.size);
  // Only rank 0 writes files: drop --benchmark_out* elsewhere.
  std::vector<char*> args;
  bool help = false;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0))
      help = true;
    if (world.rank == 0 || std::strncmp(argv[i], "--benchmark_out", 15) != 0)
      args.push_back(argv[i]);
  }
  args.push_back(nullptr);
  if (help) {
    if (world.rank == 0) bb::print_help();
    return bb::mpi::finalize(0);
  }
  // Read before Initialize() takes them out of args.
  const std::string format = bb::gbench::flag_value(args, "benchmark_format", "console");
  const std::string out_format = bb::gbench::flag_value(args, "benchmark_out_format", "json");
  const std::string out_file = bb::gbench::flag_value(args, "benchmark_out", "");
  // Listing runs nothing: without the fixed counts the library lists the names it reports.
  const bool list_only = bb::gbench::flag_value(args, "benchmark_list_tests", "false") != "false";
  const bool colour = isatty(STDOUT_FILENO) != 0 &&
                      bb::gbench::flag_value(args, "benchmark_color", "auto") != "false";
  int n = static_cast<int>(args.size()) - 1;
  std::string bad;
  int code = 0;
  // Every configuration the lists name and the schedules accept, lowered (the same on every
  // rank); the ones a schedule refuses are skipped with one line each, as `run` does.
  std::vector<std::pair<std::string, std::shared_ptr<const bb::Schedule>>> configs;
  std::vector<std::string> lines;
  try {
    if (!bb::take_flags(&n, args.data(), world.opt, &bad))
      throw bb::ConfigError("unknown flag " + bad);
    const auto Ms = bb::parse_int_list(world.opt.M, "--bb_M");
    const auto vs = bb::parse_int_list(world.opt.v, "--bb_v");
    // A bare number would mean seconds (`--bb_t=1`: 1 s per action): ambiguous, refused.
    if (bb::parse_duration(world.opt.t, "--bb_t", true) != 0 && !world.opt.t.empty() &&
        (std::isdigit(static_cast<unsigned char>(world.opt.t.back())) != 0 ||
         world.opt.t.back() == '.'))
      throw bb::ConfigError("--bb_t: '" + world.opt.t + "' needs a unit: s, ms, us or ns");
    world.synthetic = world.opt.compute == "synthetic";
    if (!world.synthetic && world.opt.compute != "real")
      throw bb::ConfigError("--bb_compute: '" + world.opt.compute +
                            "' is neither synthetic nor real");
    const auto backend = bb::enum_of<bb::BackendKind>(world.opt.backend);
    if (!backend)
      throw bb::ConfigError("--bb_backend: '" + world.opt.backend + "' is neither cpu nor cuda");
    const auto transport = world.opt.transport.empty()
                               ? std::optional(bb::default_transport(*backend))
                               : bb::enum_of<bb::TransportKind>(world.opt.transport);
    if (!transport)
      throw bb::ConfigError("--bb_transport: '" + world.opt.transport +
                            "' is neither mpi nor nccl");
    (void)bb::gbench::make_reporter(format, false);
    (void)bb::gbench::make_reporter(out_format, false);
    bb::ScheduleSweep sweep =
        bb::expand_schedules(world.opt.schedules, world.size, Ms, vs);  // unknown: ConfigError
    const bool several = bb::sweep_combinations(world.opt.schedules, Ms, vs) > 1;
    if (several)
      for (const auto& why : sweep.skipped) lines.push_back("skip: " + why);
    for (std::string note : sweep.notes) {  // the sweep's words are `run`'s: -v is --bb_v here
      if (const auto at = note.find(": -v "); at != std::string::npos)
        note.replace(at, 5, ": --bb_v ");
      lines.push_back("note: " + note);
    }
    for (auto& [name, s] : sweep.schedules)
      configs.emplace_back(name, std::make_shared<const bb::Schedule>(bb::lower(s)));
    world.p2p = bb::mpi::duplicate(MPI_COMM_WORLD, world.opt.timeout);
    world.coll = bb::mpi::duplicate(MPI_COMM_WORLD, world.opt.timeout);
    world.backend = bb::make_backend(*backend, 0);
    world.transport = bb::make_transport(*transport, world.p2p, *world.backend, world.opt.timeout);
    world.clock = bb::harness::clock_of_hosts(
        bb::mpi::gather(bb::harness::host_name(), 0, world.coll, world.opt.timeout));
    world.pool = std::make_unique<bb::BufferPool>(
        *world.backend, static_cast<std::size_t>(world.opt.hidden) * world.opt.mb_size);
  } catch (const std::exception& e) {
    if (world.rank == 0) bb::harness::say(std::string("gbench_pipeline: error: ") + e.what());
    code = bb::kExitConfig;
  }
  if (code != 0) return bb::mpi::finalize(code);
  if (world.rank == 0)
    for (const auto& line : lines) bb::harness::say("gbench_pipeline: " + line);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) {
    return bb::mpi::finalize(bb::kExitConfig);
  }
  bb::g_world = &world;
  bb::register_benchmarks(world, configs, list_only);
  if (world.rank == 0) {
    bb::NamingReporter display(bb::gbench::make_reporter(format, colour));
    if (out_file.empty()) {
      benchmark::RunSpecifiedBenchmarks(&display);
    } else {
      bb::NamingReporter file(bb::gbench::make_reporter(out_format, false));
      benchmark::RunSpecifiedBenchmarks(&display, &file);
    }
  } else {
    bb::NullReporter null;
    benchmark::RunSpecifiedBenchmarks(&null);
  }
  benchmark::Shutdown();
  world.pool.reset();
  world.transport.reset();
  world.backend.reset();
  MPI_Comm_free(&world.p2p);
  MPI_Comm_free(&world.coll);
  return bb::mpi::finalize(0);
}
