// Plain-text tables and number formatting shared by the CLI commands and the run table.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace bb {

// A whole number a double holds exactly (below 2^53): printed with every digit.
inline bool exact_integer(double x) {
  return std::isfinite(x) && x == std::trunc(x) && std::fabs(x) < 0x1p53;
}

// Every digit a value needs: integers (below 2^53) as integers, other values in the shortest
// form that reads back as the same double (CSV and other machine-read output).
inline std::string fmt_exact(double x) {
  char buf[64];
  const auto r = exact_integer(x)
                     ? std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed)
                     : std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// For people: integers exactly, other values to `prec` significant digits.
inline std::string fmt(double x, int prec = 4) {
  if (exact_integer(x)) return fmt_exact(x);
  std::ostringstream os;
  os << std::setprecision(prec) << x;
  return os.str();
}

// Left-aligned columns, two spaces apart, header first.
inline void print_table(std::ostream& out, const std::vector<std::string>& cols,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(cols.size());
  for (std::size_t i = 0; i < cols.size(); ++i) {
    w[i] = cols[i].size();
    for (const auto& row : rows) w[i] = std::max(w[i], row[i].size());
  }
  for (std::size_t i = 0; i < cols.size(); ++i)
    out << std::left << std::setw(static_cast<int>(w[i] + 2)) << cols[i];
  out << "\n";
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i)
      out << std::left << std::setw(static_cast<int>(w[i] + 2)) << row[i];
    out << "\n";
  }
}

}  // namespace bb
