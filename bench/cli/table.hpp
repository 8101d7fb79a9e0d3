// Plain-text tables and number formatting shared by the CLI commands.
#pragma once

#include <algorithm>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace bb {

inline std::string fmt(double x, int prec = 4) {
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
