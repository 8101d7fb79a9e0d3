// What the two CSV dialects share (text.cpp reads bubblebench's own, csv_pytorch.cpp reads and
// writes PyTorch's): the file's lines, token helpers, and the schedule built from the rows.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "schedule/schedule.hpp"
#include "schedule/schedule_info.hpp"
#include "schedule/text.hpp"

namespace bb::text_detail {

// A line of the file that is not blank: its number (from 1) and its text, trimmed. A
// byte-order mark at the start of the file and a trailing '\r' are gone.
struct CsvLine {
  int number = 0;
  std::string text;
};

std::string_view trim(std::string_view s);
// A decimal number of at most 10 digits and nothing else.
bool parse_uint(std::string_view s, std::uint64_t* out);
// Throws ScheduleError "bad action '<token>': <why>", the token with its control and non-ASCII
// bytes escaped (\xNN) and cut after 40 bytes.
[[noreturn]] void bad_token(std::string_view token, std::string_view why);
// Runs `parse` on one line; a ScheduleError it throws gets "CSV line N: " in front.
template <class F>
auto on_line(const CsvLine& line, F&& parse) {
  try {
    return parse(std::string_view(line.text));
  } catch (const ScheduleError& e) {
    throw ScheduleError("CSV line " + std::to_string(line.number) + ": " + e.what());
  }
}

// The schedule of `rows` (one per rank) with this shape and placement: refuses (ScheduleError)
// sizes that actions cannot name; `lowered` when a row holds a SEND or RECV.
Schedule csv_schedule(std::string name, int P, int M, int v, Placement placement,
                      std::vector<std::vector<Action>> rows);

// csv_pytorch.cpp: whether the lines are PyTorch's dialect (docs/csv.md, "Which dialect"), and
// the schedule they hold. The lines are consumed (their text released as they are parsed).
bool is_pytorch_csv(const std::vector<CsvLine>& lines);
CsvSchedule read_pytorch_csv(std::vector<CsvLine>& lines);

}  // namespace bb::text_detail
