#include "cli/cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <future>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/advise.hpp"
#include "cli/build_info.hpp"
#include "cli/calibrate.hpp"
#include "cli/list.hpp"
#include "cli/options.hpp"
#include "cli/run.hpp"
#include "cli/schedule_table.hpp"
#include "cli/stage_options.hpp"
#include "cli/table.hpp"
#include "cli/timeline.hpp"
#include "common/error.hpp"
#include "model/closed_form.hpp"
#include "results/links_io.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/parallel.hpp"
#include "schedule/periodic.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

using json = nlohmann::json;

// What the selection flags of sim / model / validate / show ask for.
struct Selection {
  std::string schedules = "1f1b";
  int P = 4;
  std::string M = "8";
  std::string v = "1";
  std::string t_f = "1", t_b = "2", t_w = "0";
  // Plain numbers, checked when parsed (finite, >= 0); empty: the default.
  std::string t_fb, latency = "0", bandwidth = "0", act_bytes = "0", msg_bytes;
  std::string static_bytes = "0";  // sim: bytes a stage holds for the whole step
  int steps = 4;
  std::string sync = "barrier";
  std::string format = "table";
  std::string timeline;
  std::string links;  // sim --links FILE: fitted per-pair message costs
  int mem_limit = 0;  // zb-auto's memory limit (stage-micro-batches; 0: P)
  double mem_w = 1;   // zb-auto: what a micro-batch between its B and its W counts
  CLI::Option *P_opt = nullptr, *M_opt = nullptr, *v_opt = nullptr;  // given or not
};

// A file name option may not be empty (rather than meaning "none").
const CLI::Validator kFileName(
    [](std::string& s) { return s.empty() ? std::string("needs a file name") : std::string(); },
    "FILE");

void add_selection(CLI::App* app, Selection& sel, bool costs, bool lists) {
  add_with_default(*app, "--schedule,-s", sel.schedules, schedule_option_help(lists));
  sel.P_opt = add_with_default(*app, "-P", sel.P, "Pipeline ranks");
  sel.M_opt = add_with_default(
      *app, "-M", sel.M,
      lists ? "Micro-batches per step (LIST: 4,8 or 4:64:x2 or 2:8:2)" : "Micro-batches per step");
  sel.v_opt = add_with_default(
      *app, "-v", sel.v,
      lists ? "Chunks per rank for " + schedules_taking_v() + " (LIST)" : "Chunks per rank");
  app->add_option("--mem-limit", sel.mem_limit,
                  schedules_ordered_by_costs() +
                      ": live micro-batches per rank (stage units; 0: P, as 1F1B)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--mem-w", sel.mem_w,
                  "zb-auto: what a micro-batch between its B and its W counts towards "
                  "--mem-limit (1: a whole one, as the peak counts; 0.5: the zero-bubble "
                  "paper's scheduler)")
      ->check(CLI::Range(0.0, 1.0));
  if (!costs) return;
  add_with_default(*app, "--t-f", sel.t_f, "Forward time of one stage (or one value per chunk)");
  add_with_default(*app, "--t-b", sel.t_b, "Input-gradient backward time (B)");
  add_with_default(*app, "--t-w", sel.t_w,
                   "Weight-gradient backward time (W); 0: B is the whole backward");
  app->add_option("--t-fb", sel.t_fb, "Overlapped F&B pair time (DualPipe); default F+B+W");
  app->add_option("--latency", sel.latency, "Per-message latency (time units)");
  app->add_option("--bandwidth", sel.bandwidth,
                  "Link bandwidth (bytes per time unit); 0 = infinite");
  app->add_option("--act-bytes", sel.act_bytes,
                  "Activation bytes kept by one micro-batch of one stage");
  app->add_option("--msg-bytes", sel.msg_bytes, "Bytes of one P2P message (default: --act-bytes)");
  app->add_option("--static-bytes", sel.static_bytes,
                  "Bytes a stage holds for the whole step (parameters, gradients, optimizer "
                  "state, workspaces): with --act-bytes/--msg-bytes the memory model's "
                  "peak_memory_bytes per rank (docs/memory.md)");
  add_with_default(*app, "--steps", sel.steps,
                   "Back-to-back steps simulated for the steady state (>= 2)");
  add_choice(*app, "--sync", sel.sync, "barrier (single-step view first) or none (steady state)",
             {"barrier", "none"});
  add_choice(*app, "--format", sel.format, "table, json or csv", {"table", "json", "csv"});
}

