// Pieces of lowering shared by lower.cpp (flat lists) and lower_periodic.cpp (lists in
// periodic form), so that the periodic code adds only the repetition: unit costs and the
// unit-time policies; the one accessor every witness of message times gives (message_time) and
// what follows from it; a message's key in the global order and the SEND/RECV each compute
// needs; the walk that writes a rank's lowered list (RankWalk); and the checks of the timed
// dry run, per compute unit and per SEND/RECV.
#pragma once

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "schedule/action.hpp"
#include "schedule/edges.hpp"
#include "schedule/lower.hpp"
#include "schedule/periodic.hpp"
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
  UnitTime time() const { return std::bit_cast<UnitTime>(static_cast<std::uint32_t>(hi >> 32)); }
  // The same message `dmb` micro-batches on and `dt` later (a repetition moved on).
  Msg moved(UnitTime dt, std::int64_t dmb) const {
    Action a = act;
    a.mb = static_cast<std::uint32_t>(static_cast<std::int64_t>(a.mb) + dmb);
    return make(time() + dt, static_cast<int>((hi >> 1) & 0x7fffffffu), static_cast<int>(hi & 1),
                static_cast<int>(lo >> 32),
                static_cast<std::uint32_t>(static_cast<std::int64_t>(lo & 0xffffffffu) + dmb), a);
  }
};

// The SEND a compute action on rank r needs after it (its output goes to another rank) on
// route rt, with its key at time `end`; false if none.
inline bool send_after(const Schedule& s, const Route& rt, int r, const Action& a, UnitTime end,
                       Msg* m) {
  const RemoteMessage out = remote_out(s, a, rt);
  if (out.none()) return false;
  *m = Msg::make(end, r, out.msg.dir, static_cast<int>(a.chunk), a.mb, send_action(out.msg, a.mb));
  return true;
}

// Times: a witness of the unit-time pass's message times, giving
//   UnitTime message_time(const MessageName& m, std::uint32_t mb)
// (the split-slot UnitEngine, or the periodic engine's times: PeriodicUnitTimes in lower.cpp,
// JumpTimes in lower_periodic.cpp).

// Message m's key: its time, producer's rank and chunk; `act` its SEND or RECV.
template <class Times>
Msg message_key(const Schedule& s, const Times& t, const MessageName& m, std::uint32_t mb,
                Action act) {
  return Msg::make(t.message_time(m, mb), producer_rank(s, m), m.dir,
                   static_cast<int>(producer_chunk(m)), mb, act);
}

// The RECV compute action `a` needs before it (its input comes from another rank) on route
// rt, with its key; false if none.
template <class Times>
bool recv_before(const Schedule& s, const Times& t, const Action& a, const Route& rt, Msg* m) {
  const RemoteMessage in = remote_in(s, a, rt);
  if (in.none()) return false;
  *m = message_key(s, t, in.msg, a.mb, recv_action(in.msg, a.mb));
  return true;
}

// When a's input arrived (0 without one: a first chunk's F, a last chunk's B, a W).
template <class Times>
UnitTime input_time(const Times& t, const Action& a, const Route& rt) {
  const MessageName in = message_in(a, rt);
  return in.none() ? 0 : t.message_time(in, a.mb);
}

// The compute unit at the cursor (an FB pair counts as one) on a rank free from `clock`: its
// actions into u, and how many, and when it starts and ends in unit time. Moves the cursor on.
struct UnitSpan {
  std::uint32_t n;
  UnitTime start, end;
};
template <class Times>
[[gnu::always_inline]] inline UnitSpan take_unit(const Routes& routes, const Times& t,
                                                 ListCursor& c, UnitTime clock, Action u[2]) {
  const std::uint32_t n = c.unit();
  UnitTime start = clock, cost = 0;
  for (std::uint32_t k = 0; k < n; ++k) {
    u[k] = c.get(k);
    start = std::max(start, input_time(t, u[k], routes(u[k].mb)));
    cost += unit_cost(u[k]);
  }
  c.next(n);
  return {n, start, start + cost};
}

// Writes one rank's lowered list: every compute unit in order, the SENDs of its outputs right
// after it, and the RECVs keyed (in the global order) below a unit's end before that unit, all
// SEND/RECVs of the rank in key order. Recvs: the rank's receives in key order (head(), pop(),
// empty()). Out: where the actions go (push_back).
template <class Times, class Recvs, class Out>
class RankWalk {
 public:
  RankWalk(const Schedule& s, const Times& t, int r, Recvs& recvs, Out& out)
      : s_(s), routes_(s), t_(t), r_(r), recvs_(recvs), out_(out) {}

