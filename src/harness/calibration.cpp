#include "harness/calibration.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "harness/output.hpp"
#include "runtime/calibrate.hpp"
#include "runtime/executor.hpp"

namespace bb::harness {

void calibrate_sweep(RunContext& ctx, const std::vector<RunConfig>& configs,
                     const std::vector<int>& skip) {
  std::set<std::pair<int, int>> pairs;
  std::size_t largest = 0;  // bytes of the sweep's largest message
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (i < skip.size() && skip[i]) continue;
    for (const auto& p : pipeline_pairs(*configs[i].lowered)) pairs.insert(p);
    const ExecutorConfig ec =
        executor_config(ctx.o, configs[i].hidden, configs[i].layers, configs[i].mb_size);
    largest = std::max(largest, message_bytes(ec));
  }
  if (pairs.empty()) return;
  CalibrationOptions co;
  co.pairs.assign(pairs.begin(), pairs.end());
  co.max_bytes = 4 * largest;
  co.timeout_s = ctx.o.timeout;
  const std::vector<PairSamples> measured =
      calibrate_links(ctx.transport, ctx.backend, ctx.comm, co);
  if (ctx.transport.rank() != 0) return;
  ctx.links = fit_links(measured);
  const std::size_t top = calibration_sizes(co.max_bytes).back();
  ctx.links_attrs = {{"method", std::string(kCalibrationMethod)},
                     {"transport", std::string(ctx.transport.name())},
                     {"reps", std::int64_t{co.reps}},
                     {"warmup", std::int64_t{co.warmup}},
                     {"rounds", std::int64_t{co.rounds}},
                     {"cold_reps", std::int64_t{co.cold_reps}},
                     {"cold_pause_s", co.cold_pause_s},
                     {"max_bytes", static_cast<std::int64_t>(top)}};
  double line = 0, regimes = 0, wake = 0;
  for (const LinkFit& f : ctx.links) {
    line = std::max(line, f.line_error.max_rel);
    regimes = std::max(regimes, f.regimes_error.max_rel);
    wake = std::max(wake, f.wake_s);
  }
  char text[240];
  std::snprintf(text, sizeof text,
                "links: %zu pairs calibrated, 8 B..%zu B: largest error of the fit %.1f %% "
                "(piecewise; one line: %.1f %%); wake-up of a waiting receiver up to %.0f us",
                ctx.links.size(), top, 100 * regimes, 100 * line, 1e6 * wake);
  say(text);
}

std::vector<LinkFit> links_used(const std::vector<LinkFit>& all, const Schedule& s) {
  std::vector<LinkFit> out;
  for (const auto& [src, dst] : pipeline_pairs(s))
    for (const LinkFit& f : all)
      if (f.src == src && f.dst == dst) out.push_back(f);
  return out;
}

}  // namespace bb::harness
