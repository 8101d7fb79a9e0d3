// Static validation of a schedule: counts, placement, per-(chunk, micro-batch) order
// F -> B -> W, and, for lowered schedules, SEND/RECV pairing and placement.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

struct ValidationIssue {
  int rank = -1;         // -1: not tied to one action
  std::size_t step = 0;  // index in the rank's action list
  std::string message;
};

struct ValidationReport {
  std::vector<ValidationIssue> issues;  // the first few found (capped)
  std::size_t total = 0;                // how many were found in all (every one counted)
  bool ok() const { return total == 0; }
  // Messages plus a rank x step grid around the first issue with the action marked.
  std::string describe(const Schedule& s) const;
};

ValidationReport validate(const Schedule& s, std::size_t max_issues = 8);
// Throws ScheduleError with report.describe() when invalid.
void validate_or_throw(const Schedule& s);

// A compute schedule in periodic form checked on its segments (validate_periodic.cpp): true
// only when validate() would accept its flat lists; false when it would not, or when this
// cannot tell (then validate the flat lists, which also gives the report).
struct PeriodicSchedule;
bool surely_valid(const PeriodicSchedule& s);
// validate_or_throw() of its flat lists, on the segments where surely_valid() can tell.
void validate_or_throw(const PeriodicSchedule& s);

}  // namespace bb
