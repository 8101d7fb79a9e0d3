#include "schedule/periodic.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "schedule/edges.hpp"
#include "schedule/parallel.hpp"

namespace bb {
namespace {

// a[start, start + length·reps) is a[start, start + length) repeated reps times, each micro-batch
// number moving by step; a literal run (reps 1) is single actions (FB pairs whole).
struct Run {
  std::size_t start = 0, length = 0, reps = 1;
  std::int32_t step = 0;
  bool literal = false;
};

class Compressor {
 public:
  explicit Compressor(const std::vector<Action>& a) : a_(a), n_(a.size()) {}

  // Repetitions of a[i, i+p) from i on, each shifted by the same micro-batch step, up to cap.
  // known: a[i, known) is known to repeat so (the comparison starts there).
  std::size_t reps_of(std::size_t i, std::size_t p, std::size_t cap, std::int32_t* step,
                      std::size_t known = 0) const {
    if (i + 2 * p > n_ || a_[i + p - 1].overlap_next()) return 1;
    const std::int32_t d = mb_of(word(i + p)) - mb_of(word(i));
    std::size_t k = std::max(i + p, known);
    const std::size_t stop = cap >= n_ ? n_ : std::min(n_, i + cap * p);
    for (; k < stop; ++k) {
      const std::uint32_t x = word(k), y = word(k - p);
      if (((x ^ y) >> 16) != 0 || mb_of(x) - mb_of(y) != d) break;
    }
    *step = d;
    return (k - i) / p;
  }

  // The run of a short pattern at i (reps >= 2; reps 1: none): the shortest pattern of at most
  // kMaxPeriod actions that repeats kMinReps times, else the one covering the most, twice or
  // more (at least 4 actions).
  Run short_run_at(std::size_t i) const {
    Run best;
    for (std::size_t p = 1; p <= kMaxPeriod && i + 2 * p <= n_; ++p) {
      std::int32_t step = 0;
      const std::size_t r = reps_of(i, p, kMinReps, &step);
      if (r >= kMinReps) {
        best.length = p;
        best.reps = reps_of(i, p, n_, &best.step);
        break;
      }
      if (r >= 2 && r * p > best.reps * std::max<std::size_t>(best.length, 1) && r * p >= 4) {
        best.length = p;
        best.reps = r;
        best.step = step;
      }
    }
    best.start = i;
    return best;
  }

  // The short runs from a position on, one at a time, as the greedy makes them: at each
  // position its short run (short_run_at), else the action on its own (an FB pair whole),
  // single actions in a row making one literal run.
  class ShortRuns {
   public:
    ShortRuns(const Compressor& c, std::size_t from) : c_(c), i_(from) {}
    bool done() const { return i_ >= c_.n_ && !have_next_; }
    Run next() {
      Run r = have_next_ ? next_ : c_.short_run_at(i_);
      have_next_ = false;
      if (r.reps >= 2 && r.length > 0) {
        i_ = r.start + r.length * r.reps;
        return r;
      }
      Run lit{i_, 0, 1, 0, true};
      while (i_ < c_.n_) {
        const std::size_t take = unit_length(c_.a_[i_], c_.n_ - i_);
        lit.length += take;
        i_ += take;
        if (i_ >= c_.n_) break;
        next_ = c_.short_run_at(i_);
        if (next_.reps >= 2 && next_.length > 0) {
          have_next_ = true;
          break;
        }
      }
      return lit;
    }

   private:
    const Compressor& c_;
    std::size_t i_;
    Run next_;
    bool have_next_ = false;
  };

  // The runs of the whole list: the short ones, except where a longer pattern (its length the
  // distance from one short run's start to a later one's, up to kMaxLongPeriod) repeats kMinReps
  // times and covers more than the short run it starts at (interleaved: a block of 2·v·P actions).
  // Short runs are made only as far as the search for a longer pattern looks ahead
  // (kLongCandidates), so the actions a longer pattern covers are not also run through the
  // short search.
  std::vector<Run> runs() const {
    std::vector<Run> out, shorts;
    for (std::size_t pos = 0; pos < n_;) {
      shorts.clear();
      ShortRuns gen(*this, pos);
      const auto have = [&](std::size_t u) {
        while (shorts.size() <= u && !gen.done()) shorts.push_back(gen.next());
        return u < shorts.size();
      };
      Run best;
      std::size_t t = 0;
      for (; best.reps == 1 && have(t); ++t) {
        const std::size_t i = shorts[t].start;
        std::size_t cover = shorts[t].length * shorts[t].reps;
        for (std::size_t u = t + 1; u <= t + kLongCandidates && have(u); ++u) {
          const std::size_t p = shorts[u].start - i;
          if (p <= kMaxPeriod) continue;
          if (p > kMaxLongPeriod || i + kMinReps * p > n_) break;
          // A multiple of the best pattern so far repeats (its step the multiple of that one's)
          // wherever that one does: compare from the end of its cover on.
          std::int32_t step = 0;
          const std::size_t known = best.reps > 1 && p % best.length == 0 ? i + cover : 0;
          const std::size_t r = reps_of(i, p, n_, &step, known);
          if (r >= kMinReps && r * p > cover) {
            best = {i, p, r, step, false};
            cover = r * p;
          }
        }
      }
      if (best.reps == 1) {
        out.insert(out.end(), shorts.begin(), shorts.end());
        break;
      }
      out.insert(out.end(), shorts.begin(), shorts.begin() + static_cast<std::ptrdiff_t>(t - 1));
      out.push_back(best);
      pos = best.start + best.length * best.reps;
    }
    return out;
  }

