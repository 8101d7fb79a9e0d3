#include "schedule/lower.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <new>

#include "common/error.hpp"
#include "schedule/engine.hpp"
#include "schedule/lower_detail.hpp"
#include "schedule/parallel.hpp"
#include "schedule/periodic.hpp"
#include "schedule/periodic_engine.hpp"
#include "schedule/validate.hpp"

namespace bb {

void lower_detail::unit_times_fit(const Schedule& s, double makespan) {
  if (makespan < kMaxUnitTime) return;
  throw ConfigError("schedule '" + s.name + "' (P=" + std::to_string(s.P) + ", M=" +
                    std::to_string(s.M) + ") is too long to lower: its unit-time makespan (" +
                    std::to_string(static_cast<long long>(makespan)) +
                    " or more) reaches 2^24, which float unit times do not hold exactly");
}

namespace {
using namespace lower_detail;

using UnitEngine = DataflowEngine<UnitTime, UnitPolicy, true>;
UnitPolicy unit_policy;

using PeriodicUnitEngine = PeriodicEngine<PeriodicUnitPolicy>;

// Its message times, in a float array laid out as UnitEngine's split slots.
struct PeriodicUnitTimes {
  const Schedule& s;
  std::unique_ptr<float[], void (*)(void*)> times;
  PeriodicUnitTimes(const Schedule& sched)
      : s(sched),
        times(static_cast<float*>(std::calloc(
                  2 * static_cast<std::size_t>(sched.num_chunks()) * sched.M, sizeof(float))),
              std::free) {
    if (!times) throw std::bad_alloc();
  }
  // The message (direction, chunk naming it as the periodic engine does, micro-batch).
  UnitTime time(int dir, std::uint32_t chunk, std::uint32_t mb) const {
    return times[(static_cast<std::size_t>(dir) * s.num_chunks() + chunk) * s.M + mb];
  }
  UnitTime activation_time(int chunk, std::uint32_t mb) const {
    return time(0, static_cast<std::uint32_t>(chunk), mb);
  }
  UnitTime gradient_time(int chunk, std::uint32_t mb) const {
    return time(1, static_cast<std::uint32_t>(chunk - 1), mb);
  }
  UnitTime input_time(const Action& a) const {
    // One route for all (the periodic engine's condition).
    const MessageName in = message_in(a, s.routes.front());
    return in.dir < 0 ? 0 : time(in.dir, in.chunk, a.mb);
  }
};

// The compute at acts[i] (an FB pair counts as one) on a rank free from `clock`: how many
// actions it takes, and when it starts and ends in unit time.
struct UnitSpan {
  std::size_t n;
  UnitTime start, end;
};
template <class Times>
UnitSpan unit_span(const Times& times, const std::vector<Action>& acts, std::size_t i,
                   UnitTime clock) {
  const std::size_t n =
      acts[i].overlap_next() && i + 1 < acts.size() && !is_comm(acts[i + 1].op) ? 2 : 1;
  UnitTime start = clock, cost = 0;
  for (std::size_t k = 0; k < n; ++k) {
    start = std::max(start, times.input_time(acts[i + k]));
    cost += unit_cost(acts[i + k]);
  }
  return {n, start, start + cost};
}

// Recomputes rank r's unit-time timeline from the engine's message times and writes its
// lowered list. Times: UnitEngine, or PeriodicUnitTimes below.
template <class Times>
class RankLowering {
 public:
  RankLowering(const Schedule& s, const Times& times)
      : s_(s), times_(times), uniform_(s.uniform_routes()) {}

