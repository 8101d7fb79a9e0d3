// One descriptor per built-in schedule, filled once (schedule_info.cpp): its name, what P, M
// and v it accepts and why it refuses the rest, its placement, whether it takes v, how its
// backward is split, its generator, and its closed form and peak formula (model/closed_form).
// The registry (generate, schedule_names), the sweep's name expansion and the closed forms
// read this table instead of comparing names.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/generators.hpp"
#include "schedule/schedule.hpp"

namespace bb {

struct ModelInput;
struct ModelResult;

enum class ScheduleId : std::uint8_t {
  naive,
  gpipe,
  one_f_one_b,
  interleaved,
  zb_h1,
  zb_h2,
  zb_v,
  dualpipe,
  dualpipev,
  zb_auto
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

// A closed form or a peak formula of one schedule (model/closed_form.hpp): fills its part of
// the result, or leaves `applies` false with a reason.
using ModelForm = void (*)(const ModelInput&, ModelResult&);

struct ScheduleInfo {
  ScheduleId id;
  std::string_view name;  // as on the command line and in results
  Placement placement;
  // Chunks per rank the schedule always has (1 looped, 2 for the V and DualPipe placements);
  // 0 when it takes the user's v (interleaved).
  int fixed_v;
  // True when the backward is split into B (input gradient) and W (weight gradient) actions
  // (DualPipe's keep some BW); false when each backward is one BW action.
  bool splits_backward;
  // What it accepts besides the common range (P, M, v >= 1 and kMaxChunkMicroBatches), in
  // words; `refuse` is the rule itself.
  std::string_view accepts;
  // Why the generator refuses p (one line naming the schedule), or empty. Does not include
  // the common range check: refusal() below adds it.
  std::string (*refuse)(const ScheduleParams& p);
  Schedule (*generate)(const ScheduleParams& p);
  ModelForm closed_form;  // bubble times, formula, conditions, source
  ModelForm peak;         // peak activations and their formula

  bool takes_v() const { return fixed_v == 0; }
};

// Every built-in schedule, in the order of design §5.1 (the order of ScheduleId).
std::span<const ScheduleInfo> schedule_infos();
const ScheduleInfo& schedule_info(ScheduleId id);
// By name; nullptr when no built-in schedule has it.
const ScheduleInfo* find_schedule(std::string_view name);
// By name; ConfigError "unknown schedule 'x' (known: ..., csv:FILE)" when there is none.
const ScheduleInfo& schedule_info_or_throw(std::string_view name);

// Why `info`'s generator refuses p, or empty: first the range every schedule shares (P, M,
// v >= 1, at most kMaxChunkMicroBatches chunk x micro-batch pairs), then its own rule.
std::string refusal(const ScheduleInfo& info, const ScheduleParams& p);
// Throws ConfigError with refusal(id, p) when it is not empty. Every generator starts here.
void require_accepted(ScheduleId id, const ScheduleParams& p);

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
