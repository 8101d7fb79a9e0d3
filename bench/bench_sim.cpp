// Simulator micro-benchmarks: generate + validate + lower + simulate of large schedules, on flat
// lists and (BM_*_periodic) on lists in periodic form.
// Counters: compute actions, all actions after lowering, the process's peak RSS, and the
// seconds per iteration of each phase (lower includes its validation and dry run, and is also
// reported in its parts); wall_s is their sum.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <string>

#include "gbench_report.hpp"
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

// The schedule as generated, in the form the pipeline works on.
bb::Schedule prepare(bb::Schedule s, const bb::Schedule*) {
  return s;
}
bb::PeriodicSchedule prepare(bb::Schedule s, const bb::PeriodicSchedule*) {
  return bb::to_periodic(std::move(s));
}

// generate (+ compress for the periodic form), lower (validation, unit-time pass, lists, proof),
// simulate 2 steps; Form: bb::Schedule (flat lists) or bb::PeriodicSchedule (periodic form,
// src/schedule/periodic.hpp: every pass on the segments).
template <class Form>
void run_pipeline(benchmark::State& state, const std::string& name) {
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
      Form s = prepare(bb::generate(name, p), static_cast<const Form*>(nullptr));
      const auto t1 = clock::now();
      s = bb::lower(std::move(s), &phases);  // validates, lowers, proves it by a timed dry run
      const auto t2 = clock::now();
      const bb::SimResult r = bb::simulate(s, cfg);
      const auto t3 = clock::now();
      t_generate += seconds(t0, t1);
      t_lower += seconds(t1, t2);
      t_simulate += seconds(t2, t3);
      t_total += seconds(t0, t3);
      sum.validate += phases.validate;
      sum.unit_times += phases.unit_times;
      sum.lists += phases.lists;
      sum.proof += phases.proof;
      state.PauseTiming();
      compute = s.compute_size();
      total = s.size();
      jumped = r.jumped_units;
      makespan = r.single.span;  // the result is used below, so nothing is optimised away
      state.ResumeTiming();
    }  // the schedule and the result are freed inside the timed iteration
  }
  state.counters["compute_actions"] = static_cast<double>(compute);
  state.counters["lowered_actions"] = static_cast<double>(total);
  state.counters["sim_jumped_units"] = static_cast<double>(jumped);  // by the periodic engine
  state.counters["makespan"] = makespan;
  state.counters["peak_rss_MiB"] = peak_rss_mb();
  const auto per_iter = benchmark::Counter::kAvgIterations;
  state.counters["generate_s"] = benchmark::Counter(t_generate, per_iter);
  state.counters["lower_s"] = benchmark::Counter(t_lower, per_iter);
  state.counters["simulate_s"] = benchmark::Counter(t_simulate, per_iter);
  // generate + lower + simulate (not the counting after, nor freeing the schedule)
  state.counters["wall_s"] = benchmark::Counter(t_total, per_iter);
  // lower_s in parts: validation, the unit-time pass, list building, the timed dry run.
  state.counters["lower_validate_s"] = benchmark::Counter(sum.validate, per_iter);
  state.counters["lower_unit_s"] = benchmark::Counter(sum.unit_times, per_iter);
  state.counters["lower_lists_s"] = benchmark::Counter(sum.lists, per_iter);
  state.counters["lower_proof_s"] = benchmark::Counter(sum.proof, per_iter);
}

void BM_1f1b(benchmark::State& s) {
  run_pipeline<bb::Schedule>(s, "1f1b");
}
void BM_1f1b_periodic(benchmark::State& s) {
  run_pipeline<bb::PeriodicSchedule>(s, "1f1b");
}
void BM_interleaved(benchmark::State& s) {
  run_pipeline<bb::Schedule>(s, "interleaved");
}
void BM_zb_h1(benchmark::State& s) {
  run_pipeline<bb::Schedule>(s, "zb-h1");
}
void BM_dualpipev(benchmark::State& s) {
  run_pipeline<bb::Schedule>(s, "dualpipev");
}

// 1F1B, small and at the size, the same for both forms.
void one_f_one_b_sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"P", "M", "v"})
      ->Args({8, 64, 1})
      ->Args({512, 8192, 1})
      ->Unit(benchmark::kMillisecond)
      ->MeasureProcessCPUTime()
      ->UseRealTime();
}

}  // namespace

BENCHMARK(BM_1f1b)->Apply(one_f_one_b_sizes);
BENCHMARK(BM_1f1b_periodic)->Apply(one_f_one_b_sizes);
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

// As BENCHMARK_MAIN(), with finite counters only (gbench_report.hpp: JSON without NaN).
int main(int argc, char** argv) {
  return bb::gbench::run_main(argc, argv);
}
