// `bubblebench advise`'s output (docs/advise.md): the ranked table and the CSV (the JSON:
// query/query.hpp's advise_json).
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/advise_internal.hpp"
#include "cli/table.hpp"
#include "harness/table.hpp"

namespace bb::advise_cli {
namespace {

using json = nlohmann::json;

const char* kCsvCols[] = {"rank",
                          "schedule",
                          "M",
                          "v",
                          "recompute",
                          "mb_size",
                          "step_time_s",
                          "makespan_s",
                          "period_s",
                          "throughput_samples_per_s",
                          "bubble_fraction",
                          "bubble_fraction_steady",
                          "peak_bytes",
                          "peak_rank",
                          "dominant",
                          "excluded",
                          "reason"};

std::string mib(double bytes) {
  return fmt(bytes / (1024.0 * 1024.0));
}

}  // namespace

std::string config_text(const advise::Candidate& c) {
  return c.schedule + " M=" + std::to_string(c.M) + " v=" + std::to_string(c.v) +
         (c.recompute ? " rc" : "");
}

void print_csv(const advise::Result& r) {
  for (std::size_t i = 0; i < std::size(kCsvCols); ++i) std::cout << (i ? "," : "") << kCsvCols[i];
  std::cout << "\n";
  const auto row = [](const json& j) {
    std::string line;
    for (std::size_t i = 0; i < std::size(kCsvCols); ++i) {
      const char* col = kCsvCols[i];
      std::string cell;
      if (j.contains(col)) {
        const json& x = j[col];
        cell = x.is_string()    ? x.get<std::string>()
               : x.is_boolean() ? std::string(x.get<bool>() ? "1" : "0")
                                : fmt_exact(x.get<double>());
      }
      if (cell.find_first_of(",\"") != std::string::npos) {
        std::string q = "\"";
        for (char ch : cell) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        cell = q + "\"";
      }
      line += (i ? "," : "") + cell;
    }
    std::cout << line << "\n";
  };
  for (std::size_t i = 0; i < r.ranked.size(); ++i)
    row(query::candidate_json(r.ranked[i], static_cast<int>(i + 1)));
  for (const auto& c : r.excluded) row(query::candidate_json(c, 0));
}

void print_table(const advise::Input& in, const advise::Result& r, int top) {
  const std::vector<std::string> cols = {"#",         "schedule", "M",       "v",
                                         "recompute", "mb_size",  "step_ms", "samples_per_s",
                                         "bubble",    "peak_MiB", "dominant"};
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < r.ranked.size() && i < static_cast<std::size_t>(top); ++i) {
    const auto& c = r.ranked[i];
    rows.push_back({std::to_string(i + 1), c.schedule, std::to_string(c.M), std::to_string(c.v),
                    c.recompute ? "on" : "off", fmt(c.mb_size), fmt(c.step_time * 1e3),
                    fmt(c.throughput),
                    fmt(in.steady ? c.bubble_fraction_steady : c.bubble_fraction),
                    mib(c.peak_bytes), c.dominant});
  }
  bb::print_table(std::cout, cols, rows);
  std::size_t memory = 0, refused = 0;
  for (const auto& c : r.excluded) (c.excluded == "memory" ? memory : refused) += 1;
  std::cout << r.ranked.size() << " configurations ranked ("
            << (in.steady ? "steady state" : "single step") << "), " << memory
            << " over the memory cap, " << refused << " refused; " << r.simulations
            << " simulated\n";
  for (const auto& f : r.families)
    if (!f.excluded.empty())
      std::cout << "excluded: " << f.schedule << " v=" << f.v << (f.recompute ? " recompute" : "")
                << ": " << f.excluded << ": " << f.reason << "\n";
}

}  // namespace bb::advise_cli
