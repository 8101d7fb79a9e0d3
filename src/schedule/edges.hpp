// Facts of the action IR that every pass shares, written once:
//  - the edge rule: which message a compute action consumes and produces on its route (a
//    first chunk's F and a last chunk's B read no message; a last chunk's F and a first
//    chunk's B/BW send none; W never communicates), which message a SEND/RECV carries, and
//    the ranks at its two ends;
//  - the FB pair: how many list entries the unit starting at an action takes (2 for an F with
//    overlap_next followed by its backward, else 1).
// Engines, lowering, validation, the simulator and the executor use these helpers rather than
// re-deriving them.
#pragma once

#include <cstddef>
#include <cstdint>

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
inline bool route_first(const Route& rt, std::uint32_t c) {
  return static_cast<int>(c) == rt.first;
}
inline bool route_last(const Route& rt, std::uint32_t c) {
  return static_cast<int>(c) == rt.last;
}

// The message compute action `a` consumes on route `rt`: F reads chunk-1's activation unless
// it is the route's first chunk; B/BW read the gradient of chunk's output unless it is last.
inline MessageName message_in(const Action& a, const Route& rt) {
  if (!is_compute(a.op) || a.op == Op::W) return {};
  if (a.op == Op::F)
    return route_first(rt, a.chunk) ? MessageName{} : MessageName{0, std::uint32_t{a.chunk} - 1};
  return route_last(rt, a.chunk) ? MessageName{} : MessageName{1, std::uint32_t{a.chunk}};
}
// The message compute action `a` produces on route `rt`: F writes its activation unless it
// is the route's last chunk; B/BW write the input gradient unless it is the first.
inline MessageName message_out(const Action& a, const Route& rt) {
  if (!is_compute(a.op) || a.op == Op::W) return {};
  if (a.op == Op::F)
    return route_last(rt, a.chunk) ? MessageName{} : MessageName{0, std::uint32_t{a.chunk}};
  return route_first(rt, a.chunk) ? MessageName{} : MessageName{1, std::uint32_t{a.chunk} - 1};
}

// The chunk at the other end of a message: the producer of `in` is chunk (dir 0) or chunk+1
// (dir 1); the consumer of `out` is chunk+1 (dir 0) or chunk (dir 1).
inline std::uint32_t producer_chunk(const MessageName& m) {
  return m.dir == 0 ? m.chunk : m.chunk + 1;
}
inline std::uint32_t consumer_chunk(const MessageName& m) {
  return m.dir == 0 ? m.chunk + 1 : m.chunk;
}

// The message communication action `a` carries on route `rt`: SEND_F c chunk c's activation
// (0, c); RECV_F c chunk c's input (0, c-1); SEND_B c chunk c's input gradient (1, c-1);
// RECV_B c chunk c's output gradient (1, c). None for a compute action, or where the route has
// no such edge (SEND_F/RECV_B at its last chunk, RECV_F/SEND_B at its first).
inline MessageName comm_message(const Action& a, const Route& rt) {
  const std::uint32_t c = a.chunk;
  switch (a.op) {
    case Op::SEND_F:
      return route_last(rt, c) ? MessageName{} : MessageName{0, c};
    case Op::RECV_F:
      return route_first(rt, c) ? MessageName{} : MessageName{0, c - 1};
    case Op::SEND_B:
      return route_first(rt, c) ? MessageName{} : MessageName{1, c - 1};
    case Op::RECV_B:
      return route_last(rt, c) ? MessageName{} : MessageName{1, c};
    default:
      return {};
  }
}

// The ranks holding a message's producer and consumer chunks (`m` not none).
inline int producer_rank(const Schedule& s, const MessageName& m) {
  return s.chunk_rank[producer_chunk(m)];
}
inline int consumer_rank(const Schedule& s, const MessageName& m) {
  return s.chunk_rank[consumer_chunk(m)];
}

// The rank of the chunk before / after chunk `c` on route `rt` (where c's input comes from and
// its input gradient goes / where its output goes and its output gradient comes from), or -1
// at the route's first / last chunk.
inline int prev_rank(const Schedule& s, const Route& rt, std::uint32_t c) {
  return route_first(rt, c) ? -1 : s.chunk_rank[c - 1];
}
inline int next_rank(const Schedule& s, const Route& rt, std::uint32_t c) {
  return route_last(rt, c) ? -1 : s.chunk_rank[c + 1];
}

// The rank communication action `a` talks to: the consumer of what a SEND sends, the producer
// of what a RECV receives; -1 when its route has no such message.
inline int peer_rank(const Schedule& s, const Action& a) {
  const MessageName m = comm_message(a, s.routes[a.mb]);
  if (m.none()) return -1;
  return is_send(a.op) ? consumer_rank(s, m) : producer_rank(s, m);
}

// List entries taken by the unit that starts at `a` when `remaining` entries (a included) are
// left: 2 for an FB pair (F with overlap_next and a following entry), else 1.
inline std::size_t unit_length(const Action& a, std::size_t remaining) {
  return a.overlap_next() && remaining > 1 ? 2 : 1;
}

}  // namespace bb
