#include "schedule/v_blocks.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

namespace bb {
namespace {

// A rank's passes by kind: F of the down leg, F of the up leg, B of the up leg, B of the down
// leg, then W: one list of every W (kW) while squeezing, or one per leg after the last
// placement (kW1: the up leg's, kW0: the down leg's). A list holds each micro-batch's slot.
enum Kind : int { kF0 = 0, kF1 = 1, kB1 = 2, kB0 = 3, kW = 4, kW1 = 4, kW0 = 5, kKinds = 6 };

using Rank = std::array<std::vector<int>, kKinds>;

bool is_b(int k) {
  return k == kB1 || k == kB0;
}

// The building block: the slots of micro-batch 0's F0, F1, B1, B0 on rank r (the paper's
// V-Min and V-Half blocks, as sail-sg's generator lays them out); micro-batch m runs 6m later.
std::array<int, 4> block(VBlock b, int P, int r) {
  if (b == VBlock::min) {
    const int gap = P % 3 == 0 ? 2 : 0;
    return {r, 2 * P - r - 1, 2 * P + gap + r, 4 * P + gap - r - 1};
  }
  const int gap = P % 2 == 0 ? 3 : 0;
  return {2 * r, 3 * P - r - 2, 3 * P + gap + 2 * r - 1, 6 * P + gap - r - 2};
}

int last_slot(const Rank& x) {
  int t = 0;
  for (const auto& l : x)
    if (!l.empty()) t = std::max(t, l.back());
  return t;
}

// Puts the W into the free slots after their B, oldest first: one list (split = false) or the
// up leg's before the down leg's (split). Those left over go after the last pass.
void place_w(Rank& x, bool split) {
  x[kW0].clear();
  x[kW1].clear();
  const int bound = std::max({x[kF0].back(), x[kF1].back(), x[kB1].back(), x[kB0].back()});
  std::array<std::size_t, 4> next{};
  std::array<int, 2> owed{};
  const auto take = [&](int t) {
    for (int w = 0; w < 2; ++w)
      if (owed[w] > 0) {
        x[kW + w].push_back(t);
        --owed[w];
        return;
      }
  };
  for (int t = 0; t <= bound; ++t) {
    int k = 0;
    while (k < 4 && !(next[k] < x[k].size() && x[k][next[k]] == t)) ++k;
    if (k == 4) {
      take(t);
      continue;
    }
    ++next[k];
    if (is_b(k)) ++owed[split && k == kB0 ? 1 : 0];
  }
  for (int t = bound + 1; owed[0] + owed[1] > 0; ++t) take(t);
}

// Live activations of one rank slot by slot. With explicit W a slot's F adds one and its W
// takes one away; without (the W not placed yet), each free slot after a B retires one.
struct Live {
  int cur = 0, owed = 0;
};
enum Code : std::uint8_t { kFree = 0, kCodeF, kCodeB, kCodeW };

void advance(Live& s, std::uint8_t code, bool with_w) {
  if (code == kCodeF) ++s.cur;
  if (code == kCodeW) --s.cur;
  if (code == kCodeB) ++s.owed;
  if (code == kFree && !with_w && s.owed > 0) {
    --s.cur;
    --s.owed;
  }
}

std::uint8_t code_of(int k) {
  return k <= kF1 ? kCodeF : is_b(k) ? kCodeB : kCodeW;
}

int kinds_of(bool with_w) {
  return with_w ? 5 : 4;
}

// The peak of rank x's slots, all passes counted.
int peak_of(const Rank& x, bool with_w) {
  std::vector<std::uint8_t> codes(last_slot(x) + 1, kFree);
  for (int k = 0; k < kinds_of(with_w); ++k)
    for (int t : x[k]) codes[t] = code_of(k);
  Live s;
  int peak = 0;
  for (std::uint8_t c : codes) {
    advance(s, c, with_w);
    peak = std::max(peak, s.cur);
  }
  return peak;
}

// The slots of one rank seen so far by a sweep in slot order (its passes at their final slots),
// with the live count before every 16th slot, so that the count at any seen slot is a short
// walk away.
class Seen {
 public:
  Seen(int slots, bool with_w) : codes_(slots + 1, kFree), marks_(1), with_w_(with_w) {}

