#include "sim/sim.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "common/error.hpp"
#include "schedule/edges.hpp"
#include "schedule/engine.hpp"
#include "schedule/parallel.hpp"
#include "schedule/periodic.hpp"
#include "schedule/periodic_engine.hpp"

namespace bb {
namespace {

// Below this many actions the plain engine is fast enough (and the periodic one would mostly
// run its warm-up and cool-down).
constexpr std::size_t kPeriodicMinActions = std::size_t{1} << 20;

// The length every micro-batch's route has, or 0 when they differ.
int common_route_length(const Schedule& s) {
  if (s.routes.empty()) return 0;
  if (s.uniform_routes()) return s.routes.front().length();
  const int L = s.routes.front().length();
  for (const Route& rt : s.routes)
    if (rt.length() != L) return 0;
  return L;
}

// Per-chunk costs, computed once: a chunk's share of a stage is P / (length of the routes
// through it), the same for every micro-batch that visits it.
//
// Time unit: with per-stage costs (one value each) and every route of one length L (all
// built-in placements), every chunk's share is the same P/L, and the engine runs in units of
// one share: a chunk's F costs F. Times are converted back at the end, t·P/L rounded once, so
// integer costs give exact times also where P/L has no binary form (v = 3: F/3 summed 93 times
// is not 31, but 93·8/24 is). Link and optimizer times are divided by the share instead.
class CostModel {
 public:
  CostModel(const Schedule& s, const SimConfig& cfg) {
    const auto C = static_cast<std::size_t>(s.num_chunks());
    for (const auto* v : {&cfg.t_f, &cfg.t_b, &cfg.t_w}) {
      if (v->size() != 1 && v->size() != C)
        throw ConfigError("sim: a cost list needs 1 value or one per chunk (" + std::to_string(C) +
                          "), got " + std::to_string(v->size()));
      for (double x : *v)
        if (!(x >= 0)) throw ConfigError("sim: costs must be >= 0");
    }
    std::vector<double> share = chunk_shares(s);
    if (const int length = common_route_length(s);
        length > 0 && cfg.t_f.size() == 1 && cfg.t_b.size() == 1 && cfg.t_w.size() == 1) {
      num_ = s.P;
      den_ = length;
      int e = 0;
      pow2_ = std::frexp(num_ / den_, &e) == 0.5;  // 1/2, 1/4, ...: scaling is exact
      share.assign(C, 1.0);
    }
    auto per_chunk = [&](const std::vector<double>& v, std::size_t c) {
      return v.size() == 1 ? v[0] * share[c] : v[c];
    };
    cost_.resize(C);
    for (std::size_t c = 0; c < C; ++c) {
      const double f = per_chunk(cfg.t_f, c), b = per_chunk(cfg.t_b, c), w = per_chunk(cfg.t_w, c);
      cost_[c] = {f, b, w, b + w, cfg.t_fb >= 0 ? cfg.t_fb * share[c] : -1.0};
    }
    delay_ = engine_time(message_time(cfg, -1, -1));  // no pair: the α-β time
    if (cfg.links) {
      pair_delay_.resize(static_cast<std::size_t>(s.P));
      for (const LinkFit& f : cfg.links->fits())
        if (f.src >= 0 && f.src < s.P && f.dst >= 0 && f.dst < s.P)
          pair_delay_[f.src].push_back(
              {f.dst, engine_time(cfg.links->cost(f.src, f.dst, cfg.msg_bytes))});
    }
    gap_ = engine_time(cfg.optimizer_time);
  }

  // A time of the engine in the caller's units, and back.
  // A power-of-two share scales exactly (as the share's costs did before); any other is
  // applied as t·num/den, one rounding for integer t.
  double real_time(double t) const {
    return num_ == den_ ? t : pow2_ ? t * (num_ / den_) : t * num_ / den_;
  }
  double engine_time(double t) const {
    return num_ == den_ ? t : pow2_ ? t / (num_ / den_) : t * den_ / num_;
  }

  double one(const Action& a) const {
    return is_compute(a.op) ? cost_[a.chunk].by_op[static_cast<int>(a.op)] : 0.0;
  }
  double cost(int, const Action* a, std::size_t n) const {
    if (n == 2 && cost_[a[0].chunk].fb >= 0) return cost_[a[0].chunk].fb;
    return n == 2 ? one(a[0]) + one(a[1]) : one(a[0]);
  }
  // The input gradient leaves when its action ends: after B, or after a whole BW (a fused
  // backward sends once it is done, as the runtime does), or at the end of an FB pair.
  double grad_offset(int r, const Action* a, std::size_t n) const { return cost(r, a, n); }
  double delay(int src, int dst, const Action&) const {
    if (!pair_delay_.empty())
      for (const auto& [to, d] : pair_delay_[src])
        if (to == dst) return d;
    return delay_;
  }
  double step_gap(int) const { return gap_; }

