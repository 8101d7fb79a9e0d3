#include "advise/advise.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/error.hpp"
#include "schedule/edges.hpp"
#include "schedule/periodic.hpp"
#include "schedule/schedule_info.hpp"
#include "sim/memory.hpp"
#include "sim/sim.hpp"

namespace bb::advise {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw ConfigError("advise: " + what);
}

bool finite_nonneg(double x) {
  return std::isfinite(x) && x >= 0;
}

void check_costs(const std::vector<double>& list, const char* name) {
  require(!list.empty(), std::string(name) + " needs at least one value");
  for (double x : list) require(finite_nonneg(x), std::string(name) + " values must be >= 0");
}

void check(const Input& in) {
  require(in.P >= 1 && in.P <= 32767, "P must be 1..32767");
  require(!in.schedules.empty(), "no schedule to consider");
  require(!in.Ms.empty() && !in.vs.empty() && !in.recompute.empty(),
          "the M, v and recompute lists may not be empty");
  for (int M : in.Ms) require(M >= 1, "every M must be >= 1");
  for (int v : in.vs) require(v >= 1, "every v must be >= 1");
  check_costs(in.t_f, "t_f");
  check_costs(in.t_b, "t_b");
  check_costs(in.t_w, "t_w");
  require(in.mb_size >= 1, "the costs' micro-batch size must be >= 1");
  require(std::isfinite(in.fb_factor) && in.fb_factor > 0, "the F&B pair factor must be > 0");
  require(finite_nonneg(in.stage_blocks), "the blocks of a stage must be >= 0");
  for (double x : in.rank_speed) require(finite_nonneg(x), "rank_speed factors must be >= 0");
  require(in.global_batch >= 0, "the global batch must be >= 0");
  for (double x : {in.act_bytes, in.input_bytes, in.param_bytes, in.static_factor, in.memory_cap,
                   in.latency, in.bandwidth, in.saved_bytes, in.workspace_bytes})
    require(finite_nonneg(x), "byte counts, the static factor, latency and bandwidth must be >= 0");
  require(in.steps >= 2 && in.steps <= 1000, "steps must be 2..1000");
  for (const std::string& name : in.schedules)
    require(find_schedule(name) != nullptr, "unknown schedule '" + name +
                                                "' (advise takes "
                                                "the built-in schedules)");
}

// The per-chunk list of a per-stage cost profile (times `scale`): chunk c holds model stage
// chunk_stage[c] of S = P / chunk fraction stages, which lies in the profile's part
// floor(stage x parts / S), and takes that part's time times its chunk fraction. One value
// stays one value (the simulator gives each chunk its share).
std::vector<double> chunk_costs(const std::vector<double>& profile, const Schedule& s,
                                double scale) {
  if (profile.size() == 1) return {profile[0] * scale};
  const double frac = s.chunk_fraction(0);
  const auto stages = static_cast<long long>(std::llround(s.P / frac));
  std::vector<double> out;
  for (int stage : s.chunk_stage) {
    const auto part = static_cast<std::size_t>(stage * static_cast<long long>(profile.size()) /
                                               std::max(1LL, stages));
    out.push_back(profile[std::min(part, profile.size() - 1)] * frac * scale);
  }
  return out;
}

std::string fmt_bytes(double b) {
  std::ostringstream os;
  os.precision(3);
  os << b / (1024.0 * 1024.0) << " MiB";
  return os.str();
}

std::string label(const Candidate& c) {
  return c.schedule + " M=" + std::to_string(c.M) + " v=" + std::to_string(c.v) +
         (c.recompute ? " recompute" : "");
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double per_sample(const Candidate& c) {
  return c.step_time / (c.M * c.mb_size);
}

}  // namespace

