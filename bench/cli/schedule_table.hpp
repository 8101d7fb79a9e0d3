// The schedule registry (schedule/schedule_info.hpp) as text, one row per built-in schedule in
// registration order: `bubblebench list` (text, markdown or json), the table of
// docs/schedules.md (markdown) and the analysis package's list of schedules
// (analysis/bbanalysis/schedules.json). tests/unit/test_schedule_info.cpp keeps the two files
// equal to what these give.
#pragma once

#include <string>

namespace bb {

// Left-aligned columns: name, placement, chunks per rank, B/W split, what it accepts.
std::string schedules_text();
// The docs table: name, placement, chunks per rank, B/W split, accepts, the closed form, when
// it is exact, the peak per rank and the source.
std::string schedules_markdown();
// A JSON array of the rows, with every fact (names as on the command line).
std::string schedules_json();

}  // namespace bb
