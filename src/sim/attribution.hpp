// Where a run's bubble came from (issue 19 item 3): the runtime's own records of every compute
// action feed four replays (sim/replay.hpp) of the same lowered schedule:
//   (a) per-kind medians over all ranks and steps (stage units, times each chunk's fraction),
//       free links: the schedule's own bubble;
//   (b) per-(rank, chunk, kind) medians: (b) - (a) is the imbalance between ranks and chunks;
//   (c) every action's own measured duration in the step: (c) - (b) is the jitter;
//   (d) (c) plus the link cost of every message: (d) - (c) is the communication.
// Each replay's idle time P·T_x - busy_x is divided by the measured P·T of the step (T: the
// measured makespan, or with back-to-back steps the period), so the terms share one unit and
//   schedule + imbalance + jitter + communication + residual = measured bubble fraction
// exactly, per step; the residual (measured - (d)) is what no replay explains: the runtime's
// bookkeeping, message progress, launch overhead. (c) and the measurement have the same busy
// time, so residual = (T - T_d)/T: the measured span the replay with links does not reach.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "schedule/schedule.hpp"
#include "sim/replay.hpp"

namespace bb {

// One compute unit (an action, or an FB pair as one) as a rank measured it: its position in
// the rank's lowered list and its start/end on that rank's own clock (any origin).
struct MeasuredUnit {
  std::uint32_t index = 0;
  double start = 0, end = 0;
};

struct AttributionInput {
  const Schedule* lowered = nullptr;
  // records[rank][step]: every compute unit the rank ran in that timed step.
  std::vector<std::vector<std::vector<MeasuredUnit>>> records;
  // The measured span T of every step: the makespan (steps behind a barrier), or with
  // back_to_back the period that ends the step (span[0] is then not used: the first step has
  // no period). From the run's one measured-bubble definition.
  std::vector<double> span;
  bool back_to_back = false;
  // Link costs for (d): empty means free (then communication is 0).
  MessageCost link;
  double message_bytes = 0;
};

struct AttributionTerms {
  std::size_t step = 0;  // the timed step these terms are of
  double span = 0;       // its measured T
  double measured = 0;   // its measured bubble fraction
  double schedule = 0, imbalance = 0, jitter = 0, communication = 0, residual = 0;
  double sum() const { return schedule + imbalance + jitter + communication + residual; }
};

struct Attribution {
  std::vector<AttributionTerms> steps;  // every attributed step
  AttributionTerms median;              // the step with the median measured bubble; for an
                                        // even count the mean of the two middle steps (so its
                                        // terms add up to the median of the measured bubble;
                                        // `step` is the lower one); zeros without steps
};

// Throws ConfigError for records that do not fit the schedule (a position that is not a
// compute unit of the rank's list, a unit missing or twice, a bad span), ScheduleError if
// the schedule is not lowered.
Attribution attribute(const AttributionInput& in);

}  // namespace bb
