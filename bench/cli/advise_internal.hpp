// Internal to `bubblebench advise` (cli/advise.cpp): what its three files share. advise.cpp
// holds the options, the costs and main; advise_print.cpp the ranked table, JSON and CSV;
// advise_verify.cpp --verify (the top K run through the harness, predicted vs measured).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "advise/advise.hpp"
#include "common/stats.hpp"
#include "harness/settings.hpp"
#include "harness/summary.hpp"

namespace bb::advise_cli {

struct AdviseOptions {
  std::string results, run_key;
  std::string schedules = "all";
  int P = 0;  // 0: the results run's P, else 4
  std::string M = "4:64:x2", v = "1,2,3,4", recompute = "both";
  int global_batch = 0, mb_size = 0;
  std::string t_f, t_b, t_w;  // seconds (or durations); lists: one per stage
  std::string act_bytes, input_bytes, param_bytes, memory_cap;
  std::string optimizer;  // sgd | adam; default: the run's, else sgd
  std::string latency, bandwidth;
  double fb_factor = 0;  // 0: the results file's (its runs with F&B pairs), else 1
  std::string sync = "barrier";
  int top = 5;
  std::string format = "table";
  int verify = 0, warmup = 1, iters = 5;
  double timeout = 600;
};

// What --verify needs to run a configuration like the source: the harness settings and the
// stage model (blocks of one stage: a chunk gets its fraction).
struct VerifyModel {
  harness::RunSettings settings;
  int hidden = 64;
  double stage_layers = 1;
  bool synthetic_stage_times = false;  // from flags: synthetic waits of the given times
};

struct Verified {
  const advise::Candidate* predicted;
  int predicted_rank;
  std::optional<harness::RunSummary> measured;  // rank 0; empty: not run (why says why)
  std::string why;
};

// advise_print.cpp: "zb-h1 M=8 v=1 [rc]"; the whole result as JSON (--format json); the CSV
// (--format csv); the ranked table (the first TOP rows) and the families left out.
std::string config_text(const advise::Candidate& c);
nlohmann::json result_json(const advise::Input& in, const advise::Result& r);
void print_csv(const advise::Result& r);
void print_table(const advise::Input& in, const advise::Result& r, int top);

// advise_verify.cpp: runs the top --verify configurations on every rank (same order
// everywhere; rank 0 gets the summaries), and prints predicted vs measured (table or JSON).
std::vector<Verified> verify_top(const AdviseOptions& o, const advise::Input& in,
                                 const advise::Result& r, const VerifyModel& vm, int world);
void print_verified(const advise::Input& in, const std::vector<Verified>& vs, bool as_json);

}  // namespace bb::advise_cli
