// The names of an enum's values, written once as a table in the enum's order (value i is
// names[i]): the name of a value and the value of a name both read it. For enums numbered
// 0, 1, 2, ... (the default); each table's size is checked against the enum's last value
// where it is defined.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace bb {

template <class E, std::size_t N>
struct EnumNames {
  std::array<std::string_view, N> names;

  // The name of e; `other` for a value outside the table.
  constexpr std::string_view name(E e, std::string_view other = "?") const {
    const auto i = static_cast<std::size_t>(e);
    return i < N ? names[i] : other;
  }
  // The value named `text`, or nullopt.
  constexpr std::optional<E> find(std::string_view text) const {
    for (std::size_t i = 0; i < N; ++i)
      if (names[i] == text) return static_cast<E>(i);
    return std::nullopt;
  }
  // Whether the table ends at `last`, the enum's last value.
  static constexpr bool ends_at(E last) { return static_cast<std::size_t>(last) + 1 == N; }
};

// Settings as enums, named once: an enum E with a table found by `enum_names(E{})` (declared
// beside E, so that argument-dependent lookup finds it) gets name_of and enum_of. Text is for
// the edges (command line, files, tables); everything between compares enums.
template <class E>
constexpr std::string_view name_of(E e) {
  return enum_names(E{}).name(e);
}
template <class E>
constexpr std::optional<E> enum_of(std::string_view text) {
  return enum_names(E{}).find(text);
}

}  // namespace bb
