// The LIST syntax of the CLI (design §5.1): `4,8,16`, geometric ranges `4:64:x2`, arithmetic
// ranges `2:8:2`, and mixtures `1,4:16:x2`.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/name_list.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule.hpp"

namespace bb {

// Positive integers, duplicates removed, order kept. Throws ConfigError with one line.
std::vector<int> parse_int_list(std::string_view text, std::string_view what);
// parse_name_list (comma-separated names, empty items rejected): common/name_list.hpp.
// A duration: plain number in the caller's unit, or with a suffix s, ms, us, ns (seconds
// then). Finite and >= 0. Throws ConfigError.
double parse_duration(std::string_view text, std::string_view what, bool suffix_means_seconds);
// Comma-separated plain numbers, each finite and >= 0 (`1`, `1,2,2,1`); an empty item is an
// error (`1,`). Throws ConfigError naming `what`.
std::vector<double> parse_number_list(std::string_view text, std::string_view what);

// A size in bytes: "65536", "64K", "1M", "1G" (binary multiples), at most 1 TiB; 0 only where
// ALLOW_ZERO. Throws ConfigError naming `what`.
std::size_t parse_bytes(const std::string& text, std::string_view what, bool allow_zero = false);

// One duration per flag (`run`: no per-chunk lists, so "1,2" and "1," are refused).
double duration_of(const std::string& text, const char* what);

// A LIST option whose every value lies in [lo, hi]. Throws ConfigError.
std::vector<int> int_list_in(const std::string& text, const char* what, int lo, int hi);

// A schedule CSV named on the command line (`csv:FILE`, `--csv FILE`): unreadable or
// malformed is a configuration error (ConfigError, exit 2); whether the schedule it holds is
// valid is checked later (exit 1). Either dialect (schedule/text.hpp); `note` gets the one line
// the reader has to say (PyTorch's tokens left out), or is cleared.
Schedule load_csv_arg(const std::string& path, std::string* note = nullptr);

// Validates a lowered schedule and dry-runs it (the timed dry run, then the searching one if
// that fails): throws ScheduleError, with the dry run's report, when it cannot complete.
// `what` names it in the message (e.g. csv:FILE).
void dry_run_or_throw(const Schedule& lowered, const std::string& what);

// The most compute actions a sweep may build, summed over its configurations and estimated
// before any is built: 2^33, more than the largest single configuration a generator accepts
// (kMaxChunkMicroBatches chunk x micro-batch pairs, three actions each at most) and about ten
// minutes of generating, lowering and simulating at bench_sim's rate (0.6 s per 8.4 M). Beyond
// it a sweep is almost surely a typo (-M 1:100000:1), refused before it runs for hours.
inline constexpr long long kMaxSweepActions = 1LL << 33;

// Help texts that name schedules, all from the registry (schedule_info.hpp): --schedule's
// (a LIST, or one name), and the names of the schedules that take -v or that order by the
// per-stage costs and --mem-limit ("interleaved", "zb-auto").
std::string schedule_option_help(bool lists);
std::string schedules_taking_v();
std::string schedules_ordered_by_costs();

// How many configurations the lists name before any is skipped (a CSV counts once).
std::size_t sweep_combinations(const std::string& names, const std::vector<int>& Ms,
                               const std::vector<int>& vs);

// What a sweep tells the user besides its results, one line each, never twice: kind "skip"
// for a combination a schedule rejects (the reason, naming P, M and, where it matters, v),
// kind "note" for a schedule that takes no v while -v asks for one (which v it runs with).
using SweepSay = std::function<void(std::string_view kind, const std::string& line)>;

// Whether a sweep name is `csv:FILE` (lists read from a file, not generated).
bool is_csv(const std::string& name);

// The schedules of a sweep, one at a time: every name of sweep_names(names) (`all` = every
// built-in, schedule/schedule_info.hpp; `csv:FILE` loads the file) crossed with every M and, for
// schedules that take it, every v, generated for P ranks just before `use` gets it, so a sweep
// holds one schedule at a time. Before any is built, a sweep estimated at more than
// kMaxSweepActions compute actions (times `steps`, the steps each configuration is simulated:
// `sim --steps`) is refused (ConfigError). Lines for `say` are held back until a
// first configuration is accepted: when none is, nothing is said and ConfigError carries the last
// reason. A lowered CSV goes through dry_run_or_throw first when `check_lowered` (everything that
// runs or simulates it; `show` and `validate` do their own). A CSV schedule keeps its own P:
// callers check it.
void for_each_schedule(const std::string& names, int P, const std::vector<int>& Ms,
                       const std::vector<int>& vs, bool check_lowered,
                       const std::function<void(const std::string& name, Schedule s)>& use,
                       const SweepSay& say, int steps = 1);
// The same with every generator given `base` (its P, and zb-auto's costs and memory limit;
// schedule/generators.hpp), M and v set per configuration.
void for_each_schedule(const std::string& names, const ScheduleParams& base,
                       const std::vector<int>& Ms, const std::vector<int>& vs, bool check_lowered,
                       const std::function<void(const std::string& name, Schedule s)>& use,
                       const SweepSay& say, int steps = 1);

// The same, all at once (for `run`, which keeps every lowered schedule): combinations a
// schedule rejects in `skipped`, notes in `notes` (without their "skip: " / "note: ").
struct SweepSchedule {
  std::string name;  // as given (a built-in name or csv:FILE)
  Schedule schedule;
};
struct ScheduleSweep {
  std::vector<SweepSchedule> schedules;
  std::vector<std::string> skipped;
  std::vector<std::string> notes;
};
ScheduleSweep expand_schedules(const std::string& names, int P, const std::vector<int>& Ms,
                               const std::vector<int>& vs);
ScheduleSweep expand_schedules(const std::string& names, const ScheduleParams& base,
                               const std::vector<int>& Ms, const std::vector<int>& vs);

}  // namespace bb
