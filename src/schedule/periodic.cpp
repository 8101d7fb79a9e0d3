#include "schedule/periodic.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "schedule/parallel.hpp"

namespace bb {
namespace {

// Same action but for the micro-batch number.
bool same_shape(const Action& a, const Action& b) {
  return a.op == b.op && a.chunk == b.chunk && a.flags == b.flags;
}

}  // namespace

// One rank's list (already filtered) into segments appended to `segs`, patterns to `pool`.
void append_compressed(const std::vector<Action>& a, std::vector<Action>& pool,
                       std::vector<Segment>& segs) {
  const std::size_t n = a.size();
  // Repetitions of a[i, i+p) from i on, each shifted by the same micro-batch step, up to cap.
  const auto reps_of = [&](std::size_t i, std::size_t p, std::size_t cap, std::int32_t* step) {
    if (i + 2 * p > n || a[i + p - 1].overlap_next()) return std::size_t{1};
    const std::int32_t d =
        static_cast<std::int32_t>(a[i + p].mb) - static_cast<std::int32_t>(a[i].mb);
    std::size_t k = i + p;
    const std::size_t stop = std::min(n, i + cap * p);
    for (; k < stop; ++k) {
      const Action& x = a[k];
      const Action& y = a[k - p];
      if (!same_shape(x, y) ||
          static_cast<std::int32_t>(x.mb) - static_cast<std::int32_t>(y.mb) != d)
        break;
    }
    *step = d;
    return (k - i) / p;
  };
  Segment* literal = nullptr;  // the open run of single actions, if any
  for (std::size_t i = 0; i < n;) {
    // The shortest period that repeats kMinReps times, else the one covering the most.
    std::size_t best_p = 0, best_reps = 1;
    std::int32_t best_step = 0;
    for (std::size_t p = 1; p <= kMaxPeriod && i + 2 * p <= n; ++p) {
      std::int32_t step = 0;
      const std::size_t r = reps_of(i, p, kMinReps, &step);
      if (r >= kMinReps) {
        best_p = p;
        best_reps = reps_of(i, p, n, &best_step);
        break;
      }
      if (r >= 2 && r * p > best_reps * std::max<std::size_t>(best_p, 1) && r * p >= 4) {
        best_p = p;
        best_reps = r;
        best_step = step;
      }
    }
    if (best_p > 0 && best_reps >= 2) {
      segs.push_back({static_cast<std::uint32_t>(pool.size()), static_cast<std::uint32_t>(best_p),
                      static_cast<std::uint32_t>(best_reps), best_step});
      pool.insert(pool.end(), a.begin() + static_cast<std::ptrdiff_t>(i),
                  a.begin() + static_cast<std::ptrdiff_t>(i + best_p));
      literal = nullptr;
      i += best_p * best_reps;
      continue;
    }
    // On its own (with its partner, if it starts an FB pair).
    const std::size_t take = a[i].overlap_next() && i + 1 < n ? 2 : 1;
    if (!literal) {
      segs.push_back({static_cast<std::uint32_t>(pool.size()), 0, 1, 0});
      literal = &segs.back();
    }
    pool.insert(pool.end(), a.begin() + static_cast<std::ptrdiff_t>(i),
                a.begin() + static_cast<std::ptrdiff_t>(i + take));
    literal->length += static_cast<std::uint32_t>(take);
    i += take;
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
