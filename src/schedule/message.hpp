// What names a point-to-point message of a lowered schedule: the chunk whose data it carries,
// its micro-batch and its direction (a SEND and its RECV name the same message).
#pragma once

#include "schedule/action.hpp"
#include "schedule/edges.hpp"

namespace bb {

// The chunk whose data a SEND or RECV carries (the sender's): SEND_F c and SEND_B c: c;
// RECV_F c: c - 1; RECV_B c: c + 1 (the producer of its message, edges.hpp).
inline int message_producer(const Action& comm) {
  return static_cast<int>(producer_chunk(named_message(comm)));
}

}  // namespace bb
