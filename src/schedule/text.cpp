#include "schedule/text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <istream>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>

#include "common/error.hpp"
#include "schedule/edges.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"
#include "schedule/text_detail.hpp"

namespace bb {
namespace text_detail {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool parse_uint(std::string_view s, std::uint64_t* out) {
  if (s.empty() || s.size() > 10) return false;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

namespace {

// `s` with every control byte, and unless `keep_utf8` every byte beyond ASCII, as \xNN; cut
// after `max` bytes ("...").
std::string escaped(std::string_view s, std::size_t max = 40, bool keep_utf8 = false) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < std::min(s.size(), max); ++i) {
    const auto ch = static_cast<unsigned char>(s[i]);
    if ((ch >= 0x20 && ch < 0x7f) || (keep_utf8 && ch >= 0x80)) {
      out += static_cast<char>(ch);
    } else {
      out += "\\x";
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace

void bad_token(std::string_view token, std::string_view why) {
  throw ScheduleError("bad action '" + escaped(token) + "': " + std::string(why));
}

}  // namespace text_detail

using text_detail::bad_token;
using text_detail::CsvLine;
using text_detail::parse_uint;
using text_detail::trim;

Action parse_action(std::string_view token) {
  token = trim(token);
  std::size_t i = 0;
  while (i < token.size() && std::isdigit(static_cast<unsigned char>(token[i]))) ++i;
  std::size_t j = token.size();
  while (j > i && std::isdigit(static_cast<unsigned char>(token[j - 1]))) --j;
  if (i == 0) bad_token(token, "expected <chunk><KIND><micro-batch>, e.g. 0F3");
  if (j == token.size()) bad_token(token, "missing micro-batch number");
  const std::string_view kind = token.substr(i, j - i);
  std::uint64_t chunk = 0, mb = 0;
  if (!parse_uint(token.substr(0, i), &chunk) || chunk >= static_cast<std::uint64_t>(kMaxChunks))
    bad_token(token, "chunk out of range (0.." + std::to_string(kMaxChunks - 1) + ")");
  if (!parse_uint(token.substr(j), &mb) || mb >= static_cast<std::uint64_t>(kMaxMicroBatches))
    bad_token(token, "micro-batch out of range (0.." + std::to_string(kMaxMicroBatches - 1) + ")");
  const std::optional<Op> op = find_op(kind);
  if (!op)
    bad_token(token, "unknown kind '" + std::string(kind) +
                         "' (F, B, W, BW, SEND_F, RECV_F, SEND_B, RECV_B, or (..;..)FB)");
  return make_action(*op, static_cast<int>(chunk), static_cast<int>(mb));
}

std::vector<Action> parse_actions(std::string_view text) {
  std::vector<Action> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() &&
           (text[pos] == ',' || std::isspace(static_cast<unsigned char>(text[pos]))))
      ++pos;
    if (pos >= text.size()) break;
    if (text[pos] == '(') {
      const std::size_t close = text.find(')', pos);
      if (close == std::string_view::npos) bad_token(text.substr(pos, 20), "unclosed '('");
      const std::string_view inner = text.substr(pos + 1, close - pos - 1);
      const std::size_t semi = inner.find(';');
      if (close + 3 > text.size() || text.substr(close + 1, 2) != "FB" || semi == inner.npos)
        bad_token(text.substr(pos, close - pos + 3), "an overlapped pair is (cFm;c'Bm')FB");
      Action f = parse_action(inner.substr(0, semi));
      Action b = parse_action(inner.substr(semi + 1));
      if (f.op != Op::F || (b.op != Op::B && b.op != Op::BW))
        bad_token(text.substr(pos, close - pos + 3), "FB pairs a forward with a backward");
      f.flags |= Action::kOverlapNext;
      out.push_back(f);
      out.push_back(b);
      pos = close + 3;
      continue;
    }
    std::size_t end = pos;
    while (end < text.size() && text[end] != ',' &&
           !std::isspace(static_cast<unsigned char>(text[end])))
      ++end;
    out.push_back(parse_action(text.substr(pos, end - pos)));
    pos = end;
  }
  return out;
}

std::string format_action_at(const std::vector<Action>& actions, std::size_t i,
                             std::size_t* consumed) {
  const Action& a = actions[i];
  if (unit_length(a, actions.size() - i) == 2) {
    if (consumed) *consumed = 2;
    std::string tok = "(";
    tok += to_string(a);
    tok += ';';
    tok += to_string(actions[i + 1]);
    tok += ")FB";
    return tok;
  }
  if (consumed) *consumed = 1;
  return to_string(a);
}

std::string format_actions(const std::vector<Action>& actions) {
  std::string out;
  for (std::size_t i = 0; i < actions.size();) {
    std::size_t n = 1;
    if (!out.empty()) out += ',';
    out += format_action_at(actions, i, &n);
    i += n;
  }
  return out;
}

std::string placement_name(const Schedule& s) {
  const std::optional<Placement> p = placement_of(s);
  return p ? std::string(placement_name(*p)) : "custom";
}

void dump_csv(const Schedule& s, std::ostream& out) {
  const std::string placement = placement_name(s);
  if (placement == "custom") throw ScheduleError("CSV: cannot dump a custom placement");
  out << "# bubblebench schedule\n";
  out << "# name=" << s.name << "\n# P=" << s.P << "\n# M=" << s.M << "\n# v=" << s.v
      << "\n# placement=" << placement << "\n# lowered=" << (s.lowered ? 1 : 0) << "\n";
  for (const auto& r : s.ranks) out << format_actions(r) << "\n";
}

std::string dump_csv(const Schedule& s) {
  std::ostringstream os;
  dump_csv(s, os);
  return os.str();
}

std::string_view csv_format_name(CsvFormat f) {
  return f == CsvFormat::pytorch ? "PyTorch" : "bubblebench";
}

namespace text_detail {

Schedule csv_schedule(std::string name, int P, int M, int v, Placement placement,
                      std::vector<std::vector<Action>> rows) {
  const std::string too_large =
      action_limits_problem(P, M, v, static_cast<long long>(P) * std::max(v, 2));
  if (!too_large.empty()) throw ScheduleError("CSV: " + too_large);
  if (static_cast<long long>(P) * std::max(v, 2) * M > kMaxChunkMicroBatches)
    throw ScheduleError("CSV: P=" + std::to_string(P) + ", M=" + std::to_string(M) +
                        ", v=" + std::to_string(v) + " is too large");
  Schedule s = make_schedule(std::move(name), P, M, v);
  set_placement(s, placement);
  s.ranks = std::move(rows);
  for (const auto& r : s.ranks)
    for (const auto& a : r) s.lowered = s.lowered || is_comm(a.op);
  return s;
}

}  // namespace text_detail

namespace {

// The lines that are not blank. A UTF-8 byte-order mark before the first is dropped (editors
// on Windows write one); a control byte anywhere is refused, escaped in the message.
std::vector<CsvLine> read_lines(std::istream& in) {
  std::vector<CsvLine> lines;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    for (std::size_t i = 0; i < line.size(); ++i) {
      const auto ch = static_cast<unsigned char>(line[i]);
      if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
        throw ScheduleError("CSV line " + std::to_string(number) + ": control byte " +
                            text_detail::escaped(line.substr(i, 1)) + " at column " +
                            std::to_string(i + 1) + " (a schedule CSV is text)");
    }
    const std::string_view l = trim(line);
    if (!l.empty()) lines.push_back({number, std::string(l)});
  }
  return lines;
}

// bubblebench's dialect: `# key=value` header lines and rows of actions.
Schedule read_native_csv(std::vector<CsvLine>& lines) {
  std::map<std::string, std::string> meta;
  std::vector<std::vector<Action>> rows;
  for (CsvLine& line : lines) {
    std::string_view l = line.text;
    if (l.front() == '#') {
      l.remove_prefix(1);
      l = trim(l);
      const auto eq = l.find('=');
      if (eq != l.npos)
        meta[std::string(trim(l.substr(0, eq)))] = std::string(trim(l.substr(eq + 1)));
      continue;
    }
    rows.push_back(text_detail::on_line(line, parse_actions));
    std::string().swap(line.text);
  }
  if (rows.empty()) throw ScheduleError("CSV: no rows (one row of actions per rank expected)");
  constexpr long kMaxHeader = 1L << 24;
  auto get_int = [&](const char* key, long fallback) -> int {
    auto it = meta.find(key);
    std::uint64_t v = static_cast<std::uint64_t>(fallback);
    if (it != meta.end() && (!parse_uint(it->second, &v) || v == 0))
      throw ScheduleError(std::string("CSV: header ") + key + "=" + it->second +
                          " is not a positive integer");
    if (v > static_cast<std::uint64_t>(kMaxHeader))
      throw ScheduleError(std::string("CSV: ") + key + "=" + std::to_string(v) +
                          " is too large (at most " + std::to_string(kMaxHeader) + ")");
    return static_cast<int>(v);
  };
  // Infer what the header does not say from the actions themselves.
  std::uint32_t max_chunk = 0, max_mb = 0;
  for (const auto& r : rows)
    for (const auto& a : r) {
      max_chunk = std::max<std::uint32_t>(max_chunk, a.chunk);
      max_mb = std::max(max_mb, a.mb);
    }
  const int P = get_int("P", static_cast<long>(rows.size()));
  if (P != static_cast<int>(rows.size()))
    throw ScheduleError("CSV: header says P=" + std::to_string(P) + " but there are " +
                        std::to_string(rows.size()) + " rows");
  const int M = get_int("M", static_cast<long>(max_mb) + 1);
  const long chunks = static_cast<long>(max_chunk) + 1;
  const int v = get_int("v", (chunks + P - 1) / P);
  const std::string placement = meta.count("placement") ? meta["placement"] : "looped";
  const std::optional<Placement> known = find_placement(placement);
  if (!known)
    throw ScheduleError("CSV: unknown placement '" + placement + "' (looped, v, dualpipe)");
  return text_detail::csv_schedule(meta.count("name") ? meta["name"] : "csv", P, M, v, *known,
                                   std::move(rows));
}

}  // namespace

CsvSchedule read_csv(std::istream& in) {
  std::vector<CsvLine> lines = read_lines(in);
  if (text_detail::is_pytorch_csv(lines)) return text_detail::read_pytorch_csv(lines);
  return {read_native_csv(lines), CsvFormat::native, {}};
}

CsvSchedule read_csv_file(const std::string& path) {
  // The path as messages name it: a control byte in a file name must not reach the terminal.
  const std::string shown = text_detail::escaped(path, path.size(), true);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError("cannot read schedule CSV '" + shown + "'");
  try {
    CsvSchedule out = read_csv(f);
    if (!out.note.empty()) out.note = shown + ": " + out.note;
    return out;
  } catch (const ScheduleError& e) {
    throw ScheduleError(shown + ": " + e.what());
  }
}

Schedule load_csv(std::istream& in) {
  return read_csv(in).schedule;
}

Schedule load_csv_file(const std::string& path) {
  return read_csv_file(path).schedule;
}

std::string format_grid(const Schedule& s, int mark_rank, std::size_t mark_step,
                        std::size_t max_steps) {
  // Column = token index (an FB pair is one token). Find the window to show.
  std::vector<std::vector<std::string>> cells(s.ranks.size());
  std::size_t mark_col = 0, ncols = 0;
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const auto& acts = s.ranks[r];
    for (std::size_t i = 0; i < acts.size();) {
      std::size_t n = 1;
      std::string tok = format_action_at(acts, i, &n);
      if (static_cast<int>(r) == mark_rank && mark_step >= i && mark_step < i + n) {
        mark_col = cells[r].size();
        tok.insert(0, ">>");
        tok.append("<<");
      }
      cells[r].push_back(std::move(tok));
      i += n;
    }
    ncols = std::max(ncols, cells[r].size());
  }
  std::size_t lo = 0, hi = ncols;
  if (ncols > max_steps) {
    lo = mark_rank >= 0 && mark_col > max_steps / 2 ? mark_col - max_steps / 2 : 0;
    hi = std::min(ncols, lo + max_steps);
    lo = hi - max_steps;
  }
  std::size_t width = 4;
  for (const auto& row : cells)
    for (std::size_t c = lo; c < std::min(hi, row.size()); ++c)
      width = std::max(width, row[c].size());
  std::ostringstream os;
  os << "step    ";
  for (std::size_t c = lo; c < hi; ++c) {
    std::string h = std::to_string(c);
    os << h << std::string(width + 1 - std::min(width, h.size()), ' ');
  }
  os << (hi < ncols ? "..." : "") << "\n";
  for (std::size_t r = 0; r < cells.size(); ++r) {
    std::string label = "rank " + std::to_string(r);
    os << label << std::string(label.size() < 8 ? 8 - label.size() : 1, ' ');
    if (lo > 0) os << "";
    for (std::size_t c = lo; c < hi; ++c) {
      const std::string& t = c < cells[r].size() ? cells[r][c] : std::string(".");
      os << t << std::string(width + 1 - std::min(width, t.size()), ' ');
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace bb