  std::vector<Action> run(int r) {
    r_ = r;
    const auto& acts = s_.ranks[r_];
    const std::size_t nsend = collect_recvs(acts);
    std::vector<Action> out;
    out.reserve(acts.size() + recvs_.size() + nsend);
    auto o = std::back_inserter(out);
    Msg sends[2];  // the previous compute's (an FB pair has two)
    std::size_t ns = 0;
    std::size_t ri = 0;
    // Emits the pending sends and the receives keyed below `limit`, in global key order.
    const auto flush = [&](std::uint64_t limit) {
      std::size_t si = 0;
      for (; ri < recvs_.size() && recvs_[ri].hi < limit; ++ri) {
        while (si < ns && sends[si] < recvs_[ri]) *o = sends[si++].act;
        *o = recvs_[ri].act;
      }
      while (si < ns) *o = sends[si++].act;
      ns = 0;
    };
    UnitTime clock = 0;
    for (std::size_t i = 0; i < acts.size();) {
      const auto [n, start, end] = unit_span(times_, acts, i, clock);
      flush(end_key(end));  // receives timed before this compute's end come before it
      for (std::size_t k = 0; k < n; ++k) {
        *o = acts[i + k];
        if (add_send(acts[i + k], end, &sends[ns])) ++ns;
      }
      if (ns == 2 && sends[1] < sends[0]) std::swap(sends[0], sends[1]);
      clock = end;
      i += n;
    }
    flush(~std::uint64_t{0});
    return out;
  }

 private:
  std::size_t idx(int c, std::uint32_t m) const { return static_cast<std::size_t>(c) * s_.M + m; }
  const Route& route(std::uint32_t mb) const { return uniform_ ? s_.routes[0] : s_.routes[mb]; }
  // Keys of messages timed before `end`: those whose first word is below this one.
  static std::uint64_t end_key(UnitTime end) {
    return std::uint64_t{std::bit_cast<std::uint32_t>(end)} << 32;
  }

  // The rank's receives in key order; returns how many sends it has. Activations and gradients
  // each arrive in order for most schedules: two sorted runs, merged.
  std::size_t collect_recvs(const std::vector<Action>& acts) {
    frecvs_.clear();
    brecvs_.clear();
    std::size_t nsend = 0;
    for (const Action& a : acts) {
      const Route& rt = route(a.mb);
      if (a.op == Op::F) {
        if (a.chunk > rt.first) {
          const int src = s_.chunk_rank[a.chunk - 1];
          if (src != r_)
            frecvs_.push_back(Msg::make(times_.activation_time(a.chunk - 1, a.mb), src, 0,
                                        a.chunk - 1, a.mb,
                                        make_action(Op::RECV_F, a.chunk, static_cast<int>(a.mb))));
        }
        nsend += a.chunk < rt.last && s_.chunk_rank[a.chunk + 1] != r_;
      } else if (a.op == Op::B || a.op == Op::BW) {
        if (a.chunk < rt.last) {
          const int src = s_.chunk_rank[a.chunk + 1];
          if (src != r_)
            brecvs_.push_back(Msg::make(times_.gradient_time(a.chunk + 1, a.mb), src, 1,
                                        a.chunk + 1, a.mb,
                                        make_action(Op::RECV_B, a.chunk, static_cast<int>(a.mb))));
        }
        nsend += a.chunk > rt.first && s_.chunk_rank[a.chunk - 1] != r_;
      }
    }
    for (auto* v : {&frecvs_, &brecvs_})
      if (!std::is_sorted(v->begin(), v->end())) std::sort(v->begin(), v->end());
    recvs_.resize(frecvs_.size() + brecvs_.size());
    std::merge(frecvs_.begin(), frecvs_.end(), brecvs_.begin(), brecvs_.end(), recvs_.begin());
    return nsend;
  }

  bool add_send(const Action& a, UnitTime end, Msg* m) const {
    return send_after(s_, route(a.mb), r_, a, end, m);
  }

