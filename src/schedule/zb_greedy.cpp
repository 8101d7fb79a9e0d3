#include "schedule/zb_greedy.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "schedule/edges.hpp"

namespace bb {

namespace {
// 32-bit words read as actions (make_action's layout): a vector of actions appends a range of
// them in one pass, each action written once.
struct WordsAsActions {
  using iterator_category = std::random_access_iterator_tag;
  using value_type = Action;
  using difference_type = std::ptrdiff_t;
  using pointer = const Action*;
  using reference = Action;
  const std::uint32_t* p;
  Action operator*() const { return std::bit_cast<Action>(*p); }
  Action operator[](difference_type i) const { return std::bit_cast<Action>(p[i]); }
  WordsAsActions& operator++() {
    ++p;
    return *this;
  }
  WordsAsActions operator++(int) { return {p++}; }
  WordsAsActions& operator--() {
    --p;
    return *this;
  }
  WordsAsActions operator--(int) { return {p--}; }
  WordsAsActions& operator+=(difference_type i) {
    p += i;
    return *this;
  }
  WordsAsActions& operator-=(difference_type i) {
    p -= i;
    return *this;
  }
  friend WordsAsActions operator+(WordsAsActions a, difference_type i) { return {a.p + i}; }
  friend WordsAsActions operator-(WordsAsActions a, difference_type i) { return {a.p - i}; }
  friend difference_type operator-(WordsAsActions a, WordsAsActions b) { return a.p - b.p; }
  friend auto operator<=>(WordsAsActions, WordsAsActions) = default;
};

ScheduleError stuck(const char* name) {
  return ScheduleError(std::string(name) +
                       ": the F/B order gets stuck (a warm-up that grows towards the last rank, "
                       "or a cap below it)");
}

// Appends list[from..] J more times, micro-batches moved by d each time: the last period as
// words (mb: the low 16 bits), the J after it by doubling (each pass copies all periods held so
// far, moved by as many: a loop the compiler vectorizes), then appended in one pass.
void append_repeats(std::vector<Action>& list, std::size_t from, int J, int d,
                    std::vector<std::uint32_t>& block) {
  const std::size_t L = list.size() - from, total = (static_cast<std::size_t>(J) + 1) * L;
  if (L == 0) return;
  block.resize(total);
  for (std::size_t i = 0; i < L; ++i) block[i] = std::bit_cast<std::uint32_t>(list[from + i]);
  for (std::size_t have = L; have < total;) {
    const std::size_t take = std::min(have, total - have);
    const auto delta = static_cast<std::uint32_t>(have / L) * static_cast<std::uint32_t>(d);
    const std::uint32_t* src = block.data();
    std::uint32_t* to = block.data() + have;
    for (std::size_t i = 0; i < take; ++i)
      to[i] = (src[i] & ~0xFFFFu) | ((src[i] + delta) & 0xFFFFu);
    have += take;
  }
  list.insert(list.end(), WordsAsActions{block.data() + L}, WordsAsActions{block.data() + total});
}
}  // namespace

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// Arrival times of the messages one rank reads in one direction, by micro-batch: written by
// the producer in micro-batch order, read by the rank in order; a ring that grows with the
// messages in flight.
class Arrivals {
 public:
  void put(int mb, double t) {
    if (static_cast<std::size_t>(mb - read_) >= v_.size()) grow();
    v_[slot(mb)] = t;
    written_ = mb + 1;
  }
  double at(int mb) const { return mb < written_ ? v_[slot(mb)] : kNever; }
  void taken(int mb) { read_ = mb + 1; }
  int written() const { return written_; }
  // Every message moved d micro-batches and dt later (the steady-state jump).
  void shift(int d, double dt) {
    std::vector<double> v(v_.size());
    for (int m = read_; m < written_; ++m)
      v[static_cast<std::size_t>(m + d) & (v.size() - 1)] = v_[slot(m)] + dt;
    v_ = std::move(v);
    read_ += d;
    written_ += d;
  }

