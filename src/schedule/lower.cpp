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

struct UnitPolicy {
  UnitTime cost(int, const Action* a, std::size_t n) const {
    UnitTime c = 0;
    for (std::size_t k = 0; k < n; ++k) c += unit_cost(a[k]);
    return c;
  }
  // A gradient leaves when its action ends (for BW: after W too), as the runtime sends it.
  UnitTime grad_offset(int, const Action* a, std::size_t n) const { return cost(0, a, n); }
  UnitTime delay(int, int, const Action&) const { return 0; }
  UnitTime step_gap(int) const { return 0; }
  void record(int, int, std::size_t, std::size_t, UnitTime, UnitTime, UnitTime) {}
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
    Msg sends[2];
    std::size_t ns = 0;
    std::size_t ri = 0;
    const std::size_t nr = recvs_.size();
    UnitTime clock = 0;
    for (std::size_t i = 0; i < acts.size();) {
      const std::size_t n = acts[i].overlap_next() && i + 1 < acts.size() ? 2 : 1;
      UnitTime start = clock, cost = 0;
      for (std::size_t k = 0; k < n; ++k) {
        start = std::max(start, input_time(acts[i + k]));
        cost += unit_cost(acts[i + k]);
      }
      const UnitTime end = start + cost;
      // The previous compute's sends and the receives timed before this compute's end, in
      // global key order.
      std::size_t si = 0;
      while (ri < nr && recvs_[ri].hi < end_key(end)) {
        while (si < ns && sends[si] < recvs_[ri]) *o = sends[si++].act;
        *o = recvs_[ri++].act;
      }
      while (si < ns) *o = sends[si++].act;
      ns = 0;
      for (std::size_t k = 0; k < n; ++k) {
        *o = acts[i + k];
        if (add_send(acts[i + k], end, &sends[ns])) ++ns;
      }
      if (ns == 2 && sends[1] < sends[0]) std::swap(sends[0], sends[1]);
      clock = end;
      i += n;
    }
    std::size_t si = 0;
    while (ri < nr) {
      while (si < ns && sends[si] < recvs_[ri]) *o = sends[si++].act;
      *o = recvs_[ri++].act;
    }
    while (si < ns) *o = sends[si++].act;
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
  // Message times: with zero delay, the engine's arrival times are the producers' end times.
  UnitPolicy pol;
  DataflowEngine<UnitTime, UnitPolicy> engine(s, pol, 1);
  if (!engine.run())
    throw ScheduleError(
        "schedule '" + s.name + "' (P=" + std::to_string(s.P) + ", M=" + std::to_string(s.M) +
        ") deadlocks: the ranks' orders form a cyclic wait\n" + engine.stuck_report());
  std::vector<UnitTime> ftime, btime;
  engine.take_arrivals(&ftime, &btime);
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

DryRunResult dry_run(const Schedule& s) {
  DryRunResult res;
  if (!s.lowered) {
    res.ok = false;
    res.message = "dry run needs a lowered schedule";
    return res;
  }
  const int P = s.P;
  const std::size_t CM = static_cast<std::size_t>(s.num_chunks()) * s.M;
  // Done bits per (chunk, mb): forward output, input gradient, and the two receives.
  std::vector<std::uint8_t> done(CM, 0);
  enum : std::uint8_t { kF = 1, kB = 2, kRecvF = 4, kRecvB = 8 };
  auto at = [&](int c, std::uint32_t m) -> std::uint8_t& {
    return done[static_cast<std::size_t>(c) * s.M + m];
  };
  std::vector<std::size_t> cpos(P, 0), mpos(P, 0);
  auto skip = [&](int r) {
    const auto& acts = s.ranks[r];
    while (cpos[r] < acts.size() && is_comm(acts[cpos[r]].op)) ++cpos[r];
    while (mpos[r] < acts.size() && !is_comm(acts[mpos[r]].op)) ++mpos[r];
  };
  // Peer of a comm action on rank r.
  auto peer = [&](const Action& a) {
    return (a.op == Op::SEND_F || a.op == Op::RECV_B) ? s.next_rank(a.chunk, a.mb)
                                                      : s.prev_rank(a.chunk, a.mb);
  };
  auto compute_ready = [&](const Action& a) {
    const Route& rt = s.routes[a.mb];
    if (a.op == Op::F && a.chunk > rt.first)
      return s.chunk_rank[a.chunk - 1] == s.chunk_rank[a.chunk] ? (at(a.chunk - 1, a.mb) & kF) != 0
                                                                : (at(a.chunk, a.mb) & kRecvF) != 0;
    if ((a.op == Op::B || a.op == Op::BW) && a.chunk < rt.last)
      return s.chunk_rank[a.chunk + 1] == s.chunk_rank[a.chunk] ? (at(a.chunk + 1, a.mb) & kB) != 0
                                                                : (at(a.chunk, a.mb) & kRecvB) != 0;
    return true;
  };
  std::vector<int> queue;
  std::vector<std::uint8_t> queued(P, 1);
  for (int r = 0; r < P; ++r) {
    queue.push_back(r);
    skip(r);
  }
  auto wake = [&](int r) {
    if (r >= 0 && !queued[r]) {
      queued[r] = 1;
      queue.push_back(r);
    }
  };
  std::string mismatch;
  for (std::size_t head = 0; head < queue.size() && mismatch.empty(); ++head) {
    const int r = queue[head];
    queued[r] = 0;
    const auto& acts = s.ranks[r];
    for (bool progress = true; progress && mismatch.empty();) {
      progress = false;
      // Compute stream.
      while (cpos[r] < acts.size()) {
        const Action& a = acts[cpos[r]];
        if (!compute_ready(a)) break;
        if (a.op == Op::F) at(a.chunk, a.mb) |= kF;
        if (a.op == Op::B || a.op == Op::BW) at(a.chunk, a.mb) |= kB;
        ++cpos[r];
        skip(r);
        progress = true;
      }
      // Comm stream: a send at the head completes with the receive at the peer's head.
      while (mpos[r] < acts.size()) {
        const Action& a = acts[mpos[r]];
        const int q = peer(a);
        if (q < 0 || q == r) {
          mismatch = "  rank " + std::to_string(r) + ": " + to_string(a) +
                     " has no peer rank (validate the schedule first)\n";
          break;
        }
        const auto& qa = s.ranks[q];
        if (mpos[q] >= qa.size()) break;
        const Action& b = qa[mpos[q]];
        const Action& snd = is_send(a.op) ? a : b;
        const Action& rcv = is_send(a.op) ? b : a;
        const int sender = is_send(a.op) ? r : q;
        if (!is_send(snd.op) || !is_recv(rcv.op) || peer(b) != r) break;  // peer busy elsewhere
        const bool fwd = snd.op == Op::SEND_F;
        const int want_chunk = fwd ? snd.chunk + 1 : snd.chunk - 1;
        if (rcv.op != (fwd ? Op::RECV_F : Op::RECV_B) || rcv.chunk != want_chunk ||
            rcv.mb != snd.mb) {
          mismatch = "  rank " + std::to_string(sender) + " sends " + to_string(snd) + " to rank " +
                     std::to_string(sender == r ? q : r) + ", whose next receive from it is " +
                     to_string(rcv) + ": in-order matching would deliver the wrong tensor\n";
          break;
        }
        if (!(at(snd.chunk, snd.mb) & (fwd ? kF : kB))) break;  // data not produced yet
        at(rcv.chunk, rcv.mb) |= fwd ? kRecvF : kRecvB;
        ++mpos[r];
        ++mpos[q];
        skip(r);
        skip(q);
        wake(q);
        progress = true;
      }
    }
  }
  if (!mismatch.empty()) {
    res.ok = false;
    res.message = mismatch;
    return res;
  }
  for (int r = 0; r < P; ++r) {
    const auto& acts = s.ranks[r];
    if (cpos[r] >= acts.size() && mpos[r] >= acts.size()) continue;
    res.ok = false;
    res.message += "  rank " + std::to_string(r) + ":";
    if (cpos[r] < acts.size())
      res.message += " compute waits at " + to_string(acts[cpos[r]]) + " (step " +
                     std::to_string(cpos[r]) + ")";
    if (mpos[r] < acts.size()) {
      const Action& a = acts[mpos[r]];
      res.message += std::string(cpos[r] < acts.size() ? ";" : "") + " comm waits at " +
                     to_string(a) + " (step " + std::to_string(mpos[r]) + ") " +
                     (is_send(a.op) ? "to" : "from") + " rank " + std::to_string(peer(a));
    }
    res.message += "\n";
  }
  if (!res.ok) res.message = "deadlock: no rank can make progress\n" + res.message;
  return res;
}

}  // namespace bb
