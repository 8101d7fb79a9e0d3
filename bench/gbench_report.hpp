// Reporting of the project's Google Benchmark binaries (bench_sim, bench_runtime, bench_advise,
// gbench_pipeline): Google Benchmark's own reporters, fed runs whose counters are all finite.
// A counter that is constant 0 has a cv aggregate of 0/0 with --benchmark_repetitions, and a
// closed form that does not apply is NaN; the library would write them as `NaN`, which strict
// JSON parsers refuse, so they are dropped (tests/mpi/gbench_compare.sh checks every file).
#pragma once

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

namespace bb::gbench {

// The value of --NAME=VALUE in args ("true" for a bare --NAME), or `fallback`.
std::string flag_value(const std::vector<char*>& args, const std::string& name,
                       const std::string& fallback);

// The reporter Google Benchmark would make for --benchmark_format / --benchmark_out_format
// (console, json or csv); ConfigError for another name.
std::unique_ptr<benchmark::BenchmarkReporter> make_reporter(const std::string& format,
                                                            bool console_colour);

// Passes runs on to `inner` after edit(), which drops the counters that are not finite; a
// subclass may change more in edit() (and calls this one).
class FiniteReporter : public benchmark::BenchmarkReporter {
 public:
  explicit FiniteReporter(std::unique_ptr<benchmark::BenchmarkReporter> inner);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

 protected:
  virtual void edit(Run& run) const;

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
};

// BENCHMARK_MAIN()'s body with a FiniteReporter for the display and for --benchmark_out.
int run_main(int argc, char** argv);

}  // namespace bb::gbench
