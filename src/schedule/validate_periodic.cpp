// Validation of a compute schedule in periodic form without writing out its repetitions: the checks
// of validate() (validate.cpp) for a schedule that is not lowered, on the segments. Every action of
// a pattern has its chunk in every repetition, so range (of the first and last repetition),
// placement, route and FB-pair checks are made once per pattern action (for a passed segment,
// below, placement, range and route once per kind and chunk, on the range it claims). Routes are
// uniform or "by chunk" (routes that share no chunk, DualPipe's two directions): a chunk then lies
// on one route, and an action's micro-batches must all take that route (checked on runs of
// micro-batches with the same route). A segment of at least four repetitions whose pattern holds,
// per kind and chunk, |s| distinct consecutive micro-batches (s the micro-batch step: one action
// per kind and chunk with a step of ±1, P of them in interleaved's blocks) is passed without being
// walked: per (kind, chunk) its repetitions tile one range of micro-batches (a "claim"), which must
// not hold anything that happened before (disjoint from everything walked or claimed so far); what
// each action must follow (F for B/BW, B for W) is found in the same pattern d repetitions back
// (so it ran in the segment for repetitions d and later) and checked to have happened before the
// segment for the first d repetitions (all of them when it is not in the pattern). Other segments
// are walked action by action. At the end every (chunk, micro-batch) of every kind has been seen
// once when each chunk counts, of each kind, the micro-batches whose route visits it. Anything
// this cannot tell (a pair across a pattern's end, routes that share chunks) is "not sure", and
// so is anything wrong: the caller then runs validate() on the flat lists, which also gives the
// report.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "schedule/edges.hpp"
#include "schedule/periodic.hpp"
#include "schedule/validate.hpp"

namespace bb {
namespace {

class PeriodicChecker {
 public:
  explicit PeriodicChecker(const PeriodicSchedule& ps)
      : s_(ps.shape),
        L_(ps.lists),
        C_(static_cast<std::size_t>(s_.num_chunks())),
        M_(static_cast<std::size_t>(s_.M)),
        seen_(static_cast<std::uint8_t*>(std::calloc(C_ * M_ + 1, 1)), std::free),
        claims_(kKinds * C_),
        walked_(kKinds * C_),
        count_(kKinds * C_, 0),
        group_of_(kKinds * C_, -1) {
    if (!seen_) throw std::bad_alloc();
  }

  bool run() {
    if (!shape_ok() || !routes_ok()) return false;
    for (int r = 0; r < s_.P; ++r)
      for (std::size_t g = 0; g < L_.ranks[r].size(); ++g)
        if (!segment(r, g)) return false;
    // Once each, nothing twice: every chunk has, of each kind, the micro-batches of its route.
    for (std::size_t i = 0; i < count_.size(); ++i)
      if (count_[i] != expected_[i % C_]) return false;
    return true;
  }

 private:
  enum : std::uint8_t { kF = 1, kB = 2, kW = 4 };
  static constexpr std::size_t kKinds = 3;
  static constexpr std::uint32_t kMinPassed = 4;  // repetitions of a segment passed unwalked
  static std::size_t kind(std::uint8_t bit) {
    return static_cast<std::size_t>(std::countr_zero(bit));
  }

  struct Claim {  // micro-batches [lo, hi]
    std::int64_t lo, hi;
  };
  struct Span {
    std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = -1;
  };

  bool shape_ok() const {
    if (s_.P < 1 || s_.M < 1 || static_cast<int>(L_.ranks.size()) != s_.P || s_.lowered)
      return false;
    if (static_cast<int>(s_.chunk_stage.size()) != s_.num_chunks()) return false;
    if (static_cast<int>(s_.routes.size()) != s_.M) return false;
    for (int c : s_.chunk_rank)
      if (c < 0 || c >= s_.P) return false;
    return true;
  }

  // Routes in the chunk range that share no chunk (one route for all is a special case): each
  // chunk's route (-1: none visits it), each micro-batch's, where each run of micro-batches with
  // the same route ends, and how many micro-batches visit each chunk.
  bool routes_ok() {
    const auto C = static_cast<int>(C_);
    route_of_chunk_.assign(C_, -1);
    route_of_mb_.assign(M_, -1);
    run_end_.assign(M_, 0);
    std::vector<Route> distinct;
    std::vector<std::size_t> visits;
    for (std::size_t m = 0; m < M_; ++m) {
      const Route& rt = s_.routes[m];
      if (!route_in_range(rt, C)) return false;
      std::int32_t id = route_of_chunk_[static_cast<std::size_t>(rt.first)];
      if (id >= 0) {
        if (!(distinct[static_cast<std::size_t>(id)] == rt)) return false;  // they share a chunk
      } else {
        id = static_cast<std::int32_t>(distinct.size());
        for (const int c : route_chunks(rt)) {
          std::int32_t& owner = route_of_chunk_[static_cast<std::size_t>(c)];
          if (owner >= 0) return false;  // shares a chunk with another route
          owner = id;
        }
        distinct.push_back(rt);
        visits.push_back(0);
      }
      route_of_mb_[m] = id;
      ++visits[static_cast<std::size_t>(id)];
    }
    for (std::size_t m = M_; m-- > 0;)
      run_end_[m] = m + 1 < M_ && route_of_mb_[m + 1] == route_of_mb_[m] ? run_end_[m + 1] : m;
    one_route_ = distinct.size() == 1;
    expected_.assign(C_, 0);
    for (std::size_t c = 0; c < C_; ++c)
      if (route_of_chunk_[c] >= 0)
        expected_[c] = visits[static_cast<std::size_t>(route_of_chunk_[c])];
    return true;
  }

