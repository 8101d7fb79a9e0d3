// Replay of a lowered schedule with a cost for every action instance and every message: the
// simulator's dataflow engine (schedule/engine.hpp, the edge rule of schedule/edges.hpp) driven
// by costs that may differ per rank, per list position and per step, and by a link cost per
// directed rank pair. The attribution (sim/attribution.hpp) feeds it what a run measured.
//
// As in the simulator, every compute unit (an action, or an FB pair as one) starts as soon as
// its rank is free and its inputs have arrived; SEND/RECV actions take no time of their own
// (what the runtime spends on them is not modelled: it stays in the attribution's residual).
// Step 0 starts at time 0 on every rank (as after a barrier); with steps > 1 they follow
// back to back, each rank starting the next step when it ends the previous (plus `gap`).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

// Seconds a message of `bytes` takes from rank src to rank dst (src != dst).
using MessageCost = std::function<double(int src, int dst, double bytes)>;

struct ReplayCosts {
  // Seconds of the compute unit starting at position `index` of `rank`'s lowered list in step
  // `step` (an FB pair: the index of its F, one cost for both). Required.
  std::function<double(int rank, std::size_t index, int step)> compute;
  // Link cost of every point-to-point message; empty: messages are free.
  MessageCost message;
  double message_bytes = 0;  // bytes of one activation / gradient message
  // Seconds rank `rank` spends between the end of step-1 and the start of `step`; empty: 0.
  std::function<double(int rank, int step)> gap;
};

struct ReplayRank {
  double busy = 0;         // sum of its compute costs in the step
  double first_start = 0;  // on the replay's time line
  double last_end = 0;
};

struct ReplayStep {
  double end = 0;   // the step's last compute end over all ranks
  double span = 0;  // step 0: end (the makespan); later steps: end - previous end (period)
  double busy = 0;  // sum over ranks
  std::vector<ReplayRank> ranks;
  // P·span - busy: the step's idle time.
  double idle(int P) const { return P * span - busy; }
};

struct ReplayEvent {
  int rank;
  int step;
  std::size_t index;  // in the rank's lowered list
  double start, end;
};

struct ReplayResult {
  std::vector<ReplayStep> steps;
  std::vector<ReplayEvent> events;  // when asked for; in the engine's order
};

// Throws ScheduleError if the schedule is not lowered or gets stuck (a cyclic wait).
ReplayResult replay(const Schedule& lowered, const ReplayCosts& costs, int steps = 1,
                    bool record_events = false);

}  // namespace bb
