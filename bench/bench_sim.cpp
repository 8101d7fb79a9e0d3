// Simulator micro-benchmarks: generate + validate + lower + simulate of large schedules.
// Counters: compute actions, all actions after lowering, and the process's peak RSS.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <string>

#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
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
  double makespan = 0;
  for (auto _ : state) {
    bb::Schedule s = bb::generate(name, p);
    compute = s.compute_size();
    s = bb::lower(std::move(s));  // validates first, then lowers and dry-runs
    total = s.size();
    const bb::SimResult r = bb::simulate(s, cfg);
    makespan = r.single.span;  // the result is used below, so nothing is optimised away
  }
  state.counters["compute_actions"] = static_cast<double>(compute);
  state.counters["lowered_actions"] = static_cast<double>(total);
  state.counters["makespan"] = makespan;
  state.counters["peak_rss_MiB"] = peak_rss_mb();
}

void BM_1f1b(benchmark::State& s) {
  run_pipeline(s, "1f1b");
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
