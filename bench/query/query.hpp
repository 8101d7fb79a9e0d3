// What `sim`, `model`, `validate` and `advise` answer, as JSON values (design §5.2), for every
// front end: the bubblebench CLI (bench/cli/) prints them as tables, CSV or JSON, the Python
// module (bench/python/) hands them over as dicts. The options come as the command
// line spells them (text, parsed here with the CLI's own parsers and messages), so both front
// ends take one code path from the flags to the numbers. The core and nlohmann-json only: no
// MPI, HDF5 or CLI11 (a results file, --links and --timeline are read and written by the CLI).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "advise/advise.hpp"
#include "cli/list.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule.hpp"
#include "sim/memory.hpp"
#include "sim/sim.hpp"

namespace bb::query {

// The selection and cost flags of sim / model / validate / show, as text (defaults: the CLI's).
struct Options {
  std::string schedules = "1f1b";
  int P = 4;
  std::string M = "8";
  std::string v = "1";
  std::string t_f = "1", t_b = "2", t_w = "0";
  // Plain numbers, checked when parsed (finite, >= 0); empty: the default.
  std::string t_fb, latency = "0", bandwidth = "0", act_bytes = "0", msg_bytes;
  std::string static_bytes = "0";  // sim: bytes a stage holds for the whole step
  int steps = 4;
  int mem_limit = 0;           // zb-auto's memory limit (stage-micro-batches; 0: P)
  double mem_w = 1;            // zb-auto: what a micro-batch between its B and its W counts
  std::string links;           // sim --links FILE (its fits are the SimConfig's; named in messages)
  bool record_events = false;  // sim --timeline: the simulator records every event
  // Whether -P, -M, -v were given (a CSV schedule keeps its own and says which it ignores).
  bool P_given = false, M_given = false, v_given = false;
};

// -P within 1..32767, else ConfigError.
void check_P(const Options& o);
// The simulator's costs and links of the options (without --links: the CLI reads that file).
SimConfig sim_config(const Options& o);
// What the generators get besides M and v: P, zb-auto's memory limit and, where the command
// takes costs (sc), the per-stage F/B/W times and the message time it orders by (else unit
// times, no message time).
ScheduleParams generator_params(const Options& o, const SimConfig* sc);
// "1f1b P=4 M=8 v=1".
std::string config_label(const std::string& name, const Schedule& s);

// Where a simulated configuration's events go (sim --timeline): the CLI writes the trace, with
// each rank's memory over the step (the memory model on the simulated times).
using Timeline = std::function<void(const std::string& name, const Schedule& s, const SimResult& r,
                                    const std::vector<RankMemory>& memory)>;

// One configuration's JSON object (design §5.2): with `simulate_too` what `sim` prints (the
// closed form under "model"), else what `model` prints. `from_file`: lists read from a file or
// made by hand, validated before anything reads them. The schedule is dropped after it.
nlohmann::json evaluate(const Options& o, const SimConfig& sc, const std::string& name, Schedule s,
                        bool simulate_too, bool from_file, const Timeline& timeline = {});

// Every configuration of the selection (names x M x v, csv:FILE), evaluated: the array that
// `sim` / `model --format json` print. Skips and notes go to `say` (the CLI holds them back).
nlohmann::json sim_or_model(const Options& o, const SimConfig& sc, bool simulate_too,
                            const SweepSay& say, const Timeline& timeline = {});

// The one schedule of validate / show: the CSV file when given, else one name with one M and
// one v (ConfigError otherwise).
Schedule load_one(const Options& o, const std::optional<std::string>& csv, const SweepSay& say);

// What `validate` finds: {schedule, P, M, v, ok, compute_actions, send_recv_actions} when the
// lists are valid and their lowering dry-runs without deadlock, else {schedule, P, M, v,
// ok: false, report} with the validation's or the dry run's report.
nlohmann::json validate(Schedule s);

// The flags of `advise` that do not need MPI or a results file, as text (defaults: the CLI's).
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

// The search's input without a results file: P = 4, micro-batches of 1 sample, F = B = W = 1 ms.
advise::Input advise_defaults();
// Bytes per parameter byte the optimizer keeps (params + grads, and Adam's two moments).
double static_factor(const std::string& optimizer);
// The flags given over `in` (advise_defaults(), or a results file's run): the search's input.
// ConfigError naming the flag for a value out of range.
advise::Input advise_input(const AdviseOptions& o, advise::Input in);
// One candidate as `advise --format json` lists it (rank > 0: its place in the ranking).
nlohmann::json candidate_json(const advise::Candidate& c, int rank);
// The whole result as `advise --format json` prints it (without --verify's measurements).
nlohmann::json advise_json(const advise::Input& in, const advise::Result& r);

}  // namespace bb::query