namespace {

// The simulator's prediction and the memory of c (its M, v, recompute and micro-batch size
// set) on the generated schedule PS, costs scaled by SCALE.
void predict(const Input& in, const PeriodicSchedule& ps, double scale, Candidate& c) {
  const Schedule& s = ps.shape;
  const double frac = s.chunk_fraction(0);
  const bool recompute = c.recompute;
  SimConfig cfg;
  cfg.t_f = chunk_costs(in.t_f, s, scale);
  cfg.t_b = chunk_costs(in.t_b, s, scale);
  cfg.t_w = chunk_costs(in.t_w, s, scale);
  require(in.rank_speed.empty() || in.rank_speed.size() == static_cast<std::size_t>(in.P),
          "rank_speed needs one factor per rank");
  if (!in.rank_speed.empty())  // per chunk: its share of the stage times its rank's factor
    for (auto* list : {&cfg.t_f, &cfg.t_b, &cfg.t_w}) {
      std::vector<double> per_chunk;
      for (int chunk = 0; chunk < s.num_chunks(); ++chunk) {
        const auto i = static_cast<std::size_t>(chunk);
        per_chunk.push_back((list->size() == 1 ? list->front() * frac : (*list)[i]) *
                            in.rank_speed[static_cast<std::size_t>(s.chunk_rank[i])]);
      }
      *list = std::move(per_chunk);
    }
  if (recompute)
    for (std::size_t i = 0; i < cfg.t_b.size(); ++i) cfg.t_b[i] += cfg.t_f[i];
  // A pair (an F and a whole backward): the factor times their sum on the mean stage.
  if (in.fb_factor != 1) cfg.t_fb = in.fb_factor * stage_work(in, c);
  // Bytes one micro-batch keeps per stage-equivalent: a chunk keeps its input with recompute
  // whatever its size, so per stage that is the input over the chunk fraction.
  cfg.act_bytes = (recompute ? in.input_bytes / frac : in.act_bytes) * scale;
  cfg.msg_bytes = in.input_bytes * scale;
  cfg.latency = in.latency;
  cfg.bandwidth = in.bandwidth;
  cfg.steps = in.steps;
  const SimResult r = simulate(ps, cfg);
  const bool comm = in.latency > 0 || (in.bandwidth > 0 && cfg.msg_bytes > 0);
  double free_span = 0;
  if (comm) {
    SimConfig free_cfg = cfg;
    free_cfg.latency = 0;
    free_cfg.bandwidth = 0;
    const SimResult r0 = simulate(ps, free_cfg);
    free_span = in.steady ? r0.steady.span : r0.single.span;
  }
  c.makespan = r.single.span;
  c.period = r.steady.span;
  c.bubble_fraction = r.single.bubble_fraction;
  c.bubble_fraction_steady = r.steady.bubble_fraction;
  c.step_time = in.steady ? c.period : c.makespan;
  c.throughput = c.step_time > 0 ? c.M * c.mb_size / c.step_time : 0;
  double f_max = 0;
  for (double x : in.t_f) f_max = std::max(f_max, x);
  c.t_recompute = recompute ? c.M * f_max * scale : 0;
  c.t_compute = std::max(0.0, r.t_ideal - c.t_recompute);
  c.t_communication = comm ? std::max(0.0, c.step_time - free_span) : 0;
  c.t_bubble = std::max(0.0, c.step_time - r.t_ideal - c.t_communication);
  const std::pair<double, const char*> terms[] = {{c.t_compute, "compute"},
                                                  {c.t_recompute, "recompute"},
                                                  {c.t_communication, "communication"},
                                                  {c.t_bubble, "bubble"}};
  c.dominant = std::max_element(std::begin(terms), std::end(terms), [](auto& a, auto& b) {
                 return a.first < b.first;
               })->second;
  const std::vector<RankMemory> memory =
      rank_memory(to_flat(ps), memory_config(in, s, scale, recompute));
  for (int rank = 0; rank < in.P; ++rank) {
    const auto i = static_cast<std::size_t>(rank);
    c.busy.push_back(r.ranks[i].busy);
    const auto& b = memory[i].peak_bytes;
    const auto at = [&](MemoryKind k) { return b[static_cast<std::size_t>(k)]; };
    c.activation_bytes.push_back(at(MemoryKind::activations) + at(MemoryKind::messages));
    c.static_bytes.push_back(at(MemoryKind::weights) + at(MemoryKind::workspace) +
                             at(MemoryKind::runtime));
    c.memory_bytes.push_back(memory[i].peak);
    if (memory[i].peak > c.peak_bytes) {
      c.peak_bytes = memory[i].peak;
      c.peak_rank = rank;
    }
  }
  if (in.memory_cap > 0 && c.peak_bytes > in.memory_cap) {
    c.excluded = "memory";
    c.reason = "peak " + fmt_bytes(c.peak_bytes) + " on rank " + std::to_string(c.peak_rank) +
               " > cap " + fmt_bytes(in.memory_cap);
  }
}

}  // namespace

MemoryConfig memory_config(const Input& in, const Schedule& s, double scale, bool recompute) {
  MemoryConfig m;
  m.recompute = recompute;
  m.message = in.input_bytes * scale;
  for (const double f : chunk_shares(s)) {
    ChunkMemory x;
    x.params = x.grads = in.param_bytes * f;
    x.optimizer = std::max(0.0, in.static_factor - 2) * in.param_bytes * f;
    x.workspace = in.workspace_bytes * f;
    x.input = in.input_bytes * scale;
    x.saved = in.saved_bytes > 0 ? in.saved_bytes * f * scale
                                 : std::max(0.0, in.act_bytes * f - in.input_bytes) * scale;
    m.chunks.push_back(x);
  }
  return m;
}

