#include "harness/measure.hpp"

#include <algorithm>
#include <cmath>

namespace bb::harness {

ClockMode clock_of_hosts(const std::vector<std::string>& hosts) {
  for (const std::string& h : hosts)
    if (h != hosts.front()) return ClockMode::kPerRank;
  return ClockMode::kShared;
}

const char* clock_name(ClockMode c) {
  return c == ClockMode::kShared ? "shared" : "per-rank";
}

StepBubble measure_step(const std::vector<StepSummary>& ranks, ClockMode clock) {
  if (ranks.empty()) return {};
  const bool shared = clock == ClockMode::kShared;
  double first = 1e300, last = -1e300, busy = 0;
  for (const StepSummary& st : ranks) {
    const double sh = shared ? st.origin - ranks.front().origin : 0.0;
    first = std::min(first, shared ? sh + st.first_start : 0.0);
    last = std::max(last, sh + st.last_end);
    busy += st.busy;
  }
  const double P = static_cast<double>(ranks.size());
  const double T = last - first;
  return {T, T > 0 ? (P * T - busy) / (P * T) : 0};
}

StepSeries measure_steps(const std::vector<RankSummary>& ranks, ClockMode clock) {
  StepSeries out;
  if (ranks.empty()) return out;
  const bool shared = clock == ClockMode::kShared;
  const std::size_t n = ranks[0].steps.size();
  const double P = static_cast<double>(ranks.size());
  out.shift.assign(ranks.size(), std::vector<double>(n, 0.0));
  std::vector<double> ends;
  for (std::size_t k = 0; k < n; ++k) {
    std::vector<StepSummary> step;
    double over = 0, actions = 0, end = -1e300;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const StepSummary& st = ranks[r].steps.at(k);
      step.push_back(st);
      if (shared) out.shift[r][k] = st.origin - ranks[0].steps[k].origin;
      // Step ends on a time line that is the same for every step: the shared clock from rank
      // 0's first step, or each rank's own clock from its own first step.
      const double sh = st.origin - (shared ? ranks[0] : ranks[r]).steps[0].origin;
      end = std::max(end, sh + st.last_end);
      over += st.bookkeeping;
      actions += st.actions;
    }
    const StepBubble b = measure_step(step, clock);
    out.step_time.push_back(b.span_s);
    out.fraction.push_back(b.bubble_fraction);
    out.overhead.push_back(actions > 0 ? over / actions : 0);
    ends.push_back(end);
  }
  for (std::size_t k = 1; k < n; ++k) {
    const double p = ends[k] - ends[k - 1];
    double busy = 0;
    for (const RankSummary& r : ranks) busy += r.steps[k].busy;
    out.period.push_back(p);
    out.fraction_steady.push_back(p > 0 ? (P * p - busy) / (P * p) : 0);
  }
  return out;
}

}  // namespace bb::harness