void say_stderr(std::string_view kind, const std::string& line) {
  std::cerr << kind << ": " << line << "\n";
}

void check_P(const Selection& sel) {
  if (sel.P < 1 || sel.P > 32767)
    throw ConfigError("-P " + std::to_string(sel.P) + ": must be 1..32767");
}

// A CSV schedule keeps its own P, M and v: one note naming the flags given that it ignores.
void csv_note(const Selection& sel, const std::string& name, const Schedule& s,
              const SweepSay& say) {
  if (!is_csv(name)) return;
  std::string has, ignored;
  const auto add = [&](const CLI::Option* opt, bool differs, const std::string& key, int value,
                       const std::string& flag) {
    if (opt == nullptr || opt->count() == 0 || !differs) return;
    has += (has.empty() ? "" : ", ") + key + "=" + std::to_string(value);
    ignored += (ignored.empty() ? "" : ", ") + flag;
  };
  add(sel.P_opt, sel.P != s.P, "P", s.P, "-P " + std::to_string(sel.P));
  add(sel.M_opt, parse_int_list(sel.M, "-M") != std::vector<int>{s.M}, "M", s.M, "-M " + sel.M);
  add(sel.v_opt, parse_int_list(sel.v, "-v") != std::vector<int>{s.v}, "v", s.v, "-v " + sel.v);
  if (!ignored.empty()) say("note", name + " has " + has + " (" + ignored + " ignored)");
}

double number(const std::string& text, const char* what) {
  return parse_duration(text, what, false);
}

SimConfig sim_config(const Selection& sel) {
  SimConfig c;
  c.t_f = parse_number_list(sel.t_f, "--t-f");
  c.t_b = parse_number_list(sel.t_b, "--t-b");
  c.t_w = parse_number_list(sel.t_w, "--t-w");
  c.t_fb = sel.t_fb.empty() ? -1.0 : number(sel.t_fb, "--t-fb");
  c.latency = number(sel.latency, "--latency");
  c.bandwidth = number(sel.bandwidth, "--bandwidth");
  c.act_bytes = number(sel.act_bytes, "--act-bytes");
  c.msg_bytes = sel.msg_bytes.empty() ? c.act_bytes : number(sel.msg_bytes, "--msg-bytes");
  if (sel.steps < 2 || sel.steps > 1000) throw ConfigError("--steps must be 2..1000");
  c.steps = sel.steps;
  if (!sel.links.empty()) c.links = std::make_shared<const LinkModel>(read_links_file(sel.links));
  return c;
}

