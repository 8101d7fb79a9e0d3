// Built-in schedules by name: what a generator is given (ScheduleParams) and generate(). Each
// schedule is one file with its facts and generator (its ScheduleInfo, schedule_info.hpp);
// generate() refuses a configuration it does not accept with ConfigError (one line).
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

struct ScheduleParams {
  int P = 1;
  int M = 1;
  int v = 1;  // chunks per rank where the schedule takes it (interleaved); ignored otherwise
  // zb-auto only (the others ignore them): times of one micro-batch per stage, one value for
  // every stage or P values (finite, >= 0), the time of one message between neighbouring
  // stages, and the memory limit in stage-micro-batch units (live micro-batches per rank:
  // forward done, W not yet); 0: P (1F1B's peak). mem_w: what a micro-batch between its B and
  // its W counts towards the limit (1: a whole one; the zero-bubble paper's scheduler: 1/2).
  std::vector<double> t_f{1.0}, t_b{1.0}, t_w{1.0};
  double t_comm = 0;
  int mem_limit = 0;
  double mem_w = 1;
};

// The largest chunks x micro-batches a configuration may have (validation and simulation
// keep per-pair state): 2^28.
inline constexpr long long kMaxChunkMicroBatches = 1LL << 28;

// The built-in names, in the order of design §5.1 (schedule_infos()' names).
const std::vector<std::string>& schedule_names();
// True when the schedule's generator uses v (others take v = 1, or their fixed v); false for
// a name that is no built-in schedule.
bool schedule_takes_v(const std::string& name);
// By name, through its ScheduleInfo (`csv:FILE` is handled by the CSV loader, not here).
// Throws ConfigError: unknown schedule, or the configuration's refusal().
Schedule generate(const std::string& name, const ScheduleParams& p);

}  // namespace bb
