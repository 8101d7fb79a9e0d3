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

// One row of left-aligned columns, two spaces apart, each at least its width; the last
// column is not padded: no trailing spaces.
inline void print_table_row(std::ostream& out, const std::vector<std::size_t>& widths,
                            const std::vector<std::string>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    line += cells[i];
    if (i + 1 < cells.size())
      line.append(
          (i < widths.size() && widths[i] > cells[i].size() ? widths[i] - cells[i].size() : 0) + 2,
          ' ');
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();  // empty last cells
  out << line << "\n";
}

// Left-aligned columns, two spaces apart, header first.
inline void print_table(std::ostream& out, const std::vector<std::string>& cols,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(cols.size());
  for (std::size_t i = 0; i < cols.size(); ++i) {
    w[i] = cols[i].size();
    for (const auto& row : rows) w[i] = std::max(w[i], row[i].size());
  }
  print_table_row(out, w, cols);
  for (const auto& row : rows) print_table_row(out, w, row);
}

// One CSV record (RFC 4180: a cell with a comma, a quote or a line break is quoted, its
// quotes doubled).
inline void print_csv_row(std::ostream& out, const std::vector<std::string>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) line += ',';
    if (cells[i].find_first_of(",\"\r\n") == std::string::npos) {
      line += cells[i];
      continue;
    }
    line += '"';
    for (char c : cells[i]) {
      if (c == '"') line += '"';
      line += c;
    }
    line += '"';
  }
  out << line << "\n";
}

}  // namespace bb