// What the generators get besides M and v: P, zb-auto's memory limit and, where the command
// takes costs (sc), the per-stage F/B/W times and the message time it orders by (else unit
// times, no message time).
ScheduleParams generator_params(const Selection& sel, const SimConfig* sc) {
  ScheduleParams p;
  p.P = sel.P;
  p.mem_limit = sel.mem_limit;
  p.mem_w = sel.mem_w;
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

// One configuration's JSON object (design §5.2); the schedule is dropped after it.
json evaluate(const Selection& sel, const SimConfig& sc, const std::string& name, Schedule s,
              bool simulate_too, bool many) {
  const std::string label = config_label(name, s);
  check_cost_lists(sc, name, s);
  const ModelResult m = closed_form(model_input(name, s, sc));
  json j;
  j["schedule"] = name;
  j["P"] = s.P;
  j["M"] = s.M;
  j["v"] = s.v;
  // A CSV's lists are read below (the message count): they must be valid first.
  if (!simulate_too && is_csv(name)) validate_or_throw(s);
  if (simulate_too) {
    if (sc.links)
      for (const auto& [src, dst] : pipeline_pairs(s))
        if (!sc.links->covers(src, dst))
          throw ConfigError(label + ": --links " + sel.links + " has no fit for " +
                            std::to_string(src) + "->" + std::to_string(dst) +
                            " (calibrate with as many ranks, --pairs all)");
    SimConfig run_cfg = sc;
    run_cfg.record_events = !sel.timeline.empty();
    const double static_bytes = number(sel.static_bytes, "--static-bytes");
    const bool sizes = sc.act_bytes > 0 || sc.msg_bytes > 0 || static_bytes > 0;
    // The timeline and the memory model read the flat lists: they are kept only then.
    const SimResult r = run_cfg.record_events || sizes
                            ? validate_and_simulate(s, run_cfg, is_csv(name))
                            : validate_and_simulate(std::move(s), run_cfg, is_csv(name));
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
    if (!sel.timeline.empty())
      write_timeline(timeline_path(sel.timeline, name, s, many), s, r, sc, memory);
  } else {
    j.update(model_json(m));
    j["p2p_messages"] = p2p_messages(s);
    require_finite(j, label);
  }
  return j;
}

int cmd_sim_or_model(const Selection& sel, bool simulate_too) {
  check_P(sel);
  const SimConfig sc = sim_config(sel);
  const auto Ms = parse_int_list(sel.M, "-M");
  const auto vs = parse_int_list(sel.v, "-v");
  const bool many = sweep_combinations(sel.schedules, Ms, vs) > 1;
  if (many && !sel.timeline.empty())
    say_stderr("note", "--timeline " + sel.timeline + ": several configurations, one trace each: " +
                           timeline_pattern(sel.timeline));
  json out = json::array();
  // skip:/note: lines wait until every configuration is through: an error (e.g. a cost list
  // that does not fit a later configuration) is then the only line.
  std::vector<std::pair<std::string, std::string>> held;
  const SweepSay hold = [&](std::string_view kind, const std::string& line) {
    held.emplace_back(kind, line);
  };
  for_each_schedule(
      sel.schedules, generator_params(sel, &sc), Ms, vs, true,
      [&](const std::string& name, Schedule s) {
        csv_note(sel, name, s, hold);
        out.push_back(evaluate(sel, sc, name, std::move(s), simulate_too, many));
      },
      hold, simulate_too ? sc.steps : 1);
  for (const auto& [kind, line] : held) say_stderr(kind, line);
  const bool steady_first = sel.sync == "none";
  if (sel.format == "json") {
    // Names come from files and command lines: bytes that are not UTF-8 print as U+FFFD.
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return kExitOk;
  }
  const char* cols_sim[] = {"schedule",
                            "P",
                            "M",
                            "v",
                            "makespan",
                            "idle_total",
                            "bubble_fraction",
                            "bubble_time",
                            "period",
                            "bubble_fraction_steady",
                            "model_bubble_fraction",
                            "peak_act_rank0",
                            "p2p_messages"};
  const char* cols_model[] = {"schedule",
                              "P",
                              "M",
                              "v",
                              "makespan",
                              "bubble_fraction",
                              "bubble_ratio",
                              "bubble_time",
                              "period",
                              "bubble_fraction_steady",
                              "peak_act_rank0",
                              "formula"};
  std::vector<std::string> cols;
  if (simulate_too)
    cols.assign(std::begin(cols_sim), std::end(cols_sim));
  else
    cols.assign(std::begin(cols_model), std::end(cols_model));
  // CSV carries every digit; the table rounds what is not an integer.
  const auto num = [&](const json& x) {
    return sel.format == "csv" ? fmt_exact(x.get<double>()) : fmt(x.get<double>());
  };
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : out) {
    std::vector<std::string> row;
    const json& mm = simulate_too ? j["model"] : j;
    const bool ok = !mm.contains("applies") || mm["applies"].get<bool>();
    for (const auto& col : cols) {
      if (col == "schedule")
        row.push_back(j["schedule"].get<std::string>());
      else if (col == "formula")
        row.push_back(j["formula"].get<std::string>());
      else if (col == "model_bubble_fraction")
        row.push_back(
            j["model"]["applies"].get<bool>()
                ? num(j["model"][steady_first ? "bubble_fraction_steady" : "bubble_fraction"])
                : "n/a");
      else if (col == "peak_act_rank0")
        row.push_back(j["peak_activations"].empty() ? "n/a" : num(j["peak_activations"][0]));
      else if (!ok && !simulate_too && col != "P" && col != "M" && col != "v")
        row.push_back("n/a");
      else
        row.push_back(num(j[col]));
    }
    rows.push_back(std::move(row));
  }
  if (sel.format == "csv") {
    print_csv_row(std::cout, cols);
    for (const auto& row : rows) print_csv_row(std::cout, row);
    return kExitOk;
  }
  print_table(std::cout, cols, rows);
  for (const auto& j : out) {
    const json& mm = simulate_too ? j["model"] : j;
    if (!mm["applies"].get<bool>())
      std::cout << "note: " << j["schedule"].get<std::string>() << " M=" << j["M"]
                << " v=" << j["v"] << ": no closed form: " << mm["reason"].get<std::string>()
                << "\n";
  }
  return kExitOk;
}

