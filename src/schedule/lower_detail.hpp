// Pieces of lowering shared by lower.cpp (flat lists) and lower_periodic.cpp (lists in
// periodic form): unit costs, the unit-time policies, and a message's key in the global order.
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "schedule/action.hpp"
#include "schedule/lower.hpp"
#include "schedule/periodic_engine.hpp"
#include "schedule/schedule.hpp"

namespace bb::lower_detail {

// Unit costs: F = B = W = 1. Float is exact for the integer times this produces, below 2^24;
// lowering refuses a schedule whose unit-time makespan reaches that (unit_times_fit()).
using UnitTime = float;
inline constexpr double kMaxUnitTime = 16777216.0;  // 2^24

// Throws ConfigError (one line) when a unit-time makespan does not fit a float exactly.
void unit_times_fit(const Schedule& s, double makespan);

inline UnitTime unit_cost(const Action& a) {
  return a.op == Op::BW ? 2.0f : 1.0f;
}

// Unit costs, no link time: the engine's slots then hold when each message was produced.
struct UnitPolicy {
  static constexpr bool kPositiveTimes = true;  // every cost is 1 or 2, and no link time
  static UnitTime cost(int, const Action* a, std::size_t n) {
    UnitTime c = 0;
    for (std::size_t k = 0; k < n; ++k) c += unit_cost(a[k]);
    return c;
  }
  // A gradient leaves when its action ends (for BW: after W too), as the runtime sends it.
  static UnitTime grad_offset(int, const Action* a, std::size_t n) { return cost(0, a, n); }
  static UnitTime delay(int, int, const Action&) { return 0; }
  static UnitTime step_gap(int) { return 0; }
  static void record(int, int, std::size_t, std::size_t, UnitTime, UnitTime, UnitTime) {}
};
// The same unit-time pass by the periodic engine (periodic_engine.hpp), which jumps over the
// repetitions of a pipeline that repeats itself; its message times as the UnitEngine gives them.
struct PeriodicUnitPolicy {
  static double cost(int, const Action* a, std::size_t n) { return UnitPolicy::cost(0, a, n); }
  static double grad_offset(int, const Action* a, std::size_t n) { return cost(0, a, n); }
  static double delay(int, int, const Action&) { return 0; }
  static double step_gap(int) { return 0; }
  static void record(int, int, std::size_t, std::size_t, double, double, double) {}
};
using PeriodicUnitEngine = PeriodicEngine<PeriodicUnitPolicy>;

// A message's place in the global order (time, source rank, direction, chunk, micro-batch),
// packed into two words that compare lexicographically (unit times are non-negative floats,
// whose bit patterns order like the values), and the SEND or RECV action it becomes here.
struct Msg {
  std::uint64_t hi;  // time bits, source rank, direction (0 activation, 1 gradient)
  std::uint64_t lo;  // producer chunk, micro-batch
  Action act;

  static Msg make(UnitTime t, int src, int dir, int chunk, std::uint32_t mb, Action act) {
    return {(std::uint64_t{std::bit_cast<std::uint32_t>(t)} << 32) |
                (static_cast<std::uint64_t>(src) << 1) | static_cast<std::uint64_t>(dir),
            (static_cast<std::uint64_t>(chunk) << 32) | mb, act};
  }
  bool operator<(const Msg& o) const { return hi < o.hi || (hi == o.hi && lo < o.lo); }
};

// The SEND a compute action on rank r needs after it (its output goes to another rank) on
// route rt, with its key at time `end`; false if none.
inline bool send_after(const Schedule& s, const Route& rt, int r, const Action& a, UnitTime end,
                       Msg* m) {
  const int c = static_cast<int>(a.chunk);
  if (a.op == Op::F && c < rt.last && s.chunk_rank[c + 1] != r) {
    *m = Msg::make(end, r, 0, c, a.mb, make_action(Op::SEND_F, c, static_cast<int>(a.mb)));
    return true;
  }
  if ((a.op == Op::B || a.op == Op::BW) && c > rt.first && s.chunk_rank[c - 1] != r) {
    *m = Msg::make(end, r, 1, c, a.mb, make_action(Op::SEND_B, c, static_cast<int>(a.mb)));
    return true;
  }
  return false;
}

// Seconds since the last lap into a LowerPhases field (if any).
class PhaseClock {
 public:
  explicit PhaseClock(LowerPhases* phases) : phases_(phases) {}
  void lap(double LowerPhases::*field) {
    const auto t = std::chrono::steady_clock::now();
    if (phases_) phases_->*field = std::chrono::duration<double>(t - t0_).count();
    t0_ = t;
  }

 private:
  LowerPhases* phases_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace bb::lower_detail
