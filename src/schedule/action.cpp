#include "schedule/action.hpp"

namespace bb {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::F:
      return "F";
    case Op::B:
      return "B";
    case Op::W:
      return "W";
    case Op::BW:
      return "BW";
    case Op::SEND_F:
      return "SEND_F";
    case Op::RECV_F:
      return "RECV_F";
    case Op::SEND_B:
      return "SEND_B";
    case Op::RECV_B:
      return "RECV_B";
  }
  return "?";
}

std::string to_string(const Action& a) {
  std::string s = std::to_string(a.chunk);
  s += op_name(a.op);
  s += std::to_string(a.mb);
  return s;
}

}  // namespace bb
