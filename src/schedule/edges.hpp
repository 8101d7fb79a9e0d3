// Facts of the action IR that every pass shares, written once:
//  - the edge rule: which message a compute action consumes and produces on its route (a
//    first chunk's F and a last chunk's B read no message; a last chunk's F and a first
//    chunk's B/BW send none; W never communicates);
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
  if (a.op == Op::F) return route_last(rt, a.chunk) ? MessageName{} : MessageName{0, std::uint32_t{a.chunk}};
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

// List entries taken by the unit that starts at `a` when `remaining` entries (a included) are
// left: 2 for an FB pair (F with overlap_next and a following entry), else 1.
inline std::size_t unit_length(const Action& a, std::size_t remaining) {
  return a.overlap_next() && remaining > 1 ? 2 : 1;
}

}  // namespace bb