  const Schedule& s_;
  int r_ = 0;
  const Times& times_;
  bool uniform_;
  std::vector<Msg> frecvs_, brecvs_, recvs_;
};

// The timed dry run that lower() uses on its own output. The unit-time pass gave every message
// a time; here every rank's lowered list is replayed against those times, rank by rank:
//   - each compute starts when its rank is free and its inputs have arrived, and ends where
//     the unit-time pass says its outputs were produced;
//   - each SEND follows its producer on that rank, and each RECV is a message another rank
//     produces; every message crossing ranks is sent once and received once;
//   - each rank's SEND/RECV keys (time, source rank, direction, chunk, micro-batch) increase.
// Together these prove what dry_run() finds by search: taken in key order, every message's
// sender and receiver have it at the head of their comm streams (all their earlier ones have
// smaller keys) and its producer has run (everything before it on that rank waits only for
// messages of earlier times). So the lowered schedule finishes under blocking, in-order
// matched send/receive per peer pair. Ranks are checked independently (two threads at scale).
template <class Times>
class TimedDryRun {
 public:
  TimedDryRun(const Schedule& s, const Times& times)
      : s_(s),
        times_(times),
        uniform_(s.uniform_routes()),
        flags_(static_cast<std::size_t>(s.num_chunks()) * s.M, 0) {}

  // Empty when the lowered lists keep to the times; else what broke first.
  std::string run() {
    std::vector<Tally> tally(rank_workers(2));
    for_each_rank(s_, 2, [&](int w, int r) {
      if (tally[w].why.empty()) tally[w].why = replay(r, &tally[w]);
    });
    // Each SEND/RECV was of a distinct message crossing ranks, so all were sent and received
    // when both counts equal the number of such messages; if not, a pass over the computes
    // names one that was not.
    std::size_t sends = 0, recvs = 0, remote = 0;
    for (const Tally& t : tally) {
      if (!t.why.empty()) return t.why;
      sends += t.sends;
      recvs += t.recvs;
      remote += t.remote;
    }
    if (sends == remote && recvs == remote) return {};
    for (int r = 0; r < s_.P; ++r) {
      std::string why = complete(r);
      if (!why.empty()) return why;
    }
    return "  " + std::to_string(remote) + " messages cross ranks, but there are " +
           std::to_string(sends) + " sends and " + std::to_string(recvs) + " receives\n";
  }

 private:
  // What one worker saw: the first problem, and the messages of its ranks.
  struct Tally {
    std::string why;
    std::size_t sends = 0, recvs = 0, remote = 0;  // remote: messages its computes produce
  };

  // Per (chunk, micro-batch), written only by the chunk's rank.
  enum : std::uint8_t { kF = 1, kB = 2, kSentF = 4, kRecvF = 8, kSentB = 16, kRecvB = 32 };

  std::size_t idx(int c, std::uint32_t m) const { return static_cast<std::size_t>(c) * s_.M + m; }
  const Route& route(std::uint32_t mb) const { return uniform_ ? s_.routes[0] : s_.routes[mb]; }

  static std::string at(int r, std::size_t i, const Action& a, const std::string& what) {
    return "  rank " + std::to_string(r) + " step " + std::to_string(i) + " " + to_string(a) +
           ": " + what + "\n";
  }

  // Rank r's list against the times; adds its messages to *t (once, at the end: the workers'
  // tallies share a cache line).
  std::string replay(int r, Tally* t) {
    const auto& acts = s_.ranks[r];
    const std::size_t size = acts.size();
    std::size_t sends = 0, recvs = 0, remote = 0;
    UnitTime clock = 0;
    Msg last{0, 0, {}};
    bool any = false;
    for (std::size_t i = 0; i < size;) {
      const Action& a = acts[i];
      if (is_comm(a.op)) {
        Msg key{};
        std::string bad = comm(r, a, &key);
        if (!bad.empty()) return at(r, i, a, bad);
        ++(is_send(a.op) ? sends : recvs);
        if (any && !(last < key)) return at(r, i, a, "out of the order of message times");
        last = key;
        any = true;
        ++i;
        continue;
      }
      const auto [n, start, end] = unit_span(times_, acts, i, clock);
      for (std::size_t k = 0; k < n; ++k) {
        const Action& b = acts[i + k];
        const Route& rt = route(b.mb);
        std::uint8_t& f = flags_[idx(b.chunk, b.mb)];
        if (b.op == Op::F) {
          if (b.chunk < rt.last && times_.activation_time(b.chunk, b.mb) != end)
            return at(r, i + k, b, "ends at another time than the lowering's");
          remote += b.chunk < rt.last && s_.chunk_rank[b.chunk + 1] != r;
          f |= kF;
        } else if (b.op != Op::W) {
          if (b.chunk > rt.first && times_.gradient_time(b.chunk, b.mb) != end)
            return at(r, i + k, b, "ends at another time than the lowering's");
          remote += b.chunk > rt.first && s_.chunk_rank[b.chunk - 1] != r;
          f |= kB;
        }
      }
      clock = end;
      i += n;
    }
    t->sends += sends;
    t->recvs += recvs;
    t->remote += remote;
    return {};
  }