  // Whether micro-batches first, first + step, ... (n >= 1 of them, in range) all visit `chunk`.
  bool on_route(std::uint32_t chunk, std::int64_t first, std::int64_t step, std::int64_t n) const {
    const std::int32_t id = route_of_chunk_[chunk];
    if (id < 0) return false;
    if (one_route_) return true;  // every micro-batch takes it
    const std::int64_t last = first + (n - 1) * step;
    const auto lo = static_cast<std::size_t>(std::min(first, last));
    if (route_of_mb_[lo] == id && run_end_[lo] >= static_cast<std::size_t>(std::max(first, last)))
      return true;
    for (std::int64_t x = 0; x < n; ++x)
      if (route_of_mb_[static_cast<std::size_t>(first + x * step)] != id) return false;
    return true;
  }

  bool done(std::uint8_t bit, std::uint32_t chunk, std::int64_t mb) const {
    if (seen_[chunk * M_ + static_cast<std::size_t>(mb)] & bit) return true;
    for (const Claim& c : claims_[kind(bit) * C_ + chunk])
      if (mb >= c.lo && mb <= c.hi) return true;
    return false;
  }
  // done() of micro-batches first, first + step, ... (n of them; all of them in one claim, or
  // each looked up).
  bool all_done(std::uint8_t bit, std::uint32_t chunk, std::int64_t first, std::int64_t step,
                std::int64_t n) const {
    if (n <= 0) return true;
    const std::int64_t last = first + (n - 1) * step;
    const std::int64_t lo = std::min(first, last), hi = std::max(first, last);
    for (const Claim& c : claims_[kind(bit) * C_ + chunk])
      if (c.lo <= lo && hi <= c.hi) return true;
    for (std::int64_t x = 0; x < n; ++x)
      if (!done(bit, chunk, first + x * step)) return false;
    return true;
  }
  bool mark(std::uint8_t bit, std::uint32_t chunk, std::uint32_t mb) {
    if (done(bit, chunk, mb)) return false;  // twice
    seen_[chunk * M_ + mb] |= bit;
    Span& w = walked_[kind(bit) * C_ + chunk];
    w.lo = std::min<std::int64_t>(w.lo, mb);
    w.hi = std::max<std::int64_t>(w.hi, mb);
    ++count_[kind(bit) * C_ + chunk];
    return true;
  }

  // One action, as validate() checks it (in range, placed and on its route already).
  bool walk(const Action& a) {
    switch (a.op) {
      case Op::F:
        return mark(kF, a.chunk, a.mb);
      case Op::B:
      case Op::BW:
        if (!done(kF, a.chunk, a.mb) || !mark(kB, a.chunk, a.mb)) return false;
        return a.op == Op::B || mark(kW, a.chunk, a.mb);
      case Op::W:
        return done(kB, a.chunk, a.mb) && mark(kW, a.chunk, a.mb);
      default:
        return false;  // communication in a schedule that is not lowered
    }
  }

  // Micro-batches first, first + step, ... (n >= 1 of them) of `chunk` may be computed on rank
  // r: the chunk is r's, they are in range and they take the chunk's route.
  bool placed(int r, std::uint32_t chunk, std::int64_t first, std::int64_t step,
              std::int64_t n) const {
    if (s_.chunk_rank[chunk] != r) return false;
    const std::int64_t last = first + (n - 1) * step;
    if (std::min(first, last) < 0 || std::max(first, last) >= static_cast<std::int64_t>(M_))
      return false;
    return on_route(chunk, first, step, n);
  }
  // Pattern action k is a compute action with its chunk in range, and an FB pair never crosses
  // the pattern's end (except as the list's last action... which is then not a pair).
  bool action_ok(const Segment& g, std::uint32_t k, bool last_segment) const {
    const Action a = L_.pool[g.begin + k];
    if (!is_compute(a.op) || a.chunk >= C_) return false;
    if (!a.overlap_next()) return true;
    if (a.op != Op::F) return false;
    if (k + 1 < g.length) {
      const Op next = L_.pool[g.begin + k + 1].op;
      return next == Op::B || next == Op::BW;
    }
    return last_segment && g.reps == 1;  // across the pattern's end: not worth it, not sure
  }
  // Every action of g's pattern is action_ok() and placed() in every repetition.
  bool pattern_ok(int r, const Segment& g, bool last_segment) const {
    for (std::uint32_t k = 0; k < g.length; ++k)
      if (!action_ok(g, k, last_segment) ||
          !placed(r, L_.pool[g.begin + k].chunk, L_.pool[g.begin + k].mb, g.mb_step, g.reps))
        return false;
    return true;
  }