  bool free(int t) const { return codes_[t] == kFree; }
  void put(int t, std::uint8_t code) { codes_[t] = code; }

  // Before slot t (the marks up to t current).
  Live before(int t) const {
    const std::size_t k = std::min<std::size_t>(t / kStep, marks_.size() - 1);
    Live s = marks_[k];
    for (int i = static_cast<int>(k) * kStep; i < t; ++i) advance(s, codes_[i], with_w_);
    return s;
  }
  // Every slot below `upto` is seen, and the passes at slots from `from` on may have changed:
  // the marks past `from`, up to `upto`, are brought up to date.
  void seen_upto(int upto, int from = kNever) {
    std::size_t k = std::min<std::size_t>(from / kStep + 1, marks_.size());
    for (; static_cast<int>(k) * kStep <= upto; ++k) {
      Live s = marks_[k - 1];
      for (int i = static_cast<int>(k - 1) * kStep; i < static_cast<int>(k) * kStep; ++i)
        advance(s, codes_[i], with_w_);
      if (k < marks_.size())
        marks_[k] = s;
      else
        marks_.push_back(s);
    }
  }
  // Whether the live count stays at most cap over slots [t, end) with a pass of `code` put at
  // t (slot t free, every slot below end seen).
  bool fits(int t, int end, std::uint8_t code, int cap) const {
    Live s = before(t);
    advance(s, code, with_w_);
    for (int i = t + 1; s.cur <= cap && i < end; ++i) advance(s, codes_[i], with_w_);
    return s.cur <= cap;
  }

