#include "schedule/periodic.hpp"

#include <algorithm>
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
  std::size_t reps_of(std::size_t i, std::size_t p, std::size_t cap, std::int32_t* step) const {
    if (i + 2 * p > n_ || a_[i + p - 1].overlap_next()) return 1;
    const std::int32_t d =
        static_cast<std::int32_t>(a_[i + p].mb) - static_cast<std::int32_t>(a_[i].mb);
    std::size_t k = i + p;
    const std::size_t stop = cap >= n_ ? n_ : std::min(n_, i + cap * p);
    for (; k < stop; ++k) {
      const Action& x = a_[k];
      const Action& y = a_[k - p];
      if (!same_shape(x, y) ||
          static_cast<std::int32_t>(x.mb) - static_cast<std::int32_t>(y.mb) != d)
        break;
    }
    *step = d;
    return (k - i) / p;
  }

  // Greedily from `from` on: at each position the shortest pattern of at most kMaxPeriod actions
  // that repeats kMinReps times (else the one covering the most, twice or more), else the action on
  // its own.
  void short_runs(std::size_t from, std::vector<Run>& out) const {
    for (std::size_t i = from; i < n_;) {
      std::size_t best_p = 0, best_reps = 1;
      std::int32_t best_step = 0;
      for (std::size_t p = 1; p <= kMaxPeriod && i + 2 * p <= n_; ++p) {
        std::int32_t step = 0;
        const std::size_t r = reps_of(i, p, kMinReps, &step);
        if (r >= kMinReps) {
          best_p = p;
          best_reps = reps_of(i, p, n_, &best_step);
          break;
        }
        if (r >= 2 && r * p > best_reps * std::max<std::size_t>(best_p, 1) && r * p >= 4) {
          best_p = p;
          best_reps = r;
          best_step = step;
        }
      }
      if (best_p > 0 && best_reps >= 2) {
        out.push_back({i, best_p, best_reps, best_step, false});
        i += best_p * best_reps;
        continue;
      }
      const std::size_t take = unit_length(a_[i], n_ - i);
      if (out.empty() || !out.back().literal || out.back().start + out.back().length != i)
        out.push_back({i, 0, 1, 0, true});
      out.back().length += take;
      i += take;
    }
  }

  // The runs of the whole list: the short ones, except where a longer pattern (its length the
  // distance from one short run's start to a later one's, up to kMaxLongPeriod) repeats kMinReps
  // times and covers more than the short run it starts at (interleaved: a block of 2·v·P actions).
  std::vector<Run> runs() const {
    std::vector<Run> out, shorts;
    for (std::size_t pos = 0; pos < n_;) {
      shorts.clear();
      short_runs(pos, shorts);
      Run best;
      std::size_t t = 0;
      for (; t < shorts.size() && best.reps == 1; ++t) {
        const std::size_t i = shorts[t].start;
        std::size_t cover = shorts[t].length * shorts[t].reps;
        for (std::size_t u = t + 1; u < shorts.size() && u <= t + kLongCandidates; ++u) {
          const std::size_t p = shorts[u].start - i;
          if (p <= kMaxPeriod) continue;
          if (p > kMaxLongPeriod || i + kMinReps * p > n_) break;
          std::int32_t step = 0;
          const std::size_t r = reps_of(i, p, n_, &step);
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
  static bool same_shape(const Action& a, const Action& b) {
    return a.op == b.op && a.chunk == b.chunk && a.flags == b.flags;
  }
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
