#include "cli/list.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <unordered_set>

#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/schedule_info.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"

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
  // Repeats dropped, first occurrences kept in order (a set: 100000 values must not take
  // 5e9 comparisons).
  std::vector<int> uniq;
  std::unordered_set<int> seen;
  for (int x : out)
    if (seen.insert(x).second) uniq.push_back(x);
  return uniq;
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
    fail(what, text,
         suffix_means_seconds ? "is not a non-negative number (e.g. 1.5, or 2ms)"
                              : "is not a non-negative number (e.g. 1.5)");
  return v * scale;
}

std::vector<double> parse_number_list(std::string_view text, std::string_view what) {
  if (text.empty()) fail(what, text, "needs a value");
  std::vector<double> out;
  for (const std::string& item : parse_name_list(text, what))
    out.push_back(parse_duration(item, what, false));
  return out;
}

Schedule load_csv_arg(const std::string& path, std::string* note) {
  try {
    CsvSchedule csv = read_csv_file(path);
    if (note) *note = std::move(csv.note);
    return std::move(csv.schedule);
  } catch (const IoError& e) {
    throw ConfigError(e.what());
  } catch (const ScheduleError& e) {
    throw ConfigError(e.what());
  }
}

void dry_run_or_throw(const Schedule& lowered, const std::string& what) {
  validate_or_throw(lowered);
  // The timed dry run is a proof without a search; a hand-made list that does not keep to the
  // unit-time order can fail it and still complete, so the search decides.
  if (timed_dry_run(lowered).ok) return;
  const DryRunResult dr = dry_run(lowered);
  if (!dr.ok) throw ScheduleError(what + " fails its dry run:\n" + dr.message);
}

bool is_csv(const std::string& name) {
  return name.rfind("csv:", 0) == 0;
}

namespace {

// The reason a configuration was skipped, naming v where the schedule takes it.
std::string with_v(const std::string& why, bool takes_v, int v) {
  const std::string vv = "v=" + std::to_string(v);
  if (!takes_v || why.find(vv) != std::string::npos) return why;
  if (!why.empty() && why.back() == ')') return why.substr(0, why.size() - 1) + ", " + vv + ")";
  return why + " (" + vv + ")";
}

}  // namespace

std::size_t sweep_combinations(const std::string& names_text, const std::vector<int>& Ms,
                               const std::vector<int>& vs) {
  std::size_t n = 0;
  for (const auto& name : sweep_names(names_text)) {
    const ScheduleInfo* info = find_schedule(name);
    n += is_csv(name) ? 1 : Ms.size() * (info != nullptr && info->takes_v() ? vs.size() : 1);
  }
  return n;
}

void for_each_schedule(const std::string& names_text, int P, const std::vector<int>& Ms,
                       const std::vector<int>& vs, bool check_lowered,
                       const std::function<void(const std::string& name, Schedule s)>& use,
                       const SweepSay& say, int steps) {
  for_each_schedule(names_text, ScheduleParams{P}, Ms, vs, check_lowered, use, say, steps);
}

