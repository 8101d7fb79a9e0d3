#include "query/query.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <future>
#include <optional>
#include <utility>

#include "common/error.hpp"
#include "model/closed_form.hpp"
#include "schedule/lower.hpp"
#include "schedule/parallel.hpp"
#include "schedule/periodic.hpp"
#include "schedule/validate.hpp"
#include "sim/links.hpp"

namespace bb::query {
namespace {

using json = nlohmann::json;

double number(const std::string& text, const char* what) {
  return parse_duration(text, what, false);
}

// A CSV schedule keeps its own P, M and v: one note naming the flags given that it ignores.
void csv_note(const Options& o, const std::string& name, const Schedule& s, const SweepSay& say) {
  if (!is_csv(name)) return;
  std::string has, ignored;
  const auto add = [&](bool given, bool differs, const std::string& key, int value,
                       const std::string& flag) {
    if (!given || !differs) return;
    has += (has.empty() ? "" : ", ") + key + "=" + std::to_string(value);
    ignored += (ignored.empty() ? "" : ", ") + flag;
  };
  add(o.P_given, o.P != s.P, "P", s.P, "-P " + std::to_string(o.P));
  add(o.M_given, parse_int_list(o.M, "-M") != std::vector<int>{s.M}, "M", s.M, "-M " + o.M);
  add(o.v_given, parse_int_list(o.v, "-v") != std::vector<int>{s.v}, "v", s.v, "-v " + o.v);
  if (!ignored.empty()) say("note", name + " has " + has + " (" + ignored + " ignored)");
}

// A cost list has one value (a stage's cost, each chunk taking its share) or one per chunk.
void check_cost_lists(const SimConfig& sc, const std::string& name, const Schedule& s) {
  const auto C = static_cast<std::size_t>(s.num_chunks());
  for (const auto& [list, flag] :
       {std::pair{&sc.t_f, "--t-f"}, std::pair{&sc.t_b, "--t-b"}, std::pair{&sc.t_w, "--t-w"}})
    if (list->size() != 1 && list->size() != C)
      throw ConfigError(std::string(flag) + ": a cost list needs 1 value or one per chunk (" +
                        std::to_string(C) + " for " + config_label(name, s) + "), got " +
                        std::to_string(list->size()));
}

ModelInput model_input(const std::string& name, const Schedule& s, const SimConfig& sc) {
  ModelInput in;
  in.schedule = name;
  in.P = s.P;
  in.M = s.M;
  in.v = s.v;
  // One value is a stage's cost; equal per-chunk values are a chunk's share of one.
  const auto stage = [&](const std::vector<double>& list) {
    if (std::adjacent_find(list.begin(), list.end(), std::not_equal_to<>()) != list.end())
      in.uniform_stages = false;
    return list.size() == 1 || s.M < 1 ? list[0] : list[0] / s.chunk_fraction(0);
  };
  in.t_f = stage(sc.t_f);
  in.t_b = stage(sc.t_b);
  in.t_w = stage(sc.t_w);
  in.t_fb = sc.t_fb;
  in.message_time = sc.latency + (sc.bandwidth > 0 ? sc.msg_bytes / sc.bandwidth : 0.0);
  return in;
}

// Costs too large for doubles give inf or nan: refused with one line rather than printed.
void require_finite(const json& j, const std::string& label, const std::string& key = "") {
  if (j.is_number_float() && !std::isfinite(j.get<double>()))
    throw ConfigError(label + ": " + key + " is not finite (" + std::to_string(j.get<double>()) +
                      "): the costs are too large");
  if (j.is_array())
    for (const auto& x : j) require_finite(x, label, key);
  if (!j.is_object()) return;
  for (const char* k : {"makespan", "period"})  // the cause, before what follows from it
    if (j.contains(k)) require_finite(j[k], label, k);
  for (const auto& [k, x] : j.items()) require_finite(x, label, k);
}

void put_metrics(json& j, const BubbleMetrics& single, const BubbleMetrics& steady) {
  j["makespan"] = single.span;
  j["idle_total"] = single.idle_total;
  j["bubble_fraction"] = single.bubble_fraction;
  j["bubble_ratio"] = single.bubble_ratio;
  j["bubble_time"] = single.bubble_time;
  j["period"] = steady.span;
  j["idle_total_steady"] = steady.idle_total;
  j["bubble_fraction_steady"] = steady.bubble_fraction;
  j["bubble_ratio_steady"] = steady.bubble_ratio;
  j["bubble_time_steady"] = steady.bubble_time;
}

json model_json(const ModelResult& m) {
  json j;
  j["applies"] = m.applies;
  j["formula"] = m.formula;
  j["conditions"] = m.conditions;
  j["source"] = m.source;
  if (m.applies) {
    put_metrics(j, m.single, m.steady);
    j["t_ideal"] = m.t_ideal;
  } else {
    j["reason"] = m.reason;
  }
  j["peak_activations"] = m.peak_activations;
  j["peak_formula"] = m.peak_formula;
  return j;
}

// Validation and simulation of sim: on the lists in periodic form (validation on the segments,
// the periodic engine; each falls back to the flat lists where it cannot tell or does not
// apply), unless a timeline is asked for (it names every action) or BB_FLAT_PASSES=1.
// A generator's large schedule is validated on a second thread while it is simulated (the two
// only read it); the validation's verdict comes first, so an invalid schedule reports what
// validate reports. Lists read from a file are validated before anything else reads them.
SimResult validate_and_simulate(Schedule s, const SimConfig& cfg, bool from_file) {
  if (cfg.record_events || flat_passes_forced()) {
    validate_or_throw(s);
    return simulate(s, cfg);
  }
  const bool beside = !from_file && core_parallel(s);
  const PeriodicSchedule ps = to_periodic(std::move(s));
  if (!beside) {
    validate_or_throw(ps);
    return simulate(ps, cfg);
  }
  auto check = std::async(std::launch::async, [&ps] { validate_or_throw(ps); });
  std::optional<SimResult> r;
  std::exception_ptr sim_error;
  try {
    r = simulate(ps, cfg);
  } catch (...) {
    sim_error = std::current_exception();
  }
  check.get();  // the validation's error, if any, first
  if (sim_error) std::rethrow_exception(sim_error);
  return std::move(*r);
}

}  // namespace

void check_P(const Options& o) {
  if (o.P < 1 || o.P > 32767) throw ConfigError("-P " + std::to_string(o.P) + ": must be 1..32767");
}

SimConfig sim_config(const Options& o) {
  SimConfig c;
  c.t_f = parse_number_list(o.t_f, "--t-f");
  c.t_b = parse_number_list(o.t_b, "--t-b");
  c.t_w = parse_number_list(o.t_w, "--t-w");
  c.t_fb = o.t_fb.empty() ? -1.0 : number(o.t_fb, "--t-fb");
  c.latency = number(o.latency, "--latency");
  c.bandwidth = number(o.bandwidth, "--bandwidth");
  c.act_bytes = number(o.act_bytes, "--act-bytes");
  c.msg_bytes = o.msg_bytes.empty() ? c.act_bytes : number(o.msg_bytes, "--msg-bytes");
  if (o.steps < 2 || o.steps > 1000) throw ConfigError("--steps must be 2..1000");
  c.steps = o.steps;
  return c;
}

ScheduleParams generator_params(const Options& o, const SimConfig* sc) {
  if (o.mem_limit < 0) throw ConfigError("--mem-limit must be >= 0");
  if (!(o.mem_w >= 0 && o.mem_w <= 1)) throw ConfigError("--mem-w must be 0..1");
  ScheduleParams p;
  p.P = o.P;
  p.mem_limit = o.mem_limit;
  p.mem_w = o.mem_w;
  if (sc != nullptr) {
    p.t_f = sc->t_f;
    p.t_b = sc->t_b;
    p.t_w = sc->t_w;
    p.t_comm = message_time(*sc, -1, -1);
  }
  return p;
}

std::string config_label(const std::string& name, const Schedule& s) {
  return name + " P=" + std::to_string(s.P) + " M=" + std::to_string(s.M) +
         " v=" + std::to_string(s.v);
}

json evaluate(const Options& o, const SimConfig& sc, const std::string& name, Schedule s,
              bool simulate_too, bool from_file, const Timeline& timeline) {
  const std::string label = config_label(name, s);
  check_cost_lists(sc, name, s);
  const ModelResult m = closed_form(model_input(name, s, sc));
  json j;
  j["schedule"] = name;
  j["P"] = s.P;
  j["M"] = s.M;
  j["v"] = s.v;
  // A CSV's lists are read below (the message count): they must be valid first.
  if (!simulate_too && from_file) validate_or_throw(s);
  if (simulate_too) {
    if (sc.links)
      for (const auto& [src, dst] : pipeline_pairs(s))
        if (!sc.links->covers(src, dst))
          throw ConfigError(label + ": --links " + o.links + " has no fit for " +
                            std::to_string(src) + "->" + std::to_string(dst) +
                            " (calibrate with as many ranks, --pairs all)");
    SimConfig run_cfg = sc;
    run_cfg.record_events = o.record_events;
    const double static_bytes = number(o.static_bytes, "--static-bytes");
    const bool sizes = sc.act_bytes > 0 || sc.msg_bytes > 0 || static_bytes > 0;
    // The timeline and the memory model read the flat lists: they are kept only then.
    const SimResult r = run_cfg.record_events || sizes
                            ? validate_and_simulate(s, run_cfg, from_file)
                            : validate_and_simulate(std::move(s), run_cfg, from_file);
    std::vector<RankMemory> memory;  // the memory model: on the timeline's times, else the order
    if (run_cfg.record_events || sizes)
      memory =
          rank_memory(s, sim_memory_config(s, sc, static_bytes),
                      run_cfg.record_events ? MemoryTiming{&r.events, &run_cfg} : MemoryTiming{},
                      run_cfg.record_events);
    if (sizes) {
      std::vector<double> peak_memory;
      for (const RankMemory& rm : memory) peak_memory.push_back(rm.peak);
      j["peak_memory_bytes"] = peak_memory;
    }
    put_metrics(j, r.single, r.steady);
    j["t_ideal"] = r.t_ideal;
    std::vector<double> peaks, peak_bytes;
    for (const auto& rs : r.ranks) {
      peaks.push_back(rs.peak_activations);
      peak_bytes.push_back(rs.peak_activation_bytes);
    }
    j["peak_activations"] = peaks;
    if (sc.act_bytes > 0) j["peak_activation_bytes"] = peak_bytes;
    j["p2p_messages"] = r.p2p_messages;
    j["model"] = model_json(m);
    require_finite(j, label);
    if (run_cfg.record_events && timeline) timeline(name, s, r, memory);
  } else {
    j.update(model_json(m));
    j["p2p_messages"] = p2p_messages(s);
    require_finite(j, label);
  }
  return j;
}

json sim_or_model(const Options& o, const SimConfig& sc, bool simulate_too, const SweepSay& say,
                  const Timeline& timeline) {
  check_P(o);
  const auto Ms = parse_int_list(o.M, "-M");
  const auto vs = parse_int_list(o.v, "-v");
  json out = json::array();
  for_each_schedule(
      o.schedules, generator_params(o, &sc), Ms, vs, true,
      [&](const std::string& name, Schedule s) {
        csv_note(o, name, s, say);
        out.push_back(evaluate(o, sc, name, std::move(s), simulate_too, is_csv(name), timeline));
      },
      say, simulate_too ? sc.steps : 1);
  return out;
}

Schedule load_one(const Options& o, const std::optional<std::string>& csv, const SweepSay& say) {
  if (csv) {
    std::string note;
    Schedule s = load_csv_arg(*csv, &note);
    if (!note.empty()) say("note", note);
    return s;
  }
  check_P(o);
  const auto names = parse_name_list(o.schedules, "--schedule");
  if (names.size() != 1 || names[0] == "all")
    throw ConfigError("this command takes one schedule (got --schedule " + o.schedules + ")");
  const auto Ms = parse_int_list(o.M, "-M");
  const auto vs = parse_int_list(o.v, "-v");
  if (Ms.size() != 1 || vs.size() != 1)
    throw ConfigError("this command takes one -M and one -v value, not a list");
  std::optional<Schedule> one;
  for_each_schedule(
      o.schedules, generator_params(o, nullptr), Ms, vs, false,
      [&](const std::string& name, Schedule s) {
        csv_note(o, name, s, say);
        one = std::move(s);
      },
      say);
  return std::move(*one);
}

// A compute schedule is validated and lowered in periodic form (the flat lists where the
// periodic passes cannot tell, or with BB_FLAT_PASSES=1); a lowered one is dry-run as given.
json validate(Schedule s) {
  json j;
  j["schedule"] = s.name;
  j["P"] = s.P;
  j["M"] = s.M;
  j["v"] = s.v;
  const auto fails = [&](const std::string& report) {
    j["ok"] = false;
    j["report"] = report;
    return j;
  };
  const auto invalid = [](const Schedule& flat) -> std::optional<std::string> {
    const ValidationReport rep = bb::validate(flat);
    if (rep.ok()) return std::nullopt;
    return rep.describe(flat);
  };
  std::size_t compute = 0, total = 0;
  if (s.lowered) {
    if (const auto why = invalid(s)) return fails(*why);
    const DryRunResult dr = dry_run(s);
    if (!dr.ok) return fails("schedule '" + s.name + "' fails its dry run:\n" + dr.message);
    compute = s.compute_size();
    total = s.size();
  } else if (flat_passes_forced()) {
    if (const auto why = invalid(s)) return fails(*why);
    compute = s.compute_size();
    s = lower(std::move(s));
    total = s.size();
  } else {
    PeriodicSchedule ps = to_periodic(std::move(s));
    if (!surely_valid(ps))
      if (const auto why = invalid(to_flat(ps))) return fails(*why);
    compute = ps.compute_size();
    ps = lower(ps);
    total = ps.size();
  }
  j["ok"] = true;
  j["compute_actions"] = compute;
  j["send_recv_actions"] = total - compute;
  return j;
}

}  // namespace bb::query
