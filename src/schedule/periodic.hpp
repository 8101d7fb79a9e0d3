// Periodic form of action lists: each rank's list as segments, each a pattern of actions repeated
// `reps` times, every micro-batch number moving by `mb_step` from one repetition to the next. A
// 1F1B rank is three segments (warm-up F, the F/B pair, cool-down B) however large M is. Passes
// that understand the form (the simulator's periodic engine) work on the segments instead of every
// action; `expand()` gives back the flat lists.
#pragma once

#include <cstdint>
#include <vector>

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
