// The route rules of the action IR, written once (the only place that compares a chunk with a
// route's first or last chunk):
//  - where a route runs: which chunks it visits, whether it fits the chunk range;
//  - the edge rule: which message a compute action consumes and produces on its route (a
//    first chunk's F and a last chunk's B read no message; a last chunk's F and a first
//    chunk's B/BW send none; W never communicates), which message a SEND/RECV carries and
//    which SEND/RECV carries a message, and the ranks at its two ends;
//  - the previous and next chunk's rank, and "the next chunk on another rank": a message that
//    crosses ranks (remote_in, remote_out), the ones lowering turns into SEND/RECV pairs;
//  - the FB pair: how many list entries the unit starting at an action takes (2 for an F with
//    overlap_next followed by its backward, else 1).
// Engines, lowering and its proofs, validation, the simulator and the executor use these
// helpers rather than re-deriving them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ranges>
#include <vector>

#include "schedule/action.hpp"
#include "schedule/schedule.hpp"

namespace bb {

// A message named by direction and chunk: direction 0 is the activation chunk `chunk` sends
// (to chunk+1), 1 the gradient chunk `chunk` receives (from chunk+1). dir < 0: none.
struct MessageName {
  int dir = -1;
  std::uint32_t chunk = 0;
  bool none() const { return dir < 0; }
};

// True when chunk `c` is the first / last chunk of route `rt`.
[[gnu::always_inline]] inline bool route_first(const Route& rt, std::uint32_t c) {
  return static_cast<int>(c) == rt.first;
}
[[gnu::always_inline]] inline bool route_last(const Route& rt, std::uint32_t c) {
  return static_cast<int>(c) == rt.last;
}
// True when route `rt` visits chunk `c`.
[[gnu::always_inline]] inline bool route_visits(const Route& rt, std::int64_t c) {
  return c >= rt.first && c <= rt.last;
}
// Each micro-batch's route as the passes read it: where all take one route (all placements
// but DualPipe's), that one, without a lookup.
class Routes {
 public:
  explicit Routes(const Schedule& s)
      : all_(s.routes.data()),
        uniform_(s.uniform_routes()),
        one_(s.routes.empty() ? Route{} : s.routes.front()) {}
  const Route& operator()(std::uint32_t mb) const { return uniform_ ? one_ : all_[mb]; }