  // A segment of enough repetitions whose groups tile (groups_tile()) is passed: placement,
  // range and route are then checked per group, on the range its repetitions tile (each
  // micro-batch of it an action's in some repetition, the first and the last among them).
  // Otherwise it is walked.
  bool segment(int r, std::size_t gi) {
    const Segment& g = L_.ranks[r][gi];
    const bool last_segment = gi + 1 == L_.ranks[r].size();
    if (g.length == 0 || g.reps == 0) return false;
    if (g.reps >= kMinPassed && g.mb_step != 0) {
      for (const Group& gr : groups_) group_of_[kind(gr.bit) * C_ + gr.chunk] = -1;
      groups_.clear();
      for (std::uint32_t k = 0; k < g.length; ++k) {
        if (!action_ok(g, k, last_segment)) return false;
        add_to_groups(L_.pool[g.begin + k]);
      }
      if (groups_tile(g)) {
        for (const Group& gr : groups_) {
          const Claim c = claimed(gr, g);
          if (!placed(r, gr.chunk, c.lo, 1, c.hi - c.lo + 1)) return false;
        }
        return claim(g);
      }
    }
    if (!pattern_ok(r, g, last_segment)) return false;
    for (std::uint32_t rep = 0; rep < g.reps; ++rep)
      for (std::uint32_t k = 0; k < g.length; ++k)
        if (!walk(L_.at(g, rep, k))) return false;
    return true;
  }

  // The pattern's actions of one kind and chunk: what a passed segment claims together.
  struct Group {
    std::uint8_t bit;
    std::uint32_t chunk;
    std::int64_t lo, hi;  // their micro-batches in repetition 0
    std::uint32_t n;
  };
  // The kinds a compute action does (BW: B and W).
  static std::uint8_t bits_of(Op op) {
    return op == Op::F ? kF : op == Op::B ? kB : op == Op::W ? kW : kB | kW;
  }
  // Action e in its groups (one per kind it does), found through group_of_ (per kind and chunk).
  void add_to_groups(const Action& e) {
    const std::uint8_t bits = bits_of(e.op);
    for (const std::uint8_t bit : {kF, kB, kW}) {
      if (!(bits & bit)) continue;
      std::int32_t& i = group_of_[kind(bit) * C_ + e.chunk];
      if (i < 0) {
        i = static_cast<std::int32_t>(groups_.size());
        groups_.push_back({bit, e.chunk, e.mb, e.mb, 1});
        continue;
      }
      Group& gr = groups_[static_cast<std::size_t>(i)];
      gr.lo = std::min<std::int64_t>(gr.lo, e.mb);
      gr.hi = std::max<std::int64_t>(gr.hi, e.mb);
      ++gr.n;
    }
  }
  // Whether each group of g's pattern (collected by add_to_groups()) holds |mb_step| distinct
  // consecutive micro-batches: then the group's repetitions tile one range (interleaved: P
  // forwards of a chunk per block, the block P micro-batches on; with a step of ±1, one action
  // per kind and chunk). Leaves in slots_ the pattern position of group i's micro-batch lo + o
  // at i·|mb_step| + o.
  bool groups_tile(const Segment& g) {
    const std::int64_t t = step_size(g);
    for (const Group& gr : groups_)
      if (static_cast<std::int64_t>(gr.n) != t || gr.hi - gr.lo + 1 != t) return false;
    // Distinct: each slot taken once.
    slots_.assign(groups_.size() * static_cast<std::size_t>(t), kFree);
    for (std::uint32_t k = 0; k < g.length; ++k) {
      const Action e = L_.pool[g.begin + k];
      const std::uint8_t bits = bits_of(e.op);
      for (const std::uint8_t bit : {kF, kB, kW}) {
        if (!(bits & bit)) continue;
        const auto i = static_cast<std::size_t>(group_of_[kind(bit) * C_ + e.chunk]);
        std::uint32_t& slot = slots_[i * static_cast<std::size_t>(t) +
                                     static_cast<std::size_t>(e.mb - groups_[i].lo)];
        if (slot != kFree) return false;  // twice in the pattern
        slot = k;
      }
    }
    return true;
  }
  static std::int64_t step_size(const Segment& g) {
    return g.mb_step < 0 ? -static_cast<std::int64_t>(g.mb_step) : g.mb_step;
  }
  static constexpr std::uint32_t kFree = std::numeric_limits<std::uint32_t>::max();