 private:
  std::size_t slot(int mb) const { return static_cast<std::size_t>(mb) & (v_.size() - 1); }
  void grow() {
    std::vector<double> v(v_.size() * 2);
    for (int m = read_; m < written_; ++m)
      v[static_cast<std::size_t>(m) & (v.size() - 1)] = v_[slot(m)];
    v_ = std::move(v);
  }
  std::vector<double> v_ = std::vector<double>(8);
  int read_ = 0, written_ = 0;
};

// The rank whose next action starts first (ties: the lowest rank), over keys that change one
// at a time: a tournament tree over the ranks, each inner node holding the earlier of its two
// subtrees' ranks.
class EarliestRank {
 public:
  explicit EarliestRank(int P) : n_(std::bit_ceil(static_cast<unsigned>(std::max(P, 1)))) {
    key_.assign(n_, kNever);
    node_.assign(2 * static_cast<std::size_t>(n_), 0);
    for (unsigned i = 0; i < n_; ++i) node_[n_ + i] = static_cast<int>(i);
    for (unsigned i = n_ - 1; i >= 1; --i) node_[i] = earlier(node_[2 * i], node_[2 * i + 1]);
  }
  void set(int r, double t) {
    if (key_[r] == t) return;
    key_[r] = t;
    // Up the tree while a subtree's winner changes, or is r (whose key did).
    for (unsigned i = (n_ + static_cast<unsigned>(r)) / 2; i >= 1; i /= 2) {
      const int w = earlier(node_[2 * i], node_[2 * i + 1]);
      if (w == node_[i] && w != r) break;
      node_[i] = w;
    }
  }
  int top() const { return node_[1]; }
  double key(int r) const { return key_[r]; }

 private:
  int earlier(int a, int b) const { return key_[b] < key_[a] ? b : a; }  // a < b
  unsigned n_;
  std::vector<double> key_;
  std::vector<int> node_;
};

// zero_bubble_run's clock. Rank r holds chunk r (looped placement, v = 1): its F reads rank
// r-1's activation, its B rank r+1's gradient (edges.hpp's rule on this route).
//
// The steady-state jump (zero_bubble_greedy's, on times). A rank's decision depends on its
// counts relative to one another, on times relative to its clock, and on its counts meeting M
// (an F left to run, its last W); so if, at two of rank 0's forwards d micro-batches and tau
// time apart, every rank's counts, its plan, and the messages in flight to it are the same
// relative to that forward's micro-batch and time, the run repeats itself every tau with
// micro-batches moved by d until a count would meet M: the periods in between are appended
// without being played.
class ListScheduler {
 public:
  ListScheduler(const char* name, int P, int M, const ZeroBubbleOrder& ord, const StageCosts& c,
                double makespan_above, double span_above)
      : name_(name),
        P_(P),
        M_(M),
        ord_(ord),
        c_(c),
        makespan_above_(makespan_above),
        span_above_(span_above),
        st_(static_cast<std::size_t>(P)),
        earliest_(P),
        next_(static_cast<std::size_t>(P), Decision{kNever, Op::F, false}) {
    run_.schedule = make_schedule(name, P, M, 1);
    set_looped_placement(run_.schedule);
    for (int r = 0; r < P; ++r) {
      RankState& k = st_[r];
      k.warm = std::clamp(ord.warmup[r], 0, M);
      k.ahead = ord.ahead.empty() ? k.warm + 1 : std::max(1, ord.ahead[r]);
      k.left = M * (c.f[r] + c.b[r] + c.w[r]);
      run_.schedule.ranks[r].reserve(3 * static_cast<std::size_t>(M));
    }
  }
  ZeroBubbleRun run() &&;