// The one schedule of validate / show: --csv FILE, or one name with one M and one v.
Schedule load_one(const Selection& sel, const std::optional<std::string>& csv) {
  if (csv) {
    std::string note;
    Schedule s = load_csv_arg(*csv, &note);
    if (!note.empty()) say_stderr("note", note);
    return s;
  }
  check_P(sel);
  const auto names = parse_name_list(sel.schedules, "--schedule");
  if (names.size() != 1 || names[0] == "all")
    throw ConfigError("this command takes one schedule (got --schedule " + sel.schedules + ")");
  const auto Ms = parse_int_list(sel.M, "-M");
  const auto vs = parse_int_list(sel.v, "-v");
  if (Ms.size() != 1 || vs.size() != 1)
    throw ConfigError("this command takes one -M and one -v value, not a list");
  std::optional<Schedule> one;
  for_each_schedule(
      sel.schedules, generator_params(sel, nullptr), Ms, vs, false,
      [&](const std::string& name, Schedule s) {
        csv_note(sel, name, s, say_stderr);
        one = std::move(s);
      },
      say_stderr);
  return std::move(*one);
}

// A compute schedule is validated and lowered in periodic form (the flat lists where the
// periodic passes cannot tell, or with BB_FLAT_PASSES=1); a lowered one is dry-run as given.
int cmd_validate(const Selection& sel, const std::optional<std::string>& csv) {
  Schedule s = load_one(sel, csv);
  const auto report = [&](const Schedule& flat) {
    const ValidationReport rep = validate(flat);
    if (!rep.ok()) std::cout << rep.describe(flat);
    return rep.ok();
  };
  const std::string label = s.name + " P=" + std::to_string(s.P) + " M=" + std::to_string(s.M) +
                            " v=" + std::to_string(s.v);
  std::size_t compute = 0, total = 0;
  if (s.lowered) {
    if (!report(s)) return kExitCheckFailed;
    DryRunResult dr = dry_run(s);
    if (!dr.ok) {
      std::cout << "schedule '" << s.name << "' fails its dry run:\n" << dr.message;
      return kExitCheckFailed;
    }
    compute = s.compute_size();
    total = s.size();
  } else if (flat_passes_forced()) {
    if (!report(s)) return kExitCheckFailed;
    compute = s.compute_size();
    s = lower(std::move(s));
    total = s.size();
  } else {
    PeriodicSchedule ps = to_periodic(std::move(s));
    if (!surely_valid(ps) && !report(to_flat(ps))) return kExitCheckFailed;
    compute = ps.compute_size();
    ps = lower(ps);
    total = ps.size();
  }
  std::cout << "ok: " << label << ": " << compute << " compute actions, " << (total - compute)
            << " send/recv actions; dry run without deadlock\n";
  return kExitOk;
}