  // The micro-batches group gr's actions take in all repetitions of g (groups_tile(g)).
  static Claim claimed(const Group& gr, const Segment& g) {
    const std::int64_t span = static_cast<std::int64_t>(g.reps - 1) * g.mb_step;
    return {gr.lo + std::min<std::int64_t>(0, span), gr.hi + std::max<std::int64_t>(0, span)};
  }

  // All repetitions of g, passed (groups_tile(g) said yes).
  bool claim(const Segment& g) {
    const std::int64_t s = g.mb_step, t = step_size(g), reps = g.reps;
    // What each action must follow, first (claims below would hide a missing one).
    for (std::uint32_t k = 0; k < g.length; ++k) {
      const Action e = L_.pool[g.begin + k];
      if (e.op == Op::F) continue;
      const std::uint8_t need = e.op == Op::W ? kB : kF;
      // The same chunk's F (or B/BW) in this pattern, d repetitions back (d >= 0): the one of
      // its group at micro-batch e.mb + d·s (the group's micro-batches are |s| consecutive ones,
      // so exactly one d, maybe negative, lands in them).
      std::int64_t d = -1;
      const std::int32_t i = group_of_[kind(need) * C_ + e.chunk];
      if (i >= 0) {
        const Group& gr = groups_[static_cast<std::size_t>(i)];
        const std::int64_t o = static_cast<std::int64_t>(e.mb) - gr.lo;
        // in = e.mb + back·s - gr.lo in [0, t), in - o = q·t (no division for |q| <= 1).
        const std::int64_t q = o >= 0 && o < t    ? 0
                               : o < 0 && o >= -t ? 1
                                                  : ((o % t + t) % t - o) / t;
        const std::int64_t in = o + q * t, back = s > 0 ? q : -q;
        const std::uint32_t j = slots_[static_cast<std::size_t>(i * t + in)];
        if (back > 0 || (back == 0 && j < k)) d = back;
      }
      // Repetitions x >= d find it in this segment, d repetitions earlier; the others before it.
      if (!all_done(need, e.chunk, e.mb, s, d < 0 ? reps : std::min(reps, d))) return false;
    }
    // Each group's repetitions as one range of micro-batches.
    for (const Group& gr : groups_) {
      const Claim c = claimed(gr, g);
      auto& list = claims_[kind(gr.bit) * C_ + gr.chunk];
      for (const Claim& o : list)
        if (c.lo <= o.hi && o.lo <= c.hi) return false;  // twice
      const Span& w = walked_[kind(gr.bit) * C_ + gr.chunk];
      for (std::int64_t mb = std::max(c.lo, w.lo); mb <= std::min(c.hi, w.hi); ++mb)
        if (seen_[gr.chunk * M_ + static_cast<std::size_t>(mb)] & gr.bit) return false;  // twice
      list.push_back(c);
      count_[kind(gr.bit) * C_ + gr.chunk] += static_cast<std::size_t>(c.hi - c.lo + 1);
    }
    return true;
  }

  const Schedule& s_;
  const PeriodicLists& L_;
  std::size_t C_, M_;
  std::unique_ptr<std::uint8_t[], void (*)(void*)> seen_;
  std::vector<std::vector<Claim>> claims_;    // per (kind, chunk)
  std::vector<Span> walked_;                  // per (kind, chunk): walked micro-batches' span
  std::vector<std::size_t> count_;            // per (kind, chunk): seen, walked or claimed
  std::vector<std::size_t> expected_;         // per chunk: micro-batches whose route visits it
  std::vector<std::int32_t> route_of_chunk_;  // per chunk: its route's number, -1: none
  std::vector<std::int32_t> route_of_mb_;     // per micro-batch: its route's number
  std::vector<std::size_t> run_end_;    // per micro-batch: last of its run with the same route
  bool one_route_ = false;              // all micro-batches take the same route
  std::vector<Group> groups_;           // groups_tile()'s groups of the pattern
  std::vector<std::int32_t> group_of_;  // per (kind, chunk): index in groups_, or -1
  std::vector<std::uint32_t> slots_;    // see groups_tile()
};

}  // namespace

bool surely_valid(const PeriodicSchedule& s) {
  return PeriodicChecker(s).run();
}

void validate_or_throw(const PeriodicSchedule& s) {
  if (!surely_valid(s)) validate_or_throw(to_flat(s));
}

}  // namespace bb