 private:
  struct RankState {
    int nf = 0, nb = 0, nw = 0;
    int warm = 0, ahead = 1;
    double free = 0, first = -1;
    double left = 0;    // work not yet run
    Arrivals fin, bin;  // activations from rank r-1, gradients from rank r+1
  };
  struct Decision {
    double start;
    Op op;
    bool memory_held;  // the memory limit held back an F the order would run
  };
  // The state relative to rank 0's forward of micro-batch m at time t.
  struct Snapshot {
    double t = 0;
    int m = 0;
    std::vector<int> counts;
    std::vector<double> times;
    std::vector<std::size_t> lengths;
  };
  double held(const RankState& k) const { return (k.nf - k.nb) + ord_.w_share * (k.nb - k.nw); }
  Decision decide(int r) const;
  // Runs d on rank r; false when the run is sure to exceed a bound.
  bool execute(int r, const Decision& d);
  void plan(int r);
  void capture(Snapshot& s, double t) const;
  // After rank 0's forward at time t; false when the run is sure to exceed a bound.
  bool probe(double t);
  void jump(const Snapshot& from, double t, int J);

  const char* name_;
  int P_, M_;
  const ZeroBubbleOrder& ord_;
  const StageCosts& c_;
  double makespan_above_, span_above_;
  std::vector<RankState> st_;
  ZeroBubbleRun run_;
  EarliestRank earliest_;       // by the start of its next action
  std::vector<Decision> next_;  // each rank's next action
  // The jump: a snapshot held (and compared with the next kMaxPeriod forwards of rank 0), the
  // forward of rank 0 to take the next one at, ranks that have run a B, and whether it jumped.
  static constexpr int kMaxPeriod = 64;
  Snapshot snap_, now_;
  bool holding_ = false, jumped_ = false;
  int next_probe_ = 0, started_ = 0;
  std::vector<std::uint32_t> block_;
};

// Rank r's next action and when it starts, from the arrivals known now (every arrival up to
// the earliest pending start is known: actions take time and start in time order).
ListScheduler::Decision ListScheduler::decide(int r) const {
  const RankState& k = st_[r];
  const double t = k.free;
  const bool fits = held(k) + 1 <= ord_.cap + 1e-9;
  bool want_f = false, want_b = false;
  if (ord_.fb == ZeroBubbleOrder::FB::strict) {
    want_f = k.nf < M_ && k.nf - k.nb <= k.warm;
    want_b = !want_f && k.nb < k.nf;
  } else {
    want_f = k.nf < M_ && k.nf - k.nb < (k.nb == 0 ? k.warm + 1 : k.ahead);
    want_b = k.nb < k.nf;
  }
  const double f_at = want_f && fits ? std::max(t, r == 0 ? 0.0 : k.fin.at(k.nf)) : kNever;
  const double b_at = want_b ? std::max(t, r + 1 == P_ ? 0.0 : k.bin.at(k.nb)) : kNever;
  const bool held_back = want_f && !fits;
  const bool f_first = ord_.fb == ZeroBubbleOrder::FB::f_first;
  if (f_first && f_at <= t) return {t, Op::F, held_back};
  if (b_at <= t) return {t, Op::B, held_back};
  if (f_at <= t) return {t, Op::F, held_back};
  const double next = std::min(f_at, b_at);
  if (k.nw < k.nb &&
      (ord_.w == ZeroBubbleOrder::WPolicy::fill || next == kNever || t + c_.w[r] <= next))
    return {t, Op::W, held_back};
  const bool f_next = f_at < b_at || (f_at == b_at && f_first);
  return {next, f_next ? Op::F : Op::B, held_back};
}

bool ListScheduler::execute(int r, const Decision& d) {
  RankState& k = st_[r];
  if (k.first < 0) k.first = d.start;
  run_.memory_bound = run_.memory_bound || d.memory_held;
  int mb = 0;
  double cost = 0;
  if (d.op == Op::F) {
    mb = k.nf++;
    k.fin.taken(mb);
    cost = c_.f[r];
  } else if (d.op == Op::B) {
    mb = k.nb++;
    k.bin.taken(mb);
    cost = c_.b[r];
    started_ += k.nb == 1;
  } else {
    mb = k.nw++;
    cost = c_.w[r];
  }
  k.free = d.start + cost;
  k.left -= cost;
  run_.schedule.ranks[r].push_back(make_action(d.op, r, mb));
  ++run_.played;
  if (d.op == Op::F && r + 1 < P_) st_[r + 1].fin.put(mb, k.free + c_.comm);
  if (d.op == Op::B && r > 0) st_[r - 1].bin.put(mb, k.free + c_.comm);
  // It ends no earlier than now plus the work left.
  const double end = k.free + k.left;
  return end <= makespan_above_ && end - k.first <= span_above_;
}

void ListScheduler::plan(int r) {
  next_[r] = st_[r].nw == M_ ? Decision{kNever, Op::W, false} : decide(r);
  earliest_.set(r, next_[r].start);
}

void ListScheduler::capture(Snapshot& s, double t) const {
  const int m = st_[0].nf;
  s.t = t;
  s.m = m;
  s.counts.clear();
  s.times.clear();
  s.lengths.clear();
  for (int r = 0; r < P_; ++r) {
    const RankState& k = st_[r];
    const Decision& d = next_[r];
    // (Rank 0 reads no activation, the last rank no gradient.)
    const int f_end = r == 0 ? k.nf : k.fin.written(), b_end = r + 1 == P_ ? k.nb : k.bin.written();
    s.counts.insert(s.counts.end(), {k.nf - m, k.nb - m, k.nw - m, static_cast<int>(d.op),
                                     f_end - k.nf, b_end - k.nb});
    s.times.push_back(k.free - t);
    s.times.push_back(d.start == kNever ? -1.0 : d.start - t);
    for (int i = k.nf; i < f_end; ++i) s.times.push_back(k.fin.at(i) - t);
    for (int i = k.nb; i < b_end; ++i) s.times.push_back(k.bin.at(i) - t);
    s.lengths.push_back(run_.schedule.ranks[r].size());
  }
}

bool ListScheduler::probe(double t) {
  if (jumped_ || started_ < P_) return true;
  const int m = st_[0].nf;
  if (!holding_) {
    if (m >= next_probe_) {
      capture(snap_, t);
      holding_ = true;
    }
    return true;
  }
  capture(now_, t);
  const int d = m - snap_.m;
  bool same = now_.counts == snap_.counts;
  for (std::size_t i = 0; same && i < now_.times.size(); ++i)
    same = std::abs(now_.times[i] - snap_.times[i]) <= 1e-9 * std::max(1.0, std::abs(t));
  if (same) {
    jumped_ = true;
    if (const int J = (M_ - 1 - m) / d; J > 0) jump(snap_, t, J);
    for (const RankState& k : st_)
      if (k.free + k.left > makespan_above_ || k.free + k.left - k.first > span_above_)
        return false;
  } else if (d >= kMaxPeriod) {
    holding_ = false;
    next_probe_ = m + kMaxPeriod;
  }
  return true;
}

void ListScheduler::jump(const Snapshot& from, double t, int J) {
  const int d = st_[0].nf - from.m, shift = J * d;
  const double dt = J * (t - from.t);
  for (int r = 0; r < P_; ++r) {
    RankState& k = st_[r];
    append_repeats(run_.schedule.ranks[r], from.lengths[r], J, d, block_);
    k.nf += shift;
    k.nb += shift;
    k.nw += shift;
    k.free += dt;
    k.left -= shift * (c_.f[r] + c_.b[r] + c_.w[r]);
    k.fin.shift(shift, dt);
    k.bin.shift(shift, dt);
    if (next_[r].start != kNever) next_[r].start += dt;
    earliest_.set(r, next_[r].start);
  }
}

ZeroBubbleRun ListScheduler::run() && {
  // A plan changes only when the rank runs something or the input of its next F or B arrives.
  for (int r = 0; r < P_; ++r) plan(r);
  int finished = 0;
  while (finished < P_) {
    const int r = earliest_.top();
    const Decision d = next_[r];
    const double t = d.start;
    if (t == kNever) throw stuck(name_);
    if (!execute(r, d) || (r == 0 && d.op == Op::F && !probe(t))) {
      run_.stopped = true;
      return std::move(run_);
    }
    if (d.op == Op::W && st_[r].nw == M_) ++finished;
    // The receiver's plan changes only if this is the input its next F / B waits for.
    if (d.op == Op::F && r + 1 < P_ && st_[r + 1].nf == st_[r].nf - 1) plan(r + 1);
    if (d.op == Op::B && r > 0 && st_[r - 1].nb == st_[r].nb - 1) plan(r - 1);
    plan(r);
  }
  for (const RankState& k : st_) {
    run_.makespan = std::max(run_.makespan, k.free);
    run_.span = std::max(run_.span, k.free - std::max(0.0, k.first));
  }
  return std::move(run_);
}

}  // namespace

