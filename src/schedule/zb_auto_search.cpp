// zb-auto's generator (schedule/zb_auto.hpp): the candidate orders of each memory level run
// through the list scheduler, compared by the largest stage span, then the makespan; the
// handcrafted orders it compares with are timed on the dataflow engine (schedule/engine.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "common/error.hpp"
#include "schedule/engine.hpp"
#include "schedule/schedule_info.hpp"
#include "schedule/zb_auto.hpp"

namespace bb {
namespace {

struct Candidate {
  Schedule schedule;
  double makespan = 0, span = 0;
  std::optional<ZeroBubbleOrder> order;  // the list scheduler's, where it made it
};

bool le(double a, double b) {
  return a <= b + 1e-12 * std::max(1.0, std::abs(b));
}

// x is no worse than y in both views, and better in one (span first).
bool improves(const Candidate& x, const Candidate& y) {
  if (!le(x.span, y.span) || !le(x.makespan, y.makespan)) return false;
  return !le(y.span, x.span) || !le(y.makespan, x.makespan);
}

// One step of an order with the costs, as the simulator times it (as soon as possible; a
// message takes c.comm between ranks): what the rank-wise engine needs of a stage's costs.
class OrderTimer {
 public:
  OrderTimer(const Schedule& s, const StageCosts& c)
      : s_(s),
        c_(c),
        first_(static_cast<std::size_t>(s.P), -1.0),
        last_(static_cast<std::size_t>(s.P), 0.0) {}
  double cost(int, const Action* a, std::size_t n) const {
    return n == 2 ? one(a[0]) + one(a[1]) : one(a[0]);
  }
  double grad_offset(int r, const Action* a, std::size_t n) const { return cost(r, a, n); }
  double delay(int, int, const Action&) const { return c_.comm; }
  double step_gap(int) const { return 0; }
  void record(int rank, int, std::size_t, std::size_t, double, double start, double) {
    if (first_[rank] < 0) first_[rank] = start;
  }
  void step_done(int rank, int, double end) { last_[rank] = end; }
  const std::vector<double>& first() const { return first_; }
  const std::vector<double>& last() const { return last_; }

