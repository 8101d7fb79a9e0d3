// Action IR of a pipeline schedule: one compute or communication step on one rank.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bb {

// F: forward. B: backward for the input (activation gradient). W: backward for the
// weights. BW: B then W as one action. SEND_*/RECV_*: added by lowering.
enum class Op : std::uint8_t { F, B, W, BW, SEND_F, RECV_F, SEND_B, RECV_B };

constexpr bool is_compute(Op op) {
  return op <= Op::BW;
}
constexpr bool is_comm(Op op) {
  return op >= Op::SEND_F;
}
constexpr bool is_send(Op op) {
  return op == Op::SEND_F || op == Op::SEND_B;
}
constexpr bool is_recv(Op op) {
  return op == Op::RECV_F || op == Op::RECV_B;
}
// Forward-direction traffic (activations) vs backward (gradients).
constexpr bool is_forward_comm(Op op) {
  return op == Op::SEND_F || op == Op::RECV_F;
}

std::string_view op_name(Op op);
// The op named `name` ("F", "SEND_B", ...), or nullopt.
std::optional<Op> find_op(std::string_view name);

// Four bytes, so that a lowered 1F1B at P=512, M=8192 (25 M actions) takes 100 MB: micro-batch
// numbers below 2^16 (M <= kMaxMicroBatches) and chunk numbers below 2^12 (at most kMaxChunks
// chunks). Generators and the CSV loader refuse anything larger.
//
// SEND_F c m: send chunk c's forward output of micro-batch m to the rank of the next chunk.
// RECV_F c m: receive chunk c's forward input of micro-batch m from the previous chunk.
// SEND_B c m: send chunk c's input gradient to the rank of the previous chunk.
// RECV_B c m: receive chunk c's output gradient from the rank of the next chunk.
//
// FB (DualPipe's overlapped forward and backward of two micro-batches) is an F action with
// `overlap_next` set, immediately followed by the backward action (B or BW) it overlaps.
// Text form: `(0F4;3BW1)FB`.
inline constexpr int kMaxMicroBatches = 1 << 16;
inline constexpr int kMaxChunks = 1 << 12;

struct Action {
  std::uint32_t mb : 16 = 0;
  std::uint32_t chunk : 12 = 0;
  Op op : 3 = Op::F;
  std::uint32_t flags : 1 = 0;

  static constexpr std::uint8_t kOverlapNext = 1;

  bool overlap_next() const { return (flags & kOverlapNext) != 0; }
  friend bool operator==(const Action&, const Action&) = default;
};
static_assert(sizeof(Action) == 4);

// Built as one 32-bit word (the fields truncated as the bit-fields truncate them): GCC assembles
// bit-fields in memory, and a generator writing millions of actions then loads every fresh
// cache line of its lists back (ZB-H1 at P=512: a quarter of its time). The layout is GCC's and
// Clang's on x86-64 and AArch64, first field lowest (checked in action.cpp).
inline Action make_action(Op op, int chunk, int mb, std::uint8_t flags = 0) {
  const std::uint32_t word = (static_cast<std::uint32_t>(mb) & 0xFFFFu) |
                             ((static_cast<std::uint32_t>(chunk) & 0xFFFu) << 16) |
                             ((static_cast<std::uint32_t>(op) & 7u) << 28) |
                             (static_cast<std::uint32_t>(flags & 1u) << 31);
  return std::bit_cast<Action>(word);
}

// `0F3`, `5B1`, `2BW0`, `1SEND_F3`, `2RECV_B0`. An FB pair is printed by the list printer.
std::string to_string(const Action& a);

}  // namespace bb