 private:
  static constexpr int kStep = 16;
  static constexpr int kNever = 1 << 30;
  std::vector<std::uint8_t> codes_;
  std::vector<Live> marks_;
  bool with_w_;
};

// The m-th earliest B of rank x (both legs' lists, each in slot order).
int nth_b(const Rank& x, int m) {
  const auto& a = x[kB1];
  const auto& b = x[kB0];
  int lo = std::max(0, m + 1 - static_cast<int>(b.size()));
  int hi = std::min(m + 1, static_cast<int>(a.size()));
  while (lo < hi) {  // i of a's, m+1-i of b's: the largest i with a[i-1] <= b[m+1-i]
    const int i = (lo + hi + 1) / 2;
    if (m + 1 - i >= static_cast<int>(b.size()) || a[i - 1] <= b[m + 1 - i])
      lo = i;
    else
      hi = i - 1;
  }
  const int i = lo, j = m + 1 - i;
  return std::max(i > 0 ? a[i - 1] : -1, j > 0 ? b[j - 1] : -1);
}

// Visits every pass of every rank in slot order (ties by rank): f(rank, kind, micro-batch, t).
template <class F>
void sweep(std::vector<Rank>& x, int kinds, F&& f) {
  const int P = static_cast<int>(x.size());
  int end = 0;
  for (const Rank& r : x) end = std::max(end, last_slot(r));
  std::vector<std::array<std::size_t, kKinds>> next(P);
  for (int t = 0; t <= end; ++t)
    for (int r = 0; r < P; ++r)
      for (int k = 0; k < kinds; ++k) {
        auto& i = next[r][k];
        if (i < x[r][k].size() && x[r][k][i] == t) {
          f(r, k, static_cast<int>(i++), t);
          break;
        }
      }
}

// The earliest slot the inputs of pass (r, k, m) allow: after its input on the neighbouring
// rank, its own earlier pass of the micro-batch (or, for a W, its B) and the same kind's
// previous micro-batch.
int earliest(const std::vector<Rank>& x, int r, int k, int m) {
  const int P = static_cast<int>(x.size());
  int dep = -1;
  if ((k == kF0 || k == kB1) && r > 0) dep = std::max(dep, x[r - 1][k][m]);
  if ((k == kF1 || k == kB0) && r + 1 < P) dep = std::max(dep, x[r + 1][k][m]);
  if (k > kF0 && k < kW) dep = std::max(dep, x[r][k - 1][m]);
  if (k == kW) dep = std::max(dep, nth_b(x[r], m));
  if (m > 0) dep = std::max(dep, x[r][k][m - 1]);
  return dep + 1;
}

// The squeeze (the paper's, sail-sg's `reorder`): in slot order, each pass of the warm-up
// (with_w only) and of the cool-down moves to the earliest free slot its inputs allow that
// keeps its rank's live count at most the blocks' peak; the steady state stays.
void squeeze(std::vector<Rank>& x, int M, bool with_w) {
  if (with_w)
    for (Rank& r : x) place_w(r, false);
  int cap = 0;
  for (const Rank& r : x) cap = std::max(cap, peak_of(r, with_w));
  // Every rank's slots up to the last of all ranks: the sweep brings every rank's marks up to
  // each slot it reaches, also past the rank's own last pass.
  int end = 0;
  for (const Rank& r : x) end = std::max(end, last_slot(r));
  std::vector<Seen> seen(x.size(), Seen(end, with_w));
  int phase = 0, swept = 0;
  sweep(x, kinds_of(with_w), [&](int r, int k, int m, int t) {
    for (; swept < t; ++swept)
      for (Seen& s : seen) s.seen_upto(swept + 1);
    if (k == kB0 && r == 0 && phase == 0) phase = 1;
    const bool stays = phase == 1 || (phase == 0 && !with_w);
    if (phase == 1 && k == kF0 && m == M - 1) phase = 2;
    int at = t;
    if (!stays) {
      const int dep = earliest(x, r, k, m);
      if (dep > t) throw std::logic_error("v-block squeeze: a pass before its input");
      for (int c = dep; c < t; ++c)
        if (seen[r].free(c) && seen[r].fits(c, t, code_of(k), cap)) {
          at = c;
          break;
        }
      x[r][k][m] = at;
    }
    seen[r].put(at, code_of(k));
    if (at < t) seen[r].seen_upto(t, at);
  });
}

// Unit-time ASAP start of every pass, each rank keeping its slot order (sail-sg's
// eager_execution_time with unit costs and no link time), in place.
void as_soon_as_possible(std::vector<Rank>& x, int kinds) {
  const int P = static_cast<int>(x.size());
  std::vector<int> free_at(P, 0);
  sweep(x, kinds, [&](int r, int k, int m, int) {
    int start = free_at[r];
    if ((k == kF0 || k == kB1) && r > 0) start = std::max(start, x[r - 1][k][m] + 1);
    if ((k == kF1 || k == kB0) && r + 1 < P) start = std::max(start, x[r + 1][k][m] + 1);
    if (k > kF0 && k < kW) start = std::max(start, x[r][k - 1][m] + 1);
    if (m > 0) start = std::max(start, x[r][k][m - 1] + 1);
    x[r][k][m] = start;
    free_at[r] = start + 1;
  });
}

void drop_w(std::vector<Rank>& x) {
  for (Rank& r : x) {
    r[kW0].clear();
    r[kW1].clear();
  }
}

}  // namespace

void build_v_block(Schedule& s, VBlock b) {
  const int P = s.P, M = s.M;
  std::vector<Rank> x(P);
  for (int r = 0; r < P; ++r) {
    const auto at = block(b, P, r);
    for (int k = 0; k < 4; ++k) {
      x[r][k].resize(M);
      for (int m = 0; m < M; ++m) x[r][k][m] = at[k] + 6 * m;
    }
  }
  squeeze(x, M, true);
  as_soon_as_possible(x, 5);
  drop_w(x);
  squeeze(x, M, false);
  for (Rank& r : x) place_w(r, false);
  as_soon_as_possible(x, 5);
  drop_w(x);
  for (Rank& r : x) place_w(r, true);
  for (int r = 0; r < P; ++r) {
    const std::array<int, kKinds> chunk = {r, 2 * P - 1 - r, 2 * P - 1 - r, r, 2 * P - 1 - r, r};
    const std::array<Op, kKinds> op = {Op::F, Op::F, Op::B, Op::B, Op::W, Op::W};
    auto& out = s.ranks[r];
    out.reserve(6 * static_cast<std::size_t>(M));
    std::vector<Rank> one(1, std::move(x[r]));
    sweep(one, kKinds,
          [&](int, int k, int m, int) { out.push_back(make_action(op[k], chunk[k], m)); });
  }
}

}  // namespace bb
