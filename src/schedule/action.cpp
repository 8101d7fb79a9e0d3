#include "schedule/action.hpp"

#include "common/enum_names.hpp"

namespace bb {
namespace {

constexpr EnumNames<Op, 8> kOpNames{{"F", "B", "W", "BW", "SEND_F", "RECV_F", "SEND_B", "RECV_B"}};
static_assert(kOpNames.ends_at(Op::RECV_B) && kOpNames.find("SEND_F") == Op::SEND_F);

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
