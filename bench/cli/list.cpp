#include "cli/list.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/text.hpp"

namespace bb {
namespace {

constexpr long kMaxValue = 1L << 24;
constexpr std::size_t kMaxItems = 100000;

[[noreturn]] void fail(std::string_view what, std::string_view text, std::string_view why) {
  throw ConfigError(std::string(what) + ": '" + std::string(text) + "' " + std::string(why));
}

long to_long(std::string_view s, std::string_view what, std::string_view whole) {
  long v = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || p != end)
    fail(what, whole, "is not a list of positive integers (e.g. 4,8,16 or 4:64:x2 or 2:8:2)");
  if (v <= 0 || v > kMaxValue)
    fail(what, whole, "has a value out of range (1.." + std::to_string(kMaxValue) + ")");
  return v;
}

}  // namespace

std::vector<int> parse_int_list(std::string_view text, std::string_view what) {
  std::vector<int> out;
  if (text.empty()) fail(what, text, "is empty");
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    const std::size_t c1 = item.find(':');
    if (c1 == std::string_view::npos) {
      out.push_back(static_cast<int>(to_long(item, what, text)));
    } else {
      const std::size_t c2 = item.find(':', c1 + 1);
      if (c2 == std::string_view::npos || item.find(':', c2 + 1) != std::string_view::npos)
        fail(what, text, "has a range that is not START:END:STEP");
      const long lo = to_long(item.substr(0, c1), what, text);
      const long hi = to_long(item.substr(c1 + 1, c2 - c1 - 1), what, text);
      std::string_view step = item.substr(c2 + 1);
      const bool geometric = !step.empty() && (step[0] == 'x' || step[0] == '*');
      if (geometric) step.remove_prefix(1);
      const long st = to_long(step, what, text);
      if (lo > hi) fail(what, text, "has a range whose start is past its end");
      if (geometric && st < 2) fail(what, text, "has a geometric step below x2");
      for (long x = lo; x <= hi; x = geometric ? x * st : x + st) {
        out.push_back(static_cast<int>(x));
        if (out.size() > kMaxItems) fail(what, text, "has too many values");
      }
    }
    if (out.size() > kMaxItems) fail(what, text, "has too many values");
    pos = comma + 1;
    if (comma == text.size()) break;
  }
  std::vector<int> uniq;
  for (int x : out)
    if (std::find(uniq.begin(), uniq.end(), x) == uniq.end()) uniq.push_back(x);
  return uniq;
}

std::vector<std::string> parse_name_list(std::string_view text, std::string_view what) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    if (item.empty()) fail(what, text, "has an empty item");
    out.emplace_back(item);
    if (comma == text.size()) break;
    pos = comma + 1;
  }
  return out;
}

double parse_duration(std::string_view text, std::string_view what, bool suffix_means_seconds) {
  std::string_view num = text;
  double scale = 1.0;
  struct Suffix {
    const char* s;
    double f;
  };
  for (const Suffix& sx :
       {Suffix{"ms", 1e-3}, Suffix{"us", 1e-6}, Suffix{"ns", 1e-9}, Suffix{"s", 1.0}}) {
    const std::string_view sv(sx.s);
    if (num.size() > sv.size() && num.substr(num.size() - sv.size()) == sv) {
      if (!suffix_means_seconds)
        fail(what, text, "takes a plain number here (simulated time units)");
      num.remove_suffix(sv.size());
      scale = sx.f;
      break;
    }
  }
  double v = 0;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (num.empty() || ec != std::errc() || p != num.data() + num.size() || !std::isfinite(v) ||
      v < 0)
    fail(what, text, "is not a non-negative number (e.g. 1.5, or 2ms)");
  return v * scale;
}

Schedule load_csv_arg(const std::string& path) {
  try {
    return load_csv_file(path);
  } catch (const IoError& e) {
    throw ConfigError(e.what());
  } catch (const ScheduleError& e) {
    throw ConfigError(e.what());
  }
}

ScheduleSweep expand_schedules(const std::string& names_text, int P, const std::vector<int>& Ms,
                               const std::vector<int>& vs) {
  auto names = parse_name_list(names_text, "--schedule");
  if (names.size() == 1 && names[0] == "all") names = schedule_names();
  ScheduleSweep out;
  std::string last_error;
  for (const auto& name : names) {
    if (name.rfind("csv:", 0) == 0) {
      out.schedules.push_back({name, load_csv_arg(name.substr(4))});
      continue;
    }
    bool known = false;
    for (const auto& n : schedule_names()) known = known || n == name;
    if (!known) generate(name, {});  // throws the one-line "unknown schedule" error
    for (int M : Ms)
      for (int v : schedule_takes_v(name) ? vs : std::vector<int>{1}) {
        try {
          out.schedules.push_back({name, generate(name, {P, M, v})});
        } catch (const ConfigError& e) {
          last_error = e.what();
          out.skipped.push_back(e.what());
        }
      }
  }
  if (out.schedules.empty())
    throw ConfigError(last_error.empty() ? "no configuration to run" : last_error);
  return out;
}

}  // namespace bb
