// One descriptor per built-in schedule, defined in the schedule's own file beside its
// generator (src/schedule/<id>.cpp) and registered by one line of schedules.inc: its name, what
// P, M and v it accepts and why it refuses the rest, its placement, whether it takes v, how
// its backward is split, its generator, and its closed form and peak formula (form.hpp). The
// registry (generate, schedule_names), the sweep's name expansion, the help texts, the docs
// table and the closed forms read this table instead of comparing names.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/form.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule.hpp"

namespace bb {

// In the order of schedules.inc.
enum class ScheduleId : std::uint8_t {
#define BB_SCHEDULE(id) id,
#include "schedule/schedules.inc"
#undef BB_SCHEDULE
};

// Where chunks live and which chunks a micro-batch visits (schedule.hpp's set_*_placement).
enum class Placement : std::uint8_t { looped, v, dualpipe };

// "looped", "v", "dualpipe": the names of the CSV header's `placement=`.
std::string_view placement_name(Placement p);
// By name; nullopt for any other text.
std::optional<Placement> find_placement(std::string_view name);
// The placement that gives `s` its chunk_rank, chunk_stage and routes, if any (else "custom").
std::optional<Placement> placement_of(const Schedule& s);
// Sets s.chunk_rank, chunk_stage and routes (and v for the V and DualPipe placements).
void set_placement(Schedule& s, Placement p);

// A row states its name, generator and form, and whatever differs from the defaults below (a
// looped placement, one chunk per rank, one BW per backward, any P, M in the common range).
struct ScheduleInfo {
  std::string_view name;  // as on the command line and in results
  Placement placement = Placement::looped;
  // Chunks per rank the schedule always has (1 looped, 2 for the V and DualPipe placements);
  // 0 when it takes the user's v (interleaved).
  int fixed_v = 1;
  // True when the backward is split into B (input gradient) and W (weight gradient) actions
  // (DualPipe's keep some BW); false when each backward is one BW action.
  bool splits_backward = false;
  // What it accepts besides the common range (P, M, v >= 1 and kMaxChunkMicroBatches), in
  // words; `refuse` is the rule itself: why the generator refuses p (one line naming the
  // schedule), or empty. Null: it accepts the whole common range (refusal() checks that).
  std::string_view accepts = "any P, M";
  std::string (*refuse)(const ScheduleParams& p) = nullptr;
  // Writes the rank lists of `s`, which generate() hands over with its name, P, M, v and
  // placement set from this row and p accepted.
  void (*build)(Schedule& s, const ScheduleParams& p);
  PublishedForm form;  // its closed form and peak formula, where published
  // True when the order depends on ScheduleParams' per-stage costs and memory limit (zb-auto),
  // not only on P, M and v.
  bool orders_by_costs = false;

  bool takes_v() const { return fixed_v == 0; }
};

// Each row, defined in its schedule's file (constinit: complete before any code runs).
#define BB_SCHEDULE(id) extern const ScheduleInfo id##_schedule;
#include "schedule/schedules.inc"
#undef BB_SCHEDULE

// Every built-in schedule, in the order of schedules.inc (of ScheduleId).
std::span<const ScheduleInfo> schedule_infos();
const ScheduleInfo& schedule_info(ScheduleId id);
// By name; nullptr when no built-in schedule has it.
const ScheduleInfo* find_schedule(std::string_view name);
// By name; ConfigError "unknown schedule 'x' (known: ..., csv:FILE)" when there is none.
const ScheduleInfo& schedule_info_or_throw(std::string_view name);

// Why `info`'s generator refuses p, or empty: first the range every schedule shares (P, M,
// v >= 1, at most kMaxChunkMicroBatches chunk x micro-batch pairs), then its own rule.
std::string refusal(const ScheduleInfo& info, const ScheduleParams& p);
// Throws ConfigError with refusal(id, p) when it is not empty.
void require_accepted(ScheduleId id, const ScheduleParams& p);
void require_accepted(const ScheduleInfo& info, const ScheduleParams& p);

// `info`'s schedule for p: refused (ConfigError with refusal(info, p)), or built by its row's
// generator on a schedule with the row's name, v and placement.
Schedule generate(const ScheduleInfo& info, const ScheduleParams& p);
Schedule generate(ScheduleId id, const ScheduleParams& p);

// The built-in names joined by `separator`, in order ("naive gpipe ... zb-auto"); with `keep`,
// those it keeps (help texts: the schedules that take v, ...).
std::string joined_schedule_names(std::string_view separator = " ",
                                  bool (*keep)(const ScheduleInfo&) = nullptr);

// The chunks per rank a configuration runs with: p.v when the schedule takes v, else fixed_v.
int chunks_per_rank(const ScheduleInfo& info, int v);
// About how many compute actions generate(P, M, v) builds: chunks x micro-batches x 2 (F, BW)
// or 3 (F, B, W), before building any.
double estimated_actions(const ScheduleInfo& info, int P, int M, int v);

// The names a --schedule list stands for: comma-separated items (an empty one is a
// ConfigError naming `what`), `all` alone for every built-in schedule. Names are not checked
// here (csv:FILE and unknown names pass through; generate() refuses the unknown ones).
std::vector<std::string> sweep_names(std::string_view text, std::string_view what = "--schedule");

}  // namespace bb