  // Checks one SEND/RECV of rank r and gives its key.
  std::string comm(int r, const Action& a, Msg* key) {
    if (a.chunk >= s_.num_chunks() || a.mb >= static_cast<std::uint32_t>(s_.M))
      return "chunk or micro-batch out of range";
    if (s_.chunk_rank[a.chunk] != r) return "the chunk lives on another rank";
    const Route& rt = route(a.mb);
    std::uint8_t& f = flags_[idx(a.chunk, a.mb)];
    const auto once = [&](std::uint8_t bit) {
      if (f & bit) return false;
      f |= bit;
      return true;
    };
    switch (a.op) {
      case Op::SEND_F:
        if (a.chunk >= rt.last || s_.chunk_rank[a.chunk + 1] == r) return "no remote next chunk";
        if (!(f & kF)) return "sent before its forward ran on this rank";
        if (!once(kSentF)) return "sent twice";
        *key = Msg::make(times_.activation_time(a.chunk, a.mb), r, 0, a.chunk, a.mb, a);
        return {};
      case Op::RECV_F:
        if (a.chunk <= rt.first || s_.chunk_rank[a.chunk - 1] == r)
          return "no remote previous chunk";
        if (!once(kRecvF)) return "received twice";
        *key = Msg::make(times_.activation_time(a.chunk - 1, a.mb), s_.chunk_rank[a.chunk - 1], 0,
                         a.chunk - 1, a.mb, a);
        return {};
      case Op::SEND_B:
        if (a.chunk <= rt.first || s_.chunk_rank[a.chunk - 1] == r)
          return "no remote previous chunk";
        if (!(f & kB)) return "sent before its backward ran on this rank";
        if (!once(kSentB)) return "sent twice";
        *key = Msg::make(times_.gradient_time(a.chunk, a.mb), r, 1, a.chunk, a.mb, a);
        return {};
      case Op::RECV_B:
        if (a.chunk >= rt.last || s_.chunk_rank[a.chunk + 1] == r) return "no remote next chunk";
        if (!once(kRecvB)) return "received twice";
        *key = Msg::make(times_.gradient_time(a.chunk + 1, a.mb), s_.chunk_rank[a.chunk + 1], 1,
                         a.chunk + 1, a.mb, a);
        return {};
      default:
        return "not a SEND/RECV";
    }
  }

  // Every message rank r produces for another rank was sent by r and received there.
  std::string complete(int r) const {
    const auto& acts = s_.ranks[r];
    for (std::size_t i = 0; i < acts.size(); ++i) {
      const Action& a = acts[i];
      const Route& rt = route(a.mb);
      const std::uint8_t f = flags_[idx(a.chunk, a.mb)];
      if (a.op == Op::F && a.chunk < rt.last && s_.chunk_rank[a.chunk + 1] != r) {
        if (!(f & kSentF)) return at(r, i, a, "its output is never sent");
        if (!(flags_[idx(a.chunk + 1, a.mb)] & kRecvF))
          return at(r, i, a, "its output is never received");
      } else if ((a.op == Op::B || a.op == Op::BW) && a.chunk > rt.first &&
                 s_.chunk_rank[a.chunk - 1] != r) {
        if (!(f & kSentB)) return at(r, i, a, "its input gradient is never sent");
        if (!(flags_[idx(a.chunk - 1, a.mb)] & kRecvB))
          return at(r, i, a, "its input gradient is never received");
      }
    }
    return {};
  }

