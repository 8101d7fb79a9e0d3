#include "schedule/schedule_info.hpp"

#include <algorithm>
#include <array>

#include "common/enum_names.hpp"
#include "common/error.hpp"
#include "common/name_list.hpp"
#include "model/closed_form.hpp"
#include "schedule/zb_auto.hpp"

namespace bb {
namespace {

std::string n(int x) {
  return std::to_string(x);
}

// The looped schedules other than interleaved take any P, M within the common range.
std::string refuse_nothing(const ScheduleParams&) {
  return {};
}

std::string refuse_interleaved(const ScheduleParams& p) {
  if (p.v < 2)
    return "interleaved: needs v >= 2 chunks per rank (got v=" + n(p.v) + "; v=1 is 1f1b)";
  if (p.P < 2) return "interleaved: needs P >= 2 (got P=" + n(p.P) + ")";
  // PyTorch's rounds: R = max(1, M/P) rounds of M/R micro-batches, which must be whole.
  if (const int rounds = std::max(1, p.M / p.P); p.M % rounds != 0)
    return "interleaved: M must split into max(1, M/P) equal rounds, as in PyTorch (got M=" +
           n(p.M) + ", P=" + n(p.P) + ")";
  if (static_cast<long>(p.P) * p.v > 0xFFFF) return "interleaved: too many chunks";
  return {};
}

std::string refuse_zb_v(const ScheduleParams& p) {
  if (p.P > 32767) return "zb-v: P must be in [1, 32767] (got P=" + n(p.P) + ")";
  return {};
}

std::string refuse_dualpipe(const ScheduleParams& p) {
  if (p.P < 2 || p.P % 2 != 0) return "dualpipe: P must be even and >= 2 (got P=" + n(p.P) + ")";
  if (p.P > 32767) return "dualpipe: P must be <= 32767 (got P=" + n(p.P) + ")";
  if (p.M % 2 != 0 || p.M < 2 * p.P)
    return "dualpipe: M must be even and >= 2P (M/2 from each end; got M=" + n(p.M) +
           ", P=" + n(p.P) + ")";
  return {};
}

std::string refuse_dualpipev(const ScheduleParams& p) {
  if (p.P < 2 || p.P > 32767) return "dualpipev: P must be in [2, 32767] (got P=" + n(p.P) + ")";
  if (p.M < 2 * p.P) return "dualpipev: M must be >= 2P (got M=" + n(p.M) + ", P=" + n(p.P) + ")";
  return {};
}

using enum ScheduleId;
using P = Placement;

// In ScheduleId order (checked below).
constexpr std::array<ScheduleInfo, 10> kInfos = {{
    {naive, "naive", P::looped, 1, false, "any P, M", refuse_nothing, generate_naive, forms::naive,
     forms::naive_peak},
    {gpipe, "gpipe", P::looped, 1, false, "any P, M", refuse_nothing, generate_gpipe, forms::gpipe,
     forms::gpipe_peak},
    {one_f_one_b, "1f1b", P::looped, 1, false, "any P, M", refuse_nothing, generate_1f1b,
     forms::one_f_one_b, forms::one_f_one_b_peak},
    {interleaved, "interleaved", P::looped, 0, false,
     "v >= 2, P >= 2, M in max(1, M/P) equal rounds, P*v <= 65535", refuse_interleaved,
     generate_interleaved, forms::interleaved, forms::interleaved_peak},
    {zb_h1, "zb-h1", P::looped, 1, true, "any P, M", refuse_nothing, generate_zb_h1, forms::zb_h1,
     forms::zb_h1_peak},
    {zb_h2, "zb-h2", P::looped, 1, true, "any P, M", refuse_nothing, generate_zb_h2, forms::zb_h2,
     forms::zb_h2_peak},
    {zb_v, "zb-v", P::v, 2, true, "P <= 32767, any M", refuse_zb_v, generate_zb_v, forms::zb_v,
     forms::zb_v_peak},
    {dualpipe, "dualpipe", P::dualpipe, 2, true, "P even, P <= 32767, M even and M >= 2P",
     refuse_dualpipe, generate_dualpipe, forms::dualpipe, forms::dualpipe_peak},
    {dualpipev, "dualpipev", P::v, 2, true, "2 <= P <= 32767, M >= 2P", refuse_dualpipev,
     generate_dualpipev, forms::dualpipev, forms::dualpipev_peak},
    {zb_auto, "zb-auto", P::looped, 1, true,
     "any P, M; F/B/W times 1 value or P; memory limit >= 1 (0: P)", zb_auto_refusal,
     generate_zb_auto, forms::zb_auto, forms::zb_auto_peak},
}};

constexpr bool ids_in_order() {
  for (std::size_t i = 0; i < kInfos.size(); ++i)
    if (static_cast<std::size_t>(kInfos[i].id) != i) return false;
  return true;
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
  static_assert(ids_in_order(), "kInfos must be in ScheduleId order");
  return kInfos;
}

const ScheduleInfo& schedule_info(ScheduleId id) {
  return kInfos[static_cast<std::size_t>(id)];
}

const ScheduleInfo* find_schedule(std::string_view name) {
  for (const ScheduleInfo& i : kInfos)
    if (i.name == name) return &i;
  return nullptr;
}

const ScheduleInfo& schedule_info_or_throw(std::string_view name) {
  if (const ScheduleInfo* i = find_schedule(name)) return *i;
  std::string known;
  for (const ScheduleInfo& i : kInfos) {
    if (!known.empty()) known += ' ';
    known += i.name;
  }
  throw ConfigError("unknown schedule '" + std::string(name) + "' (known: " + known +
                    ", csv:FILE)");
}

std::string refusal(const ScheduleInfo& info, const ScheduleParams& p) {
  // Validation and simulation keep a few bytes per (chunk, micro-batch): refuse sizes that
  // would not fit rather than die allocating.
  const long long chunks = static_cast<long long>(p.P) * std::max(p.v, 2);
  if (p.P < 1 || p.M < 1 || p.v < 1 || chunks * p.M > kMaxChunkMicroBatches)
    return std::string(info.name) + ": P=" + n(p.P) + ", M=" + n(p.M) + ", v=" + n(p.v) +
           " is out of range (P, M, v >= 1 and at most " + std::to_string(kMaxChunkMicroBatches) +
           " chunk x micro-batch pairs)";
  return info.refuse(p);
}

void require_accepted(ScheduleId id, const ScheduleParams& p) {
  const std::string why = refusal(schedule_info(id), p);
  if (!why.empty()) throw ConfigError(why);
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
    for (const ScheduleInfo& i : kInfos) names.emplace_back(i.name);
  }
  return names;
}

}  // namespace bb
