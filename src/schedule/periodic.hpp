// Periodic form of action lists: each rank's list as segments, each a pattern of actions repeated
// `reps` times, every micro-batch number moving by `mb_step` from one repetition to the next. A
// 1F1B rank is three segments (warm-up F, the F/B pair, cool-down B) however large M is. Passes
// that understand the form (the simulator's periodic engine) work on the segments instead of every
// action; `expand()` gives back the flat lists.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/edges.hpp"
#include "schedule/schedule.hpp"

namespace bb {

struct Segment {
  std::uint32_t begin = 0;   // first action of the pattern in PeriodicLists::pool
  std::uint32_t length = 0;  // actions in the pattern (never splits an FB pair)
  std::uint32_t reps = 1;    // repetitions
  std::int32_t mb_step = 0;  // added to every micro-batch number per repetition
  friend bool operator==(const Segment&, const Segment&) = default;
};

struct PeriodicLists {
  std::vector<Action> pool;                 // the patterns, rep 0
  std::vector<std::vector<Segment>> ranks;  // per rank, in execution order

  // Action k of repetition rep of segment g.
  Action at(const Segment& g, std::uint32_t rep, std::uint32_t k) const {
    Action a = pool[g.begin + k];
    a.mb = static_cast<std::uint32_t>(static_cast<std::int64_t>(a.mb) +
                                      static_cast<std::int64_t>(rep) * g.mb_step);
    return a;
  }
  std::size_t size() const;  // actions of all ranks, expanded
};

// A place in one rank's segments: segment, repetition, action of the pattern.
struct ListPos {
  std::uint32_t seg = 0, rep = 0, k = 0;
  friend bool operator==(const ListPos&, const ListPos&) = default;
};

// A walk over one rank's list, action by action and compute unit by compute unit: its segments
// in periodic form, or a flat list (one segment, once). The passes that have a flat and a
// periodic version (lowering and its proof) walk both with it. It keeps the current segment and
// its repetition's micro-batch shift at hand, so that a flat walk costs little more than a
// pointer's.
class ListCursor {
 public:
  ListCursor() = default;
  ListCursor(const PeriodicLists& lists, int r)
      : pool_(lists.pool.data()), segs_(lists.ranks[r].data()), nsegs_(lists.ranks[r].size()) {
    load();
  }
  explicit ListCursor(const std::vector<Action>& flat)
      : pool_(flat.data()),
        nsegs_(flat.empty() ? 0 : 1),
        g_{0, static_cast<std::uint32_t>(flat.size()), 1, 0} {}

  bool end() const { return p_.seg == nsegs_; }
  const ListPos& pos() const { return p_; }
  const Segment& seg() const { return g_; }
  // The action `ahead` places on (within the pattern), as this repetition runs it.
  Action get(std::uint32_t ahead = 0) const {
    Action a = pool_[g_.begin + p_.k + ahead];
    if (shift_ != 0) a.mb = static_cast<std::uint32_t>(static_cast<std::int64_t>(a.mb) + shift_);
    return a;
  }
  // Actions of the unit here: 2 for an FB pair (never split across a pattern's end).
  std::uint32_t unit() const {
    return static_cast<std::uint32_t>(unit_length(pool_[g_.begin + p_.k], g_.length - p_.k));
  }
  void next(std::uint32_t n = 1) {
    if ((p_.k += n) < g_.length) return;
    p_.k = 0;
    if (++p_.rep < g_.reps) {
      shift_ += g_.mb_step;
      return;
    }
    seek({p_.seg + 1, 0, 0});
  }
  void next_segment() { seek({p_.seg + 1, 0, 0}); }
  // To place `p` (of a list in periodic form, or the flat list's segment 0).
  void seek(const ListPos& p) {
    p_ = p;
    load();
  }

 private:
  void load() {
    if (segs_ != nullptr && !end()) g_ = segs_[p_.seg];
    shift_ = static_cast<std::int64_t>(p_.rep) * g_.mb_step;
  }

  const Action* pool_ = nullptr;
  const Segment* segs_ = nullptr;  // null: a flat list, g_
  std::size_t nsegs_ = 0;
  Segment g_;               // the current segment
  std::int64_t shift_ = 0;  // micro-batch shift of the current repetition
  ListPos p_;
};

// The lists of s (only their compute actions when compute_only) in periodic form: greedily, at each
// position the shortest pattern (up to kMaxPeriod actions) that repeats at least kMinReps times,
// else the action on its own; then, where a longer pattern (up to kMaxLongPeriod actions, from the
// start of one such segment to the start of a later one) repeats kMinReps times and covers more,
// that one (an interleaved rank's block of 2·v·P actions). Lossless: expand() gives the lists back.
inline constexpr std::uint32_t kMaxPeriod = 16;
inline constexpr std::uint32_t kMaxLongPeriod = 1 << 16;
inline constexpr std::uint32_t kMinReps = 4;
PeriodicLists compress(const Schedule& s, bool compute_only = false);

// Whether no segment ends inside an FB pair (an F with overlap_next as a pattern's last action,
// other than as the last action of its rank's list, where it is no pair). compress() never
// makes one; the periodic passes take only such lists.
bool pairs_whole(const PeriodicLists& lists);

// One rank's list from its segments.
std::vector<Action> expand(const PeriodicLists& lists, int rank);

// compress() of one list, appended to a rank's segments (patterns to pool).
void append_compressed(const std::vector<Action>& list, std::vector<Action>& pool,
                       std::vector<Segment>& segs);

// A schedule whose lists are in periodic form: `shape` holds everything else (its `ranks` are
// empty, its `lowered` says whether the lists have SEND/RECV).
struct PeriodicSchedule {
  Schedule shape;
  PeriodicLists lists;
  std::size_t size() const { return lists.size(); }
  std::size_t compute_size() const;
};
PeriodicSchedule to_periodic(Schedule s);
Schedule to_flat(const PeriodicSchedule& s);

// Whether every pass must be flat: the environment variable BB_FLAT_PASSES set to 1. Then the
// commands (sim, show --lowered, validate, run's lowering) keep flat lists, and simulate() and
// lower() of flat lists never use the periodic engine. By default the periodic passes run
// where they apply; the results are the same either way (tests compare both).
bool flat_passes_forced();

}  // namespace bb
