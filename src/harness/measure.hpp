// THE measured bubble (design §4): per step, T is the makespan from the first compute start
// to the last compute end over all ranks, and the bubble fraction is (P·T - Σ busy) / (P·T).
// Every rank reports its own times on its own clock (StepSummary: origin plus times relative
// to it); nothing here assumes one clock for all ranks unless the caller says the ranks share
// one (all on one host: steady_clock is system-wide), and then only to place the steps on a
// common time line so that the barrier's exit skew does not count. Otherwise each rank's times
// count from its own barrier exit. `run` and gbench_pipeline both measure with these.
#pragma once

#include <string>
#include <vector>

#include "common/stats.hpp"
#include "harness/wire.hpp"

namespace bb::harness {

enum class ClockMode { kShared, kPerRank };

// kShared when every rank runs on the same host, else kPerRank.
ClockMode clock_of_hosts(const std::vector<std::string>& hosts);
const char* clock_name(ClockMode c);  // "shared" | "per-rank"

// One step of P ranks (RANKS[r]: rank r's record of the step).
struct StepBubble {
  double span_s = 0;           // T
  double bubble_fraction = 0;  // (P·T - Σ busy) / (P·T); 0 when T = 0
};
StepBubble measure_step(const std::vector<StepSummary>& ranks, ClockMode clock);

// Every timed step of a run, RANKS[r].steps[k] being rank r's step k.
struct StepSeries {
  std::vector<double> step_time, fraction;  // per step (measure_step)
  // --sync none: the period between consecutive steps' ends (on each rank's clock, or the
  // shared one) and the steady-state fraction (P·p - Σ busy) / (P·p), per step from the second.
  std::vector<double> period, fraction_steady;
  std::vector<double> overhead;  // per step: Σ bookkeeping / Σ actions (seconds per action)
  // shift[r][k]: added to rank r's times of step k to put them on the step's common start
  // (rank 0's origin of that step with a shared clock; 0 otherwise).
  std::vector<std::vector<double>> shift;
};
StepSeries measure_steps(const std::vector<RankSummary>& ranks, ClockMode clock);

}  // namespace bb::harness
