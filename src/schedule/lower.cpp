#include "schedule/lower.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <iterator>

#include "common/error.hpp"
#include "schedule/engine.hpp"
#include "schedule/validate.hpp"

namespace bb {
namespace {

// Unit costs: F = B = W = 1. Float is exact for the integer times this produces.
using UnitTime = float;

UnitTime unit_cost(const Action& a) {
  return a.op == Op::BW ? 2.0f : 1.0f;
}

// Records every message's time: the end of its producer (index chunk * M + mb of the
// producer; zero delay, so this is also when it arrives).
struct UnitPolicy {
  explicit UnitPolicy(const Schedule& s)
      : s(s),
        ftime(static_cast<std::size_t>(s.num_chunks()) * s.M, 0.0f),
        btime(ftime.size(), 0.0f) {}
  UnitTime cost(int, const Action* a, std::size_t n) const {
    UnitTime c = 0;
    for (std::size_t k = 0; k < n; ++k) c += unit_cost(a[k]);
    return c;
  }
  // A gradient leaves when its action ends (for BW: after W too), as the runtime sends it.
  UnitTime grad_offset(int, const Action* a, std::size_t n) const { return cost(0, a, n); }
  UnitTime delay(int, int, const Action&) const { return 0; }
  UnitTime step_gap(int) const { return 0; }
  void record(int rank, int, std::size_t index, std::size_t n, UnitTime, UnitTime, UnitTime end) {
    for (std::size_t k = 0; k < n; ++k) {
      const Action& a = s.ranks[rank][index + k];
      const std::size_t i = static_cast<std::size_t>(a.chunk) * s.M + a.mb;
      if (a.op == Op::F) ftime[i] = end;
      if (a.op == Op::B || a.op == Op::BW) btime[i] = end;
    }
  }
  const Schedule& s;
  std::vector<UnitTime> ftime, btime;
};

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

// Recomputes rank r's unit-time timeline from the engine's message times and writes its
// lowered list.
class RankLowering {
 public:
  RankLowering(const Schedule& s, const std::vector<UnitTime>& ftime,
               const std::vector<UnitTime>& btime)
      : s_(s), ftime_(ftime), btime_(btime), uniform_(s.uniform_routes()) {}

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
      const std::size_t n = acts[i].overlap_next() && i + 1 < acts.size() ? 2 : 1;
      UnitTime start = clock, cost = 0;
      for (std::size_t k = 0; k < n; ++k) {
        start = std::max(start, input_time(acts[i + k]));
        cost += unit_cost(acts[i + k]);
      }
      const UnitTime end = start + cost;
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

  UnitTime input_time(const Action& a) const {
    const Route& rt = route(a.mb);
    if (a.op == Op::F && a.chunk > rt.first) return ftime_[idx(a.chunk - 1, a.mb)];
    if ((a.op == Op::B || a.op == Op::BW) && a.chunk < rt.last)
      return btime_[idx(a.chunk + 1, a.mb)];
    return 0;
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
            frecvs_.push_back(Msg::make(ftime_[idx(a.chunk - 1, a.mb)], src, 0, a.chunk - 1, a.mb,
                                        make_action(Op::RECV_F, a.chunk, static_cast<int>(a.mb))));
        }
        nsend += a.chunk < rt.last && s_.chunk_rank[a.chunk + 1] != r_;
      } else if (a.op == Op::B || a.op == Op::BW) {
        if (a.chunk < rt.last) {
          const int src = s_.chunk_rank[a.chunk + 1];
          if (src != r_)
            brecvs_.push_back(Msg::make(btime_[idx(a.chunk + 1, a.mb)], src, 1, a.chunk + 1, a.mb,
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
    const Route& rt = route(a.mb);
    if (a.op == Op::F && a.chunk < rt.last && s_.chunk_rank[a.chunk + 1] != r_) {
      *m = Msg::make(end, r_, 0, a.chunk, a.mb,
                     make_action(Op::SEND_F, a.chunk, static_cast<int>(a.mb)));
      return true;
    }
    if ((a.op == Op::B || a.op == Op::BW) && a.chunk > rt.first &&
        s_.chunk_rank[a.chunk - 1] != r_) {
      *m = Msg::make(end, r_, 1, a.chunk, a.mb,
                     make_action(Op::SEND_B, a.chunk, static_cast<int>(a.mb)));
      return true;
    }
    return false;
  }

  const Schedule& s_;
  int r_ = 0;
  const std::vector<UnitTime>& ftime_;
  const std::vector<UnitTime>& btime_;
  bool uniform_;
  std::vector<Msg> frecvs_, brecvs_, recvs_;
};

}  // namespace

Schedule lower(Schedule s) {
  if (s.lowered) throw ScheduleError("schedule '" + s.name + "' is already lowered");
  validate_or_throw(s);
  std::vector<UnitTime> ftime, btime;
  {
    UnitPolicy pol(s);
    DataflowEngine<UnitTime, UnitPolicy> engine(s, pol, 1);
    if (!engine.run())
      throw ScheduleError(
          "schedule '" + s.name + "' (P=" + std::to_string(s.P) + ", M=" + std::to_string(s.M) +
          ") deadlocks: the ranks' orders form a cyclic wait\n" + engine.stuck_report());
    ftime = std::move(pol.ftime);
    btime = std::move(pol.btime);
  }
  // Rank r's lowering reads only rank r's list, so each lowered list replaces its compute
  // list at once (peak memory: the lowered schedule plus one rank's compute list).
  RankLowering lowering(s, ftime, btime);
  for (int r = 0; r < s.P; ++r) {
    std::vector<Action> lowered = lowering.run(r);
    std::vector<Action>().swap(s.ranks[r]);
    s.ranks[r] = std::move(lowered);
  }
  std::vector<UnitTime>().swap(ftime);
  std::vector<UnitTime>().swap(btime);
  s.lowered = true;
  DryRunResult dr = dry_run(s);
  if (!dr.ok)
    throw ScheduleError("lowering of '" + s.name + "' failed its dry run:\n" + dr.message);
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
