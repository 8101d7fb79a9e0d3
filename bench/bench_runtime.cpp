// Executor overhead per action (target <= 5 µs): one rank (P = 1, no transfers) runs whole
// steps of synthetic zero-time compute, with the per-action timing records on, as `run`
// does. Time per action = step time / lowered actions (counter `time_per_action`, seconds). The V
// placement (zb-v) adds the local hand-off between chunks; gemm-free, so what is measured is
// the executor: tables, the buffer pool, the stages' accounting, marks and records.
// Wall-clock time (UseRealTime): on a loaded machine it includes being descheduled.
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <string>

#include "gbench_report.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/executor.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/validate.hpp"

namespace {

// A pipeline of one rank: nothing is ever sent.
class SingleRankTransport final : public bb::Transport {
 public:
  std::string_view name() const override { return "none"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bb::Request isend(bb::ConstTensorPtr, std::size_t, int, int) override {
    throw std::logic_error("single rank: no sends");
  }
  bb::Request irecv(bb::TensorPtr, std::size_t, int, int) override {
    throw std::logic_error("single rank: no receives");
  }
  bool test(bb::Request&) override { return true; }
};

void executor_step(benchmark::State& state, const std::string& name, bool record) {
  bb::Schedule s = bb::generate(name, {1, static_cast<int>(state.range(0)), 1});
  bb::validate_or_throw(s);
  s = bb::lower(std::move(s));
  bb::CpuBackend backend;
  SingleRankTransport transport;
  bb::ExecutorConfig cfg;
  cfg.hidden = 16;
  cfg.mb_size = 4;
  cfg.synthetic = true;  // t_f = t_b = t_w = 0
  bb::BufferPool pool(backend, static_cast<std::size_t>(cfg.hidden * cfg.mb_size));
  bb::Executor ex(s, backend, transport, pool, cfg);
  bb::StepRecord rec;
  for (auto _ : state) {
    ex.run_step(record ? &rec : nullptr);
    ex.optimizer_step();
    benchmark::DoNotOptimize(rec.busy);
  }
  const double actions = static_cast<double>(s.ranks[0].size());
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(actions));
  state.counters["actions"] = actions;
  // Seconds per action (printed with a time unit, e.g. "184ns").
  state.counters["time_per_action"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * actions,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Step_1F1B(benchmark::State& st) {
  executor_step(st, "1f1b", true);
}
void BM_Step_GPipe(benchmark::State& st) {
  executor_step(st, "gpipe", true);
}
void BM_Step_ZBH1(benchmark::State& st) {
  executor_step(st, "zb-h1", true);
}
void BM_Step_ZBV(benchmark::State& st) {
  executor_step(st, "zb-v", true);
}
void BM_Step_1F1B_NoRecords(benchmark::State& st) {
  executor_step(st, "1f1b", false);
}

BENCHMARK(BM_Step_1F1B)->Arg(64)->Arg(512)->UseRealTime();
BENCHMARK(BM_Step_GPipe)->Arg(64)->UseRealTime();
BENCHMARK(BM_Step_ZBH1)->Arg(64)->UseRealTime();
BENCHMARK(BM_Step_ZBV)->Arg(64)->UseRealTime();
BENCHMARK(BM_Step_1F1B_NoRecords)->Arg(64)->UseRealTime();

}  // namespace

// As BENCHMARK_MAIN(), with finite counters only (gbench_report.hpp: JSON without NaN).
int main(int argc, char** argv) {
  return bb::gbench::run_main(argc, argv);
}
