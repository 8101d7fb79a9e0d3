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

using Table = std::vector<std::vector<double>>;  // per rank, per list position

// The measured durations, checked against the lists: dur[k][r][i] of rank r's unit at list
// position i in step k (NaN at positions without a unit), and the positions.
struct Measured {
  std::vector<std::vector<Position>> pos;   // per rank
  std::vector<Table> dur;                   // per step
  std::vector<double> by_kind[kUnitKinds];  // stage units, all ranks and steps
  std::map<std::tuple<int, int, int>, std::vector<double>> by_place;  // (rank, chunk, kind)
};

// The inputs' shape: a lowered schedule, records of every rank for every step.
void check_input(const AttributionInput& in) {
  if (in.lowered == nullptr) throw ConfigError("attribution: no schedule");
  const Schedule& s = *in.lowered;
  if (!s.lowered) throw ScheduleError("attribution: the schedule is not lowered");
  if (in.records.size() != static_cast<std::size_t>(s.P))
    throw ConfigError("attribution: records of " + std::to_string(in.records.size()) +
                      " ranks for a schedule of " + std::to_string(s.P));
  for (int r = 0; r < s.P; ++r)
    if (in.records[static_cast<std::size_t>(r)].size() != in.span.size())
      throw ConfigError("attribution: rank " + std::to_string(r) + " has records of " +
                        std::to_string(in.records[static_cast<std::size_t>(r)].size()) +
                        " steps, the spans are of " + std::to_string(in.span.size()));
}

// Rank r's records of step k into m (every compute unit of its list once).
void measure_step(const AttributionInput& in, int r, std::size_t k, Measured& m) {
  const std::vector<Position>& rp = m.pos[static_cast<std::size_t>(r)];
  const std::size_t units = static_cast<std::size_t>(
      std::count_if(rp.begin(), rp.end(), [](const Position& p) { return p.kind >= 0; }));
  std::vector<double>& d = m.dur[k].emplace_back(rp.size(), std::nan(""));
  const auto& recs = in.records[static_cast<std::size_t>(r)][k];
  if (recs.size() != units)
    throw ConfigError("attribution: " + where(r, k) + " has " + std::to_string(recs.size()) +
                      " records, its list " + std::to_string(units) + " compute units");
  for (const MeasuredUnit& u : recs) {
    const std::string at = "attribution: " + where(r, k) + ": position " + std::to_string(u.index);
    if (u.index >= rp.size() || rp[u.index].kind < 0)
      throw ConfigError(at + " is not a compute unit of the list");
    if (!std::isnan(d[u.index])) throw ConfigError(at + " recorded twice");
    const double t = u.end - u.start;
    if (!(t >= 0)) throw ConfigError(at + " ends before it starts");
    d[u.index] = t;
    const Position& p = rp[u.index];
    m.by_kind[p.kind].push_back(t / p.fraction);
    m.by_place[{r, p.chunk, p.kind}].push_back(t);
  }
}

Measured measure(const AttributionInput& in) {
  const Schedule& s = *in.lowered;
  Measured m;
  m.dur.resize(in.span.size());
  for (int r = 0; r < s.P; ++r) {
    m.pos.push_back(positions(s, r));
    for (std::size_t k = 0; k < in.span.size(); ++k) measure_step(in, r, k, m);
  }
  return m;
}

// The cost tables of (a) (per-kind medians, times each chunk's fraction) and (b) (per-(rank,
// chunk, kind) medians), per rank and list position (the same in every step).
std::pair<Table, Table> median_tables(Measured& m) {
  double kind_median[kUnitKinds];
  for (int k = 0; k < kUnitKinds; ++k) kind_median[k] = median(m.by_kind[k], 0.0);
  std::map<std::tuple<int, int, int>, double> place_median;
  for (auto& [key, v] : m.by_place) place_median[key] = median(std::move(v));
  Table a(m.pos.size()), b(m.pos.size());
  for (std::size_t r = 0; r < m.pos.size(); ++r) {
    const std::vector<Position>& rp = m.pos[r];
    a[r].assign(rp.size(), 0.0);
    b[r].assign(rp.size(), 0.0);
    for (std::size_t i = 0; i < rp.size(); ++i) {
      if (rp[i].kind < 0) continue;
      a[r][i] = kind_median[rp[i].kind] * rp[i].fraction;
      b[r][i] = place_median.at({static_cast<int>(r), rp[i].chunk, rp[i].kind});
    }
  }
  return {std::move(a), std::move(b)};
}

// Idle time of each replay (a) ... (d) per step: idle[x][k] (empty without steps to attribute).
struct Idle {
  std::vector<double> of[4];
};