 private:
  double one(const Action& a) const {
    const auto stage = static_cast<std::size_t>(s_.chunk_stage[a.chunk]);
    switch (a.op) {
      case Op::F:
        return c_.f[stage];
      case Op::B:
        return c_.b[stage];
      case Op::W:
        return c_.w[stage];
      case Op::BW:
        return c_.b[stage] + c_.w[stage];
      default:
        return 0;
    }
  }
  const Schedule& s_;
  const StageCosts& c_;
  std::vector<double> first_, last_;
};

// A handcrafted order's views with the costs (one step): the makespan (the last rank's end)
// and the largest stage span. ScheduleError when the lists wait on each other for ever.
Candidate evaluate(Schedule s, const StageCosts& c) {
  OrderTimer timer(s, c);
  DataflowEngine<double, OrderTimer> engine(s, timer);
  if (!engine.run())
    throw ScheduleError("zb-auto: the order of '" + s.name + "' is stuck (a cyclic wait)");
  Candidate out{std::move(s), 0, 0, std::nullopt};
  for (std::size_t r = 0; r < timer.last().size(); ++r) {
    out.makespan = std::max(out.makespan, timer.last()[r]);
    out.span = std::max(out.span, timer.last()[r] - timer.first()[r]);
  }
  return out;
}

// b with some ranks' lists taken from h (a suffix of ranks, a prefix, or one rank): the best
// of those that are no worse than both in both views, if any (a mix can deadlock: skipped).
std::optional<Candidate> mix(const Candidate& b, const Candidate& h, const StageCosts& c) {
  const int P = b.schedule.P;
  std::optional<Candidate> out;
  const auto consider = [&](const std::vector<bool>& from_h) {
    Schedule s = b.schedule;
    for (int r = 0; r < P; ++r)
      if (from_h[r]) s.ranks[r] = h.schedule.ranks[r];
    try {
      Candidate x = evaluate(std::move(s), c);
      const bool ok = le(x.span, b.span) && le(x.makespan, b.makespan) && le(x.span, h.span) &&
                      le(x.makespan, h.makespan);
      if (ok && (!out || improves(x, *out))) out = std::move(x);
    } catch (const ScheduleError&) {
    }
  };
  for (int k = 1; k < P; ++k) {
    std::vector<bool> suffix(static_cast<std::size_t>(P)), prefix(static_cast<std::size_t>(P)),
        one(static_cast<std::size_t>(P));
    for (int r = 0; r < P; ++r) {
      suffix[r] = r >= k;
      prefix[r] = r < k;
      one[r] = r == k;
    }
    consider(suffix);
    consider(prefix);
    consider(one);
  }
  return out;
}

// The choice at one memory level. Its references are the best of the level below and the
// handcrafted orders that first fit here; the choice is no worse than any of them in the
// steady view (largest stage span), and, among those, no worse than all of them in the single
// view either where some candidate is (then the smallest span, then makespan), else the
// smallest makespan (a handcrafted order and the level below each better in one view: a
// conflict, docs/schedules.md).
class Choice {
 public:
  explicit Choice(const std::vector<Candidate>& refs) {
    for (const Candidate& r : refs) {
      span_ = std::min(span_, r.span);
      makespan_ = std::min(makespan_, r.makespan);
    }
  }
  // What a run must stay within to be taken (makespan, span).
  std::pair<double, double> bounds() const {
    constexpr double kSlack = 1 + 1e-9;  // (a run's own sums round differently)
    if (chosen_ && dominates_) return {makespan_ * kSlack, chosen_->span * kSlack};
    return {std::numeric_limits<double>::infinity(), span_ * kSlack};
  }
  void offer(Candidate x) {
    if (!le(x.span, span_)) return;
    const bool dominates = le(x.makespan, makespan_);
    if (dominates) {
      if (dominates_ && !(x.span < chosen_->span ||
                          (le(x.span, chosen_->span) && x.makespan < chosen_->makespan)))
        return;
    } else if (dominates_ || (chosen_ && !(x.makespan < chosen_->makespan))) {
      return;
    }
    dominates_ = dominates;
    chosen_ = std::move(x);
    ++changes_;
  }
  bool dominates() const { return dominates_; }
  int changes() const { return changes_; }
  const std::optional<ZeroBubbleOrder>& order() const { return chosen_->order; }
  Candidate take() && { return std::move(*chosen_); }

 private:
  double span_ = std::numeric_limits<double>::infinity();
  double makespan_ = std::numeric_limits<double>::infinity();
  std::optional<Candidate> chosen_;
  bool dominates_ = false;
  int changes_ = 0;
};

// How much of the search a size affords (zb_auto.hpp's thresholds).
enum class Reach : std::uint8_t { every_level, limit_only, few };

class Chain {
 public:
  Chain(const ScheduleParams& p, Reach reach) : p_(p), c_(zb_auto_costs(p)), reach_(reach) {
    if (reach == Reach::few) return;
    for (Schedule s :
         {generate(ScheduleId::zb_h1, {p.P, p.M, 1}), generate(ScheduleId::zb_h2, {p.P, p.M, 1})}) {
      const double peak = zb_auto_held_peak(s, p.mem_w);
      handcrafted_.push_back({std::move(s), peak});
    }
  }
  // Levels 1..L in turn (every_level: the result is non-increasing in L), or only L.
  // (Each level's choice is handed to `each`, if given; the last one is returned.)
  Candidate walk(int L, const std::function<void(const Candidate&)>& each = nullptr);

 private:
  void level(int cap);
  void run(const ZeroBubbleOrder& o, Choice& choice);
  void local_search(int cap, Choice& choice);