std::vector<Candidate> evaluate(const Input& in, const std::string& schedule, int M, int v,
                                const std::vector<bool>& recompute) {
  Candidate c;
  c.schedule = schedule;
  c.M = M;
  // The shared verdict (refused) for every recompute setting.
  const auto each = [&] {
    std::vector<Candidate> out;
    for (bool rc : recompute) {
      out.push_back(c);
      out.back().recompute = rc;
    }
    return out;
  };
  const ScheduleInfo* info = find_schedule(schedule);
  if (info == nullptr) {
    c.excluded = "refused";
    c.reason = "unknown schedule '" + schedule + "'";
    return each();
  }
  c.v = chunks_per_rank(*info, v);
  const int v_arg = info->takes_v() ? v : 1;
  if (in.global_batch > 0 && in.global_batch % M != 0) {
    c.excluded = "refused";
    c.reason = "M=" + std::to_string(M) + " does not divide the global batch " +
               std::to_string(in.global_batch);
    return each();
  }
  c.mb_size = in.global_batch > 0 ? in.global_batch / M : in.mb_size;
  const double scale = c.mb_size / in.mb_size;
  ScheduleParams p{in.P, M, v_arg};
  if (info->orders_by_costs) {  // by the per-stage costs (not recompute's)
    Schedule stages = make_schedule("", in.P, 1, 1);
    set_looped_placement(stages);
    p.t_f = chunk_costs(in.t_f, stages, scale);
    p.t_b = chunk_costs(in.t_b, stages, scale);
    p.t_w = chunk_costs(in.t_w, stages, scale);
  }
  if (std::string why = refusal(*info, p); !why.empty()) {
    c.excluded = "refused";
    c.reason = std::move(why);
    return each();
  }
  Schedule s;
  try {
    s = generate(*info, p);
  } catch (const ConfigError& e) {
    c.excluded = "refused";
    c.reason = e.what();
    return each();
  }
  if (in.stage_blocks > 0) {  // a fixed model: its chunks hold whole blocks
    const double blocks = in.stage_blocks * s.chunk_fraction(0);
    if (blocks < 1 - 1e-9 || std::fabs(blocks - std::round(blocks)) > 1e-9) {
      std::ostringstream os;
      os << "a chunk would hold " << blocks << " blocks (a stage of the model has "
         << in.stage_blocks << ")";
      c.excluded = "refused";
      c.reason = os.str();
      return each();
    }
  }
  const PeriodicSchedule ps = to_periodic(std::move(s));
  std::vector<Candidate> out = each();
  for (Candidate& x : out) predict(in, ps, scale, x);
  return out;
}

Candidate evaluate(const Input& in, const std::string& schedule, int M, int v, bool recompute) {
  return evaluate(in, schedule, M, v, std::vector<bool>{recompute}).front();
}

namespace {

// One task per schedule, v and M: it generates the schedule once and predicts every recompute
// setting on it (families first_family, first_family + 1, ...).
struct Task {
  std::size_t first_family, m_index;
};

// The families in search order (into `families`), and the tasks that evaluate them.
std::vector<Task> plan(const Input& in, std::vector<Family>& families) {
  std::vector<Task> tasks;
  for (const std::string& name : in.schedules) {
    const ScheduleInfo& info = *find_schedule(name);
    const std::vector<int> vs = info.takes_v() ? in.vs : std::vector<int>{1};
    for (int v : vs) {
      const int chunks = chunks_per_rank(info, v);
      const bool seen = std::any_of(families.begin(), families.end(),
                                    [&](auto& g) { return g.schedule == name && g.v == chunks; });
      if (seen) continue;
      const std::size_t first = families.size();
      for (bool rc : in.recompute) families.push_back({name, chunks, rc, "", ""});
      for (std::size_t m = 0; m < in.Ms.size(); ++m) tasks.push_back({first, m});
    }
  }
  return tasks;
}

// Every task's candidates on up to `threads` threads, in search order (family, then M); the
// simulations run into *sims. The first exception of a worker is rethrown here (the others stop
// at the next task).
std::vector<Candidate> run_tasks(const Input& in, const std::vector<Family>& families,
                                 const std::vector<Task>& tasks, unsigned threads,
                                 std::size_t* sims) {
  const std::size_t n_M = in.Ms.size();
  std::vector<Candidate> out(families.size() * n_M);
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> simulated{0};
  const auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < tasks.size();) {
      const Task& t = tasks[i];
      const Family& f = families[t.first_family];
      std::vector<Candidate> cs = evaluate(in, f.schedule, in.Ms[t.m_index], f.v, in.recompute);
      for (std::size_t j = 0; j < cs.size(); ++j) {
        if (cs[j].excluded != "refused") simulated += 1;
        out[(t.first_family + j) * n_M + t.m_index] = std::move(cs[j]);
      }
    }
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads =
      static_cast<unsigned>(std::min<std::size_t>(threads, std::max<std::size_t>(1, tasks.size())));
  std::vector<std::thread> pool;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto guarded = [&] {
    try {
      work();
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = tasks.size();
    }
  };
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(guarded);
  guarded();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  *sims = simulated;
  return out;
}

