#include "sim/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <tuple>

#include "common/bubble_metrics.hpp"
#include "common/error.hpp"
#include "common/stats.hpp"
#include "schedule/edges.hpp"

namespace bb {
namespace {

// The kinds of compute units, as the runtime records them: an FB pair is its own kind.
enum class UnitKind : int { F, B, W, BW, FB };
constexpr int kUnitKinds = 5;

// What sits at each position of one rank's lowered list: a compute unit's kind, chunk and
// fraction of a stage, or nothing (a SEND/RECV, the second half of an FB pair).
struct Position {
  int kind = -1;  // UnitKind, -1: not the start of a compute unit
  int chunk = 0;
  double fraction = 1;
};

std::vector<Position> positions(const Schedule& s, int r) {
  const auto& acts = s.ranks[static_cast<std::size_t>(r)];
  std::vector<Position> out(acts.size());
  for (std::size_t i = 0; i < acts.size();) {
    const Action& a = acts[i];
    if (!is_compute(a.op)) {
      ++i;
      continue;
    }
    const std::size_t n = unit_length(a, acts.size() - i);
    Position& p = out[i];
    p.kind = n == 2 ? static_cast<int>(UnitKind::FB) : static_cast<int>(a.op);  // F B W BW
    p.chunk = static_cast<int>(a.chunk);
    p.fraction = s.chunk_fraction(static_cast<int>(a.mb));
    i += n;
  }
  return out;
}

std::string where(int r, std::size_t step) {
  return "rank " + std::to_string(r) + " step " + std::to_string(step);
}

}  // namespace

Attribution attribute(const AttributionInput& in) {
  if (in.lowered == nullptr) throw ConfigError("attribution: no schedule");
  const Schedule& s = *in.lowered;
  if (!s.lowered) throw ScheduleError("attribution: the schedule is not lowered");
  const int P = s.P;
  if (in.records.size() != static_cast<std::size_t>(P))
    throw ConfigError("attribution: records of " + std::to_string(in.records.size()) +
                      " ranks for a schedule of " + std::to_string(P));
  const std::size_t steps = in.span.size();
  for (int r = 0; r < P; ++r)
    if (in.records[static_cast<std::size_t>(r)].size() != steps)
      throw ConfigError("attribution: rank " + std::to_string(r) + " has records of " +
                        std::to_string(in.records[static_cast<std::size_t>(r)].size()) +
                        " steps, the spans are of " + std::to_string(steps));

  // dur[k][r][i]: the measured duration of rank r's unit at list position i in step k.
  std::vector<std::vector<Position>> pos(static_cast<std::size_t>(P));
  std::vector<std::vector<std::vector<double>>> dur(steps);
  std::vector<double> by_kind[kUnitKinds];  // stage units, all ranks and steps
  std::map<std::tuple<int, int, int>, std::vector<double>> by_place;  // (rank, chunk, kind)
  for (int r = 0; r < P; ++r) {
    pos[static_cast<std::size_t>(r)] = positions(s, r);
    const std::vector<Position>& rp = pos[static_cast<std::size_t>(r)];
    const std::size_t units = static_cast<std::size_t>(
        std::count_if(rp.begin(), rp.end(), [](const Position& p) { return p.kind >= 0; }));
    for (std::size_t k = 0; k < steps; ++k) {
      std::vector<double>& d = dur[k].emplace_back(rp.size(), std::nan(""));
      const auto& recs = in.records[static_cast<std::size_t>(r)][k];
      if (recs.size() != units)
        throw ConfigError("attribution: " + where(r, k) + " has " + std::to_string(recs.size()) +
                          " records, its list " + std::to_string(units) + " compute units");
      for (const MeasuredUnit& u : recs) {
        if (u.index >= rp.size() || rp[u.index].kind < 0)
          throw ConfigError("attribution: " + where(r, k) + ": position " +
                            std::to_string(u.index) + " is not a compute unit of the list");
        if (!std::isnan(d[u.index]))
          throw ConfigError("attribution: " + where(r, k) + ": position " +
                            std::to_string(u.index) + " recorded twice");
        const double t = u.end - u.start;
        if (!(t >= 0))
          throw ConfigError("attribution: " + where(r, k) + ": position " +
                            std::to_string(u.index) + " ends before it starts");
        d[u.index] = t;
        const Position& p = rp[u.index];
        by_kind[p.kind].push_back(t / p.fraction);
        by_place[{r, p.chunk, p.kind}].push_back(t);
      }
    }
  }

  // The cost tables of (a) and (b), per rank and list position (the same in every step).
  double kind_median[kUnitKinds];
  for (int k = 0; k < kUnitKinds; ++k) kind_median[k] = median(by_kind[k], 0.0);
  std::map<std::tuple<int, int, int>, double> place_median;
  for (auto& [key, v] : by_place) place_median[key] = median(std::move(v));
  std::vector<std::vector<double>> cost_a(static_cast<std::size_t>(P)), cost_b(cost_a);
  for (int r = 0; r < P; ++r) {
    const std::vector<Position>& rp = pos[static_cast<std::size_t>(r)];
    cost_a[static_cast<std::size_t>(r)].assign(rp.size(), 0.0);
    cost_b[static_cast<std::size_t>(r)].assign(rp.size(), 0.0);
    for (std::size_t i = 0; i < rp.size(); ++i) {
      if (rp[i].kind < 0) continue;
      cost_a[static_cast<std::size_t>(r)][i] = kind_median[rp[i].kind] * rp[i].fraction;
      cost_b[static_cast<std::size_t>(r)][i] = place_median.at({r, rp[i].chunk, rp[i].kind});
    }
  }

  const auto table = [](const std::vector<std::vector<double>>& t) {
    return [p = &t](int r, std::size_t i, int) { return (*p)[static_cast<std::size_t>(r)][i]; };
  };
  const auto measured = [&dur](std::size_t fixed_step) {
    return [&dur, fixed_step](int r, std::size_t i, int step) {
      const std::size_t k =
          fixed_step != ~std::size_t{0} ? fixed_step : static_cast<std::size_t>(step);
      return dur[k][static_cast<std::size_t>(r)][i];
    };
  };
  constexpr std::size_t kEveryStep = ~std::size_t{0};
  ReplayCosts a, b, c, d;
  a.compute = table(cost_a);
  b.compute = table(cost_b);
  d.message = in.link;
  d.message_bytes = in.message_bytes;

  // Idle time of each replay per step: idle[x][k].
  std::vector<double> idle[4];
  const auto idle_of = [&](const ReplayCosts& costs, int n) {
    std::vector<double> out;
    for (const ReplayStep& st : replay(s, costs, n).steps) out.push_back(st.idle(P));
    return out;
  };
  if (in.back_to_back) {
    const int n = static_cast<int>(steps);
    if (n >= 2) {
      c.compute = measured(kEveryStep);
      d.compute = c.compute;
      idle[0] = idle_of(a, n);
      idle[1] = idle_of(b, n);
      idle[2] = idle_of(c, n);
      idle[3] = idle_of(d, n);
    }
  } else if (steps > 0) {
    const double ia = idle_of(a, 1)[0], ib = idle_of(b, 1)[0];
    for (std::size_t k = 0; k < steps; ++k) {
      c.compute = measured(k);
      d.compute = c.compute;
      idle[0].push_back(ia);
      idle[1].push_back(ib);
      idle[2].push_back(idle_of(c, 1)[0]);
      idle[3].push_back(in.link ? idle_of(d, 1)[0] : idle[2].back());
    }
  }

  Attribution out;
  for (std::size_t k = in.back_to_back ? 1 : 0; k < idle[0].size(); ++k) {
    const double T = in.span[k];
    if (!(T > 0) || !std::isfinite(T))
      throw ConfigError("attribution: the measured span of step " + std::to_string(k) +
                        " is not > 0");
    double busy = 0;
    for (const auto& d_r : dur[k])
      for (double t : d_r)
        if (!std::isnan(t)) busy += t;
    AttributionTerms t;
    t.step = k;
    t.span = T;
    t.measured = bubble_metrics(T, busy, P, 0).bubble_fraction;
    const double unit = P * T;
    const double fa = idle[0][k] / unit, fb = idle[1][k] / unit, fc = idle[2][k] / unit,
                 fd = idle[3][k] / unit;
    t.schedule = fa;
    t.imbalance = fb - fa;
    t.jitter = fc - fb;
    t.communication = fd - fc;
    t.residual = t.measured - fd;
    out.steps.push_back(t);
  }
  if (!out.steps.empty()) {
    std::vector<std::size_t> order(out.steps.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      return out.steps[x].measured < out.steps[y].measured;
    });
    out.median = out.steps[order[(order.size() - 1) / 2]];
    if (order.size() % 2 == 0) {  // the mean of the two middle steps, as a median of an even
      const AttributionTerms& hi = out.steps[order[order.size() / 2]];  // count is
      AttributionTerms& m = out.median;
      for (auto f :
           {&AttributionTerms::span, &AttributionTerms::measured, &AttributionTerms::schedule,
            &AttributionTerms::imbalance, &AttributionTerms::jitter,
            &AttributionTerms::communication, &AttributionTerms::residual})
        m.*f = 0.5 * (m.*f + hi.*f);
    }
  }
  return out;
}

}  // namespace bb