  const Schedule& s_;
  const Times& times_;
  bool uniform_;
  std::vector<std::uint8_t> flags_;
};

}  // namespace

Schedule lower(Schedule s, LowerPhases* phases) {
  if (s.lowered) throw ScheduleError("schedule '" + s.name + "' is already lowered");
  PhaseClock phase(phases);
  const auto lap = [&](double LowerPhases::*field) { phase.lap(field); };
  validate_or_throw(s);
  lap(&LowerPhases::validate);
  std::string certificate;
  // Rank r's lowering reads only rank r's list, so each lowered list replaces its compute list
  // at once (peak memory: the lowered schedule plus one rank's compute list).
  const auto build_lists = [&](const auto& times) {
    using Times = std::remove_cvref_t<decltype(times)>;
    std::vector<RankLowering<Times>> lowering(rank_workers(2), RankLowering<Times>(s, times));
    for_each_rank(s, 2, [&](int w, int r) {
      std::vector<Action> lowered = lowering[w].run(r);
      std::vector<Action>().swap(s.ranks[r]);
      s.ranks[r] = std::move(lowered);
    });
    s.lowered = true;
  };
  bool periodic = false;
  if (s.size() >= periodic_lower_min_actions.load() && s.uniform_routes() &&
      !flat_passes_forced()) {
    // Unit-time pass by the periodic engine; where it finds no repetition to jump over (or a
    // cyclic wait, which the plain pass below then reports), the plain pass.
    const PeriodicLists lists = compress(s);
    PeriodicUnitPolicy policy;
    PeriodicUnitEngine engine(s, lists, policy, 1);
    const PeriodicUnitTimes times(s);
    engine.write_times(times.times.get());
    if (engine.run() == PeriodicUnitEngine::Outcome::done) {
      unit_times_fit(s, engine.max_clock());
      periodic = true;
      lap(&LowerPhases::unit_times);
      build_lists(times);
      lap(&LowerPhases::lists);
      certificate = TimedDryRun<PeriodicUnitTimes>(s, times).run();
      lap(&LowerPhases::proof);
    }
  }
  if (!periodic) {
    // Unit-time pass: every message's time; a cyclic wait shows here.
    UnitEngine engine(s, unit_policy, 1);
    engine.record_order();
    if (!engine.run())
      throw ScheduleError(
          "schedule '" + s.name + "' (P=" + std::to_string(s.P) + ", M=" + std::to_string(s.M) +
          ") deadlocks: the ranks' orders form a cyclic wait\n" + engine.stuck_report());
    double makespan = 0;
    for (int r = 0; r < s.P; ++r) makespan = std::max<double>(makespan, engine.clock(r));
    unit_times_fit(s, makespan);
    lap(&LowerPhases::unit_times);
    build_lists(engine);
    lap(&LowerPhases::lists);
    certificate = TimedDryRun<UnitEngine>(s, engine).run();
    // The order the unit-time pass found holds for any costs: the simulator replays it.
    s.compute_order = std::make_shared<const ComputeOrder>(engine.take_order());
    lap(&LowerPhases::proof);
  }  // the message times are freed here
  if (!certificate.empty()) {
    // Not expected: the lowering broke its own rule. The searching dry run says whether the
    // result can deadlock (and where); if it cannot, the schedule is still safe to use.
    DryRunResult dr = dry_run(s);
    if (!dr.ok)
      throw ScheduleError("lowering of '" + s.name + "' failed its dry run:\n" + dr.message +
                          "(timed dry run: " + certificate + ")");
  }
  return s;
}

namespace {

// The dry run's state: per (chunk, micro-batch) what has happened, and per rank the heads of
// its two streams. A rank runs until both streams wait; a completed send/receive pair wakes
// the other rank. Every wait is on something another rank does, so a rank that is not woken
// stays waiting: when no rank is ready, whoever has not finished is deadlocked.
class DryRun {
 public:
  explicit DryRun(const Schedule& s)
      : s_(s),
        uniform_(s.uniform_routes()),
        done_(static_cast<std::size_t>(s.num_chunks()) * s.M, 0),
        heads_(s.P),
        on_stack_(s.P, 1) {}

