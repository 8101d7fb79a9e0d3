// zb_exact (zb_exact.hpp): depth-first branch and bound over per-rank orders.
#include "schedule/zb_exact.hpp"

#include <algorithm>
#include <vector>

namespace bb {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr int kNone = -1;

class ExactSearch {
 public:
  ExactSearch(int P, int M, const StageCosts& c, const ZbExactQuery& q)
      : P_(P),
        M_(M),
        c_(c),
        q_(q),
        st_(static_cast<std::size_t>(P)),
        end_f_(static_cast<std::size_t>(P) * M, kNever),
        end_b_(static_cast<std::size_t>(P) * M, kNever),
        order_(static_cast<std::size_t>(P)) {
    res_.best = q.better_than;
  }
  ZbExactResult run() && {
    const double root = bound();
    dfs();
    res_.complete = res_.nodes <= q_.max_nodes;
    res_.bound = res_.complete ? res_.best : std::min(res_.best, root);
    return std::move(res_);
  }

 private:
  struct Rank {
    int nf = 0, nb = 0, nw = 0;
    int committed = kNone;  // its next action, waiting for its input (0 F, 1 B, 2 W)
    double free = 0, first = -1;
  };
  struct Undo {
    int rank;
    Rank before;
  };
  double cost(int r, int op) const { return op == 0 ? c_.f[r] : op == 1 ? c_.b[r] : c_.w[r]; }
  double left(int r) const {
    const Rank& k = st_[r];
    return (M_ - k.nf) * c_.f[r] + (M_ - k.nb) * c_.b[r] + (M_ - k.nw) * c_.w[r];
  }
  double& end_f(int r, int m) { return end_f_[static_cast<std::size_t>(r) * M_ + m]; }
  double& end_b(int r, int m) { return end_b_[static_cast<std::size_t>(r) * M_ + m]; }
  // A lower bound on the objective of every completion (infinite if none can keep the
  // makespan within the query's).
  double bound();
  // Runs every committed action whose input is known, as early as it can start.
  void propagate(std::vector<Undo>& log);
  void undo(std::vector<Undo>& log);
  void dfs();
  void record();

