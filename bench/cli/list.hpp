// The LIST syntax of the CLI (design §5.1): `4,8,16`, geometric ranges `4:64:x2`, arithmetic
// ranges `2:8:2`, and mixtures `1,4:16:x2`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

// Positive integers, duplicates removed, order kept. Throws ConfigError with one line.
std::vector<int> parse_int_list(std::string_view text, std::string_view what);
// Comma-separated names (empty items rejected).
std::vector<std::string> parse_name_list(std::string_view text, std::string_view what);
// A duration: plain number in the caller's unit, or with a suffix s, ms, us, ns (seconds
// then). Throws ConfigError.
double parse_duration(std::string_view text, std::string_view what, bool suffix_means_seconds);

// A schedule CSV named on the command line (`csv:FILE`, `--csv FILE`): unreadable or
// malformed is a configuration error (ConfigError, exit 2); whether the schedule it holds is
// valid is checked later (exit 1).
Schedule load_csv_arg(const std::string& path);

// The schedules of a sweep: every name (`all` = every built-in; `csv:FILE` loads the file)
// crossed with every M and, for schedules that take it, every v, generated for P ranks.
// Combinations a schedule rejects are listed in `skipped` (one line each); when nothing is
// left, throws ConfigError with the last reason. A CSV schedule keeps its own P: callers
// check it against theirs.
struct SweepSchedule {
  std::string name;  // as given (a built-in name or csv:FILE)
  Schedule schedule;
};
struct ScheduleSweep {
  std::vector<SweepSchedule> schedules;
  std::vector<std::string> skipped;
};
ScheduleSweep expand_schedules(const std::string& names, int P, const std::vector<int>& Ms,
                               const std::vector<int>& vs);

}  // namespace bb
