// `run`'s link calibration: once per launch, before the first timed step, every directed pair
// the sweep's schedules use is measured over the run's transport (runtime/calibrate.hpp), at
// sizes from 8 B to 4x the largest message of the sweep (activation_count floats), and fitted
// (sim/links.hpp). Each run keeps the fits of its own pairs (RunSummary::links). Off with
// `run --no-calibrate`; nothing to do on one rank.
#pragma once

#include <vector>

#include "harness/runner.hpp"
#include "harness/sweep.hpp"
#include "schedule/schedule.hpp"
#include "sim/links.hpp"

namespace bb::harness {

// Collective over ctx.comm. Rank 0 gets ctx.links and ctx.links_attrs and prints one line.
// Configurations with SKIP[i] set do not count.
void calibrate_sweep(RunContext& ctx, const std::vector<RunConfig>& configs,
                     const std::vector<int>& skip);

// The fits of the pairs schedule S uses (pipeline_pairs), from ALL.
std::vector<LinkFit> links_used(const std::vector<LinkFit>& all, const Schedule& s);

}  // namespace bb::harness
