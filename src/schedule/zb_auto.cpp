// zb-auto's facts (its ScheduleInfo, at the end) and candidates (zb_auto.hpp); the search that
// simulates the candidates and keeps the best is generate_zb_auto in src/sim/zb_auto_search.cpp.
#include "schedule/zb_auto.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "common/error.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

std::vector<double> widen(const std::vector<double>& v, int P) {
  return v.size() == 1 ? std::vector<double>(static_cast<std::size_t>(P), v[0]) : v;
}

// Warm-ups that do not grow towards the last rank and stay below the cap (cannot deadlock).
std::vector<int> tidy(std::vector<int> w, int cap, int M) {
  for (std::size_t r = 0; r < w.size(); ++r) {
    w[r] = std::clamp(w[r], 0, std::min(cap - 1, M));
    if (r > 0) w[r] = std::min(w[r], w[r - 1]);
  }
  return w;
}

std::set<std::vector<int>> warmups(int P, int M, int L, const StageCosts& c, bool few) {
  std::set<std::vector<int>> out;
  // Forwards rank r can start before its first B's input can arrive (at most M + 1).
  std::vector<double> fit(P);
  for (int r = 0; r < P; ++r) {
    double until = 0;
    for (int s = r; s < P; ++s) until += c.f[s] + (s > r ? c.b[s] : 0.0);
    fit[r] = until >= (M + 1.0) * c.f[r] ? M + 1.0 : until / c.f[r];
  }
  const std::vector<double> fracs =
      few ? std::vector<double>{1.0} : std::vector<double>{0.5, 0.75, 1.0, 1.25, 1.5, 2.0};
  for (double frac : fracs) {
    std::vector<int> w(P);
    for (int r = 0; r < P; ++r) w[r] = static_cast<int>(std::ceil(frac * fit[r] - 1e-9)) - 1;
    out.insert(tidy(w, L, M));
  }
  const std::vector<int> offsets =
      few ? std::vector<int>{0} : std::vector<int>{0, 1, 2, 3, L / 4, L / 2, (3 * L) / 4, L - 1};
  for (int a : few ? std::vector<int>{1} : std::vector<int>{0, 1, 2})
    for (int off : offsets) {
      std::vector<int> w(P);
      for (int r = 0; r < P; ++r) w[r] = a * (P - 1 - r) + off;
      out.insert(tidy(w, L, M));
    }
  return out;
}

}  // namespace

StageCosts zb_auto_costs(const ScheduleParams& p) {
  return {widen(p.t_f, p.P), widen(p.t_b, p.P), widen(p.t_w, p.P)};
}

int zb_auto_memory_limit(const ScheduleParams& p) {
  return p.mem_limit == 0 ? p.P : p.mem_limit;
}

std::string zb_auto_refusal(const ScheduleParams& p) {
  if (p.mem_limit < 0)
    return "zb-auto: the memory limit must be >= 1 stage-micro-batch (got " +
           std::to_string(p.mem_limit) + "; 0 means P)";
  for (const auto& [list, what] :
       {std::pair{&p.t_f, "F"}, std::pair{&p.t_b, "B"}, std::pair{&p.t_w, "W"}}) {
    if (list->size() != 1 && list->size() != static_cast<std::size_t>(p.P))
      return std::string("zb-auto: needs 1 ") + what +
             " time or one per stage (P=" + std::to_string(p.P) + "), got " +
             std::to_string(list->size());
    for (double x : *list)
      if (!std::isfinite(x) || x < 0)
        return std::string("zb-auto: ") + what + " times must be finite and >= 0";
  }
  return {};
}

double zb_auto_lower_bound(int P, int M, const StageCosts& c) {
  double bound = 0, head = 0, back = 0;  // F_0..F_{s-1}, B_0..B_{s-1}
  for (int s = 0; s < P; ++s) {
    bound = std::max(bound, head + M * (c.f[s] + c.b[s] + c.w[s]));
    bound = std::max(bound, head + M * (c.f[s] + c.b[s]) + back + c.w[0]);
    head += c.f[s];
    back += c.b[s];
  }
  return bound;
}

std::vector<Schedule> zb_auto_candidates(const ScheduleParams& p) {
  const int P = p.P, M = p.M, L = zb_auto_memory_limit(p);
  const StageCosts c = zb_auto_costs(p);
  std::vector<Schedule> out;
  if (std::min(P, M) <= L) out.push_back(generate(ScheduleId::zb_h1, {P, M, 1}));
  if (std::min(2 * P - 1, M) <= L) out.push_back(generate(ScheduleId::zb_h2, {P, M, 1}));
  const bool few = 3LL * P * M > kFewCandidatesAbove;
  ZeroBubbleOrder ord;
  ord.cap = L;
  for (const auto& w : warmups(P, M, L, c, few))
    for (auto policy : {ZeroBubbleOrder::WPolicy::fill, ZeroBubbleOrder::WPolicy::fit}) {
      ord.warmup = w;
      ord.w = policy;
      out.push_back(zero_bubble_list("zb-auto", P, M, ord, c));
    }
  return out;
}

namespace {

void build(Schedule& s, const ScheduleParams& p) {
  s = generate_zb_auto(p);
}

// Its order is chosen by simulating candidates with the given costs: no form; its peak is at
// most the memory limit (the generator's input, not the model's).
void bubble(const ModelInput&, ModelResult& r) {
  form::refuse(r, "zb-auto has no closed form: its order depends on the costs (simulate it)");
}

}  // namespace

constinit const ScheduleInfo zb_auto_schedule = {
    .name = "zb-auto",
    .splits_backward = true,
    .accepts = "any P, M; F/B/W times 1 value or P; memory limit >= 1 (0: P)",
    .refuse = zb_auto_refusal,
    .build = build,
    .form = {.formula = "none (the order is searched with the simulator)",
             .conditions = "never",
             .source = "Qi et al. 2024 (Zero Bubble PP), automatic scheduler; heuristic search "
                       "here",
             .bubble = bubble,
             .peak_formula = "<= the memory limit (--mem-limit, default P)"},
    .orders_by_costs = true,
};

}  // namespace bb
