// Validation of a compute schedule in periodic form without writing out its repetitions: the checks
// of validate() (validate.cpp) for a schedule that is not lowered, on the segments. Every action of
// a pattern has its chunk in every repetition, so range (of the first and last repetition),
// placement, route and FB-pair checks are made once per pattern. A segment of at least four
// repetitions (micro-batch step ±1, or a step s with each kind and chunk of the pattern on |s|
// consecutive micro-batches, as in interleaved's blocks) is walked action by action in its first
// three; the rest are passed as ranges of micro-batches per (kind, chunk) ("claims"): a passed F, B
// or W must not have happened before (its range is disjoint from everything walked or claimed so
// far), and what it must follow (F for B, B for W) is either in the same segment (so it ran, by the
// same argument, one or more repetitions before) or checked to have happened before the segment. At
// the end every (chunk, micro-batch) of every kind has been seen once when each chunk counts M of
// each. Anything this cannot tell (a pair across a pattern's end, other micro-batch steps) is
// walked; anything wrong makes it say "not sure", and the caller runs validate() on the flat lists
// for the report.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <unordered_map>
#include <vector>

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
    if (!shape_ok()) return false;
    for (int r = 0; r < s_.P; ++r)
      for (std::size_t g = 0; g < L_.ranks[r].size(); ++g)
        if (!segment(r, g)) return false;
    // Once each, nothing twice: every chunk has M of each kind.
    for (std::size_t n : count_)
      if (n != M_) return false;
    return true;
  }

 private:
  enum : std::uint8_t { kF = 1, kB = 2, kW = 4 };
  static constexpr std::size_t kKinds = 3;
  static std::size_t kind(std::uint8_t bit) { return bit == kF ? 0 : bit == kB ? 1 : 2; }

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
    if (static_cast<int>(s_.routes.size()) != s_.M || !s_.uniform_routes()) return false;
    for (int c : s_.chunk_rank)
      if (c < 0 || c >= s_.P) return false;
    const Route& rt = s_.routes.front();
    return rt.first == 0 && rt.last == s_.num_chunks() - 1;  // every chunk on every route
  }

  bool done(std::uint8_t bit, std::uint32_t chunk, std::int64_t mb) const {
    if (seen_[chunk * M_ + static_cast<std::size_t>(mb)] & bit) return true;
    for (const Claim& c : claims_[kind(bit) * C_ + chunk])
      if (mb >= c.lo && mb <= c.hi) return true;
    return false;
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

  // One action, as validate() checks it (in range and placed already).
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

  // The pattern's actions are this rank's, in range in every repetition, and an FB pair never
  // crosses the pattern's end (except as the list's last action... which is then not a pair).
  bool pattern_ok(int r, const Segment& g, bool last_segment) const {
    if (g.length == 0 || g.reps == 0) return false;
    for (std::uint32_t k = 0; k < g.length; ++k) {
      const Action a = L_.pool[g.begin + k];
      if (!is_compute(a.op) || a.chunk >= C_ || s_.chunk_rank[a.chunk] != r) return false;
      const std::int64_t first = a.mb,
                         last = first + static_cast<std::int64_t>(g.reps - 1) * g.mb_step;
      if (std::min(first, last) < 0 || std::max(first, last) >= static_cast<std::int64_t>(M_))
        return false;
      if (a.overlap_next()) {
        if (a.op != Op::F) return false;
        if (k + 1 < g.length) {
          const Op next = L_.pool[g.begin + k + 1].op;
          if (next != Op::B && next != Op::BW) return false;
        } else if (!(last_segment && g.reps == 1)) {
          return false;  // across the pattern's end: not worth it, say not sure
        }
      }
    }
    return true;
  }

  bool segment(int r, std::size_t gi) {
    const Segment& g = L_.ranks[r][gi];
    if (!pattern_ok(r, g, gi + 1 == L_.ranks[r].size())) return false;
    const bool pass = g.reps >= 4 && g.mb_step != 0 && groups_tile(g);
    const std::uint32_t walked = pass ? 3 : g.reps;
    for (std::uint32_t rep = 0; rep < walked; ++rep)
      for (std::uint32_t k = 0; k < g.length; ++k)
        if (!walk(L_.at(g, rep, k))) return false;
    return !pass || claim(g);
  }

  // The pattern's actions of one kind and chunk: what a passed repetition claims together.
  struct Group {
    std::uint8_t bit;
    std::uint32_t chunk;
    std::int64_t lo, hi;  // their micro-batches in repetition 0
    std::uint32_t n;
  };
  static bool has(std::uint8_t bit, Op op) {
    return bit == kF   ? op == Op::F
           : bit == kB ? (op == Op::B || op == Op::BW)
                       : (op == Op::W || op == Op::BW);
  }
  // Groups of g's pattern, sorted by (bit, chunk). A pattern holds few (its rank's chunks,
  // three kinds) but up to 2^16 actions: each action updates its group, found through
  // group_of_ (per kind and chunk, reset before returning).
  std::vector<Group> groups(const Segment& g) const {
    std::vector<Group> out;
    for (std::uint32_t k = 0; k < g.length; ++k) {
      const Action e = L_.pool[g.begin + k];
      for (const std::uint8_t bit : {kF, kB, kW}) {
        if (!has(bit, e.op)) continue;
        std::int32_t& i = group_of_[kind(bit) * C_ + e.chunk];
        if (i < 0) {
          i = static_cast<std::int32_t>(out.size());
          out.push_back({bit, e.chunk, e.mb, e.mb, 1});
          continue;
        }
        Group& gr = out[static_cast<std::size_t>(i)];
        gr.lo = std::min<std::int64_t>(gr.lo, e.mb);
        gr.hi = std::max<std::int64_t>(gr.hi, e.mb);
        ++gr.n;
      }
    }
    for (const Group& gr : out) group_of_[kind(gr.bit) * C_ + gr.chunk] = -1;
    std::sort(out.begin(), out.end(), [](const Group& a, const Group& b) {
      return a.bit != b.bit ? a.bit < b.bit : a.chunk < b.chunk;
    });
    return out;
  }
  // Whether each group's micro-batches are |mb_step| consecutive ones (distinct, sorted above):
  // then the group's passed repetitions tile one range (interleaved: P forwards of a chunk per
  // block, the block P micro-batches on). With a step of ±1, one action per kind and chunk.
  bool groups_tile(const Segment& g) const {
    const std::int64_t k = g.mb_step < 0 ? -static_cast<std::int64_t>(g.mb_step) : g.mb_step;
    for (const Group& gr : groups(g))
      if (static_cast<std::int64_t>(gr.n) != k || gr.hi - gr.lo + 1 != k) return false;
    return true;
  }

  // Repetitions 3 ... reps-1 of g, passed.
  bool claim(const Segment& g) {
    const std::int64_t s = g.mb_step, from = 3, to = g.reps;  // [from, to)
    // Where each (kind, chunk, micro-batch) of the pattern first is (long patterns: looked up).
    std::unordered_map<std::uint64_t, std::uint32_t> first_at;
    const bool indexed = g.length > 32;
    const auto place = [](std::uint8_t bit, std::uint32_t chunk, std::int64_t mb) {
      return (static_cast<std::uint64_t>(bit) << 56) | (static_cast<std::uint64_t>(chunk) << 32) |
             static_cast<std::uint64_t>(static_cast<std::uint32_t>(mb));
    };
    std::int64_t lo_mb = std::numeric_limits<std::int64_t>::max(), hi_mb = -1;
    if (indexed)
      for (std::uint32_t j = 0; j < g.length; ++j) {
        const Action p = L_.pool[g.begin + j];
        lo_mb = std::min<std::int64_t>(lo_mb, p.mb);
        hi_mb = std::max<std::int64_t>(hi_mb, p.mb);
        for (const std::uint8_t bit : {kF, kB})
          if (has(bit, p.op)) first_at.emplace(place(bit, p.chunk, p.mb), j);
      }
    // What each passed action must follow, first (claims below would hide a missing one).
    for (std::uint32_t k = 0; k < g.length; ++k) {
      const Action e = L_.pool[g.begin + k];
      if (e.op == Op::F) continue;
      const std::uint8_t need = e.op == Op::W ? kB : kF;
      // The same chunk's F (or B/BW) in this pattern, d repetitions back (d >= 0).
      std::int64_t d = -1;
      if (indexed) {
        // Its micro-batch there is e.mb + d·s, inside the pattern's span.
        for (std::int64_t back = 0;; ++back) {
          const std::int64_t mb = e.mb + back * s;
          if (mb < lo_mb || mb > hi_mb) break;
          const auto it = first_at.find(place(need, e.chunk, mb));
          if (it != first_at.end() && (back > 0 || it->second < k)) {
            d = back;
            break;
          }
        }
      } else {
        for (std::uint32_t j = 0; j < g.length; ++j) {
          const Action p = L_.pool[g.begin + j];
          if (!has(need, p.op) || p.chunk != e.chunk) continue;
          const std::int64_t diff = static_cast<std::int64_t>(p.mb) - e.mb;  // = d·s
          if (diff % s != 0) continue;
          const std::int64_t back = diff / s;
          if (back > 0 || (back == 0 && j < k)) {
            d = d < 0 ? back : std::min(d, back);
          }
        }
      }
      // Passed repetitions x with x - d >= 0 find it in this segment; the others before it.
      const std::int64_t before_to = d < 0 ? to : std::min<std::int64_t>(to, d);
      for (std::int64_t x = from; x < before_to; ++x)
        if (!done(need, e.chunk, e.mb + x * s)) return false;
    }
    // Each group's passed repetitions as one range of micro-batches (groups_tile()).
    for (const Group& gr : groups(g)) {
      const Claim c{gr.lo + std::min(from * s, (to - 1) * s),
                    gr.hi + std::max(from * s, (to - 1) * s)};
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
  std::vector<std::vector<Claim>> claims_;      // per (kind, chunk)
  std::vector<Span> walked_;                    // per (kind, chunk): walked micro-batches' span
  std::vector<std::size_t> count_;              // per (kind, chunk): seen, walked or claimed
  mutable std::vector<std::int32_t> group_of_;  // per (kind, chunk): groups()'s scratch, -1
};

}  // namespace

bool surely_valid(const PeriodicSchedule& s) {
  return PeriodicChecker(s).run();
}

void validate_or_throw(const PeriodicSchedule& s) {
  if (!surely_valid(s)) validate_or_throw(to_flat(s));
}

}  // namespace bb
