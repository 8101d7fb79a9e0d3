#include "schedule/schedule_info.hpp"

#include <algorithm>
#include <array>

#include "common/enum_names.hpp"
#include "common/error.hpp"
#include "common/name_list.hpp"

namespace bb {

namespace {

std::string n(int x) {
  return std::to_string(x);
}

// The rows in schedules.inc order, copied once (each row is constant-initialized, so it is
// complete before any code runs).
const auto& all_infos() {
  static const std::array kInfos = {
#define BB_SCHEDULE(id) id##_schedule,
#include "schedule/schedules.inc"
#undef BB_SCHEDULE
  };
  return kInfos;
}

}  // namespace

constexpr EnumNames<Placement, 3> kPlacementNames{{"looped", "v", "dualpipe"}};
static_assert(kPlacementNames.ends_at(Placement::dualpipe));

std::string_view placement_name(Placement p) {
  return kPlacementNames.name(p, "custom");
}

std::optional<Placement> find_placement(std::string_view name) {
  return kPlacementNames.find(name);
}

void set_placement(Schedule& s, Placement p) {
  switch (p) {
    case Placement::looped:
      set_looped_placement(s);
      return;
    case Placement::v:
      set_v_placement(s);
      return;
    case Placement::dualpipe:
      set_dualpipe_placement(s);
      return;
  }
}

std::optional<Placement> placement_of(const Schedule& s) {
  for (Placement p : {Placement::looped, Placement::v, Placement::dualpipe}) {
    Schedule probe;
    probe.P = s.P;
    probe.M = s.M;
    probe.v = s.v;
    set_placement(probe, p);
    if (probe.chunk_rank == s.chunk_rank && probe.routes == s.routes &&
        probe.chunk_stage == s.chunk_stage)
      return p;
  }
  return std::nullopt;
}

std::span<const ScheduleInfo> schedule_infos() {
  return all_infos();
}

const ScheduleInfo& schedule_info(ScheduleId id) {
  return all_infos()[static_cast<std::size_t>(id)];
}

const ScheduleInfo* find_schedule(std::string_view name) {
  for (const ScheduleInfo& i : all_infos())
    if (i.name == name) return &i;
  return nullptr;
}

std::string joined_schedule_names(std::string_view separator, bool (*keep)(const ScheduleInfo&)) {
  std::string out;
  for (const ScheduleInfo& i : all_infos()) {
    if (keep != nullptr && !keep(i)) continue;
    if (!out.empty()) out += separator;
    out += i.name;
  }
  return out;
}

const ScheduleInfo& schedule_info_or_throw(std::string_view name) {
  if (const ScheduleInfo* i = find_schedule(name)) return *i;
  throw ConfigError("unknown schedule '" + std::string(name) +
                    "' (known: " + joined_schedule_names() + ", csv:FILE)");
}

std::string refusal(const ScheduleInfo& info, const ScheduleParams& p) {
  // Validation and simulation keep a few bytes per (chunk, micro-batch): refuse sizes that
  // would not fit rather than die allocating.
  const long long chunks = static_cast<long long>(p.P) * std::max(p.v, 2);
  if (p.P < 1 || p.M < 1 || p.v < 1 || chunks * p.M > kMaxChunkMicroBatches)
    return std::string(info.name) + ": P=" + n(p.P) + ", M=" + n(p.M) + ", v=" + n(p.v) +
           " is out of range (P, M, v >= 1 and at most " + std::to_string(kMaxChunkMicroBatches) +
           " chunk x micro-batch pairs)";
  return info.refuse != nullptr ? info.refuse(p) : std::string();
}

void require_accepted(const ScheduleInfo& info, const ScheduleParams& p) {
  const std::string why = refusal(info, p);
  if (!why.empty()) throw ConfigError(why);
}

void require_accepted(ScheduleId id, const ScheduleParams& p) {
  require_accepted(schedule_info(id), p);
}

Schedule generate(const ScheduleInfo& info, const ScheduleParams& p) {
  require_accepted(info, p);
  Schedule s = make_schedule(std::string(info.name), p.P, p.M, chunks_per_rank(info, p.v));
  set_placement(s, info.placement);
  info.build(s, p);
  return s;
}

Schedule generate(ScheduleId id, const ScheduleParams& p) {
  return generate(schedule_info(id), p);
}

Schedule generate(const std::string& name, const ScheduleParams& p) {
  return generate(schedule_info_or_throw(name), p);
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ScheduleInfo& i : all_infos()) out.emplace_back(i.name);
    return out;
  }();
  return names;
}

bool schedule_takes_v(const std::string& name) {
  const ScheduleInfo* i = find_schedule(name);
  return i != nullptr && i->takes_v();
}

int chunks_per_rank(const ScheduleInfo& info, int v) {
  return info.takes_v() ? v : info.fixed_v;
}

double estimated_actions(const ScheduleInfo& info, int P, int M, int v) {
  const double chunks = static_cast<double>(P) * chunks_per_rank(info, v);
  return chunks * M * (info.splits_backward ? 3 : 2);
}

std::vector<std::string> sweep_names(std::string_view text, std::string_view what) {
  std::vector<std::string> names = parse_name_list(text, what);
  if (names.size() == 1 && names[0] == "all") {
    names.clear();
    names = schedule_names();
  }
  return names;
}

}  // namespace bb