Idle replay_idle(const AttributionInput& in, const Measured& m, const Table& ta, const Table& tb) {
  const Schedule& s = *in.lowered;
  const auto table = [](const Table& t) {
    return [p = &t](int r, std::size_t i, int) { return (*p)[static_cast<std::size_t>(r)][i]; };
  };
  // Each step's own durations (fixed_step), or those of the step being replayed (every step).
  constexpr std::size_t kEveryStep = ~std::size_t{0};
  const auto measured = [&m](std::size_t fixed_step) {
    return [&m, fixed_step](int r, std::size_t i, int step) {
      const std::size_t k = fixed_step != kEveryStep ? fixed_step : static_cast<std::size_t>(step);
      return m.dur[k][static_cast<std::size_t>(r)][i];
    };
  };
  ReplayCosts a, b, c, d;
  a.compute = table(ta);
  b.compute = table(tb);
  d.message = in.link;
  d.message_bytes = in.message_bytes;
  const auto idle_of = [&](const ReplayCosts& costs, int n) {
    std::vector<double> out;
    for (const ReplayStep& st : replay(s, costs, n).steps) out.push_back(st.idle(s.P));
    return out;
  };
  Idle idle;
  const std::size_t steps = in.span.size();
  if (in.back_to_back) {
    const int n = static_cast<int>(steps);
    if (n >= 2) {
      c.compute = measured(kEveryStep);
      d.compute = c.compute;
      idle.of[0] = idle_of(a, n);
      idle.of[1] = idle_of(b, n);
      idle.of[2] = idle_of(c, n);
      idle.of[3] = idle_of(d, n);
    }
  } else if (steps > 0) {
    const double ia = idle_of(a, 1)[0], ib = idle_of(b, 1)[0];
    for (std::size_t k = 0; k < steps; ++k) {
      c.compute = measured(k);
      d.compute = c.compute;
      idle.of[0].push_back(ia);
      idle.of[1].push_back(ib);
      idle.of[2].push_back(idle_of(c, 1)[0]);
      idle.of[3].push_back(in.link ? idle_of(d, 1)[0] : idle.of[2].back());
    }
  }
  return idle;
}

// Step k's terms: each replay's idle time over the measured P·T.
AttributionTerms terms(const AttributionInput& in, const Measured& m, const Idle& idle,
                       std::size_t k) {
  const int P = in.lowered->P;
  const double T = in.span[k];
  if (!(T > 0) || !std::isfinite(T))
    throw ConfigError("attribution: the measured span of step " + std::to_string(k) +
                      " is not > 0");
  double busy = 0;
  for (const auto& d_r : m.dur[k])
    for (double t : d_r)
      if (!std::isnan(t)) busy += t;
  AttributionTerms t;
  t.step = k;
  t.span = T;
  t.measured = bubble_metrics(T, busy, P, 0).bubble_fraction;
  const double unit = P * T;
  const double fa = idle.of[0][k] / unit, fb = idle.of[1][k] / unit, fc = idle.of[2][k] / unit,
               fd = idle.of[3][k] / unit;
  t.schedule = fa;
  t.imbalance = fb - fa;
  t.jitter = fc - fb;
  t.communication = fd - fc;
  t.residual = t.measured - fd;
  return t;
}

// The step with the median measured bubble; for an even count the mean of the two middle ones.
AttributionTerms median_step(const std::vector<AttributionTerms>& steps) {
  std::vector<std::size_t> order(steps.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t x, std::size_t y) { return steps[x].measured < steps[y].measured; });
  AttributionTerms m = steps[order[(order.size() - 1) / 2]];
  if (order.size() % 2 == 0) {  // the mean of the two middle steps, as a median of an even count
    const AttributionTerms& hi = steps[order[order.size() / 2]];
    for (auto f :
         {&AttributionTerms::span, &AttributionTerms::measured, &AttributionTerms::schedule,
          &AttributionTerms::imbalance, &AttributionTerms::jitter, &AttributionTerms::communication,
          &AttributionTerms::residual})
      m.*f = 0.5 * (m.*f + hi.*f);
  }
  return m;
}

}  // namespace

Attribution attribute(const AttributionInput& in) {
  check_input(in);
  Measured m = measure(in);
  const auto [ta, tb] = median_tables(m);
  const Idle idle = replay_idle(in, m, ta, tb);
  Attribution out;
  for (std::size_t k = in.back_to_back ? 1 : 0; k < idle.of[0].size(); ++k)
    out.steps.push_back(terms(in, m, idle, k));
  if (!out.steps.empty()) out.median = median_step(out.steps);
  return out;
}

}  // namespace bb