 private:
  // Same action but for the micro-batch number.
  // Actions as words (action.hpp: the micro-batch number in the low 16 bits): the same action
  // but for the micro-batch number is the same upper half.
  static std::int32_t mb_of(std::uint32_t w) { return static_cast<std::int32_t>(w & 0xFFFFu); }
  std::uint32_t word(std::size_t k) const { return std::bit_cast<std::uint32_t>(a_[k]); }
  // Later short runs tried as the end of a longer pattern's first repetition.
  static constexpr std::size_t kLongCandidates = 64;

  const std::vector<Action>& a_;
  std::size_t n_;
};

}  // namespace

// One rank's list (already filtered) into segments appended to `segs`, patterns to `pool`.
void append_compressed(const std::vector<Action>& a, std::vector<Action>& pool,
                       std::vector<Segment>& segs) {
  for (const Run& run : Compressor(a).runs()) {
    segs.push_back({static_cast<std::uint32_t>(pool.size()), static_cast<std::uint32_t>(run.length),
                    static_cast<std::uint32_t>(run.reps), run.step});
    pool.insert(pool.end(), a.begin() + static_cast<std::ptrdiff_t>(run.start),
                a.begin() + static_cast<std::ptrdiff_t>(run.start + run.length));
  }
}

std::size_t PeriodicLists::size() const {
  std::size_t n = 0;
  for (const auto& segs : ranks)
    for (const Segment& g : segs) n += static_cast<std::size_t>(g.length) * g.reps;
  return n;
}

PeriodicLists compress(const Schedule& s, bool compute_only) {
  struct Part {
    std::vector<Action> pool;
    std::vector<Segment> segs;
  };
  std::vector<Part> parts(static_cast<std::size_t>(s.P));
  std::vector<std::vector<Action>> scratch(2);
  for_each_rank(s, 2, [&](int w, int r) {
    const std::vector<Action>* list = &s.ranks[r];
    if (compute_only && s.lowered) {
      auto& f = scratch[w];
      f.clear();
      for (const Action& a : s.ranks[r])
        if (is_compute(a.op)) f.push_back(a);
      list = &f;
    }
    append_compressed(*list, parts[r].pool, parts[r].segs);
  });
  PeriodicLists out;
  out.ranks.resize(parts.size());
  for (std::size_t r = 0; r < parts.size(); ++r) {
    const auto base = static_cast<std::uint32_t>(out.pool.size());
    out.pool.insert(out.pool.end(), parts[r].pool.begin(), parts[r].pool.end());
    out.ranks[r] = std::move(parts[r].segs);
    for (Segment& g : out.ranks[r]) g.begin += base;
  }
  return out;
}

bool pairs_whole(const PeriodicLists& lists) {
  for (const auto& segs : lists.ranks)
    for (std::size_t i = 0; i < segs.size(); ++i) {
      const Segment& g = segs[i];
      if (g.length == 0 || !lists.pool[g.begin + g.length - 1].overlap_next()) continue;
      if (i + 1 != segs.size() || g.reps != 1) return false;
    }
  return true;
}

std::size_t PeriodicSchedule::compute_size() const {
  std::size_t n = 0;
  for (const auto& segs : lists.ranks)
    for (const Segment& g : segs) {
      std::size_t c = 0;
      for (std::uint32_t k = 0; k < g.length; ++k) c += is_compute(lists.pool[g.begin + k].op);
      n += c * g.reps;
    }
  return n;
}

PeriodicSchedule to_periodic(Schedule s) {
  PeriodicSchedule out;
  out.lists = compress(s);
  s.ranks.clear();
  s.compute_order.reset();
  out.shape = std::move(s);
  return out;
}

Schedule to_flat(const PeriodicSchedule& s) {
  Schedule out = s.shape;
  out.ranks.resize(s.lists.ranks.size());
  for (std::size_t r = 0; r < out.ranks.size(); ++r)
    out.ranks[r] = expand(s.lists, static_cast<int>(r));
  return out;
}

bool flat_passes_forced() {
  const char* v = std::getenv("BB_FLAT_PASSES");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

std::vector<Action> expand(const PeriodicLists& lists, int rank) {
  std::vector<Action> out;
  std::size_t n = 0;
  for (const Segment& g : lists.ranks[rank]) n += static_cast<std::size_t>(g.length) * g.reps;
  out.reserve(n);
  for (const Segment& g : lists.ranks[rank])
    for (std::uint32_t rep = 0; rep < g.reps; ++rep)
      for (std::uint32_t k = 0; k < g.length; ++k) out.push_back(lists.at(g, rep, k));
  return out;
}

}  // namespace bb
