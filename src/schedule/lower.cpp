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
  UnitTime message_time(const MessageName& m, std::uint32_t mb) const {
    return times[(static_cast<std::size_t>(m.dir) * s.num_chunks() + m.chunk) * s.M + mb];
  }
};

// A rank's receives in key order (RankWalk's Recvs): activations and gradients each arrive in
// order for most schedules, so two sorted runs, merged.
class SortedRecvs {
 public:
  // Rank r's receives; returns how many sends it has.
  template <class Times>
  std::size_t collect(const Schedule& s, const Times& times, const std::vector<Action>& acts) {
    runs_[0].clear();
    runs_[1].clear();
    std::size_t nsend = 0;
    const Routes routes(s);
    Msg m;
    for (const Action& a : acts) {
      const Route& rt = routes(a.mb);
      if (recv_before(s, times, a, rt, &m)) runs_[m.hi & 1].push_back(m);  // by direction
      nsend += !remote_out(s, a, rt).none();
    }
    for (auto& v : runs_)
      if (!std::is_sorted(v.begin(), v.end())) std::sort(v.begin(), v.end());
    all_.resize(runs_[0].size() + runs_[1].size());
    std::merge(runs_[0].begin(), runs_[0].end(), runs_[1].begin(), runs_[1].end(), all_.begin());
    next_ = 0;
    return nsend;
  }
  std::size_t size() const { return all_.size(); }
  bool empty() const { return next_ == all_.size(); }
  const Msg& head() const { return all_[next_]; }
  void pop() { ++next_; }

 private:
  std::vector<Msg> runs_[2], all_;
  std::size_t next_ = 0;
};

// Recomputes rank r's unit-time timeline from the engine's message times and writes its
// lowered list (RankWalk). Times: UnitEngine, or PeriodicUnitTimes above.
template <class Times>
class RankLowering {
 public:
  RankLowering(const Schedule& s, const Times& times) : s_(s), times_(times) {}

  std::vector<Action> run(int r) {
    const auto& acts = s_.ranks[r];
    const std::size_t nsend = recvs_.collect(s_, times_, acts);
    std::vector<Action> out;
    out.reserve(acts.size() + recvs_.size() + nsend);
    RankWalk<Times, SortedRecvs, std::vector<Action>> walk(s_, times_, r, recvs_, out);
    for (ListCursor c(acts); !c.end();) walk.unit(c);
    walk.finish();
    return out;
  }

 private:
  const Schedule& s_;
  const Times& times_;
  SortedRecvs recvs_;
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
// The checks of one SEND/RECV and of one compute unit are lower_detail's, shared with the
// proof on lists in periodic form (PeriodicProof, lower_periodic.cpp).
template <class Times>
class TimedDryRun {
 public:
  TimedDryRun(const Schedule& s, const Times& times)
      : s_(s),
        routes_(s),
        times_(times),
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

  // lower_detail's Marks: per (chunk, micro-batch), written only by the chunk's rank.
  bool done(std::uint32_t c, std::uint32_t m, std::uint8_t bit) const {
    return (flags_[idx(c, m)] & bit) != 0;
  }
  bool once(std::uint32_t c, std::uint32_t m, std::uint8_t bit) {
    std::uint8_t& f = flags_[idx(c, m)];
    if (f & bit) return false;
    f |= bit;
    return true;
  }

 private:
  // What one worker saw: the first problem, and the messages of its ranks.
  struct Tally {
    std::string why;
    std::size_t sends = 0, recvs = 0, remote = 0;  // remote: messages its computes produce
  };

  std::size_t idx(std::uint32_t c, std::uint32_t m) const {
    return static_cast<std::size_t>(c) * s_.M + m;
  }

  // Rank r's list against the times; adds its messages to *t (once, at the end: the workers'
  // tallies share a cache line).
  std::string replay(int r, Tally* t) {
    const auto& acts = s_.ranks[r];
    std::size_t sends = 0, recvs = 0, remote = 0;
    UnitTime clock = 0;
    Msg last{0, 0, {}};
    bool any = false;
    for (ListCursor c(acts); !c.end();) {
      const std::size_t i = c.pos().k;
      const Action a = c.get();
      if (is_comm(a.op)) {
        Msg key{};
        const char* bad = check_comm(s_, routes_, times_, r, a, *this, &key);
        if (bad != nullptr) return dry_run_line(r, i, a, bad);
        ++(is_send(a.op) ? sends : recvs);
        if (any && !(last < key)) return dry_run_line(r, i, a, "out of the order of message times");
        last = key;
        any = true;
        c.next();
        continue;
      }
      Action u[2];
      const UnitSpan span = take_unit(routes_, times_, c, clock, u);
      std::uint32_t which = 0;
      const char* bad =
          check_unit(s_, routes_, times_, r, u, span.n, span.end, *this, &remote, &which);
      if (bad != nullptr) return dry_run_line(r, i + which, u[which], bad);
      clock = span.end;
    }
    t->sends += sends;
    t->recvs += recvs;
    t->remote += remote;
    return {};
  }

  // Every message rank r produces for another rank was sent by r and received there.
  std::string complete(int r) const {
    const auto& acts = s_.ranks[r];
    for (std::size_t i = 0; i < acts.size(); ++i) {
      const Action& a = acts[i];
      const RemoteMessage out =
          is_compute(a.op) ? remote_out(s_, a, routes_(a.mb)) : RemoteMessage{};
      if (out.none()) continue;
      const bool fwd = out.msg.dir == 0;
      if (!done(a.chunk, a.mb, fwd ? kSentF : kSentB))
        return dry_run_line(r, i, a,
                            fwd ? "its output is never sent" : "its input gradient is never sent");
      if (!done(consumer_chunk(out.msg), a.mb, fwd ? kRecvF : kRecvB))
        return dry_run_line(
            r, i, a, fwd ? "its output is never received" : "its input gradient is never received");
    }
    return {};
  }

  const Schedule& s_;
  Routes routes_;
  const Times& times_;
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
  std::uint8_t& at(int c, std::uint32_t m) { return done_[static_cast<std::size_t>(c) * s_.M + m]; }

  // Peer of a comm action, or -1 where the route has no neighbouring chunk.
  int peer(const Action& a) const { return peer_rank(s_, a); }

  // Its input has been produced on this rank, or received from another.
  bool compute_ready(const Action& a) {
    const MessageName in = message_in(a, s_.routes[a.mb]);
    if (in.none()) return true;
    if (producer_rank(s_, in) == s_.chunk_rank[a.chunk])
      return at(static_cast<int>(producer_chunk(in)), a.mb) & (in.dir == 0 ? kF : kB);
    return at(a.chunk, a.mb) & (in.dir == 0 ? kRecvF : kRecvB);
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
      if (!(rcv == recv_action(comm_message(snd, s_.routes[snd.mb]), snd.mb))) {
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