  // Whether every time the engine can reach in `steps` steps of `units` compute units is a
  // multiple of one power of two (the costs' finest) below 2^52 of it. Then every sum is exact,
  // in any order, and the periodic engine's jumps (J·λ) give bit for bit what J additions give.
  bool exact(std::size_t units, int steps) const {
    int grain = 0;
    double top = 0;
    const auto fits = [&](double x) {
      if (x < 0) return true;  // not used (fb < 0: the sum)
      for (int e = 0; e <= 40; ++e) {
        const double y = std::ldexp(x, e);
        if (y == std::floor(y)) {
          grain = std::max(grain, e);
          top = std::max(top, x);
          return true;
        }
      }
      return false;
    };
    for (const ChunkCost& c : cost_) {
      for (double x : c.by_op)
        if (!fits(x)) return false;
      if (!fits(c.fb)) return false;
    }
    if (!fits(delay_) || !fits(gap_)) return false;
    if (!pair_delay_.empty()) return false;  // fitted link costs: no common grain
    // Every time is at most all the work of all ranks, every message delay and every gap.
    const double bound =
        static_cast<double>(steps) * (static_cast<double>(units) * (2 * top + delay_) + gap_);
    return std::ldexp(bound, grain) < 0x1p52;
  }

 private:
  struct ChunkCost {
    double by_op[4];  // F, B, W, BW (Op order)
    double fb;        // overlapped pair, < 0: sum
  };
  std::vector<ChunkCost> cost_;
  double delay_ = 0, gap_ = 0;
  std::vector<std::vector<std::pair<int, double>>> pair_delay_;  // per src: (dst, delay)
  double num_ = 1, den_ = 1;  // an engine time unit is num_/den_ of the caller's
  bool pow2_ = false;
};

// Peak live activations, point-to-point messages sent and (given costs) the busy time of one
// rank, action by action in its order (communication actions change none of them).
//
// Live activations are counted in chunks (each F adds one, each W or BW takes one away) while
// every route has one length L, and converted to stages at the end (chunks·P/L, rounded once);
// otherwise each chunk adds its own fraction.
class RankCounts {
 public:
  RankCounts(const Schedule& s, int r, int route_length) : s_(&s), r_(r), length_(route_length) {}
  void add(const Action& a) {
    if (a.op == Op::F) {
      if (length_ > 0) {
        peak_chunks_ = std::max(peak_chunks_, ++live_chunks_);
      } else {
        live_ += s_->chunk_fraction(static_cast<int>(a.mb));
        peak_ = std::max(peak_, live_);
      }
    }
    messages_ += !remote_out(*s_, a, s_->routes[a.mb]).none();
    if (a.op == Op::W || a.op == Op::BW) {
      if (length_ > 0)
        --live_chunks_;
      else
        live_ -= s_->chunk_fraction(static_cast<int>(a.mb));
    }
  }
  // A compute unit (n = 2: an FB pair) and, with costs, its busy time.
  void add_unit(const Action* u, std::size_t n, const CostModel* costs) {
    if (costs) busy_ += costs->cost(r_, u, n);
    for (std::size_t i = 0; i < n; ++i) add(u[i]);
  }
  // reps repetitions of a segment (compute actions only), given two of them counted: the rest
  // adds what the second added, and peaks where the second did, moved by its net change
  // (exact: counts are whole chunks, and sim.cpp runs this only on costs whose sums are exact).
  void add_segment(const PeriodicLists& lists, const Segment& g, const CostModel& costs) {
    const auto one_rep = [&](std::uint32_t rep) {
      for (std::uint32_t k = 0; k < g.length;) {
        Action u[2] = {lists.at(g, rep, k), {}};
        const std::size_t n = unit_length(u[0], g.length - k);
        if (n == 2) u[1] = lists.at(g, rep, k + 1);
        add_unit(u, n, &costs);
        k += static_cast<std::uint32_t>(n);
      }
    };
    one_rep(0);
    if (g.reps == 1) return;
    const long long live0 = live_chunks_, peak0 = peak_chunks_;
    const std::size_t messages0 = messages_;
    const double busy0 = busy_;
    peak_chunks_ = live_chunks_;  // the second repetition's own peak
    one_rep(1);
    const long long rep_peak = peak_chunks_, more = static_cast<long long>(g.reps) - 2;
    const long long d = live_chunks_ - live0;
    peak_chunks_ = std::max({peak0, rep_peak, rep_peak + more * d});
    live_chunks_ += more * d;
    messages_ += static_cast<std::size_t>(more) * (messages_ - messages0);
    busy_ += static_cast<double>(more) * (busy_ - busy0);
  }
  double peak() const {
    return length_ > 0 ? static_cast<double>(peak_chunks_) * s_->P / length_ : peak_;
  }
  std::size_t messages() const { return messages_; }
  double busy() const { return busy_; }

