// CLI11 validators for values that must be checked as written: an empty path is not "no
// output", and an integer past 2^64-1 is refused rather than saturated.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>

namespace bb {

inline CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& v) { return v.empty() ? std::string("an empty path (omit the flag)") : ""; },
      "PATH");
}

inline CLI::Validator uint64_text() {
  return CLI::Validator(
      [](std::string& v) {
        std::uint64_t x = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        return ec == std::errc() && end == v.data() + v.size()
                   ? std::string()
                   : "'" + v + "' is not an integer 0..18446744073709551615";
      },
      "UINT64");
}

}  // namespace bb