  const ScheduleParams& p_;
  const StageCosts c_;
  const Reach reach_;
  std::optional<Candidate> best_;
  struct Handcrafted {
    Schedule schedule;
    double peak;
    bool offered = false;
  };
  std::vector<Handcrafted> handcrafted_;  // ZB-H1, ZB-H2 (not when few)
  // Orders already run at a lower level without the cap ever holding them back: the same run.
  std::map<std::tuple<std::vector<int>, std::vector<int>, int, int>, bool> done_;
};

// Runs o unless a lower level ran it to the same end; offers it.
void Chain::run(const ZeroBubbleOrder& o, Choice& choice) {
  const auto key = std::tuple{o.warmup, o.ahead, static_cast<int>(o.fb), static_cast<int>(o.w)};
  if (auto it = done_.find(key); it != done_.end() && !it->second) return;
  const auto [makespan_above, span_above] = choice.bounds();
  ZeroBubbleRun run = zero_bubble_run("zb-auto", p_.P, p_.M, o, c_, makespan_above, span_above);
  done_[key] = run.memory_bound;
  if (!run.stopped) choice.offer({std::move(run.schedule), run.makespan, run.span, o});
}

// From the choice's order (b_first / f_first), each rank's warm-up and bound on forwards ahead
// moved by one while that makes a better choice.
void Chain::local_search(int cap, Choice& choice) {
  for (int pass = 0; pass < kLocalSearchPasses; ++pass) {
    const std::optional<ZeroBubbleOrder>& at = choice.order();
    if (!at || at->fb == ZeroBubbleOrder::FB::strict) return;
    ZeroBubbleOrder from = *at;
    from.cap = cap;
    const int before = choice.changes();
    for (int r = 0; r < p_.P; ++r)
      for (int what : {0})
        for (int step : {-1, 1}) {
          ZeroBubbleOrder o = from;
          int& x = what == 0 ? o.warmup[r] : o.ahead[r];
          x += step;
          if (x < (what == 0 ? 0 : 1) || x > std::min(cap, p_.M) - (what == 0)) continue;
          if (what == 0) o.ahead[r] = std::max(o.ahead[r], o.warmup[r] + 1);
          run(o, choice);
        }
    if (choice.changes() == before) return;
  }
}

void Chain::level(int cap) {
  std::vector<Candidate> refs;
  if (best_) refs.push_back(std::move(*best_));
  for (Handcrafted& h : handcrafted_)  // from the first level they fit
    if (!h.offered && h.peak <= cap + 1e-9) {
      h.offered = true;
      refs.push_back(evaluate(std::move(h.schedule), c_));
    }
  Choice choice(refs);
  for (const Candidate& r : refs) choice.offer(r);
  if (!refs.empty() && refs[0].order) {  // the level below's order first: a tight bound early
    ZeroBubbleOrder o = *refs[0].order;
    o.cap = cap;
    run(o, choice);
  }
  for (const ZeroBubbleOrder& o : zb_auto_orders(p_, cap, reach_ == Reach::few)) run(o, choice);
  if (3LL * p_.P * p_.M <= kLocalSearchUpTo) local_search(cap, choice);
  for (std::size_t i = 1; i < refs.size() && !choice.dominates(); ++i)  // a conflict: mixes
    if (std::optional<Candidate> m = mix(refs[0], refs[i], c_)) choice.offer(std::move(*m));
  best_ = std::move(choice).take();
}

Candidate Chain::walk(int L, const std::function<void(const Candidate&)>& each) {
  for (int cap = reach_ == Reach::every_level ? 1 : L; cap <= L; ++cap) {
    level(cap);
    if (each) each(*best_);
  }
  return std::move(*best_);
}

}  // namespace

std::vector<ZbAutoLevel> zb_auto_levels(const ScheduleParams& p) {
  require_accepted(ScheduleId::zb_auto, p);
  std::vector<ZbAutoLevel> out;
  Chain(p, Reach::every_level).walk(zb_auto_memory_limit(p), [&](const Candidate& c) {
    out.push_back({c.schedule, c.makespan, c.span});
  });
  return out;
}

Schedule generate_zb_auto(const ScheduleParams& p) {
  require_accepted(ScheduleId::zb_auto, p);
  const long long actions = 3LL * p.P * p.M;
  const Reach reach = actions <= kSearchEveryLevelUpTo ? Reach::every_level
                      : actions <= kCompareUpTo        ? Reach::limit_only
                                                       : Reach::few;
  Candidate best = Chain(p, reach).walk(zb_auto_memory_limit(p));
  best.schedule.name = "zb-auto";
  return std::move(best.schedule);
}

}  // namespace bb