 private:
  const Schedule* s_;
  int r_;
  int length_;  // every route's length, or 0
  long long live_chunks_ = 0, peak_chunks_ = 0;
  double live_ = 0, peak_ = 0, busy_ = 0;
  std::size_t messages_ = 0;
};

struct Recorder : CostModel {
  Recorder(const Schedule& s, const SimConfig& cfg, int P, bool keep)
      : CostModel(s, cfg),
        stats(P),
        step_end(static_cast<std::size_t>(cfg.steps), 0.0),
        keep(keep) {
    for (auto& st : stats) st.first_start = -1;
  }
  // Busy time is the sum of the costs (counted beside the engine): here only what needs the
  // times — a rank's first start, its step ends, and the timeline when asked for.
  void record(int rank, int step, std::size_t index, std::size_t n, double ready, double start,
              double end) {
    if (step != 0) return;
    RankStats& st = stats[rank];
    if (st.first_start < 0) st.first_start = start;
    if (keep) events.push_back({rank, index, static_cast<int>(n), ready, start, end});
  }
  void step_done(int rank, int step, double end) {
    step_end[step] = std::max(step_end[step], end);
    if (step == 0) stats[rank].last_end = end;
  }
  std::vector<RankStats> stats;
  std::vector<double> step_end;
  std::vector<SimEvent> events;
  bool keep;
};

// Each rank's counts, in its list order; with costs, the busy time too (an FB pair costs what
// the engine charges for it).
std::vector<RankCounts> rank_counts(const Schedule& s, const CostModel* costs = nullptr) {
  std::vector<RankCounts> counts;
  counts.reserve(s.P);
  const int length = common_route_length(s);
  for (int r = 0; r < s.P; ++r) {
    RankCounts& c = counts.emplace_back(s, r, length);
    const Action* const begin = s.ranks[r].data();
    const Action* const end = begin + s.ranks[r].size();
    for (const Action* p = begin; p != end;) {
      if (is_comm(p->op)) {
        ++p;
        continue;
      }
      const std::size_t n = unit_length(p, end);
      c.add_unit(p, n, costs);
      p += n;
    }
  }
  return counts;
}

// The same from lists in periodic form (compute actions only, every route of one length).
std::vector<RankCounts> rank_counts(const Schedule& s, const PeriodicLists& lists,
                                    const CostModel& costs) {
  std::vector<RankCounts> counts;
  counts.reserve(s.P);
  const int length = common_route_length(s);
  for (int r = 0; r < s.P; ++r) {
    RankCounts& c = counts.emplace_back(s, r, length);
    for (const Segment& g : lists.ranks[r]) c.add_segment(lists, g, costs);
  }
  return counts;
}

// The result from the engine's records and the ranks' counts.
// The single step starts at 0 on every rank, as with a barrier between steps, and nothing
// of step 2 can start before step 1's last action on that rank: step 1's records are the
// single-step view.
SimResult finish(const Schedule& s, const SimConfig& cfg, const CostModel& costs, Recorder& rec,
                 const std::vector<RankCounts>& counts, std::size_t jumped) {
  SimResult res;
  res.jumped_units = jumped;
  res.ranks = std::move(rec.stats);
  res.events = std::move(rec.events);
  std::sort(res.events.begin(), res.events.end(), [](const SimEvent& a, const SimEvent& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.index < b.index;
  });
  for (SimEvent& e : res.events) {
    e.ready = costs.real_time(e.ready);
    e.start = costs.real_time(e.start);
    e.end = costs.real_time(e.end);
  }
  for (int r = 0; r < s.P; ++r) {
    const RankCounts& c = counts[r];
    RankStats& st = res.ranks[r];
    if (st.first_start >= 0) st.first_start = costs.real_time(st.first_start);
    st.last_end = costs.real_time(st.last_end);
    res.ranks[r].busy = costs.real_time(c.busy());
    res.ranks[r].peak_activations = c.peak();
    res.ranks[r].peak_activation_bytes = c.peak() * cfg.act_bytes;
    res.p2p_messages += c.messages();
  }
  double makespan = 0;
  for (const auto& st : res.ranks) {
    res.busy_sum += st.busy;
    makespan = std::max(makespan, st.last_end);
  }
  const bool uniform = cfg.t_f.size() == 1 && cfg.t_b.size() == 1 && cfg.t_w.size() == 1;
  if (uniform) {
    res.t_ideal = s.M * (cfg.t_f[0] + cfg.t_b[0] + cfg.t_w[0]);
  } else {
    for (const auto& st : res.ranks) res.t_ideal = std::max(res.t_ideal, st.busy);
  }
  res.single = bubble_metrics(makespan, res.busy_sum, s.P, res.t_ideal);
  const double period = costs.real_time(rec.step_end[cfg.steps - 1] - rec.step_end[cfg.steps - 2]);
  res.steady = bubble_metrics(period, res.busy_sum + s.P * cfg.optimizer_time, s.P,
                              res.t_ideal + cfg.optimizer_time);
  return res;
}

}  // namespace

double message_time(const SimConfig& cfg, int src, int dst) {
  if (cfg.links && cfg.links->covers(src, dst)) return cfg.links->cost(src, dst, cfg.msg_bytes);
  return cfg.latency + (cfg.bandwidth > 0 ? cfg.msg_bytes / cfg.bandwidth : 0.0);
}

std::vector<double> peak_activations(const Schedule& s) {
  std::vector<double> peak;
  for (const RankCounts& c : rank_counts(s)) peak.push_back(c.peak());
  return peak;
}

std::size_t p2p_messages(const Schedule& s) {
  std::size_t n = 0;
  for (const RankCounts& c : rank_counts(s)) n += c.messages();
  return n;
}

SimResult simulate(const Schedule& s, const SimConfig& cfg_in) {
  SimConfig cfg = cfg_in;
  cfg.steps = std::max(2, cfg.steps);
  Recorder rec(s, cfg, s.P, cfg.record_events);
  const CostModel costs(s, cfg);  // the counting thread's own (rec may be replaced below)
  std::vector<RankCounts> counts;
  bool done = false;
  // The periodic engine on a schedule whose pipeline repeats itself (1F1B at P=512, M=8192:
  // about 6 % of the compute actions run, the rest jumped over), and the counts from the
  // periodic lists.
  std::size_t jumped = 0;
  if (cfg.engine != SimConfig::Engine::plain && !cfg.record_events && !flat_passes_forced() &&
      (cfg.engine == SimConfig::Engine::periodic || s.size() >= kPeriodicMinActions) &&
      costs.exact(s.size(), cfg.steps)) {
    const PeriodicLists lists = compress(s, true);
    PeriodicEngine<Recorder> engine(s, lists, rec, cfg.steps);
    engine.allow_phases();
    engine.skip_repeated_steps();
    engine.allow_routes_by_chunk();
    if (engine.run() == PeriodicEngine<Recorder>::Outcome::done) {
      done = true;
      jumped = engine.jumped_units();
      counts = rank_counts(s, lists, costs);
    } else {
      rec = Recorder(s, cfg, s.P, cfg.record_events);
    }
  }
  // Activation peaks and message counts depend on the order of each rank's list only: on a
  // large schedule, a second thread counts them while the engine runs.
  std::thread counter;
  if (!done) {
    if (core_parallel(s))
      counter = std::thread([&] { counts = rank_counts(s, &costs); });
    else
      counts = rank_counts(s, &costs);
  }
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{counter};
  // A lowered schedule carries the order its lowering found; replaying it skips the search.
  // Should it not fit (the lists were edited), the partial records are dropped and the
  // engine searches.
  if (!done && s.compute_order) {
    DataflowEngine<double, Recorder> engine(s, rec, cfg.steps, s.compute_order.get());
    done = engine.run();
    if (!done) rec = Recorder(s, cfg, s.P, cfg.record_events);
  }
  if (!done) {
    DataflowEngine<double, Recorder> engine(s, rec, cfg.steps);
    if (!engine.run())
      throw ScheduleError("simulation of '" + s.name + "' is stuck (a cyclic wait):\n" +
                          engine.stuck_report());
  }
  if (counter.joinable()) counter.join();
  return finish(s, cfg, costs, rec, counts, jumped);
}

SimResult simulate(const PeriodicSchedule& ps, const SimConfig& cfg_in) {
  const Schedule& s = ps.shape;
  SimConfig cfg = cfg_in;
  cfg.steps = std::max(2, cfg.steps);
  const CostModel costs(s, cfg);
  if (cfg.engine != SimConfig::Engine::plain && !cfg.record_events &&
      costs.exact(ps.size(), cfg.steps)) {
    Recorder rec(s, cfg, s.P, false);
    PeriodicEngine<Recorder> engine(s, ps.lists, rec, cfg.steps);
    engine.allow_phases();
    engine.skip_repeated_steps();
    engine.allow_routes_by_chunk();
    if (engine.run() == PeriodicEngine<Recorder>::Outcome::done)
      return finish(s, cfg, costs, rec, rank_counts(s, ps.lists, costs), engine.jumped_units());
  }
  return simulate(to_flat(ps), cfg_in);
}

}  // namespace bb