void for_each_schedule(const std::string& names_text, const ScheduleParams& base,
                       const std::vector<int>& Ms, const std::vector<int>& vs, bool check_lowered,
                       const std::function<void(const std::string& name, Schedule s)>& use,
                       const SweepSay& say, int steps) {
  const int P = base.P;
  const auto names = sweep_names(names_text);
  double total = 0;
  for (const auto& name : names) {
    if (is_csv(name)) continue;
    const ScheduleInfo& info = schedule_info_or_throw(name);  // one line for an unknown name
    for (int M : Ms)
      for (int v : info.takes_v() ? vs : std::vector<int>{1})
        // Sizes the generator refuses are skipped with its own reason, not counted here.
        if (static_cast<double>(P) * std::max(v, 2) * M <=
            static_cast<double>(kMaxChunkMicroBatches))
          total += estimated_actions(info, P, M, v) * std::max(steps, 1);
  }
  if (total > static_cast<double>(kMaxSweepActions))
    throw ConfigError("this sweep would " + std::string(steps > 1 ? "simulate" : "build") +
                      " about " + std::to_string(static_cast<long long>(std::min(total, 9e18))) +
                      " compute actions (at most " + std::to_string(kMaxSweepActions) +
                      (steps > 1 ? ", --steps " + std::to_string(steps) + " counted" : "") +
                      "): use fewer or smaller -M/-v values" +
                      (steps > 1 ? " or fewer --steps" : ""));

  std::vector<std::pair<std::string, std::string>> held;  // until a configuration is accepted
  std::set<std::pair<std::string, std::string>> said;
  bool accepted = false;
  std::string last_error;
  const auto tell = [&](std::string_view kind, const std::string& line) {
    if (!said.emplace(std::string(kind), line).second) return;
    if (accepted)
      say(kind, line);
    else
      held.emplace_back(std::string(kind), line);
  };
  const auto accept = [&](const std::string& name, Schedule s) {
    if (!accepted) {
      accepted = true;
      for (const auto& [kind, line] : held) say(kind, line);
      held.clear();
    }
    use(name, std::move(s));
  };
  for (const auto& name : names) {
    if (is_csv(name)) {
      std::string note;
      Schedule s = load_csv_arg(name.substr(4), &note);
      if (!note.empty()) tell("note", note);
      if (check_lowered && s.lowered) dry_run_or_throw(s, name);
      accept(name, std::move(s));
      continue;
    }
    const ScheduleInfo& info = schedule_info_or_throw(name);
    const bool takes_v = info.takes_v();
    bool noted = false;
    for (int M : Ms)
      for (int v : takes_v ? vs : std::vector<int>{1}) {
        Schedule s;
        try {
          ScheduleParams p = base;
          p.M = M;
          p.v = v;
          s = generate(info, p);
        } catch (const ConfigError& e) {
          last_error = e.what();
          tell("skip", with_v(e.what(), takes_v, v));
          continue;
        }
        if (!takes_v && !noted) {
          noted = true;
          for (int x : vs)
            if (x != 1 && x != s.v) {
              tell("note",
                   name + ": -v does not apply to it (it runs with v=" + std::to_string(s.v) + ")");
              break;
            }
        }
        accept(name, std::move(s));
      }
  }
  if (!accepted) throw ConfigError(last_error.empty() ? "no configuration to run" : last_error);
}

std::string schedule_option_help(bool lists) {
  return lists ? "Schedule name(s), comma-separated: " + joined_schedule_names() +
                     " (or all), or csv:FILE"
               : "Schedule name: " + joined_schedule_names() + ", or csv:FILE";
}

std::string schedules_taking_v() {
  return joined_schedule_names(", ", [](const ScheduleInfo& i) { return i.takes_v(); });
}

std::string schedules_ordered_by_costs() {
  return joined_schedule_names(", ", [](const ScheduleInfo& i) { return i.orders_by_costs; });
}

ScheduleSweep expand_schedules(const std::string& names_text, int P, const std::vector<int>& Ms,
                               const std::vector<int>& vs) {
  return expand_schedules(names_text, ScheduleParams{P}, Ms, vs);
}

ScheduleSweep expand_schedules(const std::string& names_text, const ScheduleParams& base,
                               const std::vector<int>& Ms, const std::vector<int>& vs) {
  ScheduleSweep out;
  for_each_schedule(
      names_text, base, Ms, vs, true,
      [&](const std::string& name, Schedule s) {
        out.schedules.push_back({name, std::move(s)});
      },
      [&](std::string_view kind, const std::string& line) {
        (kind == "skip" ? out.skipped : out.notes).push_back(line);
      });
  return out;
}

double duration_of(const std::string& text, const char* what) {
  if (text.find(',') != std::string::npos)
    throw ConfigError(std::string(what) + " takes one duration");
  return parse_duration(text, what, true);
}

std::vector<int> int_list_in(const std::string& text, const char* what, int lo, int hi) {
  auto values = parse_int_list(text, what);
  for (int x : values)
    if (x < lo || x > hi)
      throw ConfigError(std::string(what) + " must be " + std::to_string(lo) + ".." +
                        std::to_string(hi) + " (got " + std::to_string(x) + ")");
  return values;
}

std::size_t parse_bytes(const std::string& text, std::string_view what, bool allow_zero) {
  std::size_t scale = 1, n = text.size();
  if (n > 0) {
    const char last = text.back();
    if (last == 'K' || last == 'k') scale = std::size_t{1} << 10;
    if (last == 'M' || last == 'm') scale = std::size_t{1} << 20;
    if (last == 'G' || last == 'g') scale = std::size_t{1} << 30;
    if (scale != 1) --n;
  }
  unsigned long long v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + n, v);
  if (n == 0 || ec != std::errc() || p != text.data() + n || (v == 0 && !allow_zero) ||
      v > (1ull << 40) / scale)
    throw ConfigError(std::string(what) + " " + text +
                      ": expected a size in bytes (e.g. 65536, 64K, 1M)");
  return static_cast<std::size_t>(v) * scale;
}

}  // namespace bb
