// `bubblebench advise`'s output (docs/advise.md): the ranked table, the JSON and the CSV.
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

json candidate_json(const advise::Candidate& c, int rank) {
  json j;
  if (rank > 0) j["rank"] = rank;
  j["schedule"] = c.schedule;
  j["M"] = c.M;
  j["v"] = c.v;
  j["recompute"] = c.recompute;
  j["mb_size"] = c.mb_size;
  j["excluded"] = c.excluded;
  if (!c.reason.empty()) j["reason"] = c.reason;
  if (c.excluded == "refused") return j;
  j["step_time_s"] = c.step_time;
  j["makespan_s"] = c.makespan;
  j["period_s"] = c.period;
  j["throughput_samples_per_s"] = c.throughput;
  j["bubble_fraction"] = c.bubble_fraction;
  j["bubble_fraction_steady"] = c.bubble_fraction_steady;
  j["peak_bytes"] = c.peak_bytes;
  j["peak_rank"] = c.peak_rank;
  j["activation_bytes"] = c.activation_bytes;
  j["static_bytes"] = c.static_bytes;
  j["memory_bytes"] = c.memory_bytes;
  j["terms_s"] = {{"compute", c.t_compute},
                  {"recompute", c.t_recompute},
                  {"communication", c.t_communication},
                  {"bubble", c.t_bubble}};
  j["dominant"] = c.dominant;
  return j;
}

json input_json(const advise::Input& in) {
  return {{"P", in.P},
          {"t_f_s", in.t_f},
          {"t_b_s", in.t_b},
          {"t_w_s", in.t_w},
          {"fb_factor", in.fb_factor},
          {"stage_blocks", in.stage_blocks},
          {"mb_size", in.mb_size},
          {"global_batch", in.global_batch},
          {"act_bytes", in.act_bytes},
          {"input_bytes", in.input_bytes},
          {"saved_bytes", in.saved_bytes},
          {"workspace_bytes", in.workspace_bytes},
          {"param_bytes", in.param_bytes},
          {"static_factor", in.static_factor},
          {"memory_cap", in.memory_cap},
          {"latency_s", in.latency},
          {"bandwidth_bytes_per_s", in.bandwidth},
          {"view", in.steady ? "steady" : "single"}};
}

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
    row(candidate_json(r.ranked[i], static_cast<int>(i + 1)));
  for (const auto& c : r.excluded) row(candidate_json(c, 0));
}

json result_json(const advise::Input& in, const advise::Result& r) {
  json j;
  j["input"] = input_json(in);
  j["simulations"] = r.simulations;
  j["ranked"] = json::array();
  for (std::size_t i = 0; i < r.ranked.size(); ++i)
    j["ranked"].push_back(candidate_json(r.ranked[i], static_cast<int>(i + 1)));
  j["excluded"] = json::array();
  for (const auto& c : r.excluded) j["excluded"].push_back(candidate_json(c, 0));
  j["families"] = json::array();
  for (const auto& f : r.families)
    j["families"].push_back({{"schedule", f.schedule},
                             {"v", f.v},
                             {"recompute", f.recompute},
                             {"excluded", f.excluded},
                             {"reason", f.reason}});
  return j;
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