int cmd_show(const Selection& sel, const std::optional<std::string>& csv, bool lowered,
             const std::string& format, const std::string& partition) {
  if (lowered && format == "pytorch-csv")
    throw ConfigError(
        "--format pytorch-csv holds compute actions only (PyTorch adds its own communication): "
        "drop --lowered");
  Schedule s = load_one(sel, csv);
  validate_or_throw(s);
  const std::string layout = partition.empty() ? "" : partition_report(s, partition);
  if (lowered && !s.lowered) s = lower_by_periodic_form(std::move(s));
  if (format == "csv") {
    dump_csv(s, std::cout);
  } else if (format == "pytorch-csv") {
    dump_pytorch_csv(s, std::cout);
  } else if (format == "grid") {
    std::cout << format_grid(s, -1, 0, static_cast<std::size_t>(-1));
  } else {
    std::cout << "# " << s.name << " P=" << s.P << " M=" << s.M << " v=" << s.v
              << " placement=" << placement_name(s) << (s.lowered ? " (lowered)" : "") << "\n";
    std::cout << layout;
    for (int r = 0; r < s.P; ++r)
      std::cout << "rank " << r << ": " << format_actions(s.ranks[r]) << "\n";
  }
  return kExitOk;
}

int commands(int argc, char** argv) {
  CLI::App app{"bubblebench: pipeline-parallel schedules, simulated, modelled and run end to end"};
  app.require_subcommand(1);
  // A flag given twice takes its last value (so a job's extra arguments can override a line's).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version",
                       std::string("bubblebench ") + BB_VERSION + " (" + build_git_sha() + ")");

  Selection sim_sel, model_sel, val_sel, show_sel;
  auto* sim =
      app.add_subcommand("sim", "Timed simulation of schedules (with the closed forms beside)");
  add_selection(sim, sim_sel, true, true);
  sim->add_option("--timeline", sim_sel.timeline, "Write a Chrome-trace JSON of the simulated step")
      ->check(kFileName);
  sim->add_option("--links", sim_sel.links,
                  "Per-pair message costs fitted by `calibrate` (its --out HDF5 or --json "
                  "output), in seconds: give --t-f/--t-b/--t-w and --msg-bytes to match")
      ->check(kFileName);
  auto* model = app.add_subcommand("model", "Closed-form bubble models only");
  add_selection(model, model_sel, true, true);
  std::string val_csv, show_csv, show_format = "text", show_partition;
  bool show_lowered = false;
  auto* val = app.add_subcommand("validate", "Validate a schedule and dry-run its lowering");
  add_selection(val, val_sel, false, false);
  auto* val_csv_opt =
      val->add_option("--csv", val_csv, "Validate a schedule CSV instead")->check(kFileName);
  auto* show = app.add_subcommand("show", "Print a schedule's action lists per rank");
  add_selection(show, show_sel, false, false);
  auto* show_csv_opt =
      show->add_option("--csv", show_csv, "Show a schedule CSV instead")->check(kFileName);
  show->add_flag("--lowered", show_lowered, "Insert the SEND/RECV actions");
  show->add_option("--partition", show_partition,
                   "Blocks per stage along the route (3,2) or a Megatron-LM layout string "
                   "(Et*3|t*2,L): printed both ways with the chunks and ranks of each stage");
  add_choice(*show, "--format", show_format,
             "text, grid, csv (bubblebench's CSV) or pytorch-csv (PyTorch's pipelining "
             "CSV, compute actions only; docs/csv.md)",
             {"text", "grid", "csv", "pytorch-csv"});
  std::string list_format = "text";
  auto* lst = app.add_subcommand(
      "list", "The built-in schedules: placement, chunks per rank, backward, what each accepts");
  add_choice(*lst, "--format", list_format,
             "text, markdown (also the closed forms: docs/schedules.md's table) or json (every "
             "fact)",
             {"text", "markdown", "json"});
  // `run` and `calibrate` are dispatched before this parser (cli_main); listed for --help.
  app.add_subcommand("run",
                     "Every schedule end to end over MPI: mpiexec -n P bubblebench run ... "
                     "(see bubblebench run --help)");
  app.add_subcommand("advise",
                     "Rank schedule, M, v and recompute by simulated time under a memory cap; "
                     "--verify K runs the top K under mpiexec (see bubblebench advise --help)");
  app.add_subcommand("calibrate",
                     "Message time per rank pair and size, fitted alpha + bytes/beta: mpiexec -n "
                     "P bubblebench calibrate ... (see bubblebench calibrate --help)");
  const auto known = [&](const std::string& name) {
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == name) return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !known(argv[1])) {
    std::cerr
        << "bubblebench: error: unknown command '" << argv[1]
        << "' (commands: sim, model, validate, show, list, run, calibrate, advise; see --help)\n";
    return kExitConfig;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "bubblebench: error: " << e.what() << " (see --help)\n";
    return kExitConfig;
  }
  try {
    if (*sim) return cmd_sim_or_model(sim_sel, true);
    if (*model) return cmd_sim_or_model(model_sel, false);
    const auto given = [](const CLI::Option* opt, const std::string& value) {
      return opt->count() ? std::optional<std::string>(value) : std::nullopt;
    };
    if (*val) return cmd_validate(val_sel, given(val_csv_opt, val_csv));
    if (*show)
      return cmd_show(show_sel, given(show_csv_opt, show_csv), show_lowered, show_format,
                      show_partition);
    if (*lst) {
      std::cout << (list_format == "json"       ? schedules_json()
                    : list_format == "markdown" ? schedules_markdown()
                                                : schedules_text());
      return kExitOk;
    }
  } catch (const ConfigError& e) {
    std::cerr << "bubblebench: error: " << e.what() << "\n";
    return kExitConfig;
  } catch (const ScheduleError& e) {
    std::cerr << "bubblebench: invalid schedule: " << e.what() << "\n";
    return kExitCheckFailed;
  } catch (const IoError& e) {
    std::cerr << "bubblebench: I/O error: " << e.what() << "\n";
    return kExitIo;
  } catch (const std::bad_alloc&) {
    std::cerr << "bubblebench: error: out of memory for this configuration\n";
    return kExitConfig;
  } catch (const std::exception& e) {
    std::cerr << "bubblebench: internal error: " << e.what() << "\n";
    return kExitCheckFailed;
  }
  return kExitConfig;
}

}  // namespace

int cli_main(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  // A closed pipe (`bubblebench show --lowered | head -1`) is an I/O error, exit 4 with one
  // line (below), not death by SIGPIPE (141). Not for the MPI commands: MPI owns signals.
  if (first != "run" && first != "calibrate") std::signal(SIGPIPE, SIG_IGN);
  const int code = first == "run"         ? run_main(argc, argv)
                   : first == "calibrate" ? calibrate_main(argc, argv)
                   : first == "advise"    ? advise_main(argc, argv)
                                          : commands(argc, argv);
  // Whatever the command printed must have reached standard output (a full disk, a closed
  // pipe): otherwise the results are lost, and that is an I/O error.
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && std::cout && !std::ferror(stdout)) return code;
  std::cerr << "bubblebench: I/O error: cannot write standard output"
            << (err ? std::string(" (") + std::strerror(err) + ")" : std::string()) << "\n";
  return kExitIo;
}

}  // namespace bb