  int P_, M_;
  const StageCosts& c_;
  const ZbExactQuery& q_;
  std::vector<Rank> st_;
  std::vector<double> end_f_, end_b_;
  std::vector<std::vector<Op>> order_;  // each rank's order so far
  ZbExactResult res_;
};

// Per rank: it ends no earlier than when it is free plus its work left, nor than the last
// micro-batch's B on it (after that micro-batch's F chain down to the last rank and B chain
// back, each stage also running what it has left of its Fs and Bs first) plus one W.
double ExactSearch::bound() {
  double lb = 0, chain_f = 0;
  std::vector<double> last_f(static_cast<std::size_t>(P_));
  for (int r = 0; r < P_; ++r) {
    const Rank& k = st_[r];
    const double own = k.free + (M_ - k.nf) * c_.f[r];
    chain_f =
        k.nf == M_ ? end_f(r, M_ - 1) : std::max(own, (r > 0 ? chain_f + c_.comm : 0.0) + c_.f[r]);
    last_f[r] = chain_f;
  }
  double chain_b = 0;
  for (int r = P_ - 1; r >= 0; --r) {
    const Rank& k = st_[r];
    const double own = k.free + (M_ - k.nf) * c_.f[r] + (M_ - k.nb) * c_.b[r];
    chain_b = k.nb == M_ ? end_b(r, M_ - 1)
                         : std::max({own, last_f[r] + c_.b[r],
                                     (r + 1 < P_ ? chain_b + c_.comm : 0.0) + c_.b[r]});
    const double end = std::max(k.free + left(r), chain_b + (k.nw < M_ ? c_.w[r] : 0.0));
    if (end > q_.makespan_at_most * (1 + 1e-12)) return kNever;
    if (q_.objective == ZbObjective::makespan)
      lb = std::max(lb, end);
    else
      lb = std::max(lb, k.first >= 0 ? end - k.first : M_ * (c_.f[r] + c_.b[r] + c_.w[r]));
  }
  return lb;
}

void ExactSearch::propagate(std::vector<Undo>& log) {
  for (bool any = true; any;) {
    any = false;
    for (int r = 0; r < P_; ++r) {
      Rank& k = st_[r];
      if (k.committed == kNone) continue;
      double in = 0;
      if (k.committed == 0 && r > 0) in = end_f(r - 1, k.nf) + c_.comm;
      if (k.committed == 1 && r + 1 < P_) in = end_b(r + 1, k.nb) + c_.comm;
      if (in == kNever) continue;
      log.push_back({r, k});
      const double start = std::max(k.free, in);
      if (k.first < 0) k.first = start;
      k.free = start + cost(r, k.committed);
      if (k.committed == 0) end_f(r, k.nf++) = k.free;
      if (k.committed == 1) end_b(r, k.nb++) = k.free;
      if (k.committed == 2) ++k.nw;
      order_[r].push_back(k.committed == 0 ? Op::F : k.committed == 1 ? Op::B : Op::W);
      k.committed = kNone;
      any = true;
    }
  }
}

void ExactSearch::undo(std::vector<Undo>& log) {
  for (; !log.empty(); log.pop_back()) {
    const Undo& u = log.back();
    Rank& k = st_[u.rank];
    if (k.nf > u.before.nf) end_f(u.rank, u.before.nf) = kNever;
    if (k.nb > u.before.nb) end_b(u.rank, u.before.nb) = kNever;
    if (k.nf + k.nb + k.nw > u.before.nf + u.before.nb + u.before.nw) order_[u.rank].pop_back();
    k = u.before;
  }
}

void ExactSearch::record() {
  double value = 0, makespan = 0;
  for (const Rank& k : st_) {
    value = std::max(value, q_.objective == ZbObjective::makespan ? k.free : k.free - k.first);
    makespan = std::max(makespan, k.free);
  }
  if (value >= res_.best || makespan > q_.makespan_at_most * (1 + 1e-12)) return;
  res_.best = value;
  res_.improved = true;
  res_.schedule = make_schedule("zb-exact", P_, M_, 1);
  set_looped_placement(res_.schedule);
  for (int r = 0; r < P_; ++r) {
    int n[3] = {0, 0, 0};
    for (Op op : order_[r]) {
      const int i = op == Op::F ? 0 : op == Op::B ? 1 : 2;
      res_.schedule.ranks[r].push_back(make_action(op, r, n[i]++));
    }
  }
}

void ExactSearch::dfs() {
  if (++res_.nodes > q_.max_nodes) return;
  if (bound() >= res_.best * (1 - 1e-12)) return;
  // The free rank (no commitment, not done) that is free first.
  int pick = kNone;
  bool done = true;
  for (int r = 0; r < P_; ++r) {
    const Rank& k = st_[r];
    done = done && k.nw == M_;
    if (k.committed == kNone && k.nw < M_ && (pick == kNone || k.free < st_[pick].free)) pick = r;
  }
  if (done) return record();
  if (pick == kNone) return;  // every rank waits for an input no one will produce
  const Rank k = st_[pick];
  const double held = (k.nf - k.nb) + q_.w_share * (k.nb - k.nw);
  for (int op : {1, 0, 2}) {
    if (op == 0 && !(k.nf < M_ && held + 1 <= q_.cap + 1e-9)) continue;
    if (op == 1 && k.nb >= k.nf) continue;
    if (op == 2 && k.nw >= k.nb) continue;
    std::vector<Undo> log;
    log.push_back({pick, st_[pick]});
    st_[pick].committed = op;
    propagate(log);
    dfs();
    undo(log);
    if (res_.nodes > q_.max_nodes) return;
  }
}

}  // namespace

ZbExactResult zb_exact(int P, int M, const StageCosts& costs, const ZbExactQuery& query) {
  return ExactSearch(P, M, costs, query).run();
}

}  // namespace bb