  DryRunResult run() {
    const int P = s_.P;
    for (int r = 0; r < P; ++r) {
      const auto& acts = s_.ranks[r];
      Heads& h = heads_[r];
      h.compute = h.comm = acts.data();
      h.end = acts.data() + acts.size();
      skip_comm(&h.compute, h.end);
      skip_compute(&h.comm, h.end);
    }
    for (int r = P - 1; r >= 0; --r) stack_.push_back(r);
    while (!stack_.empty() && mismatch_.empty()) {
      const int r = stack_.back();
      stack_.pop_back();
      on_stack_[r] = 0;
      advance(r);
    }
    return report();
  }

 private:
  enum : std::uint8_t { kF = 1, kB = 2, kRecvF = 4, kRecvB = 8 };

  struct Heads {
    const Action* compute;  // next compute action
    const Action* comm;     // next SEND/RECV
    const Action* end;
  };

  static void skip_comm(const Action** p, const Action* end) {
    while (*p != end && is_comm((*p)->op)) ++*p;
  }
  static void skip_compute(const Action** p, const Action* end) {
    while (*p != end && !is_comm((*p)->op)) ++*p;
  }
  const Route& route(std::uint32_t mb) const { return uniform_ ? s_.routes[0] : s_.routes[mb]; }
  std::uint8_t& at(int c, std::uint32_t m) { return done_[static_cast<std::size_t>(c) * s_.M + m]; }

  // Peer of a comm action, or -1 where the route has no neighbouring chunk.
  int peer(const Action& a) const {
    const Route& rt = route(a.mb);
    if (a.op == Op::SEND_F || a.op == Op::RECV_B)
      return a.chunk < rt.last ? s_.chunk_rank[a.chunk + 1] : -1;
    return a.chunk > rt.first ? s_.chunk_rank[a.chunk - 1] : -1;
  }

  bool compute_ready(const Action& a) {
    const Route& rt = route(a.mb);
    if (a.op == Op::F) {
      if (a.chunk == rt.first) return true;
      return s_.chunk_rank[a.chunk - 1] == s_.chunk_rank[a.chunk] ? (at(a.chunk - 1, a.mb) & kF)
                                                                  : (at(a.chunk, a.mb) & kRecvF);
    }
    if (a.op == Op::W || a.chunk == rt.last) return true;
    return s_.chunk_rank[a.chunk + 1] == s_.chunk_rank[a.chunk] ? (at(a.chunk + 1, a.mb) & kB)
                                                                : (at(a.chunk, a.mb) & kRecvB);
  }

  void wake(int q) {
    if (!on_stack_[q]) {
      on_stack_[q] = 1;
      stack_.push_back(q);
    }
  }

  // Runs the compute stream as far as it can; true if it moved.
  bool run_compute(Heads& h) {
    const Action* p = h.compute;
    while (p != h.end && compute_ready(*p)) {
      if (p->op == Op::F) at(p->chunk, p->mb) |= kF;
      if (p->op == Op::B || p->op == Op::BW) at(p->chunk, p->mb) |= kB;
      ++p;
      skip_comm(&p, h.end);
    }
    const bool moved = p != h.compute;
    h.compute = p;
    return moved;
  }