ZeroBubbleRun zero_bubble_run(const char* name, int P, int M, const ZeroBubbleOrder& ord,
                              const StageCosts& c, double makespan_above, double span_above) {
  return ListScheduler(name, P, M, ord, c, makespan_above, span_above).run();
}

Schedule zero_bubble_list(const char* name, int P, int M, const ZeroBubbleOrder& ord,
                          const StageCosts& c) {
  return zero_bubble_run(name, P, M, ord, c).schedule;
}

// The unit-time case of zero_bubble_list with `fill` (the same orders, test_zb_auto.cpp),
// kept as a fast path for ZB-H1 and ZB-H2 at large P and M.
//
// The state is the ranks' counts. Every action takes one unit, so a message sent at time t
// has arrived at t+1, the next time its consumer looks: at the start of time t, rank r's input
// for F m has arrived iff rank r-1's F count (at the start of t) is above m, and the gradient
// for B m iff rank r+1's B count is. (The list scheduler keeps arrival times; the former
// version of this function kept them in a ring of W > cap micro-batches per chunk and
// direction, and never overwrote an unread message: an F on rank r-1 sends m = f[r-1] <
// cap + w[r-1] <= cap + b[r-1] <= cap + b[r] <= cap + f[r], and a B on rank r+1 sends
// m = b[r+1] < f[r+1] <= f[r] <= cap + w[r] <= cap + b[r], so both are fewer than cap
// micro-batches ahead of their reader: the ring read exactly these counts.) So one time unit
// is a function `step` of the counts (F, B, W run so far on each rank) at its start.
//
// The jump. Within `step` the counts meet M only in `w == M`, `b < M` and `f < M`; every other
// test compares two counts (f - b <= warm-up, f - w < cap, a neighbour's count above one's
// own, w < b) or a count with kAlways (no input: true for every count). So if every count of x
// plus d is below M, step(x + d) = step(x) + d, and its actions are step(x)'s with
// micro-batch + d. Hence when the counts at time t0 + T are those at t0 plus d on every rank
// (F, B and W alike; the steady state: T = 3, d = 1, each rank one F, one B, one W), the next
// J periods repeat the last one with micro-batches moved by d, 2d, ..., Jd, as long as every
// count stays below M: F counts are the largest (w <= b <= f) and fall from rank to rank
// (f[r] <= f[r-1]), so J = (M - 1 - f[0]) / d. The jump appends each rank's actions of the
// last period J times, moved, and adds J·d to its counts; it is tried every `gap` units
// against periods up to kMaxPeriod (a probe costs a copy and a few compares of the counts, a
// unit a look at every rank).
Schedule zero_bubble_greedy(const char* name, int P, int M, const std::function<int(int)>& warmup,
                            int cap, ZeroBubbleGreedyStats* stats) {
  Schedule s = make_schedule(name, P, M, 1);
  set_looped_placement(s);
  struct Counts {
    int f = 0, b = 0, w = 0;
  };
  std::vector<Counts> n(P);
  std::vector<int> warm(P);
  for (int r = 0; r < P; ++r) {
    warm[r] = std::clamp(warmup(r), 0, M);
    s.ranks[r].reserve(3 * static_cast<std::size_t>(M));
  }
  constexpr int kAlways = std::numeric_limits<int>::max();  // a count every input is below
  int finished = 0;
  // One time unit. A rank's F/B order is 1F1B-like: warm-up forwards, then F and B in turn,
  // then the remaining Bs: it wants an F while it has forwards left and at most `warm` more
  // forwards than backwards, else a B. If that cannot run (input not there, or the F would
  // make `cap` micro-batches live), it runs its oldest pending W. False: no rank could act.
  const auto step = [&] {
    bool acted = false;
    int f_prev = kAlways;  // rank r-1's F count at the start of this unit (rank 0: no input)
    for (int r = 0; r < P; ++r) {
      Counts& k = n[r];
      const int f_in = f_prev;
      f_prev = k.f;
      if (k.w == M) continue;
      auto& out = s.ranks[r];
      if (k.b < M) {
        if (k.f < M && k.f - k.b <= warm[r]) {
          if (k.f - k.w < cap && f_in > k.f) {
            out.push_back(make_action(Op::F, r, k.f++));
            acted = true;
            continue;
          }
        } else if ((r + 1 < P ? n[r + 1].b : kAlways) > k.b) {
          out.push_back(make_action(Op::B, r, k.b++));
          acted = true;
          continue;
        }
      }
      if (k.w < k.b) {
        out.push_back(make_action(Op::W, r, k.w++));
        acted = true;
        if (k.w == M) ++finished;
      }
    }
    return acted;
  };
  // Appends each rank's actions since `len[r]` J more times, micro-batches moved by d.
  std::vector<std::uint32_t> block;
  const auto jump = [&](const std::vector<std::size_t>& len, int J, int d) {
    for (int r = 0; r < P; ++r) {
      append_repeats(s.ranks[r], len[r], J, d, block);
      n[r].f += J * d;
      n[r].b += J * d;
      n[r].w += J * d;
    }
  };
  constexpr int kMaxPeriod = 6;
  const long gap = std::max(8, P / 8);
  std::vector<Counts> snap;
  std::vector<std::size_t> len(P);
  long next_probe = gap;
  int probe = -1;  // units since the snapshot, or -1: none held
  bool jumped = false;
  for (long t = 0; finished < P; ++t) {
    if (!step()) throw stuck(name);  // (and would stay so: the counts no longer change)
    if (jumped) continue;
    if (probe < 0) {
      if (t + 1 < next_probe) continue;
      snap = n;
      for (int r = 0; r < P; ++r) len[r] = s.ranks[r].size();
      probe = 0;
      continue;
    }
    ++probe;
    const int d = n[0].f - snap[0].f;
    bool same = d > 0;
    for (int r = P - 1; same && r >= 0; --r)
      same = n[r].f - snap[r].f == d && n[r].b - snap[r].b == d && n[r].w - snap[r].w == d;
    if (same) {
      const int J = (M - 1 - n[0].f) / d;
      if (J > 0) {
        jump(len, J, d);
        if (stats) {
          stats->period = probe;
          stats->shift = d;
          stats->jumped_units = static_cast<long>(J) * probe;
          stats->start = t + 1 - probe;
        }
        t += static_cast<long>(J) * probe;
      }
      jumped = true;  // (afterwards f[0] + d >= M: no period can be jumped)
    } else if (probe == kMaxPeriod) {
      probe = -1;
      next_probe = t + 1 + gap;
    }
  }
  return s;
}

}  // namespace bb
