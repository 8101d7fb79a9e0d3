// Built-in schedule generators, one per file. Each throws ConfigError (one line) for a
// configuration it does not accept: the rule is its ScheduleInfo's (schedule_info.hpp), which
// every generator checks first (require_accepted).
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
  // every stage or P values (finite, >= 0), and the memory limit in stage-micro-batch
  // units (live micro-batches per rank: forward done, W not yet); 0: P (1F1B's peak).
  std::vector<double> t_f{1.0}, t_b{1.0}, t_w{1.0};
  int mem_limit = 0;
};

Schedule generate_naive(const ScheduleParams& p);
Schedule generate_gpipe(const ScheduleParams& p);
Schedule generate_1f1b(const ScheduleParams& p);
Schedule generate_interleaved(const ScheduleParams& p);
Schedule generate_zb_h1(const ScheduleParams& p);
Schedule generate_zb_h2(const ScheduleParams& p);
Schedule generate_zb_v(const ScheduleParams& p);
Schedule generate_dualpipe(const ScheduleParams& p);
Schedule generate_dualpipev(const ScheduleParams& p);
Schedule generate_zb_auto(const ScheduleParams& p);

// Interleaved's micro-batches per round (PyTorch's microbatches_per_round): M / max(1, M/P);
// P where M is a multiple of P, M where M < 2P.
int interleaved_round_size(int P, int M);

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
