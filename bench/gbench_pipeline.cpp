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

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cli/list.hpp"
#include "common/error.hpp"
#include "harness/measure.hpp"
#include "harness/provenance.hpp"
#include "harness/step.hpp"
#include "harness/wire.hpp"
#include "model/closed_form.hpp"
#include "runtime/executor.hpp"
#include "runtime/factory.hpp"
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
        *dst = std::stoi(v);
      else if constexpr (std::is_same_v<std::remove_pointer_t<decltype(dst)>, double>)
        *dst = std::stod(v);
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

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

struct World {
  Options opt;
  MPI_Comm p2p = MPI_COMM_NULL, coll = MPI_COMM_NULL;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<BufferPool> pool;
  int rank = 0, size = 1;
  harness::ClockMode clock = harness::ClockMode::kShared;  // rank 0: from every rank's host
};

World* g_world = nullptr;

void run_benchmark(benchmark::State& state, const std::string& name) {
  World& w = *g_world;
  const ScheduleParams params{w.size, static_cast<int>(state.range(0)),
                              static_cast<int>(state.range(1))};
  Schedule lowered;
  try {
    lowered = lower(generate(name, params));  // deterministic: every rank agrees
  } catch (const ConfigError& e) {
    state.SkipWithError(e.what());
    for (auto _ : state) {
    }
    return;
  }
  ExecutorConfig ec;
  ec.hidden = w.opt.hidden;
  ec.layers = w.opt.layers;
  ec.mb_size = w.opt.mb_size;
  ec.synthetic = w.opt.compute == "synthetic";
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
  std::vector<double> fractions, spans;
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
      spans.push_back(T);
    }
    state.SetIterationTime(T);
  }
  const auto peaks =
      mpi::gather(std::vector<double>{static_cast<double>(ex.peak_activation_bytes())}, 0, w.coll,
                  w.opt.timeout);
  if (w.rank != 0) return;
  double peak = 0;
  for (const auto& p : peaks) peak = std::max(peak, p[0]);
  double mean_fraction = 0, mean_span = 0;
  for (std::size_t i = 0; i < fractions.size(); ++i) {
    mean_fraction += fractions[i] / static_cast<double>(fractions.size());
    mean_span += spans[i] / static_cast<double>(spans.size());
  }
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
  state.counters["bubble_fraction_model"] =
      model.applies ? model.single.bubble_fraction : std::nan("");
  state.counters["peak_activation_bytes"] = peak;
  state.counters["flops_per_s"] = mean_span > 0 ? flops / mean_span : 0;
  state.SetLabel(model.applies ? "" : "no closed form");
}

}  // namespace
}  // namespace bb

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  bb::World world;
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.size);
  // Only rank 0 writes files: drop --benchmark_out* elsewhere.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i)
    if (world.rank == 0 || std::strncmp(argv[i], "--benchmark_out", 15) != 0)
      args.push_back(argv[i]);
  args.push_back(nullptr);
  int n = static_cast<int>(args.size()) - 1;
  std::string bad;
  int code = 0;
  std::vector<std::string> names;
  std::vector<int> Ms, vs;
  try {
    if (!bb::take_flags(&n, args.data(), world.opt, &bad))
      throw bb::ConfigError("unknown flag " + bad);
    names = bb::sweep_names(world.opt.schedules, "--bb_schedules");
    Ms = bb::parse_int_list(world.opt.M, "--bb_M");
    vs = bb::parse_int_list(world.opt.v, "--bb_v");
    (void)bb::parse_duration(world.opt.t, "--bb_t", true);
    if (world.opt.iters < 1 || world.opt.reps < 1)
      throw bb::ConfigError("--bb_iters and --bb_reps must be >= 1");
    world.p2p = bb::mpi::duplicate(MPI_COMM_WORLD, world.opt.timeout);
    world.coll = bb::mpi::duplicate(MPI_COMM_WORLD, world.opt.timeout);
    world.backend = bb::make_backend(world.opt.backend, 0);
    world.transport =
        bb::make_transport(world.opt.transport.empty() ? bb::default_transport(world.opt.backend)
                                                       : world.opt.transport,
                           world.p2p, *world.backend);
    world.clock = bb::harness::clock_of_hosts(
        bb::mpi::gather(bb::harness::host_name(), 0, world.coll, world.opt.timeout));
    world.pool = std::make_unique<bb::BufferPool>(
        *world.backend, static_cast<std::size_t>(world.opt.hidden) * world.opt.mb_size);
  } catch (const std::exception& e) {
    if (world.rank == 0) std::cerr << "gbench_pipeline: error: " << e.what() << "\n";
    code = bb::kExitConfig;
  }
  if (code != 0) {
    MPI_Finalize();
    return code;
  }
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) {
    MPI_Finalize();
    return bb::kExitConfig;
  }
  bb::g_world = &world;
  benchmark::AddCustomContext("world_size", std::to_string(world.size));
  benchmark::AddCustomContext("backend", world.opt.backend);
  benchmark::AddCustomContext("transport", std::string(world.transport->name()));
  benchmark::AddCustomContext("compute", world.opt.compute);
  for (const std::string& name : names) {
    std::vector<int64_t> m64(Ms.begin(), Ms.end());
    std::vector<int64_t> v64 = bb::schedule_takes_v(name)
                                   ? std::vector<int64_t>(vs.begin(), vs.end())
                                   : std::vector<int64_t>{1};
    auto* b = benchmark::RegisterBenchmark(
        name.c_str(), [name](benchmark::State& s) { bb::run_benchmark(s, name); });
    b->ArgNames({"M", "v"})
        ->ArgsProduct({m64, v64})
        ->Iterations(world.opt.iters)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    if (world.opt.reps > 1) b->Repetitions(world.opt.reps);
  }
  if (world.rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
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
  MPI_Finalize();
  return 0;
}
