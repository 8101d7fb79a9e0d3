// Simulator micro-benchmarks: generate + validate + lower + simulate of large schedules.
// Counters: compute actions, all actions after lowering, the process's peak RSS, and the
// seconds per iteration of each phase (lower includes its validation and dry run, and is also
// reported in its parts).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <string>

#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/periodic.hpp"
#include "sim/sim.hpp"

namespace {

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB -> MiB
}

void run_pipeline(benchmark::State& state, const std::string& name) {
  const bb::ScheduleParams p{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                             static_cast<int>(state.range(2))};
  bb::SimConfig cfg;
  cfg.steps = 2;
  std::size_t compute = 0, total = 0;
  double makespan = 0, t_generate = 0, t_lower = 0, t_simulate = 0, t_total = 0;
  bb::LowerPhases phases, sum;
  using clock = std::chrono::steady_clock;
  const auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  for (auto _ : state) {
    const auto t0 = clock::now();
    {
      bb::Schedule s = bb::generate(name, p);
      const auto t1 = clock::now();
      s = bb::lower(std::move(s), &phases);  // validates, lowers, proves it by a timed dry run
      const auto t2 = clock::now();
      const bb::SimResult r = bb::simulate(s, cfg);
      const auto t3 = clock::now();
      t_generate += seconds(t0, t1);
      t_lower += seconds(t1, t2);
      t_simulate += seconds(t2, t3);
      sum.validate += phases.validate;
      sum.unit_times += phases.unit_times;
      sum.lists += phases.lists;
      sum.proof += phases.proof;
      state.PauseTiming();
      compute = s.compute_size();
      total = s.size();
      makespan = r.single.span;  // the result is used below, so nothing is optimised away
      state.ResumeTiming();
    }  // the schedule and the result are freed inside the timed iteration
    t_total += seconds(t0, clock::now());  // all of it, counting the paused counting above
  }
  state.counters["compute_actions"] = static_cast<double>(compute);
  state.counters["lowered_actions"] = static_cast<double>(total);
  state.counters["makespan"] = makespan;
  state.counters["peak_rss_MiB"] = peak_rss_mb();
  const auto per_iter = benchmark::Counter::kAvgIterations;
  state.counters["generate_s"] = benchmark::Counter(t_generate, per_iter);
  state.counters["lower_s"] = benchmark::Counter(t_lower, per_iter);
  state.counters["simulate_s"] = benchmark::Counter(t_simulate, per_iter);
  state.counters["wall_s"] = benchmark::Counter(t_total, per_iter);
  // lower_s in parts: validation, the unit-time pass, list building, the timed dry run.
  state.counters["lower_validate_s"] = benchmark::Counter(sum.validate, per_iter);
  state.counters["lower_unit_s"] = benchmark::Counter(sum.unit_times, per_iter);
  state.counters["lower_lists_s"] = benchmark::Counter(sum.lists, per_iter);
  state.counters["lower_proof_s"] = benchmark::Counter(sum.proof, per_iter);
}

// The same pipeline on lists in periodic form (src/schedule/periodic.hpp): generate, compress,
// lower (validation on the flat lists, the periodic unit-time pass, lists that write each
// repetition once, their proof on the segments), simulate with the periodic engine.
void run_periodic(benchmark::State& state, const std::string& name) {
  const bb::ScheduleParams p{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                             static_cast<int>(state.range(2))};
  bb::SimConfig cfg;
  cfg.steps = 2;
  std::size_t compute = 0, total = 0, jumped = 0;
  double makespan = 0, t_generate = 0, t_lower = 0, t_simulate = 0, t_total = 0;
  bb::LowerPhases phases, sum;
  using clock = std::chrono::steady_clock;
  const auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  for (auto _ : state) {
    const auto t0 = clock::now();
    {
      const bb::PeriodicSchedule s = bb::to_periodic(bb::generate(name, p));
      const auto t1 = clock::now();
      const bb::PeriodicSchedule low = bb::lower(s, &phases);
      const auto t2 = clock::now();
      const bb::SimResult r = bb::simulate(low, cfg);
      const auto t3 = clock::now();
      t_generate += seconds(t0, t1);
      t_lower += seconds(t1, t2);
      t_simulate += seconds(t2, t3);
      sum.validate += phases.validate;
      sum.unit_times += phases.unit_times;
      sum.lists += phases.lists;
      sum.proof += phases.proof;
      state.PauseTiming();
      compute = low.compute_size();
      total = low.size();
      jumped = r.jumped_units;
      makespan = r.single.span;
      state.ResumeTiming();
    }
    t_total += seconds(t0, clock::now());
  }
  state.counters["compute_actions"] = static_cast<double>(compute);
  state.counters["lowered_actions"] = static_cast<double>(total);
  state.counters["sim_jumped_units"] = static_cast<double>(jumped);
  state.counters["makespan"] = makespan;
  state.counters["peak_rss_MiB"] = peak_rss_mb();
  const auto per_iter = benchmark::Counter::kAvgIterations;
  state.counters["generate_s"] = benchmark::Counter(t_generate, per_iter);  // with compressing
  state.counters["lower_s"] = benchmark::Counter(t_lower, per_iter);
  state.counters["simulate_s"] = benchmark::Counter(t_simulate, per_iter);
  state.counters["wall_s"] = benchmark::Counter(t_total, per_iter);
  state.counters["lower_validate_s"] = benchmark::Counter(sum.validate, per_iter);
  state.counters["lower_unit_s"] = benchmark::Counter(sum.unit_times, per_iter);
  state.counters["lower_lists_s"] = benchmark::Counter(sum.lists, per_iter);
  state.counters["lower_proof_s"] = benchmark::Counter(sum.proof, per_iter);
}

void BM_1f1b(benchmark::State& s) {
  run_pipeline(s, "1f1b");
}
void BM_1f1b_periodic(benchmark::State& s) {
  run_periodic(s, "1f1b");
}
void BM_interleaved(benchmark::State& s) {
  run_pipeline(s, "interleaved");
}
void BM_zb_h1(benchmark::State& s) {
  run_pipeline(s, "zb-h1");
}
void BM_dualpipev(benchmark::State& s) {
  run_pipeline(s, "dualpipev");
}

}  // namespace

BENCHMARK(BM_1f1b)
    ->ArgNames({"P", "M", "v"})
    ->Args({8, 64, 1})
    ->Args({512, 8192, 1})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_1f1b_periodic)
    ->ArgNames({"P", "M", "v"})
    ->Args({8, 64, 1})
    ->Args({512, 8192, 1})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_interleaved)
    ->ArgNames({"P", "M", "v"})
    ->Args({8, 64, 2})
    ->Args({512, 4096, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_zb_h1)
    ->ArgNames({"P", "M", "v"})
    ->Args({64, 1024, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_dualpipev)
    ->ArgNames({"P", "M", "v"})
    ->Args({64, 1024, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