bool member(const Family& f, const Candidate& c) {
  return c.schedule == f.schedule && c.v == f.v && c.recompute == f.recompute;
}

// Why family f, with nothing accepted under the cap, is left out: memory if any configuration
// was generated (its smallest peak named), else refused (the first reason).
void say_not_accepted(Family& f, const std::vector<Candidate>& excluded) {
  const Candidate* smallest = nullptr;
  const Candidate* refused = nullptr;
  for (const Candidate& c : excluded) {
    if (!member(f, c)) continue;
    if (c.excluded == "memory" && (smallest == nullptr || c.peak_bytes < smallest->peak_bytes))
      smallest = &c;
    if (c.excluded == "refused" && refused == nullptr) refused = &c;
  }
  if (smallest != nullptr) {
    f.excluded = "memory";
    f.reason = "every accepted M is over the cap; the smallest, " + label(*smallest) + ": " +
               smallest->reason;
  } else {
    f.excluded = "refused";
    f.reason = refused != nullptr ? refused->reason : "no configuration";
  }
}

// Why each family without a configuration in the top k is left out.
void say_why_left_out(Result& res, std::size_t k) {
  const auto top_end = res.ranked.begin() + static_cast<std::ptrdiff_t>(k);
  for (Family& f : res.families) {
    if (std::any_of(res.ranked.begin(), top_end, [&](const Candidate& c) { return member(f, c); }))
      continue;
    const auto best = std::find_if(res.ranked.begin(), res.ranked.end(),
                                   [&](const Candidate& c) { return member(f, c); });
    if (best == res.ranked.end()) {
      say_not_accepted(f, res.excluded);
      continue;
    }
    const auto rank_of = [&](auto it) { return std::to_string(it - res.ranked.begin() + 1); };
    const auto by = std::find_if(res.ranked.begin(), top_end, [&](const Candidate& c) {
      return per_sample(c) <= per_sample(*best) && c.peak_bytes <= best->peak_bytes;
    });
    if (by != top_end) {
      f.excluded = "dominated";
      f.reason = "its best, " + label(*best) + " (#" + rank_of(best) + "), is slower and needs " +
                 "no less memory than #" + rank_of(by) + " " + label(*by);
    } else {
      f.excluded = "outranked";
      f.reason = "its best, " + label(*best) + ", ranks #" + rank_of(best) +
                 " (less memory than every faster configuration in the top " + std::to_string(k) +
                 ")";
    }
  }
}

}  // namespace

Result search(const Input& in, int top_k, unsigned threads) {
  check(in);
  Result res;
  const std::vector<Task> tasks = plan(in, res.families);
  for (Candidate& c : run_tasks(in, res.families, tasks, threads, &res.simulations))
    (c.excluded.empty() ? res.ranked : res.excluded).push_back(std::move(c));
  std::stable_sort(res.ranked.begin(), res.ranked.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (per_sample(a) != per_sample(b)) return per_sample(a) < per_sample(b);
                     return a.peak_bytes < b.peak_bytes;
                   });
  const std::size_t k =
      top_k <= 0 ? res.ranked.size() : std::min(res.ranked.size(), static_cast<std::size_t>(top_k));
  say_why_left_out(res, k);
  return res;
}

double stage_work(const Input& in, const Candidate& c) {
  const double scale = c.mb_size / in.mb_size;
  return (mean(in.t_f) * (c.recompute ? 2 : 1) + mean(in.t_b) + mean(in.t_w)) * scale;
}

RankingCheck check_ranking(const std::vector<double>& predicted,
                           const std::vector<double>& measured, double tolerance) {
  require(predicted.size() == measured.size(), "check_ranking: one measurement per prediction");
  require(finite_nonneg(tolerance), "check_ranking: the tolerance must be >= 0");
  const auto faster = [&](double a, double b) { return a * (1 + tolerance) < b; };
  RankingCheck out;
  const std::size_t n = predicted.size();
  for (std::size_t i = 0; i < n; ++i) {
    out.predicted_rank.push_back(
        1 + static_cast<int>(std::count_if(predicted.begin(), predicted.end(),
                                           [&](double p) { return faster(p, predicted[i]); })));
    for (std::size_t j = 0; j < n; ++j)
      if (faster(predicted[i], predicted[j]) && faster(measured[j], measured[i]))
        out.contradictions.emplace_back(i, j);
  }
  out.preserved = out.contradictions.empty();
  return out;
}

}  // namespace bb::advise
