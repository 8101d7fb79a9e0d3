// Rank 0's summary of a configuration: the measured bubble (harness/measure.hpp) and the
// models (simulator, closed form) fed the run's own per-kind medians, as a RunSummary.
// The caller completes it with set_metrics (harness/metrics.hpp) once device_name is set.
#pragma once

#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/measure.hpp"
#include "harness/settings.hpp"
#include "harness/summary.hpp"
#include "harness/sweep.hpp"
#include "harness/wire.hpp"
#include "sim/links.hpp"

namespace bb::harness {

// Who ran where (rank 0's gathered view).
struct Placement {
  std::vector<RankPlacement> ranks;
  ClockMode clock = ClockMode::kShared;
};

// RANKS: every rank's unpacked record of the configuration C (the same on every rank order).
// LINKS: the launch's calibrated fits of the pairs C uses (empty: not calibrated); they price
// the messages of the attribution's communication replay.
RunSummary summarize(const RunConfig& c, const RunSettings& o,
                     const std::vector<RankSummary>& ranks, const Placement& where,
                     const CheckOutcome& check, const std::vector<LinkFit>& links = {});

}  // namespace bb::harness