  // Completes send/receive pairs at the head of r's comm stream; true if any completed.
  bool run_comm(int r, Heads& h) {
    bool moved = false;
    while (h.comm != h.end) {
      const Action& a = *h.comm;
      const int q = peer(a);
      if (q < 0 || q == r) {
        mismatch_ = "  rank " + std::to_string(r) + ": " + to_string(a) +
                    " has no peer rank (validate the schedule first)\n";
        return moved;
      }
      Heads& hq = heads_[q];
      if (hq.comm == hq.end) return moved;
      const Action& b = *hq.comm;
      const bool a_sends = is_send(a.op);
      // Not the counterpart: the peer is busy with another rank, or both send (or both
      // receive) first and wait for each other.
      if (a_sends == is_send(b.op) || peer(b) != r) return moved;
      const Action& snd = a_sends ? a : b;
      const Action& rcv = a_sends ? b : a;
      const bool fwd = snd.op == Op::SEND_F;
      if (rcv.op != (fwd ? Op::RECV_F : Op::RECV_B) ||
          rcv.chunk != (fwd ? snd.chunk + 1 : snd.chunk - 1) || rcv.mb != snd.mb) {
        const int sender = a_sends ? r : q;
        mismatch_ = "  rank " + std::to_string(sender) + " sends " + to_string(snd) + " to rank " +
                    std::to_string(a_sends ? q : r) + ", whose next receive from it is " +
                    to_string(rcv) + ": in-order matching would deliver the wrong tensor\n";
        return moved;
      }
      if (!(at(snd.chunk, snd.mb) & (fwd ? kF : kB))) return moved;  // data not produced yet
      at(rcv.chunk, rcv.mb) |= fwd ? kRecvF : kRecvB;
      ++h.comm;
      skip_compute(&h.comm, h.end);
      ++hq.comm;
      skip_compute(&hq.comm, hq.end);
      wake(q);
      moved = true;
    }
    return moved;
  }

  void advance(int r) {
    Heads& h = heads_[r];
    // A completed receive may unblock compute, and new compute may produce a send's data.
    for (bool moved = true; moved && mismatch_.empty();) moved = run_compute(h) | run_comm(r, h);
  }

  DryRunResult report() const {
    DryRunResult res;
    if (!mismatch_.empty()) {
      res.ok = false;
      res.message = mismatch_;
      return res;
    }
    for (int r = 0; r < s_.P; ++r) {
      const Heads& h = heads_[r];
      if (h.compute == h.end && h.comm == h.end) continue;
      const Action* base = s_.ranks[r].data();
      res.ok = false;
      res.message += "  rank " + std::to_string(r) + ":";
      if (h.compute != h.end)
        res.message += " compute waits at " + to_string(*h.compute) + " (step " +
                       std::to_string(h.compute - base) + ")";
      if (h.comm != h.end) {
        const Action& a = *h.comm;
        res.message += std::string(h.compute != h.end ? ";" : "") + " comm waits at " +
                       to_string(a) + " (step " + std::to_string(h.comm - base) + ") " +
                       (is_send(a.op) ? "to" : "from") + " rank " + std::to_string(peer(a));
      }
      res.message += "\n";
    }
    if (!res.ok) res.message = "deadlock: no rank can make progress\n" + res.message;
    return res;
  }

  const Schedule& s_;
  bool uniform_;
  std::vector<std::uint8_t> done_;
  std::vector<Heads> heads_;
  std::vector<int> stack_;
  std::vector<std::uint8_t> on_stack_;
  std::string mismatch_;
};

}  // namespace

DryRunResult timed_dry_run(const Schedule& s) {
  DryRunResult res;
  res.ok = false;
  if (!s.lowered) {
    res.message = "timed dry run needs a lowered schedule";
    return res;
  }
  const ValidationReport rep = validate(s);
  if (!rep.ok()) {
    res.message = "invalid schedule:\n" + rep.describe(s);
    return res;
  }
  UnitEngine engine(s, unit_policy, 1);
  if (!engine.run()) {
    res.message = "the compute orders form a cyclic wait:\n" + engine.stuck_report();
    return res;
  }
  double makespan = 0;
  for (int r = 0; r < s.P; ++r) makespan = std::max<double>(makespan, engine.clock(r));
  if (makespan >= kMaxUnitTime) {
    res.message = "unit times reach 2^24, which floats do not hold exactly";
    return res;
  }
  res.message = TimedDryRun<UnitEngine>(s, engine).run();
  res.ok = res.message.empty();
  return res;
}

DryRunResult dry_run(const Schedule& s) {
  if (!s.lowered) {
    DryRunResult res;
    res.ok = false;
    res.message = "dry run needs a lowered schedule";
    return res;
  }
  return DryRun(s).run();
}

}  // namespace bb
