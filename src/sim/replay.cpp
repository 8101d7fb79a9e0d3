#include "sim/replay.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "schedule/engine.hpp"

namespace bb {
namespace {

// The engine's policy: costs by list position and step, the step of each rank counted from
// the engine's step_done calls (a rank's costs are asked in list order, step after step).
struct ReplayPolicy {
  ReplayPolicy(const Schedule& s, const ReplayCosts& c, int steps, bool keep)
      : s(s), costs(c), step(static_cast<std::size_t>(s.P), 0), keep(keep) {
    out.steps.assign(static_cast<std::size_t>(steps), ReplayStep{});
    for (ReplayStep& st : out.steps) st.ranks.assign(static_cast<std::size_t>(s.P), ReplayRank{});
    first.assign(static_cast<std::size_t>(s.P), true);
  }

  double cost(int r, const Action* a, std::size_t) {
    const auto index = static_cast<std::size_t>(a - s.ranks[static_cast<std::size_t>(r)].data());
    const double t = costs.compute(r, index, step[static_cast<std::size_t>(r)]);
    if (!(t >= 0))
      throw ConfigError("replay: the cost of rank " + std::to_string(r) + " action " +
                        std::to_string(index) + " is not >= 0");
    return t;
  }
  // The runtime sends an FB pair's input gradient when the pair is done.
  double grad_offset(int r, const Action* a, std::size_t n) { return cost(r, a, n); }
  double delay(int src, int dst, const Action&) const {
    return costs.message ? costs.message(src, dst, costs.message_bytes) : 0.0;
  }
  double step_gap(int r) const {
    return costs.gap ? costs.gap(r, step[static_cast<std::size_t>(r)]) : 0.0;
  }
  void record(int r, int st, std::size_t index, std::size_t, double, double start, double end) {
    ReplayRank& rr = out.steps[static_cast<std::size_t>(st)].ranks[static_cast<std::size_t>(r)];
    if (first[static_cast<std::size_t>(r)]) {
      rr.first_start = start;
      first[static_cast<std::size_t>(r)] = false;
    }
    rr.busy += end - start;
    rr.last_end = end;
    if (keep) out.events.push_back({r, st, index, start, end});
  }
  void step_done(int r, int st, double end) {
    out.steps[static_cast<std::size_t>(st)].ranks[static_cast<std::size_t>(r)].last_end = end;
    ++step[static_cast<std::size_t>(r)];
    first[static_cast<std::size_t>(r)] = true;
  }

  const Schedule& s;
  const ReplayCosts& costs;
  std::vector<int> step;  // per rank: the step its next cost belongs to
  std::vector<bool> first;
  bool keep;
  ReplayResult out;
};

}  // namespace

ReplayResult replay(const Schedule& lowered, const ReplayCosts& costs, int steps,
                    bool record_events) {
  if (!lowered.lowered) throw ScheduleError("replay: the schedule is not lowered");
  if (!costs.compute) throw ConfigError("replay: no compute costs");
  if (steps < 1) throw ConfigError("replay: steps must be >= 1");
  ReplayPolicy policy(lowered, costs, steps, record_events);
  DataflowEngine<double, ReplayPolicy> engine(lowered, policy, steps);
  if (!engine.run())
    throw ScheduleError("replay of '" + lowered.name + "' is stuck (a cyclic wait):\n" +
                        engine.stuck_report());
  ReplayResult res = std::move(policy.out);
  double prev_end = 0;
  for (ReplayStep& st : res.steps) {
    st.end = 0;
    st.busy = 0;
    for (const ReplayRank& r : st.ranks) {
      st.end = std::max(st.end, r.last_end);
      st.busy += r.busy;
    }
    st.span = st.end - prev_end;
    prev_end = st.end;
  }
  return res;
}

}  // namespace bb
