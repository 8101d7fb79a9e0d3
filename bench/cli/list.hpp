// The LIST syntax of the CLI (design §5.1): `4,8,16`, geometric ranges `4:64:x2`, arithmetic
// ranges `2:8:2`, and mixtures `1,4:16:x2`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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
struct Schedule;
Schedule load_csv_arg(const std::string& path);

}  // namespace bb
