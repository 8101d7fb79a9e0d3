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
#include "query/query.hpp"

namespace bb::advise_cli {

// The flags (query/query.hpp: those without MPI or a results file are the Python module's too).
using AdviseOptions = query::AdviseOptions;

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

// advise_print.cpp: "zb-h1 M=8 v=1 [rc]"; the CSV (--format csv; the JSON is query.hpp's
// advise_json); the ranked table (the first TOP rows) and the families left out.
std::string config_text(const advise::Candidate& c);
void print_csv(const advise::Result& r);
void print_table(const advise::Input& in, const advise::Result& r, int top);

// advise_verify.cpp: runs the top --verify configurations on every rank (same order
// everywhere; rank 0 gets the summaries), and prints predicted vs measured (table or JSON).
std::vector<Verified> verify_top(const AdviseOptions& o, const advise::Input& in,
                                 const advise::Result& r, const VerifyModel& vm, int world);
void print_verified(const advise::Input& in, const std::vector<Verified>& vs, bool as_json);

}  // namespace bb::advise_cli
