#include "schedule/action.hpp"

#include "common/enum_names.hpp"

namespace bb {
namespace {

constexpr EnumNames<Op, 8> kOpNames{{"F", "B", "W", "BW", "SEND_F", "RECV_F", "SEND_B", "RECV_B"}};
static_assert(kOpNames.ends_at(Op::RECV_B) && kOpNames.find("SEND_F") == Op::SEND_F);
// make_action()'s word is the bit-fields' layout.
static_assert(std::bit_cast<std::uint32_t>(Action{0x1234, 0xABC, Op::SEND_B, 1}) ==
              (0x1234u | 0xABCu << 16 | 6u << 28 | 1u << 31));

}  // namespace

std::string_view op_name(Op op) {
  return kOpNames.name(op);
}

std::optional<Op> find_op(std::string_view name) {
  return kOpNames.find(name);
}

std::string to_string(const Action& a) {
  std::string s = std::to_string(a.chunk);
  s += op_name(a.op);
  s += std::to_string(a.mb);
  return s;
}

}  // namespace bb
