// Comma-separated names (`1f1b,zb-v`, `1,2,2,1`), shared by the CLI's lists and the schedule
// table's sweep expansion (schedule/schedule_info.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace bb {

// The items in order; an empty item (`a,,b`, `a,`, or empty text) is a ConfigError naming
// `what`: "what: 'text' has an empty item".
inline std::vector<std::string> parse_name_list(std::string_view text, std::string_view what) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    if (item.empty())
      throw ConfigError(std::string(what) + ": '" + std::string(text) + "' has an empty item");
    out.emplace_back(item);
    if (comma == text.size()) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace bb