  // The unit at the cursor, with the receives before it and its sends after it.
  void unit(ListCursor& c) {
    Action u[2];
    const UnitSpan span = take_unit(routes_, t_, c, clock_, u);
    // Receives timed before this compute's end come before it.
    flush(std::uint64_t{std::bit_cast<std::uint32_t>(span.end)} << 32);
    for (std::uint32_t k = 0; k < span.n; ++k) {
      out_.push_back(u[k]);
      if (send_after(s_, routes_(u[k].mb), r_, u[k], span.end, &sends_[ns_])) ++ns_;
    }
    if (ns_ == 2 && sends_[1] < sends_[0]) std::swap(sends_[0], sends_[1]);
    clock_ = span.end;
  }
  // The pending sends and every receive left.
  void finish() { flush(~std::uint64_t{0}); }

  // The walk's state between units: its unit clock and the sends of the last unit.
  UnitTime clock_ = 0;
  Msg sends_[2];  // the last unit's (an FB pair has two)
  std::size_t ns_ = 0;

 private:
  // Emits the pending sends and the receives keyed below `limit`, in key order.
  void flush(std::uint64_t limit) {
    std::size_t si = 0;
    for (; !recvs_.empty() && recvs_.head().hi < limit; recvs_.pop()) {
      const Msg& head = recvs_.head();
      while (si < ns_ && sends_[si] < head) out_.push_back(sends_[si++].act);
      out_.push_back(head.act);
    }
    while (si < ns_) out_.push_back(sends_[si++].act);
    ns_ = 0;
  }

  const Schedule& s_;
  Routes routes_;
  const Times& t_;
  int r_;
  Recvs& recvs_;
  Out& out_;
};

// The timed dry run's record of what happened to each (chunk, micro-batch); Marks gives
//   bool done(std::uint32_t chunk, std::uint32_t mb, std::uint8_t bit)
//   bool once(std::uint32_t chunk, std::uint32_t mb, std::uint8_t bit)  // false: it had
enum : std::uint8_t { kRanF = 1, kRanB = 2, kSentF = 4, kRecvF = 8, kSentB = 16, kRecvB = 32 };
inline constexpr std::size_t kMarkBits = 6;

// "  rank r step i ACTION: what\n", the timed dry run's line.
inline std::string dry_run_line(int r, std::size_t i, const Action& a, const std::string& what) {
  return "  rank " + std::to_string(r) + " step " + std::to_string(i) + " " + to_string(a) + ": " +
         what + "\n";
}

// One SEND/RECV of rank r against the unit times: it carries a message that crosses ranks, to
// or from this rank; a send follows its producer here; each happens once. Null, and its key in
// *key, when it passes; else why not.
template <class Times, class Marks>
const char* check_comm(const Schedule& s, const Routes& routes, const Times& t, int r,
                       const Action& a, Marks& marks, Msg* key) {
  if (a.chunk >= static_cast<std::uint32_t>(s.num_chunks()) ||
      a.mb >= static_cast<std::uint32_t>(s.M))
    return "chunk or micro-batch out of range";
  if (s.chunk_rank[a.chunk] != r) return "the chunk lives on another rank";
  const MessageName m = comm_message(a, routes(a.mb));
  const int other = m.none() ? r : is_send(a.op) ? consumer_rank(s, m) : producer_rank(s, m);
  if (other == r) return toward_next(a.op) ? "no remote next chunk" : "no remote previous chunk";
  const std::uint8_t bit = a.op == Op::SEND_F   ? kSentF
                           : a.op == Op::RECV_F ? kRecvF
                           : a.op == Op::SEND_B ? kSentB
                                                : kRecvB;
  if (is_send(a.op) && !marks.done(a.chunk, a.mb, m.dir == 0 ? kRanF : kRanB))
    return m.dir == 0 ? "sent before its forward ran on this rank"
                      : "sent before its backward ran on this rank";
  if (!marks.once(a.chunk, a.mb, bit)) return is_send(a.op) ? "sent twice" : "received twice";
  *key = message_key(s, t, m, a.mb, a);
  return nullptr;
}

// The compute unit u[0..n) of rank r, ending at `end`: each output ends when the unit-time
// pass said it was produced; each runs once. Adds the messages it sends to other ranks to
// *remote. Null when it passes; else why not, for the action at u + *which.
template <class Times, class Marks>
const char* check_unit(const Schedule& s, const Routes& routes, const Times& t, int r,
                       const Action* u, std::uint32_t n, UnitTime end, Marks& marks,
                       std::size_t* remote, std::uint32_t* which) {
  for (std::uint32_t i = 0; i < n; ++i) {
    const Action& b = u[i];
    *which = i;
    if (b.op == Op::W) continue;
    const MessageName out = message_out(b, routes(b.mb));
    if (!out.none()) {
      if (t.message_time(out, b.mb) != end) return "ends at another time than the lowering's";
      *remote += consumer_rank(s, out) != r;
    }
    if (!marks.once(b.chunk, b.mb, b.op == Op::F ? kRanF : kRanB)) return "runs twice";
  }
  return nullptr;
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
