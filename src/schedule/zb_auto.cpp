// zb-auto's facts (its ScheduleInfo, at the end) and candidate orders (zb_auto.hpp); the search
// that runs and compares them is generate_zb_auto in src/schedule/zb_auto_search.cpp.
#include "schedule/zb_auto.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <vector>

#include "common/error.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

std::vector<double> widen(const std::vector<double>& v, int P) {
  return v.size() == 1 ? std::vector<double>(static_cast<std::size_t>(P), v[0]) : v;
}

// Forwards rank r can run before the first micro-batch's gradient can be back (F_r times
// that: F_r+..+F_{P-1} + B_{r+1}+..+B_{P-1} + 2(P-1-r)c), at most M + 1.
std::vector<double> forwards_until_first_gradient(int P, int M, const StageCosts& c) {
  std::vector<double> fit(static_cast<std::size_t>(P));
  double until = 0;
  for (int r = P - 1; r >= 0; --r) {
    until += c.f[r] + (r + 1 < P ? c.b[r + 1] + 2 * c.comm : 0.0);
    fit[r] = until >= (M + 1.0) * c.f[r] ? M + 1.0 : until / c.f[r];
  }
  return fit;
}

// Forwards before the first B, each in [1, min(cap, M)] and non-increasing in r.
std::vector<int> tidy(std::vector<int> n, int cap, int M) {
  for (std::size_t r = 0; r < n.size(); ++r) {
    n[r] = std::clamp(n[r], 1, std::max(1, std::min(cap, M)));
    if (r > 0) n[r] = std::min(n[r], n[r - 1]);
  }
  return n;
}

using Key = std::tuple<std::vector<int>, std::vector<int>, int, int>;

void add(std::vector<ZeroBubbleOrder>& out, std::set<Key>& seen, const std::vector<int>& n,
         const std::vector<int>& ahead, ZeroBubbleOrder::FB fb, ZeroBubbleOrder::WPolicy w, int cap,
         double w_share) {
  ZeroBubbleOrder o;
  o.cap = cap;
  o.w_share = w_share;
  o.fb = fb;
  o.w = w;
  for (int x : n) o.warmup.push_back(x - 1);
  if (fb != ZeroBubbleOrder::FB::strict) o.ahead = ahead;
  if (seen.emplace(o.warmup, o.ahead, static_cast<int>(fb), static_cast<int>(w)).second)
    out.push_back(std::move(o));
}

}  // namespace

StageCosts zb_auto_costs(const ScheduleParams& p) {
  return {widen(p.t_f, p.P), widen(p.t_b, p.P), widen(p.t_w, p.P), p.t_comm};
}

int zb_auto_memory_limit(const ScheduleParams& p) {
  return p.mem_limit == 0 ? p.P : p.mem_limit;
}

std::string zb_auto_refusal(const ScheduleParams& p) {
  if (p.mem_limit < 0)
    return "zb-auto: the memory limit must be >= 1 stage-micro-batch (got " +
           std::to_string(p.mem_limit) + "; 0 means P)";
  if (!(p.mem_w >= 0 && p.mem_w <= 1))
    return "zb-auto: the memory share kept from B to W must be in [0, 1]";
  if (!std::isfinite(p.t_comm) || p.t_comm < 0)
    return "zb-auto: the message time must be finite and >= 0";
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
  double bound = 0, head = 0, back = 0;  // H_s, B_0..B_{s-1} + s·c
  for (int s = 0; s < P; ++s) {
    bound = std::max(bound, head + M * (c.f[s] + c.b[s] + c.w[s]));
    bound = std::max(bound, head + M * (c.f[s] + c.b[s]) + back + c.w[0]);
    head += c.f[s] + c.comm;
    back += c.b[s] + c.comm;
  }
  return bound;
}

double zb_auto_held_peak(const Schedule& s, double mem_w) {
  double peak = 0;
  for (const auto& list : s.ranks) {
    int fb = 0, bw = 0;  // micro-batches between F and B, between B and W
    for (const Action& a : list) {
      fb += a.op == Op::F ? 1 : a.op == Op::B ? -1 : 0;
      bw += a.op == Op::B ? 1 : a.op == Op::W ? -1 : 0;
      peak = std::max(peak, fb + mem_w * bw);
    }
  }
  return peak;
}

std::vector<ZeroBubbleOrder> zb_auto_orders(const ScheduleParams& p, int cap, bool few) {
  using FB = ZeroBubbleOrder::FB;
  using WP = ZeroBubbleOrder::WPolicy;
  const int P = p.P, M = p.M;
  const std::vector<double> fit = forwards_until_first_gradient(P, M, zb_auto_costs(p));
  std::vector<ZeroBubbleOrder> out;
  std::set<Key> seen;
  // Forwards before the first B: the ones that fit, rounded down, up, and up plus one.
  for (int mode : few ? std::vector<int>{1} : std::vector<int>{0, 1, 2}) {
    std::vector<int> n(static_cast<std::size_t>(P));
    for (int r = 0; r < P; ++r)
      n[r] = static_cast<int>(mode == 0 ? std::floor(fit[r] + 1e-9) : std::ceil(fit[r] - 1e-9)) +
             (mode == 2);
    n = tidy(n, cap, M);
    for (FB fb : few ? std::vector<FB>{FB::b_first} : std::vector<FB>{FB::b_first, FB::f_first})
      for (WP w : few ? std::vector<WP>{WP::fit} : std::vector<WP>{WP::fit, WP::fill})
        add(out, seen, n, n, fb, w, cap, p.mem_w);
  }
  if (few) return out;
  // 1F1B's strict order with ZB-H1's and ZB-H2's shapes of warm-up.
  for (int a : {1, 2})
    for (int c : {1, 2}) {
      std::vector<int> n(static_cast<std::size_t>(P));
      for (int r = 0; r < P; ++r) n[r] = a * (P - 1 - r) + c;
      for (WP w : {WP::fill, WP::fit})
        add(out, seen, tidy(n, cap, M), {}, FB::strict, w, cap, p.mem_w);
    }
  return out;
}

namespace {

void build(Schedule& s, const ScheduleParams& p) {
  s = generate_zb_auto(p);
}

// Its order is searched for the given costs: no form; its peak is at most the memory limit
// (the generator's input, not the model's).
void bubble(const ModelInput&, ModelResult& r) {
  form::refuse(r, "zb-auto has no closed form: its order depends on the costs (simulate it)");
}

}  // namespace

constinit const ScheduleInfo zb_auto_schedule = {
    .name = "zb-auto",
    .splits_backward = true,
    .accepts = "any P, M; F/B/W times 1 value or P; memory limit >= 1 (0: P); mem-w in [0, 1]",
    .refuse = zb_auto_refusal,
    .build = build,
    .form = {.formula = "none (the order is searched for the given costs)",
             .conditions = "never",
             .source = "Qi et al. 2024 (Zero Bubble PP), automatic scheduler: its heuristic, "
                       "chained over memory levels",
             .bubble = bubble,
             .peak_formula = "<= the memory limit (--mem-limit, default P; a micro-batch "
                             "between B and W counts --mem-w)"},
    .orders_by_costs = true,
};

}  // namespace bb
