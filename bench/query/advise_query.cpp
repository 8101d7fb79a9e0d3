// `advise` without MPI or a results file: the flags over the search's input, and the JSON of
// its result (bench/cli/advise.cpp reads a results file's run and runs --verify around them).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "query/query.hpp"
#include "schedule/schedule_info.hpp"

namespace bb::query {
namespace {

using json = nlohmann::json;

std::vector<double> seconds_list(const std::string& text, const char* flag) {
  if (text.find(',') == std::string::npos) return {parse_duration(text, flag, true)};
  return parse_number_list(text, flag);
}

// A word option's value among `choices` (CLI11 checks them on the command line first).
void require_one_of(const std::string& value, const char* flag,
                    std::initializer_list<const char*> choices) {
  std::string all;
  for (const char* c : choices) {
    if (value == c) return;
    all += (all.empty() ? "" : ", ") + std::string(c);
  }
  throw ConfigError(std::string(flag) + ": '" + value + "' is not one of " + all);
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

}  // namespace

advise::Input advise_defaults() {
  advise::Input in;
  in.P = 4;
  in.mb_size = 1;
  in.t_f = {1e-3};
  in.t_b = {1e-3};
  in.t_w = {1e-3};
  return in;
}

// Adam keeps two moments beside the weights and gradients: four copies of the parameters.
double static_factor(const std::string& optimizer) {
  require_one_of(optimizer, "--optimizer", {"sgd", "adam"});
  return optimizer == "adam" ? 4 : 2;
}

advise::Input advise_input(const AdviseOptions& o, advise::Input in) {
  if (o.P != 0) in.P = o.P;
  if (o.mb_size != 0) in.mb_size = o.mb_size;
  if (!o.t_f.empty()) in.t_f = seconds_list(o.t_f, "--t-f");
  if (!o.t_b.empty()) in.t_b = seconds_list(o.t_b, "--t-b");
  if (!o.t_w.empty()) in.t_w = seconds_list(o.t_w, "--t-w");
  const auto bytes = [](const std::string& text, const char* flag, double& to) {
    if (!text.empty()) to = static_cast<double>(parse_bytes(text, flag, true));
  };
  bytes(o.act_bytes, "--act-bytes", in.act_bytes);
  bytes(o.input_bytes, "--input-bytes", in.input_bytes);
  bytes(o.param_bytes, "--param-bytes", in.param_bytes);
  bytes(o.memory_cap, "--memory-cap", in.memory_cap);
  if (!o.optimizer.empty()) in.static_factor = static_factor(o.optimizer);
  if (!o.latency.empty()) in.latency = parse_duration(o.latency, "--latency", true);
  if (!o.bandwidth.empty()) in.bandwidth = parse_duration(o.bandwidth, "--bandwidth", false);
  if (o.fb_factor < 0) throw ConfigError("--fb-factor must be > 0");
  if (o.fb_factor > 0) in.fb_factor = o.fb_factor;
  if (o.global_batch < 0) throw ConfigError("--global-batch must be >= 1");
  in.global_batch = o.global_batch;
  require_one_of(o.sync, "--sync", {"barrier", "none"});
  in.steady = o.sync == "none";
  in.schedules = sweep_names(o.schedules);
  in.Ms = parse_int_list(o.M, "-M");
  in.vs = parse_int_list(o.v, "-v");
  require_one_of(o.recompute, "--recompute", {"off", "on", "both"});
  in.recompute.clear();
  if (o.recompute != "on") in.recompute.push_back(false);
  if (o.recompute != "off") in.recompute.push_back(true);
  if (o.top < 1) throw ConfigError("--top must be >= 1");
  if (o.verify < 0) throw ConfigError("--verify must be >= 0");
  return in;
}

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

json advise_json(const advise::Input& in, const advise::Result& r) {
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

}  // namespace bb::query
