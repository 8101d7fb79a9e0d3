#include "gbench_report.hpp"

#include <cmath>
#include <iostream>
#include <string_view>

#include "common/error.hpp"

namespace bb::gbench {

std::string flag_value(const std::vector<char*>& args, const std::string& name,
                       const std::string& fallback) {
  std::string value = fallback;
  const std::string prefix = "--" + name + "=";
  for (const char* a : args)
    if (a != nullptr && std::string_view(a).starts_with(prefix))
      value = a + prefix.size();
    else if (a != nullptr && std::string_view(a) == prefix.substr(0, prefix.size() - 1))
      value = "true";
  return value;
}

std::unique_ptr<benchmark::BenchmarkReporter> make_reporter(const std::string& format,
                                                            bool console_colour) {
  if (format == "json") return std::make_unique<benchmark::JSONReporter>();
  if (format == "csv") {
    // Deprecated by the library, still one of its --benchmark_format values.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return std::make_unique<benchmark::CSVReporter>();
#pragma GCC diagnostic pop
  }
  if (format != "console") throw ConfigError("unknown output format '" + format + "'");
  return std::make_unique<benchmark::ConsoleReporter>(console_colour
                                                          ? benchmark::ConsoleReporter::OO_Defaults
                                                          : benchmark::ConsoleReporter::OO_Tabular);
}

FiniteReporter::FiniteReporter(std::unique_ptr<benchmark::BenchmarkReporter> inner)
    : inner_(std::move(inner)) {}

bool FiniteReporter::ReportContext(const Context& context) {
  inner_->SetOutputStream(&GetOutputStream());
  inner_->SetErrorStream(&GetErrorStream());
  return inner_->ReportContext(context);
}

void FiniteReporter::ReportRuns(const std::vector<Run>& runs) {
  std::vector<Run> edited = runs;
  for (Run& r : edited) edit(r);
  inner_->ReportRuns(edited);
}

void FiniteReporter::Finalize() {
  inner_->Finalize();
}

void FiniteReporter::edit(Run& run) const {
  for (auto it = run.counters.begin(); it != run.counters.end();)
    it = std::isfinite(it->second.value) ? std::next(it) : run.counters.erase(it);
}

int run_main(int argc, char** argv) {
  // Read before Initialize() takes them out of argv. The console keeps the library's own
  // reporter (its colours and --benchmark_counters_tabular): only json and csv are wrapped.
  const std::vector<char*> args(argv, argv + argc);
  const std::string format = flag_value(args, "benchmark_format", "console");
  const std::string out_format = flag_value(args, "benchmark_out_format", "json");
  const bool to_file = !flag_value(args, "benchmark_out", "").empty();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const auto wrapped = [](const std::string& f) {
    return f == "console" ? nullptr : std::make_unique<FiniteReporter>(make_reporter(f, false));
  };
  std::unique_ptr<FiniteReporter> display, file;
  try {
    display = wrapped(format);
    if (to_file) file = wrapped(out_format);
  } catch (const ConfigError& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return kExitConfig;
  }
  benchmark::RunSpecifiedBenchmarks(display.get(), file.get());
  benchmark::Shutdown();
  return 0;
}

}  // namespace bb::gbench