 private:
  const Route* all_;
  bool uniform_;
  Route one_;
};

// The chunks route `rt` visits, first to last.
inline auto route_chunks(const Route& rt) {
  return std::views::iota(rt.first, rt.last + 1);
}
// Each chunk's share of a stage: P / the length of the routes through it (1 where no route
// goes), what a per-stage cost or size is scaled by on that chunk.
inline std::vector<double> chunk_shares(const Schedule& s) {
  std::vector<double> share(static_cast<std::size_t>(s.num_chunks()), 1.0);
  for (std::size_t m = 0; m < s.routes.size(); ++m) {
    const Route& rt = s.routes[m];
    if (m > 0 && rt == s.routes[m - 1]) continue;
    for (const int c : route_chunks(rt))
      share[static_cast<std::size_t>(c)] = static_cast<double>(s.P) / rt.length();
  }
  return share;
}
// True when `rt` is a route through some of chunks 0 ... C-1 (first <= last, both in range).
[[gnu::always_inline]] inline bool route_in_range(const Route& rt, int C) {
  return rt.first >= 0 && rt.last < C && rt.first <= rt.last;
}

// The message compute action `a` consumes on route `rt`: F reads chunk-1's activation unless
// it is the route's first chunk; B/BW read the gradient of chunk's output unless it is last.
[[gnu::always_inline]] inline MessageName message_in(const Action& a, const Route& rt) {
  if (a.op == Op::F)
    return route_first(rt, a.chunk) ? MessageName{} : MessageName{0, std::uint32_t{a.chunk} - 1};
  if (a.op != Op::B && a.op != Op::BW) return {};
  return route_last(rt, a.chunk) ? MessageName{} : MessageName{1, std::uint32_t{a.chunk}};
}
// The message compute action `a` produces on route `rt`: F writes its activation unless it
// is the route's last chunk; B/BW write the input gradient unless it is the first.
[[gnu::always_inline]] inline MessageName message_out(const Action& a, const Route& rt) {
  if (a.op == Op::F)
    return route_last(rt, a.chunk) ? MessageName{} : MessageName{0, std::uint32_t{a.chunk}};
  if (a.op != Op::B && a.op != Op::BW) return {};
  return route_first(rt, a.chunk) ? MessageName{} : MessageName{1, std::uint32_t{a.chunk} - 1};
}

// The chunk at the other end of a message: the producer of `in` is chunk (dir 0) or chunk+1
// (dir 1); the consumer of `out` is chunk+1 (dir 0) or chunk (dir 1).
[[gnu::always_inline]] inline std::uint32_t producer_chunk(const MessageName& m) {
  return m.dir == 0 ? m.chunk : m.chunk + 1;
}
[[gnu::always_inline]] inline std::uint32_t consumer_chunk(const MessageName& m) {
  return m.dir == 0 ? m.chunk + 1 : m.chunk;
}

// The SEND that carries message `m` of micro-batch `mb` (on the producer's rank) and the RECV
// that takes it (on the consumer's): SEND_F / RECV_F for an activation, SEND_B / RECV_B for a
// gradient, each named by the chunk of its rank.
[[gnu::always_inline]] inline Action send_action(const MessageName& m, std::uint32_t mb) {
  return make_action(m.dir == 0 ? Op::SEND_F : Op::SEND_B, static_cast<int>(producer_chunk(m)),
                     static_cast<int>(mb));
}
[[gnu::always_inline]] inline Action recv_action(const MessageName& m, std::uint32_t mb) {
  return make_action(m.dir == 0 ? Op::RECV_F : Op::RECV_B, static_cast<int>(consumer_chunk(m)),
                     static_cast<int>(mb));
}
// Whether communication op `op` talks to the next chunk's rank (SEND_F, RECV_B) rather than the
// previous one's (SEND_B, RECV_F).
[[gnu::always_inline]] constexpr bool toward_next(Op op) {
  return op == Op::SEND_F || op == Op::RECV_B;
}

// The message communication action `a` names, whatever the route: SEND_F c chunk c's
// activation (0, c); RECV_F c chunk c's input (0, c-1); SEND_B c chunk c's input gradient
// (1, c-1); RECV_B c chunk c's output gradient (1, c). None for a compute action.
[[gnu::always_inline]] inline MessageName named_message(const Action& a) {
  const std::uint32_t c = a.chunk;
  switch (a.op) {
    case Op::SEND_F:
      return {0, c};
    case Op::RECV_F:
      return {0, c - 1};
    case Op::SEND_B:
      return {1, c - 1};
    case Op::RECV_B:
      return {1, c};
    default:
      return {};
  }
}
// The message communication action `a` carries on route `rt`: named_message(a), or none where
// the route has no such edge (SEND_F/RECV_B at its last chunk, RECV_F/SEND_B at its first).
[[gnu::always_inline]] inline MessageName comm_message(const Action& a, const Route& rt) {
  if (!is_comm(a.op)) return {};
  const bool at_end = toward_next(a.op) ? route_last(rt, a.chunk) : route_first(rt, a.chunk);
  return at_end ? MessageName{} : named_message(a);
}

// The ranks holding a message's producer and consumer chunks (`m` not none).
[[gnu::always_inline]] inline int producer_rank(const Schedule& s, const MessageName& m) {
  return s.chunk_rank[producer_chunk(m)];
}
[[gnu::always_inline]] inline int consumer_rank(const Schedule& s, const MessageName& m) {
  return s.chunk_rank[consumer_chunk(m)];
}

// The rank of the chunk before / after chunk `c` on route `rt` (where c's input comes from and
// its input gradient goes / where its output goes and its output gradient comes from), or -1
// at the route's first / last chunk.
[[gnu::always_inline]] inline int prev_rank(const Schedule& s, const Route& rt, std::uint32_t c) {
  return route_first(rt, c) ? -1 : s.chunk_rank[c - 1];
}
[[gnu::always_inline]] inline int next_rank(const Schedule& s, const Route& rt, std::uint32_t c) {
  return route_last(rt, c) ? -1 : s.chunk_rank[c + 1];
}

// A message that crosses ranks, and the rank at its other end (none: no message, or both ends
// on one rank).
struct RemoteMessage {
  MessageName msg;
  int peer = -1;
  bool none() const { return peer < 0; }
};
// Compute action `a`'s input when it comes from another rank than a's chunk's (its peer: the
// producer's rank); its output when it goes to another rank (its peer: the consumer's rank).
[[gnu::always_inline]] inline RemoteMessage remote_in(const Schedule& s, const Action& a,
                                                      const Route& rt) {
  const MessageName m = message_in(a, rt);
  if (m.none()) return {};
  const int peer = producer_rank(s, m);
  return peer == s.chunk_rank[a.chunk] ? RemoteMessage{} : RemoteMessage{m, peer};
}
[[gnu::always_inline]] inline RemoteMessage remote_out(const Schedule& s, const Action& a,
                                                       const Route& rt) {
  const MessageName m = message_out(a, rt);
  if (m.none()) return {};
  const int peer = consumer_rank(s, m);
  return peer == s.chunk_rank[a.chunk] ? RemoteMessage{} : RemoteMessage{m, peer};
}
// The rank communication action `a` talks to: the consumer of what a SEND sends, the producer
// of what a RECV receives; -1 when its route has no such message.
[[gnu::always_inline]] inline int peer_rank(const Schedule& s, const Action& a) {
  const MessageName m = comm_message(a, s.routes[a.mb]);
  if (m.none()) return -1;
  return is_send(a.op) ? consumer_rank(s, m) : producer_rank(s, m);
}

// List entries taken by the unit that starts at `a` when `remaining` entries (a included) are
// left: 2 for an FB pair (F with overlap_next and a following entry), else 1. (Validation
// requires the following entry to be a B or BW: every pass then reads the same pairs.)
[[gnu::always_inline]] inline std::size_t unit_length(const Action& a, std::size_t remaining) {
  return a.overlap_next() && remaining > 1 ? 2 : 1;
}
// The same for the unit at `p` of a list ending at `end`.
[[gnu::always_inline]] inline std::size_t unit_length(const Action* p, const Action* end) {
  return unit_length(*p, static_cast<std::size_t>(end - p));
}

}  // namespace bb
