// The advisor's search at the size issue 21 sets (docs/advise.md): every built-in schedule x
// M = 8..256 (every integer) x v = 1..4 x recompute off/on at P = 8, costs F = B = W = 1 ms,
// activation and parameter bytes set (the memory model runs too). Goal: under 2 s on the
// project's 2-core machine. Counters: configurations, simulations, ranked.
// Arguments: the number of threads (1, and 0 = the hardware's).
#include <benchmark/benchmark.h>

#include "advise/advise.hpp"
#include "gbench_report.hpp"
#include "schedule/schedule_info.hpp"

namespace {

void BM_AdviseSearch(benchmark::State& state) {
  std::vector<int> Ms;
  for (int M = 8; M <= 256; ++M) Ms.push_back(M);
  const bb::advise::Input in{.P = 8,
                             .schedules = bb::sweep_names("all"),
                             .Ms = Ms,
                             .vs = {1, 2, 3, 4},
                             .recompute = {false, true},
                             .t_f = {1e-3},
                             .t_b = {1e-3},
                             .t_w = {1e-3},
                             .act_bytes = 16 << 20,
                             .input_bytes = 1 << 20,
                             .param_bytes = 256 << 20};
  std::size_t configs = 0, sims = 0, ranked = 0;
  for (auto _ : state) {
    const bb::advise::Result r = bb::advise::search(in, 5, static_cast<unsigned>(state.range(0)));
    configs = r.ranked.size() + r.excluded.size();
    sims = r.simulations;
    ranked = r.ranked.size();
    benchmark::DoNotOptimize(r.ranked.data());
  }
  state.counters["configurations"] = static_cast<double>(configs);
  state.counters["simulations"] = static_cast<double>(sims);
  state.counters["ranked"] = static_cast<double>(ranked);
}
BENCHMARK(BM_AdviseSearch)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// As BENCHMARK_MAIN(), with finite counters only (gbench_report.hpp: JSON without NaN).
int main(int argc, char** argv) {
  return bb::gbench::run_main(argc, argv);
}
